"""nonzero(), argwhere(), masked_select(), bincount(), unique() and unique_consecutive() on the CPU
and on CUDA (marked gpu).

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
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NAN_VALUE = float("nan")
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
    torch = import_or_skip("torch")
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
    torch = import_or_skip("torch")
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


# bincount, ported from PyTorch's test/test_torch.py test_bincount (random inputs with and
# without weights and minlength against numpy's bincount; float32 weights keep float32, others
# give float64; empty input; the refusals of negative values, of 2-D input, of a negative
# minlength and of weights of another length) and CuPy's
# tests/cupy_tests/statistics_tests/test_histogram.py (TestHistogram.test_bincount*: every
# integer dtype, weights, minlength, the refusals).
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_pytorch_bincount_against_numpy(device, dtype):
    rng = numpy.random.default_rng(40)
    for size, high, minlength in [(1, 1, 0), (50, 10, 0), (100, 7, 20), (1000, 100, 5)]:
        values = rng.integers(0, high, size)
        x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        counts = tp.bincount(x, minlength=minlength)
        assert counts.dtype == tp.int64
        numpy.testing.assert_array_equal(counts.cpu().numpy(),
                                         numpy.bincount(values, minlength=minlength))
        for weight_dtype, expected_dtype in [("float32", tp.float32), ("float64", tp.float64),
                                             ("int64", tp.float64), ("float16", tp.float64)]:
            weights = numpy.round(rng.random(size), 2)
            sums = x.bincount(tp.tensor(weights, dtype=getattr(tp, weight_dtype), device=device),
                              minlength)
            assert sums.dtype == expected_dtype
            stored = tp.tensor(weights, dtype=getattr(tp, weight_dtype)).to(tp.float64).numpy()
            numpy.testing.assert_allclose(sums.cpu().numpy(), numpy.bincount(
                values, stored, minlength), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_bincount_empty_and_the_same_as_pytorch(device):
    torch = import_or_skip("torch")
    empty = tp.tensor([], dtype=tp.int64, device=device)
    assert empty.bincount().tolist() == [] and empty.bincount(minlength=3).tolist() == [0, 0, 0]
    values = [3, 0, 3, 1, 7]
    weights = [0.5, 1.5, 0.25, 2.0, 1.0]
    for ours, theirs in [
            (tp.bincount(tp.tensor(values, device=device)), torch.bincount(torch.tensor(values))),
            (tp.bincount(tp.tensor(values, device=device), tp.tensor(weights, device=device), 9),
             torch.bincount(torch.tensor(values), torch.tensor(weights), 9))]:
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
        numpy.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())


@pytest.mark.parametrize("call, error, message", [
    (lambda lib: lib.bincount(lib.tensor([-1, 2])), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs."),
    (lambda lib: lib.bincount(lib.tensor([[1, 2]])), RuntimeError,
     "bincount only supports 1-d non-negative integral inputs."),
    (lambda lib: lib.bincount(lib.tensor([1, 2]), minlength=-1), RuntimeError,
     "minlength should be >= 0"),
    (lambda lib: lib.bincount(lib.tensor([1, 2]), weights=lib.tensor([1.0])), RuntimeError,
     "weights should be 1-d and have the same length as input"),
])
def test_pytorch_bincount_errors(call, error, message):
    raises_as_pytorch(call, error, message)


@pytest.mark.parametrize("dtype", ["float32", "bool"])
def test_bincount_refuses_what_is_not_an_integer(dtype):
    with pytest.raises(NotImplementedError, match=f"not implemented for {dtype} tensors"):
        tp.bincount(tp.tensor([1, 0], dtype=getattr(tp, dtype)))


@pytest.mark.gpu
def test_a_capture_refuses_bincount(quiet_device):
    x = tp.tensor([1, 2], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        with pytest.raises(RuntimeError, match="depends on the largest value"):
            x.bincount()


# unique and unique_consecutive, ported from PyTorch's test/test_sort_and_select.py (test_unique:
# flattened input with and without return_inverse / return_counts, sorted values, the inverse
# rebuilding the input; test_unique_dim: 3-D inputs along each dim, against its expected
# slices; test_unique_consecutive and test_unique_consecutive_dim; the NaN case, each NaN its own
# value; the refusal of unselected zero-sized dimensions) and CuPy's
# tests/cupy_tests/manipulation_tests/test_add_remove.py (TestUnique: every dtype, with
# return_inverse and return_counts, against numpy's unique).
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool",
                                   "bfloat16"])
def test_pytorch_unique_against_numpy(device, dtype):
    rng = numpy.random.default_rng(50)
    for shape in [(1,), (7,), (4, 5), (3, 4, 2), (), (0,), (300,)]:
        values = numpy.asarray(rng.integers(0, 2 if dtype == "bool" else 4, shape))
        x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        plain = x.cpu().to(tp.float64).numpy() if dtype == "bfloat16" else x.cpu().numpy()
        found, inverse, counts = tp.unique(x, return_inverse=True, return_counts=True)
        expected, expected_inverse, expected_counts = numpy.unique(
            plain, return_inverse=True, return_counts=True)
        assert found.dtype == x.dtype and inverse.shape == x.shape
        numpy.testing.assert_array_equal(found.cpu().to(tp.float64).numpy(), expected)
        numpy.testing.assert_array_equal(inverse.cpu().numpy().reshape(-1),
                                         expected_inverse.reshape(-1))
        numpy.testing.assert_array_equal(counts.cpu().numpy(), expected_counts)
        numpy.testing.assert_array_equal(x.unique().cpu().to(tp.float64).numpy(), expected)
        for dim in range(len(shape)):
            if 0 in shape:
                continue
            rows, rows_inverse, rows_counts = tp.unique(x, dim=dim, return_inverse=True,
                                                        return_counts=True)
            wanted, wanted_inverse, wanted_counts = numpy.unique(
                plain, axis=dim, return_inverse=True, return_counts=True)
            numpy.testing.assert_array_equal(rows.cpu().to(tp.float64).numpy(), wanted)
            numpy.testing.assert_array_equal(rows_inverse.cpu().numpy(),
                                             wanted_inverse.reshape(-1))
            numpy.testing.assert_array_equal(rows_counts.cpu().numpy(), wanted_counts)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_unique_and_unique_consecutive_the_same_as_pytorch(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(51)
    cases = [rng.integers(0, 3, (8,)), rng.integers(0, 2, (5, 3)), rng.integers(0, 2, (3, 4, 2)),
             numpy.array([2.0, NAN_VALUE, 1.0, NAN_VALUE, 2.0]), numpy.array(5)]
    for values in cases:
        # PyTorch's unique(dim=...) sorts rows holding NaN inconsistently (its comparator is not
        # an order there: [2, nan, 1, nan, 2] gives 1, 2, nan, nan, 2): flattened only for NaN.
        dims = [None] if numpy.isnan(values).any() else [None] + list(range(values.ndim))
        for dim in dims:
            for flags in [(False, False), (True, False), (False, True), (True, True)]:
                for name in ("unique", "unique_consecutive"):
                    ours = getattr(tp, name)(tp.tensor(values, device=device),
                                             return_inverse=flags[0], return_counts=flags[1],
                                             dim=dim)
                    theirs = getattr(torch, name)(torch.tensor(values), return_inverse=flags[0],
                                                  return_counts=flags[1], dim=dim)
                    if isinstance(theirs, torch.Tensor):
                        ours, theirs = (ours,), (theirs,)
                    assert len(ours) == len(theirs)
                    for found, expected in zip(ours, theirs):
                        assert tuple(found.shape) == tuple(expected.shape)
                        numpy.testing.assert_array_equal(found.cpu().numpy(), expected.numpy())


def test_pytorch_unique_refuses_unselected_zero_sized_dimensions():
    raises_as_pytorch(lambda lib: lib.unique(lib.ones(2, 0), dim=0), RuntimeError,
                      "There are 0 sized dimensions, and they aren't selected, so unique cannot "
                      "be applied")


def test_unique_has_no_gradient():
    x = tp.tensor([3.0, 1.0, 3.0], requires_grad=True)
    assert not x.unique().requires_grad and x.unique().grad_fn is None


@pytest.mark.gpu
def test_a_capture_refuses_unique(quiet_device):
    x = tp.tensor([1, 2, 1], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        for call in (lambda: x.unique(), lambda: x.unique_consecutive()):
            with pytest.raises(RuntimeError, match="its result's size depends on the values"):
                call()
