# cython: language_level=3
"""What the tensor modules check and compute before there is a tensor: sizes and shapes,
dtypes, devices and scalars as arguments, broadcasting, the dtypes of results, the tensor
layer's error types, and numpy, imported on first use.
"""
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int64_t

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.base.dtypes cimport DtypeCore

import math

cdef object _numpy = None


class ShapeError(ValueError, RuntimeError):
    """Shapes that do not fit (broadcasting, matmul, expand, view, an in-place result): a
    ValueError, as tensorplay has always raised, and the RuntimeError PyTorch raises."""


class IntegerPowerError(ValueError, RuntimeError):
    """An integer tensor to a negative integer power: a ValueError and PyTorch's RuntimeError."""


class IntegerDivisionByZeroError(ZeroDivisionError, RuntimeError):
    """An integer division by zero on the CPU: Python's ZeroDivisionError, as tensorplay has
    always raised, and the RuntimeError PyTorch's CPU kernels raise ("ZeroDivisionError")."""


class BoolNotImplementedError(TypeError, NotImplementedError):
    """An operation PyTorch does not implement for bool tensors: a TypeError, as tensorplay has
    always raised, and PyTorch's NotImplementedError (abs, rounded division; since PyTorch 2.14
    also -, neg and relu, which raised RuntimeError before: NotImplementedError is one)."""


class FloatingNotImplementedError(TypeError, NotImplementedError):
    """An operation PyTorch does not implement for floating-point tensors (the bitwise
    operations): a TypeError, as tensorplay raises for a dtype it refuses, and PyTorch's
    NotImplementedError ("bitwise_and_cpu" not implemented for 'Float')."""


class ArgumentValueError(ValueError, RuntimeError):
    """An argument's value that PyTorch refuses with a RuntimeError (quantile's q outside
    [0, 1]): a ValueError, as tensorplay's argument checks raise, and PyTorch's RuntimeError."""


class DtypeError(TypeError, RuntimeError):
    """A dtype an operation refuses where PyTorch raises a RuntimeError (mean() of integers):
    a TypeError, as tensorplay has always raised, and PyTorch's RuntimeError."""


cdef object np():
    """numpy, imported on first use: it costs more than the rest of `import tensorplay`
    together."""
    global _numpy
    if _numpy is None:
        import numpy
        _numpy = numpy
    return _numpy


def numpy_module():
    """np() for the Python modules of the tensor layer (tensor_repr.py)."""
    return np()


# An element count, and so each size, must fit a C int64; so must a tensor's byte count.
ELEMENTS_LIMIT = 1 << 63
BYTES_LIMIT = (1 << 63) - 1


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


cdef DtypeCore computed_in(DtypeCore dtype):
    """The dtype a floating dtype computes in: float32 for the 16-bit floats, as PyTorch's
    kernels accumulate them, else the dtype itself."""
    return dtypes.named_dtype("float32") if dtype.itemsize < 4 else dtype


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


cdef tuple sequence_arg(object value, str argument):
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{argument} must be a tuple or list of ints, got {errors.shown(value)}")
    return tuple(value)


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


cdef tuple view_shape(tuple shape, int64_t count):
    """The shape a view or reshape of count elements asks for, with at most one -1 inferred."""
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
        if known == 0 or count % known:
            raise ShapeError(f"shape {errors.shown(shape)} is invalid for input of size "
                             f"{count} elements")
        shape = tuple(count // known if size == -1 else size for size in shape)
    if math.prod(shape) != count:
        raise ShapeError(f"shape {errors.shown(shape)} is invalid for input of size "
                         f"{count} elements")
    return shape
