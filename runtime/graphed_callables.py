"""make_graphed_callables, forward path: functions captured into CUDA graphs that share a pool.

The recipe is PyTorch's (torch/cuda/graphs.py, make_graphed_callables), without the backward
graphs, which need autograd:
1. check the arguments, so that a mistake is reported before any GPU work;
2. warm every callable up num_warmup_iters times on one side stream, so that lazy
   initialisation (kernel loading, library handles, allocator growth) happens outside the
   capture;
3. capture each callable, in the order given, into its own CUDAGraph on that same stream, all
   graphs allocating from one private pool (captured in the order they will run, a later
   graph may reuse what an earlier one freed, which replays in that order keep valid);
4. return, for each callable, a function that copies its arguments into the static inputs the
   graph reads, replays the graph, and returns the static outputs the graph writes.

The outputs are the same tensors on every call: the next call of the same graphed callable
(or, for memory freed inside a graph, of a later one in the pool) overwrites them; clone them
to keep them (PyTorch's rule, docs/design.md "Private pools").

This module runs once per capture over the public API; the per-call cost is the
stage_and_launch call (one native call for every copy and the launch).
"""
import tensorplay
import tensorplay.accelerator
from tensorplay.cuda import graphs


def make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                           capture_error_mode):
    """See tensorplay.cuda.graphs.make_graphed_callables (api.yaml); the generated wrapper
    checked num_warmup_iters, pool and capture_error_mode already. allow_unused_input concerns the
    gradients of unused inputs, which only the backward graphs compute: with the forward path
    alone, every input is accepted whether the callable uses it or not."""
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)
    _check_callables(callables, sample_args, just_one)
    device = _capture_device(sample_args)

    stream = tensorplay.cuda.Stream(device)
    # Work queued before this call must not race the warm-up, nor leak into the captures.
    tensorplay.accelerator.synchronize(device)
    with tensorplay.cuda.stream(stream):
        for function, args in zip(callables, sample_args):
            for _ in range(num_warmup_iters):
                function(*args)
    tensorplay.accelerator.synchronize(device)

    shared_pool = graphs.graph_pool_handle() if pool is None else pool
    graphed = []
    for position, (function, args) in enumerate(zip(callables, sample_args)):
        graph = graphs.CUDAGraph()
        with graphs.graph(graph, pool=shared_pool, stream=stream,
                          capture_error_mode=capture_error_mode):
            outputs = function(*args)
        graphed.append(_graphed(graph, function, args,
                                _static_outputs(outputs, _name(callables, position, just_one))))
    return graphed[0] if just_one else tuple(graphed)


def _name(callables, position, just_one):
    return "callables" if just_one else f"callables[{position}]"


def _check_callables(callables, sample_args, just_one):
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(f"sample_args must be a tuple with one tuple of arguments per callable "
                         f"({len(callables)}), got {_shown(sample_args)}")
    for position, (function, args) in enumerate(zip(callables, sample_args)):
        name = _name(callables, position, just_one)
        where = "sample_args" if just_one else f"sample_args[{position}]"
        if not callable(function):
            raise TypeError(f"{name} must be a function, got {_shown(function)}")
        if not isinstance(args, tuple):
            raise TypeError(f"{where} must be a tuple of tensors (the arguments of {name}), got "
                            f"{_shown(args)}")
        for index, argument in enumerate(args):
            # Checked first: a tensor that requires grad needs the backward graphs.
            if getattr(argument, "requires_grad", False) is True:
                raise ValueError(f"{where}[{index}] requires grad, and this build graphs the "
                                 "forward pass only: gradients arrive with the autograd work; "
                                 "pass tensors that do not require grad")
            if not isinstance(argument, tensorplay.Tensor):
                raise TypeError(f"{where}[{index}] must be a tensorplay Tensor (sample_args "
                                f"hold tensors only), got {_shown(argument)}")
            if not argument.is_cuda:
                raise ValueError(f"{where}[{index}] must be a CUDA tensor, got one on "
                                 f"{argument.device}")


def _capture_device(sample_args):
    """The one device every sample tensor is on (the current one when there are none)."""
    devices = {argument.device.index for args in sample_args for argument in args}
    if len(devices) > 1:
        raise ValueError(f"sample_args must all be on one CUDA device, got tensors on "
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


def _graphed(graph, function, static_inputs, static_outputs):
    outputs, single = static_outputs
    count = len(static_inputs)
    name = getattr(function, "__name__", "callable")

    def graphed_callable(*args):
        if len(args) != count:
            raise TypeError(f"the graphed {name} takes {count} tensor argument(s), as its "
                            f"sample_args did, got {len(args)}")
        for index, (static, fresh) in enumerate(zip(static_inputs, args)):
            if not isinstance(fresh, tensorplay.Tensor):
                raise TypeError(f"argument {index} of the graphed {name} must be a tensorplay "
                                f"Tensor, got {_shown(fresh)}")
            if fresh.shape != static.shape or fresh.dtype != static.dtype:
                raise ValueError(f"argument {index} of the graphed {name} must keep its sample's "
                                 f"shape {tuple(static.shape)} and dtype {static.dtype}, got "
                                 f"{tuple(fresh.shape)} {fresh.dtype}")
        # A sample tensor passed again is already where the graph reads it.
        pairs = [(static, fresh) for static, fresh in zip(static_inputs, args)
                 if fresh.data_ptr() != static.data_ptr()]
        graph.stage_and_launch([static for static, _ in pairs], [fresh for _, fresh in pairs])
        return outputs[0] if single else outputs

    graphed_callable.__name__ = f"graphed_{name}"
    graphed_callable.__doc__ = (f"{name}, replayed from a CUDA graph: copies the arguments into "
                                "the captured inputs, replays, and returns the captured outputs "
                                "(the same tensors on every call).")
    graphed_callable.cuda_graph = graph
    return graphed_callable


def _shown(value):
    """repr(value) cut to about 200 characters, as error messages echo what the user gave."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
