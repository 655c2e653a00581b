# The device caching allocator (allocator.pyx explains the policy at its top).
from libc.stdint cimport int64_t

from cuda.bindings.cyruntime cimport cudaStream_t

from libc.stdint cimport uintptr_t
from libcpp.vector cimport vector

from tensorplay._runtime.memory.blocks cimport Block, BlockPool, DeviceState, PrivatePool

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

cdef enum Counter:
    COUNTER_CURRENT
    COUNTER_PEAK
    COUNTER_ALLOCATED          # accumulated increases since the last reset_accumulated_stats
    COUNTER_FREED              # accumulated decreases
    COUNTER_COUNT

# Counts that are not per statistic and pool kind.
cdef enum Scalar:
    SCALAR_NUM_ALLOC_RETRIES      # out-of-memory retries after emptying the cache
    SCALAR_NUM_OOMS               # OutOfMemoryErrors raised
    SCALAR_NUM_SYNC_ALL_STREAMS   # waits for every pending event (empty_cache, retries)
    SCALAR_NUM_DEVICE_ALLOC       # cudaMalloc calls that succeeded
    SCALAR_NUM_DEVICE_FREE        # cudaFree calls
    SCALAR_COUNT

# The flat snapshot of a device's statistics that memory_stats() is built from (statistics.pyx,
# Note [Building memory_stats]): the counters, indexed [stat][pool kind][counter], then the
# scalars, then three figures of the moment; statistics.pyx appends the fixed ones.
cdef enum:
    COUNTER_VALUES = STAT_COUNT * POOL_KIND_COUNT * COUNTER_COUNT
    EXTRA_LARGEST_FREE_BLOCK = COUNTER_VALUES + SCALAR_COUNT
    EXTRA_GRAPH_POOLS
    EXTRA_CAPTURING
    FIXED_VALUES_START

# Allocation. allocate() raises tensorplay.OutOfMemoryError after freeing the cache and retrying
# once; release() returns a block to its pool (deferred behind events of other streams that
# used it); record_stream() marks a block as used on another stream. allocate()'s device is
# checked by its caller (device.checked_device, once per call: CUDA initialised, the index
# visible), on the allocation path of every tensor.
cdef void* allocate(int device, size_t size, cudaStream_t stream) except? NULL
# allocate(), also answering where the block's pool keeps its asleep flag (docs/design.md,
# "Sleeping graphs"): its private pool's PrivatePool.asleep, or never_asleep() for the shared
# pools. The flag outlives the block: a private pool is dropped only once it owns no segment,
# mapped or asleep (drop_pool's callers), and a live block holds its segment.
cdef void* allocate_with_flag(int device, size_t size, cudaStream_t stream,
                              bint** asleep) except? NULL
cdef bint* never_asleep() noexcept nogil             # a flag that stays False
# The live block at ptr (NULL if none), read under the global lock; its pool's fields do not
# change while it lives.
cdef Block* find_allocated(void* ptr) noexcept
cdef int release(void* ptr) except -1
cdef int record_stream(void* ptr, cudaStream_t stream, int stream_device) except -1
cdef int device_of_pointer(void* ptr) except -2     # -1: not ours
cdef size_t block_size(void* ptr) except? 0         # rounded size of a live block

# O(1) counter reads (0 for devices never used); device must be a checked index below MAX_DEVICES.
cdef int64_t stat_current(int device, Stat stat, PoolKind pool) noexcept nogil
cdef int64_t stat_peak(int device, Stat stat, PoolKind pool) noexcept nogil

# values[:FIXED_VALUES_START] of a device already used (device_used), read under its lock.
cdef int snapshot_stats(int device, int64_t* values) except -1
cdef int reset_peak_stats(int device) except -1
# Per pool figures (pool_memory_stats): entry 0 is the shared pools, id (0, 0); then every
# private pool. reserved: mapped bytes of its segments; free_bytes: on its free lists;
# sleeping: released by sleep(); allocated: bytes of its live blocks.
cdef struct PoolFigures:
    unsigned long long first
    unsigned long long second
    size_t reserved
    size_t free_bytes
    size_t sleeping
    size_t allocated
cdef int pool_snapshot(int device, vector[PoolFigures]* out) except -1
cdef int reset_accumulated_stats(int device) except -1
cdef int empty_cache(int device) except -1          # frees unused cached segments to CUDA
cdef bint device_used(int device) noexcept nogil


# For pools.pyx, which keeps the private pools in the same device states (blocks.pxd): a
# device's state, created on first use (used_state: NULL for a device never used), and the
# release path's steps that a block held for a graph's capture takes when the graph lets it go.
cdef DeviceState* state_for(int device) except NULL
cdef DeviceState* used_state(int device) noexcept nogil
cdef int add_stream_use(Block* block, cudaStream_t stream, int stream_device) except -1
cdef int reuse_when_done(DeviceState* state, Block* block) except -1
# Forget a private pool that owns no segment (its kept host copies freed).
cdef int drop_pool(DeviceState* state, PrivatePool* pool) except -1
# Sleeping private pools (allocator.pyx, Note [Expandable segments]); pools.pyx checks the pools
# (expandable, awake or asleep, no capture open) and idles the device first, under the lock.
# keep_all copies every live block to pinned host memory first, else the blocks starting at the
# pointers of keep (live blocks of the pools: find_live_block). wake_pools answers 1 when the
# device is out of memory, leaving the pools asleep and intact.
cdef Block* find_live_block(PrivatePool* pool, uintptr_t ptr) noexcept nogil
cdef int sleep_pools(DeviceState* state, vector[PrivatePool*]* chosen, bint keep_all,
                     vector[uintptr_t]* keep) except -1
cdef int wake_pools(DeviceState* state, vector[PrivatePool*]* chosen) except -1
# Adds the free bytes of small and large to free_bytes; sleeping: pool's sleeping bytes (0 for
# the shared pools, pool NULL).
cdef int pool_figures(PrivatePool* pool, BlockPool* small, BlockPool* large,
                      size_t* free_bytes, size_t* sleeping) noexcept nogil
