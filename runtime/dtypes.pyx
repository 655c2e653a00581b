# cython: language_level=3
"""Element types. One object per dtype, created on first use as the public tensorplay.dtype."""
from tensorplay._runtime cimport public

# name: (itemsize, floating point, signed), in the order users see them listed.
DTYPE_TABLE = {
    "bool": (1, False, False),
    "uint8": (1, False, False),
    "int8": (1, False, True),
    "int16": (2, False, True),
    "int32": (4, False, True),
    "int64": (8, False, True),
    "float16": (2, True, True),
    "bfloat16": (2, True, True),
    "float32": (4, True, True),
    "float64": (8, True, True),
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
        dtype.itemsize, dtype.floating, dtype.signed = DTYPE_TABLE[name]
        _dtypes[name] = dtype
    return dtype


cdef list all_dtypes():
    return [named_dtype(name) for name in DTYPE_TABLE]
