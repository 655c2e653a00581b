"""a // b (torch.floor_divide, div(rounding_mode="floor")) and a % b (torch.remainder, the
divisor's sign) on the CPU and on CUDA (marked gpu): values against numpy, dtypes, scalars on
either side, in-place forms, gradients, and the integer division by zero PyTorch's CPU refuses.

Ported from PyTorch's test/test_binary_ufuncs.py (TestBinaryUfuncs): test_fmod_remainder,
test_fmod_remainder_by_zero_float, test_fmod_remainder_by_zero_integral,
test_remainder_fmod_large_dividend and test_cremainder, for remainder (tensorplay has no fmod).
"""
import itertools

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
INTEGERS = ["uint8", "int8", "int16", "int32", "int64"]
FLOATS = ["float16", "float32", "float64"]


def values(tensor):
    return numpy.array(tensor.to(tp.float64).cpu().tolist(), dtype=numpy.float64).reshape(
        tuple(tensor.shape))


def make(shape, dtype, device, seed, low=-9, high=9):
    """Values in [low, high) as PyTorch's make_tensor draws them (whole numbers for integers)."""
    draw = numpy.random.default_rng(seed)
    if dtype in INTEGERS:
        low = max(low, 0) if dtype == "uint8" else low
        data = draw.integers(low, high, shape)
    else:
        data = draw.uniform(low, high, shape)
    return tp.tensor(data.tolist(), dtype=getattr(tp, dtype), device=device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS + FLOATS)
def test_remainder_against_numpy(device, dtype):
    # test_fmod_remainder: dividends x and x.t(); divisors 3, 2.3, a tensor (no zero), its
    # transpose and, for integers, a float32 tensor; then the scalars 5 and 3.14 as dividends.
    x = make((10, 10), dtype, device, 1)
    mod = make((10, 10), dtype, device, 2)
    mod[mod == 0] = 1
    mods = [3, 2.3, mod, mod.t()]
    if dtype in INTEGERS:
        mod_float = make((10, 10), "float32", device, 3)
        mods.append(mod_float)
    tolerance = 2e-2 if dtype == "float16" else 1e-5

    def check(dividend, divisor):
        expected = numpy.remainder(values(dividend) if isinstance(dividend, tp.Tensor)
                                   else dividend,
                                   values(divisor) if isinstance(divisor, tp.Tensor) else divisor)
        result = dividend % divisor
        numpy.testing.assert_allclose(values(result), expected, rtol=tolerance, atol=tolerance)
        if isinstance(dividend, tp.Tensor):
            numpy.testing.assert_allclose(values(dividend.remainder(divisor)), expected,
                                          rtol=tolerance, atol=tolerance)
            target = dividend.clone()
            try:
                target.remainder_(divisor)
            except RuntimeError as error:  # a float result for an integer tensor
                assert "can't be cast to the desired output type" in str(error)
            else:
                numpy.testing.assert_allclose(values(target), expected, rtol=tolerance,
                                              atol=tolerance)

    for dividend, divisor in itertools.product([x, x.t()], mods):
        check(dividend, divisor)
    for dividend, divisor in itertools.product([5, 3.14], mods):
        if isinstance(divisor, tp.Tensor):
            check(dividend, divisor)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_remainder_by_zero_float_is_nan(device, dtype):
    x = make((10, 10), dtype, device, 4)
    assert numpy.isnan(values(x % 0.0)).all()
    assert numpy.isnan(values(x % tp.zeros_like(x))).all()


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_division_by_zero_raises_on_the_cpu(dtype):
    x = make((10, 10), dtype, "cpu", 5)
    zero = tp.zeros_like(x)
    for operation in (lambda: x % zero, lambda: x // zero, lambda: x.remainder(0),
                      lambda: 7 % x.clamp(0, 0)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            operation()
    with pytest.raises(ZeroDivisionError):  # Python's own type too
        x // 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_division_by_zero_gives_zero_on_cuda(dtype):
    # PyTorch's CUDA kernels leave it undefined (a pattern of ones); ours give 0, no fault.
    x = make((10, 10), dtype, "cuda", 6)
    zero = tp.zeros_like(x)
    assert not values(x % zero).any() and not values(x // zero).any()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_remainder_large_dividend(device, dtype):
    # test_remainder_fmod_large_dividend: the divisor's sign, and within the divisor's range.
    pi = 3.14159265358979
    for a, b in itertools.product([1e9, -1e9], [pi, -pi]):
        c = (tp.tensor([a], dtype=getattr(tp, dtype), device=device) %
             tp.tensor([b], dtype=getattr(tp, dtype), device=device)).item()
        assert (b > 0) == (c > 0) and abs(c) < abs(b)


def test_cremainder_of_strided_operands():
    # test_cremainder: a row of one tensor against a strided view of another, elementwise.
    first = tp.randn(10, 10, 10)[4]
    second = tp.randn(10, 100)[4].view(10, 10)
    result = first % second
    expected = [[values(first)[i, j] % values(second)[i, j] for j in range(10)]
                for i in range(10)]
    numpy.testing.assert_allclose(values(result), expected, rtol=1e-5, atol=1e-5)
    strided = tp.randn(10, 10, 10)[:, 4]
    numpy.testing.assert_allclose(values(strided % 1.5), numpy.remainder(values(strided), 1.5),
                                  rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_floor_division_rounds_down_in_the_operands_dtype(device):
    a = tp.tensor([7, -7, 0, 3, -1], device=device)
    b = tp.tensor([2, 3, 1, -2, 5], device=device)
    assert (a // b).tolist() == [3, -3, 0, -2, -1] and (a // b).dtype is tp.int64
    assert (a // 2).tolist() == [3, -4, 0, 1, -1]
    assert (a // 2.5).tolist() == [2.0, -3.0, 0.0, 1.0, -1.0] and (a // 2.5).dtype is tp.float32
    assert (7 // b).tolist() == [3, 2, 7, -4, 1]
    assert a.floor_divide(b).tolist() == (a // b).tolist()
    f = tp.tensor([7.5, -7.5, 1.0], device=device)
    assert (f // 2).tolist() == [3.0, -4.0, 0.0]
    assert (f // 0.0).tolist()[:2] == [float("inf"), float("-inf")]
    a //= 2
    assert a.tolist() == [3, -4, 0, 1, -1]
    a.floor_divide_(tp.tensor(-2, device=device))
    assert a.tolist() == [-2, 2, 0, -1, 0]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        a //= 2.5


@pytest.mark.parametrize("device", DEVICES)
def test_remainder_takes_the_divisors_sign(device):
    a = tp.tensor([5, -5, 5, -5, 0], device=device)
    b = tp.tensor([3, 3, -3, -3, 7], device=device)
    assert (a % b).tolist() == [2, 1, -1, -2, 0]
    assert (a % 3).tolist() == [2, 1, 2, 1, 0] and (7 % b).tolist() == [1, 1, -2, -2, 0]
    f = tp.tensor([5.5, -5.5], device=device)
    assert (f % -2).tolist() == [-0.5, -1.5] and (f % 2).tolist() == [1.5, 0.5]
    a %= 4
    assert a.tolist() == [1, 3, 1, 3, 0]


@pytest.mark.parametrize("device", DEVICES)
def test_bools_divide_as_pytorch(device):
    # A bool tensor with an int scalar computes in int64; with a bool it is refused, as PyTorch's
    # "not implemented for 'Bool'".
    mask = tp.tensor([True, False], device=device)
    assert (mask // 2).tolist() == [0, 0] and (mask // 2).dtype is tp.int64
    assert (mask % 2).tolist() == [1, 0] and (2 % tp.tensor([True], device=device)).tolist() == [0]
    for operation in (lambda: mask // True, lambda: mask % mask, lambda: True % mask):
        with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
            operation()


@pytest.mark.parametrize("device", DEVICES)
def test_remainder_gradients(device):
    # PyTorch's remainder backward: the dividend's gradient is g, the divisor's -g * floor(a/b);
    # for a scalar % tensor (no derivative in PyTorch) the same rule.
    a = tp.tensor([3.0, -2.5, 7.0], device=device, requires_grad=True)
    b = tp.tensor([2.0, 4.0, -3.0], device=device, requires_grad=True)
    (a % b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0] and b.grad.tolist() == [-1.0, 1.0, 3.0]
    a.grad = None
    (7.0 % a).sum().backward()
    assert a.grad.tolist() == [-2.0, 3.0, -1.0]
    a.grad = None
    (a // 2).sum().backward()  # piecewise constant
    assert a.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "float16", "bfloat16",
                                   "float32", "float64"])
def test_against_pytorch(device, dtype):
    torch = import_or_skip("torch")
    data = [7, 250, 0, 3, 1] if dtype == "uint8" else [7, -7, 0, 3, -1]
    divisors = [2, 3, 1, 2, 5] if dtype == "uint8" else [2, 3, 1, -2, 5]
    if dtype.startswith(("float", "bfloat")):
        data, divisors = [7.5, -7.5, 0.0, 3.0, -1.25], [2.0, 3.0, 1.0, -2.0, 0.5]
    ours = (tp.tensor(data, dtype=getattr(tp, dtype), device=device),
            tp.tensor(divisors, dtype=getattr(tp, dtype), device=device))
    theirs = (torch.tensor(data, dtype=getattr(torch, dtype)),
              torch.tensor(divisors, dtype=getattr(torch, dtype)))
    for operation in (lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a // 2,
                      lambda a, b: a % 3, lambda a, b: a % 2.5, lambda a, b: 7 % b,
                      lambda a, b: 7.5 // b, lambda a, b: a % b.float()):
        result, expected = operation(*ours), operation(*theirs)
        assert str(result.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        numpy.testing.assert_allclose(values(result), expected.double().numpy(), rtol=1e-2)


@pytest.mark.gpu
def test_remainder_and_floor_division_capture_and_replay(quiet_device):
    x = tp.tensor([5.0, -5.0, 7.5], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        y = x % 3
        z = x // 2
    x.copy_(tp.tensor([4.0, -4.0, 1.5], device="cuda"))
    graph.replay()
    assert y.tolist() == [1.0, 2.0, 1.5] and z.tolist() == [2.0, -2.0, 0.0]
