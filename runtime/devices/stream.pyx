# cython: language_level=3
"""Streams and events: a current stream per device per thread, and one side stream per device.

The current stream lives in C thread-local storage so the allocator and launches read it
without touching Python objects. A thread starts on each device's legacy default stream
(handle 0), as in PyTorch. The legacy default stream cannot capture, so each device also has a
dedicated side stream that graph capture uses by default (docs/design.md, "Streams").

Note [Current streams stay alive]
A Stream destroys its CUDA stream when the object goes, but the handle in thread-local storage
would outlive it: a user who writes set_stream(Stream()) keeps no reference, and every later
launch would go to a destroyed stream. So the Stream object that set_stream() or a stream
context made current is kept in a threading.local, per device, for as long as it is current
on that thread (and current_stream() returns it, so code that saves and restores the current
stream keeps it alive too). A thread's entries go when the thread ends.

Every call here that CUDA restricts during a graph capture follows device.pyx's
Note [Calls during capture].

Note [Events in graphs]
Recorded by a capturing stream, an ordinary event marks a point of the capture: CUDA turns the
record and a later wait into an edge of the graph (CUDA Programming Guide, "Cross-stream
Dependencies and Events"). A stream that takes part in no capture and waits on such an event
joins the capture (a fork): its later work is captured into the same graph, until the origin
stream waits on an event recorded after that work (the join), which must happen before the
capture ends (captures.pyx, Note [Joined streams]). The event belongs to its capture: once that
capture ends, nothing may wait on, query or synchronise with it (CUDA answers
cudaErrorInvalidValue), and while it is open only waits are legal. So an event remembers the
capture of its last record, and a wait is refused before any CUDA call when CUDA forbids it: on
an event of an ended capture, from a stream of another capture (cudaErrorStreamCaptureMerge), or
from a capturing stream on an event recorded outside its capture
(cudaErrorStreamCaptureIsolation). Each of these would invalidate the capture.
An external event (Event(external=True), PyTorch's flag) becomes a node instead: recorded under
capture with cudaEventRecordExternal, it is recorded each time the graph runs that node, so
eager code may query, synchronise on and time it after a replay (elapsed_time() between two such
events measures the graph's work between them); waited on under capture with
cudaEventWaitExternal, the graph waits at that point for the event's latest record, made
outside the graph. CUDA allows no event nodes inside conditional bodies, so external events
refuse to record or wait there. Outside a capture an external event is an ordinary one.

Note [Current stream listeners]
Another library that queues work on a stream of its own choosing (PyTorch's current stream, when
tensorplay.torch bridges a capture) must follow this thread's current stream while a capture
runs: the capture stream, each conditional body's stream, a stream made current to fork work
into the capture. So every change of the current stream made here or by the graph runtime
(set_stream(), a stream context's enter and exit, a capture's begin and end, a conditional
body's begin and end) calls current_stream_changed(), which calls each listener registered with
add_current_stream_listener() as listener(device, handle) on the thread whose stream changed,
after the change is complete. The runtime imports nothing for this: the list is empty unless a
caller (the Python layer) adds to it, and then each change costs one truthiness test of the list
plus the calls. A listener that raises propagates to the call that changed the stream, whose own
state is already consistent.
"""
import threading

from cython.operator cimport dereference as deref
from libc.stdint cimport uintptr_t
from libcpp.unordered_set cimport unordered_set
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaEvent_t, cudaEventBlockingSync,
                                      cudaEventDisableTiming, cudaEventDefault,
                                      cudaErrorNotReady, cudaStreamLegacy, cudaStream_t,
                                      cudaStreamNonBlocking,
                                      cudaSuccess)

from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.base cimport errors, public

cdef extern from *:
    """
    /* The current stream of each (host thread, device). Zero is the legacy default stream. */
    static __thread void* tensorplay_current_streams[64];
    static inline void* tensorplay_get_stream(int d) { return tensorplay_current_streams[d]; }
    static inline void tensorplay_put_stream(int d, void* s) { tensorplay_current_streams[d] = s; }
    """
    void* tensorplay_get_stream(int) noexcept nogil
    void tensorplay_put_stream(int, void*) noexcept nogil
    void* tensorplay_current_streams[64]

# Side streams are process-wide and live as long as the process.
cdef cudaStream_t _side_streams[_device.MAX_DEVICES]


# Note [Current streams stay alive]: device -> the Stream current on this thread.
_current = threading.local()


cdef dict _current_owners():
    owners = getattr(_current, "owners", None)
    if owners is None:
        owners = _current.owners = {}
    return owners


cdef cudaStream_t current_stream_handle(int device) noexcept nogil:
    return <cudaStream_t>tensorplay_get_stream(device)


cdef void** current_stream_slot(int device) noexcept nogil:
    return &tensorplay_current_streams[device]


cdef void put_current_stream(int device, cudaStream_t handle) noexcept nogil:
    tensorplay_put_stream(device, <void*>handle)


cdef object _wrap(int device, cudaStream_t handle, int priority, object keep_alive):
    cls = public.public_class("StreamCore", StreamCore)
    cdef StreamCore stream = cls.__new__(cls)
    stream.device_index = device
    stream.handle = handle
    stream.stream_priority = priority
    stream.owned = False
    stream.keep_alive = keep_alive
    return stream


cdef StreamCore stream_arg(object value, str argument):
    """A Stream argument, or None; anything else is a TypeError naming the argument."""
    if value is None or isinstance(value, StreamCore):
        return value
    raise TypeError(f"{argument} must be a tensorplay.cuda.Stream or None, got "
                    f"{type(value).__name__}; wrap foreign streams with "
                    "tensorplay.cuda.external_stream()")


cdef StreamCore required_stream_arg(object value, str argument):
    """A Stream argument that may not be None."""
    if value is None:
        raise TypeError(f"{argument} must be a tensorplay.cuda.Stream, got None")
    return stream_arg(value, argument)


cdef int create_ordering_event(int device, cudaEvent_t* event) except -1 nogil:
    """A new event on device for ordering work only (timing off, so recording it is cheap)."""
    cdef _device.DeviceSwitch switch
    cdef int mode
    _device.enter_device(device, &switch)
    _device.enter_relaxed(&mode)
    try:
        errors.check(cyruntime.cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                     b"cudaEventCreateWithFlags")
    finally:
        _device.exit_relaxed(&mode)
        _device.exit_device(&switch)
    return 0


cdef int order_after(int device, uintptr_t waiter, uintptr_t waited) except -1:
    """Make work enqueued later on waiter wait for the work enqueued so far on waited, through a
    one-off event (the interop protocols' stream handoffs; joining a stream back into a capture
    being discarded).

    Both are streams of device, as protocol handles (never 0; 1 and 2 are cudaStreamLegacy
    and cudaStreamPerThread, which CUDA accepts as they are). A stream already waits for itself.
    """
    if waiter == waited:
        return 0
    cdef cudaEvent_t event = NULL
    cdef _device.DeviceSwitch switch
    cdef int mode
    # The streams that 1 and 2 stand for are those of the device whose context is current.
    with nogil:
        _device.enter_device(device, &switch)
        try:
            create_ordering_event(device, &event)
            errors.check(cyruntime.cudaEventRecord(event, <cudaStream_t>waited),
                         "cudaEventRecord")
            errors.check(cyruntime.cudaStreamWaitEvent(<cudaStream_t>waiter, event, 0),
                         "cudaStreamWaitEvent")
        finally:
            if event != NULL:
                # Safe while the wait is pending: CUDA releases the event once it is done.
                _device.enter_relaxed(&mode)
                cyruntime.cudaEventDestroy(event)
                _device.exit_relaxed(&mode)
            _device.exit_device(&switch)
    return 0


# Note [Idle ordering events]
# Creating an event costs about 2 us, so the allocators that order memory reuse by events (the
# device allocator and the pinned host cache) take them from, and give them back to, one cache
# per device. Its two operations run with the GIL held and never release it, so the GIL is
# their lock; only creating a new event releases it, outside the cache.
cdef vector[cudaEvent_t] _idle_events[_device.MAX_DEVICES]


cdef int take_ordering_event(int device, cudaEvent_t* event) except -1:
    cdef vector[cudaEvent_t]* idle = &_idle_events[device]
    if not idle.empty():
        event[0] = idle.back()
        idle.pop_back()
        return 0
    with nogil:
        create_ordering_event(device, event)
    return 0


cdef void give_back_ordering_event(int device, cudaEvent_t event) noexcept:
    _idle_events[device].push_back(event)


# Note [Current stream listeners]
cdef list _stream_listeners = []


cdef int current_stream_changed(int device) except -1:
    if not _stream_listeners:
        return 0
    cdef uintptr_t handle = <uintptr_t>current_stream_handle(device)
    for listener in tuple(_stream_listeners):  # one may remove itself
        listener(device, handle)
    return 0


cpdef object add_current_stream_listener(object listener):
    if not callable(listener):
        raise TypeError(f"listener must be callable as listener(device, handle), got "
                        f"{type(listener).__name__}")
    _stream_listeners.append(listener)
    return None


cpdef object remove_current_stream_listener(object listener):
    """Remove one registration of listener; ValueError if it is not registered."""
    for position, registered in enumerate(_stream_listeners):
        if registered is listener:
            del _stream_listeners[position]
            return None
    raise ValueError("listener: not registered with add_current_stream_listener()")


cdef object current_stream(int device):
    _device.checked_device(device)
    cdef cudaStream_t handle = current_stream_handle(device)
    if handle != NULL:  # the legacy default stream (NULL) has no owner to keep alive
        owner = _current_owners().get(device)
        if owner is not None and (<StreamCore>owner).handle == handle:
            return owner
    return _wrap(device, handle, 0, None)


cdef object set_stream(StreamCore stream):
    _device.set_current_device(stream.device_index)
    _current_owners()[stream.device_index] = stream  # Note [Current streams stay alive]
    tensorplay_put_stream(stream.device_index, <void*>stream.handle)
    current_stream_changed(stream.device_index)
    return None


cdef object stream_context(StreamCore stream):
    # The public class, made without its constructor's wrapper: stream is checked already.
    cls = public.public_class("StreamContextCore", StreamContextCore)
    cdef StreamContextCore context = cls.__new__(cls)
    context.init(stream)
    return context


cdef object external_stream(object handle, int device):
    keep_alive = None
    if hasattr(handle, "__cuda_stream__"):
        # __cuda_stream__() returns (version, address) (docs/design.md, "Interop").
        keep_alive = handle
        version, address = handle.__cuda_stream__()
        if version != 0:
            raise ValueError(f"handle.__cuda_stream__() reported protocol version {version}; "
                             "only version 0 is supported")
        handle = address
    if isinstance(handle, bool) or not isinstance(handle, int):
        raise TypeError(f"handle must be a cudaStream_t as an int, or an object with "
                        f"__cuda_stream__, got {type(handle).__name__} ({errors.shown(handle)})")
    if not 0 <= handle < (1 << 64):
        raise ValueError(f"handle must be a cudaStream_t address (0 to 2**64 - 1), got "
                         f"{errors.shown(handle)}")
    _device.checked_device(device)  # after the arguments: a mistake reads the same anywhere
    return _wrap(device, <cudaStream_t><uintptr_t>handle, 0, keep_alive)


cdef cudaStream_t capture_side_stream(int device) except? NULL:
    _device.checked_device(device)
    cdef _device.DeviceSwitch switch
    cdef int mode
    if _side_streams[device] == NULL:
        with nogil:
            _device.enter_device(device, &switch)
            _device.enter_relaxed(&mode)
            try:
                errors.check(cyruntime.cudaStreamCreateWithFlags(&_side_streams[device],
                                                                 cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags")
            finally:
                _device.exit_relaxed(&mode)
                _device.exit_device(&switch)
    return _side_streams[device]


# Note [Streams the allocator refers to]
# The caching allocator keeps stream handles beyond the life of their Stream objects: cached
# blocks belong to the stream they were allocated on, and record_stream(tensor, stream) makes
# it record an event on stream when the tensor's block is released, which may be much later (a
# block freed during a capture waits until no capture is open). Recording on a destroyed stream
# is undefined (it crashed the process), and a new stream created at a destroyed one's address
# would be handed that stream's cached blocks while its kernels may still run. So a stream the
# allocator refers to is never destroyed: when its Stream object goes it is kept here, and the
# next Stream() of its device and priority takes it over (PyTorch never destroys its streams
# either: they come from a fixed pool). Work ordered after the old owner's is only more
# cautious. Changed with the GIL held.
cdef unordered_set[uintptr_t] _streams_in_allocator
cdef vector[pair[int, uintptr_t]] _retired_streams[_device.MAX_DEVICES]  # (priority, handle)


cdef void allocator_refers_to(cudaStream_t stream) noexcept:
    _streams_in_allocator.insert(<uintptr_t>stream)


cdef bint _take_retired(int device, int priority, cudaStream_t* handle) noexcept:
    cdef vector[pair[int, uintptr_t]]* retired = &_retired_streams[device]
    cdef Py_ssize_t i
    for i in range(<Py_ssize_t>retired.size() - 1, -1, -1):  # the latest retired first
        if deref(retired)[i].first == priority:
            handle[0] = <cudaStream_t>deref(retired)[i].second
            retired.erase(retired.begin() + i)
            return True
    return False


cdef class StreamCore:
    def __cinit__(self, *args, **kwargs):
        self.device_index = -1
        self.handle = NULL
        self.owned = False

    def __dealloc__(self):
        # A forked child must not touch the parent's CUDA objects.
        cdef int mode
        cdef pair[int, uintptr_t] retired
        if self.owned and self.handle != NULL and _device.is_initialized():
            if _streams_in_allocator.count(<uintptr_t>self.handle):
                retired.first = self.stream_priority
                retired.second = <uintptr_t>self.handle
                _retired_streams[self.device_index].push_back(retired)
                return
            _device.enter_relaxed(&mode)
            cyruntime.cudaStreamDestroy(self.handle)
            _device.exit_relaxed(&mode)

    cdef int init(self, int device, int priority) except -1:
        # priority fits a C int: api.yaml's range, checked by the wrapper.
        _device.checked_device(device)
        cdef int least = 0, greatest = 0
        cdef int requested = priority  # clamped below to the device's range, as CUDA does
        cdef _device.DeviceSwitch switch
        cdef int mode
        with nogil:
            _device.enter_device(device, &switch)
            _device.enter_relaxed(&mode)
            try:
                errors.check(cyruntime.cudaDeviceGetStreamPriorityRange(&least, &greatest),
                             "cudaDeviceGetStreamPriorityRange")
            finally:
                _device.exit_relaxed(&mode)
                _device.exit_device(&switch)
        # Lower numbers are higher priority; clamp to what the device offers, as CUDA does.
        cdef int clamped = max(greatest, min(least, requested))
        if not _take_retired(device, clamped, &self.handle):  # Note [Streams the allocator ...]
            with nogil:
                _device.enter_device(device, &switch)
                _device.enter_relaxed(&mode)
                try:
                    errors.check(cyruntime.cudaStreamCreateWithPriority(
                        &self.handle, cudaStreamNonBlocking, clamped),
                        "cudaStreamCreateWithPriority")
                finally:
                    _device.exit_relaxed(&mode)
                    _device.exit_device(&switch)
        self.device_index = device
        self.stream_priority = clamped
        self.owned = True
        return 0

    cdef bint c_query(self) except -1:
        _device.refuse_on_capturing_stream("Stream.query()", self.handle, self.device_index)
        cdef cyruntime.cudaError_t status
        cdef int mode
        with nogil:
            _device.enter_relaxed(&mode)
            status = cyruntime.cudaStreamQuery(self.handle)
            _device.exit_relaxed(&mode)
        if status == cudaErrorNotReady:
            cyruntime.cudaGetLastError()  # not-ready is an answer, not a sticky error
            return False
        errors.check(status, "cudaStreamQuery")
        return True

    cdef object c_synchronize(self):
        _device.refuse_on_capturing_stream("Stream.synchronize()", self.handle,
                                           self.device_index)
        cdef int mode
        with nogil:
            _device.enter_relaxed(&mode)
            try:
                errors.check(cyruntime.cudaStreamSynchronize(self.handle),
                             "cudaStreamSynchronize")
            finally:
                _device.exit_relaxed(&mode)
        return None

    cdef object c_wait_event(self, object event):
        if not isinstance(event, EventCore):
            raise TypeError(f"event must be a tensorplay.cuda.Event, got {type(event).__name__}")
        cdef EventCore waited = event
        if waited.handle == NULL:  # never recorded: nothing to wait for, as in PyTorch
            return None
        # Note [Events in graphs]: the capture this stream takes part in, if any, decides.
        cdef unsigned long long waiting = 0
        if _device.capture_open():
            waiting = _device.stream_capture_id(self.handle, self.device_index)
        cdef unsigned int flags = 0
        cdef bint joins = False
        if waited.external and waiting:
            waited._check_external_capture(self, "wait")
            flags = cyruntime.cudaEventWaitExternal
        elif waited.capture_id:
            joins = self._check_captured_wait(waited, waiting)
        elif waiting and captures.capture_id_open(waiting):
            raise RuntimeError(
                f"stream {<uintptr_t>self.handle:#x} is capturing a graph and cannot wait on an "
                "event recorded outside that capture: CUDA forbids the dependency "
                "(cudaErrorStreamCaptureIsolation, Programming Guide: 'Prohibited and Unhandled "
                "Operations') and would invalidate the capture. Wait before the capture begins, "
                "or record an Event(external=True) outside and wait on it here: the graph then "
                "waits for its latest record on every replay. The capture goes on")
        with nogil:
            errors.check(cyruntime.cudaStreamWaitEvent(self.handle, waited.handle, flags),
                         "cudaStreamWaitEvent")
        if joins:  # Note [Joined streams] (captures.pyx)
            captures.stream_joined(waited.capture_id, self, <uintptr_t>self.handle)
        return None

    cdef bint _check_captured_wait(self, EventCore waited, unsigned long long waiting) except -1:
        """A wait on an event recorded in a capture: legal from a stream of that capture, or
        from a stream taking part in none, which joins it (True); refused otherwise."""
        if not captures.capture_id_open(waited.capture_id):
            raise RuntimeError(
                f"stream {<uintptr_t>self.handle:#x} cannot wait on this event: it was last "
                "recorded inside a graph capture that has ended, so the work it marks exists only "
                "in that graph and CUDA cannot wait for it outside (cudaErrorInvalidValue). "
                "Record the event after replay() to wait for a replay's work")
        if waiting == 0:
            if <uintptr_t>self.handle <= <uintptr_t>cudaStreamLegacy:
                raise RuntimeError(
                    "the legacy default stream cannot wait on an event recorded in a graph "
                    "capture: it would join the capture, and the legacy stream cannot take part "
                    "in one (cudaErrorStreamCaptureImplicit). Join the capture from a "
                    "tensorplay.cuda.Stream(); the capture goes on")
            return True
        if waiting != waited.capture_id:
            raise RuntimeError(
                f"stream {<uintptr_t>self.handle:#x} is capturing one graph and the event was "
                "recorded in another capture: CUDA forbids merging two captures "
                "(cudaErrorStreamCaptureMerge, Programming Guide: 'Prohibited and Unhandled "
                "Operations'), which would invalidate both. Order the two graphs by their "
                "replays instead. Both captures go on")
        return False

    cdef object c_wait_stream(self, StreamCore stream):
        self.c_wait_event(stream.c_record_event(None))
        return None

    cdef object c_record_event(self, object event):
        if event is None:
            # The public class, made without its constructor's wrapper: Event()'s defaults.
            cls = public.public_class("EventCore", EventCore)
            event = cls.__new__(cls)
            (<EventCore>event).init(False, False, False)
        elif not isinstance(event, EventCore):
            raise TypeError(f"event must be a tensorplay.cuda.Event or None, got "
                            f"{type(event).__name__}")
        (<EventCore>event).c_record(self)
        return event

    cdef tuple cuda_stream_protocol(self):
        return (0, <uintptr_t>self.handle)

    cdef bint equals(self, object other):
        return (isinstance(other, StreamCore)
                and (<StreamCore>other).handle == self.handle
                and (<StreamCore>other).device_index == self.device_index)

    cdef Py_hash_t hash_value(self):
        return hash((self.device_index, <uintptr_t>self.handle))

    cdef str repr_text(self):
        return (f"<tensorplay.cuda.Stream device=cuda:{self.device_index} "
                f"cuda_stream={<uintptr_t>self.handle:#x}>")

    cdef object device_object(self):
        return _device.device_object(self.device_index)

    cdef object handle_value(self):
        return <uintptr_t>self.handle

    cdef int priority_value(self):
        return self.stream_priority


cdef class EventCore:
    def __cinit__(self, *args, **kwargs):
        self.handle = NULL
        self.device_index = -1

    def __dealloc__(self):
        cdef int mode
        if self.handle != NULL and _device.is_initialized():
            _device.enter_relaxed(&mode)
            cyruntime.cudaEventDestroy(self.handle)
            _device.exit_relaxed(&mode)

    cdef int init(self, bint enable_timing, bint blocking, bint external) except -1:
        _device.ensure_initialized()
        self.timing = enable_timing
        self.external = external
        self.flags = (cudaEventDefault if enable_timing else cudaEventDisableTiming) | \
            (cudaEventBlockingSync if blocking else 0)
        return 0

    cdef object c_record(self, StreamCore stream):
        cdef StreamCore target = stream  # None: the current stream
        if target is None:
            target = current_stream(_device.current_device())
        cdef _device.DeviceSwitch switch
        cdef int mode
        if self.handle == NULL:
            # Created on first record, on the stream's device, as PyTorch does.
            with nogil:
                _device.enter_device(target.device_index, &switch)
                _device.enter_relaxed(&mode)
                try:
                    errors.check(cyruntime.cudaEventCreateWithFlags(&self.handle, self.flags),
                                 "cudaEventCreateWithFlags")
                finally:
                    _device.exit_relaxed(&mode)
                    _device.exit_device(&switch)
            self.device_index = target.device_index
        elif self.device_index != target.device_index:
            raise ValueError(f"the event was first recorded on cuda:{self.device_index} and "
                             f"cannot be recorded on a stream of cuda:{target.device_index}")
        # An event recorded in a capture belongs to it (Note [Calls during capture]), unless
        # it is external: then the graph records it (Note [Events in graphs]). Only the
        # runtime's own captures are followed; in another library's, CUDA judges each use.
        cdef unsigned long long capture_id = 0
        if _device.capture_open():
            capture_id = _device.stream_capture_id(target.handle, target.device_index)
        cdef unsigned int flags = 0
        cdef bint by_replays = False
        if capture_id and self.external:
            self._check_external_capture(target, "record")
            flags = cyruntime.cudaEventRecordExternal
            by_replays = captures.capture_id_open(capture_id)
            if by_replays:
                captures.external_recorded(capture_id, self)
            capture_id = 0
        elif capture_id and not captures.capture_id_open(capture_id):
            capture_id = 0
        with nogil:
            errors.check(cyruntime.cudaEventRecordWithFlags(self.handle, target.handle, flags),
                         "cudaEventRecordWithFlags")
        self.capture_id = capture_id
        self.awaiting_replay = by_replays
        return None

    cdef int _check_external_capture(self, StreamCore stream, str what) except -1:
        if captures.in_body_capture(stream.handle, stream.device_index):
            raise RuntimeError(
                f"an external event cannot {what} on stream {<uintptr_t>stream.handle:#x}: it is "
                "capturing the body of a conditional graph node, and CUDA allows no event record "
                "or wait nodes inside conditional bodies. Record or wait before "
                "begin_capture_to_*_node() or after end_capture_to_conditional_node(), or use an "
                "event with external=False, which only orders the body's own streams")
        return 0

    cdef object c_wait(self, StreamCore stream):
        if stream is None:
            stream = current_stream(_device.current_device())
        stream.c_wait_event(self)
        return None

    cdef bint c_query(self) except -1:
        if self.handle == NULL:
            return True
        self._refuse_if_captured("Event.query()")
        cdef cyruntime.cudaError_t status
        cdef int mode
        with nogil:
            _device.enter_relaxed(&mode)
            status = cyruntime.cudaEventQuery(self.handle)
            _device.exit_relaxed(&mode)
        if status == cudaErrorNotReady:
            cyruntime.cudaGetLastError()
            return False
        errors.check(status, "cudaEventQuery")
        return True

    cdef object c_synchronize(self):
        cdef int mode
        if self.handle != NULL:
            self._refuse_if_captured("Event.synchronize()")
            self._refuse_if_awaiting_replay("Event.synchronize()")
            with nogil:
                _device.enter_relaxed(&mode)
                try:
                    errors.check(cyruntime.cudaEventSynchronize(self.handle),
                                 "cudaEventSynchronize")
                finally:
                    _device.exit_relaxed(&mode)
        return None

    cdef int _refuse_if_captured(self, str what) except -1:
        if self.capture_id == 0:
            return 0
        if captures.capture_id_open(self.capture_id):
            raise RuntimeError(
                f"{what} cannot run on an event last recorded inside a graph capture that is still "
                "open: CUDA forbids querying or waiting for captured work "
                "(cudaErrorStreamCaptureUnsupported), and the call would invalidate the capture. "
                "Record the event outside the capture, or replay the graph and record it after")
        raise RuntimeError(
            f"{what} cannot run on an event last recorded inside a graph capture that has ended: "
            "the work it marks exists only in that graph (CUDA answers cudaErrorInvalidValue). "
            "Record the event after replay() to wait for or time a replay")

    cdef int _refuse_if_awaiting_replay(self, str what) except -1:
        if self.awaiting_replay:
            raise RuntimeError(
                f"{what}: this external event was last recorded inside a graph capture, so it is "
                "recorded each time a replay of that graph reaches its node, and no replay has "
                "recorded it yet (CUDA knows no record of it to wait for or time). Replay the "
                "graph first, or record the event outside the capture")
        return 0

    cdef double c_elapsed_time(self, object end_event) except? -1:
        if not isinstance(end_event, EventCore):
            raise TypeError(f"end_event must be a tensorplay.cuda.Event, got "
                            f"{type(end_event).__name__}")
        cdef EventCore end = end_event
        if not (self.timing and end.timing):
            raise ValueError("elapsed_time() needs both events created with enable_timing=True")
        if self.handle == NULL or end.handle == NULL:
            raise ValueError("elapsed_time() needs both events recorded first")
        self._refuse_if_captured("Event.elapsed_time()")
        end._refuse_if_captured("Event.elapsed_time()")
        self._refuse_if_awaiting_replay("Event.elapsed_time()")
        end._refuse_if_awaiting_replay("Event.elapsed_time()")
        cdef float milliseconds = 0
        with nogil:
            errors.check(cyruntime.cudaEventElapsedTime(&milliseconds, self.handle, end.handle),
                         "cudaEventElapsedTime")
        return milliseconds


cdef class StreamContextCore:
    def __cinit__(self, *args, **kwargs):
        self.previous_device = -1

    cdef int init(self, StreamCore stream) except -1:
        self.target = stream  # None: a no-op block
        return 0

    # enter() and exit() run in loops, so they save and restore the C state (device, stream
    # handle, and the Stream object that keeps the handle alive) without building a Stream for
    # the previous one, and switch the device only when the stream's differs.
    cdef object enter(self):
        if self.target is None:
            return None
        cdef StreamCore target = self.target
        cdef int device = target.device_index
        owners = _current_owners()
        self.previous_device = _device.current_device()
        self.previous_stream = current_stream_handle(device)
        self.previous_owner = owners.get(device)  # kept alive while we wait
        if device != self.previous_device:
            _device.set_current_device(device)
        owners[device] = target  # Note [Current streams stay alive]
        tensorplay_put_stream(device, <void*>target.handle)
        self.entered = True
        current_stream_changed(device)
        return self.target

    cdef object exit(self, object exc_type, object exc_value, object traceback):
        if self.target is None or not self.entered:
            return None
        cdef int device = self.target.device_index
        owners = _current_owners()
        if self.previous_owner is None:
            owners.pop(device, None)
        else:
            owners[device] = self.previous_owner
        tensorplay_put_stream(device, <void*>self.previous_stream)
        if self.previous_device != device:
            _device.set_current_device(self.previous_device)
        self.previous_owner = None
        self.entered = False
        current_stream_changed(device)
        return None
