# cython: language_level=3
"""The tensor: its layout (shape, strides, dtype, device, first element), the storage under it,
views of it, its version counter and autograd state, and the hooks to the tape.

The operations live in modules of their own, implementing the public methods the schema
declares (api.yaml, impl: module.function): copies.pyx (copies, conversions, the host's view of
the values), elementwise.pyx, reduction.pyx, interop.pyx, factories.pyx, with arguments.pyx
(checks that need no tensor) and cpu.pyx (numpy computing) under them; random ops are
random_ops.pyx's. See docs/design.md, "Minimal tensor".

Note [Tensor model]
A tensor is a shape, strides (in elements), a dtype, a device and the address of its first
element. CPU tensors are numpy arrays underneath, so their views and arithmetic are numpy's;
bfloat16, which numpy lacks, keeps its bits in uint16 and computes through float32. CUDA tensors
take memory from the caching allocator (a DeviceStorage shared by all views of it) or share
memory with another library through DLPack or __cuda_array_interface__, keeping the producer
alive. Every CUDA operation is enqueued on the current stream of the tensor's device.

Rules kept deliberately small: elementwise operations and comparisons take a tensor of the same
dtype and device, or a Python scalar; tensor shapes broadcast by NumPy's rules (broadcast_shape),
and CUDA kernels read a broadcast operand through stride 0 instead of copying it; integer true
division and integer-with-float-scalar arithmetic give float32, as in PyTorch; outputs are
contiguous. Views (indexing, view, transpose, permute, squeeze, unsqueeze, expand) share memory,
so they work on both devices by changing sizes and strides alone.
"""
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport INT64_MAX, int64_t, uintptr_t

from tensorplay._runtime.base cimport dtypes, errors, public
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.memory cimport allocator, host_allocator, pools
from tensorplay._runtime.tensor cimport arguments
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport np

from tensorplay._runtime.tensor.arguments import DtypeError, ShapeError

import math
import operator
import threading
import warnings


# --------------------------------------------------------------------------------------------
# Layout arithmetic


cdef tuple contiguous_strides(tuple sizes):
    if len(sizes) == 1:  # the common case, without building a list
        return (1,)
    strides = []
    # C arithmetic with an overflow check: with a size of 0 the others may multiply past 2**63.
    cdef int64_t running = 1, size
    try:
        for item in reversed(sizes):
            strides.append(running)
            size = item
            if size < 1:  # a size of 0 does not make the next stride 0
                size = 1
            if running > INT64_MAX // size:
                raise OverflowError
            running *= size
    except OverflowError:
        raise ValueError(f"a tensor of shape {errors.shown(sizes)} would need strides of "
                         "2**63 elements or more, which a stride cannot hold") from None
    return tuple(reversed(strides))


cdef tuple contiguous_strides_of(TensorCore tensor):
    """contiguous_strides(tensor.sizes): the tensor's own strides when they are those (a
    contiguous tensor's are, but for any dimension of size 1), without a new tuple."""
    cdef Py_ssize_t dim
    cdef int64_t running = 1, size, stride
    for dim in range(len(tensor.sizes) - 1, -1, -1):
        stride = tensor.element_strides[dim]
        size = tensor.sizes[dim]
        if size < 1:  # as contiguous_strides, which also reports an overflow
            size = 1
        if stride != running or running > INT64_MAX // size:
            return contiguous_strides(tensor.sizes)
        running *= size
    return tensor.element_strides


cdef object reach_bytes(tuple sizes, tuple strides, int itemsize):
    if 0 in sizes:
        return 0
    return itemsize * (1 + sum((size - 1) * stride for size, stride in zip(sizes, strides)))


cdef int64_t contiguous_bytes(tuple sizes, int itemsize) except? -2:
    """The bytes of a contiguous tensor of sizes (each checked non-negative where it was
    made), or -1 beyond 2**63 - 1, in C arithmetic with an overflow check."""
    cdef int64_t count = itemsize, size
    cdef bint overflow = False
    for item in sizes:
        try:
            size = item
        except OverflowError:  # a size of 2**63 or more
            overflow = True
            continue
        if size == 0:
            return 0
        if overflow or count > INT64_MAX // size:
            overflow = True
        else:
            count *= size
    return -1 if overflow else count


cdef int64_t product(tuple sizes):
    cdef int64_t count = 1
    for size in sizes:
        count *= size
    return count


cdef str device_text(int device):
    return "cpu" if device == CPU else f"cuda:{device}"


# --------------------------------------------------------------------------------------------
# Autograd hooks (engine.pyx, Note [Tape]): grad mode, and the recorder of operations whose
# operands require grad (Note [Tape recorder]).


class ThreadGradMode(threading.local):
    # Per thread; the class attribute is every thread's start, so that reading it never takes
    # getattr's default (an AttributeError raised and caught: hundreds of nanoseconds a view).
    disabled = False


cdef object _grad_mode = ThreadGradMode()
cdef Recorder _recorder = NULL


cdef bint grad_enabled():
    return not _grad_mode.disabled


cdef void set_grad_enabled(bint enabled):
    _grad_mode.disabled = not enabled


# Note [Tape recorder]
# The autograd layer sits above the tensor layer (its gradients are tensor operations), yet
# every tensor operation on operands that require grad must record a Node. So the tensor layer
# declares the recorder it calls (core.pxd, Recorder) and the tape installs its record() when it
# is imported (tape.pyx, at its end); the public package imports it, so the recorder is in place
# before any tensor can require grad. Nothing here imports upwards, and an operation none of
# whose operands requires grad never reaches the recorder (tracked() is an inline check of their
# fields). Tensor.backward() is the engine's own function (api.yaml, impl: engine.backward_from).


cdef int install_recorder(Recorder recorder) except -1:
    global _recorder
    _recorder = recorder
    return 0


cdef object recorded(object output, int op, tuple inputs, tuple saved=(), object state=None):
    """output, after a Node for op (ops.pxd) on inputs is recorded on it."""
    if _recorder is NULL:
        raise RuntimeError("an operation on tensors that require grad needs the autograd tape "
                           "(tensorplay._runtime.autograd.tape), which `import tensorplay` "
                           "loads")
    _recorder(output, op, inputs, saved, state)
    return output


cdef class VersionCounter:
    pass


cdef object requiring_grad(object tensor, bint requires_grad):
    if requires_grad:
        (<TensorCore>tensor).grad_required = True
    return tensor


# --------------------------------------------------------------------------------------------
# Construction


cdef class DeviceStorage:
    def __cinit__(self):
        self.asleep = allocator.never_asleep()

    def __dealloc__(self):
        # A forked child must not touch the parent's allocator state.
        if self.pointer and _device.is_initialized():
            allocator.release(<void*>self.pointer)


cdef class PinnedStorage:
    """A block of the pinned host cache as numpy sees it: pin_memory() wraps it in a numpy
    array, which keeps it as its base (and so does every view of that array), and the block goes
    back to the cache (host_release) when the last of them goes. Copies that read it record their
    streams on it (host_record_stream), so the cache reuses it only after they complete."""

    @property
    def __array_interface__(self):
        return self.interface

    def __dealloc__(self):
        # A forked child must not touch the parent's pinned cache (nor are the pages locked
        # there: memory locks are not inherited across fork).
        if self.pointer and _device.is_initialized():
            host_allocator.host_release(<void*>self.pointer)


# The public tensor class, once the generated module has registered it: looked up per tensor
# otherwise.
cdef type _tensor_class = None
cdef tuple _NO_ARGUMENTS = ()


cdef TensorCore new_tensor():
    global _tensor_class
    cls = _tensor_class
    if cls is None:
        cls = public.public_class("TensorCore", TensorCore)
        if cls is not TensorCore:
            _tensor_class = cls
    # cls.__new__(cls) without the attribute lookup and argument checks of a Python call.
    return (<PyTypeObject*>cls).tp_new(cls, <PyObject*>_NO_ARGUMENTS, NULL)


cdef object wrap_device_memory(uintptr_t data, tuple sizes, tuple element_strides,
                               DtypeCore dtype, int device, object owner):
    cdef TensorCore tensor = new_tensor()
    tensor.sizes = sizes
    tensor.element_strides = element_strides
    tensor.dtype_object = dtype
    tensor.device_index = device
    tensor.data = data
    tensor.owner = owner
    tensor.element_count = product(sizes)
    return tensor


cdef TensorCore wrap_cpu(object array, DtypeCore dtype):
    cdef TensorCore tensor = new_tensor()
    if any(stride < 0 or stride % array.itemsize for stride in array.strides):
        array = np().ascontiguousarray(array)  # element strides must be whole and positive
    tensor.array = array
    tensor.sizes = tuple(array.shape)
    tensor.element_strides = tuple(stride // array.itemsize for stride in array.strides)
    if array.size == 0 and not any(array.strides):
        # numpy gives a new array of no element strides of 0; PyTorch's tensor has the
        # contiguous ones, as a CUDA tensor here does.
        tensor.element_strides = contiguous_strides(tensor.sizes)
    tensor.dtype_object = dtype
    tensor.device_index = CPU
    tensor.owner = array
    tensor.element_count = array.size
    return tensor


cdef object new_empty(tuple sizes, DtypeCore dtype, int device):
    # Elements below 2**63 may still need more bytes than that.
    cdef int64_t nbytes = contiguous_bytes(sizes, dtype.itemsize)
    if nbytes < 0:
        raise ValueError(f"a {dtype.name} tensor of shape {errors.shown(sizes)} would take "
                         f"{math.prod(sizes) * dtype.itemsize} bytes, more than the 2**63 - 1 "
                         "a tensor can hold")
    strides = contiguous_strides(sizes)
    if device == CPU:
        return wrap_cpu(np().empty(sizes, dtype=dtype.numpy_name), dtype)
    return allocated_tensor(sizes, strides, dtype, device, nbytes, product(sizes))


cdef TensorCore new_empty_like(TensorCore tensor):
    # new_empty(tensor.sizes, ...) without its size checks, which the tensor passed: a
    # contiguous tensor's bytes fit in the memory that holds them (none for no element).
    cdef DtypeCore dtype = tensor.dtype_object
    return allocated_tensor(tensor.sizes, contiguous_strides_of(tensor), dtype,
                            tensor.device_index, tensor.element_count * dtype.itemsize,
                            tensor.element_count)


cdef TensorCore allocated_tensor(tuple sizes, tuple strides, DtypeCore dtype, int device,
                                 int64_t nbytes, int64_t count):
    """A new CUDA tensor over nbytes from the caching allocator, allocated on the current
    stream."""
    _device.checked_device(device)
    cdef DeviceStorage storage = DeviceStorage.__new__(DeviceStorage)
    storage.nbytes = nbytes
    storage.device_index = device
    storage.pointer = <uintptr_t>allocator.allocate_with_flag(device, storage.nbytes,
                                                              current_stream(device),
                                                              &storage.asleep)
    cdef TensorCore tensor = new_tensor()
    tensor.sizes = sizes
    tensor.element_strides = strides
    tensor.dtype_object = dtype
    tensor.device_index = device
    tensor.data = storage.pointer
    tensor.owner = storage
    tensor.element_count = count
    return tensor


# --------------------------------------------------------------------------------------------
# Sleeping memory (core.pxd, check_awake; docs/design.md, "Sleeping graphs")


cdef int refuse_asleep(TensorCore tensor, const char* operation, const char* argument,
                       str path) except -1:
    what = "this tensor" if argument == NULL else argument.decode() + (path or "")
    raise RuntimeError(
        f"{operation.decode()}: {what} lives in "
        f"{pools.sleeping_pool_text(<void*>(<DeviceStorage>tensor.owner).pointer)}: sleep() "
        "released its physical memory, and touching it would fault the device; call wake() "
        "on that graph first")


cdef int check_awake_items(object value, const char* operation, const char* argument) except -1:
    cdef Py_ssize_t index
    cdef dict mapping
    if isinstance(value, dict):
        mapping = value
        for key, item in mapping.items():
            if isinstance(key, TensorCore) and memory_asleep(<TensorCore>key):
                refuse_asleep(key, operation, argument, " (a key)")
            if isinstance(item, TensorCore) and memory_asleep(<TensorCore>item):
                # A tensor key is named by its address: its repr would read its values.
                refuse_asleep(item, operation, argument,
                              f"[<tensor at {(<TensorCore>key).data:#x}>]"
                              if isinstance(key, TensorCore) else f"[{errors.shown(key)}]")
        return 0
    for index in range(len(value)):
        item = value[index]
        if isinstance(item, TensorCore) and memory_asleep(<TensorCore>item):
            refuse_asleep(item, operation, argument, f"[{index}]")
    return 0


cdef PinnedStorage pinned_storage_under(object array):
    """The pinned block under a numpy array, if pin_memory() made it. numpy keeps the object
    that exposed the memory as the base of the array and of its views (as_strided adds one
    level, a DummyArray with a base of its own), so no CUDA call is needed."""
    owner = array
    for _ in range(8):
        if owner is None or isinstance(owner, PinnedStorage):
            return owner
        owner = getattr(owner, "base", None)
    return None


cdef bint is_contiguous(TensorCore tensor) except -1:
    cdef int64_t expected = 1
    cdef int dim
    if tensor.element_count == 0:  # no element to be out of place, as PyTorch sees it
        return True
    if len(tensor.sizes) == 1:  # the common case, in C
        return tensor.element_count == 1 or tensor.element_strides[0] == 1
    for dim in range(len(tensor.sizes) - 1, -1, -1):
        size = tensor.sizes[dim]
        if size != 1 and tensor.element_strides[dim] != expected:
            return False
        expected *= size
    return True


cdef object strided_view(TensorCore tensor, tuple sizes, tuple strides):
    """A view of tensor's memory from its first element with other sizes and strides (in
    elements, never negative), which the caller checked stay within it. A CPU view that reads
    one element at several indices (stride 0, as expand() makes) is read-only, as numpy's
    broadcast_to()."""
    cdef TensorCore view
    if tensor.device_index != CPU:
        view = wrap_device_memory(tensor.data, sizes, strides, tensor.dtype_object,
                                  tensor.device_index, tensor.owner)
    else:
        array = tensor.array
        repeats = any(stride == 0 and size > 1 for size, stride in zip(sizes, strides))
        view = wrap_cpu(np().lib.stride_tricks.as_strided(
            array, sizes, tuple(stride * array.itemsize for stride in strides),
            writeable=bool(array.flags.writeable) and not repeats), tensor.dtype_object)
    mark_view(view, tensor)
    return view


VIEW_MADE_WITHOUT_GRAD = (  # PyTorch's message
    "A view was created in no_grad mode and is being modified inplace with grad mode enabled. "
    "Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
    "your code by moving both the view and the inplace either both inside the no_grad block "
    "(if you don't want the inplace to be tracked) or both outside (if you want the inplace "
    "to be tracked).")


cdef int mark_view(TensorCore view, TensorCore of) except -1:
    """view shows of's memory: it shares of's version counter and is a differentiable view of
    of's base (Note [Views and in-place changes], engine.pyx)."""
    view.version = of.version
    view.view_base = of if of.view_base is None else of.view_base
    view.view_version = of.version.value
    view.view_without_grad = not grad_enabled()
    return 0


cdef TensorCore strided_at(TensorCore tensor, tuple sizes, tuple strides, int64_t offset):
    cdef TensorCore view
    if tensor.device_index != CPU:
        view = wrap_device_memory(tensor.data + offset * tensor.dtype_object.itemsize, sizes,
                                  strides, tensor.dtype_object, tensor.device_index,
                                  tensor.owner)
    else:
        flat = tensor.array.reshape(-1)  # the callers' buffers are contiguous: no copy
        view = wrap_cpu(np().lib.stride_tricks.as_strided(
            flat[offset:], sizes, tuple(stride * flat.itemsize for stride in strides)),
            tensor.dtype_object)
    view.version = tensor.version
    return view


cdef bint overlapping(tuple sizes, tuple strides):
    # Taken by increasing stride, each dimension must step past every element the ones before
    # it reach (the layout's extent so far).
    cdef int64_t extent = 1
    for stride, size in sorted((stride, size) for size, stride in zip(sizes, strides)
                               if size > 1):
        if stride < extent:
            return True
        extent += (size - 1) * stride
    return False


cdef int refresh_view(TensorCore view) except -1:
    cdef TensorCore base = view.view_base
    view.view_version = view.version.value
    if base.grad_required and view.dtype_object.floating:
        recorded(view, ops.OP_AS_STRIDED, (base,), (), view_state(view))
    return 0


cdef tuple view_state(TensorCore view):
    cdef TensorCore base = view.view_base
    if view.device_index == CPU:
        distance = (view.array.__array_interface__["data"][0]
                    - base.array.__array_interface__["data"][0])
    else:
        distance = <int64_t>(view.data - base.data)
    return (base.sizes, base.element_strides, view.sizes, view.element_strides,
            distance // view.dtype_object.itemsize)


cdef int alias_memory(TensorCore target, TensorCore source) except -1:
    target.sizes = source.sizes
    target.element_strides = source.element_strides
    target.dtype_object = source.dtype_object
    target.device_index = source.device_index
    target.data = source.data
    target.owner = source.owner
    target.array = source.array
    target.element_count = source.element_count
    target.version = source.version
    target.view_base = None  # its own tensor now, no differentiable view of source's base
    return 0


cdef TensorCore reshaped(TensorCore tensor, tuple sizes):
    """A contiguous tensor seen in another shape of the same element count."""
    if tensor.sizes == sizes:
        return tensor
    return strided_view(tensor, sizes, contiguous_strides(sizes))


cdef int dim_with_size(TensorCore tensor, object dim, str argument="dim") except -1:
    cdef int axis = tensor.c_dim(dim, argument)  # its type and range first
    if not tensor.sizes:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return axis


cdef int check_device(TensorCore a, TensorCore b, str what) except -1:
    if a.device_index != b.device_index:
        raise ValueError(f"{what}: the tensors are on different devices, "
                         f"{device_text(a.device_index)} and {device_text(b.device_index)}; move "
                         "one with .to()")
    return 0


cdef int check_device_and_dtype(TensorCore a, TensorCore b, str what) except -1:
    check_device(a, b, what)
    if a.dtype_object is not b.dtype_object:
        raise TypeError(f"{what}: dtypes {a.dtype_object.name} and {b.dtype_object.name} differ; "
                        "convert one with .to(dtype)")
    return 0


cdef tuple broadcast_strides(TensorCore tensor, tuple sizes):
    """The strides that read tensor over sizes, a shape it broadcasts to: 0 on a dimension it
    lacks or has of size 1, so every index there reads the same element."""
    cdef Py_ssize_t lead = len(sizes) - len(tensor.sizes)
    return (0,) * lead + tuple(0 if size == 1 else stride for size, stride in
                               zip(tensor.sizes, tensor.element_strides))


cdef bint reads_directly(TensorCore tensor, tuple sizes):
    """Whether a kernel over contiguous memory of sizes can read tensor as it is."""
    return tensor.sizes == sizes and is_contiguous(tensor)


cdef TensorCore own_tensor_arg(object value, str argument):
    """value, which must be our tensor; anything else is a TypeError naming the argument."""
    if isinstance(value, TensorCore):
        return value
    raise TypeError(f"{argument} must be a tensorplay Tensor, got {type(value).__name__} "
                    f"({errors.shown(value)})")


cdef bint is_tensor(object obj):
    """tensorplay.is_tensor: whether obj is a tensorplay Tensor (a Parameter is one)."""
    return isinstance(obj, TensorCore)


# --------------------------------------------------------------------------------------------
# The tensor


cdef class TensorCore:
    def __cinit__(self, *args, **kwargs):
        self.device_index = CPU
        self.sizes = ()
        self.element_strides = ()
        self.version = VersionCounter.__new__(VersionCounter)  # views replace it with their base's

    def __init__(self, *args, **kwargs):
        raise TypeError("tensors are made by factories: tensorplay.tensor(), empty(), zeros(), "
                        "ones(), full(), arange(), as_tensor() or from_dlpack()")

    # -- description ------------------------------------------------------------------------

    cdef tuple c_shape(self):
        return self.sizes

    cdef int c_ndim(self):
        return len(self.sizes)

    cdef Py_hash_t c_hash(self):
        return id(self) >> 4  # identity, as PyTorch: == is elementwise, so not value-based

    cdef object c_dtype(self):
        return self.dtype_object

    cdef object c_device(self):
        if self.device_index == CPU:
            return public.public_class("DeviceCore", _device.DeviceCore)("cpu")
        return _device.device_object(self.device_index)

    cdef object c_stride(self, object dim):
        if dim is None:
            return self.element_strides
        cdef int index = self.c_dim(dim)
        if not self.sizes:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return self.element_strides[index]

    cdef object c_size(self, object dim):
        if dim is None:
            return self.sizes
        cdef int index = self.c_dim(dim)
        if not self.sizes:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return self.sizes[index]

    cdef int c_dim(self, object dim, str argument="dim") except -1:
        cdef int ndim = len(self.sizes)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"{argument} must be an int, got {type(dim).__name__} "
                            f"({errors.shown(dim)})")
        # A 0-d tensor takes dims 0 and -1, as if it had one dimension (PyTorch's rule).
        cdef int wrap = max(ndim, 1)
        if not -wrap <= dim < wrap:  # an index out of range, as in PyTorch
            raise IndexError(f"{argument}: Dimension out of range (expected to be in range of "
                             f"[{-wrap}, {wrap - 1}], but got {errors.shown(dim)})")
        return dim + wrap if dim < 0 else dim

    cdef int64_t c_numel(self):
        return self.element_count

    cdef bint c_is_floating_point(self):
        return self.dtype_object.floating

    cdef int c_element_size(self):
        return self.dtype_object.itemsize

    cdef int64_t c_nbytes(self):
        return self.element_count * self.dtype_object.itemsize

    cdef object c_data_ptr(self):
        if self.device_index == CPU:
            return self.array.__array_interface__["data"][0]
        return self.data

    cdef bint c_is_contiguous(self):
        return is_contiguous(self)

    cdef bint c_is_cuda(self):
        return self.device_index != CPU

    cdef Py_ssize_t c_len(self) except -1:
        if not self.sizes:
            raise TypeError("len() of a 0-d tensor")
        return self.sizes[0]

    # -- views ----------------------------------------------------------------------------------

    cdef object c_view(self, tuple shape):
        shape = arguments.view_shape(shape, self.element_count)
        if not is_contiguous(self):
            raise ShapeError("view size is not compatible with input tensor's size and stride "
                             "(at least one dimension spans across two contiguous subspaces). "
                             "Use .reshape(...) instead: view() needs a contiguous tensor; "
                             "reshape() copies "
                             "when it must")
        view = strided_view(self, shape, contiguous_strides(shape))
        return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view

    cdef object c_transpose(self, object dim0, object dim1):
        for argument, dim in (("dim0", dim0), ("dim1", dim1)):  # both types before any range
            if isinstance(dim, bool) or not isinstance(dim, int):
                raise TypeError(f"{argument} must be an int, got {type(dim).__name__} "
                                f"({errors.shown(dim)})")
        cdef int first = self.c_dim(dim0, "dim0"), second = self.c_dim(dim1, "dim1")
        if len(self.sizes) == 0:  # dims 0 and -1 of a 0-d tensor name the tensor itself
            view = strided_view(self, self.sizes, self.element_strides)
            return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view
        sizes, strides = list(self.sizes), list(self.element_strides)
        sizes[first], sizes[second] = sizes[second], sizes[first]
        strides[first], strides[second] = strides[second], strides[first]
        view = strided_view(self, tuple(sizes), tuple(strides))
        if tracked(self):
            return recorded(view, ops.OP_TRANSPOSE, (self,), (), (first, second))
        return view

    cdef object c_t(self):
        if len(self.sizes) > 2:
            raise ShapeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                             f"{len(self.sizes)}D (shape {self.sizes}); use transpose()")
        if len(self.sizes) < 2:  # a view of the tensor as it is
            view = strided_view(self, self.sizes, self.element_strides)
            return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view
        return self.c_transpose(0, 1)

    cdef object c_T(self):
        # PyTorch's numpy_T (aten/src/ATen/native/TensorShape.cpp): all dimensions reversed, with
        # its deprecation warnings for a 0-d tensor and for more than 2 dimensions (none for 1
        # or 2).
        cdef int ndim = len(self.sizes)
        if ndim == 0:
            warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity "
                          "in these cases.", UserWarning)
        elif ndim > 2:
            warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse "
                          "their shape is deprecated and it will throw an error in a future "
                          "release. Consider `x.mT` to transpose batches of matrices or "
                          "`x.permute(*range(x.ndim - 1, -1, -1))` to reverse the dimensions "
                          "of a tensor.", UserWarning)
        return self.c_permute(tuple(range(ndim - 1, -1, -1)))

    cdef object c_mT(self):
        if len(self.sizes) < 2:
            raise ShapeError(f"tensor.mT is only supported on matrices or batches of matrices. "
                             f"Got {len(self.sizes)}-D tensor.")
        return self.c_transpose(-2, -1)

    cdef object c_permute(self, tuple dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        arguments.require_ints(dims, "dims")
        if len(dims) != len(self.sizes):
            raise ShapeError(f"permute(): number of dimensions in the tensor input does not "
                             f"match the length of the desired ordering of dimensions i.e. "
                             f"input.dim() = {len(self.sizes)} is not equal to len(dims) = "
                             f"{len(dims)}")
        order = tuple(self.c_dim(dim, "dims") for dim in dims)
        if len(set(order)) != len(order):
            raise ShapeError(f"permute(): duplicate dims are not allowed (dims "
                             f"{errors.shown(dims)})")
        view = strided_view(self, tuple(self.sizes[dim] for dim in order),
                            tuple(self.element_strides[dim] for dim in order))
        return recorded(view, ops.OP_PERMUTE, (self,), (), order) if tracked(self) else view

    cdef object c_squeeze(self, object dim):
        cdef int ndim = len(self.sizes)
        if dim is None:
            dropped = {index for index in range(ndim) if self.sizes[index] == 1}
        else:
            dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
            for item in dims:  # every type before any range
                if isinstance(item, bool) or not isinstance(item, int):
                    raise TypeError(f"dim must be an int or a tuple of ints, got "
                                    f"{errors.shown(dim)}")
            chosen = [self.c_dim(item) for item in dims]
            for index in chosen:
                if chosen.count(index) > 1:
                    raise ShapeError(f"dim {index} appears multiple times in the list of dims")
            # A 0-d tensor takes dim 0 (or -1) and stays as it is.
            dropped = {index for index in chosen if ndim and self.sizes[index] == 1}
        view = strided_view(self, tuple(size for index, size in enumerate(self.sizes)
                                        if index not in dropped),
                            tuple(stride for index, stride in enumerate(self.element_strides)
                                  if index not in dropped))
        return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view

    cdef object c_unsqueeze(self, object dim):
        cdef int ndim = len(self.sizes)
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"dim must be an int, got {type(dim).__name__} ({errors.shown(dim)})")
        if not -ndim - 1 <= dim <= ndim:
            raise IndexError(f"dim: Dimension out of range (expected to be in range of "
                             f"[{-ndim - 1}, {ndim}], but got {errors.shown(dim)})")
        cdef int at = dim + ndim + 1 if dim < 0 else dim
        # The new dimension's stride is never used to move (its size is 1); PyTorch's choice.
        stride = self.element_strides[at] * self.sizes[at] if at < ndim else 1
        view = strided_view(self, self.sizes[:at] + (1,) + self.sizes[at:],
                            self.element_strides[:at] + (stride,) + self.element_strides[at:])
        return recorded(view, ops.OP_RESHAPE, (self,)) if tracked(self) else view

    cdef object c_expand(self, tuple size):
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        arguments.require_ints(size, "expand: sizes")
        cdef Py_ssize_t lead = len(size) - len(self.sizes), dim
        if lead < 0:
            raise ShapeError(f"expand: the number of sizes provided ({len(size)}) must be greater "
                             f"or equal to the number of dimensions in the tensor "
                             f"({len(self.sizes)})")
        sizes, strides = [], []
        for dim, target in enumerate(size):
            if dim < lead:
                if target < 0:
                    raise ShapeError(f"expand: The expanded size of the tensor ({target}) isn't "
                                     f"allowed in a leading, non-existing dimension {dim}")
                sizes.append(target)
                strides.append(0)
                continue
            existing, stride = self.sizes[dim - lead], self.element_strides[dim - lead]
            if target == -1 or target == existing:
                sizes.append(existing)
                strides.append(stride)
            elif existing == 1 and target >= 0:
                sizes.append(target)
                strides.append(0)  # every index reads the one element
            else:
                raise ShapeError(f"expand: The expanded size of the tensor ({target}) must match "
                                 f"the existing size ({existing}) at non-singleton dimension "
                                 f"{dim}.  Target sizes: {list(size)}.  Tensor sizes: "
                                 f"{list(self.sizes)}")
        if math.prod(sizes) >= arguments.ELEMENTS_LIMIT:
            raise ValueError(f"expand: sizes {errors.shown(size)} have 2**63 elements or more")
        view = strided_view(self, tuple(sizes), tuple(strides))
        return recorded(view, ops.OP_EXPAND, (self,)) if tracked(self) else view

    cdef object c_getitem(self, object key):
        cdef int64_t offset
        sizes, strides, offset, selected, inserted = index_layout(self, key)
        if self.device_index == CPU:
            # numpy selects the indexed dimensions (the trailing Ellipsis keeps integer indexing
            # a 0-d view instead of a numpy scalar); the dimensions None, True and False insert
            # take the strides index_layout gave them.
            array = self.array[selected + (Ellipsis,)]
            if any(inserted):
                kept = iter(array.strides)
                array = np().lib.stride_tricks.as_strided(
                    array, sizes, [stride * array.itemsize if new else next(kept)
                                   for stride, new in zip(strides, inserted)])
            return self.c_indexed(wrap_cpu(array, self.dtype_object), key)
        view = wrap_device_memory(self.data + offset * self.dtype_object.itemsize, sizes,
                                  strides, self.dtype_object, self.device_index, self.owner)
        return self.c_indexed(view, key)

    cdef object c_indexed(self, TensorCore view, object key):
        """view, selected from this tensor by key, as a view: sharing the version counter, and
        on the tape when this tensor is."""
        mark_view(view, self)
        return recorded(view, ops.OP_GETITEM, (self,), (), key) if tracked(self) else view

    # -- autograd (engine.pyx, Note [Tape]) --------------------------------------------------

    cdef bint c_requires_grad(self):
        if stale(self):
            refresh_view(self)
        return self.grad_required

    cdef object c_set_requires_grad(self, bint value):
        if value and not self.dtype_object.floating:
            raise RuntimeError(f"only Tensors of floating point and complex dtype can require "
                               f"gradients (tensorplay has no complex dtypes); this one is "
                               f"{self.dtype_object.name}")
        if not value and self.grad_node is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables; to "
                               "use a computed tensor without gradients, call detach()")
        self.grad_required = value
        return None

    cdef object c_requires_grad_(self, bint requires_grad):
        if requires_grad and not self.dtype_object.floating:  # PyTorch's words for this call
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients; "
                               f"this one is {self.dtype_object.name}")
        self.c_set_requires_grad(requires_grad)
        return self

    cdef object c_grad(self):
        if self.retained_grad is not None:  # a non-leaf that retains its grad
            return self.retained_grad[0]
        return self.grad_value

    cdef object c_set_grad(self, object value):
        if value is not None:
            if not isinstance(value, TensorCore):
                raise TypeError(f"grad must be a tensor or None, got {type(value).__name__}")
            if (<TensorCore>value).dtype_object is not self.dtype_object:
                raise DtypeError(f"grad: attempting to assign a gradient with dtype "
                                 f"'{(<TensorCore>value).dtype_object.name}' to a tensor with "
                                 f"grad_dtype '{self.dtype_object.name}' (assigned grad has "
                                 f"data of a different type)")
            check_device_and_dtype(self, value, "grad")
            if (<TensorCore>value).sizes != self.sizes:
                raise ShapeError(f"grad: attempting to assign a gradient of size "
                                 f"'{list((<TensorCore>value).sizes)}' to a tensor of size "
                                 f"'{list(self.sizes)}'. Please ensure that the gradient and "
                                 f"the tensor are the same size (assigned grad has data of a "
                                 f"different size)")
        if self.retained_grad is not None:
            self.retained_grad[0] = value
        else:
            self.grad_value = value
        return None

    cdef object c_grad_fn(self):
        if stale(self):
            refresh_view(self)
        return self.grad_node

    cdef bint c_is_leaf(self):
        if stale(self):
            refresh_view(self)
        return self.grad_node is None

    cdef object c_detach(self):
        cdef TensorCore alias = strided_view(self, self.sizes, self.element_strides)
        alias.view_base = None  # shares the memory, but no history: no differentiable view
        return alias

    cdef int c_check_rebase(self, str name) except -1:
        if self.grad_required and self.grad_node is None:
            raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
        if self.view_base is None:
            return 0
        # PyTorch's refusals of an in-place change of a view (VariableTypeUtils.h,
        # check_inplace and handle_view_on_rebase; TensorIterator's overlap check)
        cdef TensorCore base = self.view_base
        if base.grad_required and base.grad_node is None:
            raise RuntimeError(f"{name}: a view of a leaf Variable that requires grad is being "
                               "used in an in-place operation.")
        if self.view_without_grad:
            raise RuntimeError(f"{name}: {VIEW_MADE_WITHOUT_GRAD}")
        if overlapping(self.sizes, self.element_strides):
            raise RuntimeError(f"{name}: unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        if overlapping(base.sizes, base.element_strides):  # its elements would share one
            raise RuntimeError(f"{name}: unsupported operation: more than one element of the "
                               "written-to tensor refers to a single memory location. Please "
                               "clone() the tensor before performing the operation.")
        return 0

    # Note [Refused calls change nothing]
    # An in-place operation checks every argument (types, values against the dtype, shapes,
    # devices, autograd's rules, writable memory) before it counts the change with
    # c_mark_modified, so a call that raises leaves the tensor's version counter, and with it
    # the saved tensors of a later backward(), as they were; the CPU's integer division counts
    # it after the values are computed, since a zero divisor is found there. The random fills
    # (random_ops.pyx) check with c_check_in_place first and count once the numbers are
    # written. Errors of the device itself (a failed launch) may still come after the count.
    cdef int c_check_in_place(self, str name, object other=None) except -1:
        """Refuse an in-place change the tape cannot follow (of a tensor that requires grad,
        or from an operand that does, while grad mode is on) or that memory cannot take
        (read-only CPU memory: an expand()ed view, or a read-only numpy or DLPack producer's);
        changes nothing."""
        if tracked(self, other):
            if self.grad_required and self.grad_node is None:
                raise RuntimeError(f"{name}: a leaf Variable that requires grad is being used in "
                                   "an in-place operation.")
            raise RuntimeError(f"{name}: in-place operations are not recorded for autograd, and "
                               "an operand requires grad; use the out-of-place operation, or "
                               "run it under tensorplay.no_grad()")
        if self.view_base is not None and self.view_without_grad and \
                self.view_base.grad_required and grad_enabled():
            # PyTorch counts such a view as requiring grad through its base: the change would
            # reach the base's values and not its history (check_inplace).
            raise RuntimeError(f"{name}: {VIEW_MADE_WITHOUT_GRAD}")
        if self.device_index == CPU and self.element_count and not self.array.flags.writeable:
            raise ValueError(f"{name}: this tensor's memory is read-only (an expand()ed view "
                             "reads one element at several indices, and memory shared from a "
                             "read-only numpy array or DLPack producer cannot be written); "
                             "clone() it first")
        return 0

    cdef int c_mark_modified(self, str name, object other=None) except -1:
        """Count an in-place change (Note [Version counters] in engine.pyx) after
        c_check_in_place's refusals. Called once every argument is checked (Note [Refused
        calls change nothing]), so that a refused call leaves the counter as it was."""
        self.c_check_in_place(name, other)
        self.version.value += 1
        return 0

    cdef object c_record_stream(self, _stream.StreamCore stream):
        if self.device_index == CPU:
            raise TypeError("record_stream() needs a CUDA tensor")
        if isinstance(self.owner, DeviceStorage):  # memory shared by others is theirs to track
            allocator.record_stream(<void*>(<DeviceStorage>self.owner).pointer, stream.handle,
                                    stream.device_index)
        return None


# Note [Basic indexing]
# x[key] with ints, slices, None, True/False and one Ellipsis is a view, laid out as PyTorch's
# applySlicing lays it out (aten/src/ATen/TensorIndexing.h): the items are taken left to right
# against the dimensions not yet indexed; an int selects (its dimension goes, a negative one
# counts from the end), a slice narrows with a positive step (PyTorch refuses the others), None
# and True insert a dimension of one element whose stride is what unsqueeze() gives there (the
# next dimension's size times its stride, 1 at the end), False inserts one of no element, and
# the Ellipsis stands for every dimension no other item indexes. PyTorch reads a True or False as
# a mask of one element, so x[key] with one is a copy of this view (copies.getitem); x[key] =
# value writes through it. Anything else is an IndexError, as PyTorch's for the types it does
# not take; a float slice bound is a TypeError, as Python's.


cdef str _index_item_text(object item):
    """What an item index_layout refuses is, for its message."""
    beside = "beside True/False or a bool tensor of 0 dimensions, which do not mix"
    if isinstance(item, TensorCore):
        dtype = (<TensorCore>item).dtype_object.name
        if dtype in ("int64", "int32"):
            return f"an {dtype} tensor {beside}"
        if dtype == "bool":
            return "a bool tensor of 0 dimensions beside an integer index, which do not mix"
        return f"a {dtype} tensor"
    if isinstance(item, list) and all(
            isinstance(value, int) and not isinstance(value, bool) for value in item):
        return f"a list of ints {beside}"
    return type(item).__name__


cdef tuple index_layout(TensorCore tensor, object key):
    """x[key]'s view (Note [Basic indexing]): (sizes, element strides, offset in elements, the
    int and slice of each indexed dimension of tensor, and for each dimension of the view
    whether the key inserted it)."""
    items = key if isinstance(key, tuple) else (key,)
    cdef Py_ssize_t ndim = len(tensor.sizes), indexed = 0, ellipses = 0
    for item in items:
        if item is Ellipsis:
            ellipses += 1
        elif isinstance(item, slice) or _is_int_index(item):
            indexed += 1
        elif item is not None and not isinstance(item, bool):
            raise IndexError(f"only ints, slices (with positive steps), None, ..., True/False, "
                             f"int64 or int32 tensors, lists of ints and bool tensors (masks of "
                             f"the dimensions they cover) index a tensor; got "
                             f"{_index_item_text(item)}")
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if indexed > ndim:
        raise IndexError(f"too many indices ({indexed}) for a tensor of {ndim} dimensions")
    sizes, strides = list(tensor.sizes), list(tensor.element_strides)
    inserted = [False] * ndim
    selected = []
    cdef Py_ssize_t dim = 0     # of the view being built
    cdef int64_t offset = 0
    for item in items:
        if item is Ellipsis:
            selected += [slice(None)] * (ndim - indexed)
            dim += ndim - indexed
        elif item is None or isinstance(item, bool):
            stride = sizes[dim] * strides[dim] if dim < len(sizes) else 1
            sizes.insert(dim, 0 if item is False else 1)
            strides.insert(dim, stride)
            inserted.insert(dim, True)
            dim += 1
        elif isinstance(item, slice):
            start, stop, step = item.indices(sizes[dim])
            if step <= 0:
                raise ValueError(f"slice step must be greater than zero, got {step}")
            size = len(range(start, stop, step))
            offset += start * strides[dim]
            # A dimension of one element (or none) never moves by its stride: keeping the
            # tensor's own keeps a huge step from making one beyond 2**63.
            if size > 1:
                strides[dim] *= step
            sizes[dim] = size
            selected.append(item)
            dim += 1
        else:
            index, size = operator.index(item), sizes[dim]
            if not -size <= index < size:
                raise IndexError(f"index {index} is out of range for dimension {len(selected)} "
                                 f"of size {size}")
            offset += (index + size if index < 0 else index) * strides[dim]
            del sizes[dim], strides[dim], inserted[dim]
            selected.append(index)
    return tuple(sizes), tuple(strides), offset, tuple(selected), inserted


cdef bint _is_int_index(object item):
    """An int index: a Python int or a numpy integer (not a bool, which inserts a dimension)."""
    return (isinstance(item, int) and not isinstance(item, bool)) or \
        isinstance(item, np().integer)
