from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport cudaGraph_t, cudaGraphExec_t, cudaStream_t

from tensorplay._runtime.graphs.capture cimport CaptureState
from tensorplay._runtime.graphs.conditional cimport ConditionalStack
from tensorplay._runtime.graphs.graph_update cimport ExecutableState, GraphTemplate
from tensorplay._runtime.random.rng cimport GraphGenerators
from tensorplay._runtime.devices.stream cimport StreamCore

# How a graph captures: the settings of its constructor and of enable_debug_mode().
cdef class CaptureSettings:
    cdef object pool                   # checked: None, a pool id tuple or another graph
    cdef int capture_mode              # cudaStreamCaptureMode
    cdef bint debug_mode
    cdef bint keep_template            # keep the cudaGraph_t after instantiation (debug_dump)
    cdef bint side_stream_default      # stream=None: the side stream, not the current one

# The core of both public graph classes (CUDAGraph and accelerator.Graph, generated from the
# schema's GraphBase): they differ in their constructors, in the stream a capture takes when none
# is given (capture.pyx, Note [Capture state]), and in Graph's with-block. A graph is composed
# of parts, each with its module; its methods are the steps of those parts, in order.
cdef class GraphBase:
    cdef object __weakref__            # export_dot() follows the latest graph without keeping it
    cdef CaptureSettings settings
    cdef int device                    # the capture device; -1 before the first capture
    cdef CaptureState capture          # capture.pxd: the open capture, its id and pool
    cdef ConditionalStack conditionals # conditional.pxd: open bodies, what the nodes hold
    # The generator states the graph draws from (rng.pxd): the capture device's default
    # generator's and those of register_generator_state(); replays pay for them only when the
    # graph draws random numbers.
    cdef GraphGenerators generators
    # Graph update (graph_update.pxd; Note [Recapture] in graph.pyx): the executable's templates
    # and node records.
    cdef ExecutableState updates
    # What an open recapture replaces, kept until the recapture succeeds or fails: the capture
    # id, the generators' records (rng.saved_capture) and the ConditionalStack.
    cdef tuple replaced
    # The executable, and what replay reads: the graph's own fields rather than a part's, so
    # that the replay path (graph.pyx's header) reads them without going through one.
    cdef cudaGraph_t template          # a capture's graph until instantiated; then borrowed
                                       # from updates when the graph keeps it, else NULL
    cdef cudaGraphExec_t executable
    # Every stream the executable was launched on since it was made (Note [Streams a graph was
    # launched on], graph.pyx).
    cdef vector[cudaStream_t] launch_streams
    cdef list replay_events            # external events the first replay records, or None
    # Its pool's asleep flag (pools.asleep_flag, a static False while it holds none): replay
    # reads it, one load, and refuses a sleeping pool (docs/design.md, "Sleeping graphs").
    cdef bint* pool_asleep
    # Objects the Python layer ties to the graph's pool (contexts.hold_with_pool): PyTorch's
    # MemPool of a bridged capture. Dropped when the graph lets go of its pool.
    cdef list held
    # The two public classes' constructors, and Graph's with-block.
    cdef int init_cuda_graph(self) except -1
    cdef int init_graph(self, bint keep_graph, object pool, int capture_error_mode) except -1
    cdef object c_enter(self)
    cdef object c_exit(self, object exc_type, object exc_value, object traceback)
    # Capture (Note [Capture state] in capture.pyx, Note [Recapture] in graph.pyx); the
    # arguments are checked. contexts.pyx's blocks call begin and finish_block too.
    cdef int begin(self, object pool, int capture_mode, StreamCore stream,
                   bint recapture=*) except -1
    cdef int end(self) except -1
    cdef int end_capture(self, str what) except -1
    cdef int capture_failed(self) except -1
    cdef int instantiate_template(self) except -1
    cdef int publish_template(self, GraphTemplate owned) except -1
    cdef int finish_block(self, object exc_value) except -1
    cdef int discard_capture(self) except -1
    cdef int capture_stopped(self) except -1
    cdef int release_pool_reference(self) except -1
    cdef int release_host_memory(self, unsigned long long holder) except -1
    cdef int abandon_recapture(self) except -1
    cdef int finish_recapture(self) except -1
    cdef int destroy_executable(self) except -1
    cdef int destroy_graphs(self) except -1
    cdef int check_executable(self, str what) except -1
    # Replay on handle (the graph's RNG record advanced, then one cuGraphLaunch).
    cdef int launch_on(self, cudaStream_t handle) except -1
    # The public methods (api.yaml's GraphBase).
    cdef object c_begin_capture_to_if_node(self, object scalar_pred)
    cdef object c_begin_capture_to_while_node(self, object scalar_pred)
    cdef object c_capture_begin(self, object pool, int capture_error_mode, StreamCore stream)
    cdef object c_capture_end(self)
    cdef object c_debug_dump(self, str path)
    cdef object c_enable_debug_mode(self)
    cdef object c_end_capture_to_conditional_node(self)
    cdef object c_instantiate(self)
    cdef object c_pool(self)
    cdef object c_replay(self, StreamCore stream)
    cdef object c_reset(self)
    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred)
    cdef object c_stage_and_launch(self, object static_inputs, object inputs)
    # Debugging (graph_topology.pyx): the topology, with the conditional nodes the capture
    # recorded, and the raw handles.
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
    # Graph update: recapture, node parameters (node_params.pyx), rebinding (rebinding.pyx).
    cdef object c_recapture_begin(self, int capture_error_mode, StreamCore stream)
    cdef object c_recapture_end(self, bint reinstantiate)
    cdef object c_kernel_nodes(self)
    cdef object c_set_kernel_node_params(self, object node, object grid, object block,
                                         object arguments)
    cdef object c_rebind(self, object bindings)
    cdef object c_replay_with(self, object bindings, StreamCore stream)
    # Sleep and wake (pools.pxd): the graph's pool and its conditional bodies' pools.
    cdef object c_sleep(self, object keep)
    cdef object c_wake(self)
    cdef str graph_name(self)
    cdef list own_pools(self)


# The GraphPool parameter kind's check (codegen/types.py); wrappers call it.
cdef object pool_arg(object value, str argument)
# What entering a capture block does first (Graph's with-block, contexts.pyx's graph()): the pool
# argument checked, then a quiet device and an empty cache (capture.quiet_device).
cdef int prepare_device(int device, object pool) except -1
cdef object export_dot(str file_path)
