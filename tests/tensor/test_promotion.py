"""Type promotion against PyTorch (runtime/tensor/promotion.pyx, Note [Type promotion]): the
result dtype and values of the arithmetic operators and comparisons for every pair of dtypes,
dimensioned tensors against zero-dimensional tensors and Python scalars, in-place results cast
to the tensor's dtype or refused with PyTorch's error, and gradients in each input's dtype.
PyTorch (CPU) is the oracle: the module is skipped without it. The CUDA variants run the
promoted kernels (elementwise.cu, PROMOTED_OP) and are marked gpu."""
import operator

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

torch = import_or_skip("torch")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
             "div": operator.truediv, "lt": operator.lt, "eq": operator.eq, "ge": operator.ge}
SCALARS = [True, 3, 2.5]


def name_of(dtype):
    return str(dtype).split(".")[-1]


def as_floats(value):
    if isinstance(value, torch.Tensor):
        return value.detach().double().numpy()
    return numpy.array(value.to(tp.float64).cpu().tolist(), dtype=float).reshape(value.shape)


def pair(dtype, shape, seed, device="cpu"):
    """The same values (1 to 4, so that no op overflows or divides by zero) in both."""
    values = numpy.random.default_rng(seed).integers(1, 5, shape)
    if dtype == "bool":
        values = values > 2
    expected = torch.tensor(values.tolist(), dtype=getattr(torch, dtype))
    return tp.tensor(values.tolist(), dtype=getattr(tp, dtype), device=device), expected


def outcome(function):
    try:
        return function(), None
    except Exception as error:  # the type and the message are compared
        return None, error


def assert_like_torch(ours, theirs, what):
    (got, error), (expected, expected_error) = outcome(ours), outcome(theirs)
    if expected_error is not None:
        assert error is not None, f"{what}: PyTorch raised {expected_error!r}, we gave {got!r}"
        assert isinstance(error, type(expected_error)), f"{what}: {error!r} vs {expected_error!r}"
        return
    assert error is None, f"{what}: {error!r}, PyTorch gave {expected!r}"
    assert name_of(got.dtype) == name_of(expected.dtype), (
        f"{what}: dtype {got.dtype}, PyTorch's {expected.dtype}")
    assert tuple(got.shape) == tuple(expected.shape), what
    numpy.testing.assert_allclose(as_floats(got), as_floats(expected), rtol=1e-2, err_msg=what)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize("left", DTYPES)
def test_two_dimensioned_tensors_promote_as_pytorch(left, op, device):
    function = OPERATORS[op]
    for right in DTYPES:
        a, ta = pair(left, (2, 3), 1, device)
        b, tb = pair(right, (3,), 2, device)  # broadcast, read in place
        assert_like_torch(lambda: function(a, b), lambda: function(ta, tb),
                          f"{left} {op} {right}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize("left", DTYPES)
def test_zero_dim_tensors_and_scalars_count_only_by_category(left, op, device):
    function = OPERATORS[op]
    a, ta = pair(left, (4,), 3, device)
    for right in DTYPES:
        b, tb = pair(right, (), 4, device)
        assert_like_torch(lambda: function(a, b), lambda: function(ta, tb),
                          f"{left} tensor {op} {right} zero-dim")
        assert_like_torch(lambda: function(b, a), lambda: function(tb, ta),
                          f"{right} zero-dim {op} {left} tensor")
    for scalar in SCALARS:
        assert_like_torch(lambda: function(a, scalar), lambda: function(ta, scalar),
                          f"{left} tensor {op} {scalar!r}")
        assert_like_torch(lambda: function(scalar, a), lambda: function(scalar, ta),
                          f"{scalar!r} {op} {left} tensor")


@pytest.mark.parametrize("device", DEVICES)
def test_two_zero_dim_tensors_promote_as_dimensioned_ones(device):
    for left in DTYPES:
        for right in DTYPES:
            a, ta = pair(left, (), 5, device)
            b, tb = pair(right, (), 6, device)
            assert_like_torch(lambda: a * b, lambda: ta * tb, f"{left} * {right}, zero-dim")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_"])
@pytest.mark.parametrize("target", DTYPES)
def test_in_place_results_are_cast_or_refused_as_pytorch(target, op, device):
    for right in DTYPES:
        a, ta = pair(target, (2, 3), 7, device)
        b, tb = pair(right, (2, 3), 8, device)
        what = f"{target}.{op}({right})"
        (got, error), (_, expected_error) = (outcome(lambda: getattr(a, op)(b)),
                                             outcome(lambda: getattr(ta, op)(tb)))
        if expected_error is not None:
            assert isinstance(error, RuntimeError), f"{what}: {error!r} vs {expected_error!r}"
            if "can't be cast" in str(expected_error):
                assert str(expected_error) in str(error), what
            continue
        assert got is a and error is None, f"{what}: {error!r}"
        assert name_of(a.dtype) == target
        numpy.testing.assert_allclose(as_floats(a), as_floats(ta), rtol=1e-2, err_msg=what)


def test_a_refused_in_place_result_names_both_dtypes_as_pytorch_does():
    x = tp.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        x += tp.tensor([0.5, 0.5, 0.5])
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        x *= 0.5
    assert x.tolist() == [1, 2, 3]
    with pytest.raises(TypeError, match="result type Long can't be cast to the desired output "
                                        "type Bool"):
        tp.tensor([True]).add_(tp.tensor([1]))


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_come_back_in_each_inputs_dtype(device):
    for left, right in (("float32", "float64"), ("float16", "float32"),
                        ("bfloat16", "float16"), ("float64", "bfloat16")):
        a = tp.tensor([1.5, -2.0, 3.0], dtype=getattr(tp, left), device=device,
                      requires_grad=True)
        b = tp.tensor([0.5], dtype=getattr(tp, right), device=device, requires_grad=True)
        ta = torch.tensor([1.5, -2.0, 3.0], dtype=getattr(torch, left), requires_grad=True)
        tb = torch.tensor([0.5], dtype=getattr(torch, right), requires_grad=True)
        for function in (lambda x, y: (x * y + x / y - y ** x).sum(),
                         lambda x, y: (x - y).sum()):
            a.grad = b.grad = ta.grad = tb.grad = None
            function(a, b).backward()
            function(ta, tb).backward()
            for ours, theirs in ((a, ta), (b, tb)):
                assert name_of(ours.grad.dtype) == name_of(theirs.grad.dtype)
                numpy.testing.assert_allclose(as_floats(ours.grad), as_floats(theirs.grad),
                                              rtol=2e-2)


def test_subtraction_with_a_bool_tensor_is_refused_as_pytorch():
    with pytest.raises(TypeError, match="Subtraction, the `-` operator, with a bool tensor"):
        tp.tensor([1, 2]) - tp.tensor([True, False])


@pytest.mark.parametrize("device", DEVICES)
def test_powers_of_bool_tensors_as_pytorch(device):
    # bool ** a bool scalar stays bool; an int or float scalar promotes; a bool tensor exponent,
    # or a bool base with a bool tensor exponent, is PyTorch's NotImplementedError.
    a, ta = pair("bool", (2, 3), 11, device)
    for scalar in (True, False, 2, 0, 2.5, -1):
        assert_like_torch(lambda: a ** scalar, lambda: ta ** scalar, f"bool ** {scalar!r}")
        assert_like_torch(lambda: scalar ** a, lambda: scalar ** ta, f"{scalar!r} ** bool")
    assert_like_torch(lambda: a ** a, lambda: ta ** ta, "bool ** bool tensor")


@pytest.mark.parametrize("device", DEVICES)
def test_named_arithmetic_and_powers_promote_too(device):
    a, ta = pair("int32", (2, 3), 9, device)
    b, tb = pair("float64", (3,), 10, device)
    assert_like_torch(lambda: a.add(b, alpha=2), lambda: ta.add(tb, alpha=2), "add alpha")
    assert_like_torch(lambda: a.sub(b, alpha=3), lambda: ta.sub(tb, alpha=3), "sub alpha")
    assert_like_torch(lambda: a.pow(b), lambda: ta.pow(tb), "int32 ** float64")
    assert_like_torch(lambda: b.pow(a), lambda: tb.pow(ta), "float64 ** int32")
    assert_like_torch(lambda: a.div(b, rounding_mode="floor"),
                      lambda: ta.div(tb, rounding_mode="floor"), "floor division")
    assert_like_torch(lambda: a.add(b, alpha=0.5), lambda: ta.add(tb, alpha=0.5), "float alpha")


JOINED = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("left", JOINED)
@pytest.mark.parametrize("right", JOINED)
def test_cat_stack_and_where_promote_as_pytorch(device, left, right):
    # torch.cat and torch.stack give the dtype every tensor promotes to, torch.where that of
    # input and other (a zero-dimensional operand and a Python scalar in their classes).
    a, ta = pair(left, (2, 3), 0, device)
    b, tb = pair(right, (2, 3), 1, device)
    mask, tmask = pair("bool", (2, 3), 2, device)
    zero, tzero = pair(right, (), 3, device)
    for what, ours, theirs in [
            ("cat", lambda: tp.cat([a, b]), lambda: torch.cat([ta, tb])),
            ("cat dim 1", lambda: tp.cat([a, b, a], 1), lambda: torch.cat([ta, tb, ta], 1)),
            ("stack", lambda: tp.stack([a, b]), lambda: torch.stack([ta, tb])),
            ("where", lambda: tp.where(mask, a, b), lambda: torch.where(tmask, ta, tb)),
            ("where 0-dim", lambda: tp.where(mask, a, zero), lambda: torch.where(tmask, ta, tzero)),
            *[(f"where scalar {value!r}", lambda value=value: tp.where(mask, a, value),
               lambda value=value: torch.where(tmask, ta, value)) for value in SCALARS]]:
        assert_like_torch(ours, theirs, f"{what} of {left} and {right} on {device}")


@pytest.mark.parametrize("device", DEVICES)
def test_the_gradients_of_a_promoted_cat_and_where_come_back_in_each_dtype(device):
    a = tp.ones(3, dtype=tp.float32, device=device, requires_grad=True)
    b = tp.ones(2, dtype=tp.float64, device=device, requires_grad=True)
    joined = tp.cat([a, b])
    assert joined.dtype == tp.float64
    (joined * 2).sum().backward()
    assert a.grad.dtype == tp.float32 and b.grad.dtype == tp.float64
    assert a.grad.tolist() == [2.0] * 3 and b.grad.tolist() == [2.0] * 2
    x = tp.ones(3, dtype=tp.float16, device=device, requires_grad=True)
    y = tp.ones(3, dtype=tp.float32, device=device, requires_grad=True)
    mask = tp.tensor([True, False, True], device=device)
    chosen = tp.where(mask, x, y)
    assert chosen.dtype == tp.float32
    chosen.sum().backward()
    assert x.grad.dtype == tp.float16 and x.grad.tolist() == [1.0, 0.0, 1.0]
    assert y.grad.dtype == tp.float32 and y.grad.tolist() == [0.0, 1.0, 0.0]
