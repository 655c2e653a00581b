"""addcmul, addcdiv and lerp (and their in-place forms and tensorplay.* functions), on the CPU
and on CUDA (marked gpu): values, broadcasting, the in-place shape rule, dtypes, gradients and
the errors, against PyTorch where it is installed; and Adam's update written with them, captured.

Ported from PyTorch's own tests:
- test/test_binary_ufuncs.py, TestBinaryUfuncs.test_addcmul and test_addcdiv (the values of
  a + value * b * c and a + value * b / c over broadcast operands; addcdiv of two integer
  tensors raises "Integer division with addcdiv is no longer supported");
- test/test_binary_ufuncs.py, TestBinaryUfuncs.test_lerp (scalar and tensor weights, against
  start + weight * (end - start)), and the OpInfo of lerp's dtype errors ("expected dtype ...
  for `end`").
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_values_and_broadcasting(device):
    rng = numpy.random.default_rng(0)
    a, b, c = rng.normal(size=(2, 3)), rng.normal(size=(3,)), rng.normal(size=(2, 1)) + 3
    x, y, z = (tp.tensor(v.tolist(), dtype=tp.float64, device=device) for v in (a, b, c))
    numpy.testing.assert_allclose(values(x.addcmul(y, z, value=0.5)), a + 0.5 * b * c)
    numpy.testing.assert_allclose(values(tp.addcdiv(x, y, z, value=-2)), a - 2 * b / c)
    numpy.testing.assert_allclose(values(x.lerp(tp.zeros((2, 3), dtype=tp.float64,
                                                         device=device), 0.25)), a * 0.75)
    weight = tp.tensor([0.0, 0.5, 1.0], dtype=tp.float64, device=device)
    numpy.testing.assert_allclose(values(tp.lerp(x, y.expand(2, 3), weight)),
                                  a + numpy.array([0.0, 0.5, 1.0]) * (b - a))


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_forms_keep_the_tensor(device):
    x = tp.ones((2, 3), device=device)
    assert x.addcmul_(tp.full((3,), 2.0, device=device), tp.full((2, 1), 3.0, device=device),
                      value=2) is x
    assert x.tolist() == [[13.0] * 3] * 2
    assert x.addcdiv_(tp.full((2, 3), 6.0, device=device), tp.full((3,), 2.0, device=device)) is x
    assert x.tolist() == [[16.0] * 3] * 2
    assert x.lerp_(tp.zeros((3,), device=device), 0.5) is x and x.tolist() == [[8.0] * 3] * 2
    small = tp.ones(3, device=device)
    with pytest.raises(RuntimeError):  # the broadcast result is (2, 3): not in place
        small.addcmul_(tp.ones((2, 3), device=device), tp.ones(3, device=device))
    assert small.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("device", DEVICES)
def test_integer_rules(device):
    x = tp.tensor([1, 2], device=device)
    assert x.addcmul(x, x, value=2).tolist() == [3, 10]
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer "
                                           "supported"):
        x.addcdiv(x, x)
    assert x.addcdiv(x.float(), x).tolist() == [2.0, 3.0]
    with pytest.raises(TypeError, match="value must be an int"):
        x.addcmul(x, x, value=0.5)
    with pytest.raises(TypeError, match="lerp"):
        x.lerp(x, 0.5)
    assert x.tolist() == [1, 2]


def test_argument_errors():
    x = tp.ones(2)
    with pytest.raises(TypeError, match="tensor1"):
        x.addcmul([1.0, 1.0], x)
    with pytest.raises(TypeError, match="tensor2"):
        x.addcdiv(x, 2.0)
    with pytest.raises(TypeError, match="value"):
        x.addcmul(x, x, value="2")
    with pytest.raises(TypeError, match="end"):
        x.lerp(1.0, 0.5)
    with pytest.raises(TypeError, match="weight"):
        x.lerp(x, "half")
    with pytest.raises(RuntimeError, match="expected dtype float32 for `end` but got dtype "
                                           "float64"):
        x.lerp(tp.ones(2, dtype=tp.float64), 0.5)
    with pytest.raises(RuntimeError, match="for `weight`"):
        x.lerp(x, tp.ones(2, dtype=tp.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients(device):
    leaves = [tp.tensor(v, dtype=tp.float64, device=device, requires_grad=True)
              for v in ([1.0, 2.0], [3.0, -1.0], [2.0, 4.0], [0.5, 1.5])]
    a, b, c, end = leaves
    (a.addcmul(b, c, value=2) + a.addcdiv(b, c, value=3) + a.lerp(end, 0.25)).sum().backward()
    numpy.testing.assert_allclose(values(a.grad), [2.75, 2.75])
    b_values, c_values = numpy.array([3.0, -1.0]), numpy.array([2.0, 4.0])
    numpy.testing.assert_allclose(values(b.grad), 2 * c_values + 3 / c_values)
    numpy.testing.assert_allclose(values(c.grad), 2 * b_values - 3 * b_values / c_values ** 2)
    numpy.testing.assert_allclose(values(end.grad), [0.25, 0.25])


def test_against_pytorch():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(1)
    data = [rng.normal(size=(3, 4)) for _ in range(4)]
    ours = [tp.tensor(d.tolist(), dtype=tp.float64, requires_grad=True) for d in data]
    theirs = [torch.tensor(d, requires_grad=True) for d in data]
    for side, lib in ((ours, tp), (theirs, torch)):
        a, b, c, w = side
        total = (lib.addcmul(a, b, c, value=-0.5) * lib.addcdiv(a, b, c.exp(), value=2)
                 * lib.lerp(a, b, w.sigmoid())).sum()
        total.backward()
    for mine, want in zip(ours, theirs):
        numpy.testing.assert_allclose(values(mine.grad), want.grad.numpy(), rtol=1e-10,
                                      atol=1e-12)


@pytest.mark.gpu
def test_adam_update_captures(quiet_device):
    # Adam's moments and step as torch.optim's single-tensor path writes them.
    param = tp.ones(4, device="cuda")
    grad = tp.zeros(4, device="cuda")
    first, second = tp.zeros(4, device="cuda"), tp.zeros(4, device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        first.lerp_(grad, 0.1)
        second.mul_(0.999).addcmul_(grad, grad, value=0.001)
        param.addcdiv_(first, second.sqrt().add_(1e-8), value=-0.01)
    grad.copy_(tp.tensor([1.0, -2.0, 3.0, 0.0], device="cuda"))
    graph.replay()
    g = numpy.array([1.0, -2.0, 3.0, 0.0])
    m, v = 0.1 * g, 0.001 * g * g
    numpy.testing.assert_allclose(values(param), 1 - 0.01 * m / (numpy.sqrt(v) + 1e-8),
                                  rtol=1e-5)
