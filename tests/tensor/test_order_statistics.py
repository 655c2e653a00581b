"""kthvalue(), median(), nanmedian() and mode() (the tensorplay functions and the Tensor methods)
on the CPU and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_sort_and_select.py: test_kthvalue (a random 50 x 50 x 50 tensor against
  sort's k-th position, along the last dimension and along dim 0; a narrowed, non-contiguous
  input; the strided tensor([0, -1, 1, -2, 2])[::2] of pytorch/pytorch#45721; the input left
  unchanged; repeated values (3, 5, 4, 1, 1, 5); one NaN per slice with k = 1, SIZE - 1, SIZE and
  a random k), test_median_real_values (random shapes: median() equal to nanmedian() and to the
  sorted flattened tensor's position (n - 1) // 2; along each dim with keepdim, the values equal
  to gather() at the indices; numpy's median for odd counts), test_median_nan_values (NaN
  propagating in median and skipped by nanmedian, against numpy's nanmedian) and
  test_median_corner_cases (0-d NaN, empty, all-NaN, [[nan, nan], [1, 2]] along each dim, and
  the discontiguous a[::2], a.T and a[::2, ::2] of an arange);
- PyTorch's test/test_reductions.py: test_quantile (random tensors of several shapes with NaNs,
  q a float, a 0-d and a 1-D tensor, every dim and None, keepdim, every interpolation, against
  numpy's quantile and nanquantile with that method), test_quantile_backward and
  test_quantile_error (its messages, in its order);
- PyTorch's test/test_sort_and_select.py test_mode (random integer-valued slices along every
  dimension with keepdim, ties going to the smallest value at its last position, a 0-d tensor,
  bool) and test_mode_large / test_mode_boolean's ideas, against torch.mode;
- NumPy's median and nanmedian (numpy/lib/tests/test_function_base.py's TestMedian and
  test_nanfunctions.py's TestNanFunctions_Median) as the reference for odd counts.
Gradients: PyTorch's value_selecting_reduction_backward along dim, evenly_distribute_backward
for the whole tensor.
"""
import math
import pickle
import warnings

import numpy
import pytest

import tensorplay as tp
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NAN = math.nan


def as_numpy(tensor):
    tensor = tensor.detach().cpu()
    return numpy.asarray((tensor.to(tp.float32) if tensor.dtype == tp.bfloat16 else
                          tensor).numpy())


def same(result, expected):
    numpy.testing.assert_array_equal(as_numpy(result), numpy.asarray(expected))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int16", "bfloat16"])
def test_pytorch_kthvalue_against_sort(device, dtype):
    rng = numpy.random.default_rng(3)
    size = 50
    values = rng.permutation(size ** 3).reshape(size, size, size) % 251
    if dtype.startswith("float") or dtype == "bfloat16":
        values = rng.random((size, size, size))
    x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
    before = as_numpy(x).copy()
    k = int(rng.integers(1, size + 1))
    result_values, result_indices = tp.kthvalue(x, k, keepdim=False)
    sorted_values, sorted_indices = tp.sort(x)
    same(result_values, as_numpy(sorted_values)[:, :, k - 1])
    same(result_indices, as_numpy(sorted_indices)[:, :, k - 1])
    result_values, result_indices = tp.kthvalue(x, k, 0, keepdim=False)
    sorted_values, sorted_indices = tp.sort(x, 0)
    same(result_values, as_numpy(sorted_values)[k - 1])
    same(result_indices, as_numpy(sorted_indices)[k - 1])
    narrowed = x.narrow(1, 0, 1)  # non-contiguous
    for ours, contiguous in zip(tp.kthvalue(narrowed, k), tp.kthvalue(narrowed.contiguous(), k)):
        same(ours, as_numpy(contiguous))
    same(x, before)  # the input is left as it was


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_kthvalue_strided_repeated_and_nan(device):
    strided = tp.tensor([0, -1, 1, -2, 2], device=device)[::2]  # pytorch/pytorch#45721
    for ours, expected in zip(strided.kthvalue(2), strided.contiguous().kthvalue(2)):
        same(ours, as_numpy(expected))
    y = tp.tensor((3.0, 5, 4, 1, 1, 5), device=device)
    assert tp.kthvalue(y, 3)[0].item() == 3
    assert tp.kthvalue(y, 2)[0].item() == 1
    rng = numpy.random.default_rng(4)
    size = 50
    values = rng.random((size, size, size))
    values[numpy.arange(size), :, rng.integers(0, size, size)] = NAN  # one NaN per last-dim slice
    x = tp.tensor(values, device=device)
    sorted_values, sorted_indices = tp.sort(x)
    for k in (int(rng.integers(1, size + 1)), 1, size, size - 1):
        result_values, result_indices = tp.kthvalue(x, k, keepdim=False)
        same(result_values, as_numpy(sorted_values)[:, :, k - 1])
        same(result_indices, as_numpy(sorted_indices)[:, :, k - 1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "uint8"])
def test_pytorch_median_real_values(device, dtype):
    rng = numpy.random.default_rng(5)
    shapes = [(1,), (2,), (3,), (4,), (5,), (6, 7), (2, 3, 4), (1, 9, 2), ()]
    for shape in shapes:
        values = rng.standard_normal(shape) * 10
        if not dtype.startswith("float"):
            values = numpy.abs(values)
        t = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        plain = as_numpy(t)
        result = t.median()
        assert result.shape == ()
        same(result, as_numpy(t.nanmedian()))
        k = (t.numel() - 1) // 2
        same(result, numpy.sort(plain.reshape(-1), kind="stable")[k])
        if t.numel() % 2 == 1:  # numpy means the two middle elements of an even count
            same(result, numpy.median(plain))
        for dim in range(t.dim()):
            values_kept, indices_kept = t.median(dim, True)
            for ours, theirs in zip((values_kept, indices_kept), t.nanmedian(dim, True)):
                same(ours, as_numpy(theirs))
            size = t.shape[dim]
            middle = numpy.take(numpy.sort(plain, axis=dim, kind="stable"), [(size - 1) // 2],
                                axis=dim)
            same(values_kept, middle)
            same(values_kept, as_numpy(t.gather(dim, indices_kept)))
            if size % 2 == 1:
                same(values_kept, numpy.median(plain, dim, keepdims=True).astype(plain.dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pytorch_median_nan_values(device, dtype):
    rng = numpy.random.default_rng(6)
    for shape in [(1,), (2,), (3,), (4,), (5,), (7, 5), (3, 4, 5), (5, 1, 6)]:
        values = rng.random(shape)
        values[rng.random(shape) < 0.3] = NAN
        t = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        plain = as_numpy(t)
        median, nanmedian = t.median(), t.nanmedian()
        if numpy.isnan(plain).any():
            assert math.isnan(median.item())
        numbers = numpy.sort(plain[~numpy.isnan(plain)])
        if numbers.size == 0:
            assert math.isnan(nanmedian.item())
        else:
            same(nanmedian, numbers[(numbers.size - 1) // 2])
            if numbers.size % 2 == 1:
                same(nanmedian, numpy.nanmedian(plain))
        for dim in range(t.dim()):
            for call in (tp.median, tp.nanmedian):
                found, indices = call(t, dim, keepdim=True)
                numpy.testing.assert_array_equal(as_numpy(found),
                                                 as_numpy(t.gather(dim, indices)))
            moved = numpy.moveaxis(plain, dim, -1)
            expected_median = numpy.empty(moved.shape[:-1])
            expected_nanmedian = numpy.empty(moved.shape[:-1])
            for at in numpy.ndindex(moved.shape[:-1]):
                row = moved[at]
                kept = numpy.sort(row[~numpy.isnan(row)])
                expected_median[at] = NAN if kept.size < row.size else kept[(kept.size - 1) // 2]
                expected_nanmedian[at] = kept[(kept.size - 1) // 2] if kept.size else NAN
            same(t.median(dim).values, expected_median.astype(plain.dtype))
            same(t.nanmedian(dim).values, expected_nanmedian.astype(plain.dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_median_corner_cases(device):
    def check(call, data, args, values, indices=None):
        result = call(tp.tensor(data, device=device), *args)
        if args:
            result, found = result
            if indices is not None:
                same(found, indices)
        same(result, values)

    check(tp.median, NAN, [], NAN)
    check(tp.median, [], [], NAN)
    check(tp.nanmedian, NAN, [], NAN)
    check(tp.median, NAN, [0], NAN, 0)
    check(tp.nanmedian, NAN, [0], NAN, 0)
    check(tp.median, [NAN], [0, True], [NAN], [0])
    check(tp.nanmedian, [NAN], [0, True], [NAN], [0])
    # PyTorch checks only the values here: the indices of NaN are not fixed there.
    check(tp.median, [[NAN, NAN], [1, 2]], [0], [NAN, NAN])
    check(tp.nanmedian, [[NAN, NAN], [1, 2]], [0], [1.0, 2.0])
    check(tp.median, [[NAN, NAN], [1, 2]], [1], [NAN, 1.0])
    check(tp.nanmedian, [[NAN, NAN], [1, 2]], [1], [NAN, 1.0])
    a = tp.arange(12, device=device)
    for call in (tp.median, tp.nanmedian):
        assert call(a[::2]).item() == 4
        b = a.reshape(3, 4)
        assert call(b.T).item() == 5
        same(call(b[::2, ::2], -1)[0], [0, 8])
        c = a.reshape(2, 3, 2)
        assert call(c.permute(2, 1, 0)).item() == 5
        same(call(c[:, ::2, :], -1)[0], [[0, 4], [6, 10]])


@pytest.mark.parametrize("device", DEVICES)
def test_a_0d_tensor_is_its_own_order_statistic(device):
    x = tp.tensor(2.5, device=device)
    for result in (x.median(0), x.nanmedian(-1, keepdim=True), x.kthvalue(1)):
        assert result.values.shape == () and result.values.item() == 2.5
        assert result.indices.shape == () and result.indices.item() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_the_same_as_pytorch(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(7)
    values = numpy.round(rng.standard_normal((4, 7, 6)), 1)  # ties
    values[rng.random(values.shape) < 0.1] = NAN
    x = tp.tensor(values, device=device)
    theirs = torch.tensor(values)
    for call in (lambda lib, t: lib.median(t), lambda lib, t: lib.nanmedian(t),
                 lambda lib, t: lib.median(t, 1).values, lambda lib, t: lib.nanmedian(t, 2).values,
                 lambda lib, t: lib.kthvalue(t, 3, 0, True).values,
                 lambda lib, t: t.kthvalue(6).values):
        numpy.testing.assert_array_equal(as_numpy(call(tp, x)), call(torch, theirs).numpy())


MODE_CASES = [[[1, 2, 2, 5], [3, 3, 1, 1]], [1, 1, 2, 2], [2, 2, 1, 1, 3], [3.0, NAN, NAN, 1.0],
              [5, 1, 5, 1, 1, 5], [True, False, True], 3.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", range(len(MODE_CASES) + 2))
def test_pytorch_mode(device, case):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(case)
    data = numpy.array(MODE_CASES[case]) if case < len(MODE_CASES) else \
        rng.integers(0, 4, (5, 7, 6)).astype(numpy.float32 if case % 2 else numpy.int64)
    ours, theirs = tp.tensor(data, device=device), torch.tensor(data)
    dims = [None] + list(range(-data.ndim, data.ndim))
    for dim, keepdim in [(dim, keepdim) for dim in dims for keepdim in (False, True)
                         if dim is not None or not keepdim]:
        arguments = {} if dim is None else {"dim": dim}
        result = tp.mode(ours, keepdim=keepdim, **arguments)
        expected = torch.mode(theirs, keepdim=keepdim, **arguments)
        assert type(result).__name__ == "mode"
        same(result.values, expected.values.numpy())
        same(result.indices, expected.indices.numpy())
        assert result.indices.dtype == tp.int64
    same(ours.mode().values, theirs.mode().values.numpy())


# PyTorch's CPU kernel sorts with std::sort, stable by insertion up to 16 elements and not
# beyond, so past 16 its position is any of the mode's (its docs promise one "found"); ours is
# the last. NaN breaks its sort's `<`; here each NaN counts once and sorts last.
@pytest.mark.parametrize("device", DEVICES)
def test_mode_of_long_slices_is_at_the_last_position_and_each_nan_counts_once(device):
    torch = import_or_skip("torch")
    data = numpy.random.default_rng(0).integers(0, 5, (4, 40)).astype(numpy.float32)
    result = tp.mode(tp.tensor(data, device=device), 1)
    expected = torch.mode(torch.tensor(data), 1).values.numpy()
    same(result.values, expected)
    same(result.indices, [numpy.flatnonzero(row == value).max()
                          for row, value in zip(data, expected)])
    assert data[range(4), torch.mode(torch.tensor(data), 1).indices.numpy()].tolist() == \
        expected.tolist()
    some = tp.tensor([NAN, 1.0, NAN], device=device).mode()
    assert (some.values.item(), some.indices.item()) == (1.0, 1)
    alone = tp.tensor([NAN, NAN], device=device).mode()
    assert math.isnan(alone.values.item()) and alone.indices.item() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_mode_gradient_and_empty_dimension_as_pytorchs(device):
    torch = import_or_skip("torch")
    data = numpy.array([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]])
    x = tp.tensor(data, device=device, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    (tp.mode(x, 1).values * tp.tensor([2.0, 3.0], device=device)).sum().backward()
    (torch.mode(theirs, 1).values * torch.tensor([2.0, 3.0], dtype=torch.float64)).sum().backward()
    same(x.grad, theirs.grad.numpy())
    with pytest.raises(IndexError, match=r"mode\(\): Expected reduction dim 1 to have non-zero "
                                         "size"):
        tp.mode(tp.zeros(2, 0, device=device), 1)
    empty = tp.mode(tp.zeros(0, 2, device=device), 1)  # no slices: an empty result
    assert empty.values.shape == (0,) and empty.indices.shape == (0,)


@pytest.mark.gpu
def test_a_captured_mode_replays_with_new_values(quiet_device):
    from tensorplay import cuda
    x = tp.tensor([[1.0, 2.0, 2.0, 5.0], [3.0, 3.0, 1.0, 1.0]], device="cuda")
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        result = tp.mode(x, 1)
    x.copy_(tp.tensor([[7.0, 7.0, 1.0, 7.0], [4.0, 0.0, 0.0, 4.0]], device="cuda"))
    graph.replay()
    same(result.values, [7.0, 0.0])
    same(result.indices, [3, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_are_pytorchs(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(8)
    distinct = rng.permutation(30).reshape(5, 6).astype(numpy.float64)
    ties = numpy.array([[1.0, 2.0, 2.0, 5.0, 2.0], [0.0, 3.0, 3.0, 3.0, 9.0]])
    with_nan = numpy.array([[1.0, NAN, 3.0], [NAN, NAN, 2.0]])
    cases = [(distinct, lambda lib, t: lib.median(t, 1).values),
             (distinct, lambda lib, t: t.kthvalue(2, 0, keepdim=True).values),
             (distinct, lambda lib, t: lib.nanmedian(t, 0).values),
             (ties, lambda lib, t: lib.median(t)),  # shared evenly among the three 2.0s
             (ties, lambda lib, t: lib.nanmedian(t)),
             (with_nan, lambda lib, t: lib.median(t)),  # shared among the NaNs
             (with_nan, lambda lib, t: lib.nanmedian(t)),
             (with_nan, lambda lib, t: lib.nanmedian(t, 1).values)]
    for values, call in cases:
        ours = tp.tensor(values, device=device, requires_grad=True)
        theirs = torch.tensor(values, requires_grad=True)
        result, expected = call(tp, ours), call(torch, theirs)
        grad = rng.standard_normal(tuple(expected.shape))
        result.backward(tp.tensor(grad, device=device))
        expected.backward(torch.tensor(grad))
        numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call, error, message, theirs", [
    (lambda lib: lib.ones(3).kthvalue(4), RuntimeError,
     "kthvalue(): selected number k out of range for dimension 0", None),
    (lambda lib: lib.ones(3).kthvalue(0), RuntimeError,
     "kthvalue(): selected number k out of range for dimension 0", None),
    (lambda lib: lib.ones(2, 3).kthvalue(1, 2), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)", None),
    (lambda lib: lib.ones(2, 0).median(1), IndexError,
     "median(): Expected reduction dim 1 to have non-zero size.", None),
    (lambda lib: lib.ones(2, 0).nanmedian(1), IndexError,  # median's words, as PyTorch's
     "median(): Expected reduction dim 1 to have non-zero size.", None),
    (lambda lib: lib.ones(3).kthvalue(1.0), TypeError, "k", "must be int"),
    (lambda lib: lib.median([1.0, 2.0]), TypeError, "input", "must be Tensor"),
])
def test_errors_are_pytorchs(call, error, message, theirs):
    raises_as_pytorch(call, error, message, theirs)


@pytest.mark.parametrize("call", [lambda t: t.median(), lambda t: t.nanmedian(0),
                                  lambda t: t.kthvalue(1)])
def test_bool_is_refused_as_pytorch_refuses_it(call):
    raises_as_pytorch(lambda lib: call(lib.tensor([True, False])), NotImplementedError,
                      "not implemented for bool tensors", "not implemented for 'Bool'")


def test_keepdim_needs_a_dim_and_an_empty_integer_tensor_has_no_median():
    """PyTorch's median() has no keepdim without dim either (a TypeError); of an empty int64
    tensor it returns the smallest int64, where ours refuses."""
    with pytest.raises(TypeError, match="median: keepdim needs a dim"):
        tp.ones(3).median(keepdim=True)
    with pytest.raises(RuntimeError, match="empty int64 tensor"):
        tp.tensor([], dtype=tp.int64).median()


def test_results_are_the_return_types_and_pickle():
    from tensorplay import return_types
    x = tp.tensor([[3.0, 1.0, 2.0], [0.0, 2.0, 5.0]])
    for result, kind in [(x.median(1), return_types.median),
                         (x.nanmedian(1), return_types.nanmedian),
                         (x.kthvalue(2), return_types.kthvalue)]:
        assert type(result) is kind and result._fields == ("values", "indices")
        again = pickle.loads(pickle.dumps(result))
        assert type(again) is kind and again.values.tolist() == result.values.tolist()


@pytest.mark.gpu
def test_captured_order_statistics_replay_with_new_values(quiet_device):
    rng = numpy.random.default_rng(22)
    shape = (6, 33)
    x = tp.tensor(rng.standard_normal(shape), dtype=tp.float32, device="cuda",
                  requires_grad=True)
    x.median().backward()  # the warm-up, as PyTorch's recipe
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        whole = x.median()
        along = x.median(1)
        skipping = x.nanmedian(0)
        third = x.kthvalue(3, 1)
        (whole + along.values.sum()).backward()
    new = rng.standard_normal(shape).astype(numpy.float32)
    new[0, :3] = NAN
    new[1, :] = NAN
    with tp.no_grad():
        x.copy_(tp.tensor(new, device="cuda"))
    graph.replay()
    assert math.isnan(whole.item())
    for at, row in enumerate(new):
        numbers = numpy.sort(row[~numpy.isnan(row)])
        expected = NAN if numbers.size < row.size else numbers[(numbers.size - 1) // 2]
        same(along.values[at], expected)
        same(third.values[at], numpy.sort(row)[2])  # NaN sorts last
    for column in range(shape[1]):
        numbers = numpy.sort(new[~numpy.isnan(new[:, column]), column])
        same(skipping.values[column], numbers[(numbers.size - 1) // 2])
        same(x.detach()[int(skipping.indices[column]), column], numbers[(numbers.size - 1) // 2])
    nans = numpy.isnan(new)  # the whole median is NaN: its gradient is shared by the NaNs
    expected = numpy.where(nans, 1.0 / nans.sum(), 0.0) + _along_grad(new)
    numpy.testing.assert_allclose(as_numpy(x.grad), expected, rtol=1e-6)


def _along_grad(values):
    """The gradient of median(1).values.sum(): 1 at each row's chosen position; the rows with a
    NaN choose their first NaN (the stable sort's first)."""
    grad = numpy.zeros(values.shape, dtype=numpy.float32)
    for at, row in enumerate(values):
        nan_positions = numpy.flatnonzero(numpy.isnan(row))
        if nan_positions.size:
            grad[at, nan_positions[0]] = 1.0
        else:
            order = numpy.argsort(row, kind="stable")
            grad[at, order[(row.size - 1) // 2]] = 1.0
    return grad


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pytorch_quantile_against_numpy(device, dtype):
    rng = numpy.random.default_rng(30)
    modes = ["linear", "lower", "higher", "midpoint", "nearest"]
    for shape in [(1,), (5,), (4, 6), (3, 2, 7), ()]:
        values = numpy.asarray(rng.standard_normal(shape)).astype(dtype)
        if values.size > 2:
            values.reshape(-1)[rng.choice(values.size, 2, replace=False)] = NAN
        x = tp.tensor(values, device=device)
        for q in (0.0, 0.3, 1.0, [0.0, 0.25, 0.5, 1.0], "0-d"):
            ours_q = tp.tensor(q, dtype=x.dtype, device=device) if isinstance(q, list) else \
                tp.tensor(0.6, dtype=x.dtype, device=device) if q == "0-d" else q
            numpy_q = numpy.array(q, dtype=dtype) if isinstance(q, list) else \
                numpy.array(0.6, dtype=dtype) if q == "0-d" else q
            for dim in [None] + list(range(values.ndim)):
                for keepdim in (False, True):
                    for mode in modes:
                        for ours, theirs in ((tp.quantile, numpy.quantile),
                                             (tp.nanquantile, numpy.nanquantile)):
                            found = ours(x, ours_q, dim, keepdim, interpolation=mode)
                            with warnings.catch_warnings():  # numpy's all-NaN slice warning
                                warnings.simplefilter("ignore")
                                expected = theirs(values.astype(numpy.float64), numpy_q,
                                                  axis=dim, keepdims=keepdim, method=mode)
                            if keepdim and dim is None and values.ndim == 0:
                                expected = numpy.asarray(expected)
                            assert tuple(found.shape) == numpy.shape(expected), \
                                (ours, q, dim, keepdim, mode)
                            numpy.testing.assert_allclose(
                                as_numpy(found), expected,
                                rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_quantile_the_same_values_and_gradients(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(31)
    values = rng.standard_normal((3, 5, 4))
    values[0, 1, 2] = NAN
    for name in ("quantile", "nanquantile"):
        for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
            ours = tp.tensor(values, device=device, requires_grad=True)
            theirs = torch.tensor(values, requires_grad=True)
            q = [0.2, 0.5, 0.9]
            found = getattr(tp, name)(ours, tp.tensor(q, dtype=tp.float64, device=device), 1,
                                      interpolation=mode)
            expected = getattr(torch, name)(theirs, torch.tensor(q, dtype=torch.float64), 1,
                                            interpolation=mode)
            numpy.testing.assert_allclose(as_numpy(found), expected.detach().numpy(),
                                          rtol=1e-12)
            grad = rng.standard_normal(tuple(expected.shape))
            found.backward(tp.tensor(grad, device=device))
            expected.backward(torch.tensor(grad))
            numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-12,
                                          atol=1e-15)


@pytest.mark.parametrize("call, message", [
    (lambda lib: lib.quantile(lib.tensor([]), 0.5), "quantile() input tensor must be non-empty"),
    (lambda lib: lib.quantile(lib.ones(3), lib.ones(1, 1)),
     "quantile() q must be a scalar or 1D tensor"),
    (lambda lib: lib.quantile(lib.ones(3, dtype=lib.int64), 0.5),
     "quantile() input tensor must be either float or double dtype"),
    (lambda lib: lib.quantile(lib.ones(3), lib.ones(1, dtype=lib.float64)),
     "quantile() q tensor must be same dtype as the input tensor"),
    (lambda lib: lib.quantile(lib.ones(3), 1.5),
     "quantile() q must be in the range [0, 1] but got 1.5"),
    (lambda lib: lib.nanquantile(lib.ones(3), -0.5),  # ours names nanquantile(), PyTorch's not
     "quantile() q must be in the range [0, 1] but got -0.5"),
    (lambda lib: lib.quantile(lib.ones(3), lib.tensor([0.5, 2.0])),
     "quantile() q values must be in the range [0, 1]"),
    (lambda lib: lib.quantile(lib.ones(3), 0.5, interpolation="foo"),
     "quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, but "
     "got foo"),
])
def test_pytorch_quantile_errors(call, message):
    raises_as_pytorch(call, RuntimeError, message)


@pytest.mark.gpu
def test_a_device_q_outside_the_range_gives_nan_and_a_capture_takes_quantile(quiet_device):
    x = tp.tensor([[1.0, 2.0, 3.0, 4.0], [8.0, 6.0, 7.0, 5.0]], device="cuda",
                  requires_grad=True)
    q = tp.tensor([0.5, 1.5, float("nan"), 0.0], device="cuda")
    found = tp.quantile(x, q, 1)
    same(found, [[2.5, 6.5], [NAN, NAN], [NAN, NAN], [1.0, 5.0]])
    x.quantile(0.5).backward()  # the warm-up
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        captured = tp.quantile(x, q, 1, interpolation="nearest")
        skipping = tp.nanquantile(x, 0.25, 0, keepdim=True)
        captured[0].sum().backward()
    new = numpy.array([[4.0, NAN, 0.0, 2.0], [1.0, 3.0, 9.0, 7.0]], dtype=numpy.float32)
    with tp.no_grad():
        x.copy_(tp.tensor(new, device="cuda"))
    graph.replay()
    same(captured[0], [NAN, 7.0])  # nearest of rank 1.5 rounds to 2 (half to even)
    same(skipping, [[1.75, 3.0, 2.25, 3.25]])
    # the gradient goes to the element chosen: the NaN (sorted last) of row 0, the 7 of row 1
    same(x.grad, [[0, 1.0, 0, 0], [0, 0, 0, 1.0]])
