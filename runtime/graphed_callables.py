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

This module runs once per capture over the public API; the per-call cost is the argument checks,
the Function's bookkeeping and two stage_and_launch calls.
"""
import tensorplay
import tensorplay.accelerator
from tensorplay import autograd, nn
from tensorplay.cuda import graphs


def make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                           capture_error_mode):
    """See tensorplay.cuda.graphs.make_graphed_callables (api.yaml); the generated wrapper
    checked num_warmup_iters, allow_unused_input, pool and capture_error_mode already."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)
    _check_callables(callables, sample_args, just_one)
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
        with graphs.graph(graph, pool=shared_pool, stream=stream,
                          capture_error_mode=capture_error_mode):
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
        with graphs.graph(graph, pool=shared_pool, stream=stream,
                          capture_error_mode=capture_error_mode):
            grads = autograd.grad(differentiable, wanted,
                                  grad_outputs=[grad for grad in grad_outputs if grad is not None],
                                  allow_unused=allow_unused_input)
        found = iter(grads)
        backwards[position] = (graph, grad_outputs, tuple(
            next(found) if tensor.requires_grad else None for tensor in surface))
    tensorplay.accelerator.synchronize(device)

    graphed = []
    for function, args, surface, forward, backward in zip(callables, sample_args, surfaces,
                                                          forwards, backwards):
        call = _graphed(function, args, surface, forward, backward)
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


def _graphed(function, static_args, surface, forward, backward):
    """The graphed call of function: checks the arguments, then applies its Function."""
    forward_graph, static_outputs, single = forward
    backward_graph, static_grad_outputs, static_grad_inputs = backward
    count = len(static_args)
    parameters = surface[count:]
    name = getattr(function, "__name__", type(function).__name__)

    class Graphed(autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            # A tensor passed again is already where the graph reads it (the parameters always).
            pairs = [(static, fresh) for static, fresh in zip(static_args, inputs)
                     if fresh.data_ptr() != static.data_ptr()]
            forward_graph.stage_and_launch([static for static, _ in pairs],
                                           [fresh for _, fresh in pairs])
            return tuple([output.detach() for output in static_outputs])

        @staticmethod
        def backward(ctx, *grads):
            if backward_graph is None:
                return static_grad_inputs
            pairs = [(static, grad) for static, grad in zip(static_grad_outputs, grads)
                     if static is not None and grad.data_ptr() != static.data_ptr()]
            backward_graph.stage_and_launch([static for static, _ in pairs],
                                            [grad for _, grad in pairs])
            return tuple([None if grad is None else grad.detach() for grad in static_grad_inputs])

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
        outputs = Graphed.apply(*args, *parameters)
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
