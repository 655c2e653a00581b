"""make_graphed_callables' restrictions on Modules, checked before any GPU work (so on any
machine): no hooks anywhere in the module, no trainable buffers, parameters on CUDA. The
module's restrictions are checked through graphed_callables.py directly, since the public
function first reports a missing accelerator on a machine without a GPU. Then the graphed
Function's own logic over stand-in graphs: which arguments it stages, the second backward, and
the order of the backward passes (Note [Backward order]). The graphs themselves are tested in
test_gpu_graphed_callables.py."""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay._python import graphed_callables


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
# Function's logic runs on CPU tensors. tests/test_gpu_graphed_callables.py runs it on real
# graphs.

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
