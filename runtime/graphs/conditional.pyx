# cython: language_level=3, auto_pickle=False
"""Conditional graph nodes: if, if/else, while and switch, captured into their bodies.

Conditional nodes follow the capture-into-body recipe of PyTorch and cuda.core: a one-thread
kernel (kernels/graphs.cu) copies the predicate into a condition handle, the node joins the
capture after it, and each body graph is captured on a stream of its own
(cudaStreamBeginCaptureToGraph) that stays current until end_capture_to_conditional_node(); a
while node's body copies the predicate again as its last step. graph.pyx's GraphBase keeps the
open bodies and their pools; this module holds the steps that talk to CUDA.
"""
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free

from cuda.bindings cimport cyruntime
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport (cudaGraphEdgeData, cudaGraphNode_t, cudaGraphNodeParams,
                                      cudaGraphNodeTypeConditional, cudaGraph_t,
                                      cudaStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                                      cudaStreamCaptureStatus, cudaStreamCaptureStatusNone,
                                      cudaStreamNonBlocking, cudaStreamSetCaptureDependencies,
                                      cudaStream_t)

from tensorplay._runtime.memory cimport pools
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.tensor.core cimport TensorCore


cdef class ConditionalBody:
    """One open conditional node of a capture (conditional.pxd lists its state)."""


cdef int begin_body(int device, CUfunction setter, uintptr_t predicate, int node_type,
                     unsigned int size, int capture_mode, ConditionalBody body,
                     unsigned long long* body_capture_id) except -1:
    """Add a conditional node after a predicate-copying kernel; start capturing its body."""
    cdef cudaStream_t parent = body.parent
    cdef void* arguments[2]
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef cudaGraph_t graph = NULL
    cdef const cudaGraphNode_t* dependencies = NULL
    cdef const cudaGraphEdgeData* edges = NULL
    cdef size_t dependency_count = 0
    cdef cudaGraphNode_t node = NULL
    # Zeroed on the heap: C++ cannot default-construct the struct (a union of non-trivial
    # members), and CUDA wants its unused fields zero.
    cdef cudaGraphNodeParams* params = <cudaGraphNodeParams*>calloc(1, sizeof(cudaGraphNodeParams))
    cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
    cdef DeviceSwitch saved
    if params == NULL:
        raise MemoryError("cannot allocate the parameters of a conditional graph node")
    with nogil:
        _device.enter_device(device, &saved)
        try:
            errors.check(cyruntime.cudaStreamGetCaptureInfo(parent, &status, NULL, &graph, NULL,
                                                            NULL, NULL),
                         b"cudaStreamGetCaptureInfo")
            errors.check(cyruntime.cudaGraphConditionalHandleCreate(&body.handle, graph, 0, 0),
                         b"cudaGraphConditionalHandleCreate")
            arguments[0] = &body.handle
            arguments[1] = &predicate
            kernels.launch(device, setter, 1, 1, 0, parent, arguments)
            # The node follows the kernel: the capture's frontier now, with its edge data.
            errors.check(cyruntime.cudaStreamGetCaptureInfo(parent, &status, NULL, &graph,
                                                            &dependencies, &edges,
                                                            &dependency_count),
                         b"cudaStreamGetCaptureInfo")
            params.type = cudaGraphNodeTypeConditional
            params.conditional.handle = body.handle
            params.conditional.type = <cyruntime.cudaGraphConditionalNodeType>node_type
            params.conditional.size = size
            errors.check(cyruntime.cudaGraphAddNode(&node, graph, dependencies, edges,
                                                    dependency_count, params),
                         b"cudaGraphAddNode")
            body.node = node
            body.graphs = params.conditional.phGraph_out
            body.size = size
            errors.check(cyruntime.cudaStreamUpdateCaptureDependencies(
                parent, &node, NULL, 1, cudaStreamSetCaptureDependencies),
                b"cudaStreamUpdateCaptureDependencies")
            # Creating the body's stream is not captured work: relaxed mode around it.
            errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                         b"cudaThreadExchangeStreamCaptureMode")
            try:
                errors.check(cyruntime.cudaStreamCreateWithFlags(&body.stream,
                                                                 cudaStreamNonBlocking),
                             b"cudaStreamCreateWithFlags")
            finally:
                errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                             b"cudaThreadExchangeStreamCaptureMode")
            errors.check(cyruntime.cudaStreamBeginCaptureToGraph(
                body.stream, params.conditional.phGraph_out[0], NULL, NULL, 0,
                <cudaStreamCaptureMode>capture_mode), b"cudaStreamBeginCaptureToGraph")
            body.capturing = True
            errors.check(cyruntime.cudaStreamGetCaptureInfo(body.stream, &status,
                                                            body_capture_id, NULL, NULL, NULL,
                                                            NULL),
                         b"cudaStreamGetCaptureInfo")
        finally:
            free(params)
            _device.exit_device(&saved)
    return 0


cdef bint captured_nothing(int device, cudaStream_t stream) except -1:
    """Whether the capture on stream has no node yet (its frontier is empty)."""
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef size_t count = 0
    cdef const cudaGraphNode_t* dependencies = NULL
    cdef DeviceSwitch saved
    with nogil:
        _device.enter_device(device, &saved)
        try:
            errors.check(cyruntime.cudaStreamGetCaptureInfo(stream, &status, NULL, NULL,
                                                            &dependencies, NULL, &count),
                         b"cudaStreamGetCaptureInfo")
        finally:
            _device.exit_device(&saved)
    return count == 0


cdef int end_loop(int device, ConditionalBody body) except -1:
    """Capture into body a kernel that sets its condition to false: the loop runs once."""
    cdef CUfunction clear = kernels.get_kernel(device, "graphs", "clear_conditional", "")
    cdef void* arguments[1]
    arguments[0] = &body.handle
    with nogil:
        kernels.launch(device, clear, 1, 1, 0, body.stream, arguments)
    return 0


cdef int set_predicate(int device, ConditionalBody body, TensorCore predicate) except -1:
    """Capture, on the body's stream, a copy of predicate into the body's condition: what a
    while node's body does last, and set_conditional_handle_for_current_node()."""
    cdef CUfunction setter = setter_kernel(device, body.is_switch)
    cdef uintptr_t predicate_address = predicate.data
    cdef void* arguments[2]
    arguments[0] = &body.handle
    arguments[1] = &predicate_address
    with nogil:
        kernels.launch(device, setter, 1, 1, 0, body.stream, arguments)
    return 0


cdef CUfunction setter_kernel(int device, bint index=False) except NULL:
    """The predicate-copying kernel (index: the one copying a switch node's index)."""
    return kernels.get_kernel(device, "graphs",
                              "set_conditional_index" if index else "set_conditional", "")


# -- if/else and switch nodes: several bodies, captured one after the other -------------------

cdef int require_multi_body_nodes(str what) except -1:
    """If/else (an if node of two bodies) and switch nodes arrived with CUDA 12.8."""
    cdef int version = 0
    errors.check(cyruntime.cudaDriverGetVersion(&version), b"cudaDriverGetVersion")
    if version < 12080:
        raise RuntimeError(f"{what} needs a CUDA 12.8 or newer driver for if/else and switch "
                           f"graph nodes, and this one supports CUDA {version // 1000}."
                           f"{version % 1000 // 10}; update the NVIDIA driver, or use "
                           "begin_capture_to_if_node() instead")
    return 0


cdef int next_body(int device, int capture_mode, ConditionalBody body,
                    unsigned long long holder) except -1:
    """End the capture of the body being captured, and capture the next on the same stream.
    Its allocations go to the node's pool, routed by the new capture's id."""
    cdef cudaGraph_t captured = NULL
    cdef unsigned long long capture_id = 0
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef DeviceSwitch saved
    if body.routing:
        body.routing = False
        pools.end_allocate_to_pool(device, body.pool)
    captures.capture_ended(body.capture_id)
    with nogil:
        _device.enter_device(device, &saved)
        try:
            body.capturing = False
            # Captured into the node's own body graph: nothing to destroy. Every stream that
            # joined it has joined back (graph.pyx, end_body_check).
            errors.check(cyruntime.cudaStreamEndCapture(body.stream, &captured),
                         b"cudaStreamEndCapture (conditional body)")
            body.branch += 1
            errors.check(cyruntime.cudaStreamBeginCaptureToGraph(
                body.stream, body.graphs[body.branch], NULL, NULL, 0,
                <cudaStreamCaptureMode>capture_mode), b"cudaStreamBeginCaptureToGraph")
            body.capturing = True
            errors.check(cyruntime.cudaStreamGetCaptureInfo(body.stream, &status, &capture_id,
                                                            NULL, NULL, NULL, NULL),
                         b"cudaStreamGetCaptureInfo")
        finally:
            _device.exit_device(&saved)
    body.capture_id = capture_id
    captures.capture_began(capture_id, holder)
    pools.begin_allocate_to_pool(device, body.pool, capture_id, holder)
    body.routing = True
    return 0


cdef int fill_empty_bodies(int device, ConditionalBody body) except -1:
    """Give each body the capture never reached (or left without work) one empty node, so that
    every body is a graph with a node to run. Building a graph is not captured work: relaxed
    mode, as the enclosing capture may still be open."""
    cdef unsigned int index
    cdef size_t count
    cdef cudaGraphNode_t empty = NULL
    cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
    cdef DeviceSwitch saved
    with nogil:
        _device.enter_device(device, &saved)
        try:
            errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                         b"cudaThreadExchangeStreamCaptureMode")
            try:
                for index in range(body.size):
                    count = 0
                    errors.check(cyruntime.cudaGraphGetNodes(body.graphs[index], NULL, &count),
                                 b"cudaGraphGetNodes")
                    if count == 0:
                        errors.check(cyruntime.cudaGraphAddEmptyNode(&empty, body.graphs[index],
                                                                     NULL, 0),
                                     b"cudaGraphAddEmptyNode")
            finally:
                errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                             b"cudaThreadExchangeStreamCaptureMode")
        finally:
            _device.exit_device(&saved)
    return 0
