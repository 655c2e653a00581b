# sort(), argsort(), topk() and the order statistics (sort.pyx, Notes [Sorting] and [Order
# statistics]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object sort(TensorCore tensor, object dim, bint descending, bint stable)
cdef object argsort(TensorCore tensor, object dim, bint descending, bint stable)
cdef object topk(TensorCore tensor, long long k, object dim, bint largest, bint sorted)
cdef object kthvalue(TensorCore tensor, long long k, object dim, bint keepdim)
cdef object mode(TensorCore tensor, object dim, bint keepdim)
# True where an element starts a run of equal elements along axis (mode, unique_consecutive).
cdef object run_starts(TensorCore tensor, int axis)
cdef object median(TensorCore tensor, object dim, bint keepdim)
cdef object nanmedian(TensorCore tensor, object dim, bint keepdim)
cdef object quantile(TensorCore tensor, object q, object dim, bint keepdim, object interpolation)
cdef object nanquantile(TensorCore tensor, object q, object dim, bint keepdim,
                        object interpolation)
