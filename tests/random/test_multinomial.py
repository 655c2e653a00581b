"""multinomial() (tensorplay.multinomial and Tensor.multinomial) on the CPU and on CUDA (marked
gpu).

Ported from PyTorch's own tests, test/test_torch.py and test/test_tensor_creation_ops.py:
- test_multinomial_constraints: PyTorch's messages for a 3-D input, too many samples without
  replacement, num_samples <= 0, an integer input;
- test_multinomial_invalid_probs (CPU): inf, NaN, a negative weight, a row summing to 0;
- test_multinomial (and _test_multinomial_empty): rows with one nonzero weight always draw it,
  zero weights never come before the others, without replacement every category of a row at
  most once, an empty batch gives an empty result;
- test_multinomial_rng_state_advance: two draws from one generator differ, a generator seeded
  again draws the same;
and frequencies against the weights (first draws, with and without replacement), which
PyTorch's test_multinomial_deterministic and distribution tests check on their side.
"""
import numpy
import pytest

import tensorplay as tp
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def drawn(tensor):
    return numpy.asarray(tensor.cpu().numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("replacement", [False, True])
def test_frequencies_follow_the_weights(device, replacement):
    generator = tp.Generator(device).manual_seed(1)
    weights = tp.tensor([1.0, 2.0, 7.0, 0.0], device=device).expand(20000, 4).contiguous()
    first = drawn(weights.multinomial(2, replacement, generator=generator))[:, 0]
    numpy.testing.assert_allclose(numpy.bincount(first, minlength=4) / 20000,
                                  [0.1, 0.2, 0.7, 0.0], atol=0.015)
    many = drawn(tp.tensor([3.0, 1.0], device=device).multinomial(20000, True,
                                                                  generator=generator))
    assert abs((many == 0).mean() - 0.75) < 0.015


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_pytorch_multinomial_rules(device, dtype):
    """test_multinomial's cases: one nonzero weight, zeros last, each category once."""
    generator = tp.Generator(device).manual_seed(7)
    one_hot = tp.tensor([[0.0, 0.0, 5.0, 0.0], [0.0, 1.0, 0.0, 0.0]], device=device).to(
        getattr(tp, dtype))
    for replacement in (False, True):
        assert drawn(one_hot.multinomial(1, replacement, generator=generator)).tolist() == \
            [[2], [1]]
    assert drawn(one_hot.multinomial(3, True, generator=generator)).tolist() == \
        [[2, 2, 2], [1, 1, 1]]
    weights = tp.rand(50, 30, device=device, generator=generator).to(getattr(tp, dtype))
    weights[:, ::3] = 0.0  # ten zero categories a row
    rows = drawn(weights.multinomial(30, generator=generator))
    for row in rows:
        assert sorted(row.tolist()) == list(range(30))  # each category once
        assert all(category % 3 for category in row[:20])  # the nonzero ones first
    vector = drawn(tp.tensor([0.5, 0.5, 0.0], device=device).multinomial(2,
                                                                         generator=generator))
    assert vector.shape == (2,) and sorted(vector.tolist()) == [0, 1]
    empty = tp.ones(0, 3, device=device).multinomial(2)
    assert empty.shape == (0, 2) and empty.dtype == tp.int64
    with pytest.raises(RuntimeError, match="sum of probabilities <= 0"):  # no category
        tp.ones(2, 0, device=device).multinomial(1, True)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_rng_state_advance(device):
    generator = tp.Generator(device).manual_seed(5)
    weights = tp.ones(1000, device=device)
    first = drawn(weights.multinomial(10, generator=generator))
    second = drawn(weights.multinomial(10, generator=generator))
    assert first.tolist() != second.tolist()
    generator.manual_seed(5)
    assert drawn(weights.multinomial(10, generator=generator)).tolist() == first.tolist()


@pytest.mark.parametrize("call, message", [
    (lambda lib: lib.multinomial(lib.ones(1, 2, 3), 1), "prob_dist must be 1 or 2 dim"),
    (lambda lib: lib.multinomial(lib.ones(1, 2), 3),
     "cannot sample n_sample > prob_dist.size(-1) samples without replacement"),
    (lambda lib: lib.multinomial(lib.ones(2), 0), "cannot sample n_sample <= 0 samples"),
    (lambda lib: lib.multinomial(lib.ones(2), -1), "cannot sample n_sample <= 0 samples"),
    (lambda lib: lib.multinomial(lib.ones(2, dtype=lib.int64), 1),
     "multinomial only supports floating-point dtypes for input"),
    (lambda lib: lib.multinomial(lib.tensor([1.0, float("inf")]), 1),
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda lib: lib.multinomial(lib.tensor([1.0, float("nan")]), 1),
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda lib: lib.multinomial(lib.tensor([1.0, -0.5]), 1),
     "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda lib: lib.multinomial(lib.tensor([[1.0, 1.0], [0.0, 0.0]]), 1, True),
     "invalid multinomial distribution (sum of probabilities <= 0)"),
])
def test_errors_are_pytorchs(call, message):
    raises_as_pytorch(call, RuntimeError, message)


def test_wrong_types_name_the_argument():
    with pytest.raises(TypeError, match="num_samples"):
        tp.multinomial(tp.ones(2), 1.0)
    with pytest.raises(TypeError, match="generator"):
        tp.multinomial(tp.ones(2), 1, generator=3)


@pytest.mark.gpu
def test_a_captured_draw_draws_anew_at_each_replay(quiet_device):
    generator = tp.Generator("cuda").manual_seed(3)
    weights = tp.ones(4, 1000, device="cuda")
    weights.multinomial(5, generator=generator)  # the warm-up, as PyTorch's recipe
    graph = tp.cuda.CUDAGraph()
    graph.register_generator_state(generator)
    with tp.cuda.graph(graph):
        without = weights.multinomial(5, generator=generator)
        with_replacement = weights.multinomial(5, True, generator=generator)
    draws = []
    for _ in range(3):
        graph.replay()
        draws.append((drawn(without).tolist(), drawn(with_replacement).tolist()))
        for row in draws[-1][0]:
            assert len(set(row)) == 5
    assert draws[0] != draws[1] != draws[2]
    weights.zero_()
    weights[:, 7] = 1.0  # read at replay: one category left
    graph.replay()
    assert drawn(with_replacement).tolist() == [[7] * 5] * 4
    assert drawn(without)[:, 0].tolist() == [7] * 4
