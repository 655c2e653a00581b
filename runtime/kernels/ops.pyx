# cython: language_level=3
"""The op table: every operation of the tensor layer, declared once.

Note [Op table]
An op is named once, as a member of the Op enum in ops.pxd, and described once, by its row in
ROWS below: which kernel switch reads its code, the numpy function computing it on the CPU, the
name of its gradient formula and the dtype rule of its result. Everything else is derived:
- the kernel sources' op codes: every op a kernel reads is a #define of the prelude every source
  is compiled with (KERNEL_CONSTANTS, in nvrtc.pyx's CONSTANTS_PRELUDE), so `case OP_ADD:` in
  elementwise.cu is the code the tensor layer passes;
- the tensor layer's dispatch: it passes C-level codes (device_ops takes them as ints) and reads
  the rows through the C functions of ops.pxd, with no dict or Python call per operation;
- the autograd formulas: a recorded Node carries its op; the engine resolves every op's
  gradient name to its formula once, at import, and refuses to import when an op names a
  formula that does not exist or a formula belongs to no op (formulas.pyx, formulas_by_op).
A row that is missing or given twice is an error at import, naming the op.
"""
cdef enum:
    COLUMNS = 6

# (op, kernel, cpu, gradient, dtype rule, saves output): see ops.pxd for what each column means.
ROWS = (
    (OP_ADD, KERNEL_BINARY, "add", "add", DTYPE_SAME, False),
    (OP_SUB, KERNEL_BINARY, "subtract", "sub", DTYPE_SAME, False),
    (OP_MUL, KERNEL_BINARY, "multiply", "mul", DTYPE_SAME, False),
    (OP_DIV, KERNEL_BINARY, "true_divide", "div", DTYPE_FLOATING, False),
    # Rounded quotients are piecewise constant: their gradient is zero, as PyTorch's.
    (OP_DIV_TRUNC, KERNEL_BINARY, None, "rounded_div", DTYPE_SAME, False),
    (OP_DIV_FLOOR, KERNEL_BINARY, None, "rounded_div", DTYPE_SAME, False),
    (OP_REMAINDER, KERNEL_BINARY, "remainder", "remainder", DTYPE_SAME, False),
    (OP_POW, KERNEL_BINARY, "power", "pow", DTYPE_SAME, False),
    # Only relu's gradient formula runs it, with grad mode off: it needs no gradient of its own.
    (OP_RELU_BACKWARD, KERNEL_BINARY, None, None, DTYPE_SAME, False),
    # Integers only (the host refuses floating operands, as PyTorch); integers have no gradient.
    (OP_BITWISE_AND, KERNEL_BINARY, "bitwise_and", None, DTYPE_SAME, False),
    (OP_BITWISE_OR, KERNEL_BINARY, "bitwise_or", None, DTYPE_SAME, False),
    (OP_BITWISE_XOR, KERNEL_BINARY, "bitwise_xor", None, DTYPE_SAME, False),
    (OP_LSHIFT, KERNEL_BINARY, None, None, DTYPE_SAME, False),
    (OP_RSHIFT, KERNEL_BINARY, None, None, DTYPE_SAME, False),
    (OP_EQ, KERNEL_COMPARE, "equal", None, DTYPE_BOOL, False),
    (OP_NE, KERNEL_COMPARE, "not_equal", None, DTYPE_BOOL, False),
    (OP_LT, KERNEL_COMPARE, "less", None, DTYPE_BOOL, False),
    (OP_LE, KERNEL_COMPARE, "less_equal", None, DTYPE_BOOL, False),
    (OP_GT, KERNEL_COMPARE, "greater", None, DTYPE_BOOL, False),
    (OP_GE, KERNEL_COMPARE, "greater_equal", None, DTYPE_BOOL, False),
    (OP_NEG, KERNEL_UNARY, "negative", "neg", DTYPE_SAME, False),
    (OP_BITWISE_NOT, KERNEL_UNARY, "invert", None, DTYPE_SAME, False),
    (OP_ABS, KERNEL_UNARY, "abs", "abs", DTYPE_SAME, False),
    (OP_SIGN, KERNEL_UNARY, None, "sign", DTYPE_SAME, False),
    (OP_RELU, KERNEL_UNARY, None, "relu", DTYPE_SAME, True),  # max(x, 0) in x's dtype
    (OP_SIN, KERNEL_UNARY, "sin", "sin", DTYPE_FLOATING, False),
    (OP_COS, KERNEL_UNARY, "cos", "cos", DTYPE_FLOATING, False),
    (OP_EXP, KERNEL_UNARY, "exp", "exp", DTYPE_FLOATING, True),
    (OP_SQRT, KERNEL_UNARY, "sqrt", "sqrt", DTYPE_FLOATING, True),
    (OP_LOG, KERNEL_UNARY, "log", "log", DTYPE_FLOATING, False),
    (OP_SIGMOID, KERNEL_UNARY, None, "sigmoid", DTYPE_FLOATING, True),
    (OP_TANH, KERNEL_UNARY, "tanh", "tanh", DTYPE_FLOATING, True),
    (OP_ERF, KERNEL_UNARY, None, "erf", DTYPE_FLOATING, False),
    (OP_LOG1P, KERNEL_UNARY, "log1p", "log1p", DTYPE_FLOATING, False),
    (OP_EXPM1, KERNEL_UNARY, "expm1", "expm1", DTYPE_FLOATING, True),
    (OP_RSQRT, KERNEL_UNARY, None, "rsqrt", DTYPE_FLOATING, True),
    (OP_TAN, KERNEL_UNARY, "tan", "tan", DTYPE_FLOATING, True),
    (OP_ATAN, KERNEL_UNARY, "arctan", "atan", DTYPE_FLOATING, False),
    (OP_ASIN, KERNEL_UNARY, "arcsin", "asin", DTYPE_FLOATING, False),
    (OP_ACOS, KERNEL_UNARY, "arccos", "acos", DTYPE_FLOATING, False),
    (OP_SINH, KERNEL_UNARY, "sinh", "sinh", DTYPE_FLOATING, False),
    (OP_COSH, KERNEL_UNARY, "cosh", "cosh", DTYPE_FLOATING, False),
    (OP_LOG2, KERNEL_UNARY, "log2", "log2", DTYPE_FLOATING, False),
    (OP_LOG10, KERNEL_UNARY, "log10", "log10", DTYPE_FLOATING, False),
    (OP_EXP2, KERNEL_UNARY, "exp2", "exp2", DTYPE_FLOATING, True),
    # Rounding is piecewise constant: its gradient is zero, as PyTorch's. round is to the
    # nearest even integer at a tie (numpy's rint, CUDA's rint, PyTorch's nearbyint).
    (OP_FLOOR, KERNEL_UNARY, "floor", "floor", DTYPE_SAME, False),
    (OP_CEIL, KERNEL_UNARY, "ceil", "ceil", DTYPE_SAME, False),
    (OP_ROUND, KERNEL_UNARY, "rint", "round", DTYPE_SAME, False),
    (OP_TRUNC, KERNEL_UNARY, "trunc", "trunc", DTYPE_SAME, False),
    (OP_SUM, KERNEL_REDUCE, None, "sum", DTYPE_WIDE, False),
    (OP_MAX, KERNEL_REDUCE, None, "max", DTYPE_SAME, False),
    (OP_MIN, KERNEL_REDUCE, None, "min", DTYPE_SAME, False),
    (OP_MEAN, KERNEL_NONE, None, "mean", DTYPE_FLOATING_ONLY, False),
    # The gradient goes to the element each slice selected (PyTorch's
    # value_selecting_reduction_backward).
    (OP_MAX_DIM, KERNEL_NONE, None, "select_dim", DTYPE_SAME, False),
    (OP_MIN_DIM, KERNEL_NONE, None, "select_dim", DTYPE_SAME, False),
    (OP_AMAX, KERNEL_NONE, None, "amax", DTYPE_SAME, False),
    (OP_AMIN, KERNEL_NONE, None, "amin", DTYPE_SAME, False),
    (OP_MATMUL, KERNEL_NONE, None, "matmul", DTYPE_SAME, False),
    (OP_ADD_SCALED, KERNEL_NONE, None, "add_scaled", DTYPE_SAME, False),
    (OP_CLAMP, KERNEL_NONE, None, "clamp", DTYPE_SAME, False),
    (OP_WHERE, KERNEL_NONE, None, "where", DTYPE_SAME, False),
    # A tie splits the gradient between the operands, as PyTorch's.
    (OP_MAXIMUM, KERNEL_NONE, None, "maximum", DTYPE_SAME, False),
    (OP_MINIMUM, KERNEL_NONE, None, "minimum", DTYPE_SAME, False),
    # Computed from other operations (nn.pyx); recorded as one node so that the gradient is
    # PyTorch's formula, guarded where the composition's would be 0 / 0 (an input of exactly 0
    # or 1 to binary_cross_entropy).
    (OP_BINARY_CROSS_ENTROPY, KERNEL_NONE, None, "binary_cross_entropy", DTYPE_SAME, False),
    (OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, KERNEL_NONE, None, "binary_cross_entropy_with_logits",
     DTYPE_SAME, False),
    (OP_FILL, KERNEL_NONE, None, "fill", DTYPE_SAME, False),
    (OP_CLONE, KERNEL_NONE, None, "clone", DTYPE_SAME, False),
    (OP_PIN_MEMORY, KERNEL_NONE, None, "pin_memory", DTYPE_SAME, False),
    (OP_TO, KERNEL_NONE, None, "to", DTYPE_SAME, False),
    (OP_RESHAPE, KERNEL_NONE, None, "reshape", DTYPE_SAME, False),
    (OP_TRANSPOSE, KERNEL_NONE, None, "transpose", DTYPE_SAME, False),
    (OP_PERMUTE, KERNEL_NONE, None, "permute", DTYPE_SAME, False),
    (OP_CAT, KERNEL_NONE, None, "cat", DTYPE_SAME, False),
    (OP_STACK, KERNEL_NONE, None, "stack", DTYPE_SAME, False),
    (OP_EXPAND, KERNEL_NONE, None, "expand", DTYPE_SAME, False),
    (OP_GETITEM, KERNEL_NONE, None, "getitem", DTYPE_SAME, False),
    (OP_SETITEM, KERNEL_NONE, None, "setitem", DTYPE_SAME, False),
    (OP_AS_STRIDED, KERNEL_NONE, None, "as_strided", DTYPE_SAME, False),
    (OP_COPY_SLICES, KERNEL_NONE, None, "copy_slices", DTYPE_SAME, False),
    # Repeated indices add their gradients up (index_add), as PyTorch's.
    (OP_INDEX_SELECT, KERNEL_NONE, None, "index_select", DTYPE_SAME, False),
    # PyTorch's formulas (derivatives.yaml): gather's gradient is scatter-added, so repeated
    # indices add up; scatter's and scatter_add's src gets the gradient gathered at the index.
    (OP_GATHER, KERNEL_NONE, None, "gather", DTYPE_SAME, False),
    (OP_SCATTER, KERNEL_NONE, None, "scatter", DTYPE_SAME, False),
    (OP_SCATTER_ADD, KERNEL_NONE, None, "scatter_add", DTYPE_SAME, False),
    # PyTorch's formulas: cumsum's gradient is the gradient summed from the other end; cumprod's
    # is its zero-safe formula (scan.pyx, Note [Cumulative sums and products]).
    (OP_CUMSUM, KERNEL_NONE, None, "cumsum", DTYPE_WIDE, False),
    (OP_CUMPROD, KERNEL_NONE, None, "cumprod", DTYPE_WIDE, False),
    # PyTorch's evenly_distribute_backward: shared evenly among the elements equal to the
    # median, NaN matching NaN.
    (OP_MEDIAN, KERNEL_NONE, None, "median", DTYPE_SAME, False),
    # PyTorch's formulas from the saved output (softmax_backward_data): y * (g - sum(g * y))
    # and g - exp(y) * sum(g) along the dimension, one kernel (reduce.cu).
    (OP_SOFTMAX, KERNEL_NONE, None, "softmax", DTYPE_SAME, False),
    (OP_LOG_SOFTMAX, KERNEL_NONE, None, "log_softmax", DTYPE_SAME, False),
    # PyTorch's nll_loss_backward: -weight * g at each target class; the targets and the weight
    # take no gradient.
    (OP_NLL_LOSS, KERNEL_NONE, None, "nll_loss", DTYPE_SAME, False),
    (OP_FUNCTION, KERNEL_NONE, None, "function", DTYPE_SAME, False),
)

cdef list _names = [None] * OP_COUNT
cdef list _cpu_names = [None] * OP_COUNT
cdef list _gradient_names = [None] * OP_COUNT
cdef int _kernels[<int>OP_COUNT]
cdef int _dtype_rules[<int>OP_COUNT]
cdef bint _saves_output[<int>OP_COUNT]


cdef int _fill_table() except -1:
    cdef int op
    seen = set()
    for row in ROWS:
        if len(row) != COLUMNS:
            raise RuntimeError(f"the op table's row {row!r} has {len(row)} columns, not {COLUMNS}")
        op = row[0]
        if op in seen:
            raise RuntimeError(f"the op table describes {Op(op).name} twice")
        seen.add(op)
        _names[op] = Op(op).name[3:].lower()
        _kernels[op], _cpu_names[op], _gradient_names[op], _dtype_rules[op], \
            _saves_output[op] = row[1:]
    missing = [member.name for member in Op if member != OP_COUNT and member not in seen]
    if missing:
        raise RuntimeError(f"the op table has no row for {', '.join(missing)} (runtime/kernels/"
                           "ops.pyx, ROWS)")
    return 0


_fill_table()

# The codes of the ops a kernel reads, as the kernel sources spell them (Note [Op table]).
KERNEL_CONSTANTS = tuple((member.name, int(member)) for member in Op
                         if member != OP_COUNT and _kernels[<int>member] != KERNEL_NONE)


def op_names():
    """Every op's name, in the order of their codes."""
    return tuple(_names)


def gradient_names():
    """The gradient formula names the table uses, each once, in the order of the ops'
    codes."""
    return tuple(dict.fromkeys(name for name in _gradient_names if name is not None))


cdef str op_name(int op):
    return _names[op]


cdef int kernel_of(int op) noexcept:
    return _kernels[op]


cdef int dtype_rule(int op) noexcept:
    return _dtype_rules[op]


cdef bint saves_output(int op) noexcept:
    return _saves_output[op]


cdef str cpu_name(int op):
    return _cpu_names[op]


cdef str gradient_name(int op):
    return _gradient_names[op]
