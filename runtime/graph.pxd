cdef class CaptureSettings:
    cdef object pool                   # what the user gave: None, a handle or another graph
    cdef int capture_mode              # cudaStreamCaptureMode

# What both public graph classes share; they differ only in their constructors.
cdef class GraphBase:
    cdef CaptureSettings settings
    cdef bint debug_mode
    cdef bint captured
    cdef object c_begin_capture_to_if_node(self, object scalar_pred)
    cdef object c_begin_capture_to_while_node(self, object scalar_pred)
    cdef object c_capture_begin(self, object pool, object capture_error_mode, object stream)
    cdef object c_capture_end(self)
    cdef object c_debug_dump(self, object path)
    cdef object c_enable_debug_mode(self)
    cdef object c_end_capture_to_conditional_node(self)
    cdef object c_instantiate(self)
    cdef object c_pool(self)
    cdef object c_replay(self, object stream)
    cdef object c_reset(self)
    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred)
    cdef object c_stage_and_launch(self, object static_inputs, object inputs)

cdef class CUDAGraphCore(GraphBase):
    cdef int init(self) except -1

cdef class GraphCore(GraphBase):
    cdef bint keep_graph
    cdef int init(self, object keep_graph, object pool, object capture_error_mode) except -1
    cdef object c_enter(self)
    cdef object c_exit(self, object exc_type, object exc_value, object traceback)

cdef int capture_mode_arg(object value, str argument) except -1
cdef object export_dot(object file_path)
cdef object graph_pool_handle()
cdef object graph_context(object cuda_graph, object pool, object stream, object capture_error_mode)
cdef bint is_current_stream_capturing() except -1
cdef object make_graphed_callables(object callables, object sample_args, object num_warmup_iters,
                                   object allow_unused_input, object pool,
                                   object capture_error_mode)
