# cython: language_level=3
"""The gradient of each operation, by the gradient names of the op table (ops.pyx, Note [Op
table]). Each takes the Node and the gradients of its outputs, and returns one gradient per
operand (None where none is needed), at the shape the operation broadcast the operands to; the
backward pass reduces it to each operand's shape (engine.pyx, sum_to). Every formula is
resolved to its ops once, at import, which fails when the table and FORMULAS differ.
"""
import math

from libc.stdint cimport int64_t

from tensorplay._runtime.base.dtypes cimport named_dtype
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.tensor cimport copies, factories, scan, scatter_gather, selection
from tensorplay._runtime.autograd.tape cimport Node
from tensorplay._runtime.tensor.copies cimport fill_
from tensorplay._runtime.tensor.core cimport (TensorCore, device_text, new_empty, overlapping,
                                              reach_bytes, reshaped, strided_at)
from tensorplay._runtime.tensor.elementwise cimport (absolute, binary, clamp, cos, cosh, eq, exp,
                                                     ge, gt, isnan, le, log, log1p, logical_and,
                                                     logical_or, lt, mul, neg, power, relu,
                                                     sigmoid, sin, sinh, sqrt, sub, truediv,
                                                     where)
from tensorplay._runtime.tensor.linalg cimport matmul
from tensorplay._runtime.tensor.reduction cimport (maximum, minimum, nll_loss_backward,
                                                   softmax_backward, sum_over)

from tensorplay._runtime.kernels.ops import gradient_names


cdef TensorCore zeros_of(tuple meta):
    sizes, dtype, device = meta
    return fill_(<TensorCore>new_empty(sizes, dtype, device), 0)


cdef bint wanted(Node node, int index):
    return node.edges[index] is not None


def add_gradient(Node node, tuple grads):
    return (grads[0], grads[0])


def sub_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    if node.state:  # scalar - tensor
        return (neg(g), None)
    return (g, neg(g) if wanted(node, 1) else None)


def mul_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    a, b = node.saved
    return (mul(g, b) if wanted(node, 0) else None,
            mul(g, a) if wanted(node, 1) else None)


def div_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    cdef TensorCore a = node.saved[0]
    b = node.saved[1]
    if node.state:  # scalar b / tensor a: d/da = -b / a**2
        return (neg(truediv(mul(g, b), mul(a, a))), None)
    return (truediv(g, b) if wanted(node, 0) else None,
            neg(truediv(mul(g, a), mul(b, b))) if wanted(node, 1) else None)


def fill_gradient(Node node, tuple grads):
    # fill_() and zero_() of a tensor with history: the old values no longer matter.
    return (zeros_of(node.inputs_meta[0]),)


def rounded_div_gradient(Node node, tuple grads):
    # Rounded quotients are piecewise constant: their gradient is zero, as PyTorch's.
    return tuple(zeros_of(meta) if meta is not None else None for meta in node.inputs_meta)


def zero_gradient(Node node, tuple grads):
    # floor, ceil, round, trunc and sign: zero, as PyTorch's (zeros_like(grad)).
    return (zeros_of(node.inputs_meta[0]),)


def remainder_gradient(Node node, tuple grads):
    # a % b = a - floor(a / b) * b, PyTorch's remainder backward: the dividend's gradient is g,
    # the divisor's -g * floor(a / b). For a scalar % tensor (which PyTorch leaves without a
    # derivative) the same rule gives the tensor's.
    cdef TensorCore g = grads[0]
    if node.state:  # scalar c % tensor x: d/dx = -floor(c / x)
        x, c = node.saved
        return (neg(mul(g, binary(x, c, ops.OP_DIV_FLOOR, True, False, "remainder"))), None)
    if not wanted(node, 1):
        return (g, None)
    a, b = node.saved
    return (g if wanted(node, 0) else None,
            neg(mul(g, binary(a, b, ops.OP_DIV_FLOOR, False, False, "remainder"))))


def pow_gradient(Node node, tuple grads):
    # PyTorch's pow_backward: the exponent's gradient is 0 where the exponent is 0 (also at a
    # zero base, where b * a ** (b - 1) would be nan); the base's is 0 where the base is 0 and
    # the exponent >= 0 (where a ** b * log(a) would be nan), -inf times g where it is < 0.
    cdef TensorCore g = grads[0]
    cdef TensorCore a = node.saved[0]
    b = node.saved[1]
    if node.state:  # scalar b ** tensor a: d/da = b ** a * log(b)
        log_base = math.log(b) if b > 0 else (-math.inf if b == 0 else math.nan)
        gradient = mul(g, mul(node.saved[2], log_base))
        if b == 0:
            gradient = where(ge(a, 0), 0, gradient)
        return (gradient, None)
    grad_a = grad_b = None
    if wanted(node, 0):
        if isinstance(b, TensorCore):
            grad_a = where(eq(b, 0), 0, mul(g, mul(power(a, sub(b, 1)), b)))
        elif b == 0:  # d/da a**0 = 0, also at a = 0
            grad_a = zeros_of(node.inputs_meta[0])
        else:
            grad_a = mul(g, mul(power(a, b - 1), b))
    if wanted(node, 1):  # d/db a**b = a**b * log(a)
        gradient = mul(g, mul(node.saved[2], log(a)))
        grad_b = where(eq(a, 0), where(ge(b, 0), 0, gradient), gradient)
    return (grad_a, grad_b)


def neg_gradient(Node node, tuple grads):
    return (neg(grads[0]),)


def abs_gradient(Node node, tuple grads):
    # g * sign(x), a product as PyTorch's (so an infinite g at x = 0 gives nan, not 0).
    cdef TensorCore g = grads[0], x = node.saved[0]
    sign = sub(copies.to(gt(x, 0), None, x.dtype_object, False, False),
               copies.to(lt(x, 0), None, x.dtype_object, False, False))
    return (mul(g, sign),)


def relu_gradient(Node node, tuple grads):  # saved: the output
    # One kernel, as PyTorch's threshold_backward, not a comparison and a select.
    return (binary(<TensorCore>grads[0], node.saved[0], ops.OP_RELU_BACKWARD, False, False,
                   "relu backward"),)


def sin_gradient(Node node, tuple grads):
    return (mul(grads[0], cos(node.saved[0])),)


def cos_gradient(Node node, tuple grads):
    return (neg(mul(grads[0], sin(node.saved[0]))),)


def exp_gradient(Node node, tuple grads):  # saved: the output
    return (mul(grads[0], node.saved[0]),)


def sqrt_gradient(Node node, tuple grads):  # saved: the output
    return (truediv(grads[0], mul(node.saved[0], 2)),)


def log_gradient(Node node, tuple grads):
    return (truediv(grads[0], node.saved[0]),)


def sigmoid_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's sigmoid_backward: g * (1 - y) * y.
    cdef TensorCore y = node.saved[0]
    return (mul(mul(grads[0], binary(y, 1, ops.OP_SUB, True, False, "sigmoid backward")), y),)


def erf_gradient(Node node, tuple grads):
    # PyTorch's: g * 2 / sqrt(pi) * exp(-x * x).
    cdef TensorCore x = node.saved[0]
    return (mul(grads[0], mul(exp(neg(mul(x, x))), 2 / math.sqrt(math.pi))),)


def log1p_gradient(Node node, tuple grads):
    # PyTorch's: g / (1 + x).
    cdef TensorCore x = node.saved[0]
    return (truediv(grads[0], binary(x, 1, ops.OP_ADD, False, False, "log1p backward")),)


def expm1_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's: g * (y + 1).
    cdef TensorCore y = node.saved[0]
    return (mul(grads[0], binary(y, 1, ops.OP_ADD, False, False, "expm1 backward")),)


def rsqrt_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's: -0.5 * g * y^3.
    cdef TensorCore y = node.saved[0]
    return (mul(grads[0], mul(mul(y, mul(y, y)), -0.5)),)


def tan_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's: g * (1 + y * y).
    cdef TensorCore y = node.saved[0]
    return (mul(grads[0], binary(mul(y, y), 1, ops.OP_ADD, False, False, "tan backward")),)


def atan_gradient(Node node, tuple grads):
    # PyTorch's: g / (1 + x * x).
    cdef TensorCore x = node.saved[0]
    return (truediv(grads[0], binary(mul(x, x), 1, ops.OP_ADD, False, False,
                                     "atan backward")),)


def asin_gradient(Node node, tuple grads):
    # PyTorch's: g / sqrt(1 - x * x), and acos's its negative.
    cdef TensorCore x = node.saved[0]
    return (truediv(grads[0], sqrt(binary(mul(x, x), 1, ops.OP_SUB, True, False,
                                          "asin backward"))),)


def acos_gradient(Node node, tuple grads):
    return (neg(asin_gradient(node, grads)[0]),)


def sinh_gradient(Node node, tuple grads):
    # PyTorch's: g * cosh(x), and cosh's g * sinh(x).
    return (mul(grads[0], cosh(node.saved[0])),)


def cosh_gradient(Node node, tuple grads):
    return (mul(grads[0], sinh(node.saved[0])),)


def log2_gradient(Node node, tuple grads):
    # PyTorch's: g / (x * ln 2), and log10's g / (x * ln 10).
    return (truediv(grads[0], mul(node.saved[0], math.log(2.0))),)


def log10_gradient(Node node, tuple grads):
    return (truediv(grads[0], mul(node.saved[0], math.log(10.0))),)


def exp2_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's: g * y * ln 2.
    return (mul(grads[0], mul(node.saved[0], math.log(2.0))),)


def tanh_gradient(Node node, tuple grads):  # saved: the output y
    # PyTorch's tanh_backward: g * (1 - y * y).
    cdef TensorCore y = node.saved[0]
    return (mul(grads[0], binary(mul(y, y), 1, ops.OP_SUB, True, False, "tanh backward")),)


cdef TensorCore spread(TensorCore g, tuple sizes, tuple dims, bint keepdim):
    """The gradient of a sum over dims: g, with the reduced dimensions restored, read at every
    index of them (a view, by expand())."""
    if not keepdim:
        for dim in dims:  # in increasing order, so each lands where it was
            g = g.c_unsqueeze(dim)
    return g.c_expand(sizes)


def sum_gradient(Node node, tuple grads):
    dims, keepdim = node.state
    return (spread(grads[0], node.inputs_meta[0][0], dims, keepdim),)


def mean_gradient(Node node, tuple grads):
    dims, keepdim = node.state
    sizes = node.inputs_meta[0][0]
    count = math.prod(sizes[dim] for dim in dims)
    return (truediv(spread(grads[0], sizes, dims, keepdim), count),)


def extreme_gradient(Node node, tuple grads):
    # Shared evenly among the elements equal to the maximum (or minimum), as PyTorch's max().
    cdef TensorCore x = node.saved[0]
    extreme = maximum(x) if node.op == ops.OP_MAX else minimum(x)
    mask = copies.to(eq(x, extreme), None, x.dtype_object, False, False)
    return (truediv(mul(grads[0], mask), sum_over(mask, None, False)),)


def median_gradient(Node node, tuple grads):
    # PyTorch's evenly_distribute_backward: shared evenly among the elements equal to the
    # median (saved detached), NaN matching NaN, so that a NaN median's gradient goes to the NaNs.
    x, value = node.saved
    matched = where(isnan(value), isnan(x), eq(x, value))
    mask = copies.to(matched, None, (<TensorCore>x).dtype_object, False, False)
    return (truediv(mul(grads[0], mask), sum_over(mask, None, False)),)


def softmax_gradient(Node node, tuple grads):
    # PyTorch's softmax_backward_data and log_softmax_backward_data from the saved output, in one
    # kernel (reduction.pyx, Note [Fused softmax]); the dimension is the node's state.
    return (softmax_backward(grads[0], node.saved[0], node.state, node.op == ops.OP_LOG_SOFTMAX),)


def nll_loss_gradient(Node node, tuple grads):
    # PyTorch's nll_loss_backward, in one kernel (reduction.pyx, Note [Fused nll_loss]); the
    # targets and the weight take none.
    return (nll_loss_backward(grads[0], node.inputs_meta[0], node.saved, node.state), None,
            None)


def extremes_over_gradient(Node node, tuple grads):
    # PyTorch's amax / amin backward: shared evenly among the elements equal to the extreme of
    # their slice (the result, saved with the reduced dimensions kept).
    dims, keepdim = node.state
    x, kept = node.saved
    mask = copies.to(eq(x, kept), None, (<TensorCore>x).dtype_object, False, False)
    g = grads[0] if keepdim else copies.reshape(grads[0], ((<TensorCore>kept).sizes,))
    return (truediv(mul(g, mask), sum_over(mask, dims, True)),)


def reshape_gradient(Node node, tuple grads):
    return (copies.reshape(grads[0], (node.inputs_meta[0][0],)),)


def transpose_gradient(Node node, tuple grads):
    first, second = node.state
    return ((<TensorCore>grads[0]).c_transpose(first, second),)


def permute_gradient(Node node, tuple grads):
    # The inverse permutation: dimension order[i] of the input is dimension i of the output.
    order = node.state
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return ((<TensorCore>grads[0]).c_permute(tuple(inverse)),)


def cat_gradient(Node node, tuple grads):
    # Each input's slice of the output's gradient along dim (a view, as PyTorch's narrow()); a
    # 1-D empty input skipped by cat() gets an empty gradient.
    cdef TensorCore g = grads[0]
    dim, lengths = node.state
    result = []
    offset = 0
    for index, length in enumerate(lengths):
        if length is None:
            result.append(zeros_of(node.inputs_meta[index]) if wanted(node, index) else None)
            continue
        result.append(g.c_getitem((slice(None),) * dim + (slice(offset, offset + length),))
                      if wanted(node, index) else None)
        offset += length
    return tuple(result)


def stack_gradient(Node node, tuple grads):
    # Each input's index of the output's gradient along dim (a view, as PyTorch's unbind()).
    cdef TensorCore g = grads[0]
    dim = node.state
    return tuple(g.c_getitem((slice(None),) * dim + (index,)) if wanted(node, index) else None
                 for index in range(len(node.edges)))


def expand_gradient(Node node, tuple grads):
    return (grads[0],)  # sum_to reduces the expanded dimensions


def getitem_gradient(Node node, tuple grads):
    cdef TensorCore whole = zeros_of(node.inputs_meta[0])
    copies.setitem(whole, node.state, grads[0])
    return (whole,)


def index_select_gradient(Node node, tuple grads):
    # Each slice of g added into the slice it was selected from (saved: the int64 positions;
    # state: the dimension), so repeated indices add up, as PyTorch's index_select_backward.
    cdef TensorCore whole = zeros_of(node.inputs_meta[0])
    copies.index_add_(whole, node.state, node.saved[0], copies.contiguous(grads[0]))
    return (whole,)


def gather_gradient(Node node, tuple grads):
    # The gradient scatter-added into zeros of the input's shape (saved: the int64 index;
    # state: the dimension), as PyTorch's gather_backward.
    cdef TensorCore whole = zeros_of(node.inputs_meta[0])
    scatter_gather.scatter_into(whole, node.state, node.saved[0], grads[0], True)
    return (whole,)


def scatter_gradient(Node node, tuple grads):
    # self: the gradient, zero where src (or the value) was stored; src: the gradient at the
    # positions it was stored to.
    cdef TensorCore g = grads[0]
    cdef TensorCore index = node.saved[0]
    cdef TensorCore kept = None
    if wanted(node, 0):
        kept = <TensorCore>copies.clone(g)
        scatter_gather.scatter_into(kept, node.state, index,
                                    fill_(<TensorCore>new_empty((), g.dtype_object,
                                                                g.device_index), 0), False)
    if len(node.edges) == 1:
        return (kept,)
    return (kept, source_gradient(node, g) if wanted(node, 1) else None)


def scatter_add_gradient(Node node, tuple grads):
    return (grads[0], source_gradient(node, grads[0]) if wanted(node, 1) else None)


def cumsum_gradient(Node node, tuple grads):
    return (scan.cumsum_gradient(grads[0], node.state),)


def cumprod_gradient(Node node, tuple grads):
    return (scan.cumprod_gradient(grads[0], node.saved[0], node.state),)


cdef TensorCore source_gradient(Node node, TensorCore g):
    """src's gradient of a scatter: g gathered at the index, in the leading corner of zeros of
    src's shape where src is larger than the index (its other elements were not read; PyTorch's
    engine refuses that case with a shape error)."""
    cdef TensorCore index = node.saved[0]
    cdef TensorCore gathered = scatter_gather.gathered(g, node.state, index)
    if node.inputs_meta[1][0] == index.sizes:
        return gathered
    cdef TensorCore whole = zeros_of(node.inputs_meta[1])
    sizes = index.sizes or (1,)  # 0-d tensors as ones of one element, as the scatter read them
    cdef TensorCore corner = copies.reshape(whole, whole.sizes or (1,))
    for dim, size in enumerate(sizes):
        corner = copies.narrow(corner, dim, 0, size)
    copies.copy_into(corner, copies.reshape(gathered, sizes), False)
    return whole


def setitem_gradient(Node node, tuple grads):
    # self[key] = value: the old values' gradient is g with the selection zeroed; the value's
    # is g's selection (sum_to reduces it where the value broadcast).
    cdef TensorCore g = grads[0]
    grad_self = grad_value = None
    if wanted(node, 0):
        grad_self = copies.clone(g)
        selection.setitem(grad_self, node.state, 0)
    if wanted(node, 1):
        grad_value = copies.clone(selection.getitem(g, node.state))
    return (grad_self, grad_value)


# Note [Views and in-place changes] (engine.pyx): the state of both Nodes is the base's sizes
# and strides and the view's (sizes, strides, offset) in the base's memory. Their gradients are
# laid out in a buffer as the base is laid out in its memory, so that the view's elements sit
# where the view reads them.
def as_strided_gradient(Node node, tuple grads):
    # A view's history through its base (PyTorch's AsStridedBackward): g added into zeros at the
    # view's elements; where the view reads an element at several indices (expand), each adds.
    base_sizes, base_strides, sizes, strides, offset = node.state
    cdef TensorCore g = grads[0]
    cdef TensorCore buffer = base_buffer(node, True)
    if overlapping(sizes, strides):
        copies.index_add_(buffer, 0, <TensorCore>element_positions(sizes, strides, offset, g),
                          reshaped(<TensorCore>copies.contiguous(g), (g.element_count,)))
    else:
        copies.copy_(strided_at(buffer, sizes, strides, offset), g, False)
    return (copies.contiguous(strided_at(buffer, base_sizes, base_strides, 0)),)


def copy_slices_gradient(Node node, tuple grads):
    # A base after an in-place change of its view (PyTorch's CopySlices): the old values'
    # gradient is g with the view's elements zeroed, the new values' is g at them.
    base_sizes, base_strides, sizes, strides, offset = node.state
    cdef TensorCore buffer = base_buffer(node, False)
    whole = strided_at(buffer, base_sizes, base_strides, 0)
    copies.copy_(whole, grads[0], False)
    region = strided_at(buffer, sizes, strides, offset)
    grad_value = copies.clone(region) if wanted(node, 1) else None
    if not wanted(node, 0):
        return (None, grad_value)
    fill_(region, 0)
    return (copies.contiguous(whole), grad_value)


cdef TensorCore base_buffer(Node node, bint zeroed):
    """A contiguous 1-D buffer as long as the base's memory reaches, zeroed or not."""
    _, dtype, device = node.inputs_meta[0]
    buffer = new_empty((reach_bytes(node.state[0], node.state[1], 1),), dtype, device)
    return fill_(<TensorCore>buffer, 0) if zeroed else buffer


cdef object element_positions(tuple sizes, tuple strides, int64_t offset, TensorCore like):
    """The position in the base's memory of each element of a view, flattened (int64, on
    like's device): offset plus each dimension's index times its stride."""
    device = "cpu" if like.device_index < 0 else f"cuda:{like.device_index}"
    positions = fill_(<TensorCore>new_empty(sizes, named_dtype("int64"), like.device_index),
                      offset)
    for dim, (size, stride) in enumerate(zip(sizes, strides)):
        if size > 1 and stride:
            steps = factories.arange(0, size * stride, stride, named_dtype("int64"), device,
                                     False)
            positions = positions + steps.reshape(
                tuple(size if other == dim else 1 for other in range(len(sizes))))
    return positions.reshape((-1,))


def clone_gradient(Node node, tuple grads):
    return (grads[0],)


def to_gradient(Node node, tuple grads):
    sizes, dtype, device = node.inputs_meta[0]
    return (copies.to(grads[0], device_text(device), dtype, False, False),)


def add_scaled_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    return (g, mul(g, node.state) if wanted(node, 1) else None)


def clamp_gradient(Node node, tuple grads):
    # PyTorch's clamp_backward and clamp_backward_min_max up to 2.13 (FunctionsManual.cpp;
    # docs/design.md, "Where PyTorch versions differ"): the input's gradient passes where
    # min <= x <= max (not at a NaN, nor anywhere when min > max, where the result is max); a
    # tensor min takes it where x < min < max, a tensor max where x > max or max < min.
    cdef TensorCore g = grads[0]
    x, low, high = node.saved
    grad_x = g
    if low is not None:
        grad_x = where(ge(x, low), grad_x, 0)
    if high is not None:
        grad_x = where(le(x, high), grad_x, 0)
    grad_low = grad_high = None
    if wanted(node, 1):
        below = lt(x, low)
        grad_low = where(below if high is None else logical_and(below, lt(low, high)), g, 0)
    if wanted(node, 2):
        above = gt(x, high)
        grad_high = where(above if low is None else logical_or(above, lt(high, low)), g, 0)
    return (grad_x, grad_low, grad_high)


def where_gradient(Node node, tuple grads):
    condition = node.saved[0]
    return (None,
            where(condition, grads[0], 0) if wanted(node, 1) else None,
            where(condition, 0, grads[0]) if wanted(node, 2) else None)


# PyTorch's EPSILON of binary_cross_entropy_backward (aten/src/ATen/native/Loss.cpp): the
# denominator x * (1 - x) is at least this, so an input of exactly 0 or 1 gives a finite
# gradient (0 where the target equals it).
BINARY_CROSS_ENTROPY_EPSILON = 1e-12


def binary_cross_entropy_gradient(Node node, tuple grads):
    # PyTorch's: input g * (x - y) / max(x * (1 - x), EPSILON); target g * (log1p(-x) - log(x)).
    cdef TensorCore g = grads[0]
    x, y = node.saved
    denominator = clamp(mul(x, binary(x, 1, ops.OP_SUB, True, False, "bce backward")),
                        BINARY_CROSS_ENTROPY_EPSILON, None)
    return (mul(g, truediv(sub(x, y), denominator)) if wanted(node, 0) else None,
            mul(g, sub(log1p(neg(x)), log(x))) if wanted(node, 1) else None)


def binary_cross_entropy_with_logits_gradient(Node node, tuple grads):
    # PyTorch's: input g * (sigmoid(x) - y), or with pos_weight p
    # g * ((1 - y) - (1 + (p - 1) * y) * sigmoid(-x)); target g * -x, or
    # g * (-x + (p - 1) * log(1 + exp(-x))). pos_weight gets no gradient, as in PyTorch.
    cdef TensorCore g = grads[0]
    x, y, pos_weight = node.saved
    if pos_weight is None:
        return (mul(g, sub(sigmoid(x), y)) if wanted(node, 0) else None,
                mul(g, neg(x)) if wanted(node, 1) else None)
    less_one = binary(pos_weight, 1, ops.OP_SUB, False, False, "bce backward")
    log_weight = binary(mul(less_one, y), 1, ops.OP_ADD, False, False, "bce backward")
    positive = binary(y, 1, ops.OP_SUB, True, False, "bce backward")  # 1 - y
    return (mul(g, sub(positive, mul(log_weight, sigmoid(neg(x))))) if wanted(node, 0) else None,
            mul(g, sub(mul(less_one, softplus_of_negative(x)), x)) if wanted(node, 1) else None)


cdef object softplus_of_negative(TensorCore x):
    # log(1 + exp(-x)) without overflow: log1p(exp(-|x|)) + max(-x, 0).
    return binary(log1p(exp(neg(absolute(x)))), relu(neg(x)), ops.OP_ADD, False, False,
                  "bce backward")


def maximum_gradient(Node node, tuple grads):
    return extreme_gradient_of(node, grads[0], True)


def minimum_gradient(Node node, tuple grads):
    return extreme_gradient_of(node, grads[0], False)


cdef tuple extreme_gradient_of(Node node, TensorCore g, bint largest):
    # PyTorch's max(self, other) and min(self, other) backward (derivatives.yaml): half the
    # gradient to each operand where they tie, all of it to the one chosen, and where one is
    # NaN (no comparison holds) all of it to both.
    a, b = node.saved
    shared = where(eq(a, b), mul(g, 0.5), g)
    beaten_a, beaten_b = (lt(a, b), gt(a, b)) if largest else (gt(a, b), lt(a, b))
    return (where(beaten_a, 0, shared) if wanted(node, 0) else None,
            where(beaten_b, 0, shared) if wanted(node, 1) else None)


def matmul_gradient(Node node, tuple grads):
    # Through the operands as matrices (a 1-D a as a row, a 1-D b as a column) and the gradient
    # with those dimensions restored: grad_a = g @ b^T, grad_b = a^T @ g, each at the broadcast
    # batch shape (sum_to reduces it). Each operand is saved only when the other's gradient is
    # wanted (linalg.pyx), so shapes come from inputs_meta. A column-major 2-D operand (the
    # weight.t() of Linear) gets its gradient column-major too, as (b @ g^T)^T or (g^T @ a)^T,
    # as PyTorch's mm_mat1_backward and mm_mat2_backward do (torch/csrc/autograd/
    # FunctionsManual.cpp): transposed back by the transpose's own gradient, it is contiguous
    # like the weight, so accumulating it into .grad copies no strided layout.
    cdef TensorCore g = grads[0], grad_b
    a, b = node.saved
    a_column_major, b_column_major = node.state
    a_dims, b_dims = len(node.inputs_meta[0][0]), len(node.inputs_meta[1][0])
    cdef bint matrices = a_dims == 2 and b_dims == 2
    if a_dims == 1:
        g = g.c_unsqueeze(len(g.sizes) - (1 if b_dims > 1 else 0))
    if b_dims == 1:
        g = g.c_unsqueeze(len(g.sizes))
    grad_a = grad_b = None
    if wanted(node, 0):
        b_matrix = (<TensorCore>b).c_unsqueeze(1) if b_dims == 1 else b
        if matrices and a_column_major:
            grad_a = (<TensorCore>matmul(<TensorCore>b_matrix, g.c_transpose(-1, -2))
                      ).c_transpose(-1, -2)
        else:
            grad_a = matmul(g, (<TensorCore>b_matrix).c_transpose(-1, -2))
    if wanted(node, 1):
        a_matrix = (<TensorCore>a).c_unsqueeze(0) if a_dims == 1 else a
        if matrices and b_column_major:
            grad_b = (<TensorCore>matmul(g.c_transpose(-1, -2), <TensorCore>a_matrix)
                      ).c_transpose(-1, -2)
        else:
            grad_b = matmul((<TensorCore>a_matrix).c_transpose(-1, -2), g)
        if b_dims == 1:  # drop the column's dimension of 1
            grad_b = copies.reshape(grad_b, (grad_b.sizes[:-1],))
    return (grad_a, grad_b)


def function_gradient(Node node, tuple grads):
    cls, ctx = node.state
    result = cls.backward(ctx, *grads)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(node.edges):
        raise RuntimeError(f"function {cls.__name__}.backward returned an incorrect number of "
                           f"gradients (expected {len(node.edges)}, got {len(result)}): one per "
                           "argument of forward() after ctx, None for those without one")
    for index, gradient in enumerate(result):
        if gradient is not None and node.edges[index] is not None and \
                not isinstance(gradient, TensorCore):
            raise TypeError(f"function {cls.__name__}.backward returned a "
                            f"{type(gradient).__name__} as gradient {index}; expected a tensor "
                            "or None")
    return result


def select_dim_gradient(Node node, tuple grads):
    # max(dim) / min(dim), as PyTorch's value_selecting_reduction_backward: each slice's
    # gradient scattered to the element it selected (its saved int64 index), zero elsewhere.
    cdef TensorCore g = grads[0]
    cdef TensorCore indices = node.saved[0]
    dim, keepdim = node.state
    sizes = node.inputs_meta[0][0]
    if not sizes:  # a 0-d tensor selects itself
        return (g,)
    kept = tuple(1 if index == dim else size for index, size in enumerate(sizes))
    cdef TensorCore whole = zeros_of(node.inputs_meta[0])
    scatter_gather.scatter_into(whole, dim, copies.reshape(indices, kept),
                                copies.reshape(g, kept), False)
    return (whole,)


FORMULAS = {
    "add": add_gradient, "sub": sub_gradient, "mul": mul_gradient, "div": div_gradient,
    "rounded_div": rounded_div_gradient, "fill": fill_gradient, "pow": pow_gradient,
    "remainder": remainder_gradient,
    "neg": neg_gradient,
    "abs": abs_gradient, "relu": relu_gradient, "sin": sin_gradient, "cos": cos_gradient,
    "exp": exp_gradient, "sqrt": sqrt_gradient, "log": log_gradient, "sum": sum_gradient,
    "sigmoid": sigmoid_gradient, "tanh": tanh_gradient, "erf": erf_gradient,
    "log1p": log1p_gradient, "expm1": expm1_gradient, "rsqrt": rsqrt_gradient,
    "tan": tan_gradient, "atan": atan_gradient, "asin": asin_gradient, "acos": acos_gradient,
    "sinh": sinh_gradient, "cosh": cosh_gradient, "log2": log2_gradient,
    "log10": log10_gradient, "exp2": exp2_gradient,
    "index_select": index_select_gradient, "gather": gather_gradient,
    "scatter": scatter_gradient, "scatter_add": scatter_add_gradient,
    "cumsum": cumsum_gradient, "cumprod": cumprod_gradient,
    "binary_cross_entropy": binary_cross_entropy_gradient,
    "binary_cross_entropy_with_logits": binary_cross_entropy_with_logits_gradient,
    "floor": zero_gradient,
    "ceil": zero_gradient, "round": zero_gradient, "trunc": zero_gradient,
    "sign": zero_gradient,
    "mean": mean_gradient, "max": extreme_gradient, "min": extreme_gradient,
    "select_dim": select_dim_gradient,
    "median": median_gradient,
    "softmax": softmax_gradient, "log_softmax": softmax_gradient,
    "nll_loss": nll_loss_gradient,
    "amax": extremes_over_gradient, "amin": extremes_over_gradient,
    "reshape": reshape_gradient,
    "transpose": transpose_gradient, "permute": permute_gradient, "cat": cat_gradient,
    "stack": stack_gradient, "expand": expand_gradient, "getitem": getitem_gradient,
    "setitem": setitem_gradient, "as_strided": as_strided_gradient,
    "copy_slices": copy_slices_gradient,
    "clone": clone_gradient, "pin_memory": clone_gradient, "to": to_gradient,
    "add_scaled": add_scaled_gradient,
    "clamp": clamp_gradient, "where": where_gradient, "matmul": matmul_gradient,
    "maximum": maximum_gradient, "minimum": minimum_gradient,
    "function": function_gradient,
}


def formulas_by_op(dict formulas):
    """The formula of each op, by its code (None for an op without gradient), from formulas
    (gradient name -> function): a RuntimeError names every gradient name of the op table
    (ops.pyx) that formulas lacks and every formula no op names (Note [Op table])."""
    names = gradient_names()
    missing = [name for name in names if name not in formulas]
    unused = [name for name in formulas if name not in names]
    if missing or unused:
        raise RuntimeError(
            "the op table and the gradient formulas differ: "
            + "; ".join(([f"no formula for {', '.join(missing)}"] if missing else [])
                        + ([f"formulas for no op: {', '.join(unused)}"] if unused else []))
            + " (runtime/kernels/ops.pyx, ROWS; runtime/autograd/formulas.pyx, FORMULAS)")
    return [None if ops.gradient_name(op) is None else formulas[ops.gradient_name(op)]
            for op in range(ops.OP_COUNT)]


# Resolved once, at import: a Node finds its formula by its op's code (by_op[node.op]).
by_op = formulas_by_op(FORMULAS)
