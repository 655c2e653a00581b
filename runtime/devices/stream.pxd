from libc.stdint cimport uintptr_t

from cuda.bindings.cyruntime cimport cudaEvent_t, cudaStream_t

cdef class EventCore

cdef class StreamCore:
    cdef readonly int device_index
    cdef cudaStream_t handle
    cdef int stream_priority
    cdef bint owned                    # created here, destroyed with this object
    cdef object keep_alive             # the producer of an external stream
    cdef int init(self, int device, int priority) except -1
    cdef bint c_query(self) except -1
    cdef object c_synchronize(self)
    cdef object c_wait_event(self, object event)
    cdef bint _check_captured_wait(self, EventCore waited, unsigned long long waiting) except -1
    cdef object c_wait_stream(self, StreamCore stream)
    cdef object c_record_event(self, object event)
    cdef tuple cuda_stream_protocol(self)
    cdef bint equals(self, object other)
    cdef Py_hash_t hash_value(self)
    cdef str repr_text(self)
    cdef object device_object(self)
    cdef object handle_value(self)
    cdef int priority_value(self)

cdef class EventCore:
    cdef cudaEvent_t handle
    cdef int device_index              # -1 until first recorded
    cdef unsigned int flags
    cdef bint timing
    # The runtime's capture its last record joined (an internal event), or 0.
    cdef unsigned long long capture_id
    cdef bint external                 # records and waits under capture become graph nodes
    # Its last record is a node of a capture whose graph has not been replayed yet.
    cdef bint awaiting_replay
    cdef int init(self, bint enable_timing, bint blocking, bint external) except -1
    cdef int _check_external_capture(self, StreamCore stream, str what) except -1
    cdef object c_record(self, StreamCore stream)
    cdef object c_wait(self, StreamCore stream)
    cdef bint c_query(self) except -1
    cdef object c_synchronize(self)
    cdef double c_elapsed_time(self, object end_event) except? -1
    cdef int _refuse_if_captured(self, str what) except -1
    cdef int _refuse_if_awaiting_replay(self, str what) except -1

cdef class StreamContextCore:
    cdef StreamCore target             # None: the block changes nothing
    cdef bint entered
    cdef int previous_device           # what enter() replaced, restored by exit()
    cdef cudaStream_t previous_stream
    cdef object previous_owner         # the Stream object that kept previous_stream alive
    cdef int init(self, StreamCore stream) except -1
    cdef object enter(self)
    cdef object exit(self, object exc_type, object exc_value, object traceback)

cdef cudaStream_t current_stream_handle(int device) noexcept nogil
# Make handle current on device for this thread; the caller makes the device current (capture).
cdef void put_current_stream(int device, cudaStream_t handle) noexcept nogil
# The thread-local slot holding this thread's current stream of device: a capture ended from
# another thread (relaxed mode) restores the capturing thread's stream through it.
cdef void** current_stream_slot(int device) noexcept nogil
# Note [Current stream listeners]: called after this thread's current stream of device changed.
cdef int current_stream_changed(int device) except -1
cpdef object add_current_stream_listener(object listener)
cpdef object remove_current_stream_listener(object listener)
cdef StreamCore stream_arg(object value, str argument)              # None allowed
cdef StreamCore required_stream_arg(object value, str argument)
cdef int create_ordering_event(int device, cudaEvent_t* event) except -1 nogil
# Work enqueued later on waiter waits for the work enqueued so far on waited (one-off event).
cdef int order_after(int device, uintptr_t waiter, uintptr_t waited) except -1
# Idle ordering events, per device, shared by the device allocator and the pinned host cache.
# Both take the GIL-protected cache with the GIL held (Note [Idle ordering events]).
cdef int take_ordering_event(int device, cudaEvent_t* event) except -1
cdef void give_back_ordering_event(int device, cudaEvent_t event) noexcept
# The caching allocator will record an event on stream later (record_stream): never destroy it
# (stream.pyx, Note [Streams the allocator refers to]).
cdef void allocator_refers_to(cudaStream_t stream) noexcept
cdef object current_stream(int device)
cdef object set_stream(StreamCore stream)
cdef object stream_context(StreamCore stream)
cdef object external_stream(object handle, int device)
cdef cudaStream_t capture_side_stream(int device) except? NULL
