"""~, &, | and ^ of bool tensors and Python bools (elementwise.pyx, Note [Mask logic]), on the
CPU and on CUDA (marked gpu): values, broadcasting and in-place forms; against PyTorch where it
is installed. Integer operands: test_bitwise.py."""
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
A = [True, False, True, False]
B = [True, True, False, False]


@pytest.mark.parametrize("device", DEVICES)
def test_mask_logic_values(device):
    a, b = tp.tensor(A, device=device), tp.tensor(B, device=device)
    assert (~a).tolist() == [False, True, False, True]
    assert (a & b).tolist() == [True, False, False, False]
    assert (a | b).tolist() == [True, True, True, False]
    assert (a ^ b).tolist() == [False, True, True, False]
    assert (a & True).tolist() == A and (False | a).tolist() == A and (True ^ a).tolist() == \
        [False, True, False, True]
    for result in (~a, a & b, a | b, a ^ b, True & a):
        assert result.dtype is tp.bool
    assert (a[None] | b[:, None]).tolist() == [[True, True, True, True],
                                               [True, True, True, True],
                                               [True, False, True, False],
                                               [True, False, True, False]]
    x = tp.tensor([1.0, -2.0, 3.0, -4.0], device=device)
    assert x[(x > 0) & (x < 2)].tolist() == [1.0] and x[~(x > 0)].tolist() == [-2.0, -4.0]


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_mask_logic(device):
    a, b = tp.tensor(A, device=device), tp.tensor(B, device=device)
    a &= b
    assert a.tolist() == [True, False, False, False]
    a |= tp.tensor([False, False, False, True], device=device)
    assert a.tolist() == [True, False, False, True]
    a ^= True
    assert a.tolist() == [False, True, True, False]
    before = a.tolist()
    with pytest.raises(ValueError, match="doesn't match the broadcast shape"):
        a ^= tp.tensor([[True], [False]], device=device)
    assert a.tolist() == before


def test_against_pytorch():
    torch = import_or_skip("torch")
    ours = (tp.tensor(A), tp.tensor(B))
    theirs = (torch.tensor(A), torch.tensor(B))
    for operation in (lambda a, b: ~a, lambda a, b: a & b, lambda a, b: a | b,
                      lambda a, b: a ^ b, lambda a, b: a & True, lambda a, b: False | b,
                      lambda a, b: True ^ a, lambda a, b: a[None] & b[:, None]):
        assert operation(*ours).tolist() == operation(*theirs).tolist()
