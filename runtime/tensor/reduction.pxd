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
# The gradient of a softmax (log_softmax with take_log) along axis that ran on a CUDA device
# (reduction.pyx, Note [Fused softmax]): from its output and that output's gradient.
cdef object softmax_backward(TensorCore grad, TensorCore output, int axis, bint take_log)
# nll_loss on a CUDA device in one launch, recorded as one node (reduction.pyx, Note [Fused
# nll_loss]), reduction 0 none, 1 sum, 2 mean; and its node's gradient for the log-probabilities.
cdef object nll_loss(TensorCore logp, TensorCore target, object weight, int class_dim,
                     object ignore_index, int reduction)
cdef object nll_loss_backward(TensorCore grad, tuple logp_meta, tuple saved, tuple state)
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
