# Copies between devices, dtypes and layouts, and the tensor methods built on them (copies.pyx).
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.core cimport TensorCore

# Copy source into target (one shape); argument names source in errors.
cdef int copy_into(TensorCore target, TensorCore source, bint non_blocking,
                   str argument=*) except -1
# copy_into for two CUDA tensors (of any devices, dtypes and strides).
cdef int copy_on_device(TensorCore target, TensorCore source) except -1
# tensor.to(target_device, target_dtype, non_blocking, copy) with the arguments checked, and
# tensor.to(device, dtype, ...) as the public method takes them; argument names tensor in
# errors.
cdef object copied_to(TensorCore tensor, int target_device, DtypeCore target_dtype,
                      bint non_blocking, bint copy, str argument)
cdef object to_named(TensorCore tensor, object device, object dtype, bint non_blocking,
                     bint copy, str argument)
# Whether a copy from the CPU tensor source to a CUDA tensor of dtype on device, on stream (the
# current stream of device), would be captured into a graph; if so, it is refused (a
# RuntimeError naming argument) unless the graph can read source's page-locked memory in place,
# and *capture_id is the capture's id (copies.pyx, Note [Host copies during capture]). No CUDA
# call but queries.
cdef bint host_copy_capturing(TensorCore source, int device, DtypeCore dtype, str argument,
                              cudaStream_t stream, unsigned long long* capture_id) except -1
# tensor, with result's values copied in and result's history taken over (PyTorch's
# rebase_history: Note [Version counters] in engine.pyx).
cdef object rebased(TensorCore tensor, object result)
# The values as numpy computes with them, copied to the host if need be, off the tape.
cdef object host_values(TensorCore tensor)

# Tensor methods (api.yaml).
cdef object copy_(TensorCore tensor, object src, bint non_blocking)
cdef object fill_(TensorCore tensor, object value)
cdef object zero_(TensorCore tensor)
cdef object clone(TensorCore tensor)
cdef object contiguous(TensorCore tensor)       # tensor, or a contiguous copy of it
cdef object to(TensorCore tensor, object device, object dtype, bint non_blocking, bint copy)
cdef object cpu(TensorCore tensor)
cdef object cuda(TensorCore tensor, int device, bint non_blocking)
cdef object pin_memory(TensorCore tensor)
cdef bint is_pinned(TensorCore tensor) except -1
cdef object numpy_view(TensorCore tensor)
cdef object item(TensorCore tensor)
cdef object tolist(TensorCore tensor)
cdef object reshape(TensorCore tensor, tuple shape)
cdef object view_as(TensorCore tensor, object other)
cdef object reshape_as(TensorCore tensor, object other)
cdef object expand_as(TensorCore tensor, object other)
cdef object type_as(TensorCore tensor, object other)
# Tensor.type(): the legacy type name, or the tensor converted to a dtype or a type name.
cdef object type_of(TensorCore tensor, object dtype)
# torch.equal: same shape and equal elements (read back to the host).
cdef bint equal(object input, object other) except -1
cdef tuple split(TensorCore tensor, object split_size_or_sections, object dim)
cdef tuple chunk(TensorCore tensor, long long chunks, object dim)
cdef tuple unbind(TensorCore tensor, object dim)
cdef object narrow(TensorCore tensor, object dim, long long start, long long length)
cdef object select(TensorCore tensor, object dim, long long index)
cdef object movedim(TensorCore tensor, object source, object destination)
cdef object unflatten(TensorCore tensor, object dim, object sizes)
cdef object swapaxes(TensorCore tensor, object axis0, object axis1)
# Selection by index (Note [Selection by index]): the rows of dim that index names, and the
# sum of source's rows into target's (floating point; the gradient of a selection).
cdef object index_select(TensorCore tensor, object dim, object index)
# index as an int32 or int64 tensor (of at most one dimension where vector is set) on tensor's
# device, refused otherwise with name's messages.
cdef TensorCore index_arg(TensorCore tensor, object index, str name, bint vector)
cdef int index_add_(TensorCore target, int dim, TensorCore index, TensorCore source) except -1
cdef object repeat(TensorCore tensor, tuple repeats)
cdef object flatten(TensorCore tensor, object start_dim, object end_dim)
# The dtype conversions, as to(dtype): float(), double(), half(), bfloat16(), long(), int(),
# bool().
cdef object as_float32(TensorCore tensor)
cdef object as_float64(TensorCore tensor)
cdef object as_float16(TensorCore tensor)
cdef object as_bfloat16(TensorCore tensor)
cdef object as_int64(TensorCore tensor)
cdef object as_int32(TensorCore tensor)
cdef object as_bool(TensorCore tensor)
# float(t), int(t), bool(t) and operator.index(t) of a one-element tensor.
cdef object python_float(TensorCore tensor)
cdef object python_int(TensorCore tensor)
cdef object python_bool(TensorCore tensor)
cdef object python_index(TensorCore tensor)
# tensorplay.cat and tensorplay.stack: copies into views of a new tensor.
cdef object cat(object tensors, object dim)
cdef object stack(object tensors, object dim)
cdef object hstack(object tensors)
cdef object vstack(object tensors)
cdef object tile(TensorCore tensor, tuple dims)
# torch.tile(input, dims): dims one sequence, as the function takes it
cdef object tile_of(object input, object dims)
# x[key]: a view for ints, slices, None and ... (TensorCore.c_getitem, Note [Basic indexing] in
# core.pyx); x[mask] is selection.getitem's, which checks the mask here (check_mask). x[key] =
# value likewise, a boolean mask too (Note [Boolean masks]); del x[key] refused.
cdef object getitem(TensorCore tensor, object key)
cdef bint is_mask(object key)
cdef int check_mask(TensorCore tensor, TensorCore mask, str name, int start=*) except -1
cdef object setitem(TensorCore tensor, object key, object value)
# x[key] = value with the selection's own assignment (selection.setitem's integer index): the
# recorded path, then assignment(tensor, key, value) not recorded
ctypedef object (*Assignment)(TensorCore tensor, object key, object value)
cdef object setitem_with(TensorCore tensor, object key, object value, Assignment assignment)
cdef object assign(TensorCore tensor, object key, object value)
# (view, axes, indices) of a key with integer tensors or lists, else None (docs/design.md,
# "Selection by index"); for several, their positions in view's axes flattened and where their
# shape goes (positions, shape, total, place); whether a key holds a tensor or a list at all
cdef tuple integer_index(TensorCore tensor, object key)
cdef tuple linear_positions(TensorCore view, tuple axes, list indices, str name)
cdef bint holds_sequence(object key)
cdef object delitem(TensorCore tensor, object key)
cdef object iterate(TensorCore tensor)             # iter(tensor): iter(unbind(0)), as PyTorch's
cdef str repr_text(TensorCore tensor)
