# The factories (factories.pyx; api.yaml: tensorplay).
from libc.stdint cimport int64_t

from tensorplay._runtime.tensor.core cimport TensorCore

cdef object empty(tuple size, object dtype, object device, bint requires_grad)
cdef object zeros(tuple size, object dtype, object device, bint requires_grad)
cdef object ones(tuple size, object dtype, object device, bint requires_grad)
cdef object eye(object n, object m, object dtype, object device, bint requires_grad)
cdef object full(object size, object fill_value, object dtype, object device,
                 bint requires_grad)
cdef object arange(object start, object end, object step, object dtype, object device,
                   bint requires_grad)
cdef object linspace(object start, object end, int64_t steps, object dtype, object device,
                     bint requires_grad)
cdef object tensor(object data, object dtype, object device, bint requires_grad)
cdef object empty_like(object input, object dtype, object device, bint requires_grad)
cdef object zeros_like(object input, object dtype, object device, bint requires_grad)
cdef object ones_like(object input, object dtype, object device, bint requires_grad)
cdef object full_like(object input, object fill_value, object dtype, object device,
                      bint requires_grad)
cdef bint allclose(object input, object other, double rtol, double atol, bint equal_nan) except -1
cdef object as_tensor(object data, object dtype, object device)
# torch.from_numpy: a CPU tensor sharing ndarray's memory, refusing what cannot share.
cdef object from_numpy(object ndarray)
# value as our tensor (ours, or a view through __cuda_array_interface__ or DLPack), or a
# TypeError naming argument (argument[index] when index >= 0).
cdef TensorCore tensor_arg(object value, str argument, Py_ssize_t index)
# Tensor.new_*: the factories with the tensor's dtype and device where those are None.
cdef object new_empty_of(TensorCore tensor, tuple size, object dtype, object device,
                         bint requires_grad)
cdef object new_zeros_of(TensorCore tensor, tuple size, object dtype, object device,
                         bint requires_grad)
cdef object new_ones_of(TensorCore tensor, tuple size, object dtype, object device,
                        bint requires_grad)
cdef object new_full_of(TensorCore tensor, object size, object fill_value, object dtype,
                        object device, bint requires_grad)
cdef object new_tensor_of(TensorCore like, object data, object dtype, object device,
                          bint requires_grad)
cdef object tril(TensorCore tensor, long long diagonal)
cdef object triu(TensorCore tensor, long long diagonal)
cdef object tril_(TensorCore tensor, long long diagonal)
cdef object triu_(TensorCore tensor, long long diagonal)
# flip() and roll(): copies through index_select of index tensors made here (factories.pyx).
cdef object flip(TensorCore tensor, tuple dims)
cdef object flip_of(object input, object dims)       # torch.flip(input, dims)
cdef object roll(TensorCore tensor, object shifts, object dims)
