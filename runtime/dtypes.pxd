cdef class DtypeCore:
    cdef readonly str name
    cdef readonly int itemsize
    cdef readonly bint floating
    cdef readonly bint signed
    cdef str repr_text(self)
    cdef str reduce(self)
    cdef int itemsize_value(self)
    cdef bint is_floating_point_value(self)
    cdef bint is_signed_value(self)

cdef object named_dtype(str name)
cdef list all_dtypes()
