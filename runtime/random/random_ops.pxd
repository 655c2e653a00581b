# Random ops (random_ops.pyx); the in-place Tensor methods are its Python-level functions
# uniform_, normal_ and bernoulli_, which core.pyx calls.

# Factories (api.yaml: tensorplay).
cdef object rand(tuple size, object generator, object dtype, object device, bint requires_grad)
cdef object randn(tuple size, object generator, object dtype, object device, bint requires_grad)
cdef object randint(object low, object high, object size, object generator, object dtype,
                    object device)
cdef object rand_like(object input, object generator, object dtype, object device,
                      bint requires_grad)
cdef object randn_like(object input, object generator, object dtype, object device,
                       bint requires_grad)
