# Kernel launches over raw device memory (device_ops.pyx). Pointers are device addresses;
# every launch goes to the given stream; op is a code of the op table (ops.pxd) that the
# kernel's switch reads.
from libc.stdint cimport int64_t, uintptr_t
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base.dtypes cimport DtypeCore

cdef int fill(int device, DtypeCore dtype, uintptr_t out, int64_t count, bytes value,
              cudaStream_t stream) except -1
# arange()'s count values from start by step (ints: integer arithmetic; else numpy's doubles).
cdef int arange(int device, DtypeCore dtype, uintptr_t out, int64_t count, object start,
                object step, cudaStream_t stream) except -1
cdef int binary(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, uintptr_t out,
                int64_t count, int op, cudaStream_t stream) except -1
# a (op) row, or row (op) a when reverse, of a contiguous a of count elements and a contiguous row
# of row_length repeated along a's leading dimensions, four elements per access; False, having
# launched nothing, when the lengths or the addresses do not allow that.
cdef bint binary_rows(int device, DtypeCore dtype, uintptr_t a, uintptr_t row, uintptr_t out,
                      int64_t count, int64_t row_length, int op, bint reverse,
                      cudaStream_t stream) except -1
# Operands read through strides over the output's sizes (0 on a broadcast dimension); out is
# contiguous.
cdef int binary_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t b,
                        tuple b_strides, uintptr_t out, tuple sizes, int op,
                        cudaStream_t stream) except -1
cdef int compare_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t b,
                         tuple b_strides, uintptr_t out, tuple sizes, int op,
                         cudaStream_t stream) except -1
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
# Sums (a mean with divisor, the count) of a over the dimensions of reduced_sizes for each index
# of kept_sizes; the strides are a's, in elements.
cdef int reduce_dims(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                     tuple kept_strides, tuple reduced_sizes, tuple reduced_strides,
                     DtypeCore result_dtype, uintptr_t out, double divisor,
                     cudaStream_t stream) except -1
cdef bytes scalar_bits(DtypeCore dtype, object value)
# The tensor methods of PyTorch beyond the operators: add/sub with alpha, clamp, where.
cdef int add_scaled(int device, DtypeCore dtype, uintptr_t a, uintptr_t b, object alpha,
                    uintptr_t out, int64_t count, cudaStream_t stream) except -1
# One SGD step in place (elementwise.cu, sgd_step): param, grad and buffer are contiguous, of
# one dtype and count; buffer 0 is no momentum.
cdef int sgd_step(int device, DtypeCore dtype, uintptr_t param, uintptr_t grad, uintptr_t buffer,
                  object lr, object momentum, object weight_decay, int64_t count,
                  cudaStream_t stream) except -1
cdef int clamp(int device, DtypeCore dtype, uintptr_t a, uintptr_t low, uintptr_t high,
               object low_scalar, object high_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1
# clamp() with each tensor read through strides over the output's sizes.
cdef int clamp_strided(int device, DtypeCore dtype, uintptr_t a, tuple a_strides, uintptr_t low,
                       tuple low_strides, uintptr_t high, tuple high_strides, object low_scalar,
                       object high_scalar, uintptr_t out, tuple sizes,
                       cudaStream_t stream) except -1
cdef int where(int device, DtypeCore dtype, uintptr_t condition, uintptr_t a, uintptr_t b,
               object a_scalar, object b_scalar, uintptr_t out, int64_t count,
               cudaStream_t stream) except -1
# where() with each tensor read through strides over the output's sizes.
cdef int where_strided(int device, DtypeCore dtype, uintptr_t condition,
                       tuple condition_strides, uintptr_t a, tuple a_strides, uintptr_t b,
                       tuple b_strides, object a_scalar, object b_scalar, uintptr_t out,
                       tuple sizes, cudaStream_t stream) except -1
# op (a binary op or a comparison of the op table) of operands of mixed dtypes, read in place
# through strides over the output's sizes, each converted to common, the dtype they promote
# to; out is contiguous, of target (bool for a comparison). The scalar form takes a Python
# scalar as the other operand (reverse: scalar (op) a).
cdef int promoted_binary(int device, int op, DtypeCore left, uintptr_t a, tuple a_strides,
                         DtypeCore right, uintptr_t b, tuple b_strides, DtypeCore common,
                         DtypeCore target, uintptr_t out, tuple sizes,
                         cudaStream_t stream) except -1
cdef int promoted_binary_scalar(int device, int op, DtypeCore left, uintptr_t a,
                                tuple a_strides, object scalar, bint reverse, DtypeCore common,
                                DtypeCore target, uintptr_t out, tuple sizes,
                                cudaStream_t stream) except -1
# max or min (op: OP_MAX, OP_MIN) of a over one dimension of length elements (>= 1) apart by
# stride, for each index of kept_sizes (a's strides): the values (0: none wanted) and the int64
# index of the first such element, NaN first (reduce.cu, select_dim).
cdef int select_dim(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                    tuple kept_strides, int64_t length, int64_t stride, uintptr_t values,
                    uintptr_t indices, int op, cudaStream_t stream) except -1
# softmax (log_softmax with take_log) of a contiguous a along the middle dimension of its shape
# seen as (outer, length, inner), length >= 1, into out, contiguous of that shape (reduce.cu,
# softmax_dim); and its gradient from the output and the output's gradient, both contiguous of
# that shape (softmax_backward_dim).
cdef int softmax_dim(int device, DtypeCore dtype, uintptr_t a, uintptr_t out, int64_t outer,
                     int64_t length, int64_t inner, bint take_log, cudaStream_t stream) except -1
cdef int softmax_backward_dim(int device, DtypeCore dtype, uintptr_t output, uintptr_t grad,
                              uintptr_t out, int64_t outer, int64_t length, int64_t inner,
                              bint take_log, cudaStream_t stream) except -1
# nll_loss of contiguous log-probabilities logp (outer, classes, inner) at the contiguous int64
# targets (outer, inner), weight 0 for none (reduce.cu, nll_loss_rows): reduction 0 writes each
# row's loss to out, 1 and 2 (sum, mean) the loss to out[0] and the total weight, in the
# accumulation type, to total; and its gradient for logp into out, of logp's shape
# (nll_loss_backward_rows), from the loss's gradient grad and, for a mean, total.
cdef int nll_loss(int device, DtypeCore dtype, uintptr_t logp, uintptr_t target, uintptr_t weight,
                  uintptr_t out, uintptr_t total, int64_t outer, int64_t classes, int64_t inner,
                  int64_t ignore_index, int reduction, cudaStream_t stream) except -1
cdef int nll_loss_backward(int device, DtypeCore dtype, uintptr_t target, uintptr_t weight,
                           uintptr_t grad, uintptr_t total, uintptr_t out, int64_t outer,
                           int64_t classes, int64_t inner, int64_t ignore_index, int reduction,
                           cudaStream_t stream) except -1
# The cumulative sum (product set: product) of a along one dimension of length elements apart by
# stride, for each index of kept_sizes (a's strides), into out (out_kept_strides and out_stride
# its strides), each from the dimension's end with reverse set; result is out's dtype (scan.cu:
# scan_dim, a warp per row, or scan_dim_blocks, a block per row, for few long rows).
# out may be a itself, with the same strides.
cdef int scan_dim(int device, DtypeCore dtype, DtypeCore result, uintptr_t a, tuple kept_sizes,
                  tuple kept_strides, int64_t length, int64_t stride, uintptr_t out,
                  tuple out_kept_strides, int64_t out_stride, bint product, bint reverse,
                  cudaStream_t stream) except -1
# a sorted along one dimension of length elements apart by stride, for each index of kept_sizes
# (a's strides), into values and their positions into int64 indices (both with out_kept_strides
# and out_stride): ascending, or descending, NaN largest, equal elements in their order
# (sort.cu: one launch for slices of SORT_CHUNK elements or fewer, more for longer ones).
cdef int sort_dim(int device, DtypeCore dtype, uintptr_t a, tuple kept_sizes,
                  tuple kept_strides, int64_t length, int64_t stride, uintptr_t values,
                  uintptr_t indices, tuple out_kept_strides, int64_t out_stride,
                  bint descending, cudaStream_t stream) except -1
# Selection by index along the middle dimension of a contiguous (outer, size, inner) tensor:
# index_select (index.cu) writes out (outer, index_count, inner) from source; index_add
# (scatter.cu) adds source (outer, index_count, inner) into target, floating-point dtypes only. index holds
# index_count int64 values; one outside [0, size) selects a zero and adds nothing.
cdef int index_select(int device, DtypeCore dtype, uintptr_t source, uintptr_t index,
                      uintptr_t out, int64_t outer, int64_t size, int64_t inner,
                      int64_t index_count, cudaStream_t stream) except -1
cdef int index_add(int device, DtypeCore dtype, uintptr_t source, uintptr_t index,
                   uintptr_t target, int64_t outer, int64_t size, int64_t inner,
                   int64_t index_count, cudaStream_t stream) except -1
# gather (index.cu) writes out, contiguous and of the index's shape, from source along axis;
# scatter (index.cu) stores, or with add set scatter_add (scatter.cu) adds, source into target
# along axis. The index is int64 and of the source's and target's dimensions (sizes and strides
# in elements); source_strides are the source's, read at the index's sizes. An index outside
# [0, size) selects a zero, stores and adds nothing. add takes the dtypes index_add takes and
# int32/int64.
cdef int gather(int device, DtypeCore dtype, uintptr_t source, tuple source_sizes,
                tuple source_strides, uintptr_t index, tuple index_sizes, tuple index_strides,
                uintptr_t out, int axis, cudaStream_t stream) except -1
cdef int scatter(int device, DtypeCore dtype, bint add, uintptr_t source, tuple source_strides,
                 uintptr_t index, tuple index_sizes, tuple index_strides, uintptr_t target,
                 tuple target_sizes, tuple target_strides, int axis,
                 cudaStream_t stream) except -1
