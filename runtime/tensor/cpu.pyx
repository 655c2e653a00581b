# cython: language_level=3
"""The CPU path: what CPU tensors compute with numpy. bfloat16 keeps its bits in uint16 and
computes in float32 (dtypes.pyx converts); integers and 16-bit floats compute in the types the
CUDA kernels compute in (opmath), so that both devices round alike; each op's numpy function
comes from the op table (ops.pyx).
"""
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.tensor cimport core
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.base.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from tensorplay._runtime.tensor.arguments import IntegerDivisionByZeroError


cdef object computable(TensorCore tensor):
    """The CPU values as numpy can compute with them (bfloat16 as float32)."""
    if tensor.dtype_object.name == "bfloat16":
        return bfloat16_bits_to_float32(tensor.array)
    return tensor.array


cdef object stored(object values, DtypeCore dtype):
    """numpy values converted to how dtype stores them on the CPU. A float the dtype cannot hold
    (NaN or an infinity to an integer, past a narrower float's range) converts silently, as in
    PyTorch, where numpy's cast would warn."""
    values = np().asarray(values)
    if dtype.name == "bfloat16":
        if values.dtype == np().uint16:  # already bfloat16 bits
            return values
        with np().errstate(over="ignore"):
            return float32_to_bfloat16_bits(values.astype(np().float32))
    if values.dtype.kind == "f" and (not dtype.floating or values.dtype.itemsize > dtype.itemsize):
        with np().errstate(invalid="ignore", over="ignore"):
            return values.astype(dtype.numpy_name)
    return values.astype(dtype.numpy_name, copy=False)


cdef object cpu_binary(int op, object a, object b):
    """a (op) b in numpy; a and b are arrays or Python scalars."""
    cdef bint integers
    if op == ops.OP_DIV_TRUNC or op == ops.OP_DIV_FLOOR or op == ops.OP_REMAINDER:
        integers = np().result_type(a, b).kind in "iu"
        if integers and np().any(np().asarray(b) == 0):
            # PyTorch's CPU kernels raise too; numpy would give 0 with a warning.
            raise IntegerDivisionByZeroError(
                f"{'remainder' if op == ops.OP_REMAINDER else 'div'}: integer division by zero "
                "(the divisor has a zero): ZeroDivisionError, as PyTorch's CPU kernels raise")
    if op == ops.OP_DIV_TRUNC or op == ops.OP_DIV_FLOOR:
        if integers:
            quotient = np().floor_divide(a, b)
            if op == ops.OP_DIV_TRUNC:  # floor + 1 where inexact and the signs differ
                quotient = quotient + ((np().remainder(a, b) != 0) & ((np().asarray(a) < 0) !=
                                                                      (np().asarray(b) < 0)))
            return quotient
        with np().errstate(all="ignore"):
            if op == ops.OP_DIV_TRUNC:
                return np().trunc(np().true_divide(a, b))
            return np().floor_divide(a, b)
    if op == ops.OP_RELU_BACKWARD:
        return np().where(np().asarray(b) <= 0, 0, a).astype(np().asarray(a).dtype)
    if op == ops.OP_POW and np().result_type(a, b).kind in "iu":
        return integer_power(a, b)
    if op == ops.OP_LSHIFT or op == ops.OP_RSHIFT:
        return integer_shift(op, a, b)
    with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
        return getattr(np(), ops.cpu_name(op))(a, b)


cdef object integer_power(object a, object b):
    """a ** b of integers as PyTorch computes it on both devices (and the kernel here does): a
    negative exponent gives 1 for a base of 1, 1 or -1 for -1 (by the exponent's parity) and 0
    for any other base, where numpy refuses it. (An int tensor to a negative Python int is
    refused before, as PyTorch refuses it.)"""
    dtype = np().result_type(a, b)
    base, exponent = np().asarray(a), np().asarray(b)
    negative = exponent < 0
    if not np().any(negative):
        return np().power(a, b)
    powers = np().power(base, np().where(negative, 0, exponent))
    inverse = np().where(base == 1, 1, np().where(base == -1, 1 - 2 * (exponent % 2), 0))
    return np().where(negative, inverse, powers).astype(dtype)


cdef object integer_shift(int op, object a, object b):
    """a << b and a >> b of integers as the kernels compute them (elementwise.cu, bitwise): in
    int64, where a shift by a negative amount or by 64 or more gives 0 left and the sign right,
    which the conversion to a narrower dtype makes PyTorch's rule for that dtype. (numpy shifts
    in the operands' dtype, whose rules differ, and refuses a Python int outside it.)"""
    value, amount = np().asarray(a, dtype=np().int64), np().asarray(b)
    outside = (amount < 0) | (amount >= 64)
    if op == ops.OP_LSHIFT:
        shifted = np().left_shift(value.astype(np().uint64),
                                  np().where(outside, 0, amount).astype(np().uint64))
        return np().where(outside, 0, shifted.astype(np().int64))
    return np().right_shift(value, np().where(outside, 63, amount).astype(np().int64))


cdef object opmath(TensorCore tensor):
    """The CPU values in the type CUDA kernels compute in (accumulate<> in kernels/common.cu):
    float32 for 16-bit floats, int64 for integers, so that both devices round alike."""
    values = computable(tensor)
    if tensor.dtype_object.floating:
        return values.astype(np().float32) if tensor.dtype_object.itemsize == 2 else values
    return values.astype(np().int64)


cdef object cpu_result(TensorCore tensor, object values, DtypeCore dtype, bint inplace):
    """numpy values computed from this CPU tensor, stored as dtype: into tensor in place, or
    as a new tensor."""
    if inplace:
        tensor.array[...] = stored(values, dtype)
        return tensor
    return core.wrap_cpu(np().asarray(stored(values, dtype), order="C"), dtype)
