"""Autograd: every differentiable operation against finite differences in float64 on the CPU and
(marked gpu) on CUDA; leaves, grad mode, Functions and PyTorch's errors."""
import threading

import numpy
import pytest

import tensorplay as tp
from tensorplay import autograd

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def positive(*shape, seed=0):
    return numpy.random.default_rng(seed).uniform(0.5, 2.0, shape)


def signed(*shape, seed=0):
    """Values away from zero, of either sign (abs and relu have a kink at 0)."""
    rng = numpy.random.default_rng(seed)
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def distinct(*shape, seed=0):
    """Values whose maximum and minimum are unique (max and min are not smooth at ties)."""
    values = numpy.random.default_rng(seed).permutation(int(numpy.prod(shape))).astype(float)
    return values.reshape(shape) / 3.0


def gradcheck(function, *arrays, device="cpu", eps=1e-6, tolerance=1e-6):
    """The gradients autograd.grad gives for function at arrays (float64) match central finite
    differences of a random weighting of its output."""
    inputs = [tp.tensor(array, dtype=tp.float64, device=device, requires_grad=True)
              for array in arrays]
    output = function(*inputs)
    weights = tp.tensor(numpy.random.default_rng(1).standard_normal(output.shape),
                        dtype=tp.float64, device=device)
    analytic = autograd.grad((output * weights).sum(), inputs)
    for index, array in enumerate(arrays):
        numeric = numpy.zeros(array.shape)
        for position in numpy.ndindex(array.shape):
            sides = []
            for step in (eps, -eps):
                shifted = [numpy.array(a, dtype=float) for a in arrays]
                shifted[index][position] += step
                with tp.no_grad():
                    values = function(*[tp.tensor(a, dtype=tp.float64, device=device)
                                        for a in shifted])
                    sides.append((values * weights).sum().item())
            numeric[position] = (sides[0] - sides[1]) / (2 * eps)
        got = numpy.array(analytic[index].tolist()).reshape(array.shape)
        numpy.testing.assert_allclose(got, numeric, rtol=tolerance, atol=tolerance,
                                      err_msg=f"gradient of input {index}")


class Cube(autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * x * x * (3 * ctx.scale), None


OPERATIONS = {
    # name: (function, input arrays)
    "add broadcast": (lambda a, b: a + b, [signed(2, 3), signed(3, seed=1)]),
    "sub broadcast": (lambda a, b: a - b, [signed(2, 1, 3), signed(4, 1, seed=1)]),
    "mul broadcast": (lambda a, b: a * b, [signed(3, 1), signed(1, 4, seed=1)]),
    "div broadcast": (lambda a, b: a / b, [signed(2, 3), positive(2, 1, seed=1)]),
    "pow tensors": (lambda a, b: a ** b, [positive(2, 3), signed(3, seed=1)]),
    "scalar arithmetic": (lambda a: (3.0 - a * 2.5) / 2 + 1, [signed(4)]),
    "scalar first": (lambda a: 2.0 / a - 1.5 - a, [positive(4)]),
    "pow scalar": (lambda a: a ** 3 + a ** 0.5 + a ** 0, [positive(5)]),
    "rpow": (lambda a: 2.0 ** a, [signed(5)]),
    "neg": (lambda a: -a, [signed(4)]),
    "abs": (lambda a: abs(a), [signed(2, 3)]),
    "relu": (lambda a: a.relu(), [signed(2, 3)]),
    "sin cos": (lambda a: a.sin() * a.cos(), [signed(4)]),
    "exp": (lambda a: a.exp(), [signed(4)]),
    "sqrt": (lambda a: a.sqrt(), [positive(4)]),
    "log": (lambda a: a.log(), [positive(4)]),
    "sum": (lambda a: a.sum(), [signed(2, 3)]),
    "sum dims": (lambda a: a.sum((0, 2)) + a.sum(-1, keepdim=True).sum(0).sum(1),
                 [signed(2, 3, 4)]),
    "mean": (lambda a: a.mean() + a.mean(1), [signed(3, 4)]),
    "mean keepdim": (lambda a: a * a.mean(0, keepdim=True), [signed(3, 4)]),
    "max min": (lambda a: a.max() * 2 + a.min(), [distinct(3, 4)]),
    "transpose": (lambda a: a.transpose(0, 2) * tp.arange(4, dtype=tp.float64, device=a.device)
                  .unsqueeze(1).unsqueeze(2), [signed(2, 3, 4)]),
    "t": (lambda a: a.t() @ a, [signed(3, 2)]),
    "unsqueeze expand": (lambda a: a.unsqueeze(0).expand(4, 2, 3) * a, [signed(2, 3)]),
    "expand size one": (lambda a: a.expand(3, 4) * 2, [signed(3, 1)]),
    "view reshape": (lambda a: a.view(6).reshape(3, 2).t().reshape(-1), [signed(2, 3)]),
    "getitem": (lambda a: a[1:, ::2] * 3 + a[0, 1], [signed(3, 4)]),
    "clone contiguous": (lambda a: a.t().contiguous() * a.clone().t(), [signed(2, 3)]),
    "add sub alpha": (lambda a, b: a.add(b, alpha=2.5).sub(b, alpha=0.5), [signed(2, 3),
                                                                            signed(3, seed=1)]),
    "clamp scalars": (lambda a: a.clamp(-1.0, 1.0), [signed(6) * 0.9 + 0.05]),
    "clamp tensors": (lambda a, low, high: a.clamp(low, high),
                      [numpy.array([-3.0, -0.2, 0.3, 3.0]),
                       numpy.array([-1.0, -1.0, -1.0, -1.0]),
                       numpy.array([1.0, 1.0, 1.0, 1.0])]),
    "clamp broadcast": (lambda a, low: a.clamp(low, 1.0),
                        [numpy.array([[-3.0, 0.5], [0.2, 3.0]]), numpy.array([-1.0, 0.4])]),
    "where": (lambda a, b: tp.where(a > 0, a, b), [signed(2, 3), signed(3, seed=1)]),
    "rounded div": (lambda a, b: a.div(b, rounding_mode="floor") + a,
                    [positive(4) + 0.25, positive(4, seed=1)]),
    "function": (lambda a: Cube.apply(a, 2.0), [signed(4)]),
}

MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((2, 3), (2, 3, 4)),
                 ((1, 2, 3), (2, 3, 4)), ((2, 2, 3), (3,)), ((3,), (2, 3, 4))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(OPERATIONS))
def test_gradients_match_finite_differences(device, name):
    function, arrays = OPERATIONS[name]
    gradcheck(function, *arrays, device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES)
def test_matmul_gradients_match_finite_differences(device, a_shape, b_shape):
    gradcheck(lambda a, b: a @ b, signed(*a_shape), signed(*b_shape, seed=1), device=device)


@pytest.mark.gpu
def test_gradients_flow_across_devices():
    gradcheck(lambda a: (a.to("cuda") * 2).cpu() + a, signed(3))


@pytest.mark.parametrize("device", DEVICES)
def test_grad_accumulates_in_place_across_backward_calls(device):
    w = tp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    x = tp.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], device=device)
    assert w.is_leaf and w.grad is None and w.grad_fn is None
    (x * w).sum().backward()
    grad = w.grad
    address = grad.data_ptr()
    assert grad.tolist() == [3.0, 3.0, 3.0] and not grad.requires_grad
    (x * w).sum().backward()
    assert w.grad is grad and grad.data_ptr() == address and grad.tolist() == [6.0, 6.0, 6.0]
    w.grad = None
    (w * 2).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    assert not x.requires_grad and x.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_grad_leaves_grad_alone_and_handles_non_leaf_inputs(device):
    x = tp.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 3
    z = (y * y).sum()
    grad_x, grad_y = autograd.grad(z, [x, y], retain_graph=True)
    assert grad_x.tolist() == [18.0, 36.0] and grad_y.tolist() == [6.0, 12.0]
    assert x.grad is None
    unused = tp.tensor([1.0], device=device, requires_grad=True)
    assert autograd.grad(z, (x, unused), allow_unused=True)[1] is None
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        autograd.grad((x * 2).sum(), [unused])
    # d/dx (2x . 1 + x*x . [1, 0.5]) = 2 + 2x * [1, 0.5]
    grads = autograd.grad((x * 2, x * x), x, grad_outputs=(tp.ones(2, device=device),
                                                           tp.tensor([1.0, 0.5], device=device)))
    assert grads[0].tolist() == [4.0, 4.0]


def test_grad_outputs_items_are_checked_before_the_history():
    """grad_outputs is typed (a tensor, or a list or tuple of tensors and Nones): an item of
    another type is the TypeError naming it, even where the inputs' history would fail next."""
    unused = tp.zeros(2)  # requires no grad: the RuntimeError that would come after
    for wrong, named in (([tp.ones(2), 1.0], r"grad_outputs\[1\] must be a tensor or None, "
                                            "got float"),
                         (("g",), r"grad_outputs\[0\] must be a tensor or None, got str"),
                         ({"g": 1}, "grad_outputs must be a tensor, a list or tuple of tensors")):
        with pytest.raises(TypeError, match=named):
            autograd.grad(unused, unused, grad_outputs=wrong)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorchs_errors(device):
    x = tp.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward()
    x.grad = None
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()  # retained once: the second pass may run
    assert x.grad.tolist() == pytest.approx([2 * (v + 1) * numpy.exp(v) for v in (1, 2, 3)])
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar "
                                           "outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match="element 0 of tensors does not require grad and "
                                           "does not have a grad_fn"):
        tp.zeros(1, device=device).backward()
    with pytest.raises(ValueError, match="create_graph=True is not supported"):
        autograd.grad((x * 2).sum(), x, create_graph=True)
    with pytest.raises(ValueError, match=r"Mismatch in shape: grad_output\[0\] has a shape of "
                                         r"\(2,\) and output\[0\] has a shape of \(3,\)"):
        autograd.grad(x * 2, x, grad_outputs=tp.ones(2, device=device))
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require "
                                           "gradients"):
        tp.zeros(2, dtype=tp.int64, device=device).requires_grad_()
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype"):
        tp.tensor([True], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf"):
        (x * 2).requires_grad = False


@pytest.mark.parametrize("device", DEVICES)
def test_changing_a_saved_tensor_in_place_is_refused(device):
    w = tp.tensor([1.0, 2.0], device=device, requires_grad=True)
    a = tp.tensor([3.0, 4.0], device=device)
    loss = (w * a).sum()
    a.add_(1)  # mul saved a for w's gradient
    with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient "
                                           r"computation has been modified by an inplace "
                                           r"operation: .* is at version 1; expected version 0"):
        loss.backward()
    loss = (w.sin()).sum()  # sin saves its input (exp would save its output, as PyTorch)
    with tp.no_grad():
        w[0] = 5.0  # through a view: the view shares w's version counter
    with pytest.raises(RuntimeError, match="is at version 1; expected version 0"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_grad_mode_context_managers_and_decorators(device):
    x = tp.ones(2, device=device, requires_grad=True)
    with tp.no_grad():
        assert not tp.is_grad_enabled() and not (x * 2).requires_grad
        with tp.enable_grad():
            assert tp.is_grad_enabled() and (x * 2).requires_grad
        assert not tp.is_grad_enabled()
        x.mul_(3)  # an optimiser's update
    assert tp.is_grad_enabled() and x.tolist() == [3.0, 3.0]

    @autograd.no_grad()
    def untracked():
        return x * 2

    @tp.enable_grad()
    def tracked():
        return x * 2

    @tp.no_grad  # bare, as PyTorch allows
    def untracked_bare():
        """Not tracked."""
        return x * 2

    assert not untracked_bare().requires_grad and untracked_bare.__doc__ == "Not tracked."
    assert not untracked().requires_grad and tp.is_grad_enabled()
    with tp.no_grad():
        assert tracked().requires_grad
    seen = []
    with tp.no_grad():  # grad mode is per thread
        thread = threading.Thread(target=lambda: seen.append(tp.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]
    detached = (x * 2).detach()
    assert not detached.requires_grad and detached.is_leaf and detached.tolist() == [6.0, 6.0]


@pytest.mark.parametrize("device", DEVICES)
def test_function_saves_tensors_and_checks_its_backward(device):
    x = tp.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = Cube.apply(x, 1.0)
    assert y.grad_fn.name() == "CubeBackward" and repr(y.grad_fn) == "<CubeBackward>"
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 12.0]
    assert Cube.apply(tp.tensor([2.0], device=device), 1.0).grad_fn is None

    class Wrong(autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            assert ctx.needs_input_grad == (True, False)
            return a * b

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(RuntimeError, match=r"backward returned an incorrect number of gradients "
                                           r"\(expected 2, got 1\)"):
        Wrong.apply(x, tp.ones(2, device=device)).sum().backward()
    with pytest.raises(TypeError, match="call MyFunction.apply"):
        autograd.Function.apply(x)
    with pytest.raises(TypeError, match="save_for_backward\\(\\) takes tensors or None"):
        autograd.FunctionCtx().save_for_backward(1.0)


def test_grad_fn_names_the_operation():
    x = tp.ones(2, requires_grad=True)
    assert (x * 2).grad_fn.name() == "MulBackward"
    assert x.add(x, alpha=2).grad_fn.name() == "AddScaledBackward"
    assert x.sum().grad_fn.name() == "SumBackward" and x.grad_fn is None


# -- the GPU: streams and graph capture ----------------------------------------------------------


def model_and_loss(device):
    rng = numpy.random.default_rng(7)
    w = tp.tensor(rng.standard_normal((8, 4)), dtype=tp.float32, device=device,
                  requires_grad=True)
    b = tp.tensor(rng.standard_normal(4), dtype=tp.float32, device=device, requires_grad=True)
    x = tp.tensor(rng.standard_normal((16, 8)), dtype=tp.float32, device=device)
    target = tp.tensor(rng.standard_normal((16, 4)), dtype=tp.float32, device=device)

    def loss():
        return (((x @ w + b).relu() - target) ** 2).mean()

    return (w, b), x, loss


@pytest.mark.gpu
def test_backward_runs_on_the_stream_the_forward_ran_on(quiet_device):
    from tensorplay import cuda
    parameters, _, loss = model_and_loss("cuda")
    loss().backward()
    eager = [p.grad.clone() for p in parameters]
    for p in parameters:
        p.grad = None
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        value = loss()  # forward on the side stream
    value.backward()  # from the default stream: the Nodes run on the side stream, then join
    cuda.current_stream().synchronize()
    for p, expected in zip(parameters, eager):
        assert tp.allclose(p.grad, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_backward_captured_into_a_graph_replays_the_eager_gradients(quiet_device):
    from tensorplay import cuda
    parameters, x, loss = model_and_loss("cuda")
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # warm up: kernels compiled, .grad allocated
        for _ in range(3):
            loss().backward()
    cuda.current_stream().wait_stream(side)
    for p in parameters:
        p.grad.zero_()
    loss().backward()
    eager = [p.grad.clone() for p in parameters]
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        for p in parameters:
            p.grad.zero_()
        static_loss = loss()
        static_loss.backward()
    for p in parameters:
        p.grad.fill_(123.0)
    graph.replay()
    for p, expected in zip(parameters, eager):
        assert tp.allclose(p.grad, expected, rtol=1e-5, atol=1e-6)
    # New input values flow through the captured forward and backward.
    x.copy_(x * 0.5)
    graph.replay()
    replayed = [p.grad.clone() for p in parameters]
    for p in parameters:
        p.grad.zero_()
    loss().backward()
    for p, got in zip(parameters, replayed):
        assert tp.allclose(got, p.grad, rtol=1e-5, atol=1e-6)


def test_factories_take_requires_grad():
    x = tp.ones(2)
    made = [tp.tensor([1.0], requires_grad=True), tp.zeros(2, requires_grad=True),
            tp.ones(2, requires_grad=True), tp.empty(2, requires_grad=True),
            tp.full((2,), 1.5, requires_grad=True), tp.arange(3.0, requires_grad=True),
            tp.zeros_like(x, requires_grad=True), tp.empty_like(x, requires_grad=True),
            tp.rand(2, requires_grad=True), tp.randn(2, requires_grad=True),
            tp.rand_like(x, requires_grad=True), tp.randn_like(x, requires_grad=True)]
    assert all(tensor.requires_grad and tensor.is_leaf for tensor in made)
    assert not tp.tensor(made[0]).requires_grad  # a copy is a new leaf, as PyTorch's
    for call in (lambda: tp.zeros(2, dtype=tp.int32, requires_grad=True),
                 lambda: tp.arange(3, requires_grad=True),
                 lambda: tp.full((2,), 1, requires_grad=True),
                 lambda: tp.zeros_like(x, dtype=tp.bool, requires_grad=True)):
        with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex "
                                               "dtype can require gradients"):
            call()


class ScaleAndShift(autograd.Function):
    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x * factor, x  # an argument returned as it is becomes a new view

    @staticmethod
    def backward(ctx, grad_scaled, grad_same):
        return grad_scaled * ctx.factor + grad_same, None


@pytest.mark.parametrize("device", DEVICES)
def test_function_with_several_outputs_gets_zeros_for_an_unused_one(device):
    x = tp.tensor([1.0, 2.0], device=device, requires_grad=True)
    scaled, same = ScaleAndShift.apply(x, 3.0)
    assert same is not x and same.grad_fn is scaled.grad_fn and x.is_leaf
    scaled.sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]
    x.grad = None
    scaled, same = ScaleAndShift.apply(x, 3.0)
    (scaled + same).sum().backward()
    assert x.grad.tolist() == [4.0, 4.0]


def test_tensors_built_outside_the_factories_have_a_version_counter():
    state = tp.Generator().get_state()  # built field by field by the generator
    state.zero_()  # counts the change
    assert state.tolist() == [0] * 16


# -- the first .grad: taken from the backward pass without a copy where nothing else sees it ----
# PyTorch's AccumulateGrad "steals" a gradient nothing else references
# (torch/csrc/autograd/functions/accumulate_grad.h); what it cannot steal, it copies.

@pytest.mark.gpu
def test_the_first_grad_is_the_gradient_itself_with_no_copy():
    from tensorplay.accelerator import memory
    c = tp.randn(256 * 1024, device="cuda")
    w = tp.randn(256 * 1024, device="cuda", requires_grad=True)  # 1 MiB
    loss = (w * c).sum()
    tp.accelerator.synchronize()
    memory.reset_peak_memory_stats()
    before = memory.memory_allocated()
    loss.backward()
    tp.accelerator.synchronize()
    # A copy would hold the formula's gradient and the new .grad at once: twice w's bytes.
    assert memory.max_memory_allocated() - before < 2 * w.nbytes
    assert memory.memory_allocated() - before == w.nbytes
    assert numpy.array_equal(w.grad.cpu().numpy(), c.cpu().numpy())
    address = w.grad.data_ptr()
    (w * c).sum().backward()  # accumulated in place from then on
    assert w.grad.data_ptr() == address
    assert numpy.allclose(w.grad.cpu().numpy(), 2 * c.cpu().numpy())


@pytest.mark.gpu
def test_a_taken_matmul_gradient_is_right():
    x = tp.randn(4, 256, device="cuda")
    w = tp.randn(256, 1024, device="cuda", requires_grad=True)
    (x @ w).sum().backward()
    expected = numpy.broadcast_to(x.cpu().numpy().sum(0)[:, None], (256, 1024))
    assert numpy.allclose(w.grad.cpu().numpy(), expected, rtol=1e-5, atol=1e-4)
    assert w.grad.is_contiguous()


@pytest.mark.gpu
def test_one_gradient_passed_to_two_leaves_gives_each_its_own_grad():
    a = tp.randn(1024, device="cuda", requires_grad=True)
    b = tp.randn(1024, device="cuda", requires_grad=True)
    c = tp.randn(1024, device="cuda")
    ((a + b) * c).sum().backward()  # add passes one fresh gradient (c) on to both leaves
    assert a.grad.data_ptr() != b.grad.data_ptr()
    a.grad.zero_()
    assert numpy.allclose(b.grad.cpu().numpy(), c.cpu().numpy())


@pytest.mark.gpu
def test_a_gradient_the_caller_passes_is_copied_into_grad():
    x = tp.randn(1024, device="cuda", requires_grad=True)
    given = tp.randn(1024, device="cuda")
    kept = given.cpu().numpy()
    (x * 2).backward(given)
    given.fill_(5.0)
    assert numpy.allclose(x.grad.cpu().numpy(), 2 * kept)
    y = tp.randn(1024, device="cuda", requires_grad=True)
    y.backward(given)  # a leaf as the root: its .grad is a copy of the caller's tensor
    assert y.grad.data_ptr() != given.data_ptr()
    given.fill_(1.0)
    assert numpy.allclose(y.grad.cpu().numpy(), 5.0)


@pytest.mark.gpu
def test_a_weight_used_transposed_gets_its_gradient_contiguous():
    w = tp.randn(64, 32, device="cuda", requires_grad=True)
    x = tp.randn(8, 64, device="cuda")
    out = x @ w.t().t()  # the formulas pass views of their gradients along
    out.sum().backward()
    expected = numpy.broadcast_to(x.cpu().numpy().sum(0)[:, None], (64, 32))
    assert numpy.allclose(w.grad.cpu().numpy(), expected, rtol=1e-5, atol=1e-4)
    assert w.grad.is_contiguous()
