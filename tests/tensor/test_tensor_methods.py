"""PyTorch's named tensor methods (add, sub, mul, div with their in-place forms, clamp) and
tensorplay.where against numpy, on the CPU and (marked gpu) on CUDA, for every dtype."""
import numpy
import pytest

import tensorplay as tp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
              "float32", "float64"]
NUMERIC = ALL_DTYPES[1:]
FLOATING = ["float16", "bfloat16", "float32", "float64"]
TOLERANCE = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def make(values, name, device):
    return tp.tensor(numpy.asarray(values).tolist(), dtype=getattr(tp, name), device=device)


def signed_sample(name, seed, low=-9, high=9):
    """Values of both signs (non-negative for uint8), without zeros, exact in every dtype."""
    rng = numpy.random.default_rng(seed)
    if name in FLOATING:
        values = rng.uniform(low / 2, high / 2, (3, 4)).round(2)
    else:
        values = rng.integers(low, high, (3, 4)).astype(float)
    values[values == 0] = 1
    return numpy.abs(values) if name == "uint8" else values


def values_of(tensor):
    return numpy.array(tensor.tolist(), dtype=float)


def as_dtype(values, name):
    """Exact values as name holds them: integers wrap like their C type."""
    if name in FLOATING:
        return numpy.asarray(values, dtype=float)
    return numpy.asarray(values).astype(numpy.int64).astype(name).astype(float)


def assert_matches(tensor, expected, name):
    assert tensor.dtype is getattr(tp, name)
    got = values_of(tensor)
    assert got.shape == numpy.shape(expected)
    if name in FLOATING:
        numpy.testing.assert_allclose(got, expected, rtol=TOLERANCE[name], atol=TOLERANCE[name])
    else:
        numpy.testing.assert_array_equal(got, expected)


def assert_in_place(tensor, method, *args, expected, name, **kwargs):
    before = tensor.data_ptr()
    result = getattr(tensor, method)(*args, **kwargs)
    assert result is tensor and tensor.data_ptr() == before
    assert_matches(tensor, expected, name)


# --------------------------------------------------------------------------------------------
# add, sub, mul


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("method", ["add", "sub"])
def test_add_and_sub_scale_other_by_alpha(device, name, method):
    a_values, b_values = signed_sample(name, 1), signed_sample(name, 2)
    a, b = make(a_values, name, device), make(b_values, name, device)
    a_values, b_values = values_of(a), values_of(b)
    sign = 1 if method == "add" else -1
    alphas = [1, 3, -2] + ([0.5] if name in FLOATING else [])
    for alpha in alphas:
        expected = as_dtype(a_values + sign * alpha * b_values, name)
        assert_matches(getattr(a, method)(b, alpha=alpha), expected, name)
        assert_matches(getattr(a, method)(2, alpha=alpha),
                       as_dtype(a_values + sign * alpha * 2, name), name)
        assert_in_place(a.clone(), method + "_", b, alpha=alpha, expected=expected, name=name)
    assert_matches(getattr(a, method)(b), as_dtype(a_values + sign * b_values, name), name)
    assert_matches(getattr(a, method)(True), as_dtype(a_values + sign, name), name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
def test_mul_and_mul_in_place(device, name):
    a_values, b_values = signed_sample(name, 3), signed_sample(name, 4)
    a, b = make(a_values, name, device), make(b_values, name, device)
    expected = as_dtype(values_of(a) * values_of(b), name)
    assert_matches(a.mul(b), expected, name)
    assert_matches(a.mul(3), as_dtype(values_of(a) * 3, name), name)
    assert_in_place(a.clone(), "mul_", b, expected=expected, name=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["add", "sub", "mul"])
def test_integer_tensor_with_float_scalar_gives_float32(device, method):
    t = tp.tensor([1, 2, 3], device=device)
    reference = {"add": lambda x: x + 0.5, "sub": lambda x: x - 0.5, "mul": lambda x: x * 0.5}
    result = getattr(t, method)(0.5)
    assert result.dtype is tp.float32
    assert result.tolist() == reference[method](numpy.array([1, 2, 3], float)).tolist()
    assert t.add(0.5, alpha=2.0).tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(TypeError, match=f"{method}_: result type Float can't be cast to the "
                                        "desired output type Long"):
        getattr(t, method + "_")(0.5)


# --------------------------------------------------------------------------------------------
# div


def reference_division(a_values, b_values, name, rounding_mode):
    """numpy's division in the type the kernels compute in: float32 for floats up to 32 bits,
    float64 for float64, int64 for integers."""
    if name not in FLOATING:
        a, b = a_values.astype(numpy.int64), b_values.astype(numpy.int64)
        if rounding_mode is None:
            return (a.astype(numpy.float32) / b.astype(numpy.float32)).astype(float)
        floor = numpy.floor_divide(a, b)
        if rounding_mode == "floor":
            return as_dtype(floor, name)
        return as_dtype(floor + ((numpy.remainder(a, b) != 0) & ((a < 0) != (b < 0))), name)
    compute = numpy.float64 if name == "float64" else numpy.float32
    a, b = a_values.astype(compute), b_values.astype(compute)
    if rounding_mode is None:
        return (a / b).astype(float)
    if rounding_mode == "trunc":
        return numpy.trunc(a / b).astype(float)
    return numpy.floor_divide(a, b).astype(float)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("rounding_mode", [None, "trunc", "floor"])
def test_div_rounds_as_rounding_mode_says(device, name, rounding_mode):
    a = make(signed_sample(name, 5) * 3, name, device)
    b = make(signed_sample(name, 6, low=-4, high=4), name, device)
    a_values, b_values = values_of(a), values_of(b)
    result_name = "float32" if rounding_mode is None and name not in FLOATING else name
    expected = reference_division(a_values, b_values, name, rounding_mode)
    assert_matches(a.div(b, rounding_mode=rounding_mode), expected, result_name)
    scalar = -3 if name != "uint8" else 3
    assert_matches(a.div(scalar, rounding_mode=rounding_mode),
                   reference_division(a_values, numpy.full_like(a_values, scalar), name,
                                      rounding_mode), result_name)
    if result_name == name:
        assert_in_place(a.clone(), "div_", b, rounding_mode=rounding_mode, expected=expected,
                        name=name)
    else:
        with pytest.raises(TypeError, match="div_: result type Float can't be cast to the "
                                            "desired output type (Byte|Char|Short|Int|Long)"):
            a.clone().div_(b)


@pytest.mark.parametrize("device", DEVICES)
def test_div_without_rounding_mode_is_the_operator(device):
    a = tp.tensor([7, -7], device=device)
    assert a.div(2).tolist() == (a / 2).tolist() == [3.5, -3.5]
    assert a.div(2, rounding_mode="trunc").tolist() == [3, -3]
    assert a.div(2, rounding_mode="floor").tolist() == [3, -4]
    assert a.div(2.0, rounding_mode="floor").dtype is tp.float32


@pytest.mark.parametrize("device", DEVICES)
def test_floating_division_by_zero_with_rounding_gives_infinities(device):
    a = tp.tensor([1.0, -1.0, 0.0], device=device)
    for mode in ("trunc", "floor"):
        result = a.div(0.0, rounding_mode=mode).tolist()
        assert result[:2] == [float("inf"), float("-inf")] and numpy.isnan(result[2])


def test_integer_division_by_zero_with_rounding_raises_on_the_cpu():
    a = tp.tensor([4, 5])
    for mode in ("trunc", "floor"):
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            a.div(tp.tensor([1, 0]), rounding_mode=mode)
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            a.div_(0, rounding_mode=mode)
    assert a.tolist() == [4, 5]


@pytest.mark.gpu
def test_integer_division_by_zero_with_rounding_gives_zero_on_cuda():
    a = tp.tensor([4, 5], device="cuda")
    for mode in ("trunc", "floor"):
        assert a.div(tp.tensor([1, 0], device="cuda"), rounding_mode=mode).tolist() == [4, 0]


# --------------------------------------------------------------------------------------------
# clamp


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
def test_clamp_with_scalar_and_tensor_bounds(device, name):
    t = make(signed_sample(name, 7), name, device)
    values = values_of(t)
    low, high = (2, 6) if name == "uint8" else (-3, 2)
    assert_matches(t.clamp(low, high), numpy.clip(values, low, high), name)
    assert_matches(t.clamp(min=low), numpy.maximum(values, low), name)
    assert_matches(t.clamp(max=high), numpy.minimum(values, high), name)
    assert_matches(t.clamp(min=high, max=low), numpy.full_like(values, low), name)  # min > max
    low_tensor = make(numpy.full((3, 4), low), name, device)
    high_values = signed_sample(name, 8)
    high_tensor = make(high_values, name, device)
    expected = numpy.minimum(numpy.maximum(values, low), values_of(high_tensor))
    assert_matches(t.clamp(low_tensor, high_tensor), expected, name)
    assert_matches(t.clamp(low, high_tensor), expected, name)
    assert_in_place(t.clone(), "clamp_", low_tensor, high, name=name,
                    expected=numpy.clip(values, low, high))
    assert_in_place(t.clone(), "clamp_", max=high, name=name,
                    expected=numpy.minimum(values, high))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", FLOATING)
def test_clamp_propagates_nan(device, name):
    nan = float("nan")
    t = make([nan, -5.0, 0.25, 5.0], name, device)
    result = values_of(t.clamp(-1.0, 1.0))
    assert numpy.isnan(result[0]) and result[1:].tolist() == [-1.0, 0.25, 1.0]
    assert numpy.isnan(values_of(t.clamp(min=nan))).all()


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_gradient_at_nan_and_with_min_above_max(device):
    # PyTorch's clamp_backward_min_max up to 2.13 (2.14 changed the rule at the bounds alone,
    # docs/design.md): the input's gradient passes where min <= x <= max, so not at a NaN; a
    # tensor min takes it where x < min < max, a tensor max where x > max or max < min (the
    # result is then max everywhere).
    nan = float("nan")

    def gradients(low, high):
        x = tp.tensor([0.0, 1.5, 3.0, nan], device=device, requires_grad=True)
        bounds = [tp.full((4,), b, device=device, requires_grad=True) for b in (low, high)]
        x.clamp(*bounds).sum().backward()
        scalar = tp.tensor([0.0, 1.5, 3.0, nan], device=device, requires_grad=True)
        scalar.clamp(low, high).sum().backward()
        return [t.grad.tolist() for t in [x, *bounds, scalar]]

    x, low, high, scalar = gradients(1.0, 2.0)
    assert x == scalar == [0.0, 1.0, 0.0, 0.0]
    assert low == [1.0, 0.0, 0.0, 0.0] and high == [0.0, 0.0, 1.0, 0.0]
    x, low, high, scalar = gradients(2.0, 1.0)  # min > max: the result is max
    assert x == scalar == [0.0] * 4 and low == [0.0] * 4 and high == [1.0] * 4


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_of_integers_with_a_float_bound_gives_float32(device):
    t = tp.tensor([0, 1, 2, 3], device=device)
    result = t.clamp(0.5, 2.5)
    assert result.dtype is tp.float32 and result.tolist() == [0.5, 1.0, 2.0, 2.5]
    assert t.clamp(min=1, max=2).dtype is tp.int64
    with pytest.raises(TypeError, match="clamp_: result type Float can't be cast to the "
                                        "desired output type Long"):
        t.clamp_(max=0.5)


# --------------------------------------------------------------------------------------------
# where


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_where_selects_elements_of_input_or_other(device, name):
    mask_values = numpy.random.default_rng(9).integers(0, 2, (3, 4)).astype(bool)
    mask = tp.tensor(mask_values.tolist(), device=device)
    if name == "bool":
        rng = numpy.random.default_rng(12)
        a, b = (make(rng.integers(0, 2, (3, 4)).astype(bool), name, device) for _ in range(2))
    else:
        a = make(numpy.abs(signed_sample(name, 10)), name, device)
        b = make(numpy.abs(signed_sample(name, 11)) + 1, name, device)
    a_values, b_values = values_of(a), values_of(b)
    assert_matches(tp.where(mask, a, b), numpy.where(mask_values, a_values, b_values), name)
    assert_matches(tp.where(mask, a, True), numpy.where(mask_values, a_values, 1), name)
    assert_matches(tp.where(mask, False, b), numpy.where(mask_values, 0, b_values), name)


@pytest.mark.parametrize("device", DEVICES)
def test_where_promotes_scalars_of_a_higher_kind_as_pytorch(device):
    mask = tp.tensor([True, False], device=device)
    ints, flags = tp.tensor([1, 2], dtype=tp.int16, device=device), mask
    halves = tp.tensor([1.0, 2.0], dtype=tp.float16, device=device)
    for result, dtype, values in (
            (tp.where(mask, ints, 7), tp.int16, [1, 7]),
            (tp.where(mask, ints, 0.5), tp.float32, [1.0, 0.5]),
            (tp.where(mask, halves, 0.5), tp.float16, [1.0, 0.5]),
            (tp.where(mask, flags, 3), tp.int64, [1, 3]),
            (tp.where(mask, 1, 0), tp.int64, [1, 0]),
            (tp.where(mask, 1.5, 0), tp.float32, [1.5, 0.0]),
            (tp.where(mask, True, False), tp.bool, [True, False])):
        assert result.dtype is dtype and result.tolist() == values
        assert result.device == mask.device


@pytest.mark.parametrize("device", DEVICES)
def test_where_over_strided_views_and_empty_tensors(device):
    base = tp.arange(12, device=device).reshape(3, 4)
    view = base[:, ::2]
    mask = view > 4
    assert tp.where(mask, view, -view).tolist() == [[0, -2], [-4, 6], [8, 10]]
    empty = tp.zeros(0, device=device)
    assert tp.where(empty > 0, empty, 1.0).shape == (0,)


# --------------------------------------------------------------------------------------------
# Comparisons feed predicates; strided and empty operands


@pytest.mark.parametrize("device", DEVICES)
def test_comparisons_copy_into_a_predicate(device):
    t = tp.tensor([2.0], device=device)
    predicate = tp.zeros(1, dtype=tp.bool, device=device)
    assert (t > 0).dtype is tp.bool
    before = predicate.data_ptr()
    predicate.copy_(t > 0)
    assert predicate.tolist() == [True] and predicate.data_ptr() == before
    t.fill_(-1.0)
    predicate.copy_(t > 0)
    assert predicate.tolist() == [False]


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_methods_write_through_strided_views(device):
    base = tp.zeros(3, 4, dtype=tp.float32, device=device)
    view = base[:, 1::2]
    view.add_(tp.ones(3, 2, device=device), alpha=2)
    view.sub_(0.5)
    view.mul_(2)
    view.div_(3, rounding_mode="floor")
    view.clamp_(max=0.5)
    expected = numpy.zeros((3, 4))
    expected[:, 1::2] = 0.5
    assert base.tolist() == expected.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_methods_on_empty_tensors(device):
    empty = tp.zeros(0, 3, device=device)
    for result in (empty.add(empty, alpha=2), empty.sub(1), empty.mul(empty), empty.div(2),
                   empty.div(empty, rounding_mode="floor"), empty.clamp(0, 1)):
        assert result.shape == (0, 3)


# --------------------------------------------------------------------------------------------
# Argument errors: the operators' rules, each naming the argument


def test_argument_errors_name_the_argument():
    f = tp.zeros(2, 3)
    i = tp.zeros(2, 3, dtype=tp.int64)
    cases = [
        (TypeError, "add: alpha must be an int or float, got 'x'", lambda: f.add(f, alpha="x")),
        (TypeError, "sub_: alpha must be an int or float, got True",
         lambda: f.sub_(f, alpha=True)),
        (TypeError, "add: alpha must be an int for a int64 result, got 0.5",
         lambda: i.add(i, alpha=0.5)),
        (ValueError, "div: rounding_mode must be None, 'trunc' or 'floor', got 'round'",
         lambda: f.div(f, rounding_mode="round")),
        (TypeError, "div_: rounding_mode must be None, 'trunc' or 'floor', got int",
         lambda: f.div_(f, rounding_mode=1)),
        (ValueError, "clamp: at least one of min and max must not be None", lambda: f.clamp()),
        (TypeError, "clamp_: max must be a tensor, a Python scalar or None, got str",
         lambda: f.clamp_(max="1")),
        (ValueError, "clamp: The size of tensor a \\(3\\) must match the size of tensor b "
         "\\(4\\) at non-singleton dimension 1", lambda: f.clamp(tp.zeros(4))),
        (TypeError, "clamp: max: dtypes float32 and int64 differ", lambda: f.clamp(max=i)),
        (TypeError, "clamp: clamp with bool scalar bounds, or two bool tensor bounds, is not",
         lambda: tp.zeros(2, dtype=tp.bool).clamp(False, True)),
        (ValueError, "mul: The size of tensor a \\(2\\) must match the size of tensor b "
         "\\(3\\) at non-singleton dimension 0", lambda: f.mul(tp.zeros(3, 2))),
        (TypeError, "sub_: result type Float can't be cast to the desired output type Long",
         lambda: i.sub_(f)),
        (TypeError, "add: the other operand must be a tensor or a Python scalar, got str",
         lambda: f.add("1")),
        (TypeError, "div: not implemented for 'Bool' tensors",
         lambda: tp.zeros(2, dtype=tp.bool).div(True, rounding_mode="floor")),
        (TypeError, "where: condition must be a bool tensor .*, got a float32 tensor",
         lambda: tp.where(f, f, f)),
        (TypeError, "where: condition must be a bool tensor .*, got list",
         lambda: tp.where([True], 1, 0)),
        (TypeError, "where: other must be a tensor or a Python scalar, got str",
         lambda: tp.where(f > 0, f, "0")),
        (ValueError, "where: The size of tensor a \\(3\\) must match the size of tensor b "
         "\\(2\\) at non-singleton dimension 1", lambda: tp.where(f > 0, tp.zeros(2), 0)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


@pytest.mark.gpu
def test_mixing_devices_names_both_devices():
    gpu, cpu = tp.zeros(2, device="cuda"), tp.zeros(2)
    with pytest.raises(ValueError, match="add: the tensors are on different devices, cuda:0 and "
                                         "cpu"):
        gpu.add(cpu, alpha=2)
    with pytest.raises(ValueError, match="clamp: min: the tensors are on different devices"):
        gpu.clamp(cpu)
    with pytest.raises(ValueError, match="where: condition and other: the tensors are on "
                                         "different devices, cuda:0 and cpu"):
        tp.where(gpu > 0, gpu, cpu)


# -- a refused in-place call changes nothing (core.pyx, Note [Refused calls change nothing]) --


def refused_in_place_calls(target):
    """In-place calls on a float32 CPU tensor of 3 elements that must be refused."""
    yield lambda: target.fill_(1e39)
    yield lambda: target.fill_("1")
    yield lambda: target.copy_(tp.ones(4))
    yield lambda: target.copy_("src")
    yield lambda: target.clamp_()
    yield lambda: target.clamp_(tp.ones(4))
    yield lambda: target.clamp_(min="0")
    yield lambda: target.clamp_(min=10 ** 30)
    yield lambda: target.add_(tp.ones(2))
    yield lambda: target.add_(1, alpha="2")
    yield lambda: target.sub_(tp.ones(3, dtype=tp.bool))
    yield lambda: target.sub_(tp.ones(1, 3))  # broadcasts to a larger shape
    yield lambda: target.mul_(10 ** 30)
    yield lambda: target.div_(2, rounding_mode="round")
    yield lambda: target.__iadd__(object())
    yield lambda: target.__setitem__(0, "x")
    yield lambda: target.__setitem__(0, 1e39)
    yield lambda: target.__setitem__(slice(0, 2), tp.ones(3))
    yield lambda: target.__setitem__("a", 1.0)
    yield lambda: target.uniform_(1, 0)


def test_refused_in_place_calls_leave_a_saved_tensor_valid_for_backward():
    weight = tp.ones(3, requires_grad=True)
    saved = tp.tensor([2.0, 3.0, 4.0])
    loss = (weight * saved).sum()  # mul saves saved for weight's gradient
    for index, call in enumerate(refused_in_place_calls(saved)):
        with pytest.raises((TypeError, ValueError, IndexError, RuntimeError)):
            call()
        assert saved.tolist() == [2.0, 3.0, 4.0], index
    loss.backward()  # would say "modified by an inplace operation" had any call counted
    assert weight.grad.tolist() == [2.0, 3.0, 4.0]


def test_integer_division_by_zero_on_the_cpu_is_refused_unchanged():
    weight = tp.ones(3, requires_grad=True)
    numbers = tp.tensor([6, 7, 8])
    saved = tp.tensor([2.0, 3.0, 4.0])
    loss = (weight * saved).sum()
    for rounding_mode in ("trunc", "floor"):
        with pytest.raises(ZeroDivisionError):
            numbers.div_(tp.tensor([1, 0, 1]), rounding_mode=rounding_mode)
    assert numbers.tolist() == [6, 7, 8]
    view = saved[0:2]  # a view shares the counter: its refused change counts nothing either
    with pytest.raises(ValueError):
        view.fill_(1e39)
    loss.backward()
    assert weight.grad.tolist() == [2.0, 3.0, 4.0]


def test_in_place_calls_on_read_only_memory_are_refused_before_counting():
    weight = tp.ones(3, requires_grad=True)
    base = tp.tensor([2.0])
    expanded = base.expand(3)  # one element at three indices: read-only on the CPU
    loss = (weight * expanded).sum()
    for call in (lambda: expanded.fill_(1.0), lambda: expanded.add_(1.0),
                 lambda: expanded.copy_(tp.ones(3)), lambda: expanded.clamp_(0.0, 1.0),
                 lambda: expanded.uniform_(), lambda: expanded.mul_(tp.ones(3)),
                 lambda: expanded.__setitem__(0, 1.0)):
        with pytest.raises(ValueError, match="read-only"):
            call()
    assert base.tolist() == [2.0]
    loss.backward()
    assert weight.grad.tolist() == [2.0, 2.0, 2.0]


def test_valid_in_place_calls_still_count():
    weight = tp.ones(3, requires_grad=True)
    for change in (lambda t: t.fill_(1.0), lambda t: t.add_(1.0), lambda t: t.mul_(2),
                   lambda t: t.clamp_(0.0, 1.0), lambda t: t.copy_(tp.ones(3)),
                   lambda t: t.__setitem__(0, 1.0), lambda t: t.normal_(),
                   lambda t: t.div_(2.0, rounding_mode="floor")):
        saved = tp.tensor([2.0, 3.0, 4.0])
        loss = (weight * saved).sum()
        change(saved)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()
