# Random ops (random_ops.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# In-place Tensor methods (api.yaml).
cdef object uniform_(TensorCore target, object low, object high, object generator)
cdef object normal_(TensorCore target, object mean, object std, object generator)
cdef object bernoulli_(TensorCore target, object p, object generator)

# Factories (api.yaml: tensorplay).
cdef object rand(tuple size, object generator, object dtype, object device, bint requires_grad)
cdef object randn(tuple size, object generator, object dtype, object device, bint requires_grad)
cdef object randint(object low, object high, object size, object generator, object dtype,
                    object device)
# Note [Permutations]: a random permutation of range(n).
cdef object randperm(object n, object generator, object dtype, object device,
                     bint requires_grad)
cdef object rand_like(object input, object generator, object dtype, object device,
                      bint requires_grad)
cdef object randn_like(object input, object generator, object dtype, object device,
                       bint requires_grad)

# tensorplay.multinomial / Tensor.multinomial (Note [Multinomial sampling]): int64 categories.
cdef object multinomial(TensorCore input, long long num_samples, bint replacement,
                        object generator)
