# Type promotion by PyTorch's rules (promotion.pyx, Note [Type promotion]).
from tensorplay._runtime.base.dtypes cimport DtypeCore

# torch.promote_types for two dtypes.
cdef DtypeCore promote_types(DtypeCore a, DtypeCore b)
# torch.can_cast: whether a result of dtype source may be stored into a target tensor.
cdef bint can_cast(DtypeCore source, DtypeCore target)
# torch.result_type of two operands, each a tensor or a Python bool, int or float.
cdef DtypeCore result_type(object a, object b)
# PyTorch's name of a dtype in its errors (Float for float32, Long for int64).
cdef str scalar_type_name(DtypeCore dtype)
# A DtypeError unless a result of dtype result can be stored in place into tensor, worded as
# PyTorch's ("result type Float can't be cast to the desired output type Long").
cdef int check_cast(DtypeCore result, DtypeCore target, str name) except -1
