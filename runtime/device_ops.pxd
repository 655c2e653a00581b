# Kernel launches over raw device memory (device_ops.pyx). Pointers are device addresses;
# every launch goes to the given stream.
from libc.stdint cimport int64_t, uintptr_t
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.dtypes cimport DtypeCore

cdef enum:
    OP_ADD = 0
    OP_SUB = 1
    OP_MUL = 2
    OP_DIV = 3
    OP_DIV_TRUNC = 4             # torch.div(rounding_mode="trunc")
    OP_DIV_FLOOR = 5             # torch.div(rounding_mode="floor")
    OP_EQ = 0
    OP_NE = 1
    OP_LT = 2
    OP_LE = 3
    OP_GT = 4
    OP_GE = 5
    OP_NEG = 0
    OP_ABS = 1
    OP_RELU = 2
    OP_SIN = 3
    OP_COS = 4
    OP_EXP = 5
    OP_SQRT = 6
    OP_SUM = 0
    OP_MAX = 1
    OP_MIN = 2

cdef int fill(int device, DtypeCore dtype, uintptr_t out, int64_t count, bytes value,
              cudaStream_t stream) except -1
cdef int binary(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, uintptr_t out,
                int64_t count, int op, cudaStream_t stream) except -1
cdef int binary_scalar(int device, DtypeCore dtype, uintptr_t a, object scalar, uintptr_t out,
                       int64_t count, int op, bint reverse, cudaStream_t stream) except -1
cdef int compare(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, uintptr_t out,
                 int64_t count, int op, cudaStream_t stream) except -1
cdef int compare_scalar(int device, DtypeCore dtype, uintptr_t a, object scalar, uintptr_t out,
                        int64_t count, int op, cudaStream_t stream) except -1
cdef int unary(int device, DtypeCore dtype, uintptr_t a, uintptr_t out, int64_t count, int op,
               cudaStream_t stream) except -1
cdef int copy_strided(int device, DtypeCore source_dtype, uintptr_t source, tuple sizes,
                      tuple source_strides, DtypeCore target_dtype, uintptr_t target,
                      tuple target_strides, cudaStream_t stream) except -1
cdef int reduce(int device, DtypeCore dtype, uintptr_t a, int64_t count, int op,
                DtypeCore result_dtype, uintptr_t out, double divisor,
                cudaStream_t stream) except -1
cdef int matmul_f32(int device, uintptr_t a, uintptr_t b, uintptr_t c, int m, int n, int k,
                    cudaStream_t stream) except -1
cdef bytes scalar_bits(DtypeCore dtype, object value)
# The tensor methods of PyTorch beyond the operators: add/sub with alpha, clamp, where.
cdef int add_scaled(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, object alpha,
                    uintptr_t out, int64_t count, cudaStream_t stream) except -1
cdef int clamp(int device, DtypeCore dtype, uintptr_t a, uintptr_t low, uintptr_t high,
               object low_scalar, object high_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1
cdef int where(int device, DtypeCore dtype, uintptr_t condition, uintptr_t a, uintptr_t b,
               object a_scalar, object b_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1
