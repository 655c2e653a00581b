"""tensorplay.nn.functional: the layers and losses of tensorplay.nn as functions, PyTorch's
torch.nn.functional. The arithmetic is the runtime's (runtime/autograd/nn.pyx, Note
[Functional forms]), shared with the modules, so a function and its module give the same
numbers; this module adds PyTorch's signatures and its implicit softmax dimension."""
import tensorplay
from tensorplay._runtime.autograd.nn import (
    activated as _activated, adaptive_avg_pool2d as _adaptive_avg_pool2d,
    avg_pool2d as _avg_pool2d, batch_norm as _batch_norm,
    binary_cross_entropy as _binary_cross_entropy,
    binary_cross_entropy_with_logits as _binary_cross_entropy_with_logits,
    conv1d as _conv1d, conv2d as _conv2d, cosine_embedding_loss as _cosine_embedding_loss,
    cosine_similarity as _cosine_similarity,
    cross_entropy as _cross_entropy, dropout as _dropout, elu as _elu, embedding as _embedding,
    gelu as _gelu, group_norm as _group_norm, hardtanh as _hardtanh,
    hinge_embedding_loss as _hinge_embedding_loss,
    huber_loss as _huber_loss, implicit_dim as _implicit_dim,
    kl_div as _kl_div, l1_loss as _l1_loss, layer_norm as _layer_norm, leaky_relu as _leaky_relu,
    linear as _linear, log_softmax as _log_softmax, margin_ranking_loss as _margin_ranking_loss,
    max_pool2d as _max_pool2d, mish as _mish,
    mse_loss as _mse_loss,
    nll_loss as _nll_loss, normalize as _normalize, one_hot as _one_hot, pad as _pad,
    pairwise_distance as _pairwise_distance,
    rms_norm as _rms_norm, scaled_dot_product_attention as _scaled_dot_product_attention,
    silu as _silu, smooth_l1_loss as _smooth_l1_loss, soft_margin_loss as _soft_margin_loss,
    softmax as _softmax,
    softplus as _softplus)


def _check_tensor(value, name):
    if not isinstance(value, tensorplay.Tensor):
        raise TypeError(f"{name} must be a tensorplay.Tensor, got {type(value).__name__}")


def _check_bool(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")


def relu(input, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    if inplace:
        return input.clamp_(0, None)
    return input.relu()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    return _activated(_leaky_relu, input, inplace, negative_slope)


def silu(input, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    return _activated(_silu, input, inplace)


def mish(input, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    return _activated(_mish, input, inplace)


def elu(input, alpha=1.0, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    return _activated(_elu, input, inplace, alpha)


def softplus(input, beta=1.0, threshold=20.0):
    _check_tensor(input, "input")
    return _softplus(input, beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    _check_tensor(input, "input")
    _check_bool(inplace, "inplace")
    return _activated(_hardtanh, input, inplace, min_val, max_val)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def sigmoid(input):
    _check_tensor(input, "input")
    return input.sigmoid()


def tanh(input):
    _check_tensor(input, "input")
    return input.tanh()


def gelu(input, approximate="none"):
    _check_tensor(input, "input")
    return _gelu(input, approximate)


def linear(input, weight, bias=None):
    _check_tensor(input, "input")
    _check_tensor(weight, "weight")
    if bias is not None:
        _check_tensor(bias, "bias")
    return _linear(input, weight, bias)


def dropout(input, p=0.5, training=True, inplace=False):
    _check_tensor(input, "input")
    _check_bool(training, "training")
    _check_bool(inplace, "inplace")
    output = _dropout(input, p, training)
    if inplace and output is not input:
        return input.copy_(output)
    return output


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    _check_tensor(input, "input")
    if not isinstance(normalized_shape, (tuple, list)):  # an int is nn.LayerNorm's alone
        raise TypeError(f"layer_norm(): normalized_shape must be a tuple or list of ints, not "
                        f"{type(normalized_shape).__name__}")
    for value, name in ((weight, "weight"), (bias, "bias")):
        if value is not None:
            _check_tensor(value, name)
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def softmax(input, dim=None):
    _check_tensor(input, "input")
    return _softmax(input, _implicit_dim(input, dim, "softmax"))


def log_softmax(input, dim=None):
    _check_tensor(input, "input")
    return _log_softmax(input, _implicit_dim(input, dim, "log_softmax"))


def mse_loss(input, target, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _mse_loss(input, target, reduction)


def l1_loss(input, target, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _l1_loss(input, target, reduction)


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _smooth_l1_loss(input, target, reduction, beta)


def huber_loss(input, target, reduction="mean", delta=1.0):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _huber_loss(input, target, reduction, delta)


def margin_ranking_loss(input1, input2, target, margin=0.0, reduction="mean"):
    return _margin_ranking_loss(input1, input2, target, margin, reduction)


def hinge_embedding_loss(input, target, margin=1.0, reduction="mean"):
    return _hinge_embedding_loss(input, target, margin, reduction)


def soft_margin_loss(input, target, reduction="mean"):
    return _soft_margin_loss(input, target, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, reduction="mean"):
    return _cosine_embedding_loss(input1, input2, target, margin, reduction)


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    if weight is not None:
        _check_tensor(weight, "weight")
    return _binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    for value, name in ((weight, "weight"), (pos_weight, "pos_weight")):
        if value is not None:
            _check_tensor(value, name)
    return _binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05):
    _check_tensor(input, "input")
    for value, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                        (weight, "weight"), (bias, "bias")):
        if value is not None:
            _check_tensor(value, name)
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    _check_tensor(input, "input")
    for value, name in ((weight, "weight"), (bias, "bias")):
        if value is not None:
            _check_tensor(value, name)
    return _group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    _check_tensor(input, "input")
    if not isinstance(normalized_shape, (tuple, list)):  # an int is nn.RMSNorm's alone
        raise TypeError(f"rms_norm(): normalized_shape must be a tuple or list of ints, not "
                        f"{type(normalized_shape).__name__}")
    if weight is not None:
        _check_tensor(weight, "weight")
    return _rms_norm(input, normalized_shape, weight, eps)


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                 enable_gqa):
    return _scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                         scale, enable_gqa)


def embedding(input, weight, padding_idx=None):
    _check_tensor(input, "input")
    _check_tensor(weight, "weight")
    return _embedding(input, weight, padding_idx)


def kl_div(input, target, reduction="mean", log_target=False):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _kl_div(input, target, reduction, log_target)


def pad(input, pad, mode="constant", value=None):
    _check_tensor(input, "input")
    return _pad(input, pad, mode, 0 if value is None else value)


def one_hot(tensor, num_classes=-1):
    _check_tensor(tensor, "tensor")
    return _one_hot(tensor, num_classes)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    _check_tensor(input, "input")
    return _normalize(input, p, dim, eps)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _check_convolution(input, weight, bias)
    return _conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    _check_convolution(input, weight, bias)
    return _conv2d(input, weight, bias, stride, padding, dilation, groups)


def _check_convolution(input, weight, bias):
    _check_tensor(input, "input")
    _check_tensor(weight, "weight")
    if bias is not None:
        _check_tensor(bias, "bias")


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    _check_tensor(input, "input")
    return _max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def adaptive_avg_pool2d(input, output_size):
    _check_tensor(input, "input")
    return _adaptive_avg_pool2d(input, output_size)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    _check_tensor(input, "input")
    return _avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    _check_tensor(x1, "x1")
    _check_tensor(x2, "x2")
    return _cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    _check_tensor(x1, "x1")
    _check_tensor(x2, "x2")
    return _pairwise_distance(x1, x2, p, eps, keepdim)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    if weight is not None:
        _check_tensor(weight, "weight")
    return _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    if weight is not None:
        _check_tensor(weight, "weight")
    return _nll_loss(input, target, weight, ignore_index, reduction)
