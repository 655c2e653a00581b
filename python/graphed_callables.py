"""make_graphed_callables: functions and Modules captured, forward and backward, into CUDA graphs
that share one private pool, and wrapped so that a call is one graph launch forward and one
backward.

Note [Graphed callables]
The recipe is PyTorch's (torch/cuda/graphs.py, make_graphed_callables):
1. check everything (docs/design.md, "Graphed callables", lists the restrictions), so that a
   mistake is reported before any GPU work;
2. name each callable's static input surface: its sample arguments, then a Module's parameters.
   The forward graph reads them; the backward graph computes the gradients of those that
   require grad;
3. warm every callable up num_warmup_iters times on one side stream, each run followed by
   autograd.grad of its outputs that require grad with respect to its surface, so that lazy
   initialisation (kernel loading, allocator growth) of both passes happens outside the
   captures;
4. capture, on that same stream and all into one private pool, the forward graphs in the order
   given, then the backward graphs in reverse order, each an autograd.grad of the captured
   outputs from static gradient buffers. That is the order a training step runs them (forward
   in order, backward in reverse), so a graph may reuse memory an earlier one freed, and the
   replays in that order keep it valid;
5. wrap each callable in an autograd Function: its forward copies the fresh arguments into the
   static inputs and replays the forward graph (one stage_and_launch call), returning views of
   the static outputs; its backward copies the incoming gradients into the static gradient
   buffers and replays the backward graph, returning the static gradients of the surface, which
   autograd then delivers like any operation's (into the parameters' .grad, or to whatever
   computed an argument). A Module keeps its identity: its forward attribute is replaced by one
   that runs the graphed Function while the module is in the training mode it was captured in,
   and its own forward otherwise.

The outputs (and the gradients the backward returns) are views of the same memory on every call:
the next call of the same graphed callable, or for memory freed inside a graph a later one of the
pool, overwrites them; clone them to keep them (PyTorch's rule, docs/design.md "Private pools").
Gradients of gradients are not available (the backward is a graph replay, and autograd.grad
refuses create_graph).

Staging. A fresh argument is copied into its static input unless it is that very tensor, or has
its layout (data pointer, which includes the storage offset, and strides; the shape and dtype
are checked equal first): stage_and_launch skips such a pair, as copy_() does. Any other layout
is copied by logical index, as copy_() copies, so the sample transposed (same shape, dtype and
data pointer, other strides) reaches the graph transposed. A fresh tensor that shares memory with
a static input in another layout (x.t() for the sample x) cannot be copied in place: the copy
would read what it writes, and stage_and_launch refuses the overlap before copying anything; it
is then cloned and staged again. The incoming gradients in backward are staged by the same rule.

The backward graphs are captured with retain_graph=True: the values the forward saved for the
backward (activations) stay allocated for as long as the graphed callables live, so no backward
graph reuses their memory, and a backward graph replayed twice for one forward (retain_graph=True
in the caller's backward) reads the same values and computes the same gradients. (Captured
without it, as PyTorch captures it, autograd frees each saved tensor once used, the pool may hand
that memory to the rest of the same backward graph, and a second replay may read overwritten
values.) The cost is that memory, held as long as the graphed callables.

Second backward. The graphed Function saves a token tensor (ctx.save_for_backward) on every call
that records a backward, so autograd frees it after a backward without retain_graph and a second
backward through the call raises PyTorch's error ("Trying to backward through the graph a second
time ..."), before anything runs; with retain_graph=True the second backward replays the backward
graph again and, with the rule above, delivers the same gradients (twice the first in .grad).

Note [Backward order]
The graphs of one make_graphed_callables call share a pool, captured forward 0, 1, ..., n-1, then
backward n-1, ..., 0; each capture may reuse memory that those before it freed. So a forward
replay of callables[p] overwrites the static inputs, outputs and saved values of callables[p] and
of every later callable (and the gradients earlier backward replays returned), and a backward
replay of callables[p] overwrites the gradients returned by the backward replays of earlier
callables, which autograd may still be holding (on their way to whatever computed their inputs).
The rule that keeps every replay reading what its capture read is PyTorch's: the forward passes
run in the order given, and the backward passes in the reverse order of the forward passes.
_Order enforces it with a stack of the forward calls still current, one entry per call that
recorded a backward (grad mode on and something requiring grad), in call order:
- a forward replay of callables[p] (recording or not: under no_grad too) first drops every entry
  of callables[p] or later, marking it overwritten by p, then, if it records a backward, pushes
  its own. The positions on the stack therefore increase from bottom to top, one entry at most
  per callable; a forward of callables[0] starts a new sequence (the stack holds its entry only),
  so forwards whose outputs never get a backward (evaluation) block nothing after them;
- a backward replay for an entry is refused, with a RuntimeError naming both callables and the
  rule, before anything is staged or replayed, when the entry was overwritten, or when an entry
  above it is still awaiting its first backward (the callable that must run its backward first
  is the topmost such entry). Otherwise it replays and marks the entry done. A done entry stays
  on the stack until a forward overwrites it, so the second backward of retain_graph=True (and a
  second full backward pass over several callables, in the same reverse order) is accepted;
- nothing else changes the stack: a refused backward leaves it as it was, so the caller may run
  the missing backward first and retry, or start again with a forward.
Graphed callables from different make_graphed_callables calls have separate stacks, even when
they were given one pool: their order is the caller's business, as for any graphs sharing a pool.

This module runs once per capture over the public API, and captures through the graph runtime
(graph.graph_context) with the pool and capture mode its wrapper checked, so that neither is
checked again per graph; the per-call cost is the argument checks, the Function's bookkeeping (a
token saved, the stack updated), and two stage_and_launch calls.

api.yaml's impl: names make_graphed_callables here, so the generated tensorplay.cuda.graphs
imports this module, at its end, while the package is still being imported: the public modules
imported below exist by then (tensorplay.cuda.graphs with everything it defines; tensorplay.nn
and tensorplay.autograd are imported here if they were not yet), and this module reads their
attributes only when it runs.
"""
import tensorplay
import tensorplay.accelerator
from tensorplay import autograd, nn
from tensorplay.cuda import graphs
from tensorplay._runtime.base.errors import raise_no_accelerator
from tensorplay._runtime.graphs.contexts import graph_context


def make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                           capture_error_mode):
    """See tensorplay.cuda.graphs.make_graphed_callables (api.yaml): the generated wrapper
    checked num_warmup_iters, allow_unused_input and pool, and passes capture_error_mode as its
    index in the schema's choices (graph.pxd). The callables and sample arguments are checked
    before anything needs the device, so that a mistake reads the same without a GPU."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)
    _check_callables(callables, sample_args, just_one)
    if not tensorplay.accelerator.is_available():
        raise_no_accelerator("make_graphed_callables()")
    device = _capture_device(callables, sample_args, just_one)
    names = [_name(position, just_one) for position in range(len(callables))]
    surfaces = [tuple(args) + _parameters(function)
                for function, args in zip(callables, sample_args)]

    stream = tensorplay.cuda.Stream(device)
    # Work queued before this call must not race the warm-up, nor leak into the captures.
    tensorplay.accelerator.synchronize(device)
    with tensorplay.cuda.stream(stream):
        for function, args, surface, name in zip(callables, sample_args, surfaces, names):
            for _ in range(num_warmup_iters):
                outputs, _ = _static_outputs(function(*args), name)
                differentiable = [output for output in outputs if output.requires_grad]
                if differentiable:
                    autograd.grad(differentiable, _requiring_grad(surface, name),
                                  grad_outputs=[tensorplay.zeros_like(output)
                                                for output in differentiable],
                                  allow_unused=allow_unused_input)
    tensorplay.accelerator.synchronize(device)

    shared_pool = graphs.graph_pool_handle() if pool is None else pool
    forwards = []
    for function, args, name in zip(callables, sample_args, names):
        graph = graphs.CUDAGraph()
        with graph_context(graph, shared_pool, stream, capture_error_mode):
            outputs = function(*args)
        forwards.append((graph,) + _static_outputs(outputs, name))

    backwards = [None] * len(callables)
    for position in reversed(range(len(callables))):
        _, outputs, _ = forwards[position]
        surface, name = surfaces[position], names[position]
        # Allocated outside the capture: the backward graph reads them, each call fills them.
        grad_outputs = tuple(tensorplay.empty_like(output) if output.requires_grad else None
                             for output in outputs)
        differentiable = [output for output in outputs if output.requires_grad]
        if not differentiable:  # nothing to differentiate: no backward graph, as PyTorch's
            backwards[position] = (None, grad_outputs, (None,) * len(surface))
            continue
        graph = graphs.CUDAGraph()
        wanted = _requiring_grad(surface, name)
        with graph_context(graph, shared_pool, stream, capture_error_mode):
            # retain_graph: the saved values stay allocated, so a replay never reads memory
            # the same graph reused (Note [Graphed callables], a second backward).
            grads = autograd.grad(differentiable, wanted,
                                  grad_outputs=[grad for grad in grad_outputs if grad is not None],
                                  retain_graph=True, allow_unused=allow_unused_input)
        found = iter(grads)
        backwards[position] = (graph, grad_outputs, tuple(
            next(found) if tensor.requires_grad else None for tensor in surface))
    tensorplay.accelerator.synchronize(device)

    order = _Order(names)
    graphed = []
    for position, (function, args, surface, forward, backward) in enumerate(
            zip(callables, sample_args, surfaces, forwards, backwards)):
        call = _graphed(function, args, surface, forward, backward, order, position)
        if isinstance(function, nn.Module):
            _replace_forward(function, call)
            graphed.append(function)
        else:
            graphed.append(call)
    return graphed[0] if just_one else tuple(graphed)


def _name(position, just_one):
    return "callables" if just_one else f"callables[{position}]"


def _parameters(function):
    return tuple(function.parameters()) if isinstance(function, nn.Module) else ()


def _requiring_grad(surface, name):
    wanted = [tensor for tensor in surface if tensor.requires_grad]
    if not wanted:
        raise ValueError(f"{name} returned outputs that require grad, but none of its sample "
                         "arguments (nor, for a Module, its parameters) requires grad: the "
                         "gradients of tensors it reads from elsewhere cannot be graphed; pass "
                         "them as arguments")
    return wanted


def _check_callables(callables, sample_args, just_one):
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(f"sample_args must be a tuple with one tuple of arguments per callable "
                         f"({len(callables)}), got {_shown(sample_args)}")
    for position, (function, args) in enumerate(zip(callables, sample_args)):
        name = _name(position, just_one)
        where = "sample_args" if just_one else f"sample_args[{position}]"
        if not callable(function):
            raise TypeError(f"{name} must be a function or a tensorplay.nn.Module, got "
                            f"{_shown(function)}")
        if not isinstance(args, tuple):
            raise TypeError(f"{where} must be a tuple of tensors (the arguments of {name}), got "
                            f"{_shown(args)}")
        for index, argument in enumerate(args):
            if not isinstance(argument, tensorplay.Tensor):
                raise TypeError(f"{where}[{index}] must be a tensorplay Tensor (sample_args "
                                f"hold tensors only), got {_shown(argument)}")
            if not argument.is_cuda:
                raise ValueError(f"{where}[{index}] must be a CUDA tensor, got one on "
                                 f"{argument.device}")
        if isinstance(function, nn.Module):
            _check_module(function, name)


def _check_module(module, name):
    """A graphed Module replays what its capture ran: a hook would run once, at capture, and a
    buffer's gradient is not computed (PyTorch's restrictions)."""
    for path, submodule in module.named_modules():
        if submodule._forward_hooks:
            where = "it" if not path else f"its submodule '{path}'"
            raise ValueError(f"{name} must not carry hooks, and {where} has "
                             f"{len(submodule._forward_hooks)} forward hook(s): a hook inside a "
                             "graph would run once, at capture; remove them (hooks registered "
                             "on the module after graphing run on every call)")
    for path, buffer in module.named_buffers():
        if buffer.requires_grad:
            raise ValueError(f"{name} has a buffer that requires grad ('{path}'): in a graphed "
                             "module only parameters may be trainable")
    for path, parameter in module.named_parameters():
        if not parameter.is_cuda:
            raise ValueError(f"the parameter '{path}' of {name} must be a CUDA tensor, got one "
                             f"on {parameter.device}; move the module with .to(\"cuda\") first")


def _capture_device(callables, sample_args, just_one):
    """The one device every sample tensor and parameter is on (the current one when there are
    none)."""
    devices = {argument.device.index for args in sample_args for argument in args}
    devices |= {parameter.device.index for function in callables
                for parameter in _parameters(function)}
    if len(devices) > 1:
        raise ValueError(f"sample_args (and the parameters of modules) must all be on one CUDA "
                         f"device, got tensors on "
                         f"{', '.join(f'cuda:{index}' for index in sorted(devices))}")
    if devices:
        return devices.pop()
    return tensorplay.accelerator.current_device_index()


def _static_outputs(outputs, name):
    """The captured outputs as a tuple, and whether the callable returned a single tensor."""
    if isinstance(outputs, tensorplay.Tensor):
        return (outputs,), True
    if isinstance(outputs, tuple) and all(isinstance(output, tensorplay.Tensor)
                                          for output in outputs):
        return outputs, False
    raise TypeError(f"{name} must return a tensorplay Tensor or a tuple of them (the graph's "
                    f"static outputs), got {_shown(outputs)}")


# stage_and_launch's refusal of a static buffer overlapping an input (staging.pyx).
_OVERLAP = "overlap in memory"


def _stage_and_launch(graph, statics, fresh):
    """graph.stage_and_launch(statics, fresh); when a fresh tensor shares memory with a static
    buffer in another layout (the sample transposed), which stage_and_launch refuses before
    copying anything, the fresh tensors are cloned and staged again (Note [Graphed callables],
    staging)."""
    try:
        graph.stage_and_launch(statics, fresh)
        return
    except ValueError as error:
        if _OVERLAP not in str(error):
            raise
    graph.stage_and_launch(statics, [tensor.clone() for tensor in fresh])


class _Entry:
    """A forward call that recorded a backward, on its _Order's stack."""
    __slots__ = ("position", "awaiting", "overwritten_by")

    def __init__(self, position):
        self.position = position
        self.awaiting = True  # its backward has not run yet
        self.overwritten_by = None  # the position of the forward call that overwrote it


class _Order:
    """The forward calls still current of the graphed callables of one make_graphed_callables
    call, and the order their backward passes must keep (Note [Backward order])."""
    __slots__ = ("names", "entries")

    def __init__(self, names):
        self.names = names
        self.entries = []  # positions increase from the bottom to the top

    def forward(self, position, records):
        """After a forward replay of callables[position]: its entry if it recorded a backward,
        else None."""
        entries = self.entries
        while entries and entries[-1].position >= position:
            entries.pop().overwritten_by = position
        if not records:
            return None
        entry = _Entry(position)
        entries.append(entry)
        return entry

    def check_backward(self, entry):
        """Refuse the backward of entry, before it replays, unless the rule allows it now."""
        names, position = self.names, entry.position
        if entry.overwritten_by is not None:
            later = names[entry.overwritten_by]
            raise RuntimeError(
                f"the backward of {names[position]} is for a forward call whose outputs, saved "
                f"values and static inputs a later forward call of {later} overwrote: a forward "
                f"call of a graphed callable rewrites the memory of its own last call and of "
                f"every callable after it in callables (they share a memory pool). Run the "
                f"backward passes before the next forward call: forward calls in the order "
                f"given, backward passes in the reverse order of the forward passes. Nothing was "
                f"replayed")
        for other in reversed(self.entries):
            if other is entry:
                return
            if other.awaiting:
                raise RuntimeError(
                    f"the backward of {names[position]} must wait for the backward of "
                    f"{names[other.position]}, whose forward ran after {names[position]}'s: "
                    f"graphed callables made together share a memory pool, so their backward "
                    f"passes must run in the reverse order of their forward passes. Run the "
                    f"backward of {names[other.position]} first, or start again with new "
                    f"forward calls. Nothing was replayed")


def _graphed(function, static_args, surface, forward, backward, order, position):
    """The graphed call of function, callables[position]: checks the arguments, then applies
    its Function, which keeps order (Note [Backward order])."""
    forward_graph, static_outputs, single = forward
    backward_graph, static_grad_outputs, static_grad_inputs = backward
    count = len(static_args)
    parameters = surface[count:]
    name = getattr(function, "__name__", type(function).__name__)
    # Saved by every call that records a backward, so that autograd frees it after a backward
    # without retain_graph and refuses a second one (Note [Graphed callables]).
    token = tensorplay.empty(0)
    has_backward = backward_graph is not None
    no_grads = (None,) * (1 + len(surface))

    class Graphed(autograd.Function):
        @staticmethod
        def forward(ctx, recording, *inputs):
            # The parameters are always where the graph reads them; an argument that is its
            # static input, or has its layout, stage_and_launch skips.
            pairs = [(static, fresh) for static, fresh in zip(static_args, inputs)
                     if fresh is not static]
            _stage_and_launch(forward_graph, [static for static, _ in pairs],
                              [fresh for _, fresh in pairs])
            records = recording and any(ctx.needs_input_grad)
            entry = order.forward(position, records and has_backward)
            if records:
                ctx.save_for_backward(token)
                ctx.entry = entry
            return tuple([output.detach() for output in static_outputs])

        @staticmethod
        def backward(ctx, *grads):
            if not has_backward:
                return no_grads
            entry = ctx.entry
            order.check_backward(entry)
            pairs = [(static, grad) for static, grad in zip(static_grad_outputs, grads)
                     if static is not None and grad is not static]
            _stage_and_launch(backward_graph, [static for static, _ in pairs],
                              [grad for _, grad in pairs])
            entry.awaiting = False
            return (None,) + tuple([None if grad is None else grad.detach()
                                    for grad in static_grad_inputs])

    def graphed_callable(*args):
        if len(args) != count:
            raise TypeError(f"the graphed {name} takes {count} tensor argument(s), as its "
                            f"sample_args did, got {len(args)}")
        # Without grad mode nothing is differentiated, so requires_grad need not match.
        recording = tensorplay.is_grad_enabled()
        for index, (static, fresh) in enumerate(zip(static_args, args)):
            if not isinstance(fresh, tensorplay.Tensor):
                raise TypeError(f"argument {index} of the graphed {name} must be a tensorplay "
                                f"Tensor, got {_shown(fresh)}")
            if fresh.shape != static.shape or fresh.dtype != static.dtype:
                raise ValueError(f"argument {index} of the graphed {name} must keep its sample's "
                                 f"shape {tuple(static.shape)} and dtype {static.dtype}, got "
                                 f"{tuple(fresh.shape)} {fresh.dtype}")
            if recording and fresh.requires_grad != static.requires_grad:
                raise ValueError(f"argument {index} of the graphed {name} must match its "
                                 f"sample's requires_grad ({static.requires_grad}), got "
                                 f"{fresh.requires_grad}: the backward graph computes "
                                 "gradients for exactly the samples that required grad")
        outputs = Graphed.apply(recording, *args, *parameters)
        return outputs[0] if single else outputs

    graphed_callable.__name__ = f"graphed_{name}"
    graphed_callable.__doc__ = (f"{name}, replayed from CUDA graphs: copies the arguments into "
                                "the captured inputs and replays the forward graph; backward "
                                "replays the backward graph. The outputs are views of the same "
                                "memory on every call.")
    graphed_callable.cuda_graph = forward_graph
    graphed_callable.backward_graph = backward_graph
    return graphed_callable


def _replace_forward(module, graphed_forward):
    """module.forward runs the graphs while the module is in the mode it was captured in."""
    captured_training = module.training
    own_forward = module.forward

    def forward(*args):
        if module.training == captured_training:
            return graphed_forward(*args)
        return own_forward(*args)

    forward.cuda_graph = graphed_forward.cuda_graph
    forward.backward_graph = graphed_forward.backward_graph
    module.forward = forward


def _shown(value):
    """repr(value) cut to about 200 characters, as error messages echo what the user gave."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
