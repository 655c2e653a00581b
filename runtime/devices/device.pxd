from cuda.bindings cimport cydriver
from cuda.bindings.cydriver cimport (CUDA_KERNEL_NODE_PARAMS, CUcontext, CUfunction, CUgraphExec,
                                     CUgraphNode, CUresult, CUstream, CUstreamCaptureStatus)

from tensorplay._runtime.base cimport errors

cdef enum:
    MAX_DEVICES = 64

# What enter_device changed on the calling thread, for exit_device to undo (docs/design.md,
# "Devices, threads and contexts").
cdef struct DeviceSwitch:
    CUcontext previous
    bint switched

cdef class DeviceCore:
    cdef readonly str kind
    cdef readonly int ordinal          # -1: no index given
    cdef int init(self, object type, object index) except -1
    cdef bint equals(self, object other)
    cdef Py_hash_t hash_value(self)
    cdef str repr_text(self)
    cdef str str_text(self)
    cdef str type_name(self)
    cdef object index_value(self)

cdef class DeviceIndexCore:
    cdef int target
    cdef int previous
    cdef int init(self, object device) except -1
    cdef object enter(self)
    cdef object exit(self, object exc_type, object exc_value, object traceback)

# Argument normalisation used by every generated wrapper (types.py: "Device" and
# "DeviceSelection"); the one place a device argument is checked (docs/design.md, "Where
# arguments are checked").
cdef int device_index_arg(object value, str argument) except -2
cdef int device_selection_arg(object value, str argument) except -3   # -1: "no change"
# Tensor placement: -2 for None (unspecified), -1 for the CPU, else the CUDA index.
cdef int tensor_device_arg(object value, str argument) except -3

# Initialisation and the current device.
cdef bint is_initialized() noexcept nogil
cdef int initialized_device_count() noexcept nogil   # 0 before initialisation
cdef int ensure_initialized() except -1
cdef int call_when_initialized(object callback) except -1
cdef int checked_device(int index) except -1
cdef int current_device() noexcept nogil
cdef int set_current_device(int index) except -1
# Around every CUDA call made for a given device (driver or runtime API), with or without the
# GIL: enter_device makes the device's primary context current on this thread, exit_device puts
# back what was current before, so the thread's current device is left as it was.
cdef int enter_device(int device, DeviceSwitch* saved) except -1 nogil
# Note [Driver entry points] (device.pyx): the driver's own cuCtxGetCurrent, cuLaunchKernel and
# cuGraphLaunch, for the launches on the hot paths (nvrtc.launch, CUDAGraph.replay), with the
# primary contexts' table. driver_entry_points() asks once (GIL held) and answers the same table
# after; an entry the driver lacks stays NULL, and its callers take the cydriver path.
ctypedef CUresult (*CtxGetCurrentEntry)(CUcontext*) noexcept nogil
ctypedef CUresult (*LaunchKernelEntry)(CUfunction, unsigned int, unsigned int, unsigned int,
                                       unsigned int, unsigned int, unsigned int, unsigned int,
                                       CUstream, void**, void**) noexcept nogil
ctypedef CUresult (*GraphLaunchEntry)(CUgraphExec, CUstream) noexcept nogil
# And, for the eager launches through graphs (nvrtc.pyx, Note [Eager launches through graphs]),
# cuGraphExecKernelNodeSetParams and cuStreamIsCapturing.
ctypedef CUresult (*ExecKernelNodeSetParamsEntry)(CUgraphExec, CUgraphNode,
                                                  const CUDA_KERNEL_NODE_PARAMS*) noexcept nogil
ctypedef CUresult (*StreamIsCapturingEntry)(CUstream, CUstreamCaptureStatus*) noexcept nogil
cdef struct DriverEntryPoints:
    CtxGetCurrentEntry ctx_get_current
    LaunchKernelEntry launch_kernel
    GraphLaunchEntry graph_launch
    ExecKernelNodeSetParamsEntry exec_kernel_node_set_params
    StreamIsCapturingEntry stream_is_capturing
    CUcontext* primary_contexts
    bint per_thread_default_stream   # stream 0 is each thread's own default stream
cdef DriverEntryPoints* driver_entry_points() except NULL

# Whether device's primary context is current on this thread: enter_device's usual case, which
# needs no switch, read through the driver's entry point.
cdef inline bint primary_context_current(DriverEntryPoints* entries, int device) noexcept nogil:
    cdef CUcontext current = NULL
    return (entries.ctx_get_current != NULL and 0 <= device < MAX_DEVICES
            and entries.ctx_get_current(&current) == cydriver.CUDA_SUCCESS and current != NULL
            and current == entries.primary_contexts[device])

# Inline: on every CUDA call, where enter_device switched nothing (the usual case), a compare.
cdef inline int exit_device(DeviceSwitch* saved) except -1 nogil:
    if saved.switched:
        saved.switched = False
        return errors.check_driver(cydriver.cuCtxSetCurrent(saved.previous), b"cuCtxSetCurrent")
    return 0

cdef object device_object(int index)

# Open graph captures of the process (device.pyx, Note [Calls during capture]). The graph code
# reports each capture it begins and ends; the rest of the runtime asks before a CUDA call that a
# capture forbids.
# A capture is reported open before cudaStreamBeginCapture runs. Its id, and the captures of its
# conditional bodies, are recorded by the capture registry (captures.pxd).
cdef int capture_opened(int device, void* stream) except -1
cdef int capture_closed(void* stream) except -1
cdef bint capture_open() noexcept nogil              # any capture open in the process
cdef bint device_capturing(int device) noexcept      # any capture open on device
# The id of the capture stream takes part in (begun on it, or joined through an event wait), or
# 0 when it takes part in none (the legacy default stream never does). A legal call anytime.
cdef unsigned long long stream_capture_id(void* stream, int device) except? 0
# Around a CUDA call that is legal during a capture only in relaxed mode (stream and event
# creation and destruction, queries of streams that do not capture): switches this thread to
# relaxed mode while any capture is open; exit_relaxed puts the mode back.
cdef int enter_relaxed(int* saved) except -1 nogil
cdef int exit_relaxed(int* saved) except -1 nogil
# Whether stream captures (the legacy default stream counts while a blocking stream of its
# device captures: work on it would join that capture). A legal call during any capture.
cdef bint stream_capturing(void* stream, int device) except -1
# Refuse `what` before its CUDA call when it would wait for (or on) a capturing stream.
cdef int refuse_on_capturing_stream(str what, void* stream, int device) except -1

# The accelerator API (api.yaml: tensorplay.accelerator).
cdef object current_accelerator(bint check_available)
cdef int current_device_index() except -1
cdef int device_count() except -1
cdef dict get_device_capability(int index)
cdef bint is_available() except -1
cdef object set_device_index(int index)
cdef object synchronize(int index)
