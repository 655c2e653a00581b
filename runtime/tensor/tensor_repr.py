"""repr() of a tensor, as PyTorch prints it (torch/_tensor_str.py, default print options).

Note [Tensor repr]
The text is PyTorch's, with tensorplay's dtype names: four digits after the point, integral
floats as "1.", scientific notation when the nonzero finite magnitudes span more than a factor
of 1000, exceed 1e8 or fall below 1e-4; every element right-aligned to the widest; lines
wrapped at 80 characters. A tensor of more than 1000 elements is summarised: three items at
each end of every dimension, "..." between them, as PyTorch does (PyTorch prints no size for
a summarised tensor: its rows and the dots show the layout; an empty tensor that is not 1-D
shows size=(...)). Suffixes follow in PyTorch's order: device='cuda:N' for a CUDA tensor, the
dtype unless it is float32, int64 or bool (an empty tensor's unless float32), then
grad_fn=<Name> or, for a leaf that requires grad, requires_grad=True.

A summarised CUDA tensor is not copied whole to the host: only its corners are (views of at
most three items per dimension at each end), so printing a large tensor costs a few small
copies. The tensor is detached first, so printing records nothing for autograd. numpy comes
from the tensor layer (arguments.numpy_module), which imports it on first use.
"""
import math

from tensorplay._runtime.tensor.arguments import numpy_module

PRECISION = 4
THRESHOLD = 1000
EDGE_ITEMS = 3
LINE_WIDTH = 80
DEFAULT_DTYPES = ("tensorplay.float32", "tensorplay.int64", "tensorplay.bool")


def tensor_repr(tensor, device_text, dtype_text, host):
    """The text of repr(tensor); device_text is None for the CPU; host(t) gives the values of a
    (small) tensor as a numpy array on the CPU, bfloat16 as float32 (copies.pyx)."""
    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if device_text is not None:
        suffixes.append(f"device='{device_text}'")
    values = tensor.detach()
    if values.numel() == 0:
        if values.ndim != 1:
            suffixes.append(f"size={tuple(values.shape)}")
        if dtype_text != "tensorplay.float32":
            suffixes.append(f"dtype={dtype_text}")
        body = "[]"
    else:
        if dtype_text not in DEFAULT_DTYPES:
            suffixes.append(f"dtype={dtype_text}")
        summarize = values.numel() > THRESHOLD
        shown = summarized(values, host) if summarize else host(values)
        formatter = Formatter(shown, values.dtype.is_floating_point)
        body = nested_text(shown, tuple(values.shape), indent, summarize, formatter)
    grad_fn = tensor.grad_fn
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif tensor.requires_grad:
        suffixes.append("requires_grad=True")
    return with_suffixes(prefix + body, suffixes, indent)


def summarized(tensor, host):
    """The items PyTorch shows of a summarised tensor (get_summarized_data): at most
    2 * EDGE_ITEMS per dimension, copied to the host corner by corner."""
    if tensor.ndim == 0:
        return host(tensor)
    size = tensor.shape[0]
    parts = [tensor[:EDGE_ITEMS], tensor[size - EDGE_ITEMS:]] if size > 2 * EDGE_ITEMS \
        else [tensor]
    numpy = numpy_module()
    if tensor.ndim == 1:
        return numpy.concatenate([host(part) for part in parts])
    return numpy.stack([summarized(part[index], host) for part in parts
                        for index in range(part.shape[0])])


class Formatter:
    """PyTorch's _Formatter: one width and one notation for every element shown."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            self.max_width = max(len(str(value)) for value in flat.tolist())
            return
        numpy = numpy_module()
        nonzero_finite = flat[numpy.isfinite(flat) & (flat != 0)]
        if nonzero_finite.size == 0:
            return
        magnitudes = numpy.abs(nonzero_finite).astype(numpy.float64)
        smallest, largest = magnitudes.min(), magnitudes.max()
        self.int_mode = bool(numpy.all(nonzero_finite == numpy.ceil(nonzero_finite)))
        self.sci_mode = bool(largest / smallest > 1000.0 or largest > 1.0e8 or smallest < 1.0e-4)
        for value in nonzero_finite.tolist():
            if self.sci_mode:
                width = len(f"{value:.{PRECISION}e}")
            elif self.int_mode:
                width = len(f"{value:.0f}") + 1
            else:
                width = len(f"{value:.{PRECISION}f}")
            self.max_width = max(self.max_width, width)

    def format(self, value):
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:{self.max_width}.{PRECISION}e}"
        elif self.int_mode:
            text = f"{value:.0f}"
            if not (math.isinf(value) or math.isnan(value)):
                text += "."
        else:
            text = f"{value:.{PRECISION}f}"
        return (self.max_width - len(text)) * " " + text


def nested_text(values, shape, indent, summarize, formatter):
    """PyTorch's _tensor_str_with_formatter over the values shown; shape is the tensor's own,
    which says where the dots go."""
    if not shape:
        return formatter.format(values.item())
    dots = summarize and shape[0] > 2 * EDGE_ITEMS
    if len(shape) == 1:
        items = [formatter.format(value) for value in values.tolist()]
        if dots:
            items = items[:EDGE_ITEMS] + [" ..."] + items[EDGE_ITEMS:]
        per_line = max(1, math.floor((LINE_WIDTH - indent) / (formatter.max_width + 2)))
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"
    slices = [nested_text(values[index], shape[1:], indent + 1, summarize, formatter)
              for index in range(values.shape[0])]
    if dots:
        slices = slices[:EDGE_ITEMS] + ["..."] + slices[EDGE_ITEMS:]
    return "[" + ("," + "\n" * (len(shape) - 1) + " " * (indent + 1)).join(slices) + "]"


def with_suffixes(text, suffixes, indent):
    """PyTorch's _add_suffixes: ', suffix' while the line has room, else on a new line."""
    parts = [text]
    last_line = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > LINE_WIDTH:
            parts.append(",\n" + " " * indent + suffix)
            last_line = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    parts.append(")")
    return "".join(parts)
