# cython: language_level=3
"""Reverse-mode automatic differentiation: a tape of the operations on tensors that require grad.

See docs/design.md, "Autograd".

Note [Tape]
An operation with an operand that requires grad, run while grad mode is on (outside no_grad()),
records a Node on its output (record(), which the tensor layer calls through its recorder:
core.pyx, Note [Tape recorder]): the operation; one edge per operand, which is the
Node that computed it and which of that Node's outputs it is, or the operand itself for a leaf
(a tensor that requires grad and that no Node computed), or None for an operand that needs no
gradient; each operand's shape, dtype and device; the tensors the gradient needs (saved, with
their versions); anything else it needs (state); and the stream the operation ran on. The
graph is nothing more than the Nodes reachable from an output, alive as long as the output is.
Outputs are never saved (a Node that saved its own output would keep it alive through a cycle);
a gradient that needs the output recomputes it.

backward() and grad() walk the graph from the outputs: a Node runs once every Node that feeds
it a gradient has run (dependency counts over the reachable Nodes), with grad mode off, so the
backward pass records nothing (create_graph=True is refused). A Node's gradient is its op's
formula (FORMULAS), computed at the shape the operation broadcast its operands to, and
reduced to each operand's shape (sum_to), so no operation needs its own rule for broadcasting.
A gradient reaching a leaf is added into its .grad, which is allocated on the first backward
pass and updated in place afterwards, so its address stays fixed (backward), or kept as the
answer (grad). Unless retain_graph, each Node drops its saved tensors once run, and running it
again raises PyTorch's error.

Each Node runs on the stream its forward ran on. When consecutive Nodes ran on different
streams, the later one's stream first waits for the earlier one's, and at the end the caller's
stream waits for the last; event waits are legal during capture, so a backward pass can be
captured into a CUDA graph like the forward.

Note [Version counters]
Every tensor carries a counter that all views of its memory share; in-place operations increment
it. A Node keeps each saved tensor's count from when it was saved, and refuses to run when the
count has changed, since its gradient would use values the forward never saw. Nodes save what
PyTorch saves (an output as a detached alias, which shares its version counter without making a
cycle), so the same changes are refused. While grad mode is on, an in-place operation on a
tensor that is not a view, when it or an operand requires grad, is recorded as PyTorch's
rebase_history (copies.rebased): the out-of-place result of a copy is copied in, counting
a change, and the tensor takes its Node; item assignment into it likewise (SetitemBackward, a
CopySlices for the tensor itself). It is refused on a leaf that requires grad (as PyTorch;
optimisers update parameters under no_grad()) and on a view, since the tape cannot rewrite the
history of the view's base and of its other views (PyTorch's CopySlices for views is not here).
"""
import functools
import math

from tensorplay._runtime.base cimport errors, public
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.tensor cimport copies, core as tensor, elementwise, reduction
from tensorplay._runtime.devices.stream cimport StreamCore
from tensorplay._runtime.tensor.copies cimport fill_
from tensorplay._runtime.tensor.core cimport TensorCore, device_text, new_empty
from tensorplay._runtime.tensor.elementwise cimport (cos, eq, ge, gt, log, lt, mul, neg, power,
                                                     sin, sub, truediv, where)
from tensorplay._runtime.tensor.reduction cimport matmul, maximum, minimum, sum_over

from tensorplay._runtime.kernels.ops import gradient_names
from tensorplay._runtime.tensor.arguments import ShapeError


# --------------------------------------------------------------------------------------------
# Grad mode


cdef bint is_grad_enabled():
    return tensor.grad_enabled()


class GradModeCore:
    """no_grad() and enable_grad(): grad mode inside the block, and what it was before.

    Python classes, so that, as in PyTorch, the bare class decorates too: no_grad(function)
    (what @no_grad does) returns the decorated function, as no_grad()(function) does; the
    generated class supplies __call__, the decorator."""
    inside = False

    def __new__(cls, function=None):
        if function is None:
            return super().__new__(cls)
        if not callable(function):
            raise TypeError(f"{cls.__name__}() takes no arguments, or as a bare decorator a "
                            f"function; got {type(function).__name__}")
        return cls()(function)

    def __init__(self, function=None):
        self.previous = []  # one entry per enclosing use of this object, so it may nest

    def c_enter(self):
        self.previous.append(tensor.grad_enabled())
        tensor.set_grad_enabled(self.inside)

    def c_exit(self, exc_type, exc_value, traceback):
        tensor.set_grad_enabled(self.previous.pop())


class NoGradCore(GradModeCore):
    inside = False


cdef object no_grad_block():
    return public.public_class("NoGradCore", NoGradCore)()


cdef object zero_grads(object tensors, bint set_to_none):
    """zero_grad() of a Module or an optimizer: each tensor's .grad dropped or zeroed in place
    (kept, so its address stays fixed for captured graphs)."""
    for each in tensors:
        if each.grad is None:
            continue
        if set_to_none:
            each.grad = None
        else:
            each.grad.zero_()
    return None


class EnableGradCore(GradModeCore):
    inside = True


# --------------------------------------------------------------------------------------------
# The tape


FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")


cdef tuple meta_of(object value):
    """(sizes, dtype, device) of a tensor operand, None for anything else."""
    if isinstance(value, TensorCore):
        return ((<TensorCore>value).sizes, (<TensorCore>value).dtype_object,
                (<TensorCore>value).device_index)
    return None


cdef class Node:
    def __init__(self, *args, **kwargs):
        raise TypeError("Nodes are recorded by operations on tensors that require grad; read "
                        "one from a tensor's grad_fn")

    cdef str c_name(self):
        if self.operation is None:  # made by Node.__new__, never recorded
            return "Node"
        if self.op == ops.OP_FUNCTION:
            return f"{self.state[0].__name__}Backward"
        return "".join(part.capitalize() for part in self.operation.split("_")) + "Backward"

    cdef str c_repr(self):
        return f"<{self.c_name()}>"

    cdef tuple unpack(self):
        """The saved tensors, checked: still held, and unchanged since they were saved."""
        if self.released:
            raise RuntimeError(FREED_MESSAGE)
        for value, version in zip(self.saved, self.saved_versions):
            if isinstance(value, TensorCore) and (<TensorCore>value).version.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [{(<TensorCore>value).dtype_object.name} tensor of "
                    f"shape {list((<TensorCore>value).sizes)} on "
                    f"{tensor.device_text((<TensorCore>value).device_index)}], saved by "
                    f"{self.c_name()}, is at version {(<TensorCore>value).version.value}; "
                    f"expected version {version} instead. Hint: modify a copy (clone()), or "
                    f"make the change before the operation that saved it.")
        return self.saved


cdef object record(object outputs, int op, tuple inputs, tuple saved, object state):
    """Record a Node for op (ops.pxd) on inputs (tensors or anything else) on outputs (a tensor
    or a tuple of them), making each floating-point output require grad; returns the Node."""
    cls = public.public_class("Node", Node)
    cdef Node node = cls.__new__(cls)
    cdef TensorCore value
    node.op = op
    node.operation = ops.gradient_name(op)
    edges = []
    for operand in inputs:
        if isinstance(operand, TensorCore) and (<TensorCore>operand).grad_required:
            value = operand
            edges.append(value if value.grad_node is None else (value.grad_node,
                                                                 value.output_number))
        else:
            edges.append(None)
    node.edges = tuple(edges)
    node.inputs_meta = tuple(meta_of(operand) for operand in inputs)
    node.saved = saved
    node.saved_versions = tuple((<TensorCore>item).version.value
                                if isinstance(item, TensorCore) else None for item in saved)
    node.state = state
    results = outputs if isinstance(outputs, tuple) else (outputs,)
    node.outputs_meta = tuple(meta_of(result) for result in results)
    node.stream = None
    for number, result in enumerate(results):
        if isinstance(result, TensorCore) and (<TensorCore>result).dtype_object.floating:
            value = result
            value.grad_required = True
            value.grad_node = node
            value.output_number = number
            if value.device_index != tensor.CPU and node.stream is None:
                node.stream = _stream.current_stream(value.device_index)
    return node


# --------------------------------------------------------------------------------------------
# Gradients of the operations, by the gradient names of the op table (ops.pyx). Each takes the
# Node and the gradients of its outputs, and returns one gradient per operand (None where none
# is needed), at the shape the operation broadcast the operands to; BackwardPass reduces it
# (sum_to).


cdef TensorCore zeros_of(tuple meta):
    sizes, dtype, device = meta
    return fill_(<TensorCore>new_empty(sizes, dtype, device), 0)


cdef bint wanted(Node node, int index):
    return node.edges[index] is not None


def add_gradient(Node node, tuple grads):
    return (grads[0], grads[0])


def sub_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    if node.state:  # scalar - tensor
        return (neg(g), None)
    return (g, neg(g) if wanted(node, 1) else None)


def mul_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    a, b = node.saved
    return (mul(g, b) if wanted(node, 0) else None,
            mul(g, a) if wanted(node, 1) else None)


def div_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    cdef TensorCore a = node.saved[0]
    b = node.saved[1]
    if node.state:  # scalar b / tensor a: d/da = -b / a**2
        return (neg(truediv(mul(g, b), mul(a, a))), None)
    return (truediv(g, b) if wanted(node, 0) else None,
            neg(truediv(mul(g, a), mul(b, b))) if wanted(node, 1) else None)


def fill_gradient(Node node, tuple grads):
    # fill_() and zero_() of a tensor with history: the old values no longer matter.
    return (zeros_of(node.inputs_meta[0]),)


def rounded_div_gradient(Node node, tuple grads):
    # Rounded quotients are piecewise constant: their gradient is zero, as PyTorch's.
    return tuple(zeros_of(meta) if meta is not None else None for meta in node.inputs_meta)


def pow_gradient(Node node, tuple grads):
    # PyTorch's pow_backward: the exponent's gradient is 0 where the exponent is 0 (also at a
    # zero base, where b * a ** (b - 1) would be nan); the base's is 0 where the base is 0 and
    # the exponent >= 0 (where a ** b * log(a) would be nan), -inf times g where it is < 0.
    cdef TensorCore g = grads[0]
    cdef TensorCore a = node.saved[0]
    b = node.saved[1]
    if node.state:  # scalar b ** tensor a: d/da = b ** a * log(b)
        log_base = math.log(b) if b > 0 else (-math.inf if b == 0 else math.nan)
        gradient = mul(g, mul(node.saved[2], log_base))
        if b == 0:
            gradient = where(ge(a, 0), 0, gradient)
        return (gradient, None)
    grad_a = grad_b = None
    if wanted(node, 0):
        if isinstance(b, TensorCore):
            grad_a = where(eq(b, 0), 0, mul(g, mul(power(a, sub(b, 1)), b)))
        elif b == 0:  # d/da a**0 = 0, also at a = 0
            grad_a = zeros_of(node.inputs_meta[0])
        else:
            grad_a = mul(g, mul(power(a, b - 1), b))
    if wanted(node, 1):  # d/db a**b = a**b * log(a)
        gradient = mul(g, mul(node.saved[2], log(a)))
        grad_b = where(eq(a, 0), where(ge(b, 0), 0, gradient), gradient)
    return (grad_a, grad_b)


def neg_gradient(Node node, tuple grads):
    return (neg(grads[0]),)


def abs_gradient(Node node, tuple grads):
    # g * sign(x), a product as PyTorch's (so an infinite g at x = 0 gives nan, not 0).
    cdef TensorCore g = grads[0], x = node.saved[0]
    sign = sub(copies.to(gt(x, 0), None, x.dtype_object, False, False),
               copies.to(lt(x, 0), None, x.dtype_object, False, False))
    return (mul(g, sign),)


def relu_gradient(Node node, tuple grads):  # saved: the output
    return (where(gt(node.saved[0], 0), grads[0], 0),)


def sin_gradient(Node node, tuple grads):
    return (mul(grads[0], cos(node.saved[0])),)


def cos_gradient(Node node, tuple grads):
    return (neg(mul(grads[0], sin(node.saved[0]))),)


def exp_gradient(Node node, tuple grads):  # saved: the output
    return (mul(grads[0], node.saved[0]),)


def sqrt_gradient(Node node, tuple grads):  # saved: the output
    return (truediv(grads[0], mul(node.saved[0], 2)),)


def log_gradient(Node node, tuple grads):
    return (truediv(grads[0], node.saved[0]),)


cdef TensorCore spread(TensorCore g, tuple sizes, tuple dims, bint keepdim):
    """The gradient of a sum over dims: g, with the reduced dimensions restored, read at every
    index of them (a view, by expand())."""
    if not keepdim:
        for dim in dims:  # in increasing order, so each lands where it was
            g = g.c_unsqueeze(dim)
    return g.c_expand(sizes)


def sum_gradient(Node node, tuple grads):
    dims, keepdim = node.state
    return (spread(grads[0], node.inputs_meta[0][0], dims, keepdim),)


def mean_gradient(Node node, tuple grads):
    dims, keepdim = node.state
    sizes = node.inputs_meta[0][0]
    count = math.prod(sizes[dim] for dim in dims)
    return (truediv(spread(grads[0], sizes, dims, keepdim), count),)


def extreme_gradient(Node node, tuple grads):
    # Shared evenly among the elements equal to the maximum (or minimum), as PyTorch's max().
    cdef TensorCore x = node.saved[0]
    extreme = maximum(x) if node.op == ops.OP_MAX else minimum(x)
    mask = copies.to(eq(x, extreme), None, x.dtype_object, False, False)
    return (truediv(mul(grads[0], mask), sum_over(mask, None, False)),)


def reshape_gradient(Node node, tuple grads):
    return (copies.reshape(grads[0], (node.inputs_meta[0][0],)),)


def transpose_gradient(Node node, tuple grads):
    first, second = node.state
    return ((<TensorCore>grads[0]).c_transpose(first, second),)


def expand_gradient(Node node, tuple grads):
    return (grads[0],)  # sum_to reduces the expanded dimensions


def getitem_gradient(Node node, tuple grads):
    cdef TensorCore whole = zeros_of(node.inputs_meta[0])
    copies.setitem(whole, node.state, grads[0])
    return (whole,)


def setitem_gradient(Node node, tuple grads):
    # self[key] = value: the old values' gradient is g with the selection zeroed; the value's
    # is g's selection (sum_to reduces it where the value broadcast).
    cdef TensorCore g = grads[0]
    grad_self = grad_value = None
    if wanted(node, 0):
        grad_self = copies.clone(g)
        copies.setitem(grad_self, node.state, 0)
    if wanted(node, 1):
        grad_value = copies.clone(g.c_getitem(node.state))
    return (grad_self, grad_value)


def clone_gradient(Node node, tuple grads):
    return (grads[0],)


def to_gradient(Node node, tuple grads):
    sizes, dtype, device = node.inputs_meta[0]
    return (copies.to(grads[0], device_text(device), dtype, False, False),)


def add_scaled_gradient(Node node, tuple grads):
    cdef TensorCore g = grads[0]
    return (g, mul(g, node.state) if wanted(node, 1) else None)


def clamp_gradient(Node node, tuple grads):
    # Through where x is inside [min, max]; to a tensor bound where it is the one that applies.
    cdef TensorCore g = grads[0]
    x, low, high = node.saved
    grad_x = g
    if low is not None:
        grad_x = where(lt(x, low), 0, grad_x)
    if high is not None:
        grad_x = where(gt(x, high), 0, grad_x)
    return (grad_x,
            where(lt(x, low), g, 0) if wanted(node, 1) else None,
            where(gt(x, high), g, 0) if wanted(node, 2) else None)


def where_gradient(Node node, tuple grads):
    condition = node.saved[0]
    return (None,
            where(condition, grads[0], 0) if wanted(node, 1) else None,
            where(condition, 0, grads[0]) if wanted(node, 2) else None)


def matmul_gradient(Node node, tuple grads):
    # Through the operands as matrices (a 1-D a as a row, a 1-D b as a column) and the gradient
    # with those dimensions restored: grad_a = g @ b^T, grad_b = a^T @ g, each at the broadcast
    # batch shape (sum_to reduces it). Each operand is saved only when the other's gradient is
    # wanted (reduction.pyx), so shapes come from inputs_meta.
    cdef TensorCore g = grads[0], grad_b
    a, b = node.saved
    a_dims, b_dims = len(node.inputs_meta[0][0]), len(node.inputs_meta[1][0])
    if a_dims == 1:
        g = g.c_unsqueeze(len(g.sizes) - (1 if b_dims > 1 else 0))
    if b_dims == 1:
        g = g.c_unsqueeze(len(g.sizes))
    grad_a = grad_b = None
    if wanted(node, 0):
        b_matrix = (<TensorCore>b).c_unsqueeze(1) if b_dims == 1 else b
        grad_a = matmul(g, (<TensorCore>b_matrix).c_transpose(-1, -2))
    if wanted(node, 1):
        a_matrix = (<TensorCore>a).c_unsqueeze(0) if a_dims == 1 else a
        grad_b = matmul((<TensorCore>a_matrix).c_transpose(-1, -2), g)
        if b_dims == 1:  # drop the column's dimension of 1
            grad_b = copies.reshape(grad_b, (grad_b.sizes[:-1],))
    return (grad_a, grad_b)


def function_gradient(Node node, tuple grads):
    cls, ctx = node.state
    result = cls.backward(ctx, *grads)
    result = result if isinstance(result, tuple) else (result,)
    if len(result) != len(node.edges):
        raise RuntimeError(f"function {cls.__name__}.backward returned an incorrect number of "
                           f"gradients (expected {len(node.edges)}, got {len(result)}): one per "
                           "argument of forward() after ctx, None for those without one")
    for index, gradient in enumerate(result):
        if gradient is not None and node.edges[index] is not None and \
                not isinstance(gradient, TensorCore):
            raise TypeError(f"function {cls.__name__}.backward returned a "
                            f"{type(gradient).__name__} as gradient {index}; expected a tensor "
                            "or None")
    return result


FORMULAS = {
    "add": add_gradient, "sub": sub_gradient, "mul": mul_gradient, "div": div_gradient,
    "rounded_div": rounded_div_gradient, "fill": fill_gradient, "pow": pow_gradient,
    "neg": neg_gradient,
    "abs": abs_gradient, "relu": relu_gradient, "sin": sin_gradient, "cos": cos_gradient,
    "exp": exp_gradient, "sqrt": sqrt_gradient, "log": log_gradient, "sum": sum_gradient,
    "mean": mean_gradient, "max": extreme_gradient, "min": extreme_gradient,
    "reshape": reshape_gradient,
    "transpose": transpose_gradient, "expand": expand_gradient, "getitem": getitem_gradient,
    "setitem": setitem_gradient,
    "clone": clone_gradient, "pin_memory": clone_gradient, "to": to_gradient,
    "add_scaled": add_scaled_gradient,
    "clamp": clamp_gradient, "where": where_gradient, "matmul": matmul_gradient,
    "function": function_gradient,
}


def formulas_by_op(dict formulas):
    """The formula of each op, by its code (None for an op without gradient), from formulas
    (gradient name -> function): a RuntimeError names every gradient name of the op table
    (ops.pyx) that formulas lacks and every formula no op names (Note [Op table])."""
    names = gradient_names()
    missing = [name for name in names if name not in formulas]
    unused = [name for name in formulas if name not in names]
    if missing or unused:
        raise RuntimeError(
            "the op table and the gradient formulas differ: "
            + "; ".join(([f"no formula for {', '.join(missing)}"] if missing else [])
                        + ([f"formulas for no op: {', '.join(unused)}"] if unused else []))
            + " (runtime/kernels/ops.pyx, ROWS; runtime/autograd/engine.pyx, FORMULAS)")
    return [None if ops.gradient_name(op) is None else formulas[ops.gradient_name(op)]
            for op in range(ops.OP_COUNT)]


# Resolved once, at import: a Node finds its formula by its op's code (by_op[node.op]).
cdef list by_op = formulas_by_op(FORMULAS)


# --------------------------------------------------------------------------------------------
# Running the tape backwards (Note [Tape])


cdef TensorCore sum_to(TensorCore gradient, tuple meta, Node node, int index):
    """gradient, computed at a shape its operand broadcast to, summed down to the operand's
    shape, in the operand's dtype and on its device."""
    sizes, dtype, device = meta
    if gradient.sizes != sizes:
        lead = len(gradient.sizes) - len(sizes)
        if lead < 0 or any(size != 1 and size != gradient.sizes[lead + dim]
                           for dim, size in enumerate(sizes)):
            raise RuntimeError(f"Function {node.c_name()} returned an invalid gradient at index "
                               f"{index} - got {list(gradient.sizes)} but expected shape "
                               f"compatible with {list(sizes)}")
        dims = tuple(range(lead)) + tuple(lead + dim for dim, size in enumerate(sizes)
                                          if size == 1 and gradient.sizes[lead + dim] != 1)
        if dims:
            gradient = reduction.sum_over(gradient, dims, True)
        gradient = copies.reshape(gradient, (sizes,))
    if gradient.dtype_object is not dtype or gradient.device_index != device:
        gradient = copies.to(gradient, tensor.device_text(device), dtype, False, False)
    return gradient


cdef TensorCore added(object total, TensorCore gradient):
    return gradient if total is None else elementwise.add(<TensorCore>total, gradient)


cdef int accumulate_into_grad(TensorCore leaf, TensorCore gradient) except -1:
    """Add gradient into leaf.grad: allocated (contiguous) the first time, in place after."""
    if leaf.grad_value is None:
        target = tensor.new_empty(leaf.sizes, leaf.dtype_object, leaf.device_index)
        copies.copy_(<TensorCore>target, gradient, False)
        leaf.grad_value = target
    else:
        elementwise.binary(<TensorCore>leaf.grad_value, gradient, ops.OP_ADD, False, True,
                           "grad accumulation")
    return 0


cdef class StreamOrder:
    """Orders Nodes that ran on different streams (Note [Tape]): per device, the stream the
    last Node ran on, starting from the caller's."""
    cdef dict callers
    cdef dict last

    def __cinit__(self):
        self.callers = {}
        self.last = {}

    cdef object enter(self, Node node):
        """Make node's stream wait for the previous one; returns the stream context to run
        node in, or None when its stream is the current one."""
        if node.stream is None:
            return None
        cdef StreamCore target = node.stream
        cdef int device = target.device_index
        if device not in self.callers:
            self.callers[device] = _stream.current_stream(device)
        cdef StreamCore previous = self.last.get(device, self.callers[device])
        if previous.handle != target.handle:
            target.c_wait_stream(previous)
        self.last[device] = target
        if (<StreamCore>self.callers[device]).handle == target.handle:
            return None
        return _stream.stream_context(target)

    cdef int finish(self) except -1:
        for device, last in self.last.items():
            caller = self.callers[device]
            if (<StreamCore>caller).handle != (<StreamCore>last).handle:
                (<StreamCore>caller).c_wait_stream(last)
        return 0


cdef list topological_order(list starts):
    """The Nodes reachable from starts, each after every Node that feeds it a gradient."""
    dependencies = {}
    seen = set(starts)
    pending = list(starts)
    while pending:
        node = pending.pop()
        for edge in (<Node>node).edges:
            if isinstance(edge, tuple):
                child = edge[0]
                dependencies[child] = dependencies.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    pending.append(child)
    order = []
    ready = [node for node in starts if dependencies.get(node, 0) == 0]
    ready = list(dict.fromkeys(ready))
    while ready:
        node = ready.pop()
        order.append(node)
        for edge in (<Node>node).edges:
            if isinstance(edge, tuple):
                child = edge[0]
                dependencies[child] -= 1
                if dependencies[child] == 0:
                    ready.append(child)
    return order


cdef class BackwardPass:
    """One walk of the tape from some outputs. Accumulating (backward()), the gradients
    reaching leaves are added into their .grad; otherwise (grad()) the gradient of each input
    is kept in results (None where none reached it) and every .grad is left alone."""
    cdef bint accumulate
    cdef bint retain_graph
    cdef list results
    cdef dict leaf_targets      # id(leaf input) -> its indices in inputs
    cdef dict node_targets      # (Node, output) of a computed input -> its indices in inputs
    cdef dict buffers           # Node -> the gradients of its outputs received so far

    def __cinit__(self, tuple inputs, bint retain_graph):
        self.accumulate = inputs is None
        self.retain_graph = retain_graph
        self.results = [] if self.accumulate else [None] * len(inputs)
        self.leaf_targets, self.node_targets, self.buffers = {}, {}, {}
        for index, value in enumerate(inputs or ()):
            if (<TensorCore>value).grad_node is None:
                self.leaf_targets.setdefault(id(value), []).append(index)
            else:
                self.node_targets.setdefault(((<TensorCore>value).grad_node,
                                              (<TensorCore>value).output_number),
                                             []).append(index)

    cdef int deliver(self, object edge, TensorCore gradient) except -1:
        """Pass gradient along edge: into a leaf, or into the Node's buffer."""
        if isinstance(edge, TensorCore):
            if self.accumulate:
                accumulate_into_grad(edge, gradient)
            for index in self.leaf_targets.get(id(edge), ()):
                self.results[index] = added(self.results[index], gradient)
            return 0
        node, number = edge
        slots = self.buffers.get(node)
        if slots is None:
            slots = self.buffers[node] = [None] * len((<Node>node).outputs_meta)
        slots[number] = added(slots[number], gradient)
        return 0

    cdef list run(self, tuple roots, tuple root_grads):
        cdef StreamOrder streams = StreamOrder()
        cdef Node node
        previous_mode = tensor.grad_enabled()
        tensor.set_grad_enabled(False)  # the backward pass records nothing
        try:
            starts = []
            for root, gradient in zip(roots, root_grads):
                edge = root if (<TensorCore>root).grad_node is None else \
                    ((<TensorCore>root).grad_node, (<TensorCore>root).output_number)
                self.deliver(edge, gradient)
                if isinstance(edge, tuple):
                    starts.append(edge[0])
            order = topological_order(starts)
            needed = self.needed_nodes(order)
            for node in order:  # freed or changed saved tensors: refused before any .grad moves
                if node in needed:
                    node.unpack()
            for node in order:
                grads = self.buffers.pop(node, None)
                if grads is None:
                    continue
                for number, gradient in enumerate(grads):
                    for index in self.node_targets.get((node, number), ()):
                        self.results[index] = gradient
                if node not in needed:
                    continue
                context = streams.enter(node)
                if context is None:
                    self.run_node(node, grads)
                else:
                    with context:
                        self.run_node(node, grads)
            streams.finish()
        finally:
            tensor.set_grad_enabled(previous_mode)
        return self.results

    cdef set needed_nodes(self, list order):
        """The Nodes whose gradients reach a target: any leaf (accumulating), or an input."""
        needed = set()
        for node in reversed(order):  # every Node after those it feeds
            for edge in (<Node>node).edges:
                if isinstance(edge, TensorCore):
                    if self.accumulate or id(edge) in self.leaf_targets:
                        needed.add(node)
                        break
                elif edge is not None and (edge[0] in needed or edge in self.node_targets):
                    needed.add(node)
                    break
        return needed

    cdef int run_node(self, Node node, list grads) except -1:
        node.unpack()  # refuses freed or changed saved tensors
        for number, gradient in enumerate(grads):
            # A tensor output no gradient reached counts as zero.
            if gradient is None and node.outputs_meta[number] is not None:
                grads[number] = zeros_of(node.outputs_meta[number])
        input_grads = by_op[node.op](node, tuple(grads))
        if not self.retain_graph and node.saved:
            node.saved = ()
            node.saved_versions = ()
            node.released = True
        for index, edge in enumerate(node.edges):
            if edge is not None and input_grads[index] is not None:
                self.deliver(edge, sum_to(input_grads[index], node.inputs_meta[index], node,
                                          index))
        return 0


cdef tuple tensors_arg(object value, str argument):
    if isinstance(value, TensorCore):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(item, TensorCore) for item in value):
        return tuple(value)
    raise TypeError(f"{argument} must be a tensor or a sequence of tensors, got "
                    f"{errors.shown(value)}")


cdef tuple root_gradients(tuple outputs, object grad_outputs):
    """The gradient each output starts from: grad_outputs (a tensor or a sequence with a tensor
    or None per output), a 1 for a one-element output otherwise."""
    for index, output in enumerate(outputs):
        if not (<TensorCore>output).grad_required:
            raise RuntimeError(f"element {index} of tensors does not require grad and does not "
                               "have a grad_fn")
    given = (None,) * len(outputs) if grad_outputs is None else \
        ((grad_outputs,) if isinstance(grad_outputs, TensorCore) else tuple(grad_outputs))
    if len(given) != len(outputs):
        raise ShapeError(f"grad_outputs has {len(given)} entries for {len(outputs)} outputs")
    grads = []
    for index, (output, gradient) in enumerate(zip(outputs, given)):
        out = <TensorCore>output
        if gradient is None:
            if out.element_count != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(output {index} has shape {out.sizes}); pass "
                                   "grad_outputs (or gradient)")
            gradient = copies.fill_(<TensorCore>tensor.new_empty(out.sizes, out.dtype_object,
                                                                 out.device_index), 1)
        elif not isinstance(gradient, TensorCore):
            raise TypeError(f"grad_outputs[{index}] must be a tensor or None, got "
                            f"{type(gradient).__name__}")
        elif (<TensorCore>gradient).sizes != out.sizes:
            raise ShapeError(f"Mismatch in shape: grad_output[{index}] has a shape of "
                             f"{(<TensorCore>gradient).sizes} and output[{index}] has a shape "
                             f"of {out.sizes}")
        else:
            tensor.check_device_and_dtype(out, gradient, f"grad_outputs[{index}]")
        grads.append(gradient)
    return tuple(grads)


cdef int retain_graph_arg(object value) except -1:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"retain_graph must be a bool or None, got {type(value).__name__} "
                        f"({errors.shown(value)})")
    return 0


cdef object backward_from(TensorCore output, object gradient, object retain_graph):
    """output.backward(gradient, retain_graph): accumulate into the leaves' .grad."""
    retain_graph_arg(retain_graph)
    if gradient is not None and not isinstance(gradient, TensorCore):
        raise TypeError(f"gradient must be a tensor or None, got {type(gradient).__name__}")
    cdef tuple roots = (output,)
    cdef tuple grads = root_gradients(roots, gradient)
    BackwardPass(None, bool(retain_graph)).run(roots, grads)
    return None


cdef object grad(object outputs, object inputs, object grad_outputs, object retain_graph,
                 bint create_graph, bint allow_unused):
    if create_graph:
        raise ValueError("grad: create_graph=True is not supported: the backward pass is not "
                         "recorded, so gradients of gradients cannot be taken")
    cdef tuple output_tensors = tensors_arg(outputs, "outputs")
    cdef tuple input_tensors = tensors_arg(inputs, "inputs")
    retain_graph_arg(retain_graph)
    if grad_outputs is not None and not isinstance(grad_outputs, (TensorCore, tuple, list)):
        raise TypeError(f"grad_outputs must be a tensor, a sequence of tensors (or None) or "
                        f"None, got {type(grad_outputs).__name__}")
    for index, value in enumerate(input_tensors):
        if not (<TensorCore>value).grad_required:
            raise RuntimeError(f"One of the differentiated Tensors does not require grad "
                               f"(inputs[{index}])")
    cdef tuple grads = root_gradients(output_tensors, grad_outputs)
    results = BackwardPass(input_tensors, bool(retain_graph)).run(output_tensors, grads)
    for index, result in enumerate(results):
        if result is None and not allow_unused:
            raise RuntimeError(f"The differentiated Tensor at index {index} appears to not have "
                               "been used in the graph. Set allow_unused=True if this is the "
                               "desired behavior.")
    return tuple(results)


# --------------------------------------------------------------------------------------------
# Functions with their own backward


class FunctionCtx:
    """What forward() hands backward(): the tensors saved for it, and any attribute set."""

    def __init__(self):
        self._to_save = ()
        self._node = None
        self._needs_input_grad = ()

    def c_save_for_backward(self, tensors):
        for index, value in enumerate(tensors):
            if value is not None and not isinstance(value, TensorCore):
                raise TypeError(f"save_for_backward() takes tensors or None, got a "
                                f"{type(value).__name__} as argument {index}")
        self._to_save = tuple(tensors)

    def c_saved_tensors(self):
        if self._node is None:  # still in forward(), or nothing was recorded
            return self._to_save
        return (<Node>self._node).unpack()

    def c_needs_input_grad(self):
        return self._needs_input_grad


class FunctionCore:
    """The base of functions defined by forward() and backward() static methods."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Each subclass gets its own apply(), which knows the class (PyTorch's is a
        # classmethod); the public class keeps the one the schema declares.
        if "apply" not in cls.__dict__:
            cls.apply = staticmethod(functools.partial(run_function, cls))


cdef object apply_function(tuple args):
    raise TypeError("apply() runs a subclass of tensorplay.autograd.Function that defines "
                    "forward() and backward(): call MyFunction.apply(...), not Function.apply")


def run_function(cls, *args):
    """cls.forward(ctx, *args) with grad mode off, its outputs recorded with cls.backward as
    their gradient when an argument requires grad."""
    for method in ("forward", "backward"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"{cls.__name__} must define a static method {method}(ctx, ...) to "
                            "be applied")
    ctx = public.public_class("FunctionCtx", FunctionCtx)()
    needs = tuple(isinstance(value, TensorCore) and (<TensorCore>value).grad_required
                  for value in args)
    ctx._needs_input_grad = needs
    cdef bint track = any(needs) and tensor.grad_enabled()
    previous_mode = tensor.grad_enabled()
    tensor.set_grad_enabled(False)
    try:
        outputs = cls.forward(ctx, *args)
    finally:
        tensor.set_grad_enabled(previous_mode)
    if not track:
        return outputs
    results = outputs if isinstance(outputs, tuple) else (outputs,)
    # An argument returned as it is becomes a new view, so that its own history stays intact.
    results = tuple(tensor.strided_view(value, (<TensorCore>value).sizes,
                                        (<TensorCore>value).element_strides)
                    if isinstance(value, TensorCore) and any(value is arg for arg in args)
                    else value for value in results)
    ctx._node = record(results, ops.OP_FUNCTION, args, ctx._to_save, (cls, ctx))
    return results if isinstance(outputs, tuple) else results[0]


tensor.install_recorder(record)
