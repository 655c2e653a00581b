"""& | ^ ~ << >> of integer tensors (elementwise.pyx, Note [Bitwise operations]) on the CPU and
on CUDA (marked gpu): values, type promotion, Python ints on either side, in-place forms and
methods, the shift limits, the refusal of floating-point operands, captures; against numpy and,
where it is installed, PyTorch.

Ported from PyTorch's test/test_binary_ufuncs.py (TestBinaryUfuncs.test_bitwise_and,
test_bitwise_or, test_bitwise_xor: tensor, scalar and in-place forms and the bool case;
test_shift_limits: shifts by the dtype's width or more give 0 left and the sign right) and
test/test_unary_ufuncs.py (test_bitwise_not).
"""
import itertools

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
INTEGERS = ["uint8", "int8", "int16", "int32", "int64"]
BITS = {"uint8": 8, "int8": 8, "int16": 16, "int32": 32, "int64": 64}


def limits(dtype):
    info = numpy.iinfo(getattr(numpy, dtype))
    return int(info.min), int(info.max)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("name, expected, expected_scalar", [
    ("bitwise_and", [0, 0, 3], [0, 2, 2]),
    ("bitwise_or", [3, -1, 3], [3, -2, 3]),
    ("bitwise_xor", [3, -1, 0], [3, -4, 1]),
])
def test_bitwise_and_or_xor(device, dtype, name, expected, expected_scalar):
    # test_bitwise_and / _or / _xor: a = [1, -2, 3], b = [2, 1, 3], the scalar 2.
    data = [1, -2, 3] if dtype != "uint8" else [1, 254, 3]
    wrap = (lambda values: [v % 256 for v in values]) if dtype == "uint8" else list
    a = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    b = tp.tensor([2, 1, 3], dtype=getattr(tp, dtype), device=device)
    operator = {"bitwise_and": lambda x, y: x & y, "bitwise_or": lambda x, y: x | y,
                "bitwise_xor": lambda x, y: x ^ y}[name]
    assert getattr(a, name)(b).tolist() == wrap(expected)
    assert getattr(a, name)(2).tolist() == wrap(expected_scalar)
    assert operator(a, b).tolist() == wrap(expected) and operator(2, a).tolist() == \
        wrap(expected_scalar)
    assert operator(a, b).dtype is a.dtype
    in_place = a.clone()
    getattr(in_place, name + "_")(b)
    assert in_place.tolist() == wrap(expected)
    in_place = a.clone()
    result = {"bitwise_and": in_place.__iand__, "bitwise_or": in_place.__ior__,
              "bitwise_xor": in_place.__ixor__}[name](2)
    assert result is in_place and in_place.tolist() == wrap(expected_scalar)
    masks = (tp.tensor([True, True, False], device=device),
             tp.tensor([False, True, False], device=device))
    assert getattr(masks[0], name)(masks[1]).tolist() == [
        bool(x) for x in operator(numpy.array([1, 1, 0]), numpy.array([0, 1, 0]))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS)
def test_shift_limits(device, dtype):
    # test_shift_limits: for every shift of the dtype's width or more, << gives 0 and >> gives
    # clamp(input, -1, 0); numpy's own shifts agree for the in-range amounts.
    low, high = limits(dtype)
    draw = numpy.random.default_rng(0)
    inputs = ([-1, 0, 1] if dtype != "uint8" else [0, 1, 255], [low, high],
              draw.integers(low, high, 4096, endpoint=True).tolist())
    for data in inputs:
        x = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
        for shift in range(BITS[dtype], 100):
            assert (x << shift).tolist() == [0] * len(data), f"<< {shift}"
            assert (x >> shift).tolist() == [min(max(v, -1), 0) for v in data], f">> {shift}"
        for shift in range(BITS[dtype]):
            array = numpy.array(data, dtype=getattr(numpy, dtype))
            assert (x << shift).tolist() == numpy.left_shift(array, shift).tolist()
            assert (x >> shift).tolist() == numpy.right_shift(array, shift).tolist()
        for shift in (-1, -100):  # PyTorch: as a shift of the width or more
            assert (x << shift).tolist() == [0] * len(data)
            assert (x >> shift).tolist() == [min(max(v, -1), 0) for v in data]


@pytest.mark.parametrize("device", DEVICES)
def test_shift_forms_and_promotion(device):
    x = tp.tensor([1, 2, -8], dtype=tp.int32, device=device)
    amounts = tp.tensor([1, 2, 3], device=device)  # int64
    assert (x << amounts).tolist() == [2, 8, -64] and (x << amounts).dtype is tp.int64
    assert (x >> amounts).tolist() == [0, 0, -1]
    assert (1 << tp.tensor([0, 3, 9], dtype=tp.uint8, device=device)).tolist() == [1, 8, 0]
    assert (-64 >> amounts).tolist() == [-32, -16, -8]
    assert x.bitwise_left_shift(2).tolist() == [4, 8, -32]
    assert x.bitwise_right_shift(1).tolist() == [0, 1, -4]
    y = x.clone()
    y <<= 2
    y >>= 1
    assert y.tolist() == [2, 4, -16] and y.dtype is tp.int32
    y.bitwise_left_shift_(amounts)  # int64 amounts into int32: PyTorch's can_cast allows it
    assert y.tolist() == [4, 16, -128] and y.dtype is tp.int32
    mask = tp.tensor([True, False], device=device)
    assert (mask << 2).tolist() == [4, 0] and (mask << 2).dtype is tp.int64
    assert (mask & 3).tolist() == [1, 0] and (mask & 3).dtype is tp.int64
    assert (mask | tp.tensor([2, 2], dtype=tp.int16, device=device)).dtype is tp.int16
    assert (tp.tensor([200], dtype=tp.uint8, device=device) & 300).tolist() == [8]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTEGERS + ["bool"])
def test_bitwise_not(device, dtype):
    # test_bitwise_not: ~ and bitwise_not() against numpy's invert, the dtype kept.
    data = [True, False] if dtype == "bool" else list(limits(dtype)) + [0, 5]
    x = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
    expected = numpy.invert(numpy.array(data, dtype=getattr(numpy, dtype))).tolist()
    assert (~x).tolist() == expected and x.bitwise_not().tolist() == expected
    assert (~x).dtype is x.dtype


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes_against_numpy(device):
    values = {"uint8": [200, 3, 0, 255], "int8": [-100, 3, 0, 127],
              "int16": [-3000, 3, 0, -1], "int32": [-5, 2**30, 7, -2**31],
              "int64": [-5, 2**40, 7, 2**62 + 3]}
    for left, right in itertools.product(INTEGERS, repeat=2):
        a = tp.tensor(values[left], dtype=getattr(tp, left), device=device)
        b = tp.tensor(values[right], dtype=getattr(tp, right), device=device)
        na = numpy.array(values[left], dtype=getattr(numpy, left))
        nb = numpy.array(values[right], dtype=getattr(numpy, right))
        common = numpy.promote_types(na.dtype, nb.dtype)
        for ours, theirs in ((a & b, numpy.bitwise_and), (a | b, numpy.bitwise_or),
                             (a ^ b, numpy.bitwise_xor)):
            assert ours.tolist() == theirs(na.astype(common), nb.astype(common)).tolist()
            assert str(ours.dtype).split(".")[-1] == common.name


@pytest.mark.parametrize("device", DEVICES)
def test_floating_operands_are_refused(device):
    x = tp.tensor([1.0, 2.0], device=device)
    integers = tp.tensor([1, 2], device=device)
    for operation in (lambda: x & 1, lambda: integers | x, lambda: integers ^ 1.5,
                      lambda: x << 1, lambda: 1 >> x, lambda: x.bitwise_and(integers)):
        with pytest.raises(NotImplementedError, match="not implemented for"):
            operation()
    with pytest.raises(TypeError, match="only implemented on integer and Boolean-type"):
        ~x
    mask = tp.tensor([True, False], device=device)
    with pytest.raises(NotImplementedError, match="'Bool'"):
        mask << mask
    before = integers.tolist()
    with pytest.raises(TypeError):
        integers &= x
    assert integers.tolist() == before


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([1, 6, -8], dtype=tp.int32, device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = (x & 3, x | 8, x ^ 5, x << 2, x >> 1, ~x)
    x.copy_(tp.tensor([7, -2, 40], dtype=tp.int32, device="cuda"))
    graph.replay()
    data = numpy.array([7, -2, 40], dtype=numpy.int32)
    expected = (data & 3, data | 8, data ^ 5, data << 2, data >> 1, ~data)
    for result, want in zip(outputs, expected):
        assert result.tolist() == want.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_against_pytorch(device):
    torch = import_or_skip("torch")
    for dtype in INTEGERS:
        low, high = limits(dtype)
        data = [low, -1 if dtype != "uint8" else 1, 0, 3, high]
        ours = tp.tensor(data, dtype=getattr(tp, dtype), device=device)
        theirs = torch.tensor(data, dtype=getattr(torch, dtype))
        for shift in (0, 1, BITS[dtype] - 1, BITS[dtype], 63, 64, 99):
            assert (ours << shift).tolist() == (theirs << shift).tolist()
            assert (ours >> shift).tolist() == (theirs >> shift).tolist()
        for operation in (lambda a: a & 6, lambda a: a | -1 if dtype != "uint8" else a | 1,
                          lambda a: 5 ^ a, lambda a: ~a, lambda a: 1 << (a & 7),
                          lambda a: a.bitwise_and(a >> 1)):
            assert operation(ours).tolist() == operation(theirs).tolist()
