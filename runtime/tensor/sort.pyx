# cython: language_level=3
"""sort(), argsort(), topk(), mode(), and the order statistics median(), nanmedian() and
kthvalue() (api.yaml: the tensorplay functions and the Tensor methods), as PyTorch's.

Note [Sorting]
Each sorts the slices along one dimension: sort gives the values and the int64 position each
came from, as torch.return_types.sort; argsort the positions alone; topk the first k of the
largest (or smallest) values and their positions. NaN counts as larger than every number, as
PyTorch's: last ascending, first descending and first among topk's largest. Equal values keep
their order (a stable sort), whatever `stable` asks: PyTorch allows any order without it, and
one order on both devices makes results reproducible.
On a device sort.cu runs a bitonic network over (value, position) pairs, reading the input
through its strides: one launch sorts slices of up to 2048 elements in shared memory, a block
each; a longer slice is sorted in chunks of 2048 and merged by a launch per step that spans
chunks (each over every slice, so the whole device works on one slice) and one per stage for
the rest, chunk by chunk. Nothing is read back, so a CUDA graph captures it. The network costs
n log^2 n: PyTorch's radix sort is faster on long slices. topk sorts the whole slice and keeps
k: no selection kernel of its own. On the CPU numpy's stable argsort computes the same order.
The gradient of the values is gather's (they are the input gathered at the positions): the
gradient scatter-added into zeros of the input's shape, as PyTorch's sort and topk backward.

Note [Order statistics]
kthvalue, median and nanmedian along a dimension pick one position of each sorted slice, so
they are sort() and a gather, with gather's gradient (PyTorch's value_selecting_reduction
backward). kthvalue's position is k - 1 in every slice; NaN, sorting last, is the largest.
median's is (n - 1) // 2, the lower of the two middle elements, as PyTorch's; a slice holding
NaN has the median NaN, at its first NaN (sorted position n - NaNs). nanmedian's skips the
NaNs: (n - NaNs - 1) // 2, and NaN where all are. The positions differ by slice only through the
count of NaNs, which a sum over isnan() gives on the device, so nothing is read back and a CUDA
graph captures them all. median() and nanmedian() of the whole tensor sort it flattened; their
gradient is shared evenly among the elements equal to the result (NaN matching NaN), as
PyTorch's evenly_distribute_backward.

Note [Most frequent values]
mode gives the most frequent value of each slice, the smallest of those equally frequent, as
PyTorch's, and its last position (PyTorch's is any of them beyond 16 elements); NaN equals
nothing, so each NaN counts once (PyTorch's answer with NaN is an artefact of its sort:
docs/design.md, "Where we differ from the API reference"). The slice is sorted stably; a run
of equal values starts where an element differs from the one before, the running maximum of
those starts (cummax) gives each element its run's start, and so its count so far. The first
largest count (argmax) ends the smallest most frequent run, whose last element, by the stable
sort, is the value's last position. Nothing is read back, so a capture takes it; the values
carry gather's gradient, PyTorch's value_selecting_reduction_backward. bool is sorted as uint8.

Note [Quantiles]
quantile and nanquantile are PyTorch's computation: each q's rank in the sorted slice is
q * (n - 1), the last position where the slice holds NaN (quantile), or q * (numbers - 1) over
the numbers alone (nanquantile, 0 where there are none); lower, higher and nearest round the
rank (floor, ceil, round half to even), and the value is the sorted slice gathered at the rank's
floor, lerped toward its ceiling by the fraction (linear) or by 0.5 (midpoint). The ranks are
computed in the input's dtype, as PyTorch's. So the gradient goes through the gathers and the
lerp to the elements chosen. q is a Python float or a 0-d or 1-D tensor of the input's dtype
and device; a 1-D q puts its dimension first in the result. PyTorch checks a tensor q's range
only on the CPU (reading a device's values would wait for it); on a device a q outside [0, 1]
(or NaN) gives NaN here, computed there, and a CUDA graph captures the whole of it.
"""
import math

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.base.dtypes cimport CODE_BOOL
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport (copies, elementwise, factories, reduction,
                                         return_types, scan, scatter_gather)
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, device_text,
                                              new_empty, recorded, tracked, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable
from tensorplay._runtime.tensor.reduction cimport reduced_shape
from tensorplay._runtime.tensor.scatter_gather cimport gathered

from tensorplay._runtime.tensor.arguments import ArgumentValueError

# torch.return_types.sort and .topk: named tuples of the values and their positions.
sort_result = return_types.return_type("sort")
topk_result = return_types.return_type("topk")
median_result = return_types.return_type("median")
nanmedian_result = return_types.return_type("nanmedian")
kthvalue_result = return_types.return_type("kthvalue")
mode_result = return_types.return_type("mode")


cdef object sort(TensorCore tensor, object dim, bint descending, bint stable):
    cdef int axis = tensor.c_dim(dim)
    values, indices = sorted_along(tensor, axis, descending)
    return sort_result(gathered_values(tensor, values, indices, axis), indices)


cdef object argsort(TensorCore tensor, object dim, bint descending, bint stable):
    return sorted_along(tensor, tensor.c_dim(dim), descending)[1]


cdef object topk(TensorCore tensor, long long k, object dim, bint largest, bint sorted):
    cdef int axis = tensor.c_dim(-1 if dim is None else dim)
    length = tensor.sizes[axis] if tensor.sizes else 1
    if not 0 <= k <= length:  # PyTorch's message
        raise RuntimeError(f"selected index k out of range (k={k}, and the size of dim {axis} "
                           f"is {length})")
    if tensor.dtype_object.code == CODE_BOOL:
        raise RuntimeError("topk does not support bool dtypes, as PyTorch's; convert with "
                           ".to(tensorplay.int64) first")
    values, indices = sorted_along(tensor, axis, largest)
    if tensor.sizes and k < length:  # the first k, as tensors of their own
        values = copies.contiguous(<TensorCore>copies.narrow(<TensorCore>values, axis, 0, k))
        indices = copies.contiguous(<TensorCore>copies.narrow(<TensorCore>indices, axis, 0, k))
    return topk_result(gathered_values(tensor, values, indices, axis), indices)


cdef object kthvalue(TensorCore tensor, long long k, object dim, bint keepdim):
    cdef int axis = tensor.c_dim(-1 if dim is None else dim)
    refuse_bool(tensor, "kthvalue")
    length = tensor.sizes[axis] if tensor.sizes else 1
    if not 1 <= k <= length:  # PyTorch's message
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {axis} "
                           f"(k={k}, and the size of dim {axis} is {length})")
    if not tensor.sizes:
        return kthvalue_result(*selected(as_vector(tensor), 0, 0, False))
    return kthvalue_result(*selected(tensor, axis, k - 1, keepdim))


cdef object mode(TensorCore tensor, object dim, bint keepdim):
    """The most frequent value of each slice along dim and its last position (Note [Most
    frequent values])."""
    cdef int axis = tensor.c_dim(-1 if dim is None else dim)
    int64 = dtypes.named_dtype("int64")
    device = device_text(tensor.device_index)
    if not tensor.sizes:  # a 0-d tensor is its own mode, at 0
        return mode_result(copies.clone(tensor), factories.zeros((), int64, device, False))
    length = tensor.sizes[axis]
    if length == 0:  # PyTorch's message
        raise IndexError(f"mode(): Expected reduction dim {axis} to have non-zero size.")
    # bool sorts as uint8, its values gathered from the tensor itself
    keys = copies.to(tensor, None, dtypes.named_dtype("uint8"), False, False) \
        if tensor.dtype_object.code == CODE_BOOL else tensor
    ordered, order = sorted_along(<TensorCore>keys, axis, False)
    starts = run_starts(<TensorCore>ordered, axis)
    shape = [1] * len(tensor.sizes)
    shape[axis] = length
    along = copies.reshape(<TensorCore>factories.arange(0, length, 1, int64, device, False),
                           (tuple(shape),))
    first = scan.cummax(<TensorCore>elementwise.where(starts, along, 0), axis)[0]
    counts = elementwise.add(<TensorCore>elementwise.sub(<TensorCore>along, first), 1)
    position = reduction.argmax(<TensorCore>counts, axis, True)  # the smallest value's run
    indices = gathered(<TensorCore>order, axis, <TensorCore>position)
    values = gathered_values(tensor, gathered(<TensorCore>tensor.c_detach(), axis,
                                              <TensorCore>indices), indices, axis)
    if not keepdim:
        shape = reduced_shape(tensor.sizes, (axis,), False)
        values = copies.reshape(<TensorCore>values, (shape,))
        indices = copies.reshape(<TensorCore>indices, (shape,))
    return mode_result(values, indices)


cdef object run_starts(TensorCore tensor, int axis):
    """A bool tensor of tensor's shape: True where an element starts a run of equal elements
    along axis (each slice's first always; NaN equals nothing: a run of its own)."""
    length = tensor.sizes[axis]
    leading = factories.ones(tensor.sizes[:axis] + (1,) + tensor.sizes[axis + 1:],
                             dtypes.named_dtype("bool"), device_text(tensor.device_index), False)
    if length == 1:
        return leading
    later = copies.narrow(tensor, axis, 1, length - 1)
    earlier = copies.narrow(tensor, axis, 0, length - 1)
    return copies.cat([leading, elementwise.ne(<TensorCore>later, earlier)], axis)


cdef object median(TensorCore tensor, object dim, bint keepdim):
    return middle(tensor, dim, keepdim, False)


cdef object nanmedian(TensorCore tensor, object dim, bint keepdim):
    return middle(tensor, dim, keepdim, True)


cdef object middle(TensorCore tensor, object dim, bint keepdim, bint skip_nan):
    """median / nanmedian (skip_nan): of the whole tensor (dim None, a 0-d tensor), or the
    named tuple (values, indices) of each slice along dim (Note [Order statistics])."""
    name = "nanmedian" if skip_nan else "median"
    refuse_bool(tensor, name)
    if dim is None:
        if keepdim:  # as max(): PyTorch's median() has no keepdim either
            raise TypeError(f"{name}: keepdim needs a dim; {name}() of the whole tensor is 0-d")
        return whole_middle(tensor, skip_nan, name)
    cdef int axis = tensor.c_dim(dim)
    if tensor.sizes and tensor.sizes[axis] == 0:  # PyTorch's message, median's for both
        raise IndexError(f"median(): Expected reduction dim {axis} to have non-zero size.")
    result = median_result if not skip_nan else nanmedian_result
    if not tensor.sizes:
        tensor, keepdim = as_vector(tensor), False
    return result(*selected(tensor, axis, middle_position(tensor, axis, skip_nan), keepdim))


QUANTILE_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


cdef object quantile(TensorCore tensor, object q, object dim, bint keepdim, object interpolation):
    return quantiles(tensor, q, dim, keepdim, interpolation, False)


cdef object nanquantile(TensorCore tensor, object q, object dim, bint keepdim,
                        object interpolation):
    return quantiles(tensor, q, dim, keepdim, interpolation, True)


cdef object quantiles(TensorCore tensor, object q, object dim, bint keepdim, object interpolation,
                      bint skip_nan):
    """quantile / nanquantile (skip_nan), Note [Quantiles]: every argument's type first, then
    the values in PyTorch's order and words (a value it refuses with a RuntimeError is an
    ArgumentValueError, a ValueError too)."""
    name = "nanquantile()" if skip_nan else "quantile()"
    if not isinstance(interpolation, str):
        raise TypeError(f"{name} interpolation must be a str, got {type(interpolation).__name__}")
    cdef TensorCore chosen = None
    if isinstance(q, TensorCore):
        chosen = q
    elif not isinstance(q, (int, float)) or isinstance(q, bool):
        raise TypeError(f"{name} q must be a float or a tensor, got {type(q).__name__}")
    cdef int axis = 0 if dim is None else tensor.c_dim(dim)
    if interpolation not in QUANTILE_MODES:
        raise ArgumentValueError(f"{name} interpolation must be one of linear, lower, higher, "
                                 f"midpoint or nearest, but got {interpolation:.200}")
    if chosen is None and not 0 <= q <= 1:
        raise ArgumentValueError(f"{name} q must be in the range [0, 1] but got "
                                 f"{errors.shown(q)}")
    if tensor.element_count == 0:
        raise RuntimeError(f"{name} input tensor must be non-empty")
    if chosen is not None and len(chosen.sizes) > 1:
        raise RuntimeError(f"{name} q must be a scalar or 1D tensor")
    if tensor.dtype_object.name not in ("float32", "float64"):
        raise RuntimeError(f"{name} input tensor must be either float or double dtype")
    if chosen is not None and chosen.dtype_object is not tensor.dtype_object:
        raise RuntimeError(f"{name} q tensor must be same dtype as the input tensor")
    if chosen is not None and chosen.device_index != tensor.device_index:
        raise RuntimeError(f"{name} q tensor must be on the same device as the input tensor")
    if chosen is not None and chosen.device_index == CPU:
        checked = np().asarray(computable(chosen))
        if not ((checked >= 0) & (checked <= 1)).all():
            raise ArgumentValueError(f"{name} q values must be in the range [0, 1]")
    source = tensor
    if dim is None or not tensor.sizes:  # one slice of every element (recorded, as reshape)
        source = copies.reshape(tensor, ((tensor.element_count,),))
    count = (<TensorCore>source).sizes[axis]
    # q as a vector of the input's dtype on its device, clamped into [0, 1] (a device q outside
    # is NaN at the end); a Python float is converted in the input's dtype, as PyTorch's.
    if chosen is None:
        fractions = copies.fill_(<TensorCore>new_empty((1,), tensor.dtype_object,
                                                       tensor.device_index), q)
    else:
        fractions = copies.reshape(chosen.c_detach(), ((-1,),))
    outside = None
    if chosen is not None and chosen.device_index != CPU:
        clamped = elementwise.clamp(<TensorCore>fractions, 0, 1)
        outside = elementwise.ne(<TensorCore>clamped, fractions)
        fractions = clamped
    shape = (<TensorCore>source).sizes
    kept = reduced_shape(shape, (axis,), True)
    length = (<TensorCore>fractions).element_count
    # Each q along a new first dimension, against the slices' shape with axis kept as 1.
    column = copies.reshape(<TensorCore>fractions, ((length,) + (1,) * len(kept),))
    ranks = quantile_ranks(<TensorCore>source, axis, <TensorCore>column, count, skip_nan)
    if interpolation == "lower":
        ranks = elementwise.floor(<TensorCore>ranks)
    elif interpolation == "higher":
        ranks = elementwise.ceil(<TensorCore>ranks)
    elif interpolation == "nearest":
        ranks = elementwise.rounded(<TensorCore>ranks, 0)
    values, order = sorted_along(<TensorCore>source, axis, False)
    ordered = gathered_values(<TensorCore>source, values, order, axis)  # the input's gradient
    spread = (<TensorCore>ordered).c_expand(((length,) + shape,))
    int64 = dtypes.named_dtype("int64")
    below = copies.to(<TensorCore>ranks, None, int64, False, False)
    result = scatter_gather.gather(<TensorCore>spread, axis + 1, below)
    if interpolation == "linear" or interpolation == "midpoint":
        above = copies.to(<TensorCore>elementwise.ceil(<TensorCore>ranks), None, int64, False,
                          False)
        weights = elementwise.sub(<TensorCore>ranks, copies.to(<TensorCore>below, None,
                                                               tensor.dtype_object, False, False))
        if interpolation == "midpoint":
            weights = copies.fill_(<TensorCore>copies.clone(<TensorCore>weights), 0.5)
        result = elementwise.lerp(<TensorCore>result, scatter_gather.gather(
            <TensorCore>spread, axis + 1, above), weights)
    if outside is not None:
        result = elementwise.where(copies.reshape(<TensorCore>outside, ((length,) + (1,) * len(
            kept),)), float("nan"), result)
    if dim is None:
        final = (1,) * len(tensor.sizes) if keepdim else ()
    else:
        final = reduced_shape(tensor.sizes, (axis,), keepdim)
    if chosen is None or not chosen.sizes:
        return copies.reshape(<TensorCore>result, (final,))
    return copies.reshape(<TensorCore>result, ((length,) + final,))


cdef object quantile_ranks(TensorCore source, int axis, TensorCore column, long long count,
                           bint skip_nan):
    """Each q's rank in the sorted slices (Note [Quantiles]): (len(q),) + the slices' shape with
    axis kept as 1, in the input's dtype."""
    last = count - 1
    nans = reduction.sum_over(<TensorCore>elementwise.isnan(source.c_detach()), axis, True)
    if skip_nan:  # q * (numbers - 1), 0 where there are no numbers
        numbers = copies.to(<TensorCore>elementwise.rsub(<TensorCore>nans, count),
                            None, source.dtype_object, False, False)
        return elementwise.clamp_min(<TensorCore>elementwise.mul(
            column, elementwise.sub(<TensorCore>numbers, 1)), 0)
    ranks = elementwise.mul(column, last)
    return elementwise.where(elementwise.gt(<TensorCore>nans, 0), float(last), ranks)


cdef TensorCore as_vector(TensorCore tensor):
    """A 0-d tensor as one slice of one element (its result is 0-d, keepdim or not, as
    PyTorch's)."""
    return copies.reshape(tensor, ((1,),))


cdef object whole_middle(TensorCore tensor, bint skip_nan, str name):
    """median() / nanmedian() of every element: a 0-d tensor, NaN for no elements."""
    cdef TensorCore source = tensor.c_detach()
    if source.element_count == 0:
        if not source.dtype_object.floating:
            raise RuntimeError(f"{name}(): cannot compute the median of an empty "
                               f"{source.dtype_object.name} tensor (an empty floating tensor's "
                               "is NaN)")
        return fill_nan(source)
    flat = copies.reshape(source, ((source.element_count,),))
    position = middle_position(<TensorCore>flat, 0, skip_nan)
    values, _ = sorted_along(<TensorCore>flat, 0, False)
    if isinstance(position, int):
        value = copies.narrow(<TensorCore>values, 0, position, 1)
    else:
        value = gathered(<TensorCore>values, 0, <TensorCore>position)
    result = copies.reshape(<TensorCore>copies.contiguous(<TensorCore>value), ((),))
    if tracked(tensor) and tensor.dtype_object.floating:
        return recorded(result, ops.OP_MEDIAN, (tensor,),
                        (tensor, (<TensorCore>result).c_detach()))
    return result


cdef object fill_nan(TensorCore tensor):
    """A 0-d NaN of tensor's dtype and device."""
    return copies.fill_(<TensorCore>new_empty((), tensor.dtype_object, tensor.device_index),
                        math.nan)


cdef object middle_position(TensorCore tensor, int axis, bint skip_nan):
    """The sorted position of each slice's median along axis: a Python int where every slice's
    is the same, else an int64 tensor of the reduced shape, dimensions kept (Note [Order
    statistics])."""
    length = tensor.sizes[axis] if tensor.sizes else 1
    if not tensor.dtype_object.floating:
        return (length - 1) // 2
    nans = reduction.sum_over(<TensorCore>elementwise.isnan(tensor.c_detach()), axis, True)
    numbers = elementwise.rsub(<TensorCore>nans, length)  # n - NaNs
    if skip_nan:  # (numbers - 1) // 2, position 0 (a NaN) where every element is NaN
        return elementwise.clamp_min(
            <TensorCore>elementwise.floordiv(<TensorCore>elementwise.sub(<TensorCore>numbers, 1),
                                             2), 0)
    return elementwise.where(elementwise.gt(<TensorCore>nans, 0), numbers, (length - 1) // 2)


cdef tuple selected(TensorCore tensor, int axis, object position, bint keepdim):
    """(values, int64 indices) of tensor's sorted slices along axis at position (an int, or an
    int64 tensor of the reduced shape, dimensions kept); the values carry gather's gradient."""
    values, order = sorted_along(tensor, axis, False)
    if isinstance(position, int):
        values = copies.contiguous(<TensorCore>copies.narrow(<TensorCore>values, axis, position, 1))
        indices = copies.contiguous(<TensorCore>copies.narrow(<TensorCore>order, axis, position, 1))
    else:
        values = gathered(<TensorCore>values, axis, <TensorCore>position)
        indices = gathered(<TensorCore>order, axis, <TensorCore>position)
    values = gathered_values(tensor, values, indices, axis)
    if keepdim:
        return values, indices
    shape = reduced_shape(tensor.sizes, (axis,), False)
    return copies.reshape(<TensorCore>values, (shape,)), copies.reshape(<TensorCore>indices,
                                                                       (shape,))


cdef int refuse_bool(TensorCore tensor, str name) except -1:
    if tensor.dtype_object.code == CODE_BOOL:  # PyTorch's error: it has no bool kernel
        raise NotImplementedError(f"{name} is not implemented for bool tensors, as PyTorch's; "
                                  "convert with .to(tensorplay.int64) first")
    return 0


cdef object gathered_values(TensorCore tensor, object values, object indices, int axis):
    """values, recorded as tensor gathered at indices along axis where autograd tracks it (its
    grad_fn is GatherBackward)."""
    if tracked(tensor) and tensor.dtype_object.floating:
        return recorded(values, ops.OP_GATHER, (tensor,), (indices,), axis)
    return values


cdef tuple sorted_along(TensorCore tensor, int axis, bint descending):
    """(values, int64 positions), contiguous, of tensor's slices along axis sorted (Note
    above), off the tape."""
    cdef TensorCore source = tensor.c_detach()
    int64 = dtypes.named_dtype("int64")
    if source.device_index == CPU:
        return cpu_sorted(source, axis, descending)
    values = new_empty(source.sizes, source.dtype_object, source.device_index)
    indices = new_empty(source.sizes, int64, source.device_index)
    sizes = source.sizes or (1,)  # a 0-d tensor as one slice of one element
    strides = source.element_strides or (0,)
    out_strides = (<TensorCore>values).element_strides or (0,)
    dims = (axis,)
    device_ops.sort_dim(
        source.device_index, source.dtype_object, source.data, reduced_shape(sizes, dims, False),
        reduced_shape(strides, dims, False), sizes[axis], strides[axis],
        (<TensorCore>values).data, (<TensorCore>indices).data,
        reduced_shape(out_strides, dims, False), out_strides[axis], descending,
        current_stream(source.device_index))
    return values, indices


cdef tuple cpu_sorted(TensorCore tensor, int axis, bint descending):
    """numpy's stable argsort, NaN last; descending sorts the reversed slices and reverses the
    result back, so that equal values keep their order there too."""
    sizes = tensor.sizes or (1,)
    keys = np().asarray(computable(tensor)).reshape(sizes)
    stored = np().asarray(tensor.array).reshape(sizes)
    if descending:
        length = sizes[axis]
        order = np().flip(np().argsort(np().flip(keys, axis), axis=axis, kind="stable"), axis)
        order = length - 1 - order
    else:
        order = np().argsort(keys, axis=axis, kind="stable")
    values = np().ascontiguousarray(np().take_along_axis(stored, order, axis))
    return (wrap_cpu(values.reshape(tensor.sizes), tensor.dtype_object),
            wrap_cpu(np().ascontiguousarray(order, dtype=np().int64).reshape(tensor.sizes),
                     dtypes.named_dtype("int64")))
