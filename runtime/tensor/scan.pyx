# cython: language_level=3
"""cumsum() and cumprod() (api.yaml: tensorplay.cumsum, cumprod and the Tensor methods, in place
or not), cummax(), cummin() and logcumsumexp(), as PyTorch's.

Note [Cumulative sums and products]
out[..., r, ...] is the sum (product) of the input's elements at positions 0..r along dim. The
result has the input's dtype, or int64 for integer and bool input (PyTorch's rule), or the dtype
asked for, to which the input is converted first; a bool dtype is refused, as PyTorch's kernels
have none. A 0-d tensor is its own sum. The in-place forms keep the tensor's dtype and refuse
another one with PyTorch's message.
On a device one kernel (scan.cu) reads the input through its strides and writes the result, a
warp of 32 lanes per row (scan_dim), or for a few long rows a block of 1024 threads per row
(scan_dim_blocks), accumulating in the kernels' accumulation types (float for 16-bit floats,
int64 for integers: an int32 sum wraps as int64's converted back, as PyTorch's).
On the CPU numpy computes it in the same types, so both devices round alike. Nothing is read
back to the host, so a CUDA graph captures every form, and their gradients.
Gradients are PyTorch's (derivatives.yaml, FunctionsManual.cpp): cumsum's is the gradient summed
from the end (the kernel's reverse scan).
cumprod's is sum_{j >= k} grad[j] * out[j] / x[k] where the slice has no zero before k; at its
first zero z1 the product of x before z1 times sum_{z1 <= j < z2} grad[j] * prod(x[z1+1..j])
(z2 the second zero or the end); after z1, zero. PyTorch asks the host whether any element is
zero to pick the cheap formula; that read would break a capture, so here the zero-safe one runs
always, as masks computed on the device (cumulative counts of zeros).

Note [Running extremes]
cummax and cummin give, at each position along dim, the largest (smallest) element so far and
where it is, as PyTorch's: the latest position on a tie, NaN the extreme from the first NaN on,
at the latest NaN (PyTorch's kernel moves to x when x is NaN, or when neither is and
x >= the running value). That rule combines two runs, earlier then later, as "the later run's
result where it wins, else the earlier's", which is associative, so a scan in log2(n) doubling
steps computes it from elementwise kernels and cat (Hillis and Steele's prefix scan): step s
combines each position with the one s before. Nothing is read back, so a CUDA graph captures
it; the values' gradient is gather's, the gradient added at the positions, as PyTorch's
cummaxmin_backward.

Note [Running log-sum-exp]
logcumsumexp is log(sum(exp(x))) of each prefix along dim, computed stably: the same doubling
scan with logaddexp(a, b) = max(a, b) + log1p(exp(-|a - b|)) as the combination (associative),
the difference taken as 0 where a == b so that two equal infinities give that infinity (and
-inf, nothing yet, stays -inf) rather than NaN. It is made of recorded operations, so its
gradient is theirs: exp(x - result) weighted, the tie's maximum splitting the gradient evenly,
as the derivative of logaddexp at a tie. float16 and bfloat16 are computed in float32 and
rounded once, as PyTorch's kernels accumulate them.
"""
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.base.dtypes cimport CODE_BOOL, DtypeCore
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies
from tensorplay._runtime.tensor.arguments cimport dtype_arg, np
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, device_text,
                                              is_contiguous, new_empty, recorded, tracked,
                                              wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, stored
from tensorplay._runtime.tensor cimport elementwise, factories, return_types
from tensorplay._runtime.tensor.elementwise cimport (add, bitwise_and, eq, invert, mul,
                                                     truediv, where)
from tensorplay._runtime.tensor.reduction cimport reduced_shape, sum_over

from tensorplay._runtime.tensor.arguments import BoolNotImplementedError, DtypeError


# torch.return_types.cummax and .cummin: named tuples of the values and their positions.
cummax_result = return_types.return_type("cummax")
cummin_result = return_types.return_type("cummin")


# --------------------------------------------------------------------------------------------
# The public forms


cdef object cumsum(TensorCore tensor, object dim, object dtype):
    return cumulative(tensor, dim, dtype, False, "cumsum")


cdef object cumprod(TensorCore tensor, object dim, object dtype):
    return cumulative(tensor, dim, dtype, True, "cumprod")


cdef object cumsum_(TensorCore tensor, object dim, object dtype):
    return cumulative_(tensor, dim, dtype, False, "cumsum_")


cdef object cumprod_(TensorCore tensor, object dim, object dtype):
    return cumulative_(tensor, dim, dtype, True, "cumprod_")


cdef DtypeCore result_dtype(TensorCore tensor, DtypeCore chosen, str name):
    if chosen is None:
        return tensor.dtype_object if tensor.dtype_object.floating else \
            dtypes.named_dtype("int64")
    if chosen.code == CODE_BOOL:
        refuse_bool(name)
    return chosen


cdef int refuse_bool(str name) except -1:
    # PyTorch's kernels have no bool result ("cumsum_out_cpu" not implemented for 'Bool').
    raise BoolNotImplementedError(f"{name}: not implemented for 'Bool' results, as in PyTorch; "
                                  "a bool tensor's sums are int64 (leave dtype None), or "
                                  "convert it with .to(tensorplay.int64) first")


cdef object cumulative(TensorCore tensor, object dim, object dtype, bint product, str name):
    # Every argument checked before anything is computed, the types first.
    cdef DtypeCore chosen = dtype_arg(dtype, None, "dtype")
    cdef int axis = tensor.c_dim(dim)
    cdef DtypeCore target = result_dtype(tensor, chosen, name)
    if chosen is not None and chosen is not tensor.dtype_object:
        # Converted first, as PyTorch's (a float sum asked for as int64 sums truncated
        # elements; float32 asked for as float64 accumulates in double), and recorded, so that
        # the gradient is converted back.
        tensor = copies.to(tensor, None, chosen, False, False)
    return recorded_scan(tensor, axis, product, target)


cdef object cumulative_(TensorCore tensor, object dim, object dtype, bint product, str name):
    cdef DtypeCore chosen = dtype_arg(dtype, None, "dtype")
    cdef int axis = tensor.c_dim(dim)
    if chosen is not None and chosen is not tensor.dtype_object:  # PyTorch's message
        raise RuntimeError(f"Bad in-place call: input tensor dtype {tensor.dtype_object.name} "
                           f"and output tensor dtype {chosen.name} should match")
    if tensor.dtype_object.code == CODE_BOOL:
        refuse_bool(name)
    if tensor.device_index != CPU and not tensor.grad_required and is_contiguous(tensor):
        # Written over in one launch (scan.cu reads each element before writing it), nothing
        # allocated; counted first, as copy_() counts it (c_mark_modified's refusals need a
        # tensor that requires grad or lives on the CPU).
        tensor.version.value += 1
        launch_scan(tensor, axis, product, False, tensor)
        return tensor
    # cumprod's gradient reads its input, which the copy below overwrites: a copy of it.
    source = copies.clone(tensor) if product and tracked(tensor) else tensor
    return copies.copy_(tensor, recorded_scan(source, axis, product,
                                              tensor.dtype_object), False)


# Note [Products]
# prod() is cumprod()'s last element along the dimension (of the flattened tensor without one),
# copied out so that the scan's memory is freed: the same kernel, accumulation types and dtype
# rules (int64 for integers and bool, the dtype keyword converting first), and, through the
# recorded scan and the view, cumprod's zero-safe gradient, which is PyTorch's prod_backward's
# value. An empty slice's product is 1.
cdef object prod(TensorCore tensor, object dim, bint keepdim, object dtype):
    cdef DtypeCore chosen = dtype_arg(dtype, None, "dtype")
    if dim is None:
        if keepdim:  # PyTorch's prod() has no keepdim without a dim (a TypeError there too)
            raise TypeError("prod: keepdim needs a dim; prod() of the whole tensor is 0-d")
        flat = copies.reshape(tensor, (tensor.element_count,))
        return copies.reshape(<TensorCore>prod(<TensorCore>flat, 0, False, dtype), ())
    cdef int axis = tensor.c_dim(dim)
    cdef DtypeCore target = result_dtype(tensor, chosen, "prod")
    length = tensor.sizes[axis] if tensor.sizes else 1
    if length == 0 and tracked(tensor) and target.floating:
        # Ones that autograd records, their gradient zeros of the (empty) input's shape.
        converted = copies.to(tensor, None, target, False, False)
        result = add(<TensorCore>sum_over(<TensorCore>mul(<TensorCore>converted, 0.0), axis,
                                          True), 1.0)
    elif length == 0:
        result = new_empty(reduced_shape(tensor.sizes, (axis,), True), target,
                           tensor.device_index)
        copies.fill_(<TensorCore>result, 1)
    else:
        products = cumulative(tensor, dim, dtype, True, "prod")
        result = copies.contiguous(<TensorCore>copies.narrow(<TensorCore>products, axis,
                                                              length - 1, 1)) \
            if tensor.sizes else products
    if keepdim or not tensor.sizes:
        return result
    return copies.reshape(<TensorCore>result, reduced_shape(tensor.sizes, (axis,), False))


# --------------------------------------------------------------------------------------------
# The scan and its record


cdef object recorded_scan(TensorCore tensor, int axis, bint product, DtypeCore target):
    """The scan of tensor along axis into target (off the tape), recorded where autograd
    tracks tensor (then target is its dtype, floating point)."""
    result = scanned(tensor, axis, product, False, target)
    if tracked(tensor) and target.floating:
        return recorded(result, ops.OP_CUMPROD if product else ops.OP_CUMSUM, (tensor,),
                        (tensor,) if product else (), axis)
    return result


cdef TensorCore scanned(TensorCore tensor, int axis, bint product, bint reverse,
                        DtypeCore target):
    """A new contiguous tensor of target's dtype: the cumulative sum (product) of tensor along
    axis, from its end where reverse is set."""
    if tensor.device_index != CPU:
        output = new_empty(tensor.sizes, target, tensor.device_index)
        launch_scan(tensor, axis, product, reverse, <TensorCore>output)
        return output
    # numpy in the kernels' accumulation types (Note above).
    accumulation = (np().float64 if target.itemsize == 8 else np().float32) \
        if target.floating else np().int64
    values = np().asarray(computable(tensor)).astype(accumulation).reshape(tensor.sizes or (1,))
    if reverse:
        values = np().flip(values, axis)
    with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
        values = np().cumprod(values, axis) if product else np().cumsum(values, axis)
    if reverse:
        values = np().flip(values, axis)
    return wrap_cpu(np().ascontiguousarray(stored(values, target)).reshape(tensor.sizes),
                    target)


cdef int launch_scan(TensorCore tensor, int axis, bint product, bint reverse,
                     TensorCore output) except -1:
    """scan.cu's scan from tensor into output (a device tensor of its shape)."""
    # A 0-d tensor as one row of one element.
    sizes, strides = tensor.sizes or (1,), tensor.element_strides or (0,)
    out_strides = output.element_strides or (0,)
    dims = (axis,)
    return device_ops.scan_dim(
        tensor.device_index, tensor.dtype_object, output.dtype_object, tensor.data,
        reduced_shape(sizes, dims, False), reduced_shape(strides, dims, False), sizes[axis],
        strides[axis], output.data, reduced_shape(out_strides, dims, False), out_strides[axis],
        product, reverse, current_stream(tensor.device_index))


# --------------------------------------------------------------------------------------------
# Gradients (formulas.pyx calls these)


cdef object cumsum_gradient(TensorCore grad, int axis):
    return scanned(grad, axis, False, True, grad.dtype_object)


cdef object cumprod_gradient(TensorCore grad, TensorCore x, int axis):
    """x's gradient of cumprod(x) along axis (Note above), x saved unchanged."""
    if x.element_count <= 1 or x.sizes[axis] == 1:  # a 0-d x has one element
        return grad
    cdef long long length = x.sizes[axis]
    dtype = x.dtype_object
    is_zero = eq(x, 0)
    zeros_so_far = scanned(<TensorCore>is_zero, axis, False, False, dtypes.named_dtype("int64"))
    before = eq(<TensorCore>zeros_so_far, 0)                  # k < z1
    in_first_run = eq(<TensorCore>zeros_so_far, 1)            # z1 <= k < z2
    at_first = bitwise_and(<TensorCore>is_zero, in_first_run)  # k == z1
    after_first = bitwise_and(<TensorCore>in_first_run, invert(<TensorCore>is_zero))
    # k < z1: the sum from the end of grad * out, divided by x (nonzero there)
    out = scanned(x, axis, True, False, dtype)
    weighted = where(before, mul(grad, out), 0.0)
    summed = scanned(<TensorCore>weighted, axis, False, True, dtype)
    x_before = where(before, x, 1.0)  # x where k < z1, else 1
    early = where(before, truediv(<TensorCore>summed, x_before), 0.0)
    # k == z1: prod(x before z1) * sum over [z1, z2) of grad * prod(x in (z1, j])
    products = scanned(<TensorCore>where(after_first, x, 1.0), axis, True, False, dtype)
    run = sum_over(<TensorCore>mul(<TensorCore>where(in_first_run, grad, 0.0), products), axis,
                   True)
    prefix = scanned(<TensorCore>x_before, axis, True, False, dtype)
    prefix = copies.narrow(<TensorCore>prefix, axis, length - 1, 1)
    first = where(at_first, mul(<TensorCore>prefix, run), 0.0)
    return add(<TensorCore>early, first)


cdef object cummax(TensorCore tensor, object dim):
    return cummax_result(*running_extremes(tensor, dim, True))


cdef object cummin(TensorCore tensor, object dim):
    return cummin_result(*running_extremes(tensor, dim, False))


cdef tuple running_extremes(TensorCore tensor, object dim, bint largest):
    """(values, int64 positions) of the running maximum (largest) or minimum along dim (Note
    [Running extremes])."""
    cdef int axis = tensor.c_dim(dim)
    int64 = dtypes.named_dtype("int64")
    cdef TensorCore source = tensor.c_detach()
    if not tensor.sizes:  # a 0-d tensor is its own extreme, at 0 (a copy, its gradient clone's)
        return (copies.clone(tensor),
                factories.zeros((), int64, device_text(source.device_index), False))
    length = source.sizes[axis]
    device = device_text(source.device_index)
    shape = [1] * len(source.sizes)
    shape[axis] = length
    positions = copies.reshape(<TensorCore>factories.arange(0, length, 1, int64, device, False),
                               (tuple(shape),))
    values, indices = doubling_scan(
        [copies.contiguous(source),
         copies.contiguous(<TensorCore>(<TensorCore>positions).c_expand((source.sizes,)))],
        axis, later_extremes, largest)
    if tracked(tensor) and tensor.dtype_object.floating:
        return recorded(values, ops.OP_GATHER, (tensor,), (indices,), axis), indices
    return values, indices


cdef object logcumsumexp(TensorCore tensor, object dim):
    cdef int axis = tensor.c_dim(dim)
    if not tensor.dtype_object.floating:  # PyTorch has no integer kernel either
        raise DtypeError(f"logcumsumexp: needs a floating-point tensor, got "
                         f"{tensor.dtype_object.name} (convert with .float() first)")
    if not tensor.sizes or tensor.sizes[axis] < 2:  # its own log-sum-exp: nothing to combine
        return copies.clone(tensor)
    narrow = tensor.dtype_object.name in ("float16", "bfloat16")
    values = copies.to(tensor, None, dtypes.named_dtype("float32"), False, False) if narrow \
        else tensor
    values, = doubling_scan([values], axis, logaddexp, None)
    if narrow:
        return copies.to(<TensorCore>values, None, tensor.dtype_object, False, False)
    return values


# --------------------------------------------------------------------------------------------
# The doubling scan of cummax, cummin and logcumsumexp

# The combination of a scan step: the earlier runs and the later ones (each a list of tensors of
# one shape, narrowed views), the scan's own argument, and the combined later runs.
ctypedef list (*Combination)(list earlier, list later, object argument)


cdef list doubling_scan(list tensors, int axis, Combination combine, object argument):
    """Hillis and Steele's inclusive prefix scan of tensors (of one shape) along axis: in log2(n)
    steps, step s combining each position with the one s before it; positions before s are
    final and kept."""
    length = (<TensorCore>tensors[0]).sizes[axis]
    step = 1
    while step < length:
        earlier = [copies.narrow(<TensorCore>t, axis, 0, length - step) for t in tensors]
        later = [copies.narrow(<TensorCore>t, axis, step, length - step) for t in tensors]
        combined = combine(earlier, later, argument)
        tensors = [copies.cat([copies.narrow(<TensorCore>t, axis, 0, step), c], axis)
                   for t, c in zip(tensors, combined)]
        step *= 2
    return tensors


cdef list later_extremes(list earlier, list later, object largest):
    """Note [Running extremes]: [values, positions], the later run's where it wins."""
    earlier_values, earlier_indices = earlier
    later_values, later_indices = later
    wins = elementwise.ge(<TensorCore>later_values, earlier_values) if largest else \
        elementwise.le(<TensorCore>later_values, earlier_values)
    if (<TensorCore>later_values).dtype_object.floating:  # a NaN wins; nothing wins over one
        settled = elementwise.logical_not(<TensorCore>elementwise.isnan(
            <TensorCore>earlier_values))
        wins = elementwise.logical_or(<TensorCore>elementwise.isnan(<TensorCore>later_values),
                                      elementwise.logical_and(<TensorCore>wins, settled))
    return [elementwise.where(wins, later_values, earlier_values),
            elementwise.where(wins, later_indices, earlier_indices)]


cdef list logaddexp(list earlier, list later, object unused):
    """Note [Running log-sum-exp]: max(a, b) + log1p(exp(-|a - b|)), the difference 0 at a tie."""
    a, = later
    b, = earlier
    difference = where(eq(<TensorCore>a, b), 0.0, elementwise.sub(<TensorCore>a, b))
    return [add(<TensorCore>elementwise.maximum(<TensorCore>a, b),
                elementwise.log1p(<TensorCore>elementwise.exp(<TensorCore>elementwise.neg(
                    <TensorCore>elementwise.absolute(<TensorCore>difference)))))]
