# distutils: language = c++
# cython: language_level=3
"""Private memory pools for graph capture (docs/design.md, "Capture rules"), kept in the caching
allocator's device states (blocks.pxd) under the same device locks.

A graph's allocations must survive for as long as the graph can be replayed, so they come from
a private pool (allocator.pyx, Note [Caching allocator policy]): pools are refcounted by graphs
and pool handles (retain_pool / release_pool), and while a pool is selected for a capture id
(begin_allocate_to_pool), the allocator serves every allocation on a stream capturing with that
id from it. Blocks the allocator held for a graph's capture (allocator.pyx, Note [Blocks freed
during capture]) go back through the release path when the graph lets them go
(release_held_blocks). None of this is on the allocation path: graphs call it when a capture
begins or ends, and when they are reset.
"""
from cython.operator cimport dereference as deref
from libc.stdint cimport uintptr_t
from libcpp.map cimport map
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.memory cimport alloc_conf, allocator
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport device as devices
from tensorplay._runtime.base.reentrant_lock cimport acquire, release_lock
from tensorplay._runtime.memory.blocks cimport (Block, DeviceState, PoolKey, PrivatePool,
                                                Routing, init_pool, pool_freeable)

cdef extern from *:
    """
    #include <atomic>
    /* Serial numbers of pool handles: unique across threads without taking any lock. */
    static std::atomic<unsigned long long> tensorplay_pool_serial{0};
    static inline unsigned long long tensorplay_next_pool_serial(void) {
        return ++tensorplay_pool_serial;
    }
    """
    unsigned long long tensorplay_next_pool_serial() noexcept nogil


cdef PoolId new_pool_handle() noexcept nogil:
    cdef PoolId pool
    pool.first = 0
    pool.second = tensorplay_next_pool_serial()
    return pool


cdef PoolId new_graph_pool() noexcept nogil:
    cdef PoolId pool
    pool.first = tensorplay_next_pool_serial()
    pool.second = 0
    return pool


cdef str pool_text(PoolId pool, int device):
    return f"private pool ({pool.first}, {pool.second}) on device {device}"


cdef PrivatePool* find_pool(DeviceState* state, PoolId id) noexcept nogil:
    cdef map[PoolKey, PrivatePool*].iterator it = state.private_pools.find(
        PoolKey(id.first, id.second))
    if it == state.private_pools.end():
        return NULL
    return deref(it).second


cdef int retain_pool(int device, PoolId pool) except -1:
    devices.checked_device(device)
    if pool.first == 0 and pool.second == 0:
        raise ValueError("pool id (0, 0) means 'no pool' and cannot be retained")
    cdef DeviceState* state = allocator.state_for(device)
    cdef bint expandable = alloc_conf.settings().graph_expandable_segments
    acquire(&state.lock)
    cdef PrivatePool* graph_pool = find_pool(state, pool)
    if graph_pool == NULL:
        graph_pool = new PrivatePool()
        graph_pool.id = PoolKey(pool.first, pool.second)
        graph_pool.use_count = 0
        graph_pool.routing = False
        graph_pool.reserved_bytes = 0
        graph_pool.sleeping_bytes = 0
        graph_pool.asleep = False
        init_pool(&graph_pool.small_blocks, True, graph_pool, expandable)
        init_pool(&graph_pool.large_blocks, False, graph_pool, expandable)
        state.private_pools[graph_pool.id] = graph_pool
    graph_pool.use_count += 1
    release_lock(&state.lock)
    return 0


cdef int release_pool(int device, PoolId pool) except -1:
    cdef DeviceState* state = allocator.used_state(device)
    cdef PrivatePool* graph_pool = NULL
    cdef bint found = False
    if state != NULL:
        acquire(&state.lock)
        try:
            graph_pool = find_pool(state, pool)
            if graph_pool != NULL and graph_pool.use_count > 0:
                found = True
                graph_pool.use_count -= 1
                # Its free segments go back to CUDA at the next empty_cache() with no capture
                # open; segments that back live tensors stay until those are freed.
                if (pool_freeable(graph_pool) and graph_pool.reserved_bytes == 0
                        and graph_pool.sleeping_bytes == 0):
                    allocator.drop_pool(state, graph_pool)
        finally:
            release_lock(&state.lock)
    if not found:
        raise ValueError(f"{pool_text(pool, device)} is not retained, so it cannot be released")
    return 0


cdef enum RoutingProblem:
    ROUTING_OK
    ROUTING_POOL_NOT_RETAINED
    ROUTING_POOL_BUSY
    ROUTING_POOL_ASLEEP
    ROUTING_CAPTURE_BUSY


cdef int begin_allocate_to_pool(int device, PoolId pool, unsigned long long capture_id,
                                unsigned long long holder) except -1:
    devices.checked_device(device)
    cdef DeviceState* state = allocator.used_state(device)
    cdef PrivatePool* graph_pool = NULL
    cdef Routing routing
    cdef RoutingProblem problem = ROUTING_POOL_NOT_RETAINED
    if state != NULL:
        acquire(&state.lock)
        graph_pool = find_pool(state, pool)
        if graph_pool == NULL or graph_pool.use_count == 0:
            problem = ROUTING_POOL_NOT_RETAINED
        elif graph_pool.routing:
            problem = ROUTING_POOL_BUSY
        elif graph_pool.asleep:
            problem = ROUTING_POOL_ASLEEP
        else:
            problem = ROUTING_OK
            for routing in state.routings:
                if routing.capture_id == capture_id:
                    problem = ROUTING_CAPTURE_BUSY
            if problem == ROUTING_OK:
                routing.capture_id = capture_id
                routing.holder = holder
                routing.pool = graph_pool
                state.routings.push_back(routing)
                graph_pool.routing = True
        release_lock(&state.lock)
    if problem == ROUTING_POOL_NOT_RETAINED:
        raise ValueError(f"{pool_text(pool, device)} is not retained: retain_pool() it before "
                         "capturing into it")
    if problem == ROUTING_POOL_BUSY:
        raise ValueError(f"{pool_text(pool, device)} already receives the allocations of "
                         "another capture")
    if problem == ROUTING_POOL_ASLEEP:
        raise RuntimeError(f"{pool_text(pool, device)} is asleep ({sleeper_of(device, pool)}); "
                           "call wake() before capturing into it")
    if problem == ROUTING_CAPTURE_BUSY:
        raise ValueError(f"capture {capture_id} on device {device} already allocates from "
                         f"another pool, so it cannot also use {pool_text(pool, device)}")
    return 0


cdef int end_allocate_to_pool(int device, PoolId pool) except -1:
    cdef DeviceState* state = allocator.used_state(device)
    cdef bint found = False
    cdef size_t i
    if state != NULL:
        acquire(&state.lock)
        try:
            for i in range(state.routings.size()):
                if (state.routings[i].pool.id.first == pool.first
                        and state.routings[i].pool.id.second == pool.second):
                    state.routings[i].pool.routing = False
                    state.routings.erase(state.routings.begin() + i)
                    found = True
                    break
        finally:
            release_lock(&state.lock)
    if not found:
        raise ValueError(f"{pool_text(pool, device)} is not receiving any capture's allocations")
    return 0


cdef int release_held_blocks(int device, unsigned long long holder,
                             const vector[cudaStream_t]* replayed) except -1:
    cdef DeviceState* state = allocator.used_state(device)
    if state == NULL:
        return 0
    cdef map[unsigned long long, vector[Block*]].iterator it
    cdef vector[Block*] held
    cdef Block* block
    cdef size_t i
    acquire(&state.lock)
    try:
        it = state.held_blocks.find(holder)
        if it != state.held_blocks.end():
            held.swap(deref(it).second)
            state.held_blocks.erase(it)
        for block in held:
            # A replay launched on these streams may still touch the block.
            if replayed != NULL:
                for i in range(replayed.size()):
                    allocator.add_stream_use(block, deref(replayed)[i], device)
            block.capture_holds -= 1
            if block.capture_holds == 0:
                allocator.reuse_when_done(state, block)
    finally:
        release_lock(&state.lock)
    return 0


# --------------------------------------------------------------------------------------------
# Sleep and wake (allocator.pyx, Note [Expandable segments]; docs/design.md, "Sleeping graphs")

# Who put each sleeping pool to sleep, by (device, first, second): error messages name it.
_sleepers = {}


cdef str sleeper_of(int device, PoolId pool):
    return _sleepers.get((device, pool.first, pool.second), "asleep")


cdef str sleeping_pool_text(void* ptr):
    cdef Block* block = allocator.find_allocated(ptr)
    if block == NULL or block.pool.owner == NULL:  # the caller saw a sleeping pool's flag
        return f"memory at {<uintptr_t>ptr:#x}, which is asleep"
    cdef PoolId pool
    pool.first, pool.second = block.pool.owner.id.first, block.pool.owner.id.second
    return f"{pool_text(pool, block.device)}, which is asleep ({sleeper_of(block.device, pool)})"


cdef bint* asleep_flag(int device, PoolId pool) except NULL:
    cdef DeviceState* state = allocator.used_state(device)
    cdef PrivatePool* graph_pool = NULL
    if state != NULL:
        acquire(&state.lock)
        graph_pool = find_pool(state, pool)
        release_lock(&state.lock)
    if graph_pool == NULL:
        raise ValueError(f"{pool_text(pool, device)} is not retained")
    return &graph_pool.asleep


cdef int refuse_during_capture(str what) except -1:
    # Sleeping waits for the device and unmaps memory; waiting would invalidate an open capture
    # (cudaDeviceSynchronize is illegal during one), and the capture may be recording work on
    # the very memory. Waking maps memory at addresses captures may have recorded.
    if devices.capture_open():
        raise RuntimeError(f"{what} is refused while a graph capture is open in the process; "
                           "end the capture first")
    return 0


cdef int collect(DeviceState* state, int device, list pool_ids, str what,
                 vector[PrivatePool*]* chosen) except -1:
    """Under the lock: the retained pools of pool_ids, or an error naming the first missing."""
    cdef PoolId pool
    cdef PrivatePool* graph_pool
    for pool_id in pool_ids:
        pool.first, pool.second = pool_id
        graph_pool = find_pool(state, pool)
        if graph_pool == NULL or graph_pool.use_count == 0:
            raise ValueError(f"{what}: {pool_text(pool, device)} is not retained")
        chosen.push_back(graph_pool)
    return 0


cdef int sleep_pools(int device, list pool_ids, bint keep_all, vector[uintptr_t]* keep,
                     str sleeper) except -1:
    refuse_during_capture("sleep()")
    cdef DeviceState* state = allocator.used_state(device)
    if state == NULL:
        raise ValueError(f"sleep(): no pool of device {device} is retained")
    cdef vector[PrivatePool*] chosen
    cdef PrivatePool* graph_pool
    cdef PoolId pool
    cdef uintptr_t ptr
    cdef size_t i
    cdef bint found
    cdef devices.DeviceSwitch switch
    acquire(&state.lock)
    try:
        collect(state, device, pool_ids, "sleep()", &chosen)
        for graph_pool in chosen:
            pool.first, pool.second = graph_pool.id.first, graph_pool.id.second
            if graph_pool.asleep:
                raise RuntimeError(f"sleep(): {pool_text(pool, device)} is already asleep "
                                   f"({sleeper_of(device, pool)})")
            if graph_pool.routing:
                raise RuntimeError(f"sleep(): a capture into {pool_text(pool, device)} is open; "
                                   "end it first")
            if not graph_pool.small_blocks.expandable:
                raise RuntimeError(
                    f"sleep() needs a pool on virtual memory, and {pool_text(pool, device)} is "
                    "made of cudaMalloc segments because TENSORPLAY_CUDA_ALLOC_CONF has "
                    "graph_expandable_segments:False; capture with it True (the default)")
        for i in range(keep.size()):
            ptr = deref(keep)[i]
            found = False
            for graph_pool in chosen:
                if allocator.find_live_block(graph_pool, ptr) != NULL:
                    found = True
            if not found:
                raise ValueError(f"keep[{i}] is not a live tensor of this graph's pools (its "
                                 "memory was not allocated during the graph's capture); keep "
                                 "tensors the capture created, or keep='all'")
        # A replay queued on any stream may still use the memory: wait for the device (the
        # docs' choice: sleep() synchronizes rather than refuses).
        with nogil:
            devices.enter_device(device, &switch)
            try:
                errors.check(cyruntime.cudaDeviceSynchronize(), b"cudaDeviceSynchronize")
            finally:
                devices.exit_device(&switch)
        allocator.sleep_pools(state, &chosen, keep_all, keep)
    finally:
        release_lock(&state.lock)
    for pool_id in pool_ids:
        _sleepers[(device,) + tuple(pool_id)] = sleeper
    return 0


cdef int wake_pools(int device, list pool_ids, str sleeper) except -1:
    refuse_during_capture("wake()")
    cdef DeviceState* state = allocator.used_state(device)
    if state == NULL:
        raise ValueError(f"wake(): no pool of device {device} is retained")
    cdef vector[PrivatePool*] chosen, asleep
    cdef PrivatePool* graph_pool
    cdef size_t needed = 0
    cdef int out_of_memory = 0
    acquire(&state.lock)
    try:
        collect(state, device, pool_ids, "wake()", &chosen)
        for graph_pool in chosen:
            if graph_pool.asleep:
                asleep.push_back(graph_pool)
                needed += graph_pool.sleeping_bytes
        if not asleep.empty():
            out_of_memory = allocator.wake_pools(state, &asleep)
    finally:
        release_lock(&state.lock)
    if asleep.empty():
        raise RuntimeError(f"wake(): {sleeper} is not asleep")
    if out_of_memory:
        raise errors.out_of_memory_error(
            f"CUDA out of memory: wake() of {sleeper} needs {needed} bytes of device memory "
            "(the cache was emptied and the mapping retried once); it stays asleep and intact, "
            "so free device memory and call wake() again")
    for graph_pool in asleep:
        _sleepers.pop((device, graph_pool.id.first, graph_pool.id.second), None)
    return 0
