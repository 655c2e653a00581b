# The graph() and recapture() blocks of tensorplay.cuda.graphs, and pool handles (contexts.pyx).
cdef object graph_context(object cuda_graph, object pool, object stream, object capture_error_mode)
cdef object recapture_context(object cuda_graph, object stream, object capture_error_mode,
                              object reinstantiate)
cdef object graph_pool_handle()
