"""x[mask] and x[mask] = value with a boolean mask (copies.pyx, Note [Boolean masks]) against
PyTorch on the CPU: the selection, its shape and dtype, assignment of scalars and tensors,
gradients, errors; on CUDA (marked gpu) the same and the refusal during a graph capture.
PyTorch is the oracle: the module is skipped without it."""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

torch = import_or_skip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
VALUES = [[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]]


def both(values, device, dtype="float32", requires_grad=False):
    return (tp.tensor(values, dtype=getattr(tp, dtype), device=device,
                      requires_grad=requires_grad),
            torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=requires_grad))


def same(ours, theirs):
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    numpy.testing.assert_array_equal(numpy.array(ours.cpu().tolist()),
                                     numpy.array(theirs.detach().tolist()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64"])
def test_a_mask_selects_as_pytorch(dtype, device):
    values = [[abs(v) for v in row] for row in VALUES] if dtype == "uint8" else VALUES
    x, tx = both(values, device, dtype)
    for mask in ([[True, False, True], [False, False, True]], [True, False], [False, False],
                 [[False] * 3] * 2):
        m, tm = both(mask, device, "bool")
        same(x[m], tx[tm])
        same(x[m.cpu()], tx[tm])  # a CPU mask indexes a tensor of any device
    same(x[x > 0] if dtype != "bool" else x[x], tx[tx > 0] if dtype != "bool" else tx[tx])


@pytest.mark.parametrize("device", DEVICES)
def test_assigning_through_a_mask_as_pytorch(device):
    for value in (0, 7.5, [10.0, 20.0, 30.0], [[1.0], [2.0], [3.0]]):
        x, tx = both(VALUES, device)
        m, tm = both([[True, False, True], [False, False, True]], device, "bool")
        if isinstance(value, list):
            if len(value) == 3 and isinstance(value[0], list):
                continue  # a (3, 1) value does not broadcast to (3,)
            v, tv = both(value, device)
            x[m], tx[tm] = v, tv
        else:
            x[m], tx[tm] = value, value
        same(x, tx)
    x, tx = both(VALUES, device)
    rows, trows = both([False, True], device, "bool")
    x[rows] = tp.tensor([9.0, 8.0, 7.0], device=device)
    tx[trows] = torch.tensor([9.0, 8.0, 7.0])
    same(x, tx)
    x[x < 0] = 0
    tx[tx < 0] = 0
    same(x, tx)


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_through_a_mask(device):
    x, tx = both(VALUES, device, requires_grad=True)
    m, tm = both([[True, False, True], [False, True, True]], device, "bool")
    weights = [1.0, 2.0, 3.0, 4.0]
    (x[m] * tp.tensor(weights, device=device)).sum().backward()
    (tx[tm] * torch.tensor(weights)).sum().backward()
    same(x.grad, tx.grad)
    # x[mask] = v records the assignment: v's gradient is g at the mask, x's g elsewhere.
    base, tbase = both(VALUES, device, requires_grad=True)
    v, tv = both([1.0, 2.0, 3.0, 4.0], device, requires_grad=True)
    y, ty = base * 2, tbase * 2
    y[m], ty[tm] = v, tv
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    same(base.grad, tbase.grad)
    same(v.grad, tv.grad)


def test_mask_errors_as_pytorch():
    x, tx = both(VALUES, "cpu")
    for mask in ([True, False, True], [[True, False]]):
        with pytest.raises(IndexError, match="The shape of the mask"):
            tx[torch.tensor(mask)]
        with pytest.raises(IndexError, match="The shape of the mask"):
            x[tp.tensor(mask)]
    with pytest.raises(TypeError, match="value must be a tensor or a bool, int or float, got str"):
        x[tp.tensor([True, False])] = "a"
    with pytest.raises(ValueError):  # (3, 1) does not broadcast to the selection's (1, 3)
        x[tp.tensor([True, False])] = tp.ones(2, 1)
    assert x.tolist() == VALUES  # refused before any change


@pytest.mark.gpu
def test_a_mask_is_refused_during_a_capture_which_goes_on():
    # The selection's size needs the mask's values on the host: waiting for a capturing stream
    # is refused before anything is queued, so the capture is not invalidated.
    static = tp.zeros(4, device="cuda")
    mask = static >= 0
    static += 1  # the kernel compiled and loaded before the capture
    tp.accelerator.synchronize()
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        static += 1
        with pytest.raises(RuntimeError, match="__getitem__ with a boolean mask .* while it "
                                               "captures a graph"):
            static[mask]
        with pytest.raises(RuntimeError, match="__setitem__ with a boolean mask .* while it "
                                               "captures a graph"):
            static[mask] = 0.0
        static += 1
    graph.replay()
    tp.accelerator.synchronize()
    assert static.tolist() == [3.0] * 4
