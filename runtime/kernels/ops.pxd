# The op table (ops.pyx explains it at its top): every operation of the tensor layer, named
# once, here. An op's code is what the tensor layer dispatches on, what a kernel's switch reads
# (the kernel sources see each code as a #define: nvrtc.pyx, CONSTANTS_PRELUDE) and what a
# recorded Node carries (the engine looks its gradient up by it, once, at import).

cpdef enum Op:
    # Binary arithmetic (elementwise.cu, apply_binary).
    OP_ADD
    OP_SUB
    OP_MUL
    OP_DIV
    OP_DIV_TRUNC             # torch.div(rounding_mode="trunc")
    OP_DIV_FLOOR             # torch.div(rounding_mode="floor"), a // b
    OP_REMAINDER             # a % b, torch.remainder: the sign of the divisor
    OP_POW
    OP_RELU_BACKWARD         # gradient * (output > 0): PyTorch's threshold_backward(g, out, 0)
    OP_BITWISE_AND           # a & b of integers (bool masks: Note [Mask logic], elementwise.pyx)
    OP_BITWISE_OR
    OP_BITWISE_XOR
    OP_LSHIFT                # a << b
    OP_RSHIFT                # a >> b, filling with the sign
    # Comparisons (elementwise.cu, apply_compare).
    OP_EQ
    OP_NE
    OP_LT
    OP_LE
    OP_GT
    OP_GE
    # Unary (elementwise.cu, apply_unary).
    OP_NEG
    OP_BITWISE_NOT           # ~a of integers
    OP_ABS
    OP_SIGN                  # (x > 0) - (x < 0), as PyTorch's: 0 for NaN and -0.0
    OP_RELU
    OP_SIN
    OP_COS
    OP_EXP
    OP_SQRT
    OP_LOG
    OP_SIGMOID
    OP_TANH
    OP_ERF                   # the error function, 2/sqrt(pi) * integral of exp(-t*t) to x
    OP_LOG1P                 # log(1 + x), exact near 0
    OP_EXPM1                 # exp(x) - 1, exact near 0
    OP_RSQRT                 # 1 / sqrt(x)
    OP_TAN
    OP_ATAN
    OP_ASIN
    OP_ACOS
    OP_SINH
    OP_COSH
    OP_LOG2
    OP_LOG10
    OP_EXP2
    OP_FLOOR                 # floor, ceil, round (half to even) and trunc: floating only; an
    OP_CEIL                  # integer tensor is its own result (a copy), as in PyTorch
    OP_ROUND
    OP_TRUNC
    # Reductions (reduce.cu, combine); a mean is a sum and a divisor.
    OP_SUM
    OP_MAX
    OP_MIN
    OP_MEAN
    OP_MAX_DIM               # max(dim) and min(dim): values and indices (reduce.cu, select_dim)
    OP_MIN_DIM
    OP_AMAX                  # amax and amin: extremes over dims, ties sharing the gradient
    OP_AMIN
    # Operations with kernels of their own, or none.
    OP_MATMUL
    OP_ADD_SCALED            # torch.add / torch.sub with alpha
    OP_CLAMP
    OP_WHERE
    OP_MAXIMUM               # torch.maximum and minimum: where() of a comparison
    OP_MINIMUM
    OP_BINARY_CROSS_ENTROPY  # nn's elementwise losses with PyTorch's own gradient formulas
    OP_BINARY_CROSS_ENTROPY_WITH_LOGITS
    OP_FILL
    OP_CLONE
    OP_PIN_MEMORY
    OP_TO
    OP_RESHAPE               # every view that keeps the elements' order (view, unsqueeze,
                             # squeeze, t of fewer than 2 dimensions)
    OP_TRANSPOSE
    OP_PERMUTE               # permute, T
    OP_CAT
    OP_STACK
    OP_EXPAND
    OP_GETITEM
    OP_SETITEM
    OP_AS_STRIDED            # a view's history through its base, after an in-place change
    OP_COPY_SLICES           # a base's, after an in-place change of its view (engine.pyx,
                             # Note [Views and in-place changes])
    OP_INDEX_SELECT          # index_select and indexing by an integer tensor (index.cu)
    OP_GATHER                # gather, scatter and scatter_add along a dimension
    OP_SCATTER               # (scatter_gather.pyx)
    OP_SCATTER_ADD
    OP_CUMSUM                # cumulative sums and products along a dimension (scan.pyx)
    OP_CUMPROD
    OP_MEDIAN                # median() and nanmedian() of the whole tensor (sort.pyx)
    OP_SOFTMAX               # softmax and log_softmax along a dimension on a CUDA device, one
    OP_LOG_SOFTMAX           # kernel each way (reduction.pyx, Note [Fused softmax])
    OP_NLL_LOSS              # nll_loss on a CUDA device (reduction.pyx, Note [Fused nll_loss])
    OP_FUNCTION              # an autograd.Function's forward
    OP_COUNT

# Which kernel switch reads an op's code (KERNEL_NONE: its code reaches no kernel).
cdef enum Kernel:
    KERNEL_NONE
    KERNEL_BINARY
    KERNEL_COMPARE
    KERNEL_UNARY
    KERNEL_REDUCE

# The dtype of an op's result, from its operand's.
cdef enum DtypeRule:
    DTYPE_SAME               # the operand's (a float scalar makes an integer operand float32)
    DTYPE_FLOATING           # the operand's if floating, else float32 (true division, sin...)
    DTYPE_BOOL               # bool (comparisons)
    DTYPE_WIDE               # the operand's if floating, else int64 (sum)
    DTYPE_FLOATING_ONLY      # the operand's, which must be floating (mean)

# "add", "div_trunc": the op's name, lower case.
cdef str op_name(int op)
cdef int kernel_of(int op) noexcept
cdef int dtype_rule(int op) noexcept
# Whether the op's gradient is a function of its output, which its Node saves (PyTorch's
# choice: relu, exp, sqrt).
cdef bint saves_output(int op) noexcept
# The numpy function computing the op on the CPU ("add", "true_divide"), by name; None where
# the CPU path computes it its own way.
cdef str cpu_name(int op)
# The gradient formula's name (the recorded Node's operation, "RoundedDivBackward" for
# "rounded_div"), or None for an op without gradient.
cdef str gradient_name(int op)
