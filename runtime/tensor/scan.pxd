# cumsum() and cumprod() (scan.pyx, Note [Cumulative sums and products]).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef object cumsum(TensorCore tensor, object dim, object dtype)
cdef object cumprod(TensorCore tensor, object dim, object dtype)
cdef object cumsum_(TensorCore tensor, object dim, object dtype)
cdef object cumprod_(TensorCore tensor, object dim, object dtype)
# torch.prod: cumprod's last element along dim (None: of the flattened tensor, 0-d).
cdef object prod(TensorCore tensor, object dim, bint keepdim, object dtype)
# The gradients (formulas.pyx): cumsum's, and cumprod's of x saved unchanged.
cdef object cumsum_gradient(TensorCore grad, int axis)
cdef object cumprod_gradient(TensorCore grad, TensorCore x, int axis)
# cummax() and cummin() (Note [Running extremes]): the named tuples (values, indices).
cdef object cummax(TensorCore tensor, object dim)
cdef object cummin(TensorCore tensor, object dim)
# logcumsumexp() (Note [Running log-sum-exp]).
cdef object logcumsumexp(TensorCore tensor, object dim)
