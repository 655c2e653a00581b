# distutils: language = c++
# cython: language_level=3
"""The pinned (page-locked) host memory cache, after PyTorch's CachingHostAllocator.

Note [Pinned host cache policy]
Asynchronous copies between host and device need page-locked host memory. cudaHostAlloc is
slow (it pins every page) and cudaFreeHost synchronizes the device, so pinned blocks are cached
and reused (docs/design.md, "Pinned host cache"):

- Sizes are rounded up to a power of two, at least 512 bytes, and blocks are never split, so
  the free blocks of one size form an exact-size list and reuse is O(1). The price is up to 2x
  host memory for sizes just above a power of two.

- A copy that reads or writes a pinned block may still be queued on a stream when the block is
  released. host_record_stream(ptr, stream) records an event on that stream after each such
  copy (one event per block and stream, recorded again by later copies: work on a stream runs
  in order, so the latest event covers the earlier ones). A released block is reused only once
  all of its events have completed. Released blocks that still wait are checked when no ready
  block of the requested size is left, and by empty_host_cache.

- If cudaHostAlloc runs out of memory, the ready cached blocks are freed and it is tried once
  more before the allocation fails. empty_host_cache frees every cached block whose events have
  completed; blocks still waiting stay cached.

- A copy captured into a CUDA graph runs at every replay, not now, and an event recorded
  during capture cannot be queried (nor would it cover the replays), so no event can tell when
  a graph is done with a block. Pinned memory a graph reads is therefore kept alive by the
  graph instead (copies.pyx, Note [Host copies during capture]: the captured copy reads the
  source tensor's own pinned memory, never a staging block of this cache, and the capture
  hands the source to the graph through captures.keep_alive). host_record_stream on a
  capturing stream is a mistake of its caller, which would let the cache reuse a block that
  replays still read: it raises, records nothing, and the block is left as it was.

One lock guards all of it, with the same rules as the device allocator's locks (allocator.pyx,
Note [Allocator locks]): it is tried without waiting first, waited for with the GIL released,
reentrant for its holder, and Python objects are only created under it where the structures
are consistent.
"""
from cpython.pythread cimport PyThread_allocate_lock
from cython.operator cimport dereference as deref, preincrement as inc
from libc.stdint cimport int64_t, uintptr_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaError_t, cudaErrorMemoryAllocation, cudaErrorNotReady,
                                      cudaErrorStreamCaptureImplicit, cudaEvent_t,
                                      cudaHostAllocDefault, cudaStream_t, cudaStreamCaptureMode,
                                      cudaStreamCaptureModeRelaxed, cudaStreamCaptureStatus,
                                      cudaStreamCaptureStatusActive,
                                      cudaStreamCaptureStatusNone, cudaSuccess)

from tensorplay._runtime.devices cimport device as devices
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport stream as streams
from tensorplay._runtime.base.reentrant_lock cimport ReentrantLock, acquire, release_lock

cdef enum:
    # The smallest block, as for device blocks: keeps any element type aligned and bounds the
    # number of tiny pinned allocations.
    MIN_HOST_BLOCK = 512

# Larger requests cannot be rounded up to a power of two in a size_t.
cdef size_t MAX_HOST_REQUEST = (<size_t>1) << (8 * sizeof(size_t) - 1)


cdef inline size_t round_size(size_t size) noexcept nogil:
    cdef size_t rounded = MIN_HOST_BLOCK
    while rounded < size:
        rounded <<= 1
    return rounded


# --------------------------------------------------------------------------------------------
# State

cdef struct RecordedEvent:
    cudaStream_t stream
    cudaEvent_t event
    int device            # the stream's device, where the event was created


cdef cppclass HostBlock:
    void* ptr
    size_t size           # a power of two
    bint allocated        # handed out and not released yet
    vector[RecordedEvent] events    # the latest copy on each stream that used the block


cdef enum HostStat:
    HOST_ALLOCATIONS        # blocks handed out
    HOST_ALLOCATED_BYTES    # their bytes
    HOST_RESERVED_BYTES     # pinned bytes held, handed out or cached
    HOST_SEGMENTS           # pinned blocks held (each one cudaHostAlloc)
    HOST_STAT_COUNT

cdef int64_t current[<int>HOST_STAT_COUNT]
cdef int64_t peak[<int>HOST_STAT_COUNT]
cdef int64_t num_host_alloc = 0
cdef int64_t num_host_free = 0
cdef bint used = False      # whether host_allocate ever succeeded in initialising CUDA


cdef inline void count(HostStat stat, int64_t delta) noexcept nogil:
    current[<int>stat] += delta
    if current[<int>stat] > peak[<int>stat]:
        peak[<int>stat] = current[<int>stat]


# Every pinned block held, by address.
cdef unordered_map[uintptr_t, HostBlock*] blocks
# Released blocks whose events have completed, by size.
cdef unordered_map[size_t, vector[HostBlock*]] ready_blocks
# Released blocks that still wait for events.
cdef vector[HostBlock*] waiting_blocks
# Idle events, by device.

cdef ReentrantLock lock
lock.handle = PyThread_allocate_lock()
if lock.handle == NULL:
    raise MemoryError("cannot allocate the lock of tensorplay's pinned host cache")


# --------------------------------------------------------------------------------------------
# Events

cdef bint events_completed(HostBlock* block) except -1:
    cdef RecordedEvent recorded
    cdef cudaError_t status
    for recorded in block.events:
        status = cyruntime.cudaEventQuery(recorded.event)
        if status == cudaErrorNotReady:
            cyruntime.cudaGetLastError()  # not an error here: clear it
            return False
        errors.check(status, b"cudaEventQuery")
    return True


cdef int collect_waiting_blocks() except -1:
    """Move released blocks whose events have all completed to the ready lists."""
    if devices.capture_open():  # querying events would break a capture (device.pyx)
        return 0
    cdef size_t i = 0
    cdef HostBlock* block
    cdef RecordedEvent recorded
    while i < waiting_blocks.size():
        block = waiting_blocks[i]
        if not events_completed(block):
            i += 1
            continue
        waiting_blocks[i] = waiting_blocks.back()
        waiting_blocks.pop_back()
        for recorded in block.events:
            streams.give_back_ordering_event(recorded.device, recorded.event)
        block.events.clear()
        ready_blocks[block.size].push_back(block)
    return 0


# --------------------------------------------------------------------------------------------
# Pinned memory

cdef int free_ready_blocks() except -1:
    cdef unordered_map[size_t, vector[HostBlock*]].iterator it = ready_blocks.begin()
    cdef vector[HostBlock*]* ready
    cdef HostBlock* block
    global num_host_free
    if devices.capture_open():  # cudaFreeHost synchronises: not while a capture is open
        return 0
    while it != ready_blocks.end():
        ready = &deref(it).second
        while not ready.empty():
            block = ready.back()
            with nogil:
                errors.check(cyruntime.cudaFreeHost(block.ptr), b"cudaFreeHost")
            ready.pop_back()
            blocks.erase(<uintptr_t>block.ptr)
            count(HOST_RESERVED_BYTES, -<int64_t>block.size)
            count(HOST_SEGMENTS, -1)
            num_host_free += 1
            del block
        inc(it)
    ready_blocks.clear()
    return 0


cdef int host_alloc(void** ptr, size_t size, cudaError_t* status) except -1:
    """cudaHostAlloc; out of memory is returned in status (and cleared), not raised."""
    # Relaxed capture mode: pinning memory while another thread captures a graph must not
    # invalidate that capture.
    cdef cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed
    with nogil:
        errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                     b"cudaThreadExchangeStreamCaptureMode")
        try:
            status[0] = cyruntime.cudaHostAlloc(ptr, size, cudaHostAllocDefault)
        finally:
            errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(&mode),
                         b"cudaThreadExchangeStreamCaptureMode")
    if status[0] == cudaErrorMemoryAllocation:
        cyruntime.cudaGetLastError()  # the error is not sticky: clear it for the next check
    elif status[0] != cudaSuccess:
        errors.check(status[0], b"cudaHostAlloc")
    return 0


cdef HostBlock* new_host_block(size_t size, size_t requested) except NULL:
    global num_host_alloc
    cdef void* ptr = NULL
    cdef cudaError_t status
    host_alloc(&ptr, size, &status)
    if status == cudaErrorMemoryAllocation:
        collect_waiting_blocks()
        free_ready_blocks()
        host_alloc(&ptr, size, &status)
        if status == cudaErrorMemoryAllocation:
            rounding = (f" (a request of {requested} bytes rounded up to a power of two)"
                        if requested != size else "")
            raise RuntimeError(
                f"cannot allocate {size} bytes of pinned host memory{rounding}: cudaHostAlloc is "
                "out of memory even after the cached pinned blocks were freed. Pinned memory is "
                "limited by physical RAM and the locked-memory limit (ulimit -l).")
    cdef HostBlock* block = new HostBlock()
    block.ptr = ptr
    block.size = size
    block.allocated = False
    blocks[<uintptr_t>ptr] = block
    count(HOST_RESERVED_BYTES, <int64_t>size)
    count(HOST_SEGMENTS, 1)
    num_host_alloc += 1
    return block


cdef HostBlock* take_ready_block(size_t size) noexcept nogil:
    cdef unordered_map[size_t, vector[HostBlock*]].iterator it = ready_blocks.find(size)
    if it == ready_blocks.end() or deref(it).second.empty():
        return NULL
    cdef HostBlock* block = deref(it).second.back()
    deref(it).second.pop_back()
    return block


cdef HostBlock* allocated_block(void* ptr) noexcept nogil:
    cdef unordered_map[uintptr_t, HostBlock*].iterator it = blocks.find(<uintptr_t>ptr)
    if it == blocks.end() or not deref(it).second.allocated:
        return NULL
    return deref(it).second


cdef str unknown_pointer(void* ptr):
    return (f"pointer {<uintptr_t>ptr:#x} was not allocated by tensorplay's pinned host "
            "allocator, or already freed")


# --------------------------------------------------------------------------------------------
# The interface (host_allocator.pxd)

cdef void* host_allocate(size_t size) except? NULL:
    global used
    devices.ensure_initialized()
    if size > MAX_HOST_REQUEST:
        raise RuntimeError(f"cannot allocate {size} bytes of pinned host memory: more than any "
                           "machine has")
    cdef size_t rounded = round_size(size)
    cdef HostBlock* block = NULL
    acquire(&lock)
    try:
        used = True
        block = take_ready_block(rounded)
        if block == NULL and not waiting_blocks.empty():
            collect_waiting_blocks()
            block = take_ready_block(rounded)
        if block == NULL:
            block = new_host_block(rounded, size)
        block.allocated = True
        count(HOST_ALLOCATIONS, 1)
        count(HOST_ALLOCATED_BYTES, <int64_t>rounded)
    finally:
        release_lock(&lock)
    return block.ptr


cdef int host_release(void* ptr) except -1:
    acquire(&lock)
    cdef HostBlock* block = allocated_block(ptr)
    if block != NULL:
        block.allocated = False
        count(HOST_ALLOCATIONS, -1)
        count(HOST_ALLOCATED_BYTES, -<int64_t>block.size)
        if block.events.empty():
            ready_blocks[block.size].push_back(block)
        else:
            waiting_blocks.push_back(block)
    release_lock(&lock)
    if block == NULL:
        raise ValueError(unknown_pointer(ptr))
    return 0


cdef int host_record_stream(void* ptr, cudaStream_t stream) except -1:
    cdef HostBlock* block
    cdef cudaStreamCaptureStatus capture_status
    cdef RecordedEvent recorded
    cdef cudaError_t status
    cdef size_t i
    acquire(&lock)
    try:
        block = allocated_block(ptr)
        if block == NULL:
            raise ValueError(unknown_pointer(ptr))
        status = cyruntime.cudaStreamIsCapturing(stream, &capture_status)
        if status == cudaErrorStreamCaptureImplicit:
            # The legacy default stream while a blocking stream captures: work on it would join
            # that capture, so it counts as capturing (device.stream_capturing).
            cyruntime.cudaGetLastError()
            capture_status = cudaStreamCaptureStatusActive
        else:
            errors.check(status, b"cudaStreamIsCapturing")
        if capture_status != cudaStreamCaptureStatusNone:  # Note [Pinned host cache policy]
            raise RuntimeError(
                f"cannot record stream {<uintptr_t>stream:#x} on pinned block {<uintptr_t>ptr:#x}: "
                "the stream is capturing a CUDA graph, whose copies read the block at every "
                "replay, not now, so no event recorded now tells when the block is free again. "
                "Keep the block allocated (do not release it) for as long as the graph can "
                "replay; tensor copies hand their pinned source to the graph instead "
                "(copies.pyx, Note [Host copies during capture]). Nothing was recorded")
        for i in range(block.events.size()):
            if block.events[i].stream == stream:
                errors.check(cyruntime.cudaEventRecord(block.events[i].event, stream),
                             b"cudaEventRecord")
                return 0
        recorded.stream = stream
        errors.check(cyruntime.cudaStreamGetDevice(stream, &recorded.device),
                     b"cudaStreamGetDevice")
        streams.take_ordering_event(recorded.device, &recorded.event)
        status = cyruntime.cudaEventRecord(recorded.event, stream)
        if status != cudaSuccess:
            streams.give_back_ordering_event(recorded.device, recorded.event)
            errors.check(status, b"cudaEventRecord")
        block.events.push_back(recorded)
    finally:
        release_lock(&lock)
    return 0


cdef int empty_host_cache() except -1:
    if not used:
        return 0
    acquire(&lock)
    try:
        collect_waiting_blocks()
        free_ready_blocks()
    finally:
        release_lock(&lock)
    return 0


cdef dict host_memory_stats():
    if not used:
        return {}
    cdef int64_t current_copy[<int>HOST_STAT_COUNT]
    cdef int64_t peak_copy[<int>HOST_STAT_COUNT]
    acquire(&lock)
    current_copy = current
    peak_copy = peak
    cdef int64_t allocs = num_host_alloc, frees = num_host_free
    release_lock(&lock)
    return {
        "allocated_bytes.current": current_copy[<int>HOST_ALLOCATED_BYTES],
        "allocated_bytes.peak": peak_copy[<int>HOST_ALLOCATED_BYTES],
        "allocations.current": current_copy[<int>HOST_ALLOCATIONS],
        "allocations.peak": peak_copy[<int>HOST_ALLOCATIONS],
        "num_host_alloc": allocs,
        "num_host_free": frees,
        "reserved_bytes.current": current_copy[<int>HOST_RESERVED_BYTES],
        "reserved_bytes.peak": peak_copy[<int>HOST_RESERVED_BYTES],
        "segment.current": current_copy[<int>HOST_SEGMENTS],
    }
