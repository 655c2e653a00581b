# The pinned host memory cache (host_allocator.pyx explains the policy at its top).
from cuda.bindings.cyruntime cimport cudaStream_t

cdef void* host_allocate(size_t size) except? NULL
cdef int host_release(void* ptr) except -1
# The block at ptr is used by the work queued so far on stream: reused only once it completes.
# A RuntimeError on a capturing stream (host_allocator.pyx, Note [Pinned host cache policy]).
cdef int host_record_stream(void* ptr, cudaStream_t stream) except -1
cdef int empty_host_cache() except -1
cdef dict host_memory_stats()
