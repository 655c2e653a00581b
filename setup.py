"""Build tensorplay: cythonize generated/ (the public modules) and runtime/ (the core).

The package is assembled in build/package/ before cythonizing:
    generated/tensorplay/**  ->  tensorplay/**            wrappers, stubs, py.typed
    runtime/*                ->  tensorplay/_runtime/*    handwritten core
so that `cimport tensorplay._runtime.device` resolves exactly as the installed module names.
"""
import os
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
STAGE = ROOT / "build" / "package"

# Headers that cimporting cyruntime, cydriver and cynvrtc pulls into the generated C++
# (docs/design.md, "Building against CUDA headers"); crt/host_defines.h is the one the runtime
# wheel lacks, and nvrtc.h comes from the NVRTC wheel where the toolkit lacks it.
REQUIRED_HEADERS = ("cuda_runtime_api.h", "driver_types.h", "vector_types.h",
                    "crt/host_defines.h", "cuda.h", "cudaProfiler.h", "nvrtc.h")


def cuda_include_dirs():
    """Directories holding every required CUDA header, or a SystemExit naming what is missing."""
    candidates = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(Path(os.environ[variable]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        from cuda import pathfinder
        for name in ("cudart", "nvrtc"):
            found = pathfinder.find_nvidia_header_directory(name)
            if found:
                candidates.append(Path(found))
    except (ImportError, AttributeError, RuntimeError):
        pass  # older cuda-pathfinder: the fixed locations above still apply
    for site in sys.path:
        candidates.append(Path(site) / "nvidia" / "cu13" / "include")
    existing = [c for c in dict.fromkeys(candidates) if c.is_dir()]
    for directory in existing:
        if all((directory / header).is_file() for header in REQUIRED_HEADERS):
            return [str(directory)], str(directory)
    # No single complete directory: a union of the wheels (runtime + crt) also works.
    chosen = []
    for header in REQUIRED_HEADERS:
        holder = next((d for d in existing if (d / header).is_file()), None)
        if holder is None:
            searched = ", ".join(str(c) for c in dict.fromkeys(candidates)) or "nothing"
            raise SystemExit(
                f"tensorplay build: CUDA header '{header}' not found (searched: {searched}). "
                "Install the CUDA toolkit and set CUDA_HOME, or install the header wheels: "
                "pip install 'nvidia-cuda-runtime==13.*' 'nvidia-cuda-crt==13.*'")
        if str(holder) not in chosen:
            chosen.append(str(holder))
    return chosen, os.pathsep.join(chosen)


def stage_package():
    """Copy the sources into the package layout Cython and setuptools expect."""
    # Start from nothing: stale modules from an earlier layout must not reach the wheel.
    if STAGE.parent.exists():
        shutil.rmtree(STAGE.parent)
    shutil.copytree(ROOT / "generated" / "tensorplay", STAGE / "tensorplay")
    runtime = STAGE / "tensorplay" / "_runtime"
    runtime.mkdir()
    for source in (ROOT / "runtime").iterdir():
        if source.suffix in (".pyx", ".pxd", ".py"):
            shutil.copy2(source, runtime / source.name)
    # Kernel sources ship as data: NVRTC compiles them at run time (runtime/kernels.pyx).
    shutil.copytree(ROOT / "runtime" / "kernels", runtime / "kernels")


def module_name(path):
    parts = list(path.relative_to(STAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class BuildExt(build_ext):
    """Put a compiled package module at PACKAGE/__init__.<suffix>.

    The extension is named after the package ("tensorplay.accelerator") so Cython gives its
    classes that module name; only the file goes inside the package directory, where the
    import system finds it as the package itself.
    """

    def get_ext_fullpath(self, ext_name):
        path = super().get_ext_fullpath(ext_name)
        source = next(e.sources[0] for e in self.extensions if e.name == ext_name)
        if Path(source).stem != "__init__":
            return path
        directory = os.path.dirname(path)
        package = ext_name.rsplit(".", 1)[-1]
        return os.path.join(directory, package, "__init__" + sysconfig.get_config_var("EXT_SUFFIX"))


def build_info(include_dirs):
    from Cython import __version__ as cython_version
    try:
        from cuda.bindings import __version__ as bindings_version
    except ImportError:
        bindings_version = "unknown"
    return (
        '"""How this copy of tensorplay was built (written by setup.py)."""\n'
        f"CUDA_INCLUDE_DIRS = {include_dirs!r}\n"
        f"CUDA_BINDINGS_VERSION = {bindings_version!r}\n"
        f"CYTHON_VERSION = {cython_version!r}\n"
    )


def extensions():
    from Cython.Build import cythonize

    stage_package()
    include_dirs, include_text = cuda_include_dirs()
    (STAGE / "tensorplay" / "_build_info.py").write_text(build_info(include_text))
    modules = [
        Extension(module_name(pyx), [str(pyx.relative_to(ROOT))], include_dirs=include_dirs,
                  language="c++", extra_compile_args=["-O2", "-std=c++17"])
        for pyx in sorted(STAGE.rglob("*.pyx"))
    ]
    return cythonize(
        modules,
        include_path=[str(STAGE)],
        compiler_directives={"language_level": 3, "binding": True, "embedsignature": True},
        nthreads=os.cpu_count() or 1,
        quiet=True,
    )


def packages():
    return sorted(module_name(init) for init in STAGE.rglob("__init__.py*"))


ext_modules = extensions()
setup(
    ext_modules=ext_modules,
    packages=packages(),
    package_dir={"": str(STAGE.relative_to(ROOT))},
    # Stubs and the PEP 561 marker travel beside the compiled modules.
    package_data={"": ["*.pyi", "py.typed"], "tensorplay._runtime": ["kernels/*.cu"]},
    cmdclass={"build_ext": BuildExt},
    zip_safe=False,
)
