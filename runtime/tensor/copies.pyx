# cython: language_level=3
"""Copies between devices, dtypes and layouts, and the tensor methods built on them: copy_,
fill_, clone, to / cpu / cuda and the dtype conversions (float(), long()...), pin_memory,
reshape and flatten (a view, or a copy when it must be), item assignment, cat and stack (copies
into views of a new tensor), and the values on the host (item, tolist, numpy, repr, float(t),
bool(t)...). See docs/design.md, "Minimal tensor", "Pinned host cache" and "Capture rules".
"""
from libc.stdint cimport uintptr_t
from libc.string cimport memcpy

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport (cudaMemcpyDeviceToDevice, cudaMemcpyDeviceToHost,
                                      cudaMemcpyHostToDevice, cudaMemoryTypeHost,
                                      cudaPointerAttributes, cudaStreamCaptureStatus,
                                      cudaStreamCaptureStatusNone, cudaStream_t)

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.devices cimport captures, device as _device
from tensorplay._runtime.kernels cimport device_ops, ops
from tensorplay._runtime.memory cimport host_allocator
from tensorplay._runtime.base.dtypes cimport CODE_BOOL, DtypeCore
from tensorplay._runtime.tensor.arguments cimport (broadcast_shape, device_arg, dtype_arg,
                                                   is_scalar, np, require_ints, sequence_arg)
from tensorplay._runtime.tensor.core cimport (CPU, PinnedStorage, TensorCore, broadcast_strides,
                                              check_device, contiguous_bytes,
                                              current_stream, device_text, dim_with_size,
                                              grad_enabled, is_contiguous, new_empty,
                                              own_tensor_arg, pinned_storage_under, recorded,
                                              set_grad_enabled, strided_view, tracked,
                                              view_state, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, stored
from tensorplay._runtime.tensor.promotion cimport promote_types

from tensorplay._runtime.tensor.arguments import DtypeError, ShapeError
from tensorplay._runtime.tensor.tensor_repr import tensor_repr

from math import prod  # exact: sizes multiply as Python ints


# --------------------------------------------------------------------------------------------
# Pinned and page-locked host memory


cdef TensorCore new_pinned(tuple sizes, DtypeCore dtype):
    """A contiguous CPU tensor of sizes (those of an existing tensor) in a block of the pinned
    host cache."""
    cdef PinnedStorage storage = PinnedStorage.__new__(PinnedStorage)
    cdef size_t nbytes = <size_t>contiguous_bytes(sizes, dtype.itemsize)
    storage.pointer = <uintptr_t>host_allocator.host_allocate(nbytes)
    storage.nbytes = nbytes
    # numpy_name is the storage dtype: uint16 bits for bfloat16 (Note [Tensor model]).
    storage.interface = {"shape": sizes, "typestr": np().dtype(dtype.numpy_name).str,
                         "data": (storage.pointer, False), "strides": None, "version": 3}
    return wrap_cpu(np().asarray(storage), dtype)


cdef PinnedStorage pinned_storage_of(TensorCore tensor):
    """The pinned block under a CPU tensor made by pin_memory(), or a view of one; else None."""
    return pinned_storage_under(tensor.array)


cdef inline uintptr_t host_address(TensorCore tensor):
    """The address of a CPU tensor's first element."""
    return tensor.array.__array_interface__["data"][0]


cdef bint host_memory_is_locked(uintptr_t address, int device) except -1:
    """Whether CUDA reports address as page-locked host memory (cudaHostAlloc'd, by any library,
    or registered with cudaHostRegister). CUDA must be initialised."""
    cdef cudaPointerAttributes attributes
    cdef _device.DeviceSwitch switch
    cdef int mode
    if address == 0:
        return False
    with nogil:
        _device.enter_device(device, &switch)
        _device.enter_relaxed(&mode)  # a query, legal during any capture in relaxed mode
        try:
            errors.check(cyruntime.cudaPointerGetAttributes(&attributes, <void*>address),
                         "cudaPointerGetAttributes")
        finally:
            _device.exit_relaxed(&mode)
            _device.exit_device(&switch)
    return attributes.type == cudaMemoryTypeHost


cdef bint page_locked(TensorCore tensor, int device) except -1:
    """Whether a CPU tensor's memory is page-locked (asked under device's context). Never
    initialises CUDA: before tensorplay initialises it nothing it made can be pinned, and in a
    child forked after initialisation the pages are not locked."""
    if tensor.device_index != CPU or not _device.is_initialized():
        return False
    return pinned_storage_of(tensor) is not None or \
        host_memory_is_locked(host_address(tensor), device)


# --------------------------------------------------------------------------------------------
# Copies


cdef object copy_named(TensorCore target, object src, bint non_blocking, str argument):
    """target.copy_(src), argument naming src in errors (copy_(): src; item assignment: value)."""
    cdef TensorCore source = own_tensor_arg(src, argument)
    cdef unsigned long long capture_id
    if source.sizes != target.sizes:  # a source that broadcasts is read through stride 0
        if broadcast_shape(target.sizes, source.sizes, "copy_") != target.sizes:
            raise ShapeError(f"copy_: the source's shape {source.sizes} does not broadcast "
                             f"to this tensor's shape {target.sizes}")
        source = strided_view(source, target.sizes, broadcast_strides(source, target.sizes))
    if tracked(target, src) and (<TensorCore>src).dtype_object.floating:
        # Recorded: src converted and broadcast to this tensor, copied in.
        target.c_check_rebase("copy_")
        value = (<TensorCore>src).c_expand(target.sizes) if (<TensorCore>src).sizes != \
            target.sizes else src
        return rebased(target, copied_to(value, target.device_index, target.dtype_object,
                                         False, True, argument))
    if source.device_index == CPU and target.device_index != CPU and target.element_count:
        # Refused before the version counter moves (Note [Host copies during capture]).
        host_copy_capturing(source, target.device_index, target.dtype_object, argument,
                            current_stream(target.device_index), &capture_id)
    target.c_mark_modified("copy_", src)
    copy_into(target, source, non_blocking, argument)
    return target


cdef object copied_to(TensorCore tensor, int target_device, DtypeCore target_dtype,
                      bint non_blocking, bint copy, str argument):
    """tensor.to(target_device, target_dtype, non_blocking, copy) with the arguments checked;
    argument names tensor in errors (to(): self; tensor(): data)."""
    cdef unsigned long long capture_id
    if target_device == tensor.device_index and target_dtype is tensor.dtype_object and not copy:
        return tensor
    if tensor.device_index == CPU and target_device != CPU and tensor.element_count:
        # A copy the capture cannot take is refused before the result is allocated (Note [Host
        # copies during capture]).
        host_copy_capturing(tensor, target_device, target_dtype, argument,
                            current_stream(target_device), &capture_id)
    result = new_empty(tensor.sizes, target_dtype, target_device)
    copy_into(result, tensor, non_blocking, argument)
    if tracked(tensor) and target_dtype.floating:
        return recorded(result, ops.OP_TO, (tensor,))
    return result


cdef object to_named(TensorCore tensor, object device, object dtype, bint non_blocking,
                     bint copy, str argument):
    """tensor.to(device, dtype, non_blocking, copy), argument naming tensor in errors."""
    if isinstance(device, DtypeCore):  # x.to(tensorplay.float16), as PyTorch allows
        if dtype is not None:
            raise TypeError("to() got a dtype twice (as device and as dtype)")
        device, dtype = None, device
    cdef int target_device = device_arg(device, tensor.device_index)
    cdef DtypeCore target_dtype = dtype_arg(dtype, tensor.dtype_object, "dtype")
    return copied_to(tensor, target_device, target_dtype, non_blocking, copy, argument)


cdef int copy_into(TensorCore target, TensorCore source, bint non_blocking,
                   str argument="src") except -1:
    """Copy source into target (one shape); argument names source in errors."""
    if target.sizes != source.sizes:
        raise ShapeError(f"copy_: shapes {source.sizes} (source) and {target.sizes} (self) differ")
    if target.element_count == 0:
        return 0
    if target.device_index == CPU and source.device_index == CPU:
        target.array[...] = stored(computable(source), target.dtype_object)
    elif target.device_index == CPU:
        copy_to_host(target, source)
    elif source.device_index == CPU:
        copy_from_host(target, source, non_blocking, argument)
    else:
        copy_on_device(target, source)
    return 0


cdef int copy_on_device(TensorCore target, TensorCore source) except -1:
    cdef int device = target.device_index
    cdef cudaStream_t stream = current_stream(device)
    cdef size_t nbytes = target.element_count * target.dtype_object.itemsize
    if source.device_index != device:
        # Across devices: a contiguous copy of the source on its own device, then a peer copy.
        staged = contiguous(to(source, device_text(source.device_index), target.dtype_object,
                               False, False))
        destination = target if is_contiguous(target) else \
            new_empty(target.sizes, target.dtype_object, device)
        with nogil:
            errors.check(cyruntime.cudaMemcpyPeerAsync(
                <void*>(<TensorCore>destination).data, device, <void*>(<TensorCore>staged).data,
                (<TensorCore>staged).device_index, nbytes, stream), "cudaMemcpyPeerAsync")
        if destination is not target:
            copy_on_device(target, destination)
        return 0
    if source.dtype_object is target.dtype_object and is_contiguous(source) \
            and is_contiguous(target):
        with nogil:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>target.data, <void*>source.data,
                                                   nbytes, cudaMemcpyDeviceToDevice, stream),
                         "cudaMemcpyAsync")
        return 0
    return device_ops.copy_strided(device, source.dtype_object, source.data, source.sizes,
                                   source.element_strides, target.dtype_object, target.data,
                                   target.element_strides, stream)


# Note [Host copies during capture]
# A graph replays the addresses it captured: a captured host-to-device copy reads the same host
# bytes on every replay (PyTorch's CUDA graphs notes: a graph reads from and writes to the same
# virtual addresses every time it replays). So a copy made on a stream that captures must read
# memory that holds, at each replay, what that replay should copy, and that stays allocated
# while the graph can replay. A copy from pageable memory can do neither: the eager paths read it
# through a temporary (a dtype conversion, a gather of strides, a staging block of the pinned
# cache that goes back to the cache at once), freed or reused right after the call, and CUDA
# captures a cudaMemcpyAsync from pageable memory without a word (checked on an H200), so each
# replay would read freed memory or whatever later copies staged there. Hence, on a capturing
# stream (one that joined the capture through an event wait too):
# - a copy from pageable memory, or one that needs a temporary host buffer (another dtype, a
#   source that is not contiguous), is refused before any CUDA call but queries, naming the
#   argument, and the capture goes on. The fix is PyTorch's: copy from pinned memory
#   (Tensor.pin_memory(), made before the capture) and change its values between replays;
# - a copy from page-locked memory that needs no conversion (pin_memory()'s blocks, or memory
#   CUDA reports page-locked, such as PyTorch's pinned tensors shared through DLPack) is
#   captured as one cudaMemcpyAsync straight from the source: no staging block, and no
#   host_record_stream (an event recorded during capture covers nothing at replay time). The
#   source's numpy array, which owns the memory through its base (a PinnedStorage or the
#   producer), goes to captures.keep_alive under the capture's id, so that the graph keeps it
#   while it can replay;
# - a destination that is not contiguous is written as in eager mode, through a contiguous
#   device buffer allocated on the capturing stream (so from the graph's pool) and a device copy;
# - on the legacy default stream while a blocking stream of its device captures, any copy would
#   join and invalidate that capture: refused as well.
# Outside a capture, a page-locked source that needs no conversion is read in place, which is
# asynchronous: a blocking copy then synchronises the stream (PyTorch's memcpy_and_sync), a
# non_blocking one from a pin_memory() block records the stream on the block. Pageable sources
# are read in place by blocking copies (CUDA stages them and returns once they are read), and
# staged through a block of the pinned cache by non_blocking ones, which record their stream on
# that block; so are non_blocking copies from page-locked memory of other libraries, which our
# cache cannot track.


cdef unsigned long long capture_id_of(cudaStream_t stream, int device) except? 0:
    cdef cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone
    cdef unsigned long long capture_id = 0
    cdef _device.DeviceSwitch switch
    with nogil:
        _device.enter_device(device, &switch)
        try:
            errors.check(cyruntime.cudaStreamGetCaptureInfo(stream, &status, &capture_id, NULL,
                                                            NULL, NULL, NULL),
                         "cudaStreamGetCaptureInfo")
        finally:
            _device.exit_device(&switch)
    return capture_id


cdef bint host_copy_capturing(TensorCore source, int device, DtypeCore dtype, str argument,
                              cudaStream_t stream, unsigned long long* capture_id) except -1:
    if not _device.capture_open() or not _device.stream_capturing(<void*>stream, device):
        return False
    # Note [Host copies during capture]
    if <uintptr_t>stream <= 1:  # the legacy default stream (0, or cudaStreamLegacy) never captures
        raise RuntimeError(
            f"a copy from the host to cuda:{device} cannot run on the legacy default stream "
            f"while a blocking stream of cuda:{device} captures a graph: work on the legacy "
            "stream would join that capture and invalidate it (cudaErrorStreamCaptureImplicit). "
            "Copy on the capturing stream (make it current with tensorplay.cuda.stream()), or "
            "before the capture begins. Nothing was copied, and the capture goes on")
    reason = None
    if source.dtype_object is not dtype:
        reason = (f"needs a temporary pageable buffer (its {source.dtype_object.name} values are "
                  f"converted to {dtype.name} on the host first), which the graph "
                  "would read on every replay after it is freed")
    elif not is_contiguous(source):
        reason = ("needs a temporary pageable buffer (it is not contiguous, a strided or "
                  "broadcast view, so its elements are gathered on the host first), which the "
                  "graph would read on every replay after it is freed")
    elif not page_locked(source, device):
        reason = ("is pageable host memory, not page-locked, so the graph would read a temporary "
                  "or reused host buffer on every replay instead of its values")
    if reason is not None:
        raise RuntimeError(
            f"a copy from pageable host memory cannot be captured into a CUDA graph (stream "
            f"{<uintptr_t>stream:#x} of cuda:{device} is capturing): the source ({argument}) "
            f"{reason}. Copy from pinned memory instead: make a contiguous CPU tensor of "
            f"dtype {dtype.name} with .pin_memory() before the capture and copy_() "
            "from it inside; every replay then reads that pinned memory, so set its values "
            "before each replay (PyTorch's rule for host copies in CUDA graphs). Nothing was "
            "copied, and the capture goes on")
    capture_id[0] = capture_id_of(stream, device)
    return True


cdef int copy_from_host(TensorCore target, TensorCore source, bint non_blocking,
                        str argument) except -1:
    # Note [Host copies during capture]
    cdef int device = target.device_index
    cdef cudaStream_t stream = current_stream(device)
    cdef unsigned long long capture_id = 0
    cdef bint captured = host_copy_capturing(source, device, target.dtype_object, argument, stream,
                                             &capture_id)
    cdef bint as_is = captured or (source.dtype_object is target.dtype_object
                                   and is_contiguous(source))
    cdef PinnedStorage storage = None
    cdef bint in_place = captured   # reads source's page-locked memory itself, asynchronously
    cdef void* pinned = NULL
    cdef int mode
    if as_is:
        host = source.array
        if not captured:
            storage = pinned_storage_of(source)
            in_place = storage is not None or (
                not non_blocking and host_memory_is_locked(host_address(source), device))
    else:
        host = np().asarray(stored(computable(source), target.dtype_object), order="C")
    cdef size_t nbytes = host.nbytes
    cdef uintptr_t host_pointer = host.__array_interface__["data"][0]
    destination = target if is_contiguous(target) else \
        new_empty(target.sizes, target.dtype_object, device)
    cdef uintptr_t destination_pointer = (<TensorCore>destination).data
    if captured:
        # Recorded before the node exists: no captured node reads memory the graph may not hold.
        captures.keep_alive(capture_id, host)
    elif non_blocking and not in_place:
        # Stage through the pinned cache so the copy is truly asynchronous; the block is reused
        # only after the copy recorded on it completes (host_allocator).
        pinned = host_allocator.host_allocate(nbytes)
        memcpy(pinned, <void*>host_pointer, nbytes)
        host_pointer = <uintptr_t>pinned
    try:
        with nogil:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>destination_pointer,
                                                   <void*>host_pointer, nbytes,
                                                   cudaMemcpyHostToDevice, stream),
                         "cudaMemcpyAsync")
        if pinned != NULL:
            host_allocator.host_record_stream(pinned, stream)
        elif in_place and not captured:
            if non_blocking:  # a pin_memory() block: reused only after this copy
                host_allocator.host_record_stream(<void*>storage.pointer, stream)
            else:  # blocking: the source may change once this returns
                with nogil:
                    _device.enter_relaxed(&mode)  # legal while another stream captures
                    try:
                        errors.check(cyruntime.cudaStreamSynchronize(stream),
                                     "cudaStreamSynchronize")
                    finally:
                        _device.exit_relaxed(&mode)
    finally:
        if pinned != NULL:
            host_allocator.host_release(pinned)
    if destination is not target:
        copy_on_device(target, destination)
    return 0


cdef int copy_to_host(TensorCore target, TensorCore source) except -1:
    cdef int device = source.device_index
    cdef cudaStream_t stream = current_stream(device)
    # Waiting for a capturing stream is refused before anything is queued; a copy on a stream
    # that does not capture is legal during another capture (device.pyx, Note [Calls during
    # capture]).
    _device.refuse_on_capturing_stream("a copy to the host (item(), tolist(), cpu(), numpy())",
                                       stream, device)
    cdef int mode
    staged = source
    if source.dtype_object is not target.dtype_object or not is_contiguous(source):
        staged = new_empty(source.sizes, target.dtype_object, device)
        copy_on_device(staged, source)
    host = target.array if is_contiguous(target) and target.array.flags.c_contiguous else \
        np().empty(target.sizes, dtype=target.dtype_object.numpy_name)
    cdef uintptr_t host_pointer = host.__array_interface__["data"][0]
    cdef uintptr_t device_pointer = (<TensorCore>staged).data
    cdef size_t nbytes = host.nbytes
    # Pageable host memory: the copy completes before this returns, as PyTorch's does.
    with nogil:
        _device.enter_relaxed(&mode)
        try:
            errors.check(cyruntime.cudaMemcpyAsync(<void*>host_pointer, <void*>device_pointer,
                                                   nbytes, cudaMemcpyDeviceToHost, stream),
                         "cudaMemcpyAsync")
            errors.check(cyruntime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
        finally:
            _device.exit_relaxed(&mode)
    if host is not target.array:
        target.array[...] = host
    return 0


# --------------------------------------------------------------------------------------------
# The methods built on copies (api.yaml: Tensor)


cdef object copy_(TensorCore tensor, object src, bint non_blocking):
    return copy_named(tensor, src, non_blocking, "src")


cdef object fill_(TensorCore tensor, object value):
    if not is_scalar(value):
        raise TypeError(f"value must be a bool, int or float, got {type(value).__name__}")
    dtypes.check_scalar(value, tensor.dtype_object, "value")
    if tracked(tensor) and tensor.grad_node is not None:  # recorded: its gradient is zero
        tensor.c_check_rebase("fill_")
        filled = fill_(<TensorCore>new_empty(tensor.sizes, tensor.dtype_object,
                                             tensor.device_index), value)
        return rebased(tensor, recorded(filled, ops.OP_FILL, (tensor,)))
    tensor.c_mark_modified("fill_")
    if tensor.device_index == CPU:
        tensor.array[...] = stored(np().array(value), tensor.dtype_object)
        return tensor
    if is_contiguous(tensor):
        device_ops.fill(tensor.device_index, tensor.dtype_object, tensor.data, tensor.element_count,
                        device_ops.scalar_bits(tensor.dtype_object, value),
                        current_stream(tensor.device_index))
    else:
        filled = new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index)
        fill_(<TensorCore>filled, value)
        copy_on_device(tensor, filled)
    return tensor


cdef object zero_(TensorCore tensor):
    return fill_(tensor, 0)


cdef object clone(TensorCore tensor):
    result = new_empty(tensor.sizes, tensor.dtype_object, tensor.device_index)
    copy_into(result, tensor, False)
    return recorded(result, ops.OP_CLONE, (tensor,)) if tracked(tensor) else result


cdef object contiguous(TensorCore tensor):
    return tensor if is_contiguous(tensor) else clone(tensor)


cdef object to(TensorCore tensor, object device, object dtype, bint non_blocking, bint copy):
    return to_named(tensor, device, dtype, non_blocking, copy, "self")


cdef object cpu(TensorCore tensor):
    return to(tensor, "cpu", None, False, False)


cdef object cuda(TensorCore tensor, int device, bint non_blocking):
    return copied_to(tensor, device, tensor.dtype_object, non_blocking, False, "self")


cdef object pin_memory(TensorCore tensor):
    if tensor.device_index != CPU:
        raise RuntimeError(f"cannot pin a tensor on {device_text(tensor.device_index)}: only "
                           "CPU tensors can be pinned (pin_memory() page-locks host memory; "
                           "CUDA memory needs no pinning)")
    if is_pinned(tensor):
        return tensor
    if not _device.is_available():
        errors.raise_no_accelerator("pin_memory()")
    cdef TensorCore result = new_pinned(tensor.sizes, tensor.dtype_object)
    if tensor.element_count:
        result.array[...] = tensor.array  # the storage dtype on both sides: bits as they are
    # PyTorch's pin_memory is an identity for autograd (PinMemoryBackward0), like clone().
    return recorded(result, ops.OP_PIN_MEMORY, (tensor,)) if tracked(tensor) else result


cdef bint is_pinned(TensorCore tensor) except -1:
    if tensor.device_index != CPU or not _device.is_initialized():
        return False  # never initialises CUDA: nothing can be pinned before it is
    return page_locked(tensor, _device.current_device())


cdef object numpy_view(TensorCore tensor):
    if tensor.device_index != CPU:
        raise TypeError(f"numpy() needs a CPU tensor, this one is on "
                        f"{device_text(tensor.device_index)}; call .cpu() first")
    if tensor.dtype_object.name == "bfloat16":
        raise TypeError("numpy has no bfloat16; convert with .to(tensorplay.float32) first")
    return tensor.array


cdef object item(TensorCore tensor):
    if tensor.element_count != 1:
        raise ShapeError(f"item(): a Tensor with {tensor.element_count} elements cannot be "
                         f"converted to Scalar; item() needs a tensor with exactly one "
                         f"element (shape {tensor.sizes})")
    return host_values(tensor).reshape(()).item()


cdef object tolist(TensorCore tensor):
    return host_values(tensor).tolist()


cdef object reshape(TensorCore tensor, tuple shape):
    if is_contiguous(tensor):
        return tensor.c_view(shape)
    return (<TensorCore>clone(tensor)).c_view(shape)


cdef object flatten(TensorCore tensor, object start_dim, object end_dim):
    cdef int ndim = len(tensor.sizes)
    cdef int start = tensor.c_dim(start_dim, "start_dim"), end = tensor.c_dim(end_dim, "end_dim")
    if start > end:
        raise ShapeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if ndim == 0:
        return reshape(tensor, ((1,),))
    if start == end:  # nothing to join: the tensor itself, as PyTorch's flatten
        return tensor
    joined = 1
    for size in tensor.sizes[start:end + 1]:
        joined *= size
    return reshape(tensor, (tensor.sizes[:start] + (joined,) + tensor.sizes[end + 1:],))


# view_as(), reshape_as(), expand_as() and type_as(): the forms of view(), reshape(), expand()
# and to() that take their shape or dtype from another tensor, as PyTorch's.
cdef object view_as(TensorCore tensor, object other):
    return tensor.c_view((own_tensor_arg(other, "other").sizes,))


cdef object reshape_as(TensorCore tensor, object other):
    return reshape(tensor, (own_tensor_arg(other, "other").sizes,))


cdef object expand_as(TensorCore tensor, object other):
    return tensor.c_expand(own_tensor_arg(other, "other").sizes)


cdef object type_as(TensorCore tensor, object other):
    return to(tensor, None, own_tensor_arg(other, "other").dtype_object, False, False)


# PyTorch's legacy tensor type names (torch.FloatTensor...), by dtype name.
TYPE_NAMES = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
              "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
              "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
              "bool": "BoolTensor"}
DTYPES_OF_TYPE_NAMES = {name: dtype for dtype, name in TYPE_NAMES.items()}


cdef object type_of(TensorCore tensor, object dtype):
    """Tensor.type(), as PyTorch's: without dtype the type name ("tensorplay.FloatTensor",
    "tensorplay.cuda.FloatTensor"); with a dtype or a type name (tensorplay's or torch's, a
    cuda one moving the tensor to the current device) the tensor converted, itself when it
    is that already."""
    if dtype is None:
        where = "" if tensor.device_index == CPU else "cuda."
        return f"tensorplay.{where}{TYPE_NAMES[tensor.dtype_object.name]}"
    if isinstance(dtype, DtypeCore):
        return to(tensor, None, dtype, False, False)
    if isinstance(dtype, str):
        for library in ("tensorplay.", "torch."):
            if dtype.startswith(library):
                rest = dtype[len(library):]
                device = "cuda" if rest.startswith("cuda.") else "cpu"
                name = rest[len("cuda."):] if device == "cuda" else rest
                if name in DTYPES_OF_TYPE_NAMES:
                    return to(tensor, device, dtypes.named_dtype(DTYPES_OF_TYPE_NAMES[name]),
                              False, False)
        raise ValueError(f"invalid type: {errors.shown(dtype)} (dtype must be a dtype, or a "
                         "name such as 'tensorplay.FloatTensor' or 'torch.cuda.LongTensor')")
    raise TypeError(f"dtype must be a tensorplay dtype, a type name or None, got "
                    f"{errors.shown(dtype)}")


cdef bint equal(object input, object other) except -1:
    cdef TensorCore a = own_tensor_arg(input, "input")
    cdef TensorCore b = own_tensor_arg(other, "other")
    if a.sizes != b.sizes:  # no broadcasting, as PyTorch's
        return False
    return bool((a == b).all().item())  # promoted as ==; NaN is unequal to itself


# split(), chunk() and unbind(): views of consecutive pieces along dim, as PyTorch's, each the
# basic index of its piece (getitem), so each is recorded for autograd and none copies.
cdef tuple split(TensorCore tensor, object split_size_or_sections, object dim):
    cdef int axis = tensor.c_dim(dim, "dim")
    cdef bint sections = isinstance(split_size_or_sections, (tuple, list))
    if sections:
        sizes = tuple(split_size_or_sections)
        require_ints(sizes, "split: split_size_or_sections")
        for size in sizes:  # one no C integer holds is a wrong value, before the sum's check
            errors.int_arg(size, "split_size_or_sections", -(1 << 63), (1 << 63) - 1)
    else:
        require_ints((split_size_or_sections,), "split: split_size_or_sections")
    if not tensor.sizes:  # PyTorch's message
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    length = tensor.sizes[axis]
    if sections:
        if any(size < 0 for size in sizes) or sum(sizes) != length:
            raise ShapeError(f"split_with_sizes expects split_sizes to sum exactly to {length} "
                             f"(input tensor's size at dimension {axis}), but got "
                             f"split_sizes={list(sizes)}")
    else:
        step = split_size_or_sections
        if step < 0 or (step == 0 and length != 0) or step >= 1 << 63:
            raise ValueError(f"split: split_size_or_sections must be a positive int below "
                             f"2**63 (0 only for a dimension of size 0), got "
                             f"{errors.shown(step)}")
        # an empty dimension gives one empty piece, as PyTorch's (at least one split)
        sizes = tuple(min(step, length - start) for start in range(0, length, step)) \
            if length else (0,)
    pieces, start = [], 0
    for size in sizes:
        pieces.append(getitem(tensor, (slice(None),) * axis + (slice(start, start + size),)))
        start += size
    return tuple(pieces)


cdef tuple chunk(TensorCore tensor, long long chunks, object dim):
    # chunks is at least 1 (the wrapper's range check).
    cdef int axis = tensor.c_dim(dim, "dim")
    if not tensor.sizes:  # PyTorch's message
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    length = tensor.sizes[axis]
    if length == 0:  # chunks empty pieces, as PyTorch's (its chunk() special case)
        return split(tensor, (0,) * chunks, axis)
    return split(tensor, -(-length // chunks), axis)


cdef tuple unbind(TensorCore tensor, object dim):
    cdef int axis = dim_with_size(tensor, dim)
    return tuple(getitem(tensor, (slice(None),) * axis + (index,))
                 for index in range(tensor.sizes[axis]))


# narrow(), select(), movedim() and unflatten(): views, as PyTorch's, made by basic indexing,
# permute() and reshape(), so each is recorded for autograd and none copies (unflatten of a
# tensor that no view can reshape copies, as reshape does).
cdef object narrow(TensorCore tensor, object dim, long long start, long long length):
    # PyTorch's checks and messages, in Python integers (start + length may pass 2**63)
    cdef int axis = tensor.c_dim(dim, "dim")
    if not tensor.sizes:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    size = tensor.sizes[axis]
    first, count = start, length
    if not -size <= first <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {first})")
    if first < 0:
        first += size
    if first + count > size:
        raise IndexError(f"start ({first}) + length ({count}) exceeds dimension size "
                         f"({size}).")
    return getitem(tensor, (slice(None),) * axis + (slice(first, first + count),))


cdef object select(TensorCore tensor, object dim, long long index):
    cdef int axis = tensor.c_dim(dim, "dim")
    if not tensor.sizes:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    size = tensor.sizes[axis]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(tensor.sizes)} at dimension {axis}")
    return getitem(tensor, (slice(None),) * axis + (index,))


cdef object movedim(TensorCore tensor, object source, object destination):
    sources = tuple(source) if isinstance(source, (tuple, list)) else (source,)
    destinations = tuple(destination) if isinstance(destination, (tuple, list)) else \
        (destination,)
    require_ints(sources, "movedim: source")
    require_ints(destinations, "movedim: destination")
    if len(sources) != len(destinations):
        raise ValueError(f"movedim: Invalid source or destination dims: source ({list(sources)} "
                         f"dims) should contain the same number of dims as destination "
                         f"({list(destinations)} dims)")
    moved = [tensor.c_dim(dim, "source") for dim in sources]
    placed = [tensor.c_dim(dim, "destination") for dim in destinations]
    for dims, name in ((moved, "source"), (placed, "destination")):
        if len(set(dims)) != len(dims):
            raise ValueError(f"movedim: repeated dim in `{name}` ({list(dims)})")
    if not tensor.sizes:  # dims 0 and -1 of a 0-d tensor: nothing moves
        return tensor.c_permute(())
    order = [None] * len(tensor.sizes)
    for dim, at in zip(moved, placed):
        order[at] = dim
    rest = iter(dim for dim in range(len(tensor.sizes)) if dim not in moved)
    return tensor.c_permute(tuple(dim if dim is not None else next(rest) for dim in order))


cdef object unflatten(TensorCore tensor, object dim, object sizes):
    if not isinstance(sizes, (tuple, list)):
        raise TypeError(f"unflatten: sizes must be a tuple or list of ints, got "
                        f"{errors.shown(sizes)}")
    sizes = tuple(sizes)
    require_ints(sizes, "unflatten: sizes")
    cdef int axis = tensor.c_dim(dim, "dim")
    if not tensor.sizes:  # PyTorch's RuntimeError, around its IndexError's words
        raise RuntimeError(f"unflatten: Dimension specified as {dim} but tensor has no "
                           "dimensions")
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    product = 1
    for size in sizes:
        product *= size
    if -1 not in sizes and product != tensor.sizes[axis]:  # PyTorch's message
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({tensor.sizes[axis]}) in the input tensor")
    return tensor.reshape(tensor.sizes[:axis] + sizes + tensor.sizes[axis + 1:])


cdef object swapaxes(TensorCore tensor, object axis0, object axis1):
    # transpose() under numpy's names, which its errors name, both checked to be ints first
    require_ints((axis0,), "swapaxes: axis0")
    require_ints((axis1,), "swapaxes: axis1")
    return tensor.c_transpose(tensor.c_dim(axis0, "axis0"), tensor.c_dim(axis1, "axis1"))


# hstack() and vstack(), as numpy's and PyTorch's: cat() along the columns (the first
# dimension for 1-D tensors) or along rows of tensors seen as at least 2-D.
cdef object hstack(object tensors):
    tensors = tensor_sequence_arg(tensors, "hstack")
    one_dimensional = all(len((<TensorCore>each).sizes) <= 1 for each in tensors)
    return cat([each.reshape((1,)) if not (<TensorCore>each).sizes else each
                for each in tensors], 0 if one_dimensional else 1)


cdef object vstack(object tensors):
    tensors = tensor_sequence_arg(tensors, "vstack")
    return cat([each.reshape((1, (<TensorCore>each).element_count))
                if len((<TensorCore>each).sizes) < 2 else each for each in tensors], 0)


cdef list tensor_sequence_arg(object tensors, str name):
    if not isinstance(tensors, (tuple, list)) or not tensors:
        raise TypeError(f"{name}: tensors must be a non-empty tuple or list of tensors, got "
                        f"{errors.shown(tensors)}")
    return [own_tensor_arg(each, f"{name}: tensors[{index}]")
            for index, each in enumerate(tensors)]


cdef object tile_of(object input, object dims):
    return tile(own_tensor_arg(input, "input"), sequence_arg(dims, "tile: dims"))


cdef object tile(TensorCore tensor, tuple dims):
    """repeat() with the repeats padded with leading ones to the tensor's dimensions, as
    PyTorch's tile (fewer repeats than dimensions repeat the last ones). dims: ints, or (the
    method's arguments) one sequence of them."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    require_ints(dims, "tile: dims")
    for each in dims:
        errors.int_arg(each, "dims", 0, (1 << 63) - 1)
    return repeat(tensor, (1,) * (len(tensor.sizes) - len(dims)) + dims)


cdef object repeat(TensorCore tensor, tuple repeats):
    """The tensor tiled repeats[d] times along each dimension d, as PyTorch's repeat(): the
    sizes interleaved with ones, expanded to the repeats, then copied into their product's
    shape, so it is recorded as a reshape, an expand and a copy."""
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    require_ints(repeats, "repeat: sizes")
    for count in repeats:
        errors.int_arg(count, "sizes", -(1 << 63), (1 << 63) - 1)
    if len(repeats) < len(tensor.sizes):
        raise ShapeError(f"Number of dimensions of repeat dims ({len(repeats)}) can not be "
                         f"smaller than number of dimensions of tensor ({len(tensor.sizes)})")
    if any(count < 0 for count in repeats):
        raise ValueError(f"repeat: the repeats must not be negative, got {list(repeats)}")
    sizes = (1,) * (len(repeats) - len(tensor.sizes)) + tensor.sizes
    ones = tuple(value for size in sizes for value in (1, size))
    grown = tuple(value for count, size in zip(repeats, sizes) for value in (count, size))
    tiles = (<TensorCore>reshape(tensor, (ones,))).c_expand(grown)
    return reshape(<TensorCore>clone(<TensorCore>tiles),
                   (tuple(count * size for count, size in zip(repeats, sizes)),))


cdef object as_dtype(TensorCore tensor, str name):
    return to(tensor, None, dtypes.named_dtype(name), False, False)


cdef object as_float32(TensorCore tensor):
    return as_dtype(tensor, "float32")


cdef object as_float64(TensorCore tensor):
    return as_dtype(tensor, "float64")


cdef object as_float16(TensorCore tensor):
    return as_dtype(tensor, "float16")


cdef object as_bfloat16(TensorCore tensor):
    return as_dtype(tensor, "bfloat16")


cdef object as_int64(TensorCore tensor):
    return as_dtype(tensor, "int64")


cdef object as_int32(TensorCore tensor):
    return as_dtype(tensor, "int32")


cdef object as_bool(TensorCore tensor):
    return as_dtype(tensor, "bool")


cdef object one_value(TensorCore tensor):
    """The value of a one-element tensor, with PyTorch's error for any other count."""
    if tensor.element_count != 1:
        raise ValueError("only one element tensors can be converted to Python scalars (this "
                         f"tensor has {tensor.element_count}, shape {tensor.sizes})")
    return item(tensor)


cdef object python_float(TensorCore tensor):
    return float(one_value(tensor))


cdef object python_int(TensorCore tensor):
    return int(one_value(tensor))  # truncated toward zero, as PyTorch's


cdef object python_bool(TensorCore tensor):
    if tensor.element_count == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if tensor.element_count > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(item(tensor))


cdef object python_index(TensorCore tensor):
    if tensor.dtype_object.floating or tensor.element_count != 1:
        raise TypeError(f"only integer tensors of a single element can be converted to an "
                        f"index (this one is {tensor.dtype_object.name} of shape "
                        f"{tensor.sizes})")
    return int(item(tensor))


cdef list tensor_list(object tensors, str name):
    """The tensors of cat() or stack(): a non-empty tuple or list of tensors on one device (of
    any dtypes: the result has the one they promote to)."""
    if not isinstance(tensors, (tuple, list)):
        raise TypeError(f"{name}(): tensors must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__}")
    items = list(tensors)
    for index, value in enumerate(items):
        if not isinstance(value, TensorCore):
            raise TypeError(f"{name}(): expected Tensor as element {index} in tensors, but got "
                            f"{type(value).__name__}")
    if not items:
        raise ShapeError("cat(): expected a non-empty list of Tensors" if name == "cat"
                         else "stack expects a non-empty TensorList")
    for index in range(1, len(items)):
        check_device(items[0], items[index], f"{name}(): tensors 0 and {index}")
    return items


cdef object joined(list items, tuple sizes, list keys, int op, object state):
    """A new tensor of sizes with each item copied into its view of it (keys: each item's
    index into it, None for an item that takes no place), recorded as op with state when an
    item requires grad."""
    cdef TensorCore first = items[0]
    # PyTorch's type promotion over every tensor (torch.cat's result_type); copy_into converts
    # each into it, and the gradient of each comes back in its own dtype (engine.pyx, sum_to).
    cdef DtypeCore dtype = first.dtype_object
    for value in items:
        dtype = promote_types(dtype, (<TensorCore>value).dtype_object)
    cdef TensorCore output = new_empty(sizes, dtype, first.device_index)
    for value, key in zip(items, keys):
        if key is not None and (<TensorCore>value).element_count:
            copy_into(<TensorCore>output.c_getitem(key), <TensorCore>value, False, "tensors")
    if grad_enabled() and any((<TensorCore>value).grad_required for value in items):
        return recorded(output, op, tuple(items), (), state)
    return output


cdef int require_dim(object dim) except -1:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__} ({errors.shown(dim)})")
    if not -(1 << 63) <= dim < (1 << 63):  # as PyTorch's int64 argument
        raise ValueError(f"dim {errors.shown(dim)} does not fit in int64")
    return 0


cdef object cat(object tensors, object dim):
    require_dim(dim)  # every argument's type before any value
    items = tensor_list(tensors, "cat")
    for index, value in enumerate(items):
        if not (<TensorCore>value).sizes:
            raise ShapeError(f"zero-dimensional tensor (at position {index}) cannot be "
                             "concatenated")
    # PyTorch's legacy rule: a 1-D empty tensor joins tensors of any shape, adding nothing.
    shaped = [value for value in items if (<TensorCore>value).sizes != (0,)]
    cdef TensorCore reference = shaped[0] if shaped else items[0]
    cdef int at = reference.c_dim(dim)
    total = 0
    for index, value in enumerate(items):
        sizes = (<TensorCore>value).sizes
        if sizes == (0,) and value is not reference:
            continue
        if len(sizes) != len(reference.sizes):
            raise ShapeError(f"Tensors must have same number of dimensions: got "
                             f"{len(reference.sizes)} and {len(sizes)}")
        for axis in range(len(sizes)):
            if axis != at and sizes[axis] != reference.sizes[axis]:
                raise ShapeError(f"Sizes of tensors must match except in dimension {at}. "
                                 f"Expected size {reference.sizes[axis]} but got size "
                                 f"{sizes[axis]} for tensor number {index} in the list.")
        total += sizes[at]
    keys, lengths = [], []
    offset = 0
    for value in items:
        sizes = (<TensorCore>value).sizes
        if sizes == (0,) and value is not reference:
            keys.append(None)
            lengths.append(None)
            continue
        keys.append((slice(None),) * at + (slice(offset, offset + sizes[at]),))
        lengths.append(sizes[at])
        offset += sizes[at]
    sizes = reference.sizes[:at] + (total,) + reference.sizes[at + 1:]
    return joined(items, sizes, keys, ops.OP_CAT, (at, tuple(lengths)))


cdef object stack(object tensors, object dim):
    require_dim(dim)  # every argument's type before any value
    items = tensor_list(tensors, "stack")
    cdef TensorCore first = items[0]
    for index, value in enumerate(items):
        if (<TensorCore>value).sizes != first.sizes:
            raise ShapeError(f"stack expects each tensor to be equal size, but got "
                             f"{list(first.sizes)} at entry 0 and "
                             f"{list((<TensorCore>value).sizes)} at entry {index}")
    # dim names a dimension of the result, which has one more (as unsqueeze()'s).
    cdef int ndim = len(first.sizes)
    if not -ndim - 1 <= dim <= ndim:
        raise IndexError(f"dim: Dimension out of range (expected to be in range of "
                         f"[{-ndim - 1}, {ndim}], but got {errors.shown(dim)})")
    cdef int at = dim + ndim + 1 if dim < 0 else dim
    sizes = first.sizes[:at] + (len(items),) + first.sizes[at:]
    keys = [(slice(None),) * at + (index,) for index in range(len(items))]
    return joined(items, sizes, keys, ops.OP_STACK, at)


# Note [Boolean masks]
# x[mask] = value, for a bool tensor mask of x's leading shape, assigns the elements (or the
# sub-tensors over x's remaining dimensions) where mask is True, as PyTorch's: a Python scalar,
# or a tensor broadcasting to (count,) + x.shape[mask.dim():]. (x[mask] itself is selection.pyx's
# getitem, Note [Selection by value].) The count depends on the mask's values, so they are read
# on the host, as torch.nonzero synchronises with the device. During a CUDA graph capture that
# wait is forbidden (cudaStreamSynchronize on a capturing stream is
# cudaErrorStreamCaptureUnsupported, and PyTorch's nonzero raises "operation not permitted when
# stream is capturing"), so x[mask] and x[mask] = value are refused there before anything is
# queued (check_mask). On CUDA the assignment is computed on the host: the tensor is copied to
# the host, assigned and copied back. A mask among other items (x[mask, 0], x[:, mask]) stands
# for the coordinates of its True elements (selection.masks_as_indices), checked here against
# the view of the basic items from the dimension it starts at, and refused during a capture too.


cdef bint is_mask(object key):
    return isinstance(key, TensorCore) and (<TensorCore>key).dtype_object.code == CODE_BOOL


cdef int check_mask(TensorCore tensor, TensorCore mask, str name, int start=0) except -1:
    """mask against tensor (Note [Boolean masks]): on tensor's device or the CPU, of the shape
    of tensor's dimensions from start (its leading ones by default); refused on a capturing
    stream."""
    if mask.device_index != CPU and mask.device_index != tensor.device_index:
        raise ValueError(f"{name}: the mask is on {device_text(mask.device_index)} and the "
                         f"tensor on {device_text(tensor.device_index)}; a mask must be on the "
                         "tensor's device or the CPU")
    cdef int ndim = len(mask.sizes)
    for dim in range(ndim):
        if start + dim >= len(tensor.sizes) or mask.sizes[dim] != tensor.sizes[start + dim]:
            raise IndexError(f"The shape of the mask {list(mask.sizes)} at index {dim} does not "
                             f"match the shape of the indexed tensor {list(tensor.sizes)} at "
                             f"index {start + dim}")
    for device in (tensor.device_index, mask.device_index):
        if device != CPU:
            _device.refuse_on_capturing_stream(
                f"{name} with a boolean mask (its result's size depends on the mask's values, "
                "read on the host, as torch.nonzero)", <void*>current_stream(device), device)
    return 0


cdef object masked_setitem(TensorCore tensor, TensorCore mask, object value):
    check_mask(tensor, mask, "__setitem__")
    selection = host_values(mask)
    shape = (int(selection.sum()),) + tensor.sizes[len(mask.sizes):]
    if isinstance(value, TensorCore):
        broadcast_shape((<TensorCore>value).sizes, shape, "__setitem__")
        if (<TensorCore>value).device_index != CPU and \
                (<TensorCore>value).device_index != tensor.device_index:
            raise ValueError(f"__setitem__: the value is on "
                             f"{device_text((<TensorCore>value).device_index)} and the tensor "
                             f"on {device_text(tensor.device_index)}")
        values = np().broadcast_to((<TensorCore>cpu(<TensorCore>to(
            <TensorCore>(<TensorCore>value).c_detach(), None, tensor.dtype_object, False,
            False))).array, shape)
    elif is_scalar(value):
        dtypes.check_scalar(value, tensor.dtype_object, "value")
        values = stored(np().array(value), tensor.dtype_object)
    else:
        raise TypeError(f"__setitem__: value must be a tensor or a Python scalar, got "
                        f"{type(value).__name__}")
    tensor.c_mark_modified("__setitem__", value)
    if tensor.device_index == CPU:
        tensor.array[selection] = values
        return None
    host = <TensorCore>clone(<TensorCore>cpu(<TensorCore>tensor.c_detach()))
    host.array[selection] = values
    copy_into(tensor, host, False)
    return None


# Note [Selection by index]
# index_select(dim, index) and indexing by one integer tensor or list (x[index], x[:, index],
# x[0, ..., index, None]: the other items ints, slices, None and ...), as PyTorch's, copy the
# slices along dim that index names: the result has index's shape in place of dim. PyTorch
# applies the other items first (a view) and then the index at its dimension of that view,
# where numpy would move the index's dimensions first when an int stands apart from it. On the
# CPU numpy's take computes it, after the indices are checked (PyTorch's IndexError "index out
# of range in self"). On a device it is index.cu's gather over a
# contiguous copy, with no synchronisation, so a capture takes it; an index out of range
# there selects zeros (PyTorch's kernel asserts on the device, which loses the context).
# index_select takes indices from 0 (PyTorch's), x[index] wraps negative ones too (numpy's
# rule, PyTorch's advanced indexing). The gradient adds each slice of the output's gradient
# into the slice it came from (index_add_: scatter.cu's atomic adds, numpy's add.at), so
# repeated indices add up. Several indices at once (x[rows, cols]) select through the same
# gather, at each element's position in their dimensions flattened (linear_positions;
# docs/design.md, "Selection by index").


cdef TensorCore index_arg(TensorCore tensor, object index, str name, bint vector):
    """index: an int32 or int64 tensor (of at most one dimension where vector is set), on
    tensor's device."""
    cdef TensorCore chosen = own_tensor_arg(index, "index")
    if chosen.dtype_object.name not in ("int64", "int32"):
        raise DtypeError(f"{name}(): Expected dtype int32/int64 for index, got "
                         f"{chosen.dtype_object.name}")
    if vector and len(chosen.sizes) > 1:
        raise IndexError(f"{name}(): Index is supposed to be a vector, got "
                         f"{len(chosen.sizes)} dimensions")
    if chosen.device_index != tensor.device_index:
        raise ValueError(f"{name}(): index is on {device_text(chosen.device_index)} and the "
                         f"tensor on {device_text(tensor.device_index)}; they must be on one "
                         "device")
    return chosen


cdef object index_select(TensorCore tensor, object dim, object index):
    own_tensor_arg(index, "index")  # every argument's type before any value
    cdef int axis = tensor.c_dim(dim, "dim")
    cdef TensorCore chosen = index_arg(tensor, index, "index_select", True)
    if not tensor.sizes:  # a 0-d tensor as one of one element, as PyTorch's
        if chosen.element_count != 1:
            raise IndexError(f"index_select(): Index to scalar can have only 1 value, got "
                             f"{chosen.element_count} value(s)")
        return selected(<TensorCore>tensor.reshape((1,)), 0,
                        <TensorCore>chosen.reshape((1,)), False).reshape(())
    return selected(tensor, axis, chosen, False)


cdef object selected(TensorCore tensor, int axis, TensorCore index, bint wrap):
    """The slices of tensor along axis at index (1-D or 0-d, checked), negative indices
    counted from the end where wrap is set."""
    size = tensor.sizes[axis]
    count = index.element_count
    shape = tensor.sizes[:axis] + (count,) + tensor.sizes[axis + 1:]
    cdef TensorCore positions
    if tensor.device_index == CPU:
        indices = np().asarray(host_values(index), dtype=np().int64).reshape(count)
        low = -size if wrap else 0
        if count and (indices.min() < low or indices.max() >= size):
            raise IndexError("index out of range in self")
        if wrap:
            indices = np().where(indices < 0, indices + size, indices)
        positions = wrap_cpu(np().ascontiguousarray(indices), dtypes.named_dtype("int64"))
        output = wrap_cpu(np().ascontiguousarray(np().take(tensor.array, indices, axis=axis)),
                          tensor.dtype_object)
    else:
        positions = <TensorCore>to(index, None, dtypes.named_dtype("int64"), False, False)
        if wrap:
            positions = positions + (positions < 0) * size
        positions = <TensorCore>contiguous(positions)
        source = <TensorCore>contiguous(tensor)
        output = new_empty(shape, tensor.dtype_object, tensor.device_index)
        device_ops.index_select(tensor.device_index, tensor.dtype_object,
                                (<TensorCore>source).data, positions.data,
                                (<TensorCore>output).data, prod(tensor.sizes[:axis]), size,
                                prod(tensor.sizes[axis + 1:]), count,
                                current_stream(tensor.device_index))
    if tracked(tensor):
        return recorded(output, ops.OP_INDEX_SELECT, (tensor,), (positions,), axis)
    return output


cdef int index_add_(TensorCore target, int dim, TensorCore index, TensorCore source) except -1:
    """target's slices along dim at index (int64, in range) += source's, in order; target
    contiguous and floating point, source of target's dtype and device."""
    if target.device_index == CPU:
        # in float32 for the 16-bit floats (computable), rounded once when stored back
        sums = np().array(computable(target), dtype=np().float32) \
            if target.dtype_object.itemsize == 2 else target.array
        np().add.at(sums, (slice(None),) * dim + (host_values(index),), computable(source))
        if sums is not target.array:
            target.array[...] = stored(sums, target.dtype_object)
        return 0
    source = <TensorCore>contiguous(source)
    device_ops.index_add(target.device_index, target.dtype_object, source.data, index.data,
                         target.data, prod(target.sizes[:dim]), target.sizes[dim],
                         prod(target.sizes[dim + 1:]), index.element_count,
                         current_stream(target.device_index))
    return 0


cdef tuple integer_index(TensorCore tensor, object key):
    """(view, axes, indices) where key selects by integer tensors or lists of ints, every other
    item an int, a slice, None or one ...: view is tensor indexed by those others (each index's
    place a full slice), axes the indices' dimensions in it (PyTorch's order: the basic items
    first, each index in its place). Else None; a list is copied to the device once it is
    known to be an index."""
    items = key if isinstance(key, tuple) else (key,)
    found = []
    consumed = 0  # the items that take a dimension of tensor
    for position, item in enumerate(items):
        # [] too: an empty int64 index, as PyTorch reads it
        integer_list = isinstance(item, list) and all(
            isinstance(value, int) and not isinstance(value, bool) for value in item)
        integer_tensor = isinstance(item, TensorCore) and \
            (<TensorCore>item).dtype_object.code != CODE_BOOL and \
            not (<TensorCore>item).dtype_object.floating
        if integer_list or integer_tensor:
            found.append(position)
        elif item is Ellipsis or item is None:
            continue
        elif isinstance(item, bool) or not isinstance(item, (int, slice)):
            return None
        consumed += 1
    if not found:
        return None
    # c_getitem refuses a second ... and too many indices; one index alone on a tensor of
    # dimensions needs no view.
    view = tensor if len(items) == 1 and tensor.sizes else tensor.c_getitem(tuple(
        slice(None) if position in found else item for position, item in enumerate(items)))
    axes = []
    axis = 0  # the dimensions the items before each index leave in the view
    for position, item in enumerate(items):
        if position in found:
            axes.append(axis)
            axis += 1
        elif item is Ellipsis:
            axis += len(tensor.sizes) - consumed
        elif item is None or isinstance(item, slice):
            axis += 1
    indices = [from_host_list(items[position], tensor.device_index)
               if isinstance(items[position], list) else items[position] for position in found]
    return (view, tuple(axes), indices)


cdef tuple linear_positions(TensorCore view, tuple axes, list indices, str name):
    """(positions, shape, total, place) of several indices into view's axes (integer_index's):
    the indices broadcast together to shape, and the int64 vector of the elements' positions in
    those axes flattened in order, of total positions, negative indices counted from the end;
    place is where shape goes among view's other dimensions in the result (placement()).
    An element out of range is PyTorch's IndexError on the CPU; on a device its position is
    total, past the end, which index_select reads as zeros and a scatter skips (reading the
    indices back would break a capture)."""
    chosen = [index_arg(view, index, name, False) for index in indices]
    shape = ()
    try:
        for index in chosen:
            shape = broadcast_shape(shape, (<TensorCore>index).sizes, name)
    except ShapeError:  # PyTorch's IndexError, in its words
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list((<TensorCore>index).sizes))
                                                    for index in chosen)) from None
    positions = valid = None
    total = 1
    for axis, index in zip(axes, chosen):
        size = view.sizes[axis]
        if view.device_index == CPU and (<TensorCore>index).element_count:
            values = np().asarray(host_values(index)).reshape(-1)
            outside = np().flatnonzero((values < -size) | (values >= size))
            if outside.size:  # PyTorch's IndexError, in its words
                raise IndexError(f"index {values[outside[0]]} is out of bounds for dimension "
                                 f"{axis} with size {size}")
        wrapped = to(index, None, dtypes.named_dtype("int64"), False, False)
        wrapped = wrapped + (wrapped < 0) * size
        if view.device_index != CPU:
            inside = (wrapped >= 0) & (wrapped < size)
            valid = inside if valid is None else valid & inside
        positions = wrapped if positions is None else positions * size + wrapped
        total *= size
    if valid is not None:
        positions = positions.masked_fill(~valid, total)
    count = prod(shape)
    positions = reshape(<TensorCore>contiguous(<TensorCore>(<TensorCore>positions).c_expand(
        (shape,))), ((count,),))
    return positions, shape, total, placement(axes, chosen)


cdef int placement(tuple axes, list chosen) except -1:
    """Where several indices' broadcast shape goes among the other dimensions of the result:
    PyTorch takes a 0-d integer tensor as an int, a select that removes its dimension first,
    and puts the others' shape in their place where they follow one another in what is left
    (its hasContiguousSubspace), else first."""
    removed = [axis for axis, index in zip(axes, chosen) if not (<TensorCore>index).sizes]
    kept = [axis - sum(1 for gone in removed if gone < axis)
            for axis, index in zip(axes, chosen) if (<TensorCore>index).sizes]
    if kept and all(later == earlier + 1 for earlier, later in zip(kept, kept[1:])):
        return kept[0]
    return 0


cdef object several_indices(TensorCore view, tuple axes, list indices):
    """view[...] at several integer indices (integer_index's): the elements they name together,
    the indices' broadcast shape where placement() puts it (PyTorch's advanced indexing); the
    gradient flows through index_select."""
    positions, shape, total, place = linear_positions(view, axes, indices, "__getitem__")
    front = movedim(view, axes, tuple(range(len(axes))))
    rest = (<TensorCore>front).sizes[len(axes):]
    rows = selected(<TensorCore>reshape(<TensorCore>front, ((total,) + rest,)), 0,
                    <TensorCore>positions, False)
    result = (<TensorCore>rows).reshape(shape + rest)
    if place and shape:
        result = movedim(<TensorCore>result, tuple(range(len(shape))),
                         tuple(range(place, place + len(shape))))
    return result


cdef bint holds_sequence(object key):
    if isinstance(key, (TensorCore, list)):
        return True
    return isinstance(key, tuple) and any(isinstance(item, (TensorCore, list)) for item in key)


cdef object from_host_list(list values, int device):
    host = wrap_cpu(np().array(values, dtype=np().int64), dtypes.named_dtype("int64"))
    return host if device == CPU else to(<TensorCore>host, device_text(device), None, False,
                                         False)


cdef object getitem(TensorCore tensor, object key):
    """tensor[key] for every key but a boolean mask (selection.getitem's)."""
    # basic keys (ints, slices, None, ...) skip the search for an integer index
    found = integer_index(tensor, key) if holds_sequence(key) else None
    cdef TensorCore view
    if found is not None:
        view, axes, indices = found
        if len(axes) > 1:
            return several_indices(view, axes, indices)
        axis, index = axes[0], indices[0]
        chosen = index_arg(view, index, "__getitem__", False)
        if len(chosen.sizes) == 1:
            return selected(view, axis, chosen, True)
        rows = selected(view, axis, <TensorCore>chosen.reshape((chosen.element_count,)), True)
        # index's shape in place of the dimension (none for a 0-d index, as an int)
        return rows.reshape(view.sizes[:axis] + chosen.sizes + view.sizes[axis + 1:])
    basic = tensor.c_getitem(key)
    # PyTorch takes a True or False in the key as a mask of one element (boolToIndexingTensor):
    # its result is a copy, not a view. x[True] = value still writes x (setitem).
    if any(isinstance(item, bool) for item in (key if isinstance(key, tuple) else (key,))):
        return clone(<TensorCore>basic)
    return basic


cdef object setitem(TensorCore tensor, object key, object value):
    """tensor[key] = value for every key but an integer index (selection.setitem's)."""
    return setitem_with(tensor, key, value, assign)


cdef object setitem_with(TensorCore tensor, object key, object value, Assignment assignment):
    """tensor[key] = value: value's type, then the recorded path (a copy assigned under
    no_grad, whose values and history tensor takes in), else assignment(tensor, key, value)."""
    cdef unsigned long long capture_id
    # value's type first, before this tensor's history or the selection are looked at (the
    # schema types it); its value is checked by the copy or the fill it feeds.
    if not (isinstance(value, TensorCore) or is_scalar(value)):
        raise TypeError(f"value must be a tensor or a bool, int or float, got "
                        f"{type(value).__name__}")
    if tracked(tensor, value) and tensor.dtype_object.floating:
        # Recorded (PyTorch's CopySlices, for a tensor that is not a view): a copy with the
        # selection assigned, which this tensor takes in, values and history.
        tensor.c_check_rebase("__setitem__")
        if isinstance(value, TensorCore) and (<TensorCore>value).device_index == CPU and \
                tensor.device_index != CPU and (<TensorCore>value).element_count:
            # Before the copy of this tensor is made (Note [Host copies during capture]).
            host_copy_capturing(value, tensor.device_index, tensor.dtype_object, "value",
                                current_stream(tensor.device_index), &capture_id)
        previous = grad_enabled()
        set_grad_enabled(False)
        try:
            result = <TensorCore>clone(tensor)
            assignment(result, key, value)
        finally:
            set_grad_enabled(previous)
        rebased(tensor, recorded(result, ops.OP_SETITEM, (tensor, value), (), key))
        return None
    return assignment(tensor, key, value)


cdef object assign(TensorCore tensor, object key, object value):
    """tensor[key] = value for a basic key or a boolean mask, not recorded."""
    if is_mask(key):
        return masked_setitem(tensor, key, value)
    target = <TensorCore>tensor.c_getitem(key)
    if isinstance(value, TensorCore):
        copy_named(target, value, False, "value")
    else:
        fill_(target, value)
    return None


cdef object delitem(TensorCore tensor, object key):
    raise TypeError("Tensor does not support deleting items")  # as PyTorch's


cdef object iterate(TensorCore tensor):
    """iter(tensor): its views along the first dimension, as PyTorch's (iter(unbind(0))). Without
    it Python would iterate through __getitem__ until an IndexError, and a 0-d tensor would
    iterate as empty instead of being refused."""
    if not tensor.sizes:
        raise TypeError("iteration over a 0-d tensor")  # PyTorch's
    return iter(unbind(tensor, 0))


cdef object rebased(TensorCore tensor, object result):
    """tensor, with result's values copied in (a counted in-place change) and result's
    history taken over, as PyTorch's rebase_history: a differentiable view's through its base
    (Note [Views and in-place changes], engine.pyx)."""
    cdef TensorCore value = result, base
    previous = grad_enabled()
    set_grad_enabled(False)
    try:
        copy_(tensor, value, False)
    finally:
        set_grad_enabled(previous)
    if value.grad_node is None:
        return tensor
    if tensor.view_base is None:
        tensor.grad_required = True
        tensor.grad_node = value.grad_node
        tensor.output_number = value.output_number
        return tensor
    # The base takes the history of its old values with the view's replaced by result
    # (CopySlices); the view, that of its place in the base (AsStrided).
    base = tensor.view_base
    state = view_state(tensor)
    recorded(base, ops.OP_COPY_SLICES, (base, value), (), state)
    tensor.view_version = tensor.version.value
    return recorded(tensor, ops.OP_AS_STRIDED, (base,), (), state)


# --------------------------------------------------------------------------------------------
# The values on the host


cdef object host_values(TensorCore tensor):
    """The values as numpy computes with them, copied to the host if need be, off the tape."""
    if tensor.device_index == CPU:
        return computable(tensor)
    return computable(cpu(<TensorCore>tensor.c_detach()))


def _repr_values(TensorCore tensor):
    """tensor_repr.py's view of host_values()."""
    return host_values(tensor)


cdef str repr_text(TensorCore tensor):
    """PyTorch's text (tensor_repr.py, Note [Tensor repr])."""
    return tensor_repr(tensor, None if tensor.device_index == CPU else
                       device_text(tensor.device_index), tensor.dtype_object.repr_text(),
                       _repr_values)
