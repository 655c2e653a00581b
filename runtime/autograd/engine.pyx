# cython: language_level=3
"""Reverse-mode automatic differentiation: a tape of the operations on tensors that require grad.

See docs/design.md, "Autograd".

Note [Tape]
An operation with an operand that requires grad, run while grad mode is on (outside no_grad()),
records a Node on its output (tape.pyx, record(), which the tensor layer calls through its
recorder: core.pyx, Note [Tape recorder]): the operation; one edge per operand, which is the
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
formula (formulas.pyx), computed at the shape the operation broadcast its operands to, and
reduced to each operand's shape (sum_to), so no operation needs its own rule for broadcasting.
A gradient reaching a leaf is added into its .grad, which is allocated on the first backward
pass and updated in place afterwards, so its address stays fixed (backward), or kept as the
answer (grad). On the first pass the leaf takes the gradient itself as its .grad, with no copy,
when nothing else can see that memory (PyTorch's AccumulateGrad "steals" it likewise:
torch/csrc/autograd/functions/accumulate_grad.h): a CUDA tensor of the leaf's shape and dtype,
contiguous over the whole of a block of our allocator that no other tensor holds, that a Node's
formula made and the engine holds once. A gradient the caller passed in, or one that a formula passed on to several operands,
is copied. Unless retain_graph, each Node drops its saved tensors once run, and running it
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
optimisers update parameters under no_grad()); a view's goes through its base (below).

Note [Views and in-place changes]
As PyTorch's (torch/csrc/autograd/variable.h, "Views and in-place operations"): a tensor made by
indexing, view(), transpose(), expand() and the other view operations is a differentiable view
of its base, the tensor whose memory it shows that is no such view itself (a view of a view
has the first one's base); detach() shares memory without being one. An in-place change of a
view, while it or an operand requires grad, computes the out-of-place result from the view as
for any tensor and copies it in; then the base takes a CopySlices Node of its old history and
the result, whose gradient gives the result the base's gradient at the view's elements and the
old values the rest, and the view takes an AsStrided Node of its place in the base
(core.view_state: the base's layout, and the view's sizes, strides and offset in its memory).
Every other view of the base may now show changed values with an out-of-date history; the
version counter they share tells: a view whose memory changed since its history was set
(core.stale) takes, before anything reads its history (tracked(), record(), requires_grad,
grad_fn, is_leaf, a backward pass's roots and inputs, hooks), the AsStrided Node of its place
in the base as the base is now (core.refresh_view), as PyTorch regenerates a view's grad_fn.
Refused, with PyTorch's messages: a view of a leaf that requires grad, a view made while grad
mode was off, and a view that reads an element at several indices (expand). Unlike PyTorch,
the pieces of split(), chunk() and unbind() may be changed in place: each is a view of its own.
"""
import functools
import itertools
import threading

from cpython.ref cimport Py_REFCNT

from tensorplay._runtime.autograd cimport formulas
from tensorplay._runtime.base cimport errors, public
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.tensor cimport copies, core as tensor, elementwise, reduction
from tensorplay._runtime.autograd.tape cimport Node, record
from tensorplay._runtime.devices.stream cimport StreamCore
from tensorplay._runtime.tensor.core cimport DeviceStorage, TensorCore

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
            copies.zero_(<TensorCore>each.grad)
    return None


class EnableGradCore(GradModeCore):
    inside = True


def run_each_call_in(cls, mode, function, str name):
    """function decorated so that each call runs inside a new cls(mode) block."""
    if not callable(function):
        raise TypeError(f"{name}() decorates a function, got {type(function).__name__}")

    @functools.wraps(function)
    def decorated(*args, **kwargs):
        with cls(mode):
            return function(*args, **kwargs)
    return decorated


class SetGradEnabledCore:
    """set_grad_enabled(mode), as PyTorch's: the mode is set when the object is made, so a
    plain call sets it for the thread; as a block, the mode from before comes back at its end;
    as a decorator, the making is undone and each call of the function runs in the mode."""

    def init(self, mode):  # a bool (the wrapper's check)
        self.mode = mode
        self.previous = tensor.grad_enabled()
        tensor.set_grad_enabled(mode)

    def c_enter(self):
        return None  # set already, when made

    def c_exit(self, exc_type, exc_value, traceback):
        tensor.set_grad_enabled(self.previous)

    def c_call(self, function):
        tensor.set_grad_enabled(self.previous)  # made for the decorator only
        return run_each_call_in(type(self), self.mode, function, "set_grad_enabled")

    def c_repr(self):
        return f"tensorplay.set_grad_enabled(mode={self.mode})"


# Whether this thread is inside an inference_mode(True) block (is_inference_mode_enabled()).
_inference = threading.local()


cdef bint is_inference_mode_enabled():
    return getattr(_inference, "enabled", False)


class InferenceModeCore:
    """inference_mode(mode), as PyTorch's: grad mode off (on for mode=False) inside the block
    or the decorated function, and the thread's inference flag set to mode. PyTorch also marks
    the tensors made inside as inference tensors, which autograd then refuses; here they are
    ordinary tensors that do not require grad, as under no_grad() (docs/design.md, "Where we
    differ from the API reference")."""

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # @inference_mode, without a call
            return cls()(mode)
        return super().__new__(cls)

    def init(self, mode):  # a bool (the wrapper's check)
        self.mode = mode
        self.previous = []  # one entry per enclosing use of this object, so it may nest

    def c_enter(self):
        self.previous.append((tensor.grad_enabled(), is_inference_mode_enabled()))
        tensor.set_grad_enabled(not self.mode)
        _inference.enabled = self.mode

    def c_exit(self, exc_type, exc_value, traceback):
        grad_mode, _inference.enabled = self.previous.pop()
        tensor.set_grad_enabled(grad_mode)

    def c_call(self, function):
        return run_each_call_in(type(self), self.mode, function, "inference_mode")

    def c_repr(self):
        return f"tensorplay.inference_mode(mode={self.mode})"


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


cdef bint stealable(TensorCore leaf, TensorCore gradient):
    """Whether leaf may take gradient as its first .grad (Note [Tape]): one reference, the
    caller's, and the whole of a block of our allocator that no other tensor holds (it may be a
    view of a tensor that is gone: the transpose of a column-major weight gradient)."""
    if not (Py_REFCNT(gradient) == 1 and gradient.grad_node is None
            and not gradient.grad_required and gradient.device_index != tensor.CPU
            and gradient.device_index == leaf.device_index
            and gradient.dtype_object is leaf.dtype_object and gradient.sizes == leaf.sizes
            and tensor.is_contiguous(gradient) and isinstance(gradient.owner, DeviceStorage)):
        return False
    cdef DeviceStorage storage = gradient.owner
    # Two references to the storage: the gradient's, and storage's here.
    return (Py_REFCNT(storage) == 2 and gradient.data == storage.pointer and
            <size_t>(gradient.element_count * gradient.dtype_object.itemsize) == storage.nbytes)


# Note [Gradient hooks]
# Tensor.register_hook(hook) and retain_grad(), as PyTorch's. A hook runs on the gradient of
# its tensor when the backward pass has it whole, and what it returns (a tensor) replaces it:
# - on a non-leaf, the hooks are kept on the Node that computed it, for its output number, and
#   run before that Node's formula reads the gradient (BackwardPass.run);
# - on a leaf, they are kept on the tensor, and its gradient is summed over every path first
#   (leaf_buffers) and then passed through them before it is accumulated into .grad, so each
#   hook runs once per pass, as PyTorch's hooks before AccumulateGrad.
# retain_grad() of a non-leaf gives it a .grad: the Node keeps a one-item list, shared with
# the tensor (retained_grad), which the gradient fills after the hooks (PyTorch runs
# retains_grad last too), accumulating over passes. The Node holds the list, not the tensor,
# so the tensor's memory goes when the tensor does.
_hook_keys = itertools.count()


class RemovableHandleCore:
    """Removes one hook from the dict that holds it."""

    def __init__(self, hooks, key):
        self._hooks = hooks
        self._key = key

    def c_remove(self):
        self._hooks.pop(self._key, None)


cdef object removable_handle(dict hooks, object key):
    return public.public_class("RemovableHandleCore", RemovableHandleCore)(hooks, key)


cdef object register_hook(TensorCore tensor, object hook):
    if not callable(hook):
        raise TypeError(f"hook must be callable as hook(grad), got {errors.shown(hook)}")
    current(tensor)
    if not tensor.grad_required:  # PyTorch's message
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    cdef Node node
    if tensor.grad_node is None:
        if tensor.grad_hooks is None:
            tensor.grad_hooks = {}
        hooks = tensor.grad_hooks
    else:
        node = tensor.grad_node
        if node.hooks is None:
            node.hooks = {}
        hooks = node.hooks.setdefault(tensor.output_number, {})
    key = next(_hook_keys)
    hooks[key] = hook
    return removable_handle(hooks, key)


cdef object retain_grad(TensorCore tensor):
    current(tensor)
    if not tensor.grad_required:  # PyTorch's message
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if tensor.grad_node is None or tensor.retained_grad is not None:
        return None  # a leaf keeps its .grad anyway
    cdef Node node = tensor.grad_node
    tensor.retained_grad = [None]
    if node.retained is None:
        node.retained = {}
    node.retained[tensor.output_number] = tensor.retained_grad
    return None


cdef bint retains_grad(TensorCore tensor):
    return tensor.retained_grad is not None


cdef object hooked(dict hooks, object gradient):
    """gradient passed through hooks, in registration order."""
    for hook in tuple(hooks.values()):  # a hook may remove itself
        replaced = hook(gradient)
        if replaced is not None:
            if not isinstance(replaced, TensorCore) or \
                    (<TensorCore>replaced).sizes != (<TensorCore>gradient).sizes:
                raise RuntimeError(f"hook {errors.shown(hook)} returned "
                                   f"{errors.shown(replaced)}; a hook returns None or a tensor "
                                   f"of the gradient's shape {list((<TensorCore>gradient).sizes)}")
            gradient = replaced
    return gradient


cdef int run_node_hooks(Node node, list grads) except -1:
    """The hooks and retained gradients of node's outputs, on grads (Note [Gradient hooks])."""
    for number in range(len(grads)):
        if grads[number] is None:
            continue
        if node.hooks is not None and node.hooks.get(number):
            grads[number] = hooked(node.hooks[number], grads[number])
        if node.retained is not None and number in node.retained:
            slot = node.retained[number]
            slot[0] = copies.clone(<TensorCore>grads[number]) if slot[0] is None else \
                elementwise.add(<TensorCore>slot[0], grads[number])
    return 0


cdef int accumulate_into_grad(TensorCore leaf, TensorCore gradient) except -1:
    """Add gradient into leaf.grad: taken or copied (contiguous) the first time, in place
    after. The caller holds gradient's only reference when a Node's formula made it."""
    if leaf.grad_value is None and stealable(leaf, gradient):
        gradient.view_base = None  # it alone sees its memory now: no view of another
        leaf.grad_value = gradient
    elif leaf.grad_value is None:
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
    cdef dict leaf_buffers      # id(leaf with hooks) -> [leaf, its gradient summed so far]

    def __cinit__(self, tuple inputs, bint retain_graph):
        self.accumulate = inputs is None
        self.retain_graph = retain_graph
        self.results = [] if self.accumulate else [None] * len(inputs)
        self.leaf_targets, self.node_targets, self.buffers = {}, {}, {}
        self.leaf_buffers = {}
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
            if (<TensorCore>edge).grad_hooks:  # summed first, hooked once (finish_leaves)
                entry = self.leaf_buffers.setdefault(id(edge), [edge, None])
                entry[1] = added(entry[1], gradient)
                return 0
            return self.deliver_to_leaf(edge, gradient)
        node, number = edge
        slots = self.buffers.get(node)
        if slots is None:
            slots = self.buffers[node] = [None] * len((<Node>node).outputs_meta)
        slots[number] = added(slots[number], gradient)
        return 0

    cdef int deliver_to_leaf(self, TensorCore leaf, TensorCore gradient) except -1:
        if self.accumulate:
            accumulate_into_grad(leaf, gradient)
        for index in self.leaf_targets.get(id(leaf), ()):
            self.results[index] = added(self.results[index], gradient)
        return 0

    cdef int finish_leaves(self) except -1:
        """The gradients of leaves with hooks, each through its hooks, then delivered."""
        while self.leaf_buffers:
            _, (leaf, gradient) = self.leaf_buffers.popitem()
            gradient = hooked((<TensorCore>leaf).grad_hooks, gradient)
            self.deliver_to_leaf(leaf, gradient)
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
                if node.hooks is not None or node.retained is not None:
                    run_node_hooks(node, grads)
                for number in range(len(grads)):  # no loop variable left holding one
                    for index in self.node_targets.get((node, number), ()):
                        self.results[index] = grads[number]
                if node not in needed:
                    continue
                context = streams.enter(node)
                if context is None:
                    self.run_node(node, grads)
                else:
                    with context:
                        self.run_node(node, grads)
            streams.finish()  # the caller's stream waits for every Node's: then the leaves
            self.finish_leaves()
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
                grads[number] = formulas.zeros_of(node.outputs_meta[number])
        input_grads = list(formulas.by_op[node.op](node, tuple(grads)))
        # The output gradients are used up: dropped, so that an input gradient that is a view
        # of one (a transpose's) holds its memory alone and a leaf may take it.
        del grads[:]
        if not self.retain_graph and node.saved:
            node.saved = ()
            node.saved_versions = ()
            node.released = True
        for index, edge in enumerate(node.edges):
            gradient = input_grads[index]
            input_grads[index] = None  # gradient holds it alone, so that a leaf may take it
            if edge is not None and gradient is not None:
                gradient = sum_to(gradient, node.inputs_meta[index], node, index)
                self.deliver(edge, gradient)
        return 0


cdef int current(TensorCore value) except -1:
    """A root or input of a backward pass, or a tensor taking a hook, with a stale view's history
    brought up to date first (Note [Views and in-place changes])."""
    if tensor.stale(value):
        tensor.refresh_view(value)
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
    or None per output, as grad_outputs_arg() checked it), a 1 for a one-element output
    otherwise."""
    for index, output in enumerate(outputs):
        current(output)
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
        elif (<TensorCore>gradient).sizes != out.sizes:
            raise ShapeError(f"Mismatch in shape: grad_output[{index}] has a shape of "
                             f"{(<TensorCore>gradient).sizes} and output[{index}] has a shape "
                             f"of {out.sizes}")
        else:
            tensor.check_device_and_dtype(out, gradient, f"grad_outputs[{index}]")
        grads.append(gradient)
    return tuple(grads)


cdef int grad_outputs_arg(object value) except -1:
    """grad()'s grad_outputs: None, a tensor, or a list or tuple of tensors and Nones, each item
    checked before the tensors' history is (the schema types it so)."""
    if value is None or isinstance(value, TensorCore):
        return 0
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"grad_outputs must be a tensor, a list or tuple of tensors (or None), "
                        f"or None, got {type(value).__name__}")
    for index, gradient in enumerate(value):
        if gradient is not None and not isinstance(gradient, TensorCore):
            raise TypeError(f"grad_outputs[{index}] must be a tensor or None, got "
                            f"{type(gradient).__name__}")
    return 0


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


cdef object backward(object tensors, object grad_tensors, object retain_graph, bint create_graph,
                     object inputs):
    """tensorplay.autograd.backward(): one walk of the tape from every root, accumulating into
    the .grad of the leaves, or, given inputs, into theirs only (leaves or not, as PyTorch)."""
    if create_graph:
        raise ValueError("backward: create_graph=True is not supported: the backward pass is "
                         "not recorded, so gradients of gradients cannot be taken")
    cdef tuple roots = tensors_arg(tensors, "tensors")
    retain_graph_arg(retain_graph)
    if grad_tensors is not None and not isinstance(grad_tensors, (TensorCore, tuple, list)):
        raise TypeError(f"grad_tensors must be a tensor, a sequence of tensors (or None) or "
                        f"None, got {type(grad_tensors).__name__}")
    if isinstance(grad_tensors, (tuple, list)) and len(grad_tensors) != len(roots):
        raise RuntimeError(f"got {len(roots)} tensors and {len(grad_tensors)} gradients")
    cdef tuple targets = None
    if inputs is not None:
        targets = tensors_arg(inputs, "inputs")
        if not targets:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        for index, value in enumerate(targets):
            current(value)
            if not (<TensorCore>value).grad_required:
                raise RuntimeError(f"inputs[{index}] does not require grad, so no gradient can "
                                   "be accumulated into it")
        targets = tuple({id(value): value for value in targets}.values())  # each once
    cdef tuple grads = root_gradients(roots, grad_tensors)
    results = BackwardPass(targets, bool(retain_graph)).run(roots, grads)
    if targets is not None:  # the pass computed only what reaches inputs; an unused one stays
        for value, result in zip(targets, results):
            if result is not None:
                accumulate_into_grad(<TensorCore>value, <TensorCore>result)
    return None


cdef object grad(object outputs, object inputs, object grad_outputs, object retain_graph,
                 bint create_graph, bint allow_unused):
    if create_graph:
        raise ValueError("grad: create_graph=True is not supported: the backward pass is not "
                         "recorded, so gradients of gradients cannot be taken")
    cdef tuple output_tensors = tensors_arg(outputs, "outputs")
    cdef tuple input_tensors = tensors_arg(inputs, "inputs")
    retain_graph_arg(retain_graph)
    grad_outputs_arg(grad_outputs)
    for index, value in enumerate(input_tensors):
        current(value)
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
