# cython: language_level=3
"""Kernel launches over raw device memory, one function per kernel of runtime/kernels/.

Each source is instantiated per element type by a prelude of typedefs in front of common.cu
(kernels.get_kernel compiles and caches each instance once; the elementwise kernels are then read
from a C table, elementwise_kernel). Launches use 256-thread blocks and grid-stride loops, so any
element count fits a bounded grid.
"""
import os
import struct

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_CheckExact
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact
from libc.math cimport isinf
from libc.stdint cimport int64_t, uintptr_t
from libc.string cimport memcpy, memset

from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.devices.device cimport MAX_DEVICES
from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.kernels cimport nvrtc as kernels, ops
from tensorplay._runtime.kernels.nvrtc cimport MAX_DIMS, SORT_CHUNK, THREADS
from tensorplay._runtime.kernels.nvrtc import read_kernel_source
from tensorplay._runtime.base.dtypes cimport DTYPE_COUNT, DtypeCore
from tensorplay._runtime.base.dtypes import float32_to_bfloat16_bits

cdef enum:
    MAX_BLOCKS = 65536          # with grid-stride loops, enough blocks to fill any GPU
    REDUCE_BLOCKS = 1024        # partial results of a reduction, combined by one block

cdef struct Layout:             # matches Layout in kernels/common.cu
    long long sizes[MAX_DIMS]
    long long strides[MAX_DIMS]
    int ndim

cdef str _common_source = None
cdef dict _preludes = {}


cdef str prelude(str typedefs):
    """common.cu followed by the typedefs that instantiate a source."""
    global _common_source
    cached = _preludes.get(typedefs)
    if cached is None:
        if _common_source is None:
            _common_source = read_kernel_source("common")
        cached = _preludes[typedefs] = _common_source + "\n" + typedefs
    return cached


cdef inline CUfunction kernel(int device, str source, str function, str typedefs) except NULL:
    return kernels.get_kernel(device, source, function, prelude(typedefs))


# The kernels of elementwise.cu that take one scalar_t, as ElementwiseKernel numbers them.
cdef enum ElementwiseKernel:
    EW_FILL
    EW_BINARY
    EW_BINARY_VECTOR4
    EW_BINARY_STRIDED
    EW_BINARY_SCALAR
    EW_COMPARE
    EW_COMPARE_STRIDED
    EW_COMPARE_SCALAR
    EW_UNARY
    EW_ADD_SCALED
    EW_CLAMP
    EW_CLAMP_STRIDED
    EW_WHERE
    EW_WHERE_STRIDED
    EW_SGD_STEP
    EW_BINARY_ROWS_VECTOR4
    EW_ARANGE_INTEGRAL
    EW_ARANGE_FLOATING
    EW_COUNT

# Their names in elementwise.cu, in ElementwiseKernel's order.
cdef tuple ELEMENTWISE_NAMES = (
    "fill", "binary", "binary_vector4", "binary_strided", "binary_scalar", "compare",
    "compare_strided", "compare_scalar", "unary", "add_scaled", "clamp", "clamp_strided", "where",
    "where_strided", "sgd_step", "binary_rows_vector4", "arange_integral", "arange_floating")
if len(ELEMENTWISE_NAMES) != EW_COUNT:
    raise RuntimeError(f"device_ops.pyx names {len(ELEMENTWISE_NAMES)} elementwise kernels for "
                       f"the {EW_COUNT} of ElementwiseKernel")

# Every eager elementwise operation looks its kernel up: from this table, by device, kernel and
# dtype code, after the first time, which goes through kernel() (nvrtc's cache, keyed by strings:
# a tuple, a dict lookup and the typedef's text per call). NULL: not looked up yet. The handles
# belong to the process's contexts, so a forked child forgets them, as nvrtc.pyx's cache does.
cdef CUfunction _elementwise[MAX_DEVICES][<int>EW_COUNT][DTYPE_COUNT]


def _forget_elementwise_kernels():
    memset(_elementwise, 0, sizeof(_elementwise))


os.register_at_fork(after_in_child=_forget_elementwise_kernels)


cdef CUfunction elementwise_kernel(int device, ElementwiseKernel which,
                                   DtypeCore dtype) except NULL:
    """elementwise.cu's kernel `which`, instantiated for dtype, on device."""
    cdef CUfunction function
    cdef bint cached = 0 <= device < MAX_DEVICES and 0 <= dtype.code < DTYPE_COUNT
    if cached:
        function = _elementwise[device][<int>which][dtype.code]
        if function != NULL:
            return function
    function = kernel(device, "elementwise", ELEMENTWISE_NAMES[<int>which],
                      scalar_typedef(dtype))
    check_packed(function, which, dtype)
    if cached:
        _elementwise[device][<int>which][dtype.code] = function
    return function


# The parameters of the quick paths' kernels, packed as their images lay them out (Note
# [Packed parameters] in nvrtc.pyx): launched with the size up to the end of the last field.
cdef struct PairParameters:     # binary and binary_vector4 (a, b, out, count, op)
    uintptr_t a
    uintptr_t b
    uintptr_t out
    int64_t count
    int op

cdef struct ScalarParameters:   # binary_scalar (a, scalar, out, count, op, reverse)
    uintptr_t a
    unsigned char scalar[8]     # an acc_t (put_accumulator): a float in its first 4 bytes
    uintptr_t out
    int64_t count
    int op
    int reverse

cdef struct UnaryParameters:    # unary (a, out, count, op)
    uintptr_t a
    uintptr_t out
    int64_t count
    int op

cdef enum:                      # the end of each one's last field (its sizeof rounds up)
    PAIR_BYTES = 36
    SCALAR_BYTES = 40
    UNARY_BYTES = 28


cdef inline size_t field_offset(const void* field, const void* start) noexcept:
    return <size_t>(<const char*>field - <const char*>start)


cdef int check_packed(CUfunction function, ElementwiseKernel which, DtypeCore dtype) except -1:
    """A newly loaded kernel that a struct above packs: its layout checked against its image."""
    cdef PairParameters pair
    cdef ScalarParameters scalar
    cdef UnaryParameters unary
    cdef size_t offsets[6]
    cdef size_t sizes[6]
    cdef size_t count, end
    if which == EW_BINARY or which == EW_BINARY_VECTOR4:
        offsets[:5] = [0, field_offset(&pair.b, &pair), field_offset(&pair.out, &pair),
                       field_offset(&pair.count, &pair), field_offset(&pair.op, &pair)]
        sizes[:5] = [8, 8, 8, 8, 4]
        count, end = 5, PAIR_BYTES
    elif which == EW_BINARY_SCALAR:
        offsets[:6] = [0, field_offset(&scalar.scalar, &scalar),
                       field_offset(&scalar.out, &scalar), field_offset(&scalar.count, &scalar),
                       field_offset(&scalar.op, &scalar), field_offset(&scalar.reverse, &scalar)]
        # acc_t (common.cu): float for the floats of 4 bytes or fewer, else 8 bytes
        sizes[:6] = [8, 4 if dtype.floating and dtype.itemsize < 8 else 8, 8, 8, 4, 4]
        count, end = 6, SCALAR_BYTES
    elif which == EW_UNARY:
        offsets[:4] = [0, field_offset(&unary.out, &unary), field_offset(&unary.count, &unary),
                       field_offset(&unary.op, &unary)]
        sizes[:4] = [8, 8, 8, 4]
        count, end = 4, UNARY_BYTES
    else:
        return 0
    return kernels.check_packed_layout(function, ELEMENTWISE_NAMES[<int>which], offsets, sizes,
                                       count, end)


cdef inline unsigned int blocks_for(int64_t count) noexcept nogil:
    cdef int64_t blocks = (count + THREADS - 1) // THREADS
    return <unsigned int>(blocks if blocks < MAX_BLOCKS else MAX_BLOCKS)


cdef inline str scalar_typedef(DtypeCore dtype):
    return f"typedef {dtype.kernel_type} scalar_t;\n"


# The accumulation type of each element type (accumulate<> in common.cu), for scalars passed by
# value: float for 16-bit floats and float, double for double, long long otherwise.
cdef int put_accumulator(unsigned char* slot, DtypeCore dtype, object value) except -1:
    """Store value in slot (a kernel parameter of 8 bytes) as dtype's accumulation type."""
    cdef double number
    cdef float single
    cdef long long integer = 0
    cdef int overflow = 0
    cdef bint exact_float = PyFloat_CheckExact(value), exact_int = PyLong_CheckExact(value)
    # A float, or an int of 64 bits, the operators' usual scalars, in C: the bytes struct.pack
    # below makes of them. It takes everything else, and raises its errors (a float too large
    # for a float slot, an int beyond int64).
    if exact_int:
        integer = PyLong_AsLongLongAndOverflow(value, &overflow)
    if exact_int and not overflow and not dtype.floating:
        memcpy(slot, &integer, 8)
        return 0
    if dtype.floating and (exact_float or (exact_int and not overflow)):
        # An int is rounded to nearest, as float(value) rounds it.
        number = PyFloat_AS_DOUBLE(value) if exact_float else <double>integer
        if dtype.itemsize == 8:
            memcpy(slot, &number, 8)
            return 0
        single = <float>number
        if not isinf(single) or isinf(number):
            memcpy(slot, &single, 4)
            return 0
    if dtype.floating:
        packed = struct.pack("<d" if dtype.itemsize == 8 else "<f", float(value))
    else:
        packed = struct.pack("<q", int(value))
    memcpy(slot, <const char*>packed, len(packed))
    return 0


cdef bytes scalar_bits(DtypeCore dtype, object value):
    """The bytes of value stored as dtype (what a kernel parameter of scalar_t holds), which
    dtypes.check_scalar has found it fits."""
    cdef double number
    cdef float single
    cdef long long integer
    cdef int overflow = 0
    # The usual scalars in C, as numpy below stores them (which costs about a microsecond, a
    # quarter of a small fill_()): a float into float32 or float64, an int into an integer
    # dtype (little-endian: its low bytes).
    if PyFloat_CheckExact(value) and dtype.floating and dtype.itemsize >= 4:
        number = PyFloat_AS_DOUBLE(value)
        if dtype.itemsize == 8:
            return PyBytes_FromStringAndSize(<char*>&number, 8)
        single = <float>number
        return PyBytes_FromStringAndSize(<char*>&single, 4)
    if PyLong_CheckExact(value) and not dtype.floating and dtype.name != "bool":
        integer = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow:
            return PyBytes_FromStringAndSize(<char*>&integer, dtype.itemsize)
    import numpy
    if dtype.name == "bfloat16":
        return float32_to_bfloat16_bits(numpy.array([value], dtype=numpy.float32)).tobytes()
    return numpy.array([value]).astype(dtype.numpy_name).tobytes()


cdef int put_scalar(unsigned char* slot, DtypeCore dtype, object value) except -1:
    """Store value in slot (a kernel parameter of 8 bytes) as dtype stores it (scalar_bits)."""
    cdef bytes packed = scalar_bits(dtype, value)
    memcpy(slot, <const char*>packed, len(packed))
    return 0


cdef int fill(int device, DtypeCore dtype, uintptr_t out, int64_t count, bytes value,
              cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_FILL, dtype)
    cdef unsigned char value_bytes[8]
    memset(value_bytes, 0, 8)
    memcpy(value_bytes, <const char*>value, len(value))
    cdef void* arguments[3]
    arguments[0] = &out
    arguments[1] = &count
    arguments[2] = value_bytes
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int arange(int device, DtypeCore dtype, uintptr_t out, int64_t count, object start,
                object step, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef long long integral_start, integral_step
    cdef double first, second
    cdef ElementwiseKernel which
    cdef void* arguments[4]
    arguments[0] = &out
    arguments[1] = &count
    if isinstance(start, int) and isinstance(step, int):
        integral_start, integral_step = start, step
        arguments[2], arguments[3] = &integral_start, &integral_step
        which = EW_ARANGE_INTEGRAL
    else:
        # Python's arithmetic, as numpy's arange computes its second element.
        first, second = float(start), float(start + step)
        arguments[2], arguments[3] = &first, &second
        which = EW_ARANGE_FLOATING
    return kernels.launch(device, elementwise_kernel(device, which, dtype), blocks_for(count),
                          THREADS, 0, stream, arguments)


cdef int binary(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, uintptr_t out,
                int64_t count, int op, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef uintptr_t vector_bytes = 4 * dtype.itemsize
    cdef bint vectorised = count % 4 == 0 and (a | b | out) % vector_bytes == 0
    cdef CUfunction function = elementwise_kernel(
        device, EW_BINARY_VECTOR4 if vectorised else EW_BINARY, dtype)
    cdef PairParameters parameters = PairParameters(
        a=a, b=b, out=out, count=count // 4 if vectorised else count, op=op)
    return kernels.launch_packed(device, function, blocks_for(parameters.count), THREADS, 0,
                                 stream, &parameters, PAIR_BYTES)


cdef bint binary_rows(int device, DtypeCore dtype, uintptr_t a, uintptr_t row, uintptr_t out,
                      int64_t count, int64_t row_length, int op, bint reverse,
                      cudaStream_t stream) except -1:
    cdef uintptr_t vector_bytes = 4 * dtype.itemsize
    if count == 0 or row_length % 4 != 0 or (a | row | out) % vector_bytes != 0:
        return False
    cdef CUfunction function = elementwise_kernel(device, EW_BINARY_ROWS_VECTOR4, dtype)
    cdef int64_t items = count // 4
    cdef int64_t row_vectors = row_length // 4
    cdef int reverse_flag = reverse
    cdef void* arguments[7]
    arguments[0] = &a
    arguments[1] = &row
    arguments[2] = &out
    arguments[3] = &items
    arguments[4] = &row_vectors
    arguments[5] = &op
    arguments[6] = &reverse_flag
    kernels.launch(device, function, blocks_for(items), THREADS, 0, stream, arguments)
    return True


cdef int64_t count_of(tuple sizes):
    cdef int64_t count = 1
    for size in sizes:
        count *= size
    return count


cdef int _strided_pair(int device, DtypeCore dtype, ElementwiseKernel which, uintptr_t a,
                       tuple a_strides, uintptr_t b, tuple b_strides, uintptr_t out, tuple sizes,
                       int op, cudaStream_t stream) except -1:
    """One elementwise kernel of two operands read through their (broadcast) strides."""
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, which, dtype)
    cdef Layout a_layout = layout_of(sizes, a_strides)
    cdef Layout b_layout = layout_of(sizes, b_strides)
    cdef void* arguments[7]
    arguments[0] = &a
    arguments[1] = &a_layout
    arguments[2] = &b
    arguments[3] = &b_layout
    arguments[4] = &out
    arguments[5] = &count
    arguments[6] = &op
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int binary_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t b,
                        tuple b_strides, uintptr_t out, tuple sizes, int op,
                        cudaStream_t stream) except -1:
    return _strided_pair(device, dtype, EW_BINARY_STRIDED, a, a_strides, b, b_strides, out, sizes,
                         op, stream)


cdef int compare_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t b,
                         tuple b_strides, uintptr_t out, tuple sizes, int op,
                         cudaStream_t stream) except -1:
    return _strided_pair(device, dtype, EW_COMPARE_STRIDED, a, a_strides, b, b_strides, out,
                         sizes, op, stream)


cdef int binary_scalar(int device, DtypeCore dtype, uintptr_t a, object scalar, uintptr_t out,
                       int64_t count, int op, bint reverse, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_BINARY_SCALAR, dtype)
    cdef ScalarParameters parameters
    put_accumulator(parameters.scalar, dtype, scalar)
    parameters.a = a
    parameters.out = out
    parameters.count = count
    parameters.op = op
    parameters.reverse = reverse
    return kernels.launch_packed(device, function, blocks_for(count), THREADS, 0, stream,
                                 &parameters, SCALAR_BYTES)


cdef int compare(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, uintptr_t out,
                 int64_t count, int op, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_COMPARE, dtype)
    cdef void* arguments[5]
    arguments[0] = &a
    arguments[1] = &b
    arguments[2] = &out
    arguments[3] = &count
    arguments[4] = &op
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int compare_scalar(int device, DtypeCore dtype, uintptr_t a, object scalar, uintptr_t out,
                        int64_t count, int op, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_COMPARE_SCALAR, dtype)
    cdef unsigned char scalar_bytes[8]
    put_accumulator(scalar_bytes, dtype, scalar)
    cdef void* arguments[5]
    arguments[0] = &a
    arguments[1] = scalar_bytes
    arguments[2] = &out
    arguments[3] = &count
    arguments[4] = &op
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int unary(int device, DtypeCore dtype, uintptr_t a, uintptr_t out, int64_t count, int op,
               cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_UNARY, dtype)
    cdef UnaryParameters parameters = UnaryParameters(a=a, out=out, count=count, op=op)
    return kernels.launch_packed(device, function, blocks_for(count), THREADS, 0, stream,
                                 &parameters, UNARY_BYTES)


cdef Layout layout_of(tuple sizes, tuple strides) except *:
    cdef Layout layout
    cdef int dim
    if len(sizes) > MAX_DIMS:
        raise ValueError(f"tensors have at most {MAX_DIMS} dimensions, got {len(sizes)}")
    layout.ndim = len(sizes)
    for dim in range(layout.ndim):
        layout.sizes[dim] = sizes[dim]
        layout.strides[dim] = strides[dim]
    return layout


cdef int copy_strided(int device, DtypeCore source_dtype, uintptr_t source, tuple sizes,
                      tuple source_strides, DtypeCore target_dtype, uintptr_t target,
                      tuple target_strides, cudaStream_t stream) except -1:
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef CUfunction function = kernel(
        device, "copy", "copy_strided",
        f"typedef {source_dtype.kernel_type} scalar_t;\n"
        f"typedef {target_dtype.kernel_type} target_t;\n")
    cdef Layout source_layout = layout_of(sizes, source_strides)
    cdef Layout target_layout = layout_of(sizes, target_strides)
    cdef void* arguments[5]
    arguments[0] = &source
    arguments[1] = &source_layout
    arguments[2] = &target
    arguments[3] = &target_layout
    arguments[4] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int reduce(int device, DtypeCore dtype, uintptr_t a, int64_t count, int op,
                DtypeCore result_dtype, uintptr_t out, double divisor,
                cudaStream_t stream) except -1:
    typedefs = (f"typedef {dtype.kernel_type} scalar_t;\n"
                f"typedef {result_dtype.kernel_type} result_t;\n")
    cdef CUfunction partial = kernel(device, "reduce", "reduce_partial", typedefs)
    cdef CUfunction final = kernel(device, "reduce", "reduce_final", typedefs)
    cdef int blocks = max(1, min(blocks_for(count), REDUCE_BLOCKS))  # an empty sum is 0
    # One 8-byte accumulator per block; stream-ordered, so it may be released right after use.
    cdef uintptr_t partials = <uintptr_t>allocator.allocate(device, blocks * 8, stream)
    cdef void* arguments[5]
    try:
        arguments[0] = &a
        arguments[1] = &count
        arguments[2] = &partials
        arguments[3] = &op
        kernels.launch(device, partial, blocks, THREADS, 0, stream, arguments)
        arguments[0] = &partials
        arguments[1] = &blocks
        arguments[2] = &out
        arguments[3] = &op
        arguments[4] = &divisor
        kernels.launch(device, final, 1, THREADS, 0, stream, arguments)
    finally:
        allocator.release(<void*>partials)
    return 0


cdef int reduce_dims(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                     tuple kept_strides, tuple reduced_sizes, tuple reduced_strides,
                     DtypeCore result_dtype, uintptr_t out, double divisor,
                     cudaStream_t stream) except -1:
    cdef int64_t out_count = count_of(kept_sizes)
    cdef int64_t reduced_count = count_of(reduced_sizes)
    if out_count == 0:
        return 0
    cdef CUfunction function = kernel(device, "reduce", "reduce_dims",
                                      f"typedef {dtype.kernel_type} scalar_t;\n"
                                      f"typedef {result_dtype.kernel_type} result_t;\n")
    cdef Layout kept = layout_of(kept_sizes, kept_strides)
    cdef Layout reduced = layout_of(reduced_sizes, reduced_strides)
    cdef unsigned int blocks = <unsigned int>min(out_count, MAX_BLOCKS)
    cdef void* arguments[7]
    arguments[0] = &a
    arguments[1] = &kept
    arguments[2] = &reduced
    arguments[3] = &reduced_count
    arguments[4] = &out
    arguments[5] = &out_count
    arguments[6] = &divisor
    return kernels.launch(device, function, blocks, THREADS, 0, stream, arguments)


# --------------------------------------------------------------------------------------------
# The tensor methods of PyTorch beyond the operators (elementwise.pyx): add/sub with alpha, clamp,
# where.


cdef int add_scaled(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, object alpha,
                    uintptr_t out, int64_t count, cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_ADD_SCALED, dtype)
    cdef unsigned char alpha_bytes[8]
    put_accumulator(alpha_bytes, dtype, alpha)
    cdef void* arguments[5]
    arguments[0] = &a
    arguments[1] = &b
    arguments[2] = alpha_bytes
    arguments[3] = &out
    arguments[4] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int sgd_step(int device, DtypeCore dtype, uintptr_t param, uintptr_t grad, uintptr_t buffer,
                  object lr, object momentum, object weight_decay, int64_t count,
                  cudaStream_t stream) except -1:
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_SGD_STEP, dtype)
    cdef unsigned char lr_bytes[8]
    cdef unsigned char momentum_bytes[8]
    cdef unsigned char decay_bytes[8]
    put_accumulator(lr_bytes, dtype, lr)
    put_accumulator(momentum_bytes, dtype, momentum)
    put_accumulator(decay_bytes, dtype, weight_decay)
    cdef void* arguments[7]
    arguments[0] = &param
    arguments[1] = &grad
    arguments[2] = &buffer
    arguments[3] = lr_bytes
    arguments[4] = momentum_bytes
    arguments[5] = decay_bytes
    arguments[6] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef enum:
    CLAMP_LOW = 1               # ClampBounds in kernels/elementwise.cu
    CLAMP_HIGH = 2


cdef int clamp(int device, DtypeCore dtype, uintptr_t a, uintptr_t low, uintptr_t high,
               object low_scalar, object high_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1:
    """A bound is the tensor at low/high when that is not 0, else the scalar unless None."""
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_CLAMP, dtype)
    cdef int bounds = (CLAMP_LOW if low or low_scalar is not None else 0) | \
        (CLAMP_HIGH if high or high_scalar is not None else 0)
    cdef unsigned char low_bytes[8]
    cdef unsigned char high_bytes[8]
    put_accumulator(low_bytes, dtype, 0 if low_scalar is None else low_scalar)
    put_accumulator(high_bytes, dtype, 0 if high_scalar is None else high_scalar)
    cdef void* arguments[8]
    arguments[0] = &a
    arguments[1] = &low
    arguments[2] = &high
    arguments[3] = low_bytes
    arguments[4] = high_bytes
    arguments[5] = &bounds
    arguments[6] = &out
    arguments[7] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int clamp_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t low,
                       tuple low_strides, uintptr_t high, tuple high_strides, object low_scalar,
                       object high_scalar, uintptr_t out, tuple sizes,
                       cudaStream_t stream) except -1:
    """As clamp(), with a, low and high read through their strides."""
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_CLAMP_STRIDED, dtype)
    cdef int bounds = (CLAMP_LOW if low or low_scalar is not None else 0) | \
        (CLAMP_HIGH if high or high_scalar is not None else 0)
    cdef Layout a_layout = layout_of(sizes, a_strides)
    cdef Layout low_layout = layout_of(sizes, low_strides)
    cdef Layout high_layout = layout_of(sizes, high_strides)
    cdef unsigned char low_bytes[8]
    cdef unsigned char high_bytes[8]
    put_accumulator(low_bytes, dtype, 0 if low_scalar is None else low_scalar)
    put_accumulator(high_bytes, dtype, 0 if high_scalar is None else high_scalar)
    cdef void* arguments[11]
    arguments[0] = &a
    arguments[1] = &a_layout
    arguments[2] = &low
    arguments[3] = &low_layout
    arguments[4] = &high
    arguments[5] = &high_layout
    arguments[6] = low_bytes
    arguments[7] = high_bytes
    arguments[8] = &bounds
    arguments[9] = &out
    arguments[10] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int where(int device, DtypeCore dtype, uintptr_t condition, uintptr_t a, uintptr_t b,
               object a_scalar, object b_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1:
    """An operand is the tensor at a/b when that is not 0, else its scalar."""
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_WHERE, dtype)
    cdef unsigned char a_bytes[8]
    cdef unsigned char b_bytes[8]
    put_scalar(a_bytes, dtype, 0 if a_scalar is None else a_scalar)
    put_scalar(b_bytes, dtype, 0 if b_scalar is None else b_scalar)
    cdef void* arguments[7]
    arguments[0] = &condition
    arguments[1] = &a
    arguments[2] = &b
    arguments[3] = a_bytes
    arguments[4] = b_bytes
    arguments[5] = &out
    arguments[6] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int where_strided(int device, DtypeCore dtype, uintptr_t condition,
                       tuple condition_strides, uintptr_t a, tuple a_strides, uintptr_t b,
                       tuple b_strides, object a_scalar, object b_scalar, uintptr_t out,
                       tuple sizes, cudaStream_t stream) except -1:
    """An operand is the tensor at a/b when that is not 0 (its strides then apply), else its
    scalar."""
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef CUfunction function = elementwise_kernel(device, EW_WHERE_STRIDED, dtype)
    cdef Layout condition_layout = layout_of(sizes, condition_strides)
    cdef Layout a_layout = layout_of(sizes, a_strides)
    cdef Layout b_layout = layout_of(sizes, b_strides)
    cdef unsigned char a_bytes[8]
    cdef unsigned char b_bytes[8]
    put_scalar(a_bytes, dtype, 0 if a_scalar is None else a_scalar)
    put_scalar(b_bytes, dtype, 0 if b_scalar is None else b_scalar)
    cdef void* arguments[10]
    arguments[0] = &condition
    arguments[1] = &condition_layout
    arguments[2] = &a
    arguments[3] = &a_layout
    arguments[4] = &b
    arguments[5] = &b_layout
    arguments[6] = a_bytes
    arguments[7] = b_bytes
    arguments[8] = &out
    arguments[9] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


# --------------------------------------------------------------------------------------------
# Operands of mixed dtypes (elementwise.cu's PROMOTED_OP instances): one kernel per op, operand
# dtypes, common dtype and result dtype, compiled on first use (nvrtc's caches keep it).


cdef str promoted_typedefs(int op, DtypeCore left, DtypeCore right, DtypeCore common,
                           DtypeCore target):
    return (f"#define PROMOTED_OP {op}\ntypedef {left.kernel_type} left_t;\n"
            f"typedef {right.kernel_type} right_t;\ntypedef {common.kernel_type} scalar_t;\n"
            f"typedef {target.kernel_type} target_t;\n")


cdef int promoted_binary(int device, int op, DtypeCore left, uintptr_t a, tuple a_strides,
                         DtypeCore right, uintptr_t b, tuple b_strides, DtypeCore common,
                         DtypeCore target, uintptr_t out, tuple sizes,
                         cudaStream_t stream) except -1:
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef bint comparison = ops.kernel_of(op) == ops.KERNEL_COMPARE
    cdef CUfunction function = kernel(
        device, "elementwise", "promoted_compare" if comparison else "promoted_binary",
        promoted_typedefs(op, left, right, common, target))
    cdef Layout a_layout = layout_of(sizes, a_strides)
    cdef Layout b_layout = layout_of(sizes, b_strides)
    cdef void* arguments[6]
    arguments[0] = &a
    arguments[1] = &a_layout
    arguments[2] = &b
    arguments[3] = &b_layout
    arguments[4] = &out
    arguments[5] = &count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int promoted_binary_scalar(int device, int op, DtypeCore left, uintptr_t a,
                                tuple a_strides, object scalar, bint reverse, DtypeCore common,
                                DtypeCore target, uintptr_t out, tuple sizes,
                                cudaStream_t stream) except -1:
    cdef int64_t count = count_of(sizes)
    if count == 0:
        return 0
    cdef bint comparison = ops.kernel_of(op) == ops.KERNEL_COMPARE
    # right_t is unused by the scalar kernels; the common dtype stands in for it.
    cdef CUfunction function = kernel(
        device, "elementwise", "promoted_compare_scalar" if comparison
        else "promoted_binary_scalar", promoted_typedefs(op, left, common, common, target))
    cdef Layout a_layout = layout_of(sizes, a_strides)
    cdef unsigned char scalar_bytes[8]
    put_accumulator(scalar_bytes, common, scalar)
    cdef int reverse_flag = reverse
    cdef void* arguments[6]
    arguments[0] = &a
    arguments[1] = &a_layout
    arguments[2] = scalar_bytes
    arguments[3] = &out
    arguments[4] = &count
    arguments[5] = &reverse_flag
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int select_dim(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                    tuple kept_strides, int64_t length, int64_t stride, uintptr_t values,
                    uintptr_t indices, int op, cudaStream_t stream) except -1:
    cdef int64_t count = count_of(kept_sizes)
    if count == 0:
        return 0
    cdef CUfunction function = kernel(device, "reduce", "select_dim",
                                      f"typedef {dtype.kernel_type} scalar_t;\n"
                                      f"typedef {dtype.kernel_type} result_t;\n")
    cdef Layout kept = layout_of(kept_sizes, kept_strides)
    cdef void* arguments[8]
    arguments[0] = &a
    arguments[1] = &kept
    arguments[2] = &length
    arguments[3] = &stride
    arguments[4] = &values
    arguments[5] = &indices
    arguments[6] = &count
    arguments[7] = &op
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef CUfunction softmax_kernel(int device, DtypeCore dtype, str name) except NULL:
    # The prelude select_dim's: the softmax and nll_loss kernels of reduce.cu keep the input's
    # dtype.
    return kernel(device, "reduce", name, f"typedef {dtype.kernel_type} scalar_t;\n"
                                          f"typedef {dtype.kernel_type} result_t;\n")


cdef unsigned int row_blocks(int64_t outer, int64_t inner) noexcept:
    """A block per row of softmax_dim's, up to MAX_BLOCKS (the blocks stride over the rest)."""
    cdef int64_t rows = outer * inner
    return <unsigned int>(rows if rows < MAX_BLOCKS else MAX_BLOCKS)


cdef int softmax_dim(int device, DtypeCore dtype, uintptr_t a, uintptr_t out, int64_t outer,
                     int64_t length, int64_t inner, bint take_log, cudaStream_t stream) except -1:
    if outer * length * inner == 0:
        return 0
    cdef CUfunction function = softmax_kernel(device, dtype, "softmax_dim")
    cdef int log_flag = take_log
    cdef void* arguments[6]
    arguments[0] = &a
    arguments[1] = &out
    arguments[2] = &outer
    arguments[3] = &length
    arguments[4] = &inner
    arguments[5] = &log_flag
    return kernels.launch(device, function, row_blocks(outer, inner), THREADS, 0, stream,
                          arguments)


cdef int softmax_backward_dim(int device, DtypeCore dtype, uintptr_t output, uintptr_t grad,
                              uintptr_t out, int64_t outer, int64_t length, int64_t inner,
                              bint take_log, cudaStream_t stream) except -1:
    if outer * length * inner == 0:
        return 0
    cdef CUfunction function = softmax_kernel(device, dtype, "softmax_backward_dim")
    cdef int log_flag = take_log
    cdef void* arguments[7]
    arguments[0] = &output
    arguments[1] = &grad
    arguments[2] = &out
    arguments[3] = &outer
    arguments[4] = &length
    arguments[5] = &inner
    arguments[6] = &log_flag
    return kernels.launch(device, function, row_blocks(outer, inner), THREADS, 0, stream,
                          arguments)


cdef int nll_loss(int device, DtypeCore dtype, uintptr_t logp, uintptr_t target, uintptr_t weight,
                  uintptr_t out, uintptr_t total, int64_t outer, int64_t classes, int64_t inner,
                  int64_t ignore_index, int reduction, cudaStream_t stream) except -1:
    cdef int64_t rows = outer * inner
    if rows == 0 and reduction == 0:
        return 0  # a sum or mean of no row still writes its 0 (or NaN) and total weight
    cdef CUfunction function = softmax_kernel(device, dtype, "nll_loss_rows")
    cdef void* arguments[10]
    arguments[0] = &logp
    arguments[1] = &target
    arguments[2] = &weight
    arguments[3] = &out
    arguments[4] = &total
    arguments[5] = &outer
    arguments[6] = &classes
    arguments[7] = &inner
    arguments[8] = &ignore_index
    arguments[9] = &reduction
    return kernels.launch(device, function, blocks_for(rows) if reduction == 0 else 1, THREADS,
                          0, stream, arguments)


cdef int nll_loss_backward(int device, DtypeCore dtype, uintptr_t target, uintptr_t weight,
                           uintptr_t grad, uintptr_t total, uintptr_t out, int64_t outer,
                           int64_t classes, int64_t inner, int64_t ignore_index, int reduction,
                           cudaStream_t stream) except -1:
    cdef int64_t count = outer * classes * inner
    if count == 0:
        return 0
    cdef CUfunction function = softmax_kernel(device, dtype, "nll_loss_backward_rows")
    cdef void* arguments[10]
    arguments[0] = &target
    arguments[1] = &weight
    arguments[2] = &grad
    arguments[3] = &total
    arguments[4] = &out
    arguments[5] = &outer
    arguments[6] = &classes
    arguments[7] = &inner
    arguments[8] = &ignore_index
    arguments[9] = &reduction
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int scan_dim(int device, DtypeCore dtype, DtypeCore result, uintptr_t a, tuple kept_sizes,
                  tuple kept_strides, int64_t length, int64_t stride, uintptr_t out,
                  tuple out_kept_strides, int64_t out_stride, bint product, bint reverse,
                  cudaStream_t stream) except -1:
    cdef int64_t rows = count_of(kept_sizes)
    if rows == 0 or length == 0:
        return 0
    # Few long rows get a block each (1024 threads), the others a warp each (scan.cu).
    cdef bint blocks = length >= 1024 and rows <= 1024
    cdef CUfunction function = kernel(device, "scan", "scan_dim_blocks" if blocks else "scan_dim",
                                      f"typedef {dtype.kernel_type} scalar_t;\n"
                                      f"typedef {result.kernel_type} result_t;\n")
    cdef Layout kept = layout_of(kept_sizes, kept_strides)
    cdef Layout out_kept = layout_of(kept_sizes, out_kept_strides)
    cdef int product_flag = product, reverse_flag = reverse
    cdef void* arguments[10]
    arguments[0] = &a
    arguments[1] = &kept
    arguments[2] = &length
    arguments[3] = &stride
    arguments[4] = &out
    arguments[5] = &out_kept
    arguments[6] = &out_stride
    arguments[7] = &rows
    arguments[8] = &product_flag
    arguments[9] = &reverse_flag
    if blocks:
        return kernels.launch(device, function, <unsigned int>rows, 1024, 0, stream, arguments)
    return kernels.launch(device, function, blocks_for(rows * 32), THREADS, 0, stream,
                          arguments)


cdef int sort_dim(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                  tuple kept_strides, int64_t length, int64_t stride, uintptr_t values,
                  uintptr_t indices, tuple out_kept_strides, int64_t out_stride,
                  bint descending, cudaStream_t stream) except -1:
    cdef int64_t rows = count_of(kept_sizes)
    if rows == 0 or length == 0:
        return 0
    typedefs = scalar_typedef(dtype)
    cdef Layout kept = layout_of(kept_sizes, kept_strides)
    cdef Layout out_kept = layout_of(kept_sizes, out_kept_strides)
    cdef int descending_flag = descending
    # The network's stages (sort.cu): chunks of SORT_CHUNK sorted, then each larger stage's
    # steps that span chunks, one launch each, and the rest of it chunk by chunk.
    cdef int64_t padded = 1, chunk, size, half, pairs
    cdef int pairs_log2 = 0
    while padded < length:
        padded *= 2
        pairs_log2 += 1
    pairs_log2 -= 1
    pairs = padded // 2
    chunk = padded if padded < SORT_CHUNK else SORT_CHUNK
    cdef int64_t chunk_blocks = rows * ((length + chunk - 1) // chunk)
    cdef unsigned int grid = <unsigned int>(chunk_blocks if chunk_blocks < MAX_BLOCKS
                                            else MAX_BLOCKS)
    cdef unsigned int threads = <unsigned int>(chunk // 2 if chunk >= 64 else 32)
    cdef void* arguments[11]
    arguments[0] = &a
    arguments[1] = &kept
    arguments[2] = &length
    arguments[3] = &stride
    arguments[4] = &values
    arguments[5] = &indices
    arguments[6] = &out_kept
    arguments[7] = &out_stride
    arguments[8] = &rows
    arguments[9] = &descending_flag
    kernels.launch(device, kernel(device, "sort", "sort_chunks", typedefs), grid, threads, 0,
                   stream, arguments)
    cdef CUfunction step = NULL, merge = NULL
    size = 2 * chunk
    while size <= padded:
        if step == NULL:
            step = kernel(device, "sort", "sort_merge_step", typedefs)
            merge = kernel(device, "sort", "sort_merge_chunks", typedefs)
        half = size // 2
        while half >= chunk:
            arguments[0] = &values
            arguments[1] = &indices
            arguments[2] = &out_kept
            arguments[3] = &out_stride
            arguments[4] = &length
            arguments[5] = &rows
            arguments[6] = &pairs
            arguments[7] = &pairs_log2
            arguments[8] = &size
            arguments[9] = &half
            arguments[10] = &descending_flag
            kernels.launch(device, step, blocks_for(rows * pairs), THREADS, 0, stream,
                           arguments)
            half //= 2
        arguments[0] = &values
        arguments[1] = &indices
        arguments[2] = &out_kept
        arguments[3] = &out_stride
        arguments[4] = &length
        arguments[5] = &rows
        arguments[6] = &size
        arguments[7] = &descending_flag
        kernels.launch(device, merge, grid, threads, 0, stream, arguments)
        size *= 2
    return 0


cdef int index_select(int device, DtypeCore dtype, uintptr_t source, uintptr_t index,
                      uintptr_t out, int64_t outer, int64_t size, int64_t inner,
                      int64_t index_count, cudaStream_t stream) except -1:
    return _index_kernel(device, dtype, "index", "index_select", source, index, out, outer,
                         size, inner, index_count, stream)


cdef int index_add(int device, DtypeCore dtype, uintptr_t source, uintptr_t index,
                   uintptr_t target, int64_t outer, int64_t size, int64_t inner,
                   int64_t index_count, cudaStream_t stream) except -1:
    return _index_kernel(device, dtype, "scatter", "index_add", source, index, target, outer,
                         size, inner, index_count, stream)


cdef int gather(int device, DtypeCore dtype, uintptr_t source, tuple source_sizes,
                tuple source_strides, uintptr_t index, tuple index_sizes, tuple index_strides,
                uintptr_t out, int axis, cudaStream_t stream) except -1:
    cdef int64_t count = count_of(index_sizes)
    if count == 0:
        return 0
    cdef CUfunction function = kernel(device, "index", "gather", scalar_typedef(dtype))
    cdef Layout source_layout = layout_of(source_sizes, source_strides)
    cdef Layout index_layout = layout_of(index_sizes, index_strides)
    cdef void* arguments[7]
    arguments[0] = &source
    arguments[1] = &source_layout
    arguments[2] = &index
    arguments[3] = &index_layout
    arguments[4] = &out
    arguments[5] = &count
    arguments[6] = &axis
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int scatter(int device, DtypeCore dtype, bint add, uintptr_t source, tuple source_strides,
                 uintptr_t index, tuple index_sizes, tuple index_strides, uintptr_t target,
                 tuple target_sizes, tuple target_strides, int axis,
                 cudaStream_t stream) except -1:
    cdef int64_t count = count_of(index_sizes)
    if count == 0:
        return 0
    cdef CUfunction function = kernel(device, "scatter" if add else "index",
                                      "scatter_add" if add else "scatter", scalar_typedef(dtype))
    cdef Layout source_layout = layout_of(index_sizes, source_strides)
    cdef Layout index_layout = layout_of(index_sizes, index_strides)
    cdef Layout target_layout = layout_of(target_sizes, target_strides)
    cdef void* arguments[8]
    arguments[0] = &source
    arguments[1] = &source_layout
    arguments[2] = &index
    arguments[3] = &index_layout
    arguments[4] = &target
    arguments[5] = &target_layout
    arguments[6] = &count
    arguments[7] = &axis
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)


cdef int _index_kernel(int device, DtypeCore dtype, str source_name, str function_name,
                       uintptr_t source, uintptr_t index, uintptr_t other, int64_t outer,
                       int64_t size, int64_t inner, int64_t index_count,
                       cudaStream_t stream) except -1:
    # the element count of an existing tensor (out, or source), so the product fits
    cdef int64_t count = outer * index_count * inner
    if count == 0:
        return 0
    cdef CUfunction function = kernel(device, source_name, function_name,
                                      f"typedef {dtype.kernel_type} scalar_t;\n")
    cdef void* arguments[7]
    arguments[0] = &source
    arguments[1] = &index
    arguments[2] = &other
    arguments[3] = &outer
    arguments[4] = &size
    arguments[5] = &inner
    arguments[6] = &index_count
    return kernels.launch(device, function, blocks_for(count), THREADS, 0, stream, arguments)
