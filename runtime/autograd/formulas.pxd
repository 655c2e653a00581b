# The gradient formulas (formulas.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# Zeros of (sizes, dtype, device): the gradient of an output no gradient reached.
cdef TensorCore zeros_of(tuple meta)

# The formula of each op (ops.pxd), by its code; None for an op without gradient.
cdef list by_op
