# cython: language_level=3
"""The memory API over the caching allocators: statistics, cache control, direct allocation.

Before a device is first used every query answers as for an empty allocator (0, {}), which is
also the answer on a machine without a GPU (docs/design.md, "Without a GPU"). The scalar
queries are O(1) reads of the allocator's counters (allocator.pxd). Device arguments arrive
checked: the generated wrappers convert them (device.device_index_arg), so none is checked
again here.
"""
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.memory cimport allocator, host_allocator
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.memory.allocator cimport (FIXED_VALUES_START, POOL_ALL,
                                                   STAT_ALLOCATED_BYTES, STAT_RESERVED_BYTES)


cdef int64_t memory_allocated(int device) except -1:
    return allocator.stat_current(device, STAT_ALLOCATED_BYTES, POOL_ALL)


cdef int64_t max_memory_allocated(int device) except -1:
    return allocator.stat_peak(device, STAT_ALLOCATED_BYTES, POOL_ALL)


cdef int64_t memory_reserved(int device) except -1:
    return allocator.stat_current(device, STAT_RESERVED_BYTES, POOL_ALL)


cdef int64_t max_memory_reserved(int device) except -1:
    return allocator.stat_peak(device, STAT_RESERVED_BYTES, POOL_ALL)


# Note [Building memory_stats]
# memory_stats() returns some 150 keys, sorted, as PyTorch does. Formatting and sorting them on
# every call cost more than everything else together, so the sorted keys are made once, with
# for each the position of its value in a flat snapshot: the counters (laid out in the order
# of their names), then the scalars, then the figures computed per call (allocator.pxd lays
# those out, and allocator.snapshot_stats fills them), then the fixed ones.

# Key names, in the order of allocator.pxd's enums (Stat, PoolKind, Counter, Scalar).
STAT_NAMES = ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
              "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes")
POOL_KIND_NAMES = ("all", "small_pool", "large_pool")
COUNTER_NAMES = ("current", "peak", "allocated", "freed")
SCALAR_NAMES = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                "num_device_free")
# Statistics PyTorch reports for settings we keep at their defaults (max_split_size unlimited,
# so nothing is ever "oversize").
FIXED_STATS = {"max_split_size": -1,
               **{f"oversize_{what}.{counter}": 0
                  for what in ("allocations", "segments") for counter in COUNTER_NAMES}}


def _snapshot_names():
    """The key of each position of the flat snapshot."""
    return ([f"{stat}.{kind}.{counter}" for stat in STAT_NAMES for kind in POOL_KIND_NAMES
             for counter in COUNTER_NAMES]
            + list(SCALAR_NAMES) + ["largest_free_block", "num_graph_pools", "capturing"]
            + list(FIXED_STATS))


SNAPSHOT_NAMES = _snapshot_names()
cdef size_t snapshot_size = len(SNAPSHOT_NAMES)
STATS_KEYS = tuple(sorted(SNAPSHOT_NAMES))
cdef vector[int] stats_positions = [SNAPSHOT_NAMES.index(key) for key in STATS_KEYS]
cdef vector[int64_t] fixed_values = list(FIXED_STATS.values())


cdef dict memory_stats(int device):
    if not allocator.device_used(device):
        return {}
    cdef vector[int64_t] snapshot
    snapshot.resize(snapshot_size)
    cdef int64_t* values = snapshot.data()
    allocator.snapshot_stats(device, values)
    memcpy(values + <int>FIXED_VALUES_START, fixed_values.data(),
           fixed_values.size() * sizeof(int64_t))
    cdef list ordered = [values[position] for position in stats_positions]
    return dict(zip(STATS_KEYS, ordered))


cdef dict pool_memory_stats(int device):
    if not allocator.device_used(device):
        return {}
    cdef vector[allocator.PoolFigures] figures
    allocator.pool_snapshot(device, &figures)
    cdef allocator.PoolFigures pool
    found = {}
    for pool in figures:
        found[(pool.first, pool.second)] = {
            "reserved_bytes": pool.reserved,
            "allocated_bytes": pool.allocated,
            # What is not on the free lists: live, waiting for streams, or held for graphs.
            "active_bytes": pool.reserved + pool.sleeping - pool.free_bytes,
            "sleeping_bytes": pool.sleeping,
        }
    return found


cdef dict memory_stats_as_nested_dict(int device):
    nested = {}
    for key, value in memory_stats(device).items():
        parts = key.split(".")
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return nested


cdef object reset_accumulated_memory_stats(int device):
    allocator.reset_accumulated_stats(device)
    return None


cdef object reset_peak_memory_stats(int device):
    allocator.reset_peak_stats(device)
    return None


cdef object empty_cache():
    cdef int device
    for device in range(_device.initialized_device_count()):
        allocator.empty_cache(device)
    return None


cdef object empty_host_cache():
    host_allocator.empty_host_cache()
    return None


cdef tuple get_memory_info(int device):
    _device.checked_device(device)
    cdef size_t free_bytes = 0, total_bytes = 0
    cdef _device.DeviceSwitch switch
    cdef int mode
    with nogil:
        _device.enter_device(device, &switch)
        _device.enter_relaxed(&mode)  # a query, legal during any capture in relaxed mode
        try:
            errors.check(cyruntime.cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo")
        finally:
            _device.exit_relaxed(&mode)
            _device.exit_device(&switch)
    return (free_bytes, total_bytes)


cdef inline void* pointer_arg(object ptr, str argument, str source) except? NULL:
    if isinstance(ptr, bool) or not isinstance(ptr, int):
        raise TypeError(f"{argument} must be a pointer (an int) returned by {source}, got "
                        f"{type(ptr).__name__} ({errors.shown(ptr)})")
    if not 0 < ptr < (1 << 64):
        raise ValueError(f"{argument} must be a pointer returned by {source}, got "
                         f"{errors.shown(ptr)}")
    return <void*><uintptr_t>ptr


cdef object caching_allocator_alloc(size_t size, int device, _stream.StreamCore stream):
    _device.checked_device(device)  # after the arguments: a mistake reads the same anywhere
    cdef cudaStream_t handle
    if stream is None:
        handle = _stream.current_stream_handle(device)
    elif stream.device_index != device:
        raise ValueError(f"stream belongs to cuda:{stream.device_index} but device is "
                         f"cuda:{device}")
    else:
        handle = stream.handle
    return <uintptr_t>allocator.allocate(device, size, handle)


cdef object caching_allocator_delete(object ptr):
    allocator.release(pointer_arg(ptr, "ptr", "caching_allocator_alloc()"))
    return None


cdef object caching_allocator_record_stream(object ptr, _stream.StreamCore stream):
    allocator.record_stream(pointer_arg(ptr, "ptr", "caching_allocator_alloc()"), stream.handle,
                            stream.device_index)
    return None


cdef dict host_memory_stats():
    return host_allocator.host_memory_stats()


cdef object caching_host_allocator_alloc(size_t size):
    return <uintptr_t>host_allocator.host_allocate(size)


cdef object caching_host_allocator_delete(object ptr):
    host_allocator.host_release(pointer_arg(ptr, "ptr", "caching_host_allocator_alloc()"))
    return None


cdef object caching_host_allocator_record_stream(object ptr, _stream.StreamCore stream):
    host_allocator.host_record_stream(
        pointer_arg(ptr, "ptr", "caching_host_allocator_alloc()"), stream.handle)
    return None
