# cython: language_level=3
"""sort(), argsort() and topk() (api.yaml: tensorplay.sort, argsort, topk and the Tensor methods),
as PyTorch's.

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
"""
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.base.dtypes cimport CODE_BOOL
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies, return_types
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, new_empty,
                                              recorded, tracked, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable
from tensorplay._runtime.tensor.reduction cimport reduced_shape

# torch.return_types.sort and .topk: named tuples of the values and their positions.
sort_result = return_types.return_type("sort")
topk_result = return_types.return_type("topk")


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
