# cython: language_level=3, auto_pickle=False
"""Conditional graph nodes: if, if/else, while and switch, captured into their bodies.

Conditional nodes follow the capture-into-body recipe of PyTorch and cuda.core: a one-thread
kernel (kernels/graphs.cu) copies the predicate into a condition handle, the node joins the
capture after it, and each body graph is captured on a stream of its own
(cudaStreamBeginCaptureToGraph) that stays current until end_capture_to_conditional_node(); a
while node's body copies the predicate again as its last step. A graph's ConditionalStack keeps
the open bodies, and what its capture's nodes hold: allocations in a body go to a private pool
of their own (the allocator routes one capture id per pool), held like the graph's pool, and
the predicates the nodes read at replay. graph.pyx's GraphBase calls its steps with the graph's
capture and generator states; the functions below them are the steps that talk to CUDA.
"""
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free

from cuda.bindings cimport cyruntime
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport (cudaError_t, cudaGraphCondTypeSwitch,
                                      cudaGraphCondTypeWhile, cudaGraphEdgeData,
                                      cudaGraphNode_t, cudaGraphNodeParams,
                                      cudaGraphNodeTypeConditional, cudaGraph_t,
                                      cudaStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                                      cudaStreamCaptureStatus, cudaStreamCaptureStatusNone,
                                      cudaStreamNonBlocking, cudaStreamSetCaptureDependencies,
                                      cudaStream_t, cudaSuccess)

from tensorplay._runtime.memory cimport pools
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.random cimport rng
from tensorplay._runtime.tensor cimport core as tensor, factories
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.graphs.capture cimport CaptureState
from tensorplay._runtime.random.rng cimport GraphGenerators
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.graphs.graph_topology import CONDITIONAL_TYPES


cdef class ConditionalBody:
    """One open conditional node of a capture (conditional.pxd lists its state)."""


cdef class ConditionalStack:
    """A graph's conditional nodes (conditional.pxd lists its state)."""

    def __cinit__(self):
        self.bodies = []
        self.pools = []
        self.predicates = []
        self.nodes = {}

    cdef int open(self, CaptureState capture, GraphGenerators generators, int device,
                  TensorCore predicate, str argument, int node_type, str what,
                  unsigned int size) except -1:
        if not capture.capturing:
            raise RuntimeError(f"{what} needs an open capture: call it between capture_begin() "
                               "and capture_end()")
        cdef bint is_switch = node_type == cudaGraphCondTypeSwitch
        _check_scalar(device, predicate, argument, "int32" if is_switch else "bool")
        cdef CUfunction setter = _setter_kernel(device, is_switch)
        cdef ConditionalBody body = ConditionalBody.__new__(ConditionalBody)
        body.is_switch = is_switch
        body.parent = (<ConditionalBody>self.bodies[-1]).stream if self.bodies \
            else capture.stream
        body.predicate = predicate
        body.is_while = node_type == cudaGraphCondTypeWhile
        cdef unsigned long long body_capture_id = 0
        cdef PoolId body_pool
        self.bodies.append(body)  # from here on, close() undoes what was done
        try:
            _begin_body(device, setter, predicate.data, node_type, size, capture.mode, body,
                        &body_capture_id)
            body.capture_id = body_capture_id
            captures.capture_began(body_capture_id, capture.capture_id)
            rng.enter_body(generators, body_capture_id)
            self.nodes[<uintptr_t>body.node] = (
                CONDITIONAL_TYPES[node_type], [<uintptr_t>body.graphs[i] for i in range(size)])
            body_pool = pools.new_graph_pool()
            pools.retain_pool(device, body_pool)
            self.pools.append((body_pool.first, body_pool.second))
            pools.begin_allocate_to_pool(device, body_pool, body_capture_id, capture.capture_id)
            body.pool = body_pool
            body.routing = True
            self.predicates.append(predicate)
            if PyThread_get_thread_ident() == capture.thread:
                _stream.put_current_stream(device, body.stream)
                _stream.current_stream_changed(device)  # stream.pyx, Note [Current stream
                                                        # listeners]
        except BaseException:
            self.close(capture, generators, device, False)  # the capture goes on without it
            raise
        return 0

    cdef int close(self, CaptureState capture, GraphGenerators generators, int device,
                   bint keep) except -1:
        """End the innermost body's capture: kept (its node stays), or on the way to discard."""
        cdef ConditionalBody body = self.bodies.pop()
        cdef cudaGraph_t body_graph = NULL
        cdef cudaError_t status = cudaSuccess
        cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
        cdef DeviceSwitch saved
        cdef uintptr_t body_stream = <uintptr_t>body.stream
        cdef bint workless = False
        try:
            _close_body_generators(generators, body, keep)
            if keep and body.is_while:
                # A body without work would only re-read the predicate: replay would loop
                # forever while it holds. Such a body ends the loop instead, and is refused.
                workless = _captured_nothing(device, body.stream)
                if workless:
                    _end_loop(device, body)
                else:
                    _set_predicate(device, body, body.predicate)  # after each pass
        finally:
            try:
                if body.routing:
                    body.routing = False
                    pools.end_allocate_to_pool(device, body.pool)
            finally:
                if body.capturing and not keep:  # _end_body_check() refused a kept one
                    # CUDA cannot end a body with unjoined work: join it back, as it goes.
                    for side in captures.unjoined_streams(device, body.stream,
                                                          body.capture_id):
                        _stream.order_after(device, <uintptr_t>body.stream, side)
                captures.capture_ended(body.capture_id)
                with nogil:
                    _device.enter_device(device, &saved)
                    if body.capturing:
                        body.capturing = False
                        status = cyruntime.cudaStreamEndCapture(body.stream, &body_graph)
                        if status != cudaSuccess:
                            cyruntime.cudaGetLastError()
                    if body.stream != NULL:
                        cyruntime.cudaThreadExchangeStreamCaptureMode(&mode)
                        cyruntime.cudaStreamDestroy(body.stream)
                        cyruntime.cudaThreadExchangeStreamCaptureMode(&mode)
                        body.stream = NULL
                    _device.exit_device(&saved)
                if PyThread_get_thread_ident() == capture.thread:
                    _stream.put_current_stream(device, body.parent)
        if PyThread_get_thread_ident() == capture.thread:
            _stream.current_stream_changed(device)  # stream.pyx, Note [Current stream listeners]
        if keep and status != cudaSuccess:
            errors.raise_cuda_error(<int>status, "cudaStreamEndCapture (conditional body)")
        if workless:
            raise RuntimeError(
                f"the while node's body captured no work: nothing was launched on its capture "
                f"stream {body_stream:#x}, the stream current on cuda:{device} between "
                "begin_capture_to_while_node() and end_capture_to_conditional_node(). Work on "
                "another stream does not join the body unless that stream waits for this one. "
                "A loop without work would replay forever, so the node was closed with a body "
                "that ends the loop at once; the capture goes on")
        return 0

    cdef int end_node(self, CaptureState capture, GraphGenerators generators,
                      int device) except -1:
        if not self.bodies:
            raise RuntimeError("end_capture_to_conditional_node() called without an open "
                               "conditional node; call begin_capture_to_if_node() or "
                               "begin_capture_to_while_node() first")
        cdef ConditionalBody body = self.bodies[-1]
        _end_body_check(device, body, "end_capture_to_conditional_node()")
        self.close(capture, generators, device, True)
        if body.size > 1:
            _fill_empty_bodies(device, body)
        return 0

    cdef int next_body(self, CaptureState capture, GraphGenerators generators,
                       int device) except -1:
        if not self.bodies or (<ConditionalBody>self.bodies[-1]).size < 2:
            raise RuntimeError("begin_capture_to_next_body() needs an if/else or switch node as "
                               "the innermost open conditional node; call "
                               "begin_capture_to_if_else_node() or begin_capture_to_switch_node() "
                               "first, and close any node opened inside its body")
        cdef ConditionalBody body = self.bodies[-1]
        if body.branch + 1 >= body.size:
            raise RuntimeError(f"begin_capture_to_next_body(): all {body.size} bodies of the node "
                               "have been captured; call end_capture_to_conditional_node()")
        _end_body_check(device, body, "begin_capture_to_next_body()")
        # End one branch and begin the next: draws in each branch advance the generators'
        # offsets by what that branch drew.
        rng.leave_branch(generators, body.stream, True)
        _next_body(device, capture.mode, body, capture.capture_id)
        rng.next_branch(generators, body.capture_id)
        return 0

    cdef int set_handle(self, int device, TensorCore predicate) except -1:
        if not self.bodies:
            raise RuntimeError("set_conditional_handle_for_current_node() called without an open "
                               "conditional node")
        cdef ConditionalBody body = self.bodies[-1]
        _check_scalar(device, predicate, "scalar_pred", "int32" if body.is_switch else "bool")
        _set_predicate(device, body, predicate)
        body.predicate = predicate  # what a while node tests again at the end of its body
        self.predicates.append(predicate)
        return 0


cdef int release_pools(int device, list pool_ids) except -1:
    cdef PoolId body_pool
    while pool_ids:
        body_pool.first, body_pool.second = pool_ids.pop()
        pools.release_pool(device, body_pool)
    return 0


cdef int _end_body_check(int device, ConditionalBody body, str what) except -1:
    """Refuse to end a body's capture while a stream that joined it has not joined back:
    CUDA would fail the end (cudaErrorStreamCaptureUnjoined). Nothing changes; the body
    stays open for the join."""
    unjoined = captures.unjoined_streams(device, body.stream, body.capture_id)
    if unjoined:
        raise RuntimeError(captures.unjoined_text(what, device, unjoined,
                                                  "the conditional body") +
                           " The body is still open: join the stream back, then call "
                           f"{what} again")
    return 0


cdef int _close_body_generators(GraphGenerators generators, ConditionalBody body,
                                bint keep) except -1:
    """The body's last pass: what it drew advances the generators' offsets on the device
    (rng.pxd; Note [Offsets on the device] in rng.pyx). Nothing to do for a body whose capture
    never began."""
    if not body.capture_id:
        return 0
    try:
        rng.leave_branch(generators, body.stream, keep)
    finally:
        rng.leave_body(generators)
    return 0


cdef TensorCore predicate_arg(object value, str argument):
    # factories.tensor_arg makes a view of another library's tensor, reading no graph's state.
    return factories.tensor_arg(value, argument, -1)


cdef int _check_scalar(int device, TensorCore scalar, str argument, str dtype_name) except -1:
    """A predicate (or index) is a single-element tensor of dtype_name on the capture's
    device, which the node's setter kernel reads there."""
    if (scalar.dtype_object.name != dtype_name or scalar.element_count != 1
            or scalar.device_index != device):
        raise ValueError(f"{argument} must be a single-element {dtype_name} tensor on cuda:"
                         f"{device}, got {scalar.element_count} element(s) of "
                         f"{scalar.dtype_object.name} on "
                         f"{tensor.device_text(scalar.device_index)}")
    return 0


# -- the steps that talk to CUDA ---------------------------------------------------------------

cdef int _begin_body(int device, CUfunction setter, uintptr_t predicate, int node_type,
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


cdef bint _captured_nothing(int device, cudaStream_t stream) except -1:
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


cdef int _end_loop(int device, ConditionalBody body) except -1:
    """Capture into body a kernel that sets its condition to false: the loop runs once."""
    cdef CUfunction clear = kernels.get_kernel(device, "graphs", "clear_conditional", "")
    cdef void* arguments[1]
    arguments[0] = &body.handle
    with nogil:
        kernels.launch(device, clear, 1, 1, 0, body.stream, arguments)
    return 0


cdef int _set_predicate(int device, ConditionalBody body, TensorCore predicate) except -1:
    """Capture, on the body's stream, a copy of predicate into the body's condition: what a
    while node's body does last, and set_conditional_handle_for_current_node()."""
    cdef CUfunction setter = _setter_kernel(device, body.is_switch)
    cdef uintptr_t predicate_address = predicate.data
    cdef void* arguments[2]
    arguments[0] = &body.handle
    arguments[1] = &predicate_address
    with nogil:
        kernels.launch(device, setter, 1, 1, 0, body.stream, arguments)
    return 0


cdef CUfunction _setter_kernel(int device, bint index=False) except NULL:
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


cdef int _next_body(int device, int capture_mode, ConditionalBody body,
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
            # joined it has joined back (_end_body_check).
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


cdef int _fill_empty_bodies(int device, ConditionalBody body) except -1:
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
