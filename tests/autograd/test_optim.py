"""tensorplay.optim.SGD: PyTorch's update rule with momentum and weight decay, its argument
errors, and (marked gpu) a whole training step (forward, loss, backward, step) captured into one
CUDA graph that trains exactly like the eager loop."""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn, optim

from tests.autograd.training import eager_losses
from tests.peers import import_or_skip


def sgd_reference(start, grads, lr, momentum, weight_decay):
    """PyTorch's SGD (torch/optim/sgd.py, dampening 0, no nesterov) in numpy."""
    param, buffer = start.copy(), None
    for grad in grads:
        grad = grad + weight_decay * param
        if momentum:
            buffer = grad.copy() if buffer is None else momentum * buffer + grad
            grad = buffer
        param = param - lr * grad
    return param


@pytest.mark.parametrize("momentum, weight_decay", [(0, 0), (0.9, 0), (0.9, 0.01), (0, 0.1)])
def test_step_follows_pytorchs_rule(momentum, weight_decay):
    rng = numpy.random.default_rng(0)
    start = rng.standard_normal((3, 2))
    grads = [rng.standard_normal((3, 2)) for _ in range(4)]
    param = nn.Parameter(tp.tensor(start.copy(), dtype=tp.float64))
    optimizer = optim.SGD([param], lr=0.1, momentum=momentum, weight_decay=weight_decay)
    for grad in grads:
        param.grad = tp.tensor(grad, dtype=tp.float64)
        optimizer.step()
    assert numpy.allclose(param.numpy(), sgd_reference(start, grads, 0.1, momentum,
                                                       weight_decay), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("momentum, weight_decay", [(0, 0), (0.9, 0), (0.9, 0.01), (0, 0.1)])
def test_the_one_kernel_step_rounds_as_the_separate_operations(dtype, momentum, weight_decay):
    # A contiguous CUDA parameter steps in one kernel (sgd_step); a transposed one through
    # mul_/add_: both must give the same bits, and PyTorch's rule in float64.
    rng = numpy.random.default_rng(1)
    start = rng.standard_normal((64, 48))
    grads = [rng.standard_normal((64, 48)) for _ in range(3)]
    kind = getattr(tp, dtype)
    fused = nn.Parameter(tp.tensor(start, device="cuda").to(kind))
    strided = nn.Parameter(tp.tensor(start.T.copy(), device="cuda").to(kind).t())
    assert fused.is_contiguous() and not strided.is_contiguous()
    steps = [optim.SGD([p], lr=0.1, momentum=momentum, weight_decay=weight_decay)
             for p in (fused, strided)]
    for grad in grads:
        fused.grad = tp.tensor(grad, device="cuda").to(kind)
        strided.grad = tp.tensor(grad.T.copy(), device="cuda").to(kind).t()
        for optimizer in steps:
            optimizer.step()
    assert fused.to(tp.float64).tolist() == strided.to(tp.float64).tolist()
    if dtype == "float64":
        assert numpy.allclose(numpy.array(fused.tolist()),
                              sgd_reference(start, grads, 0.1, momentum, weight_decay),
                              rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_the_one_kernel_step_matches_pytorchs_sgd_on_cuda():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(2)
    start = rng.standard_normal((128, 96)).astype(numpy.float32)
    grads = [rng.standard_normal((128, 96)).astype(numpy.float32) for _ in range(4)]
    ours = nn.Parameter(tp.tensor(start, device="cuda"))
    theirs = torch.nn.Parameter(torch.tensor(start, device="cuda"))
    our_step = optim.SGD([ours], lr=0.05, momentum=0.9, weight_decay=1e-3)
    their_step = torch.optim.SGD([theirs], lr=0.05, momentum=0.9, weight_decay=1e-3)
    for grad in grads:
        ours.grad = tp.tensor(grad, device="cuda")
        theirs.grad = torch.tensor(grad, device="cuda")
        our_step.step()
        their_step.step()
    numpy.testing.assert_allclose(numpy.array(ours.tolist()),
                                  theirs.detach().cpu().numpy(), rtol=1e-6, atol=1e-6)


def test_step_skips_parameters_without_grad_and_keeps_their_address():
    used, unused = nn.Parameter(tp.ones(2)), nn.Parameter(tp.ones(2))
    optimizer = optim.SGD([used, unused], lr=0.5, momentum=0.9)
    pointer = used.data_ptr()
    (used * 2).sum().backward()
    optimizer.step()
    assert used.tolist() == [0.0, 0.0] and unused.tolist() == [1.0, 1.0]
    assert used.data_ptr() == pointer  # updated in place, as a captured step needs


def test_param_groups_settings_apply_to_later_steps():
    param = nn.Parameter(tp.ones(1))
    optimizer = optim.SGD([param], lr=1.0)
    optimizer.param_groups[0]["lr"] = 0.25
    param.grad = tp.ones(1)
    optimizer.step()
    assert param.tolist() == [0.75]


def test_zero_grad_drops_or_zeroes_the_grads():
    param = nn.Parameter(tp.ones(2))
    optimizer = optim.SGD([param])
    param.grad = tp.ones(2)
    grad = param.grad
    optimizer.zero_grad(set_to_none=False)
    assert param.grad is grad and grad.tolist() == [0.0, 0.0]
    optimizer.zero_grad()
    assert param.grad is None


def test_arguments_are_checked_with_pytorchs_messages():
    param = nn.Parameter(tp.ones(1))
    with pytest.raises(TypeError, match="should be an iterable of Tensors or dicts, but got a "
                                        "Tensor"):
        optim.SGD(param)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        optim.SGD([])
    with pytest.raises(TypeError, match=r"optimizer can only optimize Tensors, but params\[1\] "
                                        "is int"):
        optim.SGD([param, 3])
    with pytest.raises(ValueError, match=r"can't optimize a non-leaf Tensor \(params\[0\]\)"):
        optim.SGD([param * 2])
    with pytest.raises(ValueError, match=r"params\[1\] appears more than once"):
        optim.SGD([param, param])
    with pytest.raises(ValueError, match="Invalid learning rate: -1.0"):
        optim.SGD([param], lr=-1.0)
    with pytest.raises(ValueError, match="Invalid momentum value: -0.5"):
        optim.SGD([param], momentum=-0.5)
    with pytest.raises(ValueError, match="Invalid weight_decay value: -0.1"):
        optim.SGD([param], weight_decay=-0.1)
    with pytest.raises(TypeError, match="lr"):
        optim.SGD([param], lr="fast")


def test_momentum_enabled_later_makes_its_buffers_at_the_next_step_as_pytorch():
    rng = numpy.random.default_rng(1)
    start = rng.standard_normal(3)
    grads = [rng.standard_normal(3) for _ in range(3)]
    param = nn.Parameter(tp.tensor(start.copy(), dtype=tp.float64))
    optimizer = optim.SGD([param], lr=0.1)
    optimizer.param_groups[0]["momentum"] = 0.9
    for grad in grads:
        param.grad = tp.tensor(grad, dtype=tp.float64)
        optimizer.step()
    assert numpy.allclose(param.numpy(), sgd_reference(start, grads, 0.1, 0.9, 0), rtol=1e-12,
                          atol=1e-12)
    assert optimizer.state[param]["momentum_buffer"].shape == (3,)


# -- param_groups edits and refused steps (Note [Checked steps] in runtime/autograd/optim.pyx) ----------


def test_a_parameter_added_to_param_groups_is_updated_with_its_own_momentum():
    rng = numpy.random.default_rng(2)
    first_start, second_start = rng.standard_normal(2), rng.standard_normal(2)
    grads = [rng.standard_normal(2) for _ in range(3)]
    first = nn.Parameter(tp.tensor(first_start.copy(), dtype=tp.float64))
    second = nn.Parameter(tp.tensor(second_start.copy(), dtype=tp.float64))
    optimizer = optim.SGD([first], lr=0.1, momentum=0.9, weight_decay=0.01)
    first.grad = tp.tensor(grads[0], dtype=tp.float64)
    optimizer.step()
    optimizer.param_groups[0]["params"].append(second)  # PyTorch follows the list
    for grad in grads[1:]:
        first.grad = tp.tensor(grad, dtype=tp.float64)
        second.grad = tp.tensor(grad, dtype=tp.float64)
        optimizer.step()
    assert numpy.allclose(first.numpy(), sgd_reference(first_start, grads, 0.1, 0.9, 0.01),
                          rtol=1e-12, atol=1e-12)
    assert numpy.allclose(second.numpy(), sgd_reference(second_start, grads[1:], 0.1, 0.9, 0.01),
                          rtol=1e-12, atol=1e-12)
    optimizer.zero_grad()
    assert first.grad is None and second.grad is None


def test_another_group_appended_to_param_groups_is_followed():
    first, second = nn.Parameter(tp.ones(1)), nn.Parameter(tp.ones(1))
    optimizer = optim.SGD([first], lr=0.5)
    # Every key a group holds (add_param_group fills them in; appending skips that).
    optimizer.param_groups.append(dict(optimizer.defaults, params=[second], lr=0.25))
    first.grad, second.grad = tp.ones(1), tp.ones(1)
    optimizer.step()
    assert first.tolist() == [0.5] and second.tolist() == [0.75]


def test_a_step_that_is_refused_updates_no_parameter():
    float_param = nn.Parameter(tp.ones(2))
    int_param = nn.Parameter(tp.ones(2, dtype=tp.int64), requires_grad=False)
    float_param.grad = tp.ones(2)
    int_param.grad = tp.ones(2, dtype=tp.int64)
    optimizer = optim.SGD([float_param, int_param], lr=0.5, momentum=0.9)
    with pytest.raises(TypeError, match=r"floating-point parameters only; "
                                        r"param_groups\[0\]\['params'\]\[1\] is int64"):
        optimizer.step()
    assert float_param.tolist() == [1.0, 1.0]
    assert optimizer.state[float_param]["momentum_buffer"].tolist() == [0.0, 0.0]


def bad_edits():
    """(edit of an optimiser over (first, second), error type, message) for step()."""
    yield (lambda o, p: o.param_groups[0].__setitem__("lr", float("nan")), ValueError,
           r"Invalid learning rate: nan \(param_groups\[0\]\['lr'\]\)")
    yield (lambda o, p: o.param_groups[0].__setitem__("momentum", float("inf")), ValueError,
           r"Invalid momentum value: inf \(param_groups\[0\]\['momentum'\]\)")
    yield (lambda o, p: o.param_groups[0].__setitem__("weight_decay", -1.0), ValueError,
           r"Invalid weight_decay value: -1.0 \(param_groups\[0\]\['weight_decay'\]\)")
    yield (lambda o, p: o.param_groups[0].__setitem__("lr", "fast"), TypeError,
           r"lr \(param_groups\[0\]\['lr'\]\) must be a float")
    yield (lambda o, p: o.param_groups[0]["params"].append(3), TypeError,
           r"param_groups\[0\]\['params'\]\[2\] is int")
    yield (lambda o, p: o.param_groups[0]["params"].append(p[0]), ValueError,
           r"param_groups\[0\]\['params'\]\[2\] appears more than once")
    yield (lambda o, p: o.param_groups[0]["params"].append(p[0] * 2), ValueError,
           r"non-leaf Tensor \(param_groups\[0\]\['params'\]\[2\]\)")
    yield (lambda o, p: o.param_groups[0].pop("lr"), ValueError,
           r"param_groups\[0\] has no 'lr'")
    yield (lambda o, p: o.param_groups.append(dict(o.defaults, params=[p[0]])), ValueError,
           r"param_groups\[1\]\['params'\]\[0\] appears more than once")
    yield (lambda o, p: o.state[p[1]].__setitem__("momentum_buffer", tp.zeros(3)), ValueError,
           r"momentum buffer of param_groups\[0\]\['params'\]\[1\] does not match it")


@pytest.mark.parametrize("edit, error, message", list(bad_edits()))
def test_bad_param_groups_edits_are_refused_at_the_next_step_before_any_update(edit, error,
                                                                             message):
    params = [nn.Parameter(tp.ones(2)), nn.Parameter(tp.ones(2))]
    optimizer = optim.SGD(params, lr=0.5, momentum=0.9)
    for param in params:
        param.grad = tp.ones(2)
    edit(optimizer, params)
    with pytest.raises(error, match=message):
        optimizer.step()
    assert [param.tolist() for param in params] == [[1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("name, label", [("lr", "learning rate"),
                                         ("momentum", "momentum value"),
                                         ("weight_decay", "weight_decay value")])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_or_infinite_hyperparameters_are_refused_at_construction(name, label, value):
    with pytest.raises(ValueError, match=f"Invalid {label}: {value}"):
        optim.SGD([nn.Parameter(tp.ones(1))], **{name: value})


def test_numpy_numbers_in_param_groups_are_numbers():
    param = nn.Parameter(tp.ones(1))
    optimizer = optim.SGD([param], lr=1.0)
    optimizer.param_groups[0]["lr"] = numpy.float32(0.5)
    param.grad = tp.ones(1)
    optimizer.step()
    assert param.tolist() == [0.5]


def test_a_step_into_read_only_memory_is_refused_first():
    writable = nn.Parameter(tp.ones(2))
    frozen_array = numpy.ones(2, dtype=numpy.float32)
    frozen_array.flags.writeable = False
    frozen = nn.Parameter(tp.from_dlpack(frozen_array))
    writable.grad, frozen.grad = tp.ones(2), tp.ones(2)
    optimizer = optim.SGD([writable, frozen], lr=0.5)
    with pytest.raises(ValueError, match="read-only"):
        optimizer.step()
    assert writable.tolist() == [1.0, 1.0]


# -- a whole training step as one CUDA graph ---------------------------------------------------


def regression_batches(count, seed=0):
    rng = numpy.random.default_rng(seed)
    truth = rng.standard_normal((8, 1))
    for _ in range(count):
        x = rng.standard_normal((32, 8))
        yield (tp.tensor(x, dtype=tp.float32, device="cuda"),
               tp.tensor(x @ truth, dtype=tp.float32, device="cuda"))


def mse(prediction, target):
    return ((prediction - target) ** 2).mean()


@pytest.mark.gpu
def test_a_captured_training_step_trains_like_the_eager_loop(quiet_device):
    from tensorplay import cuda
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to("cuda")
    initial = {name: value.clone() for name, value in model.state_dict().items()}
    batches = list(regression_batches(60))

    # Eager reference.
    eager_model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to("cuda")
    eager_model.load_state_dict(initial)
    eager_optimizer = optim.SGD(eager_model.parameters(), lr=0.05, momentum=0.9,
                                weight_decay=1e-4)
    expected_losses = eager_losses(eager_model, eager_optimizer, mse, batches)

    # Warm up on a side stream (kernels compiled outside the capture), then start over.
    static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        warm = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
        for _ in range(3):
            warm.zero_grad()
            mse(model(static_x), static_y).backward()
            warm.step()
    cuda.current_stream().wait_stream(side)
    model.load_state_dict(initial)
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    optimizer.zero_grad()  # the captured backward allocates each grad from the graph's pool

    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        static_loss = mse(model(static_x), static_y)
        static_loss.backward()
        optimizer.step()
    graphed_losses = []
    for x, y in batches:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        graphed_losses.append(static_loss.item())

    assert numpy.allclose(graphed_losses, expected_losses, rtol=1e-4, atol=1e-6)
    assert graphed_losses[-1] < 0.05 * graphed_losses[0]  # it converges
    for (name, mine), theirs in zip(model.state_dict().items(),
                                    eager_model.state_dict().values()):
        assert tp.allclose(mine, theirs, rtol=1e-4, atol=1e-6), name


@pytest.mark.gpu
def test_a_captured_step_refuses_to_make_a_momentum_buffer_and_an_eager_one_does(quiet_device):
    from tensorplay import cuda
    param = nn.Parameter(tp.ones(4, device="cuda"))
    optimizer = optim.SGD([param], lr=0.5)  # momentum 0: no buffers made
    optimizer.param_groups[0]["momentum"] = 0.5
    param.grad = tp.ones(4, device="cuda")
    graph = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"param_groups\[0\]\['params'\]\[0\] has no momentum "
                                           "buffer yet"):
        with cuda.graph(graph):
            optimizer.step()
    assert param.tolist() == [1.0] * 4 and param not in optimizer.state

    optimizer.step()  # eager: makes the buffer (the gradient), then updates
    assert param.tolist() == [0.5] * 4
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        optimizer.step()
    graph.replay()  # buf = 0.5 * 1 + 1 = 1.5; param = 0.5 - 0.5 * 1.5
    assert param.tolist() == [-0.25] * 4
    assert optimizer.state[param]["momentum_buffer"].tolist() == [1.5] * 4
