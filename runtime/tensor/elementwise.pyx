# cython: language_level=3
"""Elementwise operations: arithmetic (the operators and PyTorch's named add / sub / mul / div
with alpha and rounding), comparisons, the unary functions, clamp and where, by PyTorch's
broadcasting and type promotion (Note [Tensor model] in core.pyx). CUDA tensors run the kernels
of kernels/elementwise.cu, reading broadcast or strided operands in place; CPU tensors compute
through numpy (cpu.pyx). In-place forms count the change on the version counter once every
argument is checked (Note [Refused calls change nothing] in core.pyx).
"""
import math

from cpython.float cimport PyFloat_CheckExact
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies
from tensorplay._runtime.base.dtypes cimport CODE_BOOL, DtypeCore
from tensorplay._runtime.tensor.arguments cimport (broadcast_shape, division_op,
                                                   float32_if_float, is_scalar, np,
                                                   scalar_operand_arg)
from tensorplay._runtime.tensor.copies cimport copy_into, copy_on_device
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, broadcast_strides, check_device,
                                              check_device_and_dtype, current_stream, device_text,
                                              is_contiguous, new_empty, new_empty_like,
                                              own_tensor_arg, reads_directly, recorded, tracked,
                                              wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, cpu_binary, cpu_result, opmath, stored
from tensorplay._runtime.tensor.promotion cimport check_cast, result_type

from tensorplay._runtime.tensor.arguments import (BoolNotImplementedError, DtypeError,
                                                  FloatingNotImplementedError,
                                                  IntegerPowerError, ShapeError)


# --------------------------------------------------------------------------------------------
# Operands and result dtypes


cdef tuple check_operand(TensorCore tensor, object other, bint inplace, str name, str argument,
                         bint same_dtype):
    """other is a tensor on tensor's device (of its dtype when same_dtype) whose shape
    broadcasts with tensor's (to tensor's own shape for an in-place result), or a Python
    scalar that fits 64 bits. Returns the shape of the result."""
    shape = tensor.sizes
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
    return shape


cdef DtypeCore arithmetic_dtype(TensorCore tensor, object other, int op, bint inplace, str name,
                                str argument="the other operand"):
    """The result dtype of tensor (op) other under the operators' rules, which it checks: other
    is a tensor of the same dtype and device whose shape broadcasts with tensor's, or a Python
    scalar; no bool arithmetic here (bool_binary has its own rules); integers divide truly into
    float32 (op's dtype rule); an in-place result keeps the tensor's dtype and shape."""
    check_operand(tensor, other, inplace, name, argument, True)
    return operand_dtype(tensor, other, op, inplace, name)


cdef DtypeCore operand_dtype(TensorCore tensor, object other, int op, bint inplace, str name):
    """arithmetic_dtype, once check_operand has checked other (binary() keeps the shape)."""
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
    # Of one tensor and scalars, a result that can be cast to the tensor's dtype is of that
    # dtype (promotion.pyx): an int tensor meets a float scalar as float32, refused here.
    return check_cast(result, tensor.dtype_object, name)


# --------------------------------------------------------------------------------------------
# Arithmetic

# Note [Quick paths]
# Most calls are the common case: CUDA tensors of one dtype and shape, contiguous, or a Python
# float or int, with nothing to record for autograd. For those every check of the general path
# passes and the result has the tensor's dtype, so quick_binary (and the first branch of
# unary()) computes them in C: type checks, the version count, the kernel from device_ops'
# table, the launch, and no Python object but the output. The general path's checks,
# conversions and string-keyed kernel lookups cost about a microsecond per call, which shows
# most under graph capture, where the launch itself is cheapest. quick_binary answers None for
# anything else, having changed nothing, and the general path checks, refuses or computes it
# as before.


cdef TensorCore quick_binary(TensorCore tensor, object other, int op, bint reverse,
                             bint inplace, str name):
    """binary() of the common case (Note [Quick paths]), or None."""
    cdef DtypeCore dtype = tensor.dtype_object
    cdef TensorCore right = None, output
    cdef long long integer
    cdef int overflow = 0
    if (tensor.device_index == CPU or tensor.grad_required or dtype.code == CODE_BOOL
            or (not dtype.floating and ops.dtype_rule(op) == ops.DTYPE_FLOATING)
            or not is_contiguous(tensor)):
        return None
    if isinstance(other, TensorCore):
        right = other
        if (right.grad_required or right.device_index != tensor.device_index
                or right.dtype_object is not dtype
                or (right.sizes is not tensor.sizes and right.sizes != tensor.sizes)
                or not is_contiguous(right)):
            return None
    elif PyFloat_CheckExact(other):
        if not dtype.floating:  # a float32 result
            return None
    elif PyLong_CheckExact(other):
        integer = PyLong_AsLongLongAndOverflow(other, &overflow)
        if overflow or (op == ops.OP_POW and not reverse and not dtype.floating and integer < 0):
            return None
    else:
        return None
    if inplace:
        # Counted first, as binary() counts it. c_mark_modified's refusals cannot apply: neither
        # operand requires grad and the tensor is on a device (checked above).
        tensor.version.value += 1
        output = tensor
    else:
        output = new_empty_like(tensor)
    cdef cudaStream_t stream = current_stream(tensor.device_index)
    if right is None:
        device_ops.binary_scalar(tensor.device_index, dtype, tensor.data, other, output.data,
                                 tensor.element_count, op, reverse, stream)
    elif reverse:
        device_ops.binary(tensor.device_index, dtype, right.data, tensor.data, output.data,
                          tensor.element_count, op, stream)
    else:
        device_ops.binary(tensor.device_index, dtype, tensor.data, right.data, output.data,
                          tensor.element_count, op, stream)
    return output


cdef object binary(TensorCore tensor, object other, int op, bint reverse, bint inplace, str name):
    # The general path is a function of its own, so that the common case (Note [Quick paths])
    # never sets up and tears down its large frame (binary() was 14 KB of machine code, about
    # 60 instructions of which every quick call ran). Its own rebase branch calls it too:
    # with a second caller, the C compiler no longer inlines it back here as a function called
    # once.
    quick = quick_binary(tensor, other, op, reverse, inplace, name)
    if quick is not None:
        return quick
    return general_binary(tensor, other, op, reverse, inplace, name)


cdef object general_binary(TensorCore tensor, object other, int op, bint reverse, bint inplace,
                           str name):
    """binary() of what quick_binary does not take: checked, refused or computed here."""
    if isinstance(other, TensorCore) and \
            (<TensorCore>other).dtype_object is not tensor.dtype_object:
        return mixed_binary(tensor, other, op, reverse, inplace, name)
    if op == ops.OP_SUB and isinstance(other, bool):
        raise_bool_subtraction(name)
    if tensor.dtype_object.name == "bool" and (
            not isinstance(other, TensorCore) or
            (<TensorCore>other).dtype_object is tensor.dtype_object):
        return bool_binary(tensor, other, op, reverse, inplace, name)
    sizes = check_operand(tensor, other, inplace, name, "the other operand", True)
    cdef DtypeCore result_dtype = operand_dtype(tensor, other, op, inplace, name)
    if op == ops.OP_POW and not reverse and not result_dtype.floating and \
            isinstance(other, int) and other < 0:
        raise IntegerPowerError(f"{name}: Integers to negative integer powers are not "
                                f"allowed. (got exponent {other} for a "
                                f"{result_dtype.name} tensor)")
    if inplace and tracked(tensor, other):  # recorded: the result of a copy, copied in
        tensor.c_check_rebase(name)
        # Straight to the general path: an operand requires grad, which quick_binary refuses.
        return copies.rebased(tensor, general_binary(<TensorCore>copies.clone(tensor), other, op,
                                                     reverse, False, name))
    if inplace and tensor.device_index != CPU:
        tensor.c_mark_modified(name, other)
    if tensor.device_index == CPU:
        # In the kernels' types, so that integers wrap like CUDA's and like PyTorch's (numpy
        # refuses a Python int outside the array's own dtype).
        a = opmath(<TensorCore>copies.to(tensor, None, result_dtype, False, False))
        b = opmath(<TensorCore>copies.to(<TensorCore>other, None, result_dtype, False, False)) \
            if isinstance(other, TensorCore) else other
        values = cpu_binary(op, b, a) if reverse else cpu_binary(op, a, b)
        if inplace:  # after the values: an integer division by zero is refused unchanged
            tensor.c_mark_modified(name, other)
        return binary_result(tensor, cpu_result(tensor, values, result_dtype, inplace), other,
                             op, reverse, inplace)
    cdef cudaStream_t stream = current_stream(tensor.device_index)
    cdef TensorCore first, second
    if result_dtype is not tensor.dtype_object:
        # Integers meeting a float scalar or divided truly: read in their own dtype by the
        # promoted kernels (never in place: check_in_place refused that).
        output = new_empty(sizes, result_dtype, tensor.device_index)
        if isinstance(other, TensorCore):
            first, second = (other, tensor) if reverse else (tensor, other)
            device_ops.promoted_binary(tensor.device_index, op, tensor.dtype_object, first.data,
                                       broadcast_strides(first, sizes), tensor.dtype_object,
                                       second.data, broadcast_strides(second, sizes),
                                       result_dtype, result_dtype, (<TensorCore>output).data,
                                       sizes, stream)
        else:
            device_ops.promoted_binary_scalar(tensor.device_index, op, tensor.dtype_object,
                                              tensor.data, tensor.element_strides, other,
                                              reverse, result_dtype, result_dtype,
                                              (<TensorCore>output).data, sizes, stream)
    elif isinstance(other, TensorCore):
        first, second = (other, tensor) if reverse else (tensor, other)
        output = tensor if inplace and is_contiguous(tensor) else \
            new_empty(sizes, result_dtype, tensor.device_index)
        if reads_directly(first, sizes) and reads_directly(second, sizes):  # the common case
            device_ops.binary(tensor.device_index, result_dtype, first.data, second.data,
                              (<TensorCore>output).data, (<TensorCore>output).element_count,
                              op, stream)
        elif not rows_launched(first, second, <TensorCore>output, sizes, op, stream):
            device_ops.binary_strided(tensor.device_index, result_dtype, first.data,
                                      broadcast_strides(first, sizes), second.data,
                                      broadcast_strides(second, sizes),
                                      (<TensorCore>output).data, sizes, op, stream)
    else:
        left = copies.contiguous(tensor)
        output = tensor if inplace and is_contiguous(tensor) else \
            new_empty(tensor.sizes, result_dtype, tensor.device_index)
        device_ops.binary_scalar(tensor.device_index, result_dtype, (<TensorCore>left).data,
                                 other, (<TensorCore>output).data, tensor.element_count, op,
                                 reverse, stream)
    if inplace and output is not tensor:
        copy_on_device(tensor, output)
        return tensor
    return binary_result(tensor, output, other, op, reverse, inplace)


cdef bint is_row_of(TensorCore row, tuple sizes):
    """Whether row is contiguous and, leading ones aside, the trailing sizes of sizes (fewer of
    them): a bias broadcast over a batch."""
    cdef tuple own = row.sizes
    cdef Py_ssize_t start = 0
    while start < len(own) and own[start] == 1:
        start += 1
    cdef Py_ssize_t kept = len(own) - start
    return (0 < kept < len(sizes) and is_contiguous(row) and
            own[start:] == sizes[len(sizes) - kept:])


cdef bint rows_launched(TensorCore first, TensorCore second, TensorCore output, tuple sizes,
                        int op, cudaStream_t stream) except -1:
    """first (op) second through the row kernel when one is contiguous over sizes and the other
    a row of it (device_ops.binary_rows); False, having launched nothing, otherwise."""
    if reads_directly(first, sizes) and is_row_of(second, sizes):
        return device_ops.binary_rows(output.device_index, output.dtype_object, first.data,
                                      second.data, output.data, output.element_count,
                                      second.element_count, op, False, stream)
    if reads_directly(second, sizes) and is_row_of(first, sizes):
        return device_ops.binary_rows(output.device_index, output.dtype_object, second.data,
                                      first.data, output.data, output.element_count,
                                      first.element_count, op, True, stream)
    return False


cdef int raise_bool_subtraction(str name) except -1:
    # PyTorch's sub_check: a bool operand, tensor or Python bool, whatever the other's dtype.
    # NotImplementedError since PyTorch 2.14, RuntimeError before (BoolNotImplementedError).
    raise BoolNotImplementedError(
        f"{name}: Subtraction, the `-` operator, with a bool tensor is not supported. If you "
        "are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


cdef object mixed_binary(TensorCore tensor, TensorCore other, int op, bint reverse, bint inplace,
                         str name):
    """tensor (op) other for tensors of two dtypes, by PyTorch's type promotion (Note [Type
    promotion] in promotion.pyx): computed in the dtype they promote to (float32 for a true
    division of integers), in place into tensor when that result can be cast to its dtype. CUDA
    tensors are read in place, each in its own dtype, by one kernel per op and dtypes."""
    sizes = check_operand(tensor, other, inplace, name, "the other operand", False)
    if op == ops.OP_SUB and CODE_BOOL in (tensor.dtype_object.code, other.dtype_object.code):
        raise_bool_subtraction(name)
    cdef DtypeCore common = result_type(tensor, other)
    if ops.dtype_rule(op) == ops.DTYPE_FLOATING and not common.floating:
        common = dtypes.named_dtype("float32")  # true division, as PyTorch
    cdef DtypeCore target = tensor.dtype_object if inplace else common
    if inplace:
        check_cast(common, target, name)
        if tracked(tensor, other):  # recorded: the result of a copy, copied in
            tensor.c_check_rebase(name)
            return copies.rebased(tensor, mixed_binary(<TensorCore>copies.clone(tensor), other,
                                                       op, reverse, False, name))
    if tensor.device_index == CPU:
        a = opmath(<TensorCore>copies.to(tensor, None, common, False, False))
        b = opmath(<TensorCore>copies.to(other, None, common, False, False))
        values = cpu_binary(op, b, a) if reverse else cpu_binary(op, a, b)
        if inplace:  # after the values: an integer division by zero is refused unchanged
            tensor.c_mark_modified(name, other)
        elif common.itemsize == 2 and common.floating:  # rounded to the common dtype
            values = stored(values, common)
        return binary_result(tensor, cpu_result(tensor, values, target, inplace), other, op,
                             reverse, inplace)
    if inplace:
        tensor.c_mark_modified(name, other)
    cdef TensorCore output = tensor if inplace and is_contiguous(tensor) else \
        new_empty(sizes, target, tensor.device_index)
    first, second = (other, tensor) if reverse else (tensor, other)
    device_ops.promoted_binary(tensor.device_index, op, (<TensorCore>first).dtype_object,
                               (<TensorCore>first).data, broadcast_strides(first, sizes),
                               (<TensorCore>second).dtype_object, (<TensorCore>second).data,
                               broadcast_strides(second, sizes), common, target, output.data,
                               sizes, current_stream(tensor.device_index))
    if inplace and output is not tensor:
        copy_on_device(tensor, output)
        return tensor
    return binary_result(tensor, output, other, op, reverse, inplace)


cdef object bool_binary(TensorCore tensor, object other, int op, bint reverse, bint inplace,
                        str name):
    """tensor (op) other for a bool tensor and a bool tensor or a Python scalar, by PyTorch's
    type promotion: bool with bool stays bool for +, * (or, and) and ** a bool scalar, an int
    scalar makes int64, a float scalar or true division float32; subtraction, rounded
    division and remainder of bool by bool, bool ** a bool tensor and a bool base ** a bool
    tensor are refused as in PyTorch. Computed in int64 (or float32), so every kernel it needs
    exists on both devices."""
    check_operand(tensor, other, inplace, name, "the other operand", False)
    if op == ops.OP_SUB:  # NotImplementedError since PyTorch 2.14, RuntimeError before
        raise_bool_subtraction(name)
    boolean = isinstance(other, (bool, TensorCore))  # the other operand is bool too
    if (op == ops.OP_DIV_TRUNC or op == ops.OP_DIV_FLOOR or op == ops.OP_REMAINDER) and \
            boolean or (
            op == ops.OP_POW and (isinstance(other, TensorCore) or reverse and boolean)):
        raise BoolNotImplementedError(f"{name}: not implemented for 'Bool' tensors (as in "
                                      "PyTorch); convert with .to(tensorplay.int64) first")
    if op == ops.OP_DIV or isinstance(other, float):
        compute = dtypes.named_dtype("float32")
    else:
        compute = dtypes.named_dtype("int64")
    result_dtype = tensor.dtype_object if boolean and compute.name == "int64" else compute
    if inplace:
        check_cast(result_dtype, tensor.dtype_object, name)
    left = <TensorCore>copies.to(tensor, None, compute, False, False)
    right = copies.to(<TensorCore>other, None, compute, False, False) \
        if isinstance(other, TensorCore) else (int(other) if isinstance(other, bool)
                                               else other)
    result = <TensorCore>binary(left, right, op, reverse, False, name)
    if result_dtype is not compute:
        result = <TensorCore>copies.to(result, None, result_dtype, False, False)
    if inplace:
        tensor.c_mark_modified(name, other)
        copy_into(tensor, result, False)
        return tensor
    return result


cdef object binary_result(TensorCore tensor, object output, object other, int op, bint reverse,
                          bint inplace):
    """output of tensor (op) other, on the tape when the operands are."""
    if inplace or not tracked(tensor, other) or not (<TensorCore>output).dtype_object.floating:
        return output
    # What PyTorch saves, so that the same in-place changes are refused (Note [Version
    # counters]): for mul, each operand only when the other one needs its gradient; for
    # div, the divisor, and the dividend when the divisor needs a gradient; for pow, both
    # operands and, with a tensor exponent, the output (a detached alias).
    other_grad = isinstance(other, TensorCore) and (<TensorCore>other).grad_required
    if op == ops.OP_MUL:
        saved = (tensor if other_grad else None, other if tensor.grad_required else None)
    elif op == ops.OP_DIV:
        saved = (tensor if other_grad or reverse else None, other)
    elif op == ops.OP_POW:
        saved = (tensor, other) if not isinstance(other, TensorCore) and not reverse \
            else (tensor, other, (<TensorCore>output).c_detach())
    elif op == ops.OP_REMAINDER:  # the quotient, for the divisor's gradient
        saved = (tensor, other) if other_grad or reverse else ()
    else:
        saved = ()
    return recorded(output, op, (tensor, other), saved, reverse)


cdef object add(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_ADD, False, False, "add")


cdef object radd(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_ADD, True, False, "add")


cdef object sub(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_SUB, False, False, "sub")


cdef object rsub(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_SUB, True, False, "sub")


cdef object mul(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_MUL, False, False, "mul")


cdef object rmul(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_MUL, True, False, "mul")


cdef object truediv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV, False, False, "div")


cdef object rtruediv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV, True, False, "div")


cdef object power(TensorCore tensor, object exponent):
    # Checked first under the name pow() gives it; the operator's is other. A tensor exponent
    # of another dtype promotes (mixed_binary checks it).
    if not isinstance(exponent, TensorCore) or \
            (<TensorCore>exponent).dtype_object is tensor.dtype_object:
        arithmetic_dtype(tensor, exponent, ops.OP_POW, False, "pow", "exponent")
    return binary(tensor, exponent, ops.OP_POW, False, False, "pow")


cdef object power_(TensorCore tensor, object exponent):
    if not isinstance(exponent, TensorCore) or \
            (<TensorCore>exponent).dtype_object is tensor.dtype_object:
        arithmetic_dtype(tensor, exponent, ops.OP_POW, True, "pow_", "exponent")
    return binary(tensor, exponent, ops.OP_POW, False, True, "pow_")


cdef object square_(TensorCore tensor):
    return power_(tensor, 2)


cdef object square(TensorCore tensor):
    # PyTorch's square is pow(x, 2), whose integer scalar promotes a bool tensor to int64.
    if tensor.dtype_object.code == CODE_BOOL:
        return power(<TensorCore>copies.to(tensor, None, dtypes.named_dtype("int64"), False,
                                           False), 2)
    return power(tensor, 2)


cdef object pow_operator(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_POW, False, False, "pow")


cdef object rpow(TensorCore tensor, object base):
    return binary(tensor, base, ops.OP_POW, True, False, "pow")


# a // b is torch.floor_divide: div(rounding_mode="floor"), named so in errors.
cdef object floordiv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV_FLOOR, False, False, "floor_divide")


cdef object rfloordiv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV_FLOOR, True, False, "floor_divide")


cdef object ifloordiv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV_FLOOR, False, True, "floor_divide_")


# a % b is torch.remainder (Python's modulo: the sign of the divisor).
cdef object mod(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_REMAINDER, False, False, "remainder")


cdef object rmod(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_REMAINDER, True, False, "remainder")


cdef object imod(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_REMAINDER, False, True, "remainder_")


# Note [Mask logic]
# ~, &, | and ^ of bool tensors (masks) and Python bools, as PyTorch's logical results on bool:
# computed by the ops bool arithmetic already has (and is *, or is +, xor is !=, not is == False:
# bool_binary keeps bool with bool), so no kernel of their own.
#
# Note [Bitwise operations]
# Every other operand of & | ^ ~ << >> is an integer (a bool tensor with an int is one, int64,
# as in PyTorch): PyTorch's bitwise operations, by the arithmetic operators' type promotion,
# through binary() and unary() to the kernels of OP_BITWISE_AND... OP_RSHIFT and
# OP_BITWISE_NOT (elementwise.cu, bitwise: 64-bit rules that give PyTorch's shifts for every
# width). Floating operands are refused as PyTorch refuses them ("bitwise_and_cpu" not
# implemented for 'Float'), and so are shifts of bool by bool. Integers carry no gradient, so
# nothing is recorded.
cdef bint is_mask_pair(TensorCore tensor, object other):
    return tensor.dtype_object.code == CODE_BOOL and (
        isinstance(other, bool) or (isinstance(other, TensorCore) and
                                    (<TensorCore>other).dtype_object.code == CODE_BOOL))


cdef object bitwise(TensorCore tensor, object other, int op, bint reverse, bint inplace,
                    str name):
    """tensor (op) other for & | ^ << >> (Note [Mask logic], Note [Bitwise operations])."""
    if not isinstance(other, TensorCore):  # a Python scalar that fits 64 bits, or refused
        check_operand(tensor, other, inplace, name, "other", False)
    if is_mask_pair(tensor, other):
        if op == ops.OP_LSHIFT or op == ops.OP_RSHIFT:
            raise BoolNotImplementedError(f"{name}: not implemented for 'Bool' tensors (as in "
                                          "PyTorch); convert with .to(tensorplay.int64) first")
        if op == ops.OP_BITWISE_XOR:
            return mask_ixor(tensor, other) if inplace else compare(tensor, other, ops.OP_NE)
        return binary(tensor, other, ops.OP_MUL if op == ops.OP_BITWISE_AND else ops.OP_ADD,
                      False, inplace, name)
    if isinstance(other, float) or (isinstance(other, TensorCore) and
                                    (<TensorCore>other).dtype_object.floating):
        got = f"a {(<TensorCore>other).dtype_object.name} tensor" \
            if isinstance(other, TensorCore) else "a Python float"
        raise FloatingNotImplementedError(
            f"{name}: other must be an integer or bool tensor or a Python int or bool, got "
            f"{got} (not implemented for floating-point operands, as in PyTorch)")
    if tensor.dtype_object.floating:
        raise FloatingNotImplementedError(
            f"{name}: not implemented for {tensor.dtype_object.name} tensors, as in PyTorch; "
            "bitwise operations take integer and bool tensors")
    return binary(tensor, other, op, reverse, inplace, name)


cdef object mask_ixor(TensorCore tensor, object other):
    # Checked whole (the result keeps the tensor's shape) before the count and the copy.
    check_operand(tensor, other, True, "xor", "the other operand", True)
    result = compare(tensor, other, ops.OP_NE)
    tensor.c_mark_modified("xor", other)
    copy_into(tensor, <TensorCore>result, False)
    return tensor


cdef object bitwise_and(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_AND, False, False, "bitwise_and")


cdef object bitwise_or(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_OR, False, False, "bitwise_or")


cdef object bitwise_xor(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_XOR, False, False, "bitwise_xor")


cdef object left_shift(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_LSHIFT, False, False, "bitwise_left_shift")


cdef object right_shift(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_RSHIFT, False, False, "bitwise_right_shift")


cdef object reflected_left_shift(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_LSHIFT, True, False, "bitwise_left_shift")


cdef object reflected_right_shift(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_RSHIFT, True, False, "bitwise_right_shift")


cdef object bitwise_and_(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_AND, False, True, "bitwise_and_")


cdef object bitwise_or_(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_OR, False, True, "bitwise_or_")


cdef object bitwise_xor_(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_BITWISE_XOR, False, True, "bitwise_xor_")


cdef object left_shift_(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_LSHIFT, False, True, "bitwise_left_shift_")


cdef object right_shift_(TensorCore tensor, object other):
    return bitwise(tensor, other, ops.OP_RSHIFT, False, True, "bitwise_right_shift_")


cdef object invert(TensorCore tensor):
    if tensor.dtype_object.code == CODE_BOOL:
        return compare(tensor, False, ops.OP_EQ)
    if tensor.dtype_object.floating:  # PyTorch's TypeError, in its words
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        f"tensors, got {tensor.dtype_object.name}")
    return unary(tensor, ops.OP_BITWISE_NOT)


cdef object iadd(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_ADD, False, True, "add_")


cdef object isub(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_SUB, False, True, "sub_")


cdef object imul(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_MUL, False, True, "mul_")


cdef object itruediv(TensorCore tensor, object other):
    return binary(tensor, other, ops.OP_DIV, False, True, "div_")


cdef object compare(TensorCore tensor, object other, int op):
    name = ops.op_name(op)
    sizes = tensor.sizes
    if isinstance(other, TensorCore):
        check_device(tensor, other, name)
        sizes = broadcast_shape(tensor.sizes, (<TensorCore>other).sizes, name)
    elif is_scalar(other):
        scalar_operand_arg(other, name)
    elif not is_scalar(other):
        raise TypeError(f"{name}: the other operand must be a tensor or a Python "
                        f"scalar, got {type(other).__name__}")
    boolean = dtypes.named_dtype("bool")
    # Compared in the dtype the operands promote to (Note [Type promotion] in promotion.pyx).
    cdef DtypeCore common = result_type(tensor, other)
    cdef bint mixed = isinstance(other, TensorCore) and \
        (<TensorCore>other).dtype_object is not tensor.dtype_object
    if tensor.device_index == CPU:
        a = computable(<TensorCore>copies.to(tensor, None, common, False, False))
        b = computable(<TensorCore>copies.to(other, None, common, False, False)) \
            if isinstance(other, TensorCore) else other
        values = getattr(np(), ops.cpu_name(op))(a, b)
        return wrap_cpu(np().asarray(values, order="C"), boolean)
    output = new_empty(sizes, boolean, tensor.device_index)
    cdef cudaStream_t stream = current_stream(tensor.device_index)
    cdef TensorCore right
    if mixed or (common is not tensor.dtype_object and not isinstance(other, TensorCore)):
        # Each operand read in its own dtype (an int tensor against 2.5 compares as float32).
        if mixed:
            device_ops.promoted_binary(tensor.device_index, op, tensor.dtype_object,
                                       tensor.data, broadcast_strides(tensor, sizes),
                                       (<TensorCore>other).dtype_object,
                                       (<TensorCore>other).data,
                                       broadcast_strides(other, sizes), common, boolean,
                                       (<TensorCore>output).data, sizes, stream)
        else:
            device_ops.promoted_binary_scalar(tensor.device_index, op, tensor.dtype_object,
                                              tensor.data, tensor.element_strides, other, False,
                                              common, boolean, (<TensorCore>output).data,
                                              sizes, stream)
        return output
    if isinstance(other, TensorCore):
        right = other
        if reads_directly(tensor, sizes) and reads_directly(right, sizes):
            device_ops.compare(tensor.device_index, tensor.dtype_object, tensor.data, right.data,
                               (<TensorCore>output).data, tensor.element_count, op, stream)
        else:
            device_ops.compare_strided(tensor.device_index, tensor.dtype_object, tensor.data,
                                       broadcast_strides(tensor, sizes), right.data,
                                       broadcast_strides(right, sizes),
                                       (<TensorCore>output).data, sizes, op, stream)
    else:
        left = copies.contiguous(tensor)
        device_ops.compare_scalar(tensor.device_index, tensor.dtype_object,
                                  (<TensorCore>left).data, other, (<TensorCore>output).data,
                                  tensor.element_count, op, stream)
    return output


cdef object eq(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_EQ)


cdef object ne(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_NE)


# == and != as Python's operators, as PyTorch's: an operand that is neither a tensor nor a
# number (None, a str, a list) gives NotImplemented, so Python falls back to identity: x == None
# is False and x != None True, and `x in [None, ...]` does not raise. eq() and ne() refuse it
# (numpy arrays, which would compare through numpy, are refused by the operators too).
cdef bint compared_by_operator(object other):
    return isinstance(other, TensorCore) or is_scalar(other) or \
        isinstance(other, (np().ndarray, np().generic))


cdef object eq_operator(TensorCore tensor, object other):
    if not compared_by_operator(other):
        return NotImplemented
    return compare(tensor, other, ops.OP_EQ)


cdef object ne_operator(TensorCore tensor, object other):
    if not compared_by_operator(other):
        return NotImplemented
    return compare(tensor, other, ops.OP_NE)


cdef object lt(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_LT)


cdef object le(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_LE)


cdef object gt(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_GT)


cdef object ge(TensorCore tensor, object other):
    return compare(tensor, other, ops.OP_GE)


cdef inline bint rounds(int op) noexcept:
    return op == ops.OP_FLOOR or op == ops.OP_CEIL or op == ops.OP_ROUND or op == ops.OP_TRUNC


cdef inline bint piecewise_constant(int op) noexcept:  # a gradient of zero, nothing saved
    return rounds(op) or op == ops.OP_SIGN


cdef inline bint saves_input(int op) noexcept:  # for its gradient, as PyTorch's
    return op != ops.OP_NEG and not piecewise_constant(op) and not ops.saves_output(op)


cdef object unary(TensorCore tensor, int op):
    cdef DtypeCore dtype = tensor.dtype_object
    cdef TensorCore output
    if (tensor.device_index != CPU and not tensor.grad_required and dtype.code != CODE_BOOL
            and (dtype.floating or (ops.dtype_rule(op) != ops.DTYPE_FLOATING and not rounds(op)))
            and is_contiguous(tensor)):  # Note [Quick paths]
        output = new_empty_like(tensor)
        device_ops.unary(tensor.device_index, dtype, tensor.data, output.data,
                         tensor.element_count, op, current_stream(tensor.device_index))
        return output
    name = ops.op_name(op)
    if ops.dtype_rule(op) == ops.DTYPE_FLOATING and not tensor.dtype_object.floating:
        # Integers and bools go to float32 first, as PyTorch promotes them.
        return unary(<TensorCore>copies.to(tensor, None, dtypes.named_dtype("float32"), False,
                                           False), op)
    if tensor.dtype_object.name == "bool" and op == ops.OP_SIGN:
        return copies.clone(tensor)  # a bool is its own sign, as PyTorch's
    if tensor.dtype_object.name == "bool":  # PyTorch's error types: see BoolNotImplementedError
        raise BoolNotImplementedError(f"{name}() is not supported on bool tensors" + (
            ": Negation, the `-` operator, on a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
            if op == ops.OP_NEG else ""))
    if rounds(op) and not tensor.dtype_object.floating:
        return copies.clone(tensor)  # an integer is its own floor: a copy, as PyTorch's
    if tensor.device_index == CPU:
        with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
            if op == ops.OP_RELU:
                values = computable(tensor)
                values = np().maximum(values, 0).astype(values.dtype)
            elif op == ops.OP_SIGN:  # numpy's sign keeps NaN and -0.0; PyTorch's gives 0
                values = computable(tensor)
                values = (values > 0).astype(np().int8) - (values < 0).astype(np().int8)
            elif op == ops.OP_ERF:  # numpy has none: math.erf of each, in the kernel's precision
                values = opmath(tensor)
                # asarray: frompyfunc gives a Python float, not an array, for a 0-d input
                values = np().asarray(np().frompyfunc(math.erf, 1, 1)(values), values.dtype)
            elif op == ops.OP_RSQRT:  # in the kernel's precision, float32 for 16-bit floats
                values = opmath(tensor)
                values = values.dtype.type(1) / np().sqrt(values)
            elif op == ops.OP_SIGMOID:  # in the kernel's precision, float32 for 16-bit floats
                values = opmath(tensor)
                values = values.dtype.type(1) / (values.dtype.type(1) + np().exp(-values))
            else:
                values = getattr(np(), ops.cpu_name(op))(computable(tensor))
        output = wrap_cpu(np().asarray(stored(values, tensor.dtype_object), order="C"),
                          tensor.dtype_object)
    else:
        source = copies.contiguous(tensor)
        output = new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index)
        device_ops.unary(tensor.device_index, tensor.dtype_object, (<TensorCore>source).data,
                         (<TensorCore>output).data, tensor.element_count, op,
                         current_stream(tensor.device_index))
    if tracked(tensor) and tensor.dtype_object.floating:
        # What PyTorch saves: nothing for neg, rounding and sign, the output (a detached alias,
        # sharing its version counter) where the gradient is a function of it, else the input.
        saved = ((<TensorCore>output).c_detach(),) if ops.saves_output(op) else \
            (tensor,) if saves_input(op) else ()
        return recorded(output, op, (tensor,), saved)
    return output


cdef object neg(TensorCore tensor):
    return unary(tensor, ops.OP_NEG)


cdef object absolute(TensorCore tensor):
    return unary(tensor, ops.OP_ABS)


cdef object relu(TensorCore tensor):
    return unary(tensor, ops.OP_RELU)


cdef object sin(TensorCore tensor):
    return unary(tensor, ops.OP_SIN)


cdef object cos(TensorCore tensor):
    return unary(tensor, ops.OP_COS)


cdef object exp(TensorCore tensor):
    return unary(tensor, ops.OP_EXP)


cdef object sqrt(TensorCore tensor):
    return unary(tensor, ops.OP_SQRT)


cdef object log(TensorCore tensor):
    return unary(tensor, ops.OP_LOG)


cdef object sign(TensorCore tensor):
    return unary(tensor, ops.OP_SIGN)


# isnan(), isinf() and isfinite(), as PyTorch's: bool tensors, from comparisons (NaN is the one
# value unequal to itself; x - x is 0 only for a finite x); integers and bools are never NaN or
# infinite.
cdef object isnan(TensorCore tensor):
    return compare(tensor, tensor, ops.OP_NE)


cdef object isinf(TensorCore tensor):
    if not tensor.dtype_object.floating:
        return isnan(tensor)  # all False
    return compare(<TensorCore>unary(tensor.c_detach(), ops.OP_ABS), float("inf"), ops.OP_EQ)


cdef object isfinite(TensorCore tensor):
    if not tensor.dtype_object.floating:
        return compare(tensor, tensor, ops.OP_EQ)
    detached = tensor.c_detach()
    return compare(<TensorCore>binary(detached, detached, ops.OP_SUB, False, False, "isfinite"),
                   0, ops.OP_EQ)


cdef object sigmoid(TensorCore tensor):
    return unary(tensor, ops.OP_SIGMOID)


cdef object tanh(TensorCore tensor):
    return unary(tensor, ops.OP_TANH)


cdef object erf(TensorCore tensor):
    return unary(tensor, ops.OP_ERF)


cdef object log1p(TensorCore tensor):
    return unary(tensor, ops.OP_LOG1P)


cdef object expm1(TensorCore tensor):
    return unary(tensor, ops.OP_EXPM1)


cdef object rsqrt(TensorCore tensor):
    return unary(tensor, ops.OP_RSQRT)


cdef object tan(TensorCore tensor):
    return unary(tensor, ops.OP_TAN)


cdef object atan(TensorCore tensor):
    return unary(tensor, ops.OP_ATAN)


cdef object asin(TensorCore tensor):
    return unary(tensor, ops.OP_ASIN)


cdef object acos(TensorCore tensor):
    return unary(tensor, ops.OP_ACOS)


cdef object sinh(TensorCore tensor):
    return unary(tensor, ops.OP_SINH)


cdef object cosh(TensorCore tensor):
    return unary(tensor, ops.OP_COSH)


cdef object log2(TensorCore tensor):
    return unary(tensor, ops.OP_LOG2)


cdef object log10(TensorCore tensor):
    return unary(tensor, ops.OP_LOG10)


cdef object exp2(TensorCore tensor):
    return unary(tensor, ops.OP_EXP2)


cdef object floor(TensorCore tensor):
    return unary(tensor, ops.OP_FLOOR)


cdef object ceil(TensorCore tensor):
    return unary(tensor, ops.OP_CEIL)


cdef object trunc(TensorCore tensor):
    return unary(tensor, ops.OP_TRUNC)


cdef object rounded(TensorCore tensor, int decimals):
    """torch.round: to the nearest integer, ties to even; with decimals, PyTorch's
    round(x * 10**d) / 10**d (round(x / 10**-d) * 10**-d for negative d), each step rounded
    to the tensor's dtype as PyTorch's kernel rounds it. decimals is in [-308, 308] (the
    wrapper's range check)."""
    if decimals == 0:
        return unary(tensor, ops.OP_ROUND)
    if not tensor.dtype_object.floating:  # PyTorch: "round_cpu" not implemented for 'Long'
        raise TypeError(f"round: decimals needs a floating-point tensor, got "
                        f"{tensor.dtype_object.name} (without decimals, round() takes integer "
                        "tensors too, as in PyTorch)")
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return truediv(unary(<TensorCore>mul(tensor, scale), ops.OP_ROUND), scale)
    return mul(unary(<TensorCore>truediv(tensor, scale), ops.OP_ROUND), scale)


# Note [In-place unary functions]
# exp_(), sqrt_(), sigmoid_()... as PyTorch's: the tensor's elements replaced by the function of
# them, the tensor returned. The result keeps the tensor's dtype, so a function whose result is
# floating point refuses an integer or bool tensor (PyTorch's "result type Float can't be cast
# to the desired output type Long"), before computing anything. In the common case (Note [Quick
# paths]) the kernel writes over its input, which is safe because each thread reads its
# element before writing it, and nothing is allocated: under capture, no pool memory. Otherwise
# the function is computed out of place and copied in by copy_(), which counts the version and
# puts the tensor's new history on the tape (a leaf that requires grad is refused there). A
# function whose gradient needs its input (sin, cos, log...) reads a copy of it, as PyTorch
# saves the original self, since the copy overwrites the input.
cdef object unary_(TensorCore tensor, int op):
    cdef DtypeCore dtype = tensor.dtype_object
    if (tensor.device_index != CPU and not tensor.grad_required and dtype.floating
            and is_contiguous(tensor)):
        # Counted first, as copy_() counts it; c_mark_modified's refusals cannot apply: the
        # tensor neither requires grad nor is on the CPU (checked above).
        tensor.version.value += 1
        device_ops.unary(tensor.device_index, dtype, tensor.data, tensor.data,
                         tensor.element_count, op, current_stream(tensor.device_index))
        return tensor
    if not dtype.floating and ops.dtype_rule(op) == ops.DTYPE_FLOATING:
        check_cast(dtypes.named_dtype("float32"), dtype, ops.op_name(op) + "_")
    return copies.copy_(tensor, unary(own_input(tensor, op), op), False)


cdef TensorCore own_input(TensorCore tensor, int op):
    """tensor, or a copy of it where unary(tensor, op) saves its input for the gradient."""
    if tracked(tensor) and tensor.dtype_object.floating and saves_input(op):
        return copies.clone(tensor)
    return tensor


cdef object exp_(TensorCore tensor):
    return unary_(tensor, ops.OP_EXP)


cdef object log_(TensorCore tensor):
    return unary_(tensor, ops.OP_LOG)


cdef object sqrt_(TensorCore tensor):
    return unary_(tensor, ops.OP_SQRT)


cdef object sin_(TensorCore tensor):
    return unary_(tensor, ops.OP_SIN)


cdef object cos_(TensorCore tensor):
    return unary_(tensor, ops.OP_COS)


cdef object absolute_(TensorCore tensor):
    return unary_(tensor, ops.OP_ABS)


cdef object neg_(TensorCore tensor):
    return unary_(tensor, ops.OP_NEG)


cdef object relu_(TensorCore tensor):
    return unary_(tensor, ops.OP_RELU)


cdef object sigmoid_(TensorCore tensor):
    return unary_(tensor, ops.OP_SIGMOID)


cdef object tanh_(TensorCore tensor):
    return unary_(tensor, ops.OP_TANH)


cdef object erf_(TensorCore tensor):
    return unary_(tensor, ops.OP_ERF)


cdef object log1p_(TensorCore tensor):
    return unary_(tensor, ops.OP_LOG1P)


cdef object expm1_(TensorCore tensor):
    return unary_(tensor, ops.OP_EXPM1)


cdef object rsqrt_(TensorCore tensor):
    return unary_(tensor, ops.OP_RSQRT)


cdef object tan_(TensorCore tensor):
    return unary_(tensor, ops.OP_TAN)


cdef object atan_(TensorCore tensor):
    return unary_(tensor, ops.OP_ATAN)


cdef object asin_(TensorCore tensor):
    return unary_(tensor, ops.OP_ASIN)


cdef object acos_(TensorCore tensor):
    return unary_(tensor, ops.OP_ACOS)


cdef object sinh_(TensorCore tensor):
    return unary_(tensor, ops.OP_SINH)


cdef object cosh_(TensorCore tensor):
    return unary_(tensor, ops.OP_COSH)


cdef object log2_(TensorCore tensor):
    return unary_(tensor, ops.OP_LOG2)


cdef object log10_(TensorCore tensor):
    return unary_(tensor, ops.OP_LOG10)


cdef object exp2_(TensorCore tensor):
    return unary_(tensor, ops.OP_EXP2)


cdef object sign_(TensorCore tensor):
    return unary_(tensor, ops.OP_SIGN)


cdef object floor_(TensorCore tensor):
    return unary_(tensor, ops.OP_FLOOR)


cdef object ceil_(TensorCore tensor):
    return unary_(tensor, ops.OP_CEIL)


cdef object trunc_(TensorCore tensor):
    return unary_(tensor, ops.OP_TRUNC)


cdef object round_(TensorCore tensor, int decimals):
    if decimals == 0:
        return unary_(tensor, ops.OP_ROUND)
    return copies.copy_(tensor, rounded(tensor, decimals), False)


# --------------------------------------------------------------------------------------------
# PyTorch's named arithmetic and clamp, under the operators' rules (binary)


cdef object add_scaled(TensorCore tensor, object other, object alpha):
    return scaled(tensor, other, alpha, False, False)


cdef object sub_scaled(TensorCore tensor, object other, object alpha):
    return scaled(tensor, other, alpha, True, False)


cdef object add_scaled_(TensorCore tensor, object other, object alpha):
    return scaled(tensor, other, alpha, False, True)


cdef object sub_scaled_(TensorCore tensor, object other, object alpha):
    return scaled(tensor, other, alpha, True, True)


cdef object scaled(TensorCore tensor, object other, object alpha, bint subtract, bint inplace):
    """tensor + alpha * other, or tensor - alpha * other, as torch.add and torch.sub."""
    cdef TensorCore output
    cdef int op = ops.OP_SUB if subtract else ops.OP_ADD
    name = ("sub_" if inplace else "sub") if subtract else ("add_" if inplace else "add")
    if PyLong_CheckExact(alpha) and alpha == 1:  # binary()'s, whichever path computes it
        quick = quick_binary(tensor, other, op, False, inplace, name)
        if quick is not None:
            return quick
    if tensor.dtype_object.name == "bool" and alpha == 1 and not isinstance(alpha, bool):
        # Bool arithmetic's own promotion (bool_binary); another alpha is refused below.
        return binary(tensor, other, op, False, inplace, name)
    cdef DtypeCore common
    if isinstance(other, TensorCore) and \
            (<TensorCore>other).dtype_object is not tensor.dtype_object:
        # Mixed dtypes: alpha * other in the dtype the operands promote to, then the sum or
        # difference as the operators compute it (mixed_binary).
        common = result_type(tensor, other)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
            raise TypeError(f"{name}: alpha must be an int or float, got {alpha!r:.200}")
        if isinstance(alpha, float) and not common.floating:
            raise TypeError(f"{name}: alpha must be an int for a {common.name} result, got "
                            f"{alpha!r} (a float alpha needs floating-point operands, as in "
                            "PyTorch)")
        if alpha != 1:
            other = binary(<TensorCore>copies.to(<TensorCore>other, None, common, False, False),
                           alpha, ops.OP_MUL, False, False, name)
        return binary(tensor, other, op, False, inplace, name)
    cdef DtypeCore result_dtype = arithmetic_dtype(tensor, other, op, inplace, name)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"{name}: alpha must be an int or float, got {alpha!r:.200}")
    scalar_operand_arg(alpha, name, "alpha")
    if isinstance(alpha, float) and not result_dtype.floating:
        raise TypeError(f"{name}: alpha must be an int for a {result_dtype.name} result, got "
                        f"{alpha!r} (a float alpha needs floating-point operands, as in "
                        "PyTorch)")
    if inplace and tracked(tensor, other):  # recorded: the result of a copy, copied in
        tensor.c_check_rebase(name)
        return copies.rebased(tensor, scaled(<TensorCore>copies.clone(tensor), other, alpha,
                                             subtract, False))
    # The paths through binary() count an in-place change there; the others below.
    if not isinstance(other, TensorCore):
        return binary(tensor, other * alpha, op, False, inplace, name)
    if alpha == 1:
        return binary(tensor, other, op, False, inplace, name)
    scale = -alpha if subtract else alpha
    if tensor.device_index == CPU:
        if inplace:
            tensor.c_mark_modified(name, other)
        with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
            values = opmath(tensor) + scale * opmath(other)
        result = cpu_result(tensor, values, result_dtype, inplace)
        return scaled_result(tensor, result, other, scale, inplace)
    if (<TensorCore>other).sizes != tensor.sizes:  # broadcast: the scaled copy, then the sum
        return binary(tensor, binary(<TensorCore>other, scale, ops.OP_MUL, False, False, name),
                      ops.OP_ADD, False, inplace, name)
    if inplace:
        tensor.c_mark_modified(name, other)
    left, right = copies.contiguous(tensor), copies.contiguous(other)
    output = output_for(tensor, result_dtype, inplace)
    device_ops.add_scaled(tensor.device_index, result_dtype, (<TensorCore>left).data,
                          (<TensorCore>right).data, scale, output.data, tensor.element_count,
                          current_stream(tensor.device_index))
    return scaled_result(tensor, finish(tensor, output, inplace), other, scale, inplace)


cdef object scaled_result(TensorCore tensor, object output, object other, object scale, bint inplace):
    """output of tensor + scale * other, on the tape when the operands are."""
    if inplace or not tracked(tensor, other) or not (<TensorCore>output).dtype_object.floating:
        return output
    return recorded(output, ops.OP_ADD_SCALED, (tensor, other), (), scale)


# Note [Compound updates]
# addcmul, addcdiv and lerp, as PyTorch's, the updates of optimisers (Adam's addcmul_ and
# addcdiv_, moving averages by lerp_): the product or quotient of tensor1 and tensor2, or the
# step end - self (times a tensor weight), then add() with alpha=value (or the scalar weight),
# so broadcasting, type promotion, the in-place rules (a result of the tensor's shape and dtype)
# and autograd are add's. They run as two or three kernels where PyTorch's are one. A float
# value with integer tensors is refused, as add() refuses a float alpha (PyTorch's addcmul
# truncates the product instead).
cdef object addcmul(TensorCore tensor, object tensor1, object tensor2, object value):
    return compound(tensor, tensor1, tensor2, value, ops.OP_MUL, False)


cdef object addcmul_(TensorCore tensor, object tensor1, object tensor2, object value):
    return compound(tensor, tensor1, tensor2, value, ops.OP_MUL, True)


cdef object addcdiv(TensorCore tensor, object tensor1, object tensor2, object value):
    return compound(tensor, tensor1, tensor2, value, ops.OP_DIV, False)


cdef object addcdiv_(TensorCore tensor, object tensor1, object tensor2, object value):
    return compound(tensor, tensor1, tensor2, value, ops.OP_DIV, True)


cdef object compound(TensorCore tensor, object tensor1, object tensor2, object value, int op,
                     bint inplace):
    name = ("addcmul" if op == ops.OP_MUL else "addcdiv") + ("_" if inplace else "")
    cdef TensorCore first = own_tensor_arg(tensor1, "tensor1")
    cdef TensorCore second = own_tensor_arg(tensor2, "tensor2")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: value must be an int or float, got {errors.shown(value)}")
    scalar_operand_arg(value, name, "value")
    if op == ops.OP_DIV and not first.dtype_object.floating and \
            not second.dtype_object.floating:  # PyTorch's words
        raise DtypeError("Integer division with addcdiv is no longer supported, and in a future "
                         "release addcdiv will perform a true division of tensor1 and tensor2. "
                         "Use (input + value * tensor1 / tensor2) with a floating-point tensor1 "
                         "or tensor2.")
    term = binary(first, second, op, False, False, name)
    cdef DtypeCore common = result_type(tensor, term)
    if isinstance(value, float) and not common.floating:
        raise TypeError(f"{name}: value must be an int for {common.name} tensors, got "
                        f"{value!r} (as add()'s alpha)")
    return scaled(tensor, term, value, False, inplace)


cdef object lerp(TensorCore tensor, object end, object weight):
    return interpolated(tensor, end, weight, False)


cdef object lerp_(TensorCore tensor, object end, object weight):
    return interpolated(tensor, end, weight, True)


cdef object interpolated(TensorCore tensor, object end, object weight, bint inplace):
    """tensor + weight * (end - tensor) (Note [Compound updates])."""
    name = "lerp_" if inplace else "lerp"
    cdef TensorCore target = own_tensor_arg(end, "end")
    cdef DtypeCore dtype = tensor.dtype_object
    if not dtype.floating:  # PyTorch: "lerp_kernel_scalar" not implemented for 'Long'
        raise DtypeError(f"{name}: needs a floating-point tensor, got {dtype.name}")
    for argument, value in (("end", target), ("weight", weight)):
        if isinstance(value, TensorCore) and (<TensorCore>value).dtype_object is not dtype:
            raise DtypeError(f"expected dtype {dtype.name} for `{argument}` but got dtype "
                             f"{(<TensorCore>value).dtype_object.name}")
    if not isinstance(weight, TensorCore):
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise TypeError(f"{name}: weight must be a float or a tensor, got "
                            f"{errors.shown(weight)}")
        scalar_operand_arg(weight, name, "weight")
    step = binary(target, tensor, ops.OP_SUB, False, False, name)
    if isinstance(weight, TensorCore):
        return scaled(tensor, binary(<TensorCore>step, weight, ops.OP_MUL, False, False, name),
                      1, False, inplace)
    return scaled(tensor, step, float(weight), False, inplace)


cdef object div(TensorCore tensor, object other, object rounding_mode):
    return binary(tensor, other, division_op(rounding_mode, "div"), False, False, "div")


cdef object div_(TensorCore tensor, object other, object rounding_mode):
    return binary(tensor, other, division_op(rounding_mode, "div_"), False, True, "div_")


cdef object clamp(TensorCore tensor, object min, object max):
    return clamp_bounds(tensor, min, max, False)


cdef object clamp_(TensorCore tensor, object min, object max):
    return clamp_bounds(tensor, min, max, True)


cdef object clamp_bounds(TensorCore tensor, object low, object high, bint inplace):
    """min(max(tensor, low), high) as torch.clamp; a bound is a tensor, a scalar or None."""
    cdef TensorCore output
    name = "clamp_" if inplace else "clamp"
    if low is None and high is None:
        raise ValueError(f"{name}: at least one of min and max must not be None")
    if tensor.dtype_object.name == "bool":
        return clamp_bool(tensor, low, high, inplace, name)
    cdef DtypeCore result_dtype = tensor.dtype_object
    sizes = tensor.sizes
    for argument, bound in (("min", low), ("max", high)):
        if isinstance(bound, TensorCore):
            check_device_and_dtype(tensor, bound, f"{name}: {argument}")
            sizes = broadcast_shape(sizes, (<TensorCore>bound).sizes, name)
        elif bound is not None and not is_scalar(bound):
            raise TypeError(f"{name}: {argument} must be a tensor, a Python scalar or None, "
                            f"got {type(bound).__name__}")
        else:
            if bound is not None:
                scalar_operand_arg(bound, name, argument)
            result_dtype = float32_if_float(result_dtype, bound)
    if inplace:
        check_in_place(tensor, result_dtype, name)
        if sizes != tensor.sizes:
            raise ShapeError(f"{name}: output with shape {list(tensor.sizes)} doesn't match "
                             f"the broadcast shape {list(sizes)}")
        if tracked(tensor, low, high):  # recorded: the result of a copy, copied in
            tensor.c_check_rebase(name)
            return copies.rebased(tensor, clamp_bounds(<TensorCore>copies.clone(tensor), low,
                                                       high, False))
        tensor.c_mark_modified(name, low if isinstance(low, TensorCore) else high)
    source = copies.to(tensor, None, result_dtype, False, False)
    bounds = [copies.to(<TensorCore>bound, None, result_dtype, False, False)
              if isinstance(bound, TensorCore) else bound for bound in (low, high)]
    if tensor.device_index == CPU:
        values = opmath(source)
        if low is not None:
            values = np().maximum(values, opmath(bounds[0]) if isinstance(low, TensorCore)
                                  else low)
        if high is not None:
            values = np().minimum(values, opmath(bounds[1]) if isinstance(high, TensorCore)
                                  else high)
        return clamp_result(tensor, cpu_result(tensor, values, result_dtype, inplace), low,
                            high, inplace)
    tensor_bounds = [bound for bound in bounds if isinstance(bound, TensorCore)]
    if sizes == tensor.sizes and all(reads_directly(bound, sizes) for bound in tensor_bounds):
        source = copies.contiguous(source)
        output = output_for(tensor, result_dtype, inplace)
        device_ops.clamp(tensor.device_index, result_dtype, (<TensorCore>source).data,
                         (<TensorCore>bounds[0]).data if isinstance(low, TensorCore) else 0,
                         (<TensorCore>bounds[1]).data if isinstance(high, TensorCore) else 0,
                         None if isinstance(low, TensorCore) else low,
                         None if isinstance(high, TensorCore) else high,
                         output.data, tensor.element_count, current_stream(tensor.device_index))
    else:  # broadcast or strided operands, read in place
        output = tensor if inplace and is_contiguous(tensor) else \
            new_empty(sizes, result_dtype, tensor.device_index)
        no_strides = (0,) * len(sizes)
        device_ops.clamp_strided(
            tensor.device_index, result_dtype, (<TensorCore>source).data,
            broadcast_strides(source, sizes),
            (<TensorCore>bounds[0]).data if isinstance(low, TensorCore) else 0,
            broadcast_strides(bounds[0], sizes) if isinstance(low, TensorCore) else no_strides,
            (<TensorCore>bounds[1]).data if isinstance(high, TensorCore) else 0,
            broadcast_strides(bounds[1], sizes) if isinstance(high, TensorCore)
            else no_strides, None if isinstance(low, TensorCore) else low,
            None if isinstance(high, TensorCore) else high, output.data, sizes,
            current_stream(tensor.device_index))
    return clamp_result(tensor, finish(tensor, output, inplace), low, high, inplace)


cdef object clamp_bool(TensorCore tensor, object low, object high, bint inplace, str name):
    """clamp of a bool tensor by PyTorch's promotion: a float bound gives float32, an int
    bound int64; one bool tensor bound keeps bool; bool scalar bounds alone, or two bool
    tensor bounds, are refused (PyTorch has no such kernels for Bool). Computed in int64 or
    float32."""
    bounds = [bound for bound in (low, high) if bound is not None]
    for argument, bound in (("min", low), ("max", high)):
        if isinstance(bound, TensorCore):
            check_device_and_dtype(tensor, bound, f"{name}: {argument}")
        elif bound is not None and not is_scalar(bound):
            raise TypeError(f"{name}: {argument} must be a tensor, a Python scalar or None, "
                            f"got {type(bound).__name__}")
    if any(isinstance(bound, float) for bound in bounds):
        result_dtype = dtypes.named_dtype("float32")
    elif any(isinstance(bound, int) and not isinstance(bound, bool) for bound in bounds):
        result_dtype = dtypes.named_dtype("int64")
    elif all(isinstance(bound, TensorCore) for bound in bounds) and len(bounds) == 1:
        result_dtype = tensor.dtype_object  # PyTorch's clamp_min / clamp_max take bool
    else:
        raise BoolNotImplementedError(f"{name}: clamp with bool scalar bounds, or two bool "
                                      "tensor bounds, is not implemented for 'Bool' tensors "
                                      "(as in PyTorch)")
    if inplace:
        check_cast(result_dtype, tensor.dtype_object, name)
    compute = dtypes.named_dtype("int64") if result_dtype is tensor.dtype_object \
        else result_dtype
    converted = [copies.to(<TensorCore>bound, None, compute, False, False)
                 if isinstance(bound, TensorCore) else
                 (int(bound) if isinstance(bound, bool) else bound) for bound in (low, high)]
    result = clamp_bounds(<TensorCore>copies.to(tensor, None, compute, False, False),
                          converted[0], converted[1], False)
    if result_dtype is not compute:
        result = copies.to(<TensorCore>result, None, result_dtype, False, False)
    if inplace:
        tensor.c_mark_modified(name)
        copy_into(tensor, result, False)
        return tensor
    return result


cdef object clamp_result(TensorCore tensor, object output, object low, object high, bint inplace):
    """output of clamp(tensor, low, high), on the tape when the operands are."""
    if inplace or not tracked(tensor, low, high) or \
            not (<TensorCore>output).dtype_object.floating:
        return output
    return recorded(output, ops.OP_CLAMP, (tensor, low, high), (tensor, low, high), None)


cdef TensorCore output_for(TensorCore tensor, DtypeCore dtype, bint inplace):
    """Where a CUDA result is written: tensor in place when contiguous, else a new tensor."""
    if inplace and is_contiguous(tensor):
        return tensor
    return new_empty(tensor.sizes, dtype, tensor.device_index)


cdef object finish(TensorCore tensor, TensorCore output, bint inplace):
    """The result of an operation written to output (see output_for)."""
    if inplace and output is not tensor:
        copy_on_device(tensor, output)
        return tensor
    return output


# masked_fill(mask, value), as PyTorch's: value where mask is True, the tensor's own elements
# elsewhere, in the tensor's dtype (a float into an integer tensor truncates, as PyTorch's; a
# value the dtype cannot hold is refused, Note [Values that fit]). where() computes it, so it
# captures wherever where() does, and its gradient is where's: the tensor's where mask is
# False, a 0-d value tensor's the sum where it is True.
cdef object masked_fill(TensorCore tensor, object mask, object value):
    return where(mask, masked_fill_value(tensor, mask, value, "masked_fill"), tensor)


cdef object masked_fill_(TensorCore tensor, object mask, object value):
    filler = masked_fill_value(tensor, mask, value, "masked_fill_")
    shape = broadcast_shape(tensor.sizes, (<TensorCore>mask).sizes, "masked_fill_")
    if shape != tensor.sizes:
        raise ShapeError(f"masked_fill_: output with shape {list(tensor.sizes)} doesn't match "
                         f"the broadcast shape {list(shape)}")
    return copies.copy_(tensor, where(mask, filler, tensor), False)


cdef object masked_fill_value(TensorCore tensor, object mask, object value, str name):
    """value as masked_fill fills it: a Python scalar converted to the tensor's dtype, or a 0-d
    tensor of it on the tensor's device; mask checked to be a bool tensor."""
    if is_scalar(value):
        scalar_operand_arg(value, name, "value")
    if not isinstance(mask, TensorCore) or (<TensorCore>mask).dtype_object.code != CODE_BOOL:
        got = f"a {(<TensorCore>mask).dtype_object.name} tensor" \
            if isinstance(mask, TensorCore) else type(mask).__name__
        raise TypeError(f"{name}: mask must be a bool tensor (masked_fill only supports "
                        f"boolean masks, as PyTorch), got {got}")
    cdef DtypeCore dtype = tensor.dtype_object
    if isinstance(value, TensorCore):
        if (<TensorCore>value).sizes:
            raise ShapeError(f"{name}: value must be a Python scalar or a 0-dimensional "
                             f"tensor, got a tensor with {len((<TensorCore>value).sizes)} "
                             "dimension(s)")
        if (<TensorCore>value).device_index == CPU and tensor.device_index != CPU and \
                not (<TensorCore>value).grad_required:
            value = copies.item(<TensorCore>value)  # read on the host, as PyTorch's kernel
        else:
            return copies.to(<TensorCore>value, device_text(tensor.device_index), dtype, False,
                             False)
    if not is_scalar(value):
        raise TypeError(f"{name}: value must be a bool, int or float or a 0-dimensional "
                        f"tensor, got {type(value).__name__}")
    dtypes.check_scalar(value, dtype, "value")
    return bool(value) if dtype.code == CODE_BOOL else (
        float(value) if dtype.floating else int(value))


# maximum() and minimum(), as PyTorch's: elementwise, broadcast and promoted as where() does
# them, NaN from either operand (a NaN tensor is picked by isnan, a NaN other because no
# comparison with it holds); the gradient splits a tie between the operands (formulas.pyx).
cdef object maximum(TensorCore tensor, object other):
    return extreme_of(tensor, other, True)


cdef object minimum(TensorCore tensor, object other):
    return extreme_of(tensor, other, False)


cdef object extreme_of(TensorCore tensor, object other, bint largest):
    name = "maximum" if largest else "minimum"
    cdef TensorCore second = own_tensor_arg(other, "other")
    check_device(tensor, second, name)
    pick = compare(tensor, second, ops.OP_GE if largest else ops.OP_LE)
    if tensor.dtype_object.floating:
        pick = bitwise_or(<TensorCore>pick, isnan(tensor))
    output = where_values(pick, tensor, second)
    if tracked(tensor, second) and (<TensorCore>output).dtype_object.floating:
        return recorded(output, ops.OP_MAXIMUM if largest else ops.OP_MINIMUM,
                        (tensor, second), (tensor, second))
    return output


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
        check_device(input, other, "where: input and other")
    # PyTorch's type promotion of input and other (Note [Type promotion] in promotion.pyx);
    # each operand is converted to that dtype before the kernel.
    cdef DtypeCore result_dtype = result_type(input, other)
    operands = [copies.to(<TensorCore>value, None, result_dtype, False, False)
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




# clamp_min(), clamp_max() and their in-place forms: clamp() with one bound, as PyTorch's.
cdef object clamp_min(TensorCore tensor, object min):
    return clamp(tensor, bound_arg(min, "min"), None)


cdef object clamp_max(TensorCore tensor, object max):
    return clamp(tensor, None, bound_arg(max, "max"))


cdef object clamp_min_(TensorCore tensor, object min):
    return clamp_(tensor, bound_arg(min, "min"), None)


cdef object clamp_max_(TensorCore tensor, object max):
    return clamp_(tensor, None, bound_arg(max, "max"))


cdef object bound_arg(object bound, str argument):
    # the one bound these take is required, and a number or a tensor, as clamp()'s bounds
    if bound is None or isinstance(bound, bool) or \
            not isinstance(bound, (int, float, TensorCore)):
        raise TypeError(f"{argument} must be a number or a tensor, got {errors.shown(bound)}")
    return bound


# reciprocal() is 1 / x, a float for integer tensors, as PyTorch's (and its gradient -g / x**2
# is the division's).
cdef object reciprocal(TensorCore tensor):
    return binary(tensor, 1, ops.OP_DIV, True, False, "reciprocal")


cdef object reciprocal_(TensorCore tensor):
    return binary(tensor, 1, ops.OP_DIV, True, True, "reciprocal_")


# The logical operations of PyTorch: bool results of the operands' truth (nonzero), of any
# dtypes; other must be a tensor, as torch.logical_and's.
cdef object truth(object value, str argument):
    return ne(own_tensor_arg(value, argument), 0)


cdef object logical_and(TensorCore tensor, object other):
    return bitwise_and(<TensorCore>truth(tensor, "input"), truth(other, "other"))


cdef object logical_or(TensorCore tensor, object other):
    return bitwise_or(<TensorCore>truth(tensor, "input"), truth(other, "other"))


cdef object logical_xor(TensorCore tensor, object other):
    return ne(<TensorCore>truth(tensor, "input"), truth(other, "other"))


cdef object logical_not(TensorCore tensor):
    return eq(tensor, 0)


cdef object isclose(TensorCore tensor, object other, double rtol, double atol, bint equal_nan):
    """PyTorch's isclose: equal, or both NaN (with equal_nan), or finitely apart by at most
    atol + rtol * |other|; integers compared in float64."""
    cdef TensorCore b = own_tensor_arg(other, "other")
    if b.dtype_object is not tensor.dtype_object:  # PyTorch refuses mixed dtypes
        raise DtypeError(f"isclose: other's dtype {b.dtype_object.name} must be input's, "
                         f"{tensor.dtype_object.name}")
    for value, name in ((rtol, "rtol"), (atol, "atol")):
        if not value >= 0:  # PyTorch's message
            raise ValueError(f"{name} must be greater than or equal to zero, but got {value}")
    close = eq(tensor, b)
    if tensor.dtype_object.code == CODE_BOOL:
        return close
    cdef TensorCore a = tensor
    if not tensor.dtype_object.floating:
        a = <TensorCore>copies.to(tensor, None, dtypes.named_dtype("float64"), False, False)
        b = <TensorCore>copies.to(b, None, dtypes.named_dtype("float64"), False, False)
    elif equal_nan:
        close = close | (isnan(a) & isnan(b))
    error = (a - b).abs()
    return close | (isfinite(<TensorCore>error) & (error <= (b.abs() * rtol + atol)))
