# cython: language_level=3
"""Element types. One object per dtype, created on first use as the public tensorplay.dtype."""
from libc.math cimport INFINITY

from tensorplay._runtime.base cimport errors, public

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

if len(DTYPE_TABLE) != DTYPE_COUNT or next(iter(DTYPE_TABLE)) != "bool":
    raise RuntimeError("dtypes.pxd's DTYPE_COUNT and CODE_BOOL must match DTYPE_TABLE: "
                       f"{len(DTYPE_TABLE)} entries, the first {next(iter(DTYPE_TABLE))!r}")

cdef dict _dtypes = {}


cdef class DtypeCore:
    def __cinit__(self, *args, **kwargs):
        self.name = ""
        self.code = -1

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
        dtype.code = list(DTYPE_TABLE).index(name)
        (dtype.itemsize, dtype.floating, dtype.signed, dtype.numpy_name, dtype.dlpack_code,
         dtype.typestr, dtype.kernel_type) = DTYPE_TABLE[name]
        _dtypes[name] = dtype
    return dtype


# PyTorch's second names of dtypes (torch.float is torch.float32, the same object); complex
# ones (cfloat) are left out with the complex dtypes.
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                 "int": "int32", "short": "int16"}


cdef object aliased_dtype(str alias):
    if alias not in DTYPE_ALIASES:
        raise ValueError(f"unknown dtype alias {alias!r}; expected one of "
                         f"{', '.join(DTYPE_ALIASES)}")
    return named_dtype(DTYPE_ALIASES[alias])


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
    # asarray: for one value (a 0-d array) the arithmetic gives a numpy scalar, which the NaN
    # assignment below could not index.
    rounded = numpy.asarray((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(numpy.uint16)
    nan = numpy.isnan(values)
    if nan.any():
        rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(numpy.uint16)
    return rounded


# --------------------------------------------------------------------------------------------
# Values against their dtype
#
# Note [Values that fit]
# A value stored into a tensor must be one its dtype holds: an integer dtype holds finite values
# whose whole part (the conversion truncates toward zero, as PyTorch's does) lies in its range;
# a floating dtype holds NaN and the infinities, and finite values below the point where
# rounding gives infinity, half a step past its largest value (IEEE 754 round to nearest even);
# bool takes any value's truthiness, as PyTorch does. The bounds are Python integers, so the
# comparison is exact for any int a user writes.

# Floating dtypes: (mantissa bits, largest exponent).
FLOAT_FORMATS = {"float16": (10, 15), "bfloat16": (7, 127), "float32": (23, 127),
                 "float64": (52, 1023)}


cdef object integer_limits(DtypeCore dtype):
    """(lowest, highest) of an integer dtype."""
    bits = 8 * dtype.itemsize
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.signed else (0, (1 << bits) - 1)


cdef object rounds_to_infinity(DtypeCore dtype):
    """The least magnitude a floating dtype rounds to infinity, exactly (a Python int)."""
    mantissa, exponent = FLOAT_FORMATS[dtype.name]
    return ((1 << (mantissa + 2)) - 1) << (exponent - mantissa - 1)


cdef double largest_finite(DtypeCore dtype):
    """The largest finite value of a floating dtype (exact in a double)."""
    mantissa, exponent = FLOAT_FORMATS[dtype.name]
    return float(((1 << (mantissa + 1)) - 1) << (exponent - mantissa))


cdef str largest_text(DtypeCore dtype):
    return f"{largest_finite(dtype):.6g}"


cdef int check_scalar(object value, DtypeCore dtype, str argument) except -1:
    """Refuse a bool, int or float that dtype cannot hold (Note [Values that fit])."""
    if dtype.name == "bool" or isinstance(value, bool):
        return 0
    if dtype.floating:
        if isinstance(value, float) and value != value or value in (INFINITY, -INFINITY):
            return 0
        if abs(value) >= rounds_to_infinity(dtype):
            raise ValueError(f"{argument} {errors.shown(value)} is beyond the largest "
                             f"{dtype.name} ({largest_text(dtype)}): stored, it would become "
                             "infinity")
        return 0
    if isinstance(value, float) and (value != value or value in (INFINITY, -INFINITY)):
        raise ValueError(f"{argument} {value} cannot be stored in {dtype.name}, an integer "
                         "dtype: it is not a finite number")
    low, high = integer_limits(dtype)
    if not low <= int(value) <= high:
        raise ValueError(f"{argument} {errors.shown(value)} does not fit {dtype.name}, which "
                         f"holds {low} to {high}")
    return 0


cdef int check_values(object values, DtypeCore dtype, str argument) except -1:
    """check_scalar() for every element of a numpy array of bool, int or float."""
    if dtype.name == "bool" or values.size == 0 or values.dtype.kind == "b":
        return 0
    import numpy
    if dtype.floating:
        if values.dtype.kind == "f":
            values = values[numpy.isfinite(values)]
            if values.size == 0:
                return 0
        extreme = max(abs(values.min().item()), abs(values.max().item()))
        return check_scalar(extreme, dtype, argument)
    if values.dtype.kind == "f" and not numpy.isfinite(values).all():
        raise ValueError(f"{argument} holds values that are not finite numbers, which "
                         f"{dtype.name}, an integer dtype, cannot store")
    check_scalar(values.min().item(), dtype, argument)
    check_scalar(values.max().item(), dtype, argument)
    return 0


cdef object get_default_dtype():
    # Fixed: set_default_dtype is not offered (docs/design.md, "What is not offered yet").
    return named_dtype("float32")
