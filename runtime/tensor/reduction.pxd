# Reductions (reduction.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# The shape a reduction over dims leaves: those dimensions of size 1 with keepdim, else gone (of
# any per-dimension tuple: without keepdim, a tensor's strides apart from dims).
cdef tuple reduced_shape(tuple sizes, tuple dims, bint keepdim)

# Tensor methods and operators (api.yaml).
cdef object sum_over(TensorCore tensor, object dim, bint keepdim)
cdef object mean_over(TensorCore tensor, object dim, bint keepdim)
cdef object var_over(TensorCore tensor, object dim, object unbiased, bint keepdim,
                     object correction)
cdef object std_over(TensorCore tensor, object dim, object unbiased, bint keepdim,
                     object correction)
cdef object any_over(TensorCore tensor, object dim, bint keepdim)
cdef object all_over(TensorCore tensor, object dim, bint keepdim)
# softmax along dim (also tensorplay.nn.functional's).
cdef object softmax(TensorCore tensor, object dim)
cdef object log_softmax(TensorCore tensor, object dim)
cdef object logsumexp(TensorCore tensor, object dim, bint keepdim)
cdef object norm(TensorCore tensor, object p, object dim, bint keepdim)
cdef object maximum(TensorCore tensor)
cdef object minimum(TensorCore tensor)
# x.max(dim, keepdim) / x.min(...): a 0-d tensor for dim None, else (values, indices) as
# torch.return_types.max; argmax / argmin: the int64 indices (dim None: of the flattened tensor).
cdef object max_over(TensorCore tensor, object dim, bint keepdim)
cdef object min_over(TensorCore tensor, object dim, bint keepdim)
# torch.amax / amin: the extreme over dim (None or () for all), the gradient shared among ties.
cdef object amax(TensorCore tensor, object dim, bint keepdim)
cdef object amin(TensorCore tensor, object dim, bint keepdim)
cdef object argmax(TensorCore tensor, object dim, bint keepdim)
cdef object argmin(TensorCore tensor, object dim, bint keepdim)
# tensorplay.max / min / argmax / argmin / sum / mean.
# How many elements are not zero, over dim (None: all), as int64 (torch.count_nonzero).
cdef object count_nonzero(TensorCore tensor, object dim)
# torch.var_mean and std_mean: (var_over(...), mean_over(...)) of input, checked a tensor.
cdef tuple var_mean(object input, object dim, object unbiased, bint keepdim, object correction)
cdef tuple std_mean(object input, object dim, object unbiased, bint keepdim, object correction)
