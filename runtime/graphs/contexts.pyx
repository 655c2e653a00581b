# cython: language_level=3, auto_pickle=False
"""tensorplay.cuda.graphs' capture blocks over a CUDAGraph: graph(), which captures its block,
and recapture(), which captures it again and updates the executable (graph.pyx, Note
[Recapture]); graph_pool_handle(), the pool id several graphs share (pools.pyx); and
hold_with_pool(), which ties another object's lifetime to a graph's pool.
"""
from tensorplay._runtime.graphs cimport capture, graph
from tensorplay._runtime.memory cimport pools
from tensorplay._runtime.graphs.graph cimport GraphBase
from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.devices.stream cimport StreamCore


cdef class GraphContext:
    """What tensorplay.cuda.graphs.graph() returns: captures its block into cuda_graph."""
    cdef GraphBase cuda_graph
    cdef object pool
    cdef StreamCore stream
    cdef int capture_mode

    def __enter__(self):
        graph.prepare_device(capture.capture_device(self.stream), self.pool)
        self.cuda_graph.begin(self.pool, self.capture_mode, self.stream)
        return self.cuda_graph

    def __exit__(self, exc_type, exc_value, traceback):
        self.cuda_graph.finish_block(exc_value)
        return None


cdef int _cuda_graph_arg(object cuda_graph) except -1:
    # Only a CUDAGraph takes the side stream by default (init_cuda_graph): graph() and
    # recapture() are its blocks.
    if not (isinstance(cuda_graph, GraphBase)
            and (<GraphBase>cuda_graph).settings.side_stream_default):
        raise TypeError(f"cuda_graph must be a tensorplay.cuda.CUDAGraph, got "
                        f"{type(cuda_graph).__name__}")
    return 0


cdef class RecaptureContext:
    """What tensorplay.cuda.graphs.recapture() returns: captures its block into cuda_graph
    again and updates its executable (graph.pyx, Note [Recapture])."""
    cdef GraphBase cuda_graph
    cdef StreamCore stream
    cdef int capture_mode
    cdef bint reinstantiate

    def __enter__(self):
        self.cuda_graph.begin(None, self.capture_mode, self.stream, True)
        return self.cuda_graph

    def __exit__(self, exc_type, exc_value, traceback):
        if exc_value is None:
            self.cuda_graph.c_recapture_end(self.reinstantiate)
        else:
            self.cuda_graph.finish_block(exc_value)
        return None


cpdef object recapture_context(object cuda_graph, StreamCore stream, int capture_error_mode,
                               bint reinstantiate):
    _cuda_graph_arg(cuda_graph)
    cdef RecaptureContext context = RecaptureContext.__new__(RecaptureContext)
    context.cuda_graph = cuda_graph
    context.stream = stream
    context.capture_mode = capture_error_mode
    context.reinstantiate = reinstantiate
    return context


cpdef object hold_with_pool(object cuda_graph, object value):
    """Keep value alive while cuda_graph holds its pool: until its reset(), a capture that
    fails, or its deletion (graph.pyx, release_pool_reference). The bridge (python/
    torch_bridge.py) ties PyTorch's MemPool to the graph this way, so that the runtime imports
    nothing of PyTorch's."""
    if not isinstance(cuda_graph, GraphBase):
        raise TypeError(f"cuda_graph must be a tensorplay graph, got {type(cuda_graph).__name__}")
    if not (<GraphBase>cuda_graph).capture.holds_pool:
        raise ValueError("cuda_graph holds no pool (it is not capturing and has not captured, "
                         "or was reset); hold values with it during or after a capture")
    (<GraphBase>cuda_graph).held.append(value)
    return None


cpdef tuple held_with_pool(object cuda_graph):
    if not isinstance(cuda_graph, GraphBase):
        raise TypeError(f"cuda_graph must be a tensorplay graph, got {type(cuda_graph).__name__}")
    return tuple((<GraphBase>cuda_graph).held)


cdef object graph_pool_handle():
    cdef PoolId handle = pools.new_pool_handle()
    return (handle.first, handle.second)


cpdef object graph_context(object cuda_graph, object pool, StreamCore stream,
                           int capture_error_mode):
    _cuda_graph_arg(cuda_graph)
    cdef GraphContext context = GraphContext.__new__(GraphContext)
    context.cuda_graph = cuda_graph
    context.pool = pool
    context.stream = stream
    context.capture_mode = capture_error_mode
    return context
