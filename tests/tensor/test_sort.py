"""sort(), argsort() and topk() (tensorplay.sort/argsort/topk and the Tensor methods) on the CPU
and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_sort_and_select.py: test_sort (random 4 x SIZE tensors along each dim,
  ascending and descending, checked ordered and the indices pointing at the values; the NaN
  cases tensor((1, nan, 3, nan, 2, 0)) in both directions), test_stable_sort (many repeated
  values: equal elements keep their order), test_topk (topk against sort's first k, for each
  dim, largest and smallest, k from 1 to the size), test_topk_nonfinite (nan, inf, 1e4, 0,
  -1e4, -inf) and test_topk_zero (k = 0);
- CuPy's tests/cupy_tests/sorting_tests/test_sort.py (TestSort, TestArgsort): every dtype, along
  each axis, lengths that are not powers of two, a 0-d array, an axis out of range.
Gradients go to the positions the values came from (PyTorch's sort and topk backward).
"""
import math

import numpy
import pytest

import tensorplay as tp
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool"]


def as_numpy(tensor):
    tensor = tensor.detach().cpu()
    return numpy.asarray((tensor.to(tp.float32) if tensor.dtype == tp.bfloat16 else
                          tensor).numpy())


def expected_order(values, axis, descending):
    """The stable order, NaN largest, by Python's sort of (key, position) per slice."""
    moved = numpy.moveaxis(values.astype(numpy.float64), axis, -1)
    order = numpy.empty(moved.shape, dtype=numpy.int64)
    for at in numpy.ndindex(moved.shape[:-1]):
        row = moved[at]

        def key(position):
            value = row[position]
            nan = math.isnan(value)
            if descending:
                return (not nan, -value if not nan else 0.0, position)
            return (nan, value if not nan else 0.0, position)

        order[at] = sorted(range(len(row)), key=key)
    return numpy.moveaxis(order, -1, axis)


def random_values(rng, dtype, shape):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith(("int", "uint")):
        return rng.integers(0, 7, shape)  # many ties
    values = numpy.round(rng.standard_normal(shape), 1)  # ties too
    values[rng.random(shape) < 0.05] = numpy.nan
    return values


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_and_argsort_match_the_stable_order(device, dtype):
    """CuPy's TestSort/TestArgsort and PyTorch's test_sort over dtypes, dims and lengths that
    are not powers of two; the order is the stable one, NaN largest."""
    rng = numpy.random.default_rng(len(dtype))
    # (2, 4100) along dim 1: slices longer than the kernel's shared-memory chunk (2048)
    for shape in [(1,), (7,), (33,), (4, 5), (3, 65, 2), (2, 300), (2, 4100)]:
        x = tp.tensor(random_values(rng, dtype, shape), device=device).to(getattr(tp, dtype))
        stored = as_numpy(x)
        for dim in range(-len(shape), len(shape)):
            for descending in (False, True):
                values, indices = tp.sort(x, dim, descending)
                order = expected_order(stored, dim, descending)
                assert indices.dtype == tp.int64 and values.dtype == x.dtype
                numpy.testing.assert_array_equal(as_numpy(indices), order)
                numpy.testing.assert_array_equal(as_numpy(values),
                                                 numpy.take_along_axis(stored, order, dim))
                numpy.testing.assert_array_equal(
                    as_numpy(x.argsort(dim=dim, descending=descending, stable=True)), order)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_sort_with_nans(device):
    """test_sort's NaN cases."""
    x = tp.tensor([1.0, math.nan, 3.0, math.nan, 2.0, 0.0], device=device)
    values, indices = x.sort()
    assert indices.tolist() == [5, 0, 4, 2, 1, 3]
    assert values.tolist()[:4] == [0.0, 1.0, 2.0, 3.0] and all(map(math.isnan,
                                                                  values.tolist()[4:]))
    values, indices = x.sort(descending=True)
    assert indices.tolist() == [1, 3, 2, 4, 0, 5]
    assert values.tolist()[2:] == [3.0, 2.0, 1.0, 0.0]


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_stable_sort(device):
    """test_stable_sort: [0, 1] repeated; equal values keep their order, both directions."""
    for size in (5, 256, 1000, 1500):  # 3000 elements: longer than a chunk
        x = tp.tensor([0, 1] * size, device=device)
        _, indices = x.sort(stable=True)
        assert indices.tolist() == list(range(0, 2 * size, 2)) + list(range(1, 2 * size, 2))
        _, indices = x.sort(descending=True, stable=True)
        assert indices.tolist() == list(range(1, 2 * size, 2)) + list(range(0, 2 * size, 2))


@pytest.mark.gpu
def test_one_long_slice_on_a_device():
    """A slice longer than a block's threads, its length not a power of two (a vocabulary)."""
    rng = numpy.random.default_rng(3)
    values = rng.standard_normal(50257).astype(numpy.float32)
    x = tp.tensor(values, device="cuda")
    sorted_values, indices = x.sort(descending=True)
    order = numpy.argsort(-values, kind="stable")
    numpy.testing.assert_array_equal(as_numpy(indices), order)
    numpy.testing.assert_array_equal(as_numpy(sorted_values), values[order])
    top_values, top_indices = x.topk(50)
    numpy.testing.assert_array_equal(as_numpy(top_indices), order[:50])


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_topk_against_sort(device):
    """test_topk: topk is sort's first k, every dim, largest and smallest, every k."""
    rng = numpy.random.default_rng(5)
    x = tp.tensor(rng.standard_normal((4, 7, 5)), dtype=tp.float32, device=device)
    for dim in range(3):
        for largest in (True, False):
            values, indices = x.sort(dim, descending=largest)
            for k in range(x.shape[dim] + 1):
                top_values, top_indices = x.topk(k, dim, largest)
                assert top_values.shape[dim] == k and top_values.is_contiguous()
                numpy.testing.assert_array_equal(as_numpy(top_values),
                                                 as_numpy(values.narrow(dim, 0, k)))
                numpy.testing.assert_array_equal(as_numpy(top_indices),
                                                 as_numpy(indices.narrow(dim, 0, k)))
    assert x.topk(2).values.shape == (4, 7, 2)  # dim None: the last


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_topk_nonfinite_and_zero(device):
    x = tp.tensor([math.nan, math.inf, 1e4, 0.0, -1e4, -math.inf], device=device)
    values, indices = x.topk(4)
    assert indices.tolist() == [0, 1, 2, 3] and values.tolist()[1:] == [math.inf, 1e4, 0.0]
    values, indices = x.topk(4, largest=False)
    assert indices.tolist() == [5, 4, 3, 2] and values.tolist() == [-math.inf, -1e4, 0.0, 1e4]
    empty = tp.rand(2, 3, device=device).topk(0)
    assert empty.values.shape == (2, 0) and empty.indices.shape == (2, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_strided_and_0d_input(device):
    values = numpy.array([[3.0, 1.0], [0.0, 2.0], [5.0, 4.0]])
    x = tp.tensor(values.T.copy(), device=device).t()  # strides (1, 3)
    numpy.testing.assert_array_equal(as_numpy(x.sort(0).values), numpy.sort(values, 0))
    numpy.testing.assert_array_equal(as_numpy(x.argsort(1)), numpy.argsort(values, 1))
    scalar = tp.tensor(5.0, device=device)
    assert scalar.sort().values.item() == 5.0 and scalar.sort().indices.item() == 0
    assert scalar.topk(1).indices.shape == () and scalar.argsort().item() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_go_to_the_positions(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(9)
    values = rng.standard_normal((3, 6))
    grad = rng.standard_normal((3, 6))
    for call in (lambda x: x.sort(1, True).values, lambda x: x.topk(4, 1).values,
                 lambda x: x.topk(2, 0, False).values, lambda x: x.sort(0).values):
        ours = tp.tensor(values, device=device, requires_grad=True)
        theirs = torch.tensor(values, requires_grad=True)
        result, expected = call(ours), call(theirs)
        result.backward(tp.tensor(grad[tuple(slice(0, n) for n in result.shape)],
                                  device=device))
        expected.backward(torch.tensor(grad[tuple(slice(0, n) for n in expected.shape)]))
        numpy.testing.assert_array_equal(as_numpy(ours.grad), theirs.grad.numpy())


@pytest.mark.parametrize("call, error, message, theirs", [
    (lambda lib: lib.ones(3).sort(1), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 1)", None),
    (lambda lib: lib.ones(3).topk(4), RuntimeError, "selected index k out of range", None),
    (lambda lib: lib.ones(3).topk(-1), RuntimeError, "selected index k out of range", None),
    (lambda lib: lib.ones(3).topk(1.0), TypeError, "k", "must be int"),
    (lambda lib: lib.tensor([True, False]).topk(1), RuntimeError,
     "topk does not support bool dtypes", None),
    (lambda lib: lib.sort([1, 2]), TypeError, "input", "must be Tensor"),
])
def test_errors_are_pytorchs(call, error, message, theirs):
    raises_as_pytorch(call, error, message, theirs)


@pytest.mark.gpu
def test_captured_sort_and_topk_replay_with_new_values(quiet_device):
    rng = numpy.random.default_rng(21)
    x = tp.tensor(rng.standard_normal((4, 100)), dtype=tp.float32, device="cuda",
                  requires_grad=True)
    x.topk(5).values.sum().backward()  # the warm-up, as PyTorch's recipe
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        values, indices = x.sort(1, descending=True)
        top = x.topk(5)
        top.values.sum().backward()
    new = rng.standard_normal((4, 100)).astype(numpy.float32)
    with tp.no_grad():
        x.copy_(tp.tensor(new, device="cuda"))
    graph.replay()
    order = numpy.argsort(-new, axis=1, kind="stable")
    numpy.testing.assert_array_equal(as_numpy(indices), order)
    numpy.testing.assert_array_equal(as_numpy(values), numpy.take_along_axis(new, order, 1))
    numpy.testing.assert_array_equal(as_numpy(top.indices), order[:, :5])
    expected = numpy.zeros_like(new)
    numpy.put_along_axis(expected, order[:, :5], 1.0, 1)
    numpy.testing.assert_array_equal(as_numpy(x.grad), expected)


def test_results_are_the_return_types_and_pickle():
    """PyTorch's torch.return_types: the classes of max(dim), min(dim), sort and topk results
    are importable by their module's name, so the results pickle."""
    import pickle

    from tensorplay import return_types
    x = tp.tensor([[3.0, 1.0], [0.0, 2.0]])
    for result, kind in [(x.max(1), return_types.max), (x.min(1), return_types.min),
                         (x.sort(), return_types.sort), (x.topk(1), return_types.topk)]:
        assert type(result) is kind and result._fields == ("values", "indices")
        again = pickle.loads(pickle.dumps(result))
        assert type(again) is kind
        assert again.values.tolist() == result.values.tolist()
        assert again.indices.tolist() == result.indices.tolist()
