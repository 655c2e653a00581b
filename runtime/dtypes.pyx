# cython: language_level=3
"""Element types. One object per dtype, created on first use as the public tensorplay.dtype."""
from tensorplay._runtime cimport public

# DLPack type codes (dlpack.h DLDataTypeCode).
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_BOOL = 0, 1, 2, 4, 6

# name: (itemsize, floating point, signed, numpy storage, DLPack code, CAI typestr, kernel C
# type), in the order users see them listed. numpy has no bfloat16: its bits live in uint16 on
# the CPU, and __cuda_array_interface__ cannot describe it.
DTYPE_TABLE = {
    "bool": (1, False, False, "bool", DL_BOOL, "|b1", "bool"),
    "uint8": (1, False, False, "uint8", DL_UINT, "|u1", "unsigned char"),
    "int8": (1, False, True, "int8", DL_INT, "|i1", "signed char"),
    "int16": (2, False, True, "int16", DL_INT, "<i2", "short"),
    "int32": (4, False, True, "int32", DL_INT, "<i4", "int"),
    "int64": (8, False, True, "int64", DL_INT, "<i8", "long long"),
    "float16": (2, True, True, "float16", DL_FLOAT, "<f2", "half_bits"),
    "bfloat16": (2, True, True, "uint16", DL_BFLOAT, "", "bfloat16_bits"),
    "float32": (4, True, True, "float32", DL_FLOAT, "<f4", "float"),
    "float64": (8, True, True, "float64", DL_FLOAT, "<f8", "double"),
}

cdef dict _dtypes = {}


cdef class DtypeCore:
    def __cinit__(self, *args, **kwargs):
        self.name = ""

    def __init__(self, *args, **kwargs):
        raise TypeError("dtypes are not constructed; use the constants, e.g. tensorplay.float32")

    cdef str repr_text(self):
        return f"tensorplay.{self.name}"

    cdef str reduce(self):
        return self.name

    cdef int itemsize_value(self):
        return self.itemsize

    cdef bint is_floating_point_value(self):
        return self.floating

    cdef bint is_signed_value(self):
        return self.signed


cdef object named_dtype(str name):
    cdef DtypeCore dtype = _dtypes.get(name)
    if dtype is None:
        if name not in DTYPE_TABLE:
            raise ValueError(f"unknown dtype name {name!r}; expected one of "
                             f"{', '.join(DTYPE_TABLE)}")
        cls = public.public_class("DtypeCore", DtypeCore)
        dtype = cls.__new__(cls)
        dtype.name = name
        (dtype.itemsize, dtype.floating, dtype.signed, dtype.numpy_name, dtype.dlpack_code,
         dtype.typestr, dtype.kernel_type) = DTYPE_TABLE[name]
        _dtypes[name] = dtype
    return dtype


cdef list all_dtypes():
    return [named_dtype(name) for name in DTYPE_TABLE]


cdef object dtype_from_numpy(object numpy_dtype):
    name = str(numpy_dtype)
    return named_dtype(name) if name in DTYPE_TABLE and name != "bfloat16" else None


cdef object dtype_from_dlpack(int code, int bits):
    for name, entry in DTYPE_TABLE.items():
        if entry[4] == code and entry[0] * 8 == bits:
            return named_dtype(name)
    return None


# bfloat16 has no numpy dtype: on the CPU its bits live in uint16 and convert through float32.


def bfloat16_bits_to_float32(bits):
    """float32 values of bfloat16 bits held in a uint16 numpy array."""
    import numpy
    return (bits.astype(numpy.uint32) << 16).view(numpy.float32)


def float32_to_bfloat16_bits(values):
    """bfloat16 bits (uint16) of float values, rounded to nearest even; NaN stays NaN."""
    import numpy
    values = numpy.asarray(values, dtype=numpy.float32)
    bits = values.view(numpy.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(numpy.uint16)
    nan = numpy.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(numpy.uint16)
    return rounded
