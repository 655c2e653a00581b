# cython: language_level=3
"""The minimal tensor: enough to feed graphs and tests, not a framework.

See docs/design.md, "Minimal tensor".

Note [Tensor model]
A tensor is a shape, strides (in elements), a dtype, a device and the address of its first
element. CPU tensors are numpy arrays underneath, so their views and arithmetic are numpy's;
bfloat16, which numpy lacks, keeps its bits in uint16 and computes through float32. CUDA tensors
take memory from the caching allocator (a DeviceStorage shared by all views of it) or share
memory with another library through DLPack or __cuda_array_interface__, keeping the producer
alive. Every CUDA operation is enqueued on the current stream of the tensor's device.

Rules kept deliberately small: elementwise operations and comparisons take a tensor of the same
dtype and device, or a Python scalar; tensor shapes broadcast by NumPy's rules (broadcast_shape),
and CUDA kernels read a broadcast operand through stride 0 instead of copying it; integer true
division and integer-with-float-scalar arithmetic give float32, as in PyTorch; outputs are
contiguous. Views (indexing, view, transpose, unsqueeze, expand) share memory, so they work on
both devices by changing sizes and strides alone.
"""
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport INT64_MAX, int64_t, uintptr_t
from libc.string cimport memcpy

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaMemcpyDeviceToDevice, cudaMemcpyDeviceToHost,
                                      cudaMemcpyHostToDevice, cudaMemoryTypeHost,
                                      cudaPointerAttributes, cudaStreamCaptureStatus,
                                      cudaStreamCaptureStatusNone, cudaStream_t)

from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.base cimport errors, public
from tensorplay._runtime.memory cimport host_allocator
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.base.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits

import math
import threading


# numpy is imported on first use (np()), because it costs more than the rest of `import
# tensorplay` together.
cdef object _numpy = None


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit (broadcasting, matmul, expand, view, an in-place result): a
    ValueError, as tensorplay has always raised, and the RuntimeError PyTorch raises."""


class IntegerPowerError(ValueError, RuntimeError):
    """An integer tensor to a negative integer power: a ValueError and PyTorch's RuntimeError."""


class BoolNotImplementedError(TypeError, NotImplementedError):
    """An operation PyTorch does not implement for bool tensors: a TypeError, as tensorplay has
    always raised, and PyTorch's NotImplementedError (abs, rounded division; since PyTorch 2.14
    also -, neg and relu, which raised RuntimeError before: NotImplementedError is one)."""


class DtypeError(TypeError, RuntimeError):
    """A dtype an operation refuses where PyTorch raises a RuntimeError (mean() of integers):
    a TypeError, as tensorplay has always raised, and PyTorch's RuntimeError."""


cdef inline object np():
    """numpy, imported on first use."""
    global _numpy
    if _numpy is None:
        import numpy
        _numpy = numpy
    return _numpy


# --------------------------------------------------------------------------------------------
# bfloat16 on the CPU: bits in uint16, arithmetic in float32 (dtypes.pyx converts).


cdef object computable(TensorCore tensor):
    """The CPU values as numpy can compute with them (bfloat16 as float32)."""
    if tensor.dtype_object.name == "bfloat16":
        return bfloat16_bits_to_float32(tensor.array)
    return tensor.array


cdef object stored(object values, DtypeCore dtype):
    """numpy values converted to how dtype stores them on the CPU."""
    if dtype.name == "bfloat16":
        values = np().asarray(values)
        if values.dtype == np().uint16:  # already bfloat16 bits
            return values
        return float32_to_bfloat16_bits(values.astype(np().float32))
    return np().asarray(values).astype(dtype.numpy_name, copy=False)


# --------------------------------------------------------------------------------------------
# Argument parsing


cdef tuple contiguous_strides(tuple sizes):
    if len(sizes) == 1:  # the common case, without building a list
        return (1,)
    strides = []
    # C arithmetic with an overflow check: with a size of 0 the others may multiply past 2**63.
    cdef int64_t running = 1, size
    try:
        for item in reversed(sizes):
            strides.append(running)
            size = item
            if size < 1:  # a size of 0 does not make the next stride 0
                size = 1
            if running > INT64_MAX // size:
                raise OverflowError
            running *= size
    except OverflowError:
        raise ValueError(f"a tensor of shape {errors.shown(sizes)} would need strides of "
                         "2**63 elements or more, which a stride cannot hold") from None
    return tuple(reversed(strides))


cdef object reach_bytes(tuple sizes, tuple strides, int itemsize):
    if 0 in sizes:
        return 0
    return itemsize * (1 + sum((size - 1) * stride for size, stride in zip(sizes, strides)))


cdef int64_t contiguous_bytes(tuple sizes, int itemsize) except? -2:
    """The bytes of a contiguous tensor of sizes (each checked non-negative where it was
    made), or -1 beyond 2**63 - 1, in C arithmetic with an overflow check."""
    cdef int64_t count = itemsize, size
    cdef bint overflow = False
    for item in sizes:
        try:
            size = item
        except OverflowError:  # a size of 2**63 or more
            overflow = True
            continue
        if size == 0:
            return 0
        if overflow or count > INT64_MAX // size:
            overflow = True
        else:
            count *= size
    return -1 if overflow else count


cdef int64_t product(tuple sizes):
    cdef int64_t count = 1
    for size in sizes:
        count *= size
    return count


# An element count, and so each size, must fit a C int64; so must a tensor's byte count.
cdef object ELEMENTS_LIMIT = 1 << 63
cdef object BYTES_LIMIT = (1 << 63) - 1


cdef long long PLAIN_SIZE_LIMIT = 1LL << 31
cdef long long PLAIN_COUNT_LIMIT = 1LL << 62


cdef bint _plain_sizes(tuple size):
    """Whether size is exact non-negative ints, each below 2**31, whose product is at most
    2**62: the common case, checked in C (the generator expressions of the full checks cost
    about a microsecond); any other size takes the full checks of size_arg."""
    cdef long long value, count = 1
    cdef int overflow = 0
    for item in size:
        if type(item) is not int:
            return False
        value = PyLong_AsLongLongAndOverflow(item, &overflow)
        if overflow or not 0 <= value < PLAIN_SIZE_LIMIT:
            return False
        if value and count > PLAIN_COUNT_LIMIT // value:
            return False
        count *= value
    return True


cdef DtypeCore reduced_dtype(DtypeCore dtype, int op):
    """The dtype of a reduction (op OP_SUM, OP_MEAN, OP_MAX or OP_MIN) of a dtype tensor, by the
    op's dtype rule: a sum of integers or bools is int64, as PyTorch's; a mean refuses them."""
    cdef int rule = ops.dtype_rule(op)
    if dtype.floating or rule == ops.DTYPE_SAME:
        return dtype
    if rule == ops.DTYPE_FLOATING_ONLY:
        raise DtypeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                         f"floating point or complex dtype. Got: {dtype.name} (mean() needs a "
                         f"floating-point tensor; convert with .to(tensorplay.float32))")
    return dtypes.named_dtype("int64")


cdef int require_ints(tuple values, str argument) except -1:
    """A TypeError naming argument unless every item is an int (not a bool): sizes and shapes
    check every type before any value."""
    if any(isinstance(value, bool) or not isinstance(value, int) for value in values):
        raise TypeError(f"{argument} must be ints, or one tuple or list of ints, got "
                        f"{errors.shown(values)}")
    return 0


cdef tuple size_arg(tuple size, str argument):
    """*size as ints, or one tuple/list of them, as PyTorch's factories accept."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if _plain_sizes(size):
        return size
    require_ints(size, argument)
    if not all(0 <= value < ELEMENTS_LIMIT for value in size):
        raise ValueError(f"{argument} must be non-negative ints below 2**63, got "
                         f"{errors.shown(size)}")
    if math.prod(size) >= ELEMENTS_LIMIT:
        raise ValueError(f"{argument} {errors.shown(size)} has 2**63 elements or more")
    return size


cdef DtypeCore dtype_arg(object value, DtypeCore default, str argument):
    if value is None:
        return default
    if not isinstance(value, DtypeCore):
        raise TypeError(f"{argument} must be a tensorplay dtype (e.g. tensorplay.float32) or "
                        f"None, got {errors.shown(value)}")
    return value


cdef DtypeCore dtype_of_scalar(object value):
    if isinstance(value, bool):
        return dtypes.named_dtype("bool")
    if isinstance(value, int):
        return dtypes.named_dtype("int64")
    if isinstance(value, float):
        return dtypes.named_dtype("float32")
    raise TypeError(f"expected a bool, int or float, got {type(value).__name__}")


cdef int device_arg(object value, int default) except -3:
    cdef int index = _device.tensor_device_arg(value, "device")
    return default if index == UNSPECIFIED else index


cdef str device_text(int device):
    return "cpu" if device == CPU else f"cuda:{device}"


cdef cudaStream_t current_stream(int device) noexcept nogil:
    return _stream.current_stream_handle(device)


# --------------------------------------------------------------------------------------------
# Autograd hooks (engine.pyx, Note [Tape]): grad mode, and recording an operation whose operands
# require grad. engine.pyx cimports this module, so it is imported here on first use.


cdef object _grad_mode = threading.local()
cdef object _autograd = None


cdef bint grad_enabled():
    return not getattr(_grad_mode, "disabled", False)


cdef void set_grad_enabled(bint enabled):
    _grad_mode.disabled = not enabled


cdef inline bint tracked(TensorCore tensor, object other=None, object third=None):
    """Whether an operation on these operands goes on the tape: one of them requires grad and
    grad mode is on."""
    if not (tensor.grad_required
            or (isinstance(other, TensorCore) and (<TensorCore>other).grad_required)
            or (isinstance(third, TensorCore) and (<TensorCore>third).grad_required)):
        return False
    return grad_enabled()


cdef object recorded(object output, int op, tuple inputs, tuple saved=(), object state=None):
    """output, after a Node for op (ops.pxd) on inputs is recorded on it."""
    global _autograd
    if _autograd is None:
        from tensorplay._runtime.autograd import engine as autograd
        _autograd = autograd
    _autograd.record(output, op, inputs, saved, state)
    return output


cdef class VersionCounter:
    pass


cdef object requiring_grad(object tensor, bint requires_grad):
    if requires_grad:
        (<TensorCore>tensor).grad_required = True
    return tensor


cdef int require_grad_arg(object dtype, object default, bint requires_grad) except -1:
    """A factory's dtype (or default, a dtype or its name, when dtype is None) can require
    grad if requires_grad asks it to."""
    if not requires_grad:
        return 0
    chosen = dtypes.named_dtype(default) if dtype is None and isinstance(default, str) else \
        (default if dtype is None else dtype)
    if isinstance(chosen, DtypeCore) and not (<DtypeCore>chosen).floating:
        raise RuntimeError(f"Only Tensors of floating point and complex dtype can require "
                           f"gradients (tensorplay has no complex dtypes); got "
                           f"requires_grad=True with dtype {(<DtypeCore>chosen).name}")
    return 0


# --------------------------------------------------------------------------------------------
# Construction


cdef class DeviceStorage:
    def __dealloc__(self):
        # A forked child must not touch the parent's allocator state.
        if self.pointer and _device.is_initialized():
            allocator.release(<void*>self.pointer)


cdef class PinnedStorage:
    """A block of the pinned host cache as numpy sees it: pin_memory() wraps it in a numpy
    array, which keeps it as its base (and so does every view of that array), and the block goes
    back to the cache (host_release) when the last of them goes. Copies that read it record their
    streams on it (host_record_stream), so the cache reuses it only after they complete."""

    @property
    def __array_interface__(self):
        return self.interface

    def __dealloc__(self):
        # A forked child must not touch the parent's pinned cache (nor are the pages locked
        # there: memory locks are not inherited across fork).
        if self.pointer and _device.is_initialized():
            host_allocator.host_release(<void*>self.pointer)


# The public tensor class, once the generated module has registered it: looked up per tensor
# otherwise.
cdef type _tensor_class = None
cdef tuple _NO_ARGUMENTS = ()


cdef TensorCore new_tensor():
    global _tensor_class
    cls = _tensor_class
    if cls is None:
        cls = public.public_class("TensorCore", TensorCore)
        if cls is not TensorCore:
            _tensor_class = cls
    # cls.__new__(cls) without the attribute lookup and argument checks of a Python call.
    return (<PyTypeObject*>cls).tp_new(cls, <PyObject*>_NO_ARGUMENTS, NULL)


cdef object wrap_device_memory(uintptr_t data, tuple sizes, tuple element_strides,
                               DtypeCore dtype, int device, object owner):
    cdef TensorCore tensor = new_tensor()
    tensor.sizes = sizes
    tensor.element_strides = element_strides
    tensor.dtype_object = dtype
    tensor.device_index = device
    tensor.data = data
    tensor.owner = owner
    tensor.element_count = product(sizes)
    return tensor


cdef object wrap_numpy(object array):
    """A CPU tensor viewing a numpy array (zero-copy)."""
    dtype = dtypes.dtype_from_numpy(array.dtype)
    if dtype is None:
        raise TypeError(f"numpy dtype {array.dtype} has no tensorplay equivalent; supported: "
                        "bool, uint8, int8, int16, int32, int64, float16, float32, float64")
    return wrap_cpu(array, dtype)


cdef TensorCore wrap_cpu(object array, DtypeCore dtype):
    cdef TensorCore tensor = new_tensor()
    if any(stride < 0 or stride % array.itemsize for stride in array.strides):
        array = np().ascontiguousarray(array)  # element strides must be whole and positive
    tensor.array = array
    tensor.sizes = tuple(array.shape)
    tensor.element_strides = tuple(stride // array.itemsize for stride in array.strides)
    tensor.dtype_object = dtype
    tensor.device_index = CPU
    tensor.owner = array
    tensor.element_count = array.size
    return tensor


cdef object new_empty(tuple sizes, DtypeCore dtype, int device):
    # Elements below 2**63 may still need more bytes than that.
    cdef int64_t nbytes = contiguous_bytes(sizes, dtype.itemsize)
    if nbytes < 0:
        raise ValueError(f"a {dtype.name} tensor of shape {errors.shown(sizes)} would take "
                         f"{math.prod(sizes) * dtype.itemsize} bytes, more than the 2**63 - 1 "
                         "a tensor can hold")
    strides = contiguous_strides(sizes)
    if device == CPU:
        return wrap_cpu(np().empty(sizes, dtype=dtype.numpy_name), dtype)
    _device.checked_device(device)
    cdef DeviceStorage storage = DeviceStorage.__new__(DeviceStorage)
    storage.nbytes = nbytes
    storage.device_index = device
    storage.pointer = <uintptr_t>allocator.allocate(device, storage.nbytes,
                                                    current_stream(device))
    return wrap_device_memory(storage.pointer, sizes, strides, dtype, device, storage)


cdef TensorCore new_pinned(tuple sizes, DtypeCore dtype):
    """A contiguous CPU tensor of sizes (those of an existing tensor) in a block of the pinned
    host cache."""
    cdef PinnedStorage storage = PinnedStorage.__new__(PinnedStorage)
    cdef size_t nbytes = <size_t>contiguous_bytes(sizes, dtype.itemsize)
    storage.pointer = <uintptr_t>host_allocator.host_allocate(nbytes)
    storage.nbytes = nbytes
    # numpy_name is the storage dtype: uint16 bits for bfloat16 (Note [Tensor model]).
    storage.interface = {"shape": sizes, "typestr": np().dtype(dtype.numpy_name).str,
                         "data": (storage.pointer, False), "strides": None, "version": 3}
    return wrap_cpu(np().asarray(storage), dtype)


cdef PinnedStorage pinned_storage_of(TensorCore tensor):
    """The pinned block under a CPU tensor made by pin_memory(), or a view of one; else None."""
    return pinned_storage_under(tensor.array)


cdef PinnedStorage pinned_storage_under(object array):
    """The pinned block under a numpy array, if pin_memory() made it. numpy keeps the object
    that exposed the memory as the base of the array and of its views (as_strided adds one
    level, a DummyArray with a base of its own), so no CUDA call is needed."""
    owner = array
    for _ in range(8):
        if owner is None or isinstance(owner, PinnedStorage):
            return owner
        owner = getattr(owner, "base", None)
    return None


cdef inline uintptr_t host_address(TensorCore tensor):
    """The address of a CPU tensor's first element."""
    return tensor.array.__array_interface__["data"][0]


cdef bint host_memory_is_locked(uintptr_t address, int device) except -1:
    """Whether CUDA reports address as page-locked host memory (cudaHostAlloc'd, by any library,
    or registered with cudaHostRegister). CUDA must be initialised."""
    cdef cudaPointerAttributes attributes
    cdef _device.DeviceSwitch switch
    cdef int mode
    if address == 0:
        return False
    with nogil:
        _device.enter_device(device, &switch)
        _device.enter_relaxed(&mode)  # a query, legal during any capture in relaxed mode
        try:
            errors.check(cyruntime.cudaPointerGetAttributes(&attributes, <void*>address),
                         "cudaPointerGetAttributes")
        finally:
            _device.exit_relaxed(&mode)
            _device.exit_device(&switch)
    return attributes.type == cudaMemoryTypeHost


cdef bint page_locked(TensorCore tensor, int device) except -1:
    """Whether a CPU tensor's memory is page-locked (asked under device's context). Never
    initialises CUDA: before tensorplay initialises it nothing it made can be pinned, and in a
    child forked after initialisation the pages are not locked."""
    if tensor.device_index != CPU or not _device.is_initialized():
        return False
    return pinned_storage_of(tensor) is not None or \
        host_memory_is_locked(host_address(tensor), device)


cdef bint is_contiguous(TensorCore tensor):
    cdef int64_t expected = 1
    cdef int dim
    if tensor.element_count == 0:  # no element to be out of place, as PyTorch sees it
        return True
    if len(tensor.sizes) == 1:  # the common case, in C
        return tensor.element_count == 1 or tensor.element_strides[0] == 1
    for dim in range(len(tensor.sizes) - 1, -1, -1):
        size = tensor.sizes[dim]
        if size != 1 and tensor.element_strides[dim] != expected:
            return False
        expected *= size
    return True


cdef TensorCore contiguous_on_device(TensorCore tensor):
    return tensor if is_contiguous(tensor) else tensor.c_contiguous()


cdef object strided_view(TensorCore tensor, tuple sizes, tuple strides):
    """A view of tensor's memory from its first element with other sizes and strides (in
    elements, never negative), which the caller checked stay within it. A CPU view that reads
    one element at several indices (stride 0, as expand() makes) is read-only, as numpy's
    broadcast_to()."""
    cdef TensorCore view
    if tensor.device_index != CPU:
        view = wrap_device_memory(tensor.data, sizes, strides, tensor.dtype_object,
                                  tensor.device_index, tensor.owner)
    else:
        array = tensor.array
        repeats = any(stride == 0 and size > 1 for size, stride in zip(sizes, strides))
        view = wrap_cpu(np().lib.stride_tricks.as_strided(
            array, sizes, tuple(stride * array.itemsize for stride in strides),
            writeable=bool(array.flags.writeable) and not repeats), tensor.dtype_object)
    view.version = tensor.version
    view.is_view = True
    return view


cdef int alias_memory(TensorCore target, TensorCore source) except -1:
    target.sizes = source.sizes
    target.element_strides = source.element_strides
    target.dtype_object = source.dtype_object
    target.device_index = source.device_index
    target.data = source.data
    target.owner = source.owner
    target.array = source.array
    target.element_count = source.element_count
    target.version = source.version
    return 0


cdef TensorCore reshaped(TensorCore tensor, tuple sizes):
    """A contiguous tensor seen in another shape of the same element count."""
    if tensor.sizes == sizes:
        return tensor
    return strided_view(tensor, sizes, contiguous_strides(sizes))


cdef int check_device(TensorCore a, TensorCore b, str what) except -1:
    if a.device_index != b.device_index:
        raise ValueError(f"{what}: the tensors are on different devices, {device_text(a.device_index)} "
                         f"and {device_text(b.device_index)}; move one with .to()")
    return 0


cdef int check_device_and_dtype(TensorCore a, TensorCore b, str what) except -1:
    check_device(a, b, what)
    if a.dtype_object is not b.dtype_object:
        raise TypeError(f"{what}: dtypes {a.dtype_object.name} and {b.dtype_object.name} differ; "
                        "convert one with .to(dtype)")
    return 0


cdef tuple broadcast_shape(tuple a, tuple b, str what):
    """The shape a and b broadcast to by NumPy's rules (PyTorch's too): aligned at the right,
    each pair of sizes equal or one of them 1, a missing dimension counting as 1."""
    if a == b:
        return a
    cdef Py_ssize_t ndim = max(len(a), len(b)), dim
    sizes = []
    for dim in range(ndim):
        size_a = a[dim - ndim + len(a)] if dim >= ndim - len(a) else 1
        size_b = b[dim - ndim + len(b)] if dim >= ndim - len(b) else 1
        if size_a != size_b and size_a != 1 and size_b != 1:
            raise ShapeError(f"{what}: The size of tensor a ({size_a}) must match the size of "
                             f"tensor b ({size_b}) at non-singleton dimension {dim}")
        sizes.append(size_b if size_a == 1 else size_a)
    return tuple(sizes)


cdef tuple broadcast_strides(TensorCore tensor, tuple sizes):
    """The strides that read tensor over sizes, a shape it broadcasts to: 0 on a dimension it
    lacks or has of size 1, so every index there reads the same element."""
    cdef Py_ssize_t lead = len(sizes) - len(tensor.sizes)
    return (0,) * lead + tuple(0 if size == 1 else stride for size, stride in
                               zip(tensor.sizes, tensor.element_strides))


cdef bint reads_directly(TensorCore tensor, tuple sizes):
    """Whether a kernel over contiguous memory of sizes can read tensor as it is."""
    return tensor.sizes == sizes and is_contiguous(tensor)


cdef bint is_scalar(object value):
    return isinstance(value, (bool, int, float))


cdef DtypeCore float32_if_float(DtypeCore dtype, object scalar):
    """dtype, or float32 for a non-floating dtype meeting a float scalar, as PyTorch promotes."""
    if isinstance(scalar, float) and not dtype.floating:
        return dtypes.named_dtype("float32")
    return dtype


cdef int scalar_operand_arg(object value, str name, str argument="the other operand") \
        except -1:
    """A Python int operand must fit the 64 bits a kernel takes it in (a float always fits)."""
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 64):
        raise ValueError(f"{name}: {argument} {errors.shown(value)} does not fit in 64 bits "
                         "(-2**63 to 2**64 - 1)")
    return 0


cdef int check_operand(TensorCore tensor, object other, bint inplace, str name, str argument,
                       bint same_dtype) except -1:
    """other is a tensor on tensor's device (of its dtype when same_dtype) whose shape
    broadcasts with tensor's (to tensor's own shape for an in-place result), or a Python
    scalar that fits 64 bits."""
    if isinstance(other, TensorCore):
        if same_dtype:
            check_device_and_dtype(tensor, other, name)
        else:
            check_device(tensor, other, name)
        shape = broadcast_shape(tensor.sizes, (<TensorCore>other).sizes, name)
        if inplace and shape != tensor.sizes:
            raise ShapeError(f"{name}: output with shape {list(tensor.sizes)} doesn't match "
                             f"the broadcast shape {list(shape)}")
    elif not is_scalar(other):
        raise TypeError(f"{name}: {argument} must be a tensor or a Python scalar, got "
                        f"{type(other).__name__}")
    else:
        scalar_operand_arg(other, name, argument)
    return 0


cdef DtypeCore arithmetic_dtype(TensorCore tensor, object other, int op, bint inplace, str name,
                                str argument="the other operand"):
    """The result dtype of tensor (op) other under the operators' rules, which it checks: other
    is a tensor of the same dtype and device whose shape broadcasts with tensor's, or a Python
    scalar; no bool arithmetic here (c_bool_binary has its own rules); integers divide truly into
    float32 (op's dtype rule); an in-place result keeps the tensor's dtype and shape."""
    check_operand(tensor, other, inplace, name, argument, True)
    if tensor.dtype_object.name == "bool":
        raise TypeError(f"{name}: arithmetic on bool tensors is not supported; convert with "
                        ".to(tensorplay.int64) first")
    cdef DtypeCore result = float32_if_float(tensor.dtype_object, other)
    if ops.dtype_rule(op) == ops.DTYPE_FLOATING and not result.floating:
        result = dtypes.named_dtype("float32")  # true division, as PyTorch
    if inplace:
        check_in_place(tensor, result, name)
    return result


cdef int check_in_place(TensorCore tensor, DtypeCore result, str name) except -1:
    if result is not tensor.dtype_object:
        raise TypeError(f"{name}: the result is {result.name}, which cannot be stored in place "
                        f"into a {tensor.dtype_object.name} tensor")
    return 0


cdef int division_op(object rounding_mode, str name) except -1:
    """The kernel operation of torch.div's rounding_mode."""
    if rounding_mode is None:
        return ops.OP_DIV
    if rounding_mode == "trunc":
        return ops.OP_DIV_TRUNC
    if rounding_mode == "floor":
        return ops.OP_DIV_FLOOR
    if not isinstance(rounding_mode, str):
        raise TypeError(f"{name}: rounding_mode must be None, 'trunc' or 'floor', got "
                        f"{type(rounding_mode).__name__}")
    raise ValueError(f"{name}: rounding_mode must be None, 'trunc' or 'floor', got "
                     f"{rounding_mode!r:.200}")


cdef object cpu_binary(int op, object a, object b):
    """a (op) b in numpy; a and b are arrays or Python scalars."""
    if op == ops.OP_DIV_TRUNC or op == ops.OP_DIV_FLOOR:
        if np().result_type(a, b).kind in "iu":
            if np().any(np().asarray(b) == 0):
                # PyTorch's CPU kernels raise too; numpy would give 0 with a warning.
                raise ZeroDivisionError("div: integer division by zero (other has a zero)")
            quotient = np().floor_divide(a, b)
            if op == ops.OP_DIV_TRUNC:  # floor + 1 where inexact and the signs differ
                quotient = quotient + ((np().remainder(a, b) != 0) & ((np().asarray(a) < 0) !=
                                                                      (np().asarray(b) < 0)))
            return quotient
        with np().errstate(divide="ignore", invalid="ignore"):
            if op == ops.OP_DIV_TRUNC:
                return np().trunc(np().true_divide(a, b))
            return np().floor_divide(a, b)
    return getattr(np(), ops.cpu_name(op))(a, b)


def _repr_values(TensorCore tensor):
    """tensor_repr.py's view of host_values()."""
    return host_values(tensor)


cdef object host_values(TensorCore tensor):
    """The values as numpy computes with them, copied to the host if need be, off the tape."""
    if tensor.device_index == CPU:
        return computable(tensor)
    return computable((<TensorCore>tensor.c_detach()).c_cpu())


cdef object opmath(TensorCore tensor):
    """The CPU values in the type CUDA kernels compute in (accumulate<> in kernels/common.cu):
    float32 for 16-bit floats, int64 for integers, so that both devices round alike."""
    values = computable(tensor)
    if tensor.dtype_object.floating:
        return values.astype(np().float32) if tensor.dtype_object.itemsize == 2 else values
    return values.astype(np().int64)


# --------------------------------------------------------------------------------------------
# Copies


cdef object copy_named(TensorCore target, object src, bint non_blocking, str argument):
    """target.copy_(src), argument naming src in errors (copy_(): src; item assignment: value)."""
    cdef TensorCore source = own_tensor_arg(src, argument)
    cdef unsigned long long capture_id
    if source.sizes != target.sizes:  # a source that broadcasts is read through stride 0
        if broadcast_shape(target.sizes, source.sizes, "copy_") != target.sizes:
            raise ShapeError(f"copy_: the source's shape {source.sizes} does not broadcast "
                             f"to this tensor's shape {target.sizes}")
        source = strided_view(source, target.sizes, broadcast_strides(source, target.sizes))
    if tracked(target, src) and (<TensorCore>src).dtype_object.floating:
        # Recorded: src converted and broadcast to this tensor, copied in.
        target.c_check_rebase("copy_")
        value = (<TensorCore>src).c_expand(target.sizes) if (<TensorCore>src).sizes != \
            target.sizes else src
        return target.c_rebased(copied_to(value, target.device_index, target.dtype_object,
                                          False, True, argument))
    if source.device_index == CPU and target.device_index != CPU and target.element_count:
        # Refused before the version counter moves (Note [Host copies during capture]).
        host_copy_capturing(source, target.device_index, target.dtype_object, argument,
                            current_stream(target.device_index), &capture_id)
    target.c_mark_modified("copy_", src)
    copy_into(target, source, non_blocking, argument)
    return target


cdef object copied_to(TensorCore tensor, int target_device, DtypeCore target_dtype,
                      bint non_blocking, bint copy, str argument):
    """tensor.to(target_device, target_dtype, non_blocking, copy) with the arguments checked;
    argument names tensor in errors (to(): self; tensor(): data)."""
    cdef unsigned long long capture_id
    if target_device == tensor.device_index and target_dtype is tensor.dtype_object and not copy:
        return tensor
    if tensor.device_index == CPU and target_device != CPU and tensor.element_count:
        # A copy the capture cannot take is refused before the result is allocated (Note [Host
        # copies during capture]).
        host_copy_capturing(tensor, target_device, target_dtype, argument,
                            current_stream(target_device), &capture_id)
    result = new_empty(tensor.sizes, target_dtype, target_device)
    copy_into(result, tensor, non_blocking, argument)
    if tracked(tensor) and target_dtype.floating:
        return recorded(result, ops.OP_TO, (tensor,))
    return result


cdef object to_named(TensorCore tensor, object device, object dtype, bint non_blocking,
                     bint copy, str argument):
    """tensor.to(device, dtype, non_blocking, copy), argument naming tensor in errors."""
    if isinstance(device, DtypeCore):  # x.to(tensorplay.float16), as PyTorch allows
        if dtype is not None:
            raise TypeError("to() got a dtype twice (as device and as dtype)")
        device, dtype = None, device
    cdef int target_device = device_arg(device, tensor.device_index)
    cdef DtypeCore target_dtype = dtype_arg(dtype, tensor.dtype_object, "dtype")
    return copied_to(tensor, target_device, target_dtype, non_blocking, copy, argument)


cdef int copy_into(TensorCore target, TensorCore source, bint non_blocking,
                   str argument="src") except -1:
    """Copy source into target (one shape); argument names source in errors."""
    if target.sizes != source.sizes:
        raise ShapeError(f"copy_: shapes {source.sizes} (source) and {target.sizes} (self) differ")
    if target.element_count == 0:
        return 0
    if target.device_index == CPU and source.device_index == CPU:
        target.array[...] = stored(computable(source), target.dtype_object)
    elif target.device_index == CPU:
        copy_to_host(target, source)
    elif source.device_index == CPU:
        copy_from_host(target, source, non_blocking, argument)
    else:
        copy_on_device(target, source)
    return 0


cdef int copy_on_device(TensorCore target, TensorCore source) except -1:
    cdef int device = target.device_index
    cdef cudaStream_t stream = current_stream(device)
    cdef size_t nbytes = target.element_count * target.dtype_object.itemsize
    if source.device_index != device:
        # Across devices: a contiguous copy of the source on its own device, then a peer copy.
        staged = contiguous_on_device(source.c_to(device_text(source.device_index),
                                                 target.dtype_object, False, False))
        destination = target if is_contiguous(target) else \
            new_empty(target.sizes, target.dtype_object, device)
        with nogil:
            errors.check(cyruntime.cudaMemcpyPeerAsync(
                <void*>(<TensorCore>destination).data, device, <void*>(<TensorCore>staged).data,
                (<TensorCore>staged).device_index, nbytes, stream), "cudaMemcpyPeerAsync")
        if destination is not target:
            copy_on_device(target, destination)
        return 0
    if source.dtype_object is target.dtype_object and is_contiguous(source) \
            and is_contiguous(target):
        with nogil:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>target.data, <void*>source.data,
                                                   nbytes, cudaMemcpyDeviceToDevice, stream),
                         "cudaMemcpyAsync")
        return 0
    return device_ops.copy_strided(device, source.dtype_object, source.data, source.sizes,
                                   source.element_strides, target.dtype_object, target.data,
                                   target.element_strides, stream)


# Note [Host copies during capture]
# A graph replays the addresses it captured: a captured host-to-device copy reads the same host
# bytes on every replay (PyTorch's CUDA graphs notes: a graph reads from and writes to the same
# virtual addresses every time it replays). So a copy made on a stream that captures must read
# memory that holds, at each replay, what that replay should copy, and that stays allocated
# while the graph can replay. A copy from pageable memory can do neither: the eager paths read it
# through a temporary (a dtype conversion, a gather of strides, a staging block of the pinned
# cache that goes back to the cache at once), freed or reused right after the call, and CUDA
# captures a cudaMemcpyAsync from pageable memory without a word (checked on an H200), so each
# replay would read freed memory or whatever later copies staged there. Hence, on a capturing
# stream (one that joined the capture through an event wait too):
# - a copy from pageable memory, or one that needs a temporary host buffer (another dtype, a
#   source that is not contiguous), is refused before any CUDA call but queries, naming the
#   argument, and the capture goes on. The fix is PyTorch's: copy from pinned memory
#   (Tensor.pin_memory(), made before the capture) and change its values between replays;
# - a copy from page-locked memory that needs no conversion (pin_memory()'s blocks, or memory
#   CUDA reports page-locked, such as PyTorch's pinned tensors shared through DLPack) is
#   captured as one cudaMemcpyAsync straight from the source: no staging block, and no
#   host_record_stream (an event recorded during capture covers nothing at replay time). The
#   source's numpy array, which owns the memory through its base (a PinnedStorage or the
#   producer), goes to captures.keep_alive under the capture's id, so that the graph keeps it
#   while it can replay;
# - a destination that is not contiguous is written as in eager mode, through a contiguous
#   device buffer allocated on the capturing stream (so from the graph's pool) and a device copy;
# - on the legacy default stream while a blocking stream of its device captures, any copy would
#   join and invalidate that capture: refused as well.
# Outside a capture, a page-locked source that needs no conversion is read in place, which is
# asynchronous: a blocking copy then synchronises the stream (PyTorch's memcpy_and_sync), a
# non_blocking one from a pin_memory() block records the stream on the block. Pageable sources
# are read in place by blocking copies (CUDA stages them and returns once they are read), and
# staged through a block of the pinned cache by non_blocking ones, which record their stream on
# that block; so are non_blocking copies from page-locked memory of other libraries, which our
# cache cannot track.


cdef unsigned long long capture_id_of(cudaStream_t stream, int device) except? 0:
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef unsigned long long capture_id = 0
    cdef _device.DeviceSwitch switch
    with nogil:
        _device.enter_device(device, &switch)
        try:
            errors.check(cyruntime.cudaStreamGetCaptureInfo(stream, &status, &capture_id, NULL,
                                                            NULL, NULL, NULL),
                         "cudaStreamGetCaptureInfo")
        finally:
            _device.exit_device(&switch)
    return capture_id


cdef bint host_copy_capturing(TensorCore source, int device, DtypeCore dtype, str argument,
                              cudaStream_t stream, unsigned long long* capture_id) except -1:
    if not _device.capture_open() or not _device.stream_capturing(<void*>stream, device):
        return False
    # Note [Host copies during capture]
    if <uintptr_t>stream <= 1:  # the legacy default stream (0, or cudaStreamLegacy) never captures
        raise RuntimeError(
            f"a copy from the host to cuda:{device} cannot run on the legacy default stream "
            f"while a blocking stream of cuda:{device} captures a graph: work on the legacy "
            "stream would join that capture and invalidate it (cudaErrorStreamCaptureImplicit). "
            "Copy on the capturing stream (make it current with tensorplay.cuda.stream()), or "
            "before the capture begins. Nothing was copied, and the capture goes on")
    reason = None
    if source.dtype_object is not dtype:
        reason = (f"needs a temporary pageable buffer (its {source.dtype_object.name} values are "
                  f"converted to {dtype.name} on the host first), which the graph "
                  "would read on every replay after it is freed")
    elif not is_contiguous(source):
        reason = ("needs a temporary pageable buffer (it is not contiguous, a strided or "
                  "broadcast view, so its elements are gathered on the host first), which the "
                  "graph would read on every replay after it is freed")
    elif not page_locked(source, device):
        reason = ("is pageable host memory, not page-locked, so the graph would read a temporary "
                  "or reused host buffer on every replay instead of its values")
    if reason is not None:
        raise RuntimeError(
            f"a copy from pageable host memory cannot be captured into a CUDA graph (stream "
            f"{<uintptr_t>stream:#x} of cuda:{device} is capturing): the source ({argument}) "
            f"{reason}. Copy from pinned memory instead: make a contiguous CPU tensor of "
            f"dtype {dtype.name} with .pin_memory() before the capture and copy_() "
            "from it inside; every replay then reads that pinned memory, so set its values "
            "before each replay (PyTorch's rule for host copies in CUDA graphs). Nothing was "
            "copied, and the capture goes on")
    capture_id[0] = capture_id_of(stream, device)
    return True


cdef int copy_from_host(TensorCore target, TensorCore source, bint non_blocking,
                        str argument) except -1:
    # Note [Host copies during capture]
    cdef int device = target.device_index
    cdef cudaStream_t stream = current_stream(device)
    cdef unsigned long long capture_id = 0
    cdef bint captured = host_copy_capturing(source, device, target.dtype_object, argument, stream,
                                             &capture_id)
    cdef bint as_is = captured or (source.dtype_object is target.dtype_object
                                   and is_contiguous(source))
    cdef PinnedStorage storage = None
    cdef bint in_place = captured   # reads source's page-locked memory itself, asynchronously
    cdef void* pinned = NULL
    cdef int mode
    if as_is:
        host = source.array
        if not captured:
            storage = pinned_storage_of(source)
            in_place = storage is not None or (
                not non_blocking and host_memory_is_locked(host_address(source), device))
    else:
        host = np().asarray(stored(computable(source), target.dtype_object), order="C")
    cdef size_t nbytes = host.nbytes
    cdef uintptr_t host_pointer = host.__array_interface__["data"][0]
    destination = target if is_contiguous(target) else \
        new_empty(target.sizes, target.dtype_object, device)
    cdef uintptr_t destination_pointer = (<TensorCore>destination).data
    if captured:
        # Recorded before the node exists: no captured node reads memory the graph may not hold.
        captures.keep_alive(capture_id, host)
    elif non_blocking and not in_place:
        # Stage through the pinned cache so the copy is truly asynchronous; the block is reused
        # only after the copy recorded on it completes (host_allocator).
        pinned = host_allocator.host_allocate(nbytes)
        memcpy(pinned, <void*>host_pointer, nbytes)
        host_pointer = <uintptr_t>pinned
    try:
        with nogil:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>destination_pointer,
                                                   <void*>host_pointer, nbytes,
                                                   cudaMemcpyHostToDevice, stream),
                         "cudaMemcpyAsync")
        if pinned != NULL:
            host_allocator.host_record_stream(pinned, stream)
        elif in_place and not captured:
            if non_blocking:  # a pin_memory() block: reused only after this copy
                host_allocator.host_record_stream(<void*>storage.pointer, stream)
            else:  # blocking: the source may change once this returns
                with nogil:
                    _device.enter_relaxed(&mode)  # legal while another stream captures
                    try:
                        errors.check(cyruntime.cudaStreamSynchronize(stream),
                                     "cudaStreamSynchronize")
                    finally:
                        _device.exit_relaxed(&mode)
    finally:
        if pinned != NULL:
            host_allocator.host_release(pinned)
    if destination is not target:
        copy_on_device(target, destination)
    return 0


cdef int copy_to_host(TensorCore target, TensorCore source) except -1:
    cdef int device = source.device_index
    cdef cudaStream_t stream = current_stream(device)
    # Waiting for a capturing stream is refused before anything is queued; a copy on a stream
    # that does not capture is legal during another capture (device.pyx, Note [Calls during
    # capture]).
    _device.refuse_on_capturing_stream("a copy to the host (item(), tolist(), cpu(), numpy())",
                                       stream, device)
    cdef int mode
    staged = source
    if source.dtype_object is not target.dtype_object or not is_contiguous(source):
        staged = new_empty(source.sizes, target.dtype_object, device)
        copy_on_device(staged, source)
    host = target.array if is_contiguous(target) and target.array.flags.c_contiguous else \
        np().empty(target.sizes, dtype=target.dtype_object.numpy_name)
    cdef uintptr_t host_pointer = host.__array_interface__["data"][0]
    cdef uintptr_t device_pointer = (<TensorCore>staged).data
    cdef size_t nbytes = host.nbytes
    # Pageable host memory: the copy completes before this returns, as PyTorch's does.
    with nogil:
        _device.enter_relaxed(&mode)
        try:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>host_pointer, <void*>device_pointer,
                                                   nbytes, cudaMemcpyDeviceToHost, stream),
                         "cudaMemcpyAsync")
            errors.check(cyruntime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
        finally:
            _device.exit_relaxed(&mode)
    if host is not target.array:
        target.array[...] = host
    return 0


# --------------------------------------------------------------------------------------------
# The tensor


cdef class TensorCore:
    def __cinit__(self, *args, **kwargs):
        self.device_index = CPU
        self.sizes = ()
        self.element_strides = ()
        self.version = VersionCounter.__new__(VersionCounter)  # views replace it with their base's

    def __init__(self, *args, **kwargs):
        raise TypeError("tensors are made by factories: tensorplay.tensor(), empty(), zeros(), "
                        "ones(), full(), arange(), as_tensor() or from_dlpack()")

    # -- description ------------------------------------------------------------------------

    cdef tuple c_shape(self):
        return self.sizes

    cdef int c_ndim(self):
        return len(self.sizes)

    cdef Py_hash_t c_hash(self):
        return id(self) >> 4  # identity, as PyTorch: == is elementwise, so not value-based

    cdef object c_dtype(self):
        return self.dtype_object

    cdef object c_device(self):
        if self.device_index == CPU:
            return public.public_class("DeviceCore", _device.DeviceCore)("cpu")
        return _device.device_object(self.device_index)

    cdef object c_stride(self, object dim):
        if dim is None:
            return self.element_strides
        cdef int index = self.c_dim(dim)
        if not self.sizes:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return self.element_strides[index]

    cdef int c_dim(self, object dim, str argument="dim") except -1:
        cdef int ndim = len(self.sizes)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"{argument} must be an int, got {type(dim).__name__} "
                            f"({errors.shown(dim)})")
        # A 0-d tensor takes dims 0 and -1, as if it had one dimension (PyTorch's rule).
        cdef int wrap = max(ndim, 1)
        if not -wrap <= dim < wrap:  # an index out of range, as in PyTorch
            raise IndexError(f"{argument}: Dimension out of range (expected to be in range of "
                             f"[{-wrap}, {wrap - 1}], but got {errors.shown(dim)})")
        return dim + wrap if dim < 0 else dim

    cdef int64_t c_numel(self):
        return self.element_count

    cdef int c_element_size(self):
        return self.dtype_object.itemsize

    cdef int64_t c_nbytes(self):
        return self.element_count * self.dtype_object.itemsize

    cdef object c_data_ptr(self):
        if self.device_index == CPU:
            return self.array.__array_interface__["data"][0]
        return self.data

    cdef bint c_is_contiguous(self):
        return is_contiguous(self)

    cdef bint c_is_cuda(self):
        return self.device_index != CPU

    cdef str c_repr(self):
        # PyTorch's text (tensor_repr.py, Note [Tensor repr]), imported on first use.
        from tensorplay._runtime.tensor.tensor_repr import tensor_repr
        return tensor_repr(self, None if self.device_index == CPU else
                           device_text(self.device_index), self.dtype_object.repr_text(),
                           _repr_values)

    cdef Py_ssize_t c_len(self) except -1:
        if not self.sizes:
            raise TypeError("len() of a 0-d tensor")
        return self.sizes[0]

    # -- copies and conversions ---------------------------------------------------------------

    cdef object c_copy_(self, object src, bint non_blocking):
        return copy_named(self, src, non_blocking, "src")

    cdef object c_fill_(self, object value):
        if not is_scalar(value):
            raise TypeError(f"value must be a bool, int or float, got {type(value).__name__}")
        dtypes.check_scalar(value, self.dtype_object, "value")
        if tracked(self) and self.grad_node is not None:  # recorded: its gradient is zero
            self.c_check_rebase("fill_")
            filled = (<TensorCore>new_empty(self.sizes, self.dtype_object,
                                            self.device_index)).c_fill_(value)
            return self.c_rebased(recorded(filled, ops.OP_FILL, (self,)))
        self.c_mark_modified("fill_")
        if self.device_index == CPU:
            self.array[...] = stored(np().array(value), self.dtype_object)
            return self
        if is_contiguous(self):
            device_ops.fill(self.device_index, self.dtype_object, self.data, self.element_count,
                            device_ops.scalar_bits(self.dtype_object, value),
                            current_stream(self.device_index))
        else:
            filled = new_empty(self.sizes, self.dtype_object, self.device_index)
            (<TensorCore>filled).c_fill_(value)
            copy_on_device(self, filled)
        return self

    cdef object c_zero_(self):
        return self.c_fill_(0)

    # random_ops cimports this module, so it is imported here, not cimported. It checks the
    # arguments, then counts the change (Note [Refused calls change nothing]).
    cdef object c_uniform_(self, object low, object high, object generator):
        from tensorplay._runtime.random import random_ops
        return random_ops.uniform_(self, low, high, generator)

    cdef object c_normal_(self, object mean, object std, object generator):
        from tensorplay._runtime.random import random_ops
        return random_ops.normal_(self, mean, std, generator)

    cdef object c_bernoulli_(self, object p, object generator):
        from tensorplay._runtime.random import random_ops
        return random_ops.bernoulli_(self, p, generator)

    cdef object c_clone(self):
        result = new_empty(self.sizes, self.dtype_object, self.device_index)
        copy_into(result, self, False)
        return recorded(result, ops.OP_CLONE, (self,)) if tracked(self) else result

    cdef object c_contiguous(self):
        return self if is_contiguous(self) else self.c_clone()

    cdef object c_to(self, object device, object dtype, bint non_blocking, bint copy):
        return to_named(self, device, dtype, non_blocking, copy, "self")

    cdef object c_cpu(self):
        return self.c_to("cpu", None, False, False)

    cdef object c_cuda(self, object device, bint non_blocking):
        cdef int index = _device.device_index_arg(device, "device")
        return copied_to(self, index, self.dtype_object, non_blocking, False, "self")

    cdef object c_pin_memory(self):
        if self.device_index != CPU:
            raise RuntimeError(f"cannot pin a tensor on {device_text(self.device_index)}: only "
                               "CPU tensors can be pinned (pin_memory() page-locks host memory; "
                               "CUDA memory needs no pinning)")
        if self.c_is_pinned():
            return self
        if not _device.is_available():
            errors.raise_no_accelerator("pin_memory()")
        cdef TensorCore result = new_pinned(self.sizes, self.dtype_object)
        if self.element_count:
            result.array[...] = self.array  # the storage dtype on both sides: bits as they are
        # PyTorch's pin_memory is an identity for autograd (PinMemoryBackward0), like clone().
        return recorded(result, ops.OP_PIN_MEMORY, (self,)) if tracked(self) else result

    cdef bint c_is_pinned(self) except -1:
        if self.device_index != CPU or not _device.is_initialized():
            return False  # never initialises CUDA: nothing can be pinned before it is
        return page_locked(self, _device.current_device())

    cdef object c_numpy(self):
        if self.device_index != CPU:
            raise TypeError(f"numpy() needs a CPU tensor, this one is on "
                            f"{device_text(self.device_index)}; call .cpu() first")
        if self.dtype_object.name == "bfloat16":
            raise TypeError("numpy has no bfloat16; convert with .to(tensorplay.float32) first")
        return self.array

    cdef object c_item(self):
        if self.element_count != 1:
            raise ShapeError(f"item(): a Tensor with {self.element_count} elements cannot be "
                             f"converted to Scalar; item() needs a tensor with exactly one "
                             f"element (shape {self.sizes})")
        return host_values(self).reshape(()).item()

    cdef object c_tolist(self):
        return host_values(self).tolist()

    # -- views ----------------------------------------------------------------------------------

    cdef tuple c_new_shape(self, tuple shape):
        """The shape a view or reshape asks for, with at most one -1 inferred."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        require_ints(shape, "shape")
        if not all(-1 <= size < ELEMENTS_LIMIT for size in shape):
            raise ValueError(f"shape must be ints >= 0 (and at most one -1), got "
                             f"{errors.shown(shape)}")
        if shape.count(-1) > 1:
            raise ShapeError(f"only one dimension can be inferred: shape may contain at most one "
                             f"-1, got {errors.shown(shape)}")
        if -1 in shape:  # math.prod: a product of big sizes must not overflow a C int64
            known = math.prod(size for size in shape if size != -1)
            if known == 0 or self.element_count % known:
                raise ShapeError(f"shape {errors.shown(shape)} is invalid for input of size "
                                 f"{self.element_count} elements")
            shape = tuple(self.element_count // known if size == -1 else size for size in shape)
        if math.prod(shape) != self.element_count:
            raise ShapeError(f"shape {errors.shown(shape)} is invalid for input of size "
                             f"{self.element_count} elements")
        return shape

    cdef object c_view(self, tuple shape):
        shape = self.c_new_shape(shape)
        if not is_contiguous(self):
            raise ShapeError("view size is not compatible with input tensor's size and stride "
                             "(at least one dimension spans across two contiguous subspaces). "
                             "Use .reshape(...) instead: view() needs a contiguous tensor; "
                             "reshape() copies "
                             "when it must")
        view = strided_view(self, shape, contiguous_strides(shape))
        return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view

    cdef object c_reshape(self, tuple shape):
        if is_contiguous(self):
            return self.c_view(shape)
        return (<TensorCore>self.c_clone()).c_view(shape)

    cdef object c_transpose(self, object dim0, object dim1):
        for argument, dim in (("dim0", dim0), ("dim1", dim1)):  # both types before any range
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise TypeError(f"{argument} must be an int, got {type(dim).__name__} "
                                f"({errors.shown(dim)})")
        cdef int first = self.c_dim(dim0, "dim0"), second = self.c_dim(dim1, "dim1")
        if len(self.sizes) == 0:  # dims 0 and -1 of a 0-d tensor name the tensor itself
            view = strided_view(self, self.sizes, self.element_strides)
            return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view
        sizes, strides = list(self.sizes), list(self.element_strides)
        sizes[first], sizes[second] = sizes[second], sizes[first]
        strides[first], strides[second] = strides[second], strides[first]
        view = strided_view(self, tuple(sizes), tuple(strides))
        if tracked(self):
            return recorded(view, ops.OP_TRANSPOSE, (self,), (), (first, second))
        return view

    cdef object c_t(self):
        if len(self.sizes) > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                             f"{len(self.sizes)}D (shape {self.sizes}); use transpose()")
        if len(self.sizes) < 2:  # a view of the tensor as it is
            view = strided_view(self, self.sizes, self.element_strides)
            return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view
        return self.c_transpose(0, 1)

    cdef object c_unsqueeze(self, object dim):
        cdef int ndim = len(self.sizes)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"dim must be an int, got {type(dim).__name__} ({errors.shown(dim)})")
        if not -ndim - 1 <= dim <= ndim:
            raise IndexError(f"dim: Dimension out of range (expected to be in range of "
                             f"[{-ndim - 1}, {ndim}], but got {errors.shown(dim)})")
        cdef int at = dim + ndim + 1 if dim < 0 else dim
        # The new dimension's stride is never used to move (its size is 1); PyTorch's choice.
        stride = self.element_strides[at] * self.sizes[at] if at < ndim else 1
        view = strided_view(self, self.sizes[:at] + (1,) + self.sizes[at:],
                            self.element_strides[:at] + (stride,) + self.element_strides[at:])
        return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view

    cdef object c_expand(self, tuple size):
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        require_ints(size, "expand: sizes")
        cdef Py_ssize_t lead = len(size) - len(self.sizes), dim
        if lead < 0:
            raise ShapeError(f"expand: the number of sizes provided ({len(size)}) must be greater "
                             f"or equal to the number of dimensions in the tensor "
                             f"({len(self.sizes)})")
        sizes, strides = [], []
        for dim, target in enumerate(size):
            if dim < lead:
                if target < 0:
                    raise ShapeError(f"expand: The expanded size of the tensor ({target}) isn't "
                                     f"allowed in a leading, non-existing dimension {dim}")
                sizes.append(target)
                strides.append(0)
                continue
            existing, stride = self.sizes[dim - lead], self.element_strides[dim - lead]
            if target == -1 or target == existing:
                sizes.append(existing)
                strides.append(stride)
            elif existing == 1 and target >= 0:
                sizes.append(target)
                strides.append(0)  # every index reads the one element
            else:
                raise ShapeError(f"expand: The expanded size of the tensor ({target}) must match "
                                 f"the existing size ({existing}) at non-singleton dimension "
                                 f"{dim}.  Target sizes: {list(size)}.  Tensor sizes: "
                                 f"{list(self.sizes)}")
        if math.prod(sizes) >= ELEMENTS_LIMIT:
            raise ValueError(f"expand: sizes {errors.shown(size)} have 2**63 elements or more")
        view = strided_view(self, tuple(sizes), tuple(strides))
        return recorded(view, ops.OP_EXPAND, (self,)) if tracked(self) else view

    cdef object c_getitem(self, object key):
        if self.device_index == CPU:
            _check_index(key)
            # The trailing Ellipsis keeps integer indexing a 0-d view instead of a numpy scalar.
            view = wrap_cpu(self.array[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)],
                            self.dtype_object)
            return self.c_indexed(view, key)
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) > len(self.sizes):
            raise IndexError(f"too many indices ({len(key)}) for a tensor of "
                             f"{len(self.sizes)} dimensions")
        sizes, strides = [], []
        cdef int64_t offset = 0
        for dim, index in enumerate(key):
            size, stride = self.sizes[dim], self.element_strides[dim]
            if isinstance(index, slice):
                start, stop, step = index.indices(size)
                if step <= 0:
                    raise ValueError(f"slice step must be greater than zero, got {step}")
                sizes.append(len(range(start, stop, step)))
                # A dimension of one element (or none) never moves by its stride: keeping
                # the tensor's own keeps a huge step from making one beyond 2**63.
                strides.append(stride * step if sizes[-1] > 1 else stride)
                offset += start * stride
            elif isinstance(index, int) and not isinstance(index, bool):
                if not -size <= index < size:
                    raise IndexError(f"index {index} is out of range for dimension {dim} of "
                                     f"size {size}")
                offset += (index + size if index < 0 else index) * stride
            else:
                raise TypeError(f"indices must be ints or slices, got {type(index).__name__}")
        sizes += self.sizes[len(key):]
        strides += self.element_strides[len(key):]
        view = wrap_device_memory(self.data + offset * self.dtype_object.itemsize, tuple(sizes),
                                  tuple(strides), self.dtype_object, self.device_index,
                                  self.owner)
        return self.c_indexed(view, key)

    cdef object c_indexed(self, TensorCore view, object key):
        """view, selected from this tensor by key, as a view: sharing the version counter, and
        on the tape when this tensor is."""
        view.version = self.version
        view.is_view = True
        return recorded(view, ops.OP_GETITEM, (self,), (), key) if tracked(self) else view

    cdef object c_setitem(self, object key, object value):
        cdef unsigned long long capture_id
        if tracked(self, value) and self.dtype_object.floating:
            # Recorded (PyTorch's CopySlices, for a tensor that is not a view): a copy with the
            # selection assigned, which this tensor takes in, values and history.
            self.c_check_rebase("__setitem__")
            if isinstance(value, TensorCore) and (<TensorCore>value).device_index == CPU and \
                    self.device_index != CPU and (<TensorCore>value).element_count:
                # Before the copy of this tensor is made (Note [Host copies during capture]).
                host_copy_capturing(value, self.device_index, self.dtype_object, "value",
                                    current_stream(self.device_index), &capture_id)
            previous = grad_enabled()
            set_grad_enabled(False)
            try:
                result = <TensorCore>self.c_clone()
                result.c_setitem(key, value)
            finally:
                set_grad_enabled(previous)
            self.c_rebased(recorded(result, ops.OP_SETITEM, (self, value), (), key))
            return None
        target = <TensorCore>self.c_getitem(key)
        if isinstance(value, TensorCore):
            copy_named(target, value, False, "value")
        else:
            target.c_fill_(value)
        return None

    # -- arithmetic -----------------------------------------------------------------------------

    cdef object c_binary(self, object other, int op, bint reverse, bint inplace, str name):
        if self.dtype_object.name == "bool" and (
                not isinstance(other, TensorCore) or
                (<TensorCore>other).dtype_object is self.dtype_object):
            return self.c_bool_binary(other, op, reverse, inplace, name)
        cdef DtypeCore result_dtype = arithmetic_dtype(self, other, op, inplace, name)
        if op == ops.OP_POW and not reverse and not result_dtype.floating and \
                isinstance(other, int) and other < 0:
            raise IntegerPowerError(f"{name}: Integers to negative integer powers are not "
                                    f"allowed. (got exponent {other} for a "
                                    f"{result_dtype.name} tensor)")
        if inplace and tracked(self, other):  # recorded: the result of a copy, copied in
            self.c_check_rebase(name)
            return self.c_rebased((<TensorCore>self.c_clone()).c_binary(other, op, reverse,
                                                                        False, name))
        if inplace and self.device_index != CPU:
            self.c_mark_modified(name, other)
        left = self if result_dtype is self.dtype_object else self.c_to(None, result_dtype,
                                                                          False, False)
        right = other
        if isinstance(other, TensorCore) and result_dtype is not self.dtype_object:
            right = (<TensorCore>other).c_to(None, result_dtype, False, False)
        if self.device_index == CPU:
            # In the kernels' types, so that integers wrap like CUDA's and like PyTorch's (numpy
            # refuses a Python int outside the array's own dtype).
            a, b = opmath(left), opmath(right) if isinstance(right, TensorCore) else right
            values = cpu_binary(op, b, a) if reverse else cpu_binary(op, a, b)
            if inplace:  # after the values: an integer division by zero is refused unchanged
                self.c_mark_modified(name, other)
            return self.c_binary_result(self.c_cpu_result(values, result_dtype, inplace), other,
                                        op, reverse, inplace)
        cdef cudaStream_t stream = current_stream(self.device_index)
        cdef TensorCore first, second
        if isinstance(right, TensorCore):
            first, second = (right, left) if reverse else (left, right)
            sizes = broadcast_shape(first.sizes, second.sizes, name)  # checked above
            output = self if inplace and is_contiguous(self) else \
                new_empty(sizes, result_dtype, self.device_index)
            if reads_directly(first, sizes) and reads_directly(second, sizes):  # the common case
                device_ops.binary(self.device_index, result_dtype, first.data, second.data,
                                  (<TensorCore>output).data, (<TensorCore>output).element_count,
                                  op, stream)
            else:
                device_ops.binary_strided(self.device_index, result_dtype, first.data,
                                          broadcast_strides(first, sizes), second.data,
                                          broadcast_strides(second, sizes),
                                          (<TensorCore>output).data, sizes, op, stream)
        else:
            left = contiguous_on_device(left)
            output = self if inplace and is_contiguous(self) else \
                new_empty(self.sizes, result_dtype, self.device_index)
            device_ops.binary_scalar(self.device_index, result_dtype, (<TensorCore>left).data,
                                     right, (<TensorCore>output).data, self.element_count, op,
                                     reverse, stream)
        if inplace and output is not self:
            copy_on_device(self, output)
            return self
        return self.c_binary_result(output, other, op, reverse, inplace)

    cdef object c_bool_binary(self, object other, int op, bint reverse, bint inplace, str name):
        """self (op) other for a bool tensor and a bool tensor or a Python scalar, by PyTorch's
        type promotion: bool with bool stays bool for + and * (or, and), an int scalar makes
        int64, a float scalar or true division float32; subtraction, rounded division and
        bool ** bool tensor are refused as in PyTorch. Computed in int64 (or float32), so every
        kernel it needs exists on both devices."""
        check_operand(self, other, inplace, name, "the other operand", False)
        if op == ops.OP_SUB:  # NotImplementedError since PyTorch 2.14, RuntimeError before
            raise BoolNotImplementedError(
                f"{name}: Subtraction, the `-` operator, with a bool tensor is not supported. If "
                "you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")
        boolean = isinstance(other, (bool, TensorCore))  # the other operand is bool too
        if op == ops.OP_DIV_TRUNC or op == ops.OP_DIV_FLOOR or (
                op == ops.OP_POW and isinstance(other, TensorCore)):
            raise BoolNotImplementedError(f"{name}: not implemented for 'Bool' tensors (as in "
                                          "PyTorch); convert with .to(tensorplay.int64) first")
        if op == ops.OP_DIV or isinstance(other, float):
            compute = dtypes.named_dtype("float32")
        else:
            compute = dtypes.named_dtype("int64")
        result_dtype = self.dtype_object if boolean and compute.name == "int64" and \
            op != ops.OP_POW else compute
        if inplace and result_dtype is not self.dtype_object:
            raise DtypeError(f"{name}: result type {result_dtype.name} can't be cast to the "
                             "desired output type bool")
        left = <TensorCore>self.c_to(None, compute, False, False)
        right = (<TensorCore>other).c_to(None, compute, False, False) \
            if isinstance(other, TensorCore) else (int(other) if isinstance(other, bool)
                                                   else other)
        result = <TensorCore>left.c_binary(right, op, reverse, False, name)
        if result_dtype is not compute:
            result = <TensorCore>result.c_to(None, result_dtype, False, False)
        if inplace:
            self.c_mark_modified(name, other)
            copy_into(self, result, False)
            return self
        return result

    cdef object c_binary_result(self, object output, object other, int op, bint reverse,
                                bint inplace):
        """output of self (op) other, on the tape when the operands are."""
        if inplace or not tracked(self, other) or not (<TensorCore>output).dtype_object.floating:
            return output
        # What PyTorch saves, so that the same in-place changes are refused (Note [Version
        # counters]): for mul, each operand only when the other one needs its gradient; for
        # div, the divisor, and the dividend when the divisor needs a gradient; for pow, both
        # operands and, with a tensor exponent, the output (a detached alias).
        other_grad = isinstance(other, TensorCore) and (<TensorCore>other).grad_required
        if op == ops.OP_MUL:
            saved = (self if other_grad else None, other if self.grad_required else None)
        elif op == ops.OP_DIV:
            saved = (self if other_grad or reverse else None, other)
        elif op == ops.OP_POW:
            saved = (self, other) if not isinstance(other, TensorCore) and not reverse \
                else (self, other, (<TensorCore>output).c_detach())
        else:
            saved = ()
        return recorded(output, op, (self, other), saved, reverse)

    cdef object c_add(self, object other):
        return self.c_binary(other, ops.OP_ADD, False, False, "add")

    cdef object c_radd(self, object other):
        return self.c_binary(other, ops.OP_ADD, True, False, "add")

    cdef object c_sub(self, object other):
        return self.c_binary(other, ops.OP_SUB, False, False, "sub")

    cdef object c_rsub(self, object other):
        return self.c_binary(other, ops.OP_SUB, True, False, "sub")

    cdef object c_mul(self, object other):
        return self.c_binary(other, ops.OP_MUL, False, False, "mul")

    cdef object c_rmul(self, object other):
        return self.c_binary(other, ops.OP_MUL, True, False, "mul")

    cdef object c_truediv(self, object other):
        return self.c_binary(other, ops.OP_DIV, False, False, "div")

    cdef object c_rtruediv(self, object other):
        return self.c_binary(other, ops.OP_DIV, True, False, "div")

    cdef object c_pow(self, object exponent):
        # Checked first under the name pow() gives it; the operator's is other.
        arithmetic_dtype(self, exponent, ops.OP_POW, False, "pow", "exponent")
        return self.c_binary(exponent, ops.OP_POW, False, False, "pow")

    cdef object c_pow_operator(self, object other):
        return self.c_binary(other, ops.OP_POW, False, False, "pow")

    cdef object c_rpow(self, object base):
        return self.c_binary(base, ops.OP_POW, True, False, "pow")

    cdef object c_iadd(self, object other):
        return self.c_binary(other, ops.OP_ADD, False, True, "add_")

    cdef object c_isub(self, object other):
        return self.c_binary(other, ops.OP_SUB, False, True, "sub_")

    cdef object c_imul(self, object other):
        return self.c_binary(other, ops.OP_MUL, False, True, "mul_")

    cdef object c_itruediv(self, object other):
        return self.c_binary(other, ops.OP_DIV, False, True, "div_")

    cdef object c_compare(self, object other, int op):
        name = ops.op_name(op)
        sizes = self.sizes
        if isinstance(other, TensorCore):
            check_device_and_dtype(self, other, name)
            sizes = broadcast_shape(self.sizes, (<TensorCore>other).sizes, name)
        elif is_scalar(other):
            scalar_operand_arg(other, name)
        elif not is_scalar(other):
            raise TypeError(f"{name}: the other operand must be a tensor or a Python "
                            f"scalar, got {type(other).__name__}")
        boolean = dtypes.named_dtype("bool")
        if self.device_index == CPU:
            b = computable(other) if isinstance(other, TensorCore) else other
            values = getattr(np(), ops.cpu_name(op))(computable(self), b)
            return wrap_cpu(np().asarray(values, order="C"),
                             boolean)
        output = new_empty(sizes, boolean, self.device_index)
        cdef cudaStream_t stream = current_stream(self.device_index)
        cdef TensorCore right
        if isinstance(other, TensorCore):
            right = other
            if reads_directly(self, sizes) and reads_directly(right, sizes):
                device_ops.compare(self.device_index, self.dtype_object, self.data, right.data,
                                   (<TensorCore>output).data, self.element_count, op, stream)
            else:
                device_ops.compare_strided(self.device_index, self.dtype_object, self.data,
                                           broadcast_strides(self, sizes), right.data,
                                           broadcast_strides(right, sizes),
                                           (<TensorCore>output).data, sizes, op, stream)
        else:
            left = contiguous_on_device(self)
            device_ops.compare_scalar(self.device_index, self.dtype_object,
                                      (<TensorCore>left).data, other, (<TensorCore>output).data,
                                      self.element_count, op, stream)
        return output

    cdef object c_eq(self, object other):
        return self.c_compare(other, ops.OP_EQ)

    cdef object c_ne(self, object other):
        return self.c_compare(other, ops.OP_NE)

    cdef object c_lt(self, object other):
        return self.c_compare(other, ops.OP_LT)

    cdef object c_le(self, object other):
        return self.c_compare(other, ops.OP_LE)

    cdef object c_gt(self, object other):
        return self.c_compare(other, ops.OP_GT)

    cdef object c_ge(self, object other):
        return self.c_compare(other, ops.OP_GE)

    cdef object c_unary(self, int op):
        name = ops.op_name(op)
        if ops.dtype_rule(op) == ops.DTYPE_FLOATING and not self.dtype_object.floating:
            # Integers and bools go to float32 first, as PyTorch promotes them.
            return (<TensorCore>self.c_to(None, dtypes.named_dtype("float32"), False,
                                          False)).c_unary(op)
        if self.dtype_object.name == "bool":  # PyTorch's error types: see BoolNotImplementedError
            raise BoolNotImplementedError(f"{name}() is not supported on bool tensors" + (
                ": Negation, the `-` operator, on a bool tensor is not supported. If you are "
                "trying to invert a mask, use the `~` or `logical_not()` operator instead."
                if op == ops.OP_NEG else ""))
        if self.device_index == CPU:
            values = computable(self)
            values = np().maximum(values, 0).astype(values.dtype) if op == ops.OP_RELU \
                else getattr(np(), ops.cpu_name(op))(values)
            output = wrap_cpu(np().asarray(stored(values, self.dtype_object), order="C"),
                              self.dtype_object)
        else:
            source = contiguous_on_device(self)
            output = new_empty(self.sizes, self.dtype_object, self.device_index)
            device_ops.unary(self.device_index, self.dtype_object, (<TensorCore>source).data,
                             (<TensorCore>output).data, self.element_count, op,
                             current_stream(self.device_index))
        if tracked(self) and self.dtype_object.floating:
            # What PyTorch saves: nothing for neg, the output (a detached alias, sharing its
            # version counter) where the gradient is a function of it, else the input.
            saved = () if op == ops.OP_NEG else (
                ((<TensorCore>output).c_detach(),) if ops.saves_output(op) else (self,))
            return recorded(output, op, (self,), saved)
        return output

    cdef object c_neg(self):
        return self.c_unary(ops.OP_NEG)

    cdef object c_abs(self):
        return self.c_unary(ops.OP_ABS)

    cdef object c_relu(self):
        return self.c_unary(ops.OP_RELU)

    cdef object c_sin(self):
        return self.c_unary(ops.OP_SIN)

    cdef object c_cos(self):
        return self.c_unary(ops.OP_COS)

    cdef object c_exp(self):
        return self.c_unary(ops.OP_EXP)

    cdef object c_sqrt(self):
        return self.c_unary(ops.OP_SQRT)

    cdef object c_log(self):
        return self.c_unary(ops.OP_LOG)

    # -- PyTorch's named arithmetic and clamp, under the operators' rules (c_binary) ------------

    cdef object c_add_scaled(self, object other, object alpha):
        return self.c_scaled(other, alpha, False, False)

    cdef object c_sub_scaled(self, object other, object alpha):
        return self.c_scaled(other, alpha, True, False)

    cdef object c_add_scaled_(self, object other, object alpha):
        return self.c_scaled(other, alpha, False, True)

    cdef object c_sub_scaled_(self, object other, object alpha):
        return self.c_scaled(other, alpha, True, True)

    cdef object c_scaled(self, object other, object alpha, bint subtract, bint inplace):
        """self + alpha * other, or self - alpha * other, as torch.add and torch.sub."""
        cdef TensorCore output
        cdef int op = ops.OP_SUB if subtract else ops.OP_ADD
        name = ("sub" if subtract else "add") + ("_" if inplace else "")
        if self.dtype_object.name == "bool" and alpha == 1 and not isinstance(alpha, bool):
            # Bool arithmetic's own promotion (c_bool_binary); another alpha is refused below.
            return self.c_binary(other, op, False, inplace, name)
        cdef DtypeCore result_dtype = arithmetic_dtype(self, other, op, inplace, name)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise TypeError(f"{name}: alpha must be an int or float, got {alpha!r:.200}")
        scalar_operand_arg(alpha, name, "alpha")
        if isinstance(alpha, float) and not result_dtype.floating:
            raise TypeError(f"{name}: alpha must be an int for a {result_dtype.name} result, got "
                            f"{alpha!r} (a float alpha needs floating-point operands, as in "
                            "PyTorch)")
        if inplace and tracked(self, other):  # recorded: the result of a copy, copied in
            self.c_check_rebase(name)
            return self.c_rebased((<TensorCore>self.c_clone()).c_scaled(other, alpha, subtract,
                                                                        False))
        # The paths through c_binary count an in-place change there; the others below.
        if not isinstance(other, TensorCore):
            return self.c_binary(other * alpha, op, False, inplace, name)
        if alpha == 1:
            return self.c_binary(other, op, False, inplace, name)
        scale = -alpha if subtract else alpha
        if self.device_index == CPU:
            if inplace:
                self.c_mark_modified(name, other)
            result = self.c_cpu_result(opmath(self) + scale * opmath(other), result_dtype, inplace)
            return self.c_scaled_result(result, other, scale, inplace)
        if (<TensorCore>other).sizes != self.sizes:  # broadcast: the scaled copy, then the sum
            return self.c_binary((<TensorCore>other).c_binary(scale, ops.OP_MUL, False,
                                                              False, name),
                                 ops.OP_ADD, False, inplace, name)
        if inplace:
            self.c_mark_modified(name, other)
        left, right = contiguous_on_device(self), contiguous_on_device(other)
        output = self.c_output(result_dtype, inplace)
        device_ops.add_scaled(self.device_index, result_dtype, (<TensorCore>left).data,
                              (<TensorCore>right).data, scale, output.data, self.element_count,
                              current_stream(self.device_index))
        return self.c_scaled_result(self.c_finish(output, inplace), other, scale, inplace)

    cdef object c_scaled_result(self, object output, object other, object scale, bint inplace):
        """output of self + scale * other, on the tape when the operands are."""
        if inplace or not tracked(self, other) or not (<TensorCore>output).dtype_object.floating:
            return output
        return recorded(output, ops.OP_ADD_SCALED, (self, other), (), scale)

    cdef object c_div(self, object other, object rounding_mode):
        return self.c_binary(other, division_op(rounding_mode, "div"), False, False, "div")

    cdef object c_div_(self, object other, object rounding_mode):
        return self.c_binary(other, division_op(rounding_mode, "div_"), False, True, "div_")

    cdef object c_clamp(self, object min, object max):
        return self.c_clamp_bounds(min, max, False)

    cdef object c_clamp_(self, object min, object max):
        return self.c_clamp_bounds(min, max, True)

    cdef object c_clamp_bounds(self, object low, object high, bint inplace):
        """min(max(self, low), high) as torch.clamp; a bound is a tensor, a scalar or None."""
        cdef TensorCore output
        name = "clamp_" if inplace else "clamp"
        if low is None and high is None:
            raise ValueError(f"{name}: at least one of min and max must not be None")
        if self.dtype_object.name == "bool":
            return self.c_clamp_bool(low, high, inplace, name)
        cdef DtypeCore result_dtype = self.dtype_object
        sizes = self.sizes
        for argument, bound in (("min", low), ("max", high)):
            if isinstance(bound, TensorCore):
                check_device_and_dtype(self, bound, f"{name}: {argument}")
                sizes = broadcast_shape(sizes, (<TensorCore>bound).sizes, name)
            elif bound is not None and not is_scalar(bound):
                raise TypeError(f"{name}: {argument} must be a tensor, a Python scalar or None, "
                                f"got {type(bound).__name__}")
            else:
                if bound is not None:
                    scalar_operand_arg(bound, name, argument)
                result_dtype = float32_if_float(result_dtype, bound)
        if inplace:
            check_in_place(self, result_dtype, name)
            if sizes != self.sizes:
                raise ShapeError(f"{name}: output with shape {list(self.sizes)} doesn't match "
                                 f"the broadcast shape {list(sizes)}")
            if tracked(self, low, high):  # recorded: the result of a copy, copied in
                self.c_check_rebase(name)
                return self.c_rebased((<TensorCore>self.c_clone()).c_clamp_bounds(low, high,
                                                                                  False))
            self.c_mark_modified(name, low if isinstance(low, TensorCore) else high)
        source = self.c_to(None, result_dtype, False, False)
        bounds = [(<TensorCore>bound).c_to(None, result_dtype, False, False)
                  if isinstance(bound, TensorCore) else bound for bound in (low, high)]
        if self.device_index == CPU:
            values = opmath(source)
            if low is not None:
                values = np().maximum(values, opmath(bounds[0]) if isinstance(low, TensorCore)
                                      else low)
            if high is not None:
                values = np().minimum(values, opmath(bounds[1]) if isinstance(high, TensorCore)
                                      else high)
            return self.c_clamp_result(self.c_cpu_result(values, result_dtype, inplace), low,
                                       high, inplace)
        tensor_bounds = [bound for bound in bounds if isinstance(bound, TensorCore)]
        if sizes == self.sizes and all(reads_directly(bound, sizes) for bound in tensor_bounds):
            source = contiguous_on_device(source)
            output = self.c_output(result_dtype, inplace)
            device_ops.clamp(self.device_index, result_dtype, (<TensorCore>source).data,
                             (<TensorCore>bounds[0]).data if isinstance(low, TensorCore) else 0,
                             (<TensorCore>bounds[1]).data if isinstance(high, TensorCore) else 0,
                             None if isinstance(low, TensorCore) else low,
                             None if isinstance(high, TensorCore) else high,
                             output.data, self.element_count, current_stream(self.device_index))
        else:  # broadcast or strided operands, read in place
            output = self if inplace and is_contiguous(self) else \
                new_empty(sizes, result_dtype, self.device_index)
            no_strides = (0,) * len(sizes)
            device_ops.clamp_strided(
                self.device_index, result_dtype, (<TensorCore>source).data,
                broadcast_strides(source, sizes),
                (<TensorCore>bounds[0]).data if isinstance(low, TensorCore) else 0,
                broadcast_strides(bounds[0], sizes) if isinstance(low, TensorCore) else no_strides,
                (<TensorCore>bounds[1]).data if isinstance(high, TensorCore) else 0,
                broadcast_strides(bounds[1], sizes) if isinstance(high, TensorCore)
                else no_strides, None if isinstance(low, TensorCore) else low,
                None if isinstance(high, TensorCore) else high, output.data, sizes,
                current_stream(self.device_index))
        return self.c_clamp_result(self.c_finish(output, inplace), low, high, inplace)

    cdef object c_clamp_bool(self, object low, object high, bint inplace, str name):
        """clamp of a bool tensor by PyTorch's promotion: a float bound gives float32, an int
        bound int64; one bool tensor bound keeps bool; bool scalar bounds alone, or two bool
        tensor bounds, are refused (PyTorch has no such kernels for Bool). Computed in int64 or
        float32."""
        bounds = [bound for bound in (low, high) if bound is not None]
        for argument, bound in (("min", low), ("max", high)):
            if isinstance(bound, TensorCore):
                check_device_and_dtype(self, bound, f"{name}: {argument}")
            elif bound is not None and not is_scalar(bound):
                raise TypeError(f"{name}: {argument} must be a tensor, a Python scalar or None, "
                                f"got {type(bound).__name__}")
        if any(isinstance(bound, float) for bound in bounds):
            result_dtype = dtypes.named_dtype("float32")
        elif any(isinstance(bound, int) and not isinstance(bound, bool) for bound in bounds):
            result_dtype = dtypes.named_dtype("int64")
        elif all(isinstance(bound, TensorCore) for bound in bounds) and len(bounds) == 1:
            result_dtype = self.dtype_object  # PyTorch's clamp_min / clamp_max take bool
        else:
            raise BoolNotImplementedError(f"{name}: clamp with bool scalar bounds, or two bool "
                                          "tensor bounds, is not implemented for 'Bool' tensors "
                                          "(as in PyTorch)")
        if inplace and result_dtype is not self.dtype_object:
            raise DtypeError(f"{name}: result type {result_dtype.name} can't be cast to the "
                             "desired output type bool")
        compute = dtypes.named_dtype("int64") if result_dtype is self.dtype_object \
            else result_dtype
        converted = [(<TensorCore>bound).c_to(None, compute, False, False)
                     if isinstance(bound, TensorCore) else
                     (int(bound) if isinstance(bound, bool) else bound) for bound in (low, high)]
        result = (<TensorCore>self.c_to(None, compute, False, False)).c_clamp_bounds(
            converted[0], converted[1], False)
        if result_dtype is not compute:
            result = (<TensorCore>result).c_to(None, result_dtype, False, False)
        if inplace:
            self.c_mark_modified(name)
            copy_into(self, result, False)
            return self
        return result

    cdef object c_clamp_result(self, object output, object low, object high, bint inplace):
        """output of clamp(self, low, high), on the tape when the operands are."""
        if inplace or not tracked(self, low, high) or \
                not (<TensorCore>output).dtype_object.floating:
            return output
        return recorded(output, ops.OP_CLAMP, (self, low, high), (self, low, high), None)

    cdef object c_cpu_result(self, object values, DtypeCore dtype, bint inplace):
        """numpy values computed from this CPU tensor, stored as dtype: into self in place, or
        as a new tensor."""
        if inplace:
            self.array[...] = stored(values, dtype)
            return self
        return wrap_cpu(np().asarray(stored(values, dtype), order="C"), dtype)

    cdef TensorCore c_output(self, DtypeCore dtype, bint inplace):
        """Where a CUDA result is written: self in place when contiguous, else a new tensor."""
        if inplace and is_contiguous(self):
            return self
        return new_empty(self.sizes, dtype, self.device_index)

    cdef object c_finish(self, TensorCore output, bint inplace):
        """The result of an operation written to output (see c_output)."""
        if inplace and output is not self:
            copy_on_device(self, output)
            return self
        return output

    # -- reductions -----------------------------------------------------------------------------

    cdef object c_reduce(self, int op, bint mean, str name):
        cdef DtypeCore result_dtype = reduced_dtype(self.dtype_object,
                                                    ops.OP_MEAN if mean else op)
        if op != ops.OP_SUM and self.element_count == 0:
            raise ShapeError(f"{name}(): Expected reduction dim to be specified for "
                             f"input.numel() == 0. {name}() of an empty tensor has no identity; "
                             "it needs at least one element")
        if self.device_index == CPU:
            values = computable(self)
            if op == ops.OP_SUM:
                result = values.mean() if mean else values.sum(
                    dtype=np().int64 if not self.dtype_object.floating else values.dtype)
            else:
                result = values.max() if op == ops.OP_MAX else values.min()
            return wrap_cpu(np().asarray(stored(np().asarray(result), result_dtype)),
                             result_dtype)
        source = contiguous_on_device(self)
        output = new_empty((), result_dtype, self.device_index)
        device_ops.reduce(self.device_index, self.dtype_object, (<TensorCore>source).data,
                          self.element_count, op, result_dtype, (<TensorCore>output).data,
                          float(self.element_count) if mean else 1.0,
                          current_stream(self.device_index))
        return output

    cdef object c_sum(self, object dim, bint keepdim):
        result = self.c_reduce_dims(dim, keepdim, False, "sum")
        if tracked(self) and self.dtype_object.floating:
            return recorded(result, ops.OP_SUM, (self,), (),
                            (self.c_reduced_dims(dim, "sum"), keepdim))
        return result

    cdef object c_mean(self, object dim, bint keepdim):
        result = self.c_reduce_dims(dim, keepdim, True, "mean")
        if tracked(self):
            return recorded(result, ops.OP_MEAN, (self,), (),
                            (self.c_reduced_dims(dim, "mean"), keepdim))
        return result

    cdef tuple c_reduced_dims(self, object dim, str name):
        """The dimensions sum() or mean() reduce, sorted: dim as an int or a tuple or list of
        ints (negative ones count from the end); None or an empty sequence for all."""
        if dim is None:
            return tuple(range(len(self.sizes)))
        dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
        if any(isinstance(value, bool) or not isinstance(value, int) for value in dims):
            raise TypeError(f"{name}: dim must be an int or a tuple or list of ints, got "
                            f"{errors.shown(dim)}")
        normalised = [self.c_dim(value) for value in dims]
        for value, position in zip(dims, normalised):
            if normalised.count(position) > 1:
                raise ShapeError(f"{name}: dim {value} appears multiple times in the list of "
                                 f"dims {errors.shown(dims)}")
        if not normalised or not self.sizes:
            return tuple(range(len(self.sizes)))
        return tuple(sorted(normalised))

    cdef object c_reduce_dims(self, object dim, bint keepdim, bint mean, str name):
        """sum() or mean() over dim (see c_reduced_dims), keeping reduced dimensions as size 1
        when keepdim."""
        cdef tuple dims = self.c_reduced_dims(dim, name)
        cdef DtypeCore result_dtype = reduced_dtype(self.dtype_object,
                                                    ops.OP_MEAN if mean else ops.OP_SUM)
        shape = tuple(1 if d in dims else size for d, size in enumerate(self.sizes)) if keepdim \
            else tuple(size for d, size in enumerate(self.sizes) if d not in dims)
        if len(dims) == len(self.sizes):  # the whole tensor: the two-launch reduction
            whole = <TensorCore>self.c_reduce(ops.OP_SUM, mean, name)
            return reshaped(whole, shape)
        if self.device_index == CPU:
            values = computable(self)
            result = values.mean(axis=dims, keepdims=keepdim) if mean else values.sum(
                axis=dims, keepdims=keepdim,
                dtype=np().int64 if not self.dtype_object.floating else values.dtype)
            return wrap_cpu(np().asarray(stored(result, result_dtype), order="C"), result_dtype)
        output = new_empty(shape, result_dtype, self.device_index)
        kept = [d for d in range(len(self.sizes)) if d not in dims]
        reduced_count = math.prod(self.sizes[d] for d in dims)
        device_ops.reduce_dims(self.device_index, self.dtype_object, self.data,
                               tuple(self.sizes[d] for d in kept),
                               tuple(self.element_strides[d] for d in kept),
                               tuple(self.sizes[d] for d in dims),
                               tuple(self.element_strides[d] for d in dims), result_dtype,
                               (<TensorCore>output).data,
                               float(reduced_count) if mean else 1.0,
                               current_stream(self.device_index))
        return output

    cdef object c_max(self):
        result = self.c_reduce(ops.OP_MAX, False, "max")
        return recorded(result, ops.OP_MAX, (self,), (self,)) if tracked(self) else result

    cdef object c_min(self):
        result = self.c_reduce(ops.OP_MIN, False, "min")
        return recorded(result, ops.OP_MIN, (self,), (self,)) if tracked(self) else result

    cdef object c_matmul(self, object other):
        """The matrix product by PyTorch's rules for 1 to 3 dimensions: a 1-D first operand is
        a row and a 1-D second operand a column, that dimension removed from the result; 2-D
        operands multiply as matrices; a 3-D operand is a batch of matrices, and the batch
        broadcasts (a 1-D or 2-D operand, or a batch of one, multiplies every matrix)."""
        if not isinstance(other, TensorCore):
            raise TypeError(f"matmul: other must be a tensor, got {type(other).__name__}")
        cdef TensorCore right = other
        check_device(self, right, "matmul")
        if self.dtype_object is not right.dtype_object or \
                self.dtype_object.name not in ("float32", "float64"):
            raise TypeError(f"matmul supports float32 or float64 tensors of one dtype, got "
                            f"{self.dtype_object.name} and {right.dtype_object.name}")
        if not self.sizes or not right.sizes:
            raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are "
                             f"{len(self.sizes)}D and {len(right.sizes)}D")
        if not (1 <= len(self.sizes) <= 3 and 1 <= len(right.sizes) <= 3):
            raise ShapeError(f"matmul supports tensors of 1 to 3 dimensions, got shapes "
                             f"{self.sizes} and {right.sizes}")
        # Each operand as a batch of matrices: (batch, rows, columns) with strides.
        a_batch, m, k = (1, 1) + self.sizes[-1:] if len(self.sizes) == 1 else \
            ((1,) + self.sizes if len(self.sizes) == 2 else self.sizes)
        a_strides = (0, 0) + self.element_strides[-1:] if len(self.sizes) == 1 else \
            ((0,) + self.element_strides if len(self.sizes) == 2 else self.element_strides)
        b_batch, b_k, n = (1,) + right.sizes + (1,) if len(right.sizes) == 1 else \
            ((1,) + right.sizes if len(right.sizes) == 2 else right.sizes)
        b_strides = (0,) + right.element_strides + (0,) if len(right.sizes) == 1 else \
            ((0,) + right.element_strides if len(right.sizes) == 2 else right.element_strides)
        if k != b_k:
            raise ShapeError(f"matmul: shapes {self.sizes} and {right.sizes} cannot be "
                             f"multiplied ({k} != {b_k})")
        if a_batch != b_batch and a_batch != 1 and b_batch != 1:
            raise ShapeError(f"matmul: the batch sizes of shapes {self.sizes} and {right.sizes} "
                             f"do not broadcast ({a_batch} != {b_batch})")
        batch = max(a_batch, b_batch)
        shape = ((batch,) if len(self.sizes) == 3 or len(right.sizes) == 3 else ()) + \
            ((m,) if len(self.sizes) > 1 else ()) + ((n,) if len(right.sizes) > 1 else ())
        if self.device_index == CPU:
            product = np().matmul(self.array, right.array)
            output = wrap_cpu(np().asarray(product, order="C").reshape(shape), self.dtype_object)
        elif k == 0:
            output = (<TensorCore>new_empty(shape, self.dtype_object, self.device_index)).c_zero_()
        else:
            output = new_empty(shape, self.dtype_object, self.device_index)
            device_ops.matmul(self.device_index, self.dtype_object,
                              self.data, (a_strides[0] if a_batch > 1 else 0,) + a_strides[1:],
                              right.data, (b_strides[0] if b_batch > 1 else 0,) + b_strides[1:],
                              (<TensorCore>output).data, batch, m, n, k,
                              current_stream(self.device_index))
        if not tracked(self, right):
            return output
        # Each operand is saved only when the other needs its gradient, as PyTorch's.
        return recorded(output, ops.OP_MATMUL, (self, right),
                        (self if right.grad_required else None,
                         right if self.grad_required else None))

    cdef object c_rmatmul(self, object other):
        if isinstance(other, TensorCore):
            return (<TensorCore>other).c_matmul(self)
        raise TypeError(f"matmul: other must be a tensor, got {type(other).__name__}")

    # -- autograd (engine.pyx, Note [Tape]) --------------------------------------------------

    cdef bint c_requires_grad(self):
        return self.grad_required

    cdef object c_set_requires_grad(self, bint value):
        if value and not self.dtype_object.floating:
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require "
                               f"gradients (tensorplay has no complex dtypes); this one is "
                               f"{self.dtype_object.name}")
        if not value and self.grad_node is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables; to "
                               "use a computed tensor without gradients, call detach()")
        self.grad_required = value
        return None

    cdef object c_requires_grad_(self, bint requires_grad):
        if requires_grad and not self.dtype_object.floating:  # PyTorch's words for this call
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients; "
                               f"this one is {self.dtype_object.name}")
        self.c_set_requires_grad(requires_grad)
        return self

    cdef object c_grad(self):
        return self.grad_value

    cdef object c_set_grad(self, object value):
        if value is not None:
            if not isinstance(value, TensorCore):
                raise TypeError(f"grad must be a tensor or None, got {type(value).__name__}")
            if (<TensorCore>value).dtype_object is not self.dtype_object:
                raise DtypeError(f"grad: attempting to assign a gradient with dtype "
                                 f"'{(<TensorCore>value).dtype_object.name}' to a tensor with "
                                 f"grad_dtype '{self.dtype_object.name}' (assigned grad has "
                                 f"data of a different type)")
            check_device_and_dtype(self, value, "grad")
            if (<TensorCore>value).sizes != self.sizes:
                raise ShapeError(f"grad: attempting to assign a gradient of size "
                                 f"'{list((<TensorCore>value).sizes)}' to a tensor of size "
                                 f"'{list(self.sizes)}'. Please ensure that the gradient and "
                                 f"the tensor are the same size (assigned grad has data of a "
                                 f"different size)")
        self.grad_value = value
        return None

    cdef object c_grad_fn(self):
        return self.grad_node

    cdef bint c_is_leaf(self):
        return self.grad_node is None

    cdef object c_backward(self, object gradient, object retain_graph):
        global _autograd
        if _autograd is None:
            from tensorplay._runtime.autograd import engine as autograd
            _autograd = autograd
        _autograd.backward_from(self, gradient, retain_graph)
        return None

    cdef object c_detach(self):
        return strided_view(self, self.sizes, self.element_strides)

    cdef int c_check_rebase(self, str name) except -1:
        if self.grad_required and self.grad_node is None:
            raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
        if self.is_view:
            raise RuntimeError(f"{name}: an in-place operation on a view (from indexing, view(), "
                               "transpose(), expand(), detach()...) is not recorded for "
                               "autograd when it or an operand requires grad; use the "
                               "out-of-place operation, or run it under tensorplay.no_grad()")
        return 0

    cdef object c_rebased(self, object result):
        """self, with result's values copied in (a counted in-place change) and result's
        history taken over, as PyTorch's rebase_history for a tensor that is not a view."""
        cdef TensorCore value = result
        previous = grad_enabled()
        set_grad_enabled(False)
        try:
            self.c_copy_(value, False)
        finally:
            set_grad_enabled(previous)
        if value.grad_node is not None:
            self.grad_required = True
            self.grad_node = value.grad_node
            self.output_number = value.output_number
        return self

    # Note [Refused calls change nothing]
    # An in-place operation checks every argument (types, values against the dtype, shapes,
    # devices, autograd's rules, writable memory) before it counts the change with
    # c_mark_modified, so a call that raises leaves the tensor's version counter, and with it
    # the saved tensors of a later backward(), as they were; the CPU's integer division counts
    # it after the values are computed, since a zero divisor is found there. The random fills
    # (random_ops.pyx) check with c_check_in_place first and count once the numbers are
    # written. Errors of the device itself (a failed launch) may still come after the count.
    cdef int c_check_in_place(self, str name, object other=None) except -1:
        """Refuse an in-place change the tape cannot follow (of a tensor that requires grad,
        or from an operand that does, while grad mode is on) or that memory cannot take
        (read-only CPU memory: an expand()ed view, or a read-only numpy or DLPack producer's);
        changes nothing."""
        if tracked(self, other):
            if self.grad_required and self.grad_node is None:
                raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in "
                                   "an in-place operation.")
            raise RuntimeError(f"{name}: in-place operations are not recorded for autograd, and "
                               "an operand requires grad; use the out-of-place operation, or "
                               "run it under tensorplay.no_grad()")
        if self.device_index == CPU and self.element_count and not self.array.flags.writeable:
            raise ValueError(f"{name}: this tensor's memory is read-only (an expand()ed view "
                             "reads one element at several indices, and memory shared from a "
                             "read-only numpy array or DLPack producer cannot be written); "
                             "clone() it first")
        return 0

    cdef int c_mark_modified(self, str name, object other=None) except -1:
        """Count an in-place change (Note [Version counters] in engine.pyx) after
        c_check_in_place's refusals. Called once every argument is checked (Note [Refused
        calls change nothing]), so that a refused call leaves the counter as it was."""
        self.c_check_in_place(name, other)
        self.version.value += 1
        return 0

    cdef object c_record_stream(self, object stream):
        cdef _stream.StreamCore on = stream  # a Stream: the wrapper checked it
        if self.device_index == CPU:
            raise TypeError("record_stream() needs a CUDA tensor")
        if isinstance(self.owner, DeviceStorage):  # memory shared by others is theirs to track
            allocator.record_stream(<void*>(<DeviceStorage>self.owner).pointer, on.handle,
                                    on.device_index)
        return None

    # -- interop --------------------------------------------------------------------------------

    cdef object c_dlpack(self, object stream, object max_version, object dl_device, object copy):
        from tensorplay._runtime.tensor import interop
        return interop.to_dlpack(self, stream, max_version, dl_device, copy)

    cdef tuple c_dlpack_device(self):
        from tensorplay._runtime.tensor import interop
        return interop.dlpack_device(self)

    cdef dict c_cuda_array_interface(self):
        from tensorplay._runtime.tensor import interop
        return interop.cuda_array_interface(self)


cdef int _check_index(object key) except -1:
    for index in (key if isinstance(key, tuple) else (key,)):
        if isinstance(index, slice):
            if index.step is not None and index.step <= 0:
                raise ValueError(f"slice step must be greater than zero, got {index.step}")
        elif isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"indices must be ints or slices, got {type(index).__name__}")
    return 0


# --------------------------------------------------------------------------------------------
# Factories (api.yaml: tensorplay)


cdef object empty(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    sizes = size_arg(size, "size")
    cdef DtypeCore chosen = dtype if isinstance(dtype, DtypeCore) else dtype_arg(
        dtype, dtypes.named_dtype("float32"), "dtype")  # the default only when needed
    return requiring_grad(new_empty(sizes, chosen, device_arg(device, CPU)), requires_grad)


cdef object zeros(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    return requiring_grad((<TensorCore>empty(size, dtype, device, False)).c_fill_(0),
                          requires_grad)


cdef object ones(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    return requiring_grad((<TensorCore>empty(size, dtype, device, False)).c_fill_(1),
                          requires_grad)


cdef object full(object size, object fill_value, object dtype, object device,
                 bint requires_grad):
    if not is_scalar(fill_value):
        raise TypeError(f"fill_value must be a bool, int or float, got "
                        f"{type(fill_value).__name__}")
    shape = size_arg(tuple(size) if isinstance(size, (tuple, list)) else (size,), "size")
    cdef DtypeCore chosen = dtype_arg(dtype, dtype_of_scalar(fill_value), "dtype")
    dtypes.check_scalar(fill_value, chosen, "fill_value")  # before anything is allocated
    require_grad_arg(chosen, None, requires_grad)
    result = new_empty(shape, chosen, device_arg(device, CPU))
    return requiring_grad((<TensorCore>result).c_fill_(fill_value), requires_grad)


cdef object arange(object start, object end, object step, object dtype, object device,
                   bint requires_grad):
    for name, value in (("start", start), ("end", end), ("step", step)):
        if (isinstance(value, bool) or not isinstance(value, (int, float))) and not (
                name == "end" and value is None):
            raise TypeError(f"{name} must be an int or float, got {type(value).__name__} "
                            f"({errors.shown(value)})")
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"{name} {errors.shown(value)} does not fit in int64")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")
    if step == 0:
        raise ValueError("step must be non-zero")
    if end is None:
        start, end = 0, start
    integral = all(isinstance(v, int) for v in (start, end, step))
    default = dtypes.named_dtype("int64" if integral else "float32")
    # Every argument is checked before the values are made, which may take long.
    cdef DtypeCore chosen = dtype_arg(dtype, default, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    # The length, in Python numbers, before anything is made (numpy would try to allocate it).
    span = (end - start) / step
    if not math.isfinite(span) or span * 8 > BYTES_LIMIT:
        raise ValueError(f"arange({errors.shown(start)}, {errors.shown(end)}, "
                         f"{errors.shown(step)}) has about {span:.3g} elements, more than a "
                         "tensor can hold (2**63 - 1 bytes)")
    values = np().arange(start, end, step, dtype=np().int64 if integral else np().float64)
    return requiring_grad(from_numpy_values(values, chosen, target, "arange()'s values", True),
                          requires_grad)


cdef object from_numpy_values(object values, DtypeCore dtype, int device, str argument,
                              bint fresh=False):
    """A new tensor holding values converted to dtype, on device. It never shares memory with
    values: tensor() copies, as PyTorch's does (as_tensor() and from_numpy() are the ones that
    share). A CPU result takes a copy unless the conversion already made one, or values is
    fresh (made for this call from Python numbers, which nothing else holds)."""
    converted = np().asarray(stored(values, dtype), order="C")
    if device == CPU and not fresh and (converted is values or not converted.flags.owndata):
        converted = converted.copy()  # values' own memory, or a view of someone else's
    host = wrap_cpu(converted, dtype)
    return host if device == CPU else copied_to(host, device, dtype, False, False, argument)


cdef object tensor(object data, object dtype, object device, bint requires_grad):
    if isinstance(data, TensorCore):  # a copy that is a new leaf, as PyTorch's
        require_grad_arg(dtype, (<TensorCore>data).dtype_object, requires_grad)
        return requiring_grad(to_named((<TensorCore>data).c_detach(), device, dtype, False,
                                       True, "data"), requires_grad)
    if not isinstance(data, np().ndarray) and (hasattr(data, "__cuda_array_interface__") or
                                               hasattr(data, "__dlpack__")):
        # Another library's tensor (PyTorch's, CuPy's): viewed without a copy, then copied as
        # one of ours, keeping its dtype and, unless device says otherwise, its device.
        return tensor(as_tensor(data, None, None), dtype, device, requires_grad)
    if isinstance(data, np().ndarray):
        inferred = dtypes.dtype_from_numpy(data.dtype)
        values = data
    else:
        values = np().asarray(data)
        if _holds_wide_ints(values):
            # Python ints beyond int64 make numpy choose uint64, float64 or object: the dtype
            # comes from the kinds of the numbers given, and each wide int is checked against
            # it (Note [Values that fit]), as PyTorch refuses them.
            made = _tensor_of_wide_ints(data, values, dtype, device, requires_grad)
            if made is not None:
                return made
        if values.dtype == object or values.dtype.kind not in "biuf":
            raise TypeError(f"data must be numbers (nested lists of bool, int or float) or a "
                            f"numpy array, got {type(data).__name__}")
        # Python floats become float32 and ints int64, as in PyTorch.
        inferred = dtypes.named_dtype({"b": "bool", "f": "float32"}.get(values.dtype.kind,
                                                                        "int64"))
    if inferred is None and dtype is None:
        raise TypeError(f"numpy dtype {data.dtype} has no tensorplay equivalent")
    cdef DtypeCore chosen = dtype_arg(dtype, inferred, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    if values.dtype.kind in "biuf":
        dtypes.check_values(values, chosen, "data")
    # Nested lists and Python numbers become a new array; anything else numpy reads (a buffer,
    # an object with __array__) may be viewed in place, and is copied.
    fresh = type(data) is list or type(data) is tuple or is_scalar(data)
    return requiring_grad(from_numpy_values(values, chosen, target, "data", fresh),
                          requires_grad)


cdef bint _holds_wide_ints(object values):
    """Whether numpy's array of Python data may hold an int outside int64: numpy makes such
    data uint64 (ints up to 2**64 - 1), float64 (those mixed with negative ints) or object."""
    kind = values.dtype.kind
    if values.dtype == object or (kind == "u" and values.dtype.itemsize == 8):
        return True
    # float64 made of ints: only where a magnitude reaches 2**63 (rare for real floats).
    return kind == "f" and values.size and values.dtype.itemsize == 8 and \
        bool(np().nanmax(np().abs(np().where(np().isfinite(values), values, 0))) >= 2.0 ** 63)


cdef int _number_leaves(object data, list kinds, list wide, int depth) except -1:
    """Walk nested lists and tuples of Python numbers: the kinds found ("b", "i", "f") and the
    ints outside int64. Returns 1 when something else is found (left to numpy's reading)."""
    if isinstance(data, (list, tuple)):
        if depth > 64:
            return 1
        for item in data:
            if _number_leaves(item, kinds, wide, depth + 1):
                return 1
        return 0
    if isinstance(data, bool) or isinstance(data, np().bool_):
        kind = "b"
    elif isinstance(data, (int, np().integer)):
        kind = "i"
        if not -(1 << 63) <= data < (1 << 63):
            wide.append(int(data))
    elif isinstance(data, (float, np().floating)):
        kind = "f"
    else:
        return 1
    if kind not in kinds:
        kinds.append(kind)
    return 0


cdef object _tensor_of_wide_ints(object data, object values, object dtype, object device,
                                 bint requires_grad):
    """tensor(data) where data may hold Python ints beyond int64: the dtype of the kinds given
    (float32 if any float, else int64, else bool), then every wide int checked against it;
    None where data is not nested lists of Python numbers."""
    cdef list kinds = [], wide = []
    if _number_leaves(data, kinds, wide, 0):
        return None  # not plain Python numbers (numpy arrays inside, say): numpy's reading
    inferred = dtypes.named_dtype("float32" if "f" in kinds else
                                  "int64" if "i" in kinds else "bool")
    cdef DtypeCore chosen = dtype_arg(dtype, inferred, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    for value in wide:  # the first that does not fit is named, with the dtype's range
        dtypes.check_scalar(value, chosen, "data")
    if chosen.name == "bool":
        exact = np().asarray(data, dtype=np().bool_)
    elif chosen.floating:
        exact = np().asarray(data, dtype=np().float64)  # each fits: no overflow to infinity
    else:
        exact = np().asarray(data, dtype=np().int64)
    dtypes.check_values(exact, chosen, "data")
    return requiring_grad(from_numpy_values(exact, chosen, target, "data"), requires_grad)


cdef object empty_like(object input, object dtype, object device, bint requires_grad):
    cdef TensorCore source = own_tensor_arg(input, "input")
    require_grad_arg(dtype, source.dtype_object, requires_grad)
    return requiring_grad(new_empty(source.sizes, dtype_arg(dtype, source.dtype_object, "dtype"),
                                    device_arg(device, source.device_index)), requires_grad)


cdef object zeros_like(object input, object dtype, object device, bint requires_grad):
    if isinstance(input, TensorCore):
        require_grad_arg(dtype, (<TensorCore>input).dtype_object, requires_grad)
    return requiring_grad((<TensorCore>empty_like(input, dtype, device, False)).c_fill_(0),
                          requires_grad)


cdef bint allclose(object input, object other, double rtol, double atol, bint equal_nan) except -1:
    own_tensor_arg(input, "input")
    own_tensor_arg(other, "other")
    broadcast_shape((<TensorCore>input).sizes, (<TensorCore>other).sizes, "allclose")
    a = host_values(input).astype(np().float64)
    b = host_values(other).astype(np().float64)
    return bool(np().allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


cdef TensorCore own_tensor_arg(object value, str argument):
    """value, which must be our tensor; anything else is a TypeError naming the argument."""
    if isinstance(value, TensorCore):
        return value
    raise TypeError(f"{argument} must be a tensorplay Tensor, got {type(value).__name__} "
                    f"({errors.shown(value)})")


cdef TensorCore tensor_arg(object value, str argument, Py_ssize_t index):
    """value as our tensor: ours, or a view of any tensor that shares its memory through
    __cuda_array_interface__ or DLPack (PyTorch's, CuPy's), no copy. index >= 0: the argument
    is one item of a sequence, named argument[index] in errors."""
    if isinstance(value, TensorCore):
        return value
    if hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__"):
        return as_tensor(value, None, None)
    name = argument if index < 0 else f"{argument}[{index}]"
    raise TypeError(f"{name} must be a tensor (tensorplay's, or one with "
                    f"__cuda_array_interface__ or __dlpack__), got {type(value).__name__}")


cdef object as_tensor(object data, object dtype, object device):
    if isinstance(data, TensorCore):
        return to_named(data, device, dtype, False, False, "data")
    if hasattr(data, "__cuda_array_interface__") or (
            hasattr(data, "__dlpack__") and not isinstance(data, np().ndarray)):
        from tensorplay._runtime.tensor import interop
        shared = interop.from_cuda_array_interface(data) \
            if hasattr(data, "__cuda_array_interface__") else interop.from_dlpack(data)
        return to_named(shared, device, dtype, False, False, "data")
    if isinstance(data, np().ndarray) and dtypes.dtype_from_numpy(data.dtype) is not None:
        return to_named(shared_numpy(data, "data"), device, dtype, False, False, "data")
    return tensor(data, dtype, device, False)


cdef object from_dlpack(object ext_tensor):
    from tensorplay._runtime.tensor import interop
    return interop.from_dlpack(ext_tensor)


cdef object from_numpy(object ndarray):
    if not isinstance(ndarray, np().ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return shared_numpy(ndarray, "ndarray")


cdef TensorCore shared_numpy(object array, str argument):
    """A CPU tensor sharing array's memory, or PyTorch's error (torch.from_numpy's words and
    order of checks) where it cannot: a layout a tensor cannot describe is refused rather than
    copied, since the caller asked for the same memory."""
    if any(stride % array.itemsize for stride in array.strides):
        raise ValueError(f"{argument}: given numpy array strides not a multiple of the element "
                         "byte size. Copy the numpy array to reallocate the memory.")
    if any(stride < 0 for stride in array.strides):
        raise ValueError(f"{argument}: at least one stride in the given numpy array is "
                         "negative, and tensors with negative strides are not currently "
                         "supported. (You can probably work around this by making a copy of "
                         "your array with array.copy().)")
    if not array.dtype.isnative:
        raise ValueError(f"{argument}: given numpy array has byte order different from the "
                         "native byte order. Conversion between byte orders is currently not "
                         "supported.")
    dtype = dtypes.dtype_from_numpy(array.dtype)
    if dtype is None:
        raise TypeError(f"can't convert np.ndarray of type {array.dtype.type.__module__}."
                        f"{array.dtype.type.__name__}. The only supported types are: float64, "
                        "float32, float16, int64, int32, int16, int8, uint8, and bool.")
    return wrap_cpu(array, dtype)


cdef object where(object condition, object input, object other):
    output = where_values(condition, input, other)
    if isinstance(condition, TensorCore) and tracked(condition, input, other) and \
            (<TensorCore>output).dtype_object.floating:
        return recorded(output, ops.OP_WHERE, (condition, input, other), (condition,))
    return output


cdef object where_values(object condition, object input, object other):
    if not isinstance(condition, TensorCore) or \
            (<TensorCore>condition).dtype_object.name != "bool":
        got = f"a {(<TensorCore>condition).dtype_object.name} tensor" \
            if isinstance(condition, TensorCore) else type(condition).__name__
        raise TypeError(f"where: condition must be a bool tensor (a comparison such as x > 0), "
                        f"got {got}")
    cdef TensorCore mask = condition
    sizes = mask.sizes
    for argument, value in (("input", input), ("other", other)):
        if isinstance(value, TensorCore):
            check_device(mask, value, f"where: condition and {argument}")
            sizes = broadcast_shape(sizes, (<TensorCore>value).sizes, "where")
        elif not is_scalar(value):
            raise TypeError(f"where: {argument} must be a tensor or a Python scalar, got "
                            f"{type(value).__name__}")
        else:
            scalar_operand_arg(value, "where", argument)
    if isinstance(input, TensorCore) and isinstance(other, TensorCore):
        check_device_and_dtype(input, other, "where: input and other")
    cdef DtypeCore result_dtype = where_dtype(input, other)
    operands = [(<TensorCore>value).c_to(None, result_dtype, False, False)
                if isinstance(value, TensorCore) else value for value in (input, other)]
    if mask.device_index == CPU:
        chosen = np().where(mask.array, *[
            (<TensorCore>value).array if isinstance(value, TensorCore)
            else stored(np().array(value), result_dtype) for value in operands])
        return wrap_cpu(np().asarray(chosen, order="C"), result_dtype)
    output = new_empty(sizes, result_dtype, mask.device_index)
    a, b = operands
    tensors = [value for value in (mask, a, b) if isinstance(value, TensorCore)]
    if all(reads_directly(value, sizes) for value in tensors):  # the common, fast case
        device_ops.where(mask.device_index, result_dtype, mask.data,
                         (<TensorCore>a).data if isinstance(a, TensorCore) else 0,
                         (<TensorCore>b).data if isinstance(b, TensorCore) else 0,
                         None if isinstance(a, TensorCore) else a,
                         None if isinstance(b, TensorCore) else b,
                         (<TensorCore>output).data, (<TensorCore>output).element_count,
                         current_stream(mask.device_index))
        return output
    no_strides = (0,) * len(sizes)
    device_ops.where_strided(
        mask.device_index, result_dtype, mask.data, broadcast_strides(mask, sizes),
        (<TensorCore>a).data if isinstance(a, TensorCore) else 0,
        broadcast_strides(a, sizes) if isinstance(a, TensorCore) else no_strides,
        (<TensorCore>b).data if isinstance(b, TensorCore) else 0,
        broadcast_strides(b, sizes) if isinstance(b, TensorCore) else no_strides,
        None if isinstance(a, TensorCore) else a, None if isinstance(b, TensorCore) else b,
        (<TensorCore>output).data, sizes, current_stream(mask.device_index))
    return output


cdef DtypeCore where_dtype(object input, object other):
    """The dtype of where(condition, input, other), by PyTorch's type promotion restricted to the
    operators' rule (two tensors share one dtype): a scalar changes a tensor's dtype only when
    of a higher kind (bool < integer < floating), to that kind's default (int64, float32); two
    scalars give the default of the higher kind."""
    cdef DtypeCore result = dtypes.named_dtype("bool")
    for value in (input, other):
        if isinstance(value, TensorCore):
            result = (<TensorCore>value).dtype_object
    for value in (input, other):
        if isinstance(value, int) and not isinstance(value, bool) and result.name == "bool":
            result = dtypes.named_dtype("int64")
    for value in (input, other):
        result = float32_if_float(result, value)
    return result
