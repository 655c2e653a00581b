# The device caching allocator's data structures (allocator.pyx, Note [Caching allocator
# policy]), shared by allocator.pyx, which allocates and frees blocks, and pools.pyx, which keeps
# the private pools of graph capture in the same device states. Everything here changes under
# its device's lock (allocator.pyx, Note [Allocator locks]).
from libc.stdint cimport uintptr_t
from libcpp.deque cimport deque
from libcpp.map cimport map
from libcpp.unordered_map cimport unordered_map
from libcpp.utility cimport pair
from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport cudaEvent_t, cudaStream_t

from tensorplay._runtime.base.reentrant_lock cimport ReentrantLock
from tensorplay._runtime.memory.vmm cimport Chunk

cdef struct StreamUse:
    cudaStream_t stream
    int device        # the stream's device: its events must be created there


cdef cppclass Block
cdef cppclass PrivatePool
cdef cppclass VmmSegment

# Free blocks ordered by ((stream, size), address): one lower_bound finds the best fit on a
# stream, smallest size first, then lowest address.
ctypedef pair[pair[uintptr_t, size_t], uintptr_t] FreeKey
ctypedef map[FreeKey, Block*] FreeBlocks


cdef cppclass BlockPool:
    FreeBlocks free_blocks
    bint small
    PrivatePool* owner    # NULL for the shared pools of a device
    # Expandable segments (allocator.pyx, Note [Expandable segments]): a cache miss maps more
    # memory at the end of one of these instead of a new cudaMalloc.
    bint expandable
    vector[VmmSegment*] segments


# An expandable segment: an address range reserved once, mapped from its start by chunks
# (vmm.pxd) as it grows. Its blocks tile [base, base + mapped) and end at `end`, a block of
# size 0 at base + mapped that is always "allocated", so that no block merges with it or
# spans past it.
cdef cppclass VmmSegment:
    uintptr_t base
    size_t reserved           # bytes of addresses reserved
    size_t mapped             # bytes from base that hold blocks (mapped, unless asleep)
    bint asleep               # its chunks are released; the addresses stay reserved
    vector[Chunk] chunks      # physical allocations mapped, in address order (empty asleep)
    Block* end
    cudaStream_t stream


cdef cppclass Block:
    uintptr_t ptr
    size_t size               # rounded; blocks of a segment tile it exactly
    size_t requested_size     # what the caller asked for, while allocated
    cudaStream_t stream       # the allocation stream; its segment's stream
    int device
    BlockPool* pool
    Block* prev               # neighbours within the segment, in address order
    Block* next
    bint allocated            # handed out and not released yet
    int event_count           # events to complete before the block is free
    int capture_holds         # graphs whose capture saw it freed (allocator.pyx, Note [Blocks
                              # freed during capture])
    vector[StreamUse] stream_uses   # other streams that used it (record_stream)


ctypedef pair[unsigned long long, unsigned long long] PoolKey


# A live block's contents copied to pinned host memory by sleep(keep=...), restored by wake().
cdef struct KeptCopy:
    uintptr_t device_pointer
    size_t size
    void* host


cdef cppclass PrivatePool:
    PoolKey id
    int use_count             # graphs and handles holding the pool
    bint routing              # selected for a capture (begin_allocate_to_pool)
    size_t reserved_bytes     # bytes of the segments it owns, mapped
    size_t sleeping_bytes     # bytes of its segments released by sleep(); dropped when both
                              # are zero
    bint asleep               # sleep() released it: no capture into it, no replay (pools.pyx)
    vector[KeptCopy] kept     # what sleep() copied to the host, for wake()
    BlockPool small_blocks
    BlockPool large_blocks


cdef struct PendingEvent:
    cudaEvent_t event
    int device                # the event's device, to return it to the right cache
    Block* block


cdef struct Routing:
    unsigned long long capture_id
    unsigned long long holder  # the graph's capture: blocks freed now are held for it
    PrivatePool* pool


cdef cppclass DeviceState:
    int device
    ReentrantLock lock
    BlockPool small_blocks
    BlockPool large_blocks
    map[PoolKey, PrivatePool*] private_pools
    vector[Routing] routings          # captures whose allocations go to a private pool
    # Events recorded for released blocks, one queue per stream (keyed by the stream's
    # address), oldest first.
    unordered_map[uintptr_t, deque[PendingEvent]] pending_events
    size_t pending_event_count
    # Released blocks whose events could not be recorded because a capture was open.
    vector[Block*] deferred_until_no_capture
    # Blocks released while captures were open, by the capture that holds them (holder id).
    map[unsigned long long, vector[Block*]] held_blocks


cdef inline void init_pool(BlockPool* pool, bint small, PrivatePool* owner,
                           bint expandable) noexcept nogil:
    pool.small = small
    pool.owner = owner
    pool.expandable = expandable


cdef inline FreeKey free_key(Block* block) noexcept nogil:
    cdef FreeKey key
    key.first.first = <uintptr_t>block.stream
    key.first.second = block.size
    key.second = block.ptr
    return key


cdef inline void insert_free(BlockPool* pool, Block* block) noexcept nogil:
    pool.free_blocks[free_key(block)] = block


cdef inline void erase_free(BlockPool* pool, Block* block) noexcept nogil:
    pool.free_blocks.erase(free_key(block))


cdef inline bint is_split(Block* block) noexcept nogil:
    return block.prev != NULL or block.next != NULL


# A private pool no graph or handle holds and no capture routes to: its free segments may go
# back to CUDA, and it is dropped with its last segment.
cdef inline bint pool_freeable(PrivatePool* pool) noexcept nogil:
    return pool.use_count == 0 and not pool.routing


# A block on its pool's free list: released, with nothing pending (merge's test).
cdef inline bint block_free(Block* block) noexcept nogil:
    return (not block.allocated and block.event_count == 0 and block.capture_holds == 0
            and block.stream_uses.empty())

