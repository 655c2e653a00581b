cdef enum:
    DTYPE_COUNT = 10         # the entries of DTYPE_TABLE (dtypes.pyx checks at import)
    CODE_BOOL = 0            # bool's code: DTYPE_TABLE's first entry (checked there too)

cdef class DtypeCore:
    cdef readonly str name
    # Its position in DTYPE_TABLE, for C-level dispatch: the hot paths test CODE_BOOL instead of
    # comparing names, and index per-dtype tables of kernels (device_ops.pyx). -1 for an object
    # not made by named_dtype.
    cdef int code
    cdef readonly int itemsize
    cdef readonly bint floating
    cdef readonly bint signed
    cdef readonly str numpy_name               # the numpy dtype holding the bits on the CPU
    cdef readonly int dlpack_code              # DLDataTypeCode
    cdef readonly str typestr                  # __cuda_array_interface__; "" when it has none
    cdef readonly str kernel_type              # the C type kernels store it as
    cdef str repr_text(self)
    cdef str reduce(self)
    cdef int itemsize_value(self)
    cdef bint is_floating_point_value(self)
    cdef bint is_signed_value(self)

cdef object named_dtype(str name)
# float32: the dtype of floats given without one (tensorplay.get_default_dtype()).
cdef object get_default_dtype()
# The dtype a second name stands for, as PyTorch's aliases (tensorplay.float is float32).
cdef object aliased_dtype(str alias)
cdef list all_dtypes()
cdef object dtype_from_numpy(object numpy_dtype)     # None when not representable
cdef object dtype_from_dlpack(int code, int bits)     # None when not representable

# Values against their dtype (dtypes.pyx, Note [Values that fit]): a ValueError naming the
# argument, the value and the dtype when the dtype cannot hold it.
cdef int check_scalar(object value, DtypeCore dtype, str argument) except -1
cdef int check_values(object values, DtypeCore dtype, str argument) except -1
# The largest finite value of a floating dtype, and as error messages write it ("65504").
cdef double largest_finite(DtypeCore dtype)
cdef str largest_text(DtypeCore dtype)
