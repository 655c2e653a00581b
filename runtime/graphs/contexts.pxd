# The graph() and recapture() blocks of tensorplay.cuda.graphs, and pool handles (contexts.pyx).
# A capture_error_mode arrives as its index in the schema's choices, which is its
# cudaStreamCaptureMode (capture.pyx). graph_context is Python-callable too: the Python layer's
# make_graphed_callables captures through it, with the arguments its wrapper checked.
from tensorplay._runtime.devices.stream cimport StreamCore

cpdef object graph_context(object cuda_graph, object pool, StreamCore stream,
                           int capture_error_mode)
cpdef object recapture_context(object cuda_graph, StreamCore stream, int capture_error_mode,
                               bint reinstantiate)
# Tie value's lifetime to cuda_graph's pool (graph.pxd, GraphBase.held): the bridge's MemPool.
cpdef object hold_with_pool(object cuda_graph, object value)
cpdef tuple held_with_pool(object cuda_graph)
cdef object graph_pool_handle()
