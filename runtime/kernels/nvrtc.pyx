# cython: language_level=3
"""Run-time kernels: NVRTC compiles kernels/<name>.cu to a cubin, the driver loads it.

get_kernel(device, source_name, function_name, prelude) returns the CUfunction that launch()
runs. The prelude goes in front of the source (a source is instantiated per dtype that way,
e.g. "typedef float scalar_t;"), and the result is compiled for the device's exact
architecture (sm_XY) with no -I: sources must be header-free (docs/design.md, "Kernel caches").

Note [Kernel caches]
NVRTC takes tens to hundreds of milliseconds per source, too slow to pay per call or, for a
short script, per process. Two caches sit in front of it:
- In the process, a dict from (device, source, function, prelude) to the CUfunction, so that
  every get_kernel after the first costs one dict lookup. Libraries are never unloaded: the
  functions they hand out stay cached for the life of the process. This one cache serves
  every kernel, the graph kernels included: each is loaded into its context when first asked
  for (cuFuncLoad, in relaxed capture mode), so a first use inside a capture is legal.
- On disk, one file per cubin, keyed as CuPy keys its cache (cupy/cuda/compiler.py): sha256
  of the full text (prelude included), the options, the NVRTC version, the architecture and
  FORMAT_VERSION. A different compiler may emit different code for the same text, so its
  version is part of the key; FORMAT_VERSION changes whenever the file layout or the way the
  text is assembled does.
  A file is MAGIC, the key it was written under (the 32 bytes of the sha256 its name spells),
  the sha256 of the cubin, then the cubin. A file that does not check out (a write cut short,
  a disk error, something else's file under our name, another kernel's valid entry copied or
  linked under this name) counts as corrupt and is compiled again and rewritten, never handed
  to the driver, where a bad image would fail far from its cause, or the wrong kernel would
  run. FORMAT_VERSION 3 added the key; entries of earlier versions live under other names
  (the version is hashed into the key) and are never read.
  Writers write a temporary file in the cache directory, fsync it and os.replace it onto the
  final name. Other threads and processes therefore see no entry or a whole one, without
  locks; writers that race write the same bytes, so it does not matter which one wins.
The disk cache only saves time: when its directory cannot be created or written, kernels are
compiled and used all the same, kept in memory for the process instead, with one warning per
directory. Entries are read only from regular files of at most MAX_ENTRY_BYTES, opened without
blocking: a pipe or a device under an entry's name, or a huge file, counts as corrupt.
"""
import errno
import hashlib
import os
import stat
import tempfile
import warnings
from pathlib import Path

from libc.stdint cimport uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from cuda.bindings cimport cydriver, cynvrtc, cyruntime
from cuda.bindings.cydriver cimport (CU_LAUNCH_PARAM_BUFFER_POINTER,
                                     CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END,
                                     CU_STREAM_CAPTURE_MODE_RELAXED,
                                     CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_LEGACY,
                                     CU_STREAM_PER_THREAD, CUDA_ERROR_INVALID_CONTEXT,
                                     CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_INVALID_VALUE,
                                     CUDA_ERROR_NOT_FOUND, CUDA_KERNEL_NODE_PARAMS, CUDA_SUCCESS,
                                     CUfunction, CUgraph, CUgraphExec, CUgraphNode, CUkernel,
                                     CUlibrary, CUresult, CUstream, CUstreamCaptureMode,
                                     CUstreamCaptureStatus)
from cuda.bindings.cynvrtc cimport (NVRTC_ERROR_COMPILATION, NVRTC_SUCCESS, nvrtcProgram,
                                    nvrtcResult)
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.kernels import signature as kernel_signature
from tensorplay._runtime.kernels.ops import KERNEL_CONSTANTS as OP_CONSTANTS

FORMAT_VERSION = 3
MAGIC = b"TPCUBIN3"
DIGEST_BYTES = 32  # sha256
# MAGIC, the entry's key, the cubin's digest: then the cubin.
HEADER_BYTES = len(MAGIC) + 2 * DIGEST_BYTES
# -default-device compiles unannotated functions for the device, as the sources assume.
BASE_OPTIONS = ("-std=c++17", "-default-device")
KERNEL_DIRECTORY = Path(__file__).parent  # the .cu sources ship beside this module

# (device, source_name, function_name, prelude) -> CUfunction, as an address.
cdef dict _functions = {}
# (architecture, source_name, prelude) -> CUlibrary, as an address: one per distinct cubin.
cdef dict _libraries = {}
# CUfunction and CUkernel addresses of the kernels loaded here -> (source_name, function_name,
# prelude): how a captured graph's kernel nodes are known to be ours (kernel_signature_of).
cdef dict _origins = {}
cdef dict _signatures = {}  # (source_name, function_name, prelude) -> its KernelSignature
# device -> "sm_XY"
cdef dict _architectures = {}
# (function address, block size) -> blocks resident on the whole device.
cdef dict _resident = {}
cdef tuple _nvrtc_version = None

# Counters for cache_statistics(); plain C integers, so updates under the GIL are atomic.
cdef Py_ssize_t _disk_hits = 0
cdef Py_ssize_t _disk_misses = 0
cdef Py_ssize_t _compiles = 0
cdef Py_ssize_t _corrupt = 0


def _forget_handles():
    # Handles belong to the parent's contexts; a forked child must load its own (and can use
    # CUDA only if the parent never initialised it: device.pyx, Note [Fork safety]).
    _functions.clear()
    _libraries.clear()
    _resident.clear()
    _origins.clear()


os.register_at_fork(after_in_child=_forget_handles)


# --------------------------------------------------------------------------------------------
# Errors


cdef str _c_text(const char* text, str fallback):
    return text.decode(errors="replace") if text != NULL else fallback


cdef int _check_nvrtc(nvrtcResult result, const char* call) except -1 nogil:
    if result != NVRTC_SUCCESS:
        with gil:
            raise RuntimeError(f"NVRTC error {_c_text(cynvrtc.nvrtcGetErrorString(result), '?')} "
                               f"({<int>result}) from {call.decode()}")
    return 0


# --------------------------------------------------------------------------------------------
# Compiling


def nvrtc_version():
    """(major, minor) of the NVRTC library in use; part of every disk-cache key."""
    global _nvrtc_version
    cdef int major = 0, minor = 0
    if _nvrtc_version is None:
        _check_nvrtc(cynvrtc.nvrtcVersion(&major, &minor), "nvrtcVersion")
        _nvrtc_version = (major, minor)
    return _nvrtc_version


cdef tuple _options(str arch):
    return (f"--gpu-architecture={arch}",) + BASE_OPTIONS


cdef str _program_log(nvrtcProgram program):
    cdef size_t size = 0
    cdef char* buffer
    _check_nvrtc(cynvrtc.nvrtcGetProgramLogSize(program, &size), "nvrtcGetProgramLogSize")
    buffer = <char*>malloc(size + 1)
    if buffer == NULL:
        raise MemoryError()
    try:
        _check_nvrtc(cynvrtc.nvrtcGetProgramLog(program, buffer), "nvrtcGetProgramLog")
        return buffer[:size].decode(errors="replace").rstrip("\0").strip()
    finally:
        free(buffer)


cdef bytes _compile(str source_text, str program_name, str arch):
    global _compiles
    cdef bytes source = source_text.encode()
    cdef bytes name = program_name.encode()
    cdef list options = [option.encode() for option in _options(arch)]
    cdef int count = len(options)
    cdef int index
    cdef const char** option_pointers = <const char**>malloc(count * sizeof(const char*))
    cdef nvrtcProgram program = NULL
    cdef nvrtcResult status
    cdef size_t size = 0
    cdef char* cubin = NULL
    if option_pointers == NULL:
        raise MemoryError()
    try:
        for index in range(count):
            option_pointers[index] = <bytes>options[index]
        _check_nvrtc(cynvrtc.nvrtcCreateProgram(&program, source, name, 0, NULL, NULL),
                     "nvrtcCreateProgram")
        with nogil:  # other threads keep running, and compiling, meanwhile
            status = cynvrtc.nvrtcCompileProgram(program, count, option_pointers)
        _compiles += 1
        if status != NVRTC_SUCCESS:
            major, minor = nvrtc_version()
            if status == NVRTC_ERROR_COMPILATION:
                advice = "Fix the source as the log below says."
            else:  # the options, the architecture above all
                advice = (f"If the log rejects the architecture, install an nvidia-cuda-nvrtc "
                          f"that supports {arch}.")
            raise RuntimeError(
                f"NVRTC {major}.{minor} could not compile {program_name} for {arch} "
                f"({_c_text(cynvrtc.nvrtcGetErrorString(status), '?')}). {advice}\n"
                f"NVRTC log:\n{_program_log(program)}")
        _check_nvrtc(cynvrtc.nvrtcGetCUBINSize(program, &size), "nvrtcGetCUBINSize")
        cubin = <char*>malloc(size)
        if cubin == NULL:
            raise MemoryError()
        _check_nvrtc(cynvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin[:size]
    finally:
        free(cubin)
        free(option_pointers)
        if program != NULL:
            cynvrtc.nvrtcDestroyProgram(&program)


def compile_cubin(str source_text, str arch, str program_name="kernel.cu"):
    """Compile source_text for arch ("sm_90") with NVRTC and return the cubin; no caching.

    program_name names the text in error messages. A compile error raises RuntimeError with
    the NVRTC log.
    """
    return _compile(source_text, program_name, arch)


# --------------------------------------------------------------------------------------------
# Kernel sources


def kernel_source_names():
    """The kernel sources shipped in the package: stems of kernels/*.cu, sorted."""
    return sorted([path.stem for path in KERNEL_DIRECTORY.glob("*.cu")])


def read_kernel_source(str name):
    """The text of the shipped source kernels/<name>.cu."""
    names = kernel_source_names()
    if name not in names:  # a stem, never a path: only shipped sources are compiled
        raise ValueError(f"no kernel source {name!r} in {KERNEL_DIRECTORY} (it holds {names}); "
                         f"add runtime/kernels/{name}.cu and rebuild tensorplay")
    return (KERNEL_DIRECTORY / f"{name}.cu").read_text(encoding="utf-8")


# The constants of nvrtc.pxd and the op codes kernels read (ops.pyx, Note [Op table]), in front
# of every source.
KERNEL_CONSTANTS = (("THREADS", THREADS), ("MAX_DIMS", MAX_DIMS),
                    ("STAGED_COPIES", STAGED_COPIES), ("SORT_CHUNK", SORT_CHUNK)) + OP_CONSTANTS
CONSTANTS_PRELUDE = "".join(f"#define {name} {value}\n" for name, value in KERNEL_CONSTANTS)


cdef str _full_source(str source_name, str prelude):
    # The #line directives make NVRTC's log name the prelude and the .cu file, with the line
    # numbers of each, instead of line numbers into the concatenation.
    return (f'#line 1 "nvrtc.pxd and ops.pxd constants"\n{CONSTANTS_PRELUDE}'
            f'#line 1 "{source_name}.cu prelude"\n{prelude}\n'
            f'#line 1 "{source_name}.cu"\n{read_kernel_source(source_name)}')


# --------------------------------------------------------------------------------------------
# The disk cache (Note [Kernel caches])


def cache_directory():
    """Where cubins are cached: $TENSORPLAY_CACHE_DIR, else ~/.cache/tensorplay/kernels."""
    configured = os.environ.get("TENSORPLAY_CACHE_DIR")
    return Path(configured or "~/.cache/tensorplay/kernels").expanduser()


def cache_statistics():
    """Counts since import: disk hits and misses, NVRTC compiles, and corrupt entries found."""
    return {"disk_hits": _disk_hits, "disk_misses": _disk_misses, "compiles": _compiles,
            "corrupt": _corrupt}


cdef str _cache_key(str source_text, tuple options, str arch):
    digest = hashlib.sha256()
    for part in (str(FORMAT_VERSION), "%d.%d" % nvrtc_version(), arch, "\0".join(options),
                 source_text):
        data = part.encode()
        # Length-prefixed, so that no two different lists of parts hash the same bytes.
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


# No cubin comes near this; a larger file under an entry's name is not ours.
MAX_ENTRY_BYTES = 64 << 20
# When the cache directory cannot be used: cubins by key, for this process, and the
# directories already warned about.
cdef dict _memory_cubins = {}
cdef set _warned_directories = set()


cdef object _usable_cache_directory():
    directory = cache_directory()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, "not writable")
    except (OSError, ValueError) as error:  # a file in the way, read-only, a NUL in the name
        if str(directory) not in _warned_directories:
            _warned_directories.add(str(directory))
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            warnings.warn(f"tensorplay: the kernel cache directory {str(directory)[:200]!r} "
                          f"cannot be used ({reason}); compiled kernels are kept in memory for "
                          "this process only. Set TENSORPLAY_CACHE_DIR to a writable directory",
                          RuntimeWarning, stacklevel=2)
        return None
    return directory


cdef object _read_entry(object path, bytes key):
    """The cubin of the entry at path, written under key; None for a miss (counted corrupt
    when something is there that is not that entry)."""
    global _corrupt
    try:
        # Non-blocking: a pipe under the entry's name must not hang the reader.
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:  # absent (the usual miss) or unreadable: compile
        return None
    described = os.fstat(handle)
    if not stat.S_ISREG(described.st_mode) or described.st_size > MAX_ENTRY_BYTES:
        os.close(handle)
        _corrupt += 1
        return None
    with os.fdopen(handle, "rb") as stream:
        try:
            data = stream.read(MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
    payload = data[HEADER_BYTES:]
    key_end = len(MAGIC) + DIGEST_BYTES
    if (len(data) <= HEADER_BYTES or data[:len(MAGIC)] != MAGIC
            or data[len(MAGIC):key_end] != key
            or hashlib.sha256(payload).digest() != data[key_end:HEADER_BYTES]):
        _corrupt += 1
        return None
    return payload


cdef int _write_entry(object path, bytes key, bytes cubin) except -1:
    data = MAGIC + key + hashlib.sha256(cubin).digest() + cubin
    try:
        # Same directory, so os.replace is an atomic rename; the suffix keeps it out of *.cubin.
        handle, temporary = tempfile.mkstemp(prefix=".", suffix=".partial", dir=path.parent)
    except OSError:  # read-only directory: the kernel works, it just is not cached
        return 0
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())  # on disk before the name points at it
        os.replace(temporary, path)
    except OSError:  # disk full, quota: drop the entry, keep the kernel
        try:
            os.unlink(temporary)
        except OSError:
            pass
    return 0


def cached_cubin(str source_name, str prelude, str arch):
    """The cubin of kernels/<source_name>.cu with prelude in front, for arch ("sm_90").

    Read from the disk cache when a valid entry exists, else compiled and stored there
    (Note [Kernel caches]). get_kernel loads its cubins through this function.
    """
    global _disk_hits, _disk_misses
    source_text = _full_source(source_name, prelude)
    key = _cache_key(source_text, _options(arch), arch)
    directory = _usable_cache_directory()
    if directory is None:  # kept in memory instead (Note [Kernel caches])
        cubin = _memory_cubins.get(key)
        if cubin is None:
            _disk_misses += 1
            cubin = _memory_cubins[key] = _compile(source_text, f"{source_name}.cu", arch)
        return cubin
    path = directory / f"{key}.cubin"
    key_bytes = bytes.fromhex(key)
    cubin = _read_entry(path, key_bytes)
    if cubin is not None:
        _disk_hits += 1
        return cubin
    _disk_misses += 1
    cubin = _compile(source_text, f"{source_name}.cu", arch)
    _write_entry(path, key_bytes, cubin)
    return cubin


# --------------------------------------------------------------------------------------------
# Loading and launching


cdef str _architecture(int device):
    cdef int major = 0, minor = 0
    architecture = _architectures.get(device)
    if architecture is None:
        _device.checked_device(device)
        with nogil:
            errors.check(cyruntime.cudaDeviceGetAttribute(
                &major, cyruntime.cudaDevAttrComputeCapabilityMajor, device),
                "cudaDeviceGetAttribute")
            errors.check(cyruntime.cudaDeviceGetAttribute(
                &minor, cyruntime.cudaDevAttrComputeCapabilityMinor, device),
                "cudaDeviceGetAttribute")
        architecture = _architectures[device] = f"sm_{major}{minor}"
    return architecture


cdef CUlibrary _library(str arch, str source_name, str prelude) except NULL:
    cdef CUlibrary library = NULL
    cdef bytes cubin
    cdef const char* image
    key = (arch, source_name, prelude)
    loaded = _libraries.get(key)
    if loaded is not None:
        return <CUlibrary><uintptr_t>loaded
    cubin = cached_cubin(source_name, prelude, arch)
    image = cubin
    with nogil:
        errors.check_driver(cydriver.cuLibraryLoadData(&library, image, NULL, NULL, 0, NULL, NULL, 0),
                      "cuLibraryLoadData")
    # Another thread may have loaded the same cubin while this one compiled without the GIL:
    # keep the first library and unload this one.
    kept = _libraries.setdefault(key, <uintptr_t>library)
    if kept != <uintptr_t>library:
        with nogil:
            errors.check_driver(cydriver.cuLibraryUnload(library), "cuLibraryUnload")
    return <CUlibrary><uintptr_t>kept


cdef CUfunction _load_function(int device, str source_name, str function_name,
                               str prelude) except NULL:
    cdef CUlibrary library
    cdef CUkernel kernel = NULL
    cdef CUfunction function = NULL
    cdef CUresult status
    cdef bytes name = function_name.encode()
    cdef const char* name_pointer = name
    cdef _device.DeviceSwitch switch
    cdef int saved_mode
    arch = _architecture(device)
    # Loading is not captured work: in relaxed mode while any capture is open (device.pyx,
    # Note [Calls during capture]), so that a kernel's first use may come inside a capture.
    _device.enter_relaxed(&saved_mode)
    try:
        library = _library(arch, source_name, prelude)
        with nogil:
            status = cydriver.cuLibraryGetKernel(&kernel, library, name_pointer)
        if status == CUDA_ERROR_NOT_FOUND:
            raise RuntimeError(f"{source_name}.cu has no kernel named {function_name!r}; "
                               f"kernels must be declared extern \"C\" __global__ so that "
                               f"their names are not mangled")
        errors.check_driver(status, "cuLibraryGetKernel")
        # A library is loaded independently of contexts; the function that launch() takes is
        # the kernel's handle in one context, so it is fetched in the device's (Note [One rule
        # for contexts] in device.pyx), and cached per device. cuFuncLoad loads it now: with
        # lazy loading, the first launch would load it, which a capture does not allow.
        with nogil:
            _device.enter_device(device, &switch)
            try:
                errors.check_driver(cydriver.cuKernelGetFunction(&function, kernel),
                                    "cuKernelGetFunction")
                errors.check_driver(cydriver.cuFuncLoad(function), "cuFuncLoad")
            finally:
                _device.exit_device(&switch)
    finally:
        _device.exit_relaxed(&saved_mode)
    _functions[(device, source_name, function_name, prelude)] = <uintptr_t>function
    # A captured node may name the kernel by either handle (graph_topology.pyx, _kernel_name).
    _origins[<uintptr_t>function] = _origins[<uintptr_t>kernel] = (source_name, function_name,
                                                                  prelude)
    return function


cdef CUfunction get_kernel(int device, str source_name, str function_name,
                           str prelude) except NULL:
    address = _functions.get((device, source_name, function_name, prelude))
    if address is not None:
        return <CUfunction><uintptr_t>address
    return _load_function(device, source_name, function_name, prelude)


cdef unsigned int resident_blocks(int device, CUfunction function, unsigned int block_x) except 0:
    key = (<uintptr_t>function, block_x)
    cached = _resident.get(key)
    if cached is not None:
        return cached
    cdef int per_multiprocessor = 0, multiprocessors = 0
    cdef cydriver.CUdevice handle
    # Queries only, legal during a capture; a function is loaded in its device's context.
    with nogil:
        errors.check_driver(cydriver.cuDeviceGet(&handle, device), "cuDeviceGet")
        errors.check_driver(cydriver.cuDeviceGetAttribute(
            &multiprocessors, cydriver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, handle),
            "cuDeviceGetAttribute")
        errors.check_driver(cydriver.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_multiprocessor, function, block_x, 0),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    blocks = max(1, per_multiprocessor * multiprocessors)
    _resident[key] = blocks
    return blocks


cdef object kernel_signature_of(uintptr_t handle):
    # Parsed at the first question, not at load: loading stays as cheap as before, and only
    # the graph update code (graph_update.pyx, node_params.pyx, rebinding.pyx) asks.
    origin = _origins.get(handle)
    if origin is None:
        return None
    found = _signatures.get(origin)
    if found is None:
        source_name, function_name, prelude = origin
        found = _signatures[origin] = kernel_signature.signature(
            read_kernel_source(source_name), prelude, function_name, KERNEL_CONSTANTS,
            source_name)
    return found


# The driver's entry points once they are asked for (after the first launch): the fast path of
# launch() (Note [Driver entry points] in device.pyx).
cdef _device.DriverEntryPoints* _driver = NULL


cdef extern from "Python.h":
    int PyGILState_Check() noexcept nogil


# Note [Eager launches through graphs]
# On the H200 machine this project is measured on, an eager cuLaunchKernel of a small kernel
# costs the host about 3.5 us, while updating the arguments of a one-node executable graph
# (cuGraphExecKernelNodeSetParams) and launching it (cuGraphLaunch) costs about 2.0-2.5 us;
# the device runs the kernel no slower (docs/design.md, "Eager launches through graphs", has
# the figures). So a launch outside any capture goes through an executable graph made for its
# configuration, (function, stream, grid, block, shared memory), from that configuration's
# second launch on. The driver's rules (CUDA Driver API, cuGraphExecKernelNodeSetParams and
# cuGraphLaunch) and what was measured shape it:
# - Only the arguments change between the launches of one executable: a new function, grid or
#   block size costs as much as cuLaunchKernel or more, so each configuration has its own.
# - A launch of an executable is ordered after that executable's earlier launches. Each one
#   serves one stream, whose own order already implies that; a stream handle that CUDA reuses
#   for a new stream after the old one is destroyed inherits the old one's executables, whose
#   earlier launches are done or enqueued before any work of the new stream, so the order
#   they add can delay that work but never deadlock it.
# - Never on a capturing stream: cuGraphLaunch there is unsupported and invalidates the
#   capture. Not while one of our captures is open (device.capture_open), nor where
#   cuStreamIsCapturing says the stream captures (another library's capture) or cannot say
#   (the legacy default stream while a blocking stream captures). Both calls are legal while
#   another stream captures in global mode (seen on the H200), and the executables are made in
#   relaxed mode, which allows that too.
# - Graph objects are not thread-safe: only a thread holding the GIL uses the table below; a
#   launch without the GIL goes through cuLaunchKernel.
# - CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, and stream 0 where it is the per-thread default
#   stream, name another stream on each thread: cuLaunchKernel.
# - An executable takes about 100 KiB of device memory from the driver (outside the caching
#   allocator's statistics) and 17-28 us to make: at most TENSORPLAY_EAGER_GRAPHS (128 unless
#   set; 0 turns the path off) are made per process, like the kernels never freed, and at most
#   EAGER_CONFIGURATIONS configurations are remembered per function. Past either, and where
#   anything but the launch itself fails on this path, cuLaunchKernel runs the launch and
#   reports its errors as before.
cdef enum:
    EAGER_CONFIGURATIONS = 16
    DEFAULT_EAGER_GRAPHS = 128

cdef struct EagerGraph:
    CUstream stream
    unsigned int grid_x
    unsigned int block_x
    unsigned int shared_bytes
    bint refused            # making its executable failed: cuLaunchKernel from now on
    CUgraph graph           # NULL until the configuration's second launch
    CUgraphNode node
    CUgraphExec executable

# CUfunction address -> its configurations seen so far.
cdef unordered_map[uintptr_t, vector[EagerGraph]] _eager_graphs
# Read with the entry points, at the first launch; 0 where the driver lacks one this path uses.
cdef int _eager_limit = 0
cdef int _eager_made = 0


cdef int eager_graph_limit() except -1:
    text = os.environ.get("TENSORPLAY_EAGER_GRAPHS", str(DEFAULT_EAGER_GRAPHS)).strip()
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if not 0 <= limit <= 1 << 20:
        raise ValueError("TENSORPLAY_EAGER_GRAPHS must be the most executable graphs that eager "
                         "kernel launches may make, a whole number from 0 (every launch through "
                         f"cuLaunchKernel) to {1 << 20}, got {text!r}")
    return limit


cdef int made_executable(EagerGraph* entry, CUDA_KERNEL_NODE_PARAMS* params) except -1 nogil:
    """entry's one-node graph and its executable, with params: 1, or 0 (entry refused) if the
    driver refuses any step."""
    global _eager_made
    cdef CUgraph graph = NULL
    cdef CUgraphNode node = NULL
    cdef CUgraphExec executable = NULL
    cdef CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED
    entry.refused = True
    if cydriver.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS:
        return 0
    cdef bint made = (cydriver.cuGraphCreate(&graph, 0) == CUDA_SUCCESS
                      and cydriver.cuGraphAddKernelNode(&node, graph, NULL, 0, params)
                      == CUDA_SUCCESS
                      and cydriver.cuGraphInstantiate(&executable, graph, 0) == CUDA_SUCCESS)
    cydriver.cuThreadExchangeStreamCaptureMode(&mode)
    if not made:
        if graph != NULL:
            cydriver.cuGraphDestroy(graph)
        return 0
    entry.refused = False
    entry.graph = graph
    entry.node = node
    entry.executable = executable
    _eager_made += 1
    return 1


cdef int launch_through_graph(CUfunction function, unsigned int grid_x, unsigned int block_x,
                              unsigned int shared_bytes, CUstream stream, void** arguments,
                              void** extra) except -1 nogil:
    """launch() through the configuration's executable graph (Note [Eager launches through
    graphs]): 1 when launched, 0 for cuLaunchKernel to launch."""
    cdef CUstreamCaptureStatus capturing
    # Our own captures are ruled out by launch_with, before it asks for the context.
    if (not PyGILState_Check()
            or <uintptr_t>stream == CU_STREAM_LEGACY or <uintptr_t>stream == CU_STREAM_PER_THREAD
            or (stream == NULL and _driver.per_thread_default_stream)
            or _driver.stream_is_capturing(stream, &capturing) != CUDA_SUCCESS
            or capturing != CU_STREAM_CAPTURE_STATUS_NONE):
        return 0
    cdef vector[EagerGraph]* known = &_eager_graphs[<uintptr_t>function]
    cdef EagerGraph* entry = NULL
    cdef EagerGraph seen
    cdef size_t i
    for i in range(known.size()):
        if (known[0][i].stream == stream and known[0][i].grid_x == grid_x
                and known[0][i].block_x == block_x and known[0][i].shared_bytes == shared_bytes):
            entry = &known[0][i]
            break
    if entry == NULL:  # a first launch: remembered, launched by cuLaunchKernel
        if known.size() < EAGER_CONFIGURATIONS:
            memset(&seen, 0, sizeof(seen))
            seen.stream = stream
            seen.grid_x = grid_x
            seen.block_x = block_x
            seen.shared_bytes = shared_bytes
            known.push_back(seen)
        return 0
    if entry.refused:
        return 0
    cdef CUDA_KERNEL_NODE_PARAMS params
    memset(&params, 0, sizeof(params))
    params.func = function
    params.gridDimX = grid_x
    params.gridDimY = params.gridDimZ = 1
    params.blockDimX = block_x
    params.blockDimY = params.blockDimZ = 1
    params.sharedMemBytes = shared_bytes
    params.kernelParams = arguments
    params.extra = extra
    if entry.executable == NULL:
        if _eager_made >= _eager_limit or not made_executable(entry, &params):
            return 0
    elif _driver.exec_kernel_node_set_params(entry.executable, entry.node, &params) != \
            CUDA_SUCCESS:
        return 0
    errors.check_driver(_driver.graph_launch(entry.executable, stream), b"cuGraphLaunch")
    return 1


# Note [Launches without a context check]
# A CUfunction belongs to the context its module was loaded in, and so does every stream but
# the default ones; the driver launches such a kernel on such a stream whatever context is
# current on the thread, and refuses the launch, doing nothing, where it cannot tell the
# context. Seen on the H200 with a kernel of the primary context (tests/devices/test_threads.py
# keeps these cases): on a stream of that context, the launch runs with no context current and
# with another context of the device current, under capture too, where it is captured; on the
# legacy or per-thread default stream it fails with CUDA_ERROR_INVALID_CONTEXT (no context) or
# CUDA_ERROR_INVALID_HANDLE (another context), having launched nothing. So the fast path
# launches first and asks afterwards: only those two errors send the launch to enter_device,
# which makes the device's primary context current for the call (Note [One rule for contexts]
# in device.pyx) and launches again, reporting that launch's error. That saves the
# cuCtxGetCurrent that every launch asked for before: about 25 ns of a launch of `x += 1` under
# capture, about 500 ns, in an A/B on the H200 (docs/design.md, "Packed kernel parameters").
cdef inline int launch_with(int device, CUfunction function, unsigned int grid_x,
                            unsigned int block_x, unsigned int shared_bytes, cudaStream_t stream,
                            void** arguments, void** extra) except -1 nogil:
    """launch() and launch_packed(): the parameters as cuLaunchKernel takes them, one of
    arguments and extra NULL."""
    global _driver, _eager_limit
    cdef CUresult status
    if _driver != NULL and _driver.launch_kernel != NULL:
        # Our own capture first: the cheapest test, and the one that holds for every launch
        # under capture, where the launch itself is cheapest.
        if (_eager_limit > 0 and not _device.capture_open()
                and _device.primary_context_current(_driver, device)
                and launch_through_graph(function, grid_x, block_x, shared_bytes,
                                         <CUstream>stream, arguments, extra)):
            return 0
        # Note [Launches without a context check]
        status = _driver.launch_kernel(function, grid_x, 1, 1, block_x, 1, 1, shared_bytes,
                                       <CUstream>stream, arguments, extra)
        if status == CUDA_SUCCESS:
            return 0
        if status != CUDA_ERROR_INVALID_CONTEXT and status != CUDA_ERROR_INVALID_HANDLE:
            return errors.check_driver(status, b"cuLaunchKernel")
    if _driver == NULL:  # read before anything is launched: a bad setting changes nothing
        with gil:
            _eager_limit = eager_graph_limit()
    cdef _device.DeviceSwitch switch
    _device.enter_device(device, &switch)
    try:
        errors.check_driver(cydriver.cuLaunchKernel(function, grid_x, 1, 1, block_x, 1, 1,
                                                    shared_bytes, <CUstream>stream, arguments,
                                                    extra),
                            "cuLaunchKernel")
    finally:
        _device.exit_device(&switch)
    if _driver == NULL:
        with gil:
            _driver = _device.driver_entry_points()
            if (_driver.exec_kernel_node_set_params == NULL
                    or _driver.stream_is_capturing == NULL or _driver.graph_launch == NULL):
                _eager_limit = 0  # a driver without these entry points: cuLaunchKernel only
    return 0


cdef int launch(int device, CUfunction function, unsigned int grid_x, unsigned int block_x,
                unsigned int shared_bytes, cudaStream_t stream, void** arguments) except -1 nogil:
    return launch_with(device, function, grid_x, block_x, shared_bytes, stream, arguments, NULL)


# Note [Packed parameters]
# cuLaunchKernel takes a kernel's parameters in one of two forms (CUDA Driver API,
# cuLaunchKernel): an array of pointers to each, whose sizes and offsets the driver reads from
# the kernel's image, or one buffer the caller laid out, passed through `extra`
# (CU_LAUNCH_PARAM_BUFFER_POINTER). On the H200 machine a C loop of 1024 launches of a kernel of
# six parameters under capture took 335 us through the buffer against 345 us through the
# pointers (the machine's fast state; 640 against 675 us in its slow state), about what one
# parameter costs against six. So the kernels of the quick paths (elementwise.pyx, Note [Quick
# paths]) take theirs in a buffer: a C struct per signature in device_ops.pyx, whose layout
# check_packed_layout compares with the driver's cuFuncGetParamInfo when the kernel is loaded.
cdef int launch_packed(int device, CUfunction function, unsigned int grid_x,
                       unsigned int block_x, unsigned int shared_bytes, cudaStream_t stream,
                       void* parameters, size_t size) except -1 nogil:
    cdef void* extra[5]
    extra[0] = <void*>CU_LAUNCH_PARAM_BUFFER_POINTER
    extra[1] = parameters
    extra[2] = <void*>CU_LAUNCH_PARAM_BUFFER_SIZE
    extra[3] = &size
    extra[4] = <void*>CU_LAUNCH_PARAM_END
    return launch_with(device, function, grid_x, block_x, shared_bytes, stream, NULL, extra)


cdef int check_packed_layout(CUfunction function, str name, const size_t* offsets,
                             const size_t* sizes, size_t count, size_t end) except -1:
    """Refuse a struct for launch_packed whose fields (offsets and sizes, in order) are not
    function's parameters as its image lays them out, or whose size to pass, end, is not the
    end of the last. A driver without cuFuncGetParamInfo (before CUDA 12.4) answers another
    error: nothing is checked there."""
    cdef size_t index, offset = 0, size = 0
    cdef CUresult status
    for index in range(count + 1):
        status = cydriver.cuFuncGetParamInfo(function, index, &offset, &size)
        if status == CUDA_ERROR_INVALID_VALUE:  # past the kernel's last parameter
            if index == count:
                break
            raise RuntimeError(f"{name}: the kernel has {index} parameters, its launcher packs "
                               f"{count} (device_ops.pyx)")
        if status != CUDA_SUCCESS:  # a driver without cuFuncGetParamInfo
            return 0
        if index == count:
            raise RuntimeError(f"{name}: the kernel has more than the {count} parameters its "
                               "launcher packs (device_ops.pyx)")
        if offset != offsets[index] or size != sizes[index]:
            raise RuntimeError(f"{name}: parameter {index} is {size} bytes at offset {offset} "
                               f"in the kernel's image, {sizes[index]} bytes at "
                               f"{offsets[index]} in its launcher's struct (device_ops.pyx)")
    if offsets[count - 1] + sizes[count - 1] != end:
        raise RuntimeError(f"{name}: its launcher passes {end} bytes of parameters, which end "
                           f"at {offsets[count - 1] + sizes[count - 1]} (device_ops.pyx)")
    return 0


def eager_graphs_made():
    """How many executable graphs eager launches have made in this process (Note [Eager
    launches through graphs]): what the tests check the path by."""
    return _eager_made
