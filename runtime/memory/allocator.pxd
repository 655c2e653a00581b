# The device caching allocator (allocator.pyx explains the policy at its top).
from libc.stdint cimport int64_t
from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport cudaStream_t

# Statistics kept per device, each with current / peak / allocated (accumulated) / freed
# (accumulated) counters per pool kind, in PyTorch's flat key schema
# ("allocated_bytes.all.current"; docs/design.md, "Memory statistics").
cdef enum Stat:
    STAT_ALLOCATION            # "allocation": live blocks handed out
    STAT_SEGMENT               # "segment": cudaMalloc'ed segments
    STAT_ACTIVE                # "active": blocks in use or awaiting stream events
    STAT_INACTIVE_SPLIT        # "inactive_split": free pieces of split segments
    STAT_ALLOCATED_BYTES       # "allocated_bytes"
    STAT_RESERVED_BYTES        # "reserved_bytes"
    STAT_ACTIVE_BYTES          # "active_bytes"
    STAT_INACTIVE_SPLIT_BYTES  # "inactive_split_bytes"
    STAT_REQUESTED_BYTES       # "requested_bytes": sizes asked for, before rounding
    STAT_COUNT

cdef enum PoolKind:
    POOL_ALL
    POOL_SMALL                 # blocks <= 1 MiB, carved from 2 MiB segments
    POOL_LARGE
    POOL_KIND_COUNT

# A private memory pool's id: (0, n) for handles from graph_pool_handle(), (n, 0) for pools a
# graph creates for itself, as PyTorch's MempoolId_t. (0, 0) is "no pool".
cdef struct PoolId:
    unsigned long long first
    unsigned long long second

# Allocation. allocate() raises tensorplay.OutOfMemoryError after freeing the cache and retrying
# once; release() returns a block to its pool (deferred behind events of other streams that
# used it); record_stream() marks a block as used on another stream. allocate()'s device is
# checked by its caller (device.checked_device, once per call: CUDA initialised, the index
# visible), on the allocation path of every tensor.
cdef void* allocate(int device, size_t size, cudaStream_t stream) except? NULL
cdef int release(void* ptr) except -1
cdef int record_stream(void* ptr, cudaStream_t stream, int stream_device) except -1
cdef int device_of_pointer(void* ptr) except -2     # -1: not ours
cdef size_t block_size(void* ptr) except? 0         # rounded size of a live block

# O(1) counter reads (0 for devices never used); device must be a checked index below MAX_DEVICES.
cdef int64_t stat_current(int device, Stat stat, PoolKind pool) noexcept nogil
cdef int64_t stat_peak(int device, Stat stat, PoolKind pool) noexcept nogil

cdef dict memory_stats(int device)                  # flat dict; empty for a device never used
cdef int reset_peak_stats(int device) except -1
cdef int reset_accumulated_stats(int device) except -1
cdef int empty_cache(int device) except -1          # frees unused cached segments to CUDA
cdef bint device_used(int device) noexcept nogil

# Private pools for graph capture (docs/design.md, "Capture rules"). Pools are refcounted by
# graphs and handles; while a pool is selected for a capture id, allocations made on a stream
# capturing with that id go to the pool; a pool's free memory returns to CUDA at the first
# empty_cache() after its count drops to zero, with no capture open. Blocks freed while a
# capture routes are held for holder (the graph's capture id) until release_held_blocks(holder),
# which makes each of them wait for the work queued so far on the streams in replayed (those the
# graph was launched on) before it is reused (allocator.pyx, Note [Blocks freed during capture]).
cdef PoolId new_pool_handle() noexcept nogil
cdef int retain_pool(int device, PoolId pool) except -1
cdef int release_pool(int device, PoolId pool) except -1
cdef int begin_allocate_to_pool(int device, PoolId pool, unsigned long long capture_id,
                                unsigned long long holder) except -1
cdef int end_allocate_to_pool(int device, PoolId pool) except -1
cdef int release_held_blocks(int device, unsigned long long holder,
                             const vector[cudaStream_t]* replayed) except -1
cdef int pool_count(int device) noexcept nogil
