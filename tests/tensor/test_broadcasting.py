"""Broadcasting, views, reductions over dimensions, pow and matmul against numpy, on the CPU and
(marked gpu) on CUDA."""
import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tensorplay as tp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NUMERIC = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
           "float64"]
TOLERANCE = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}
# The numpy type each dtype computes in here (bfloat16 has none: float32 values, rounded).
NUMPY = {"bfloat16": "float32"}


def values_of(tensor):
    return numpy.array(tensor.tolist(), dtype=float if tensor.dtype.is_floating_point else
                       None).reshape(tensor.shape)


def rounded(name, values):
    """values as the dtype holds them (bfloat16: float32 with the low 16 bits rounded away)."""
    return values_of(tp.tensor(values, dtype=getattr(tp, name)))


def operands(name, shapes, seed):
    rng = numpy.random.default_rng(seed)
    if name.startswith(("float", "bfloat")):
        return [rounded(name, rng.uniform(0.5, 4.0, shape).round(2)) for shape in shapes]
    return [rng.integers(1, 5, shape) for shape in shapes]


def assert_close(tensor, expected, name):
    """tensor holds expected (computed in float64 or int64), within the dtype's precision;
    integers wrap as the dtype does."""
    got = values_of(tensor)
    assert got.shape == numpy.shape(expected)
    if name in NUMERIC and name not in TOLERANCE:
        expected = numpy.asarray(expected).astype(name)
    if name in TOLERANCE:
        numpy.testing.assert_allclose(got, expected, rtol=TOLERANCE[name] * 10,
                                      atol=TOLERANCE[name] * 10)
    else:
        numpy.testing.assert_array_equal(got, expected)


# Pairs of shapes that broadcast: a shape, then a second shape made of its trailing sizes with
# some replaced by 1 and, sometimes, leading dimensions added; either may come first.
@st.composite
def broadcastable_shapes(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4))
    return shapes.input_shapes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
@settings(max_examples=15, deadline=None)
@given(shapes=broadcastable_shapes(), seed=st.integers(0, 2 ** 16))
def test_arithmetic_and_comparisons_broadcast_as_numpy(device, name, shapes, seed):
    a_values, b_values = operands(name, shapes, seed)
    dtype = getattr(tp, name)
    a = tp.tensor(a_values, dtype=dtype, device=device)
    b = tp.tensor(b_values, dtype=dtype, device=device)
    compute = NUMPY.get(name, "float64" if name.startswith("float") else "int64")
    x, y = a_values.astype(compute), b_values.astype(compute)
    assert_close(a + b, x + y, name)
    assert_close(a - b, x - y, name)
    assert_close(a * b, x * y, name)
    if name.startswith(("float", "bfloat")):
        assert_close(a / b, x / y, name)
        assert_close(a ** b, x ** y, name)
    else:
        assert_close(a.div(b, rounding_mode="floor"), x // y, name)
    for operator in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        assert_close(getattr(a, operator)(b), getattr(x, operator)(y), "bool")
    assert_close(tp.where(a > b, a, b), numpy.where(x > y, x, y), name)
    assert_close(a.clamp(min=b), numpy.maximum(x, y), name)
    assert_close(a.clamp(max=b), numpy.minimum(x, y), name)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(shapes=broadcastable_shapes(), seed=st.integers(0, 2 ** 16))
def test_non_contiguous_operands_and_in_place_broadcasting(device, shapes, seed):
    a_values, b_values = operands("float64", shapes, seed)
    a = tp.tensor(a_values, dtype=tp.float64, device=device)
    b = tp.tensor(b_values, dtype=tp.float64, device=device)
    # Transposed views read through their strides, never copied first.
    if a.ndim >= 2:
        assert_close(a.transpose(0, -1) * 2.0 + a.transpose(0, -1), 3 * a_values.swapaxes(0, -1),
                     "float64")
    out_shape = numpy.broadcast_shapes(a_values.shape, b_values.shape)
    target = tp.zeros(out_shape, dtype=tp.float64, device=device)
    target += a
    target *= b
    assert_close(target, numpy.broadcast_to(a_values, out_shape) * b_values, "float64")
    assert_close(target.add(a, alpha=2), values_of(target) + 2 * a_values, "float64")


@pytest.mark.gpu
def test_broadcast_and_transposed_operands_are_read_in_place_not_copied(quiet_device):
    from tensorplay.accelerator import memory
    a = tp.ones(1024, 1024, device="cuda")
    row, column = tp.ones(1024, device="cuda"), tp.ones(1024, 1, device="cuda")
    mask = row > 0
    for operation in (lambda: a + row, lambda: column * row, lambda: a.t() - column,
                      lambda: a < row, lambda: tp.where(mask, a, column),
                      lambda: a.clamp(column, row), lambda: a.t() @ a.t(),
                      lambda: a.t().sum(1)):
        operation()  # compiled before measuring
        memory.reset_peak_memory_stats()
        before = memory.memory_allocated()
        result = operation()
        # The result is all a call allocates (reductions add one small block of partials).
        assert memory.max_memory_allocated() - before <= result.nbytes + 64 * 1024
        del result


@settings(max_examples=50, deadline=None)
@given(shapes=st.lists(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3),
                       min_size=2, max_size=2))
def test_shapes_broadcast_exactly_when_numpy_says_so(shapes):
    a, b = (tp.zeros(shape) for shape in shapes)
    try:
        expected = numpy.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(ValueError, match="must match the size of tensor b"):
            a + b
        with pytest.raises(ValueError, match="must match the size of tensor b"):
            a == b
    else:
        assert (a + b).shape == expected and (a == b).shape == expected


@pytest.mark.parametrize("device", DEVICES)
def test_broadcasting_errors_name_the_sizes(device):
    a = tp.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match=r"add: The size of tensor a \(3\) must match the size "
                                         r"of tensor b \(4\) at non-singleton dimension 1"):
        a + tp.zeros(4, device=device)
    with pytest.raises(ValueError, match=r"lt: The size of tensor a \(3\) must match the size of "
                                         r"tensor b \(5\) at non-singleton dimension 1"):
        a < tp.zeros(5, device=device)
    with pytest.raises(ValueError, match=r"add_: output with shape \[3\] doesn't match the "
                                         r"broadcast shape \[2, 3\]"):
        tp.zeros(3, device=device).add_(a)
    with pytest.raises(ValueError, match=r"clamp_: output with shape \[3\] doesn't match the "
                                         r"broadcast shape \[2, 3\]"):
        tp.zeros(3, device=device).clamp_(a, None)
    with pytest.raises(ValueError, match=r"where: The size of tensor a \(2\) must match"):
        tp.where(tp.zeros(2, dtype=tp.bool, device=device), a, 0.0)


@pytest.mark.parametrize("device", DEVICES)
def test_views_share_memory_and_read_as_numpy(device):
    values = numpy.arange(24, dtype=numpy.float32).reshape(2, 3, 4)
    x = tp.tensor(values, device=device)
    assert x.transpose(0, 2).shape == (4, 3, 2) and x.transpose(0, 2).stride() == (1, 4, 12)
    assert values_of(x.transpose(-1, 1)).tolist() == values.swapaxes(-1, 1).tolist()
    assert values_of(x[0].t()).tolist() == values[0].T.tolist()
    assert x[0, 0].t().shape == (4,) and tp.tensor(5.0).t().shape == ()
    assert x.unsqueeze(0).shape == (1, 2, 3, 4) and x.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert x.unsqueeze(2).shape == (2, 3, 1, 4) and x.unsqueeze(-4).shape == (1, 2, 3, 4)
    column = x[:, :, :1]
    grown = column.expand(5, 2, 3, 4)
    assert grown.shape == (5, 2, 3, 4) and grown.stride()[0] == 0 and grown.stride()[3] == 0
    assert values_of(grown).tolist() == numpy.broadcast_to(values[:, :, :1],
                                                           (5, 2, 3, 4)).tolist()
    assert column.expand(-1, -1, 4).data_ptr() == column.data_ptr()
    view = x.transpose(0, 1)
    view[0] = 0.0  # a view writes through to the memory it shares
    assert values_of(x)[:, 0].tolist() == [[0.0] * 4, [0.0] * 4]


@pytest.mark.parametrize("device", DEVICES)
def test_view_errors(device):
    x = tp.zeros(2, 3, 1, device=device)
    cases = [
        (ValueError, r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D", lambda: x.t()),
        (IndexError, r"dim1: Dimension out of range \(expected to be in range of \[-3, 2\], "
                     r"but got 3\)", lambda: x.transpose(0, 3)),
        (TypeError, r"dim0 must be an int, got str", lambda: x.transpose("0", 1)),
        (IndexError, r"dim: Dimension out of range \(expected to be in range of \[-4, 3\], "
                     r"but got 4\)", lambda: x.unsqueeze(4)),
        (ValueError, r"expand: The expanded size of the tensor \(4\) must match the existing "
                     r"size \(3\) at non-singleton dimension 1", lambda: x.expand(2, 4, 1)),
        (ValueError, r"expand: the number of sizes provided \(2\) must be greater or equal",
         lambda: x.expand(3, 1)),
        (ValueError, r"expand: The expanded size of the tensor \(-1\) isn't allowed in a "
                     r"leading, non-existing dimension 0", lambda: x.expand(-1, 2, 3, 1)),
        (TypeError, r"expand: sizes must be ints", lambda: x.expand(2, 3.0, 1)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["int32", "float16", "float32", "float64"])
@settings(max_examples=20, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4),
       data=st.data(), keepdim=st.booleans())
def test_sum_and_mean_over_dimensions(device, name, shape, data, keepdim):
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    negative = data.draw(st.booleans())
    dim = tuple(d - len(shape) if negative else d for d in dims)
    values = operands(name, [shape], 0)[0]
    x = tp.tensor(values, dtype=getattr(tp, name), device=device)
    summed = x.sum(dim if len(dim) > 1 else dim[0], keepdim=keepdim)
    expected = values.astype("float64").sum(axis=tuple(dims), keepdims=keepdim)
    assert summed.dtype is (tp.int64 if name == "int32" else getattr(tp, name))
    assert_close(summed, expected, name if name != "float16" else "bfloat16")
    if name != "int32" and 0 not in shape:
        assert_close(x.mean(dim, keepdim), values.astype("float64").mean(
            axis=tuple(dims), keepdims=keepdim), name if name != "float16" else "bfloat16")


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_over_all_dimensions_and_their_errors(device):
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)
    assert x.sum().shape == () and x.sum(keepdim=True).shape == (1, 1)
    assert x.sum(()).item() == 10.0 and x.mean(dim=None, keepdim=True).tolist() == [[2.5]]
    assert x.t().sum(0).tolist() == [3.0, 7.0]  # strided input, no copy
    with pytest.raises(ValueError, match=r"sum: dim 1 appears multiple times"):
        x.sum((1, -1))
    with pytest.raises(IndexError, match=r"dim: Dimension out of range \(expected to be in "
                                         r"range of \[-2, 1\], but got 2\)"):
        x.mean(2)
    with pytest.raises(TypeError, match=r"mean\(\) needs a floating-point tensor"):
        tp.zeros(2, dtype=tp.int64, device=device).mean(0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["bool", "uint8", "int32", "float16", "float32"])
def test_any_and_all_over_dimensions(device, name):
    # As PyTorch's: bool results (uint8 for uint8 input), NaN nonzero, any of nothing False and
    # all of nothing True, dim an int or a tuple, keepdim.
    x = tp.tensor([[0, 1, 3], [0, 0, 0]], device=device).to(getattr(tp, name))
    truth = tp.uint8 if name == "uint8" else tp.bool
    assert x.any().dtype is truth and x.any().tolist() == 1 and x.all().tolist() == 0
    assert x.any(1).tolist() == [1, 0] and x.all(0).tolist() == [0, 0, 0]
    assert x.any(dim=(0, 1), keepdim=True).tolist() == [[1]]
    assert x.all(-1, keepdim=True).tolist() == [[0], [0]]
    assert x[:0].any().tolist() == 0 and x[:0].all().tolist() == 1
    if name.startswith("float"):
        nan = tp.tensor([float("nan"), 1.0], device=device).to(getattr(tp, name))
        assert nan.all().item() and not (nan == nan).all().item()
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.any(2)


@pytest.mark.parametrize("device", DEVICES)
def test_pow_with_scalars_tensors_and_broadcasting(device):
    x = tp.tensor([[1.0, 2.0, 3.0]], device=device)
    assert (x ** 2).tolist() == [[1.0, 4.0, 9.0]] and x.pow(0.5).tolist()[0][0] == 1.0
    assert (2 ** x).tolist() == [[2.0, 4.0, 8.0]]
    assert (x ** tp.tensor([[1.0], [2.0]], device=device)).tolist() == [[1.0, 2.0, 3.0],
                                                                        [1.0, 4.0, 9.0]]
    ints = tp.tensor([2, 3], device=device)
    assert (ints ** 3).tolist() == [8, 27] and (ints ** 0.5).dtype is tp.float32
    with pytest.raises(ValueError, match=r"pow: Integers to negative integer powers are not "
                                         r"allowed"):
        ints ** -1
    with pytest.raises(TypeError, match=r"pow: exponent must be a tensor or a Python scalar"):
        x.pow("2")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["int8", "int16", "int32", "int64"])
def test_integer_tensor_exponents_below_zero_compute_as_pytorch(device, name):
    # PyTorch's powi, on both its devices: a negative exponent gives 1 for a base of 1, 1 or -1
    # by parity for -1, 0 otherwise (0 included); only a negative Python int is refused.
    dtype = getattr(tp, name)
    base = tp.tensor([2, 1, -1, -1, 0, 3, -2], dtype=dtype, device=device)
    exponent = tp.tensor([-1, -2, -3, -2, -1, 2, 1], dtype=dtype, device=device)
    assert (base ** exponent).tolist() == [0, 1, -1, 1, 0, 9, -2]
    assert (7 ** exponent).tolist() == [0, 0, 0, 0, 0, 49, 7]
    assert ((-1) ** exponent).tolist() == [-1, 1, -1, 1, -1, 1, -1]
    assert (1 ** exponent).dtype is dtype


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (5, 3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
                 ((1, 2, 3), (5, 3, 4)), ((5, 2, 3), (1, 3, 4)), ((5, 2, 3), (3,)),
                 ((3,), (5, 3, 4)), ((17, 33), (33, 18)), ((2, 0), (0, 3))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["float32", "float64"])
@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES)
def test_matmul_follows_pytorchs_shape_rules(device, name, a_shape, b_shape):
    rng = numpy.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a_values = rng.standard_normal(a_shape).astype(name)
    b_values = rng.standard_normal(b_shape).astype(name)
    a = tp.tensor(a_values, device=device)
    b = tp.tensor(b_values, device=device)
    expected = numpy.matmul(a_values, b_values)
    product = a @ b
    assert product.shape == expected.shape and product.dtype is getattr(tp, name)
    tolerance = 1e-4 if name == "float32" else 1e-12
    numpy.testing.assert_allclose(values_of(product), expected, rtol=tolerance, atol=tolerance)
    # Transposed operands are read through their strides.
    if len(b_shape) >= 2:
        b_transposed = tp.tensor(numpy.ascontiguousarray(b_values.swapaxes(-1, -2)),
                                 device=device).transpose(-1, -2)
        numpy.testing.assert_allclose(values_of(a.matmul(b_transposed)), expected,
                                      rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_errors_name_the_sizes(device):
    a = tp.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4,\) cannot be "
                                         r"multiplied \(3 != 4\)"):
        a @ tp.zeros(4, device=device)
    with pytest.raises(ValueError, match=r"matmul: the batch sizes of shapes \(2, 2, 3\) and "
                                         r"\(3, 3, 1\) do not broadcast \(2 != 3\)"):
        tp.zeros(2, 2, 3, device=device) @ tp.zeros(3, 3, 1, device=device)
    with pytest.raises(ValueError, match=r"matmul supports tensors of 1 to 3 dimensions"):
        tp.zeros(1, 1, 2, 3, device=device) @ tp.zeros(3, device=device)
    with pytest.raises(TypeError, match=r"matmul supports floating-point tensors \(float16, "
                                        r"bfloat16, float32, float64\), got int64"):
        tp.zeros(2, dtype=tp.int64, device=device) @ tp.zeros(2, dtype=tp.int64, device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_copy_and_allclose_broadcast(device):
    target = tp.zeros(2, 3, device=device)
    target.copy_(tp.tensor([1.0, 2.0, 3.0], device=device))
    assert target.tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    target.copy_(tp.tensor([[5], [6]], device="cpu"))  # any dtype and device
    assert target.tolist() == [[5.0, 5.0, 5.0], [6.0, 6.0, 6.0]]
    assert tp.allclose(target, tp.tensor([[5.0], [6.0]]))
    with pytest.raises(ValueError, match=r"allclose: The size of tensor a \(3\) must match"):
        tp.allclose(target, tp.zeros(2))
