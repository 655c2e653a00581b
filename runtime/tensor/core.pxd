# The tensor: layout, storage, views, version counter and autograd state (core.pyx explains the
# model at its top; the operations live in the modules it names).
from libc.stdint cimport int64_t, uintptr_t

from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.devices cimport stream as _stream

cdef enum:
    CPU = -1                 # device index of CPU tensors

# "cpu" or "cuda:N", as error messages name a tensor's device.
cdef str device_text(int device)

# The current stream of a CUDA device, where every operation on its tensors is enqueued.
cdef inline cudaStream_t current_stream(int device) noexcept nogil:
    return _stream.current_stream_handle(device)

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
    # Hooks on the gradient of a leaf ({key: hook}, register_hook), and the one-item list that
    # holds the .grad of a non-leaf that retains it (retain_grad): None without either.
    cdef dict grad_hooks
    cdef list retained_grad
    # A differentiable view (indexing, view, transpose, expand...; not detach): the tensor whose
    # memory it shows that is no such view itself (its base), the version of that memory when
    # its history was last set, and whether grad mode was off when it was made (engine.pyx,
    # Note [Views and in-place changes]). None for any other tensor.
    cdef TensorCore view_base
    cdef int64_t view_version
    cdef bint view_without_grad
    # An in-place operation recorded as PyTorch's rebase_history (Note [Version counters]):
    # refuse it on a leaf that requires grad or on a view that cannot take it (copies.rebased
    # copies the result in and takes its history, a view's through its base).
    cdef int c_check_rebase(self, str name) except -1
    cdef bint c_requires_grad(self)
    cdef object c_set_requires_grad(self, bint value)
    cdef object c_requires_grad_(self, bint requires_grad)
    cdef object c_grad(self)
    cdef object c_set_grad(self, object value)
    cdef object c_grad_fn(self)
    cdef bint c_is_leaf(self)
    cdef object c_detach(self)
    # Before an in-place change by name (from other, an operand): refuse it under autograd's
    # rules, else count it.
    cdef int c_mark_modified(self, str name, object other=*) except -1
    # The refusals of c_mark_modified alone, counting nothing: for an operation that checks
    # its arguments and writes before it counts the change (random_ops.pyx).
    cdef int c_check_in_place(self, str name, object other=*) except -1
    cdef object c_indexed(self, TensorCore view, object key)
    cdef tuple c_shape(self)
    cdef int c_ndim(self)
    cdef Py_hash_t c_hash(self)
    cdef object c_dtype(self)
    cdef object c_device(self)
    cdef object c_stride(self, object dim)
    cdef int c_dim(self, object dim, str argument=*) except -1
    cdef int64_t c_numel(self)
    cdef bint c_is_floating_point(self)
    cdef int c_element_size(self)
    cdef int64_t c_nbytes(self)
    cdef object c_data_ptr(self)
    cdef bint c_is_contiguous(self)
    cdef bint c_is_cuda(self)
    cdef Py_ssize_t c_len(self) except -1
    cdef object c_view(self, tuple shape)
    cdef object c_transpose(self, object dim0, object dim1)
    cdef object c_t(self)
    cdef object c_T(self)
    cdef object c_mT(self)
    cdef object c_permute(self, tuple dims)
    cdef object c_squeeze(self, object dim)
    cdef object c_size(self, object dim)
    cdef object c_unsqueeze(self, object dim)
    cdef object c_expand(self, tuple size)
    cdef object c_getitem(self, object key)
    cdef object c_record_stream(self, _stream.StreamCore stream)

cdef class DeviceStorage:
    # Device memory from the caching allocator, returned to it when the last tensor goes.
    cdef uintptr_t pointer
    cdef size_t nbytes
    cdef int device_index
    # The asleep flag of the pool the block came from (allocator.allocate_with_flag; a static
    # False for the shared pools and until allocated_tensor sets it): check_awake reads it.
    cdef bint* asleep

cdef class PinnedStorage:
    # Page-locked host memory from the pinned host cache (pin_memory()), under the numpy array of
    # a CPU tensor (its base), returned to the cache when the last array viewing it goes.
    cdef uintptr_t pointer
    cdef size_t nbytes
    cdef dict interface

# The pinned block pin_memory() put under a numpy array (or a view of it), else None.
cdef PinnedStorage pinned_storage_under(object array)

# Constructors other runtime modules use.
cdef TensorCore new_tensor()   # an empty public Tensor, its fields for the caller to fill
cdef object wrap_device_memory(uintptr_t data, tuple sizes, tuple element_strides,
                               DtypeCore dtype, int device, object owner)
cdef TensorCore wrap_cpu(object array, DtypeCore dtype)   # array holds dtype's numpy storage
cdef object new_empty(tuple sizes, DtypeCore dtype, int device)   # device -1: cpu
# new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index) for a contiguous CUDA tensor.
cdef TensorCore new_empty_like(TensorCore tensor)
cdef bint is_contiguous(TensorCore tensor) except -1
cdef tuple contiguous_strides(tuple sizes)          # row-major, in elements
# The bytes of a contiguous tensor of sizes, or -1 beyond 2**63 - 1.
cdef int64_t contiguous_bytes(tuple sizes, int itemsize) except? -2
# The bytes from a tensor's first element to the end of its last, in Python integers (0 when it
# has no element); strides in elements, never negative.
cdef object reach_bytes(tuple sizes, tuple strides, int itemsize)
# A view of tensor's memory with other sizes and strides (in elements), sharing its version.
cdef object strided_view(TensorCore tensor, tuple sizes, tuple strides)
# The same from the element offset elements after tensor's first (which the caller checked the
# view stays within), marked as no differentiable view: for the gradient formulas' buffers.
cdef TensorCore strided_at(TensorCore tensor, tuple sizes, tuple strides, int64_t offset)
# What the Nodes of a differentiable view's history through its base keep (formulas.pyx,
# as_strided_gradient): the base's sizes and strides, and the view's sizes, strides and offset
# in the base's memory, in elements.
cdef tuple view_state(TensorCore view)
# Whether a layout (sizes, strides in elements) reads some element at two indices.
cdef bint overlapping(tuple sizes, tuple strides)
# A differentiable view whose memory changed in place since its history was set takes the
# history of that view of its base as the base is now (Note [Views and in-place changes]).
cdef int refresh_view(TensorCore view) except -1
cdef TensorCore reshaped(TensorCore tensor, tuple sizes)
# Make target (a new tensor, or one being moved) see all of source's memory with its shape,
# strides, dtype and version counter; its autograd state stays (nn.Parameter, Module.to()).
cdef int alias_memory(TensorCore target, TensorCore source) except -1

# Operands of one device (and dtype), else an error naming what (a ValueError or a TypeError).
cdef int check_device(TensorCore a, TensorCore b, str what) except -1
cdef int check_device_and_dtype(TensorCore a, TensorCore b, str what) except -1
# The strides that read tensor over sizes, a shape it broadcasts to (0 where it broadcasts).
cdef tuple broadcast_strides(TensorCore tensor, tuple sizes)
# c_dim() for an op that reads the size along dim, which a 0-d tensor lacks: PyTorch's
# IndexError there ("Dimension specified as 0 but tensor has no dimensions").
cdef int dim_with_size(TensorCore tensor, object dim, str argument=*) except -1
# Whether a kernel over contiguous memory of sizes can read tensor as it is.
cdef bint reads_directly(TensorCore tensor, tuple sizes)
# value, which must be our tensor, or a TypeError naming argument.
cdef TensorCore own_tensor_arg(object value, str argument)
# tensorplay.is_tensor.
cdef bint is_tensor(object obj)

# Grad mode, per thread (engine.pyx: no_grad, enable_grad).
cdef bint grad_enabled()
cdef void set_grad_enabled(bint enabled)
# A new tensor from a factory with its requires_grad keyword applied (checked first by
# arguments.require_grad_arg).
cdef object requiring_grad(object tensor, bint requires_grad)

# The tape (core.pyx, Note [Tape recorder]): the autograd engine installs the recorder that
# recorded() calls, so that the tensor layer records Nodes without importing the engine.
ctypedef object (*Recorder)(object outputs, int op, tuple inputs, tuple saved, object state)
cdef int install_recorder(Recorder recorder) except -1

# Whether a differentiable view's memory changed in place since its history was set.
cdef inline bint stale(TensorCore tensor) noexcept:
    return tensor.view_base is not None and tensor.version.value != tensor.view_version

# Whether an operation on these operands goes on the tape: one of them requires grad and grad
# mode is on (a stale view's history brought up to date first). Inline: every operation asks,
# and most answer no from the fields alone.
cdef inline bint tracked(TensorCore tensor, object other=None, object third=None):
    if stale(tensor) or (isinstance(other, TensorCore) and stale(<TensorCore>other)) or \
            (isinstance(third, TensorCore) and stale(<TensorCore>third)):
        if not grad_enabled():
            return False
        for operand in (tensor, other, third):
            if isinstance(operand, TensorCore) and stale(<TensorCore>operand):
                refresh_view(<TensorCore>operand)
    if not (tensor.grad_required
            or (isinstance(other, TensorCore) and (<TensorCore>other).grad_required)
            or (isinstance(third, TensorCore) and (<TensorCore>third).grad_required)):
        return False
    return grad_enabled()

# output, after a Node for op (ops.pxd) on inputs is recorded on it.
cdef object recorded(object output, int op, tuple inputs, tuple saved=*, object state=*)

# Sleeping graphs (docs/design.md, "Sleeping graphs"): operations refuse tensors whose memory
# sleep() released, before touching any state, since a kernel or copy on it would fault the
# device. The generated wrappers check self and the arguments that may be tensors (codegen,
# Note [Awake checks]); operation names the callable ("Tensor.add()"), argument the parameter
# (NULL for the tensor a method is called on). Inline: on awake memory a check is a type test
# and two loads; refuse_asleep raises the error, naming the sleeping graph (path: the item of
# argument, "[1]", or None).
cdef int refuse_asleep(TensorCore tensor, const char* operation, const char* argument,
                       str path) except -1
cdef int check_awake_items(object value, const char* operation, const char* argument) except -1

cdef inline bint memory_asleep(TensorCore tensor) noexcept:
    return type(tensor.owner) is DeviceStorage and (<DeviceStorage>tensor.owner).asleep[0]

cdef inline int check_awake(TensorCore tensor, const char* operation,
                            const char* argument) except -1:
    if memory_asleep(tensor):
        refuse_asleep(tensor, operation, argument, None)
    return 0

# An argument that may be a tensor (a Tensor, a union with one, Any): checked if it is one.
cdef inline int check_awake_value(object value, const char* operation,
                                  const char* argument) except -1:
    if isinstance(value, TensorCore):
        return check_awake(<TensorCore>value, operation, argument)
    return 0

# An argument that may be tensors (list[Tensor], dict[Tensor, Tensor], *args): a tensor, or
# each item of a list or tuple, or each key and value of a dict (one level, as the schema's
# types nest them), is checked.
cdef inline int check_awake_each(object value, const char* operation,
                                 const char* argument) except -1:
    if isinstance(value, TensorCore):
        return check_awake(<TensorCore>value, operation, argument)
    if isinstance(value, (list, tuple, dict)):
        return check_awake_items(value, operation, argument)
    return 0
