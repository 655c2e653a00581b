# cython: language_level=3, auto_pickle=False
"""CUDAGraph.stage_and_launch()'s copies: every pair checked, then copied in as few launches as
possible (graph.pyx replays the graph after them).

Pairs that are contiguous, of one dtype and on the graph's device are raw byte copies, done by
kernels/staging.cu, STAGED_COPIES pairs per launch; the others take copy_()'s path (dtype
conversion, strides, another device). Every pair is checked before anything is copied, so a bad
pair loses nothing.
"""
from libcpp.algorithm cimport sort
from libcpp.utility cimport pair
from libcpp.vector cimport vector
from libc.stdint cimport uintptr_t

from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.tensor cimport copies, core as tensor, factories
from tensorplay._runtime.devices.device cimport MAX_DEVICES
from tensorplay._runtime.kernels.nvrtc cimport STAGED_COPIES
from tensorplay._runtime.tensor.core cimport TensorCore


# stage_and_launch() copies every pair at once (one kernel for the raw pairs), so no static
# buffer may share memory with another pair's buffers, nor partly with its own input: the result
# would depend on the order of the copies. A span is the bytes a tensor reaches, keyed by device
# and start so that one sort puts overlapping spans next to each other.
ctypedef pair[pair[int, uintptr_t], pair[uintptr_t, Py_ssize_t]] MemorySpan


cdef inline bint _same_tensor(TensorCore static, TensorCore fresh):
    return (static is fresh
            or (static.data == fresh.data and static.device_index == fresh.device_index
                and static.dtype_object is fresh.dtype_object
                and static.element_strides == fresh.element_strides))


cdef MemorySpan _span_of(TensorCore value, bint contiguous, Py_ssize_t index, bint static):
    """(device, start), (end, tag): tag is 2 * pair index, plus 1 for the static buffer."""
    cdef MemorySpan span
    cdef size_t itemsize = value.dtype_object.itemsize
    span.first.first = value.device_index
    span.first.second = value.data
    if contiguous:
        span.second.first = value.data + <size_t>value.element_count * itemsize
    else:
        span.second.first = value.data + tensor.reach_bytes(value.sizes, value.element_strides,
                                                            itemsize)
    span.second.second = 2 * index + static
    return span


cdef int _refuse_overlaps(vector[MemorySpan]& spans) except -1:
    """A ValueError naming two buffers that overlap where at least one is written."""
    if spans.size() < 2:
        return 0
    sort(spans.begin(), spans.end())
    cdef size_t i, j
    cdef Py_ssize_t first, second
    for i in range(spans.size()):
        j = i + 1
        while (j < spans.size() and spans[j].first.first == spans[i].first.first
               and spans[j].first.second < spans[i].second.first):
            first, second = spans[i].second.second, spans[j].second.second
            if (first | second) & 1:
                names = sorted(f"{'static_inputs' if tag & 1 else 'inputs'}[{tag >> 1}]"
                               for tag in (first, second))
                raise ValueError(
                    f"{names[0]} and {names[1]} overlap in memory; stage_and_launch() copies "
                    "every pair at once, so a static buffer may share memory with no other "
                    "static buffer or input (a pair that is the same tensor on both sides is "
                    "skipped, as copy_() skips it). Nothing was copied")
            j += 1
    return 0


# stage_and_launch()'s raw copies: one launch of kernels/staging.cu moves up to STAGED_COPIES
# pairs (nvrtc.pxd declares the number for both sides), each pair given enough blocks that a
# thread moves about STAGE_LOADS 16-byte words of the largest pair.
cdef enum:
    STAGE_THREADS = 256
    STAGE_LOADS = 4
    STAGE_MAX_BLOCKS = 1024

ctypedef struct StagedCopies:
    unsigned long long target[STAGED_COPIES]
    unsigned long long source[STAGED_COPIES]
    unsigned long long nbytes[STAGED_COPIES]


ctypedef struct RawCopy:
    unsigned long long target
    unsigned long long source
    unsigned long long nbytes


# stage_copies per device, fetched once: get_kernel's lookup builds a key per call. (A forked
# child of a process that initialised CUDA cannot use CUDA at all: device.pyx, Note [Fork
# safety]; so these handles never reach a child that could launch.)
cdef CUfunction _stage_function[MAX_DEVICES]


cdef int _stage_raw(int device, vector[RawCopy]& pairs, cudaStream_t stream) except -1:
    """Copy each pair's source bytes onto its target on stream: STAGED_COPIES pairs per
    launch."""
    if _stage_function[device] == NULL:
        _stage_function[device] = kernels.get_kernel(device, "staging", "stage_copies", "")
    cdef StagedCopies copies
    cdef unsigned int blocks_per_copy
    cdef void* arguments[2]
    arguments[0] = &copies
    arguments[1] = &blocks_per_copy
    cdef size_t count = pairs.size()
    cdef size_t first, index, chunk
    cdef unsigned long long largest
    for first in range(0, count, STAGED_COPIES):
        chunk = min(<size_t>STAGED_COPIES, count - first)
        largest = 0
        for index in range(chunk):
            copies.target[index] = pairs[first + index].target
            copies.source[index] = pairs[first + index].source
            copies.nbytes[index] = pairs[first + index].nbytes
            largest = max(largest, copies.nbytes[index])
        blocks_per_copy = <unsigned int>min(
            STAGE_MAX_BLOCKS, max(1, largest // (16 * STAGE_THREADS * STAGE_LOADS)))
        kernels.launch(device, _stage_function[device], <unsigned int>chunk * blocks_per_copy,
                       STAGE_THREADS, 0, stream, arguments)
    return 0


cdef int stage(int device, object static_inputs, object inputs, cudaStream_t stream) except -1:
    """Copy inputs[i] onto static_inputs[i] for every i, on stream (two lists of equal length,
    checked by the caller); a ValueError or TypeError naming the pair before any copy."""
    cdef vector[RawCopy] raw  # contiguous, same dtype and device: bytes as they are
    cdef list full = []       # static, fresh, ...: pairs that need copy_()'s semantics
    cdef RawCopy copy
    cdef TensorCore static, fresh
    cdef bint static_contiguous, fresh_contiguous
    cdef Py_ssize_t index
    cdef vector[MemorySpan] spans
    cdef unsigned long long capture_id
    for index in range(len(inputs)):
        static = factories.tensor_arg(static_inputs[index], "static_inputs", index)
        fresh = factories.tensor_arg(inputs[index], "inputs", index)
        if static.device_index != device:
            raise ValueError(f"static_inputs[{index}] is on "
                             f"{tensor.device_text(static.device_index)}, but the graph was "
                             f"captured on cuda:{device}; static inputs are the buffers "
                             f"the graph reads")
        if static.sizes is not fresh.sizes and static.sizes != fresh.sizes:
            raise ValueError(f"inputs[{index}] has shape {fresh.sizes}, but "
                             f"static_inputs[{index}] has shape {static.sizes}; each input "
                             f"must have its static buffer's shape")
        if static.element_count == 0 or _same_tensor(static, fresh):
            continue  # nothing to copy, as copy_() of a tensor onto itself
        if fresh.device_index == tensor.CPU:
            # On a capturing stream only pinned inputs that need no conversion can be copied
            # (copies.pyx, Note [Host copies during capture]): refused here, naming the pair,
            # before any pair is copied.
            copies.host_copy_capturing(fresh, device, static.dtype_object, f"inputs[{index}]",
                                       stream, &capture_id)
        static_contiguous = tensor.is_contiguous(static)
        fresh_contiguous = tensor.is_contiguous(fresh)
        spans.push_back(_span_of(static, static_contiguous, index, True))
        spans.push_back(_span_of(fresh, fresh_contiguous, index, False))
        if (fresh.device_index == static.device_index
                and fresh.dtype_object is static.dtype_object
                and static_contiguous and fresh_contiguous):
            copy.target = static.data
            copy.source = fresh.data
            copy.nbytes = static.element_count * static.dtype_object.itemsize
            raw.push_back(copy)
        else:
            full.append(static)
            full.append(fresh)
    _refuse_overlaps(spans)
    for index in range(0, len(full), 2):  # dtype conversion, strides, other devices
        copies.copy_(<TensorCore>full[index], full[index + 1], True)
    if raw.size():
        _stage_raw(device, raw, stream)
    return 0
