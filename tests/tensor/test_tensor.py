"""The minimal tensor against numpy, on the CPU and (marked gpu) on CUDA, for every dtype."""
import math

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
              "float32", "float64"]
NUMERIC = ALL_DTYPES[1:]
FLOATING = ["float16", "bfloat16", "float32", "float64"]
TOLERANCE = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def dtype(name):
    return getattr(tp, name)


def sample(name, shape=(3, 4), low=1, high=9, seed=0):
    """Values representable in every dtype of that kind, away from zero and overflow."""
    rng = numpy.random.default_rng(seed)
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if name in FLOATING:
        return rng.uniform(low / 2, high / 2, shape).round(2)
    return rng.integers(low, high, shape)


def values_of(tensor):
    return numpy.array(tensor.tolist(), dtype=float if tensor.dtype.is_floating_point else None)


def assert_matches(tensor, expected, name):
    got = values_of(tensor)
    assert got.shape == numpy.shape(expected)
    if name in FLOATING:
        numpy.testing.assert_allclose(got, expected, rtol=TOLERANCE[name],
                                      atol=TOLERANCE[name])
    else:
        numpy.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_factories_and_description(device, name):
    data = sample(name)
    t = tp.tensor(data.tolist(), dtype=dtype(name), device=device)
    assert t.shape == (3, 4) and t.ndim == 2 and t.dtype is dtype(name)
    assert t.device == tp.device(device if device == "cpu" else "cuda:0")
    assert t.stride() == (4, 1) and t.stride(0) == 4 and t.stride(-1) == 1
    assert t.numel() == 12 and t.element_size() == dtype(name).itemsize
    assert t.nbytes == 12 * dtype(name).itemsize and t.is_contiguous()
    assert t.data_ptr() != 0 and t.is_cuda == (device != "cpu")
    assert_matches(t, data, name)
    assert_matches(tp.zeros(2, 3, dtype=dtype(name), device=device), numpy.zeros((2, 3)), name)
    assert_matches(tp.ones((2, 3), dtype=dtype(name), device=device), numpy.ones((2, 3)), name)
    assert_matches(tp.full((2,), 1, dtype=dtype(name), device=device), numpy.ones(2), name)
    assert tp.empty(5, dtype=dtype(name), device=device).shape == (5,)
    like = tp.zeros_like(t)
    assert like.shape == t.shape and like.dtype is t.dtype and like.device == t.device
    assert_matches(like, numpy.zeros((3, 4)), name)
    assert tp.empty_like(t, dtype=tp.float32).dtype is tp.float32
    for like, value in ((tp.ones_like(t), 1), (tp.full_like(t, 1), 1), (tp.full_like(t, 0), 0)):
        assert like.shape == t.shape and like.dtype is t.dtype and like.device == t.device
        assert_matches(like, numpy.full((3, 4), value), name)


@pytest.mark.parametrize("device", DEVICES)
def test_ones_like_and_full_like_as_pytorch(device):
    # The dtype is input's unless given (not inferred from fill_value, unlike full()); values
    # are checked against it before anything is allocated.
    ints = tp.zeros(2, 3, dtype=tp.int32, device=device)
    assert tp.full_like(ints, 2.5).tolist() == [[2, 2, 2]] * 2  # truncated, as PyTorch
    halves = tp.full_like(ints, 2.5, dtype=tp.float32)
    assert halves.dtype is tp.float32 and halves.tolist() == [[2.5] * 3] * 2
    assert tp.ones_like(tp.zeros(2, device=device), requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="fill_value 1099511627776 does not fit int32"):
        tp.full_like(ints, 2 ** 40)
    with pytest.raises(TypeError, match="fill_value must be a bool, int or float, got str"):
        tp.full_like(ints, "a")
    with pytest.raises(TypeError, match="input must be a tensorplay Tensor"):
        tp.ones_like([1])
    with pytest.raises(RuntimeError, match="floating point and complex dtype can require"):
        tp.ones_like(ints, requires_grad=True)


@pytest.mark.parametrize("device", DEVICES)
def test_inferred_dtypes_and_arange(device):
    assert tp.tensor([1, 2], device=device).dtype is tp.int64
    assert tp.tensor([1.5], device=device).dtype is tp.float32
    assert tp.tensor([True], device=device).dtype is tp.bool
    assert tp.tensor(numpy.zeros(2, numpy.float64), device=device).dtype is tp.float64
    assert tp.full(3, 2.5, device=device).dtype is tp.float32
    assert tp.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert tp.arange(1, 10, 3, device=device).tolist() == [1, 4, 7]
    assert tp.arange(0, 1, 0.25, device=device).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tp.arange(3, dtype=tp.float64, device=device).dtype is tp.float64


# (data of a library on a device, the dtype PyTorch infers, the values): each one-element tensor
# among nested data is its number, and the dtype is the promotion of every element's
# (torch/csrc/utils/tensor_new.cpp, infer_scalar_type); a numpy scalar keeps its dtype.
TENSORS_IN_DATA = [
    (lambda L, d: [L.tensor(1, device=d), L.tensor(2, device=d)], "int64", [1, 2]),
    (lambda L, d: [L.tensor(1, dtype=L.int32, device=d), 2], "int64", [1, 2]),
    (lambda L, d: [L.tensor(1.0, dtype=L.float16, device=d), 2], "float16", [1.0, 2.0]),
    (lambda L, d: [L.tensor(1.0, dtype=L.float16, device=d), 2.5], "float32", [1.0, 2.5]),
    (lambda L, d: [L.tensor(1, dtype=L.uint8, device=d), L.tensor(-1, dtype=L.int8, device=d)],
     "int16", [1, -1]),
    (lambda L, d: [[L.tensor(1.5, dtype=L.float64, device=d)], [2]], "float64", [[1.5], [2.0]]),
    (lambda L, d: (L.tensor([2.5], device=d), True), "float32", [2.5, 1.0]),
    (lambda L, d: numpy.float64(2.5), "float64", 2.5),
    (lambda L, d: numpy.int32(3), "int32", 3),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", range(len(TENSORS_IN_DATA)))
def test_tensors_among_data_are_their_numbers_as_pytorchs(device, case):
    data, name, expected = TENSORS_IN_DATA[case]
    made = tp.tensor(data(tp, device))
    assert made.dtype is dtype(name) and made.tolist() == expected
    torch = import_or_skip("torch")
    theirs = torch.tensor(data(torch, device))
    assert theirs.dtype is getattr(torch, name) and theirs.tolist() == expected


def test_a_tensor_of_several_elements_among_data_is_refused_as_pytorch_refuses_it():
    x = tp.ones(2, requires_grad=True)
    assert tp.tensor([x.sum(), x.mean()]).tolist() == [2.0, 1.0]  # values only: a new leaf
    with pytest.raises(ValueError, match="only one element tensors can be converted"):
        tp.tensor([tp.ones(2), tp.ones(2)])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("source", ALL_DTYPES)
@pytest.mark.parametrize("target", ["bool", "uint8", "int32", "int64", "float16", "bfloat16",
                                    "float32", "float64"])
def test_copy_converts_any_dtype(device, source, target):
    data = sample(source)
    src = tp.tensor(data.tolist(), dtype=dtype(source), device=device)
    dst = tp.empty(3, 4, dtype=dtype(target), device=device)
    assert dst.copy_(src) is dst
    expected = numpy.array(src.tolist()).astype(float if target in FLOATING else
                                                numpy.int64 if target != "bool" else bool)
    assert_matches(dst, expected, target)


@pytest.mark.parametrize("device", DEVICES)
def test_views_by_slicing_and_reshape_share_memory(device):
    base = tp.arange(24, device=device).reshape(4, 6)
    assert base.shape == (4, 6) and base.is_contiguous()
    view = base[1:4:2, 2:6:3]
    assert view.shape == (2, 2) and view.stride() == (12, 3) and not view.is_contiguous()
    assert view.tolist() == [[8, 11], [20, 23]]
    assert view.data_ptr() == base.data_ptr() + (6 + 2) * 8
    row = base[2]
    assert row.shape == (6,) and row.tolist() == list(range(12, 18))
    assert base[-1, -1].item() == 23
    view.fill_(-1)
    assert base[1].tolist() == [6, 7, -1, 9, 10, -1]
    base[0] = 5
    assert base[0].tolist() == [5] * 6
    flat = tp.arange(10, device=device)[2:8:2]
    assert flat.tolist() == [2, 4, 6] and flat.stride() == (2,)
    assert view.contiguous().is_contiguous() and view.contiguous().tolist() == view.tolist()
    assert view.reshape(4).tolist() == [-1, -1, -1, -1]
    assert base.view(2, -1).shape == (2, 12)
    with pytest.raises(ValueError, match="view\\(\\) needs a contiguous tensor"):
        view.view(4)
    with pytest.raises(ValueError, match="shape \\(5, 5\\) is invalid for input of size 24"):
        base.reshape(5, 5)
    with pytest.raises(IndexError, match="index 4 is out of range|out of bounds"):
        base[4]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        base[::-1]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arithmetic_with_tensors_and_scalars(device, name, op):
    a_data, b_data = sample(name, seed=1), sample(name, seed=2)
    a = tp.tensor(a_data.tolist(), dtype=dtype(name), device=device)
    b = tp.tensor(b_data.tolist(), dtype=dtype(name), device=device)
    a_values, b_values = numpy.array(a.tolist(), float), numpy.array(b.tolist(), float)
    apply = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
             "mul": lambda x, y: x * y, "div": lambda x, y: x / y}[op]
    result_name = name if name in FLOATING or op != "div" else "float32"

    def expected_of(values):  # integers wrap like their C type
        return values if result_name in FLOATING else values.astype(numpy.int64).astype(name)

    expected = expected_of(apply(a_values, b_values))
    result = apply(a, b)
    assert result.dtype is dtype(result_name)
    assert_matches(result, expected, result_name)
    assert_matches(apply(a, 2), expected_of(apply(a_values, 2)), result_name)
    assert_matches(apply(3, a), expected_of(apply(3, a_values)), result_name)
    if result_name == name:
        in_place = a.clone()
        before = in_place.data_ptr()
        in_place = {"add": in_place.__iadd__, "sub": in_place.__isub__,
                    "mul": in_place.__imul__, "div": in_place.__itruediv__}[op](b)
        assert in_place.data_ptr() == before
        assert_matches(in_place, expected, name)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_float_scalar_give_float32(device):
    t = tp.tensor([1, 2], device=device)
    assert (t * 0.5).dtype is tp.float32 and (t * 0.5).tolist() == [0.5, 1.0]
    assert (t / 2).tolist() == [0.5, 1.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
def test_unary_operations(device, name):
    data = sample(name) - (4 if name not in ("uint8",) else 0)
    t = tp.tensor(data.tolist(), dtype=dtype(name), device=device)
    values = numpy.array(t.tolist(), float)
    assert_matches(t.abs(), numpy.abs(values), name)
    assert_matches(abs(t), numpy.abs(values), name)
    assert_matches(t.relu(), numpy.maximum(values, 0), name)
    if name != "uint8":
        assert_matches(-t, -values, name)
        assert_matches(t.neg(), -values, name)
    if name in FLOATING:
        positive = t.abs()
        pv = numpy.abs(values)
        for method, reference in (("sin", numpy.sin), ("cos", numpy.cos), ("exp", numpy.exp),
                                  ("sqrt", numpy.sqrt)):
            assert_matches(getattr(positive, method)(), reference(pv), name)
    else:  # integers go to float32 first, as PyTorch promotes them
        for method, reference in (("sin", numpy.sin), ("exp", numpy.exp)):
            result = getattr(t, method)()
            assert result.dtype is tp.float32 and not result.requires_grad
            numpy.testing.assert_allclose(numpy.array(result.tolist()), reference(values),
                                          rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NUMERIC)
def test_comparisons_give_bool_tensors(device, name):
    a = tp.tensor(sample(name, seed=3).tolist(), dtype=dtype(name), device=device)
    b = tp.tensor(sample(name, seed=4).tolist(), dtype=dtype(name), device=device)
    av, bv = numpy.array(a.tolist()), numpy.array(b.tolist())
    for result, expected in ((a == b, av == bv), (a != b, av != bv), (a < b, av < bv),
                             (a <= b, av <= bv), (a > b, av > bv), (a >= b, av >= bv),
                             (a > 3, av > 3), (a == 2, av == 2)):
        assert result.dtype is tp.bool
        assert result.tolist() == expected.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_equality_with_what_is_not_an_operand_is_identity_as_in_pytorch(device):
    # PyTorch's == and != give NotImplemented for such an operand, so Python compares identity:
    # x == None is False and `x in [None]` does not raise; < and eq() still refuse it.
    x = tp.tensor([1, 2], device=device)
    assert (x == None) is False and (x != None) is True  # noqa: E711 (the operator is the test)
    assert (None == x) is False and (x == "a") is False and x not in [None, "a"]  # noqa: E711
    with pytest.raises(TypeError, match="lt: the other operand must be a tensor"):
        x < None
    with pytest.raises(TypeError, match="eq: the other operand must be a tensor"):
        tp.eq(x, None)
    assert (x == 1).tolist() == [True, False] and (x != tp.tensor(1, device=device)).tolist() \
        == [False, True]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_reductions_over_the_whole_tensor(device, name):
    t = tp.tensor(sample(name, shape=(5, 7)).tolist(), dtype=dtype(name), device=device)
    values = numpy.array(t.tolist(), float)
    total = t.sum()
    assert total.shape == () and total.dtype is (dtype(name) if name in FLOATING else tp.int64)
    assert math.isclose(total.item(), values.sum(), rel_tol=TOLERANCE.get(name, 0) * 10)
    assert math.isclose(float(t.max().item()), values.max())
    assert math.isclose(float(t.min().item()), values.min())
    if name in FLOATING:
        assert math.isclose(t.mean().item(), values.mean(), rel_tol=TOLERANCE[name] * 10)
    else:
        with pytest.raises(TypeError, match="mean\\(\\) needs a floating-point tensor"):
            t.mean()


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_of_large_and_empty_tensors(device):
    big = tp.ones(1_000_003, device=device)
    assert big.sum().item() == 1_000_003.0
    assert tp.zeros(0, device=device).sum().item() == 0.0
    with pytest.raises(ValueError, match="max\\(\\) of an empty tensor"):
        tp.zeros(0, device=device).max()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (3, 5, 2), (33, 17, 65), (128, 64, 96)])
def test_matmul_float32(device, m, k, n):
    rng = numpy.random.default_rng(m * k * n)
    a_values = rng.standard_normal((m, k)).astype(numpy.float32)
    b_values = rng.standard_normal((k, n)).astype(numpy.float32)
    a, b = tp.tensor(a_values, device=device), tp.tensor(b_values, device=device)
    numpy.testing.assert_allclose(numpy.array((a @ b).tolist()), a_values @ b_values,
                                  rtol=1e-4, atol=1e-4)
    assert tp.allclose(a.matmul(b), tp.tensor(a_values @ b_values), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_conversions_item_tolist_and_allclose(device):
    t = tp.tensor([[1.5, 2.5]], device=device)
    assert t.item if t.numel() != 1 else True
    assert t[0, 1].item() == 2.5 and t.tolist() == [[1.5, 2.5]]
    assert t.to(tp.float64).dtype is tp.float64 and t.to(tp.float64).tolist() == [[1.5, 2.5]]
    assert t.to(device) is t and t.to(device, copy=True) is not t
    assert t.cpu().device == tp.device("cpu")
    assert tp.allclose(t, tp.tensor([[1.5, 2.5000001]]))
    assert not tp.allclose(t, tp.tensor([[1.5, 2.6]]))
    assert tp.allclose(tp.tensor([math.nan]), tp.tensor([math.nan]), equal_nan=True)
    with pytest.raises(ValueError, match="item\\(\\) needs a tensor with exactly one element"):
        t.item()


def test_cpu_tensors_are_numpy_underneath():
    array = numpy.arange(6, dtype=numpy.int32)
    t = tp.as_tensor(array)
    assert t.data_ptr() == array.ctypes.data
    t[0] = 42
    assert array[0] == 42 and t.numpy() is not None and t.numpy()[0] == 42
    with pytest.raises(TypeError, match="numpy has no bfloat16"):
        tp.zeros(2, dtype=tp.bfloat16).numpy()


def test_pageable_cpu_tensors_are_not_pinned():
    # numpy memory is pageable; is_pinned() answers without initialising CUDA (and without a
    # GPU there is nothing to ask). tests/memory/test_host_copies.py covers pinned memory.
    base = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    for tensor in (base, base[0], base.t(), base[0].expand(3, 2), tp.empty(0),
                   tp.as_tensor(numpy.zeros(3, dtype=numpy.int16)), tp.zeros(2, dtype=tp.bfloat16)):
        assert tensor.is_pinned() is False


@pytest.mark.parametrize("device", DEVICES)
def test_errors_name_both_operands(device):
    a = tp.zeros(2, 3, device=device)
    with pytest.raises(ValueError, match="add: The size of tensor a \\(3\\) must match the size of "
                                         "tensor b \\(2\\) at non-singleton dimension 1"):
        a + tp.zeros(2, 2, device=device)
    assert (a + tp.zeros(2, 3, dtype=tp.int64, device=device)).dtype is tp.float32  # promoted
    with pytest.raises(TypeError, match="Subtraction, the `-` operator, with a bool tensor is "
                                        "not supported"):
        tp.zeros(2, dtype=tp.bool, device=device) - 1
    assert (tp.zeros(2, dtype=tp.bool, device=device)
            + tp.zeros(2, dtype=tp.int64, device=device)).dtype is tp.int64
    with pytest.raises(TypeError, match="matmul: expected both operands to have the same dtype, "
                                        "but got float32 and float64"):
        a @ tp.zeros(3, 2, dtype=tp.float64, device=device)
    with pytest.raises(ValueError, match="cannot be multiplied \\(3 != 2\\)"):
        a @ tp.zeros(2, 2, device=device)
    with pytest.raises(TypeError, match="the other operand must be a tensor or a Python scalar"):
        a + "x"
    with pytest.raises(ValueError, match="copy_: The size of tensor a \\(3\\) must match the size "
                                         "of tensor b \\(2\\)"):
        a.copy_(tp.zeros(2, device=device))
    with pytest.raises(ValueError, match="copy_: the source's shape \\(2, 1, 3\\) does not "
                                         "broadcast to this tensor's shape \\(2, 3\\)"):
        a.copy_(tp.zeros(2, 1, 3, device=device))


@pytest.mark.gpu
def test_cross_device_mixing_names_both_devices():
    with pytest.raises(ValueError, match="different devices, cuda:0 and cpu"):
        tp.zeros(2, device="cuda") + tp.zeros(2)


def test_factory_argument_errors():
    with pytest.raises(ValueError, match="size must be non-negative ints"):
        tp.zeros(-1)
    with pytest.raises(TypeError, match="dtype must be a tensorplay dtype"):
        tp.zeros(2, dtype="float32")
    with pytest.raises(ValueError, match="unknown device type in 'tpu'"):
        tp.zeros(2, device="tpu")
    with pytest.raises(TypeError, match="tensors are made by factories"):
        tp.Tensor()
    with pytest.raises(ValueError, match="step must be non-zero"):
        tp.arange(0, 5, 0)


@pytest.mark.gpu
@pytest.mark.parametrize("non_blocking", [False, True])
def test_host_device_copies_with_strides(non_blocking):
    host = tp.arange(48, dtype=tp.float32).reshape(6, 8)
    device = tp.zeros(6, 8, device="cuda")
    device.copy_(host, non_blocking=non_blocking)
    tp.accelerator.synchronize()
    assert device.tolist() == host.tolist()
    strided_target = tp.zeros(6, 16, device="cuda")[:, ::2]
    strided_target.copy_(host[:, :], non_blocking=non_blocking)
    assert strided_target.tolist() == host.tolist()
    back = tp.zeros(3, 4, dtype=tp.float64)
    back.copy_(device[::2, ::2])
    assert back.tolist() == host[::2, ::2].tolist()
    assert device.cuda() is device and host.cuda().device == tp.device("cuda:0")


@pytest.mark.gpu
def test_work_on_a_non_default_stream_is_ordered():
    side = tp.cuda.Stream()
    with tp.cuda.stream(side):
        a = tp.full((1 << 24,), 2.0, device="cuda")
        b = a * 3 + 1
        assert b.sum().item() == 7.0 * (1 << 24)  # same stream: ordered without a sync
        a.fill_(5.0)
    main = tp.accelerator.current_stream()
    main.wait_stream(side)  # the main stream now sees everything queued on side
    assert (a == 5.0).sum().item() == 1 << 24 and b[:3].tolist() == [7.0, 7.0, 7.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("start, stop", [(0, 8), (1, 9), (0, 9), (2, 7)])
def test_add_with_wide_and_unaligned_memory(device, start, stop):
    # Aligned multiples of four take the four-lane kernel; offsets and odd counts do not.
    x = tp.arange(16, dtype=tp.float32, device=device)
    view = x[start:stop]
    assert (view + view).tolist() == [2.0 * v for v in range(start, stop)]


# -- values against their dtype (dtypes.pyx, Note [Values that fit]) ----------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: tp.full((3,), 300, dtype=tp.uint8),
     "fill_value 300 does not fit uint8, which holds 0 to 255"),
    (lambda: tp.full((3,), -1, dtype=tp.uint8), "fill_value -1 does not fit uint8"),
    (lambda: tp.full((3,), 2 ** 63, dtype=tp.int64), "does not fit int64"),
    (lambda: tp.full((3,), float("nan"), dtype=tp.int32),
     "fill_value nan cannot be stored in int32"),
    (lambda: tp.full((3,), float("-inf"), dtype=tp.int16), "it is not a finite number"),
    (lambda: tp.full((2,), 65520.0, dtype=tp.float16), "beyond the largest float16 \\(65504\\)"),
    (lambda: tp.full((2,), 10 ** 39, dtype=tp.float32), "beyond the largest float32"),
    (lambda: tp.full((2,), 3.4e38, dtype=tp.bfloat16), "beyond the largest bfloat16"),
    (lambda: tp.full((2,), 10 ** 5000, dtype=tp.float64), "an int of 16610 bits is beyond"),
    (lambda: tp.zeros(3, dtype=tp.int8).fill_(-129), "value -129 does not fit int8"),
    (lambda: tp.tensor([1, 300], dtype=tp.uint8), "data 300 does not fit uint8"),
    (lambda: tp.tensor([1.0, float("nan")], dtype=tp.int64),
     "data holds values that are not finite"),
    (lambda: tp.tensor([1e39], dtype=tp.float32), "data 1e\\+39 is beyond the largest float32"),
])
def test_values_a_dtype_cannot_hold_are_refused_naming_value_and_dtype(make, message):
    with pytest.raises(ValueError, match=message) as raised:
        make()
    assert len(str(raised.value)) < 600


@pytest.mark.parametrize("data, dtype, message", [
    ([2 ** 63], None, "data 9223372036854775808 does not fit int64"),
    ([2 ** 64], None, "data 18446744073709551616 does not fit int64, which holds "
                      "-9223372036854775808 to 9223372036854775807"),
    ([2 ** 70, 1], None, "data 1180591620717411303424 does not fit int64"),
    ([-2 ** 63 - 1], None, "data -9223372036854775809 does not fit int64"),
    ([2 ** 63, -1], None, "data 9223372036854775808 does not fit int64"),  # numpy: float64
    ([[1, 2], [3, 2 ** 64]], None, "data 18446744073709551616 does not fit int64"),
    ([[[True], [2 ** 64]]], None, "data 18446744073709551616 does not fit int64"),
    (((1, 2), (3, -2 ** 100)), None, "data -1267650600228229401496703205376 does not fit int64"),
    ([2 ** 64], "int8", "data 18446744073709551616 does not fit int8, which holds -128 to 127"),
    ([300, 2 ** 64], "uint8", "data 18446744073709551616 does not fit uint8"),
    ([2 ** 64], "int32", "does not fit int32"),
    ([2 ** 200, 1.5], None, "data 1606938044258990275541962092341162602522202993782792835301376"
                            " is beyond the largest float32"),
    ([2 ** 64], "float16", "is beyond the largest float16"),
    ([10 ** 400], "float64", "is beyond the largest float64"),
])
def test_python_ints_beyond_int64_are_refused_naming_value_and_dtype(data, dtype, message):
    with pytest.raises(ValueError, match=message):
        tp.tensor(data, dtype=None if dtype is None else getattr(tp, dtype))


def test_python_ints_beyond_int64_that_the_dtype_holds_are_stored():
    assert tp.tensor([2 ** 64], dtype=tp.float32).tolist() == [float(2 ** 64)]
    assert tp.tensor([2 ** 64, -1], dtype=tp.float64).tolist() == [float(2 ** 64), -1.0]
    assert tp.tensor([2 ** 63, 0.5]).dtype is tp.float32  # a float among them: float32
    assert tp.tensor([2 ** 64, 0], dtype=tp.bool).tolist() == [True, False]
    big = tp.tensor([[1.0e19, -1.0]])  # floats of that size are read as before
    assert big.dtype is tp.float32 and big.shape == (1, 2)
    assert tp.tensor([numpy.float64(1e19), numpy.float64(2.0)]).dtype is tp.float32
    with pytest.raises(TypeError, match="data must be numbers"):
        tp.tensor([2 ** 64, "x"])


def test_values_a_dtype_holds_are_stored_as_pytorch_stores_them():
    assert tp.full((2,), 65519.0, dtype=tp.float16).tolist() == [65504.0, 65504.0]  # rounds down
    assert all(math.isnan(v) for v in tp.full((2,), float("nan"), dtype=tp.float32).tolist())
    assert tp.full((2,), float("inf"), dtype=tp.float16).tolist() == [math.inf] * 2
    assert tp.full((2,), 2.9, dtype=tp.int8).tolist() == [2, 2]  # truncated toward zero
    assert tp.full((2,), -128, dtype=tp.int8).tolist() == [-128, -128]
    assert tp.full((2,), 7, dtype=tp.bool).tolist() == [True, True]  # truthiness
    assert tp.tensor([0, 255], dtype=tp.uint8).tolist() == [0, 255]
    assert tp.tensor([], dtype=tp.int8).tolist() == []


@pytest.mark.parametrize("make, error, message", [
    (lambda: tp.zeros(2).uniform_(0, 10 ** 400), ValueError,
     r"uniform_\(\): high 1000.* is too large for a float"),
    (lambda: tp.zeros(2).normal_(10 ** 400, 1), ValueError, r"normal_\(\): mean .* too large"),
    (lambda: tp.arange(10 ** 400), ValueError, "start .* does not fit in int64"),
    (lambda: tp.arange(0.0, float("inf")), ValueError, "end must be a finite number, got inf"),
    (lambda: tp.zeros(2) + 10 ** 400, ValueError, "add: the other operand .* does not fit in 64"),
    (lambda: tp.zeros(2) * 2 ** 64, ValueError, "mul: the other operand 18446744073709551616"),
    (lambda: tp.zeros(10 ** 5000), ValueError, r"size must be .*got \(an int of 16610 bits\)"),
    (lambda: tp.device("cuda:" + "9" * 5000), ValueError, "device index '9999.* is too large"),
    (lambda: tp.device("cuda:\u0661"), ValueError, "invalid device index"),
])
def test_huge_numbers_are_reported_with_the_arguments_name_and_a_bounded_message(make, error,
                                                                                 message):
    with pytest.raises(error, match=message) as raised:
        make()
    assert len(str(raised.value)) < 600


def test_arange_refuses_a_length_no_tensor_can_hold_before_making_anything():
    for bounds in ((0, 2 ** 62), (0.0, 1e300, 1e-300)):
        with pytest.raises(ValueError, match="elements, more than a tensor can hold"):
            tp.arange(*bounds)
    assert tp.arange(10, 0, -3).tolist() == [10, 7, 4, 1]


# Nested data tensor() cannot read: PyTorch's error types (ValueError "expected sequence of
# length N at dim D (got M)" for a ragged list, TypeError for an element of the wrong kind),
# naming the element's position and type (factories.pyx, Note [Nested data]).
@pytest.mark.parametrize("data, error, message", [
    ([[1, 2], [3]], ValueError,
     r"expected sequence of length 2 at dim 1 \(got 1\): data\[1\] has 1 elements"),
    ([[1, 2, 3], [4, 5]], ValueError, r"expected sequence of length 3 at dim 1 \(got 2\)"),
    ([[[1, 2], [3, 4]], [[5, 6], [7]]], ValueError,
     r"expected sequence of length 2 at dim 2 \(got 1\): data\[1\]\[1\] has 1 elements, "
     r"data\[0\]\[0\] has 2"),
    ([[1], []], ValueError, r"expected sequence of length 1 at dim 1 \(got 0\): data\[1\]"),
    ([[], [1]], ValueError, r"expected sequence of length 0 at dim 1 \(got 1\): data\[1\]"),
    ([[1, 2], 3], TypeError, r"not a sequence: data\[1\] must be a sequence of length 2 at "
                             r"dim 1, as data\[0\] is, got int"),
    ([1, [2]], TypeError, r"data\[1\] must be a number, as data\[0\] is, got list"),
    ([[1.0, 2.0], (3.0, [4.0])], TypeError, r"data\[1\]\[1\] must be a number.*got list"),
    (["a"], TypeError, r"data must be numbers.*got str at data\[0\]"),
    ([[1, 2], [3, "a"]], TypeError, r"got str at data\[1\]\[1\]"),
    ([[1, 2], [3, None]], TypeError, r"got NoneType at data\[1\]\[1\]"),
    ([1, object()], TypeError, r"got object at data\[1\]"),
    ([{"a": 1}], TypeError, r"got dict at data\[0\]"),
    ([1, 2j], TypeError, r"got complex at data\[1\]"),
    ([numpy.ones(2), numpy.ones(3)], ValueError,
     r"expected sequence of length 2 at dim 1 \(got 3\): data\[1\]"),
    ((1, "b"), TypeError, r"got str at data\[1\]"),
])
def test_nested_data_errors_name_the_position_and_type(data, error, message):
    with pytest.raises(error, match=message) as raised:
        tp.tensor(data)
    assert "inhomogeneous" not in str(raised.value)
    assert len(str(raised.value)) < 400


def test_nested_data_errors_have_pytorchs_types():
    torch = import_or_skip("torch")
    for data in ([[1, 2], [3]], [[1, 2, 3], [4, 5]], [[[1, 2], [3, 4]], [[5, 6], [7]]],
                 [[1, 2], 3], [1, [2]], [[1, "a"]], [[1], []]):
        with pytest.raises(Exception) as theirs:
            torch.tensor(data)
        with pytest.raises(Exception) as ours:
            tp.tensor(data)
        assert isinstance(ours.value, type(theirs.value)), (data, ours.value, theirs.value)
        if isinstance(theirs.value, ValueError):  # the same words first
            assert str(ours.value).startswith(str(theirs.value)), (ours.value, theirs.value)


def test_deeply_nested_ragged_data_is_reported_without_recursion():
    deep = [1]
    for _ in range(3000):
        deep = [deep]
    with pytest.raises((TypeError, ValueError)) as raised:
        tp.tensor([deep, 2])
    assert len(str(raised.value)) < 400


FILL_VALUES = {"bool": [True, False, 0, 1, 0.0, 2.5], "uint8": [0, 255, 7, True],
               "int8": [-128, 127, -1, 0], "int16": [-32768, 32767, -2],
               "int32": [-2 ** 31, 2 ** 31 - 1, -3], "int64": [-2 ** 63, 2 ** 63 - 1, -4, False],
               "float16": [0.1, -65504.0, 3, math.inf, math.nan],
               "bfloat16": [0.1, -1e38, 3, -math.inf, math.nan],
               "float32": [0.1, -3.4e38, 1e-45, 2 ** 24 + 1, 3, math.inf, math.nan, -0.0, True],
               "float64": [0.1, -1.7e308, 5e-324, 2 ** 53 + 1, -math.inf, math.nan, -0.0]}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_fill_stores_each_value_as_numpy_does(device, name):
    # Every value a dtype holds, bit for bit as numpy's cast of it (CUDA takes the usual ints
    # and floats in C, the rest through numpy).
    for value in FILL_VALUES[name]:
        tensor = tp.zeros(5, dtype=dtype(name), device=device)
        tensor.fill_(value)
        if name == "bfloat16":
            got = tensor.cpu().to(tp.float32).numpy()
            expected = numpy.full(5, value, dtype=numpy.float32)
            expected = tp.tensor(expected).to(tp.bfloat16).to(tp.float32).numpy()
        else:
            got = tensor.cpu().numpy()
            expected = numpy.full(5, numpy.array(value).astype(name))
        assert got.tobytes() == expected.tobytes(), f"fill_({value!r}) of {name}"
