"""tensorplay.torch: PyTorch work in tensorplay's graphs (python/torch_bridge.py, Note [Bridged
captures]). Skipped as a whole where PyTorch is not importable; the gpu tests also need a CUDA
device. The ports of PyTorch's CUDA-graph tests cite their original in pytorch/pytorch's
test/test_cuda.py by name; each runs the same PyTorch ops through tensorplay.torch.graph (or
tensorplay.torch.make_graphed_callables) instead of torch.cuda.graph, and checks what the
original checks, or, for PyTorch's random ops, that the bridge refuses them."""
import copy
import gc
import subprocess
import sys
import threading

import pytest

from tests.peers import import_or_skip

torch = import_or_skip("torch")

import tensorplay  # noqa: E402
import tensorplay.torch  # noqa: E402
from tensorplay import accelerator, cuda  # noqa: E402

gpu = pytest.mark.gpu


def _warm(*ops):
    """Run each op once eagerly, so that module loading stays out of the captures."""
    for op in ops:
        op()
    torch.cuda.synchronize()


def _refusal_mode():
    from tensorplay._python.torch_bridge import _RefuseRandomOps
    return _RefuseRandomOps()


# -- CPU: arguments and the refusal rule ---------------------------------------------------------


def test_mem_pool_must_be_a_torch_mem_pool():
    with pytest.raises(TypeError, match="mem_pool must be None or a torch.cuda.MemPool, got int"):
        tensorplay.torch.graph(cuda.CUDAGraph(), mem_pool=3)


def test_cuda_graph_must_be_a_cuda_graph():
    with pytest.raises(TypeError, match="cuda_graph"):
        tensorplay.torch.graph(object())


def test_make_graphed_callables_checks_like_pytorch_before_any_gpu_work():
    # PyTorch's words (torch/cuda/graphs.py, make_graphed_callables).
    with pytest.raises(AssertionError, match="sample_args for each callable must contain only "
                                             "Tensors"):
        tensorplay.torch.make_graphed_callables(lambda x: x, (3,))
    module = torch.nn.Linear(2, 2)
    module.register_forward_hook(lambda *args: None)
    with pytest.raises(AssertionError, match="Modules must not have hooks registered"):
        tensorplay.torch.make_graphed_callables(module, (torch.zeros(2),))
    module = torch.nn.Linear(2, 2)
    module.register_buffer("trainable", torch.zeros(2, requires_grad=True))
    with pytest.raises(AssertionError, match="only parameters may be trainable"):
        tensorplay.torch.make_graphed_callables(module, (torch.zeros(2),))
    with pytest.raises(ValueError, match="sample_args must hold CUDA tensors"):
        tensorplay.torch.make_graphed_callables(torch.nn.Linear(2, 2), (torch.zeros(2),))


def test_random_ops_on_cuda_are_refused_before_they_run():
    # The dispatch mode refuses at PyTorch's Python dispatch key, before any backend runs, so
    # this holds on a CPU-only PyTorch too: the op never reaches a CUDA kernel. (The operator
    # is called directly: torch.rand(device="cuda") initialises CUDA before dispatching.)
    with _refusal_mode():
        with pytest.raises(RuntimeError, match=r"tensorplay.torch: aten.rand.* draws from "
                                               r"PyTorch's CUDA generator.*DLPack"):
            torch.ops.aten.rand.default([4], device=torch.device("cuda"))
        assert torch.rand(4).shape == (4,)       # CPU draws do not touch the CUDA generator
        assert (torch.zeros(4) + 1).sum() == 4   # nor do ops without randomness


# -- GPU: the bridge's contract -------------------------------------------------------------------


@gpu
def test_torch_stream_follows_the_capture_and_comes_back(quiet_device):
    before = torch.cuda.current_stream()
    x = torch.ones(8, device="cuda")
    _warm(lambda: x + 1)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        ours = accelerator.current_stream().cuda_stream
        theirs = torch.cuda.current_stream().cuda_stream
        capturing = torch.cuda.is_current_stream_capturing()
        y = x + 1
    assert theirs == ours
    assert capturing
    assert torch.cuda.current_stream() == before
    g.replay()
    torch.cuda.synchronize()
    assert y.tolist() == [2.0] * 8


@gpu
def test_graph_capture_simple(quiet_device):
    # test/test_cuda.py, test_graph_capture_simple.
    a = torch.full((1000,), 1.0, device="cuda")
    _warm(lambda: a + 1)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        b = a
        for _ in range(10):
            b = b + 1
    g.replay()
    torch.cuda.synchronize()
    assert b.sum().item() == 11000.0


@gpu
def test_a_block_freed_in_the_capture_never_reaches_eager_pytorch(quiet_device):
    # Issue 38's probe: without the graph's MemPool, a block PyTorch freed during the capture
    # went to the next eager allocation, which every replay then overwrote.
    size = 1 << 20
    x = torch.ones(size, device="cuda")
    _warm(lambda: (x * 2) + 1)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        temporary = x * 2   # freed inside the capture; every replay writes it
        y = temporary + 1
        del temporary
    eager = torch.full((size,), 5.0, device="cuda")
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert eager.eq(5.0).all().item()
    assert y.eq(3.0).all().item()


@gpu
def test_the_mem_pool_lives_as_long_as_the_graph_and_outputs_outlive_it(quiet_device):
    x = torch.ones(1000, device="cuda")
    _warm(lambda: x * 3)
    g = cuda.CUDAGraph()
    assert tensorplay.torch.mem_pool(g) is None
    with tensorplay.torch.graph(g):
        y = x * 3
    pool = tensorplay.torch.mem_pool(g)
    assert isinstance(pool, torch.cuda.MemPool)
    g.replay()
    torch.cuda.synchronize()
    g.reset()
    assert tensorplay.torch.mem_pool(g) is None
    del pool
    gc.collect()
    torch.cuda.empty_cache()
    assert y.sum().item() == 3000.0      # the output outlives the graph and its pool


@gpu
def test_a_failed_capture_releases_the_mem_pool_and_restores_torch_state(quiet_device):
    before = torch.cuda.current_stream()
    x = torch.ones(4, device="cuda")
    g = cuda.CUDAGraph()
    with pytest.raises(ZeroDivisionError):
        with tensorplay.torch.graph(g):
            _ = x + 1
            1 / 0
    assert tensorplay.torch.mem_pool(g) is None
    assert torch.cuda.current_stream() == before
    assert not torch.cuda.is_current_stream_capturing()
    assert not cuda.is_current_stream_capturing()


@gpu
def test_graph_rng_functional_is_refused_and_the_capture_goes_on(quiet_device):
    # test/test_cuda.py, test_graph_rng_functional (dropout, rrelu) and test_graph_cudnn_dropout:
    # PyTorch's generator cannot advance in a foreign capture, so the bridge refuses the op
    # before it runs, and the capture stays usable.
    a = torch.ones(10000, device="cuda")
    _warm(lambda: a + 1)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        for op, kwargs in ((torch.nn.functional.dropout, {"p": 0.1}),
                           (torch.nn.functional.rrelu, {"training": True})):
            with pytest.raises(RuntimeError, match="draws from PyTorch's CUDA generator"):
                op(a, **kwargs)
        b = a + 1
    g.replay()
    torch.cuda.synchronize()
    assert b.sum().item() == 20000.0


@gpu
def test_graph_rng_distributions_are_refused(quiet_device):
    # test/test_cuda.py, test_graph_rng_distributions: the same torch functions and Tensor
    # methods, each refused in a bridged capture.
    size = 1000
    source = torch.rand(size, device="cuda")
    alloc = torch.empty(size, device="cuda")
    functions = (("bernoulli", (source.clone(),), {}),
                 ("normal", (source.clone() + 1, 1.0), {}),
                 ("poisson", (source.clone(),), {}),
                 ("rand", (size,), {"device": "cuda"}),
                 ("randint", (0, 3, (size,)), {"device": "cuda", "dtype": torch.float}),
                 ("randn", (size,), {"device": "cuda"}))
    methods = (("bernoulli_", (source.clone(),)), ("cauchy_", ()), ("exponential_", ()),
               ("geometric_", (0.3,)), ("log_normal_", ()), ("normal_", ()), ("random_", ()),
               ("uniform_", ()))
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        for name, args, kwargs in functions:
            with pytest.raises(RuntimeError, match="draws from PyTorch's CUDA generator"):
                getattr(torch, name)(*args, **kwargs)
        for name, args in methods:
            with pytest.raises(RuntimeError, match="draws from PyTorch's CUDA generator"):
                getattr(alloc, name)(*args)
        alloc.fill_(2.0)
    g.replay()
    torch.cuda.synchronize()
    assert alloc.eq(2.0).all().item()


@gpu
def test_tensorplay_draws_into_a_torch_tensor_fresh_on_every_replay(quiet_device):
    # The refusal's advice: tensorplay's graph-safe generator writes into PyTorch's tensor.
    noise = torch.empty(1000, device="cuda")
    view = tensorplay.from_dlpack(noise)
    x = torch.zeros(1000, device="cuda")
    _warm(lambda: view.uniform_(), lambda: x + noise)
    tensorplay.manual_seed(3)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        view.uniform_()
        y = x + noise
    g.replay()
    torch.cuda.synchronize()
    first = y.clone()
    g.replay()
    torch.cuda.synchronize()
    assert not torch.equal(first, y)
    assert 0.0 <= y.min().item() and y.max().item() < 1.0



def func_with_temps(t, val):
    """test/test_cuda.py's body of temporaries, which a pool must not hand out twice."""
    x = t.clone() + val
    y = t.clone() + val
    return x + y


@gpu
def test_graph_two_successive_share_a_pool(quiet_device):
    # test/test_cuda.py, test_graph_two_successive: two graphs captured one after the other,
    # with and without a shared pool (tensorplay's pool and one MemPool), replayed in order.
    size = 1000

    a = torch.ones(size, device="cuda")
    _warm(lambda: func_with_temps(a, 1))
    for share in (False, True):
        g0, g1 = cuda.CUDAGraph(), cuda.CUDAGraph()
        pool = cuda.graph_pool_handle() if share else None
        mem_pool = torch.cuda.MemPool() if share else None
        with tensorplay.torch.graph(g0, pool=pool, mem_pool=mem_pool):
            b = a.clone()
            for _ in range(5):
                b = func_with_temps(b, 1)
        with tensorplay.torch.graph(g1, pool=pool if share else None, mem_pool=mem_pool):
            for _ in range(5):
                b = func_with_temps(b, 1)
        g0.replay()
        g1.replay()
        torch.cuda.synchronize()
        assert b.sum().item() == size * 3070
        if share:
            assert tensorplay.torch.mem_pool(g0) is mem_pool
            assert tensorplay.torch.mem_pool(g1) is mem_pool
        del g0, g1, b
        gc.collect()


@gpu
def test_graph_concurrent_replay_on_pytorch_streams(quiet_device):
    # test/test_cuda.py, test_graph_concurrent_replay ("Don't share"): two graphs replayed at
    # once on two PyTorch streams (wrapped as tensorplay streams).
    size = 1000000

    a = torch.ones(size, device="cuda")
    _warm(lambda: func_with_temps(a, 1))
    g0, g1 = cuda.CUDAGraph(), cuda.CUDAGraph()
    with tensorplay.torch.graph(g0):
        b = a.clone()
        for _ in range(5):
            b = func_with_temps(b, 1)
    with tensorplay.torch.graph(g1):
        c = a.clone()
        for _ in range(5):
            c = func_with_temps(c, 2)
    s0, s1 = torch.cuda.Stream(), torch.cuda.Stream()
    s0.wait_stream(torch.cuda.current_stream())
    s1.wait_stream(torch.cuda.current_stream())
    g0.replay(cuda.external_stream(s0.cuda_stream))
    g1.replay(cuda.external_stream(s1.cuda_stream))
    torch.cuda.synchronize()
    assert b.sum().item() == size * 94
    assert c.sum().item() == size * 156


@gpu
def test_graph_record_stream_and_pytorch_forks(quiet_device):
    # test/test_cuda.py, test_graph_record_stream: a PyTorch fork and join inside the capture,
    # with record_stream on a tensor freed during it (PyTorch defers its end-of-life event while
    # a capture routes to a pool, which use_mem_pool makes it see).
    a = torch.zeros(3, device="cuda")
    s2 = torch.cuda.Stream()
    _warm(lambda: a.clone().fill_(1.0))
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        b = a.clone()
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            b.fill_(1.0)
            b.record_stream(s2)
            out = b * 2
            del b
        torch.cuda.current_stream().wait_stream(s2)
    g.replay()
    torch.cuda.synchronize()
    c = torch.zeros(3, device="cuda")  # processes the deferred events
    assert out.tolist() == [2.0, 2.0, 2.0]
    assert c.tolist() == [0.0, 0.0, 0.0]


@gpu
def test_a_pending_record_stream_event_leaves_the_capture_valid(quiet_device):
    # The probe of issue 38: a block freed after record_stream() waits for an event PyTorch
    # queries at a later allocation (cudaEventQuery, illegal on a thread whose capture is in
    # global mode: "operation not permitted when stream is capturing"). The bridge captures in
    # relaxed mode with PyTorch routed to the graph's MemPool, so allocations inside the capture
    # with such an event pending capture and replay correctly.
    side = torch.cuda.Stream()
    _warm(lambda: torch.ones(16, device="cuda") * 3)
    a = torch.ones(1 << 20, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        a.mul_(2)
    a.record_stream(side)
    del a  # its end-of-life event on side is pending
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        b = torch.ones(16, device="cuda") * 3
        c = torch.empty(1 << 21, device="cuda").fill_(1.0)  # a new segment of the MemPool
    g.replay()
    torch.cuda.synchronize()
    assert b.tolist() == [3.0] * 16 and bool((c == 1.0).all())


@gpu
def test_pytorch_follows_a_tensorplay_fork(quiet_device):
    x = torch.ones(16, device="cuda")
    _warm(lambda: x * 3, lambda: x + 1)
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        capture_stream = cuda.current_stream()
        side.wait_stream(capture_stream)
        with cuda.stream(side):
            followed = torch.cuda.current_stream().cuda_stream == side.cuda_stream
            y = x * 3
        capture_stream.wait_stream(side)
        back = torch.cuda.current_stream().cuda_stream == capture_stream.cuda_stream
        z = y + 1
    assert followed and back
    g.replay()
    torch.cuda.synchronize()
    assert z.tolist() == [4.0] * 16


@gpu
def test_is_current_stream_capturing(quiet_device):
    # test/test_cuda.py, test_graph_is_current_stream_capturing.
    assert not torch.cuda.is_current_stream_capturing()
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        inside = torch.cuda.is_current_stream_capturing()
        torch.zeros(1, device="cuda").add_(1)
    assert inside
    assert not torch.cuda.is_current_stream_capturing()


@gpu
def test_graph_capture_reset_recapture(quiet_device):
    # test/test_cuda.py, test_graph_capture_reset_recapture: capture, replay, reset, capture
    # again into the same graph object.
    a = torch.full((1000,), 1.0, device="cuda")
    _warm(lambda: a + 1, lambda: a + 2)
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        b = a
        for _ in range(10):
            b = b + 1
    g.replay()
    torch.cuda.synchronize()
    assert b.sum().item() == 11000.0
    g.reset()
    with tensorplay.torch.graph(g):
        b = a
        for _ in range(10):
            b = b + 2
    g.replay()
    torch.cuda.synchronize()
    assert b.sum().item() == 21000.0
    g.reset()


@gpu
def test_recapture_updates_a_graph_of_pytorch_and_cublas_kernels(quiet_device):
    w = torch.randn(64, 64, device="cuda")
    x, other = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
    out = torch.empty(8, 64, device="cuda")
    _warm(lambda: torch.matmul(x, w, out=out), lambda: torch.relu_(out))
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        torch.matmul(x, w, out=out)
        torch.relu_(out)
    pool = tensorplay.torch.mem_pool(g)
    with tensorplay.torch.recapture(g):
        torch.matmul(other, w, out=out)
        torch.relu_(out)
    assert tensorplay.torch.mem_pool(g) is not pool   # a recapture's own MemPool
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, torch.relu(other @ w))


@gpu
def test_conditional_nodes_with_pytorch_bodies_and_a_torch_predicate(quiet_device):
    x = torch.zeros(4, device="cuda")
    counter = torch.zeros(1, dtype=torch.int64, device="cuda")
    keep_going = torch.zeros(1, dtype=torch.bool, device="cuda")
    flag = torch.ones(1, dtype=torch.bool, device="cuda")
    index = torch.ones(1, dtype=torch.int32, device="cuda")
    _warm(lambda: x.add_(0), lambda: counter.add_(0), lambda: keep_going.copy_(counter < 3))
    g = cuda.CUDAGraph()
    with tensorplay.torch.graph(g):
        keep_going.copy_(counter < 3)
        g.begin_capture_to_while_node(keep_going)           # a PyTorch bool predicate
        body_stream = torch.cuda.current_stream().cuda_stream
        counter += 1
        x += 1                                              # while: three passes
        keep_going.copy_(counter < 3)
        g.end_capture_to_conditional_node()
        g.begin_capture_to_if_else_node(flag)
        x += 10                                             # if branch
        g.begin_capture_to_next_body()
        x -= 100
        g.end_capture_to_conditional_node()
        g.begin_capture_to_switch_node(index, 2)
        x += 1000
        g.begin_capture_to_next_body()
        x *= 2                                              # case 1
        g.end_capture_to_conditional_node()
    assert body_stream != cuda.current_stream().cuda_stream
    g.replay()
    torch.cuda.synchronize()
    assert x.tolist() == [26.0] * 4     # ((0 + 3) + 10) * 2
    # PyTorch's kernels, in the bodies too, are listed as foreign: no signature, arguments None.
    foreign = [node for node in g.kernel_nodes() if not node.signature]
    assert any(len(node.id) > 1 for node in foreign)
    assert all(node.arguments is None for node in foreign)


@gpu
def test_foreign_kernels_are_listed_refused_for_changes_and_named_in_dot(quiet_device,
                                                                        tmp_path):
    x = torch.ones(32, device="cuda")
    _warm(lambda: torch.sigmoid(x))
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    with tensorplay.torch.graph(g):
        y = torch.sigmoid(x)
    nodes = g.kernel_nodes()
    assert len(nodes) == 1 and nodes[0].arguments is None and nodes[0].signature == ()
    assert "sigmoid" in nodes[0].name
    with pytest.raises(ValueError, match="tensorplay did not launch it"):
        g.set_kernel_node_params(nodes[0], arguments={"n": 1})
    g.debug_dump(str(tmp_path / "torch.dot"))
    text = (tmp_path / "torch.dot").read_text()
    assert "sigmoid" in text
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.sigmoid(x))


@gpu
def test_a_synchronising_pytorch_call_fails_the_capture_cleanly(quiet_device):
    x = torch.ones(4, device="cuda")
    _warm(lambda: x + 1)
    before = torch.cuda.current_stream()
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError):
        with tensorplay.torch.graph(g):
            y = x + 1
            y.sum().item()      # a host read: PyTorch refuses it during capture
    assert not cuda.is_current_stream_capturing()
    assert torch.cuda.current_stream() == before
    assert tensorplay.torch.mem_pool(g) is None
    assert (x + 1).sum().item() == 8.0   # eager PyTorch works afterwards


@gpu
def test_another_thread_keeps_its_own_torch_stream(quiet_device):
    seen = {}

    def other():
        seen["stream"] = torch.cuda.current_stream().cuda_stream

    g = cuda.CUDAGraph()
    x = torch.ones(4, device="cuda")
    _warm(lambda: x + 1)
    with tensorplay.torch.graph(g):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        y = x + 1
    assert seen["stream"] == torch.cuda.default_stream().cuda_stream
    g.replay()
    torch.cuda.synchronize()
    assert y.tolist() == [2.0] * 4


# -- make_graphed_callables ----------------------------------------------------------------------


@gpu
def test_graph_make_graphed_callables(quiet_device):
    # test/test_cuda.py, test_graph_make_graphed_callables, without its Dropout layers (PyTorch's
    # random ops are refused in the bridge): two Modules and two functions graphed together,
    # trained against an eager copy; parameters equal afterwards; eval runs ungraphed.
    torch.manual_seed(5)
    n, d_in, h, d_out = 1, 16, 8, 4
    models = [torch.nn.Sequential(torch.nn.Sequential(torch.nn.Linear(d_in, h)),
                                  torch.nn.Sequential(torch.nn.Linear(h, d_out))).cuda()
              for _ in range(2)]
    model_graphed, model_control = models
    model_graphed.load_state_dict(model_control.state_dict())
    opt_graphed = torch.optim.SGD(model_graphed.parameters(), lr=0.1)
    opt_control = torch.optim.SGD(model_control.parameters(), lr=0.1)
    x = torch.randn(n, d_in, device="cuda")
    hidden = torch.randn(n, h, device="cuda", requires_grad=True)
    y_pred = torch.randn(n, d_out, device="cuda", requires_grad=True)
    y = torch.randn(n, d_out, device="cuda")
    loss_fn_control = torch.nn.functional.mse_loss
    relu_control = torch.nn.functional.relu
    model_graphed[0], model_graphed[1], relu_graphed, loss_fn_graphed = \
        tensorplay.torch.make_graphed_callables(
            (model_graphed[0], model_graphed[1], relu_control, loss_fn_control),
            ((x,), (hidden,), (y_pred,), (y_pred, y)))
    real_inputs = [torch.rand_like(x) for _ in range(10)]
    real_targets = [torch.rand_like(y) for _ in range(10)]
    for m, opt, relu, loss_fn in zip((model_graphed, model_control), (opt_graphed, opt_control),
                                     (relu_graphed, relu_control),
                                     (loss_fn_graphed, loss_fn_control)):
        for data, target in zip(real_inputs, real_targets):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(relu(m(data)), target)
            loss.backward()
            opt.step()
    for p, pc in zip(model_graphed.parameters(), model_control.parameters()):
        torch.testing.assert_close(p, pc)
    model_graphed.eval()
    model_control.eval()
    torch.testing.assert_close(model_graphed(real_inputs[0]), model_control(real_inputs[0]))


FRESH_PROCESS_BACKWARD = """
import gc, torch, tensorplay.torch
model = torch.nn.Linear(8, 4, device="cuda")
graphed = tensorplay.torch.make_graphed_callables(model, (torch.randn(2, 8, device="cuda"),))
gc.collect()  # whatever make_graphed_callables made and dropped is gone
for _ in range(3):
    graphed(torch.randn(2, 8, device="cuda")).sum().backward()
torch.cuda.synchronize()
print(tuple(model.weight.grad.shape))
"""


@gpu
def test_backward_of_a_fresh_process_runs_on_a_live_stream():
    # PyTorch's autograd orders each backward with the stream every node was made on (the
    # parameters' AccumulateGrad nodes are made in the warm-up), so that stream must outlive
    # make_graphed_callables: a tensorplay.cuda.Stream destroyed on return made the first
    # backward of a fresh process fail with "CUDA error: context is destroyed".
    result = subprocess.run([sys.executable, "-c", FRESH_PROCESS_BACKWARD], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("(4, 8)")


@gpu
def test_graph_make_graphed_callables_parameterless_nograd_module(quiet_device):
    # test/test_cuda.py, test_graph_make_graphed_callables_parameterless_nograd_module: a module
    # with no parameters and an input that does not require grad has no backward graph.
    relu = torch.nn.ReLU()
    x = torch.randn(4, 4, device="cuda")
    graphed = tensorplay.torch.make_graphed_callables(relu, (x,))
    fresh = torch.randn(4, 4, device="cuda")
    out = graphed(fresh)
    torch.testing.assert_close(out, torch.relu(fresh))
    assert graphed.forward.backward_graph is None


@gpu
def test_graph_make_graphed_callables_same_pool(quiet_device):
    # test/test_cuda.py, test_graph_make_graphed_callables_same_pool: callables made one call
    # at a time into one pool (here tensorplay's handle and one MemPool), each then run forward
    # and backward in the order they were captured (what sharing a pool asks: PyTorch's CUDA
    # graphs notes, "Sharing memory across captures"), train as eager copies do, in memory of
    # their own.
    torch.manual_seed(5)
    models = [torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(),
                                  torch.nn.Linear(128, 128)).cuda() for _ in range(3)]
    pool, mem_pool = cuda.graph_pool_handle(), torch.cuda.MemPool()
    graphed_models = []
    for model in models:
        x = torch.randn(64, 32, device="cuda")
        graphed_models.append(tensorplay.torch.make_graphed_callables(
            copy.deepcopy(model), (x,), pool=pool, mem_pool=mem_pool))
    for model, graphed_model in zip(models, graphed_models):
        x = torch.randn(64, 32, device="cuda")
        y, yg = model(x), graphed_model(x)
        loss, loss_graphed = y.norm(), yg.norm()
        loss.backward()
        loss_graphed.backward()
        torch.testing.assert_close(y, yg)
        torch.testing.assert_close(loss, loss_graphed)
        for p, pg in zip(model.parameters(), graphed_model.parameters()):
            torch.testing.assert_close(p, pg)
            torch.testing.assert_close(p.grad, pg.grad)
            assert p.data_ptr() != pg.data_ptr() and p.grad.data_ptr() != pg.grad.data_ptr()


@gpu
def test_graphed_callable_output_structure_and_argument_checks(quiet_device):
    def pair(a, b):
        return {"sum": a + b, "product": a * b}

    a = torch.randn(3, device="cuda", requires_grad=True)
    b = torch.randn(3, device="cuda", requires_grad=True)
    graphed = tensorplay.torch.make_graphed_callables(pair, (a, b))
    fresh_a = torch.randn(3, device="cuda", requires_grad=True)
    fresh_b = torch.randn(3, device="cuda", requires_grad=True)
    out = graphed(fresh_a, fresh_b)
    torch.testing.assert_close(out["sum"], fresh_a + fresh_b)
    (out["sum"].sum() + out["product"].sum()).backward()
    torch.testing.assert_close(fresh_a.grad, 1 + fresh_b)
    with pytest.raises(ValueError, match="must keep its sample's shape"):
        graphed(torch.randn(4, device="cuda"), fresh_b)
    with pytest.raises(TypeError, match="takes 2 tensor"):
        graphed(fresh_a)
