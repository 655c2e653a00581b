# cython: language_level=3
"""Zero-copy sharing with other libraries: DLPack 1.x and __cuda_array_interface__ v3, both ways.

The tensor methods (Tensor.__dlpack__, __dlpack_device__, __cuda_array_interface__) and
tensorplay.from_dlpack are this module's functions (api.yaml); factories.pyx imports through it
for tensorplay.as_tensor and tensorplay.tensor. The protocols and their public specifications
are summarised in docs/design.md, "Interop".

Note [Interop protocols]
DLPack hands over a PyCapsule holding a DLManagedTensor (legacy, capsule "dltensor") or a
DLManagedTensorVersioned (DLPack >= 1.0, capsule "dltensor_versioned"): the address, shape,
strides (in elements), dtype and device of the memory, plus a deleter that the consumer calls
when it no longer needs them. We export the versioned form when the consumer's max_version is
at least (1, 0) and the legacy form otherwise, always with strides (DLPack 1.2 forbids NULL
strides). A CPU tensor exports its numpy memory, a CUDA tensor its device memory. On import,
CPU memory (kDLCPU, and pinned kDLCUDAHost) becomes a numpy array under a CPU tensor and CUDA
memory (kDLCUDA, and managed kDLCUDAManaged) a CUDA tensor; nothing is copied either way.
__cuda_array_interface__ is a plain dict (shape, typestr, data, strides in bytes or None when
C-contiguous, stream, version) describing CUDA memory only, so CPU tensors do not have it; its
typestr cannot name bfloat16, which therefore travels through DLPack only.

Note [Interop lifetimes]
Export: the manager takes a strong reference to the exported tensor, which keeps its memory
(a DeviceStorage or a numpy array) alive; the deleter drops that reference and frees the
manager block, which also holds the shape and strides. Consumers may call the deleter from any
thread, with or without the GIL, so it takes the GIL with PyGILState_Ensure. A consumer renames
the capsule to "used_dltensor[_versioned]" when it takes ownership; a capsule that dies under
its original name was never consumed, and its destructor calls the deleter instead.
Import: we rename the capsule and hand the manager to a _DLPackOwner, which becomes the owner
of the new tensor (and so of every view of it, Note [Tensor model]) and calls the producer's
deleter exactly once, when the last of them is gone. __cuda_array_interface__ has no owner
slot: an imported tensor keeps the producer object itself alive, and consumers of our dict
(PyTorch, CuPy) keep our tensor alive the same way.

Note [Stream handshake]
Work on a CUDA tensor is enqueued on the current stream of its device. A DLPack consumer names
the stream it will use: None means the legacy default stream (1), 2 the per-thread default
stream, any other positive int a cudaStream_t, -1 "do not synchronize", and 0 is disallowed as
ambiguous. Unless the consumer already uses our stream, we record an event on our stream and
make the consumer's stream wait on it, so the consumer sees every write enqueued before the
export without blocking the host. An export to the CPU (a CPU tensor, or dl_device=(1, 0)) has
no stream to name, so stream must be None there; a copy from CUDA to the CPU is complete when
__dlpack__ returns. On import we pass our own current stream (0, the legacy default, is
spelled 1) and the producer does the same for us. A __cuda_array_interface__ "stream" is the
stream the producer's pending work is on; the consumer must order its own work after it, so we
export our current stream there, and on import make our current stream wait on the producer's.
"""
import math
import sys

from cpython.pycapsule cimport (PyCapsule_CheckExact, PyCapsule_GetName, PyCapsule_GetPointer,
                                PyCapsule_IsValid, PyCapsule_New, PyCapsule_SetName)
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libc.string cimport strncmp

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaMemoryTypeDevice, cudaMemoryTypeHost,
                                      cudaMemoryTypeManaged, cudaPointerAttributes, cudaStream_t)

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.tensor cimport copies, core as _tensor
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport TensorCore

cdef extern from *:
    """
    /* The DLPack 1.x ABI (dlpack.h), declared here instead of vendoring the header. */
    typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
    typedef struct {
        void* data;
        DLDevice device;
        int32_t ndim;
        DLDataType dtype;
        int64_t* shape;
        int64_t* strides;
        uint64_t byte_offset;
    } DLTensor;
    typedef struct DLManagedTensor {
        DLTensor dl_tensor;
        void* manager_ctx;
        void (*deleter)(struct DLManagedTensor* self);
    } DLManagedTensor;
    typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
    typedef struct DLManagedTensorVersioned {
        DLPackVersion version;
        void* manager_ctx;
        void (*deleter)(struct DLManagedTensorVersioned* self);
        uint64_t flags;
        DLTensor dl_tensor;
    } DLManagedTensorVersioned;
    """
    ctypedef struct DLDevice:
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor:
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept nogil
    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor
    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*) noexcept nogil
        uint64_t flags
        DLTensor dl_tensor

cdef extern from "Python.h":
    # Declared nogil here (cpython.pystate does not) because the deleter runs without the GIL.
    ctypedef struct PyGILState_STATE:
        pass
    PyGILState_STATE PyGILState_Ensure() noexcept nogil
    void PyGILState_Release(PyGILState_STATE) noexcept nogil
    void Py_DecRef(PyObject*) noexcept nogil
    int Py_IsInitialized() noexcept nogil

# DLDeviceType values we meet.
cdef enum:
    DL_CPU = 1
    DL_CUDA = 2
    DL_CUDA_HOST = 3
    DL_CUDA_MANAGED = 13

# The newest DLPack we speak, and the version we ask producers for (any 1.x reads the same).
cdef uint32_t DLPACK_MAJOR = 1
cdef uint32_t DLPACK_MINOR = 3
REQUESTED_VERSION = (1, 0)

cdef uint64_t FLAG_READ_ONLY = 1 << 0     # DLPACK_FLAG_BITMASK_READ_ONLY
cdef uint64_t FLAG_IS_COPIED = 1 << 1     # DLPACK_FLAG_BITMASK_IS_COPIED

# Capsule names: PyCapsule_SetName keeps the pointer, so these must be static strings.
cdef const char* LEGACY_NAME = b"dltensor"
cdef const char* VERSIONED_NAME = b"dltensor_versioned"
cdef const char* USED_LEGACY_NAME = b"used_dltensor"
cdef const char* USED_VERSIONED_NAME = b"used_dltensor_versioned"

DLPACK_TYPE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque_handle", 4: "bfloat",
                     5: "complex", 6: "bool"}
DEVICE_TYPES = "kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3) or kDLCUDAManaged (13)"


# --------------------------------------------------------------------------------------------
# Shared pieces


cdef object _protocol_stream(int device):
    """Our current stream on device as DLPack and CAI spell it: 0 is disallowed there, so the
    legacy default stream (our handle 0) is 1 (cudaStreamLegacy)."""
    cdef uintptr_t handle = <uintptr_t>_stream.current_stream_handle(device)
    return handle if handle else 1


cdef int _stream_type_check(object stream, str argument) except -1:
    """A protocol stream value is an int (DLPack's __dlpack__ and the CUDA Array Interface)."""
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"{argument} must be an int stream handle or None, got "
                        f"{type(stream).__name__} ({errors.shown(stream)})")
    return 0


cdef uintptr_t _stream_handle(object stream, str argument, bint no_sync_allowed) except? 0:
    """A protocol stream value as a handle; 0 for -1 ("do not synchronize") where allowed."""
    _stream_type_check(stream, argument)
    if stream == 0:
        raise ValueError(f"{argument}=0 is ambiguous and disallowed by the protocol; pass 1 for "
                         "the legacy default stream, 2 for the per-thread default stream, or a "
                         "cudaStream_t")
    if stream == -1 and no_sync_allowed:
        return 0
    if stream < 0 or stream >= 2 ** 64:
        accepted = "-1 (no synchronization), " if no_sync_allowed else ""
        raise ValueError(f"{argument} must be {accepted}1 (the legacy default stream), 2 (the "
                         f"per-thread default stream) or a cudaStream_t address, got {stream}")
    return stream


cdef str _supported_dtypes():
    return ", ".join((<DtypeCore>dtype).name for dtype in dtypes.all_dtypes())


# --------------------------------------------------------------------------------------------
# DLPack export (Tensor.__dlpack__, Tensor.__dlpack_device__)


cdef void _release_tensor(void* tensor) noexcept nogil:
    """Drop an export's reference to its tensor, from whichever thread the consumer is on."""
    cdef PyGILState_STATE state
    if not Py_IsInitialized():
        return  # the interpreter is gone, and with it everything the reference kept alive
    state = PyGILState_Ensure()
    Py_DecRef(<PyObject*>tensor)
    PyGILState_Release(state)


cdef void _delete_legacy(DLManagedTensor* managed) noexcept nogil:
    _release_tensor(managed.manager_ctx)
    free(managed)  # shape and strides live in the same block


cdef void _delete_versioned(DLManagedTensorVersioned* managed) noexcept nogil:
    _release_tensor(managed.manager_ctx)
    free(managed)


cdef void _capsule_destructor(object capsule) noexcept:
    # A consumer renames the capsule when it takes ownership (Note [Interop lifetimes]); under
    # its original name, nobody did, and the export is still ours to release.
    cdef DLManagedTensorVersioned* versioned
    cdef DLManagedTensor* legacy
    if PyCapsule_IsValid(capsule, VERSIONED_NAME):
        versioned = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, VERSIONED_NAME)
        versioned.deleter(versioned)
    elif PyCapsule_IsValid(capsule, LEGACY_NAME):
        legacy = <DLManagedTensor*>PyCapsule_GetPointer(capsule, LEGACY_NAME)
        legacy.deleter(legacy)


cdef tuple _version_arg(object max_version):
    """The DLPack version to export for a consumer's max_version; None for a legacy capsule."""
    if max_version is None:
        return None
    if not isinstance(max_version, tuple) or len(max_version) != 2 or any(
            isinstance(part, bool) or not isinstance(part, int) for part in max_version):
        raise TypeError(f"max_version must be None or a (major, minor) tuple of ints such as "
                        f"(1, 0), got {errors.shown(max_version)}")
    if max_version[0] < 1:
        return None  # consumers before DLPack 1.0 read the legacy struct
    return min(max_version, (DLPACK_MAJOR, DLPACK_MINOR))


cdef tuple _device_pair(object dl_device):
    if not isinstance(dl_device, tuple) or len(dl_device) != 2 or any(
            isinstance(part, bool) or not isinstance(part, int) for part in dl_device):
        raise TypeError(f"dl_device must be None or a (device_type, device_id) tuple of ints "
                        f"such as (1, 0) for the CPU or (2, 0) for cuda:0, got {errors.shown(dl_device)}")
    return (int(dl_device[0]), int(dl_device[1]))


cdef tuple dlpack_device(TensorCore tensor):
    """Tensor.__dlpack_device__: (kDLCPU, 0) or (kDLCUDA, device index)."""
    if tensor.device_index == _tensor.CPU:
        return (DL_CPU, 0)
    return (DL_CUDA, tensor.device_index)


cdef tuple _exported(TensorCore tensor, tuple target, bint copy):
    """The tensor to export on target (a DLPack device), and whether it is a copy."""
    if target != dlpack_device(tensor):
        destination = "cpu" if target[0] == DL_CPU else _device.device_object(target[1])
        return copies.to(tensor, destination, None, False, True), True
    if copy:
        return copies.clone(tensor), True
    return tensor, False


cdef int _describe(DLTensor* described, TensorCore tensor, int64_t* shape) except -1:
    """Fill described from tensor; shape has room for the shape and then the strides."""
    cdef int ndim = len(tensor.sizes)
    cdef int dim
    described.data = <void*><uintptr_t>tensor.c_data_ptr()
    described.device.device_type = DL_CPU if tensor.device_index == _tensor.CPU else DL_CUDA
    described.device.device_id = 0 if tensor.device_index == _tensor.CPU else tensor.device_index
    described.ndim = ndim
    described.dtype.code = tensor.dtype_object.dlpack_code
    described.dtype.bits = tensor.dtype_object.itemsize * 8
    described.dtype.lanes = 1
    described.shape = shape
    described.strides = shape + ndim
    described.byte_offset = 0
    for dim in range(ndim):
        shape[dim] = tensor.sizes[dim]
        shape[ndim + dim] = tensor.element_strides[dim]
    return 0


cdef object _capsule(TensorCore tensor, tuple version, uint64_t flags):
    """A DLPack capsule of tensor, versioned when version is given."""
    cdef int ndim = len(tensor.sizes)
    cdef size_t header = sizeof(DLManagedTensorVersioned) if version else sizeof(DLManagedTensor)
    # One block: the manager, then the shape, then the strides (both structs are 8-aligned).
    cdef void* block = malloc(header + 2 * max(ndim, 1) * sizeof(int64_t))
    if block == NULL:
        raise MemoryError("DLPack export: could not allocate the manager")
    cdef int64_t* shape = <int64_t*>(<char*>block + header)
    cdef DLManagedTensorVersioned* versioned = <DLManagedTensorVersioned*>block
    cdef DLManagedTensor* legacy = <DLManagedTensor*>block
    try:
        if version:
            _describe(&versioned.dl_tensor, tensor, shape)
        else:
            _describe(&legacy.dl_tensor, tensor, shape)
    except BaseException:
        free(block)
        raise
    Py_INCREF(tensor)
    if version:
        versioned.version.major = version[0]
        versioned.version.minor = version[1]
        versioned.manager_ctx = <void*>tensor
        versioned.deleter = _delete_versioned
        versioned.flags = flags
    else:
        legacy.manager_ctx = <void*>tensor
        legacy.deleter = _delete_legacy
    try:
        return PyCapsule_New(block, VERSIONED_NAME if version else LEGACY_NAME,
                             _capsule_destructor)
    except BaseException:
        if version:
            _delete_versioned(versioned)
        else:
            _delete_legacy(legacy)
        raise


cdef object to_dlpack(TensorCore tensor, object stream, object max_version, object dl_device,
                      object copy):
    """Tensor.__dlpack__: export tensor as a DLPack capsule (Note [Interop protocols])."""
    if stream is not None:
        _stream_type_check(stream, "stream")  # its value is checked once the device is known
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be True, False or None, got {errors.shown(copy)}")
    version = _version_arg(max_version)
    own = dlpack_device(tensor)
    target = own if dl_device is None else _device_pair(dl_device)
    if target != own:
        if target != (DL_CPU, 0) and not (target[0] == DL_CUDA and target[1] >= 0):
            raise BufferError(f"dl_device={errors.shown(dl_device)} is not supported: tensorplay exports "
                              "to (1, 0) (kDLCPU) or (2, index) (kDLCUDA)")
        if copy is False:
            raise BufferError(f"dl_device={errors.shown(dl_device)} asks for another device than the "
                              f"tensor's {own} ({_tensor.device_text(tensor.device_index)}), and "
                              "copy=False forbids the copy that moving it needs")
    cdef uintptr_t consumer = 0   # stays 0 where nothing is to be synchronized
    if target[0] == DL_CPU:
        if stream is not None:
            raise ValueError(f"stream must be None when exporting to the CPU (DLPack has no "
                             f"streams on kDLCPU), got {errors.shown(stream)}")
    elif stream is None:
        consumer = 1  # the array API's default: the legacy default stream
    else:
        consumer = _stream_handle(stream, "stream", True)
    exported, copied = _exported(tensor, target, copy is True)
    cdef TensorCore source = exported
    cdef uint64_t flags = FLAG_IS_COPIED if copied else 0
    if source.device_index == _tensor.CPU and not source.array.flags.writeable:
        # Only the versioned struct can say so; a legacy consumer would assume it may write.
        if version is None:
            raise BufferError("the tensor views read-only memory, which a legacy DLPack capsule "
                              "cannot mark; call __dlpack__(max_version=(1, 0)) or export a "
                              "copy (copy=True)")
        flags |= FLAG_READ_ONLY
    if consumer:
        _stream.order_after(source.device_index, consumer, _protocol_stream(source.device_index))
    return _capsule(source, version, flags)


# --------------------------------------------------------------------------------------------
# DLPack import (tensorplay.from_dlpack)


cdef class _DLPackOwner:
    """Owns an imported DLPack manager; the producer's deleter runs when this object dies."""
    cdef void* managed
    cdef bint versioned

    def __dealloc__(self):
        cdef DLManagedTensorVersioned* versioned
        cdef DLManagedTensor* legacy
        if self.managed == NULL:
            return
        if self.versioned:
            versioned = <DLManagedTensorVersioned*>self.managed
            if versioned.deleter != NULL:  # DLPack allows producers with nothing to free
                versioned.deleter(versioned)
        else:
            legacy = <DLManagedTensor*>self.managed
            if legacy.deleter != NULL:
                legacy.deleter(legacy)


cdef class _HostMemory:
    """Producer-owned host memory as numpy sees it; numpy keeps it as the array's base."""
    cdef dict interface
    cdef object owner

    @property
    def __array_interface__(self):
        return self.interface


cdef str _dlpack_dtype_text(int code, int bits, int lanes):
    name = f"{DLPACK_TYPE_NAMES[code]}{bits}" if code in DLPACK_TYPE_NAMES else \
        f"type code {code} with {bits} bits"
    return name if lanes == 1 else f"{name} x {lanes} lanes"


cdef object _request_capsule(object producer):
    if not (hasattr(producer, "__dlpack__") and hasattr(producer, "__dlpack_device__")):
        raise TypeError(f"from_dlpack expects an object with __dlpack__ and __dlpack_device__ "
                        f"(a tensor or array of tensorplay, PyTorch, CuPy, NumPy >= 1.22, ...) "
                        f"or a DLPack capsule, got {type(producer).__name__}")
    described = producer.__dlpack_device__()
    if not (isinstance(described, tuple) and len(described) == 2 and all(
            isinstance(part, int) and not isinstance(part, bool) and 0 <= part < 1 << 31
            for part in described)):
        raise TypeError(f"{type(producer).__name__}.__dlpack_device__() must return "
                        f"(device_type, device_id), two ints from 0 to 2**31 - 1, got "
                        f"{errors.shown(described)}")
    device_type, device_id = described
    if device_type in (DL_CUDA, DL_CUDA_MANAGED):
        _device.checked_device(device_id)
        stream = _protocol_stream(device_id)  # the producer orders its work before our stream
    elif device_type in (DL_CPU, DL_CUDA_HOST):
        stream = None
    else:
        raise BufferError(f"{type(producer).__name__}.__dlpack_device__() is "
                          f"{(device_type, device_id)}; tensorplay imports from {DEVICE_TYPES}")
    try:
        return producer.__dlpack__(stream=stream, max_version=REQUESTED_VERSION)
    except TypeError:
        return producer.__dlpack__(stream=stream)  # producers before DLPack 1.0: no max_version


cdef _DLPackOwner _take_ownership(object capsule):
    """Take the manager out of capsule, marking the capsule used (Note [Interop lifetimes])."""
    cdef _DLPackOwner owner = _DLPackOwner.__new__(_DLPackOwner)
    cdef DLManagedTensorVersioned* versioned
    cdef const char* name
    if PyCapsule_IsValid(capsule, VERSIONED_NAME):
        versioned = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule, VERSIONED_NAME)
        if versioned.version.major != DLPACK_MAJOR:
            # Leave the capsule unconsumed: its destructor still releases the export.
            raise BufferError(f"the producer exported DLPack {versioned.version.major}."
                              f"{versioned.version.minor}; tensorplay reads DLPack "
                              f"{DLPACK_MAJOR}.x")
        owner.managed = versioned
        owner.versioned = True
        PyCapsule_SetName(capsule, USED_VERSIONED_NAME)
    elif PyCapsule_IsValid(capsule, LEGACY_NAME):
        owner.managed = PyCapsule_GetPointer(capsule, LEGACY_NAME)
        owner.versioned = False
        PyCapsule_SetName(capsule, USED_LEGACY_NAME)
    elif PyCapsule_CheckExact(capsule):
        name = PyCapsule_GetName(capsule)
        label = "an unnamed capsule" if name == NULL else \
            f"a capsule named {name.decode(errors='replace')!r}"
        if name != NULL and strncmp(name, b"used_", 5) == 0:
            raise BufferError(f"the DLPack capsule was already consumed ({label}); each "
                              "capsule can be imported once")
        raise TypeError(f"expected a DLPack capsule named 'dltensor' or 'dltensor_versioned', "
                        f"got {label}")
    else:
        raise TypeError(f"__dlpack__() must return a PyCapsule named 'dltensor' or "
                        f"'dltensor_versioned', got {type(capsule).__name__}")
    return owner


cdef object _host_tensor(uintptr_t address, tuple sizes, tuple strides, DtypeCore dtype,
                         bint read_only, object owner):
    """A CPU tensor over producer-owned host memory, through a numpy array that keeps owner."""
    cdef _HostMemory memory = _HostMemory.__new__(_HostMemory)
    memory.owner = owner
    memory.interface = {
        "shape": sizes,
        "typestr": np().dtype(dtype.numpy_name).str,
        "data": (address, read_only),
        "strides": tuple(stride * dtype.itemsize for stride in strides),
        "version": 3,
    }
    # numpy_name is the storage dtype: uint16 bits for bfloat16 (Note [Tensor model]).
    return _tensor.wrap_cpu(np().asarray(memory), dtype)


cdef object _exporter_allocation(object producer):
    """(first byte, byte count) of the allocation behind producer where its library tells it
    (a PyTorch tensor's storage, a CuPy array's memory), else None. Neither library is
    imported here: an object of theirs exists only if it is imported already."""
    if producer is None:
        return None
    torch = sys.modules.get("torch")
    cupy = sys.modules.get("cupy")
    if torch is not None and isinstance(producer, torch.Tensor):
        storage = torch.Tensor.untyped_storage(producer)  # a subclass cannot disguise it
        return int(storage.data_ptr()), int(storage.nbytes())
    if cupy is not None and isinstance(producer, cupy.ndarray):
        memory = producer.data.mem
        return int(memory.ptr), int(memory.size)
    return None


cdef int _check_layout(tuple sizes, tuple strides, int itemsize, object address,
                       str what, object producer=None) except -1:
    """Foreign metadata, checked in Python integers before a tensor is made: sizes and strides
    a tensor can hold, a byte count and a reach (the bytes from the first element to the last)
    below 2**63, an address range inside the 64-bit address space, and, where the producer's
    library tells its allocation, elements inside it."""
    if any(not 0 <= size < 1 << 63 for size in sizes):
        raise ValueError(f"{what} shape {errors.shown(sizes)} has a size outside 0 to 2**63 - 1")
    if any(not 0 <= stride < 1 << 63 for stride in strides):
        raise ValueError(f"{what} strides {errors.shown(strides)} must be from 0 to 2**63 - 1 "
                         "elements")
    count = math.prod(sizes)
    if count * itemsize >= 1 << 63:
        raise ValueError(f"{what} shape {errors.shown(sizes)} holds {count} elements of "
                         f"{itemsize} bytes, more than the 2**63 - 1 bytes a tensor can hold")
    reach = _tensor.reach_bytes(sizes, strides, itemsize)
    if reach >= 1 << 63:
        raise ValueError(f"{what} strides {errors.shown(strides)} reach {reach} bytes from the "
                         "first element, more than 2**63 - 1")
    if not 0 <= address < 1 << 64 or address + reach > 1 << 64:
        raise ValueError(f"{what} data pointer {errors.shown(address)} (reaching {reach} bytes) "
                         "is outside the 64-bit address space")
    allocation = _exporter_allocation(producer) if count else None
    if allocation is not None:
        first, size = allocation
        if not first <= address or address + reach > first + size:
            raise ValueError(f"{what} elements span bytes {address:#x} to {address + reach:#x}, "
                             f"outside the {type(producer).__name__}'s allocation of {size} bytes "
                             f"at {first:#x}")
    return 0


cdef object _import_capsule(object capsule, object producer=None):
    cdef _DLPackOwner owner = _take_ownership(capsule)
    cdef DLTensor* described
    cdef uint64_t flags = 0
    cdef int dim
    if owner.versioned:
        described = &(<DLManagedTensorVersioned*>owner.managed).dl_tensor
        flags = (<DLManagedTensorVersioned*>owner.managed).flags
    else:
        described = &(<DLManagedTensor*>owner.managed).dl_tensor
    # From here on an error drops owner, which returns the memory to the producer.
    cdef int code = described.dtype.code, bits = described.dtype.bits
    cdef int lanes = described.dtype.lanes
    dtype = dtypes.dtype_from_dlpack(code, bits) if lanes == 1 else None
    if dtype is None:
        raise TypeError(f"the DLPack dtype {_dlpack_dtype_text(code, bits, lanes)} has no "
                        f"tensorplay equivalent; supported: {_supported_dtypes()}")
    sizes, strides = [], []
    for dim in range(described.ndim):
        sizes.append(described.shape[dim])
        if described.strides != NULL:
            strides.append(described.strides[dim])
    sizes = tuple(sizes)
    if any(size < 0 for size in sizes):
        raise ValueError(f"the DLPack tensor has negative sizes {errors.shown(sizes)}")
    # NULL strides, allowed before DLPack 1.2, mean compact row-major.
    strides = _tensor.contiguous_strides(sizes) if described.strides == NULL else tuple(strides)
    if any(stride < 0 for stride in strides):
        raise ValueError(f"the DLPack tensor has negative strides {errors.shown(strides)}; "
                         "tensorplay tensors need non-negative strides, so make a copy in the "
                         "producer first (e.g. .copy())")
    _check_layout(sizes, strides, dtype.itemsize,
                  <uintptr_t>described.data + <object>described.byte_offset, "the DLPack tensor's",
                  producer)
    cdef uintptr_t address = <uintptr_t>described.data + described.byte_offset
    cdef int device_type = described.device.device_type
    cdef int device_id = described.device.device_id
    if device_type in (DL_CPU, DL_CUDA_HOST):
        return _host_tensor(address, sizes, strides, dtype, flags & FLAG_READ_ONLY, owner)
    if device_type in (DL_CUDA, DL_CUDA_MANAGED):
        if flags & FLAG_READ_ONLY:
            raise BufferError("the producer exported read-only CUDA memory; tensorplay CUDA "
                              "tensors are always writable, so import a copy instead")
        _device.checked_device(device_id)
        return _tensor.wrap_device_memory(address, sizes, strides, dtype, device_id, owner)
    raise BufferError(f"the DLPack tensor is on device {(device_type, device_id)}; tensorplay "
                      f"imports from {DEVICE_TYPES}")


cdef object from_dlpack(object producer):
    """tensorplay.from_dlpack: a tensor sharing producer's memory (Note [Interop protocols]).

    producer is an object with __dlpack__ and __dlpack_device__, or a bare DLPack capsule as
    older APIs return (torch.utils.dlpack.to_dlpack), which carries no stream handshake.
    """
    if PyCapsule_CheckExact(producer):
        return _import_capsule(producer)
    return _import_capsule(_request_capsule(producer), producer)


# --------------------------------------------------------------------------------------------
# __cuda_array_interface__ v3


cdef dict cuda_array_interface(TensorCore tensor):
    """Tensor.__cuda_array_interface__: the CAI v3 dict of a CUDA tensor."""
    if tensor.device_index == _tensor.CPU:
        # AttributeError, so that hasattr() is False and consumers fall back to other protocols.
        raise AttributeError("__cuda_array_interface__ describes CUDA memory, and this tensor "
                             "is on the CPU; use .numpy() or DLPack (__dlpack__) instead")
    cdef DtypeCore dtype = tensor.dtype_object
    if not dtype.typestr:
        raise TypeError(f"__cuda_array_interface__ cannot describe {dtype.name}: its typestr has "
                        f"no code for it; share {dtype.name} tensors through DLPack "
                        "(__dlpack__) instead")
    return {
        "shape": tensor.sizes,
        "typestr": dtype.typestr,
        "descr": [("", dtype.typestr)],
        "data": (tensor.data if tensor.element_count else 0, False),
        "strides": None if _tensor.is_contiguous(tensor) else
        tuple(stride * dtype.itemsize for stride in tensor.element_strides),
        "stream": _protocol_stream(tensor.device_index),
        "version": 3,
    }


cdef DtypeCore _dtype_from_typestr(object typestr):
    if not isinstance(typestr, str) or len(typestr) > 16:
        raise TypeError(f"__cuda_array_interface__['typestr'] must be a numpy type string such "
                        f"as '<f4', got {errors.shown(typestr)}")
    try:
        described = np().dtype(typestr)
    except TypeError:
        raise TypeError(f"__cuda_array_interface__['typestr'] {errors.shown(typestr)} is not a numpy type "
                        "string such as '<f4'") from None
    if described.byteorder == ">":
        raise TypeError(f"__cuda_array_interface__['typestr'] {errors.shown(typestr)} is big-endian; CUDA "
                        "memory is little-endian ('<')")
    dtype = dtypes.dtype_from_numpy(described)
    if dtype is None:
        raise TypeError(f"__cuda_array_interface__['typestr'] {errors.shown(typestr)} ({described}) has no "
                        f"tensorplay equivalent; supported: {_supported_dtypes()}")
    return dtype


cdef int _pointer_device(uintptr_t address, int64_t count) except -1:
    """The CUDA device holding address (cudaPointerGetAttributes)."""
    if address == 0 and count:  # an argument error, the same without a GPU
        raise ValueError(f"__cuda_array_interface__['data'] is a NULL pointer, but the shape "
                         f"has {count} elements")
    _device.ensure_initialized()
    if address == 0:
        return _device.current_device()
    cdef cudaPointerAttributes attributes
    with nogil:
        errors.check(cyruntime.cudaPointerGetAttributes(&attributes, <void*>address),
                     "cudaPointerGetAttributes")
    if attributes.type != cudaMemoryTypeDevice and attributes.type != cudaMemoryTypeManaged:
        kind = "pinned host memory" if attributes.type == cudaMemoryTypeHost else \
            "host memory unknown to CUDA"
        raise ValueError(f"__cuda_array_interface__['data'] {address:#x} is {kind}, not CUDA "
                         "device memory; share host memory through DLPack or numpy instead")
    return _device.checked_device(attributes.device)


cdef object from_cuda_array_interface(object producer):
    """A CUDA tensor sharing the memory producer describes, keeping producer alive."""
    try:
        interface = producer.__cuda_array_interface__
    except AttributeError as error:
        raise TypeError(f"expected an object with __cuda_array_interface__, got "
                        f"{type(producer).__name__} ({error})") from None
    if not isinstance(interface, dict):
        raise TypeError(f"__cuda_array_interface__ must be a dict, got "
                        f"{type(interface).__name__}")
    version = interface.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 2:
        raise ValueError(f"__cuda_array_interface__['version'] is {errors.shown(version)}; "
                         "tensorplay reads versions 2 and 3")
    if interface.get("mask") is not None:
        raise ValueError("__cuda_array_interface__['mask'] must be None: tensorplay has no "
                         "masked tensors")
    shape = interface.get("shape")
    if not isinstance(shape, tuple) or any(
            isinstance(size, bool) or not isinstance(size, int) or size < 0 for size in shape):
        raise TypeError(f"__cuda_array_interface__['shape'] must be a tuple of non-negative "
                        f"ints, got {errors.shown(shape)}")
    cdef DtypeCore dtype = _dtype_from_typestr(interface.get("typestr"))
    data = interface.get("data")
    if not isinstance(data, tuple) or len(data) != 2 or isinstance(data[0], bool) or \
            not isinstance(data[0], int) or data[0] < 0:
        raise TypeError(f"__cuda_array_interface__['data'] must be a (pointer, read_only) "
                        f"tuple, got {errors.shown(data)}")
    if data[1]:
        raise BufferError("__cuda_array_interface__ describes read-only memory; tensorplay "
                          "CUDA tensors are always writable, so import a copy instead")
    byte_strides = interface.get("strides")
    if byte_strides is None:
        _check_layout(shape, (), dtype.itemsize, 0, "__cuda_array_interface__")  # sizes first
        strides = _tensor.contiguous_strides(shape)
    elif not isinstance(byte_strides, tuple) or len(byte_strides) != len(shape) or any(
            isinstance(stride, bool) or not isinstance(stride, int) or stride < 0
            or stride % dtype.itemsize for stride in byte_strides):
        raise ValueError(f"__cuda_array_interface__['strides'] must be None or one "
                         f"non-negative multiple of the item size ({dtype.itemsize} bytes for "
                         f"{dtype.name}) per dimension of {errors.shown(shape)}, got "
                         f"{errors.shown(byte_strides)}")
    else:
        strides = tuple(stride // dtype.itemsize for stride in byte_strides)
    _check_layout(shape, strides, dtype.itemsize, data[0], "__cuda_array_interface__", producer)
    stream = interface.get("stream") if version >= 3 else None
    cdef uintptr_t producer_stream = 0
    if stream is not None:
        producer_stream = _stream_handle(stream, "__cuda_array_interface__['stream']", False)
    count = 1
    for size in shape:
        count *= size
    cdef int device = _pointer_device(data[0], count)
    if stream is not None:
        _stream.order_after(device, _protocol_stream(device), producer_stream)
    return _tensor.wrap_device_memory(data[0], shape, strides, dtype, device, producer)
