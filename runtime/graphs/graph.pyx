# cython: language_level=3, auto_pickle=False
"""CUDA graph capture and replay: CUDAGraph, accelerator.Graph, graph() and private pools.

Note [Capture state]
A graph object goes through: empty -> capturing (capture_begin) -> executable (capture_end,
which instantiates) -> empty again (reset). Each step records what it took, so every exit path
(a failed capture, an exception in the body, reset(), the destructor) gives back exactly that:
- holds_pool: one reference to the private pool (allocator.retain_pool), released by reset()
  or by a capture that fails. Allocations made while the capture runs come from that pool
  (allocator.begin_allocate_to_pool, keyed by the capture id, so work on any stream joined to
  the capture is routed too); they survive the graph's reset until the tensors are freed, and
  empty_cache() then returns the memory (PyTorch's rules, docs/design.md).
- routing: the pool receives the capture's allocations; stopped as soon as the capture ends,
  before any error is raised, so that no "capture active" state outlives a failed capture.
- capturing: cudaStreamBeginCapture ran on capture_stream and cudaStreamEndCapture did not.
- stream_swapped: capture_begin made the capture stream (and its device) current on the
  capturing thread, so the body's work lands in the capture; its end restores both.
The capture stream is the one given, else (CUDAGraph, graph()) the device's dedicated side
stream, or (accelerator.Graph) the current stream unless that is the legacy default stream,
which cannot capture (CUDA Runtime API, "Stream capture").

Conditional nodes (if, if/else, while, switch) are captured into bodies by conditional.pyx;
the graph keeps the open bodies, innermost last. Allocations in a body go to a private pool of
their own (the allocator routes one capture id per pool), held like the graph's pool.
stage_and_launch() checks and copies its pairs in staging.pyx, then replays.

Replay is the hot path: no Python objects are created; it reads the current stream from C
thread-local storage, makes the capture device current and calls cuGraphLaunch once.

Note [Streams a graph was launched on]
A replay runs on the device after replay() returns, so what the graph references must not go
back to the cache while a launched replay may still touch it. The graph keeps, in a C vector,
every stream its executable was launched on (a few pointer compares per replay, no event), and
whatever it lets go of (the blocks its capture held, at reset(), deletion or the end of a
recapture; the tensors rebind() replaces) is marked as used on each of those streams first: the
allocator then records one event per stream and reuses the memory once they complete, as for
record_stream(). replay_with() marks its tensors used on its own stream (graph_update.pyx).

Note [Recapture]
recapture_begin() captures the same work again into a graph that holds an executable, and
recapture_end() updates that executable in place (graph_update.pyx, Note [Updating from a
recapture]) instead of instantiating a new one. The recapture allocates from the graph's own
pool, under a capture id of its own. Until it ends, the graph keeps what its current capture
holds (`replaced`: the capture id its freed blocks are held for, its RNG records, its
conditional bodies' pools and predicates). When the update succeeds, that is given back: blocks
only the replaced capture held return to the cache, its body pools are released. When the
recapture fails (in its block, at its end, or because the topology differs), the recapture's own
are given back instead, and the graph replays its previous executable as before. With
reinstantiate=True a topology mismatch instantiates the new capture instead of failing.

Setting TENSORPLAY_GRAPH_GC=1 makes graph() and accelerator.Graph run gc.collect() on entry,
before emptying the cache (PyTorch made this opt-in because it is slow for back-to-back
captures).
"""
import gc
import os
import threading
import warnings
import weakref

from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t

from cuda.bindings cimport cyruntime
from cuda.bindings cimport cydriver
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport (cudaError_t, cudaErrorStreamCaptureUnjoined, cudaGraphCondTypeIf, cudaGraphCondTypeSwitch,
                                      cudaGraphCondTypeWhile, cudaGraphDebugDotFlagsVerbose,
                                      cudaGraphInstantiateFlagAutoFreeOnLaunch,
                                      cudaGraphInstantiateFlagUseNodePriority, cudaGraph_t,
                                      cudaStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                                      cudaStreamCaptureStatus, cudaStreamCaptureStatusNone,
                                      cudaStreamLegacy, cudaStream_t, cudaSuccess)

from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.graphs cimport conditional
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.graphs cimport graph_topology
from tensorplay._runtime.graphs cimport graph_update, staging
from tensorplay._runtime.memory cimport host_allocator
from tensorplay._runtime.random cimport rng
from tensorplay._runtime.tensor cimport core as tensor, factories
from tensorplay._runtime.graphs.graph_update cimport GraphTemplate
from tensorplay._runtime.graphs.conditional cimport ConditionalBody
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.memory.allocator cimport PoolId
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.devices.stream cimport EventCore, StreamCore
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.graphs import graph_render
from tensorplay._schema import UNSET  # Graph.capture_begin's "the constructor's setting"
from tensorplay._runtime.graphs.graph_topology import CONDITIONAL_TYPES

# capture_error_mode -> cudaStreamCaptureMode (docs/design.md, "Capture rules").
CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}

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
        chosen = allocator.new_pool_handle()
        chosen.first, chosen.second = chosen.second, 0
    elif isinstance(pool, GraphBase):
        if not (<GraphBase>pool).holds_pool:
            raise ValueError("pool: the graph given holds no pool (it has not captured yet, or "
                             "was reset); capture it first, or share a handle from "
                             "graph_pool_handle()")
        chosen = (<GraphBase>pool).pool_id
    else:
        chosen.first, chosen.second = pool
    return chosen


cdef str _cuda_error_text(cudaError_t status):
    return (f"{cyruntime.cudaGetErrorName(status).decode()} ({<int>status}): "
            f"{cyruntime.cudaGetErrorString(status).decode()}")


cdef int _release_failed(int device, object error) except -1:
    warnings.warn(f"tensorplay: releasing a deleted CUDA graph of cuda:{device} failed: {error}",
                  RuntimeWarning)
    return 0


cdef class CaptureSettings:
    def __cinit__(self):
        self.pool = None
        self.capture_mode = 0


cdef class GraphBase:
    def __cinit__(self, *args, **kwargs):
        self.settings = CaptureSettings()
        self.device = -1
        self.bodies = []
        self.body_pools = []
        self.predicates = []
        self.conditional_nodes = {}
        self.generators = rng.graph_generators()

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
        self.side_stream_default = True
        return 0

    cdef int init_graph(self, bint keep_graph, object pool, str capture_error_mode) except -1:
        """accelerator.Graph(...): the with-block's settings; the current stream captures."""
        self.settings.pool = pool
        self.settings.capture_mode = CAPTURE_MODES[capture_error_mode]
        self.keep_template = keep_graph
        return 0

    cdef object c_enter(self):
        _prepare_device(_capture_device(None), self.settings.pool)
        self.begin(self.settings.pool, self.settings.capture_mode, None)
        return self

    cdef object c_exit(self, object exc_type, object exc_value, object traceback):
        self.finish_block(exc_value)
        return None

    # -- capture ------------------------------------------------------------------------------

    cdef int begin(self, object pool, int capture_mode, object stream,
                   bint recapture=False) except -1:
        """Start a capture; the arguments were checked by the caller (Note [Capture state]).
        A recapture captures into the graph's own pool, keeping its executable (Note
        [Recapture])."""
        if self.capturing:
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
        cdef StreamCore target = stream
        cdef int device = _capture_device(target)
        cdef cudaStream_t handle
        if target is not None:
            handle = target.handle
        else:
            handle = _stream.current_stream_handle(device)
            if self.side_stream_default or <uintptr_t>handle <= cudaStreamLegacy:
                handle = _stream.capture_side_stream(device)
        if <uintptr_t>handle <= cudaStreamLegacy:
            raise RuntimeError("stream: CUDA graphs cannot be captured on the legacy default "
                               "stream; pass a tensorplay.cuda.Stream(), or stream=None for the "
                               "device's side stream")
        if _device.stream_capturing(handle, device):
            raise RuntimeError(f"stream {<uintptr_t>handle:#x} on cuda:{device} is already "
                               "capturing a graph, and captures cannot nest on one stream (CUDA "
                               "refuses cudaStreamBeginCapture on a capturing stream: "
                               "cudaErrorIllegalState); end that capture first, or capture on "
                               "another stream")
        if recapture and device != self.device:
            raise ValueError(f"stream is on cuda:{device}, but the graph was captured on "
                             f"cuda:{self.device}; recapture it on a stream of that device")
        cdef PoolId pool_id = self.pool_id if recapture else _pool_for_capture(pool)
        if recapture:
            # What the capture being replaced holds, given back when the recapture succeeds
            # and kept when it fails (Note [Recapture]).
            self.replaced = (self.capture_id, rng.saved_capture(self.generators),
                             self.body_pools, self.predicates, self.conditional_nodes)
            self.body_pools = []
            self.predicates = []
            rng.forget_capture(self.generators)
            self.capture_id = 0  # set by begin_on_stream; a failure before holds nothing
        else:
            allocator.retain_pool(device, pool_id)
        self.device = device
        self.pool_id = pool_id
        self.holds_pool = True
        self.capture_stream = handle
        # A Stream made for the call (capture_begin(stream=Stream())) would otherwise be
        # destroyed while it captures.
        self.capture_stream_owner = target
        self.capture_mode = capture_mode
        self.conditional_nodes = {}
        try:
            self.previous_device = _device.current_device()
            self.previous_stream = _stream.current_stream_handle(device)
            self.capture_thread = PyThread_get_thread_ident()
            self.capture_thread_object = threading.current_thread()
            self.capture_stream_slot = _stream.current_stream_slot(device)
            if self.previous_device != device:
                _device.set_current_device(device)
            _stream.put_current_stream(device, handle)
            self.stream_swapped = True
            self.begin_on_stream(capture_mode)
            captures.capture_began(self.capture_id, self.capture_id)
            # Before any work is captured: random ops captured from now on read their state
            # from device memory (docs/design.md, "RNG state").
            rng.begin_capture(self.generators, device, self.capture_id)
            allocator.begin_allocate_to_pool(device, pool_id, self.capture_id, self.capture_id)
            self.routing = True
        except BaseException:
            self.discard_capture()
            self.capture_failed()
            raise
        return 0

    cdef int begin_on_stream(self, int capture_mode) except -1:
        cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
        cdef unsigned long long capture_id = 0
        cdef DeviceSwitch saved
        # Known as open before the stream captures: from then on no thread may record an
        # allocator event on it (device.pyx, Note [Calls during capture]), and another thread
        # runs while this one waits in cudaStreamBeginCapture without the GIL.
        _device.capture_opened(self.device, self.capture_stream)
        try:
            with nogil:
                _device.enter_device(self.device, &saved)
                try:
                    errors.check(cyruntime.cudaStreamBeginCapture(
                        self.capture_stream, <cudaStreamCaptureMode>capture_mode),
                        b"cudaStreamBeginCapture")
                    self.capturing = True
                    errors.check(cyruntime.cudaStreamGetCaptureInfo(
                        self.capture_stream, &status, &capture_id, NULL, NULL, NULL, NULL),
                        b"cudaStreamGetCaptureInfo")
                finally:
                    _device.exit_device(&saved)
        except BaseException:
            if not self.capturing:  # else capture_stopped() closes it
                _device.capture_closed(self.capture_stream)
            raise
        self.capture_id = capture_id
        _device.capture_identified(self.capture_stream, capture_id)
        return 0

    cdef int end(self) except -1:
        """End the capture and instantiate; a failed capture releases what it took."""
        if not self.capturing or self.replaced is not None:
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
        self.check_capture_thread(what)
        if self.bodies:
            raise RuntimeError(f"{what} called with {len(self.bodies)} conditional "
                               "node(s) still open; call end_capture_to_conditional_node() for "
                               "each first")
        cdef cudaGraph_t template = NULL
        cdef cudaError_t status = cudaSuccess
        cdef DeviceSwitch saved
        # Asked before the end, which forgets the capture (captures.pyx, Note [Joined streams]).
        unjoined = captures.unjoined_streams(self.device, self.capture_stream, self.capture_id)
        with nogil:
            _device.enter_device(self.device, &saved)
            status = cyruntime.cudaStreamEndCapture(self.capture_stream, &template)
            if status != cudaSuccess:
                cyruntime.cudaGetLastError()  # reported below; must not surface elsewhere
            _device.exit_device(&saved)
        self.capture_stopped()
        try:
            self.discard_capture()  # stops routing and restores the stream
        except BaseException:
            _destroy_template(self.device, template)
            self.capture_failed()
            raise
        if status != cudaSuccess or template == NULL:
            _destroy_template(self.device, template)
            self.capture_failed()
            if status == cudaErrorStreamCaptureUnjoined:
                raise RuntimeError(captures.unjoined_text(what, self.device, unjoined, "the capture") +
                                   " The capture was discarded, what it took released and the "
                                   "previous stream restored; no stream captures any more")
            raise RuntimeError(
                f"graph capture on cuda:{self.device} failed: {_cuda_error_text(status)}. "
                "Something inside the capture was not permitted while capturing: a synchronising "
                "call (synchronize(), item(), tolist(), a copy to the host), work on another "
                "stream not joined to the capture, or (in 'global' mode) unsafe CUDA work on "
                "another thread. The capture was discarded, what it took released (a "
                "recaptured graph keeps its previous executable) and the previous stream "
                "restored")
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
                _instantiate(&self.executable, self.template)
            finally:
                _device.exit_relaxed(&mode)
                _device.exit_device(&saved)
        # The graph owns the template from here on (graph_update.pxd).
        cdef GraphTemplate owned = graph_update.own_template(self.device, self.template,
                                                             self.conditional_nodes)
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
        self.template = owned.graph if self.keep_template else NULL
        # With the GIL held throughout, so that two captures ending at once agree.
        _last_template = None if self.keep_template else owned
        _last_device, _last_verbose = self.device, self.debug_mode
        _last_owner = weakref.ref(self) if self.keep_template else None
        return 0

    cdef int finish_block(self, object exc_value) except -1:
        """End the capture of a with-block: normally, or quietly after the body raised."""
        if exc_value is None:
            return self.end()
        was_capturing = self.capturing
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
        cdef cudaGraph_t partial = NULL
        cdef DeviceSwitch saved
        cdef int mode
        while self.bodies:
            self.close_body(False)
        if self.capturing:
            with nogil:
                _device.enter_device(self.device, &saved)
                # Its error (usually "invalidated") is the reason we are here, not news.
                if cyruntime.cudaStreamEndCapture(self.capture_stream, &partial) != cudaSuccess:
                    cyruntime.cudaGetLastError()
                if partial != NULL:
                    _device.enter_relaxed(&mode)
                    cyruntime.cudaGraphDestroy(partial)
                    _device.exit_relaxed(&mode)
                _device.exit_device(&saved)
            # Only now: until the stream has stopped capturing, no thread may record an
            # allocator event on it.
            self.capture_stopped()
        try:
            if self.routing:
                self.routing = False
                allocator.end_allocate_to_pool(self.device, self.pool_id)
        finally:
            self.restore_stream()
            self.capture_stream_owner = None
            # Unregistered either way; a graph that drew nothing keeps no record.
            rng.end_capture(self.generators)
        return 0

    cdef int restore_stream(self) except -1:
        if not self.stream_swapped:
            return 0
        self.stream_swapped = False
        if PyThread_get_thread_ident() != self.capture_thread:
            # A relaxed-mode capture ended on another thread: put the capturing thread's stream
            # back through its slot, if that thread still runs and nothing replaced the capture
            # stream since (its current device is its own to change).
            if (self.capture_thread_object.is_alive()
                    and self.capture_stream_slot[0] == <void*>self.capture_stream):
                self.capture_stream_slot[0] = <void*>self.previous_stream
            self.capture_thread_object = None
            return 0
        self.capture_thread_object = None
        _stream.put_current_stream(self.device, self.previous_stream)
        if self.previous_device != self.device:
            _device.set_current_device(self.previous_device)
        return 0

    cdef int check_capture_thread(self, str what) except -1:
        """CUDA lets only the thread that began a global or thread_local capture end it."""
        if (self.capturing and self.capture_mode != cudaStreamCaptureModeRelaxed
                and PyThread_get_thread_ident() != self.capture_thread):
            mode = next(name for name, value in CAPTURE_MODES.items()
                        if value == self.capture_mode)
            raise RuntimeError(
                f"{what} called on thread {PyThread_get_thread_ident()}, but this graph's "
                f"capture began on thread {self.capture_thread} in '{mode}' mode, which only "
                "the capturing thread may end (CUDA: cudaErrorStreamCaptureWrongThread). End it "
                "there, or capture with capture_error_mode='relaxed' to end it elsewhere. The "
                "capture goes on")
        return 0

    cdef int capture_stopped(self) except -1:
        """cudaStreamEndCapture ran: the capture is no longer open."""
        self.capturing = False
        _device.capture_closed(self.capture_stream)
        captures.capture_ended(self.capture_id)
        # External events recorded in the capture: its replays record them (stream.pyx).
        self.replay_events = captures.take_external_records(self.capture_id)
        return 0

    cdef int release_pool_reference(self) except -1:
        if self.replaced is not None:  # reset() during a recapture: both captures go
            self.abandon_recapture()
        if self.capture_id:  # blocks its capture saw freed (allocator.pyx), host memory it reads
            allocator.release_held_blocks(self.device, self.capture_id, &self.launch_streams)
            self.release_host_memory(self.capture_id)
        rng.forget_capture(self.generators)
        self.predicates = []
        _release_body_pools(self.device, self.body_pools)
        if self.holds_pool:
            self.holds_pool = False
            allocator.release_pool(self.device, self.pool_id)
        self.launch_streams.clear()
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

    # -- recapture (Note [Recapture]) -----------------------------------------------------------

    cdef int abandon_recapture(self) except -1:
        """A recapture failed: give back what it took; the replaced capture stays."""
        if self.capture_id:  # the executable it would have replaced may read them too
            allocator.release_held_blocks(self.device, self.capture_id, &self.launch_streams)
            self.release_host_memory(self.capture_id)
        _release_body_pools(self.device, self.body_pools)
        (self.capture_id, saved_generators, self.body_pools, self.predicates,
         self.conditional_nodes) = self.replaced
        rng.restore_capture(self.generators, saved_generators)
        self.replaced = None
        return 0

    cdef int finish_recapture(self) except -1:
        """A recapture became the executable's: give back what the replaced capture held."""
        previous_id, _, previous_pools, _, _ = self.replaced
        self.replaced = None
        if previous_id:  # replays launched before the update may still run
            allocator.release_held_blocks(self.device, previous_id, &self.launch_streams)
            self.release_host_memory(previous_id)
        return _release_body_pools(self.device, previous_pools)

    cdef object c_recapture_begin(self, str capture_error_mode, StreamCore stream):
        self.begin(None, CAPTURE_MODES[capture_error_mode], stream, True)
        return None

    cdef object c_recapture_end(self, bint reinstantiate):
        if not self.capturing or self.replaced is None:
            raise RuntimeError("recapture_end() called without an open recapture; call "
                               "recapture_begin() first")
        self.end_capture("recapture_end()")
        cdef GraphTemplate owned = graph_update.own_template(self.device, self.template,
                                                             self.conditional_nodes)
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
                    _instantiate(&fresh, owned.graph)
                finally:
                    _device.exit_relaxed(&mode)
                    _device.exit_device(&saved)
        except BaseException:
            self.template = self.updates.current.graph if self.keep_template else NULL
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

    # -- node parameters and rebinding (graph_update.pyx) -----------------------------------------

    cdef int check_executable(self, str what) except -1:
        if self.executable == NULL:
            raise RuntimeError(f"{what} needs a captured graph, and this one holds none (never "
                               "captured, or reset() since); capture it first")
        return 0

    cdef object c_kernel_nodes(self):
        self.check_executable("kernel_nodes()")
        return graph_update.kernel_nodes(self.updates, self)

    cdef object c_set_kernel_node_params(self, object node, object grid, object block,
                                         object arguments):
        graph_update.node_params_args(node, grid, block, arguments)
        self.check_executable("set_kernel_node_params()")
        graph_update.set_kernel_node_params(self.updates, self.executable, self, node, grid,
                                            block, arguments)
        return None

    cdef object c_rebind(self, object bindings):
        graph_update.bindings_arg(bindings, "rebind()")
        self.check_executable("rebind()")
        graph_update.rebind(self.updates, self.executable, bindings, True, NULL, "rebind()")
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

    cdef object c_replay_with(self, object bindings, object stream):
        cdef cudaStream_t handle
        graph_update.bindings_arg(bindings, "replay_with()")
        if self.executable == NULL:
            _not_replayable(self)
        if stream is None:
            handle = _stream.current_stream_handle(self.device)
        else:
            handle = _replay_stream(self, stream)
        graph_update.rebind(self.updates, self.executable, bindings, False, handle,
                            "replay_with()")
        self.launch_on(handle)
        return None

    # -- conditional nodes (Note [Capture state]) -----------------------------------------------

    cdef int open_body(self, object scalar_pred, int node_type, str what,
                       unsigned int size=1) except -1:
        if not self.capturing:
            raise RuntimeError(f"{what} needs an open capture: call it between capture_begin() "
                               "and capture_end()")
        cdef bint is_switch = node_type == cudaGraphCondTypeSwitch
        cdef TensorCore predicate = _index_arg(self, scalar_pred) if is_switch \
            else _predicate_arg(self, scalar_pred)
        cdef CUfunction setter = conditional.setter_kernel(self.device, is_switch)
        cdef ConditionalBody body = ConditionalBody.__new__(ConditionalBody)
        body.is_switch = is_switch
        body.parent = (<ConditionalBody>self.bodies[-1]).stream if self.bodies \
            else self.capture_stream
        body.predicate = predicate
        body.is_while = node_type == cudaGraphCondTypeWhile
        cdef unsigned long long body_capture_id = 0
        cdef PoolId body_pool
        self.bodies.append(body)  # from here on, close_body() undoes what was done
        try:
            conditional.begin_body(self.device, setter, predicate.data, node_type, size,
                                   self.capture_mode, body, &body_capture_id)
            body.capture_id = body_capture_id
            captures.capture_began(body_capture_id, self.capture_id)
            rng.enter_body(self.generators, body_capture_id)
            self.conditional_nodes[<uintptr_t>body.node] = (
                CONDITIONAL_TYPES[node_type], [<uintptr_t>body.graphs[i] for i in range(size)])
            body_pool = _pool_for_capture(None)
            allocator.retain_pool(self.device, body_pool)
            self.body_pools.append((body_pool.first, body_pool.second))
            allocator.begin_allocate_to_pool(self.device, body_pool, body_capture_id,
                                             self.capture_id)
            body.pool = body_pool
            body.routing = True
            self.predicates.append(predicate)
            if PyThread_get_thread_ident() == self.capture_thread:
                _stream.put_current_stream(self.device, body.stream)
        except BaseException:
            self.close_body(False)  # the capture goes on without this node
            raise
        return 0

    cdef int close_body(self, bint keep) except -1:
        """End the innermost body's capture: kept (its node stays), or on the way to discard."""
        cdef ConditionalBody body = self.bodies.pop()
        cdef cudaGraph_t body_graph = NULL
        cdef cudaError_t status = cudaSuccess
        cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
        cdef DeviceSwitch saved
        cdef uintptr_t body_stream = <uintptr_t>body.stream
        cdef bint workless = False
        try:
            self.close_body_generators(body, keep)
            if keep and body.is_while:
                # A body without work would only re-read the predicate: replay would loop
                # forever while it holds. Such a body ends the loop instead, and is refused.
                workless = conditional.captured_nothing(self.device, body.stream)
                if workless:
                    conditional.end_loop(self.device, body)
                else:
                    conditional.set_predicate(self.device, body, body.predicate)  # after each pass
        finally:
            try:
                if body.routing:
                    body.routing = False
                    allocator.end_allocate_to_pool(self.device, body.pool)
            finally:
                if body.capturing and not keep:  # end_body_check() refused a kept one
                    # CUDA cannot end a body with unjoined work: join it back, as it goes.
                    for side in captures.unjoined_streams(self.device, body.stream,
                                                          body.capture_id):
                        _stream.order_after(self.device, <uintptr_t>body.stream, side)
                _device.body_capture_ended(body.capture_id)
                captures.capture_ended(body.capture_id)
                with nogil:
                    _device.enter_device(self.device, &saved)
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
                if PyThread_get_thread_ident() == self.capture_thread:
                    _stream.put_current_stream(self.device, body.parent)
        if keep and status != cudaSuccess:
            errors.raise_cuda_error(<int>status, "cudaStreamEndCapture (conditional body)")
        if workless:
            raise RuntimeError(
                f"the while node's body captured no work: nothing was launched on its capture "
                f"stream {body_stream:#x}, the stream current on cuda:{self.device} between "
                "begin_capture_to_while_node() and end_capture_to_conditional_node(). Work on "
                "another stream does not join the body unless that stream waits for this one. "
                "A loop without work would replay forever, so the node was closed with a body "
                "that ends the loop at once; the capture goes on")
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

    # -- the public methods ---------------------------------------------------------------------

    cdef object c_begin_capture_to_if_node(self, object scalar_pred):
        self.open_body(scalar_pred, cudaGraphCondTypeIf, "begin_capture_to_if_node()")
        return None

    cdef object c_begin_capture_to_while_node(self, object scalar_pred):
        self.open_body(scalar_pred, cudaGraphCondTypeWhile, "begin_capture_to_while_node()")
        return None

    cdef object c_capture_begin(self, object pool, str capture_error_mode, StreamCore stream):
        # The wrapper checked every argument (UNSET: the constructor's setting).
        if isinstance(pool, str):
            pool = self.settings.pool
        cdef int capture_mode = self.settings.capture_mode if capture_error_mode == UNSET \
            else CAPTURE_MODES[capture_error_mode]
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
        _write_dot(self.template, self.device, path, self.debug_mode)
        return None

    cdef object c_enable_debug_mode(self):
        self.debug_mode = True
        self.keep_template = True
        return None

    cdef object c_end_capture_to_conditional_node(self):
        if not self.bodies:
            raise RuntimeError("end_capture_to_conditional_node() called without an open "
                               "conditional node; call begin_capture_to_if_node() or "
                               "begin_capture_to_while_node() first")
        cdef ConditionalBody body = self.bodies[-1]
        self.end_body_check(body, "end_capture_to_conditional_node()")
        self.close_body(True)
        if body.size > 1:
            conditional.fill_empty_bodies(self.device, body)
        return None

    cdef object c_instantiate(self):
        # capture_end() instantiates, so that replay never pays for it.
        if self.executable == NULL:
            raise RuntimeError("instantiate() needs a completed capture; call capture_begin() "
                               "and capture_end() first")
        return None

    cdef object c_pool(self):
        # The pool this graph holds, else the one its next capture will share, if known.
        if self.holds_pool:
            return (self.pool_id.first, self.pool_id.second)
        return self.settings.pool if isinstance(self.settings.pool, tuple) else None

    cdef object c_replay(self, object stream):
        cdef cudaStream_t handle
        if self.executable == NULL:
            _not_replayable(self)
        if stream is None:
            handle = _stream.current_stream_handle(self.device)
        else:
            handle = _replay_stream(self, stream)
        if self.updates.dirty:  # replay_with() bound other tensors for its launch only
            graph_update.restore_bindings(self.updates, self.executable)
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
        # which enter_device has done already (docs/design.md, "Devices, threads and contexts").
        with nogil:
            _device.enter_device(self.device, &saved)
            status = cydriver.cuGraphLaunch(<cydriver.CUgraphExec>self.executable,
                                            <cydriver.CUstream>handle)
            _device.exit_device(&saved)
        if status != cydriver.CUDA_SUCCESS:
            errors.check_driver(status, "cuGraphLaunch")
        return 0

    cdef object c_reset(self):
        self.check_capture_thread("reset()")
        try:
            self.discard_capture()
            self.destroy_graphs()
        finally:
            self.release_pool_reference()  # whatever failed above, the pool is let go
            rng.clear(self.generators)     # registrations last until reset, as in PyTorch
        return None

    cdef object c_set_conditional_handle_for_current_node(self, object scalar_pred):
        if not self.bodies:
            raise RuntimeError("set_conditional_handle_for_current_node() called without an open "
                               "conditional node")
        cdef ConditionalBody body = self.bodies[-1]
        cdef TensorCore predicate = _index_arg(self, scalar_pred) if body.is_switch \
            else _predicate_arg(self, scalar_pred)
        conditional.set_predicate(self.device, body, predicate)
        body.predicate = predicate  # what a while node tests again at the end of its body
        self.predicates.append(predicate)
        return None

    cdef object c_stage_and_launch(self, object static_inputs, object inputs):
        if not isinstance(static_inputs, (list, tuple)):
            raise TypeError(f"static_inputs must be a list or tuple of tensors, got "
                            f"{type(static_inputs).__name__}")
        if not isinstance(inputs, (list, tuple)):
            raise TypeError(f"inputs must be a list or tuple of tensors, got "
                            f"{type(inputs).__name__}")
        if len(static_inputs) != len(inputs):
            raise ValueError(f"static_inputs and inputs must pair up, got {len(static_inputs)} "
                             f"static buffers and {len(inputs)} inputs")
        if self.executable == NULL:
            # The pairs' own checks first, so that a bad item reads the same on any machine.
            for index in range(len(inputs)):
                factories.tensor_arg(static_inputs[index], "static_inputs", index)
                factories.tensor_arg(inputs[index], "inputs", index)
            _not_replayable(self)
        cdef cudaStream_t handle = _stream.current_stream_handle(self.device)
        staging.stage(self.device, static_inputs, inputs, handle)
        if self.updates.dirty:
            graph_update.restore_bindings(self.updates, self.executable)
        self.launch_on(handle)
        return None

    # -- debugging: the handles and the topology (graph_topology.pyx) ------------------------------

    cdef object c_get_graph_data(self):
        if self.template == NULL:
            raise RuntimeError(_NO_TEMPLATE.format(what="get_graph_data()"))
        return graph_topology.graph_data(self.template, self.device, self.conditional_nodes)

    cdef object c_raw_cuda_graph(self):
        if self.template == NULL:
            raise RuntimeError(_NO_TEMPLATE.format(what="raw_cuda_graph()"))
        return <uintptr_t>self.template

    cdef object c_raw_cuda_graph_exec(self):
        if self.executable == NULL:
            raise RuntimeError("raw_cuda_graph_exec() needs a captured graph, and this one holds "
                               "none (never captured, or reset() since); capture it first")
        return <uintptr_t>self.executable

    cdef object c_begin_capture_to_if_else_node(self, object scalar_pred):
        if self.capturing:
            conditional.require_multi_body_nodes("begin_capture_to_if_else_node()")
        self.open_body(scalar_pred, cudaGraphCondTypeIf, "begin_capture_to_if_else_node()", 2)
        return None

    cdef object c_begin_capture_to_switch_node(self, object scalar_index,
                                               unsigned int num_cases):
        # num_cases is from 1 to 1024 (api.yaml's range, checked by the wrapper before anything
        # is allocated): each case is a body graph captured in turn.
        if self.capturing:
            conditional.require_multi_body_nodes("begin_capture_to_switch_node()")
        self.open_body(scalar_index, cudaGraphCondTypeSwitch, "begin_capture_to_switch_node()",
                       num_cases)
        return None

    cdef object c_begin_capture_to_next_body(self):
        if not self.bodies or (<ConditionalBody>self.bodies[-1]).size < 2:
            raise RuntimeError("begin_capture_to_next_body() needs an if/else or switch node as "
                               "the innermost open conditional node; call "
                               "begin_capture_to_if_else_node() or begin_capture_to_switch_node() "
                               "first, and close any node opened inside its body")
        cdef ConditionalBody body = self.bodies[-1]
        if body.branch + 1 >= body.size:
            raise RuntimeError(f"begin_capture_to_next_body(): all {body.size} bodies of the node "
                               "have been captured; call end_capture_to_conditional_node()")
        self.end_body_check(body, "begin_capture_to_next_body()")
        self.next_body_generators(body)
        return None

    cdef int end_body_check(self, ConditionalBody body, str what) except -1:
        """Refuse to end a body's capture while a stream that joined it has not joined back:
        CUDA would fail the end (cudaErrorStreamCaptureUnjoined). Nothing changes; the body
        stays open for the join."""
        unjoined = captures.unjoined_streams(self.device, body.stream, body.capture_id)
        if unjoined:
            raise RuntimeError(captures.unjoined_text(what, self.device, unjoined,
                                                      "the conditional body") +
                               " The body is still open: join the stream back, then call "
                               f"{what} again")
        return 0

    # -- graph-safe state (rng.pxd; Note [Offsets on the device] in rng.pyx) --------------------

    cdef object c_register_generator_state(self, object generator):
        rng.register_generator(self.generators, generator)
        return None

    cdef int close_body_generators(self, ConditionalBody body, bint keep) except -1:
        """The body's last pass: what it drew advances the generators' offsets on the device.
        Nothing to do for a body whose capture never began."""
        if not body.capture_id:
            return 0
        try:
            rng.leave_branch(self.generators, body.stream, keep)
        finally:
            rng.leave_body(self.generators)
        return 0

    cdef int next_body_generators(self, ConditionalBody body) except -1:
        """End one branch of an if/else or switch node and begin the next: draws in each branch
        advance the offsets by what that branch drew."""
        rng.leave_branch(self.generators, body.stream, True)
        conditional.next_body(self.device, self.capture_mode, body, self.capture_id)
        rng.next_branch(self.generators, body.capture_id)
        return 0


_NO_TEMPLATE = ("{what} needs the captured graph, which is kept only when enable_debug_mode() "
                "(or accelerator.Graph(keep_graph=True)) came before the capture, and until "
                "reset()")


cdef int _release_body_pools(int device, list pools) except -1:
    """Release each conditional body's pool (first, second) in pools, emptying the list."""
    cdef PoolId body_pool
    while pools:
        body_pool.first, body_pool.second = pools.pop()
        allocator.release_pool(device, body_pool)
    return 0


cdef int _instantiate(cudaGraphExec_t* executable, cudaGraph_t template) except -1 nogil:
    """Instantiate template; in the device's context, in relaxed mode (instantiating is not
    captured work)."""
    return errors.check(cyruntime.cudaGraphInstantiate(
        executable, template,
        cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority),
        b"cudaGraphInstantiate")


cdef int _destroy_template(int device, cudaGraph_t template) except -1:
    """Destroy a template no one owns yet (a failed capture's)."""
    cdef DeviceSwitch saved
    cdef int mode
    if template == NULL:
        return 0
    with nogil:
        _device.enter_device(device, &saved)
        _device.enter_relaxed(&mode)
        cyruntime.cudaGraphDestroy(template)
        _device.exit_relaxed(&mode)
        _device.exit_device(&saved)
    return 0


cdef int _not_replayable(GraphBase graph) except -1:
    if graph.capturing:
        raise RuntimeError("replay() called while this graph is still capturing; call "
                           "capture_end() first")
    raise RuntimeError("replay() needs a captured graph, and this one holds none (never "
                       "captured, or reset() since); capture it first")


cdef cudaStream_t _replay_stream(GraphBase graph, object stream) except? NULL:
    cdef StreamCore target = stream  # a Stream: the wrapper checked it
    if target.device_index != graph.device:
        raise ValueError(f"stream is on cuda:{target.device_index}, but the graph was captured "
                         f"on cuda:{graph.device}; replay it on a stream of that device")
    return target.handle


cdef int _write_dot(cudaGraph_t template, int device, str path, bint verbose) except -1:
    """The driver's DOT text of template, written to path (or rendered, for .svg and .png)
    through graph_render, which names path in any failure."""
    picture = graph_render.picture_format(path)
    if picture is not None:
        graph_render.dot_program()  # before any work: a missing Graphviz costs nothing
    cdef bytes encoded
    cdef unsigned int flags = cudaGraphDebugDotFlagsVerbose if verbose else 0
    cdef DeviceSwitch saved
    # The GIL stays held: export_dot()'s template is replaced (and destroyed) under it.
    with graph_render.scratch_path() as scratch:
        encoded = os.fsencode(scratch)
        _device.enter_device(device, &saved)
        try:
            errors.check(cyruntime.cudaGraphDebugDotPrint(template, encoded, flags),
                         b"cudaGraphDebugDotPrint")
        finally:
            _device.exit_device(&saved)
        text = graph_render.read_back(scratch)
    if picture is not None:
        graph_render.render_dump(text, path, picture)
    else:
        graph_render.write_dump(text, path)
    return 0


cdef TensorCore _scalar_arg(GraphBase graph, object value, str argument, str dtype_name):
    """A single-element tensor of dtype_name on the graph's device: ours, or any tensor that
    shares its memory through __cuda_array_interface__ or DLPack (PyTorch's, CuPy's)."""
    cdef TensorCore scalar = factories.tensor_arg(value, argument, -1)
    if (scalar.dtype_object.name != dtype_name or scalar.element_count != 1
            or scalar.device_index != graph.device):
        raise ValueError(f"{argument} must be a single-element {dtype_name} tensor on cuda:"
                         f"{graph.device}, got {scalar.element_count} element(s) of "
                         f"{scalar.dtype_object.name} on "
                         f"{tensor.device_text(scalar.device_index)}")
    return scalar


cdef inline TensorCore _predicate_arg(GraphBase graph, object value):
    return _scalar_arg(graph, value, "scalar_pred", "bool")


cdef inline TensorCore _index_arg(GraphBase graph, object value):
    return _scalar_arg(graph, value, "scalar_index", "int32")


cdef int _capture_device(StreamCore stream) except -1:
    """The device a capture on stream takes: the stream's, or with none the current device."""
    if stream is not None:
        return stream.device_index
    if not _device.is_available():
        errors.raise_no_accelerator("graph capture")
    return _device.current_device_index()


cdef int _prepare_device(int device, object pool) except -1:
    """What entering a capture block does first: a quiet device and an empty cache. Skipped
    while any capture is open in the process: both would invalidate it (device.pyx,
    Note [Calls during capture]). The pool argument is checked before anything is done."""
    if isinstance(pool, GraphBase) and not (<GraphBase>pool).holds_pool:
        _pool_for_capture(pool)  # raises: the graph holds no pool
    if _device.capture_open():
        return 0
    _device.synchronize(device)
    if os.environ.get("TENSORPLAY_GRAPH_GC") == "1":
        gc.collect()
    allocator.empty_cache(device)
    return 0


cdef class GraphContext:
    """What tensorplay.cuda.graphs.graph() returns: captures its block into cuda_graph."""
    cdef GraphBase cuda_graph
    cdef object pool
    cdef object stream
    cdef int capture_mode

    def __enter__(self):
        _prepare_device(_capture_device(self.stream), self.pool)
        self.cuda_graph.begin(self.pool, self.capture_mode, self.stream)
        return self.cuda_graph

    def __exit__(self, exc_type, exc_value, traceback):
        self.cuda_graph.finish_block(exc_value)
        return None


cdef int _cuda_graph_arg(object cuda_graph) except -1:
    # Only a CUDAGraph takes the side stream by default (init_cuda_graph): graph() and
    # recapture() are its blocks.
    if not (isinstance(cuda_graph, GraphBase) and (<GraphBase>cuda_graph).side_stream_default):
        raise TypeError(f"cuda_graph must be a tensorplay.cuda.CUDAGraph, got "
                        f"{type(cuda_graph).__name__}")
    return 0


cdef class RecaptureContext:
    """What tensorplay.cuda.graphs.recapture() returns: captures its block into cuda_graph
    again and updates its executable (Note [Recapture])."""
    cdef GraphBase cuda_graph
    cdef object stream
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


cdef object recapture_context(object cuda_graph, object stream, object capture_error_mode,
                              object reinstantiate):
    _cuda_graph_arg(cuda_graph)
    cdef RecaptureContext context = RecaptureContext.__new__(RecaptureContext)
    context.cuda_graph = cuda_graph
    context.stream = stream
    context.capture_mode = CAPTURE_MODES[capture_error_mode]
    context.reinstantiate = reinstantiate
    return context


cdef object export_dot(str file_path):
    # The reference types file_path as str, so the wrapper checks a str; what a path can hold
    # is the Path kind's check (codegen/types.py).
    errors.path_arg(file_path, "file_path")
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


cdef object graph_pool_handle():
    cdef PoolId handle = allocator.new_pool_handle()
    return (handle.first, handle.second)


cdef object graph_context(object cuda_graph, object pool, object stream,
                          object capture_error_mode):
    _cuda_graph_arg(cuda_graph)
    cdef GraphContext context = GraphContext.__new__(GraphContext)
    context.cuda_graph = cuda_graph
    context.pool = pool
    context.stream = stream
    context.capture_mode = CAPTURE_MODES[capture_error_mode]
    return context


cdef bint is_current_stream_capturing() except -1:
    if not _device.is_initialized():
        return False  # no context yet, so nothing can capture; do not create one
    cdef int current = _device.current_device()
    return _device.stream_capturing(_stream.current_stream_handle(current), current)


cdef object make_graphed_callables(object callables, object sample_args, object num_warmup_iters,
                                   object allow_unused_input, object pool,
                                   object capture_error_mode):
    # The wrapper checked num_warmup_iters, pool and capture_error_mode (api.yaml).
    # Python over the public graph API: its cost is paid once, at capture (graphed_callables.py).
    from tensorplay._python import graphed_callables
    if not _device.is_available():
        # The arguments' own checks first, so that a mistake reads the same without a GPU.
        graphed_callables.check_arguments(callables, sample_args)
        errors.raise_no_accelerator("make_graphed_callables()")
    return graphed_callables.make_graphed_callables(callables, sample_args, num_warmup_iters,
                                                    allow_unused_input, pool, capture_error_mode)
