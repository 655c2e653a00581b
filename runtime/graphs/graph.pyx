# cython: language_level=3, auto_pickle=False
"""CUDA graph capture and replay: GraphBase, the core of CUDAGraph and accelerator.Graph.

A graph is composed of parts, each kept by its own module: its capture (capture.pyx: the
capture stream and thread, the capture id and private pool, Note [Capture state]), its
conditional nodes (conditional.pyx), its generator states (rng.pyx), and its executable's node
records (graph_update.pyx; changed by node_params.pyx and rebinding.pyx). GraphBase's methods
are the steps of those parts in order: each step records what it took, so that every exit path
gives back exactly that. The graph() and recapture() blocks and pool handles are contexts.pyx's;
the DOT writer is dot.pyx's; stage_and_launch() checks and copies its pairs in staging.pyx.

Replay is the hot path, and stays in this module: c_replay -> launch_on -> cuGraphLaunch reads
the graph's own fields (not a part's), creates no Python object and makes no call beyond the
current stream's lookup in C thread-local storage, the device's context check and the launch
itself; bench/bench_hot_path.py times it against a raw C loop of cuGraphLaunch.

Note [Streams a graph was launched on]
A replay runs on the device after replay() returns, so what the graph references must not go
back to the cache while a launched replay may still touch it. The graph keeps, in a C vector,
every stream its executable was launched on (a few pointer compares per replay, no event), and
whatever it lets go of (the blocks its capture held, at reset(), deletion or the end of a
recapture; the tensors rebind() replaces) is marked as used on each of those streams first: the
allocator then records one event per stream and reuses the memory once they complete, as for
record_stream(). replay_with() marks its tensors used on its own stream (rebinding.pyx).

Note [Recapture]
recapture_begin() captures the same work again into a graph that holds an executable, and
recapture_end() updates that executable in place (graph_update.pyx, Note [Updating from a
recapture]) instead of instantiating a new one. The recapture allocates from the graph's own
pool, under a capture id of its own. Until it ends, the graph keeps what its current capture
holds (`replaced`: the capture id its freed blocks are held for, its RNG records, its
conditional nodes with their bodies' pools and predicates). When the update succeeds, that is
given back: blocks only the replaced capture held return to the cache, its body pools are
released. When the recapture fails (in its block, at its end, or because the topology differs),
the recapture's own are given back instead, and the graph replays its previous executable as
before. With reinstantiate=True a topology mismatch instantiates the new capture instead of
failing.
"""
import warnings
import weakref

cimport cython
from libc.stdint cimport uintptr_t
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings cimport cydriver
from cuda.bindings.cyruntime cimport (cudaError_t, cudaGraphCondTypeIf, cudaGraphCondTypeSwitch,
                                      cudaGraphCondTypeWhile, cudaGraphExec_t, cudaGraph_t,
                                      cudaStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                                      cudaStream_t, cudaSuccess)

from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.base.errors cimport UNSET_CHOICE
from tensorplay._runtime.graphs cimport capture, conditional, graph_topology
from tensorplay._runtime.graphs cimport graph_update, node_params, rebinding, staging
from tensorplay._runtime.memory cimport allocator, host_allocator, pools
from tensorplay._runtime.random cimport rng
from tensorplay._runtime.tensor cimport core as tensor, factories
from tensorplay._runtime.graphs.capture cimport CaptureState
from tensorplay._runtime.random.rng cimport CaptureRecord
from tensorplay._runtime.graphs.conditional cimport ConditionalStack
from tensorplay._runtime.graphs.dot cimport write_dot as _write_dot
from tensorplay._runtime.graphs.graph_update cimport GraphTemplate
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.devices.stream cimport EventCore, StreamCore
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.base.sentinels import UNSET  # Graph.capture_begin: the constructor's

# The template of the most recently completed capture, for export_dot(): held here, as well as
# by its graph (graph_update.pxd: the graph keeps it for its executable's setters), until the
# next capture completes. For a graph that keeps its template for debugging (keep_graph, debug
# mode) export_dot() follows the graph by a weak reference instead, so that it reports a deleted
# graph as deleted; graphs with conditional nodes cannot be cloned (cudaGraphClone answers
# cudaErrorNotSupported).
cdef GraphTemplate _last_template = None
cdef object _last_owner = None             # weakref.ref to that graph, or None
cdef int _last_device = -1
cdef bint _last_verbose = False

# The driver's entry points once they are asked for (after the first replay): replay's fast
# path (Note [Driver entry points] in device.pyx).
cdef _device.DriverEntryPoints* _driver = NULL


cdef object pool_arg(object value, str argument):
    """The GraphPool parameter kind (codegen/types.py): None, a graph, or a pool id such as
    graph_pool_handle() gives; UNSET (Graph.capture_begin: the constructor's) passes through."""
    if value is None or isinstance(value, GraphBase) or (isinstance(value, str)
                                                         and value == UNSET):
        return value
    if isinstance(value, tuple) and len(value) == 2 and all(
            isinstance(part, int) and not isinstance(part, bool) for part in value):
        if min(value) < 0 or max(value) >= 1 << 64 or value == (0, 0):
            raise ValueError(f"{argument} must be an id from graph_pool_handle() or a graph's "
                             f"pool_id (two ints from 0 to 2**64 - 1, not both zero), got "
                             f"{errors.shown(value)}")
        return value
    raise TypeError(f"{argument} must be None, a handle from graph_pool_handle(), a graph or a "
                    f"graph's pool_id, got {errors.shown(value)}")


cdef PoolId _pool_for_capture(object pool) except *:
    """The pool a capture allocates from, for a pool argument pool_arg accepted."""
    cdef PoolId chosen
    if pool is None:
        # A graph's own pool is (n, 0), a user handle (0, n): PyTorch's MempoolId_t halves.
        chosen = pools.new_graph_pool()
    elif isinstance(pool, GraphBase):
        if not (<GraphBase>pool).capture.holds_pool:
            raise ValueError("pool: the graph given holds no pool (it has not captured yet, or "
                             "was reset); capture it first, or share a handle from "
                             "graph_pool_handle()")
        chosen = (<GraphBase>pool).capture.pool_id
    else:
        chosen.first, chosen.second = pool
    return chosen


cdef int prepare_device(int device, object pool) except -1:
    if isinstance(pool, GraphBase) and not (<GraphBase>pool).capture.holds_pool:
        _pool_for_capture(pool)  # raises: the graph holds no pool
    return capture.quiet_device(device)


cdef int _release_failed(int device, object error) except -1:
    warnings.warn(f"tensorplay: releasing a deleted CUDA graph of cuda:{device} failed: {error}",
                  RuntimeWarning)
    return 0


cdef class CaptureSettings:
    def __cinit__(self):
        self.pool = None
        self.capture_mode = 0


# Not cleared by the garbage collector: __dealloc__ walks the parts (capture state,
# conditional stack, settings) to give back what the graph holds, and a GraphBase collected as
# part of a reference cycle would otherwise have them set to None first (Cython's tp_clear),
# which the typed accesses there cannot survive. The parts refer to nothing that refers back.
@cython.no_gc_clear
cdef class GraphBase:
    def __cinit__(self, *args, **kwargs):
        self.settings = CaptureSettings()
        self.device = -1
        self.pool_asleep = allocator.never_asleep()
        self.capture = CaptureState()
        self.conditionals = ConditionalStack()
        self.generators = rng.graph_generators()
        self.held = []

    def __dealloc__(self):
        # A forked child must not touch the parent's CUDA objects. Errors cannot propagate
        # here: each step runs whatever the others did, and a failure is reported as a warning
        # rather than lost (a pool left retained would never return its memory).
        # Direct calls, no bound methods: nothing new may refer to an object being destroyed.
        if not _device.is_initialized() or self.device < 0:
            return
        try:
            self.discard_capture()
        except Exception as error:
            _release_failed(self.device, error)
        try:
            self.destroy_graphs()
        except Exception as error:
            _release_failed(self.device, error)
        try:
            self.release_pool_reference()
        except Exception as error:
            _release_failed(self.device, error)

    # -- the two public classes' constructors, and Graph's with-block ------------------------

    cdef int init_cuda_graph(self) except -1:
        """CUDAGraph(): a capture without a stream argument takes the side stream."""
        self.settings.side_stream_default = True
        return 0

    cdef int init_graph(self, bint keep_graph, object pool, int capture_error_mode) except -1:
        """accelerator.Graph(...): the with-block's settings; the current stream captures."""
        self.settings.pool = pool
        self.settings.capture_mode = capture_error_mode
        self.settings.keep_template = keep_graph
        return 0

    cdef object c_enter(self):
        prepare_device(capture.capture_device(None), self.settings.pool)
        self.begin(self.settings.pool, self.settings.capture_mode, None)
        return self

    cdef object c_exit(self, object exc_type, object exc_value, object traceback):
        self.finish_block(exc_value)
        return None

    # -- capture (capture.pyx, Note [Capture state]) ------------------------------------------

    cdef int begin(self, object pool, int capture_mode, StreamCore stream,
                   bint recapture=False) except -1:
        """Start a capture; the arguments were checked by the caller (capture.pyx, Note
        [Capture state]). A recapture captures into the graph's own pool, keeping its executable
        (Note [Recapture])."""
        if self.capture.capturing:
            raise RuntimeError("capture_begin() called while this graph is already capturing; "
                               "call capture_end() first")
        if self.executable != NULL and not recapture:
            raise RuntimeError("this graph already holds a captured graph; call reset() before "
                               "capturing into it again, recapture it (recapture_begin()), or "
                               "create a new graph")
        if self.executable == NULL and recapture:
            raise RuntimeError("recapture_begin() needs a graph that holds a captured graph, "
                               "and this one holds none (never captured, or reset() since); "
                               "call capture_begin() instead")
        cdef int device = capture.capture_device(stream)
        cdef cudaStream_t handle = capture.capture_stream(stream, device,
                                                          self.settings.side_stream_default)
        if recapture and device != self.device:
            raise ValueError(f"stream is on cuda:{device}, but the graph was captured on "
                             f"cuda:{self.device}; recapture it on a stream of that device")
        cdef PoolId pool_id = self.capture.pool_id if recapture else _pool_for_capture(pool)
        if recapture:
            # What the capture being replaced holds, given back when the recapture succeeds
            # and kept when it fails (Note [Recapture]).
            self.replaced = (self.capture.capture_id, rng.saved_capture(self.generators),
                             self.conditionals)
            self.conditionals = ConditionalStack()
            rng.forget_capture(self.generators)
            self.capture.capture_id = 0  # set by start(); a failure before holds nothing
        else:
            pools.retain_pool(device, pool_id)
            self.pool_asleep = pools.asleep_flag(device, pool_id)
            self.conditionals.nodes = {}
        self.device = device
        self.capture.pool_id = pool_id
        self.capture.holds_pool = True
        try:
            self.capture.start(device, handle, stream, capture_mode)
            # Before any work is captured: random ops captured from now on read their state
            # from device memory (docs/design.md, "RNG state").
            rng.begin_capture(self.generators, device, self.capture.capture_id)
            self.capture.route(device)
        except BaseException:
            self.discard_capture()
            self.capture_failed()
            raise
        return 0

    cdef int end(self) except -1:
        """End the capture and instantiate; a failed capture releases what it took."""
        if not self.capture.capturing or self.replaced is not None:
            raise RuntimeError("capture_end() called without an open capture; call "
                               "capture_begin() first (a recapture ends with recapture_end())")
        self.end_capture("capture_end()")
        try:
            self.instantiate_template()
        except BaseException:
            self.destroy_graphs()
            self.release_pool_reference()
            raise
        return 0

    cdef int end_capture(self, str what) except -1:
        """End the open capture into self.template, stop routing and restore the stream; a
        failed capture releases what it took (capture_failed) and raises."""
        self.capture.check_thread(what)
        if self.conditionals.bodies:
            raise RuntimeError(f"{what} called with {len(self.conditionals.bodies)} conditional "
                               "node(s) still open; call end_capture_to_conditional_node() for "
                               "each first")
        cdef cudaGraph_t template = NULL
        cdef cudaError_t status = cudaSuccess
        # Asked before the end, which forgets the capture (captures.pyx, Note [Joined streams]).
        unjoined = captures.unjoined_streams(self.device, self.capture.stream,
                                             self.capture.capture_id)
        self.capture.end_on_stream(self.device, &template, &status)
        self.capture_stopped()
        try:
            self.discard_capture()  # stops routing and restores the stream
        except BaseException:
            capture.destroy_template(self.device, template)
            self.capture_failed()
            raise
        if status != cudaSuccess or template == NULL:
            capture.destroy_template(self.device, template)
            self.capture_failed()
            raise capture.end_error(what, self.device, status, unjoined)
        self.template = template
        return 0

    cdef int capture_failed(self) except -1:
        """Give back what a failed capture took: a recapture's own, keeping the graph as it
        was; a first capture's graphs and pool."""
        self.replay_events = None  # no replay will record them
        if self.replaced is not None:
            return self.abandon_recapture()
        self.destroy_graphs()
        return self.release_pool_reference()

    cdef int instantiate_template(self) except -1:
        cdef size_t node_count = 0
        cdef DeviceSwitch saved
        cdef int mode
        with nogil:
            _device.enter_device(self.device, &saved)
            # Instantiating is not captured work: legal during another capture (on this thread
            # too) in relaxed mode only (device.pyx, Note [Calls during capture]).
            _device.enter_relaxed(&mode)
            try:
                errors.check(cyruntime.cudaGraphGetNodes(self.template, NULL, &node_count),
                             b"cudaGraphGetNodes")
                capture.instantiate(&self.executable, self.template)
            finally:
                _device.exit_relaxed(&mode)
                _device.exit_device(&saved)
        # The graph owns the template from here on (graph_update.pxd).
        cdef GraphTemplate owned = graph_update.own_template(self.device, self.template,
                                                             self.conditionals.nodes)
        self.updates = graph_update.new_state(owned)
        self.publish_template(owned)
        if node_count == 0:
            warnings.warn(f"the graph captured on cuda:{self.device} is empty: the work probably "
                          "ran on another stream or device than the capture stream",
                          RuntimeWarning)
        return 0

    cdef int publish_template(self, GraphTemplate owned) except -1:
        """The newest capture's template: debug_dump() reads it when the graph keeps its
        template (self.template borrows it), export_dot() otherwise."""
        global _last_template, _last_device, _last_verbose, _last_owner
        cdef bint kept = self.settings.keep_template
        self.template = owned.graph if kept else NULL
        # With the GIL held throughout, so that two captures ending at once agree.
        _last_template = None if kept else owned
        _last_device, _last_verbose = self.device, self.settings.debug_mode
        _last_owner = weakref.ref(self) if kept else None
        return 0

    cdef int finish_block(self, object exc_value) except -1:
        """End the capture of a with-block: normally, or quietly after the body raised."""
        if exc_value is None:
            return self.end()
        was_capturing = self.capture.capturing
        try:
            self.discard_capture()
            if self.replaced is not None:  # a recapture: the graph keeps its executable
                self.abandon_recapture()
            elif self.executable == NULL:  # a graph the body already captured keeps its pool
                self.release_pool_reference()
        except Exception as cleanup_error:
            if hasattr(exc_value, "add_note"):
                exc_value.add_note(f"ending the graph capture also failed: {cleanup_error}")
            return 0
        if was_capturing and hasattr(exc_value, "add_note"):
            exc_value.add_note(f"tensorplay: raised during a graph capture on cuda:{self.device}; "
                               "the capture was ended and discarded, its pool released and the "
                               "previous stream restored")
        return 0

    cdef int discard_capture(self) except -1:
        """End an open capture without keeping it, stop routing and restore the stream."""
        while self.conditionals.bodies:
            self.conditionals.close(self.capture, self.generators, self.device, False)
        if self.capture.capturing:
            self.capture.end_partial(self.device)
            # Only now: until the stream has stopped capturing, no thread may record an
            # allocator event on it.
            self.capture_stopped()
        try:
            self.capture.stop_routing(self.device)
        finally:
            self.capture.restore_stream(self.device)
            self.capture.stream_owner = None
            # Unregistered either way; a graph that drew nothing keeps no record.
            rng.end_capture(self.generators)
        return 0

    cdef int capture_stopped(self) except -1:
        """cudaStreamEndCapture ran: the capture is no longer open. External events recorded
        in it: its replays record them (stream.pyx)."""
        self.replay_events = self.capture.stopped()
        return 0

    cdef int release_pool_reference(self) except -1:
        if self.replaced is not None:  # reset() during a recapture: both captures go
            self.abandon_recapture()
        cdef unsigned long long capture_id = self.capture.capture_id
        if capture_id:  # blocks its capture saw freed (allocator.pyx), host memory it reads
            pools.release_held_blocks(self.device, capture_id, &self.launch_streams)
            self.release_host_memory(capture_id)
        rng.forget_capture(self.generators)
        self.conditionals.predicates = []
        conditional.release_pools(self.device, self.conditionals.pools)
        if self.capture.holds_pool:
            self.capture.holds_pool = False
            self.pool_asleep = allocator.never_asleep()
            pools.release_pool(self.device, self.capture.pool_id)
        self.launch_streams.clear()
        # Last: dropping a PyTorch MemPool empties its cache, after the graph let go of its own.
        self.held = []
        return 0

    cdef int release_host_memory(self, unsigned long long holder) except -1:
        """Let go of the host memory holder's copies read (captures.pyx); a pin_memory() block
        goes back to the pinned cache only after the replays launched so far (Note [Streams a
        graph was launched on]). A stream capturing now cannot record: its queued replays
        were launched before that capture began, and ordered before it."""
        kept = captures.release_kept(holder)
        if not kept:
            return 0
        cdef tensor.PinnedStorage storage
        cdef cudaStream_t launched
        for owner in kept:
            storage = tensor.pinned_storage_under(owner)
            if storage is None:
                continue
            for launched in self.launch_streams:
                if not _device.stream_capturing(launched, self.device):
                    host_allocator.host_record_stream(<void*>storage.pointer, launched)
        return 0

    cdef int destroy_graphs(self) except -1:
        cdef DeviceSwitch saved
        # Relaxed: destroying is legal while another thread captures in global mode.
        cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
        if self.updates is not None:
            # The templates are owned by the update state (self.template only borrows one).
            self.template = NULL
        if self.executable == NULL and self.template == NULL:
            self.updates = None
            return 0
        with nogil:
            _device.enter_device(self.device, &saved)
            try:
                errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                             b"cudaThreadExchangeStreamCaptureMode")
                if self.executable != NULL:
                    cyruntime.cudaGraphExecDestroy(self.executable)
                    self.executable = NULL
                if self.template != NULL:
                    cyruntime.cudaGraphDestroy(self.template)
                    self.template = NULL
                errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                             b"cudaThreadExchangeStreamCaptureMode")
            finally:
                _device.exit_device(&saved)
        self.updates = None
        return 0

    # -- recapture (Note [Recapture]) -----------------------------------------------------------

    cdef int abandon_recapture(self) except -1:
        """A recapture failed: give back what it took; the replaced capture stays."""
        cdef unsigned long long capture_id = self.capture.capture_id
        if capture_id:  # the executable it would have replaced may read them too
            pools.release_held_blocks(self.device, capture_id, &self.launch_streams)
            self.release_host_memory(capture_id)
        conditional.release_pools(self.device, self.conditionals.pools)
        self.capture.capture_id, saved_generators, self.conditionals = self.replaced
        rng.restore_capture(self.generators, saved_generators)
        self.replaced = None
        return 0

    cdef int finish_recapture(self) except -1:
        """A recapture became the executable's: give back what the replaced capture held."""
        previous_id, _, previous = self.replaced
        self.replaced = None
        if previous_id:  # replays launched before the update may still run
            pools.release_held_blocks(self.device, previous_id, &self.launch_streams)
            self.release_host_memory(previous_id)
        return conditional.release_pools(self.device, (<ConditionalStack>previous).pools)

    cdef object c_recapture_begin(self, int capture_error_mode, StreamCore stream):
        self.begin(None, capture_error_mode, stream, True)
        return None

    cdef object c_recapture_end(self, bint reinstantiate):
        if not self.capture.capturing or self.replaced is None:
            raise RuntimeError("recapture_end() called without an open recapture; call "
                               "recapture_begin() first")
        self.end_capture("recapture_end()")
        cdef GraphTemplate owned = graph_update.own_template(self.device, self.template,
                                                             self.conditionals.nodes)
        self.template = NULL  # owned now: dropping owned destroys it
        cdef cudaGraphExec_t fresh = NULL
        cdef DeviceSwitch saved
        cdef int mode
        outcome = "updated"
        try:
            try:
                graph_update.update_executable(self.updates, self.executable, owned)
            except RuntimeError:
                if not reinstantiate:
                    raise
                outcome = "reinstantiated"
                _device.enter_device(self.device, &saved)
                _device.enter_relaxed(&mode)
                try:
                    capture.instantiate(&fresh, owned.graph)
                finally:
                    _device.exit_relaxed(&mode)
                    _device.exit_device(&saved)
        except BaseException:
            self.template = self.updates.current.graph if self.settings.keep_template else NULL
            self.abandon_recapture()
            raise
        if fresh != NULL:
            self.destroy_executable()
            self.executable = fresh
            self.updates = graph_update.new_state(owned)
        self.finish_recapture()
        self.publish_template(owned)
        return outcome

    cdef int destroy_executable(self) except -1:
        cdef DeviceSwitch saved
        cdef int mode
        with nogil:
            _device.enter_device(self.device, &saved)
            _device.enter_relaxed(&mode)  # legal while another thread captures
            cyruntime.cudaGraphExecDestroy(self.executable)
            self.executable = NULL
            _device.exit_relaxed(&mode)
            _device.exit_device(&saved)
        return 0

    # -- node parameters and rebinding (node_params.pyx, rebinding.pyx) --------------------------

    cdef int check_executable(self, str what) except -1:
        if self.executable == NULL:
            raise RuntimeError(f"{what} needs a captured graph, and this one holds none (never "
                               "captured, or reset() since); capture it first")
        return 0

    cdef object c_kernel_nodes(self):
        self.check_executable("kernel_nodes()")
        return node_params.kernel_nodes(self.updates, self)

    cdef object c_set_kernel_node_params(self, object node, object grid, object block,
                                         object arguments):
        node_params.node_params_args(node, grid, block, arguments)
        self.check_executable("set_kernel_node_params()")
        node_params.set_kernel_node_params(self.updates, self.executable, self, node, grid,
                                           block, arguments)
        return None

    cdef object c_rebind(self, object bindings):
        rebinding.bindings_arg(bindings, "rebind()")
        self.check_executable("rebind()")
        rebinding.rebind(self.updates, self.executable, bindings, True, NULL, "rebind()")
        # The replaced tensors: replays already queued still touch them.
        cdef TensorCore replaced
        cdef cudaStream_t launched
        for key in bindings:
            replaced = key
            if isinstance(replaced.owner, tensor.DeviceStorage):
                for launched in self.launch_streams:
                    allocator.record_stream(
                        <void*>(<tensor.DeviceStorage>replaced.owner).pointer, launched,
                        self.device)
        return None

    cdef object c_replay_with(self, object bindings, StreamCore stream):
        cdef cudaStream_t handle
        rebinding.bindings_arg(bindings, "replay_with()")
        if self.executable == NULL or self.pool_asleep[0]:
            _not_replayable(self)
        if stream is None:
            handle = _stream.current_stream_handle(self.device)
        else:
            handle = _replay_stream(self, stream)
        rebinding.rebind(self.updates, self.executable, bindings, False, handle,
                         "replay_with()")
        self.launch_on(handle)
        return None

    # -- conditional nodes (conditional.pyx) -----------------------------------------------------

    # Each predicate's type is checked first, before the capture's state (conditional.pxd).
    cdef object c_begin_capture_to_if_node(self, object scalar_pred):
        cdef TensorCore predicate = conditional.predicate_arg(scalar_pred, "scalar_pred")
        self.conditionals.open(self.capture, self.generators, self.device, predicate,
                               "scalar_pred", cudaGraphCondTypeIf, "begin_capture_to_if_node()",
                               1)
        return None

    cdef object c_begin_capture_to_while_node(self, object scalar_pred):
        cdef TensorCore predicate = conditional.predicate_arg(scalar_pred, "scalar_pred")
        self.conditionals.open(self.capture, self.generators, self.device, predicate,
                               "scalar_pred", cudaGraphCondTypeWhile,
                               "begin_capture_to_while_node()", 1)
        return None

    cdef object c_begin_capture_to_if_else_node(self, object scalar_pred):
        cdef TensorCore predicate = conditional.predicate_arg(scalar_pred, "scalar_pred")
        if self.capture.capturing:
            conditional.require_multi_body_nodes("begin_capture_to_if_else_node()")
        self.conditionals.open(self.capture, self.generators, self.device, predicate,
                               "scalar_pred", cudaGraphCondTypeIf,
                               "begin_capture_to_if_else_node()", 2)
        return None

    cdef object c_begin_capture_to_switch_node(self, object scalar_index,
                                               unsigned int num_cases):
        # num_cases is from 1 to 1024 (api.yaml's range, checked by the wrapper before anything
        # is allocated): each case is a body graph captured in turn.
        cdef TensorCore index = conditional.predicate_arg(scalar_index, "scalar_index")
        if self.capture.capturing:
            conditional.require_multi_body_nodes("begin_capture_to_switch_node()")
        self.conditionals.open(self.capture, self.generators, self.device, index,
                               "scalar_index", cudaGraphCondTypeSwitch,
                               "begin_capture_to_switch_node()", num_cases)
        return None

    cdef object c_begin_capture_to_next_body(self):
        self.conditionals.next_body(self.capture, self.generators, self.device)
        return None

    cdef object c_end_capture_to_conditional_node(self):
        self.conditionals.end_node(self.capture, self.generators, self.device)
        return None

    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred):
        self.conditionals.set_handle(self.device,
                                     conditional.predicate_arg(scalar_pred, "scalar_pred"))
        return None

    # -- the public methods ---------------------------------------------------------------------

    cdef object c_capture_begin(self, object pool, int capture_error_mode, StreamCore stream):
        # UNSET (a str, for pool; UNSET_CHOICE, for the mode) stands for the constructor's.
        if isinstance(pool, str):
            pool = self.settings.pool
        cdef int capture_mode = self.settings.capture_mode \
            if capture_error_mode == UNSET_CHOICE else capture_error_mode
        self.begin(pool, capture_mode, stream)
        return None

    cdef object c_capture_end(self):
        self.end()
        return None

    cdef object c_debug_dump(self, str path):
        if self.template == NULL:
            raise RuntimeError("debug_dump() needs the captured graph, which is kept only when "
                               "enable_debug_mode() (or accelerator.Graph(keep_graph=True)) came "
                               "before the capture")
        _write_dot(self.template, self.device, path, self.settings.debug_mode)
        return None

    cdef object c_enable_debug_mode(self):
        self.settings.debug_mode = True
        self.settings.keep_template = True
        return None

    cdef object c_instantiate(self):
        # capture_end() instantiates, so that replay never pays for it.
        if self.executable == NULL:
            raise RuntimeError("instantiate() needs a completed capture; call capture_begin() "
                               "and capture_end() first")
        return None

    cdef object c_pool(self):
        # The pool this graph holds, else the one its next capture will share, if known.
        if self.capture.holds_pool:
            return (self.capture.pool_id.first, self.capture.pool_id.second)
        return self.settings.pool if isinstance(self.settings.pool, tuple) else None

    cdef object c_reset(self):
        self.capture.check_thread("reset()")
        try:
            self.discard_capture()
            self.destroy_graphs()
        finally:
            self.release_pool_reference()  # whatever failed above, the pool is let go
            rng.clear(self.generators)     # registrations last until reset, as in PyTorch
        return None

    cdef object c_register_generator_state(self, object generator):
        rng.register_generator(self.generators, generator)
        return None

    # -- sleep and wake (pools.pyx; docs/design.md, "Sleeping graphs") --------------------------

    cdef str graph_name(self):
        return f"{type(self).__name__} object at {id(self):#x} (pool ({self.capture.pool_id.first}, " \
               f"{self.capture.pool_id.second}) on cuda:{self.device})"

    cdef list own_pools(self):
        """The pools sleep() covers: the graph's own and its conditional bodies'."""
        return [(self.capture.pool_id.first, self.capture.pool_id.second)] + \
            list(self.conditionals.pools)

    cdef object c_sleep(self, object keep):
        cdef bint keep_all = False
        cdef vector[uintptr_t] pointers
        cdef TensorCore kept
        if keep is None:
            pass
        elif isinstance(keep, str):
            if keep != "all":
                raise ValueError(f"keep must be None, 'all' or a list or tuple of tensors, got "
                                 f"{errors.shown(keep)}")
            keep_all = True
        elif isinstance(keep, (list, tuple)):
            for index in range(len(keep)):
                kept = factories.tensor_arg(keep[index], "keep", index)
                if not isinstance(kept.owner, tensor.DeviceStorage):
                    raise ValueError(f"keep[{index}] must be a CUDA tensor whose memory comes "
                                     "from tensorplay's allocator (a graph's capture), got "
                                     f"one on {tensor.device_text(kept.device_index)}"
                                     + ("" if kept.device_index < 0 else
                                        " that wraps foreign memory"))
                pointers.push_back((<tensor.DeviceStorage>kept.owner).pointer)
        else:
            raise TypeError(f"keep must be None, 'all' or a list or tuple of tensors, got "
                            f"{type(keep).__name__}")
        if self.capture.capturing:
            raise RuntimeError("sleep() called while this graph is capturing; end the capture "
                               "first")
        if self.executable == NULL or not self.capture.holds_pool:
            raise RuntimeError("sleep() needs a captured graph, and this one holds none (never "
                               "captured, or reset() since); capture it first")
        # A generator whose offset a replay left on the device (rng.pyx, Note [Offsets on the
        # device]) keeps it in this pool: bring it back to the host before the pool goes.
        cdef CaptureRecord record
        if self.generators is not None:
            for record in self.generators.records:
                record.state.settle("sleep()")
        pools.sleep_pools(self.device, self.own_pools(), keep_all, &pointers,
                          f"put to sleep by {self.graph_name()}")
        return None

    cdef object c_wake(self):
        if self.executable == NULL or not self.capture.holds_pool:
            raise RuntimeError("wake() needs a captured graph, and this one holds none (never "
                               "captured, or reset() since)")
        pools.wake_pools(self.device, self.own_pools(), self.graph_name())
        return None

    # -- replay: the hot path (this module's header) ----------------------------------------------

    cdef object c_replay(self, StreamCore stream):
        cdef cudaStream_t handle
        if self.executable == NULL or self.pool_asleep[0]:
            _not_replayable(self)
        if stream is None:
            handle = _stream.current_stream_handle(self.device)
        else:
            handle = _replay_stream(self, stream)
        if self.updates.dirty:  # replay_with() bound other tensors for its launch only
            rebinding.restore_bindings(self.updates, self.executable)
        self.launch_on(handle)
        return None

    cdef int launch_on(self, cudaStream_t handle) except -1:
        cdef cydriver.CUresult status
        cdef DeviceSwitch saved
        # Graph-safe random numbers (rng.pxd): this replay's (seed, offset) goes to the device,
        # stream-ordered before the launch, and the generator advances as an eager run would.
        if self.generators.draws:
            rng.advance_for_replay(self.generators, handle)
        if self.replay_events is not None:  # the first replay records them
            for event in self.replay_events:
                (<EventCore>event).awaiting_replay = False
            self.replay_events = None
        # Note [Streams a graph was launched on]: kept for the stream-ordered release of what
        # its replays may still touch. A handful of compares, no event.
        cdef size_t i
        for i in range(self.launch_streams.size()):
            if self.launch_streams[i] == handle:
                break
        else:
            self.launch_streams.push_back(handle)
        # The driver's launch, directly: the runtime's adds its own context bookkeeping on top,
        # which enter_device has done already (docs/design.md, "Devices, threads and contexts");
        # with the primary context current, through the driver's entry point (Note [Driver
        # entry points] in device.pyx).
        global _driver
        with nogil:
            if (_driver != NULL and _driver.graph_launch != NULL
                    and _device.primary_context_current(_driver, self.device)):
                status = _driver.graph_launch(<cydriver.CUgraphExec>self.executable,
                                              <cydriver.CUstream>handle)
            else:
                _device.enter_device(self.device, &saved)
                status = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>self.executable,
                                                <cydriver.CUstream>handle)
                _device.exit_device(&saved)
        if status != cydriver.CUDA_SUCCESS:
            errors.check_driver(status, "cuGraphLaunch")
        if _driver == NULL:
            _driver = _device.driver_entry_points()
        return 0

    cdef object c_stage_and_launch(self, object static_inputs, object inputs):
        if not isinstance(static_inputs, (list, tuple)):
            raise TypeError(f"static_inputs must be a list or tuple of tensors, got "
                            f"{type(static_inputs).__name__}")
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"inputs must be a list or tuple of tensors, got "
                            f"{type(inputs).__name__}")
        if len(static_inputs) != len(inputs) or self.executable == NULL:
            # The items' own checks first, so that a bad item is the TypeError naming it on any
            # machine, whatever else is wrong (the schema types both as sequences of tensors).
            # Only on the way to an error: staging.stage() checks the pairs it copies.
            for index in range(len(static_inputs)):
                factories.tensor_arg(static_inputs[index], "static_inputs", index)
            for index in range(len(inputs)):
                factories.tensor_arg(inputs[index], "inputs", index)
        if len(static_inputs) != len(inputs):
            raise ValueError(f"static_inputs and inputs must pair up, got {len(static_inputs)} "
                             f"static buffers and {len(inputs)} inputs")
        if self.executable == NULL:
            _not_replayable(self)
        if self.pool_asleep[0]:
            _not_replayable(self)
        cdef cudaStream_t handle = _stream.current_stream_handle(self.device)
        staging.stage(self.device, static_inputs, inputs, handle)
        if self.updates.dirty:
            rebinding.restore_bindings(self.updates, self.executable)
        self.launch_on(handle)
        return None

    # -- debugging: the handles and the topology (graph_topology.pyx) ------------------------------

    cdef object c_get_graph_data(self):
        if self.template == NULL:
            raise RuntimeError(_NO_TEMPLATE.format(what="get_graph_data()"))
        return graph_topology.graph_data(self.template, self.device, self.conditionals.nodes)

    cdef object c_raw_cuda_graph(self):
        if self.template == NULL:
            raise RuntimeError(_NO_TEMPLATE.format(what="raw_cuda_graph()"))
        return <uintptr_t>self.template

    cdef object c_raw_cuda_graph_exec(self):
        if self.executable == NULL:
            raise RuntimeError("raw_cuda_graph_exec() needs a captured graph, and this one holds "
                               "none (never captured, or reset() since); capture it first")
        return <uintptr_t>self.executable


_NO_TEMPLATE = ("{what} needs the captured graph, which is kept only when enable_debug_mode() "
                "(or accelerator.Graph(keep_graph=True)) came before the capture, and until "
                "reset()")


cdef int _not_replayable(GraphBase graph) except -1:
    if graph.executable != NULL and graph.pool_asleep[0]:
        raise RuntimeError(f"replay() refused: the memory of {graph.graph_name()} is asleep "
                           f"({pools.sleeper_of(graph.device, graph.capture.pool_id)}); call "
                           "wake() first")
    if graph.capture.capturing:
        raise RuntimeError("replay() called while this graph is still capturing; call "
                           "capture_end() first")
    raise RuntimeError("replay() needs a captured graph, and this one holds none (never "
                       "captured, or reset() since); capture it first")


cdef cudaStream_t _replay_stream(GraphBase graph, StreamCore stream) except? NULL:
    if stream.device_index != graph.device:
        raise ValueError(f"stream is on cuda:{stream.device_index}, but the graph was captured "
                         f"on cuda:{graph.device}; replay it on a stream of that device")
    return stream.handle


cdef object export_dot(str file_path):
    cdef cudaGraph_t template = _last_template.graph if _last_template is not None else NULL
    cdef GraphBase owner
    if _last_owner is not None:
        owner = _last_owner()
        if owner is None:
            raise RuntimeError("export_dot() reads the most recently captured graph, which kept "
                               "its own template (keep_graph or debug mode) and has been deleted "
                               "since; capture a graph again, or call debug_dump() on a graph "
                               "while it lives")
        template = owner.template
    if template == NULL:
        raise RuntimeError("export_dot() needs a completed capture, and none has completed in "
                           "this process (or the most recent graph was reset since); capture a "
                           "graph first")
    _write_dot(template, _last_device, file_path, _last_verbose)
    return file_path
