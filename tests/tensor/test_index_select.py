"""index_select and indexing by an integer tensor or list (x[index], x[:, index]), on the CPU and
on CUDA (marked gpu): values, gradients where indices repeat, every dtype, errors, captures.

Ported from PyTorch's own tests:
- test/test_torch.py TestTorch.test_index_select (every dtype, each dimension, an empty index,
  int32 and int64 indices, a non-contiguous source) and the OpInfo entry of index_select in
  torch/testing/_internal/common_methods_invocations.py (gradients, repeated indices);
- test/test_indexing.py TestIndexing.test_int_indices, test_index_getitem_copy_bools_slices
  and test_single_int / test_multiple_int ("x[[0, 2]]", "x[:, idx]", negative indices
  wrapping, an index tensor of two dimensions giving its shape, ints, slices, None and ...
  beside the index), and test_out_of_bound_index ("index out of range" on the CPU);
- CuPy's tests/cupy_tests/indexing_tests/test_indexing.py TestIndexing.test_take (the same
  selection along an axis, against numpy.take).
Values and gradients are compared with numpy and with PyTorch where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64"]
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_matches_numpy_take(device, dtype):
    data = numpy.arange(2 * 5 * 3).reshape(2, 5, 3) % 7
    x = tp.tensor(data.tolist(), device=device).to(getattr(tp, dtype))
    expected_source = values(x)
    for dim, index in ((0, [1, 0, 1]), (1, [4, 0, 0, 2]), (2, [2]), (-1, []), (1, 3)):
        for index_dtype in (tp.int64, tp.int32):
            chosen = tp.tensor(index, dtype=index_dtype, device=device)
            result = x.index_select(dim, chosen)
            assert result.dtype is x.dtype and result.device == x.device
            expected = numpy.take(expected_source, numpy.array(index, dtype=numpy.int64)
                                  .reshape(-1), axis=dim)
            assert tuple(result.shape) == expected.shape
            numpy.testing.assert_array_equal(values(result).reshape(expected.shape), expected)
    strided = x.transpose(0, 2)  # a non-contiguous source
    numpy.testing.assert_array_equal(
        values(tp.index_select(strided, 1, tp.tensor([3, 1], device=device))),
        numpy.take(expected_source.transpose(2, 1, 0), [3, 1], axis=1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_gradient_adds_up_where_indices_repeat(device, dtype):
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=getattr(tp, dtype),
                  device=device, requires_grad=True)
    index = tp.tensor([2, 0, 2, 2], device=device)
    weights = tp.tensor([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0]],
                        dtype=x.dtype, device=device)
    (x.index_select(0, index) * weights).sum().backward()
    assert values(x.grad).tolist() == [[2.0, 20.0], [0.0, 0.0], [8.0, 80.0]]
    y = tp.tensor([[1.0, 2.0, 3.0]], dtype=x.dtype, device=device, requires_grad=True)
    y[:, tp.tensor([1, 1, 0], device=device)].sum().backward()
    assert values(y.grad).tolist() == [[1.0, 2.0, 0.0]]


def test_against_pytorch():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(1)
    data = rng.standard_normal((4, 6, 3))
    for dim, index in ((0, [3, 3, 0]), (1, [5, 1, 1, 2, 0]), (2, [0, 2])):
        ours = tp.tensor(data.tolist(), dtype=tp.float64, requires_grad=True)
        theirs = torch.tensor(data, requires_grad=True)
        mine = ours.index_select(dim, tp.tensor(index))
        reference = theirs.index_select(dim, torch.tensor(index))
        numpy.testing.assert_array_equal(values(mine), reference.detach().numpy())
        (mine * mine).sum().backward()
        (reference * reference).sum().backward()
        numpy.testing.assert_allclose(values(ours.grad), theirs.grad.numpy(), rtol=1e-12)
    for key in ([2, 0], [-1, 1, -4]):
        numpy.testing.assert_array_equal(values(tp.tensor(data.tolist(), dtype=tp.float64)[key]),
                                         torch.tensor(data)[key].numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_integer_tensor_indexing(device):
    data = numpy.arange(12.0).reshape(3, 4)
    x = tp.tensor(data.tolist(), device=device)
    cases = [
        (lambda v: v[tp.tensor([2, 0], device=device)], lambda a: a[[2, 0]]),
        (lambda v: v[tp.tensor([-1, -3], device=device)], lambda a: a[[-1, -3]]),
        (lambda v: v[[1, 1]], lambda a: a[[1, 1]]),
        (lambda v: v[:, tp.tensor([3, 0, 3], device=device)], lambda a: a[:, [3, 0, 3]]),
        (lambda v: v[tp.tensor([[0, 1], [2, 2]], device=device)],
         lambda a: a[numpy.array([[0, 1], [2, 2]])]),
        (lambda v: v[tp.tensor(1, device=device)], lambda a: a[1]),
        (lambda v: v[tp.tensor([], dtype=tp.int64, device=device)], lambda a: a[[]]),
    ]
    for ours, reference in cases:
        result, expected = ours(x), reference(data)
        assert tuple(result.shape) == expected.shape
        numpy.testing.assert_array_equal(values(result).reshape(expected.shape), expected)
    result = x[tp.tensor([0], device=device)]
    result.fill_(-1.0)  # a copy, as PyTorch's advanced indexing
    assert values(x)[0, 0] == 0.0


# test/test_indexing.py TestIndexing.test_int_indices / test_index_getitem_copy_bools_slices
# with ints, slices, None and ... beside the index: PyTorch applies them first and puts the
# index's dimensions in its place (numpy would move them first for x[0, :, index]).
MIXED_KEYS = [lambda m: (0, slice(None), m.tensor([1, 2])),
              lambda m: (None, 1, m.tensor([1, 2])),
              lambda m: (Ellipsis, m.tensor([4, 0])),
              lambda m: (m.tensor([1, 2]), Ellipsis, 2),
              lambda m: (slice(1, None), m.tensor([3, -3]), None),
              lambda m: (m.tensor(1), 2),
              lambda m: (slice(None), m.tensor([[0, 1], [2, 3]]), 1),
              lambda m: (-1, [0, -1]),
              lambda m: (slice(None, None, 2), m.tensor([-1, 0]), slice(1, 3))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("key", MIXED_KEYS)
def test_an_index_beside_ints_slices_none_and_ellipsis_as_pytorchs(device, key):
    torch = import_or_skip("torch")
    data = numpy.arange(60.0).reshape(3, 4, 5)
    x = tp.tensor(data, device=device, requires_grad=True)
    reference = torch.tensor(data, requires_grad=True)

    class OnDevice:  # key's tensors made on the device
        @staticmethod
        def tensor(value):
            return tp.tensor(value, device=device)
    result, expected = x[key(OnDevice)], reference[key(torch)]
    assert tuple(result.shape) == tuple(expected.shape)
    numpy.testing.assert_array_equal(values(result), expected.detach().numpy())
    weights = numpy.arange(expected.numel(), dtype=numpy.float64).reshape(tuple(expected.shape))
    (result * tp.tensor(weights, device=device)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_array_equal(values(x.grad), reference.grad.numpy())


# test/test_indexing.py TestIndexing.test_index_put_src_datatype / test_int_assignment /
# test_index_put_accumulate_duplicate_indices' non-accumulating case and
# test_setitem_expansion_error: x[key] = value through one integer index, a scalar or a tensor
# broadcasting to the selection, and the gradients of both sides.
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("key", MIXED_KEYS + [lambda m: m.tensor([2, 0]), lambda m: [1]])
@pytest.mark.parametrize("scalar", [True, False])
def test_assignment_through_an_index_as_pytorchs(device, key, scalar):
    torch = import_or_skip("torch")
    data = numpy.arange(60.0).reshape(3, 4, 5)

    class OnDevice:
        @staticmethod
        def tensor(value):
            return tp.tensor(value, device=device)
    reference = torch.tensor(data)
    shape = tuple(reference[key(torch)].shape)
    value = 7.5 if scalar else numpy.arange(-1.0, -1.0 - numpy.prod(shape), -1).reshape(shape)
    x = tp.tensor(data, device=device)
    x[key(OnDevice)] = value if scalar else tp.tensor(value, device=device)
    reference[key(torch)] = value if scalar else torch.tensor(value)
    numpy.testing.assert_array_equal(values(x), reference.numpy())

    weights = numpy.arange(60.0).reshape(3, 4, 5)
    base = tp.tensor(data, device=device, requires_grad=True)
    given = tp.tensor(numpy.ones(shape), device=device, requires_grad=True)
    y = base * 1
    y[key(OnDevice)] = given * 2
    (y * tp.tensor(weights, device=device)).sum().backward()
    their_base = torch.tensor(data, requires_grad=True)
    their_given = torch.tensor(numpy.ones(shape), requires_grad=True)
    their_y = their_base * 1
    their_y[key(torch)] = their_given * 2
    (their_y * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_array_equal(values(base.grad), their_base.grad.numpy())
    numpy.testing.assert_array_equal(values(given.grad), their_given.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_assignment_broadcasts_converts_and_refuses_as_pytorchs(device):
    x = tp.zeros(3, 5, device=device, dtype=tp.float64)
    x[:, tp.tensor([0, 2], device=device)] = tp.tensor([[1.0], [2.0], [3.0]])  # a CPU value
    assert values(x)[:, [0, 2]].tolist() == [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]
    x[[1, 1]] = tp.tensor([4.0, 5.0, 6.0, 7.0, 8.0], dtype=tp.float32, device=device)
    assert values(x)[1].tolist() == [4.0, 5.0, 6.0, 7.0, 8.0]  # converted (PyTorch refuses)
    before = values(x)
    with pytest.raises(RuntimeError, match="must match the size"):
        x[tp.tensor([0], device=device)] = tp.ones(2, device=device)
    with pytest.raises(TypeError, match="value"):
        x[[0]] = "1"
    if device == "cpu":  # PyTorch's IndexError; a device skips the element (index.cu)
        with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 0 with "
                                             "size 3"):
            x[tp.tensor([0, -4])] = 1.0
    numpy.testing.assert_array_equal(values(x), before)


# PyTorch's index_put_ docs: with accumulate=False "the behavior is undefined if indices contain
# duplicate elements" (its CUDA kernel lets any write win). Each place written twice holds one of
# its values, and nothing else changes.
@pytest.mark.parametrize("device", DEVICES)
def test_an_index_naming_a_place_twice_writes_one_of_its_values(device):
    x = tp.zeros(4, 3, device=device)
    x[tp.tensor([3, -1, 0], device=device)] = tp.tensor([[1.0] * 3, [2.0] * 3, [3.0] * 3],
                                                        device=device)
    rows = values(x)
    assert set(rows[3].tolist()) <= {1.0, 2.0}
    assert rows[:3].tolist() == [[3.0] * 3, [0.0] * 3, [0.0] * 3]


@pytest.mark.gpu
def test_an_index_assignment_is_captured_and_replays_with_new_indices(quiet_device):
    from tensorplay import cuda
    x = tp.zeros(4, 3, device="cuda")
    index = tp.tensor([0, -1], device="cuda")
    value = tp.ones(2, 3, device="cuda")
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        x[index] = value
    index.copy_(tp.tensor([1, 2], device="cuda"))
    value.fill_(5.0)
    graph.replay()
    assert values(x).tolist() == [[0.0] * 3, [5.0] * 3, [5.0] * 3, [0.0] * 3]


def test_refusals():
    x = tp.zeros(3, 4)
    with pytest.raises(IndexError, match=r"too many indices \(3\) for a tensor of 2"):
        x[0, 0, tp.tensor([0])]
    with pytest.raises(IndexError, match="only have a single ellipsis"):
        x[..., ..., [0]]
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(0, tp.tensor([3]))
    with pytest.raises(IndexError, match="index out of range in self"):
        x.index_select(1, tp.tensor([-1]))  # index_select takes indices from 0
    with pytest.raises(IndexError, match="index out of range in self"):
        x[tp.tensor([-4])]
    with pytest.raises(IndexError, match="supposed to be a vector"):
        x.index_select(0, tp.tensor([[0]]))
    with pytest.raises(TypeError, match="int32/int64"):
        x.index_select(0, tp.tensor([0.0]))
    with pytest.raises(TypeError, match="index"):
        x.index_select(0, [0])
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.index_select(2, tp.tensor([0]))
    with pytest.raises(IndexError, match="Index to scalar can have only 1 value"):
        tp.tensor(1.0).index_select(0, tp.tensor([0, 0]))
    with pytest.raises(IndexError, match="index out of range in self"):
        tp.tensor(1.0).index_select(0, tp.tensor([1]))


@pytest.mark.parametrize("device", DEVICES)
def test_a_0_d_tensor_selects_its_one_element(device):
    # PyTorch's index_select of a scalar: an index of one element (0-d or 1-D) gives it back.
    x = tp.tensor(5.0, device=device, requires_grad=True)
    for index in (tp.tensor([0], device=device), tp.tensor(0, device=device)):
        result = x.index_select(0, index)
        assert result.shape == () and result.item() == 5.0
    x.index_select(-1, tp.tensor([0], device=device)).backward()
    assert x.grad.item() == 1.0


@pytest.mark.parametrize("device", DEVICES)
def test_an_empty_list_is_an_empty_index(device):
    # PyTorch reads [] as an int64 index of no element (x[[]] is (0, 3) for x of (2, 3));
    # assigning through it writes nothing, and the gradient of what it selects is zero.
    x = tp.arange(6.0, device=device).reshape(2, 3)
    assert x[[]].shape == (0, 3) and x[:, []].shape == (2, 0)
    assert x[[], 0].shape == (0,) and x[None, []].shape == (1, 0, 3)
    written = x.clone()
    written[[]] = 5.0
    written[:, []] = tp.ones(2, 0, device=device)
    assert written.tolist() == x.tolist()
    leaf = tp.ones(3, device=device, requires_grad=True)
    leaf[[]].sum().backward()
    assert leaf.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.gpu
def test_device_index_out_of_range_selects_zeros(quiet_device):
    # PyTorch's kernel asserts on the device; ours writes zeros and the context lives on.
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    assert x.index_select(0, tp.tensor([1, 7, -1], device="cuda")).tolist() == \
        [[3.0, 4.0], [0.0, 0.0], [0.0, 0.0]]
    assert (x + 1).tolist() == [[2.0, 3.0], [4.0, 5.0]]


@pytest.mark.gpu
def test_capture_replays_the_selection_and_its_gradient(quiet_device):
    table = tp.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], device="cuda", requires_grad=True)
    index = tp.tensor([2, 2, 0], device="cuda")
    picked = table.index_select(0, index)  # warm-up, outside the capture
    picked.sum().backward()
    table.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        picked = table.index_select(0, index)
        picked.sum().backward()
    index.copy_(tp.tensor([1, 0, 1], device="cuda"))
    graph.replay()
    assert picked.tolist() == [[3.0, 4.0], [1.0, 2.0], [3.0, 4.0]]
    assert table.grad.tolist() == [[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]]
