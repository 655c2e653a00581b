# The optimisers (optim.pyx; api.yaml: tensorplay.optim).
from tensorplay._runtime.tensor.core cimport TensorCore

# tensor.lerp_(end, weight) rounded as PyTorch's kernel rounds it (its two branches).
cdef int lerp_rounded_(TensorCore tensor, TensorCore end, double weight) except -1
