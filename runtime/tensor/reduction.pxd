# Reductions (reduction.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# Tensor methods and operators (api.yaml).
cdef object sum_over(TensorCore tensor, object dim, bint keepdim)
cdef object mean_over(TensorCore tensor, object dim, bint keepdim)
cdef object maximum(TensorCore tensor)
cdef object minimum(TensorCore tensor)
