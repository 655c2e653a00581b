from libc.stdint cimport uintptr_t

from cuda.bindings.cyruntime cimport cudaStream_t

# What the runtime records of each capture it opened, beyond CUDA's own state (captures.pyx):
# the streams that joined it through an event wait, and the host memory its copies read.
cdef int stream_joined(unsigned long long capture_id, object stream, uintptr_t handle) except -1
cdef list joined_streams(unsigned long long capture_id)
cdef int keep_alive(unsigned long long capture_id, object owner) except -1
# The capture is over (ended, failed or discarded): forget its joins, and hand back what it
# keeps alive, for the graph to hold while it can replay.
cdef list capture_ended(unsigned long long capture_id)
# The joined streams of capture_id that have captured work the origin stream's next node would
# not depend on: the ones cudaStreamEndCapture(origin) reports as unjoined.
cdef list unjoined_streams(int device, cudaStream_t origin, unsigned long long capture_id)
