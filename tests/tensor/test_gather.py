"""gather() (tensorplay.gather and Tensor.gather) on the CPU and on CUDA (marked gpu).

Ported from the peers' own tests:
- PyTorch's test/test_scatter_gather_ops.py, test_gather: random sizes, a random dimension, an
  index no larger than the source apart from that dimension, each element checked against
  the loop src[i][index[i][j][k]][k] (here numpy's take_along_axis over the source cut to the
  index's sizes); test_gather_bool; and the OpInfo entry "gather" of
  torch/testing/_internal/common_methods_invocations.py (sample_inputs_gather: dims 0 and 1,
  repeated indices, 0-d input and index, an empty index), values and gradients;
- CuPy's tests/cupy_tests/indexing_tests/test_indexing.py, TestTakeAlongAxis: every axis,
  negative axes included, against numpy's take_along_axis.
Errors are PyTorch's, compared with torch where it is installed.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = ["float32", "float64", "int64", "int32", "bool", "float16"]


def as_numpy(tensor):
    return numpy.asarray(tensor.cpu().numpy())


def reference(source, dim, index):
    """PyTorch's loop, as numpy's take_along_axis over the source cut to the index's sizes."""
    cut = tuple(slice(0, size) if at != dim % source.ndim else slice(None)
                for at, size in enumerate(index.shape))
    return numpy.take_along_axis(source[cut], index, dim)


def random_case(rng, dtype):
    """PyTorch's test_gather: sizes of 1 to 4 dimensions, a dimension, a fitting index."""
    ndim = int(rng.integers(1, 5))
    sizes = tuple(int(size) for size in rng.integers(1, 6, ndim))
    dim = int(rng.integers(-ndim, ndim))
    index_sizes = tuple(int(rng.integers(1, size + 1)) if at != dim % ndim
                        else int(rng.integers(0, 7)) for at, size in enumerate(sizes))
    source = rng.standard_normal(sizes) * 10
    source = source > 0 if dtype == "bool" else source.astype(dtype)
    index = rng.integers(0, sizes[dim], index_sizes)
    return source, dim, index


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_the_loop_reference(device, dtype):
    rng = numpy.random.default_rng(len(dtype))
    for _ in range(30):
        source, dim, index = random_case(rng, dtype)
        ours = tp.tensor(source, device=device).gather(dim, tp.tensor(index, device=device))
        expected = reference(source, dim, index)
        assert tuple(ours.shape) == expected.shape
        assert ours.dtype is getattr(tp, dtype)
        numpy.testing.assert_array_equal(as_numpy(ours), expected)
        function = tp.gather(tp.tensor(source, device=device), dim,
                             tp.tensor(index.astype(numpy.int32), device=device))
        numpy.testing.assert_array_equal(as_numpy(function), expected)


@pytest.mark.parametrize("device", DEVICES)
def test_every_axis_as_numpys_take_along_axis(device):
    # TestTakeAlongAxis: an index of the source's shape along each axis, negative ones too.
    source = numpy.arange(2 * 3 * 4, dtype=numpy.float64).reshape(2, 3, 4)
    rng = numpy.random.default_rng(1)
    for axis in range(-3, 3):
        index = rng.integers(0, source.shape[axis], source.shape)
        ours = tp.tensor(source, device=device).gather(axis, tp.tensor(index, device=device))
        numpy.testing.assert_array_equal(as_numpy(ours),
                                         numpy.take_along_axis(source, index, axis))


@pytest.mark.parametrize("device", DEVICES)
def test_zero_dimensional_and_empty(device):
    five = tp.tensor(5.0, device=device)
    assert five.gather(0, tp.tensor(0, device=device)).tolist() == 5.0
    assert five.gather(-1, tp.tensor([0, 0], device=device)).tolist() == [5.0, 5.0]
    empty = tp.ones(2, 3, device=device).gather(0, tp.zeros(0, 3, dtype=tp.int64,
                                                            device=device))
    assert tuple(empty.shape) == (0, 3)
    transposed = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device=device).t()  # not contiguous
    assert transposed.gather(1, tp.tensor([[1], [0]], device=device)).tolist() == [[3.0], [2.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_gradient_adds_into_the_positions_read(device):
    rng = numpy.random.default_rng(7)
    source = rng.standard_normal((3, 5))
    index = numpy.array([[0, 0, 4], [2, 2, 2], [1, 3, 0]])
    weights = rng.standard_normal((3, 3))
    x = tp.tensor(source, device=device, requires_grad=True)
    (x.gather(1, tp.tensor(index, device=device)) *
     tp.tensor(weights, device=device)).sum().backward()
    expected = numpy.zeros_like(source)
    numpy.add.at(expected, (numpy.arange(3)[:, None], index), weights)
    numpy.testing.assert_allclose(as_numpy(x.grad), expected, rtol=1e-12, atol=1e-12)


ERRORS = [  # (source shape, dim, index, error, PyTorch's message)
    ((2, 3), 1, [0, 1], RuntimeError,
     "Index tensor must have the same number of dimensions as input tensor"),
    ((2, 3), 0, [[0, 1, 1, 0]], RuntimeError,
     "Size does not match at dimension 1 expected index [1, 4] to be no larger than self "
     "[2, 3] apart from dimension 0"),
    ((2, 3), 1, [[0, 3]], RuntimeError, "index 3 is out of bounds for dimension 1 with size 3"),
    ((2, 3), 1, [[-1, 0]], RuntimeError, "index -1 is out of bounds for dimension 1 with size 3"),
    ((2, 3), 1, [[0.5]], RuntimeError, "gather(): Expected dtype int32/int64 for index"),
    ((2, 3), 2, [[0]], IndexError, "Dimension out of range (expected to be in range of [-2, 1], "
                                   "but got 2)"),
]


@pytest.mark.parametrize("shape, dim, index, error, message", ERRORS)
def test_errors_are_pytorchs(shape, dim, index, error, message):
    x = tp.zeros(*shape)
    with pytest.raises(error) as raised:
        x.gather(dim, tp.tensor(index))
    assert message in str(raised.value)
    torch = import_or_skip("torch")
    with pytest.raises(error) as theirs:
        torch.zeros(*shape).gather(dim, torch.tensor(index))
    assert message in str(theirs.value)


def test_matches_pytorch_values_and_gradients():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(3)
    for _ in range(10):
        source, dim, index = random_case(rng, "float64")
        mine = tp.tensor(source, requires_grad=True)
        theirs = torch.tensor(source, requires_grad=True)
        ours_out = mine.gather(dim, tp.tensor(index))
        their_out = theirs.gather(dim, torch.tensor(index))
        weights = rng.standard_normal(index.shape)
        (ours_out * tp.tensor(weights)).sum().backward()
        (their_out * torch.tensor(weights)).sum().backward()
        numpy.testing.assert_array_equal(as_numpy(ours_out), their_out.detach().numpy())
        numpy.testing.assert_allclose(as_numpy(mine.grad), theirs.grad.numpy(), rtol=1e-12)


@pytest.mark.gpu
def test_an_index_out_of_range_on_a_device_gives_zero():
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    assert x.gather(1, tp.tensor([[1, 2], [-1, 0]], device="cuda")).tolist() == \
        [[2.0, 0.0], [0.0, 3.0]]


@pytest.mark.gpu
def test_a_captured_gather_replays_with_new_values(quiet_device):
    rng = numpy.random.default_rng(11)
    x = tp.tensor(rng.standard_normal((4, 6)), dtype=tp.float32, device="cuda",
                  requires_grad=True)
    index = tp.tensor(rng.integers(0, 6, (4, 3)), device="cuda")
    (x.gather(1, index).sum()).backward()  # the warm-up, as PyTorch's recipe
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        out = x.gather(1, index)
        out.sum().backward()
    new_index = rng.integers(0, 6, (4, 3))
    index.copy_(tp.tensor(new_index, device="cuda"))
    graph.replay()
    source = as_numpy(x.detach())
    numpy.testing.assert_array_equal(as_numpy(out.detach()),
                                     numpy.take_along_axis(source, new_index, 1))
    expected = numpy.zeros_like(source)
    numpy.add.at(expected, (numpy.arange(4)[:, None], new_index), 1.0)
    numpy.testing.assert_array_equal(as_numpy(x.grad), expected)
