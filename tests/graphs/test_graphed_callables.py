"""make_graphed_callables' restrictions on Modules, checked before any GPU work (so on any
machine): no hooks anywhere in the module, no trainable buffers, parameters on CUDA. The
module's restrictions are checked through graphed_callables.py directly, since the public
function first reports a missing accelerator on a machine without a GPU. Then the graphed
Function's own logic over stand-in graphs: which arguments it stages, the second backward, and
the order of the backward passes (Note [Backward order]).

On a GPU (marked gpu), the graphs themselves, forward and backward: a small MLP's
graphed outputs and gradients equal the eager ones over many iterations with fresh inputs and
dropout, and match PyTorch's on the same weights and inputs; functions with inputs that require
grad; chained callables sharing a pool; allow_unused_input; the checks made on every call;
arguments in another layout than their sample's (the sample transposed, a strided slice); a
second backward with and without retain_graph; the reverse order of the backward passes, and
forward calls that never get one. The tests of exact equality use integer weights and inputs,
so that every sum is exact in float32 whatever the order of its terms."""
import re

import numpy
import pytest

import tensorplay as tp
from tensorplay import accelerator, nn
from tensorplay._python import graphed_callables
from tensorplay.cuda import graphs

from tests.peers import import_or_skip


def make(callables, sample_args):
    return graphed_callables.make_graphed_callables(callables, sample_args, 3, False, None,
                                                    "global")


def test_a_module_with_a_forward_hook_is_refused_naming_where():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    model[1].register_forward_hook(lambda module, args, output: None)
    with pytest.raises(ValueError, match=r"callables must not carry hooks, and its submodule '1' "
                                         r"has 1 forward hook\(s\)"):
        make(model, ())
    handle = model.register_forward_hook(lambda module, args, output: None)
    with pytest.raises(ValueError, match=r"callables\[1\] must not carry hooks, and it has 1"):
        make((lambda: tp.zeros(1), model), ((), ()))
    handle.remove()


def test_a_module_with_a_trainable_buffer_is_refused():
    model = nn.Linear(2, 2)
    model.register_buffer("running", tp.zeros(2, requires_grad=True))
    with pytest.raises(ValueError, match=r"callables has a buffer that requires grad "
                                         r"\('running'\): in a graphed module only parameters "
                                         "may be trainable"):
        make(model, ())


def test_a_module_on_the_cpu_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="the parameter 'weight' of callables must be a CUDA "
                                         "tensor, got one on cpu"):
        make(nn.Linear(2, 2), ())


# -- the graphed Function's staging, second backward and order, over stand-in graphs -------------
# _graphed wraps whatever has stage_and_launch(); FakeGraph copies as staging.pyx does (a pair
# that is the static tensor or has its layout skipped, a static buffer overlapping an input
# refused before anything is copied) and then runs a Python body in place of a replay, so the
# Function's logic runs on CPU tensors. The tests marked gpu below run it on real graphs.

FREED = ("Trying to backward through the graph a second time (or directly access saved tensors "
         "after they have already been freed). Saved intermediate values of the graph are freed "
         "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
         "backward through the graph a second time or if you need to access saved tensors after "
         "calling backward.")


class FakeGraph:
    def __init__(self, body):
        self.body = body
        self.calls = []     # the pairs each stage_and_launch() was given
        self.replays = 0

    def stage_and_launch(self, statics, inputs):
        self.calls.append(list(zip(statics, inputs)))
        pairs = [(static, fresh) for static, fresh in zip(statics, inputs)
                 if not (fresh is static or (fresh.data_ptr() == static.data_ptr()
                                             and fresh.stride() == static.stride()))]
        for index, (static, _) in enumerate(pairs):
            for other, (_, fresh) in enumerate(pairs):
                if numpy.shares_memory(static.numpy(), fresh.numpy()):
                    raise ValueError(f"inputs[{other}] and static_inputs[{index}] overlap in "
                                     "memory; stage_and_launch() copies every pair at once")
        for static, fresh in pairs:
            static.copy_(fresh)
        self.body()
        self.replays += 1


MATRIX = tp.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]])


def graphed_matmul(order, position, sample):
    """_graphed over FakeGraphs for a @ MATRIX, with sample as its static input."""
    output, grad_output, grad_input = tp.zeros(3, 3), tp.zeros(3, 3), tp.zeros(3, 3)
    forward = FakeGraph(lambda: output.copy_(sample @ MATRIX))
    backward = FakeGraph(lambda: grad_input.copy_(grad_output @ MATRIX.t()))

    def matmul(a):
        return a @ MATRIX

    call = graphed_callables._graphed(matmul, (sample,), (sample,), (forward, (output,), True),
                                      (backward, (grad_output,), (grad_input,)), order, position)
    return call, forward, backward


def square(seed, requires_grad=True):
    values = numpy.arange(9, dtype=numpy.float32).reshape(3, 3) - 4 + seed
    return tp.tensor(values, requires_grad=requires_grad)


def one_callable():
    return graphed_matmul(graphed_callables._Order(["callables"]), 0, square(0))


def two_callables():
    order = graphed_callables._Order(["callables[0]", "callables[1]"])
    return graphed_matmul(order, 0, square(0)), graphed_matmul(order, 1, square(1))


def test_an_argument_in_its_samples_memory_but_another_layout_is_staged_by_logical_index():
    sample = square(0)
    original = sample.detach().clone()
    graphed, forward, _ = graphed_matmul(graphed_callables._Order(["callables"]), 0, sample)
    out = graphed(sample.t())  # same shape, dtype and data pointer; other strides
    # Refused as overlapping, then staged from a clone: the graph read the transpose.
    assert len(forward.calls) == 2 and forward.calls[0][0][1].data_ptr() == sample.data_ptr()
    assert forward.calls[1][0][1].is_contiguous()
    assert out.tolist() == (original.t() @ MATRIX).tolist()
    assert sample.tolist() == original.t().tolist()  # the static input holds the argument
    out.sum().backward()  # through the transpose back to the sample's own .grad
    assert sample.grad.tolist() == (tp.ones(3, 3) @ MATRIX.t()).t().tolist()
    graphed(sample)  # the static input itself: nothing to stage
    assert forward.calls[-1] == []


def test_a_second_backward_without_retain_graph_raises_pytorchs_error_before_replaying():
    graphed, _, backward = one_callable()
    x = square(5)
    loss = graphed(x).sum()
    loss.backward()
    first = x.grad.clone()
    with pytest.raises(RuntimeError) as error:
        loss.backward()
    assert str(error.value) == FREED
    assert backward.replays == 1 and x.grad.tolist() == first.tolist()
    graphed(x).sum().backward()  # a new call trains as before
    assert x.grad.tolist() == (first * 2).tolist()


def test_with_retain_graph_a_second_backward_replays_and_doubles_the_gradient():
    graphed, _, backward = one_callable()
    x = square(5)
    loss = (graphed(x) * 3).sum()
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    assert backward.replays == 2 and x.grad.tolist() == (first * 2).tolist()


def test_backward_passes_must_run_in_the_reverse_order_of_the_forward_passes():
    (first, _, first_backward), (second, _, second_backward) = two_callables()
    x, y = square(2), square(3)
    a, b = first(x), second(y)
    with pytest.raises(RuntimeError, match=r"the backward of callables\[0\] must wait for the "
                                           r"backward of callables\[1\], whose forward ran after "
                                           r"callables\[0\]'s: .* reverse order of their forward "
                                           r"passes. .*Nothing was replayed"):
        a.sum().backward()
    assert first_backward.calls == [] and x.grad is None  # refused before staging anything
    b.sum().backward()  # the refusal changed nothing: the right order still works
    a.sum().backward()
    assert first_backward.replays == 1 and second_backward.replays == 1
    assert x.grad.tolist() == y.grad.tolist() == (tp.ones(3, 3) @ MATRIX.t()).tolist()


def test_a_forward_call_overwrites_its_last_call_and_those_of_later_callables():
    (first, _, first_backward), (second, _, _) = two_callables()
    x = square(2)
    old = first(x)
    new = first(x)
    with pytest.raises(RuntimeError, match=r"the backward of callables\[0\] is for a forward "
                                           r"call whose outputs, saved values and static inputs "
                                           r"a later forward call of callables\[0\] overwrote"):
        old.sum().backward()
    new.sum().backward()
    assert first_backward.replays == 1
    b = second(square(3))
    with tp.no_grad():  # a forward that records nothing still overwrites what follows it
        first(x)
    with pytest.raises(RuntimeError, match=r"the backward of callables\[1\] .* a later forward "
                                           r"call of callables\[0\] overwrote"):
        b.sum().backward()


def test_forward_calls_without_a_backward_block_nothing_after_them():
    (first, _, first_backward), (second, _, second_backward) = two_callables()
    x, y = square(2), square(3)
    with tp.no_grad():  # evaluation: nothing recorded, nothing pushed
        first(x)
        second(y)
    a = first(x)
    with tp.no_grad():
        second(y)  # a later callable under no_grad leaves the earlier call current
    a.sum().backward()
    first(x), second(y)  # outputs that never get a backward (grad mode on)
    a, b = first(x), second(y)  # a forward call of callables[0] starts a new sequence
    b.sum().backward()
    a.sum().backward()
    assert first_backward.replays == 2 and second_backward.replays == 1


def test_a_retained_second_pass_runs_in_the_same_reverse_order():
    (first, _, first_backward), (second, _, second_backward) = two_callables()
    x = square(2)
    loss = (second(first(x)) * 2).sum()
    loss.backward(retain_graph=True)
    once = x.grad.clone()
    loss.backward()
    assert first_backward.replays == second_backward.replays == 2
    assert x.grad.tolist() == (once * 2).tolist()


def test_calls_that_record_nothing_need_no_order():
    graphed, forward, backward = graphed_matmul(graphed_callables._Order(["callables"]), 0,
                                                square(0, requires_grad=False))
    out = graphed(square(1, requires_grad=False))
    assert not out.requires_grad and forward.replays == 1 and backward.replays == 0


# --------------------------------------------------------------------------------------------
# On a GPU (marked gpu): the graphs themselves, forward and backward
# --------------------------------------------------------------------------------------------


def mlp(dropout=0.0):
    layers = [nn.Linear(16, 32), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(32, 4)).to("cuda")


def twin(model, make):
    """A second model from make() with model's weights."""
    other = make()
    other.load_state_dict(model.state_dict())
    return other


def batch(seed, shape=(8, 16), requires_grad=False):
    values = numpy.random.default_rng(seed).standard_normal(shape)
    return tp.tensor(values, dtype=tp.float32, device="cuda", requires_grad=requires_grad)


def step(model, x, seed):
    """One training iteration from a seeded generator: outputs (cloned) and every gradient."""
    model.zero_grad()
    tp.manual_seed(seed)
    output = model(x)
    (output * output).mean().backward()
    return output.detach().clone(), [p.grad.clone() for p in model.parameters()]


def assert_close(mine, theirs, rtol=1e-5, atol=1e-6):
    accelerator.synchronize()
    assert numpy.allclose(mine.cpu().numpy(), theirs.cpu().numpy(), rtol=rtol, atol=atol)


@pytest.mark.gpu
def test_graphed_mlp_with_dropout_equals_eager_over_many_iterations(quiet_device):
    tp.manual_seed(0)
    model = mlp(dropout=0.25)
    eager = twin(model, lambda: mlp(dropout=0.25))
    graphed = graphs.make_graphed_callables(model, (batch(0),))
    assert graphed is model  # a Module is graphed in place
    outputs = set()
    for iteration in range(20):
        x = batch(iteration + 1)  # a fresh input each time
        graphed_output, graphed_grads = step(model, x, seed=1000 + iteration)
        eager_output, eager_grads = step(eager, x, seed=1000 + iteration)
        assert_close(graphed_output, eager_output)
        for mine, theirs in zip(graphed_grads, eager_grads):
            assert_close(mine, theirs)
        outputs.add(graphed_output.cpu().numpy().tobytes())
    assert len(outputs) == 20  # fresh inputs and fresh dropout masks reached the graph


@pytest.mark.gpu
def test_graphed_module_replays_without_running_its_python(quiet_device):
    calls = []

    class Counting(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Linear(16, 4)

        def forward(self, x):
            calls.append(1)
            return self.layer(x)

    model = Counting().to("cuda")
    graphs.make_graphed_callables(model, (batch(0),), num_warmup_iters=2)
    assert len(calls) == 3  # two warm-ups and the capture
    model(batch(1)).sum().backward()
    model(batch(2)).sum().backward()
    assert len(calls) == 3
    assert model.forward.cuda_graph is not None and model.forward.backward_graph is not None
    assert model.forward.cuda_graph.pool_id == model.forward.backward_graph.pool_id
    model.eval()  # another mode than the capture's: the module's own forward runs
    model(batch(3))
    assert len(calls) == 4


@pytest.mark.gpu
def test_graphed_function_gradients_reach_inputs_that_require_grad(quiet_device):
    def function(a, b):
        return (a * b).relu(), a + 1

    graphed = graphs.make_graphed_callables(function, (batch(0, requires_grad=True),
                                                       batch(1, requires_grad=True)))
    for seed in range(5):
        a, b = batch(10 + seed, requires_grad=True), batch(20 + seed, requires_grad=True)
        product, shifted = graphed(a, b)
        (product.sum() + (shifted * shifted).sum()).backward()
        graphed_grads = (a.grad.clone(), b.grad.clone())
        a.grad = b.grad = None
        product, shifted = function(a, b)
        (product.sum() + (shifted * shifted).sum()).backward()
        assert_close(graphed_grads[0], a.grad)
        assert_close(graphed_grads[1], b.grad)


@pytest.mark.gpu
def test_chained_callables_share_a_pool_and_backpropagate_through_both(quiet_device):
    tp.manual_seed(1)
    first = nn.Sequential(nn.Linear(16, 32), nn.ReLU()).to("cuda")
    second = nn.Linear(32, 4).to("cuda")
    eager_first = twin(first, lambda: nn.Sequential(nn.Linear(16, 32), nn.ReLU()).to("cuda"))
    eager_second = twin(second, lambda: nn.Linear(32, 4).to("cuda"))
    hidden = batch(0, shape=(8, 32), requires_grad=True)  # first's output requires grad
    graphs.make_graphed_callables((first, second), ((batch(0),), (hidden,)))
    assert first.forward.cuda_graph.pool_id == second.forward.backward_graph.pool_id
    parameters = list(first.parameters()) + list(second.parameters())
    eager_parameters = list(eager_first.parameters()) + list(eager_second.parameters())
    for seed in range(5):
        x = batch(seed + 1)
        for one, two, group in ((first, second, parameters),
                                (eager_first, eager_second, eager_parameters)):
            for parameter in group:
                parameter.grad = None
            (two(one(x)) ** 2).sum().backward()
        for mine, theirs in zip(parameters, eager_parameters):
            assert_close(mine.grad, theirs.grad)


@pytest.mark.gpu
def test_allow_unused_input_is_passed_to_autograd(quiet_device):
    def uses_first(a, b):
        return a * 2

    samples = (batch(0, requires_grad=True), batch(1, requires_grad=True))
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        graphs.make_graphed_callables(uses_first, samples)
    graphed = graphs.make_graphed_callables(uses_first, samples, allow_unused_input=True)
    a, b = batch(2, requires_grad=True), batch(3, requires_grad=True)
    graphed(a, b).sum().backward()
    assert_close(a.grad, tp.full((8, 16), 2.0, device="cuda"))
    assert b.grad is None


@pytest.mark.gpu
def test_each_call_checks_count_shape_dtype_and_requires_grad(quiet_device):
    graphed = graphs.make_graphed_callables(lambda a: a * 3, (batch(0, requires_grad=True),))
    with pytest.raises(TypeError, match=r"takes 1 tensor argument\(s\), as its sample_args "
                                        "did, got 2"):
        graphed(batch(1), batch(2))
    with pytest.raises(ValueError, match=r"must keep its sample's shape \(8, 16\)"):
        graphed(batch(1, shape=(4, 16), requires_grad=True))
    with pytest.raises(ValueError, match=r"must match its sample's requires_grad \(True\), got "
                                         "False"):
        graphed(batch(1))
    with tp.no_grad():  # nothing is differentiated: requires_grad need not match
        assert_close(graphed(batch(1)), batch(1) * 3)


@pytest.mark.gpu
def test_outputs_that_need_no_grad_capture_no_backward_graph(quiet_device):
    graphed = graphs.make_graphed_callables(lambda a: a + 1, (batch(0),))
    assert graphed.backward_graph is None
    out = graphed(batch(1))
    assert not out.requires_grad


@pytest.mark.gpu
def test_graphed_mlp_matches_pytorch_on_the_same_weights_and_inputs(quiet_device):
    torch = import_or_skip("torch")
    tp.manual_seed(0)
    model = mlp()
    reference = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 4)).cuda()
    # PyTorch's names, shapes and order, so the weights copy across by name.
    assert [(name, tuple(p.shape)) for name, p in model.named_parameters()] == \
        [(name, tuple(p.shape)) for name, p in reference.named_parameters()]
    with torch.no_grad():
        for name, value in model.state_dict().items():
            reference.state_dict()[name].copy_(torch.from_numpy(value.cpu().numpy()))
    graphs.make_graphed_callables(model, (batch(0),))
    for seed in range(5):
        values = numpy.random.default_rng(seed + 1).standard_normal((8, 16)).astype("float32")
        output, grads = step(model, tp.tensor(values, device="cuda"), seed=seed)
        reference.zero_grad()
        expected = reference(torch.from_numpy(values).cuda())
        (expected * expected).mean().backward()
        assert numpy.allclose(output.cpu().numpy(), expected.detach().cpu().numpy(),
                              rtol=1e-4, atol=1e-5)
        for mine, theirs in zip(grads, reference.parameters()):
            assert numpy.allclose(mine.cpu().numpy(), theirs.grad.cpu().numpy(),
                                  rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_linear_initialisation_matches_pytorchs_distribution():
    torch = import_or_skip("torch")
    ours = nn.Linear(64, 512).weight.numpy()
    theirs = torch.nn.Linear(64, 512).weight.detach().numpy()
    # Same range and moments of U(-1/8, 1/8) (different generators, so not the same draws).
    assert abs(ours.min() - theirs.min()) < 1e-3 and abs(ours.max() - theirs.max()) < 1e-3
    assert abs(ours.std() - theirs.std()) < 2e-3


# -- layouts, second backward passes and the order of backward passes, exactly ------------------

def integers(seed, shape, requires_grad=False):
    values = numpy.random.default_rng(seed).integers(-3, 4, size=shape)
    return tp.tensor(values, dtype=tp.float32, device="cuda", requires_grad=requires_grad)


def integer_weights(module, seed):
    """module (on the GPU) with integer weights in [-2, 2]."""
    rng = numpy.random.default_rng(seed)
    with tp.no_grad():
        for parameter in module.parameters():
            parameter.copy_(tp.tensor(rng.integers(-2, 3, size=tuple(parameter.shape)),
                                      dtype=tp.float32, device="cuda"))
    return module


def integer_mlp(seed):
    return integer_weights(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("cuda"),
                           seed)


def integer_pair(seed):
    """(first, second): Linear(4, 8) and ReLU, then Linear(8, 3), integer weights."""
    return (integer_weights(nn.Sequential(nn.Linear(4, 8), nn.ReLU()).to("cuda"), seed),
            integer_weights(nn.Linear(8, 3).to("cuda"), seed + 1))


def assert_equal(mine, theirs):
    accelerator.synchronize()
    mine, theirs = mine.detach().cpu().numpy(), theirs.detach().cpu().numpy()
    assert mine.shape == theirs.shape and numpy.array_equal(mine, theirs), (mine, theirs)


def grads(*modules):
    return [parameter.grad.clone() for module in modules for parameter in module.parameters()]


@pytest.mark.gpu
def test_the_sample_transposed_and_a_strided_slice_reach_the_graph_by_logical_index(
        quiet_device):
    matrix = integers(0, (4, 4))

    def times(a):
        return a @ matrix

    sample = integers(1, (4, 4), requires_grad=True)
    graphed = graphs.make_graphed_callables(times, (sample,))
    original = integers(1, (4, 4), requires_grad=True)  # the sample's values, eagerly
    gradient = integers(2, (4, 4))
    expected = times(original.t())
    expected.backward(gradient.t())  # a strided incoming gradient too
    # Same shape, dtype and data pointer as the sample, other strides: staged, not skipped.
    out = graphed(sample.t())
    assert_equal(out, expected)
    assert_equal(sample, original.t())  # the static input now holds the argument
    out.backward(gradient.t())
    assert_equal(sample.grad, original.grad)

    wide = integers(3, (4, 8), requires_grad=True)
    eager_wide = integers(3, (4, 8), requires_grad=True)
    expected = times(eager_wide[:, 2:6])
    expected.backward(gradient)
    out = graphed(wide[:, 2:6])  # strides (8, 1), another allocation
    assert_equal(out, expected)
    out.backward(gradient)
    assert_equal(wide.grad, eager_wide.grad)


@pytest.mark.gpu
def test_a_second_backward_without_retain_graph_raises_and_the_module_still_trains(
        quiet_device):
    model = integer_mlp(0)
    eager = integer_mlp(0)  # the same weights, eagerly
    graphs.make_graphed_callables(model, (integers(1, (5, 4)),))
    x = integers(2, (5, 4))
    loss = model(x).sum()  # the graphed Function is the only Node that saves anything
    loss.backward()
    first = grads(model)
    with pytest.raises(RuntimeError, match=re.escape(FREED)):
        loss.backward()
    for mine, theirs in zip(grads(model), first):  # raised before any gradient moved
        assert_equal(mine, theirs)
    for seed in (3, 4):
        model.zero_grad()
        eager.zero_grad()
        x = integers(seed, (5, 4))
        (model(x) * 2).sum().backward()
        (eager(x) * 2).sum().backward()
        for mine, theirs in zip(grads(model), grads(eager)):
            assert_equal(mine, theirs)


@pytest.mark.gpu
def test_with_retain_graph_a_second_backward_doubles_the_gradients_exactly(quiet_device):
    model = integer_mlp(0)  # ReLU saves its output: the backward graph reads an activation
    eager = integer_mlp(0)  # the same weights, eagerly
    graphs.make_graphed_callables(model, (integers(1, (5, 4)),))
    x = integers(2, (5, 4))
    output = model(x)
    loss = (output * output).sum()
    loss.backward(retain_graph=True)
    once = grads(model)
    eager_output = eager(x)
    (eager_output * eager_output).sum().backward()
    for mine, theirs in zip(once, grads(eager)):
        assert_equal(mine, theirs)
    loss.backward()
    for mine, theirs in zip(grads(model), once):
        assert_equal(mine, theirs * 2)


@pytest.mark.gpu
def test_a_retained_second_pass_through_two_callables_doubles_both(quiet_device):
    first, second = integer_pair(0)
    graphs.make_graphed_callables((first, second), ((integers(1, (5, 4)),),
                                                    (integers(1, (5, 8), requires_grad=True),)))
    eager_first, eager_second = integer_pair(0)  # the same weights, eagerly
    x = integers(2, (5, 4))
    output = second(first(x))
    loss = (output * output).sum()
    loss.backward(retain_graph=True)  # backward of second, then of first
    once = grads(first, second)
    eager_output = eager_second(eager_first(x))
    (eager_output * eager_output).sum().backward()
    for mine, theirs in zip(once, grads(eager_first, eager_second)):
        assert_equal(mine, theirs)
    loss.backward()  # the same order again
    for mine, theirs in zip(grads(first, second), once):
        assert_equal(mine, theirs * 2)


@pytest.mark.gpu
def test_backward_out_of_order_is_refused_before_replaying_and_the_next_steps_are_exact(
        quiet_device):
    first, second = integer_pair(0)
    graphs.make_graphed_callables((first, second), ((integers(1, (5, 4)),),
                                                    (integers(1, (5, 8)),)))
    eager_first, eager_second = integer_pair(0)  # the same weights, eagerly
    x, h = integers(2, (5, 4)), integers(3, (5, 8))
    a, b = first(x), second(h)  # independent calls: the caller chooses the backward order
    with pytest.raises(RuntimeError, match=r"the backward of callables\[0\] must wait for the "
                                           r"backward of callables\[1\], whose forward ran "
                                           r"after callables\[0\]'s: .*reverse order of their "
                                           r"forward passes"):
        a.sum().backward()
    assert all(parameter.grad is None
               for module in (first, second) for parameter in module.parameters())
    b.sum().backward()  # the refusal changed nothing: the right order goes through
    a.sum().backward()
    eager_second(h).sum().backward()
    eager_first(x).sum().backward()
    for mine, theirs in zip(grads(first, second), grads(eager_first, eager_second)):
        assert_equal(mine, theirs)
    for seed in (4, 5):  # training steps: forward in order, backward in reverse
        for module in (first, second, eager_first, eager_second):
            module.zero_grad()
        x, h = integers(seed, (5, 4)), integers(seed + 10, (5, 8))
        a, b = first(x), second(h)
        (b * b).sum().backward()
        (a * a).sum().backward()
        eager_a, eager_b = eager_first(x), eager_second(h)
        (eager_b * eager_b).sum().backward()
        (eager_a * eager_a).sum().backward()
        for mine, theirs in zip(grads(first, second), grads(eager_first, eager_second)):
            assert_equal(mine, theirs)


@pytest.mark.gpu
def test_the_backward_of_an_overwritten_call_is_refused(quiet_device):
    model = integer_mlp(0)
    eager = integer_mlp(0)  # the same weights, eagerly
    graphs.make_graphed_callables(model, (integers(1, (5, 4)),))
    old = model(integers(2, (5, 4)))
    x = integers(3, (5, 4))
    new = model(x)  # rewrites the static input, the outputs and the saved values of old
    with pytest.raises(RuntimeError, match=r"the backward of callables is for a forward call "
                                           r"whose outputs, saved values and static inputs a "
                                           r"later forward call of callables overwrote"):
        old.sum().backward()
    new.sum().backward()
    eager(x).sum().backward()
    for mine, theirs in zip(grads(model), grads(eager)):
        assert_equal(mine, theirs)


@pytest.mark.gpu
def test_forward_calls_that_never_get_a_backward_do_not_break_later_training_steps(
        quiet_device):
    first, second = integer_pair(0)
    graphs.make_graphed_callables((first, second), ((integers(1, (5, 4)),),
                                                    (integers(1, (5, 8), requires_grad=True),)))
    eager_first, eager_second = integer_pair(0)  # the same weights, eagerly
    for seed in range(3):
        x = integers(20 + seed, (5, 4))
        with tp.no_grad():  # evaluation: nothing is recorded
            assert_equal(second(first(x)), eager_second(eager_first(x)))
        second(first(x))  # grad mode on, outputs dropped: the next step starts a new sequence
        for module in (first, second, eager_first, eager_second):
            module.zero_grad()
        x = integers(seed, (5, 4))
        hidden = first(x)
        with tp.no_grad():  # an evaluation of the later callable inside the step
            second(integers(30 + seed, (5, 8)))
        output = second(hidden)
        (output * output).sum().backward()
        eager_output = eager_second(eager_first(x))
        (eager_output * eager_output).sum().backward()
        for mine, theirs in zip(grads(first, second), grads(eager_first, eager_second)):
            assert_equal(mine, theirs)
