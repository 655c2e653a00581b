"""What several training tests share: the eager reference run a captured step is checked
against, the check of an optimiser whose captured training step replays as eager steps, and an
optimiser's steps on the device, eager and replayed, beside PyTorch's."""
import numpy

import tensorplay as tp
from tensorplay import nn


def eager_losses(model, optimizer, loss_fn, batches):
    """Train model eagerly, one optimizer step per (input, target) batch; the losses, as floats."""
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def regression_batches(count, device, seed=0):
    """count (input, target) batches of a linear regression, float32 on device."""
    rng = numpy.random.default_rng(seed)
    truth = rng.standard_normal((8, 1))
    for _ in range(count):
        x = rng.standard_normal((32, 8))
        yield (tp.tensor(x, dtype=tp.float32, device=device),
               tp.tensor(x @ truth, dtype=tp.float32, device=device))


def mse(prediction, target):
    return ((prediction - target) ** 2).mean()


def check_captured_steps_replay_as_eager(make_optimizer, count):
    """A small MLP trained on count batches eagerly, and by replays of one captured step
    (forward, backward, make_optimizer(parameters).step()) after one eager warm-up step on a
    side stream, as PyTorch's documentation does it: the same losses and parameters, and a step
    count of count on the device."""
    from tensorplay import cuda
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to("cuda")
    eager_model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)).to("cuda")
    eager_model.load_state_dict(model.state_dict())
    batches = list(regression_batches(count, "cuda"))
    eager_optimizer = make_optimizer(eager_model.parameters())
    optimizer = make_optimizer(model.parameters())
    expected_losses = eager_losses(eager_model, eager_optimizer, mse, batches)
    static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        optimizer.zero_grad()
        mse(model(static_x), static_y).backward()
        optimizer.step()
    cuda.current_stream().wait_stream(side)
    graph_losses = [expected_losses[0]]
    optimizer.zero_grad()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        static_loss = mse(model(static_x), static_y)
        static_loss.backward()
        optimizer.step()
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        graph_losses.append(static_loss.item())
    assert numpy.allclose(graph_losses, expected_losses, rtol=1e-4, atol=1e-6)
    for param in model.parameters():
        assert optimizer.state[param]["step"].item() == len(batches)
        assert optimizer.state[param]["step"].is_cuda
    for mine, theirs in zip(model.parameters(), eager_model.parameters()):
        assert tp.allclose(mine, theirs, rtol=1e-4, atol=1e-6)


def steps_on_cuda(make, theirs, reference, grads, warm_up=True):
    """One optimiser kind stepping on the device, against PyTorch's reference stepping theirs
    (its parameters) on the CPU, through grads (each step's gradients). make(parameters,
    captured) builds ours: one that steps eagerly, and one (captured=True) whose step is
    captured, after one eager step that makes its state (warm_up), or first, the capture then
    replayed for the first step, and replayed for each later step. Returns (ours, graphed,
    captured): the two sets of parameters and the captured optimiser."""
    import torch
    from tensorplay import cuda
    ours, graphed = ([nn.Parameter(tp.tensor(param.detach().numpy(), device="cuda"))
                      for param in theirs] for _ in range(2))
    mine, captured = make(ours, False), make(graphed, True)
    static = [tp.zeros(param.shape, dtype=tp.float64, device="cuda") for param in graphed]
    for param, grad in zip(graphed, static):
        param.grad = grad
    graph = None
    for step in grads:
        for param, other, grad, buffer in zip(ours, theirs, step, static):
            param.grad = tp.tensor(grad, device="cuda")
            other.grad = torch.tensor(grad)
            buffer.copy_(tp.tensor(grad, device="cuda"))
        mine.step()
        reference.step()
        if graph is not None:
            graph.replay()
            continue
        if warm_up:
            captured.step()  # eager: makes the state
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            captured.step()
        if not warm_up:
            graph.replay()  # the capture ran nothing: this is the first step
    return ours, graphed, captured
