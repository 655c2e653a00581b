"""tensorplay.utils.data: datasets, random_split, samplers, default_collate and the DataLoader,
against torch.utils.data where the result is deterministic (unshuffled batches, lengths, split
sizes, collated values and dtypes, errors); a DataLoader over CUDA tensors (marked gpu).

Ported from PyTorch's test/test_dataloader.py: TestDatasetRandomSplit
(test_lengths_must_equal_datset_size, test_splits_have_correct_size,
test_splits_have_correct_size_with_fractions (its round-robin cases), test_splits_are_mutually_exclusive,
test_splits_indexing_type, test_splits_reproducibility, test_splits_generator,
test_slicing_of_subset_of_dataset, test_slicing_of_subset_of_subset), TestTensorDataset
(test_len, test_getitem, test_getitem_1d, test_single_tensor, test_many_tensors),
TestConcatDataset (test_concat_two_singletons, test_concat_two_non_singletons,
test_concat_two_non_singletons_with_empty, test_concat_raises_index_error, test_add_dataset),
TestDataLoader (test_sequential_nonbatch, test_sequential_batch, test_growing_dataset,
test_sampler, test_sampler_reproducibility, test_RandomSampler, test_random_sampler_len_with_replacement,
test_duplicating_data_with_drop_last, test_batch_sampler, test_len, test_invalid_ctor_args_combinations,
test_default_collate_dtype, test_default_collate_bad_numpy_types,
test_default_collate_bad_sequence_type, test_default_collate_mapping_keep_type,
test_default_collate_sequence_keep_type, test_default_convert_mapping_keep_type),
TestDictDataLoader (test_sequential_batch), TestNamedTupleDataLoader and
TestCustomCollate-style collate_fn cases. Shuffled orders are tensorplay's own (docs/design.md,
"tensorplay.utils.data"), so they are checked for covering every index once per epoch and for
following the seed, not against PyTorch's orders.
"""
import collections
import importlib
import math
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                   RandomSampler, Sampler, SequentialSampler, Subset,
                                   TensorDataset, default_collate, default_convert,
                                   random_split)

from tests.peers import load

torch, _TORCH_MISSING = load("torch")
torch_data = None if torch is None else importlib.import_module("torch.utils.data")
needs_torch = pytest.mark.skipif(torch is None, reason=_TORCH_MISSING)


def plain(value):
    """A batch as nested Python values, with each tensor as (dtype name, shape, values), for
    either library."""
    if isinstance(value, tp.Tensor):
        return ("tensor", str(value.dtype).split(".")[-1], tuple(value.shape), value.tolist())
    if torch is not None and isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype).split(".")[-1], tuple(value.shape), value.tolist())
    if isinstance(value, dict):
        return {key: plain(field) for key, field in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [plain(field) for field in value]
    return value


class CountingDataset(Dataset):
    """Sample i is i (PyTorch's test datasets return ints or tensors of them)."""

    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return index


class DictDataset(Dataset):
    """PyTorch's DictDataset of TestDictDataLoader."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return {"a_tensor": tp.full((4, 3), float(index)), "another_dict": {"a_number": index}}


class TorchDictDataset(torch_data.Dataset if torch_data else object):
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return {"a_tensor": torch.full((4, 3), float(index)), "another_dict": {"a_number": index}}


# --------------------------------------------------------------------------------------------
# TensorDataset


def test_tensor_dataset_len_and_items():
    t = tp.randn(15, 10, 2, 3)
    labels = tp.randn(15, 10)
    source = TensorDataset(t, labels)
    assert len(source) == 15
    for i in range(15):
        assert source[i][0].tolist() == t[i].tolist()
        assert source[i][1].tolist() == labels[i].tolist()
    assert source[-1][0].tolist() == t[14].tolist()
    assert source.tensors[0] is t and source.tensors[1] is labels


def test_tensor_dataset_1d_single_and_many_tensors():
    t = tp.randn(15)
    labels = tp.randn(15)
    source = TensorDataset(t, labels)
    for i in range(15):
        assert source[i][0].item() == t[i].item()
        assert source[i][1].item() == labels[i].item()
    single = TensorDataset(t)
    assert len(single) == 15 and [s[0].item() for s in single] == t.tolist()
    tensors = [tp.randn(15), tp.randn(15, 10), tp.randn(15, 10, 2), tp.randn(15, 10, 2, 3)]
    many = TensorDataset(*tensors)
    assert len(many) == 15
    for i in range(15):
        assert [s.tolist() for s in many[i]] == [tensor[i].tolist() for tensor in tensors]


def test_tensor_dataset_sizes_must_match():
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(tp.zeros(3, 2), tp.zeros(4))
    with pytest.raises(TypeError, match=r"tensors\[1\] must be a Tensor"):
        TensorDataset(tp.zeros(3), [1, 2, 3])
    with pytest.raises(ValueError, match="no dimensions"):
        TensorDataset(tp.tensor(1.0))
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()


@needs_torch
def test_tensor_dataset_mismatch_is_pytorch_check():
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        torch_data.TensorDataset(torch.zeros(3, 2), torch.zeros(4))


# --------------------------------------------------------------------------------------------
# ConcatDataset, Subset, Dataset.__add__


def test_concat_two_singletons_and_non_singletons():
    result = ConcatDataset([[0], [1]])
    assert len(result) == 2 and result[0] == 0 and result[1] == 1
    result = ConcatDataset([list(range(5)), list(range(10, 15))])
    assert len(result) == 10
    assert [result[i] for i in range(10)] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    assert result.cumulative_sizes == [5, 10]


def test_concat_with_empty_and_negative_indices():
    result = ConcatDataset([list(range(5)), [], list(range(10, 15))])
    assert len(result) == 10
    assert result[0] == 0 and result[5] == 10 and result[9] == 14
    assert [result[i] for i in range(-10, 0)] == [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]
    with pytest.raises(ValueError, match="absolute value of index should not exceed dataset "
                                         "length"):
        result[-11]
    with pytest.raises(IndexError):
        result[10]
    with pytest.raises(TypeError, match="integers"):
        result["1"]


@needs_torch
def test_concat_indexing_matches_pytorch():
    parts = [list(range(3)), [], list(range(10, 14)), [99]]
    ours, theirs = ConcatDataset(parts), torch_data.ConcatDataset(parts)
    assert len(ours) == len(theirs) and ours.cumulative_sizes == theirs.cumulative_sizes
    for index in range(-len(ours), len(ours)):
        assert ours[index] == theirs[index]
    with pytest.raises(ValueError) as error:
        theirs[-9]
    with pytest.raises(ValueError, match=str(error.value)):
        ours[-9]


def test_concat_checks_its_datasets():
    with pytest.raises(ValueError, match="datasets should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(TypeError, match="datasets must be an iterable"):
        ConcatDataset(3)
    with pytest.raises(TypeError, match=r"datasets\[1\]"):
        ConcatDataset([[1], 5])


def test_add_dataset():
    d1 = TensorDataset(tp.randn(7, 3, 2), tp.randn(7))
    d2 = TensorDataset(tp.randn(7, 3, 2), tp.randn(7))
    d3 = TensorDataset(tp.randn(7, 3, 2), tp.randn(7))
    result = d1 + d2 + d3 + d3
    assert isinstance(result, ConcatDataset) and isinstance(result, Dataset)
    assert len(result) == 28
    assert result[0][0].tolist() == d1[0][0].tolist()
    assert result[7][0].tolist() == d2[0][0].tolist()
    assert result[21][1].item() == d3[0][1].item()


def test_base_dataset_needs_getitem():
    with pytest.raises(NotImplementedError, match="Subclasses of Dataset should implement "
                                                  "__getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(Sampler())


def test_subset_indexing():
    subset = Subset(list(range(10, 20)), [1, 3, 5, 7])
    assert len(subset) == 4
    assert [subset[i] for i in range(4)] == [11, 13, 15, 17]
    assert subset[-1] == 17
    assert subset.__getitems__([0, 2]) == [11, 15]
    # A list index goes to the dataset as a list, as PyTorch's: a tensor dataset takes it.
    data = TensorDataset(tp.arange(10.0))
    assert Subset(data, [2, 4, 6])[[0, 2]][0].tolist() == [2.0, 6.0]
    with pytest.raises(TypeError, match="indices must be a sequence"):
        Subset(list(range(3)), 5)
    with pytest.raises(TypeError, match="dataset must be a map-style dataset"):
        Subset(5, [0])


def test_slicing_of_subset_of_dataset_and_of_subset():
    dataset = TensorDataset(tp.tensor([1, 2, 3, 4, 5]))
    subset = Subset(dataset, [0, 1, 2, 3, 4])
    assert subset[:][0].tolist() == dataset[:][0].tolist()
    assert subset[1:2][0].tolist() == dataset[1:2][0].tolist()
    assert subset[0:-1:2][0].tolist() == dataset[0:-1:2][0].tolist()
    # Subsets of subsets, from random_split.
    first, _ = random_split(dataset, [4, 1])
    second, _ = random_split(first, [3, 1])
    assert [second[i][0].item() for i in range(3)] == \
        [dataset[first.indices[second.indices[i]]][0].item() for i in range(3)]


# --------------------------------------------------------------------------------------------
# random_split


def test_random_split_lengths_must_equal_dataset_size():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of "
                                         "the input dataset!"):
        random_split([1, 2, 3, 4], [1, 2])


def test_random_split_sizes():
    splits = random_split([1, 2, 3, 4, 5, 6], [2, 4])
    assert [len(split) for split in splits] == [2, 4]
    splits = random_split([1, 2, 3, 4, 5, 6], [0.5, 0.5])
    assert [len(split) for split in splits] == [3, 3]
    assert len(random_split(range(3), [0.5, 0.5], generator=tp.Generator().manual_seed(1))) == 2
    splits = random_split(range(106), [0.1, 0.2, 0.3, 0.4],
                          generator=tp.Generator().manual_seed(1))
    assert [len(split) for split in splits] == [11, 22, 31, 42]


@needs_torch
@pytest.mark.parametrize("size, lengths", [
    (6, [2, 4]), (6, [0.5, 0.5]), (3, [0.5, 0.5]), (106, [0.1, 0.2, 0.3, 0.4]),
    (10, [0.33, 0.33, 0.34]), (7, (0.2, 0.8)), (5, [1.0, 0.0]), (4, [0, 4]), (1, [1, 0]),
    (0, [0, 0]), (10, [1 / 3, 1 / 3, 1 / 3])])
def test_random_split_sizes_match_pytorch(size, lengths):
    with warnings.catch_warnings(record=True) as theirs_warned:
        warnings.simplefilter("always")
        theirs = torch_data.random_split(range(size), lengths)
    with warnings.catch_warnings(record=True) as ours_warned:
        warnings.simplefilter("always")
        ours = random_split(range(size), lengths)
    assert [len(split) for split in ours] == [len(split) for split in theirs]
    assert [str(w.message) for w in ours_warned] == [str(w.message) for w in theirs_warned]
    assert sorted(i for split in ours for i in split.indices) == list(range(size))


def test_random_split_disjoint_and_covering():
    data = [5, 2, 3, 4, 1, 6]
    for lengths in ([2, 4], [0.33, 0.67]):
        splits = random_split(data, lengths)
        assert sorted(list(splits[0]) + list(splits[1])) == sorted(data)
    data = list(range(100))
    splits = random_split(data, [0.25, 0.25, 0.5], generator=tp.Generator().manual_seed(3))
    indices = [i for split in splits for i in split.indices]
    assert sorted(indices) == data
    assert all(isinstance(split, Subset) and split.dataset is data for split in splits)


def test_random_split_indexing_type():
    class CustomDataset:
        def __init__(self, test_object, custom_list):
            self.data = custom_list
            self.test_object = test_object

        def __getitem__(self, key):
            if isinstance(key, int):
                return self.data[key]
            self.test_object.fail("default_collate handles only ints")

        def __len__(self):
            return len(self.data)

    class Failing:
        def fail(self, message):
            raise AssertionError(message)

    dataset = CustomDataset(Failing(), [1, 2, 3, 4])
    for subset in random_split(dataset, [2, 2]):
        assert len(subset) == 2
        assert [type(subset[i]) for i in range(2)] == [int, int]
    assert [b.tolist() for b in DataLoader(dataset, batch_size=2)] == [[1, 2], [3, 4]]


def test_random_split_reproducibility_and_generator():
    def split(seed):
        return [s.indices for s in random_split(range(20), [5, 15],
                                                generator=tp.Generator().manual_seed(seed))]
    assert split(1) == split(1)
    assert split(1) != split(2)
    # No generator: the default CPU generator, which manual_seed() seeds.
    tp.manual_seed(5)
    first = [s.indices for s in random_split(range(20), [0.5, 0.5])]
    tp.manual_seed(5)
    assert [s.indices for s in random_split(range(20), [0.5, 0.5])] == first
    # The generator given advances: two splits in a row differ.
    generator = tp.Generator().manual_seed(0)
    a = random_split(range(20), [10, 10], generator=generator)[0].indices
    b = random_split(range(20), [10, 10], generator=generator)[0].indices
    assert a != b


def test_random_split_errors():
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(range(10), [0.5, -0.5, 1.0])
    with pytest.raises(ValueError, match=r"lengths\[0\] must be a length"):
        random_split(range(10), [2.5, 7.5])
    with pytest.raises(ValueError, match=r"lengths\[1\] must be a length"):
        random_split(range(10), [12, -2])
    with pytest.raises(TypeError, match=r"lengths\[0\] must be an int or a float"):
        random_split(range(10), ["5", 5])
    with pytest.raises(TypeError, match="lengths must be a list or tuple"):
        random_split(range(10), 10)
    with pytest.raises(TypeError, match="generator must be None or a tensorplay.Generator"):
        random_split(range(10), [5, 5], generator=0)
    with pytest.raises(TypeError, match="dataset must have a length"):
        random_split(CountingDatasetWithoutLength(), [1])
    with pytest.raises(ValueError, match="does not equal"):
        random_split(range(10), [10 ** 400])


class CountingDatasetWithoutLength:
    def __getitem__(self, index):
        return index


# --------------------------------------------------------------------------------------------
# Samplers


def test_sequential_and_batch_samplers():
    assert list(SequentialSampler(range(5))) == [0, 1, 2, 3, 4]
    assert len(SequentialSampler(range(5))) == 5
    for batch_size in (1, 2, 3, 5, 7):
        for drop_last in (False, True):
            ours = BatchSampler(SequentialSampler(range(10)), batch_size, drop_last)
            expected = [list(range(start, min(start + batch_size, 10)))
                        for start in range(0, 10, batch_size)]
            if drop_last:
                expected = [batch for batch in expected if len(batch) == batch_size]
            assert list(ours) == expected
            assert len(ours) == len(expected)
    # Any iterable of indices.
    assert list(BatchSampler([3, 1, 4, 1, 5], 2, False)) == [[3, 1], [4, 1], [5]]


@needs_torch
def test_batch_sampler_matches_pytorch():
    for size in (0, 1, 9, 10, 11):
        for batch_size in (1, 3, 10, 12):
            for drop_last in (False, True):
                ours = BatchSampler(SequentialSampler(range(size)), batch_size, drop_last)
                theirs = torch_data.BatchSampler(torch_data.SequentialSampler(range(size)),
                                                 batch_size, drop_last)
                assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_batch_sampler_errors():
    for bad in (0, -1):
        with pytest.raises(ValueError, match=f"batch_size should be a positive integer value, "
                                             f"but got batch_size={bad}"):
            BatchSampler(range(3), bad, False)
    with pytest.raises(TypeError, match="batch_size"):
        BatchSampler(range(3), 1.5, False)
    with pytest.raises(TypeError, match="drop_last"):
        BatchSampler(range(3), 2, 1)
    with pytest.raises(TypeError, match="sampler must be an iterable"):
        BatchSampler(3, 2, False)


def test_random_sampler_covers_every_index_once():
    for size in (1, 2, 10, 257):
        order = list(RandomSampler(range(size)))
        assert sorted(order) == list(range(size))
    sampler = RandomSampler(range(100), generator=tp.Generator().manual_seed(0))
    first, second = list(sampler), list(sampler)
    assert sorted(first) == sorted(second) == list(range(100))
    assert first != second                      # a new permutation each iteration
    assert first == list(RandomSampler(range(100), generator=tp.Generator().manual_seed(0)))


def test_random_sampler_num_samples_and_replacement():
    # PyTorch's _test_random_sampler: more samples than the data, without replacement, runs
    # through whole permutations.
    sampler = RandomSampler(range(10), num_samples=25)
    order = list(sampler)
    assert len(sampler) == 25 and len(order) == 25
    assert sorted(order[:10]) == sorted(order[10:20]) == list(range(10))
    assert len(set(order[20:])) == 5
    sampler = RandomSampler(range(10), replacement=True, num_samples=70,
                            generator=tp.Generator().manual_seed(0))
    draws = list(sampler)
    assert len(draws) == 70 and len(sampler) == 70 and sampler.num_samples == 70
    assert all(0 <= d < 10 for d in draws) and len(set(draws)) == 10
    assert len(RandomSampler(range(7), replacement=True)) == 7
    data = list(range(3))
    sampler = RandomSampler(data)
    data.append(3)                                  # num_samples follows the data, as PyTorch's
    assert sampler.num_samples == 4


def test_random_sampler_errors_are_pytorch():
    with pytest.raises(ValueError, match="num_samples should be a positive integer value, but "
                                         "got num_samples=0"):
        RandomSampler([])
    with pytest.raises(ValueError, match="num_samples=-3"):
        RandomSampler(range(3), num_samples=-3)
    with pytest.raises(TypeError, match="num_samples"):
        RandomSampler(range(3), num_samples=2.0)
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(range(3), replacement=0)
    with pytest.raises(TypeError, match="data_source must have a length"):
        RandomSampler(CountingDatasetWithoutLength())


def test_random_sampler_follows_the_default_seed():
    tp.manual_seed(11)
    first = [list(RandomSampler(range(30))) for _ in range(3)]
    tp.manual_seed(11)
    assert [list(RandomSampler(range(30))) for _ in range(3)] == first
    assert first[0] != first[1]


# --------------------------------------------------------------------------------------------
# default_collate and default_convert


@needs_torch
@pytest.mark.parametrize("batch", [
    [1.5, 2.0], [1, 2, 3], [True, False], [1, 2.5], ["a", "b"], [b"x", b"y"],
    [(1, 2.0), (3, 4.0)], [[1, 2], [3, 4]], [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    [np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)],
    [np.array([1.5]), np.array([2.5])], [np.float32(1.5), np.float32(2.5)],
    [np.int64(3), np.int64(4)], [np.bool_(True), np.bool_(False)],
    [collections.OrderedDict(x=1, y=2.0), collections.OrderedDict(x=3, y=4.0)],
])
def test_default_collate_matches_pytorch(batch):
    assert plain(default_collate(batch)) == plain(torch_data.default_collate(batch))


@needs_torch
def test_default_collate_tensors_and_namedtuples():
    Point = collections.namedtuple("Point", ["x", "y"])
    ours = default_collate([Point(tp.tensor([1.0, 2.0]), 1), Point(tp.tensor([3.0, 4.0]), 2)])
    theirs = torch_data.default_collate([Point(torch.tensor([1.0, 2.0]), 1),
                                         Point(torch.tensor([3.0, 4.0]), 2)])
    assert type(ours) is Point
    assert plain(tuple(ours)) == plain(tuple(theirs))
    ints = default_collate([tp.tensor([1, 2], dtype=tp.int32), tp.tensor([3, 4], dtype=tp.int32)])
    assert ints.dtype == tp.int32 and ints.tolist() == [[1, 2], [3, 4]]


def test_default_collate_bad_types():
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy "
                                        "arrays, numbers, dicts or lists; found"):
        default_collate([object(), object()])
    for array in (np.array(["a", "b"]), np.array([b"a"]), np.array([object()])):
        with pytest.raises(TypeError, match="default_collate: batch must contain"):
            default_collate([array, array])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal "
                                           "size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(ValueError, match="at least one sample"):
        default_collate([])
    with pytest.raises(TypeError, match="batch must be a sequence"):
        default_collate(5)


def test_default_collate_keeps_mapping_and_sequence_types():
    class MyDict(dict):
        pass

    class MyList(list):
        pass

    batch = [MyDict(a=1), MyDict(a=2)]
    collated = default_collate(batch)
    assert type(collated) is MyDict and collated["a"].tolist() == [1, 2]
    collated = default_collate([MyList([1, 2]), MyList([3, 4])])
    assert type(collated) is MyList and [c.tolist() for c in collated] == [[1, 3], [2, 4]]
    collated = default_collate([range(2), range(2)])   # not buildable from a list: a list
    assert type(collated) is list


@needs_torch
def test_default_convert_matches_pytorch():
    Point = collections.namedtuple("Point", ["x", "y"])
    for data in (0, "text", np.array([0, 1]), (np.array([1.5]), 2), [np.int64(3), "a"],
                 {"a": np.array([1, 2])}, np.array(["s"])):
        ours, theirs = default_convert(data), torch_data.default_convert(data)
        if isinstance(theirs, np.ndarray):
            assert ours is data
        else:
            assert plain(ours) == plain(theirs)
    converted = default_convert(Point(np.array(0), np.array(1)))
    assert type(converted) is Point and converted.x.tolist() == 0


# --------------------------------------------------------------------------------------------
# DataLoader


@needs_torch
@pytest.mark.parametrize("batch_size", [1, 2, 3, 5, 7, 10, 11])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_batches_match_pytorch(batch_size, drop_last):
    data = np.arange(20.0, dtype=np.float32).reshape(10, 2)
    labels = np.arange(10)
    ours = DataLoader(TensorDataset(tp.tensor(data), tp.tensor(labels)), batch_size=batch_size,
                      drop_last=drop_last)
    theirs = torch_data.DataLoader(torch_data.TensorDataset(torch.tensor(data),
                                                            torch.tensor(labels)),
                                   batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [plain(batch) for batch in ours] == [plain(batch) for batch in theirs]


@needs_torch
def test_sequential_nonbatch_matches_pytorch():
    data = np.arange(12.0, dtype=np.float32).reshape(6, 2)
    ours = DataLoader(TensorDataset(tp.tensor(data)), batch_size=None)
    theirs = torch_data.DataLoader(torch_data.TensorDataset(torch.tensor(data)), batch_size=None)
    assert len(ours) == len(theirs) == 6
    assert [plain(sample) for sample in ours] == [plain(sample) for sample in theirs]
    assert ours.batch_sampler is None and ours.batch_size is None
    # Without batching, numpy samples are converted one by one.
    arrays = [np.array([i, i]) for i in range(3)]
    assert [plain(x) for x in DataLoader(arrays, batch_size=None)] == \
        [plain(x) for x in torch_data.DataLoader(arrays, batch_size=None)]


@needs_torch
def test_dict_dataset_batches_match_pytorch():
    ours = list(DataLoader(DictDataset(), batch_size=2))
    theirs = list(torch_data.DataLoader(TorchDictDataset(), batch_size=2))
    assert len(ours) == 2
    assert [plain(b) for b in ours] == [plain(b) for b in theirs]
    assert ours[0]["a_tensor"].shape == (2, 4, 3)
    assert ours[1]["another_dict"]["a_number"].tolist() == [2, 3]


def test_loader_attributes_and_defaults():
    data = CountingDataset(7)
    loader = DataLoader(data, batch_size=3)
    assert loader.dataset is data and loader.batch_size == 3 and loader.num_workers == 0
    assert loader.drop_last is False and loader.generator is None
    assert isinstance(loader.sampler, SequentialSampler)
    assert isinstance(loader.batch_sampler, BatchSampler)
    assert loader.collate_fn([1, 2]).tolist() == [1, 2]
    assert len(loader) == 3 and len(DataLoader(data, batch_size=3, drop_last=True)) == 2
    assert [b.tolist() for b in loader] == [[0, 1, 2], [3, 4, 5], [6]]
    assert isinstance(DataLoader(data, shuffle=True).sampler, RandomSampler)


def test_growing_dataset():
    dataset = [tp.ones(4) for _ in range(4)]
    loader = DataLoader(dataset, shuffle=False)
    dataset.append(tp.ones(4))
    assert len(loader) == 5
    loader = DataLoader(dataset, shuffle=True)
    dataset.append(tp.ones(4))
    assert len(loader) == 6


def test_shuffle_covers_every_index_once_per_epoch():
    data = TensorDataset(tp.arange(50))
    loader = DataLoader(data, batch_size=8, shuffle=True,
                        generator=tp.Generator().manual_seed(0))
    epochs = []
    for _ in range(3):
        seen = [i for (batch,) in loader for i in batch.tolist()]
        assert sorted(seen) == list(range(50))
        epochs.append(seen)
    assert epochs[0] != epochs[1]
    again = DataLoader(data, batch_size=8, shuffle=True, generator=tp.Generator().manual_seed(0))
    assert [i for (batch,) in again for i in batch.tolist()] == epochs[0]
    # drop_last drops the short batch of each epoch's order.
    dropped = DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
    batches = list(dropped)
    assert len(batches) == len(dropped) == 6
    assert all(batch.shape == (8,) for (batch,) in batches)
    assert len({i for (batch,) in batches for i in batch.tolist()}) == 48


def test_duplicating_data_with_drop_last():
    num_samples, batch_size = 15, 4
    loader = DataLoader(list(range(num_samples)), batch_size=batch_size, shuffle=True,
                        drop_last=True)
    seen = [i for batch in loader for i in batch.tolist()]
    assert len(seen) == len(set(seen)) == num_samples // batch_size * batch_size


def test_custom_sampler_and_batch_sampler():
    indices = [3, 1, 4, 1, 5]
    loader = DataLoader(CountingDataset(10), sampler=indices, batch_size=2)
    assert [b.tolist() for b in loader] == [[3, 1], [4, 1], [5]]
    assert len(loader) == 3
    batches = [[0, 1], [2, 3, 4], [9]]
    loader = DataLoader(CountingDataset(10), batch_sampler=batches)
    assert [b.tolist() for b in loader] == batches
    assert len(loader) == 3 and loader.batch_size is None and loader.drop_last is False
    # A dataset without a length needs no default sampler then.
    loader = DataLoader(CountingDatasetWithoutLength(), batch_sampler=batches)
    assert [b.tolist() for b in loader] == batches
    sampler = BatchSampler(SequentialSampler(range(5)), 2, False)
    assert [b.tolist() for b in DataLoader(CountingDataset(5), batch_sampler=sampler)] == \
        [[0, 1], [2, 3], [4]]


def test_custom_collate_fn():
    def collate(samples):
        return ("custom", len(samples), samples)

    loader = DataLoader(CountingDataset(5), batch_size=2, collate_fn=collate)
    assert list(loader) == [("custom", 2, [0, 1]), ("custom", 2, [2, 3]), ("custom", 1, [4])]
    # Padding variable-length samples, the usual reason for a collate_fn.
    sequences = [tp.ones(n) for n in (1, 3, 2)]

    def pad(samples):
        longest = max(s.shape[0] for s in samples)
        return tp.stack([tp.cat([s, tp.zeros(longest - s.shape[0])]) for s in samples])

    (batch,) = list(DataLoader(sequences, batch_size=3, collate_fn=pad))
    assert batch.tolist() == [[1, 0, 0], [1, 1, 1], [1, 1, 0]]


def test_dataset_getitems_fetches_a_batch():
    class Batched(CountingDataset):
        def __getitems__(self, indices):
            return [("batched", i) for i in indices]

    loader = DataLoader(Batched(4), batch_size=2, collate_fn=list)
    assert list(loader) == [[("batched", 0), ("batched", 1)], [("batched", 2), ("batched", 3)]]
    subset = Subset(Batched(10), [7, 8, 9])
    assert list(DataLoader(subset, batch_size=3, collate_fn=list)) == \
        [[("batched", 7), ("batched", 8), ("batched", 9)]]


@needs_torch
def test_invalid_ctor_args_combinations_are_pytorch():
    """PyTorch's messages for the mutually exclusive arguments."""
    cases = [
        dict(sampler=[0, 1], shuffle=True),
        dict(batch_sampler=[[0]], batch_size=2),
        dict(batch_sampler=[[0]], shuffle=True),
        dict(batch_sampler=[[0]], sampler=[0]),
        dict(batch_sampler=[[0]], drop_last=True),
        dict(batch_size=None, drop_last=True),
        dict(num_workers=-1),
    ]
    for kwargs in cases:
        with pytest.raises(ValueError) as theirs:
            torch_data.DataLoader(list(range(4)), **kwargs)
        with pytest.raises(ValueError) as ours:
            DataLoader(list(range(4)), **kwargs)
        assert str(ours.value) == str(theirs.value), kwargs


def test_loader_argument_errors():
    with pytest.raises(ValueError, match="num_workers=2: worker processes are not offered"):
        DataLoader(list(range(4)), num_workers=2)
    with pytest.raises(TypeError, match="num_workers must be an int"):
        DataLoader(list(range(4)), num_workers=1.0)
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but "
                                         "got batch_size=0"):
        DataLoader(list(range(4)), batch_size=0)
    with pytest.raises(TypeError, match="batch_size"):
        DataLoader(list(range(4)), batch_size="2")
    with pytest.raises(TypeError, match="shuffle must be None or a bool"):
        DataLoader(list(range(4)), shuffle=1)
    with pytest.raises(TypeError, match="collate_fn must be None or callable"):
        DataLoader(list(range(4)), collate_fn=3)
    with pytest.raises(TypeError, match="generator must be None or a tensorplay.Generator"):
        DataLoader(list(range(4)), shuffle=True, generator=3)
    with pytest.raises(TypeError, match="dataset must be a map-style dataset"):
        DataLoader(5)
    with pytest.raises(TypeError, match="dataset must have a length"):
        DataLoader(CountingDatasetWithoutLength())
    with pytest.raises(TypeError, match="sampler must be an iterable"):
        DataLoader(list(range(4)), sampler=3)
    with pytest.raises(TypeError):
        DataLoader(list(range(4)), 1, False, None, None, 0, None, True)  # drop_last by keyword
    with pytest.raises(ValueError, match="num_samples=0"):       # PyTorch's, for an empty one
        DataLoader([], shuffle=True)


def test_training_loop_over_a_loader():
    """A newcomer's first loop: a linear model fitted on a TensorDataset."""
    tp.manual_seed(0)
    x = tp.randn(64, 3)
    y = x @ tp.tensor([[1.0], [-2.0], [0.5]])
    model = tp.nn.Linear(3, 1)
    opt = tp.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    for _ in range(30):
        for inputs, targets in loader:
            opt.zero_grad()
            loss = ((model(inputs) - targets) ** 2).mean()
            loss.backward()
            opt.step()
    assert math.isfinite(loss.item()) and loss.item() < 1e-3


# --------------------------------------------------------------------------------------------
# CUDA


@pytest.mark.gpu
def test_loader_over_cuda_tensors_gives_cuda_batches(quiet_device):
    data = np.arange(40.0, dtype=np.float32).reshape(10, 4)
    labels = np.arange(10)
    dataset = TensorDataset(tp.tensor(data, device="cuda"), tp.tensor(labels, device="cuda"))
    batches = list(DataLoader(dataset, batch_size=4))
    assert len(batches) == 3
    for number, (inputs, targets) in enumerate(batches):
        assert inputs.device.type == "cuda" and targets.device.type == "cuda"
        rows = slice(4 * number, min(4 * number + 4, 10))
        assert inputs.cpu().tolist() == data[rows].tolist()
        assert targets.cpu().tolist() == labels[rows].tolist()
    shuffled = DataLoader(dataset, batch_size=3, shuffle=True,
                          generator=tp.Generator().manual_seed(0))
    seen = sorted(i for _, targets in shuffled for i in targets.cpu().tolist())
    assert seen == list(range(10))
    dicts = list(DataLoader([{"x": tp.ones(2, device="cuda") * i} for i in range(3)],
                            batch_size=3))
    assert dicts[0]["x"].device.type == "cuda"
    assert dicts[0]["x"].cpu().tolist() == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]


@pytest.mark.gpu
def test_random_split_and_sampler_refuse_a_cuda_generator():
    generator = tp.Generator(device="cuda")
    with pytest.raises(ValueError, match="generator must be a CPU generator"):
        random_split(range(4), [2, 2], generator=generator)
    with pytest.raises(ValueError, match="generator must be a CPU generator"):
        RandomSampler(range(4), generator=generator)
    with pytest.raises(ValueError, match="generator must be a CPU generator"):
        DataLoader(range(4), shuffle=True, generator=generator)
