# nonzero(), argwhere(), masked_select(), x[mask] (selection.pyx, Note [Selection by value]),
# bincount() (Note [Counting]), unique() and unique_consecutive() (Note [Unique elements]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object nonzero(TensorCore tensor, bint as_tuple)
cdef object argwhere(TensorCore tensor)
cdef object masked_select(TensorCore tensor, object mask)
# x[key] (Tensor.__getitem__): a boolean mask here, other keys copies.getitem's
cdef object getitem(TensorCore tensor, object key)
# x[key] = value (Tensor.__setitem__): an integer index here, other keys copies.setitem's
cdef object setitem(TensorCore tensor, object key, object value)
cdef object bincount(TensorCore tensor, object weights, long long minlength)
cdef object unique(TensorCore tensor, bint sorted, bint return_inverse, bint return_counts,
                   object dim)
cdef object unique_consecutive(TensorCore tensor, bint return_inverse, bint return_counts,
                               object dim)
