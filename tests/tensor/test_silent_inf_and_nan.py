"""Infinities and NaN arrive silently, as in PyTorch: a float op that overflows, a mean over no
element, a cast of NaN or of a value past a narrower dtype's range. On the CPU the values come
from numpy, which warns (RuntimeWarning: overflow encountered in multiply, Mean of empty slice,
invalid value encountered in cast); those warnings must not reach the user. Each case runs with
warnings turned into errors, on both devices, and checks the value PyTorch gives (each checked
against torch 2.14 on the CPU, where these ops warn nothing)."""
import math
import warnings

import pytest

import tensorplay as tp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
INF, NAN = math.inf, math.nan


def big(device, value=3e38, count=3, dtype=tp.float32):
    return tp.full((count,), value, dtype=dtype, device=device)


CASES = {
    "mean of an empty tensor": (lambda d: tp.ones(0, device=d).mean(), [NAN]),
    "mean over an empty dim": (lambda d: tp.ones(0, 2, device=d).mean(0), [NAN, NAN]),
    "mean over an empty dim, keepdim": (lambda d: tp.ones(2, 0, device=d).mean(1, keepdim=True),
                                        [NAN, NAN]),
    "product past float32": (lambda d: big(d) * 10, [INF] * 3),
    "sum of two past float32": (lambda d: big(d) + big(d), [INF] * 3),
    "in-place product past float32": (lambda d: big(d).mul_(10), [INF] * 3),
    "add with alpha past float32": (lambda d: big(d).add(big(d), alpha=2), [INF] * 3),
    "floor division past float64": (
        lambda d: big(d, 1e308, 1, tp.float64) // big(d, 1e-308, 1, tp.float64), [INF]),
    "sum past float32": (lambda d: big(d, count=10).sum(), [INF]),
    "float16 sum past its range": (lambda d: big(d, 60000.0, 1000, tp.float16).sum(), [INF]),
    "cumprod past float32": (lambda d: big(d, 1e10, 5).cumprod(0)[-1], [INF]),
    "matmul past float32": (lambda d: tp.full((2, 2), 3e38, device=d) @ tp.full((2, 2), 3e38,
                                                                                 device=d),
                            [INF] * 4),
    "lerp of opposite infinities": (
        lambda d: big(d, INF, 1).lerp(big(d, -INF, 1), 0.5), [NAN]),
    "float64 past float32, cast": (lambda d: big(d, 1e300, 1, tp.float64).to(tp.float32),
                                   [INF]),
    "float32 past float16, cast": (lambda d: big(d, 1e10, 1).to(tp.float16), [INF]),
    "float64 past bfloat16, cast": (lambda d: big(d, 1e300, 1, tp.float64).to(tp.bfloat16),
                                    [INF]),
}


def same(got, expected):
    return len(got) == len(expected) and all(
        math.isnan(a) if math.isnan(b) else a == b for a, b in zip(got, expected))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_inf_and_nan_come_without_a_warning(case, device):
    compute, expected = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compute(device)
        got = result.to(tp.float64).cpu().reshape(-1).tolist()
    assert same(got, expected), f"{case}: {got} instead of {expected}"


@pytest.mark.parametrize("device", DEVICES)
def test_nan_and_infinity_to_an_integer_dtype_convert_without_a_warning(device):
    # The integer a NaN or an infinity becomes is undefined (C's conversion); PyTorch gives one
    # without a word, and so do we.
    values = tp.tensor([NAN, INF, -INF, 1.5], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        converted = values.to(tp.int32)
    assert converted.dtype == tp.int32 and converted.cpu().tolist()[3] == 1
