"""index_add() and index_copy() (tensorplay.index_add/index_copy and the Tensor methods, in
place or not) on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests, test/test_torch.py:
- test_index_add (and its helper ref_index_add): every dim of 3-D tensors, contiguous or not
  (a transposed destination, source or index), repeated indices, an alpha, compared with the
  loop dest.select(dim, index[i]) += alpha * src.select(dim, i);
- test_index_add_all_dtypes: the integer dtypes too, with alpha;
- test_index_copy (its _test_index_copy): unique indices (a permutation's first elements),
  every dim, against the loop dest.select(dim, index[i]) = src.select(dim, i); and
  test_index_copy_scalars: 0-d tensors;
and their gradients (derivatives.yaml: index_add's self gets the gradient, source the gradient
selected at the index times alpha; index_copy's self the gradient zeroed at the index), and
PyTorch's messages, each compared with torch where it is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def as_numpy(tensor):
    return numpy.asarray(tensor.cpu().numpy())


def reference(dest, dim, index, source, alpha, add):
    """PyTorch's ref_index_add / the index_copy loop, over numpy arrays."""
    expected = dest.copy()
    for at, position in enumerate(index):
        target = numpy.take(expected, [position], axis=dim)
        piece = numpy.take(source, [at], axis=dim)
        value = target + alpha * piece if add else piece
        slicer = [slice(None)] * dest.ndim
        slicer[dim] = slice(position, position + 1)
        expected[tuple(slicer)] = value
    return expected


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16"])
@pytest.mark.parametrize("transposed", ["none", "dest", "source", "index"])
def test_index_add_matches_the_loop(device, dtype, transposed):
    rng = numpy.random.default_rng([len(dtype), len(transposed)])
    floating = dtype.startswith("float")
    for dim in range(3):
        sizes = [5, 6, 7]
        count = int(rng.integers(1, 9))
        dest = (rng.standard_normal(sizes) * 4).astype(dtype)
        source_sizes = list(sizes)
        source_sizes[dim] = count
        source = (rng.standard_normal(source_sizes) * 4).astype(dtype)
        index = rng.integers(0, sizes[dim], count)  # repeated positions add up
        alpha = 2.5 if floating else 3
        expected = reference(dest, dim, index, source, alpha, True)
        ours_dest = tp.tensor(dest, device=device)
        ours_source = tp.tensor(source, device=device)
        ours_index = tp.tensor(index, device=device)
        if transposed == "dest":
            ours_dest = tp.tensor(dest.T.copy(), device=device).t() if dest.ndim == 2 else \
                tp.tensor(numpy.ascontiguousarray(dest.transpose(2, 1, 0)),
                          device=device).permute(2, 1, 0)
        elif transposed == "source":
            ours_source = tp.tensor(numpy.ascontiguousarray(source.transpose(2, 1, 0)),
                                    device=device).permute(2, 1, 0)
        elif transposed == "index":
            ours_index = tp.tensor(numpy.stack([index, index]).T.copy(), device=device)[:, 1]
        # Repeated positions add in another order on a device (atomics), so float16 sums may
        # round differently: each of the count additions, ours and the loop's, rounds by at most
        # half a unit in the last place (2**-11) of a partial sum no larger than the sum of the
        # magnitudes of its terms.
        magnitudes = reference(numpy.abs(dest).astype(numpy.float64), dim, index,
                               numpy.abs(source).astype(numpy.float64), alpha, True)
        tolerance = (count * 2**-10 if dtype == "float16" else 1e-6) * magnitudes + 1e-2
        result = ours_dest.index_add(dim, ours_index, ours_source, alpha=alpha)
        numpy.testing.assert_array_less(
            abs(as_numpy(result).astype(numpy.float64) - expected), tolerance)
        assert ours_dest.index_add_(dim, ours_index, ours_source, alpha=alpha) is ours_dest
        numpy.testing.assert_array_less(
            abs(as_numpy(ours_dest).astype(numpy.float64) - expected), tolerance)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "uint8", "bfloat16"])
def test_index_copy_matches_the_loop(device, dtype):
    rng = numpy.random.default_rng(len(dtype))
    for dim in range(3):
        sizes = [4, 5, 6]
        count = int(rng.integers(1, sizes[dim] + 1))
        source_sizes = list(sizes)
        source_sizes[dim] = count
        dest = rng.standard_normal(sizes) * 4
        source = rng.standard_normal(source_sizes) * 4
        dest, source = ((dest > 0, source > 0) if dtype == "bool" else
                        (abs(dest).astype(dtype), abs(source).astype(dtype))
                        if dtype == "uint8" else (dest, source))
        index = rng.permutation(sizes[dim])[:count]  # unique, as _test_index_copy's
        expected = reference(dest, dim, index, source, 1, False)
        operand_dtype = getattr(tp, dtype)
        result = tp.index_copy(tp.tensor(dest, dtype=operand_dtype, device=device), dim,
                               tp.tensor(index, device=device),
                               tp.tensor(source, dtype=operand_dtype, device=device))
        want = tp.tensor(expected, dtype=operand_dtype)
        assert result.dtype is operand_dtype
        assert result.tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dimensional_and_empty(device):
    # test_index_copy_scalars and test_index_add's empty cases: 0-d tensors, no indices.
    scalar = tp.tensor(1.0, device=device)
    assert scalar.index_copy(0, tp.tensor(0, device=device),
                             tp.tensor(5.0, device=device)).tolist() == 5.0
    assert scalar.index_add(0, tp.tensor([0], device=device),
                            tp.tensor(5.0, device=device)).tolist() == 6.0
    x = tp.ones(2, 3, device=device)
    assert x.index_add(0, tp.tensor([], dtype=tp.int64, device=device),
                       tp.ones(0, 3, device=device)).tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_are_pytorchs_formulas(device):
    rng = numpy.random.default_rng(3)
    weights = rng.standard_normal((4, 3))
    index = numpy.array([3, 0, 3])
    dest = tp.tensor(rng.standard_normal((4, 3)), device=device, requires_grad=True)
    source = tp.tensor(rng.standard_normal((3, 3)), device=device, requires_grad=True)
    (dest.index_add(0, tp.tensor(index, device=device), source, alpha=2) *
     tp.tensor(weights, device=device)).sum().backward()
    numpy.testing.assert_allclose(as_numpy(dest.grad), weights, rtol=1e-12)
    numpy.testing.assert_allclose(as_numpy(source.grad), 2 * weights[index], rtol=1e-12)
    dest.grad = source.grad = None
    copy_index = numpy.array([2, 0, 1])
    (dest.index_copy(0, tp.tensor(copy_index, device=device), source) *
     tp.tensor(weights, device=device)).sum().backward()
    kept = weights.copy()
    kept[copy_index] = 0
    numpy.testing.assert_allclose(as_numpy(dest.grad), kept, rtol=1e-12)
    numpy.testing.assert_allclose(as_numpy(source.grad), weights[copy_index], rtol=1e-12)


def test_values_and_gradients_match_pytorch():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(17)
    for dim in range(3):
        dest = rng.standard_normal((3, 4, 5))
        sizes = [3, 4, 5]
        sizes[dim] = 6
        source = rng.standard_normal(sizes)
        index = rng.integers(0, dest.shape[dim], 6)
        weights = rng.standard_normal(dest.shape)
        results = []
        for library in (tp, torch):
            d = library.tensor(dest, requires_grad=True)
            s = library.tensor(source, requires_grad=True)
            out = d.index_add(dim, library.tensor(index), s, alpha=-1.5)
            (out * library.tensor(weights)).sum().backward()
            results.append([out.detach(), d.grad, s.grad])
        for mine, theirs in zip(*results):
            numpy.testing.assert_allclose(as_numpy(mine), theirs.numpy(), rtol=1e-12)


ERRORS = [  # (call, error, PyTorch's message)
    (lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 1, 2]), lib.ones(2, 4)),
     RuntimeError, "index_add_(): Number of indices (3) should be equal to source.size(dim): "
                   "(2), for dim: 0"),
    (lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 5]), lib.ones(2, 4)),
     RuntimeError, "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0, 1]), lib.ones(2, 3)),
     RuntimeError, "source tensor shape must match self tensor shape, excluding the specified "
                   "dimension. Got self.shape = [3, 4] source.shape = [2, 3]"),
    (lambda lib: lib.zeros(3).index_add(0, lib.tensor(1), lib.tensor(5.0)), RuntimeError,
     "source tensor shape must match self tensor shape, excluding the specified dimension. "
     "Got self.shape = [3] source.shape = []"),
    (lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0, 5]), lib.ones(2, 4)), IndexError,
     "index_copy_(): index 5 is out of bounds for dimension 0 with size 3"),
    (lambda lib: lib.zeros(3, 4).index_copy(0, lib.tensor([0, 1, 2]), lib.ones(2, 4)),
     IndexError, "index_copy_(): Number of indices (3) should be equal to source.size(dim) (2)"),
    (lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([[0, 1]]), lib.ones(2, 4)), IndexError,
     "index_add_(): Index is supposed to be a vector"),
    (lambda lib: lib.zeros(3, 4).index_add(0, lib.tensor([0.0, 1.0]), lib.ones(2, 4)),
     RuntimeError, "index_add_(): Expected dtype int32/int64 for index"),
    (lambda lib: lib.zeros(3, requires_grad=True).index_add_(0, lib.tensor([1]), lib.ones(1)),
     RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation."),
]


@pytest.mark.parametrize("call, error, message", ERRORS)
def test_errors_are_pytorchs(call, error, message):
    raises_as_pytorch(call, error, message)


def test_dtype_and_alpha_are_checked():
    x = tp.zeros(3, 4)
    with pytest.raises(RuntimeError, match=r"self \(float32\) and source \(float64\) must have "
                                           "the same scalar type"):
        x.index_add(0, tp.tensor([0, 1]), tp.ones(2, 4, dtype=tp.float64))
    # A float alpha of an integer tensor is truncated, as PyTorch converts it to the dtype.
    assert tp.zeros(3, dtype=tp.int64).index_add(0, tp.tensor([0, 0]),
                                                 tp.ones(2, dtype=tp.int64),
                                                 alpha=-2.5).tolist() == [-4, 0, 0]
    with pytest.raises(ValueError, match="alpha nan cannot be stored in int64"):
        tp.zeros(3, dtype=tp.int64).index_add(0, tp.tensor([0]), tp.ones(1, dtype=tp.int64),
                                              alpha=float("nan"))
    with pytest.raises(TypeError, match="alpha must be an int or float"):
        x.index_add(0, tp.tensor([0, 1]), tp.ones(2, 4), alpha="2")
    assert x.tolist() == [[0.0] * 4] * 3


@pytest.mark.gpu
def test_a_captured_index_add_replays_with_new_indices(quiet_device):
    rng = numpy.random.default_rng(23)
    table = tp.zeros(6, 3, device="cuda")
    rows = tp.tensor(rng.standard_normal((4, 3)), dtype=tp.float32, device="cuda")
    index = tp.tensor([0, 1, 2, 3], device="cuda")
    table.index_add_(0, index, rows)  # the warm-up, as PyTorch's recipe
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        table.zero_()
        table.index_add_(0, index, rows, alpha=2)
        copied = tp.zeros(6, 3, device="cuda").index_copy(0, index, rows)
    new_index = numpy.array([5, 5, 0, 2])
    index.copy_(tp.tensor(new_index, device="cuda"))
    graph.replay()
    expected = numpy.zeros((6, 3))
    numpy.add.at(expected, new_index, 2 * as_numpy(rows))
    numpy.testing.assert_allclose(as_numpy(table), expected, rtol=1e-6)
    assert as_numpy(copied)[0].tolist() == as_numpy(rows)[2].tolist()
    assert as_numpy(copied)[2].tolist() == as_numpy(rows)[3].tolist()
