# The minimal tensor (core.pyx explains the model at its top).
from libc.stdint cimport int64_t, uintptr_t

from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.devices.stream cimport StreamCore

cdef enum:
    CPU = -1                 # device index of CPU tensors
    UNSPECIFIED = -2         # device argument left as None

# "cpu" or "cuda:N", as error messages name a tensor's device.
cdef str device_text(int device)

cdef class VersionCounter:
    # How many in-place changes the memory of a tensor and its views has seen (engine.pyx,
    # Note [Version counters]).
    cdef int64_t value

cdef class TensorCore:
    # Shape and strides are in elements; data is the address of the first element (the storage
    # offset already applied). CPU tensors are numpy arrays underneath (array); CUDA tensors
    # keep whatever owns their memory alive in owner: a DeviceStorage for memory from our
    # allocator, or the producer of memory shared through DLPack or __cuda_array_interface__.
    cdef readonly tuple sizes
    cdef readonly tuple element_strides
    cdef readonly DtypeCore dtype_object
    cdef readonly int device_index            # -1: cpu
    cdef uintptr_t data
    cdef object owner
    cdef object array                          # cpu only: the numpy view
    cdef int64_t element_count
    # Autograd (engine.pyx, Note [Tape]): whether gradients flow to this tensor, its .grad
    # (allocated once), the Node that computed it and which of that Node's outputs it is (None
    # for a leaf), and the version counter it shares with its views.
    cdef bint grad_required
    cdef object grad_value
    cdef object grad_node
    cdef int output_number
    cdef VersionCounter version
    # Whether this tensor is a view of another's memory (indexing, view, transpose, expand,
    # detach...): an in-place change of a view is not recorded for autograd.
    cdef bint is_view
    # An in-place operation recorded as PyTorch's rebase_history (Note [Version counters]):
    # refuse it on a leaf that requires grad or on a view, else copy result in and take its
    # history.
    cdef int c_check_rebase(self, str name) except -1
    cdef object c_rebased(self, object result)
    # Arithmetic with a bool tensor, by PyTorch's type promotion (c_binary).
    cdef object c_bool_binary(self, object other, int op, bint reverse, bint inplace, str name)
    cdef object c_clamp_bool(self, object low, object high, bint inplace, str name)
    cdef bint c_requires_grad(self)
    cdef object c_set_requires_grad(self, bint value)
    cdef object c_requires_grad_(self, bint requires_grad)
    cdef object c_grad(self)
    cdef object c_set_grad(self, object value)
    cdef object c_grad_fn(self)
    cdef bint c_is_leaf(self)
    cdef object c_backward(self, object gradient, object retain_graph)
    cdef object c_detach(self)
    # Before an in-place change by name (from other, an operand): refuse it under autograd's
    # rules, else count it.
    cdef int c_mark_modified(self, str name, object other=*) except -1
    # The refusals of c_mark_modified alone, counting nothing: for an operation that checks
    # its arguments and writes before it counts the change (random_ops.pyx).
    cdef int c_check_in_place(self, str name, object other=*) except -1
    cdef object c_indexed(self, TensorCore view, object key)
    cdef object c_binary_result(self, object output, object other, int op, bint reverse,
                                bint inplace)
    cdef object c_scaled_result(self, object output, object other, object scale, bint inplace)
    cdef object c_clamp_result(self, object output, object low, object high, bint inplace)
    cdef tuple c_shape(self)
    cdef int c_ndim(self)
    cdef Py_hash_t c_hash(self)
    cdef object c_dtype(self)
    cdef object c_device(self)
    cdef object c_stride(self, object dim)
    cdef int c_dim(self, object dim, str argument=*) except -1
    cdef int64_t c_numel(self)
    cdef int c_element_size(self)
    cdef int64_t c_nbytes(self)
    cdef object c_data_ptr(self)
    cdef bint c_is_contiguous(self)
    cdef bint c_is_cuda(self)
    cdef str c_repr(self)
    cdef Py_ssize_t c_len(self) except -1
    cdef object c_copy_(self, object src, bint non_blocking)
    cdef object c_fill_(self, object value)
    cdef object c_zero_(self)
    cdef object c_uniform_(self, object low, object high, object generator)
    cdef object c_normal_(self, object mean, object std, object generator)
    cdef object c_bernoulli_(self, object p, object generator)
    cdef object c_clone(self)
    cdef object c_contiguous(self)
    cdef object c_to(self, object device, object dtype, bint non_blocking, bint copy)
    cdef object c_cpu(self)
    cdef object c_cuda(self, int device, bint non_blocking)
    cdef object c_pin_memory(self)
    cdef bint c_is_pinned(self) except -1
    cdef object c_numpy(self)
    cdef object c_item(self)
    cdef object c_tolist(self)
    cdef tuple c_new_shape(self, tuple shape)
    cdef object c_view(self, tuple shape)
    cdef object c_reshape(self, tuple shape)
    cdef object c_transpose(self, object dim0, object dim1)
    cdef object c_t(self)
    cdef object c_unsqueeze(self, object dim)
    cdef object c_expand(self, tuple size)
    cdef object c_getitem(self, object key)
    cdef object c_setitem(self, object key, object value)
    cdef object c_binary(self, object other, int op, bint reverse, bint inplace, str name)
    cdef object c_add(self, object other)
    cdef object c_radd(self, object other)
    cdef object c_sub(self, object other)
    cdef object c_rsub(self, object other)
    cdef object c_mul(self, object other)
    cdef object c_rmul(self, object other)
    cdef object c_truediv(self, object other)
    cdef object c_rtruediv(self, object other)
    cdef object c_iadd(self, object other)
    cdef object c_isub(self, object other)
    cdef object c_imul(self, object other)
    cdef object c_itruediv(self, object other)
    cdef object c_pow(self, object exponent)
    cdef object c_pow_operator(self, object other)
    cdef object c_rpow(self, object base)
    cdef object c_compare(self, object other, int op)
    cdef object c_eq(self, object other)
    cdef object c_ne(self, object other)
    cdef object c_lt(self, object other)
    cdef object c_le(self, object other)
    cdef object c_gt(self, object other)
    cdef object c_ge(self, object other)
    cdef object c_unary(self, int op)
    cdef object c_neg(self)
    cdef object c_abs(self)
    cdef object c_relu(self)
    cdef object c_sin(self)
    cdef object c_cos(self)
    cdef object c_exp(self)
    cdef object c_sqrt(self)
    cdef object c_log(self)
    cdef object c_add_scaled(self, object other, object alpha)
    cdef object c_sub_scaled(self, object other, object alpha)
    cdef object c_add_scaled_(self, object other, object alpha)
    cdef object c_sub_scaled_(self, object other, object alpha)
    cdef object c_scaled(self, object other, object alpha, bint subtract, bint inplace)
    cdef object c_div(self, object other, object rounding_mode)
    cdef object c_div_(self, object other, object rounding_mode)
    cdef object c_clamp(self, object min, object max)
    cdef object c_clamp_(self, object min, object max)
    cdef object c_clamp_bounds(self, object low, object high, bint inplace)
    cdef object c_cpu_result(self, object values, DtypeCore dtype, bint inplace)
    cdef TensorCore c_output(self, DtypeCore dtype, bint inplace)
    cdef object c_finish(self, TensorCore output, bint inplace)
    cdef object c_reduce(self, int op, bint mean, str name)
    cdef object c_sum(self, object dim, bint keepdim)
    cdef object c_mean(self, object dim, bint keepdim)
    cdef tuple c_reduced_dims(self, object dim, str name)
    cdef object c_reduce_dims(self, object dim, bint keepdim, bint mean, str name)
    cdef object c_max(self)
    cdef object c_min(self)
    cdef object c_matmul(self, object other)
    cdef object c_rmatmul(self, object other)
    cdef object c_record_stream(self, StreamCore stream)
    cdef object c_dlpack(self, object stream, object max_version, object dl_device, object copy)
    cdef tuple c_dlpack_device(self)
    cdef dict c_cuda_array_interface(self)

cdef class DeviceStorage:
    # Device memory from the caching allocator, returned to it when the last tensor goes.
    cdef uintptr_t pointer
    cdef size_t nbytes
    cdef int device_index

cdef class PinnedStorage:
    # Page-locked host memory from the pinned host cache (pin_memory()), under the numpy array of
    # a CPU tensor (its base), returned to the cache when the last array viewing it goes.
    cdef uintptr_t pointer
    cdef size_t nbytes
    cdef dict interface

# The pinned block pin_memory() put under a numpy array (or a view of it), else None.
cdef PinnedStorage pinned_storage_under(object array)

# Constructors other runtime modules use (interop, graph).
cdef TensorCore new_tensor()   # an empty public Tensor, its fields for the caller to fill
cdef object wrap_device_memory(uintptr_t data, tuple sizes, tuple element_strides,
                               DtypeCore dtype, int device, object owner)
cdef object wrap_numpy(object array)
cdef TensorCore wrap_cpu(object array, DtypeCore dtype)   # array holds dtype's numpy storage
cdef object new_empty(tuple sizes, DtypeCore dtype, int device)   # device -1: cpu
# *size as ints, or one tuple/list of them (the factories' size argument), checked.
cdef tuple size_arg(tuple size, str argument)
cdef bint is_contiguous(TensorCore tensor)
# Whether a copy from the CPU tensor source to a CUDA tensor of dtype on device, on stream (the
# current stream of device), would be captured into a graph; if so, it is refused (a
# RuntimeError naming argument) unless the graph can read source's page-locked memory in place,
# and *capture_id is the capture's id (core.pyx, Note [Host copies during capture]). No CUDA
# call but queries.
cdef bint host_copy_capturing(TensorCore source, int device, DtypeCore dtype, str argument,
                              cudaStream_t stream, unsigned long long* capture_id) except -1
# Operands of one device and dtype, else an error naming what (a ValueError or a TypeError).
cdef int check_device_and_dtype(TensorCore a, TensorCore b, str what) except -1
cdef tuple contiguous_strides(tuple sizes)          # row-major, in elements
# The bytes from a tensor's first element to the end of its last, in Python integers (0 when it
# has no element); strides in elements, never negative.
cdef object reach_bytes(tuple sizes, tuple strides, int itemsize)

# Factories (api.yaml: tensorplay).
cdef object empty(tuple size, object dtype, object device, bint requires_grad)
cdef object zeros(tuple size, object dtype, object device, bint requires_grad)
cdef object ones(tuple size, object dtype, object device, bint requires_grad)
cdef object full(object size, object fill_value, object dtype, object device,
                 bint requires_grad)
cdef object arange(object start, object end, object step, object dtype, object device,
                   bint requires_grad)
cdef object tensor(object data, object dtype, object device, bint requires_grad)
cdef object empty_like(object input, object dtype, object device, bint requires_grad)
cdef object zeros_like(object input, object dtype, object device, bint requires_grad)
# A new tensor from a factory with its requires_grad keyword applied (refused on integer and
# bool dtypes before anything is made, by require_grad_arg).
cdef object requiring_grad(object tensor, bint requires_grad)
cdef int require_grad_arg(object dtype, object default, bint requires_grad) except -1
cdef bint allclose(object input, object other, double rtol, double atol, bint equal_nan) except -1
cdef object as_tensor(object data, object dtype, object device)
# value, which must be our tensor, or a TypeError naming argument.
cdef TensorCore own_tensor_arg(object value, str argument)
# value as our tensor (ours, or a view through __cuda_array_interface__ or DLPack), or a
# TypeError naming argument (argument[index] when index >= 0).
cdef TensorCore tensor_arg(object value, str argument, Py_ssize_t index)
cdef object from_dlpack(object ext_tensor)
# torch.from_numpy: a CPU tensor sharing ndarray's memory, refusing what cannot share.
cdef object from_numpy(object ndarray)
cdef object where(object condition, object input, object other)

# Grad mode, per thread (engine.pyx: no_grad, enable_grad).
cdef bint grad_enabled()
cdef void set_grad_enabled(bint enabled)
# A view of tensor's memory with other sizes and strides (in elements), sharing its version.
cdef object strided_view(TensorCore tensor, tuple sizes, tuple strides)
cdef TensorCore reshaped(TensorCore tensor, tuple sizes)
# Make target (a new tensor, or one being moved) see all of source's memory with its shape,
# strides, dtype and version counter; its autograd state stays (nn.Parameter, Module.to()).
cdef int alias_memory(TensorCore target, TensorCore source) except -1
