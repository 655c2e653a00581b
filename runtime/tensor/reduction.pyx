# cython: language_level=3
"""Reductions: sum and mean over dimensions (keepdim), max and min of the whole tensor
(kernels/reduce.cu: a two-launch reduction of the whole tensor, one block per output element
over dimensions), max / min over one dimension with their indices and argmax / argmin
(select_dim: one thread per output element), softmax and log_softmax (Note [Fused softmax])
and nll_loss (Note [Fused nll_loss]).
The matrix product is linalg.pyx's. See docs/design.md, "Minimal tensor".
"""
from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies, elementwise, return_types
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport (computed_in, np, reduced_dtype,
                                                   scalar_operand_arg)
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, new_empty,
                                              own_tensor_arg, recorded, reshaped, tracked,
                                              wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, opmath, stored

from tensorplay._runtime.tensor.arguments import DtypeError, ShapeError

import math

# torch.return_types.max and .min: named tuples of the values and their indices.
max_result = return_types.return_type("max")
min_result = return_types.return_type("min")


cdef object cpu_mean(object values, object dims, bint keepdim):
    """values.mean() over dims (None: all), except that a mean over no element is NaN without
    numpy's "Mean of empty slice" warning (a warning, not under np.errstate): PyTorch's is
    silent. Called under np.errstate(all="ignore")."""
    if values.size:
        return values.mean(axis=dims, keepdims=keepdim)
    return values.sum(axis=dims, keepdims=keepdim) / 0


cdef object reduce_whole(TensorCore tensor, int op, bint mean, str name):
    cdef DtypeCore result_dtype = reduced_dtype(tensor.dtype_object,
                                                ops.OP_MEAN if mean else op)
    if op != ops.OP_SUM and tensor.element_count == 0:
        raise ShapeError(f"{name}(): Expected reduction dim to be specified for "
                         f"input.numel() == 0. {name}() of an empty tensor has no identity; "
                         "it needs at least one element")
    if tensor.device_index == CPU:
        values = computable(tensor)
        if op == ops.OP_SUM:
            with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
                result = cpu_mean(values, None, False) if mean else values.sum(
                    dtype=np().int64 if not tensor.dtype_object.floating else values.dtype)
        else:
            result = values.max() if op == ops.OP_MAX else values.min()
        return wrap_cpu(np().asarray(stored(np().asarray(result), result_dtype)), result_dtype)
    source = copies.contiguous(tensor)
    output = new_empty((), result_dtype, tensor.device_index)
    device_ops.reduce(tensor.device_index, tensor.dtype_object, (<TensorCore>source).data,
                      tensor.element_count, op, result_dtype, (<TensorCore>output).data,
                      float(tensor.element_count) if mean else 1.0,
                      current_stream(tensor.device_index))
    return output


cdef object sum_over(TensorCore tensor, object dim, bint keepdim):
    result = reduce_over(tensor, dim, keepdim, False, "sum")
    if tracked(tensor) and tensor.dtype_object.floating:
        return recorded(result, ops.OP_SUM, (tensor,), (),
                        (reduced_dims(tensor, dim, "sum"), keepdim))
    return result


cdef object mean_over(TensorCore tensor, object dim, bint keepdim):
    result = reduce_over(tensor, dim, keepdim, True, "mean")
    if tracked(tensor):
        return recorded(result, ops.OP_MEAN, (tensor,), (),
                        (reduced_dims(tensor, dim, "mean"), keepdim))
    return result


# var() and std(), as PyTorch's: the sum of squared deviations from the mean over dim, divided
# by N - correction (N the count of elements reduced; correction 1 by default, Bessel's, 0 with
# unbiased=False); a divisor of 0 or less gives inf or NaN, with PyTorch's warning. Computed
# from recorded operations (mean, subtraction, product, sum, division), so autograd gives the
# gradient and a capture takes it wherever sum() and mean() go; two passes over the data
# rather than PyTorch's Welford, which agree to rounding.
cdef object var_over(TensorCore tensor, object dim, object unbiased, bint keepdim,
                     object correction):
    return variance(tensor, dim, unbiased, keepdim, correction, "var")


# std() is the root of var(). Where the variance is 0 (every value reduced is the same) the
# root's derivative is inf, and inf * 0 would make the gradient NaN; PyTorch's std_backward
# gives 0 there (masked_fill(result == 0, 0), FunctionsManual.cpp), so under autograd the root
# goes through where() on both sides, as norm()'s does.
cdef object std_over(TensorCore tensor, object dim, object unbiased, bint keepdim,
                     object correction):
    variances = variance(tensor, dim, unbiased, keepdim, correction, "std")
    if not tracked(tensor):
        return elementwise.sqrt(<TensorCore>variances)
    constant = elementwise.eq(<TensorCore>variances, 0)
    roots = elementwise.sqrt(<TensorCore>elementwise.where(constant, 1.0, variances))
    return elementwise.where(constant, 0.0, roots)


cdef object variance(TensorCore tensor, object dim, object unbiased, bint keepdim,
                     object correction, str name):
    if unbiased is not None and not isinstance(unbiased, bool):
        raise TypeError(f"{name}: unbiased must be a bool or None, got "
                        f"{type(unbiased).__name__}")
    if correction is not None and (isinstance(correction, bool) or
                                   not isinstance(correction, (int, float))):
        raise TypeError(f"{name}: correction must be an int, a float or None, got "
                        f"{type(correction).__name__}")
    if correction is not None:
        scalar_operand_arg(correction, name, "correction")
    if unbiased is not None and correction is not None:
        raise TypeError(f"{name}: give unbiased or correction, not both (as PyTorch)")
    if not tensor.dtype_object.floating:  # PyTorch's words
        raise DtypeError(f"{name}: std and var only support floating point and complex dtypes, "
                         f"got {tensor.dtype_object.name}")
    cdef tuple dims = reduced_dims(tensor, dim, name)
    count = math.prod(tensor.sizes[d] for d in dims)
    subtracted = (0 if unbiased is False else 1) if correction is None else correction
    divisor = max(count - subtracted, 0)
    if divisor == 0:
        import warnings
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      stacklevel=3)
    deviations = elementwise.sub(tensor, mean_over(tensor, dims, True))
    squares = sum_over(<TensorCore>elementwise.mul(deviations, deviations), dims, keepdim)
    return elementwise.truediv(squares, float(divisor) if divisor else 0.0)


# norm(), as PyTorch's Tensor.norm of a vector (torch.linalg.vector_norm): the p-norm of the
# elements over dim, from recorded operations. The root of a sum that is 0, and for 0 < p < 1
# the power of a 0, go through where() on both sides, so their gradient there is 0, as
# PyTorch's, where the derivative's 0 * inf would make NaN.
# An infinite p is the largest (smallest) magnitude: over every dimension its gradient splits
# between ties, as PyTorch's; over some, max(dim)'s gives a tie's gradient to the first one
# (PyTorch splits it there too: docs/design.md).
cdef object norm(TensorCore tensor, object p, object dim, bint keepdim):
    if isinstance(p, str):
        if p != "fro":  # 'nuc' is a matrix norm, which this is not
            raise ValueError(f"norm: p must be a number or 'fro', got {errors.shown(p)}")
        p = 2
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"norm: p must be an int, a float or 'fro', got {errors.shown(p)}")
    if p != p:
        raise ValueError("norm: p must be a number, got nan")
    scalar_operand_arg(p, "norm", "p")  # an int that fits 64 bits
    if not tensor.dtype_object.floating:  # PyTorch's words
        raise DtypeError(f"linalg.vector_norm: Expected a floating point or complex tensor as "
                         f"input. Got {tensor.dtype_object.name}")
    cdef tuple dims = reduced_dims(tensor, dim, "norm")
    if (p < 0 or p == math.inf) and any(tensor.sizes[d] == 0 for d in dims):
        # no identity: PyTorch refuses what would be a max, min or power of no element
        shown = "inf" if p == math.inf else "-inf" if p == -math.inf else errors.shown(p)
        raise RuntimeError(f"linalg.vector_norm cannot compute the {shown} norm on an empty "
                           "tensor because the operation does not have an identity")
    magnitudes = elementwise.absolute(tensor)
    if p == math.inf or p == -math.inf:
        if len(dims) == len(tensor.sizes):
            extreme = maximum(<TensorCore>magnitudes) if p > 0 else minimum(<TensorCore>magnitudes)
        else:
            extreme = extreme_over(<TensorCore>magnitudes, dims, p > 0)
        shape = reduced_shape(tensor.sizes, dims, keepdim)
        return extreme if (<TensorCore>extreme).sizes == shape else \
            copies.reshape(<TensorCore>extreme, (shape,))
    if p == 0:  # the count of nonzero elements; its gradient is 0
        return sum_over(<TensorCore>copies.to(<TensorCore>elementwise.ne(tensor, 0), None,
                                              tensor.dtype_object, False, False), dims, keepdim)
    if p == 1:
        return sum_over(<TensorCore>magnitudes, dims, keepdim)
    if p == 2:
        powers = elementwise.mul(tensor, tensor)
    elif p > 0:  # |x| ** p through where() at 0, whose derivative p * 0 ** (p - 1) is inf for p < 1
        zeros = elementwise.eq(<TensorCore>magnitudes, 0)
        powers = elementwise.where(zeros, 0.0, elementwise.power(
            <TensorCore>elementwise.where(zeros, 1.0, magnitudes), p))
    else:
        powers = elementwise.power(<TensorCore>magnitudes, p)
    sums = sum_over(<TensorCore>powers, dims, keepdim)
    empty = elementwise.eq(<TensorCore>sums, 0)
    safe = elementwise.where(empty, 1.0, sums)
    root = elementwise.sqrt(<TensorCore>safe) if p == 2 else elementwise.power(
        <TensorCore>safe, 1.0 / p)
    return elementwise.where(empty, 0.0, root)


# Note [Fused softmax]
# softmax() and log_softmax() along dim, for the Tensor methods and tensorplay.nn.functional
# (autograd/nn.pyx, Note [Functional forms]), each slice shifted by its own maximum along dim
# before exp, as PyTorch's kernels do, so that no slice underflows however far below another's
# its values lie. On a CUDA device one kernel computes it (reduce.cu, softmax_dim: a block per
# slice, the sums in float for 16-bit floats, as PyTorch's), recorded as one node whose gradient
# is one kernel too (softmax_backward_dim, PyTorch's formulas from the saved output), so that a
# softmax costs one launch and not the five of its composition (the host cost of a classifier's
# loss). On the CPU numpy computes the same, in the same types (opmath), recorded as the same
# node, so both devices name the same grad_fn and refuse the same in-place changes, as
# PyTorch's. A 0-d or empty tensor takes the composition of recorded operations, the shift
# detached (it takes no gradient: a softmax does not change when its inputs are shifted).
cdef object softmax(TensorCore tensor, object dim):
    cdef int axis = softmax_dim(tensor, dim, "softmax")
    if fused_softmax_applies(tensor):
        return fused_softmax(tensor, axis, False)
    exponentials = elementwise.exp(shifted(tensor, axis))
    if not tensor.sizes:
        return elementwise.truediv(exponentials, exponentials)
    return elementwise.truediv(exponentials, sum_over(<TensorCore>exponentials, axis, True))


cdef object log_softmax(TensorCore tensor, object dim):
    cdef int axis = softmax_dim(tensor, dim, "log_softmax")
    if fused_softmax_applies(tensor):
        return fused_softmax(tensor, axis, True)
    shift = shifted(tensor, axis)
    exponentials = elementwise.exp(shift)
    if tensor.sizes:
        exponentials = sum_over(<TensorCore>exponentials, axis, True)
    return elementwise.sub(shift, elementwise.log(exponentials))


cdef bint fused_softmax_applies(TensorCore tensor):
    """Note [Fused softmax]: a tensor of floating point with at least one dimension and one
    element (the others take the composition, which refuses integers and handles 0-d and empty
    tensors)."""
    return tensor.dtype_object.floating and bool(tensor.sizes) and tensor.element_count > 0


cdef tuple rows_around(tuple sizes, int axis):
    """(outer, length, inner): sizes seen as three dimensions around axis."""
    return math.prod(sizes[:axis]), sizes[axis], math.prod(sizes[axis + 1:])


cdef object fused_softmax(TensorCore tensor, int axis, bint take_log):
    """softmax (log_softmax with take_log) of a tensor fused_softmax_applies to, in one launch,
    recorded as one node (Note [Fused softmax])."""
    cdef TensorCore source, output
    if tensor.device_index == CPU:
        output = cpu_softmax(tensor, axis, take_log)
    else:
        source = <TensorCore>copies.contiguous(tensor.c_detach())
        output = <TensorCore>new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index)
        outer, length, inner = rows_around(tensor.sizes, axis)
        device_ops.softmax_dim(tensor.device_index, tensor.dtype_object, source.data,
                               output.data, outer, length, inner, take_log,
                               current_stream(tensor.device_index))
    if tracked(tensor):
        recorded(output, ops.OP_LOG_SOFTMAX if take_log else ops.OP_SOFTMAX, (tensor,),
                 (output.c_detach(),), axis)
    return output


cdef object softmax_backward(TensorCore grad, TensorCore output, int axis, bint take_log):
    """The gradient of a fused softmax (log_softmax with take_log) along axis, from its saved
    output and the gradient of that output, in one launch (reduce.cu, softmax_backward_dim)."""
    cdef TensorCore upstream = <TensorCore>copies.to(grad, None, output.dtype_object, False,
                                                     False)
    if output.device_index == CPU:
        return cpu_softmax_backward(upstream, output, axis, take_log)
    upstream = <TensorCore>copies.contiguous(upstream)  # as the kernel reads it
    cdef TensorCore result = <TensorCore>new_empty(output.sizes, output.dtype_object,
                                                   output.device_index)
    outer, length, inner = rows_around(output.sizes, axis)
    device_ops.softmax_backward_dim(output.device_index, output.dtype_object, output.data,
                                    upstream.data, result.data, outer, length, inner, take_log,
                                    current_stream(output.device_index))
    return result


cdef TensorCore cpu_softmax(TensorCore tensor, int axis, bint take_log):
    """fused_softmax's values on the CPU: numpy in the kernel's types (opmath)."""
    values = opmath(tensor)
    with np().errstate(all="ignore"):  # NaN and infinities, as the kernel: silent
        shift = values - values.max(axis=axis, keepdims=True)
        exponentials = np().exp(shift)
        total = exponentials.sum(axis=axis, keepdims=True)
        result = shift - np().log(total) if take_log else exponentials / total
    return wrap_cpu(np().asarray(stored(result, tensor.dtype_object), order="C"),
                    tensor.dtype_object)


cdef TensorCore cpu_softmax_backward(TensorCore grad, TensorCore output, int axis,
                                     bint take_log):
    """softmax_backward on the CPU: PyTorch's formulas in numpy, in the kernel's types."""
    y, g = opmath(output), opmath(grad)
    with np().errstate(all="ignore"):
        if take_log:
            result = g - np().exp(y) * g.sum(axis=axis, keepdims=True)
        else:
            result = y * (g - (g * y).sum(axis=axis, keepdims=True))
    return wrap_cpu(np().asarray(stored(result, output.dtype_object), order="C"),
                    output.dtype_object)


# Note [Fused nll_loss]
# nll_loss (and so cross_entropy of class indices) as one node. On a CUDA device one kernel
# computes every row's loss, or their sum or weighted mean with the total weight (reduce.cu,
# nll_loss_rows), and the gradient for the log-probabilities is one kernel too
# (nll_loss_backward_rows, PyTorch's nll_loss_backward): two launches where the composition of
# gather, masks and sums queued about ten each way. On the CPU numpy computes the same, in the
# kernels' types (the targets were checked in range there). The caller (autograd/nn.pyx,
# picked_losses) has checked the operands; label smoothing and a weight that requires grad
# keep the composition.
cdef object nll_loss(TensorCore logp, TensorCore target, object weight, int class_dim,
                     object ignore_index, int reduction):
    """The loss of log-probabilities logp (classes along class_dim) at the int64 targets, of
    logp's shape without class_dim, weight None or one per class of logp's dtype, both on logp's
    device; reduction 0 none, 1 sum, 2 mean (Note [Fused nll_loss])."""
    cdef TensorCore source, output
    cdef TensorCore targets = <TensorCore>copies.contiguous(target)
    cdef TensorCore weights = None if weight is None else \
        <TensorCore>copies.contiguous((<TensorCore>weight).c_detach())
    cdef int device = logp.device_index
    outer, classes, inner = rows_around(logp.sizes, class_dim)
    if device == CPU:
        output, total = cpu_nll_loss(logp, targets, weights, outer, classes, inner,
                                     ignore_index, reduction)
    else:
        source = <TensorCore>copies.contiguous(logp.c_detach())
        output = <TensorCore>new_empty(target.sizes if reduction == 0 else (),
                                       logp.dtype_object, device)
        total = None if reduction == 0 else new_empty(
            (), computed_in(logp.dtype_object), device)
        device_ops.nll_loss(device, logp.dtype_object, source.data, targets.data,
                            0 if weights is None else weights.data, output.data,
                            0 if total is None else (<TensorCore>total).data, outer, classes,
                            inner, ignore_index, reduction, current_stream(device))
    if tracked(logp):
        recorded(output, ops.OP_NLL_LOSS, (logp, target, weight), (targets, weights, total),
                 (class_dim, ignore_index, reduction))
    return output


cdef object nll_loss_backward(TensorCore grad, tuple logp_meta, tuple saved, tuple state):
    """The gradient of a fused nll_loss for its log-probabilities (of logp_meta: sizes, dtype,
    device), from the loss's gradient and what the node saved (Note [Fused nll_loss])."""
    targets, weights, total = saved
    class_dim, ignore_index, reduction = state
    sizes, dtype, device = logp_meta
    cdef TensorCore upstream = <TensorCore>copies.to(grad, None, dtype, False, False)
    outer, classes, inner = rows_around(sizes, class_dim)
    if device == CPU:
        return cpu_nll_loss_backward(upstream, sizes, dtype, targets, weights, total, outer,
                                     classes, inner, ignore_index, reduction)
    upstream = <TensorCore>copies.contiguous(upstream)  # as the kernel reads it
    cdef TensorCore result = <TensorCore>new_empty(sizes, dtype, device)
    device_ops.nll_loss_backward(device, dtype, (<TensorCore>targets).data,
                                 0 if weights is None else (<TensorCore>weights).data,
                                 upstream.data, 0 if total is None else (<TensorCore>total).data,
                                 result.data, outer, classes, inner, ignore_index, reduction,
                                 current_stream(device))
    return result


cdef tuple cpu_targets(TensorCore targets, object weights, object values, object outer,
                       object inner, object ignore_index):
    """nll_loss's rows on the CPU, whose targets were checked in range: (the class each row
    reads, 0 where ignored; whether it is ignored; its class's weight, in values' type)."""
    rows = computable(targets).reshape(outer, inner)
    ignored = rows == ignore_index
    chosen = np().where(ignored, 0, rows)
    if weights is None:
        return chosen, ignored, np().ones(chosen.shape, values.dtype)
    return chosen, ignored, opmath(<TensorCore>weights)[chosen]


cdef tuple cpu_nll_loss(TensorCore logp, TensorCore targets, object weights, object outer,
                        object classes, object inner, object ignore_index, int reduction):
    """nll_loss's (output, total weight or None) on the CPU: numpy in the kernel's types."""
    cdef DtypeCore dtype = logp.dtype_object
    values = opmath(logp).reshape(outer, classes, inner)
    chosen, ignored, weight_of = cpu_targets(targets, weights, values, outer, inner,
                                             ignore_index)
    picked = np().take_along_axis(values, chosen[:, None, :], axis=1)[:, 0, :]
    with np().errstate(all="ignore"):  # a mean of no weight is NaN, as the kernel's
        losses = np().where(ignored, 0, -picked * weight_of)
        if reduction == 0:
            # asarray, not ascontiguousarray, which makes a 0-d result 1-d.
            return wrap_cpu(np().asarray(stored(losses.reshape(targets.sizes), dtype),
                                         order="C"), dtype), None
        kept = np().where(ignored, 0, weight_of).sum()
        loss = losses.sum() / kept if reduction == 2 else losses.sum()
    total_dtype = computed_in(dtype)
    return (wrap_cpu(np().asarray(stored(np().asarray(loss), dtype)), dtype),
            wrap_cpu(np().asarray(stored(np().asarray(kept), total_dtype)), total_dtype))


cdef TensorCore cpu_nll_loss_backward(TensorCore upstream, tuple sizes, DtypeCore dtype,
                                      object targets, object weights, object total,
                                      object outer, object classes, object inner,
                                      object ignore_index, int reduction):
    """nll_loss_backward on the CPU: -weight * g at each row's class, zero elsewhere."""
    g = opmath(upstream)
    chosen, ignored, weight_of = cpu_targets(<TensorCore>targets, weights, g, outer, inner,
                                             ignore_index)
    with np().errstate(all="ignore"):
        if reduction == 0:
            g = g.reshape(outer, inner)
        elif reduction == 2:
            g = g / opmath(<TensorCore>total)
        values = np().where(ignored, 0, -weight_of * g).astype(weight_of.dtype)
    result = np().zeros((outer, classes, inner), values.dtype)
    np().put_along_axis(result, chosen[:, None, :], values[:, None, :], axis=1)
    return wrap_cpu(np().asarray(stored(result.reshape(sizes), dtype), order="C"), dtype)


cdef object logsumexp(TensorCore tensor, object dim, bint keepdim):
    """log(sum(exp(x))) over dim, as torch.logsumexp: each slice shifted by its largest element
    (detached; an infinite one shifts by 0, as PyTorch's, so that inf - inf makes no NaN),
    then the shift added back. Integers and bools compute in float32."""
    if dim is None:  # PyTorch's logsumexp takes no None
        raise TypeError("logsumexp: dim must be an int or a tuple or list of ints, got None")
    cdef tuple dims = reduced_dims(tensor, dim, "logsumexp")
    if not tensor.dtype_object.floating:
        tensor = <TensorCore>copies.to(tensor, None, dtypes.named_dtype("float32"), False, False)
    if tensor.element_count == 0:
        return elementwise.log(sum_over(<TensorCore>elementwise.exp(tensor), dims, keepdim))
    shift = extreme_over(tensor.c_detach(), dims, True) if tensor.sizes else \
        maximum(tensor.c_detach())
    shift = elementwise.masked_fill(<TensorCore>shift, elementwise.isinf(<TensorCore>shift), 0)
    sums = sum_over(<TensorCore>elementwise.exp(elementwise.sub(tensor, shift)), dims, True)
    result = elementwise.add(elementwise.log(sums), shift)
    return result if keepdim else copies.reshape(<TensorCore>result,
                                                 (reduced_shape(tensor.sizes, dims, False),))


cdef object extreme_over(TensorCore tensor, tuple dims, bint largest):
    """The largest (smallest) element over dims, kept as dimensions of size 1: max(dim) or
    min(dim) over each in turn."""
    for axis in dims:
        tensor = (max_over(tensor, axis, True) if largest else min_over(tensor, axis, True))[0]
    return tensor


cdef tuple reduced_shape(tuple sizes, tuple dims, bint keepdim):
    """The shape a reduction over dims leaves: those dimensions of size 1 with keepdim, else
    gone."""
    if keepdim:
        return tuple(1 if d in dims else size for d, size in enumerate(sizes))
    return tuple(size for d, size in enumerate(sizes) if d not in dims)


cdef int softmax_dim(TensorCore tensor, object dim, str name) except -1:
    """dim as a dimension of tensor (PyTorch's rules: negative counts from the end; a 0-d
    tensor takes 0 or -1)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: dim must be an int, got {type(dim).__name__}")
    cdef int ndim = max(len(tensor.sizes), 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {errors.shown(dim)}) (argument dim)")
    return dim % ndim


cdef object shifted(TensorCore tensor, int axis):
    """tensor less each slice's maximum along axis, detached."""
    if not tensor.dtype_object.floating:
        raise TypeError(f"softmax needs a floating-point input, got {tensor.dtype_object.name}")
    if tensor.element_count == 0:
        return tensor
    if not tensor.sizes:
        return elementwise.sub(tensor, max_over(tensor.c_detach(), None, False))
    return elementwise.sub(tensor, max_over(tensor.c_detach(), axis, True)[0])


# any() and all(): whether some (every) element over dim is nonzero, as PyTorch's: a bool tensor,
# uint8 for uint8 input (PyTorch keeps that legacy), NaN nonzero; of no element, any is False
# and all True. Counted by the sum kernels over a comparison with 0, so they run, and capture,
# wherever sum() does.
cdef object any_over(TensorCore tensor, object dim, bint keepdim):
    reduced_dims(tensor, dim, "any")  # checked before any work is queued
    return truth_result(tensor, elementwise.gt(reduce_over(
        <TensorCore>elementwise.ne(tensor, 0), dim, keepdim, False, "any"), 0))


cdef object all_over(TensorCore tensor, object dim, bint keepdim):
    reduced_dims(tensor, dim, "all")
    return truth_result(tensor, elementwise.eq(reduce_over(
        <TensorCore>elementwise.eq(tensor, 0), dim, keepdim, False, "all"), 0))


cdef object truth_result(TensorCore tensor, object result):
    if tensor.dtype_object.name == "uint8":
        return copies.to(<TensorCore>result, None, tensor.dtype_object, False, False)
    return result


cdef tuple reduced_dims(TensorCore tensor, object dim, str name):
    """The dimensions sum() or mean() reduce, sorted: dim as an int or a tuple or list of
    ints (negative ones count from the end); None or an empty sequence for all."""
    if dim is None:
        return tuple(range(len(tensor.sizes)))
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if any(isinstance(value, bool) or not isinstance(value, int) for value in dims):
        raise TypeError(f"{name}: dim must be an int or a tuple or list of ints, got "
                        f"{errors.shown(dim)}")
    normalised = [tensor.c_dim(value) for value in dims]
    for value, position in zip(dims, normalised):
        if normalised.count(position) > 1:
            raise ShapeError(f"{name}: dim {value} appears multiple times in the list of "
                             f"dims {errors.shown(dims)}")
    if not normalised or not tensor.sizes:
        return tuple(range(len(tensor.sizes)))
    return tuple(sorted(normalised))


cdef object reduce_over(TensorCore tensor, object dim, bint keepdim, bint mean, str name):
    """sum() or mean() over dim (see c_reduced_dims), keeping reduced dimensions as size 1
    when keepdim."""
    cdef tuple dims = reduced_dims(tensor, dim, name)
    cdef DtypeCore result_dtype = reduced_dtype(tensor.dtype_object,
                                                ops.OP_MEAN if mean else ops.OP_SUM)
    shape = reduced_shape(tensor.sizes, dims, keepdim)
    if len(dims) == len(tensor.sizes):  # the whole tensor: the two-launch reduction
        whole = <TensorCore>reduce_whole(tensor, ops.OP_SUM, mean, name)
        return reshaped(whole, shape)
    if tensor.device_index == CPU:
        values = computable(tensor)
        with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
            result = cpu_mean(values, dims, keepdim) if mean else values.sum(
                axis=dims, keepdims=keepdim,
                dtype=np().int64 if not tensor.dtype_object.floating else values.dtype)
        return wrap_cpu(np().asarray(stored(result, result_dtype), order="C"), result_dtype)
    output = new_empty(shape, result_dtype, tensor.device_index)
    kept = [d for d in range(len(tensor.sizes)) if d not in dims]
    reduced_count = math.prod(tensor.sizes[d] for d in dims)
    device_ops.reduce_dims(tensor.device_index, tensor.dtype_object, tensor.data,
                           tuple(tensor.sizes[d] for d in kept),
                           tuple(tensor.element_strides[d] for d in kept),
                           tuple(tensor.sizes[d] for d in dims),
                           tuple(tensor.element_strides[d] for d in dims), result_dtype,
                           (<TensorCore>output).data,
                           float(reduced_count) if mean else 1.0,
                           current_stream(tensor.device_index))
    return output


cdef object maximum(TensorCore tensor):
    result = reduce_whole(tensor, ops.OP_MAX, False, "max")
    return recorded(result, ops.OP_MAX, (tensor,), (tensor,)) if tracked(tensor) else result


cdef object minimum(TensorCore tensor):
    result = reduce_whole(tensor, ops.OP_MIN, False, "min")
    return recorded(result, ops.OP_MIN, (tensor,), (tensor,)) if tracked(tensor) else result


cdef object max_over(TensorCore tensor, object dim, bint keepdim):
    """x.max() (a 0-d tensor), or x.max(dim, keepdim): (values, indices) as PyTorch's."""
    if dim is None:
        return maximum(<TensorCore>no_keepdim(tensor, keepdim, "max"))
    return max_result(*select_over(tensor, dim, keepdim, ops.OP_MAX, "max", True))


cdef object min_over(TensorCore tensor, object dim, bint keepdim):
    if dim is None:
        return minimum(<TensorCore>no_keepdim(tensor, keepdim, "min"))
    return min_result(*select_over(tensor, dim, keepdim, ops.OP_MIN, "min", True))


cdef object amax(TensorCore tensor, object dim, bint keepdim):
    return extreme_values(tensor, dim, keepdim, True)


cdef object amin(TensorCore tensor, object dim, bint keepdim):
    return extreme_values(tensor, dim, keepdim, False)


cdef object extreme_values(TensorCore tensor, object dim, bint keepdim, bint largest):
    """torch.amax / amin: the largest (smallest) element over dim (None or () for all), NaN if
    any element reduced is NaN. Unlike max(dim), the gradient is shared evenly among the
    elements equal to the result, as PyTorch's amax / amin backward."""
    name = "amax" if largest else "amin"
    cdef tuple dims = reduced_dims(tensor, dim, name)
    for d in dims:
        if tensor.sizes[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    cdef TensorCore source = tensor.c_detach()
    if len(dims) == len(tensor.sizes):  # the whole tensor: the two-launch reduction
        kept = maximum(source) if largest else minimum(source)
        kept = reshaped(<TensorCore>kept, reduced_shape(tensor.sizes, dims, True))
    else:
        kept = extreme_over(source, dims, largest)
    result = kept if keepdim else reshaped(<TensorCore>kept,
                                           reduced_shape(tensor.sizes, dims, False))
    if tracked(tensor) and tensor.dtype_object.floating:
        return recorded(result, ops.OP_AMAX if largest else ops.OP_AMIN, (tensor,),
                        (tensor, kept), (dims, keepdim))
    return result


cdef object no_keepdim(TensorCore tensor, bint keepdim, str name):
    # PyTorch's max() has no keepdim without a dim (a TypeError there too).
    if keepdim:
        raise TypeError(f"{name}: keepdim needs a dim; {name}() of the whole tensor is 0-d")
    return tensor


cdef object argmax(TensorCore tensor, object dim, bint keepdim):
    return select_over(tensor, dim, keepdim, ops.OP_MAX, "argmax", False)[1]


cdef object argmin(TensorCore tensor, object dim, bint keepdim):
    return select_over(tensor, dim, keepdim, ops.OP_MIN, "argmin", False)[1]


cdef tuple select_over(TensorCore tensor, object dim, bint keepdim, int op, str name,
                       bint with_values):
    """(values or None, int64 indices) of the max or min (op) over dim, as torch.max(dim) and
    torch.argmax: the first occurrence, NaN before any number. dim None (argmax / argmin
    only) reduces the flattened tensor, keepdim then giving every dimension size 1."""
    if not with_values and tensor.dtype_object.name == "bool":
        raise DtypeError(f"{name}(): does not support bool input")
    if dim is None:
        if tensor.element_count == 0:
            raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                             "input.numel() == 0.")
        flat = reshaped(<TensorCore>copies.contiguous(tensor), (tensor.element_count,))
        indices = select_over(flat, 0, False, op, name, False)[1]
        return None, reshaped(indices, (1,) * len(tensor.sizes) if keepdim else ())
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: dim must be an int or None, got {errors.shown(dim)}")
    cdef int d = tensor.c_dim(dim)
    sizes = tensor.sizes
    length = sizes[d] if sizes else 1  # a 0-d tensor is its own max
    if length == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    kept = tuple(size for index, size in enumerate(sizes) if index != d)
    shape = tuple(1 if index == d else size for index, size in enumerate(sizes)) if keepdim \
        else kept
    int64 = dtypes.named_dtype("int64")
    if tensor.device_index == CPU:
        values = tensor.array.reshape(1) if not sizes else tensor.array
        where = computable(tensor).reshape(values.shape)
        where = np().argmax(where, axis=d) if op == ops.OP_MAX else np().argmin(where, axis=d)
        chosen = np().take_along_axis(values, np().expand_dims(where, d), d)
        # np.array, not ascontiguousarray, which makes a 0-d result 1-d.
        indices = wrap_cpu(np().array(where.reshape(shape), dtype=np().int64, order="C"), int64)
        result = wrap_cpu(np().array(chosen.reshape(shape), order="C"),
                          tensor.dtype_object) if with_values else None
    else:
        indices = new_empty(kept, int64, tensor.device_index)
        result = new_empty(kept, tensor.dtype_object, tensor.device_index) if with_values \
            else None
        device_ops.select_dim(tensor.device_index, tensor.dtype_object, tensor.data, kept,
                              tuple(stride for index, stride in enumerate(tensor.element_strides)
                                    if index != d),
                              length, tensor.element_strides[d] if sizes else 0,
                              (<TensorCore>result).data if with_values else 0,
                              (<TensorCore>indices).data, op,
                              current_stream(tensor.device_index))
        indices = reshaped(indices, shape)
        if with_values:
            result = reshaped(result, shape)
    if with_values and tracked(tensor) and tensor.dtype_object.floating:
        result = recorded(result, ops.OP_MAX_DIM if op == ops.OP_MAX else ops.OP_MIN_DIM,
                          (tensor,), (indices,), (d if sizes else 0, keepdim))
    return result, indices


cdef object count_nonzero(TensorCore tensor, object dim):
    nonzero = elementwise.ne(tensor, 0)
    return nonzero.sum() if dim is None else nonzero.sum(dim)  # a sum of bools is int64


cdef tuple var_mean(object input, object dim, object unbiased, bint keepdim, object correction):
    cdef TensorCore tensor = own_tensor_arg(input, "input")
    return (var_over(tensor, dim, unbiased, keepdim, correction),
            mean_over(tensor, dim, keepdim))


cdef tuple std_mean(object input, object dim, object unbiased, bint keepdim, object correction):
    cdef TensorCore tensor = own_tensor_arg(input, "input")
    return (std_over(tensor, dim, unbiased, keepdim, correction),
            mean_over(tensor, dim, keepdim))
