from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport (cudaGraphConditionalHandle, cudaGraphNode_t, cudaGraph_t,
                                      cudaGraphExec_t, cudaStream_t)

from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.graphs.conditional cimport ConditionalBody
from tensorplay._runtime.graphs.graph_update cimport ExecutableState, GraphTemplate
from tensorplay._runtime.random.rng cimport GraphGenerators
from tensorplay._runtime.devices.stream cimport StreamCore
from tensorplay._runtime.tensor.core cimport TensorCore

cdef class CaptureSettings:
    cdef object pool                   # checked: None, a pool id tuple or another graph
    cdef int capture_mode              # cudaStreamCaptureMode

# The core of both public graph classes (CUDAGraph and accelerator.Graph, generated from the
# schema's GraphBase): they differ in their constructors, in the stream a capture takes when none
# is given (Note [Capture state] in graph.pyx), and in Graph's with-block.
cdef class GraphBase:
    cdef object __weakref__            # export_dot() follows the latest graph without keeping it
    cdef CaptureSettings settings
    cdef bint debug_mode
    cdef bint keep_template            # keep the cudaGraph_t after instantiation (debug_dump)
    cdef bint side_stream_default      # stream=None: the side stream, not the current one
    cdef int device                    # the capture device; -1 before the first capture
    cdef cudaStream_t capture_stream
    cdef object capture_stream_owner   # the Stream given to capture_begin, alive until the end
    # The generator states the graph draws from (rng.pxd): the capture device's default
    # generator's and those of register_generator_state(); replays pay for them only when the
    # graph draws random numbers.
    cdef GraphGenerators generators
    cdef unsigned long long capture_id
    cdef PoolId pool_id
    cdef bint holds_pool               # retain_pool done: reset() or a failed capture releases
    cdef bint routing                  # begin_allocate_to_pool done: the capture's end stops it
    cdef bint capturing                # cudaStreamBeginCapture done and not ended
    cdef bint stream_swapped           # the capture stream is current on capture_thread
    cdef cudaGraph_t template
    cdef cudaGraphExec_t executable
    # Every stream the executable was launched on since it was made (Note [Streams a graph was
    # launched on], graph.pyx).
    cdef vector[cudaStream_t] launch_streams
    cdef list replay_events            # external events the first replay records, or None
    cdef int capture_mode              # of the open capture; its conditional bodies inherit it
    cdef list bodies                   # open conditional bodies, innermost last
    cdef list body_pools               # (first, second) pool ids retained for bodies' allocations
    cdef list predicates               # conditional predicates the graph reads at replay
    cdef int previous_device           # what capture_begin replaced, restored at its end
    cdef cudaStream_t previous_stream
    cdef unsigned long capture_thread
    cdef object capture_thread_object  # its threading.Thread, to know whether it still runs
    cdef void** capture_stream_slot    # its current-stream slot (stream.pxd)
    cdef int init_cuda_graph(self) except -1
    cdef int init_graph(self, bint keep_graph, object pool, str capture_error_mode) except -1
    cdef object c_enter(self)
    cdef object c_exit(self, object exc_type, object exc_value, object traceback)
    cdef int begin(self, object pool, int capture_mode, object stream,
                   bint recapture=*) except -1
    cdef int begin_on_stream(self, int capture_mode) except -1
    cdef int end(self) except -1
    cdef int end_capture(self, str what) except -1
    cdef int capture_failed(self) except -1
    cdef int instantiate_template(self) except -1
    cdef int publish_template(self, GraphTemplate owned) except -1
    cdef int finish_block(self, object exc_value) except -1
    cdef int discard_capture(self) except -1
    cdef int restore_stream(self) except -1
    cdef int check_capture_thread(self, str what) except -1
    cdef int capture_stopped(self) except -1
    cdef int release_pool_reference(self) except -1
    cdef int release_host_memory(self, unsigned long long holder) except -1
    cdef int destroy_graphs(self) except -1
    cdef int open_body(self, object scalar_pred, int node_type, str what,
                       unsigned int size=*) except -1
    cdef int close_body(self, bint keep) except -1
    cdef int end_body_check(self, ConditionalBody body, str what) except -1
    cdef object c_begin_capture_to_if_node(self, object scalar_pred)
    cdef object c_begin_capture_to_while_node(self, object scalar_pred)
    cdef object c_capture_begin(self, object pool, str capture_error_mode, StreamCore stream)
    cdef object c_capture_end(self)
    cdef object c_debug_dump(self, str path)
    cdef object c_enable_debug_mode(self)
    cdef object c_end_capture_to_conditional_node(self)
    cdef object c_instantiate(self)
    cdef object c_pool(self)
    cdef object c_replay(self, object stream)
    # Replay on handle (the graph's RNG record advanced, then one cuGraphLaunch).
    cdef int launch_on(self, cudaStream_t handle) except -1
    cdef object c_reset(self)
    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred)
    cdef object c_stage_and_launch(self, object static_inputs, object inputs)
    # Debugging (graph_topology.pyx): conditional node address -> (type, [body graph address]),
    # recorded as the capture adds each node.
    cdef dict conditional_nodes
    cdef object c_get_graph_data(self)
    cdef object c_raw_cuda_graph(self)
    cdef object c_raw_cuda_graph_exec(self)
    # if/else and switch nodes: several bodies, captured one after the other.
    cdef object c_begin_capture_to_if_else_node(self, object scalar_pred)
    cdef object c_begin_capture_to_switch_node(self, object scalar_index,
                                               unsigned int num_cases)
    cdef object c_begin_capture_to_next_body(self)
    # Graph-safe state (rng.pxd, Note [Offsets on the device] in rng.pyx).
    cdef object c_register_generator_state(self, object generator)
    cdef int close_body_generators(self, ConditionalBody body, bint keep) except -1
    cdef int next_body_generators(self, ConditionalBody body) except -1
    # Graph update (graph_update.pyx; Note [Recapture] in graph.pyx): the executable's templates
    # and node records, and what an open recapture replaces (capture id, RNG record, body pools,
    # predicates, recorded conditional nodes), kept until the recapture succeeds or fails.
    cdef ExecutableState updates
    cdef tuple replaced
    cdef int abandon_recapture(self) except -1
    cdef int finish_recapture(self) except -1
    cdef int destroy_executable(self) except -1
    cdef int check_executable(self, str what) except -1
    cdef object c_recapture_begin(self, str capture_error_mode, StreamCore stream)
    cdef object c_recapture_end(self, bint reinstantiate)
    cdef object c_kernel_nodes(self)
    cdef object c_set_kernel_node_params(self, object node, object grid, object block,
                                         object arguments)
    cdef object c_rebind(self, object bindings)
    cdef object c_replay_with(self, object bindings, object stream)


# The GraphPool parameter kind's check (codegen/types.py); wrappers call it.
cdef object pool_arg(object value, str argument)
cdef object export_dot(str file_path)
cdef object graph_pool_handle()
cdef object graph_context(object cuda_graph, object pool, object stream, object capture_error_mode)
cdef object recapture_context(object cuda_graph, object stream, object capture_error_mode,
                              object reinstantiate)
cdef bint is_current_stream_capturing() except -1
cdef object make_graphed_callables(object callables, object sample_args, object num_warmup_iters,
                                   object allow_unused_input, object pool,
                                   object capture_error_mode)
