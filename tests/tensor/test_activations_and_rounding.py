"""sigmoid, tanh, erf, log1p, expm1, rsqrt, tan, atan, asin, acos, sinh, cosh, log2, log10, exp2,
floor, ceil, round (with decimals), trunc, sign and isnan/isinf/isfinite on the
CPU and on CUDA (marked gpu): values against numpy, dtypes, gradients, the top-level and nn
forms, the integer and bool rules, captures; against PyTorch where it is installed.

After PyTorch's test/test_unary_ufuncs.py (TestUnaryUfuncs.test_reference_numerics_normal,
_small, _large and _extremal: each op against its numpy reference over ordinary, tiny, huge and
non-finite values) and the OpInfo entries of torch/testing/_internal/common_methods_invocations.py
for these ops (references np.floor, np.ceil, np.trunc, np.round with its decimals variants 0, 3
and -3, np.tanh and scipy's expit for sigmoid; floor, ceil, round and trunc of an integer tensor
are the tensor itself).
"""
import math

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTEGERS = ["uint8", "int8", "int16", "int32", "int64"]


def expit(x):
    with numpy.errstate(over="ignore"):
        return 1.0 / (1.0 + numpy.exp(-x))


def erf(x):
    return numpy.frompyfunc(math.erf, 1, 1)(x).astype(numpy.float64)


def rsqrt(x):
    with numpy.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / numpy.sqrt(x)


REFERENCES = {"sigmoid": expit, "tanh": numpy.tanh, "erf": erf, "log1p": numpy.log1p,
              "expm1": numpy.expm1, "rsqrt": rsqrt, "tan": numpy.tan, "atan": numpy.arctan,
              "asin": numpy.arcsin, "acos": numpy.arccos, "sinh": numpy.sinh,
              "cosh": numpy.cosh, "log2": numpy.log2, "log10": numpy.log10,
              "exp2": numpy.exp2, "floor": numpy.floor, "ceil": numpy.ceil,
              "round": numpy.round, "trunc": numpy.trunc}
ROUNDING = ("floor", "ceil", "round", "trunc")
LARGEST = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": 3.4028e38,
           "float64": numpy.inf}
TOLERANCE = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6, "float64": 1e-12}

# test_reference_numerics' ranges: ordinary values, tiny ones, huge ones, then ties of round.
NORMAL = [-9.75, -2.5, -1.5, -0.5, -0.3, 0.0, 0.3, 0.5, 1.5, 2.5, 3.5, 7.25]
SMALL = [-1e-3, -1e-5, 1e-5, 1e-3]
LARGE = [-1e4, -300.0, 300.0, 1e4]
EXTREMAL = [float("inf"), float("-inf"), float("nan")]


def values(tensor):
    return numpy.array(tensor.to(tp.float64).cpu().tolist(), dtype=numpy.float64)


def reference(name, data, dtype):
    """The numpy reference over data as dtype stores it, rounded to dtype."""
    stored = values(tp.tensor(data, dtype=getattr(tp, dtype)))
    with numpy.errstate(all="ignore"):  # NaN and infinity are expected values here
        exact = REFERENCES[name](stored)
        # Beyond the dtype's largest value the result is infinity (expm1(300) in float16).
        exact = numpy.where(numpy.abs(exact) > LARGEST[dtype], numpy.sign(exact) * numpy.inf,
                            exact)
    return values(tp.tensor(exact.tolist(), dtype=getattr(tp, dtype)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_reference_numerics(device, dtype, name):
    data = NORMAL + SMALL + EXTREMAL + (LARGE if dtype != "float16" else [-300.0, 300.0])
    x = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    for result in (getattr(x, name)(), getattr(tp, name)(x)):
        assert result.dtype is x.dtype and result.device == x.device
        tolerance = 0 if name in ROUNDING else TOLERANCE[dtype]
        numpy.testing.assert_allclose(values(result), reference(name, data, dtype),
                                      rtol=tolerance, atol=tolerance)
    strided = tp.tensor([data, data], dtype=getattr(tp, dtype), device=device).t()
    numpy.testing.assert_allclose(values(getattr(strided, name)())[:, 0],
                                  values(getattr(x, name)()))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_a_zero_dimensional_tensor_gives_a_zero_dimensional_result(device, name):
    # numpy gives a Python scalar, not an array, for some 0-d inputs (erf's frompyfunc did)
    for dtype in FLOATS:
        x = tp.tensor(0.3, dtype=getattr(tp, dtype), device=device)
        result = getattr(x, name)()
        assert result.shape == () and result.dtype is x.dtype, (name, dtype)
        numpy.testing.assert_allclose(values(result), reference(name, [0.3], dtype)[0],
                                      rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
def test_round_ties_to_even_and_keeps_signed_zero(device):
    x = tp.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5, -0.2], device=device)
    rounded = x.round()
    assert rounded.tolist() == [-2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 4.0, 4.0, -0.0]
    assert [math.copysign(1, v) for v in rounded.tolist()][2] == -1.0  # -0.5 rounds to -0.0
    assert math.copysign(1, x.ceil().tolist()[2]) == -1.0 and x.trunc().tolist()[-1] == 0.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("decimals", [0, 3, -3, 1, -1])
def test_round_decimals(device, dtype, decimals):
    # The OpInfo variants decimals_0, decimals_3 and decimals_neg_3, against np.round, which
    # computes as PyTorch's kernel does (multiply, round half to even, divide).
    data = [102003.9254, -12021.6213, 1.2345, -0.0005, 2.5e-3, 1255.0, 0.125]
    x = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    expected = numpy.round(numpy.array(data, dtype=getattr(numpy, dtype)), decimals)
    numpy.testing.assert_allclose(values(x.round(decimals=decimals)), expected, rtol=1e-6)
    numpy.testing.assert_allclose(values(tp.round(x, decimals=decimals)), expected, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_tensors(device, dtype):
    # Rounding an integer tensor gives a copy of it, of its dtype; sigmoid and tanh float32.
    x = tp.tensor([0, 1, 7, 100], dtype=getattr(tp, dtype), device=device)
    for name in ("floor", "ceil", "round", "trunc"):
        result = getattr(x, name)()
        assert result.dtype is x.dtype and result.tolist() == x.tolist()
        assert result.data_ptr() != x.data_ptr()
    big = tp.tensor([2**62 + 1], dtype=tp.int64, device=device)
    assert big.floor().tolist() == [2**62 + 1]  # not through a double
    for name in ("sigmoid", "tanh"):
        result = getattr(x, name)()
        assert result.dtype is tp.float32
        numpy.testing.assert_allclose(values(result), REFERENCES[name](
            numpy.array([0.0, 1.0, 7.0, 100.0])), rtol=1e-6)
    with pytest.raises(TypeError, match="decimals needs a floating-point tensor"):
        x.round(decimals=1)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_tensors(device):
    mask = tp.tensor([True, False], device=device)
    assert mask.sigmoid().dtype is tp.float32
    assert mask.tanh().tolist() == pytest.approx([math.tanh(1.0), 0.0])
    for name in ("floor", "ceil", "round", "trunc"):
        with pytest.raises(NotImplementedError, match=f"{name}"):  # as PyTorch's
            getattr(mask, name)()


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="decimals must be from -308 to 308"):
        tp.tensor([1.0]).round(decimals=400)
    with pytest.raises(TypeError, match="decimals"):
        tp.tensor([1.0]).round(decimals=1.5)
    with pytest.raises(TypeError, match="input"):
        tp.sigmoid([1.0])
    with pytest.raises(TypeError):
        tp.tensor([1.0]).round(2)  # decimals is keyword-only, as in PyTorch


def test_cpu_is_silent_on_overflow():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tp.tensor([-1e4, 1e4]).sigmoid().tolist() == [0.0, 1.0]
        assert tp.tensor([100.0]).exp().tolist() == [float("inf")]
        assert math.isnan(tp.tensor([-1.0]).log().tolist()[0])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradients(device, dtype):
    data = [-3.0, -0.7, 0.0, 0.4, 2.5]
    for name in sorted(REFERENCES):
        x = tp.tensor(data, dtype=getattr(tp, dtype), device=device, requires_grad=True)
        y = getattr(x, name)()
        assert y.grad_fn.name() == name.capitalize() + "Backward"
        (y * tp.tensor([1.0, 2.0, 3.0, 4.0, 5.0], dtype=getattr(tp, dtype),
                       device=device)).sum().backward()
        weights = numpy.array([1.0, 2.0, 3.0, 4.0, 5.0])
        s = expit(numpy.array(data))
        with numpy.errstate(divide="ignore", invalid="ignore"):  # 1 / 0 at x = 0: infinite
            expected = {"sigmoid": s * (1 - s), "tanh": 1 - numpy.tanh(data) ** 2,
                        "erf": 2 / math.sqrt(math.pi) * numpy.exp(-numpy.square(data)),
                        "log1p": 1 / (1 + numpy.array(data)), "expm1": numpy.exp(data),
                        "rsqrt": -0.5 * rsqrt(numpy.array(data)) ** 3,
                        "tan": 1 + numpy.tan(data) ** 2, "atan": 1 / (1 + numpy.square(data)),
                        "asin": rsqrt(1 - numpy.square(data)),
                        "acos": -rsqrt(1 - numpy.square(data)), "sinh": numpy.cosh(data),
                        "cosh": numpy.sinh(data), "log2": 1 / (numpy.array(data) * math.log(2)),
                        "log10": 1 / (numpy.array(data) * math.log(10)),
                        "exp2": numpy.exp2(data) * math.log(2)}.get(
                name, numpy.zeros(5))
        numpy.testing.assert_allclose(values(x.grad), weights * expected, rtol=1e-6, atol=1e-7)
    x = tp.tensor(data, device=device, requires_grad=True)
    x.round(decimals=1).sum().backward()
    assert x.grad.tolist() == [0.0] * 5


def test_modules():
    model = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.Tanh(), tp.nn.Linear(4, 1),
                             tp.nn.Sigmoid())
    x = tp.randn(5, 3)
    out = model(x)
    assert tuple(out.shape) == (5, 1) and ((out > 0) & (out < 1)).all().item()
    out.sum().backward()
    assert model[0].weight.grad is not None
    assert tp.nn.Sigmoid()(tp.tensor([0.0])).tolist() == [0.5]
    with pytest.raises(TypeError, match="Tanh: input"):
        tp.nn.Tanh()([0.0])


@pytest.mark.parametrize("device", DEVICES)
def test_top_level_reductions_and_functions(device):
    x = tp.tensor([[1.0, -2.0], [3.0, -4.0]], device=device)
    assert tp.sum(x).item() == -2.0 and tp.sum(x, dim=0).tolist() == [4.0, -6.0]
    assert tp.sum(x, 1, True).tolist() == [[-1.0], [-1.0]]
    assert tp.mean(x, dim=1).tolist() == [-0.5, -0.5]
    assert tp.abs(x).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert tp.neg(x).tolist() == [[-1.0, 2.0], [-3.0, 4.0]]
    assert tp.clamp(x, min=-1.0, max=2.0).tolist() == [[1.0, -1.0], [2.0, -1.0]]
    assert tp.sqrt(tp.abs(x)).tolist()[1][1] == 2.0
    assert tp.log(tp.exp(x)).flatten().tolist() == pytest.approx([1.0, -2.0, 3.0, -4.0])
    assert tp.sin(x).tolist()[0][0] == pytest.approx(math.sin(1.0))
    assert tp.cos(x).tolist()[0][0] == pytest.approx(math.cos(1.0))
    with pytest.raises(TypeError, match="input"):
        tp.sum([1.0, 2.0])


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([-1.5, 0.5, 2.5], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = (x.sigmoid(), x.tanh(), x.erf(), x.log1p(), x.expm1(), x.rsqrt(), x.floor(),
                   x.ceil(), x.round(), x.trunc(), x.round(decimals=1))
    x.copy_(tp.tensor([0.25, -2.5, 3.75], device="cuda"))
    graph.replay()
    data = numpy.array([0.25, -2.5, 3.75], dtype=numpy.float32)
    with numpy.errstate(invalid="ignore"):  # log1p(-2.5) is NaN, as on the device
        expected = (expit(data), numpy.tanh(data), erf(data), numpy.log1p(data),
                    numpy.expm1(data), rsqrt(data), numpy.floor(data), numpy.ceil(data),
                    numpy.round(data), numpy.trunc(data), numpy.round(data, 1))
    for result, want in zip(outputs, expected):
        numpy.testing.assert_allclose(values(result), want, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_against_pytorch(device, dtype):
    torch = import_or_skip("torch")
    data = NORMAL + SMALL + [-300.0, 300.0] + EXTREMAL
    if dtype == "int32":
        data = [-7, -1, 0, 3, 90]
    ours = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    theirs = torch.tensor(data, dtype=getattr(torch, dtype))
    for name in sorted(REFERENCES):
        result, expected = getattr(ours, name)(), getattr(theirs, name)()
        assert str(result.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        numpy.testing.assert_allclose(values(result), expected.double().numpy(), rtol=8e-3,
                                      atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint8", "int64", "bool"])
def test_sign_and_the_value_tests(device, dtype):
    # PyTorch's sign is (x > 0) - (x < 0): 0 for NaN and -0.0 (numpy's keeps them); isnan,
    # isinf and isfinite as numpy's, integers and bools never NaN or infinite.
    if dtype in FLOATS:
        data = [float("nan"), -0.0, 0.0, -2.5, 3.0, float("inf"), float("-inf")]
    else:
        data = [True, False] if dtype == "bool" else [0, 1, 7] if dtype == "uint8" else [-3, 0, 4]
    x = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    array = numpy.array(data, dtype=numpy.float64)
    signs = x.sign()
    assert signs.dtype is x.dtype
    expected = (array > 0).astype(float) - (array < 0).astype(float)
    assert values(signs).tolist() == expected.tolist()
    assert x.isnan().tolist() == numpy.isnan(array).tolist()
    assert x.isinf().tolist() == numpy.isinf(array).tolist()
    assert x.isfinite().tolist() == numpy.isfinite(array).tolist()
    for result in (x.isnan(), x.isinf(), x.isfinite()):
        assert result.dtype is tp.bool


def test_sign_gradient_is_zero():
    x = tp.tensor([1.0, -2.0, 0.0], requires_grad=True)
    y = x.sign()
    assert y.grad_fn.name() == "SignBackward"
    (y * 3).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]
    assert not x.isnan().requires_grad
