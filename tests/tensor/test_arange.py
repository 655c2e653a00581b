"""arange() on the CPU and on CUDA (marked gpu), where a kernel computes it (factories.pyx,
Note [Arange on the device]), and the operations built on it under graph capture.

Ported from the peers' own tests:
- CuPy's tests/cupy_tests/creation_tests/test_ranges.py, TestRanges: test_arange, test_arange2 to
  test_arange8 (counts, starts, steps, negative steps), test_arange_no_dtype_int,
  test_arange_no_dtype_float and test_arange_negative_size, each compared with numpy for every
  dtype it takes;
- PyTorch's test/test_tensor_creation_ops.py: test_arange_device_vs_cpu (the CUDA result equals
  the CPU one for each dtype), test_arange's float cases (-4.0 to 4.0 by 0.01 has 800
  elements; steps of 1/3 and 0.1), test_arange_bfloat16 and test_arange_inference (the
  inferred dtypes);
- PyTorch's test/test_cuda.py graph tests capture factories and the ops built on them
  (test_graph_capture_simple and the like): here arange, tril/triu, flip, roll, gather,
  cross_entropy and one_hot are captured and replay the eager values.
"""
import random

import numpy
import pytest

import tensorplay as tp
from tensorplay.nn import functional as F

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NUMERIC = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
           "float64"]
NUMPY = {"bfloat16": "float32"}  # numpy has no bfloat16: compared through float32


def as_numpy(tensor):
    if tensor.dtype is tp.bfloat16:
        tensor = tensor.to(tp.float32)
    return numpy.asarray(tensor.cpu().numpy())


# TestRanges' calls: (args, kwargs) of arange, for numpy and for ours.
CUPY_CASES = [((10,), {}), ((5, 10), {}), ((1, 11, 2), {}), ((20, 2, -3), {}),
              ((10, 11), {}), ((10, 8, -1), {}), ((0, 2), {}), ((3, 1), {})]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("args, kwargs", CUPY_CASES)
def test_cupy_ranges_match_numpy(device, dtype, args, kwargs):
    ours = tp.arange(*args, dtype=getattr(tp, dtype), device=device, **kwargs)
    expected = numpy.arange(*args, dtype=NUMPY.get(dtype, dtype))
    assert ours.shape == expected.shape
    assert ours.dtype is getattr(tp, dtype)
    numpy.testing.assert_array_equal(as_numpy(ours), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_inferred_dtypes_and_float_steps(device):
    # test_arange_no_dtype_int / _float and PyTorch's test_arange_inference
    assert tp.arange(1, 11, 2, device=device).dtype is tp.int64
    assert tp.arange(1.0, 11.0, 2.0, device=device).dtype is tp.float32
    assert tp.arange(1, 11, 2.0, device=device).dtype is tp.float32
    # test_arange's float cases
    assert tp.arange(-4.0, 4.0, 0.01, device=device).numel() == 800
    for args in ((0, 1, 1 / 3), (0, 1, 0.1), (-4.0, 4.0, 0.01), (1.0, 11.0, 2.0)):
        ours = tp.arange(*args, dtype=tp.float64, device=device)
        numpy.testing.assert_array_equal(as_numpy(ours), numpy.arange(*args))
    # test_arange_bfloat16
    assert tp.arange(0, 4, dtype=tp.bfloat16, device=device).tolist() == [0, 1, 2, 3]
    assert tp.arange(0, 6, step=2, dtype=tp.bfloat16, device=device).tolist() == [0, 2, 4]


def random_ranges(count, seed, low, high):
    """(start, end, step) of mixed ints and floats within [low, high] (so that a float fits
    every integer dtype it is converted to: beyond, C leaves the conversion undefined)."""
    rng = random.Random(seed)
    for _ in range(count):
        start, end = (rng.choice([rng.randint(low, high), rng.uniform(low, high)])
                      for _ in range(2))
        step = rng.choice([rng.randint(1, 7), rng.uniform(0.05, 3), 0.1, 1 / 3])
        yield start, end, step if end >= start else -step


# Bounds that keep every value within the dtype.
BOUNDS = {"bool": (-500, 500), "uint8": (0, 255), "int8": (-128, 127)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["bool"] + NUMERIC)
def test_cuda_equals_the_cpu_bit_for_bit(dtype):
    # PyTorch's test_arange_device_vs_cpu, over many ranges of ints and floats; float16's
    # include values that a rounding through float32 would change (Note [Arange on the device]).
    chosen = getattr(tp, dtype)
    for start, end, step in random_ranges(200, len(dtype), *BOUNDS.get(dtype, (-500, 500))):
        cpu = tp.arange(start, end, step, dtype=chosen)
        cuda = tp.arange(start, end, step, dtype=chosen, device="cuda")
        assert cuda.shape == cpu.shape, (start, end, step)
        if dtype == "bfloat16":
            cpu, cuda = cpu.to(tp.float32), cuda.to(tp.float32)
        assert numpy.array_equal(cuda.cpu().numpy().view(numpy.uint8),
                                 cpu.numpy().view(numpy.uint8)), (start, end, step)


@pytest.mark.gpu
def test_arange_and_the_ops_built_on_it_are_captured(quiet_device):
    rng = numpy.random.default_rng(4)
    x = tp.tensor(rng.standard_normal((5, 7)), dtype=tp.float32, device="cuda")
    logits = tp.tensor(rng.standard_normal((6, 13)), dtype=tp.float32, device="cuda")
    labels = tp.tensor(rng.integers(0, 13, 6), device="cuda")

    def work():
        return [tp.arange(3, 40, 3, device="cuda"), tp.arange(0.5, 2.0, 0.25, device="cuda"),
                x.tril(), x.triu(1), x.flip(0, 1), x.roll(2, 1), x.roll(-3),
                x.gather(1, labels[:5].reshape(5, 1) % 7), F.cross_entropy(logits, labels),
                F.one_hot(labels, 13)]

    eager = [as_numpy(result) for result in work()]
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        captured = work()
    graph.replay()
    for got, expected in zip(captured, eager):
        numpy.testing.assert_array_equal(as_numpy(got), expected)
    x.copy_(x * 2)  # the replay reads the new values
    graph.replay()
    numpy.testing.assert_array_equal(as_numpy(captured[2]), numpy.tril(eager[2] * 2))


@pytest.mark.gpu
def test_class_indices_made_inside_a_capture_are_not_kept(quiet_device):
    # Made from the graph's pool, freed with it: the process-wide cache must not hold them.
    from tensorplay._runtime.autograd import nn as runtime_nn
    labels = tp.tensor([3, 1030], device="cuda")
    F.one_hot(tp.tensor([0, 2], device="cuda"), 3)  # its kernels loaded
    kept = set(runtime_nn._CLASS_INDICES)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        rows = F.one_hot(labels, 1031)  # a class count no other test uses
    assert set(runtime_nn._CLASS_INDICES) == kept
    graph.replay()
    expected = numpy.zeros((2, 1031), dtype=numpy.int64)
    expected[0, 3] = expected[1, 1030] = 1
    numpy.testing.assert_array_equal(as_numpy(rows), expected)
    graph.reset()
    numpy.testing.assert_array_equal(as_numpy(F.one_hot(labels, 1031)), expected)
    assert (1031, 0) in runtime_nn._CLASS_INDICES  # made eagerly: kept
