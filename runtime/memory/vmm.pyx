# cython: language_level=3
"""CUDA's virtual memory management for expandable segments (allocator.pyx, Note [Expandable
segments]; docs/design.md, "Expandable segments").

The calls are those of the CUDA driver API's "Virtual Memory Management" section
(https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html): cuMemAddressReserve keeps an
address range, cuMemCreate makes physical memory, cuMemMap puts it at an address of the range,
and cuMemSetAccess makes it accessible (every new mapping starts with no access). cuMemUnmap
must cover exactly what one cuMemMap mapped, so each chunk is unmapped on its own; cuMemRelease
frees the physical memory once it is unmapped. None of them is a stream operation.
"""
from libc.stdint cimport uintptr_t

from cuda.bindings cimport cydriver
from cuda.bindings.cydriver cimport (CUdevice, CUdeviceptr, CUmemAccessDesc,
                                     CUmemAllocationProp, CUmemGenericAllocationHandle, CUresult)
from libc.string cimport memset

from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport device as devices
from tensorplay._runtime.devices.device cimport MAX_DEVICES

cdef size_t _granularity[MAX_DEVICES]
cdef size_t _total[MAX_DEVICES]


cdef void device_allocation(int device, CUmemAllocationProp* prop) noexcept nogil:
    """Pinned (not pageable) device memory of device, with no shareable handle."""
    memset(prop, 0, sizeof(CUmemAllocationProp))
    prop.type = cydriver.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cydriver.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = device


cdef size_t granularity(int device) except 0:
    if _granularity[device]:
        return _granularity[device]
    cdef CUmemAllocationProp prop
    cdef size_t found = 0
    cdef devices.DeviceSwitch switch
    device_allocation(device, &prop)
    with nogil:
        devices.enter_device(device, &switch)
        try:
            errors.check_driver(cydriver.cuMemGetAllocationGranularity(
                &found, &prop, cydriver.CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                "cuMemGetAllocationGranularity")
        finally:
            devices.exit_device(&switch)
    if found == 0 or found & (found - 1):
        raise RuntimeError(f"cuMemGetAllocationGranularity gave {found} bytes for cuda:{device}; "
                           "expandable segments need a power of two (set "
                           "TENSORPLAY_CUDA_ALLOC_CONF=expandable_segments:False,"
                           "graph_expandable_segments:False)")
    _granularity[device] = found
    return found


cdef size_t total_memory(int device) except 0:
    if _total[device]:
        return _total[device]
    cdef CUdevice handle
    cdef size_t found = 0
    with nogil:
        errors.check_driver(cydriver.cuDeviceGet(&handle, device), "cuDeviceGet")
        errors.check_driver(cydriver.cuDeviceTotalMem(&found, handle), "cuDeviceTotalMem")
    _total[device] = found
    return found


cdef uintptr_t reserve(int device, size_t size) except? 0:
    cdef CUdeviceptr base = 0
    cdef CUresult status
    cdef devices.DeviceSwitch switch
    cdef int mode
    with nogil:
        devices.enter_device(device, &switch)
        devices.enter_relaxed(&mode)
        status = cydriver.cuMemAddressReserve(&base, size, 0, 0, 0)
        devices.exit_relaxed(&mode)
        devices.exit_device(&switch)
    if status == cydriver.CUDA_ERROR_OUT_OF_MEMORY:
        return 0
    errors.check_driver(status, "cuMemAddressReserve")
    return <uintptr_t>base


cdef int free_addresses(int device, uintptr_t base, size_t size) except -1:
    cdef devices.DeviceSwitch switch
    cdef int mode
    with nogil:
        devices.enter_device(device, &switch)
        devices.enter_relaxed(&mode)
        try:
            errors.check_driver(cydriver.cuMemAddressFree(<CUdeviceptr>base, size),
                                "cuMemAddressFree")
        finally:
            devices.exit_relaxed(&mode)
            devices.exit_device(&switch)
    return 0


cdef int map_chunk(int device, uintptr_t address, size_t size, Chunk* chunk) except -1:
    cdef CUmemAllocationProp prop
    cdef CUmemAccessDesc access
    cdef CUmemGenericAllocationHandle handle = 0
    cdef CUresult status
    cdef const char* failed = NULL
    cdef devices.DeviceSwitch switch
    cdef int mode
    device_allocation(device, &prop)
    memset(&access, 0, sizeof(access))
    access.location.type = cydriver.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = device
    access.flags = cydriver.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    with nogil:
        devices.enter_device(device, &switch)
        devices.enter_relaxed(&mode)
        status = cydriver.cuMemCreate(&handle, size, &prop, 0)
        if status != cydriver.CUDA_SUCCESS:
            failed = "cuMemCreate"
        else:
            status = cydriver.cuMemMap(<CUdeviceptr>address, size, 0, handle, 0)
            if status != cydriver.CUDA_SUCCESS:
                failed = "cuMemMap"
                cydriver.cuMemRelease(handle)
            else:
                status = cydriver.cuMemSetAccess(<CUdeviceptr>address, size, &access, 1)
                if status != cydriver.CUDA_SUCCESS:
                    failed = "cuMemSetAccess"
                    cydriver.cuMemUnmap(<CUdeviceptr>address, size)
                    cydriver.cuMemRelease(handle)
        devices.exit_relaxed(&mode)
        devices.exit_device(&switch)
    if status == cydriver.CUDA_ERROR_OUT_OF_MEMORY:
        return 1
    if failed != NULL:
        errors.check_driver(status, failed)
    chunk.address = address
    chunk.size = size
    chunk.handle = handle
    return 0


cdef int unmap_chunk(int device, Chunk* chunk) except -1:
    cdef devices.DeviceSwitch switch
    cdef int mode
    cdef CUresult status
    cdef const char* failed = "cuMemUnmap"
    with nogil:
        devices.enter_device(device, &switch)
        devices.enter_relaxed(&mode)
        status = cydriver.cuMemUnmap(<CUdeviceptr>chunk.address, chunk.size)
        if status == cydriver.CUDA_SUCCESS:
            failed = "cuMemRelease"
            status = cydriver.cuMemRelease(chunk.handle)
        devices.exit_relaxed(&mode)
        devices.exit_device(&switch)
    errors.check_driver(status, failed)
    return 0
