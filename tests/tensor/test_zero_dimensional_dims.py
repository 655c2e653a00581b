"""Ops that take a dim, given a 0-d tensor or an empty dimension, as PyTorch's: dims 0 and -1
of a 0-d tensor wrap as if it had one dimension (c10's maybe_wrap_dim with wrap_scalar), so
flip() and movedim() return it, while the ops that read the size along dim refuse it with
PyTorch's error (roll, unbind, unflatten, unique's dim: "Dimension specified as 0 but tensor has
no dimensions"; narrow, chunk, split: their own words). An empty dimension splits into one
empty piece, and chunk(n) of it into n (aten/src/ATen/native/TensorShape.cpp: split() makes at
least one piece, chunk() has that special case). Before, each of these raised an IndexError
from inside the implementation ("tuple index out of range")."""
import pytest

import tensorplay as tp

from tests.peers import load

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

RETURNED = {
    "flip(0)": lambda x: x.flip(0),
    "flip(-1)": lambda x: x.flip(-1),
    "movedim(0, -1)": lambda x: x.movedim(0, -1),
    "movedim((-1,), (0,))": lambda x: x.movedim((-1,), (0,)),
    "roll(1) (no dims: flattened)": lambda x: x.roll(1),
}
REFUSED = {
    "roll(1, 0)": (lambda x: x.roll(1, 0), IndexError,
                   "Dimension specified as 0 but tensor has no dimensions"),
    "unbind(-1)": (lambda x: x.unbind(-1), IndexError,
                   "Dimension specified as -1 but tensor has no dimensions"),
    "unflatten(0, (1,))": (lambda x: x.unflatten(0, (1,)), RuntimeError,
                           "Dimension specified as 0 but tensor has no dimensions"),
    "unique_consecutive(dim=0)": (lambda x: x.unique_consecutive(dim=0), IndexError,
                                  "Dimension specified as 0 but tensor has no dimensions"),
    "unique(dim=0)": (lambda x: x.unique(dim=0), IndexError,
                      "Dimension specified as 0 but tensor has no dimensions"),
    "narrow(0, 0, 1)": (lambda x: x.narrow(0, 0, 1), RuntimeError,
                        "narrow() cannot be applied to a 0-dim tensor."),
    "chunk(2)": (lambda x: x.chunk(2), RuntimeError,
                 "chunk expects at least a 1-dimensional tensor"),
    "split(1)": (lambda x: x.split(1), RuntimeError,
                 "split expects at least a 1-dimensional tensor"),
    "split([1])": (lambda x: x.split([1]), RuntimeError,
                   "split expects at least a 1-dimensional tensor"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", RETURNED)
def test_a_zero_dimensional_tensor_is_its_own_flip_and_movedim(case, device):
    x = tp.tensor(1.5, device=device, requires_grad=True)
    result = RETURNED[case](x)
    assert result.shape == () and result.item() == 1.5
    result.backward()
    assert x.grad.item() == 1.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", REFUSED)
def test_ops_that_read_a_size_along_dim_refuse_a_zero_dimensional_tensor(case, device):
    call, error, message = REFUSED[case]
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(tp.tensor(1.5, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_an_empty_dimension_splits_into_one_piece_and_chunks_into_n(device):
    empty = tp.ones(2, 0, device=device)
    assert [p.shape for p in empty.split(3, 1)] == [(2, 0)]
    assert [p.shape for p in empty.split(0, 1)] == [(2, 0)]
    assert [p.shape for p in empty.chunk(3, 1)] == [(2, 0)] * 3
    assert [p.shape for p in tp.ones(5, device=device).chunk(3)] == [(2,), (2,), (1,)]


def test_the_same_as_pytorch():
    torch, why_not = load("torch")
    if torch is None:
        pytest.skip(why_not)
    for case, call in RETURNED.items():
        assert call(tp.tensor(1.5)).tolist() == call(torch.tensor(1.5)).tolist(), case
    for case, (call, error, _) in REFUSED.items():
        with pytest.raises(error):
            call(torch.tensor(1.5))
    for library in (tp, torch):
        pieces = [[tuple(p.shape) for p in library.ones(2, 0).chunk(3, 1)],
                  [tuple(p.shape) for p in library.ones(0).split(2)]]
        assert pieces == [[(2, 0)] * 3, [(0,)]], library.__name__


@pytest.mark.parametrize("device", DEVICES)
def test_iteration_gives_the_rows_and_refuses_a_zero_dimensional_tensor(device):
    # PyTorch's Tensor.__iter__ is iter(self.unbind(0)) and refuses a 0-d tensor; without an
    # __iter__, Python iterated through __getitem__, and a 0-d tensor iterated as empty.
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(tp.tensor(1.5, device=device))
    x = tp.arange(6.0, device=device).reshape(2, 3).requires_grad_()
    rows = list(x)
    assert [row.tolist() for row in rows] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    rows[1].sum().backward()
    assert x.grad.tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    assert list(tp.ones(0, 2, device=device)) == []
    first, second = tp.tensor([1, 2], device=device)
    assert (first.item(), second.item()) == (1, 2)
