"""tensorplay.nn.functional: the layers and losses of tensorplay.nn as functions, PyTorch's
torch.nn.functional. The arithmetic is the runtime's (runtime/autograd/nn.pyx, Note
[Functional forms]), shared with the modules, so a function and its module give the same
numbers; this module adds PyTorch's signatures and its implicit softmax dimension."""
import warnings

import tensorplay
from tensorplay._runtime.autograd.nn import (cross_entropy as _cross_entropy, dropout as _dropout,
                                             gelu as _gelu, layer_norm as _layer_norm,
                                             linear as _linear,
                                             log_softmax as _log_softmax, mse_loss as _mse_loss,
                                             nll_loss as _nll_loss, softmax as _softmax)


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


def _softmax_dim(input, dim, name):
    """PyTorch's implicit dimension (torch.nn.functional._get_softmax_dim), with its warning."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if input.dim() in (0, 1, 3) else 1


def softmax(input, dim=None):
    _check_tensor(input, "input")
    return _softmax(input, _softmax_dim(input, dim, "softmax"))


def log_softmax(input, dim=None):
    _check_tensor(input, "input")
    return _log_softmax(input, _softmax_dim(input, dim, "log_softmax"))


def mse_loss(input, target, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _mse_loss(input, target, reduction)


def cross_entropy(input, target, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _cross_entropy(input, target, ignore_index, reduction, label_smoothing)


def nll_loss(input, target, ignore_index=-100, reduction="mean"):
    _check_tensor(input, "input")
    _check_tensor(target, "target")
    return _nll_loss(input, target, ignore_index, reduction)
