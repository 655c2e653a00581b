# CUDA's virtual memory management, for the caching allocator's expandable segments (vmm.pyx):
# address ranges reserved once, physical memory created and mapped into them, and unmapped and
# released again. Every call runs in the device's context, in the relaxed capture mode (as the
# allocator's cudaMalloc: legal while any thread captures).
from libc.stdint cimport uintptr_t

# One physical allocation (cuMemCreate) mapped at [address, address + size).
cdef struct Chunk:
    uintptr_t address
    size_t size
    unsigned long long handle

# The granularity mappings are made in (cuMemGetAllocationGranularity, minimum): a power of two.
cdef size_t granularity(int device) except 0
# The device's memory (cuDeviceTotalMem), for the size of a large pool's reservation.
cdef size_t total_memory(int device) except 0
# Reserve size bytes of addresses (a multiple of granularity): 0 when none are left.
cdef uintptr_t reserve(int device, size_t size) except? 0
cdef int free_addresses(int device, uintptr_t base, size_t size) except -1
# Create size bytes of physical memory, map them at address and make them readable and writable
# by the device; 1 when the device is out of memory (nothing is left behind), else 0.
cdef int map_chunk(int device, uintptr_t address, size_t size, Chunk* chunk) except -1
# Unmap a chunk and release its physical memory.
cdef int unmap_chunk(int device, Chunk* chunk) except -1
