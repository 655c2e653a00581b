"""scatter() and scatter_add() (tensorplay.scatter/scatter_add and the Tensor methods, in place
or not) on the CPU and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_scatter_gather_ops.py: _test_scatter_base (random (m, n, o) sizes of 10
  to 20, a random dim, 1 to 10 unique indices per row along it (_fill_indices), a src larger
  than the index by 1 to 5 along every dimension, or a Python scalar; each element checked
  against the loop expected[ii] = src[i][j][k] (+= for scatter_add_); an empty index changes
  nothing), as test_scatter_, test_scatter__scalar and test_scatter_add_;
  test_scatter_add_mult_index_base (every index 0: row 0 holds the count); test_scatter_bool
  and test_scatter_add_bool; test_scatter_zero_size_index; and the gradients of
  derivatives.yaml, compared with torch where it is installed;
- CuPy's tests/cupyx_tests/test_scatter.py (TestScatterAdd): repeated indices add up, for the
  integer dtypes too (here through scatter_add along a dimension).
Errors are PyTorch's, compared with torch where it is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def as_numpy(tensor):
    return numpy.asarray(tensor.cpu().numpy())


def fill_indices(rng, index_sizes, dim, dim_size, unique=True):
    """PyTorch's _fill_indices: each row along dim a permutation's first elements (unique) or
    random draws."""
    index = numpy.empty(index_sizes, dtype=numpy.int64)
    rows = numpy.moveaxis(index, dim, -1)  # a view: each row along dim is one last-axis row
    for at in numpy.ndindex(rows.shape[:-1]):
        rows[at] = (rng.permutation(dim_size)[:rows.shape[-1]] if unique
                    else rng.integers(0, dim_size, rows.shape[-1]))
    return index


def loop_reference(base, dim, index, src, add):
    """PyTorch's loop: expected[ii] = src[i][j][k] (or +=), ii the coordinates with index[i][j][k]
    at dim."""
    expected = base.copy()
    for at in numpy.ndindex(index.shape):
        target = list(at)
        target[dim] = index[at]
        value = src if numpy.ndim(src) == 0 else src[at]
        if add:
            expected[tuple(target)] += value
        else:
            expected[tuple(target)] = value
    return expected


def scatter_case(rng, dtype, scalar):
    """_test_scatter_base's shapes, smaller (5 to 8) so that the loop stays quick."""
    sizes = [int(size) for size in rng.integers(5, 9, 3)]
    dim = int(rng.integers(0, 3))
    index_sizes = list(sizes)
    index_sizes[dim] = int(rng.integers(1, sizes[dim] + 1))
    index = fill_indices(rng, index_sizes, dim, sizes[dim])
    if scalar:
        src = float(rng.random())
    else:
        src = (rng.standard_normal([size + int(rng.integers(1, 6)) for size in index_sizes])
               * 10).astype(dtype)
    base = (rng.standard_normal(sizes) * 10).astype(dtype)
    return base, dim, index, src


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "int8"])
@pytest.mark.parametrize("method, scalar", [("scatter_", False), ("scatter_", True),
                                            ("scatter", False), ("scatter_add_", False),
                                            ("scatter_add", False)])
def test_matches_the_loop_reference(device, dtype, method, scalar):
    rng = numpy.random.default_rng([len(dtype), len(method), scalar])
    add = method.startswith("scatter_add")
    for _ in range(4):
        base, dim, index, src = scatter_case(rng, dtype, scalar)
        if add and dtype == "int8":
            base, src = base // 4, src // 4  # PyTorch's test avoids signed overflow too
        expected = loop_reference(base, dim, index, src, add)
        if scalar:
            expected = loop_reference(base, dim, index, numpy.array(src).astype(dtype), add)
        tensor = tp.tensor(base, device=device)
        operand = src if scalar else tp.tensor(src, device=device)
        result = getattr(tensor, method)(dim, tp.tensor(index, device=device), operand)
        if method.endswith("_"):
            assert result is tensor
        else:
            numpy.testing.assert_array_equal(as_numpy(tensor), base)  # untouched
        assert result.dtype is getattr(tp, dtype)
        numpy.testing.assert_allclose(as_numpy(result), expected,
                                      rtol=1e-3 if dtype == "float16" else 1e-6)
        # Tests empty index: nothing changes.
        assert as_numpy(getattr(tp.tensor(base, device=device), method)(
            0, tp.tensor([], dtype=tp.int64, device=device),
            operand)).tolist() == base.tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "int16", "uint8", "bfloat16"])
def test_repeated_indices_add_up(device, dtype):
    # test_scatter_add_mult_index_base: every index 0, so row 0 counts the rows; and CuPy's
    # TestScatterAdd: repeated indices add up, for integers too.
    m, n = 30, 40
    ones = tp.ones(m, n, dtype=getattr(tp, dtype), device=device)
    zeros = tp.zeros(m, n, dtype=getattr(tp, dtype), device=device)
    summed = zeros.scatter_add(0, tp.zeros(m, n, dtype=tp.int64, device=device), ones)
    expected = numpy.zeros((m, n))
    expected[0] = m
    numpy.testing.assert_array_equal(as_numpy(summed.to(tp.float64)), expected)
    summed = zeros.scatter_add(1, tp.zeros(m, n, dtype=tp.int64, device=device), ones)
    expected = numpy.zeros((m, n))
    expected[:, 0] = n
    numpy.testing.assert_array_equal(as_numpy(summed.to(tp.float64)), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_and_narrow_integers(device):
    # test_scatter_bool and test_scatter_add_bool (PyTorch's values); an int8 sum wraps as
    # PyTorch's does (100 + 100 = -56).
    x = tp.tensor([[True, True, True], [True, True, True]], device=device)
    index = tp.tensor([[0, 1, 2], [0, 1, 2]], device=device)
    assert tp.zeros(3, 3, dtype=tp.bool, device=device).scatter_(1, index, x).tolist() == \
        [[True, True, True], [True, True, True], [False, False, False]]
    index = tp.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]], device=device)
    x = tp.tensor([[True, True, True, True, True], [True, True, True, True, True]],
                  device=device)
    assert tp.zeros(3, 5, dtype=tp.bool, device=device).scatter_add_(0, index, x).tolist() == \
        [[True, True, True, True, True], [False, True, False, True, False],
         [True, False, True, False, True]]
    wrapped = tp.zeros(3, dtype=tp.int8, device=device).scatter_add(
        0, tp.tensor([1, 1], device=device), tp.full((2,), 100, dtype=tp.int8, device=device))
    assert wrapped.tolist() == [0, -56, 0]


@pytest.mark.parametrize("device", DEVICES)
def test_zero_sizes_zero_dimensions_and_strides(device):
    # test_scatter_zero_size_index: an empty index of any shape changes nothing.
    x = tp.ones(2, 3, device=device)
    assert x.scatter_add(0, tp.zeros(0, 5, dtype=tp.int64, device=device),
                         tp.ones(0, 5, device=device)).tolist() == [[1.0] * 3] * 2
    assert x.scatter(0, tp.zeros(4, 0, dtype=tp.int64, device=device), 7.0).tolist() == \
        [[1.0] * 3] * 2
    # 0-d tensors count as ones of one element, as PyTorch's.
    assert tp.tensor(5.0, device=device).scatter(0, tp.tensor(0, device=device),
                                                 tp.tensor(7.0, device=device)).tolist() == 7.0
    assert tp.zeros(3, device=device).scatter(0, tp.tensor(1, device=device),
                                              tp.tensor(7.0, device=device)).tolist() == \
        [0.0, 7.0, 0.0]
    # A transposed (not contiguous) tensor, index and src; an in-place scatter of a view writes
    # through to its base.
    base = tp.arange(6.0, device=device).reshape(2, 3)
    view = base.t()
    view.scatter_(0, tp.tensor([[2, 0]], device=device).t().t(),
                  tp.tensor([[10.0], [20.0]], device=device).t())
    assert base.tolist() == [[0.0, 1.0, 10.0], [20.0, 4.0, 5.0]]
    # src sharing the target's memory is read before it is written.
    x = tp.arange(5.0, device=device)
    x.scatter_(0, tp.tensor([4, 3, 2, 1, 0], device=device), x)
    assert x.tolist() == [4.0, 3.0, 2.0, 1.0, 0.0]


def gradients(library, base, dim, index, src, method, weights):
    self_ = library.tensor(base, requires_grad=True)
    src_ = library.tensor(src, requires_grad=True) if not isinstance(src, float) else src
    out = getattr(self_, method)(dim, library.tensor(index), src_)
    (out * library.tensor(weights)).sum().backward()
    return (out.detach(), self_.grad,
            None if isinstance(src, float) else src_.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["scatter", "scatter_add"])
def test_gradients_are_pytorchs_formulas(device, method):
    # derivatives.yaml: scatter's self gets the gradient zeroed where src was stored, src the
    # gradient gathered at the index; scatter_add's self the gradient, src the same gather.
    rng = numpy.random.default_rng(5)
    base = rng.standard_normal((4, 5))
    index = fill_indices(rng, (4, 3), 1, 5)
    src = rng.standard_normal((4, 3))
    weights = rng.standard_normal((4, 5))
    x = tp.tensor(base, device=device, requires_grad=True)
    s = tp.tensor(src, device=device, requires_grad=True)
    out = getattr(x, method)(1, tp.tensor(index, device=device), s)
    (out * tp.tensor(weights, device=device)).sum().backward()
    rows = numpy.arange(4)[:, None]
    expected_x = weights.copy()
    if method == "scatter":
        expected_x[rows, index] = 0
    numpy.testing.assert_allclose(as_numpy(x.grad), expected_x, rtol=1e-12)
    numpy.testing.assert_allclose(as_numpy(s.grad), weights[rows, index], rtol=1e-12)


@pytest.mark.parametrize("method, scalar", [("scatter", False), ("scatter", True),
                                            ("scatter_add", False)])
def test_values_and_gradients_match_pytorch(method, scalar):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(9)
    for _ in range(5):
        base, dim, index, src = scatter_case(rng, "float64", scalar)
        if not scalar:
            src = src[tuple(slice(0, size) for size in index.shape)]  # PyTorch's src backward
        weights = rng.standard_normal(base.shape)
        ours = gradients(tp, base, dim, index, src, method, weights)
        theirs = gradients(torch, base, dim, index, src, method, weights)
        for mine, their in zip(ours, theirs):
            if their is None:
                assert mine is None
            else:
                numpy.testing.assert_allclose(as_numpy(mine), their.numpy(), rtol=1e-12)


def test_a_src_larger_than_the_index_gets_zero_gradient_outside_it():
    # PyTorch's engine refuses this backward (its gather has the index's shape); ours gives the
    # elements the index does not reach a zero gradient.
    src = tp.ones(2, 3, requires_grad=True)
    out = tp.zeros(2, 3).scatter(1, tp.tensor([[0], [2]]), src)
    (out * tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward()
    assert src.grad.tolist() == [[1.0, 0.0, 0.0], [6.0, 0.0, 0.0]]


ERRORS = [  # (call, error, PyTorch's message)
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.tensor([0]), lib.ones(3, 4)), RuntimeError,
     "Index tensor must have the same number of dimensions as self tensor"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.zeros(2, 5, dtype=lib.int64), lib.ones(3, 5)),
     RuntimeError, "Expected index [2, 5] to be no larger than self [3, 4] apart from dimension "
                   "0 and to be no larger size than src [3, 5]"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.zeros(2, 3, dtype=lib.int64), lib.ones(1, 3)),
     RuntimeError, "Expected index [2, 3] to be no larger than self [3, 4] apart from dimension "
                   "0 and to be no larger size than src [1, 3]"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.zeros(2, 5, dtype=lib.int64), 1.0),
     RuntimeError, "Expected index [2, 5] to be no larger than self [3, 4] apart from dimension "
                   "0"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.tensor([[5]]), lib.ones(3, 4)), RuntimeError,
     "index 5 is out of bounds for dimension 0 with size 3"),
    (lambda lib: lib.zeros(3, 4).scatter_add(1, lib.tensor([[-1]]), lib.ones(3, 4)),
     RuntimeError, "index -1 is out of bounds for dimension 1 with size 4"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.tensor([[1]]), lib.ones(3, 4, dtype=lib.float64)),
     RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda lib: lib.zeros(3, 4).scatter_add(0, lib.tensor([[1]]), lib.ones(3, 4, dtype=lib.int64)),
     RuntimeError, "scatter(): Expected self.dtype to be equal to src.dtype"),
    (lambda lib: lib.zeros(3, 4).scatter(0, lib.tensor([[1.0]]), 1.0), RuntimeError,
     "scatter(): Expected dtype int32/int64 for index"),
    # PyTorch 2.13's message; 2.11 says "scatter_add() received an invalid combination of
    # arguments", so only the start is compared with torch (below)
    (lambda lib: lib.zeros(3, 4).scatter_add(0, lib.tensor([[1]]), 1.0), TypeError,
     "scatter_add(): argument 'src' (position 3) must be Tensor, not float"),
    (lambda lib: lib.zeros(3, requires_grad=True).scatter_(0, lib.tensor([1]), 2.0),
     RuntimeError, "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda lib: lib.zeros(3).scatter(2, lib.tensor([1]), 1.0), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 2)"),
]


@pytest.mark.parametrize("call, error, message", ERRORS)
def test_errors_are_pytorchs(call, error, message):
    raises_as_pytorch(call, error, message,
                      "scatter_add()" if "position 3" in message else None)


def test_a_refused_in_place_call_changes_nothing():
    x = tp.arange(4.0)
    w = tp.ones(4, requires_grad=True)
    product = w * x  # saves x: a counted change of x would fail the backward
    with pytest.raises(RuntimeError, match="out of bounds"):
        x.scatter_(0, tp.tensor([1, 9]), tp.ones(2))
    with pytest.raises(TypeError, match="src must be a tensor or a Python scalar"):
        x.scatter_(0, tp.tensor([1]), "a")
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
    product.sum().backward()
    assert w.grad.tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.gpu
def test_an_index_out_of_range_on_a_device_scatters_nothing():
    x = tp.zeros(2, 2, device="cuda")
    x.scatter_(1, tp.tensor([[1, 2], [-1, 0]], device="cuda"),
               tp.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda"))
    assert x.tolist() == [[0.0, 1.0], [4.0, 0.0]]
    added = tp.zeros(3, device="cuda").scatter_add(0, tp.tensor([5, 1], device="cuda"),
                                                   tp.ones(2, device="cuda"))
    assert added.tolist() == [0.0, 1.0, 0.0]


@pytest.mark.gpu
def test_captured_scatters_replay_with_new_indices(quiet_device):
    rng = numpy.random.default_rng(13)
    weights = tp.tensor(rng.standard_normal((4, 6)), dtype=tp.float32, device="cuda",
                        requires_grad=True)
    index = tp.tensor(fill_indices(rng, (4, 3), 1, 6), device="cuda")
    src = tp.tensor(rng.standard_normal((4, 3)), dtype=tp.float32, device="cuda")
    # the warm-up, as PyTorch's recipe
    weights.scatter_add(1, index, src).scatter(1, index, 0.5).sum().backward()
    weights.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        added = weights.scatter_add(1, index, src)
        stored = added.scatter(1, index, 0.5)
        stored.sum().backward()
        counts = tp.zeros(6, device="cuda")
        counts.scatter_add_(0, index.reshape(-1), tp.ones(12, device="cuda"))
    new_index = fill_indices(rng, (4, 3), 1, 6)
    index.copy_(tp.tensor(new_index, device="cuda"))
    graph.replay()
    rows = numpy.arange(4)[:, None]
    expected = as_numpy(weights.detach()).astype(numpy.float64)
    numpy.add.at(expected, (rows, new_index), as_numpy(src))
    numpy.testing.assert_allclose(as_numpy(added.detach()), expected, rtol=1e-6)
    expected[rows, new_index] = 0.5
    numpy.testing.assert_allclose(as_numpy(stored.detach()), expected, rtol=1e-6)
    expected_grad = numpy.ones((4, 6))
    expected_grad[rows, new_index] = 0
    numpy.testing.assert_array_equal(as_numpy(weights.grad), expected_grad)
    numpy.testing.assert_array_equal(as_numpy(counts), numpy.bincount(new_index.reshape(-1),
                                                                       minlength=6))
