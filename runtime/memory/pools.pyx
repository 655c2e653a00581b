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
from libcpp.map cimport map
from libcpp.vector cimport vector

from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.memory cimport allocator
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
    acquire(&state.lock)
    cdef PrivatePool* graph_pool = find_pool(state, pool)
    if graph_pool == NULL:
        graph_pool = new PrivatePool()
        graph_pool.id = PoolKey(pool.first, pool.second)
        graph_pool.use_count = 0
        graph_pool.routing = False
        graph_pool.reserved_bytes = 0
        init_pool(&graph_pool.small_blocks, True, graph_pool)
        init_pool(&graph_pool.large_blocks, False, graph_pool)
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
                if pool_freeable(graph_pool) and graph_pool.reserved_bytes == 0:
                    state.private_pools.erase(graph_pool.id)
                    del graph_pool
        finally:
            release_lock(&state.lock)
    if not found:
        raise ValueError(f"{pool_text(pool, device)} is not retained, so it cannot be released")
    return 0


cdef enum RoutingProblem:
    ROUTING_OK
    ROUTING_POOL_NOT_RETAINED
    ROUTING_POOL_BUSY
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
