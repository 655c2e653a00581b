# Arguments and results of tensor operations, checked before there is a tensor
# (arguments.pyx). The error types (ShapeError, IntegerPowerError, BoolNotImplementedError,
# FloatingNotImplementedError, DtypeError) are its Python classes.
from libc.stdint cimport int64_t

from tensorplay._runtime.base.dtypes cimport DtypeCore

cdef enum:
    UNSPECIFIED = -2         # device argument left as None (device.tensor_device_arg)

# numpy, imported on first use.
cdef object np()

# An element count, and so each size, must fit a C int64 (1 << 63); so must a tensor's byte
# count (BYTES_LIMIT, 2**63 - 1).
cdef object ELEMENTS_LIMIT
cdef object BYTES_LIMIT

# A TypeError naming argument unless every item of values is an int (not a bool).
cdef int require_ints(tuple values, str argument) except -1
# value (a tuple or list) as a tuple; a TypeError naming argument for anything else
cdef tuple sequence_arg(object value, str argument)
# *size as ints, or one tuple/list of them (the factories' size argument), checked.
cdef tuple size_arg(tuple size, str argument)
# The shape a view or reshape of count elements asks for (*shape, as size_arg), at most one -1
# inferred.
cdef tuple view_shape(tuple shape, int64_t count)
cdef DtypeCore dtype_arg(object value, DtypeCore default, str argument)
cdef DtypeCore dtype_of_scalar(object value)
# A tensor's device argument: -1 for the CPU, a CUDA index, or default when it is None.
cdef int device_arg(object value, int default) except -3
# The shape a and b broadcast to by NumPy's rules, or a ShapeError naming what.
cdef tuple broadcast_shape(tuple a, tuple b, str what)
cdef bint is_scalar(object value)                 # a bool, int or float
cdef DtypeCore float32_if_float(DtypeCore dtype, object scalar)
# A Python int operand must fit the 64 bits a kernel takes it in.
cdef int scalar_operand_arg(object value, str name, str argument=*) except -1
# The op (ops.pxd) of torch.div's rounding_mode.
cdef int division_op(object rounding_mode, str name) except -1
# The result dtype of a reduction op of a dtype tensor (a mean refuses integers).
cdef DtypeCore reduced_dtype(DtypeCore dtype, int op)
# The dtype a floating dtype computes in: float32 for the 16-bit floats, else itself (the
# kernels' accumulate<T> in common.cu, as PyTorch's kernels accumulate).
cdef DtypeCore computed_in(DtypeCore dtype)
# A factory's dtype (or default, a dtype or its name, when dtype is None) can require grad if
# requires_grad asks it to: refused on integer and bool dtypes before anything is made.
cdef int require_grad_arg(object dtype, object default, bint requires_grad) except -1
