# cython: language_level=3
"""The matrix product, by PyTorch's rules for 1 to 3 dimensions, and the precision of float32
products (PyTorch's torch.set_float32_matmul_precision).

CUDA products run in NVIDIA's cuBLASLt (kernels/cublaslt.pyx, Note [Matrix products through
cuBLASLt]), which this module loads on the first CUDA product and calls through one C function
pointer, so that `import tensorplay` loads neither nvmath-python nor cuBLASLt. Each operand is
passed as it lies in memory where one of its strides is 1 (a transposed view, a broadcast
batch); another layout is copied to a contiguous one first. CPU products compute with numpy in
the types the CUDA path accumulates in (float32 for 16-bit floats). See docs/design.md,
"Matrix products".
"""
from libc.stdint cimport int64_t
from cpython.pycapsule cimport PyCapsule_GetPointer

from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.kernels.blas cimport (Float32Precision, MatmulDtype, MatmulFunction,
                                               MatmulProblem, MatrixOperand, MATMUL_BFLOAT16, MATMUL_FLOAT16, MATMUL_FLOAT32,
                                               MATMUL_FLOAT64, operand_usable)
from tensorplay._runtime.tensor cimport copies
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, check_device, current_stream,
                                              new_empty, own_tensor_arg, recorded, tracked,
                                              wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport computable, stored

from tensorplay._runtime.tensor.arguments import DtypeError, ShapeError

# set_float32_matmul_precision's choices, in the schema's order (blas.pxd, Float32Precision).
PRECISIONS = ("highest", "high", "medium")
cdef int float32_precision = 0      # "highest": no TF32, as PyTorch's default
cdef MatmulFunction cuda_matmul = NULL


cdef object set_float32_matmul_precision(int precision):
    global float32_precision
    float32_precision = precision
    return None


cdef str get_float32_matmul_precision():
    return PRECISIONS[float32_precision]


cdef int load_cuda_matmul() except -1:
    """Imports cuBLASLt's module on the first CUDA product (the one import inside a function
    of the runtime, declared in tests/package/test_layers.py: loading nvmath-python and the
    library is what `import tensorplay` must not do)."""
    global cuda_matmul
    from tensorplay._runtime.kernels import cublaslt
    cuda_matmul = <MatmulFunction>PyCapsule_GetPointer(cublaslt.MATMUL_FUNCTION,
                                                       b"tensorplay.blas.MatmulFunction")
    return 0


cdef int matmul_dtype(TensorCore tensor, TensorCore other) except -1:
    """blas.pxd's code of the operands' dtype; floating types of one dtype only."""
    name = tensor.dtype_object.name
    if tensor.dtype_object is not other.dtype_object:
        raise TypeError(f"matmul: expected both operands to have the same dtype, but got "
                        f"{name} and {other.dtype_object.name}")
    if name == "float32":
        return MATMUL_FLOAT32
    if name == "float64":
        return MATMUL_FLOAT64
    if name == "float16":
        return MATMUL_FLOAT16
    if name == "bfloat16":
        return MATMUL_BFLOAT16
    # PyTorch's CUDA matmul refuses integers and bool too ("addmm_cuda" not implemented for
    # 'Long'); the CPU refuses them alike, so that code runs on either device.
    raise TypeError(f"matmul supports floating-point tensors (float16, bfloat16, float32, "
                    f"float64), got {name}: convert with .to(tensorplay.float32) first")


cdef void put_operand(MatrixOperand* operand, TensorCore tensor, bint is_left) noexcept:
    """tensor as a batch of matrices (a 1-D left operand a row, a 1-D right operand a column;
    a 2-D one repeated over the batch)."""
    cdef int ndim = len(tensor.sizes)
    operand.address = tensor.data
    operand.batch_stride = 0
    if ndim == 1:
        if is_left:
            operand.rows, operand.columns = 1, tensor.sizes[0]
            operand.row_stride, operand.column_stride = tensor.sizes[0], tensor.element_strides[0]
        else:
            operand.rows, operand.columns = tensor.sizes[0], 1
            operand.row_stride, operand.column_stride = tensor.element_strides[0], 1
        return
    operand.rows, operand.columns = tensor.sizes[ndim - 2], tensor.sizes[ndim - 1]
    operand.row_stride = tensor.element_strides[ndim - 2]
    operand.column_stride = tensor.element_strides[ndim - 1]
    if ndim == 3 and tensor.sizes[0] > 1:
        operand.batch_stride = tensor.element_strides[0]


cdef object matmul(TensorCore tensor, object other):
    """The matrix product by PyTorch's rules for 1 to 3 dimensions: a 1-D first operand is
    a row and a 1-D second operand a column, that dimension removed from the result; 2-D
    operands multiply as matrices; a 3-D operand is a batch of matrices, and the batch
    broadcasts (a 1-D or 2-D operand, or a batch of one, multiplies every matrix)."""
    if not isinstance(other, TensorCore):
        raise TypeError(f"matmul: other must be a tensor, got {type(other).__name__}")
    cdef TensorCore right = other
    check_device(tensor, right, "matmul")
    cdef int dtype = matmul_dtype(tensor, right)
    cdef int a_dims = len(tensor.sizes), b_dims = len(right.sizes)
    if a_dims == 0 or b_dims == 0:
        raise ShapeError(f"both arguments to matmul need to be at least 1D, but they are "
                         f"{a_dims}D and {b_dims}D")
    if a_dims > 3 or b_dims > 3:
        raise ShapeError(f"matmul supports tensors of 1 to 3 dimensions, got shapes "
                         f"{tensor.sizes} and {right.sizes}")
    cdef MatmulProblem problem
    put_operand(&problem.a, tensor, True)
    put_operand(&problem.b, right, False)
    if problem.a.columns != problem.b.rows:
        raise ShapeError(f"matmul: shapes {tensor.sizes} and {right.sizes} cannot be "
                         f"multiplied ({problem.a.columns} != {problem.b.rows})")
    a_batch = tensor.sizes[0] if a_dims == 3 else 1
    b_batch = right.sizes[0] if b_dims == 3 else 1
    if a_batch != b_batch and a_batch != 1 and b_batch != 1:
        raise ShapeError(f"matmul: the batch sizes of shapes {tensor.sizes} and {right.sizes} "
                         f"do not broadcast ({a_batch} != {b_batch})")
    batch = a_batch if b_batch == 1 else b_batch     # a batch of 0 broadcasts to 0
    m, n = problem.a.rows, problem.b.columns
    shape = ((batch,) if a_dims == 3 or b_dims == 3 else ()) + \
        ((m,) if a_dims > 1 else ()) + ((n,) if b_dims > 1 else ())
    if tensor.device_index == CPU:
        output = cpu_matmul(tensor, right, shape)
    else:
        output = new_empty(shape, tensor.dtype_object, tensor.device_index)
        if problem.a.columns == 0:
            copies.zero_(<TensorCore>output)    # a sum of no products
        elif batch and m and n:
            cuda_product(&problem, tensor, right, <TensorCore>output, dtype, batch)
    if not tracked(tensor, right):
        return output
    # Each operand is saved only when the other needs its gradient, as PyTorch's; the state says
    # which 2-D operands are column-major (transposed views), whose gradients are made in that
    # layout (autograd/formulas.pyx, matmul_gradient).
    return recorded(output, ops.OP_MATMUL, (tensor, right),
                    (tensor if right.grad_required else None,
                     right if tensor.grad_required else None),
                    (column_major(tensor), column_major(right)))


cdef bint column_major(TensorCore tensor):
    """A 2-D tensor whose columns are contiguous (the transpose of a contiguous matrix)."""
    return len(tensor.sizes) == 2 and tensor.sizes[0] > 1 and tensor.sizes[1] > 1 and \
        tensor.element_strides[0] == 1 and tensor.element_strides[1] == tensor.sizes[0]


cdef int cuda_product(MatmulProblem* problem, TensorCore a, TensorCore b, TensorCore output,
                      int dtype, int64_t batch) except -1:
    # Operands cuBLASLt cannot read in place are copied first; the copies live until the
    # product is queued on the stream, and the allocator orders their reuse after it.
    if not operand_usable(&problem.a):
        a = <TensorCore>copies.contiguous(a)
        put_operand(&problem.a, a, True)
    if not operand_usable(&problem.b):
        b = <TensorCore>copies.contiguous(b)
        put_operand(&problem.b, b, False)
    if cuda_matmul == NULL:
        load_cuda_matmul()
    problem.device = a.device_index
    problem.dtype = <MatmulDtype>dtype
    problem.precision = <Float32Precision>float32_precision
    problem.batch = batch
    problem.c = output.data
    problem.stream = current_stream(a.device_index)
    return cuda_matmul(problem)


cdef object cpu_matmul(TensorCore tensor, TensorCore right, tuple shape):
    # In the CUDA path's accumulation type: float32 for 16-bit floats, as cuBLASLt computes.
    a, b = computable(tensor), computable(right)
    if tensor.dtype_object.itemsize == 2:
        a, b = a.astype(np().float32), b.astype(np().float32)
    with np().errstate(all="ignore"):  # inf and nan, as PyTorch: silent
        product = np().asarray(np().matmul(a, b)).reshape(shape)
    return wrap_cpu(np().asarray(stored(product, tensor.dtype_object), order="C"),
                    tensor.dtype_object)


cdef object rmatmul(TensorCore tensor, object other):
    if isinstance(other, TensorCore):
        return matmul(<TensorCore>other, tensor)
    raise TypeError(f"matmul: other must be a tensor, got {type(other).__name__}")


# mm, bmm, dot and outer: matmul (or a broadcast product) of operands of the one shape each
# takes, refusing others with PyTorch's messages, as torch.mm, bmm, dot and outer.
cdef object mm(TensorCore tensor, object mat2):
    cdef TensorCore other = own_tensor_arg(mat2, "mat2")
    if len(tensor.sizes) != 2:
        raise ShapeError(f"self must be a matrix, got {len(tensor.sizes)}-D")
    if len(other.sizes) != 2:
        raise ShapeError(f"mat2 must be a matrix, got {len(other.sizes)}-D")
    return matmul(tensor, other)


cdef object bmm(TensorCore tensor, object mat2):
    cdef TensorCore other = own_tensor_arg(mat2, "mat2")
    if len(tensor.sizes) != 3:
        raise ShapeError(f"batch1 must be a 3D tensor, got {len(tensor.sizes)}-D")
    if len(other.sizes) != 3:
        raise ShapeError(f"batch2 must be a 3D tensor, got {len(other.sizes)}-D")
    if other.sizes[:2] != (tensor.sizes[0], tensor.sizes[2]):  # no broadcasting in bmm
        raise ShapeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                         f"[{tensor.sizes[0]}, {tensor.sizes[2]}] but got: "
                         f"[{other.sizes[0]}, {other.sizes[1]}].")
    return matmul(tensor, other)


cdef object dot(TensorCore tensor, object other):
    cdef TensorCore right = own_tensor_arg(other, "other")
    if len(tensor.sizes) != 1 or len(right.sizes) != 1:
        raise ShapeError(f"1D tensors expected, but got {len(tensor.sizes)}D and "
                         f"{len(right.sizes)}D tensors")
    if tensor.sizes != right.sizes:
        raise ShapeError(f"inconsistent tensor size, expected tensor [{tensor.sizes[0]}] and "
                         f"src [{right.sizes[0]}] to have the same number of elements, but "
                         f"got {tensor.sizes[0]} and {right.sizes[0]} elements respectively")
    if tensor.dtype_object is not right.dtype_object:
        raise DtypeError(f"dot : expected both vectors to have same dtype, but found "
                         f"{tensor.dtype_object.name} and {right.dtype_object.name}")
    return matmul(tensor, right)


cdef object outer(TensorCore tensor, object vec2):
    cdef TensorCore right = own_tensor_arg(vec2, "vec2")
    for value, name in ((tensor, "self"), (right, "vec2")):
        if len((<TensorCore>value).sizes) != 1:
            raise ShapeError(f"outer: Expected 1-D argument {name}, but got "
                             f"{len((<TensorCore>value).sizes)}-D")
    return tensor.c_unsqueeze(1) * right  # promoted as a product, as PyTorch's outer
