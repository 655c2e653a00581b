# The matrix product (linalg.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# Tensor methods and operators, and the float32 precision setting (api.yaml).
cdef object matmul(TensorCore tensor, object other)
cdef object rmatmul(TensorCore tensor, object other)
cdef object mm(TensorCore tensor, object mat2)
cdef object bmm(TensorCore tensor, object mat2)
cdef object dot(TensorCore tensor, object other)
cdef object outer(TensorCore tensor, object vec2)
# tensorplay.matmul(input, other), input checked to be a tensor.
cdef object set_float32_matmul_precision(int precision)
cdef str get_float32_matmul_precision()
