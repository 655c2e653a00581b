"""In-place unary functions (exp_, log_, sqrt_, sin_, cos_, sigmoid_, tanh_, erf_, log1p_, expm1_,
rsqrt_, tan_, atan_, asin_, acos_, sinh_, cosh_, log2_, log10_, exp2_, abs_, neg_, relu_,
sign_, floor_, ceil_, trunc_, round_) and pow_/square_, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests:
- test/test_ops.py, TestCommon.test_variant_consistency_eager: an op's in-place variant gives
  the out-of-place variant's values, and returns self;
- test/test_type_promotion.py, TestTypePromotion.test_inplace (and
  test_unary_ufuncs.TestUnaryUfuncs.test_float_domains's integer cases): an in-place op whose
  result type cannot be cast to the tensor's dtype raises "result type Float can't be cast to
  the desired output type Long", and leaves the tensor as it was;
- test/test_autograd.py, TestAutograd.test_inplace_on_view_* and test_leaf_assignment /
  "a leaf Variable that requires grad is being used in an in-place operation": in-place ops of
  a non-leaf are differentiated through the original values, and a leaf that requires grad is
  refused;
- test/test_cuda.py, TestCuda.test_graph_* capture patterns: the in-place form inside a
  captured graph replays on the new contents of its input.
"""
import math

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FLOATING = ["exp", "log", "sqrt", "sin", "cos", "sigmoid", "tanh", "erf", "log1p", "expm1",
            "rsqrt", "tan", "atan", "asin", "acos", "sinh", "cosh", "log2", "log10", "exp2"]
ANY_NUMBER = ["abs", "neg", "relu", "sign", "floor", "ceil", "trunc", "round", "square"]
DATA = [0.25, 0.5, 1.5, 2.5, 3.0, 7.75]  # positive, so log and sqrt are defined
TOLERANCE = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-6, "float64": 1e-12}


def values(tensor):
    return numpy.array(tensor.to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", FLOATING + ANY_NUMBER)
def test_variant_consistency(device, dtype, name):
    x = tp.tensor(DATA, dtype=getattr(tp, dtype), device=device)
    expected = values(getattr(x, name)())
    y = x.clone()
    assert getattr(y, name + "_")() is y
    assert y.dtype is x.dtype and y.device == x.device
    numpy.testing.assert_allclose(values(y), expected, rtol=TOLERANCE[dtype],
                                  atol=TOLERANCE[dtype])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", FLOATING + ANY_NUMBER)
def test_strided_views_write_through(device, name):
    base = tp.tensor([DATA, DATA[::-1]], device=device)
    expected = values(getattr(base.t(), name)())
    view = base.t()  # not contiguous: computed aside and copied in
    getattr(view, name + "_")()
    numpy.testing.assert_allclose(values(base.t()), expected, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", FLOATING)
def test_floating_results_refuse_integer_tensors(device, dtype, name):
    x = tp.tensor([1, 0, 1], dtype=getattr(tp, dtype), device=device)
    want = {"int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool"}[dtype]
    with pytest.raises(RuntimeError, match=f"result type Float can't be cast to the desired "
                                           f"output type {want}"):
        getattr(x, name + "_")()
    assert x.tolist() == [1, 0, 1] if dtype != "bool" else [True, False, True]


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_bool_tensors(device):
    x = tp.tensor([-3, 0, 5], dtype=tp.int64, device=device)
    assert x.clone().abs_().tolist() == [3, 0, 5]
    assert x.clone().neg_().tolist() == [3, 0, -5]
    assert x.clone().relu_().tolist() == [0, 0, 5]
    assert x.clone().sign_().tolist() == [-1, 0, 1]
    for name in ("floor_", "ceil_", "trunc_", "round_"):
        assert getattr(x.clone(), name)().tolist() == [-3, 0, 5]
    assert x.clone().square_().tolist() == [9, 0, 25]
    assert x.clone().pow_(3).tolist() == [-27, 0, 125]
    mask = tp.tensor([True, False], device=device)
    assert mask.clone().sign_().tolist() == [True, False]
    for name in ("abs_", "neg_", "floor_"):
        with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
            getattr(mask, name)()
        assert mask.tolist() == [True, False]


@pytest.mark.parametrize("device", DEVICES)
def test_round_with_decimals(device):
    x = tp.tensor([1.23456, -2.71828, 1234.5], dtype=tp.float64, device=device)
    y = x.clone()
    assert y.round_(decimals=2) is y
    numpy.testing.assert_allclose(values(y), values(x.round(decimals=2)))
    with pytest.raises(TypeError, match="decimals"):
        tp.tensor([1, 2], device=device).round_(decimals=1)


@pytest.mark.parametrize("device", DEVICES)
def test_pow_rules(device):
    x = tp.tensor([1.0, 2.0, 3.0], device=device)
    assert x.clone().pow_(2).tolist() == [1.0, 4.0, 9.0]
    assert x.clone().pow_(tp.tensor([2.0, 0.5, 1.0], device=device)).tolist() == \
        pytest.approx([1.0, math.sqrt(2.0), 3.0])
    integers = tp.tensor([1, 2, 3], device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        integers.pow_(0.5)
    with pytest.raises(ValueError):
        integers.pow_(-1)  # PyTorch: integers to negative integer powers are not allowed
    with pytest.raises(RuntimeError):  # the in-place result keeps the tensor's shape
        x.pow_(tp.ones((2, 3), device=device))
    assert integers.tolist() == [1, 2, 3] and x.tolist() == [1.0, 2.0, 3.0]


# The gradients of the in-place forms of a non-leaf, and the derivative each one must give.
GRADIENTS = {
    "exp": numpy.exp, "log": lambda v: 1 / v, "sqrt": lambda v: 0.5 / numpy.sqrt(v),
    "sin": numpy.cos, "cos": lambda v: -numpy.sin(v),
    "sigmoid": lambda v: numpy.exp(-v) / (1 + numpy.exp(-v)) ** 2,
    "tanh": lambda v: 1 - numpy.tanh(v) ** 2,
    "erf": lambda v: 2 / numpy.sqrt(numpy.pi) * numpy.exp(-v * v), "abs": numpy.sign,
    "log1p": lambda v: 1 / (1 + v), "expm1": numpy.exp, "rsqrt": lambda v: -0.5 * v ** -1.5,
    "tan": lambda v: 1 + numpy.tan(v) ** 2, "atan": lambda v: 1 / (1 + v * v),
    "sinh": numpy.cosh, "cosh": numpy.sinh, "log2": lambda v: 1 / (v * numpy.log(2)),
    "log10": lambda v: 1 / (v * numpy.log(10)), "exp2": lambda v: numpy.exp2(v) * numpy.log(2),
    "neg": lambda v: -numpy.ones_like(v),
    "relu": lambda v: (v > 0).astype(v.dtype), "floor": numpy.zeros_like,
    "round": numpy.zeros_like, "sign": numpy.zeros_like, "square": lambda v: 2 * v,
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradient_through_the_original_values(device, name):
    leaf = tp.tensor(DATA, dtype=tp.float64, device=device, requires_grad=True)
    x = leaf * 2.0
    assert getattr(x, name + "_")() is x
    assert x.grad_fn is not None
    x.sum().backward()
    doubled = numpy.array(DATA) * 2.0
    numpy.testing.assert_allclose(values(leaf.grad), 2.0 * GRADIENTS[name](doubled),
                                  rtol=1e-9)


def test_gradients_match_pytorch():
    torch = import_or_skip("torch")
    for name in sorted(GRADIENTS):
        ours_leaf = tp.tensor(DATA, dtype=tp.float64, requires_grad=True)
        theirs_leaf = torch.tensor(DATA, dtype=torch.float64, requires_grad=True)
        ours, theirs = ours_leaf * 3.0, theirs_leaf * 3.0
        getattr(ours, name + "_")()
        getattr(theirs, name + "_")()
        (ours * ours).sum().backward()
        (theirs * theirs).sum().backward()
        numpy.testing.assert_allclose(values(ours), theirs.detach().numpy(), rtol=1e-12)
        numpy.testing.assert_allclose(values(ours_leaf.grad), theirs_leaf.grad.numpy(),
                                      rtol=1e-7, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_leaf_that_requires_grad_is_refused(device):
    leaf = tp.tensor(DATA, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        leaf.exp_()
    assert leaf.tolist() == DATA
    with tp.no_grad():  # allowed there, as in PyTorch
        leaf.sqrt_()
    numpy.testing.assert_allclose(values(leaf), numpy.sqrt(DATA), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_modifying_a_saved_tensor_is_caught(device):
    weight = tp.tensor(DATA, device=device, requires_grad=True)
    x = tp.tensor(DATA, device=device)
    product = weight * x  # saves x for weight's gradient
    x.exp_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        product.sum().backward()


@pytest.mark.gpu
def test_capture_allocates_nothing_and_replays(quiet_device):
    x = tp.tensor(DATA, device="cuda")
    y = tp.empty(len(DATA), device="cuda")
    tp.accelerator.synchronize()
    before = tp.accelerator.memory.memory_allocated()
    x.sigmoid_().sqrt_()  # eager: written over x, nothing allocated
    assert tp.accelerator.memory.memory_allocated() == before
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        y.copy_(x)
        y.sin_().exp_().sqrt_().neg_().pow_(3).abs_().floor_()
    x.copy_(tp.tensor([0.0, 1.0, 2.0, -1.0, -3.0, 0.5], device="cuda"))
    graph.replay()
    data = numpy.array([0.0, 1.0, 2.0, -1.0, -3.0, 0.5], dtype=numpy.float32)
    expected = numpy.floor(numpy.abs((-numpy.sqrt(numpy.exp(numpy.sin(data)))) ** 3))
    numpy.testing.assert_allclose(values(y), expected, rtol=1e-6)
