"""repr() of a tensor reads as PyTorch's (runtime/tensor/tensor_repr.py, Note [Tensor repr]).

The expected texts are PyTorch 2.13's and 2.14's output for the same tensors, with
`tensorplay.` for `torch.` in dtype names and tensorplay's grad_fn names; where PyTorch is
installed, many more tensors are printed by both and compared.
"""
import re

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

EXPECTED = [
    (lambda: tp.tensor([0.1, 2.0, 3.0]), "tensor([0.1000, 2.0000, 3.0000])"),
    (lambda: tp.tensor([1.0, 2.0]), "tensor([1., 2.])"),
    (lambda: tp.tensor([1, 2, 3]), "tensor([1, 2, 3])"),
    (lambda: tp.tensor([1, 2, 3], dtype=tp.int32), "tensor([1, 2, 3], dtype=tensorplay.int32)"),
    (lambda: tp.tensor([True, False]), "tensor([ True, False])"),
    (lambda: tp.tensor(1.5), "tensor(1.5000)"),
    (lambda: tp.tensor(7), "tensor(7)"),
    (lambda: tp.tensor([0.1, 0.25], dtype=tp.float64),
     "tensor([0.1000, 0.2500], dtype=tensorplay.float64)"),
    (lambda: tp.tensor([0.1, 0.25], dtype=tp.float16),
     "tensor([0.1000, 0.2500], dtype=tensorplay.float16)"),
    (lambda: tp.tensor([0.1, 0.25], dtype=tp.bfloat16),
     "tensor([0.1001, 0.2500], dtype=tensorplay.bfloat16)"),
    (lambda: tp.tensor([1e-5, 1.0, 1e5]), "tensor([1.0000e-05, 1.0000e+00, 1.0000e+05])"),
    (lambda: tp.tensor([float("nan"), float("inf"), -float("inf"), 1.5]),
     "tensor([   nan,    inf,   -inf, 1.5000])"),
    (lambda: tp.tensor([[1.0, 2.5], [3.0, 4.0]]),
     "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]])"),
    (lambda: tp.arange(8.0).view(2, 2, 2),
     "tensor([[[0., 1.],\n         [2., 3.]],\n\n        [[4., 5.],\n         [6., 7.]]])"),
    (lambda: tp.tensor([]), "tensor([])"),
    (lambda: tp.zeros(0, 3), "tensor([], size=(0, 3))"),
    (lambda: tp.zeros(0, 3, dtype=tp.int32), "tensor([], size=(0, 3), dtype=tensorplay.int32)"),
    (lambda: tp.arange(2000.0),
     "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
     "        1.9990e+03])"),
    (lambda: tp.arange(1001), "tensor([   0,    1,    2,  ...,  998,  999, 1000])"),
    (lambda: tp.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    (lambda: tp.tensor([1.0, 2.0], requires_grad=True) * 2,
     "tensor([2., 4.], grad_fn=<MulBackward>)"),
    (lambda: tp.arange(12.0) / 7,
     "tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,\n"
     "        1.2857, 1.4286, 1.5714])"),
    (lambda: tp.tensor([-1.5, 2.0]), "tensor([-1.5000,  2.0000])"),
    (lambda: tp.tensor([-1, 20, 300]), "tensor([ -1,  20, 300])"),
    (lambda: tp.zeros(3), "tensor([0., 0., 0.])"),
    (lambda: tp.tensor([1e10, 2.0]), "tensor([1.0000e+10, 2.0000e+00])"),
]


@pytest.mark.parametrize("make, text", EXPECTED, ids=[text for _, text in EXPECTED])
def test_repr_reads_as_pytorch(make, text):
    assert repr(make()) == text


def test_a_large_tensor_is_summarised_in_every_dimension():
    text = repr(tp.arange(2000.0).view(40, 50))
    lines = text.split("\n")
    assert lines[0] == ("tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, "
                        "4.8000e+01,")
    assert lines[6] == "        ...,"
    assert lines[-1] == "         1.9990e+03]])" and len(lines) == 13


def test_repr_records_nothing_and_shows_the_leaf_and_the_node():
    leaf = tp.ones(3, requires_grad=True)
    assert repr(leaf).endswith("requires_grad=True)")
    assert leaf.grad_fn is None
    total = (leaf + 1).sum()
    assert repr(total) == "tensor(6., grad_fn=<SumBackward>)"
    total.backward()
    assert leaf.grad.tolist() == [1.0, 1.0, 1.0]


def test_parameter_repr_reads_as_pytorch():
    parameter = tp.nn.Parameter(tp.zeros(2))
    assert repr(parameter) == "Parameter containing:\ntensor([0., 0.], requires_grad=True)"


def test_long_suffixes_wrap_as_pytorch_wraps_them():
    text = repr(tp.arange(14, dtype=tp.int16) * 1000)
    assert text == ("tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  "
                    "9000,\n        10000, 11000, 12000, 13000], dtype=tensorplay.int16)")


# -- against PyTorch, where it is installed --------------------------------------------------


def pairs():
    """(numpy values, dtype name, requires_grad) to print through both libraries."""
    generator = numpy.random.default_rng(5)
    yield numpy.array(3.25), "float32", False
    for shape in [(5,), (3, 4), (2, 3, 4), (1001,), (40, 30), (11, 11, 11), (0,), (2, 0, 3)]:
        for scale in (1.0, 1e-6, 1e9):
            values = generator.standard_normal(shape) * scale
            yield values, "float32", False
            yield values, "float64", scale == 1.0
        yield numpy.round(generator.standard_normal(shape) * 100), "float32", False
        yield generator.integers(-500, 500, shape), "int64", False
        yield generator.integers(0, 200, shape), "uint8", False
        yield generator.integers(0, 2, shape).astype(bool), "bool", False
        yield generator.standard_normal(shape), "float16", False
        yield generator.standard_normal(shape), "bfloat16", False
    yield numpy.array([numpy.nan, 1.0, numpy.inf, -2.5, 0.0]), "float32", False
    yield numpy.array([numpy.nan, numpy.inf]), "float64", False
    yield numpy.arange(40.0) * 1e3, "float32", True


def torch_text(torch, text):
    """PyTorch's text in tensorplay's names: dtypes, and nodes without PyTorch's overload
    number."""
    text = text.replace("torch.", "tensorplay.")
    return re.sub(r"grad_fn=<(\w+?)Backward\d+>", r"grad_fn=<\1Backward>", text)


def unwrapped(text):
    """The text with suffixes on the last line: tensorplay's dtype names are longer than
    PyTorch's, so a suffix that fits beside the values in one may go on a line of its own in
    the other."""
    return re.sub(r",\n *(dtype=|requires_grad=|grad_fn=|device=|size=)", r", \1", text)


def test_repr_matches_pytorch_for_many_tensors():
    torch = import_or_skip("torch")
    for values, name, requires_grad in pairs():
        theirs = torch.from_numpy(numpy.array(values, order="C")).to(getattr(torch, name))
        ours = tp.tensor(values).to(getattr(tp, name))
        if requires_grad:
            theirs.requires_grad_(True)
            ours.requires_grad_(True)
        assert unwrapped(repr(ours)) == unwrapped(torch_text(torch, repr(theirs))), \
            (name, values.shape)
