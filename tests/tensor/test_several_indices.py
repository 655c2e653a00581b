"""Indexing by several integer tensors or lists at once (x[rows, columns], x[i, :, j], with
ints, slices, None and ... beside them), on the CPU and on CUDA (marked gpu): PyTorch's
advanced indexing, read and assigned, values and gradients, errors, captures.

Ported from PyTorch's own tests, test/test_indexing.py TestIndexing:
- test_int_indices2d and test_int_indices_broadcast (the numpy example: rows and columns of
  two dimensions, and rows[:, None] broadcasting against columns);
- test_advancedindex's transposed (non-contiguous) reference: reads and assignments through
  two indices, repeated rows, an index of two dimensions beside one of one;
- test_out_of_bound_index ("index 5 is out of bounds for dimension 0 with size 3") and PyTorch's
  "shape mismatch: indexing tensors could not be broadcast together" message.
Beyond them, random keys against PyTorch itself: where the indices' shape goes (in their place
where they follow one another, else first; PyTorch takes ints and 0-d integer tensors first, as
selects), the gradient of a read, and assignment into contiguous and strided tensors.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(),
                       dtype=numpy.float64).reshape(tuple(tensor.shape))


@pytest.mark.parametrize("device", DEVICES)
def test_rows_and_columns_of_the_numpy_example(device):
    x = tp.arange(0, 12, device=device).view(4, 3)
    rows = tp.tensor([[0, 0], [3, 3]], device=device)
    columns = tp.tensor([[0, 2], [0, 2]], device=device)
    assert x[rows, columns].tolist() == [[0, 2], [9, 11]]
    rows, columns = tp.tensor([0, 3], device=device), tp.tensor([0, 2], device=device)
    assert x[rows[:, None], columns].tolist() == [[0, 2], [9, 11]]
    assert x[[0, 3], [0, 2]].tolist() == [0, 11]  # lists as tensors


@pytest.mark.parametrize("device", DEVICES)
def test_a_transposed_reference_reads_and_assigns(device):
    def ri(indices):
        return tp.tensor(indices, device=device)
    reference = tp.tensor([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], device=device).t()
    # Transposed: [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    assert reference[ri([0, 1, 2]), ri([0])].tolist() == [0, 1, 2]
    assert reference[ri([0, 1, 2]), ri([1])].tolist() == [4, 5, 6]
    assert reference[ri([0]), ri([0])].tolist() == [0]
    assert reference[ri([2]), ri([1])].tolist() == [6]
    assert reference[ri([0, 0]), ri([0, 1])].tolist() == [0, 4]
    assert reference[ri([0, 1, 1, 0, 3]), ri([1])].tolist() == [4, 5, 5, 4, 7]
    assert reference[ri([0, 0, 1, 1]), ri([0, 1, 0, 0])].tolist() == [0, 4, 1, 1]
    rows = ri([[0, 0], [1, 2]])
    assert reference[rows, ri([1, 0])].tolist() == [[4, 0], [5, 2]]
    rows, columns = ri([[0, 0], [1, 3]]), ri([[0, 1], [1, 2]])
    assert reference[rows, columns].tolist() == [[0, 4], [5, 11]]
    reference[ri([0]), ri([1])] = -1
    assert reference[ri([0]), ri([1])].tolist() == [-1]
    reference[ri([0, 1, 2]), ri([0])] = tp.tensor([-1, 2, -4], device=device)
    assert reference[ri([0, 1, 2]), ri([0])].tolist() == [-1, 2, -4]
    reference[rows, columns] = tp.tensor([[4, 6], [2, 3]], device=device)
    assert reference[rows, columns].tolist() == [[4, 6], [2, 3]]


def random_keys(rng, shape, count, masks=False):
    """count keys of two or more integer indices (lists, tensors, 0-d tensors) among ints,
    slices and None, as (kind, value) items; with masks, keys of one or more bool tensors of
    one dimension (each with as many True elements as the indices are long) among the same."""
    made = 0
    while made < count:
        items = []
        length = int(rng.integers(1, 4))  # every index of length 1 or this one: they broadcast
        for size in shape:
            kind = rng.choice(["index", "index", "int", "slice", "full"])
            if masks and kind == "index" and rng.random() < 0.5:
                trues = min(length, size) if length <= size else 1
                mask = [True] * trues + [False] * (size - trues)
                items.append(("mask", [bool(v) for v in rng.permutation(mask)]))
                if trues != length:
                    length = trues  # the other indices follow this mask's count
                    items = [(kind_, value[:1] if kind_ in ("list", "tensor") else value)
                             for kind_, value in items]
            elif kind == "index":
                picked = [int(rng.integers(-size, size)) for _ in range(rng.choice([1, length]))]
                items.append((rng.choice(["list", "tensor", "0-d"]), picked))
            elif kind == "int":
                items.append(("int", int(rng.integers(-size, size))))
            elif kind == "slice":
                items.append(("slice", (rng.choice([None, 0, 1]), rng.choice([None, -1, size]),
                                        rng.choice([None, 1, 2]))))
            else:
                items.append(("slice", (None, None, None)))
        if rng.random() < 0.3:
            items.insert(int(rng.integers(0, len(items) + 1)), ("none", None))
        items = items[:int(rng.integers(1, len(items) + 1))]
        indices = sum(kind in ("list", "tensor", "0-d") for kind, _ in items)
        with_mask = any(kind == "mask" for kind, _ in items)
        if (with_mask and masks) or (indices >= 2 and not masks):
            made += 1
            yield items


def key_of(items, module, device=None):
    def index(value):
        return module.tensor(value) if device is None else module.tensor(value, device=device)
    made = {"list": lambda value: value, "tensor": index, "0-d": lambda value: index(value[0]),
            "mask": index,
            "int": lambda value: value, "slice": lambda value: slice(*value),
            "none": lambda value: None}
    return tuple(made[kind](value) for kind, value in items)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3), (4, 2, 3, 2), (2, 1, 3)])
@pytest.mark.parametrize("masks", [False, True])
def test_random_keys_read_differentiate_and_assign_as_pytorchs(device, shape, masks):
    """masks: keys holding bool tensors beside the other items, which PyTorch turns into the
    indices of their True elements (nonzero)."""
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(len(shape) * 10 + shape[0])
    data = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    for items in random_keys(rng, shape, 40, masks):
        theirs, ours = key_of(items, torch), key_of(items, tp, device)
        expected = torch.tensor(data)[theirs]
        result = tp.tensor(data, device=device)[ours]
        assert tuple(result.shape) == tuple(expected.shape), items
        numpy.testing.assert_array_equal(values(result), expected.numpy())
        weights = numpy.arange(float(expected.numel())).reshape(tuple(expected.shape))
        x = tp.tensor(data, device=device, requires_grad=True)
        (x[ours] * tp.tensor(weights, device=device)).sum().backward()
        reference = torch.tensor(data, requires_grad=True)
        (reference[theirs] * torch.tensor(weights)).sum().backward()
        numpy.testing.assert_array_equal(values(x.grad), reference.grad.numpy())
        hits = torch.zeros(shape)
        hits[theirs] = torch.ones(tuple(expected.shape))
        if hits.sum().item() != expected.numel():
            continue  # a place named twice: which write wins is undefined (index_put_'s docs)
        value = numpy.arange(-1.0, -1.0 - expected.numel(), -1).reshape(tuple(expected.shape))
        for strided in (False, True):  # into a contiguous tensor, and a transposed one
            start = data.transpose().copy().transpose() if strided else data
            target = tp.tensor(start.transpose().copy(), device=device).permute(
                *reversed(range(len(shape)))) if strided else tp.tensor(start, device=device)
            target[ours] = tp.tensor(value, device=device)
            written = torch.tensor(data)
            written[theirs] = torch.tensor(value)
            numpy.testing.assert_array_equal(values(target), written.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_assignment_takes_scalars_broadcast_values_and_records_gradients(device):
    torch = import_or_skip("torch")
    data = numpy.arange(24.0).reshape(2, 3, 4)
    for key in ((slice(None), [0, 2], [1, 3]), ([0, 1], slice(None), [3, 0]), ([1], 0, [2, 1])):
        shape = tuple(torch.tensor(data)[key].shape)  # a column broadcasts along the rest
        column = numpy.arange(-1.0, -1.0 - shape[0], -1).reshape((shape[0],) +
                                                                 (1,) * (len(shape) - 1))
        for value in (7.5, column):
            x = tp.tensor(data, device=device)
            reference = torch.tensor(data)
            x[key] = value if isinstance(value, float) else tp.tensor(value, device=device)
            reference[key] = value if isinstance(value, float) else torch.tensor(value)
            numpy.testing.assert_array_equal(values(x), reference.numpy())
    base = tp.tensor(data, device=device, requires_grad=True)
    given = tp.tensor([1.0, 2.0], dtype=tp.float64, device=device, requires_grad=True)
    y = base * 1
    y[:, [0, 2], [1, 3]] = given * 2
    (y * tp.tensor(data, device=device)).sum().backward()
    their_base = torch.tensor(data, requires_grad=True)
    their_given = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    their_y = their_base * 1
    their_y[:, [0, 2], [1, 3]] = their_given * 2
    (their_y * torch.tensor(data)).sum().backward()
    numpy.testing.assert_array_equal(values(base.grad), their_base.grad.numpy())
    numpy.testing.assert_array_equal(values(given.grad), their_given.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_refusals_say_what_was_wrong_and_change_nothing(device):
    x = tp.arange(12.0, device=device).reshape(3, 4)
    before = values(x)
    with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be "
                                         r"broadcast together with shapes \[2\], \[3\]"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[[0, 1], [0, 1, 2]] = 1.0
    if device == "cuda":  # as one index: a tensor index lives on the tensor's device
        with pytest.raises(ValueError, match="index is on cpu and the tensor on cuda:0"):
            x[tp.tensor([0]), tp.tensor([0], device=device)]
    with pytest.raises(RuntimeError, match="must match the size|broadcast"):
        x[[0, 1], [0, 1]] = tp.ones(3, device=device)
    if device == "cpu":  # a device reads zeros and skips the write (index.cu)
        with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with "
                                             "size 3"):
            x[[0, 5], [0, 1]]
        with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with "
                                             "size 4"):
            x[[0, 1], [0, -5]] = 1.0
    numpy.testing.assert_array_equal(values(x), before)


@pytest.mark.gpu
def test_a_device_reads_zeros_where_any_index_is_out_of_range(quiet_device):
    x = tp.arange(1.0, 13.0, device="cuda").reshape(3, 4)
    # [0, 4] would be row 1's first element if the positions were only flattened
    assert x[tp.tensor([0, 0], device="cuda"), tp.tensor([1, 4], device="cuda")].tolist() == \
        [2.0, 0.0]
    x[tp.tensor([1, 0], device="cuda"), tp.tensor([0, 4], device="cuda")] = -1.0
    assert values(x).tolist() == [[1, 2, 3, 4], [-1, 6, 7, 8], [9, 10, 11, 12]]


@pytest.mark.gpu
def test_reads_and_assignments_are_captured_and_replay_with_new_indices(quiet_device):
    from tensorplay import cuda
    x = tp.arange(12.0, device="cuda").reshape(3, 4)
    rows, columns = tp.tensor([0, 2], device="cuda"), tp.tensor([1, 3], device="cuda")
    value = tp.tensor([-1.0, -2.0], device="cuda")
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        picked = x[rows, columns]
        x[rows, columns] = value
    rows.copy_(tp.tensor([1, 1], device="cuda"))
    columns.copy_(tp.tensor([0, 2], device="cuda"))
    graph.replay()
    assert picked.tolist() == [4.0, 6.0]
    assert values(x)[1].tolist() == [-1.0, 5.0, -2.0, 7.0]


@pytest.mark.parametrize("device", DEVICES)
def test_a_mask_beside_other_items_is_checked_as_pytorchs(device):
    torch = import_or_skip("torch")
    x = tp.arange(24.0, device=device).reshape(2, 3, 4)
    before = values(x)
    for key in ((slice(None), [True, False]), ([True, False, True],), (0, slice(None),
                                                                          [True] * 5)):
        ours = tuple(tp.tensor(item, device=device) if isinstance(item, list) else item
                     for item in key)
        theirs = tuple(torch.tensor(item) if isinstance(item, list) else item for item in key)
        with pytest.raises(IndexError) as expected:
            torch.zeros(2, 3, 4)[theirs]
        with pytest.raises(IndexError, match=str(expected.value).replace("[", "\\[")):
            x[ours]
        with pytest.raises(IndexError, match="The shape of the mask"):
            x[ours] = 1.0
    numpy.testing.assert_array_equal(values(x), before)
    if device == "cuda":  # a mask on the CPU serves a tensor on the device, as a lone one does
        mask = tp.tensor([True, False, True])
        assert x[:, mask, 0].tolist() == [[0.0, 8.0], [12.0, 20.0]]


@pytest.mark.gpu
def test_a_mask_beside_other_items_is_refused_during_a_capture(quiet_device):
    from tensorplay import cuda
    x = tp.arange(12.0, device="cuda").reshape(3, 4)
    mask = tp.tensor([True, False, True], device="cuda")
    graph = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="with a boolean mask"):
        with cuda.graph(graph):
            x[mask, 0]
    assert x[mask, 0].tolist() == [0.0, 8.0]  # the refused capture left nothing behind
