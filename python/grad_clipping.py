"""tensorplay.nn.utils: gradient clipping, as PyTorch's torch.nn.utils.clip_grad_norm_ and
clip_grad_value_, built on tensor operations under no_grad.

Nothing reads a value back to the host (except error_if_nonfinite, which must), so a training
step that clips captures into a CUDA graph like PyTorch's foreach implementation: the total
norm stays a tensor and the scale min(max_norm / (total + 1e-6), 1) multiplies each gradient
on its device.
"""
import math

import tensorplay


def _gradients(parameters, name):
    """The gradients of parameters (a tensor or an iterable of them) that have one."""
    if isinstance(parameters, tensorplay.Tensor):
        parameters = [parameters]
    else:
        try:
            parameters = list(parameters)
        except TypeError:
            raise TypeError(f"{name}: parameters must be a tensor or an iterable of tensors, got "
                            f"{type(parameters).__name__}") from None
    for index, parameter in enumerate(parameters):
        if not isinstance(parameter, tensorplay.Tensor):
            raise TypeError(f"{name}: parameters[{index}] must be a tensorplay.Tensor, got "
                            f"{type(parameter).__name__}")
    return [parameter.grad for parameter in parameters if parameter.grad is not None]


def _check_number(value, name):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be an int or float, got {type(value).__name__}")
    if isinstance(value, int) and not -2**1023 < value < 2**1023:
        raise ValueError(f"{name} must be within a double's range, got an int of "
                         f"{value.bit_length()} bits")
    if math.isnan(value):
        raise ValueError(f"{name} must be a number, got nan")


def _norm(tensor, norm_type):
    """The norm_type-norm of all of tensor's elements, as torch.linalg.vector_norm: 16-bit
    floats summed in float32, the result in tensor's dtype."""
    values = tensor.float() if tensor.element_size() == 2 else tensor
    if values.numel() == 0:
        norm = tensorplay.zeros((), dtype=values.dtype, device=values.device)
    elif norm_type == math.inf:
        norm = values.abs().max()
    elif norm_type == -math.inf:
        norm = values.abs().min()
    elif norm_type == 0:
        norm = (values != 0).sum().to(values.dtype)
    elif norm_type == 1:
        norm = values.abs().sum()
    elif norm_type == 2:
        norm = (values * values).sum().sqrt()
    else:
        norm = (values.abs() ** norm_type).sum() ** (1.0 / norm_type)
    return norm.to(tensor.dtype)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    _check_number(max_norm, "max_norm")
    if isinstance(norm_type, str):  # PyTorch takes float()'s: "inf" is the one that matters
        if norm_type not in ("inf", "-inf"):
            raise ValueError(f"norm_type as a str must be 'inf' or '-inf', got "
                             f"{norm_type[:100]!r}")
        norm_type = float(norm_type)
    _check_number(norm_type, "norm_type")
    if not isinstance(error_if_nonfinite, bool):
        raise TypeError(f"error_if_nonfinite must be a bool, got "
                        f"{type(error_if_nonfinite).__name__}")
    if foreach is not None and not isinstance(foreach, bool):
        raise TypeError(f"foreach must be a bool or None, got {type(foreach).__name__}")
    gradients = _gradients(parameters, "clip_grad_norm_")
    if not gradients:
        return tensorplay.tensor(0.0)
    device = gradients[0].device
    with tensorplay.no_grad():
        norms = [_norm(gradient, norm_type) for gradient in gradients]
        total = _norm(tensorplay.stack([norm.to(device) for norm in norms]), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(
                f"The total norm of order {float(norm_type)} for gradients from `parameters` "
                "is non-finite, so it cannot be clipped. To disable this error and scale the "
                "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
        scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for gradient in gradients:
            gradient.mul_(scale if gradient.device == device else scale.to(gradient.device))
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    _check_number(clip_value, "clip_value")
    if foreach is not None and not isinstance(foreach, bool):
        raise TypeError(f"foreach must be a bool or None, got {type(foreach).__name__}")
    with tensorplay.no_grad():
        for gradient in _gradients(parameters, "clip_grad_value_"):
            gradient.clamp_(-clip_value, clip_value)
