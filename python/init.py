"""tensorplay.nn.init: fills of a tensor in place, as PyTorch's torch.nn.init, built on the
tensor's own fills (fill_, zero_, uniform_, normal_) under no_grad, so that a Parameter can be
initialised without recording anything; each returns the tensor.

The fan of a weight and the gain of a nonlinearity are PyTorch's definitions (torch.nn.init's
documentation): fan_in = size(1) * receptive field and fan_out = size(0) * receptive field, the
receptive field being the product of the sizes after the first two; the gains of its table.
"""
import math
import warnings

import tensorplay

_UNIT_GAIN = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")


def _check_tensor(tensor):
    if not isinstance(tensor, tensorplay.Tensor):
        raise TypeError(f"tensor must be a tensorplay.Tensor, got {type(tensor).__name__}")


def _shown(value):
    """value in a message, cut to 100 characters (a name may be any string)."""
    text = str(value)
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


def _check_number(value, name, allow_bool=False):
    if isinstance(value, bool) and not allow_bool or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be an int or float, got {type(value).__name__}")


def _check_name(value, name):
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")


def _check_generator(generator):
    if generator is not None and not isinstance(generator, tensorplay.Generator):
        raise TypeError(f"generator must be a tensorplay.Generator or None, got "
                        f"{type(generator).__name__}")


def _filled(fill, names):
    """fill() (the tensor's own fill), its argument errors re-raised under this function's
    parameter names (names maps the tensor method's names to ours)."""
    try:
        return fill()
    except (TypeError, ValueError) as error:
        renamed = ", ".join(f"{ours} is {theirs}'s" for theirs, ours in names.items())
        raise type(error)(f"{error} ({renamed})") from None


def calculate_gain(nonlinearity, param=None):
    _check_name(nonlinearity, "nonlinearity")
    if nonlinearity in _UNIT_GAIN:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01  # LeakyReLU's default slope
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {_shown(param)} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {_shown(nonlinearity)}")


def _calculate_fan_in_and_fan_out(tensor):
    _check_tensor(tensor)
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def zeros_(tensor):
    _check_tensor(tensor)
    with tensorplay.no_grad():
        return tensor.zero_()


def ones_(tensor):
    _check_tensor(tensor)
    with tensorplay.no_grad():
        return tensor.fill_(1)


def constant_(tensor, val):
    _check_tensor(tensor)
    _check_number(val, "val", allow_bool=True)
    with tensorplay.no_grad():
        return _filled(lambda: tensor.fill_(val), {"value": "val"})


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    _check_tensor(tensor)
    _check_number(a, "a")
    _check_number(b, "b")
    _check_generator(generator)
    with tensorplay.no_grad():
        return _filled(lambda: tensor.uniform_(a, b, generator=generator),
                       {"low": "a", "high": "b"})


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    _check_tensor(tensor)
    _check_number(mean, "mean")
    _check_number(std, "std")
    _check_generator(generator)
    with tensorplay.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    _check_tensor(tensor)
    _check_number(a, "a")
    _check_name(mode, "mode")
    _check_name(nonlinearity, "nonlinearity")
    _check_generator(generator)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {_shown(mode)} not supported, please use one of "
                         "['fan_in', 'fan_out'] (argument mode)")
    if 0 in tensor.shape:  # nothing to fill: PyTorch's warning, and the tensor as it is
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    gain = calculate_gain(nonlinearity, a)
    bound = math.sqrt(3.0) * gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
    return uniform_(tensor, -bound, bound, generator)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    _check_tensor(tensor)
    _check_number(gain, "gain")
    _check_generator(generator)
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)
