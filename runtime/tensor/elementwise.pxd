# Elementwise operations (elementwise.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# tensor (op) other, op a binary op of ops.pxd, other a tensor or a Python scalar (reverse:
# other (op) tensor); inplace writes the result into tensor; name is the operation as errors
# name it.
cdef object binary(TensorCore tensor, object other, int op, bint reverse, bint inplace, str name)

# Tensor methods and operators (api.yaml).
cdef object add(TensorCore tensor, object other)
cdef object radd(TensorCore tensor, object other)
cdef object sub(TensorCore tensor, object other)
cdef object rsub(TensorCore tensor, object other)
cdef object mul(TensorCore tensor, object other)
cdef object rmul(TensorCore tensor, object other)
cdef object truediv(TensorCore tensor, object other)
cdef object rtruediv(TensorCore tensor, object other)
cdef object power(TensorCore tensor, object exponent)
cdef object square(TensorCore tensor)            # power(tensor, 2); bool gives int64
cdef object pow_operator(TensorCore tensor, object other)
cdef object rpow(TensorCore tensor, object base)
cdef object floordiv(TensorCore tensor, object other)
cdef object rfloordiv(TensorCore tensor, object other)
cdef object ifloordiv(TensorCore tensor, object other)
cdef object mod(TensorCore tensor, object other)
cdef object rmod(TensorCore tensor, object other)
cdef object imod(TensorCore tensor, object other)
cdef object iadd(TensorCore tensor, object other)
cdef object isub(TensorCore tensor, object other)
cdef object imul(TensorCore tensor, object other)
cdef object itruediv(TensorCore tensor, object other)
cdef object eq(TensorCore tensor, object other)
cdef object ne(TensorCore tensor, object other)
cdef object lt(TensorCore tensor, object other)
cdef object le(TensorCore tensor, object other)
cdef object gt(TensorCore tensor, object other)
cdef object ge(TensorCore tensor, object other)
cdef object neg(TensorCore tensor)
cdef object absolute(TensorCore tensor)
cdef object relu(TensorCore tensor)
cdef object sin(TensorCore tensor)
cdef object cos(TensorCore tensor)
cdef object exp(TensorCore tensor)
# The top-level forms (tensorplay.exp, tensorplay.relu), input checked to be a tensor.
cdef object exp_function(object input)
cdef object relu_function(object input)
cdef object sqrt(TensorCore tensor)
cdef object log(TensorCore tensor)
cdef object add_scaled(TensorCore tensor, object other, object alpha)
cdef object sub_scaled(TensorCore tensor, object other, object alpha)
cdef object add_scaled_(TensorCore tensor, object other, object alpha)
cdef object sub_scaled_(TensorCore tensor, object other, object alpha)
cdef object div(TensorCore tensor, object other, object rounding_mode)
cdef object div_(TensorCore tensor, object other, object rounding_mode)
cdef object clamp(TensorCore tensor, object min, object max)
cdef object clamp_(TensorCore tensor, object min, object max)

# tensorplay.where (api.yaml).
cdef object where(object condition, object input, object other)
