# sort(), argsort() and topk() (sort.pyx, Note [Sorting]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object sort(TensorCore tensor, object dim, bint descending, bint stable)
cdef object argsort(TensorCore tensor, object dim, bint descending, bint stable)
cdef object topk(TensorCore tensor, long long k, object dim, bint largest, bint sorted)
