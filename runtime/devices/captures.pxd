from libc.stdint cimport uintptr_t

from cuda.bindings.cyruntime cimport cudaStream_t

# What the runtime records of each capture it opened, beyond CUDA's own state (captures.pyx):
# the streams that joined it through an event wait, and the host memory its copies read.
# A capture (a graph's, or a conditional body's inside it) is reported when it begins, with the
# graph capture id that holds what it keeps alive, and when it ends (or fails).
cdef int capture_began(unsigned long long capture_id, unsigned long long holder) except -1
cdef int capture_ended(unsigned long long capture_id) except -1
# Whether capture_id is one of those captures, still open.
cdef bint capture_id_open(unsigned long long capture_id) except -1
# Whether stream captures a conditional body (a capture whose holder is another capture): CUDA
# allows no event record or wait nodes there, so external events ask first (stream.pyx).
cdef bint in_body_capture(void* stream, int device) except -1
cdef int stream_joined(unsigned long long capture_id, object stream, uintptr_t handle) except -1
# External events recorded in a capture: the graph's first replay records them (stream.pyx).
cdef int external_recorded(unsigned long long capture_id, object event) except -1
cdef list take_external_records(unsigned long long capture_id)   # None when there are none
# owner keeps host memory alive that a node captured under capture_id reads on every replay; the
# graph lets go of it where it lets go of the blocks its capture holds: release_kept() hands the
# owners back (None when there are none).
cdef int keep_alive(unsigned long long capture_id, object owner) except -1
cdef list release_kept(unsigned long long holder)
# The handles of capture_id's joined streams that captured work the origin stream's next node
# would not depend on: the ones cudaStreamEndCapture(origin) reports as unjoined; and the error
# text naming them.
cdef list unjoined_streams(int device, cudaStream_t origin, unsigned long long capture_id)
cdef str unjoined_text(str what, int device, list unjoined, str capture)
