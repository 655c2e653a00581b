"""cummax(), cummin() and logcumsumexp() (the tensorplay functions and the Tensor methods) on the
CPU and on CUDA (marked gpu).

Ported from PyTorch's test/test_reductions.py (test_cummax_cummin: shapes (5, 4, 3), (0,), (3,)
and a 0-d tensor along each dim, against its reference loop; the NaN case [[nan, 1, 1],
[3, nan, 2], [1, 5, nan]] (NaN stays the extreme from the first NaN on); infinities; ties taking
the latest position; bool input; test_cummax_cummin_discontiguous) and from its
sample_inputs_cumulative_ops (common_methods_invocations.py) gradients: the gradient added at
the positions chosen, compared with torch where it is installed.
"""
import math

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NAN = math.nan


def as_numpy(tensor):
    return numpy.asarray(tensor.detach().cpu().to(
        tp.float32 if tensor.dtype == tp.bfloat16 else tensor.dtype).numpy())


def reference(values, dim, largest):
    """PyTorch's kernel's loop: move to x when x is NaN, or when neither is and x >= (<=) the
    running value."""
    moved = numpy.moveaxis(values, dim, -1)
    out = numpy.empty(moved.shape, dtype=values.dtype)
    where = numpy.empty(moved.shape, dtype=numpy.int64)
    for at in numpy.ndindex(moved.shape[:-1]):
        best, index = None, 0
        for position, x in enumerate(moved[at]):
            nan_x = isinstance(x, (float, numpy.floating)) and math.isnan(x)
            nan_best = best is not None and isinstance(best, (float, numpy.floating)) and \
                math.isnan(best)
            if best is None or nan_x or (not nan_best and (x >= best if largest else x <= best)):
                best, index = x, position
            out[at + (position,)] = best
            where[at + (position,)] = index
    return numpy.moveaxis(out, -1, dim), numpy.moveaxis(where, -1, dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                   "uint8", "bool"])
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_pytorch_cummax_cummin_against_the_loop(device, dtype, largest):
    rng = numpy.random.default_rng(60)
    for shape in [(5, 4, 3), (0,), (3,), (37,), (2, 70)]:
        if dtype == "bool":
            values = rng.random(shape) < 0.5
        elif dtype.startswith(("int", "uint")):
            values = rng.integers(0, 4, shape)  # ties
        else:
            values = numpy.round(rng.standard_normal(shape), 0)
            values[rng.random(shape) < 0.1] = NAN
        x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        plain = as_numpy(x)
        for dim in range(len(shape)):
            found = (tp.cummax if largest else tp.cummin)(x, dim)
            expected_values, expected_indices = reference(plain, dim, largest)
            assert found.values.dtype == x.dtype and found.indices.dtype == tp.int64
            numpy.testing.assert_array_equal(as_numpy(found.values), expected_values)
            numpy.testing.assert_array_equal(as_numpy(found.indices), expected_indices)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_nan_and_infinities_and_0d(device):
    x = tp.tensor([[NAN, 1, 1], [3, NAN, 2], [1, 5, NAN]], device=device)
    values, indices = x.cummax(0)
    numpy.testing.assert_array_equal(as_numpy(values), [[NAN, 1, 1], [NAN, NAN, 2],
                                                        [NAN, NAN, NAN]])
    numpy.testing.assert_array_equal(as_numpy(indices), [[0, 0, 0], [0, 1, 1], [0, 1, 2]])
    y = tp.tensor([-math.inf, 1.0, math.inf, 2.0, math.inf], device=device)
    assert y.cummax(0).indices.tolist() == [0, 1, 2, 2, 4]
    assert y.cummin(0).indices.tolist() == [0, 0, 0, 0, 0]
    scalar = tp.tensor(2.5, device=device)
    assert scalar.cummax(0).values.item() == 2.5 and scalar.cummin(-1).indices.item() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_discontiguous_and_the_same_as_pytorch(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(61)
    values = numpy.round(rng.standard_normal((6, 9)), 0)
    values[1, 4] = NAN
    for view in (lambda t: t, lambda t: t.T, lambda t: t[:, ::2]):
        for dim in (0, 1):
            for name in ("cummax", "cummin"):
                ours = getattr(view(tp.tensor(values, device=device)), name)(dim)
                theirs = getattr(view(torch.tensor(values)), name)(dim)
                numpy.testing.assert_array_equal(as_numpy(ours.values), theirs.values.numpy())
                numpy.testing.assert_array_equal(as_numpy(ours.indices), theirs.indices.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_are_pytorchs(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(62)
    values = numpy.round(rng.standard_normal((4, 7)), 0)
    for name, dim in (("cummax", 1), ("cummin", 0), ("cummax", 0)):
        ours = tp.tensor(values, device=device, requires_grad=True)
        theirs = torch.tensor(values, requires_grad=True)
        grad = rng.standard_normal(values.shape)
        getattr(ours, name)(dim).values.backward(tp.tensor(grad, device=device))
        getattr(theirs, name)(dim).values.backward(torch.tensor(grad))
        numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-12)


def test_results_are_the_return_types_and_a_bad_dim_is_pytorchs_error():
    from tensorplay import return_types
    from tests.tensor.pytorch_errors import raises_as_pytorch
    x = tp.tensor([3.0, 1.0])
    assert type(x.cummax(0)) is return_types.cummax and type(x.cummin(0)) is return_types.cummin
    raises_as_pytorch(lambda lib: lib.ones(3).cummax(1), IndexError, "Dimension out of range")


@pytest.mark.gpu
def test_a_capture_takes_cummax(quiet_device):
    x = tp.tensor([[1.0, 0.0, 2.0, 2.0]], device="cuda", requires_grad=True)
    x.cummax(1).values.sum().backward()  # the warm-up
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        found = x.cummax(1)
        found.values.sum().backward()
    with tp.no_grad():
        x.copy_(tp.tensor([[3.0, NAN, 1.0, 4.0]], device="cuda"))
    graph.replay()
    numpy.testing.assert_array_equal(as_numpy(found.values), [[3.0, NAN, NAN, NAN]])
    assert found.indices.tolist() == [[0, 1, 1, 1]]
    assert x.grad.tolist() == [[1.0, 3.0, 0.0, 0.0]]


# logcumsumexp, ported from PyTorch's test/test_reductions.py (test_logcumsumexp: a random
# tensor along each dim against the log of cumsum of exp; large values (1e3) and -inf where
# the naive formula overflows or gives NaN; test_logcumsumexp_complex is not ours: no complex
# dtypes) and sample_inputs_logcumsumexp's gradients, compared with torch where installed;
# numpy's logaddexp.accumulate as the float64 reference.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_pytorch_logcumsumexp_against_numpy(device, dtype):
    rng = numpy.random.default_rng(70)
    for shape in [(5, 4, 3), (1,), (37,), (2, 70), ()]:
        values = numpy.asarray(rng.standard_normal(shape) * 3)
        x = tp.tensor(values, dtype=getattr(tp, dtype), device=device)
        plain = as_numpy(x).astype(numpy.float64)
        for dim in range(max(len(shape), 1)):
            found = tp.logcumsumexp(x, dim if shape else 0)
            assert found.dtype == x.dtype and found.shape == x.shape
            expected = numpy.logaddexp.accumulate(plain, axis=dim) if shape else plain
            tolerance = {"float32": 1e-5, "float64": 1e-12}.get(dtype, 1e-2)
            numpy.testing.assert_allclose(as_numpy(found), expected, rtol=tolerance,
                                          atol=tolerance)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_logcumsumexp_large_and_infinite_values(device):
    x = tp.tensor([[1000.0, 1000.0, -math.inf, 1.0], [-math.inf, -math.inf, 2.0, math.inf],
                   [math.inf, math.inf, NAN, 0.0]], dtype=tp.float64, device=device)
    found = as_numpy(x.logcumsumexp(1))
    numpy.testing.assert_allclose(found[0], [1000.0, 1000.0 + math.log(2), 1000.0 + math.log(2),
                                             1000.0 + math.log(2)], rtol=1e-15)
    numpy.testing.assert_array_equal(found[1], [-math.inf, -math.inf, 2.0, math.inf])
    numpy.testing.assert_array_equal(found[2], [math.inf, math.inf, NAN, NAN])


@pytest.mark.parametrize("device", DEVICES)
def test_logcumsumexp_the_same_as_pytorch_with_gradients(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(71)
    values = rng.standard_normal((4, 9))
    values[0, 3] = values[0, 2]  # a tie
    values[1, 0] = -math.inf
    for dim in (0, 1):
        ours = tp.tensor(values, device=device, requires_grad=True)
        theirs = torch.tensor(values, requires_grad=True)
        found, expected = ours.logcumsumexp(dim), theirs.logcumsumexp(dim)
        numpy.testing.assert_allclose(as_numpy(found), expected.detach().numpy(), rtol=1e-12)
        grad = rng.standard_normal(values.shape)
        found.backward(tp.tensor(grad, device=device))
        expected.backward(torch.tensor(grad))
        # PyTorch's formula, exp(x - result), is NaN at a -inf that a -inf result follows
        # (-inf - -inf); ours is the limit: the first output is that input itself, gradient 1.
        theirs_grad = theirs.grad.numpy()
        undefined = numpy.isnan(theirs_grad)
        assert numpy.isfinite(as_numpy(ours.grad)).all()
        numpy.testing.assert_allclose(as_numpy(ours.grad)[~undefined], theirs_grad[~undefined],
                                      rtol=1e-10, atol=1e-12)
        if dim == 1:
            assert as_numpy(ours.grad)[1, 0] == grad[1, 0]


def test_logcumsumexp_refuses_integers():
    with pytest.raises(TypeError, match="logcumsumexp: needs a floating-point tensor, got int64"):
        tp.tensor([1, 2]).logcumsumexp(0)


@pytest.mark.gpu
def test_a_capture_takes_logcumsumexp(quiet_device):
    x = tp.tensor([[0.0, 1.0, 2.0]], device="cuda", requires_grad=True)
    x.logcumsumexp(1).sum().backward()  # the warm-up
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        found = x.logcumsumexp(1)
        found.sum().backward()
    new = numpy.array([[3.0, -1.0, 0.5]], dtype=numpy.float32)
    with tp.no_grad():
        x.copy_(tp.tensor(new, device="cuda"))
    graph.replay()
    numpy.testing.assert_allclose(as_numpy(found), numpy.logaddexp.accumulate(new, axis=1),
                                  rtol=1e-6)
