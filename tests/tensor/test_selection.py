"""nonzero(), argwhere() and masked_select() on the CPU and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_torch.py and test/test_nonzero.py (test_nonzero: shapes (), (0,), (1,),
  (1, 1), (5, 7), (2, 3, 4), (1, 0, 3) and larger, every dtype, against numpy's nonzero, as a
  matrix and as_tuple, a 0-d tensor as_tuple giving one vector; test_nonzero_discontiguous: a
  strided view gives the coordinates its contiguous copy gives) and test_masked_select (input
  and mask broadcast both ways, against numpy's boolean indexing; a non-bool mask refused;
  gradients back to the selected elements);
- CuPy's tests/cupy_tests/indexing_tests/test_indexing.py (TestNonzero, TestArgwhere): every
  dtype, NaN counting as nonzero, empty inputs.
On a device the count is read back, so a capture refuses these, as PyTorch's nonzero.
"""
import numpy
import pytest

import tensorplay as tp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"]
SHAPES = [(), (0,), (1,), (1, 1), (5, 7), (2, 3, 4), (1, 0, 3), (3, 1, 5, 2), (4097,)]


def values_of(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) < 0.4
    low = 0 if dtype == "uint8" else -2
    values = numpy.asarray(rng.integers(low, 3, shape) * (rng.random(shape) < 0.5))
    if dtype.startswith("float") or dtype == "bfloat16":
        values = values.astype(numpy.float64)
        values[rng.random(shape) < 0.1] = numpy.nan  # not zero
    return values


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pytorch_nonzero_against_numpy(device, dtype):
    rng = numpy.random.default_rng(11)
    for shape in SHAPES:
        values = numpy.asarray(values_of(rng, dtype, shape))
        x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        expected = numpy.argwhere(values)
        found = x.nonzero()
        assert found.dtype == tp.int64 and found.device == x.device
        assert tuple(found.shape) == expected.shape
        numpy.testing.assert_array_equal(found.cpu().numpy(), expected)
        numpy.testing.assert_array_equal(tp.argwhere(x).cpu().numpy(), expected)
        columns = tp.nonzero(x, as_tuple=True)
        wanted = numpy.nonzero(values.reshape(-1) if not shape else values)
        assert len(columns) == len(wanted)
        for ours, theirs in zip(columns, wanted):
            assert ours.dtype == tp.int64 and ours.is_contiguous()
            numpy.testing.assert_array_equal(ours.cpu().numpy(), theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_nonzero_discontiguous(device):
    rng = numpy.random.default_rng(12)
    x = tp.tensor(values_of(rng, "int64", (6, 8, 5)), device=device)
    for view in (x[:, ::2], x.permute(2, 0, 1), x[1:5, 3]):
        numpy.testing.assert_array_equal(view.nonzero().cpu().numpy(),
                                         view.contiguous().nonzero().cpu().numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_the_same_as_pytorch(device):
    torch = pytest.importorskip("torch")
    rng = numpy.random.default_rng(13)
    values = values_of(rng, "float32", (4, 6, 3))
    mask = rng.random((6, 1)) < 0.5
    x, theirs = tp.tensor(values, device=device), torch.tensor(values)
    numpy.testing.assert_array_equal(x.nonzero().cpu().numpy(), theirs.nonzero().numpy())
    for ours, expected in zip(x.nonzero(as_tuple=True), theirs.nonzero(as_tuple=True)):
        numpy.testing.assert_array_equal(ours.cpu().numpy(), expected.numpy())
    numpy.testing.assert_array_equal(
        tp.masked_select(x, tp.tensor(mask, device=device)).cpu().numpy(),
        torch.masked_select(theirs, torch.tensor(mask)).numpy())
    numpy.testing.assert_array_equal(tp.tensor(3.0, device=device).nonzero(as_tuple=True)[0]
                                     .cpu().numpy(),
                                     torch.tensor(3.0).nonzero(as_tuple=True)[0].numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("input_shape, mask_shape", [
    ((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((2, 1, 4), (3, 1)), ((), (5,)),
    ((5,), ()), ((0, 3), (3,)),
])
def test_pytorch_masked_select_broadcasts(device, input_shape, mask_shape):
    rng = numpy.random.default_rng(14)
    values = rng.standard_normal(input_shape)
    mask = numpy.asarray(rng.random(mask_shape) < 0.5)
    shape = numpy.broadcast_shapes(values.shape, mask.shape)
    expected = numpy.broadcast_to(values, shape)[numpy.broadcast_to(mask, shape)]
    found = tp.masked_select(tp.tensor(values, device=device), tp.tensor(mask, device=device))
    assert tuple(found.shape) == expected.shape
    numpy.testing.assert_array_equal(found.cpu().numpy(), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_masked_select_gradient_is_pytorchs(device):
    torch = pytest.importorskip("torch")
    rng = numpy.random.default_rng(15)
    values = rng.standard_normal((3, 4))
    mask = rng.random((4,)) < 0.5
    ours = tp.tensor(values, device=device, requires_grad=True)
    theirs = torch.tensor(values, requires_grad=True)
    result = ours.masked_select(tp.tensor(mask, device=device))
    expected = theirs.masked_select(torch.tensor(mask))
    grad = rng.standard_normal(tuple(expected.shape))
    result.backward(tp.tensor(grad, device=device))
    expected.backward(torch.tensor(grad))
    numpy.testing.assert_array_equal(ours.grad.cpu().numpy(), theirs.grad.numpy())


def test_masked_select_refusals_name_the_mask():
    x = tp.ones(3)
    with pytest.raises(TypeError, match="mask must be a bool tensor .* got a float32 tensor"):
        x.masked_select(tp.ones(3))
    with pytest.raises(TypeError, match="mask must be a bool tensor .* got list"):
        tp.masked_select(x, [True, False, True])


@pytest.mark.gpu
def test_a_capture_refuses_them_and_leaves_the_capture_usable(quiet_device):
    x = tp.tensor([0.0, 1.0, 2.0], device="cuda")
    y = tp.zeros(3, device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        y += 1
        for call in (lambda: x.nonzero(), lambda: tp.argwhere(x),
                     lambda: x.masked_select(x > 0)):
            with pytest.raises(RuntimeError, match="its result's size depends on the values"):
                call()
        y += 1
    graph.replay()  # the refusals queued nothing: the graph adds 1 twice
    assert y.tolist() == [2.0, 2.0, 2.0]
