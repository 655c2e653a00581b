# cython: language_level=3
"""gather() and the scatters (api.yaml: tensorplay.gather, scatter, scatter_add, index_add,
index_copy and the Tensor methods, in place or not), as PyTorch's.

Note [Gather and scatter]
For dim 1 of 3-D tensors (every other dim alike):

    gather:       out[i][j][k] = self[i][index[i][j][k]][k]
    scatter_:     self[i][index[i][j][k]][k] = src[i][j][k]      (or = value)
    scatter_add_: self[i][index[i][j][k]][k] += src[i][j][k]

The index has as many dimensions as self (and src), and is no larger than self apart from dim
(nor than src anywhere): PyTorch's rules and messages (aten's ScatterGatherChecks.h). A 0-d
tensor counts as one of one element, as PyTorch's. Indices are int64 or int32 (PyTorch 2.x
takes both); on the CPU one outside [0, size) is an error naming it, as PyTorch's. On a device
it is not read back (that needs a synchronisation, which a capture refuses): there it gathers a
zero and scatters nothing, where PyTorch's kernel asserts on the device and loses the context.
On a device each is one kernel over the index's elements (index.cu's gather and scatter,
scatter.cu's scatter_add) that reads every operand through its strides, so nothing is copied
first and a CUDA graph captures it. Where indices repeat, scatter_ keeps one of the values, which
one not fixed, and scatter_add_ adds them all up in an order that is not fixed (atomic additions,
as PyTorch's CUDA kernels). The narrow integers and bool have no atomic addition: they are added
in int64 and converted back, which wraps as the narrow addition does.
index_add_ and index_copy_ add and copy whole slices of source along dim at the positions a
vector index names: they are scatter_add_ and scatter_ with the index viewed along dim and
expanded (strides 0) to source's shape, so they share the kernels, the gradients and the capture.
Gradients are PyTorch's (derivatives.yaml): gather's is the gradient scatter-added into zeros of
the input's shape; scatter's is the gradient with the scattered positions zeroed for self and
the gradient gathered at the index for src; scatter_add's is the gradient for self and the same
gather for src. Where src is larger than the index, its elements the index does not reach get
a zero gradient (PyTorch's engine refuses that backward: the gather has the index's shape). The in-place forms are the out-of-place ones copied back (copy_'s rebase) where
autograd records them; otherwise they write the tensor itself.
"""
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies
from tensorplay._runtime.tensor.arguments cimport is_scalar, np
from tensorplay._runtime.tensor.copies cimport copy_into, fill_, host_values, index_arg
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, device_text,
                                              is_contiguous, new_empty, own_tensor_arg,
                                              recorded, tracked, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, stored

from tensorplay._runtime.tensor.arguments import DtypeError, ShapeError

# The dtypes scatter.cu adds atomically; the others are added in int64 (Note above).
ATOMIC_ADDITIONS = frozenset(("float32", "float64", "float16", "bfloat16", "int32", "int64"))


# --------------------------------------------------------------------------------------------
# Arguments


cdef tuple sizes_of(TensorCore tensor):
    return tensor.sizes or (1,)  # a 0-d tensor as one of one element, as PyTorch's


cdef tuple strides_of(TensorCore tensor):
    return tensor.element_strides or (0,)


cdef TensorCore checked_index(TensorCore tensor, object dim, object index, str name,
                              int* axis):
    """The index (its type, dtype, device and dimensions checked) and in axis the dimension."""
    own_tensor_arg(index, "index")  # every argument's type before any value
    axis[0] = tensor.c_dim(dim, "dim")
    cdef TensorCore chosen = index_arg(tensor, index, name, False)
    if chosen.element_count and len(sizes_of(chosen)) != len(sizes_of(tensor)):
        # PyTorch's messages, from here on; an empty index fits any tensor, as PyTorch's
        raise ShapeError(f"Index tensor must have the same number of dimensions as "
                         f"{'input' if name == 'gather' else 'self'} tensor")
    return chosen


cdef int check_in_range(TensorCore tensor, TensorCore index, int axis) except -1:
    """On the CPU, refuse an index outside [0, size) along axis (PyTorch's message)."""
    if tensor.device_index != CPU or not index.element_count:
        return 0
    size = sizes_of(tensor)[axis]
    values = np().asarray(host_values(index)).reshape(-1)
    outside = np().flatnonzero((values < 0) | (values >= size))
    if outside.size:
        raise RuntimeError(f"index {values[outside[0]]} is out of bounds for dimension {axis} "
                           f"with size {size}")
    return 0


cdef int check_source(TensorCore tensor, TensorCore index, TensorCore source,
                      str name) except -1:
    """src, a tensor, checked as PyTorch checks it: of tensor's dtype and device, with the
    index's dimensions."""
    if source.device_index != tensor.device_index:
        raise ValueError(f"{name}(): src is on {device_text(source.device_index)} and the "
                         f"tensor on {device_text(tensor.device_index)}; they must be on "
                         "one device")
    if source.dtype_object is not tensor.dtype_object:  # PyTorch's messages, from here on
        raise DtypeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if index.element_count and len(sizes_of(source)) != len(sizes_of(index)):
        raise ShapeError("Index tensor must have the same number of dimensions as src tensor")
    return 0


cdef int check_sizes(TensorCore tensor, int axis, TensorCore index, TensorCore source,
                     str name) except -1:
    """The index no larger than tensor apart from axis, nor than source (where given) along any
    dimension: PyTorch's messages (none for an empty index, as PyTorch's)."""
    if not index.element_count:
        return 0
    index_sizes = sizes_of(index)
    larger = [at for at, (have, wanted) in enumerate(zip(sizes_of(tensor), index_sizes))
              if at != axis and wanted > have]
    if name == "gather":
        if larger:
            raise ShapeError(f"Size does not match at dimension {larger[0]} expected index "
                             f"{list(index.sizes)} to be no larger than self "
                             f"{list(tensor.sizes)} apart from dimension {axis}")
        return 0
    message = (f"Expected index {list(index.sizes)} to be no larger than self "
               f"{list(tensor.sizes)} apart from dimension {axis}")
    if source is None:
        if larger:
            raise ShapeError(message)
        return 0
    if larger or any(wanted > have for have, wanted in zip(sizes_of(source), index_sizes)):
        raise ShapeError(f"{message} and to be no larger size than src {list(source.sizes)}")
    return 0


cdef TensorCore int64_index(TensorCore index):
    return <TensorCore>copies.to(index, None, dtypes.named_dtype("int64"), False, False)


# --------------------------------------------------------------------------------------------
# gather


cdef object gather(TensorCore tensor, object dim, object index):
    cdef int axis
    cdef TensorCore chosen = checked_index(tensor, dim, index, "gather", &axis)
    check_sizes(tensor, axis, chosen, None, "gather")
    check_in_range(tensor, chosen, axis)
    cdef TensorCore positions = int64_index(chosen)
    cdef TensorCore output = gathered(tensor, axis, positions)
    if tracked(tensor):
        return recorded(output, ops.OP_GATHER, (tensor,), (positions,), axis)
    return output


cdef TensorCore gathered(TensorCore tensor, int axis, TensorCore index):
    """gather's values (arguments checked; index int64), off the tape."""
    cdef TensorCore output
    if not index.element_count:
        return new_empty(index.sizes, tensor.dtype_object, tensor.device_index)
    if tensor.device_index == CPU:
        values = np().take_along_axis(within(tensor.array.reshape(sizes_of(tensor)),
                                             sizes_of(index), axis),
                                      host_values(index).reshape(sizes_of(index)), axis)
        return wrap_cpu(np().ascontiguousarray(values).reshape(index.sizes), tensor.dtype_object)
    output = new_empty(index.sizes, tensor.dtype_object, tensor.device_index)
    device_ops.gather(tensor.device_index, tensor.dtype_object, tensor.data, sizes_of(tensor),
                      strides_of(tensor), index.data, sizes_of(index), strides_of(index),
                      output.data, axis, current_stream(tensor.device_index))
    return output


cdef object within(object array, tuple sizes, int axis):
    """A CPU tensor's array (shaped as sizes_of gives), cut to sizes along every dimension but
    axis: a view."""
    return array[tuple(slice(None) if at == axis else slice(0, size)
                       for at, size in enumerate(sizes))]


cdef object source_values(TensorCore source, object array, tuple sizes):
    """src's values (array, a CPU tensor's) at the index's sizes: its first elements along each
    dimension, or a value (0-d) repeated."""
    if not source.sizes:
        return np().broadcast_to(array, sizes)
    return array.reshape(source.sizes)[tuple(slice(0, size) for size in sizes)]


# --------------------------------------------------------------------------------------------
# scatter and scatter_add


cdef object scatter(TensorCore tensor, object dim, object index, object src):
    return scattered(tensor, dim, index, src, False, False, "scatter")


cdef object scatter_(TensorCore tensor, object dim, object index, object src):
    return scattered(tensor, dim, index, src, False, True, "scatter_")


cdef object scatter_add(TensorCore tensor, object dim, object index, object src):
    return scattered(tensor, dim, index, src, True, False, "scatter_add")


cdef object scatter_add_(TensorCore tensor, object dim, object index, object src):
    return scattered(tensor, dim, index, src, True, True, "scatter_add_")


cdef object scattered(TensorCore tensor, object dim, object index, object src, bint add,
                      bint in_place, str name):
    if add and not isinstance(src, TensorCore):  # PyTorch's TypeError
        raise TypeError(f"{name}(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    if not isinstance(src, TensorCore):
        if not is_scalar(src):
            raise TypeError(f"{name}(): src must be a tensor or a Python scalar (value), got "
                            f"{type(src).__name__}")
        dtypes.check_scalar(src, tensor.dtype_object, "src")
    cdef int axis
    cdef TensorCore chosen = checked_index(tensor, dim, index, name.rstrip("_"), &axis)
    cdef TensorCore source = src if isinstance(src, TensorCore) else None
    if source is not None:
        check_source(tensor, chosen, source, name)
    check_sizes(tensor, axis, chosen, source, name)
    check_in_range(tensor, chosen, axis)
    cdef bint record = tracked(tensor, source)
    if in_place and record:
        tensor.c_check_rebase(name)
    if source is None:  # a value (checked against the dtype above): a 0-d tensor of it
        source = fill_(<TensorCore>new_empty((), tensor.dtype_object, tensor.device_index), src)
    cdef TensorCore positions = int64_index(chosen)
    cdef TensorCore output
    if in_place and not record and is_contiguous(tensor) and not shares_memory(tensor, source):
        tensor.c_mark_modified(name, src)
        scatter_into(tensor, axis, positions, source, add)
        return tensor
    output = new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index)
    copy_into(output, tensor, False)
    scatter_into(output, axis, positions, source, add)
    if record:
        if isinstance(src, TensorCore):
            output = recorded(output, ops.OP_SCATTER_ADD if add else ops.OP_SCATTER,
                              (tensor, source), (positions,), axis)
        else:
            output = recorded(output, ops.OP_SCATTER, (tensor,), (positions,), axis)
    return copies.copy_(tensor, output, False) if in_place else output


cdef bint shares_memory(TensorCore tensor, TensorCore source):
    """Whether the kernel might read source where it writes tensor (one owner of memory)."""
    if tensor.device_index == CPU:
        return np().may_share_memory(tensor.array, source.array)
    return source.owner is tensor.owner


cdef int scatter_into(TensorCore target, int axis, TensorCore index, TensorCore source,
                      bint add) except -1:
    """source's values scattered (added, where add is set) into target, which is contiguous and
    does not share source's memory; the arguments checked, index int64; off the tape."""
    cdef TensorCore wide
    if not index.element_count:
        return 0
    index_sizes = sizes_of(index)
    if target.device_index == CPU:
        positions = host_values(index).reshape(index_sizes)
        if not add:
            np().put_along_axis(within(target.array.reshape(sizes_of(target)), index_sizes, axis),
                                positions, source_values(source, source.array, index_sizes),
                                axis)
            return 0
        # numpy's add.at adds repeated indices up, into target's own array (a view: target is
        # contiguous); bfloat16 into float32 values (computable), rounded once when stored back
        sums = computable(target).reshape(sizes_of(target))
        coordinates = list(np().indices(index_sizes, sparse=True))
        coordinates[axis] = positions
        np().add.at(within(sums, index_sizes, axis), tuple(coordinates),
                    source_values(source, computable(source), index_sizes))
        if target.dtype_object.name == "bfloat16":
            target.array[...] = stored(sums.reshape(target.sizes), target.dtype_object)
        return 0
    if add and target.dtype_object.name not in ATOMIC_ADDITIONS:
        int64 = dtypes.named_dtype("int64")
        wide = copies.to(target, None, int64, False, False)
        scatter_into(wide, axis, index, <TensorCore>copies.to(source, None, int64, False, False),
                     True)
        copy_into(target, wide, False)
        return 0
    device_ops.scatter(target.device_index, target.dtype_object, add, source.data,
                       strides_of(source) if source.sizes else (0,) * len(index_sizes),
                       index.data, index_sizes, strides_of(index), target.data,
                       sizes_of(target), strides_of(target), axis,
                       current_stream(target.device_index))
    return 0



# --------------------------------------------------------------------------------------------
# index_add and index_copy


cdef object index_add(TensorCore tensor, object dim, object index, object source, object alpha):
    return along_slices(tensor, dim, index, source, alpha, True, False, "index_add")


cdef object index_add_(TensorCore tensor, object dim, object index, object source,
                       object alpha):
    return along_slices(tensor, dim, index, source, alpha, True, True, "index_add_")


cdef object index_copy(TensorCore tensor, object dim, object index, object source):
    return along_slices(tensor, dim, index, source, 1, False, False, "index_copy")


cdef object index_copy_(TensorCore tensor, object dim, object index, object source):
    return along_slices(tensor, dim, index, source, 1, False, True, "index_copy_")


cdef object along_slices(TensorCore tensor, object dim, object index, object source,
                         object alpha, bint add, bint in_place, str name):
    """source's slices along dim added (copied) into tensor's at the positions of the vector
    index (Note [Gather and scatter]), checked with PyTorch's messages."""
    own_tensor_arg(index, "index")  # every argument's type before any value
    cdef TensorCore slices = own_tensor_arg(source, "source")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"{name}(): alpha must be an int or float, got {type(alpha).__name__}")
    dtypes.check_scalar(alpha, tensor.dtype_object, "alpha")
    if isinstance(alpha, float) and not tensor.dtype_object.floating:
        alpha = int(alpha)  # PyTorch converts alpha to the tensor's dtype, truncating
    cdef int axis = tensor.c_dim(dim, "dim")
    cdef TensorCore chosen = index_arg(tensor, index, f"{name.rstrip('_')}_", True)
    if slices.device_index != tensor.device_index:
        raise ValueError(f"{name}(): source is on {device_text(slices.device_index)} and the "
                         f"tensor on {device_text(tensor.device_index)}; they must be on one "
                         "device")
    if slices.dtype_object is not tensor.dtype_object:  # PyTorch's messages, from here on
        raise DtypeError(f"{name.rstrip('_')}_(): self ({tensor.dtype_object.name}) and source "
                         f"({slices.dtype_object.name}) must have the same scalar type")
    own, given = sizes_of(tensor), sizes_of(slices)
    if len(tensor.sizes) != len(slices.sizes) or any(at != axis and have != wanted
                                     for at, (have, wanted) in enumerate(zip(own, given))):
        raise ShapeError("source tensor shape must match self tensor shape, excluding the "
                         f"specified dimension. Got self.shape = {list(tensor.sizes)} "
                         f"source.shape = {list(slices.sizes)}")
    if chosen.element_count != given[axis] and add:
        raise ShapeError(f"index_add_(): Number of indices ({chosen.element_count}) should be "
                         f"equal to source.size(dim): ({given[axis]}), for dim: {axis}")
    if chosen.element_count != given[axis]:
        raise IndexError(f"index_copy_(): Number of indices ({chosen.element_count}) should be "
                         f"equal to source.size(dim) ({given[axis]})")
    try:
        check_in_range(tensor, chosen, axis)
    except RuntimeError as error:
        if add:
            raise
        raise IndexError(f"index_copy_(): {error}") from None  # PyTorch's IndexError
    along = [1] * len(own)
    along[axis] = chosen.element_count
    expanded = int64_index(chosen).reshape(tuple(along)).expand(given)
    if alpha != 1:
        slices = slices * alpha
    return scattered(tensor, axis, expanded, slices, add, in_place, name)
