# Private pools for graph capture (pools.pyx; docs/design.md, "Capture rules").
from libc.stdint cimport uintptr_t
from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport cudaStream_t

# A private memory pool's id: (0, n) for handles from graph_pool_handle(), (n, 0) for pools a
# graph creates for itself, as PyTorch's MempoolId_t. (0, 0) is "no pool".
cdef struct PoolId:
    unsigned long long first
    unsigned long long second

# Pools are refcounted by graphs and handles; while a pool is selected for a capture id,
# allocations made on a stream capturing with that id go to the pool; a pool's free memory
# returns to CUDA at the first empty_cache() after its count drops to zero, with no capture open.
# Blocks freed while a capture routes are held for holder (the graph's capture id) until
# release_held_blocks(holder), which makes each of them wait for the work queued so far on the
# streams in replayed (those the graph was launched on) before it is reused (allocator.pyx,
# Note [Blocks freed during capture]).
# A new pool id: a handle's (0, n), or (n, 0) for a graph's own pool (or a conditional body's).
cdef PoolId new_pool_handle() noexcept nogil
cdef PoolId new_graph_pool() noexcept nogil
cdef int retain_pool(int device, PoolId pool) except -1
cdef int release_pool(int device, PoolId pool) except -1
cdef int begin_allocate_to_pool(int device, PoolId pool, unsigned long long capture_id,
                                unsigned long long holder) except -1
cdef int end_allocate_to_pool(int device, PoolId pool) except -1
cdef int release_held_blocks(int device, unsigned long long holder,
                             const vector[cudaStream_t]* replayed) except -1

# Sleep and wake (pools.pyx; allocator.pyx, Note [Expandable segments]): pool_ids is a list of
# (first, second) pools retained on device, slept or woken together; sleeper names who did it in
# errors. sleep_pools waits for the device, copies the live blocks (keep_all) or the blocks
# starting at keep's pointers to pinned host memory, then releases the pools' physical memory;
# it is refused while a capture is open in the process, into one of the pools, or when one of
# them is asleep or not on virtual memory. wake_pools maps them again and restores the copies;
# it raises OutOfMemoryError leaving them asleep, intact.
cdef int sleep_pools(int device, list pool_ids, bint keep_all, vector[uintptr_t]* keep,
                     str sleeper) except -1
cdef int wake_pools(int device, list pool_ids, str sleeper) except -1
# The pool's asleep flag, valid while the pool is retained (replay reads it: one load; graphs
# holding no pool read allocator.never_asleep()).
cdef bint* asleep_flag(int device, PoolId pool) except NULL
cdef str sleeper_of(int device, PoolId pool)
# For the refusal of tensor operations on sleeping memory (tensor/core.pyx, check_awake): the
# sleeping pool of the live block at ptr and who put it to sleep, as an error names them.
cdef str sleeping_pool_text(void* ptr)
