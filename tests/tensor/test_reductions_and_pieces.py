"""var() and std(), masked_fill(), split(), chunk(), unbind(), repeat() and the softmax methods on
the CPU and on CUDA (marked gpu): values against numpy, PyTorch's argument rules, gradients,
views, captures; against PyTorch where it is installed.

After PyTorch's tests: test/test_reductions.py (TestReductions.test_var_vs_numpy,
test_std_vs_numpy, test_std_correction_vs_numpy: numpy's var and std with ddof for each dim,
keepdim and correction), test/test_torch.py (TestTorchDeviceType.test_masked_fill: a random
mask over ten elements against an elementwise loop, and the refusal of a mask that is not
bool; test_masked_fill_bool), test/test_view_ops.py (TestViewOps.test_split_view,
test_chunk_view, test_unbind_view: each piece a view whose writes reach the base) and
test/test_torch.py's test_repeat (against numpy.tile).
"""
import itertools

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_var_and_std_against_numpy(device, dtype):
    data = numpy.random.default_rng(0).normal(3.0, 2.0, (4, 5, 6))
    x = tp.tensor(data.tolist(), dtype=getattr(tp, dtype), device=device)
    tolerance = 1e-5 if dtype == "float32" else 1e-12
    for dim, keepdim, correction in itertools.product((None, 0, 1, -1, (0, 2)), (False, True),
                                                      (None, 0, 2)):
        ddof = 1 if correction is None else correction
        axis = tuple(dim) if isinstance(dim, tuple) else dim
        for name, reference in (("var", numpy.var), ("std", numpy.std)):
            result = getattr(x, name)(dim, keepdim=keepdim, correction=correction)
            expected = reference(data, axis=axis, ddof=ddof, keepdims=keepdim)
            assert tuple(result.shape) == numpy.shape(expected)
            numpy.testing.assert_allclose(values(result), expected, rtol=tolerance)
    numpy.testing.assert_allclose(values(x.var(1, False)), numpy.var(data, axis=1), rtol=1e-5)
    numpy.testing.assert_allclose(values(x.std(unbiased=False)), numpy.std(data), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_var_rules(device):
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        assert numpy.isnan(tp.ones(1, device=device).var().item())
    with pytest.raises(TypeError, match="std and var only support floating point"):
        tp.tensor([1, 2], device=device).var()
    with pytest.raises(TypeError, match="not both"):
        tp.ones(3, device=device).std(unbiased=True, correction=1)
    with pytest.raises(TypeError, match="unbiased must be a bool"):
        tp.ones(3, device=device).var(0, 1)
    x = tp.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], device=device, requires_grad=True)
    x.std(1).sum().backward()  # d std / dx = (x - mean) / ((N - 1) * std)
    data = numpy.array([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]])
    deviations = data - data.mean(1, keepdims=True)
    expected = deviations / (2 * data.std(1, ddof=1, keepdims=True))
    numpy.testing.assert_allclose(values(x.grad), expected, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["std", "std_mean"])
def test_std_of_equal_values_has_a_zero_gradient(device, name):
    # PyTorch's std_backward masks the gradient where the result is 0 (every value reduced is
    # the same), where the root's derivative is inf: 0, not NaN (a constant row in a batch
    # would otherwise poison every parameter's gradient). A NaN std keeps its NaN gradient.
    x = tp.tensor([[1.5, 1.5, 1.5], [1.0, 2.0, 4.0]], device=device, requires_grad=True)
    result = x.std(1) if name == "std" else tp.std_mean(x, 1)[0]
    result.sum().backward()
    assert values(result)[0] == 0.0
    data = numpy.array([1.0, 2.0, 4.0])
    expected = (data - data.mean()) / (2 * data.std(ddof=1))
    numpy.testing.assert_allclose(values(x.grad), [[0.0, 0.0, 0.0], expected], rtol=1e-5)
    single = tp.ones(1, device=device, requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        root = single.std()
    root.backward()
    assert numpy.isnan(root.item()) and numpy.isnan(values(single.grad)).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64", "bool"])
def test_masked_fill(device, dtype):
    # test_masked_fill: ten elements, a random mask, a value, against an elementwise loop.
    draw = numpy.random.default_rng(1)
    mask_values = draw.integers(0, 2, 10).astype(bool).tolist()
    value = True if dtype == "bool" else 7
    destination = tp.zeros(10, dtype=getattr(tp, dtype), device=device)
    mask = tp.tensor(mask_values, device=device)
    expected = [value if chosen else (False if dtype == "bool" else 0) for chosen in mask_values]
    assert destination.masked_fill(mask, value).tolist() == expected
    assert destination.tolist() == [False if dtype == "bool" else 0] * 10  # unchanged
    assert destination.masked_fill_(mask, value) is destination
    assert destination.tolist() == expected
    assert destination.masked_fill(mask, tp.tensor(value, device=device)).tolist() == expected
    with pytest.raises(TypeError, match="boolean masks"):
        destination.masked_fill(tp.tensor([1] * 10, device=device), value)


@pytest.mark.parametrize("device", DEVICES)
def test_masked_fill_rules(device):
    x = tp.tensor([1, 2, 3], dtype=tp.int8, device=device)
    mask = tp.tensor([True, False, True], device=device)
    assert x.masked_fill(mask, 2.7).tolist() == [2, 2, 2]  # truncated, as PyTorch's
    assert x.masked_fill(mask, -2.7).tolist() == [-2, 2, -2]
    with pytest.raises(ValueError, match="does not fit int8"):
        x.masked_fill(mask, 300)
    with pytest.raises(ValueError, match="0-dimensional"):
        x.masked_fill(mask, tp.tensor([1, 2, 3], device=device))
    wide = tp.ones(3, device=device).masked_fill(tp.tensor([[True], [False]], device=device), 5)
    assert wide.tolist() == [[5.0, 5.0, 5.0], [1.0, 1.0, 1.0]]
    grid = tp.ones(2, 3, device=device)
    grid.masked_fill_(mask, 5)
    assert grid.tolist() == [[5.0, 1.0, 5.0], [5.0, 1.0, 5.0]]
    before = tp.ones(3, device=device)
    with pytest.raises(ValueError, match="doesn't match the broadcast shape"):
        before.masked_fill_(tp.tensor([[True], [False]], device=device), 5)
    assert before.tolist() == [1.0, 1.0, 1.0]
    filled = tp.ones(3, device=device).masked_fill(mask, tp.tensor(2.5, dtype=tp.float64))
    assert filled.dtype is tp.float32 and filled.tolist() == [2.5, 1.0, 2.5]
    x = tp.ones(3, device=device, requires_grad=True)
    value = tp.tensor(2.0, device=device, requires_grad=True)
    (x.masked_fill(mask, value) * tp.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 0.0] and value.grad.item() == 4.0


@pytest.mark.parametrize("device", DEVICES)
def test_split_chunk_unbind_are_views(device):
    # test_split_view, test_chunk_view, test_unbind_view: a write through a piece reaches the
    # base.
    base = tp.arange(24, device=device).reshape(4, 6)
    pieces = base.split(2, 1)
    assert [tuple(p.shape) for p in pieces] == [(4, 2)] * 3
    pieces[1][0, 0] = 100
    assert base[0, 2].item() == 100
    assert [p.tolist() for p in tp.arange(10, device=device).split(3)] == [
        [0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [p.tolist() for p in tp.arange(10, device=device).split([2, 8])] == [
        [0, 1], list(range(2, 10))]
    chunks = base.chunk(3, 0)
    assert [tuple(c.shape) for c in chunks] == [(2, 6), (2, 6)]  # fewer than asked, as PyTorch
    chunks[1][1, 5] = -1
    assert base[3, 5].item() == -1
    rows = base.unbind(0)
    assert len(rows) == 4 and tuple(rows[0].shape) == (6,)
    rows[2][3] = 77
    assert base[2, 3].item() == 77
    assert [c.tolist() for c in base.unbind(-1)][0] == [0, 6, 12, 18]
    with pytest.raises(ValueError, match="sum exactly to 10"):
        tp.arange(10, device=device).split([2, 2])
    with pytest.raises(ValueError, match="chunks"):
        base.chunk(0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        base.split(2, 2)


@pytest.mark.parametrize("device", DEVICES)
def test_pieces_carry_gradients(device):
    x = tp.arange(6, dtype=tp.float32, device=device).requires_grad_()
    first, second = x.split([2, 4])
    (first.sum() * 2 + (second * second).sum()).backward()
    assert x.grad.tolist() == [2.0, 2.0, 4.0, 6.0, 8.0, 10.0]


@pytest.mark.parametrize("device", DEVICES)
def test_repeat_against_numpy_tile(device):
    data = numpy.arange(6).reshape(2, 3)
    x = tp.tensor(data.tolist(), device=device)
    for repeats in ((1, 1), (2, 3), (3, 1, 2), (2, 0), (1, 2, 1, 1)):
        result = x.repeat(*repeats)
        expected = numpy.tile(data, repeats)
        assert tuple(result.shape) == expected.shape and result.tolist() == expected.tolist()
    assert x.repeat([2, 2]).tolist() == numpy.tile(data, (2, 2)).tolist()
    assert tp.tensor(5, device=device).repeat(3).tolist() == [5, 5, 5]
    with pytest.raises(ValueError, match="can not be smaller"):
        x.repeat(2)
    y = tp.ones(2, device=device, requires_grad=True)
    (y.repeat(3) * tp.arange(6, dtype=tp.float32, device=device)).sum().backward()
    assert y.grad.tolist() == [0.0 + 2 + 4, 1.0 + 3 + 5]


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_methods(device):
    data = numpy.random.default_rng(2).normal(0, 3, (3, 5))
    x = tp.tensor(data.tolist(), device=device)
    exponentials = numpy.exp(data - data.max(1, keepdims=True))
    expected = exponentials / exponentials.sum(1, keepdims=True)
    numpy.testing.assert_allclose(values(x.softmax(1)), expected, rtol=1e-5)
    numpy.testing.assert_allclose(values(x.log_softmax(-1)), numpy.log(expected), rtol=1e-5)
    numpy.testing.assert_allclose(values(tp.nn.functional.softmax(x, dim=1)), expected,
                                  rtol=1e-5)
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.softmax(2)


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]], device="cuda")
    mask = x > 3
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = (x.var(1), x.std(), x.masked_fill(mask, 0.0), x.split(1, 1)[2] * 1,
                   x.repeat(2, 1), x.softmax(1))
    data = numpy.array([[2.0, 2.0, 8.0], [1.0, 0.0, 4.0]])
    x.copy_(tp.tensor(data.tolist(), device="cuda"))
    graph.replay()
    exponentials = numpy.exp(data - data.max(1, keepdims=True))
    expected = (data.var(1, ddof=1), data.std(ddof=1),
                numpy.where(numpy.array([[False, False, True], [False, True, True]]), 0, data),
                data[:, 2:3], numpy.tile(data, (2, 1)),
                exponentials / exponentials.sum(1, keepdims=True))
    for result, want in zip(outputs, expected):
        numpy.testing.assert_allclose(values(result), want, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_against_pytorch(device):
    torch = import_or_skip("torch")
    data = numpy.random.default_rng(3).normal(0, 1, (3, 4)).tolist()
    ours, theirs = tp.tensor(data, device=device), torch.tensor(data)
    mask = [[True, False, True, False]] * 3
    for operation in (lambda a: a.var(), lambda a: a.std(0), lambda a: a.var(1, True, True),
                      lambda a: a.std(1, correction=0), lambda a: a.repeat(2, 1, 3),
                      lambda a: a.softmax(0), lambda a: a.log_softmax(1),
                      lambda a: a.masked_fill(a > 0, -1.5),
                      lambda a: a.split([1, 3], 1)[1], lambda a: a.chunk(2, 1)[0],
                      lambda a: a.unbind(1)[3]):
        numpy.testing.assert_allclose(values(operation(ours)),
                                      operation(theirs).double().numpy(), rtol=1e-5)
    assert values(ours.masked_fill(tp.tensor(mask, device=device), 0)).tolist() == \
        theirs.masked_fill(torch.tensor(mask), 0).double().tolist()


@pytest.mark.gpu
def test_eye_and_logsumexp_capture_and_replay(quiet_device):
    # eye() makes its diagonal on the device (no copy from the host), so a capture takes it.
    x = tp.tensor([[1.0, 2.0], [3.0, -1.0]], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        identity = tp.eye(2, 3, device="cuda")
        sums = x.logsumexp(1) + identity.sum()
    data = numpy.array([[0.5, 0.5], [10.0, -10.0]])
    x.copy_(tp.tensor(data.tolist(), device="cuda"))
    graph.replay()
    assert identity.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    expected = numpy.log(numpy.exp(data).sum(1)) + 2
    numpy.testing.assert_allclose(values(sums), expected, rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_var_mean_and_std_mean_match_pytorch(device):
    # After PyTorch's test/test_reductions.py TestReductions.test_var_mean_some_dims and
    # test_std_mean_all_dims: the pair equals (var, mean) / (std, mean) for each dim, keepdim,
    # unbiased and correction, with the gradients of both.
    torch = import_or_skip("torch")
    data = [[1.0, 5.0, 2.0], [0.5, 0.5, 4.0]]
    for options in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": 1, "correction": 0},
                    {"dim": (0, 1), "unbiased": False}):
        for name in ("var_mean", "std_mean"):
            ours_input = tp.tensor(data, dtype=tp.float64, device=device, requires_grad=True)
            theirs_input = torch.tensor(data, dtype=torch.float64, requires_grad=True)
            ours = getattr(tp, name)(ours_input, **options)
            theirs = getattr(torch, name)(theirs_input, **options)
            for mine, reference in zip(ours, theirs):
                numpy.testing.assert_allclose(numpy.array(mine.tolist()),
                                              reference.detach().numpy(), rtol=1e-12)
            (ours[0].sum() + ours[1].sum() * 2).backward()
            (theirs[0].sum() + theirs[1].sum() * 2).backward()
            numpy.testing.assert_allclose(numpy.array(ours_input.grad.tolist()),
                                          theirs_input.grad.numpy(), rtol=1e-12, atol=1e-15)
    with pytest.raises(TypeError, match="input"):
        tp.var_mean([1.0, 2.0])


def test_an_int_no_c_integer_holds_is_a_value_error_naming_its_argument():
    # Found by the API fuzz with more draws: with another problem beside it (a count, a sum,
    # an alignment), the int beyond 64 bits is reported first, by name.
    x = tp.ones(2, 3)
    huge = 2 ** 70
    with pytest.raises(ValueError, match="split_size_or_sections"):
        x.split([huge])
    with pytest.raises(ValueError, match="sizes"):
        x.repeat(-huge, 1)
    with pytest.raises(ValueError, match="dims"):
        x.roll(1, [huge, huge])
    with pytest.raises(ValueError, match="stride"):
        tp.nn.functional.conv2d(tp.ones(1, 1, 3, 3), tp.ones(1, 1, 1, 1), stride=(huge,))
