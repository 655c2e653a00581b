from libc.stdint cimport int64_t

from tensorplay._runtime.devices.stream cimport StreamCore

# The memory API (api.yaml: tensorplay.accelerator.memory and tensorplay.cuda).
cdef object empty_cache()
cdef object empty_host_cache()
cdef tuple get_memory_info(int device)
cdef int64_t memory_allocated(int device) except -1
cdef int64_t max_memory_allocated(int device) except -1
cdef int64_t memory_reserved(int device) except -1
cdef int64_t max_memory_reserved(int device) except -1
cdef dict memory_stats(int device)
# Per pool: reserved, allocated, active and sleeping bytes, keyed by pool id ((0, 0): shared).
cdef dict pool_memory_stats(int device)
cdef dict memory_stats_as_nested_dict(int device)
cdef object reset_accumulated_memory_stats(int device)
cdef object reset_peak_memory_stats(int device)
# Sizes arrive in api.yaml's range (0 to 2**63 - 1), streams as checked Streams (None: the
# current stream).
cdef object caching_allocator_alloc(size_t size, int device, StreamCore stream)
cdef object caching_allocator_delete(object ptr)
cdef object caching_allocator_record_stream(object ptr, StreamCore stream)
cdef dict host_memory_stats()
cdef object caching_host_allocator_alloc(size_t size)
cdef object caching_host_allocator_delete(object ptr)
cdef object caching_host_allocator_record_stream(object ptr, StreamCore stream)
