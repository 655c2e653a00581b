# One matrix product as the tensor layer hands it to cuBLASLt (cublaslt.pyx), a module of its own
# that the tensor layer imports on the first CUDA matmul and calls through one C function
# pointer: importing it loads nvmath-python and the cuBLASLt library, which `import tensorplay`
# must not (docs/design.md, "Matrix products"). This file declares no function, so cimporting it
# imports nothing.
from libc.stdint cimport int64_t, uintptr_t
from cuda.bindings.cyruntime cimport cudaStream_t

# The element types cuBLASLt multiplies here, and how float32 products may compute
# (tensorplay.set_float32_matmul_precision's choices, in the schema's order).
cdef enum MatmulDtype:
    MATMUL_FLOAT32
    MATMUL_FLOAT64
    MATMUL_FLOAT16
    MATMUL_BFLOAT16

cdef enum Float32Precision:
    PRECISION_HIGHEST          # float32 throughout (the default, as PyTorch's)
    PRECISION_HIGH             # TF32 tensor cores
    PRECISION_MEDIUM           # bfloat16 tensor cores

# An operand as cuBLASLt reads it: a row-major matrix of `rows` x `columns` elements whose
# element (i, j) of matrix b of the batch is at address + (b * batch_stride + i * row_stride +
# j * column_stride) * itemsize. Usable when one of its two strides is 1 (operand_usable); a
# batch stride of 0 repeats one matrix for the whole batch.
cdef struct MatrixOperand:
    uintptr_t address
    int64_t rows
    int64_t columns
    int64_t row_stride
    int64_t column_stride
    int64_t batch_stride

# c[b] = a[b] @ b[b] for b < batch: a is m x k, b is k x n, c is a contiguous batch of m x n
# (row stride n, batch stride m * n). m, n, k and batch are at least 1.
cdef struct MatmulProblem:
    int device
    MatmulDtype dtype
    Float32Precision precision
    int64_t batch
    MatrixOperand a
    MatrixOperand b
    uintptr_t c
    cudaStream_t stream

ctypedef int (*MatmulFunction)(const MatmulProblem* problem) except -1


cdef inline bint operand_usable(const MatrixOperand* operand) noexcept nogil:
    """Whether cuBLASLt can read the operand in place: its elements along rows or along columns
    are adjacent, and the other stride steps past a whole line (cuBLASLt's leading dimension is
    at least the line's length); a dimension of one element may have any stride."""
    cdef bint rows_adjacent = operand.column_stride == 1 or operand.columns == 1
    cdef bint columns_adjacent = operand.row_stride == 1 or operand.rows == 1
    return (rows_adjacent and (operand.row_stride >= operand.columns or operand.rows == 1)) or \
        (columns_adjacent and (operand.column_stride >= operand.rows or operand.columns == 1))
