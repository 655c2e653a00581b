"""Kernels launched with their parameters packed in one buffer (runtime/kernels/nvrtc.pyx, Note
[Packed parameters]): binary, binary_vector4, binary_scalar and unary. Each struct's layout is
checked against the driver's cuFuncGetParamInfo when its kernel loads, so every test here loads
them for every dtype; the results are numpy's, eagerly (cuLaunchKernel, then the eager graph),
inside a capture, and the captured nodes report their arguments as the pointer form does.
"""
import numpy
import pytest

import tensorplay
from tensorplay import cuda

pytestmark = pytest.mark.gpu

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTEGERS = ("int8", "uint8", "int16", "int32", "int64")
COUNT = 1001  # not a multiple of 4: binary, not binary_vector4


def pair(dtype, count):
    """Two operands whose sums, products and differences are exact in every dtype."""
    positions = numpy.arange(count)
    a = tensorplay.tensor((positions % 50).tolist(), dtype=getattr(tensorplay, dtype),
                          device="cuda")
    b = tensorplay.tensor((positions % 7).tolist(), dtype=getattr(tensorplay, dtype),
                          device="cuda")
    return a, b


def as_float64(tensor):
    return tensor.to(tensorplay.float64).cpu().numpy()


@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
@pytest.mark.parametrize("count", [COUNT, 1024])
def test_each_packed_kernel_computes_numpys_result_for_each_dtype(dtype, count):
    a, b = pair(dtype, count)
    expected_a, expected_b = as_float64(a), as_float64(b)
    for _ in range(3):  # the first launch through cuLaunchKernel, then through the eager graph
        assert numpy.array_equal(as_float64(a + b), expected_a + expected_b)
        assert numpy.array_equal(as_float64(a * 2), expected_a * 2)
        assert numpy.array_equal(as_float64(10 - b), 10 - expected_b)  # reversed
        if dtype in FLOATS:
            assert numpy.array_equal(as_float64(-b), -expected_b)  # unary
            assert numpy.array_equal(as_float64(b + 0.5), expected_b + 0.5)  # a float scalar


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_captured_packed_launches_replay_and_report_their_arguments(dtype):
    a, b = pair(dtype, COUNT)
    out = a + b
    a - 1  # loaded before the capture
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        total = a + b
        shifted = a - 1
    graph.replay()
    assert numpy.array_equal(as_float64(total), as_float64(out))
    assert numpy.array_equal(as_float64(shifted), as_float64(a) - 1)
    nodes = {node.name: node for node in graph.kernel_nodes()}
    assert nodes["binary"].arguments["count"] == COUNT
    assert nodes["binary_scalar"].arguments["count"] == COUNT
    assert nodes["binary_scalar"].arguments["scalar"] == 1
    # A node's arguments set from the packed form: the scalar of a - 1 becomes 5.
    graph.set_kernel_node_params(nodes["binary_scalar"], arguments={"scalar": 5})
    graph.replay()
    assert numpy.array_equal(as_float64(shifted), as_float64(a) - 5)


def test_a_capture_of_many_packed_launches_replays_each():
    # The capture benchmark's body (bench/bench_graphs.py): 1024 launches of x += 1.
    x = tensorplay.zeros(32, device="cuda")
    x += 1
    graph = cuda.CUDAGraph()
    graph.capture_begin()
    for _ in range(1024):
        x += 1
    graph.capture_end()
    assert x.cpu().numpy().tolist() == [1.0] * 32  # captured, not run
    graph.replay()
    graph.replay()
    assert x.cpu().numpy().tolist() == [2049.0] * 32
