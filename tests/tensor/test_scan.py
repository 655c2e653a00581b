"""cumsum() and cumprod() (tensorplay.cumsum/cumprod and the Tensor methods, in place or not) on
the CPU and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_torch.py, test_cumsum and test_cumprod: a 100 x 100 tensor along dim 1
  against the in-place form; bool and uint8 input along each dim against the sums PyTorch
  writes out ([[1, 0, 1], [1, 0, 1], [2, 1, 2]]...); shapes with a zero-length dimension
  ([2, 0], [0, 2, 3]) and of one element, every dim, whose backward must run and keep the
  shape; and a 0-d tensor, its own sum;
- PyTorch's sample_inputs_cumprod (common_methods_invocations.py): (5, 5, 5) in [-1, 1] along
  each dim, (), (1,) and (0,), and prod_zeros, three zeros placed in two of the dimensions so
  that slices hold none, one or two of them, with and without the dtype keyword; gradients
  compared with the O(n^2) definition and with torch where it is installed;
- CuPy's tests/cupy_tests/math_tests/test_sumprod.py, TestCumsum and TestCumprod: every dtype,
  1-D and along each axis of 2-D and 3-D arrays, lengths that cross the kernel's blocks (here
  its 32-lane chunks), an empty axis, an axis out of range; and its TestSumprod's prod cases
  (all, each axis, keepdims, dtype);
- prod() (cumprod's last element): PyTorch's sample_inputs_prod (prod_zeros and single zeros,
  every dim, keepdim, the dtype keyword), gradients against the definition and torch.
Errors are PyTorch's, compared with torch where it is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tests.peers import import_or_skip
from tests.tensor.pytorch_errors import raises_as_pytorch

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FLOATS = ["float32", "float64", "float16", "bfloat16"]


def as_numpy(tensor):
    return numpy.asarray(tensor.detach().cpu().to(
        tp.float32 if tensor.dtype == tp.bfloat16 else tensor.dtype).numpy())


def reference(values, dim, product):
    """numpy's cumulative sum (product) in float64 or int64."""
    wide = values.astype(numpy.float64 if values.dtype.kind == "f" else numpy.int64)
    return numpy.cumprod(wide, dim) if product else numpy.cumsum(wide, dim)


def product_gradient(x, grad, dim):
    """The definition: d/dx_k of sum_j grad_j * prod_{i <= j} x_i, O(n^2), zeros and all."""
    x, grad = numpy.moveaxis(x, dim, -1), numpy.moveaxis(grad, dim, -1)
    result = numpy.zeros_like(x, dtype=numpy.float64)
    length = x.shape[-1]
    for k in range(length):
        for j in range(k, length):
            others = numpy.delete(x[..., :j + 1], k, axis=-1)
            result[..., k] += grad[..., j] * numpy.prod(others, axis=-1)
    return numpy.moveaxis(result, -1, dim)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS + ["int64", "int32", "int16", "uint8", "bool"])
@pytest.mark.parametrize("product", [False, True], ids=["cumsum", "cumprod"])
def test_every_dtype_and_dim_matches_numpy(device, dtype, product):
    """CuPy's TestCumsum/TestCumprod over dtypes and axes, with lengths across 32-lane chunks."""
    rng = numpy.random.default_rng(len(dtype) + product)
    # (1025,) and (3, 2500) along dim 1, (2500, 3) along dim 0: few long rows, a block each
    for shape in [(5,), (33,), (1025,), (7, 6), (3, 31, 32), (2, 65, 3), (3, 2500), (2500, 3)]:
        if dtype == "bool":
            values = rng.random(shape) < 0.7
        elif dtype.startswith(("int", "uint")):
            values = rng.integers(0, 3 if product else 9, shape)
        else:  # products near 1 stay finite
            values = rng.uniform(0.9, 1.1, shape) if product else rng.standard_normal(shape)
        x = tp.tensor(values, device=device).to(getattr(tp, dtype))
        for dim in range(-len(shape), len(shape)):
            result = x.cumprod(dim) if product else x.cumsum(dim)
            assert result.dtype == (x.dtype if x.is_floating_point() else tp.int64)
            assert result.shape == x.shape
            expected = reference(as_numpy(x), dim, product)
            if dtype in ("float16", "bfloat16"):
                tolerance = dict(rtol=2**-8, atol=1e-2)  # each output rounded once
            elif dtype == "float32":  # float32 running sums, in another order
                tolerance = dict(rtol=1e-4, atol=1e-6 * shape[dim])
            else:  # the device adds in another order: a few units of the terms' rounding
                tolerance = dict(rtol=1e-12, atol=1e-13 * shape[dim] if values.dtype.kind == "f"
                                 else 0)
            numpy.testing.assert_allclose(as_numpy(result), expected, **tolerance)


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_cumsum(device):
    """PyTorch's test_cumsum."""
    x = tp.rand(100, 100, device=device)
    result = tp.cumsum(x, 1)
    assert x.cumsum_(1) is x
    assert tp.equal(result, x)
    a = tp.tensor([[True, False, True], [False, False, False], [True, True, True]],
                  device=device)
    b = a.to(tp.uint8)
    assert tp.equal(tp.cumsum(a, 0), tp.cumsum(b, 0))
    assert tp.cumsum(a, 0).tolist() == [[1, 0, 1], [1, 0, 1], [2, 1, 2]]
    assert tp.equal(tp.cumsum(a, 1), tp.cumsum(b, 1))
    assert tp.cumsum(a, 1).tolist() == [[1, 1, 2], [0, 0, 0], [1, 2, 3]]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("product", [False, True], ids=["cumsum", "cumprod"])
def test_zero_length_dimensions_one_element_and_0d(device, product):
    """PyTorch's test_cumsum / test_cumprod: backward runs over a zero-length dimension and
    keeps the shape; a 0-d tensor is its own sum (product)."""
    for shape in [[2, 0], [2, 1, 4], [0, 2, 3], [1], [5]]:
        for dim in range(len(shape)):
            raw = tp.zeros(*shape, device=device, requires_grad=True)
            integrated = raw.cumprod(dim=dim) if product else raw.cumsum(dim=dim)
            integrated.sum().backward()
            assert raw.grad.shape == raw.shape
    raw = tp.tensor(3.0, device=device, requires_grad=True)
    integrated = raw.cumprod(dim=-1) if product else raw.cumsum(dim=-1)
    assert integrated.shape == () and integrated.item() == 3.0
    integrated.sum().backward()
    assert raw.grad.shape == () and raw.grad.item() == 1.0


def prod_zeros(rng, dims):
    """sample_inputs_cumprod's prod_zeros: (5, 5, 5) in [-1, 1] with three zeros."""
    values = rng.uniform(-1, 1, (5, 5, 5))
    for first, second in ((0, 1), (2, 3), (4, 3)):
        slicer = [slice(None)] * 3
        slicer[dims[0]] = first
        slicer[dims[1]] = second
        values[tuple(slicer)] = 0
    return values


def cumprod_samples(rng):
    for dim in range(3):
        yield rng.uniform(-1, 1, (5, 5, 5)), dim
    for size in [(), (1,), (0,)]:
        yield rng.uniform(-1, 1, size), 0
    for dims in ([0, 1], [0, 2], [1, 2]):
        yield prod_zeros(rng, dims), 1
    row = numpy.array([2.0, 0.0, 3.0, 0.0, 5.0, 0.5])  # z1 and z2 within one slice
    yield row, 0
    yield numpy.array([0.0, 2.0, 3.0]), 0  # the first element zero
    yield numpy.array([2.0, 3.0, 0.0]), 0  # the last


@pytest.mark.parametrize("device", DEVICES)
def test_cumprod_gradient_is_the_definition_with_zeros(device):
    """sample_inputs_cumprod's inputs, the gradient against the O(n^2) definition."""
    rng = numpy.random.default_rng(5)
    for values, dim in cumprod_samples(rng):
        x = tp.tensor(values, dtype=tp.float64, device=device, requires_grad=True)
        grad = rng.standard_normal(values.shape)
        x.cumprod(dim).backward(tp.tensor(grad, dtype=tp.float64, device=device))
        expected = product_gradient(values.reshape(values.shape or (1,)),
                                    grad.reshape(values.shape or (1,)),
                                    dim).reshape(values.shape)
        numpy.testing.assert_allclose(as_numpy(x.grad), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("product", [False, True], ids=["cumsum", "cumprod"])
def test_values_and_gradients_match_pytorch(device, product):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(7)
    samples = list(cumprod_samples(rng)) + [(rng.standard_normal((4, 40)), 1)]
    for values, dim in samples:
        for dtype in (None, "float64"):  # the dtype keyword, as sample_inputs_cumprod's last
            ours = tp.tensor(values, dtype=tp.float32, device=device, requires_grad=True)
            theirs = torch.tensor(values, dtype=torch.float32, requires_grad=True)
            name = "cumprod" if product else "cumsum"
            kwargs = {} if dtype is None else {"dtype": getattr(tp, dtype)}
            result = getattr(ours, name)(dim, **kwargs)
            # The dtype keyword as its conversion first: torch 2.11's cumprod backward with
            # dtype= and zeros fails ("masked_scatter: expected self and source to have same
            # dtypes").
            expected = getattr(theirs if dtype is None else theirs.to(getattr(torch, dtype)),
                               name)(dim)
            assert str(result.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
            numpy.testing.assert_allclose(as_numpy(result), expected.detach().numpy(),
                                          rtol=1e-5, atol=1e-6)
            grad = rng.standard_normal(values.shape)
            result.backward(tp.tensor(grad, dtype=result.dtype, device=device))
            expected.backward(torch.tensor(grad, dtype=expected.dtype))
            assert ours.grad.dtype == tp.float32
            numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-4,
                                          atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_accumulation_types_and_wrapping(device):
    # 4096 float16 ones: a float16 running sum would stop at 2048, float accumulation does not
    # (PyTorch's acc_type).
    ones = tp.ones(4096, dtype=tp.float16, device=device)
    assert ones.cumsum(0)[-1].item() == 4096.0
    # int32 input sums as int64; int64 and a uint8 result wrap as their additions do.
    assert tp.full((3,), 2**31 - 1, dtype=tp.int32, device=device).cumsum(0).tolist() == \
        [2**31 - 1, 2 * (2**31 - 1), 3 * (2**31 - 1)]
    assert tp.tensor([2**63 - 1, 1], device=device).cumsum(0).tolist() == [2**63 - 1, -2**63]
    assert tp.tensor([200, 100], dtype=tp.uint8, device=device).cumsum(
        0, dtype=tp.uint8).tolist() == [200, 44]
    assert tp.tensor([16, 16], dtype=tp.uint8, device=device).cumprod(
        0, dtype=tp.uint8).tolist() == [16, 0]
    # A dtype converts the input first, as PyTorch's: truncated elements, double accumulation.
    assert tp.tensor([0.5, 0.5, 1.7], device=device).cumsum(0, dtype=tp.int64).tolist() == \
        [0, 0, 1]
    assert tp.tensor([1e8, 1.0, -1e8], device=device).cumsum(
        0, dtype=tp.float64).tolist() == [1e8, 1e8 + 1, 1.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("product", [False, True], ids=["cumsum", "cumprod"])
def test_strided_input_and_in_place_forms(device, product):
    rng = numpy.random.default_rng(3)
    values = rng.uniform(0.5, 1.5, (6, 40))
    base = tp.tensor(values.T.copy(), device=device)
    x = base.t()  # strides (1, 6)
    name = "cumprod" if product else "cumsum"
    for dim in (0, 1):
        numpy.testing.assert_allclose(as_numpy(getattr(x, name)(dim)),
                                      reference(values, dim, product), rtol=1e-5)
    expected = reference(values, 1, product)
    assert getattr(x, name + "_")(1) is x  # in place through the strides
    numpy.testing.assert_allclose(as_numpy(x), expected, rtol=1e-5)
    numpy.testing.assert_allclose(as_numpy(base), expected.T, rtol=1e-5)
    integers = tp.tensor([[1, 2, 3], [4, 5, 6]], dtype=tp.int32, device=device)
    assert getattr(integers, name + "_")(1) is integers and integers.dtype == tp.int32
    assert integers.tolist() == ([[1, 2, 6], [4, 20, 120]] if product else
                                 [[1, 3, 6], [4, 9, 15]])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("product", [False, True], ids=["cumsum", "cumprod"])
def test_in_place_on_a_tracked_tensor(device, product):
    rng = numpy.random.default_rng(9)
    values = rng.uniform(0.5, 1.5, (3, 5))
    values[0, 1] = 0.0
    leaf = tp.tensor(values, dtype=tp.float32, device=device, requires_grad=True)
    x = leaf * 1.0
    name = "cumprod" if product else "cumsum"
    getattr(x, name + "_")(1)
    grad = rng.standard_normal(values.shape)
    x.backward(tp.tensor(grad, device=device, dtype=tp.float32))
    expected = product_gradient(values, grad, 1) if product else \
        numpy.flip(numpy.cumsum(numpy.flip(grad, 1), 1), 1)
    numpy.testing.assert_allclose(as_numpy(leaf.grad), expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, error, message, theirs", [
    (lambda lib: lib.ones(2, 3).cumsum(2), IndexError,
     "Dimension out of range (expected to be in range of [-2, 1], but got 2)", None),
    (lambda lib: lib.tensor(5.0).cumprod(1), IndexError,
     "Dimension out of range (expected to be in range of [-1, 0], but got 1)", None),
    (lambda lib: lib.ones(3).cumsum(0, dtype=lib.bool), NotImplementedError, "'Bool'", None),
    (lambda lib: lib.tensor([True, False]).cumprod_(0), NotImplementedError, "'Bool'", None),
    (lambda lib: lib.ones(3).cumsum_(0, dtype=lib.float64), RuntimeError,
     "Bad in-place call: input tensor dtype float", "should match"),
    (lambda lib: lib.ones(2, requires_grad=True).cumsum_(0), RuntimeError,
     "leaf", "a leaf Variable that requires grad"),
])
def test_errors_are_pytorchs(call, error, message, theirs):
    raises_as_pytorch(call, error, message, theirs)


@pytest.mark.parametrize("call, argument", [
    (lambda: tp.ones(2).cumsum(None), "dim"),
    (lambda: tp.ones(2).cumsum(0, dtype="float32"), "dtype"),
    (lambda: tp.cumsum([1, 2], 0), "input"),
])
def test_wrong_types_are_type_errors_naming_the_argument(call, argument):
    # PyTorch's messages for these differ between its versions (2.11 reads a dim of None as a
    # dimension name, a RuntimeError); ours name the argument.
    with pytest.raises(TypeError, match=argument):
        call()


def test_a_refused_in_place_call_changes_nothing():
    x = tp.tensor([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        x.cumsum_(0, dtype=tp.float64)
    with pytest.raises(IndexError):
        x.cumprod_(1)
    assert x.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.gpu
def test_captured_scans_and_gradients_replay_with_new_values(quiet_device):
    rng = numpy.random.default_rng(17)
    x = tp.tensor(rng.uniform(0.5, 1.5, (4, 50)), dtype=tp.float32, device="cuda",
                  requires_grad=True)
    # the warm-up, as PyTorch's recipe
    (x.cumsum(1) + x.cumprod(1)).sum().backward()
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        sums = x.cumsum(1)
        products = x.cumprod(1)
        (sums + products).sum().backward()
        running = tp.zeros(4, 50, device="cuda")
        running += 1.0
        running.cumsum_(1)
    values = rng.uniform(0.5, 1.5, (4, 50))
    values[2, 7] = 0.0  # the zero's path of the gradient, at replay
    with tp.no_grad():
        x.copy_(tp.tensor(values, dtype=tp.float32, device="cuda"))
    graph.replay()
    numpy.testing.assert_allclose(as_numpy(sums), numpy.cumsum(values, 1), rtol=1e-5)
    numpy.testing.assert_allclose(as_numpy(products), numpy.cumprod(values, 1), rtol=1e-4)
    expected = numpy.flip(numpy.cumsum(numpy.flip(numpy.ones_like(values), 1), 1), 1) + \
        product_gradient(values, numpy.ones_like(values), 1)
    numpy.testing.assert_allclose(as_numpy(x.grad), expected, rtol=1e-4, atol=1e-5)
    assert as_numpy(running)[0].tolist() == list(range(1, 51))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "bool"])
def test_prod_matches_numpy(device, dtype):
    rng = numpy.random.default_rng(len(dtype))
    if dtype == "bool":
        values = rng.random((3, 4, 5)) < 0.8
    elif dtype.startswith("int"):
        values = rng.integers(-3, 4, (3, 4, 5))
    else:
        values = rng.uniform(0.5, 1.5, (3, 4, 5))
    x = tp.tensor(values, device=device).to(getattr(tp, dtype))
    stored = as_numpy(x).astype(numpy.float64 if x.is_floating_point() else numpy.int64)
    expected_dtype = x.dtype if x.is_floating_point() else tp.int64
    whole = x.prod()
    assert whole.shape == () and whole.dtype == expected_dtype
    numpy.testing.assert_allclose(as_numpy(whole), numpy.prod(stored), rtol=2e-3)
    for dim in range(-3, 3):
        for keepdim in (False, True):
            result = tp.prod(x, dim, keepdim)
            expected = numpy.prod(stored, axis=dim, keepdims=keepdim)
            assert result.shape == expected.shape and result.dtype == expected_dtype
            numpy.testing.assert_allclose(as_numpy(result), expected, rtol=2e-3)
    assert x.prod(1, dtype=tp.float64).dtype == tp.float64
    assert tp.ones(2, 0, device=device).prod(1).tolist() == [1.0, 1.0]
    assert tp.ones(0, device=device).prod().item() == 1.0
    assert tp.tensor(3.0, device=device).prod(0).item() == 3.0


@pytest.mark.parametrize("device", DEVICES)
def test_prod_gradient_is_the_definition_with_zeros(device):
    """sample_inputs_prod's zeros: none, one, two in a slice."""
    rng = numpy.random.default_rng(13)
    for values, dim in cumprod_samples(rng):
        if values.ndim == 0:
            continue
        x = tp.tensor(values, dtype=tp.float64, device=device, requires_grad=True)
        result = x.prod(dim)
        grad = rng.standard_normal(result.shape)
        result.backward(tp.tensor(grad, dtype=tp.float64, device=device))
        moved = numpy.moveaxis(values, dim, -1)
        expected = numpy.empty_like(moved)
        for k in range(moved.shape[-1]):
            expected[..., k] = numpy.prod(numpy.delete(moved, k, axis=-1), axis=-1) * grad
        numpy.testing.assert_allclose(as_numpy(x.grad), numpy.moveaxis(expected, -1, dim),
                                      rtol=1e-10, atol=1e-12)
    x = tp.tensor([2.0, 0.0, 3.0], device=device, requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]


def test_prod_keepdim_needs_a_dim():
    with pytest.raises(TypeError, match="keepdim"):
        tp.ones(2).prod(keepdim=True)
