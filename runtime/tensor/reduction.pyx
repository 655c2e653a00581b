# cython: language_level=3
"""Reductions: sum and mean over dimensions (keepdim), max and min of the whole tensor
(kernels/reduce.cu: a two-launch reduction of the whole tensor, one block per output element
over dimensions). The matrix product is linalg.pyx's. See docs/design.md, "Minimal tensor".
"""
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.tensor cimport copies
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport np, reduced_dtype
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, new_empty,
                                              recorded, reshaped, tracked, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, stored

from tensorplay._runtime.tensor.arguments import ShapeError

import math


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
            result = values.mean() if mean else values.sum(
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
    shape = tuple(1 if d in dims else size for d, size in enumerate(tensor.sizes)) if keepdim \
        else tuple(size for d, size in enumerate(tensor.sizes) if d not in dims)
    if len(dims) == len(tensor.sizes):  # the whole tensor: the two-launch reduction
        whole = <TensorCore>reduce_whole(tensor, ops.OP_SUM, mean, name)
        return reshaped(whole, shape)
    if tensor.device_index == CPU:
        values = computable(tensor)
        result = values.mean(axis=dims, keepdims=keepdim) if mean else values.sum(
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
