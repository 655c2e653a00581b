"""tensorplay.torch: PyTorch work captured into tensorplay's CUDA graphs, on purpose.

PyTorch is an optional dependency (the `torch` extra): this module imports it when one of its
functions runs, never when tensorplay or tensorplay.torch is imported.

Note [Bridged captures]
PyTorch queues its kernels on its own current stream and allocates from its own caching
allocator, neither of which knows that a tensorplay capture is open. A bridged capture
(graph(), recapture()) fixes both for its whole duration, and refuses what cannot be made safe:
- streams: PyTorch's current stream follows tensorplay's. Right after the capture begins,
  PyTorch's current stream becomes a torch.cuda.ExternalStream of the capture stream, and a
  listener (stream.pyx, Note [Current stream listeners]) makes every later change of tensorplay's
  current stream on the capturing thread PyTorch's too: each conditional body's stream while the
  body captures, its parent's after; a stream made current to fork work into the capture
  (tensorplay.cuda.stream(s) after s.wait_stream(capture stream)). When the capture ends,
  PyTorch's stream and device are those it had before it began.
- memory: PyTorch's allocations go to a torch.cuda.MemPool the graph owns, through
  torch.cuda.use_mem_pool(pool) entered right after the capture begins and left right after it
  ends. The pool is private, so a block PyTorch frees during the capture (and that every replay
  still writes) is never handed to eager PyTorch code; it may serve a graph given the same
  mem_pool, whose replays must then keep the order of the captures (PyTorch's rule for shared
  pools). A recapture routes to a new MemPool, also held by the graph: if it fails, the graph
  replays its previous executable, whose blocks must not have gone to the recapture's tensors.
  (The pools of replaced captures are held until reset(): the cost of a recapture is the
  temporaries PyTorch cached for it.) The graph holds the pool for
  as long as it holds its own (hold_with_pool: released by reset(), a failed capture or the
  graph's deletion); tensors allocated from it outlive it, as PyTorch's pools let them
  (torch.cuda.MemPool releases its memory once they are freed). A PyTorch probe on the H200
  (issue 38) showed why: without the pool, a block PyTorch freed during a foreign capture went
  to the next eager allocation and replays overwrote that tensor.
  use_mem_pool routes the allocations of the calling thread only (its documentation says so):
  work that PyTorch runs on threads of its own during the capture (the autograd engine's device
  threads, which run a CUDA backward) allocates from PyTorch's ordinary pools. The graphed
  callables below therefore differentiate on the capturing thread (_backward_on_this_thread).
- random numbers: PyTorch's CUDA generator advances its Philox offset on the host, and does so
  under a capture only for its own torch.cuda.graph (CUDAGeneratorImpl registers with PyTorch's
  CUDAGraph; under a foreign capture it raises "Attempt to increase offset for a CUDA generator
  not in capture mode"), so a replay of ours would repeat the captured numbers. Every operator
  PyTorch tags nondeterministic_seeded (aten/src/ATen/native/tags.yaml: random, "controlled by
  a Generator") that would run on a CUDA tensor is refused before it runs, by a
  TorchDispatchMode, with an error that points to tensorplay's graph-safe generators (draw into
  a tensorplay tensor inside the capture and hand it to PyTorch through DLPack). The refusal
  launches nothing, so the capture goes on.
- capture mode: always 'relaxed'. PyTorch's allocator calls cudaMalloc when its pool has no
  fitting block, which 'global' and 'thread_local' captures forbid (CUDA Runtime API, "Stream
  capture": potentially unsafe APIs), and in 'global' mode a pending record_stream() event
  made PyTorch's allocation fail with "operation not permitted when stream is capturing",
  invalidating the capture (the probe of issue 38).
What PyTorch refuses during a capture (a synchronisation, .item(), a host copy) raises PyTorch's
error in the block; the block then ends as any failed capture does (graph.pyx: discarded, pools
released, streams restored), and the bridge undoes its own steps in reverse order.

Note [Graphed callables for PyTorch]
make_graphed_callables follows python/graphed_callables.py's recipe (itself PyTorch's,
torch/cuda/graphs.py) with PyTorch tensors: the same checks, with PyTorch's own words where it
checks (autocast caching, hooks, trainable buffers, tensors only in sample_args), warm-up on a
side stream, forward graphs captured in order and backward graphs in reverse order, all in one
tensorplay pool and one torch.cuda.MemPool, each a bridged capture; then a torch.autograd.Function
per callable whose forward stages the fresh arguments and replays the forward graph, and whose
backward stages the incoming gradients and replays the backward graph, both through
stage_and_launch on PyTorch's current stream (wrapped as a tensorplay stream), so that the
replays are ordered with the PyTorch work around them.
"""
import sys
import threading

import tensorplay
import tensorplay.accelerator
from tensorplay import cuda
from tensorplay._python.graphed_callables import _stage_and_launch
from tensorplay._runtime.base.errors import raise_no_accelerator
from tensorplay._runtime.devices.stream import (add_current_stream_listener,
                                                remove_current_stream_listener)
from tensorplay._runtime.graphs.contexts import (graph_context, held_with_pool, hold_with_pool,
                                                 recapture_context)

# capture_error_mode's index in the schema's choices (global, thread_local, relaxed), which is
# its cudaStreamCaptureMode (capture.pyx).
_RELAXED = 2


def _torch():
    try:
        import torch
    except ImportError as error:
        raise ImportError("tensorplay.torch needs PyTorch; install it (pip install "
                          "'tensorplay[torch]')") from error
    except OSError as error:  # installed, but its shared libraries do not load
        raise ImportError(f"tensorplay.torch needs PyTorch, which is installed but does not "
                          f"load ({error}); reinstall it (pip install --force-reinstall "
                          f"torch)") from error
    return torch


def _mem_pool_arg(mem_pool):
    """None or a torch.cuda.MemPool. Checked without importing PyTorch: where it is not
    imported yet, no MemPool can exist."""
    torch = sys.modules.get("torch")
    if mem_pool is not None and (torch is None or not isinstance(mem_pool, torch.cuda.MemPool)):
        raise TypeError(f"mem_pool must be None or a torch.cuda.MemPool, got "
                        f"{type(mem_pool).__name__}")
    return mem_pool


def _stream_arg(stream):
    if stream is not None and not isinstance(stream, cuda.Stream):
        raise TypeError(f"stream must be None or a tensorplay.cuda.Stream, got "
                        f"{type(stream).__name__}")
    return stream


# The arguments are checked before PyTorch is imported (docs/design.md, "Where arguments are
# checked"): a mistake costs no import.


def graph(cuda_graph, pool, stream, mem_pool):
    """See tensorplay.torch.graph (api.yaml)."""
    inner = graph_context(cuda_graph, pool, _stream_arg(stream), _RELAXED)
    mem_pool = _mem_pool_arg(mem_pool)
    return _BridgedCapture(_torch(), inner, mem_pool, False)


def recapture(cuda_graph, stream, reinstantiate):
    """See tensorplay.torch.recapture (api.yaml)."""
    if not isinstance(reinstantiate, bool):
        raise TypeError(f"reinstantiate must be a bool, got {type(reinstantiate).__name__}")
    inner = recapture_context(cuda_graph, _stream_arg(stream), _RELAXED, reinstantiate)
    # A MemPool of its own (Note [Bridged captures], memory): a recapture that fails leaves the
    # previous executable replaying, and that executable's blocks stay in their own pool.
    return _BridgedCapture(_torch(), inner, None, True)


def mem_pool(cuda_graph):
    """See tensorplay.torch.mem_pool (api.yaml)."""
    held = held_with_pool(cuda_graph)
    torch = sys.modules.get("torch")
    if torch is None:  # nothing of PyTorch's can be held
        return None
    for value in reversed(held):  # the latest capture's
        if isinstance(value, torch.cuda.MemPool):
            return value
    return None


class _BridgedCapture:
    """A bridged capture block (Note [Bridged captures]) around inner, the graph's own capture
    block. Its steps, in order: save PyTorch's device and stream; begin the capture (inner);
    make PyTorch follow tensorplay's current stream; route PyTorch's allocations to the graph's
    MemPool; refuse PyTorch's random operators. The way out undoes them in reverse order, except
    that the pool routing is left right after the capture ended rather than before, so that
    nothing PyTorch does until the end allocates elsewhere. Each step records what it did, so a
    failure part-way undoes exactly that."""

    def __init__(self, torch, inner, mem_pool, fresh_pool):
        self._torch = torch
        self._inner = inner
        self._mem_pool = mem_pool     # the caller's, or None
        self._fresh_pool = fresh_pool  # a recapture: a new MemPool even if the graph holds one
        self._previous = None    # PyTorch's (device, stream) before the capture
        self._capturing = False  # inner entered and not yet left
        self._follower = None    # the registered stream listener
        self._routing = None     # the entered use_mem_pool context
        self._refusal = None     # the entered TorchDispatchMode

    def __enter__(self):
        torch = self._torch
        self._previous = (torch.cuda.current_device(), torch.cuda.current_stream())
        cuda_graph = self._inner.__enter__()
        self._capturing = True
        try:
            device = tensorplay.accelerator.current_device_index()
            follower = _StreamFollower(torch, device)
            follower(device, tensorplay.accelerator.current_stream(device).cuda_stream)
            add_current_stream_listener(follower)
            self._follower = follower
            pool = self._mem_pool
            if pool is None and not self._fresh_pool:
                pool = mem_pool(cuda_graph)
            if pool is None:
                pool = torch.cuda.MemPool()
            if not any(held is pool for held in held_with_pool(cuda_graph)):
                hold_with_pool(cuda_graph, pool)
            routing = torch.cuda.use_mem_pool(pool, device)
            routing.__enter__()
            self._routing = routing
            refusal = _RefuseRandomOps()
            refusal.__enter__()
            self._refusal = refusal
        except BaseException as error:
            self._leave(error)
            raise
        return cuda_graph

    def __exit__(self, exc_type, exc_value, traceback):
        self._leave(exc_value)
        return None

    def _leave(self, exc_value):
        """Undo what __enter__ did. The capture ends (or, after an error in the block, is
        discarded) through inner with the block's error; a failure of a later step is raised
        if the block raised nothing, else noted on the block's error."""
        failures = []

        def attempt(step):
            try:
                step()
            except BaseException as error:
                failures.append(error)

        if self._refusal is not None:
            refusal, self._refusal = self._refusal, None
            attempt(lambda: refusal.__exit__(None, None, None))
        if self._follower is not None:
            follower, self._follower = self._follower, None
            attempt(lambda: remove_current_stream_listener(follower))
        if self._capturing:
            self._capturing = False
            kind = type(exc_value) if exc_value is not None else None
            attempt(lambda: self._inner.__exit__(kind, exc_value, None))
        if self._routing is not None:
            routing, self._routing = self._routing, None
            attempt(lambda: routing.__exit__(None, None, None))
        if self._previous is not None:
            (device, stream), self._previous = self._previous, None
            attempt(lambda: _restore_torch_stream(self._torch, device, stream))
        if failures and exc_value is None:
            raise failures[0]
        for failure in failures:
            if hasattr(exc_value, "add_note"):
                exc_value.add_note(f"ending the bridged capture also failed: {failure!r}")


def _restore_torch_stream(torch, device, stream):
    torch.cuda.set_stream(stream)
    torch.cuda.set_device(device)


class _StreamFollower:
    """The listener that makes PyTorch's current stream on the capturing thread tensorplay's
    (Note [Bridged captures], streams). The ExternalStream objects are kept per handle, so
    that a while body entered and left repeatedly builds each once."""

    def __init__(self, torch, device):
        self._torch = torch
        self._device = device
        self._thread = threading.get_ident()
        self._streams = {}

    def __call__(self, device, handle):
        if device != self._device or threading.get_ident() != self._thread:
            return
        wrapped = self._streams.get(handle)
        if wrapped is None:
            wrapped = self._torch.cuda.ExternalStream(handle, device=device)
            self._streams[handle] = wrapped
        self._torch.cuda.set_stream(wrapped)


def _refusal_mode_class():
    torch = _torch()
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    seeded = torch.Tag.nondeterministic_seeded

    class RefuseRandomOps(TorchDispatchMode):
        """Refuses PyTorch's random operators on CUDA tensors (Note [Bridged captures])."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if seeded in func.tags and _on_cuda(torch, tree_leaves((args, kwargs))):
                raise RuntimeError(
                    f"tensorplay.torch: {func} draws from PyTorch's CUDA generator, which a "
                    "tensorplay graph cannot replay (PyTorch advances it only inside its own "
                    "torch.cuda.graph; a replay of ours would repeat the captured numbers). "
                    "Draw the numbers with tensorplay inside the capture (tensorplay.rand, "
                    "randn, randint or a tensorplay.Generator registered with the graph) and "
                    "hand them to PyTorch through DLPack (torch.from_dlpack(t)). Nothing was "
                    "launched; the capture goes on")
            return func(*args, **kwargs)

    return RefuseRandomOps


def _on_cuda(torch, leaves):
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.is_cuda:
            return True
        if isinstance(leaf, torch.device) and leaf.type == "cuda":
            return True
    return False


_refusal_class = None


def _RefuseRandomOps():
    global _refusal_class
    if _refusal_class is None:
        _refusal_class = _refusal_mode_class()
    return _refusal_class()


def make_graphed_callables(callables, sample_args, num_warmup_iters, allow_unused_input, pool,
                           mem_pool):
    """See tensorplay.torch.make_graphed_callables (api.yaml) and Note [Graphed callables for
    PyTorch]. The checks come first: those that need no PyTorch before it is imported, then
    PyTorch's own, in its words (torch/cuda/graphs.py, make_graphed_callables)."""
    if not isinstance(num_warmup_iters, int) or isinstance(num_warmup_iters, bool) \
            or num_warmup_iters < 0:
        raise ValueError(f"num_warmup_iters must be an int >= 0, got {num_warmup_iters!r}")
    if not isinstance(allow_unused_input, bool):
        raise TypeError(f"allow_unused_input must be a bool, got "
                        f"{type(allow_unused_input).__name__}")
    mem_pool = _mem_pool_arg(mem_pool)
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables = (callables,)
        sample_args = (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(f"sample_args must be a tuple with one tuple of arguments per callable "
                         f"({len(callables)}), got {type(sample_args).__name__}")
    for function, args in zip(callables, sample_args):
        if not callable(function):
            raise TypeError(f"callables: each must be a function or a torch.nn.Module, got "
                            f"{type(function).__name__}")
        if not isinstance(args, tuple):
            raise TypeError(f"sample_args must hold one tuple of arguments per callable, got "
                            f"{type(args).__name__}")
    if "torch" not in sys.modules and any(sample_args):
        # No PyTorch tensor can exist yet: PyTorch's check fails without importing it.
        raise AssertionError(_TENSORS_ONLY)
    torch = _torch()
    from torch.utils import _pytree as pytree

    if torch.is_autocast_enabled() and torch.is_autocast_cache_enabled():
        raise RuntimeError("make_graphed_callables does not support the autocast caching. "
                           "Please set `cache_enabled=False`.")
    flat_args = []
    for function, args in zip(callables, sample_args):
        if isinstance(function, torch.nn.Module):
            _check_torch_module(function)
        leaves = tuple(pytree.arg_tree_leaves(*args))
        if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            raise AssertionError(_TENSORS_ONLY)
        if not all(leaf.is_cuda for leaf in leaves):
            raise ValueError("sample_args must hold CUDA tensors (the graphs read them where "
                             "they are)")
        flat_args.append(leaves)
    if not tensorplay.accelerator.is_available():
        raise_no_accelerator("tensorplay.torch.make_graphed_callables()")

    parameters = [tuple(function.parameters()) if isinstance(function, torch.nn.Module) else ()
                  for function in callables]
    surfaces = [args + params for args, params in zip(flat_args, parameters)]
    devices = {tensor.device.index for surface in surfaces for tensor in surface}
    if len(devices) > 1:
        raise ValueError(f"sample_args and the parameters of modules must all be on one CUDA "
                         f"device, got tensors on {sorted(devices)}")
    device = devices.pop() if devices else torch.cuda.current_device()
    # A stream from PyTorch's pool, which PyTorch never destroys: its autograd keeps the stream
    # each node was made on (the parameters' AccumulateGrad nodes are made in the warm-up below)
    # and orders every later backward with it, so a tensorplay.cuda.Stream, destroyed when this
    # function returns, would leave those nodes recording events on a dead stream ("CUDA error:
    # context is destroyed" in the first backward of a fresh process).
    torch_stream = torch.cuda.Stream(device)
    stream = cuda.external_stream(torch_stream.cuda_stream, device)
    shared_pool = cuda.graph_pool_handle() if pool is None else pool
    shared_mem_pool = mem_pool if mem_pool is not None else torch.cuda.MemPool()

    # Warm-up, on a side stream (PyTorch's): lazy initialisation stays out of the captures.
    # Single-threaded backward: the capture's allocations are routed for this thread only
    # (Note [Bridged captures], memory), so every backward below runs here.
    torch.cuda.synchronize(device)
    with torch.autograd.set_multithreading_enabled(False), torch.cuda.stream(torch_stream):
        for function, args, surface in zip(callables, sample_args, surfaces):
            for _ in range(num_warmup_iters):
                outputs = pytree.tree_leaves(function(*args))
                differentiable = tuple(output for output in outputs if output.requires_grad)
                if differentiable:
                    torch.autograd.grad(differentiable,
                                        tuple(tensor for tensor in surface
                                              if tensor.requires_grad),
                                        grad_outputs=tuple(torch.empty_like(output)
                                                           for output in differentiable),
                                        only_inputs=True, allow_unused=allow_unused_input)
    torch.cuda.synchronize(device)

    forwards = []
    for function, args in zip(callables, sample_args):
        forward_graph = cuda.CUDAGraph()
        with graph(forward_graph, shared_pool, stream, shared_mem_pool):
            outputs = function(*args)
        flat, spec = pytree.tree_flatten(outputs)
        if not all(isinstance(output, torch.Tensor) for output in flat):
            raise TypeError("each callable must return tensors (a tensor or a structure of "
                            "them: the graph's static outputs)")
        forwards.append((forward_graph, tuple(flat), spec))

    backwards = [None] * len(callables)
    with torch.autograd.set_multithreading_enabled(False):
        for position in reversed(range(len(callables))):
            _, outputs, _ = forwards[position]
            surface = surfaces[position]
            grad_outputs = tuple(torch.empty_like(output) if output.requires_grad else None
                                 for output in outputs)
            differentiable = tuple(output for output in outputs if output.requires_grad)
            wanted = tuple(tensor for tensor in surface if tensor.requires_grad)
            if not differentiable or not wanted:
                backwards[position] = (None, grad_outputs, (None,) * len(surface))
                continue
            backward_graph = cuda.CUDAGraph()
            with graph(backward_graph, shared_pool, stream, shared_mem_pool):
                # retain_graph: python/graphed_callables.py, Note [Graphed callables].
                grads = torch.autograd.grad(
                    differentiable, wanted,
                    grad_outputs=tuple(grad for grad in grad_outputs if grad is not None),
                    only_inputs=True, retain_graph=True, allow_unused=allow_unused_input)
            found = iter(grads)
            backwards[position] = (backward_graph, grad_outputs, tuple(
                next(found) if tensor.requires_grad else None for tensor in surface))
    torch.cuda.synchronize(device)

    graphed = []
    for function, args, params, forward, backward in zip(callables, flat_args, parameters,
                                                          forwards, backwards):
        call = _torch_graphed(torch, pytree, args, params, forward, backward)
        if isinstance(function, torch.nn.Module):
            _replace_torch_forward(function, call)
            graphed.append(function)
        else:
            graphed.append(call)
    return graphed[0] if just_one else tuple(graphed)


_TENSORS_ONLY = ("In the beta API, sample_args for each callable must contain only Tensors. "
                 "Other types are not allowed.")  # PyTorch's words


def _check_torch_module(module):
    """PyTorch's checks of a Module, in its words (torch/cuda/graphs.py)."""
    if not (len(module._backward_hooks) == 0 and len(module._forward_hooks) == 0
            and len(module._forward_pre_hooks) == 0):
        raise AssertionError("Modules must not have hooks registered at the time they are "
                             "passed. However, registering hooks on modules after passing them "
                             "through make_graphed_callables is allowed.")
    if not all(buffer.requires_grad is False for buffer in module.buffers()):
        raise AssertionError("In any :class:`~torch.nn.Module` passed to "
                             ":func:`~make_graphed_callables`, only parameters may be "
                             "trainable. All buffers must have ``requires_grad=False``.")


class _TorchStreams:
    """tensorplay Streams wrapping PyTorch's current stream, one per handle, so that a replay
    runs where the PyTorch work around it runs without building a wrapper per call. The handle
    is read through PyTorch's C entry points (those its compiled kernels' launchers use), as
    torch.cuda.current_stream() builds a Python Stream per call: tens of microseconds."""

    def __init__(self, torch):
        self._device = torch._C._cuda_getDevice
        self._raw_stream = torch._C._cuda_getCurrentRawStream
        self._wrapped = {}

    def current(self):
        device = self._device()
        key = (device, self._raw_stream(device))
        wrapped = self._wrapped.get(key)
        if wrapped is None:
            wrapped = cuda.external_stream(key[1], device)
            self._wrapped[key] = wrapped
        return wrapped


def _ours(torch, tensor):
    """A tensorplay view of a PyTorch CUDA tensor's memory, through a bare DLPack capsule
    (torch.utils.dlpack.to_dlpack, in C), or None for None. A capsule carries no stream
    handshake, which the uses here need none of: every replay and copy runs on PyTorch's current
    stream, after the work that made the tensor. (__cuda_array_interface__ would cost a Python
    dict from PyTorch and a device query per tensor, per call.)"""
    if tensor is None:
        return None
    return tensorplay.from_dlpack(torch.utils.dlpack.to_dlpack(tensor.detach()))


def _torch_graphed(torch, pytree, static_args, parameters, forward, backward):
    forward_graph, static_outputs, spec = forward
    backward_graph, static_grad_outputs, static_grad_inputs = backward
    count = len(static_args)
    streams = _TorchStreams(torch)
    # The static buffers' tensorplay views, made once: they never change.
    ours_args = tuple(_ours(torch, static) for static in static_args)
    ours_grad_outputs = tuple(_ours(torch, static) for static in static_grad_outputs)

    def stage(graph_, statics, ours_statics, fresh):
        """Copy each fresh tensor into its static one and replay graph_, on PyTorch's current
        stream. A fresh tensor that is contiguous and of its static one's dtype goes to
        stage_and_launch as a tensorplay view (_ours); any other (an expanded gradient of a sum
        has stride 0) is copied by PyTorch's own copy_(), on the same stream, before the
        launch."""
        staged_statics, staged_fresh = [], []
        for static, ours_static, new in zip(statics, ours_statics, fresh):
            if static is None or new is None or new is static:
                continue
            if new.is_contiguous() and new.dtype == static.dtype:
                staged_statics.append(ours_static)
                staged_fresh.append(_ours(torch, new))
            else:
                static.detach().copy_(new)
        with cuda.stream(streams.current()):
            # A fresh tensor overlapping its static one in another layout is cloned first
            # (python/graphed_callables.py, Note [Graphed callables], staging).
            _stage_and_launch(graph_, staged_statics, staged_fresh)

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            stage(forward_graph, static_args, ours_args, inputs[:count])
            return tuple(output.detach() for output in static_outputs)

        @staticmethod
        def backward(ctx, *grads):
            if backward_graph is None:
                return (None,) * (count + len(parameters))
            stage(backward_graph, static_grad_outputs, ours_grad_outputs, grads)
            return tuple(grad.detach() if grad is not None else None
                         for grad in static_grad_inputs)

    def functionalized(*user_args):
        flat = tuple(pytree.arg_tree_leaves(*user_args))
        if len(flat) != count:
            raise TypeError(f"the graphed callable takes {count} tensor(s), as its sample_args "
                            f"did, got {len(flat)}")
        for index, (static, fresh) in enumerate(zip(static_args, flat)):
            if not isinstance(fresh, torch.Tensor):
                raise TypeError(f"argument {index} of the graphed callable must be a "
                                f"torch.Tensor, got {type(fresh).__name__}")
            if fresh.shape != static.shape or fresh.dtype != static.dtype \
                    or fresh.device != static.device:
                raise ValueError(f"argument {index} of the graphed callable must keep its "
                                 f"sample's shape {tuple(static.shape)}, dtype {static.dtype} "
                                 f"and device {static.device}, got {tuple(fresh.shape)} "
                                 f"{fresh.dtype} {fresh.device}")
        outputs = Graphed.apply(*(flat + parameters))
        return pytree.tree_unflatten(list(outputs), spec)

    functionalized.cuda_graph = forward_graph
    functionalized.backward_graph = backward_graph
    return functionalized


def _replace_torch_forward(module, graphed_forward):
    """PyTorch's rule: the graphs run while the module is in the training mode it was captured
    in, its own forward otherwise."""
    captured_training = module.training
    own_forward = module.forward

    def forward(*args, **kwargs):
        if module.training == captured_training:
            return graphed_forward(*args, **kwargs)
        return own_forward(*args, **kwargs)

    forward.cuda_graph = graphed_forward.cuda_graph
    forward.backward_graph = graphed_forward.backward_graph
    module.forward = forward
