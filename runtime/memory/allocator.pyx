# distutils: language = c++
# cython: language_level=3
"""The device caching allocator: PyTorch's CUDACachingAllocator policy, in C-level Cython.

The allocation and release paths are hot, and stay in this one module with the structures they
walk (blocks.pxd) and the statistics they count, so that no step of them goes through another
module's function pointer. What is not on them lives beside it: the private pools of graph
capture (pools.pyx) and the memory_stats() dictionary (statistics.pyx).

Note [Caching allocator policy]
cudaMalloc and cudaFree are slow (tens of microseconds to milliseconds), and cudaFree
synchronizes the whole device. So memory, once obtained from CUDA, is cached: a freed block goes
back to a free list of its device and serves later requests without any CUDA call. The rules
below are PyTorch's (c10/cuda/CUDACachingAllocator.cpp; docs/design.md, "Caching allocator"), so
that sizes, statistics and fragmentation behave the way PyTorch users expect.

- Segments and blocks. A segment is one cudaMalloc. It is carved into blocks, kept in address
  order by prev/next links, so that a block being freed can find its neighbours and merge with
  them. A block without neighbours spans its whole segment; only such blocks can be returned
  to CUDA.

- Sizes. Every request is rounded up to a multiple of 512 bytes (and 0 to 512), so every block
  stays aligned for any element type and vector load. Requests up to 1 MiB go to the small pool,
  whose segments are 2 MiB; larger requests go to the large pool, whose segments are 20 MiB for
  requests under 10 MiB and the request rounded up to 2 MiB otherwise. The two pools never share
  segments, so small temporaries cannot fragment the segments that hold large tensors.

- Best fit. Each pool keeps its free blocks ordered by (stream, size, address). A request takes
  the smallest free block of its pool and stream that is large enough, the lowest address among
  equal sizes (one lower_bound). If the remainder is worth keeping (at least 512 bytes in the
  small pool, more than 1 MiB in the large pool) the block is split: the request takes the front
  and the back returns to the free list. Otherwise the request keeps the slack.

- Freeing and merging. A freed block merges with whichever neighbours are free, then returns to
  its pool. A merged block never spans two segments: cudaMalloc gives no adjacency guarantee.

- Streams. A block belongs to the stream it was allocated on. Work on one stream runs in order,
  so a block freed on stream S may be handed to the next request on S at once, even while
  kernels that use it are still queued: they finish before any later work on S starts. It is
  never handed to another stream directly. record_stream(ptr, T) marks a block as also used on
  stream T; when such a block is released, one event (from the per-device cache of idle
  ordering events, stream.pyx Note [Idle ordering events]) is recorded on each of those
  streams, and the block stays out of the free lists until all of its events have completed.
  Completed events are collected at the start of every allocation, by querying each stream's
  oldest events first (one queue per stream, so a busy stream does not hold up the others), and
  by empty_cache, which waits for them.

- Out of memory. A cache miss calls cudaMalloc for a new segment, under the relaxed capture mode
  (a cudaMalloc is legal while any thread captures a graph, and must not invalidate that
  capture). If CUDA reports out of memory, the allocator clears that error, does everything
  empty_cache does and retries once (num_alloc_retries); if that fails too it raises
  tensorplay.OutOfMemoryError (num_ooms) with the request, what tensorplay holds and what CUDA
  has free.

- empty_cache waits for the pending events, then cudaFrees every segment that is entirely free,
  in the shared pools and in private pools no graph or handle holds any more.

- Statistics are PyTorch's (docs/design.md, "Memory statistics"): nine statistics, each per
  pool kind (all, small, large) with current / peak / allocated / freed counters, kept in a
  static C array so the scalar queries (memory_allocated and friends) are plain reads. Settings
  PyTorch offers but we leave at their defaults (max_split_size unlimited, no garbage
  collection threshold) report their default values, as PyTorch does.

- Expandable segments (TENSORPLAY_CUDA_ALLOC_CONF; Note [Expandable segments]): a pool that has
  them grows one mapped address range in place on a cache miss instead of a new cudaMalloc.
  Graph private pools have them by default, so that their graphs can sleep().

- Graph capture and private pools (docs/design.md, "Capture rules"). A graph's allocations
  must survive for as long as the graph can be replayed, so they come from a private pool: pools
  are refcounted by graphs and pool handles (pools.pyx: retain_pool / release_pool), and while a
  pool is selected for a capture id (begin_allocate_to_pool), every allocation on a stream that is
  capturing with that id comes from it. Its blocks are reused only within the pool. While any
  capture routes allocations on a device, the allocator does not query or record events and
  never calls cudaFree there (both would break the capture): frees that need events wait until
  the capture ends, and the out-of-memory path raises without emptying the cache. When a
  pool's count drops to zero its free segments go back to CUDA; segments that still hold
  live blocks go back as those blocks are freed, and the pool disappears with its last segment.

Note [Allocator locks]
Each device has one lock around all of its state; one more, global, lock guards the map from
pointers to live blocks (shared by all devices, as pointers carry no device) and the lazy
creation of device states. The global lock is never held together with a device lock.
Allocations and frees run with the GIL held, and Python code must not deadlock on these locks:
- A lock is first tried without waiting. Only if another thread holds it does this thread wait,
  with the GIL released, because the holder may itself be waiting for the GIL: slow CUDA calls
  (cudaMalloc, cudaFree, event waits) run with the GIL released while the device lock is held.
- Device locks are reentrant for the thread that holds them, like PyTorch's recursive mutex.
  Raising an exception allocates Python objects, which can trigger the cyclic garbage
  collector, whose finalizers can free tensors: release() must then enter the device lock again
  instead of waiting on itself. Exceptions are only raised where the structures are consistent,
  and nothing else under a device lock creates Python objects.
"""
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock,
                               PyThread_allocate_lock, PyThread_free_lock,
                               PyThread_release_lock, PyThread_type_lock)
from cython.operator cimport dereference as deref, preincrement as inc
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy, memset
from libcpp.deque cimport deque
from libcpp.map cimport map
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaError_t, cudaErrorMemoryAllocation, cudaErrorNotReady,
                                      cudaStream_t,
                                      cudaStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                                      cudaStreamCaptureStatus, cudaStreamCaptureStatusActive,
                                      cudaSuccess)

from tensorplay._runtime.devices cimport device as devices
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport stream as streams
from tensorplay._runtime.devices.device cimport MAX_DEVICES
from tensorplay._runtime.base.reentrant_lock cimport acquire, release_lock
from tensorplay._runtime.memory cimport alloc_conf, vmm
from tensorplay._runtime.memory.blocks cimport (Block, BlockPool, DeviceState, FreeBlocks, FreeKey,
                                                KeptCopy, PendingEvent, PoolKey, PrivatePool,
                                                Routing, StreamUse, VmmSegment, block_free,
                                                erase_free, init_pool, insert_free, is_split,
                                                pool_freeable)
from tensorplay._runtime.memory.vmm cimport Chunk

# --------------------------------------------------------------------------------------------
# Sizes (PyTorch's constants; docs/design.md, "Caching allocator")

cdef enum:
    # Every block is a multiple of this and at least this large (kMinBlockSize), which keeps
    # every block aligned for any element type and vector load.
    MIN_BLOCK_SIZE = 512
    # Requests up to this size come from the small pool (kSmallSize) ...
    SMALL_SIZE = 1 << 20
    # ... which carves them out of segments of this size (kSmallBuffer).
    SMALL_BUFFER = 2 << 20
    # Large requests under MIN_LARGE_ALLOC share segments of this size (kLargeBuffer) ...
    LARGE_BUFFER = 20 << 20
    MIN_LARGE_ALLOC = 10 << 20
    # ... and larger ones get a segment of their own, rounded up to this (kRoundLarge).
    ROUND_LARGE = 2 << 20

# No device comes near this many bytes. Larger requests fail as out of memory at once, which
# also keeps the rounding arithmetic below from overflowing.
cdef size_t MAX_REQUEST = (<size_t>1) << 62


cdef inline size_t round_up(size_t size, size_t multiple) noexcept nogil:
    # multiple is a power of two
    return (size + multiple - 1) & ~(multiple - 1)


cdef inline size_t round_size(size_t size) noexcept nogil:
    return MIN_BLOCK_SIZE if size < MIN_BLOCK_SIZE else round_up(size, MIN_BLOCK_SIZE)


cdef inline size_t segment_size(size_t size) noexcept nogil:
    """The cudaMalloc size for a request of size (rounded) bytes that no cached block fits."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return round_up(size, ROUND_LARGE)


# --------------------------------------------------------------------------------------------
# Statistics (docs/design.md, "Memory statistics"; the Counter and Scalar enums are allocator.pxd's)

# Zero-initialised, so a device that was never used reads as all zeros.
cdef int64_t counters[MAX_DEVICES][<int>STAT_COUNT][<int>POOL_KIND_COUNT][<int>COUNTER_COUNT]
cdef int64_t scalars[MAX_DEVICES][<int>SCALAR_COUNT]


cdef inline void update_counter(int64_t* counter, int64_t delta) noexcept nogil:
    counter[<int>COUNTER_CURRENT] += delta
    if delta > 0:
        counter[<int>COUNTER_ALLOCATED] += delta
        if counter[<int>COUNTER_CURRENT] > counter[<int>COUNTER_PEAK]:
            counter[<int>COUNTER_PEAK] = counter[<int>COUNTER_CURRENT]
    else:
        counter[<int>COUNTER_FREED] -= delta


cdef inline void count(int device, Stat stat, bint small, int64_t delta) noexcept nogil:
    """Add delta (possibly negative) to a statistic, for all pools and for the block's kind."""
    if delta == 0:
        return
    update_counter(&counters[device][<int>stat][<int>POOL_ALL][0], delta)
    update_counter(&counters[device][<int>stat][<int>(POOL_SMALL if small else POOL_LARGE)][0],
                   delta)


# --------------------------------------------------------------------------------------------
# Device states (blocks.pxd holds the structures)

# Created on first use of a device (allocation or pool), never destroyed.
cdef DeviceState* states[MAX_DEVICES]
# Note [Allocator locks]: guards allocated_blocks and the creation of states.
cdef PyThread_type_lock global_lock = PyThread_allocate_lock()
if global_lock == NULL:
    raise MemoryError("cannot allocate the lock of tensorplay's caching allocator")
# Every block handed out and not yet released, by address.
cdef unordered_map[uintptr_t, Block*] allocated_blocks


cdef inline void acquire_global() noexcept:
    if not PyThread_acquire_lock(global_lock, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(global_lock, WAIT_LOCK)


cdef DeviceState* state_for(int device) except NULL:
    """The state of a valid device index, created on first use."""
    cdef DeviceState* state = states[device]
    if state != NULL:
        return state
    # TENSORPLAY_CUDA_ALLOC_CONF is read here, at the first use of a device, and a bad setting
    # raises before anything is created (alloc_conf.pyx).
    cdef bint expandable = alloc_conf.settings().expandable_segments
    cdef PyThread_type_lock lock = PyThread_allocate_lock()
    if lock == NULL:
        raise MemoryError("cannot allocate a lock for tensorplay's caching allocator")
    acquire_global()
    if states[device] == NULL:
        state = new DeviceState()
        state.device = device
        state.lock.handle = lock
        state.lock.owner = 0
        state.lock.depth = 0
        init_pool(&state.small_blocks, True, NULL, expandable)
        init_pool(&state.large_blocks, False, NULL, expandable)
        state.pending_event_count = 0
        states[device] = state
        lock = NULL
    PyThread_release_lock(global_lock)
    if lock != NULL:  # another thread created the state first
        PyThread_free_lock(lock)
    return states[device]


cdef DeviceState* used_state(int device) noexcept nogil:
    return states[device] if device_used(device) else NULL


cdef Block* new_block(int device, cudaStream_t stream, BlockPool* pool, uintptr_t ptr,
                      size_t size) noexcept nogil:
    cdef Block* block = new Block()
    block.ptr = ptr
    block.size = size
    block.requested_size = 0
    block.stream = stream
    block.device = device
    block.pool = pool
    block.prev = NULL
    block.next = NULL
    block.allocated = False
    block.event_count = 0
    block.capture_holds = 0
    return block


# --------------------------------------------------------------------------------------------
# Segments

cdef Block* malloc_segment(DeviceState* state, BlockPool* pool, cudaStream_t stream,
                           size_t size) except? NULL:
    """A new segment of size bytes as one free block, or NULL if CUDA is out of memory."""
    cdef void* ptr = NULL
    cdef cudaError_t status = cudaSuccess
    cdef devices.DeviceSwitch switch
    # Note [Caching allocator policy]: relaxed, so that a capture on any thread stays valid.
    cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
    with nogil:
        devices.enter_device(state.device, &switch)
        try:
            errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                         b"cudaThreadExchangeStreamCaptureMode")
            try:
                status = cyruntime.cudaMalloc(&ptr, size)
            finally:
                errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                             b"cudaThreadExchangeStreamCaptureMode")
        finally:
            devices.exit_device(&switch)
    if status == cudaErrorMemoryAllocation:
        cyruntime.cudaGetLastError()  # the error is not sticky: clear it for the next check
        return NULL
    errors.check(status, b"cudaMalloc")
    count(state.device, STAT_SEGMENT, pool.small, 1)
    count(state.device, STAT_RESERVED_BYTES, pool.small, <int64_t>size)
    scalars[state.device][<int>SCALAR_NUM_DEVICE_ALLOC] += 1
    if pool.owner != NULL:
        pool.owner.reserved_bytes += size
    # Its blocks are handed out on stream after its Stream object may be gone.
    streams.allocator_refers_to(stream)
    return new_block(state.device, stream, pool, <uintptr_t>ptr, size)


cdef int free_segment(DeviceState* state, Block* block) except -1:
    """cudaFree a free block that spans its whole segment (never while a capture routes)."""
    cdef devices.DeviceSwitch switch
    with nogil:
        devices.enter_device(state.device, &switch)
        try:
            errors.check(cyruntime.cudaFree(<void*>block.ptr), b"cudaFree")
        finally:
            devices.exit_device(&switch)
    cdef BlockPool* pool = block.pool
    erase_free(pool, block)
    count(state.device, STAT_SEGMENT, pool.small, -1)
    count(state.device, STAT_RESERVED_BYTES, pool.small, -<int64_t>block.size)
    scalars[state.device][<int>SCALAR_NUM_DEVICE_FREE] += 1
    if pool.owner != NULL:
        pool.owner.reserved_bytes -= block.size
    del block
    return 0


cdef int free_whole_segments(DeviceState* state, BlockPool* pool) except -1:
    cdef vector[Block*] whole
    cdef FreeBlocks.iterator it = pool.free_blocks.begin()
    while it != pool.free_blocks.end():
        if not is_split(deref(it).second):
            whole.push_back(deref(it).second)
        inc(it)
    cdef Block* block
    for block in whole:
        free_segment(state, block)
    return 0


# --------------------------------------------------------------------------------------------
# Expandable segments

# Note [Expandable segments]
# PyTorch's expandable_segments idea (c10/cuda/CUDACachingAllocator.cpp, ExpandableSegment): in
# a pool that has them, a cache miss does not cudaMalloc a new segment; it maps more physical
# memory (vmm.pyx) at the end of an address range reserved once per pool, pool kind and
# stream, so that the segment grows in place and the new memory merges with a free block at its
# end. A segment's blocks end at a size-0 block that counts as allocated (blocks.pxd,
# VmmSegment), so the allocation and release paths, and their merging, are exactly those of
# cudaMalloc segments: the only new work is on the cache miss. Every block of an expandable
# segment counts as split (it has a neighbour), as in PyTorch, where the unmapped rest of the
# range is a block too; so free_whole_segments never cudaFrees one. Instead
# release_free_vmm_segments gives a segment back (chunks unmapped and released, addresses
# freed) once it holds one free block; PyTorch also unmaps free pages inside a segment, which
# we do not (docs/design.md, "Expandable segments").
# Growth maps one chunk of what the request lacks beyond the free tail, rounded up to the
# mapping granularity (2 MiB on current GPUs), and at least a small segment (2 MiB) in the small
# pool and a large buffer (20 MiB) for large requests under 10 MiB, as PyTorch's pages.
# Reservations: the device's memory for the large pool (PyTorch reserves 1.125 times it),
# 1 GiB for the small pool, so that many graph pools fit in the 2**47 bytes of addresses; when
# no addresses are left, just what the growth needs.
# A private pool's segments can sleep (sleep_pools): every chunk is unmapped and released, the
# addresses stay reserved and the blocks keep their places; wake_pools maps one new chunk over
# each segment's whole mapped range (one cuMemCreate per segment: mapping costs per call, not
# per byte), and the graph's baked addresses are valid again.

cdef enum:
    SMALL_RESERVATION = 1 << 30


cdef inline size_t round_to(size_t size, size_t multiple) noexcept nogil:
    return (size + multiple - 1) // multiple * multiple


cdef Block* new_memory(DeviceState* state, BlockPool* pool, cudaStream_t stream,
                       size_t size) except? NULL:
    """A cache miss: a block of size bytes or more, off the free lists; NULL when CUDA is out
    of memory."""
    if pool.expandable:
        return grow_segment(state, pool, stream, size)
    return malloc_segment(state, pool, stream, segment_size(size))


cdef size_t growth(BlockPool* pool, size_t needed, size_t size, size_t granularity) noexcept nogil:
    cdef size_t least = needed
    if pool.small:
        least = max(needed, <size_t>SMALL_BUFFER)
    elif size < MIN_LARGE_ALLOC:
        least = max(needed, <size_t>LARGE_BUFFER)
    return round_to(least, granularity)


cdef VmmSegment* reserve_segment(DeviceState* state, BlockPool* pool, cudaStream_t stream,
                                 size_t least) except? NULL:
    """A new, empty expandable segment of at least least bytes; NULL: no addresses left."""
    cdef size_t granularity = vmm.granularity(state.device)
    cdef size_t wanted = SMALL_RESERVATION if pool.small else vmm.total_memory(state.device)
    wanted = round_to(max(wanted, least), granularity)
    cdef uintptr_t base = vmm.reserve(state.device, wanted)
    if base == 0 and wanted > least:
        wanted = least
        base = vmm.reserve(state.device, wanted)
    if base == 0:
        return NULL
    cdef VmmSegment* segment = new VmmSegment()
    segment.base = base
    segment.reserved = wanted
    segment.mapped = 0
    segment.asleep = False
    segment.stream = stream
    segment.end = new_block(state.device, stream, pool, base, 0)
    segment.end.allocated = True  # never merged, never handed out (Note [Expandable segments])
    pool.segments.push_back(segment)
    count(state.device, STAT_SEGMENT, pool.small, 1)
    streams.allocator_refers_to(stream)
    return segment


cdef int drop_segment(DeviceState* state, BlockPool* pool, VmmSegment* segment) except -1:
    """Forget an expandable segment that holds no block (or its one free block, erased)."""
    cdef size_t i
    for i in range(pool.segments.size()):
        if pool.segments[i] == segment:
            pool.segments.erase(pool.segments.begin() + i)
            break
    vmm.free_addresses(state.device, segment.base, segment.reserved)
    if not segment.asleep:  # a sleeping segment stopped counting when it fell asleep
        count(state.device, STAT_SEGMENT, pool.small, -1)
    cdef Block* end = segment.end
    del end
    del segment
    return 0


cdef Block* grow_segment(DeviceState* state, BlockPool* pool, cudaStream_t stream,
                         size_t size) except? NULL:
    cdef size_t granularity = vmm.granularity(state.device)
    cdef VmmSegment* segment = NULL
    cdef VmmSegment* candidate
    cdef Block* tail = NULL
    cdef size_t grow = 0
    cdef bint tail_free = False
    cdef Chunk chunk
    for candidate in pool.segments:
        if candidate.stream != stream or candidate.asleep:
            continue
        tail = candidate.end.prev
        tail_free = tail != NULL and block_free(tail)
        grow = growth(pool, size - tail.size if tail_free else size, size, granularity)
        if candidate.reserved - candidate.mapped >= grow:
            segment = candidate
            break
    if segment == NULL:
        tail_free = False
        grow = growth(pool, size, size, granularity)
        segment = reserve_segment(state, pool, stream, grow)
        if segment == NULL:
            return NULL
    if vmm.map_chunk(state.device, segment.base + segment.mapped, grow, &chunk):
        if segment.mapped == 0:
            drop_segment(state, pool, segment)
        return NULL
    segment.chunks.push_back(chunk)
    segment.mapped += grow
    count(state.device, STAT_RESERVED_BYTES, pool.small, <int64_t>grow)
    count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, <int64_t>grow)
    scalars[state.device][<int>SCALAR_NUM_DEVICE_ALLOC] += 1
    if pool.owner != NULL:
        pool.owner.reserved_bytes += grow
    cdef Block* block
    if tail_free:  # the free block at the end grows in place
        block = segment.end.prev
        erase_free(pool, block)
        block.size += grow
    else:
        block = new_block(state.device, stream, pool, segment.end.ptr, grow)
        block.prev = segment.end.prev
        if block.prev != NULL:
            block.prev.next = block
        block.next = segment.end
        segment.end.prev = block
        count(state.device, STAT_INACTIVE_SPLIT, pool.small, 1)
    segment.end.ptr = segment.base + segment.mapped
    return block


cdef int release_free_vmm_segments(DeviceState* state, BlockPool* pool) except -1:
    """empty_cache for expandable segments: give back each segment that holds one free block."""
    cdef vector[VmmSegment*] whole
    cdef VmmSegment* segment
    cdef Block* head
    for segment in pool.segments:
        head = segment.end.prev
        if head != NULL and head.prev == NULL and block_free(head):
            whole.push_back(segment)
    cdef Chunk chunk
    for segment in whole:
        head = segment.end.prev
        for chunk in segment.chunks:
            vmm.unmap_chunk(state.device, &chunk)
            scalars[state.device][<int>SCALAR_NUM_DEVICE_FREE] += 1
        segment.chunks.clear()
        erase_free(pool, head)
        count(state.device, STAT_INACTIVE_SPLIT, pool.small, -1)
        count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, -<int64_t>head.size)
        if segment.asleep:
            pool.owner.sleeping_bytes -= segment.mapped
        else:
            count(state.device, STAT_RESERVED_BYTES, pool.small, -<int64_t>segment.mapped)
            if pool.owner != NULL:
                pool.owner.reserved_bytes -= segment.mapped
        del head
        drop_segment(state, pool, segment)
    return 0


# --------------------------------------------------------------------------------------------
# Sleeping pools (pools.pyx checks the arguments and the pools' states first)

cdef int free_kept(PrivatePool* pool) except -1:
    cdef KeptCopy kept
    for kept in pool.kept:
        cyruntime.cudaFreeHost(kept.host)
    pool.kept.clear()
    return 0


cdef Block* find_live_block(PrivatePool* pool, uintptr_t ptr) noexcept nogil:
    """The allocated block of an expandable segment of pool that starts at ptr, or NULL."""
    cdef BlockPool* kinds[2]
    kinds[0] = &pool.small_blocks
    kinds[1] = &pool.large_blocks
    cdef VmmSegment* segment
    cdef Block* block
    cdef int kind
    for kind in range(2):
        for segment in kinds[kind].segments:
            if not segment.base <= ptr < segment.base + segment.mapped:
                continue
            block = segment.end.prev
            while block != NULL:
                if block.ptr == ptr:
                    return block if block.allocated else NULL
                block = block.prev
    return NULL


cdef int keep_block(PrivatePool* pool, Block* block) except -1:
    """Copy a live block to new pinned host memory (the device is idle: sleep_pools)."""
    cdef KeptCopy kept
    kept.device_pointer = block.ptr
    kept.size = block.size
    kept.host = NULL
    cdef cudaError_t status
    with nogil:
        status = cyruntime.cudaMallocHost(&kept.host, kept.size)
    if status == cudaErrorMemoryAllocation:
        cyruntime.cudaGetLastError()
        raise errors.out_of_memory_error(
            f"sleep(keep=...) could not allocate {format_size(kept.size)} of pinned host memory "
            f"to keep a tensor of private pool ({pool.id.first}, {pool.id.second}); nothing was "
            "released")
    errors.check(status, b"cudaMallocHost")
    pool.kept.push_back(kept)
    with nogil:
        errors.check(cyruntime.cudaMemcpy(kept.host, <void*>kept.device_pointer, kept.size,
                                          cyruntime.cudaMemcpyDeviceToHost), b"cudaMemcpy")
    return 0


cdef int keep_pool_blocks(PrivatePool* pool) except -1:
    cdef BlockPool* kinds[2]
    kinds[0] = &pool.small_blocks
    kinds[1] = &pool.large_blocks
    cdef VmmSegment* segment
    cdef Block* block
    cdef int kind
    for kind in range(2):
        for segment in kinds[kind].segments:
            block = segment.end.prev
            while block != NULL:
                if block.allocated:
                    keep_block(pool, block)
                block = block.prev
    return 0


cdef int sleep_pools(DeviceState* state, vector[PrivatePool*]* chosen, bint keep_all,
                     vector[uintptr_t]* keep) except -1:
    """Under the device lock, with the device idle and no capture open: copy what is kept,
    then unmap and release every chunk of the pools, keeping their addresses. Each pointer of
    keep is a live block of one of them (pools.pyx checked it with live_block_of)."""
    cdef PrivatePool* pool
    cdef Block* block
    cdef uintptr_t ptr
    try:
        for pool in chosen[0]:
            if keep_all:
                keep_pool_blocks(pool)
            else:
                for ptr in keep[0]:
                    block = find_live_block(pool, ptr)
                    if block != NULL:
                        keep_block(pool, block)
    except BaseException:
        for pool in chosen[0]:
            free_kept(pool)
        raise
    cdef BlockPool* kinds[2]
    cdef VmmSegment* segment
    cdef Chunk chunk
    cdef int kind
    for pool in chosen[0]:
        kinds[0] = &pool.small_blocks
        kinds[1] = &pool.large_blocks
        for kind in range(2):
            for segment in kinds[kind].segments:
                for chunk in segment.chunks:
                    vmm.unmap_chunk(state.device, &chunk)
                    scalars[state.device][<int>SCALAR_NUM_DEVICE_FREE] += 1
                segment.chunks.clear()
                segment.asleep = True
                count(state.device, STAT_SEGMENT, kinds[kind].small, -1)
                count(state.device, STAT_RESERVED_BYTES, kinds[kind].small,
                      -<int64_t>segment.mapped)
                pool.reserved_bytes -= segment.mapped
                pool.sleeping_bytes += segment.mapped
        pool.asleep = True
    return 0


cdef int map_asleep(DeviceState* state, vector[PrivatePool*]* chosen,
                    vector[VmmSegment*]* woken) except -1:
    """Map one chunk over each sleeping segment of the pools; 1 when out of memory, with what
    this call mapped unmapped again."""
    cdef BlockPool* kinds[2]
    cdef PrivatePool* pool
    cdef VmmSegment* segment
    cdef Chunk chunk
    cdef int kind, out_of_memory
    for pool in chosen[0]:
        kinds[0] = &pool.small_blocks
        kinds[1] = &pool.large_blocks
        for kind in range(2):
            for segment in kinds[kind].segments:
                if not segment.asleep:
                    continue
                try:
                    out_of_memory = vmm.map_chunk(state.device, segment.base, segment.mapped,
                                                  &chunk)
                except BaseException:
                    unmap_woken(state, woken)
                    raise
                if out_of_memory:
                    unmap_woken(state, woken)
                    return 1
                segment.chunks.push_back(chunk)
                woken.push_back(segment)
    return 0


cdef int unmap_woken(DeviceState* state, vector[VmmSegment*]* woken) except -1:
    cdef VmmSegment* segment
    for segment in woken[0]:
        vmm.unmap_chunk(state.device, &segment.chunks[0])
        segment.chunks.clear()
    woken.clear()
    return 0


cdef int wake_pools(DeviceState* state, vector[PrivatePool*]* chosen) except -1:
    """Under the device lock, no capture open: map the pools' segments again at their addresses
    and restore what sleep() kept. 1 when the device is out of memory even after emptying the
    cache: the pools stay asleep, as they were."""
    cdef vector[VmmSegment*] woken
    if map_asleep(state, chosen, &woken):
        scalars[state.device][<int>SCALAR_NUM_ALLOC_RETRIES] += 1
        release_cached_blocks(state)
        if map_asleep(state, chosen, &woken):
            scalars[state.device][<int>SCALAR_NUM_OOMS] += 1
            return 1
    cdef VmmSegment* segment
    for segment in woken:
        segment.asleep = False
        count(state.device, STAT_SEGMENT, segment.end.pool.small, 1)
        count(state.device, STAT_RESERVED_BYTES, segment.end.pool.small,
              <int64_t>segment.mapped)
        segment.end.pool.owner.reserved_bytes += segment.mapped
        segment.end.pool.owner.sleeping_bytes -= segment.mapped
        scalars[state.device][<int>SCALAR_NUM_DEVICE_ALLOC] += 1
    cdef PrivatePool* pool
    cdef KeptCopy kept
    for pool in chosen[0]:
        pool.asleep = False
        for kept in pool.kept:
            with nogil:
                errors.check(cyruntime.cudaMemcpy(<void*>kept.device_pointer, kept.host,
                                                  kept.size, cyruntime.cudaMemcpyHostToDevice),
                             b"cudaMemcpy")
        free_kept(pool)
    return 0


cdef int pool_figures(PrivatePool* pool, BlockPool* small, BlockPool* large,
                      size_t* free_bytes, size_t* sleeping) noexcept nogil:
    """The free bytes of a pool's two kinds, and what of it sleeps (pool_memory_stats)."""
    cdef FreeBlocks.iterator it
    cdef BlockPool* kinds[2]
    kinds[0] = small
    kinds[1] = large
    cdef int kind
    for kind in range(2):
        it = kinds[kind].free_blocks.begin()
        while it != kinds[kind].free_blocks.end():
            free_bytes[0] += deref(it).second.size
            inc(it)
    sleeping[0] = pool.sleeping_bytes if pool != NULL else 0
    return 0


# --------------------------------------------------------------------------------------------
# Private pools (pools.pyx keeps them; the allocation path and empty_cache serve and free them)

cdef int release_pool_memory(DeviceState* state, PrivatePool* pool) except -1:
    """Return a freeable pool's whole free segments; drop the pool with its last segment.
    Only empty_cache (and the out-of-memory retry) call this, never while a capture is open."""
    free_whole_segments(state, &pool.small_blocks)
    free_whole_segments(state, &pool.large_blocks)
    release_free_vmm_segments(state, &pool.small_blocks)
    release_free_vmm_segments(state, &pool.large_blocks)
    if pool.reserved_bytes == 0 and pool.sleeping_bytes == 0:
        drop_pool(state, pool)
    return 0


cdef int drop_pool(DeviceState* state, PrivatePool* pool) except -1:
    """Forget a pool that owns no segment any more, with the host copies sleep() kept."""
    free_kept(pool)
    state.private_pools.erase(pool.id)
    del pool
    return 0


cdef int release_freeable_pools(DeviceState* state) except -1:
    cdef vector[PrivatePool*] freeable
    cdef map[PoolKey, PrivatePool*].iterator it = state.private_pools.begin()
    while it != state.private_pools.end():
        if pool_freeable(deref(it).second):
            freeable.push_back(deref(it).second)
        inc(it)
    cdef PrivatePool* pool
    for pool in freeable:
        release_pool_memory(state, pool)
    return 0


cdef PrivatePool* routed_pool(DeviceState* state, cudaStream_t stream) except? NULL:
    """The private pool of the capture stream is part of, if a routing selected one."""
    cdef cudaStreamCaptureStatus status
    cdef unsigned long long capture_id = 0
    errors.check(cyruntime.cudaStreamGetCaptureInfo(stream, &status, &capture_id, NULL, NULL,
                                                    NULL, NULL), b"cudaStreamGetCaptureInfo")
    if status != cudaStreamCaptureStatusActive:
        return NULL
    cdef Routing routing
    for routing in state.routings:
        if routing.capture_id == capture_id:
            return routing.pool
    return NULL


# --------------------------------------------------------------------------------------------
# Freeing blocks and events

cdef size_t merge(BlockPool* pool, Block* block, Block* neighbour) noexcept nogil:
    """Absorb a free neighbour into block; returns the bytes absorbed (0: not free)."""
    if (neighbour == NULL or neighbour.allocated or neighbour.event_count > 0
            or neighbour.capture_holds > 0 or not neighbour.stream_uses.empty()):
        return 0
    erase_free(pool, neighbour)
    if block.prev == neighbour:
        block.ptr = neighbour.ptr
        block.prev = neighbour.prev
        if block.prev != NULL:
            block.prev.next = block
    else:
        block.next = neighbour.next
        if block.next != NULL:
            block.next.prev = block
    cdef size_t absorbed = neighbour.size
    block.size += absorbed
    del neighbour
    return absorbed


cdef int free_block(DeviceState* state, Block* block) except -1:
    """Return a released block with no pending uses to its pool, merged with free neighbours."""
    cdef BlockPool* pool = block.pool
    cdef size_t active_size = block.size
    cdef size_t requested_size = block.requested_size
    # Free pieces of split segments ("inactive_split"): the merged neighbours stop being
    # pieces, and the merged block becomes one unless it now spans its whole segment.
    cdef int64_t split_pieces = 0, split_bytes = 0
    cdef size_t absorbed = merge(pool, block, block.prev)
    if absorbed:
        split_pieces -= 1
        split_bytes -= <int64_t>absorbed
    absorbed = merge(pool, block, block.next)
    if absorbed:
        split_pieces -= 1
        split_bytes -= <int64_t>absorbed
    if is_split(block):
        split_pieces += 1
        split_bytes += <int64_t>block.size
    block.requested_size = 0
    insert_free(pool, block)
    count(state.device, STAT_INACTIVE_SPLIT, pool.small, split_pieces)
    count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, split_bytes)
    count(state.device, STAT_ACTIVE, pool.small, -1)
    count(state.device, STAT_ACTIVE_BYTES, pool.small, -<int64_t>active_size)
    count(state.device, STAT_REQUESTED_BYTES, pool.small, -<int64_t>requested_size)
    return 0


cdef int insert_events(DeviceState* state, Block* block) except -1:
    """Record an event on each stream that used the released block; it waits for them all."""
    cdef StreamUse use
    cdef PendingEvent pending
    cdef cudaError_t status
    while not block.stream_uses.empty():
        use = block.stream_uses.back()
        streams.take_ordering_event(use.device, &pending.event)
        pending.device = use.device
        pending.block = block
        status = cyruntime.cudaEventRecord(pending.event, use.stream)
        if status != cudaSuccess:
            streams.give_back_ordering_event(use.device, pending.event)
            errors.check(status, b"cudaEventRecord")
        block.stream_uses.pop_back()
        block.event_count += 1
        state.pending_events[<uintptr_t>use.stream].push_back(pending)
        state.pending_event_count += 1
    return 0


cdef int insert_deferred_events(DeviceState* state) except -1:
    cdef vector[Block*] deferred
    deferred.swap(state.deferred_until_no_capture)
    cdef Block* block
    for block in deferred:
        insert_events(state, block)
    return 0


cdef int event_completed(DeviceState* state, PendingEvent pending) except -1:
    streams.give_back_ordering_event(pending.device, pending.event)
    state.pending_event_count -= 1
    pending.block.event_count -= 1
    if pending.block.event_count == 0:
        free_block(state, pending.block)
    return 0


cdef int process_events(DeviceState* state) except -1:
    """Free the blocks whose events have all completed, without waiting (not while capturing)."""
    if not state.deferred_until_no_capture.empty():
        insert_deferred_events(state)
    if state.pending_event_count == 0:
        return 0
    cdef unordered_map[uintptr_t, deque[PendingEvent]].iterator it = state.pending_events.begin()
    cdef deque[PendingEvent]* queue
    cdef cudaError_t status
    cdef PendingEvent pending
    while it != state.pending_events.end():
        queue = &deref(it).second
        while not queue.empty():
            pending = queue.front()
            status = cyruntime.cudaEventQuery(pending.event)
            if status == cudaErrorNotReady:
                cyruntime.cudaGetLastError()  # not an error here: clear it
                break
            errors.check(status, b"cudaEventQuery")
            queue.pop_front()
            event_completed(state, pending)
        if queue.empty():
            it = state.pending_events.erase(it)
        else:
            inc(it)
    return 0


cdef int synchronize_and_free_events(DeviceState* state) except -1:
    """Wait for every pending event and free the blocks that waited on them."""
    insert_deferred_events(state)
    cdef unordered_map[uintptr_t, deque[PendingEvent]].iterator it = state.pending_events.begin()
    cdef deque[PendingEvent]* queue
    cdef PendingEvent pending
    while it != state.pending_events.end():
        queue = &deref(it).second
        while not queue.empty():
            pending = queue.front()
            with nogil:
                errors.check(cyruntime.cudaEventSynchronize(pending.event),
                             b"cudaEventSynchronize")
            queue.pop_front()
            event_completed(state, pending)
        it = state.pending_events.erase(it)
    scalars[state.device][<int>SCALAR_NUM_SYNC_ALL_STREAMS] += 1
    return 0


cdef int release_cached_blocks(DeviceState* state) except -1:
    """empty_cache: wait for pending events, then cudaFree every unused segment."""
    if devices.capture_open():  # waits and cudaFree would break a capture (on any device)
        return 0
    synchronize_and_free_events(state)
    free_whole_segments(state, &state.small_blocks)
    free_whole_segments(state, &state.large_blocks)
    release_free_vmm_segments(state, &state.small_blocks)
    release_free_vmm_segments(state, &state.large_blocks)
    release_freeable_pools(state)
    return 0


cdef int free_released(DeviceState* state, Block* block) except -1:
    """The release path, under the device lock: the block's bytes stop being allocated now,
    its memory becomes reusable once the other streams that used it are done, and once the
    graphs whose captures saw it freed are gone (Note [Blocks freed during capture])."""
    block.allocated = False
    count(state.device, STAT_ALLOCATION, block.pool.small, -1)
    count(state.device, STAT_ALLOCATED_BYTES, block.pool.small, -<int64_t>block.size)
    if not state.routings.empty():
        hold_for_captures(state, block)
        if block.capture_holds > 0:
            return 0
    return reuse_when_done(state, block)


cdef int reuse_when_done(DeviceState* state, Block* block) except -1:
    """A released block nothing holds any more: free now, or once the streams that used it
    are done (events, recorded only while no capture is open)."""
    if block.stream_uses.empty():
        free_block(state, block)
    elif devices.capture_open():  # recording or querying events now would break a capture
        state.deferred_until_no_capture.push_back(block)
    else:
        insert_events(state, block)
    return 0


# Note [Blocks freed during capture]
# A graph references the memory its captured kernels read and write, and a tensor the capture
# frees may still be written by the graph on every replay: PyTorch's recapture test writes a
# tensor of an earlier capture (b.fill_()), then rebinds it (b = b + 2), freeing its block in
# the middle of the capture. If that block went back to the cache, another allocation could
# take it, and once its pool was released, empty_cache() would return it to CUDA while the
# graph still writes it (an illegal address on the next replay). So a block freed while a
# capture routes on its device, from any pool but that capture's own private pool, is held for
# the graph of each such capture: it stays out of the free lists (it counts as active, not
# allocated) until every graph holding it is reset, deleted or fails its capture
# (release_held_blocks). Blocks of the capture's own pool need no hold: the graph keeps the
# pool, and reuse inside the pool follows the capture's stream order, as in PyTorch.
cdef int hold_for_captures(DeviceState* state, Block* block) except -1:
    cdef size_t i, j
    cdef unsigned long long holder
    cdef bint seen
    for i in range(state.routings.size()):
        if state.routings[i].pool == block.pool.owner:
            continue
        holder = state.routings[i].holder
        seen = False
        for j in range(i):  # a graph's conditional bodies route under its own holder id
            if state.routings[j].holder == holder and state.routings[j].pool != block.pool.owner:
                seen = True
        if not seen:
            state.held_blocks[holder].push_back(block)
            block.capture_holds += 1
    return 0


# --------------------------------------------------------------------------------------------
# Allocating blocks

cdef Block* take_free_block(BlockPool* pool, cudaStream_t stream, size_t size) noexcept nogil:
    """Remove and return the best fit for size on stream, or NULL."""
    cdef FreeKey key
    key.first.first = <uintptr_t>stream
    key.first.second = size
    key.second = 0
    cdef FreeBlocks.iterator it = pool.free_blocks.lower_bound(key)
    if it == pool.free_blocks.end() or deref(it).first.first.first != <uintptr_t>stream:
        return NULL
    cdef Block* block = deref(it).second
    pool.free_blocks.erase(it)
    return block


cdef inline bint should_split(Block* block, size_t size) noexcept nogil:
    cdef size_t remaining = block.size - size
    if block.pool.small:
        return remaining >= MIN_BLOCK_SIZE
    return remaining > SMALL_SIZE


cdef void hand_out(DeviceState* state, Block* block, size_t size,
                   size_t requested) noexcept nogil:
    """Split off what the request does not need, mark the block allocated, count it."""
    cdef BlockPool* pool = block.pool
    cdef bint was_split = is_split(block)
    cdef Block* rest
    if should_split(block, size):
        rest = new_block(state.device, block.stream, pool, block.ptr + size, block.size - size)
        rest.prev = block
        rest.next = block.next
        if rest.next != NULL:
            rest.next.prev = rest
        block.next = rest
        block.size = size
        insert_free(pool, rest)
        if was_split:  # a free piece shrank by size bytes
            count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, -<int64_t>size)
        else:  # a whole segment became split: its back is a new free piece
            count(state.device, STAT_INACTIVE_SPLIT, pool.small, 1)
            count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, <int64_t>rest.size)
    elif was_split:  # a free piece is taken whole
        count(state.device, STAT_INACTIVE_SPLIT, pool.small, -1)
        count(state.device, STAT_INACTIVE_SPLIT_BYTES, pool.small, -<int64_t>block.size)
    block.allocated = True
    block.requested_size = requested
    count(state.device, STAT_ALLOCATION, pool.small, 1)
    count(state.device, STAT_ALLOCATED_BYTES, pool.small, <int64_t>block.size)
    count(state.device, STAT_ACTIVE, pool.small, 1)
    count(state.device, STAT_ACTIVE_BYTES, pool.small, <int64_t>block.size)
    count(state.device, STAT_REQUESTED_BYTES, pool.small, <int64_t>requested)


cdef Block* malloc_block(DeviceState* state, size_t requested, cudaStream_t stream) except NULL:
    """The allocation path, under the device lock (Note [Caching allocator policy])."""
    cdef PrivatePool* graph_pool = NULL
    if not devices.capture_open():
        process_events(state)
    if not state.routings.empty():
        graph_pool = routed_pool(state, stream)
    if requested > MAX_REQUEST:
        raise_out_of_memory(state, requested, requested)
    cdef size_t size = round_size(requested)
    cdef bint small = size <= SMALL_SIZE
    cdef BlockPool* pool
    if graph_pool != NULL:
        pool = &graph_pool.small_blocks if small else &graph_pool.large_blocks
    else:
        pool = &state.small_blocks if small else &state.large_blocks
    cdef Block* block = take_free_block(pool, stream, size)
    if block == NULL:
        block = new_memory(state, pool, stream, size)
    if block == NULL and not devices.capture_open():
        scalars[state.device][<int>SCALAR_NUM_ALLOC_RETRIES] += 1
        release_cached_blocks(state)
        block = new_memory(state, pool, stream, size)
    if block == NULL:
        raise_out_of_memory(state, requested, segment_size(size))
    hand_out(state, block, size, requested)
    return block


cdef str format_size(size_t size):
    if size < 1024:
        return f"{size} bytes"
    if size < 1 << 20:
        return f"{size / 1024:.2f} KiB"
    if size < 1 << 30:
        return f"{size / (1 << 20):.2f} MiB"
    return f"{size / (1 << 30):.2f} GiB"


cdef int raise_out_of_memory(DeviceState* state, size_t requested, size_t segment) except -1:
    cdef int device = state.device
    scalars[device][<int>SCALAR_NUM_OOMS] += 1
    cdef size_t free_bytes = 0, total_bytes = 0, graph_bytes = 0
    cdef devices.DeviceSwitch switch
    cdef cudaError_t status
    with nogil:
        devices.enter_device(device, &switch)
        try:
            status = cyruntime.cudaMemGetInfo(&free_bytes, &total_bytes)
        finally:
            devices.exit_device(&switch)
    if status == cudaSuccess:
        device_text = (f"free on device: {format_size(free_bytes)} of {format_size(total_bytes)} "
                       "total (cudaMemGetInfo)")
    else:
        cyruntime.cudaGetLastError()
        device_text = "free on device: unknown (cudaMemGetInfo failed)"
    cdef map[PoolKey, PrivatePool*].iterator it = state.private_pools.begin()
    while it != state.private_pools.end():
        graph_bytes += deref(it).second.reserved_bytes
        inc(it)
    cdef int64_t allocated = \
        counters[device][<int>STAT_ALLOCATED_BYTES][<int>POOL_ALL][<int>COUNTER_CURRENT]
    cdef int64_t reserved = \
        counters[device][<int>STAT_RESERVED_BYTES][<int>POOL_ALL][<int>COUNTER_CURRENT]
    needed = f" (it needed a new segment of {format_size(segment)})" if segment > requested else ""
    if not devices.capture_open():
        tried = ("The cache was emptied and the allocation retried once; memory reserved but "
                 "unallocated is held by segments that also hold live tensors (fragmentation).")
    else:
        tried = ("A graph capture is in progress, so the cache was not emptied; "
                 "allocate the memory before capturing.")
    raise errors.out_of_memory_error(
        f"CUDA out of memory. Tried to allocate {format_size(requested)} ({requested} bytes) on "
        f"device {device}{needed}. Allocated by tensorplay: {format_size(allocated)}; reserved "
        f"by tensorplay: {format_size(reserved)} ({format_size(reserved - allocated)} reserved "
        f"but unallocated, {format_size(graph_bytes)} in graph private pools); {device_text}. "
        f"{tried}")


# --------------------------------------------------------------------------------------------
# The interface (allocator.pxd)

cdef str unknown_pointer(void* ptr):
    return (f"pointer {<uintptr_t>ptr:#x} was not allocated by tensorplay's caching allocator, "
            "or already freed")


cdef Block* find_allocated(void* ptr) noexcept:
    acquire_global()
    cdef unordered_map[uintptr_t, Block*].iterator it = allocated_blocks.find(<uintptr_t>ptr)
    cdef Block* block = NULL
    if it != allocated_blocks.end():
        block = deref(it).second
    PyThread_release_lock(global_lock)
    return block


cdef Block* allocate_block(int device, size_t size, cudaStream_t stream) except NULL:
    # The caller checked device (allocator.pxd), which initialised CUDA.
    cdef DeviceState* state = state_for(device)
    cdef Block* block = NULL
    acquire(&state.lock)
    try:
        block = malloc_block(state, size, stream)
    finally:
        release_lock(&state.lock)
    acquire_global()
    allocated_blocks[block.ptr] = block
    PyThread_release_lock(global_lock)
    return block


cdef void* allocate(int device, size_t size, cudaStream_t stream) except? NULL:
    return <void*>allocate_block(device, size, stream).ptr


# The flag of the shared pools, which never sleep.
cdef bint _never_asleep = False


cdef bint* never_asleep() noexcept nogil:
    return &_never_asleep


cdef void* allocate_with_flag(int device, size_t size, cudaStream_t stream,
                              bint** asleep) except? NULL:
    cdef Block* block = allocate_block(device, size, stream)
    # The block is ours alone now; its pool's owner never changes.
    asleep[0] = &block.pool.owner.asleep if block.pool.owner != NULL else &_never_asleep
    return <void*>block.ptr


cdef int release(void* ptr) except -1:
    acquire_global()
    cdef unordered_map[uintptr_t, Block*].iterator it = allocated_blocks.find(<uintptr_t>ptr)
    cdef Block* block = NULL
    if it != allocated_blocks.end():
        # Taken out of the map before anything else, so two threads releasing the same
        # pointer cannot both free it.
        block = deref(it).second
        allocated_blocks.erase(it)
    PyThread_release_lock(global_lock)
    if block == NULL:
        raise ValueError(unknown_pointer(ptr))
    cdef DeviceState* state = states[block.device]
    acquire(&state.lock)
    try:
        free_released(state, block)
    finally:
        release_lock(&state.lock)
    return 0


cdef int record_stream(void* ptr, cudaStream_t stream, int stream_device) except -1:
    # No CUDA call: legal on a capturing stream, as PyTorch's. The events are recorded when
    # the block is released, after the capture ends (reuse_when_done).
    cdef Block* block = find_allocated(ptr)
    if block == NULL:
        raise ValueError(unknown_pointer(ptr))
    cdef DeviceState* state = states[block.device]
    acquire(&state.lock)
    try:
        add_stream_use(block, stream, stream_device)
    finally:
        release_lock(&state.lock)
    return 0


cdef int device_of_pointer(void* ptr) except -2:
    acquire_global()
    cdef unordered_map[uintptr_t, Block*].iterator it = allocated_blocks.find(<uintptr_t>ptr)
    cdef int device = -1 if it == allocated_blocks.end() else deref(it).second.device
    PyThread_release_lock(global_lock)
    return device


cdef size_t block_size(void* ptr) except? 0:
    acquire_global()
    cdef unordered_map[uintptr_t, Block*].iterator it = allocated_blocks.find(<uintptr_t>ptr)
    cdef size_t size = 0 if it == allocated_blocks.end() else deref(it).second.size
    PyThread_release_lock(global_lock)
    if size == 0:
        raise ValueError(unknown_pointer(ptr))
    return size


cdef bint device_used(int device) noexcept nogil:
    return 0 <= device < MAX_DEVICES and states[device] != NULL


cdef int64_t stat_current(int device, Stat stat, PoolKind pool) noexcept nogil:
    return counters[device][<int>stat][<int>pool][<int>COUNTER_CURRENT]


cdef int64_t stat_peak(int device, Stat stat, PoolKind pool) noexcept nogil:
    return counters[device][<int>stat][<int>pool][<int>COUNTER_PEAK]


cdef size_t largest_free(BlockPool* pool) noexcept nogil:
    cdef size_t largest = 0
    cdef FreeBlocks.iterator it = pool.free_blocks.begin()
    while it != pool.free_blocks.end():
        if deref(it).second.size > largest:
            largest = deref(it).second.size
        inc(it)
    return largest


cdef int snapshot_stats(int device, int64_t* values) except -1:
    # Copied under the lock so that the numbers agree with each other; statistics.pyx builds
    # the dict after it (Note [Allocator locks]; statistics.pyx, Note [Building memory_stats]).
    cdef DeviceState* state = states[device]
    acquire(&state.lock)
    memcpy(values, counters[device], sizeof(counters[device]))
    memcpy(values + <int>COUNTER_VALUES, scalars[device], sizeof(scalars[device]))
    # Private pools serve only their graphs, so only the shared pools count here.
    values[<int>EXTRA_LARGEST_FREE_BLOCK] = max(largest_free(&state.small_blocks),
                                               largest_free(&state.large_blocks))
    values[<int>EXTRA_GRAPH_POOLS] = state.private_pools.size()
    values[<int>EXTRA_CAPTURING] = not state.routings.empty()
    release_lock(&state.lock)
    return 0


cdef int pool_snapshot(int device, vector[PoolFigures]* out) except -1:
    # The pools' own figures under the device lock, then the live blocks under the global lock
    # (never both at once: Note [Allocator locks]), each by its pool.
    cdef DeviceState* state = states[device]
    cdef PoolFigures figures
    cdef unordered_map[uintptr_t, size_t] index   # PrivatePool* (0: the shared pools) -> entry
    cdef map[PoolKey, PrivatePool*].iterator it
    cdef PrivatePool* pool
    cdef size_t private_reserved = 0
    acquire(&state.lock)
    memset(&figures, 0, sizeof(figures))
    pool_figures(NULL, &state.small_blocks, &state.large_blocks, &figures.free_bytes,
                 &figures.sleeping)
    out.push_back(figures)
    index[0] = 0
    it = state.private_pools.begin()
    while it != state.private_pools.end():
        pool = deref(it).second
        memset(&figures, 0, sizeof(figures))
        figures.first = pool.id.first
        figures.second = pool.id.second
        figures.reserved = pool.reserved_bytes
        private_reserved += pool.reserved_bytes
        pool_figures(pool, &pool.small_blocks, &pool.large_blocks, &figures.free_bytes,
                     &figures.sleeping)
        index[<uintptr_t>pool] = out.size()
        out.push_back(figures)
        inc(it)
    out.data()[0].reserved = <size_t>(
        counters[device][<int>STAT_RESERVED_BYTES][<int>POOL_ALL][<int>COUNTER_CURRENT]
        - <int64_t>private_reserved)
    release_lock(&state.lock)
    cdef unordered_map[uintptr_t, Block*].iterator live
    cdef unordered_map[uintptr_t, size_t].iterator entry
    cdef Block* block
    acquire_global()
    live = allocated_blocks.begin()
    while live != allocated_blocks.end():
        block = deref(live).second
        if block.device == device:
            entry = index.find(<uintptr_t>block.pool.owner)
            if entry != index.end():
                out.data()[deref(entry).second].allocated += block.size
        inc(live)
    PyThread_release_lock(global_lock)
    return 0


cdef int reset_peak_stats(int device) except -1:
    if not device_used(device):
        return 0
    cdef DeviceState* state = states[device]
    cdef int stat, kind
    acquire(&state.lock)
    for stat in range(<int>STAT_COUNT):
        for kind in range(<int>POOL_KIND_COUNT):
            counters[device][stat][kind][<int>COUNTER_PEAK] = \
                counters[device][stat][kind][<int>COUNTER_CURRENT]
    release_lock(&state.lock)
    return 0


cdef int reset_accumulated_stats(int device) except -1:
    if not device_used(device):
        return 0
    cdef DeviceState* state = states[device]
    cdef int stat, kind, scalar
    acquire(&state.lock)
    for stat in range(<int>STAT_COUNT):
        for kind in range(<int>POOL_KIND_COUNT):
            counters[device][stat][kind][<int>COUNTER_ALLOCATED] = 0
            counters[device][stat][kind][<int>COUNTER_FREED] = 0
    for scalar in range(<int>SCALAR_COUNT):
        scalars[device][scalar] = 0
    release_lock(&state.lock)
    return 0


cdef int empty_cache(int device) except -1:
    if not device_used(device):
        return 0
    cdef DeviceState* state = states[device]
    acquire(&state.lock)
    try:
        release_cached_blocks(state)
    finally:
        release_lock(&state.lock)
    return 0


cdef int add_stream_use(Block* block, cudaStream_t stream, int stream_device) except -1:
    """Under the block's device lock: the block is reused only once stream's work queued so far
    is done (record_stream's mechanism)."""
    if stream == block.stream:  # uses on the allocation stream are ordered already
        return 0
    cdef StreamUse use
    for use in block.stream_uses:
        if use.stream == stream:
            return 0
    streams.allocator_refers_to(stream)  # its event may be recorded after its Stream is gone
    use.stream = stream
    use.device = stream_device
    block.stream_uses.push_back(use)
    return 0

