# gather() and the scatters (scatter_gather.pyx, Note [Gather and scatter]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object gather(TensorCore tensor, object dim, object index)
cdef object scatter(TensorCore tensor, object dim, object index, object src)
cdef object scatter_(TensorCore tensor, object dim, object index, object src)
cdef object scatter_add(TensorCore tensor, object dim, object index, object src)
cdef object scatter_add_(TensorCore tensor, object dim, object index, object src)
cdef object index_add(TensorCore tensor, object dim, object index, object source, object alpha)
cdef object index_add_(TensorCore tensor, object dim, object index, object source,
                       object alpha)
cdef object index_copy(TensorCore tensor, object dim, object index, object source)
cdef object index_copy_(TensorCore tensor, object dim, object index, object source)
# gather's values (arguments checked, index int64) and scatter_add into a contiguous target of
# its own memory, off the tape: the gradients' (formulas.pyx).
cdef TensorCore gathered(TensorCore tensor, int axis, TensorCore index)
cdef int scatter_into(TensorCore target, int axis, TensorCore index, TensorCore source,
                      bint add) except -1
