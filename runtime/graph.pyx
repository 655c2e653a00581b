# cython: language_level=3
"""CUDA graph capture and replay: the argument rules and the no-GPU behaviour.

Capture itself (private pools through allocator.begin_allocate_to_pool, conditional nodes,
DOT dumps, staging) is the graph-capture issue's work; until it lands, a capture on a machine
with a GPU raises NotImplementedError saying so, and on a machine without one every capture
path raises the no-accelerator RuntimeError (docs/design.md, "Without a GPU").
"""
from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaStreamCaptureStatus, cudaStreamCaptureStatusNone)

from tensorplay._runtime cimport allocator, device as _device, errors
from tensorplay._runtime cimport stream as _stream

# capture_error_mode -> cudaStreamCaptureMode (docs/design.md, "Capture rules").
CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}
UNSET = "__unset__"


cdef int capture_mode_arg(object value, str argument) except -1:
    if not isinstance(value, str) or value not in CAPTURE_MODES:
        raise ValueError(f"{argument} must be one of {', '.join(map(repr, CAPTURE_MODES))}, "
                         f"got {value!r}")
    return CAPTURE_MODES[value]


cdef int _pool_arg(object pool) except -1:
    """Accept None, a handle from graph_pool_handle(), a graph, or a graph's pool id."""
    if pool is None or isinstance(pool, GraphBase):
        return 0
    if isinstance(pool, tuple) and len(pool) == 2 and all(
            isinstance(part, int) and not isinstance(part, bool) and part >= 0 for part in pool):
        return 0
    raise TypeError(f"pool must be None, a handle from graph_pool_handle(), a graph or a "
                    f"graph's pool_id, got {pool!r}")


cdef int _needs_capture_support(str what) except -1:
    if not _device.is_available():
        errors.raise_no_accelerator(what)
    raise NotImplementedError(
        f"{what}: CUDA graph capture is not implemented in this build yet (it arrives with "
        "the graph-capture issue); devices, streams and memory are")


cdef class CaptureSettings:
    def __cinit__(self):
        self.pool = None
        self.capture_mode = 0


cdef class GraphBase:
    def __cinit__(self, *args, **kwargs):
        self.settings = CaptureSettings()

    cdef object c_begin_capture_to_if_node(self, object scalar_pred):
        _needs_capture_support("begin_capture_to_if_node()")

    cdef object c_begin_capture_to_while_node(self, object scalar_pred):
        _needs_capture_support("begin_capture_to_while_node()")

    cdef object c_capture_begin(self, object pool, object capture_error_mode, object stream):
        if isinstance(pool, str) and pool == UNSET:
            pool = self.settings.pool
        if isinstance(capture_error_mode, str) and capture_error_mode == UNSET:
            capture_mode = self.settings.capture_mode
        else:
            capture_mode = capture_mode_arg(capture_error_mode, "capture_error_mode")
        _pool_arg(pool)
        _stream.stream_arg(stream, "stream")
        _needs_capture_support("capture_begin()")

    cdef object c_capture_end(self):
        raise RuntimeError("capture_end() called without an open capture; call "
                           "capture_begin() first")

    cdef object c_debug_dump(self, object path):
        raise RuntimeError("debug_dump() needs a captured graph; capture one first (with "
                           "enable_debug_mode() called before the capture)")

    cdef object c_enable_debug_mode(self):
        self.debug_mode = True
        return None

    cdef object c_end_capture_to_conditional_node(self):
        raise RuntimeError("end_capture_to_conditional_node() called without an open "
                           "conditional node")

    cdef object c_instantiate(self):
        if not self.captured:
            raise RuntimeError("instantiate() needs a completed capture; call capture_begin() "
                               "and capture_end() first")
        return None

    cdef object c_pool(self):
        return self.settings.pool if isinstance(self.settings.pool, tuple) else None

    cdef object c_replay(self, object stream):
        _stream.stream_arg(stream, "stream")
        raise RuntimeError("replay() needs a captured graph; capture one first")

    cdef object c_reset(self):
        self.captured = False
        return None

    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred):
        raise RuntimeError("set_conditional_handle_for_current_node() called without an open "
                           "conditional node")

    cdef object c_stage_and_launch(self, object static_inputs, object inputs):
        if len(static_inputs) != len(inputs):
            raise ValueError(f"static_inputs and inputs must pair up, got {len(static_inputs)} "
                             f"static buffers and {len(inputs)} inputs")
        raise RuntimeError("stage_and_launch() needs a captured graph; capture one first")


cdef class CUDAGraphCore(GraphBase):
    cdef int init(self) except -1:
        return 0


cdef class GraphCore(GraphBase):
    cdef int init(self, object keep_graph, object pool, object capture_error_mode) except -1:
        if not isinstance(keep_graph, bool):
            raise TypeError(f"keep_graph must be a bool, got {keep_graph!r}")
        _pool_arg(pool)
        self.keep_graph = keep_graph
        self.settings.pool = pool
        self.settings.capture_mode = capture_mode_arg(capture_error_mode, "capture_error_mode")
        return 0

    cdef object c_enter(self):
        # As torch.accelerator.Graph.__enter__: capture starts from a quiet device.
        _device.synchronize(_device.current_device())
        self.c_capture_begin(UNSET, UNSET, None)
        return self

    cdef object c_exit(self, object exc_type, object exc_value, object traceback):
        self.c_capture_end()
        return None


cdef object export_dot(object file_path):
    if not isinstance(file_path, str):
        raise TypeError(f"file_path must be a str, got {type(file_path).__name__}")
    raise RuntimeError("export_dot() needs a completed capture, and none has completed in this "
                       "process; capture a graph first")


cdef object graph_pool_handle():
    cdef allocator.PoolId handle = allocator.new_pool_handle()
    return (handle.first, handle.second)


class GraphContext:
    """What tensorplay.cuda.graphs.graph() returns: captures its block into cuda_graph."""

    def __init__(self, cuda_graph, pool, stream, capture_error_mode):
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.stream = stream
        self.capture_error_mode = capture_error_mode

    def __enter__(self):
        self.cuda_graph.capture_begin(self.pool, self.capture_error_mode, self.stream)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self.cuda_graph.capture_end()
        return None


cdef object graph_context(object cuda_graph, object pool, object stream,
                          object capture_error_mode):
    if not isinstance(cuda_graph, CUDAGraphCore):
        raise TypeError(f"cuda_graph must be a tensorplay.cuda.CUDAGraph, got "
                        f"{type(cuda_graph).__name__}")
    _pool_arg(pool)
    _stream.stream_arg(stream, "stream")
    capture_mode_arg(capture_error_mode, "capture_error_mode")
    return GraphContext(cuda_graph, pool, stream, capture_error_mode)


cdef bint is_current_stream_capturing() except -1:
    if not _device.is_initialized():
        return False
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef int current = _device.current_device()
    with nogil:
        errors.check(cyruntime.cudaStreamIsCapturing(_stream.current_stream_handle(current),
                                                     &status), "cudaStreamIsCapturing")
    return status != cudaStreamCaptureStatusNone


cdef object make_graphed_callables(object callables, object sample_args, object num_warmup_iters,
                                   object allow_unused_input, object pool,
                                   object capture_error_mode):
    if isinstance(num_warmup_iters, bool) or not isinstance(num_warmup_iters, int) \
            or num_warmup_iters < 0:
        raise ValueError(f"num_warmup_iters must be a non-negative int, got {num_warmup_iters!r}")
    _pool_arg(pool)
    capture_mode_arg(capture_error_mode, "capture_error_mode")
    _needs_capture_support("make_graphed_callables()")
