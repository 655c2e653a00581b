"""Basic indexing, x[key] and x[key] = value with ints, slices, None, True/False and ...
(core.pyx, Note [Basic indexing]): views laid out as PyTorch lays them out, on the CPU and on
CUDA (marked gpu), with PyTorch's error types.

Ported from PyTorch's test/test_indexing.py: TestIndexing.test_index (its parts without integer
array indexing, which tensorplay does not take) and NumpyTests.test_index_no_floats,
test_none_index, test_empty_tuple_index, test_ellipsis_index, test_single_int_index,
test_single_bool_index and test_everything_returns_views. The strides are checked against
PyTorch itself where it is installed.
"""
import random

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def consec(size, device, start=1):
    """1, 2, 3, ... in size's shape (PyTorch's test helper of the same name)."""
    count = int(numpy.prod(size))
    return tp.arange(start, start + count, dtype=tp.float64, device=device).reshape(*size)


def values(tensor):
    # tolist() of an empty dimension loses the dimensions after it
    return numpy.array(tensor.cpu().tolist(), dtype=numpy.float64).reshape(tuple(tensor.shape))


def equal(ours, expected):
    expected = values(expected) if isinstance(expected, tp.Tensor) else \
        numpy.asarray(expected, dtype=numpy.float64)
    assert tuple(ours.shape) == expected.shape
    numpy.testing.assert_array_equal(values(ours), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_index(device):
    """PyTorch's TestIndexing.test_index, but for its integer-array part."""
    reference = consec((3, 3, 3), device)
    equal(reference[0], consec((3, 3), device))
    equal(reference[1], consec((3, 3), device, 10))
    equal(reference[2], consec((3, 3), device, 19))
    equal(reference[0, 1], consec((3,), device, 4))
    equal(reference[0:2], consec((2, 3, 3), device))
    assert reference[2, 2, 2].item() == 27
    equal(reference[:], consec((3, 3, 3), device))

    # indexing with Ellipsis
    equal(reference[..., 2], [[3.0, 6.0, 9.0], [12.0, 15.0, 18.0], [21.0, 24.0, 27.0]])
    equal(reference[0, ..., 2], [3.0, 6.0, 9.0])
    equal(reference[..., 2], reference[:, :, 2])
    equal(reference[0, ..., 2], reference[0, :, 2])
    equal(reference[0, 2, ...], reference[0, 2])
    for key in ((..., 2, 2, 2), (2, ..., 2, 2), (2, 2, ..., 2), (2, 2, 2, ...)):
        assert reference[key].item() == 27
    equal(reference[...], reference)
    reference_5d = consec((3, 3, 3, 3, 3), device)
    equal(reference_5d[..., 1, 0], reference_5d[:, :, :, 1, 0])
    equal(reference_5d[2, ..., 1, 0], reference_5d[2, :, :, 1, 0])
    equal(reference_5d[2, 1, 0, ..., 1], reference_5d[2, 1, 0, :, 1])
    equal(reference_5d[...], reference_5d)

    # None indexing
    reference = consec((5, 5, 5), device)
    equal(reference[2, None], reference[2].unsqueeze(0))
    equal(reference[2, None, None], reference[2].unsqueeze(0).unsqueeze(0))
    equal(reference[2:4, None], reference[2:4].unsqueeze(1))
    equal(reference[None, 2, None, None], reference.unsqueeze(0)[:, 2].unsqueeze(0).unsqueeze(0))
    equal(reference[None, 2:5, None, None],
          reference.unsqueeze(0)[:, 2:5].unsqueeze(2).unsqueeze(2))

    # indexing 0-length slice
    assert tuple(reference[slice(0)].shape) == (0, 5, 5)
    assert tuple(reference[slice(0), 2].shape) == (0, 5)
    assert tuple(reference[2, slice(0)].shape) == (0, 5)
    assert tuple(reference[2, 1:1, 2].shape) == (0,)

    # indexing with step
    reference = consec((10, 10, 10), device)
    equal(reference[1:5:2], tp.stack([reference[1], reference[3]], 0))
    equal(reference[1:6:2], tp.stack([reference[1], reference[3], reference[5]], 0))
    equal(reference[1:9:4], tp.stack([reference[1], reference[5]], 0))
    equal(reference[2:4, 1:5:2], tp.stack([reference[2:4, 1], reference[2:4, 3]], 1))
    equal(reference[3, 1:6:2], tp.stack([reference[3, 1], reference[3, 3], reference[3, 5]], 0))
    equal(reference[None, 2, 1:9:4],
          tp.stack([reference[2, 1], reference[2, 5]], 0).unsqueeze(0))
    equal(reference[:, 2, 1:6:2],
          tp.stack([reference[:, 2, 1], reference[:, 2, 3], reference[:, 2, 5]], 1))

    lists = [list(range(i, i + 10)) for i in range(0, 100, 10)]
    tensor = tp.tensor(lists, dtype=tp.float64, device=device)
    draw = random.Random(0)
    for _ in range(100):
        start = draw.randrange(10)
        first = slice(start, start + draw.randrange(1, 10 - start + 1), draw.randrange(1, 8))
        if draw.randrange(2) == 0:
            start = draw.randrange(10)
            second = slice(start, start + draw.randrange(1, 10 - start + 1),
                           draw.randrange(1, 8))
            equal(tensor[first, second], [row[second] for row in lists[first]])
        else:
            equal(tensor[first], lists[first])

    with pytest.raises(ValueError):
        reference[1:9:0]
    with pytest.raises(ValueError):
        reference[1:9:-1]
    for key in ((1, 1, 1, 1), (1, 1, 1, slice(1, 1)), (3,) * 8):
        with pytest.raises(IndexError):
            reference[key]
    with pytest.raises(IndexError):
        reference[0.0]
    with pytest.raises(TypeError):
        reference[0.0:2.0]
    for key in ((0.0, slice(0.0, 2.0)), (0.0, slice(None), slice(0.0, 2.0)),
                (0.0, ..., slice(0.0, 2.0)), (0.0, slice(None), 0.0)):
        with pytest.raises(IndexError):
            reference[key]
    with pytest.raises(TypeError):
        del reference[0]


@pytest.mark.parametrize("device", DEVICES)
def test_index_no_floats(device):
    a = tp.tensor([[[5.0]]], device=device)
    for key in (0.0, (0, 0.0), (0.0, 0), (0.0, slice(None)), (slice(None), 0.0),
                (slice(None), 0.0, slice(None)), (0.0, slice(None), slice(None)), (0, 0, 0.0),
                (0.0, 0, 0), (0, 0.0, 0), -1.4, (0, -1.4), (-1.4, 0), (-1.4, slice(None)),
                (slice(None), -1.4), (slice(None), -1.4, slice(None)),
                (-1.4, slice(None), slice(None)), (0, 0, -1.4), (-1.4, 0, 0), (0, -1.4, 0)):
        with pytest.raises(IndexError):
            a[key]


@pytest.mark.parametrize("device", DEVICES)
def test_none_empty_tuple_and_ellipsis(device):
    a = tp.tensor([1, 2, 3], device=device)
    assert a[None].dim() == a.dim() + 1
    equal(a[()], a)
    assert a[()].data_ptr() == a.data_ptr()

    a = tp.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]], device=device)
    assert a[...] is not a
    equal(a[...], a)
    assert a[...].data_ptr() == a.data_ptr()
    equal(a[0, ...], a[0])
    equal(a[0, ...], a[0, :])
    equal(a[..., 0], a[:, 0])
    assert a[0, ..., 1].dim() == 0 and a[0, ..., 1].item() == 2
    b = tp.tensor(1, device=device)
    b[(Ellipsis,)] = 2
    assert b.item() == 2
    with pytest.raises(IndexError, match="single ellipsis"):
        a[..., 0, ...]


@pytest.mark.parametrize("device", DEVICES)
def test_single_int_and_bool_index(device):
    a = tp.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]], device=device)
    equal(a[0], [1, 2, 3])
    equal(a[-1], [7, 8, 9])
    with pytest.raises(IndexError):
        a[1 << 30]
    with pytest.raises(Exception):
        a[1 << 64]
    equal(a[True], a[None])
    equal(a[False], a[None][0:0])


@pytest.mark.parametrize("device", DEVICES)
def test_everything_returns_views(device):
    a = tp.tensor([5], device=device)
    for view in (a[()], a[...], a[:], a[None]):
        assert view is not a and view.data_ptr() == a.data_ptr()
    a[None][0, 0] = 7
    assert a.item() == 7


@pytest.mark.parametrize("device", DEVICES)
def test_bools_in_a_key_copy_as_pytorch_and_still_assign(device):
    # PyTorch reads True/False as a one-element mask: x[True] is a copy, x[True] = v writes x.
    a = tp.zeros(2, 3, device=device)
    selected = a[True]
    selected[0, 0, 0] = 1
    assert a[0, 0].item() == 0
    a[True] = 4
    a[0, True] = 5
    equal(a, [[5, 5, 5], [4, 4, 4]])


@pytest.mark.parametrize("device", DEVICES)
def test_assignment_through_none_and_ellipsis(device):
    a = tp.zeros(2, 3, device=device)
    a[..., 1] = 5
    a[None, 0] = tp.tensor([[1.0, 2.0, 3.0]], device=device)
    a[1, None, ..., 2] = 9
    equal(a, [[1, 2, 3], [0, 5, 9]])


@pytest.mark.parametrize("device", DEVICES)
def test_numpy_integers_index(device):
    a = consec((3, 4), device)
    equal(a[numpy.int64(1), numpy.int32(2)], 7)
    equal(a[numpy.int8(-1)], [9, 10, 11, 12])


@pytest.mark.parametrize("device", DEVICES)
def test_an_index_beside_a_bool_and_other_keys_are_refused_with_what_is_taken(device):
    # Integer tensors and lists, and masks, among ints, slices, None and ... read and assign
    # (test_several_indices.py); beside True/False or a 0-d bool tensor they are not offered.
    a = consec((3, 4), device)
    for key, got in (((True, [1]), "a list of ints beside True/False or a bool tensor of 0 "
                                   "dimensions"),
                     ((tp.tensor(True, device=device), tp.tensor([0], device=device)),
                      "a bool tensor of 0 dimensions beside an integer index"),
                     ((tp.tensor([0.0], device=device),), "a float32 tensor"), ("x", "str")):
        for assign in (False, True):
            with pytest.raises(IndexError, match="bool tensors \\(masks of the dimensions they "
                                                 f"cover\\) index a tensor; got {got}"):
                if assign:
                    a[key] = 0
                else:
                    a[key]


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_flow_through_none_and_ellipsis(device):
    x = consec((2, 3), device).requires_grad_()
    (x[None, ..., 1:] * consec((1, 2, 2), device)).sum().backward()
    equal(x.grad, [[0, 1, 2], [0, 3, 4]])


KEYS = [(..., 2), (0, ..., 2), (None,), (2, None, None), (slice(2, 4), None),
        (None, 2, slice(1, 3), None), (..., None), (0, None), (None, 0), (slice(None), None, 0),
        (..., None, 1), (1, None, 1), (slice(None, None, 2), None, slice(1, None)), (True,),
        (False,), (0, True, ..., None, 1), (...,), ()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_views_are_laid_out_as_pytorch_lays_them_out(device, key):
    torch = import_or_skip("torch")
    ours = tp.arange(60, dtype=tp.float32, device=device).reshape(3, 4, 5)
    theirs = torch.arange(60, dtype=torch.float32).reshape(3, 4, 5)
    view, expected = ours[key], theirs[key]
    assert tuple(view.shape) == tuple(expected.shape)
    assert tuple(view.stride()) == tuple(expected.stride())
    assert view.tolist() == expected.tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 3)])
def test_empty_tensors_have_pytorch_strides(device, shape):
    # Contiguous strides as PyTorch gives them (a size of 0 counts as 1), where numpy gives 0.
    expected = {(0,): (1,), (0, 3): (3, 1), (3, 0): (1, 1), (2, 0, 3): (3, 3, 1)}[shape]
    assert tp.zeros(*shape, device=device).stride() == expected
    assert tp.empty(*shape, device=device).stride() == expected
