# nonzero(), argwhere(), masked_select() (selection.pyx, Note [Selection by value]) and
# bincount() (Note [Counting]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object nonzero(TensorCore tensor, bint as_tuple)
cdef object argwhere(TensorCore tensor)
cdef object masked_select(TensorCore tensor, object mask)
cdef object bincount(TensorCore tensor, object weights, long long minlength)
