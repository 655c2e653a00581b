"""setup.py finds every CUDA header the build needs, and the header wheels it names are the
build requirements pyproject.toml declares (docs/design.md, "Building against CUDA headers").
setup.py runs its build only as __main__, so importing it here only reads its tables."""
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("tensorplay_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_requirements():
    if sys.version_info >= (3, 11):
        import tomllib
        with open(ROOT / "pyproject.toml", "rb") as file:
            return tomllib.load(file)["build-system"]["requires"]
    pytest.skip("tomllib needs Python 3.11")


def test_every_header_the_bindings_need_is_checked(build):
    for header in ("cuda_runtime_api.h", "driver_types.h", "vector_types.h", "crt/host_defines.h",
                   "cuda.h", "cudaProfiler.h", "nvrtc.h", "library_types.h", "cuComplex.h"):
        assert header in build.REQUIRED_HEADERS


def test_the_header_wheels_are_build_requirements(build):
    requirements = build_requirements()
    for wheel in set(build.HEADER_WHEELS.values()):
        matching = [r for r in requirements if r.split(">")[0].split("<")[0].split("=")[0] == wheel]
        assert matching, f"{wheel} is not in [build-system] requires"
        assert build.HEADER_WHEEL_VERSIONS[wheel] == matching[0][len(wheel):].replace(" ", "")


def test_a_missing_header_message_names_every_header_and_the_command(build):
    missing = list(build.REQUIRED_HEADERS)
    message = build.missing_headers_message(missing, [Path("/nonexistent/include")])
    for header in missing:
        assert header in message
    for wheel in set(build.HEADER_WHEELS.values()):
        assert f"'{wheel}{build.HEADER_WHEEL_VERSIONS[wheel]}'" in message
    assert "python -m pip install" in message and "--no-build-isolation" in message


def test_cuda_home_with_every_header_is_chosen(build, tmp_path, monkeypatch):
    for header in build.REQUIRED_HEADERS:
        (tmp_path / "include" / header).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "include" / header).write_text("")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    build.find_cuda_headers.cache_clear()
    try:
        found = build.find_cuda_headers()
    finally:
        build.find_cuda_headers.cache_clear()
    assert set(found.values()) == {tmp_path / "include"}


def test_headers_missing_everywhere_stop_the_build_naming_them(build, tmp_path, monkeypatch):
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda.h").write_text("")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(build.sys, "path", [])
    monkeypatch.setattr(build, "Path", _HidingPath)
    try:
        from cuda import pathfinder
    except ImportError:
        pass
    else:  # it would find the header wheels the dev extra installs
        monkeypatch.setattr(pathfinder, "find_nvidia_header_directory", lambda name: None)
    build.find_cuda_headers.cache_clear()
    try:
        with pytest.raises(SystemExit) as stopped:
            build.find_cuda_headers()
    finally:
        build.find_cuda_headers.cache_clear()
    text = str(stopped.value)
    assert text.startswith("tensorplay build: 8 CUDA header(s) not found")
    assert "crt/host_defines.h" in text and "cudaProfiler.h" in text and "nvrtc.h" in text


class _HidingPath(type(Path())):
    """A Path under which /usr/local/cuda does not exist (whatever this machine has)."""

    def is_dir(self):
        return not str(self).startswith("/usr/local/cuda") and super().is_dir()

    def is_file(self):
        return not str(self).startswith("/usr/local/cuda") and super().is_file()
