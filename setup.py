"""Build tensorplay: cythonize generated/ (the public modules) and runtime/ (the core).

The package is assembled in build/package/ before cythonizing:
    generated/tensorplay/**  ->  tensorplay/**            wrappers, stubs, py.typed
    runtime/*                ->  tensorplay/_runtime/*    handwritten core
so that `cimport tensorplay._runtime.devices.device` resolves exactly as the installed names.

Note [Incremental build]
A fresh build cythonizes every module once and compiles it, with one Cython process and one
compiler per CPU, each module compiled as soon as its C++ is ready (BuildExt.build_extensions).
Cythonizing waits for build_ext instead of happening when setup.py is loaded, because pip loads
setup.py more than once per install (for the build requirements and the metadata too). pip builds in the source tree, so build/ survives between installs, and a
rebuild redoes only what a change reaches:
- staging copies a source only when its bytes differ from the staged copy, so an unchanged
  source keeps its old modification time and a changed one becomes newer than its outputs;
- cythonize regenerates a .cpp only when its .pyx, or a .pxd it cimports, is newer than it.
  Cython's own scan misses the form `from tensorplay._runtime cimport stream`, which is how
  the modules cimport each other, so staging also removes every .cpp that is older than a
  .pxd its module reaches through cimports (stale_cpp_files), and cythonize remakes it;
- build_ext recompiles a module only when its .cpp is newer than the built module.
Staged files whose source is gone are deleted, with their .cpp, and build/lib* is pruned of
every file the current build does not produce, so a removed module never reaches the wheel.
A change of compiler, flags, Cython or CUDA headers is not tracked: remove build/ then.
"""
import filecmp
import functools
import os
import re
import shutil
import sys
import sysconfig
import time
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STAGE = ROOT / "build" / "package"
BUILD_INFO = STAGE / "tensorplay" / "_build_info.py"
CYTHON_DIRECTIVES = {"language_level": 3, "binding": True, "embedsignature": True}

# Headers that cimporting cyruntime, cydriver and cynvrtc pulls into the generated C++, and
# the ones the matrix-multiply bindings will (library_types.h, cuComplex.h), each with the
# NVIDIA wheel that ships it (docs/design.md, "Building against CUDA headers"). The wheels are
# build requirements in pyproject.toml, so an isolated build needs no toolkit; a build without
# isolation that finds none of these is told every missing header and wheel at once.
HEADER_WHEELS = {
    "cuda_runtime_api.h": "nvidia-cuda-runtime",
    "driver_types.h": "nvidia-cuda-runtime",
    "vector_types.h": "nvidia-cuda-runtime",
    "library_types.h": "nvidia-cuda-runtime",
    "cuComplex.h": "nvidia-cuda-runtime",
    "cuda.h": "nvidia-cuda-runtime",
    "crt/host_defines.h": "nvidia-cuda-crt",
    "cudaProfiler.h": "nvidia-cuda-profiler-api",
    "nvrtc.h": "nvidia-cuda-nvrtc",
}
REQUIRED_HEADERS = tuple(HEADER_WHEELS)


def header_wheel_versions():
    """{wheel: version specifier} of the header wheels as pyproject.toml's [build-system]
    requires them (read as text: tomllib is not in Python 3.10), so the message that names them
    cannot drift from the requirements."""
    try:
        text = (ROOT / "pyproject.toml").read_text()
    except OSError:
        return {}
    build_system = text.split("[build-system]", 1)[-1].split("\n[", 1)[0]
    return {name: spec.replace(" ", "") for name, spec in
            re.findall(r'"(nvidia-[A-Za-z0-9-]+)\s*([^";]*)', build_system)}


HEADER_WHEEL_VERSIONS = header_wheel_versions()


@functools.cache
def find_cuda_headers():
    """{header: directory holding it} for every required header, or a SystemExit naming every
    missing one. One directory that holds them all is preferred to a union of several.

    The order: a toolkit named by CUDA_HOME or CUDA_PATH (the user's explicit choice), then
    NVIDIA's header wheels on sys.path (the build requirements, pinned to the CUDA line of
    cuda-bindings, so an isolated build always finds them), then cuda-pathfinder's answer and
    the toolkit at /usr/local/cuda, which may be of another CUDA version than cuda-bindings
    expects and is used only where the wheels are not installed (a build without isolation)."""
    candidates = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            candidates.append(Path(os.environ[variable]) / "include")
    for site in sys.path:
        candidates.append(Path(site or ".") / "nvidia" / "cu13" / "include")
    try:
        from cuda import pathfinder
        for name in ("cudart", "nvrtc"):
            found = pathfinder.find_nvidia_header_directory(name)
            if found:
                candidates.append(Path(found))
    except (ImportError, AttributeError, RuntimeError):
        pass  # older cuda-pathfinder: the fixed locations apply
    candidates.append(Path("/usr/local/cuda/include"))
    existing = [c for c in dict.fromkeys(candidates) if c.is_dir()]
    for directory in existing:
        if all((directory / header).is_file() for header in REQUIRED_HEADERS):
            return {header: directory for header in REQUIRED_HEADERS}
    # No single complete directory: a union of the wheels (runtime + crt + ...) also works.
    holders = {}
    for header in REQUIRED_HEADERS:
        holder = next((d for d in existing if (d / header).is_file()), None)
        if holder is not None:
            holders[header] = holder
    missing = [header for header in REQUIRED_HEADERS if header not in holders]
    if missing:
        raise SystemExit(missing_headers_message(missing, candidates))
    return holders


def missing_headers_message(missing, candidates):
    """Every missing header, the wheels that ship them and the one command that installs them."""
    wheels = list(dict.fromkeys(HEADER_WHEELS[header] for header in missing))
    requirements = " ".join(f"'{wheel}{HEADER_WHEEL_VERSIONS.get(wheel, '')}'" for wheel in wheels)
    listed = "; ".join(
        f"{', '.join(h for h in missing if HEADER_WHEELS[h] == wheel)} (in {wheel})"
        for wheel in wheels)
    found = ", ".join(str(c) for c in dict.fromkeys(candidates) if c.is_dir()) or "none"
    homes = ", ".join(f"{v}={os.environ[v]}" if os.environ.get(v) else f"{v} unset"
                      for v in ("CUDA_HOME", "CUDA_PATH"))
    return (
        f"tensorplay build: {len(missing)} CUDA header(s) not found: {listed}. "
        f"Searched {homes}, nvidia/cu13/include under every sys.path entry, cuda-pathfinder "
        f"and /usr/local/cuda/include; of those, these directories exist: {found}. "
        "`pip install .` installs the header wheels into its isolated build environment by "
        "itself; for a build without isolation (--no-build-isolation), install them first: "
        f"python -m pip install {requirements} "
        "(or install a CUDA 13 toolkit and set CUDA_HOME).\n")


def header_origin(directory, headers):
    """Where a header directory comes from, in words that stay true after the build.

    pip deletes an isolated build environment, and with it the header wheels installed there,
    so a wheel is named by its distribution and version rather than by its path. A toolkit is
    named by its resolved path and its version. The wheel is looked for beside the header
    itself, not on sys.path, which need not list the site directory the header came from.
    """
    from importlib.metadata import distributions

    sample = (directory / headers[0]).resolve()
    for site in sample.parents:
        for distribution in distributions(path=[str(site)]):
            name = distribution.metadata["Name"] or ""
            if not name.lower().startswith("nvidia"):
                continue
            relative = sample.relative_to(site).as_posix()
            if any(str(entry) == relative for entry in distribution.files or ()):
                return f"{name} {distribution.version} (wheel)"
    if (directory / "cuda.h").is_file():
        root = directory.resolve().parent
        return f"CUDA toolkit {toolkit_version(root) or '(version unknown)'} at {root}"
    return str(directory.resolve())


def toolkit_version(root):
    """A toolkit's full version from version.json, else major.minor from its cuda.h."""
    import json
    try:
        return json.loads((root / "version.json").read_text())["cuda"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return cuda_h_version(root / "include")


def cuda_h_version(include_dir):
    """The CUDA major.minor that include_dir/cuda.h declares (CUDA_VERSION 13000 -> '13.0')."""
    try:
        text = (include_dir / "cuda.h").read_text(errors="replace")
    except OSError:
        return None
    match = re.search(r"^#define CUDA_VERSION (\d+)", text, re.MULTILINE)
    if not match:
        return None
    number = int(match.group(1))
    return f"{number // 1000}.{number % 1000 // 10}"


def build_info(holders):
    """The text of tensorplay/_build_info.py: what this build used, for python -m tensorplay."""
    from Cython import __version__ as cython_version
    try:
        from cuda.bindings import __version__ as bindings_version
    except ImportError:
        bindings_version = "unknown"
    by_directory = {}
    for header, directory in holders.items():
        by_directory.setdefault(directory, []).append(header)
    # The directory with cuda.h is named alone; any other one with the headers it supplied.
    sources = []
    for directory, headers in by_directory.items():
        origin = header_origin(directory, headers)
        sources.append(origin if "cuda.h" in headers else f"{', '.join(headers)} from {origin}")
    return (
        '"""How this copy of tensorplay was built (written by setup.py)."""\n'
        f"CUDA_HEADERS_VERSION = {cuda_h_version(holders['cuda.h'])!r}\n"
        f"CUDA_HEADERS_FROM = {tuple(sources)!r}\n"
        f"CUDA_BINDINGS_VERSION = {bindings_version!r}\n"
        f"CYTHON_VERSION = {cython_version!r}\n"
    )


def staged_sources():
    """{path in the staging tree: source path} for every file the package is built from."""
    wanted = {}
    generated = ROOT / "generated" / "tensorplay"
    for source in generated.rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            wanted[STAGE / "tensorplay" / source.relative_to(generated)] = source
    # runtime/ is a package of subpackages by concept; its kernel sources (runtime/kernels/*.cu)
    # ship as data, which NVRTC compiles at run time (runtime/kernels/nvrtc.pyx).
    runtime = STAGE / "tensorplay" / "_runtime"
    for source in (ROOT / "runtime").rglob("*"):
        if source.is_file() and source.suffix in (".pyx", ".pxd", ".py", ".cu"):
            wanted[runtime / source.relative_to(ROOT / "runtime")] = source
    # python/ is the layer above the generated package: handwritten Python that uses the public
    # API (docs/design.md, "Layers").
    python = STAGE / "tensorplay" / "_python"
    for source in (ROOT / "python").rglob("*.py"):
        wanted[python / source.relative_to(ROOT / "python")] = source
    return wanted


def stage_package():
    """Bring build/package/ up to date with the sources (Note [Incremental build])."""
    wanted = staged_sources()
    keep = set(wanted) | {path.with_suffix(".cpp") for path in wanted if path.suffix == ".pyx"}
    keep.add(BUILD_INFO)
    if STAGE.exists():
        # Children sort after their parents, so reversed order empties a directory first.
        for path in sorted(STAGE.rglob("*"), reverse=True):
            if path.relative_to(STAGE).parts[0].endswith(".egg-info"):
                continue  # setuptools' metadata, rewritten by every build
            if path.is_dir():
                if not any(path.iterdir()):
                    path.rmdir()
            elif path not in keep:
                path.unlink()
    for target, source in wanted.items():
        if not (target.is_file() and filecmp.cmp(source, target, shallow=False)):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    for cpp in list(stale_cpp_files()):
        cpp.unlink()


CIMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(tensorplay(?:\.\w+)*)[ \t]+cimport[ \t]+"
    r"(?:\(([\w\s,]+)\)|([\w \t,]+))|cimport[ \t]+(tensorplay(?:\.\w+)+))", re.MULTILINE)


def package_cimports(path):
    """The staged .pxd files of this package (runtime core, generated bases) that path cimports
    directly."""
    found = set()
    for package, bracketed, imported, dotted in CIMPORT.findall(path.read_text()):
        if dotted:  # cimport tensorplay._bases as _bases
            candidates = [dotted]
        else:  # from tensorplay._runtime cimport a, b as c (modules or names of one)
            names = [part.split()[0] for part in (bracketed or imported).split(",") if part.strip()]
            candidates = [package] + [f"{package}.{name}" for name in names]
        found |= {STAGE.joinpath(*name.split(".")).with_suffix(".pxd") for name in candidates}
    return {pxd for pxd in found if pxd.is_file()}


def stale_cpp_files():
    """Generated C++ older than a .pxd its module reaches through cimports."""
    reached = {}

    def reach(path):
        if path not in reached:
            reached[path] = set()
            for pxd in package_cimports(path):
                reached[path] |= {pxd} | reach(pxd)
        return reached[path]

    for pyx in STAGE.rglob("*.pyx"):
        cpp = pyx.with_suffix(".cpp")
        own = pyx.with_suffix(".pxd")
        dependencies = reach(pyx) | (reach(own) | {own} if own.is_file() else set())
        if cpp.is_file() and any(d.stat().st_mtime > cpp.stat().st_mtime for d in dependencies):
            yield cpp


def write_if_changed(path, text):
    if not (path.is_file() and path.read_text() == text):
        path.write_text(text)


def module_name(path):
    parts = list(path.relative_to(STAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# What a cythonizing worker evaluates: (start, cythonize's result, end), the times taken in the
# worker itself (perf_counter is one monotonic clock for every process). An expression given to
# the builtin eval, because a function defined in setup.py cannot be sent to a worker process
# (pip runs setup.py through exec, so its functions belong to no importable module).
TIMED_CYTHONIZE = ("(__import__('time').perf_counter(),"
                   " __import__('Cython.Build', fromlist=['cythonize'])"
                   ".cythonize([ext], **options),"
                   " __import__('time').perf_counter())")


def write_build_times(times, wall_seconds, workers):
    """Write the per-module timings where TENSORPLAY_BUILD_TIMES says, if it says."""
    target = os.environ.get("TENSORPLAY_BUILD_TIMES")
    if not target:
        return
    import json
    report = {"build_ext_wall_s": round(wall_seconds, 3), "workers": workers, "modules": times,
              "cythonize_total_s": round(sum(t.get("cythonize_s", 0) for t in times.values()), 3),
              "compile_total_s": round(sum(t.get("compile_s", 0) for t in times.values()), 3)}
    Path(target).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")


def usable_cpus():
    """The CPUs this process may run on (a container's share, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class BuildPy(build_py):
    """Write tensorplay/_build_info.py before the Python modules are copied."""

    def run(self):
        write_if_changed(BUILD_INFO, build_info(find_cuda_headers()))
        super().run()


class BuildExt(build_ext):
    """Cythonize and compile in parallel (Note [Incremental build]); and put a compiled package
    module at PACKAGE/__init__.<suffix>.

    A package's extension is named after the package ("tensorplay.accelerator") so Cython gives
    its classes that module name; only the file goes inside the package directory, where the
    import system finds it as the package itself.
    """

    def finalize_options(self):
        super().finalize_options()
        # pip offers no way to pass -j, so the build uses every CPU unless told otherwise.
        if not self.parallel:
            self.parallel = usable_cpus()

    def run(self):
        if not self.inplace:
            self.prune_build_lib()
        super().run()

    def build_extensions(self):
        """Cythonize each module in a worker process and compile it, in a worker thread (the
        compiler is a subprocess), as soon as its C++ is ready: cythonizing the next modules
        overlaps with compiling the first, and no CPU waits for a whole phase to end.

        With TENSORPLAY_BUILD_TIMES=PATH, the seconds each module took to cythonize and to
        compile (and its flags) are written to PATH as JSON (tools/measure_setup.py reads it)."""
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed

        self.check_extensions_list(self.extensions)
        include_dirs = [str(d) for d in dict.fromkeys(find_cuda_headers().values())]
        workers = usable_cpus() if self.parallel is True else self.parallel
        # Largest first, so that no CPU sits idle at the end waiting for one long job.
        order = sorted(self.extensions, key=lambda ext: -os.path.getsize(ext.sources[0]))
        times = {ext.name: {"flags": " ".join(ext.extra_compile_args)} for ext in order}
        started = time.perf_counter()
        with ProcessPoolExecutor(workers) as cython, ThreadPoolExecutor(workers) as compilers:
            cythonizing = {
                cython.submit(eval, TIMED_CYTHONIZE, {
                    "ext": Extension(ext.name, ext.sources, language="c++"),
                    "options": {"include_path": [str(STAGE)], "quiet": True,
                                "compiler_directives": CYTHON_DIRECTIVES}}): ext
                for ext in order
            }
            compiling = []
            for done in as_completed(cythonizing):
                ext = cythonizing[done]
                begun, (cythonized,), ended = done.result()
                times[ext.name]["cythonize_s"] = round(ended - begun, 3)
                ext.sources = cythonized.sources
                ext.include_dirs = include_dirs
                compiling.append(compilers.submit(self.timed_build_extension, ext, times))
            for build in compiling:
                build.result()
        write_build_times(times, time.perf_counter() - started, workers)

    def timed_build_extension(self, ext, times):
        begun = time.perf_counter()
        self.build_extension(ext)
        times[ext.name]["compile_s"] = round(time.perf_counter() - begun, 3)

    def prune_build_lib(self):
        """Delete from build/lib* every file this build does not produce (a module whose source
        was removed, say), so that only current modules reach the wheel."""
        produced = {os.path.abspath(self.get_ext_fullpath(ext.name)) for ext in self.extensions}
        build_py = self.get_finalized_command("build_py")
        produced.update(os.path.abspath(path) for path in build_py.get_outputs(include_bytecode=0))
        package_dir = Path(self.build_lib) / "tensorplay"
        if package_dir.is_dir():
            for path in package_dir.rglob("*"):
                if path.is_file() and os.path.abspath(path) not in produced:
                    path.unlink()

    def get_ext_fullpath(self, ext_name):
        path = super().get_ext_fullpath(ext_name)
        source = next(e.sources[0] for e in self.extensions if e.name == ext_name)
        if Path(source).stem != "__init__":
            return path
        directory = os.path.dirname(path)
        package = ext_name.rsplit(".", 1)[-1]
        return os.path.join(directory, package, "__init__" + sysconfig.get_config_var("EXT_SUFFIX"))


# Note [Optimisation per module]
# Compiling is most of a fresh build (cythonizing about a quarter), and -O2 costs about 1.5x the
# compile time of -O1. The modules on the hot paths (allocation, memory queries, stream switches,
# kernel launch, graph replay, tensor operations: the calls bench/bench_hot_path.py times, and
# the generated wrappers in front of them) keep -O2. The modules below are called once per
# model, capture or backward pass, where the time goes to Python objects and CUDA calls rather
# than to the C code, and get -O1; a new module gets -O2 until it is listed here.
COLD_MODULES = {
    "tensorplay._runtime.autograd.engine",      # backward passes: one Node call per operation
    "tensorplay._runtime.autograd.formulas",    # ... and each Node's gradient
    "tensorplay._runtime.autograd.tape",        # recording a Node (Python objects throughout)
    "tensorplay._runtime.graphs.graph_update",  # node records, update from a recapture
    "tensorplay._runtime.graphs.node_params",   # kernel node parameters and their checks
    "tensorplay._runtime.graphs.rebinding",     # rebinding checks
    "tensorplay._runtime.graphs.graph_topology",
    "tensorplay._runtime.graphs.capture",       # beginning and ending captures
    "tensorplay._runtime.graphs.conditional",   # building conditional nodes
    "tensorplay._runtime.graphs.contexts",      # graph() and recapture() blocks, pool handles
    "tensorplay._runtime.graphs.dot",           # DOT export
    "tensorplay._runtime.devices.captures",     # capture bookkeeping
    "tensorplay._runtime.memory.pools",         # private pools: retained and routed per capture
    "tensorplay._runtime.tensor.interop",       # DLPack and __cuda_array_interface__ imports
    "tensorplay._runtime.autograd.nn",          # Module bookkeeping (Python classes)
    "tensorplay._runtime.autograd.optim",
    "tensorplay._runtime.autograd.lr_scheduler",  # schedulers: Python arithmetic per epoch
    "tensorplay._runtime.autograd.swa",         # weight averaging: once per epoch or step
    "tensorplay._runtime.base.public",
    "tensorplay.autograd",
    "tensorplay.nn",
    "tensorplay.optim",
    "tensorplay.optim.lr_scheduler",
    "tensorplay.optim.swa_utils",
    "tensorplay.accelerator.random",            # seeding and generator state
}
# Debug info (-g in Python's CFLAGS) costs a quarter of the compile time and is not shipped.
# -fno-plt calls the Python C API and the other shared libraries through the GOT directly,
# without a PLT stub per call, and -fno-semantic-interposition lets the compiler call and
# inline a module's own functions directly (GCC's manual, "Code Gen Options"; Clang takes
# both). The hot paths call the C API between driver calls, and under graph capture the driver
# pays for every cache line the host code between its calls touches: 1024 `x += 1` under
# capture took about 5% less host time with them on the H200 (docs/design.md, "Packed kernel
# parameters").
COMMON_FLAGS = ["-g0", "-std=c++17", "-fno-plt", "-fno-semantic-interposition"]


def extensions():
    return [
        Extension(name, [str(pyx.relative_to(ROOT))], language="c++",
                  extra_compile_args=["-O1" if name in COLD_MODULES else "-O2", *COMMON_FLAGS])
        for pyx in sorted(STAGE.rglob("*.pyx"))
        for name in [module_name(pyx)]
    ]


def packages():
    return sorted(module_name(init) for init in STAGE.rglob("__init__.py*"))


# pip and setuptools run this file as __main__; tests import it by path to check its tables.
if __name__ == "__main__":
    stage_package()
    setup(
        ext_modules=extensions(),
        packages=packages(),
        package_dir={"": str(STAGE.relative_to(ROOT))},
        # Stubs and the PEP 561 marker travel beside the compiled modules.
        package_data={"": ["*.pyi", "py.typed"], "tensorplay._runtime.kernels": ["*.cu"]},
        cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
        zip_safe=False,
    )
