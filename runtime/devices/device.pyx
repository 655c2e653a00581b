# cython: language_level=3
"""Devices: discovery without initialising CUDA, lazy initialisation, the forked-child guard,
the per-thread current device, and the one parser of device arguments.

Note [Fork safety]
cuInit in a parent process breaks CUDA in every forked child (docs/design.md, "Fork safety"), and
cudaGetDeviceCount calls cuInit. So until the first real use, device_count() and is_available()
count through NVML and apply CUDA_VISIBLE_DEVICES themselves, as PyTorch's
_device_count_nvml does (docs/design.md, "Device discovery"). The first real use
initialises under a lock; a child forked after that gets a clear error instead of a hang.
"""
import os
import threading

from libcpp.vector cimport vector

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport CUcontext, CUdevice
from cuda.bindings.cyruntime cimport cudaDeviceProp, cudaError_t, cudaSuccess

from tensorplay._runtime.base cimport dtypes, errors, public

cdef extern from *:
    """
    /* The current device of each host thread, mirrored here so that reading it is a TLS load
       instead of a cudaGetDevice call. CUDA's own per-thread device starts at 0 as well. */
    static __thread int tensorplay_current_device = 0;
    static inline int tensorplay_get_current_device(void) { return tensorplay_current_device; }
    static inline void tensorplay_set_current_device(int d) { tensorplay_current_device = d; }
    """
    int tensorplay_get_current_device() noexcept nogil
    void tensorplay_set_current_device(int) noexcept nogil

# Driver answers that mean "no usable device" rather than a failure to report.
cdef int CUDA_ERROR_NO_DEVICE = 100
cdef int CUDA_ERROR_INSUFFICIENT_DRIVER = 35

cdef bint _initialized = False
cdef bint _in_bad_fork = False
cdef int _device_count_at_init = 0
cdef list _pending_calls = []
_init_lock = threading.Lock()


# --------------------------------------------------------------------------------------------
# Counting devices without initialising CUDA


def parse_visible_devices(value):
    """CUDA_VISIBLE_DEVICES as the driver reads it: a list of ordinals, or of UUID prefixes.

    None (unset) means every device. Entries parse like strtoul ("1gpu2" reads as 1); a
    negative entry ends the list; a repeated entry makes the whole list empty; a list starting
    with "GPU-" or "MIG-" is a list of UUID prefixes, cut at the first entry without it.
    """
    if value is None:
        return list(range(MAX_DEVICES))
    if value.startswith("GPU-") or value.startswith("MIG-"):
        prefix = value[:4]
        uuids = []
        for entry in value.split(","):
            if entry in uuids:
                return []
            if not entry.startswith(prefix):
                break
            uuids.append(entry)
        return uuids
    ordinals = []
    for entry in value.split(","):
        ordinal = _strtoul(entry.strip(" \t\n\v\f\r"))  # C's isspace(): ASCII only
        if ordinal in ordinals:
            return []
        if ordinal < 0:
            break
        ordinals.append(ordinal)
    return ordinals


def _strtoul(text):
    """The ordinal an entry starts with, as C's strtoul reads it: ASCII digits only (str's
    isdigit() would take other scripts' digits, which the driver does not); -1 for none, for a
    sign alone or a negative number (which ends the list), and for more digits than any ordinal
    has (which the driver reads as out of range)."""
    digits = 0
    for position, char in enumerate(text):
        if char in "0123456789" or (position == 0 and char in "+-"):
            digits = position + 1
        else:
            break
    number = text[:digits].lstrip("+-")
    if not number or text.startswith("-") or len(number.lstrip("0")) > 18:
        return -1
    return int(number)


def visible_device_count(visible, int raw_count, uuids):
    """How many of raw_count devices (with these NVML UUIDs) the parsed list makes visible.

    Returns -1 when only the CUDA runtime can tell (MIG UUIDs, or UUIDs without NVML).
    """
    if not visible:
        return 0
    if isinstance(visible[0], str):
        if visible[0].startswith("MIG-") or uuids is None:
            return -1
        ordinals = []
        for candidate in visible:
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(candidate)]
            if len(matches) != 1:  # unknown or ambiguous: the driver stops here
                break
            if matches[0] in ordinals:
                return 0
            ordinals.append(matches[0])
        return len(ordinals)
    for position, ordinal in enumerate(visible):
        if ordinal >= raw_count:
            return position
    return len(visible)


cdef int _nvml_device_count() except -2:
    """Devices NVML sees, filtered by CUDA_VISIBLE_DEVICES; -1 when NVML cannot answer."""
    try:
        import pynvml
        pynvml.nvmlInit()
        raw_count = pynvml.nvmlDeviceGetCount()
        visible = parse_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
        uuids = None
        if visible and isinstance(visible[0], str):
            uuids = [_text(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)))
                     for i in range(raw_count)]
    except Exception:  # no driver, no NVML library or binding: let the runtime answer
        return -1
    return visible_device_count(visible, raw_count, uuids)


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


cdef int _runtime_device_count() except -1:
    """cudaGetDeviceCount, which initialises the driver (it poisons fork: Note [Fork safety])."""
    cdef int count = 0
    cdef cudaError_t status = cyruntime.cudaGetDeviceCount(&count)
    if status == cudaSuccess:
        return count
    if <int>status in (CUDA_ERROR_NO_DEVICE, CUDA_ERROR_INSUFFICIENT_DRIVER):
        return 0
    errors.raise_cuda_error(<int>status, "cudaGetDeviceCount")


cdef int _count_before_init = -1


cdef int device_count() except -1:
    # Counted once: the devices a process can see do not change while it runs (PyTorch caches
    # its NVML count the same way), and argument checks ask on every call.
    global _count_before_init
    if _initialized:
        return _device_count_at_init
    if _count_before_init < 0:
        count = _nvml_device_count()
        _count_before_init = min(count if count >= 0 else _runtime_device_count(), MAX_DEVICES)
    return _count_before_init


cdef bint is_available() except -1:
    return device_count() > 0


# --------------------------------------------------------------------------------------------
# Lazy initialisation


def _after_fork_in_child():
    global _initialized, _in_bad_fork, _init_lock
    _initialized = False
    _in_bad_fork = True
    _init_lock = threading.Lock()  # the parent's lock may have been held by another thread


cdef bint is_initialized() noexcept nogil:
    return _initialized


cdef int initialized_device_count() noexcept nogil:
    return _device_count_at_init if _initialized else 0


cdef int ensure_initialized() except -1:
    global _initialized, _device_count_at_init
    if _initialized:
        return 0
    with _init_lock:
        if _in_bad_fork:
            raise RuntimeError(
                "Cannot re-initialize CUDA in forked subprocess: the parent process had "
                "already initialised CUDA before fork(). Use the 'spawn' (or 'forkserver') "
                "multiprocessing start method, or initialise CUDA only in the children.")
        if _initialized:
            return 0
        count = _runtime_device_count()
        if count == 0:
            errors.raise_no_accelerator("this call")
        _device_count_at_init = min(count, MAX_DEVICES)
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _initialized = True
        pending = list(_pending_calls)
        _pending_calls.clear()
    for callback in pending:
        callback()
    return 0


cdef int call_when_initialized(object callback) except -1:
    """Run callback now if CUDA is initialised, else at initialisation (deferred seeding)."""
    if _initialized:
        callback()
    else:
        _pending_calls.append(callback)
    return 0


# --------------------------------------------------------------------------------------------
# The current device


cdef int current_device() noexcept nogil:
    return tensorplay_get_current_device()


cdef int checked_device(int index) except -1:
    ensure_initialized()
    if index < 0 or index >= _device_count_at_init:
        raise ValueError(f"device index {index} is out of range: {_device_count_at_init} CUDA "
                         f"device(s) are visible, so valid indices are 0 to "
                         f"{_device_count_at_init - 1}")
    return index


cdef int set_current_device(int index) except -1:
    checked_device(index)
    with nogil:
        errors.check(cyruntime.cudaSetDevice(index), "cudaSetDevice")
    tensorplay_set_current_device(index)
    return 0


# --------------------------------------------------------------------------------------------
# Contexts (docs/design.md, "Devices, threads and contexts")
#
# Note [One rule for contexts]
# The driver API acts on the context current on the calling thread, and a thread has none
# until something makes one current: the runtime API does that by itself at a thread's first
# runtime call, the driver API never does. A kernel launched on a default stream with no
# context current fails with CUDA_ERROR_INVALID_CONTEXT, and one launched while another
# context is current fails with CUDA_ERROR_INVALID_HANDLE; on a stream of the kernel's own
# context it runs either way. So every CUDA call made for a device goes through
# enter_device/exit_device (a kernel launch only where the driver refuses it: Note [Launches
# without a context check] in nvrtc.pyx), which make that device's primary context (the one
# the runtime uses too) current for the call and put back what was there. The check costs one
# cuCtxGetCurrent (a thread-local read in libcuda) and a compare when the right context is
# already current, which is the common case. It reads the context itself rather than a mirror
# of our own, so it stays right when other code on the thread (PyTorch, CuPy) switches device.
# A thread with no context that works on its own current device keeps the context afterwards,
# as a runtime call would have left it; any other switch is undone, so the thread's current
# device never changes behind the user's back.

# Primary context of each device, retained once and kept for the life of the process.
cdef CUcontext _primary_contexts[MAX_DEVICES]


cdef CUcontext _primary_context(int device) except NULL:
    cdef CUdevice handle = 0
    cdef CUcontext context = NULL
    checked_device(device)
    if _primary_contexts[device] == NULL:
        with nogil:
            errors.check_driver(cydriver.cuDeviceGet(&handle, device), b"cuDeviceGet")
            errors.check_driver(cydriver.cuDevicePrimaryCtxRetain(&context, handle),
                                b"cuDevicePrimaryCtxRetain")
        # Under the GIL: two threads may both retain, and both get the same context back.
        _primary_contexts[device] = context
    return _primary_contexts[device]


# Note [Driver entry points]
# Every CUDA call of ours runs in the device's primary context (enter_device above). The two
# launches on the hot paths, a kernel (nvrtc.launch) and a graph (CUDAGraph.replay), check the
# usual case, that context already current, and launch with the driver's own entry points,
# asked once from cuGetProcAddress (CUDA Driver API, "Driver Entry Point Access"): a call
# through cuda.bindings' cydriver passes two wrapper layers in two more libraries first, which
# were a measurable part of a launch under graph capture (docs/design.md, "Devices, threads
# and contexts"). The entry points are asked in the default-stream mode cydriver uses:
# per-thread where CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM is 1 (cuda-bindings'
# "Environment Variables"), legacy otherwise, so that stream 0 is the same stream on both
# paths. Any other case (no context, another one) goes through enter_device and cydriver.
cdef DriverEntryPoints _entry_points
cdef bint _entry_points_asked = False
# The CUDA version whose ABI of the entry points is asked for; none has changed since.
cdef int ENTRY_POINT_VERSION = 12000


cdef void* _entry_point(const char* name, unsigned long long flags) noexcept:
    """The driver's function name, or NULL where it has none (the cydriver path stays)."""
    cdef void* entry = NULL
    cdef cydriver.CUdriverProcAddressQueryResult found
    if cydriver.cuGetProcAddress(name, &entry, ENTRY_POINT_VERSION, flags, &found) != \
            cydriver.CUDA_SUCCESS or found != cydriver.CU_GET_PROC_ADDRESS_SUCCESS:
        return NULL
    return entry


cdef DriverEntryPoints* driver_entry_points() except NULL:
    global _entry_points_asked
    cdef unsigned long long flags
    if not _entry_points_asked:
        ensure_initialized()
        _entry_points.per_thread_default_stream = \
            os.environ.get("CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM", "0").strip() \
            not in ("", "0")
        flags = (cydriver.CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                 if _entry_points.per_thread_default_stream
                 else cydriver.CU_GET_PROC_ADDRESS_LEGACY_STREAM)
        _entry_points.primary_contexts = _primary_contexts
        _entry_points.launch_kernel = <LaunchKernelEntry>_entry_point(b"cuLaunchKernel", flags)
        _entry_points.graph_launch = <GraphLaunchEntry>_entry_point(b"cuGraphLaunch", flags)
        _entry_points.ctx_get_current = <CtxGetCurrentEntry>_entry_point(b"cuCtxGetCurrent",
                                                                         flags)
        _entry_points.exec_kernel_node_set_params = <ExecKernelNodeSetParamsEntry>_entry_point(
            b"cuGraphExecKernelNodeSetParams", flags)
        _entry_points.stream_is_capturing = <StreamIsCapturingEntry>_entry_point(
            b"cuStreamIsCapturing", flags)
        _entry_points_asked = True
    return &_entry_points


cdef int enter_device(int device, DeviceSwitch* saved) except -1 nogil:
    cdef CUcontext current = NULL
    cdef CUcontext target = NULL
    saved.switched = False
    if 0 <= device < MAX_DEVICES:
        target = _primary_contexts[device]
    errors.check_driver(cydriver.cuCtxGetCurrent(&current), b"cuCtxGetCurrent")
    if current == target and target != NULL:
        return 0
    if target == NULL:  # first use of the device in this process, or an invalid index
        with gil:
            target = _primary_context(device)
        if current == target:
            return 0
    errors.check_driver(cydriver.cuCtxSetCurrent(target), b"cuCtxSetCurrent")
    # A fresh thread working on its current device keeps the context (Note above).
    if current != NULL or device != tensorplay_get_current_device():
        saved.previous = current
        saved.switched = True
    return 0


cdef int current_device_index() except -1:
    ensure_initialized()
    return current_device()


cdef object set_device_index(int index):
    if index == -1:  # "no change", as PyTorch's set_device(-1)
        return None
    if index != current_device() or not _initialized:
        set_current_device(index)
    return None


cdef object synchronize(int index):
    if not _initialized:  # nothing can be running: no-op, as in PyTorch
        return None
    checked_device(index)
    if device_capturing(index):
        raise RuntimeError(
            f"synchronize() cannot run while a graph capture is open on cuda:{index}: it would "
            "wait for the capturing stream, which CUDA forbids (cudaErrorStreamCaptureUnsupported) "
            "and which would invalidate the capture. Synchronize before the capture begins or "
            "after it ends")
    cdef DeviceSwitch switch
    cdef int mode
    with nogil:
        enter_device(index, &switch)
        enter_relaxed(&mode)
        try:
            errors.check(cyruntime.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        finally:
            exit_relaxed(&mode)
            exit_device(&switch)
    return None


# --------------------------------------------------------------------------------------------
# Open captures
#
# Note [Calls during capture]
# While a stream captures, CUDA forbids some calls and turns others into an error that also
# invalidates the capture (CUDA Runtime API, "Stream capture" and cudaStreamCaptureMode):
# - waiting for a capturing stream (synchronizing it or its device, querying it, querying or
#   synchronizing an event recorded in the capture) is an error in every mode;
# - "potentially unsafe" calls (event queries, synchronization of other streams, cudaMalloc,
#   cudaFree, stream and event creation) are errors on the capturing thread in 'global' and
#   'thread_local' mode, and on every thread while any 'global' capture is open, unless the
#   calling thread switched itself to relaxed mode (cudaThreadExchangeStreamCaptureMode).
# So the runtime keeps the list of captures it opened, and:
# - refuses the first kind with a clear error before any CUDA call (refuse_on_capturing_stream,
#   synchronize), so the capture survives;
# - makes the second kind legal by switching the calling thread to relaxed mode around the call
#   (enter_relaxed / exit_relaxed), only while a capture is open, so eager code pays nothing;
# - skips what can wait: the allocators query no events and free no memory to CUDA while any
#   capture is open (allocator.pyx, host_allocator.pyx); that work runs once no capture is open.
# Graph capture records each capture here (capture.pyx), by device and stream; which capture ids
# are open, and which of them are conditional bodies, is the capture registry's (captures.pyx).
# Captures the runtime did not open (another library's) are not known, and CUDA's own error
# reports a call made during them.

cdef struct OpenCapture:
    int device
    void* stream

cdef vector[OpenCapture] _open_captures   # changed with the GIL held
cdef int _open_capture_count = 0           # its size, readable without the GIL


cdef int capture_opened(int device, void* stream) except -1:
    cdef OpenCapture capture
    capture.device = device
    capture.stream = stream
    _open_captures.push_back(capture)
    global _open_capture_count
    _open_capture_count = <int>_open_captures.size()
    return 0


cdef int capture_closed(void* stream) except -1:
    cdef size_t i
    for i in range(_open_captures.size()):
        if _open_captures[i].stream == stream:
            _open_captures.erase(_open_captures.begin() + i)
            break
    global _open_capture_count
    _open_capture_count = <int>_open_captures.size()
    return 0


cdef bint capture_open() noexcept nogil:
    return _open_capture_count > 0


cdef bint device_capturing(int device) noexcept:
    cdef OpenCapture capture
    for capture in _open_captures:
        if capture.device == device:
            return True
    return False


cdef unsigned long long stream_capture_id(void* stream, int device) except? 0:
    cdef cyruntime.cudaStreamCaptureStatus status = cyruntime.cudaStreamCaptureStatusNone
    cdef unsigned long long capture_id = 0
    cdef cudaError_t result
    cdef DeviceSwitch switch
    with nogil:
        enter_device(device, &switch)
        result = cyruntime.cudaStreamGetCaptureInfo(<cyruntime.cudaStream_t>stream, &status,
                                                    &capture_id, NULL, NULL, NULL, NULL)
        exit_device(&switch)
    if result == cyruntime.cudaErrorStreamCaptureImplicit:
        cyruntime.cudaGetLastError()  # the legacy default stream: it cannot take part
        return 0
    errors.check(result, b"cudaStreamGetCaptureInfo")
    return capture_id if status == cyruntime.cudaStreamCaptureStatusActive else 0


cdef int enter_relaxed(int* saved) except -1 nogil:
    cdef cyruntime.cudaStreamCaptureMode mode = cyruntime.cudaStreamCaptureModeRelaxed
    saved[0] = -1
    if _open_capture_count > 0:
        errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                     b"cudaThreadExchangeStreamCaptureMode")
        saved[0] = <int>mode
    return 0


cdef int exit_relaxed(int* saved) except -1 nogil:
    cdef cyruntime.cudaStreamCaptureMode mode
    if saved[0] >= 0:
        mode = <cyruntime.cudaStreamCaptureMode>saved[0]
        saved[0] = -1
        errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                     b"cudaThreadExchangeStreamCaptureMode")
    return 0


cdef bint stream_capturing(void* stream, int device) except -1:
    cdef cyruntime.cudaStreamCaptureStatus status = cyruntime.cudaStreamCaptureStatusNone
    cdef cudaError_t result
    cdef DeviceSwitch switch
    with nogil:
        enter_device(device, &switch)
        result = cyruntime.cudaStreamIsCapturing(<cyruntime.cudaStream_t>stream, &status)
        exit_device(&switch)
    if result == cyruntime.cudaErrorStreamCaptureImplicit:
        # The legacy default stream, while a blocking stream of its device captures: work
        # issued to it now would join (and break) that capture.
        cyruntime.cudaGetLastError()
        return True
    errors.check(result, b"cudaStreamIsCapturing")
    return status != cyruntime.cudaStreamCaptureStatusNone


cdef int refuse_on_capturing_stream(str what, void* stream, int device) except -1:
    if _open_capture_count == 0:
        return 0
    if stream_capturing(stream, device):
        raise RuntimeError(
            f"{what} cannot run on stream {<size_t>stream:#x} of cuda:{device} while it captures "
            "a graph: waiting for a capturing stream is forbidden "
            "(cudaErrorStreamCaptureUnsupported) and would invalidate the capture. Call it before "
            "the capture begins or after it ends")
    return 0


# current_accelerator()'s answer, made once: devices are immutable, so every call may share it.
# Kept only once the public class is registered (the generated module registers it at import).
cdef object _accelerator = None


cdef object current_accelerator(bint check_available):
    # Every build of tensorplay is a CUDA build; availability is a run-time question, and
    # is_available() counts the devices once (before initialisation too, without initialising).
    global _accelerator
    if check_available and not is_available():
        return None
    if _accelerator is not None:
        return _accelerator
    cls = public.public_class("DeviceCore", DeviceCore)
    accelerator = cls("cuda")
    if cls is not DeviceCore:
        _accelerator = accelerator
    return accelerator


cdef object device_object(int index):
    cls = public.public_class("DeviceCore", DeviceCore)
    return cls("cuda", index)


cdef dict get_device_capability(int index):
    checked_device(index)
    cdef cudaDeviceProp properties
    cdef int driver_version = 0, runtime_version = 0
    cdef int mode
    with nogil:
        enter_relaxed(&mode)  # queries, legal during any capture in relaxed mode
        try:
            errors.check(cyruntime.cudaGetDeviceProperties(&properties, index),
                         "cudaGetDeviceProperties")
            errors.check(cyruntime.cudaDriverGetVersion(&driver_version), "cudaDriverGetVersion")
            errors.check(cyruntime.cudaRuntimeGetVersion(&runtime_version),
                         "cudaRuntimeGetVersion")
        finally:
            exit_relaxed(&mode)
    return {
        "supported_dtypes": set(dtypes.all_dtypes()),
        "name": properties.name.decode(errors="replace"),
        "compute_capability": (properties.major, properties.minor),
        "total_memory": properties.totalGlobalMem,
        "multi_processor_count": properties.multiProcessorCount,
        # If nodes need CUDA 12.3 and while nodes 12.4, in both driver and runtime
        # (docs/design.md, "Conditional nodes").
        "conditional_nodes": min(driver_version, runtime_version) >= 12040,
        "driver_version": driver_version,
        "runtime_version": runtime_version,
    }


# --------------------------------------------------------------------------------------------
# Device arguments


# Device strings already parsed ("cuda:1" -> ("cuda", 1)): factories take device="cuda" on
# every call, and parsing it again each time was a good part of their cost. Bounded, so that
# a program generating strings cannot grow it without limit.
cdef dict _parsed_device_texts = {}
cdef int PARSED_DEVICE_TEXTS_KEPT = 64


cdef tuple _parse_device_text(str text):
    parsed = _parsed_device_texts.get(text)
    if parsed is None:
        device = DeviceCore(text)  # raises for a malformed string, which is never kept
        parsed = (device.kind, device.ordinal)
        if len(_parsed_device_texts) < PARSED_DEVICE_TEXTS_KEPT:
            _parsed_device_texts[text] = parsed
    return parsed


cdef int device_index_arg(object value, str argument) except -2:
    """A device argument as the index of a visible device; None means the current device.

    Accepts a tensorplay.device, any object with .type and .index (torch.device), "cuda",
    "cuda:1", or an int. An explicit index must name a visible device; a negative one is a
    ValueError.
    """
    return _device_argument(value, argument, False)


cdef int device_selection_arg(object value, str argument) except -3:
    """As device_index_arg, but -1 means "leave the current device" (set_device_index)."""
    return _device_argument(value, argument, True)


cdef str _device_expectation(str argument):
    return (f"{argument} must be a device, a string such as 'cuda:1', an int or None")


cdef int _device_argument(object value, str argument, bint minus_one_keeps) except -3:
    if value is None:
        return current_device()
    if isinstance(value, bool):
        raise TypeError(f"{_device_expectation(argument)}, got a bool ({value!r})")
    if isinstance(value, int):
        if value == -1 and minus_one_keeps:
            return -1
        if value < 0:
            allowed = "-1 (no change) or " if minus_one_keeps else ""
            raise ValueError(f"{argument} must be {allowed}a non-negative device index, got "
                             f"{errors.shown(value)}")
        return _visible_index(value, argument)
    if isinstance(value, str):
        kind, ordinal = _parse_device_text(value)
    elif isinstance(value, DeviceCore):
        kind, ordinal = (<DeviceCore>value).kind, (<DeviceCore>value).ordinal
    elif hasattr(value, "type") and hasattr(value, "index"):  # torch.device and friends
        kind, ordinal = value.type, value.index
        if not isinstance(kind, str) or not (ordinal is None or (
                isinstance(ordinal, int) and not isinstance(ordinal, bool) and ordinal >= 0)):
            raise TypeError(f"{argument} has .type {errors.shown(kind)} and .index "
                            f"{errors.shown(ordinal)}; expected a str and a non-negative int "
                            f"or None, as torch.device has")
        ordinal = -1 if ordinal is None else ordinal
    else:
        raise TypeError(f"{_device_expectation(argument)}, got {type(value).__name__} "
                        f"({errors.shown(value)})")
    if kind != "cuda":
        raise ValueError(f"{argument} must be a CUDA device, got {kind!r} ({errors.shown(value)})")
    return current_device() if ordinal < 0 else _visible_index(ordinal, argument)


cdef int _visible_index(object index, str argument) except -1:
    cdef int count = device_count()
    if index >= count:
        visible = "no CUDA device is visible" if count == 0 else (
            f"{count} CUDA device(s) are visible, so valid indices are 0 to {count - 1}")
        raise ValueError(f"{argument}: device index {errors.shown(index)} is out of range: "
                         f"{visible}")
    return index


cdef int tensor_device_arg(object value, str argument) except -3:
    """Where a tensor lives: None (-2, unspecified), the CPU (-1), or a CUDA device index."""
    if value is None:
        return -2
    if isinstance(value, str):  # parsed once, not again by device_index_arg
        kind, ordinal = _parse_device_text(value)
        if kind == "cpu":
            return -1
        return current_device() if ordinal < 0 else _visible_index(ordinal, argument)
    elif isinstance(value, DeviceCore):
        kind = (<DeviceCore>value).kind
    else:
        kind = getattr(value, "type", None)
    if kind == "cpu":
        return -1
    index = device_index_arg(value, argument)
    if index < 0:
        raise ValueError(f"{argument} must be 'cpu', a CUDA device or a non-negative index, "
                         f"got {errors.shown(value)}")
    return index


cdef class DeviceCore:
    def __cinit__(self, *args, **kwargs):
        self.kind = "cpu"
        self.ordinal = -1

    def __init__(self, type, index=None):
        self.init(type, index)

    cdef int init(self, object type, object index) except -1:
        if isinstance(type, DeviceCore):
            if index is not None:
                raise ValueError(f"index must be None when type is a device, got "
                                 f"{errors.shown(index)}")
            self.kind, self.ordinal = (<DeviceCore>type).kind, (<DeviceCore>type).ordinal
            return 0
        if not isinstance(type, str):
            raise TypeError(f"type must be a string such as 'cuda' or 'cuda:1', or a device, "
                            f"got {builtin_type(type).__name__}")
        kind, separator, ordinal_text = type.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device type in {errors.shown(type)}; expected 'cpu' or "
                             "'cuda', optionally with an index as in 'cuda:1'")
        ordinal = -1
        if separator:
            if not (ordinal_text.isascii() and ordinal_text.isdigit()):
                raise ValueError(f"invalid device index {errors.shown(ordinal_text)} in "
                                 f"{errors.shown(type)}; expected a non-negative integer as in "
                                 "'cuda:1'")
            if index is not None:
                raise ValueError(f"type {errors.shown(type)} already has an index, so index "
                                 f"must be None, got {errors.shown(index)}")
            # Checked by length first: int() of thousands of digits is slow, then refused.
            if len(ordinal_text.lstrip("0")) > 4:
                raise ValueError(f"device index {errors.shown(ordinal_text)} is too large: at "
                                 f"most {MAX_DEVICES} devices are supported")
            ordinal = int(ordinal_text)
        elif index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"index must be an int or None, got "
                                f"{builtin_type(index).__name__} ({errors.shown(index)})")
            if index < 0:
                raise ValueError(f"index must be a non-negative int or None, got "
                                 f"{errors.shown(index)}")
            ordinal = index
        if ordinal >= MAX_DEVICES:
            raise ValueError(f"device index {errors.shown(ordinal)} is too large: at most "
                             f"{MAX_DEVICES} devices are supported")
        self.kind, self.ordinal = kind, ordinal
        return 0

    cdef bint equals(self, object other):
        if not isinstance(other, DeviceCore):
            return False
        return self.kind == (<DeviceCore>other).kind and self.ordinal == (<DeviceCore>other).ordinal

    cdef Py_hash_t hash_value(self):
        return hash((self.kind, self.ordinal))

    cdef str repr_text(self):
        if self.ordinal < 0:
            return f"device(type='{self.kind}')"
        return f"device(type='{self.kind}', index={self.ordinal})"

    cdef str str_text(self):
        return self.kind if self.ordinal < 0 else f"{self.kind}:{self.ordinal}"

    cdef str type_name(self):
        return self.kind

    cdef object index_value(self):
        return None if self.ordinal < 0 else self.ordinal


builtin_type = type


cdef class DeviceIndexCore:
    def __cinit__(self, *args, **kwargs):
        self.target = -1
        self.previous = -1

    cdef int init(self, object device) except -1:
        # An int or None, as torch.accelerator.device_index takes (api.yaml).
        if device is not None and (isinstance(device, bool) or not isinstance(device, int)):
            raise TypeError(f"device must be a device index (an int) or None, got "
                            f"{builtin_type(device).__name__} ({errors.shown(device)})")
        self.target = -1 if device is None else device_selection_arg(device, "device")
        return 0

    cdef object enter(self):
        if self.target >= 0:
            ensure_initialized()
            self.previous = current_device()
            if self.target != self.previous:
                set_current_device(self.target)
        return None

    cdef object exit(self, object exc_type, object exc_value, object traceback):
        if self.previous >= 0 and self.previous != current_device():
            set_current_device(self.previous)
        self.previous = -1
        return None
