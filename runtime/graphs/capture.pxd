from cuda.bindings.cyruntime cimport cudaError_t, cudaGraphExec_t, cudaGraph_t, cudaStream_t

from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.devices.stream cimport StreamCore

# A graph's capture (capture.pyx, Note [Capture state]): the capture open on its stream and what
# its begin changed on the capturing thread; and the capture id and private pool that hold what
# the graph's executable refers to, which outlive the capture until the graph lets them go.
cdef class CaptureState:
    cdef cudaStream_t stream
    cdef object stream_owner           # the Stream given to capture_begin, alive until the end
    cdef int mode                      # cudaStreamCaptureMode; its conditional bodies inherit it
    cdef unsigned long long capture_id
    cdef PoolId pool_id
    cdef bint holds_pool               # retain_pool done: reset() or a failed capture releases
    cdef bint routing                  # begin_allocate_to_pool done: the capture's end stops it
    cdef bint capturing                # cudaStreamBeginCapture done and not ended
    cdef bint stream_swapped           # the capture stream is current on thread
    cdef int previous_device           # what the capture's begin replaced, restored at its end
    cdef cudaStream_t previous_stream
    cdef unsigned long thread
    cdef object thread_object          # its threading.Thread, to know whether it still runs
    cdef void** stream_slot            # its current-stream slot (stream.pxd)
    # The steps of a capture, in order: start (the stream made current on this thread, the
    # capture begun on it and registered), route (allocations to pool_id); then either
    # end_on_stream (the captured graph, and CUDA's answer) or end_partial (discarded), and in
    # both cases stopped (the capture is closed; returns the external events recorded in it, or
    # None), stop_routing and restore_stream.
    cdef int start(self, int device, cudaStream_t stream, object owner, int mode) except -1
    cdef int route(self, int device) except -1
    cdef int end_on_stream(self, int device, cudaGraph_t* template,
                           cudaError_t* status) except -1
    cdef int end_partial(self, int device) except -1
    cdef list stopped(self)
    cdef int stop_routing(self, int device) except -1
    cdef int restore_stream(self, int device) except -1
    cdef int check_thread(self, str what) except -1

# The device a capture on stream takes: the stream's, or with none the current device.
cdef int capture_device(StreamCore stream) except -1
# The stream a capture takes: target, else the current stream, or the device's side stream when
# side_stream_default is set or the current one is the legacy default stream; refused when it
# cannot capture.
cdef cudaStream_t capture_stream(StreamCore target, int device,
                                 bint side_stream_default) except? NULL
# What entering a capture block does first: a quiet device and an empty cache.
cdef int quiet_device(int device) except -1
# The RuntimeError of a capture whose end failed (status), naming the unjoined streams.
cdef object end_error(str what, int device, cudaError_t status, list unjoined)
# Instantiate template; in the device's context, in relaxed mode (not captured work).
cdef int instantiate(cudaGraphExec_t* executable, cudaGraph_t template) except -1 nogil
# Destroy a template no one owns yet (a failed capture's).
cdef int destroy_template(int device, cudaGraph_t template) except -1
cdef bint is_current_stream_capturing() except -1
