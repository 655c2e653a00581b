"""tensorplay.utils.data beyond map-style loading: IterableDataset and ChainDataset through the
DataLoader, StackDataset, SubsetRandomSampler, WeightedRandomSampler and get_worker_info; against
torch.utils.data where the result is deterministic (batches, lengths, errors).

Ported from PyTorch's test/test_dataloader.py: TestStackDataset (test_empty, test_mixed,
test_size_mismatch, test_len, test_single, test_getitem, test_getitems,
test_getitems_raises_index_error, test_getitems_value_error), TestConcatDataset
(test_iterable_dataset_err), and of TestDataLoader the parts that load in the main process:
test_invalid_ctor_args_combinations (its iterable-style cases), test_error_in_init,
test_builtin_collection_conversion, test_iterable_style_dataset, test_chain_iterable_style_dataset,
test_iterabledataset_len and test_sampler_reproducibility (its WeightedRandomSampler and
SubsetRandomSampler cases, with tensorplay's seeds). The parts with worker processes are not
ported: workers are not offered (num_workers must be 0).
"""
import collections
import warnings

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.utils.data import (ChainDataset, ConcatDataset, DataLoader, Dataset,
                                   IterableDataset, SequentialSampler, BatchSampler,
                                   StackDataset, SubsetRandomSampler, TensorDataset,
                                   WeightedRandomSampler, get_worker_info)

from tests.autograd.against_pytorch import same_error
from tests.peers import import_or_skip


class CountingDataset(Dataset):
    """PyTorch's CountingDataset: sample i is i."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i

    def __len__(self):
        return self.n


class CountingIterableDataset(IterableDataset):
    """PyTorch's CountingIterableDataset: the samples 0 .. n - 1, and a length."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class ErrorIterableDataset(IterableDataset):
    """PyTorch's ErrorIterableDataset (test_error_in_init)."""

    def __iter__(self):
        raise RuntimeError("Error in __iter__")


class GetItemsDataset(Dataset):
    """PyTorch's GetItemsDataset of TestStackDataset.test_getitems: a batch at once; short
    gives one sample too few (test_getitems_value_error)."""

    def __init__(self, short=False):
        self.data = tp.randn(4)
        self.short = short

    def __getitem__(self, item):
        return self.data[item]

    def __getitems__(self, items):
        batch = [self.data[item] for item in items]
        return batch[:-1] if self.short else batch

    def __len__(self):
        return 4


def rows(count, *shape):
    return TensorDataset(tp.randn(count, *shape))


# -- StackDataset (TestStackDataset) -----------------------------------------------------------

def test_stack_dataset_empty():
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()


def test_stack_dataset_mixed():
    with pytest.raises(ValueError, match="Supported either"):
        StackDataset(rows(15, 10), a=rows(10, 15))


def test_stack_dataset_size_mismatch():
    with pytest.raises(ValueError, match=r"Size mismatch between datasets: their lengths are "
                                         r"\[15, 10\]"):
        StackDataset(rows(15, 10), rows(10, 15))
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(a=rows(15, 10), b=rows(10, 15))


def test_stack_dataset_len():
    assert len(StackDataset(rows(15, 10), rows(15))) == 15
    assert len(StackDataset(rows(15, 10))) == 15
    assert len(StackDataset(a=rows(15, 10), b=rows(15))) == 15
    assert len(StackDataset(a=rows(15, 10))) == 15


def test_stack_dataset_single_and_getitem():
    t, l = rows(15, 10), rows(15, 5, 4)
    for source, pick in ((StackDataset(t, l), lambda sample, i: sample[i]),
                         (StackDataset(a=t, b=l), lambda sample, i: sample["ab"[i]])):
        for i in range(15):
            assert pick(source[i], 0)[0].tolist() == t[i][0].tolist()
            assert pick(source[i], 1)[0].tolist() == l[i][0].tolist()
    assert StackDataset(t)[3][0][0].tolist() == t[3][0].tolist()


def test_stack_dataset_getitems():
    t, l = GetItemsDataset(), [1, 2, 3, 4]
    batch = StackDataset(t, l).__getitems__([0, 1, 2, 3])
    for i in range(4):
        assert batch[i][0].item() == t[i].item() and batch[i][1] == l[i]
    batch = StackDataset(t=t, l=l).__getitems__([0, 1, 2, 3])
    for i in range(4):
        assert batch[i]["t"].item() == t[i].item() and batch[i]["l"] == l[i]


def test_stack_dataset_getitems_raises_index_error():
    with pytest.raises(IndexError):
        StackDataset(GetItemsDataset(), [1, 2, 3, 4]).__getitems__([0, 4])


def test_stack_dataset_getitems_value_error():
    with pytest.raises(ValueError, match="Nested dataset's output size mismatch. Expected 4, "
                                         "got 3"):
        StackDataset(GetItemsDataset(short=True), [1, 2, 3, 4]).__getitems__([0, 1, 2, 3])


def test_stack_dataset_batches_through_the_data_loader():
    images, labels = tp.arange(12.0).reshape(6, 2), list(range(10, 16))
    loader = DataLoader(StackDataset(image=TensorDataset(images), label=labels), batch_size=4)
    first, second = list(loader)
    assert first["image"][0].tolist() == images[:4].tolist()
    assert first["label"].tolist() == [10, 11, 12, 13] and second["label"].tolist() == [14, 15]


def test_stack_dataset_refuses_what_is_not_a_map_style_dataset():
    with pytest.raises(TypeError, match=r"args\[1\] must be a map-style dataset"):
        StackDataset(range(3), CountingIterableDataset(3).__iter__())
    with pytest.raises(TypeError, match=r"StackDataset does not support IterableDataset: "
                                        r"args\[0\] is one"):
        StackDataset(CountingIterableDataset(3), range(3))

    class Unsized:
        def __getitem__(self, index):
            return index

    with pytest.raises(TypeError, match=r"args\[0\] must have a length"):
        StackDataset(Unsized())
    with pytest.raises(TypeError, match=r"label must be a map-style dataset"):
        StackDataset(image=range(3), label=3)


# -- IterableDataset and ChainDataset through the DataLoader -----------------------------------

def test_concat_dataset_refuses_iterable_datasets():  # test_iterable_dataset_err
    d1 = TensorDataset(tp.zeros(7, 3), tp.zeros(7))
    it1, it2 = CountingIterableDataset(5), CountingIterableDataset(10)
    for datasets in ([d1, it2, it1], [it2], [it1, d1]):
        with pytest.raises(TypeError, match="ConcatDataset does not support IterableDataset"):
            ConcatDataset(datasets)


@pytest.mark.parametrize("make, message", [
    (lambda dataset: DataLoader(dataset, shuffle=True), "expected unspecified shuffle"),
    (lambda dataset: DataLoader(dataset, shuffle=3), "expected unspecified shuffle"),
    (lambda dataset: DataLoader(dataset, sampler=SequentialSampler(dataset)),
     "expected unspecified sampler"),
    (lambda dataset: DataLoader(dataset, sampler=3), "expected unspecified sampler"),
    (lambda dataset: DataLoader(dataset, batch_sampler=BatchSampler(SequentialSampler(dataset),
                                                                    3, False)),
     "expected unspecified batch_sampler"),
    (lambda dataset: DataLoader(dataset, batch_sampler=3), "expected unspecified batch_sampler"),
])
def test_invalid_ctor_args_combinations_iterable_style(make, message):
    with pytest.raises(ValueError, match="DataLoader with IterableDataset: " + message):
        make(CountingIterableDataset(20))


def test_error_in_init():
    with pytest.raises(RuntimeError, match="Error in __iter__"):
        list(iter(DataLoader(ErrorIterableDataset())))


@pytest.mark.parametrize("kind", [list, tuple])
def test_builtin_collection_conversion(kind):
    for dataset in (CountingDataset(20), CountingIterableDataset(20)):
        assert kind(DataLoader(dataset, batch_size=None)) == kind(range(20))
        fetched = kind(DataLoader(dataset, batch_size=2))
        assert [batch.tolist() for batch in fetched] == [[i, i + 1] for i in range(0, 20, 2)]
        assert type(fetched) is kind


def test_iterable_style_dataset():
    dataset = CountingIterableDataset(20)
    loader = DataLoader(dataset, batch_size=None)
    fetched = list(loader)
    assert fetched == list(range(20)) and all(type(d) is int for d in fetched)  # not tensors
    assert len(loader) == len(dataset)
    fetched = list(DataLoader(dataset, batch_size=7))
    assert [batch.tolist() for batch in fetched] == [list(range(7)), list(range(7, 14)),
                                                     list(range(14, 20))]
    fetched = list(DataLoader(dataset, batch_size=7, drop_last=True))
    assert [batch.tolist() for batch in fetched] == [list(range(7)), list(range(7, 14))]
    assert DataLoader(dataset, batch_size=7).sampler is None  # no sampler: the dataset's order


def test_iterable_style_dataset_warns_past_its_reported_length():
    class Longer(CountingIterableDataset):
        def __len__(self):
            return 3

    loader = DataLoader(Longer(5), batch_size=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning before len(loader) is asked
        assert [sample for sample in loader] == [0, 1, 2, 3, 4]  # list() would ask it
    assert len(loader) == 3
    iterator = iter(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [next(iterator) for _ in range(3)] == [0, 1, 2]
    for fetched in (4, 5):
        with pytest.warns(UserWarning, match=rf"was reported to be 3\(when accessing "
                                             rf"len\(dataloader\)\), but {fetched} samples have "
                                             r"been fetched\."):
            next(iterator)


def test_chain_iterable_style_dataset():
    dataset1, dataset2 = CountingIterableDataset(20), CountingIterableDataset(15)
    expected = list(range(20)) + list(range(15))
    for chained in (dataset1 + dataset2, ChainDataset([dataset1, dataset2])):
        fetched = list(DataLoader(chained))
        assert len(fetched) == len(expected) == len(chained)
        assert all(isinstance(d, tp.Tensor) and d.tolist() == [e]
                   for e, d in zip(expected, fetched))
    # PyTorch's AssertionError when the iteration reaches a map-style dataset; here a TypeError
    # when the chain is made.
    with pytest.raises(TypeError, match=r"ChainDataset only supports IterableDataset: "
                                        r"datasets\[1\]"):
        dataset1 + CountingDataset(3)
    with pytest.raises(TypeError, match="ChainDataset only supports IterableDataset"):
        ChainDataset([dataset1, CountingDataset(3)])
    with pytest.raises(TypeError, match="datasets must be an iterable of IterableDatasets"):
        ChainDataset(3)


def test_chain_dataset_iterates_again_and_keeps_a_list():
    chained = ChainDataset(dataset for dataset in (CountingIterableDataset(2),
                                                   CountingIterableDataset(1)))
    assert isinstance(chained.datasets, list)
    assert list(chained) == list(chained) == [0, 1, 0]


def test_iterabledataset_len():
    for batch_size, drop_last, length in ((1, False, 10), (1, True, 10), (2, False, 5),
                                          (2, True, 5), (3, False, 4), (3, True, 3)):
        loader = DataLoader(CountingIterableDataset(10), batch_size=batch_size,
                            drop_last=drop_last)
        assert len(loader) == length


def test_iterable_dataset_without_iter_is_refused():
    with pytest.raises(NotImplementedError, match="Subclasses of IterableDataset should "
                                                  "implement __iter__"):
        list(DataLoader(IterableDataset()))


# -- SubsetRandomSampler and WeightedRandomSampler ---------------------------------------------

WEIGHTS = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6]
SAMPLERS = {
    "weighted_with_replacement": lambda generator: WeightedRandomSampler(
        WEIGHTS, num_samples=5, replacement=True, generator=generator),
    "weighted_without_replacement": lambda generator: WeightedRandomSampler(
        WEIGHTS, num_samples=5, replacement=False, generator=generator),
    "subset": lambda generator: SubsetRandomSampler(range(10), generator=generator),
}


@pytest.mark.parametrize("name", SAMPLERS)
def test_sampler_reproducibility(name):
    make = SAMPLERS[name]
    assert list(make(tp.Generator().manual_seed(42))) == list(make(tp.Generator().manual_seed(42)))
    sampler = make(None)
    tp.manual_seed(0)
    first = list(sampler) + list(sampler)
    tp.manual_seed(0)
    assert list(sampler) + list(sampler) == first
    iterators, taken = (iter(sampler), iter(sampler)), ([], [])
    for index in range(len(sampler)):
        for which in range(2):
            if index == 0:
                tp.manual_seed(0)
            taken[which].append(next(iterators[which]))
    assert taken[0] == taken[1]


def test_subset_random_sampler_gives_each_index_once():
    sampler = SubsetRandomSampler([7, 3, 11, 5], generator=tp.Generator().manual_seed(1))
    orders = {tuple(sampler) for _ in range(20)}
    assert all(sorted(order) == [3, 5, 7, 11] for order in orders)
    assert len(orders) > 1 and len(sampler) == 4
    assert sampler.indices == [7, 3, 11, 5]


def test_weighted_random_sampler_follows_the_weights():
    sampler = WeightedRandomSampler([1.0, 0.0, 3.0], num_samples=8000,
                                    generator=tp.Generator().manual_seed(3))
    counts = collections.Counter(sampler)
    assert counts[1] == 0 and 2.7 < counts[2] / counts[0] < 3.3
    without = WeightedRandomSampler([1.0, 2.0, 3.0, 4.0], num_samples=4, replacement=False)
    assert sorted(without) == [0, 1, 2, 3]
    assert sampler.weights.dtype == tp.float64 and sampler.weights.device.type == "cpu"
    assert (sampler.num_samples, sampler.replacement) == (8000, True)


def test_weighted_random_sampler_takes_numpy_and_tensors():
    for weights in (np.array([0.0, 1.0]), tp.tensor([0.0, 1.0]), (0, 1)):
        assert list(WeightedRandomSampler(weights, 3)) == [1, 1, 1]


def test_weighted_random_sampler_in_a_data_loader():
    loader = DataLoader(range(100, 104), batch_size=3,
                        sampler=WeightedRandomSampler([0, 0, 1, 0], num_samples=5))
    assert [batch.tolist() for batch in loader] == [[102, 102, 102], [102, 102]]


@pytest.mark.parametrize("make, error, message", [
    (lambda: WeightedRandomSampler([1.0], 0), ValueError,
     r"num_samples should be a positive integer value, but got num_samples=0"),
    (lambda: WeightedRandomSampler([1.0], 2.0), TypeError, r"num_samples should be a positive"),
    (lambda: WeightedRandomSampler([1.0], True), TypeError, r"num_samples should be a positive"),
    (lambda: WeightedRandomSampler([1.0], 2, replacement=0), TypeError, r"replacement"),
    (lambda: WeightedRandomSampler([[1.0, 2.0]], 2), ValueError,
     r"weights should be a 1d sequence but given weights have shape \(1, 2\)"),
    (lambda: WeightedRandomSampler([1.0], 2, generator=3), TypeError,
     r"generator must be None or a tensorplay.Generator"),
    (lambda: SubsetRandomSampler(5), TypeError, r"indices must be a sequence of indices"),
    (lambda: SubsetRandomSampler("abc"), TypeError, r"indices must be a sequence of indices"),
    (lambda: SubsetRandomSampler([1], generator=object()), TypeError, r"generator must be None"),
])
def test_sampler_refusals(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_weighted_random_sampler_refuses_bad_weights_when_iterated():
    for weights in ([-1.0, 2.0], [0.0, 0.0], [float("nan"), 1.0]):
        sampler = WeightedRandomSampler(weights, 2)
        with pytest.raises(RuntimeError):
            list(sampler)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist"):
        list(WeightedRandomSampler([1.0, 2.0], 3, replacement=False))


def test_get_worker_info_is_none_in_the_main_process():
    assert get_worker_info() is None
    seen = []

    class Watching(CountingIterableDataset):
        def __iter__(self):
            seen.append(get_worker_info())
            return super().__iter__()

    assert list(DataLoader(Watching(3), batch_size=None)) == [0, 1, 2]
    assert seen == [None]


# -- against PyTorch ---------------------------------------------------------------------------

@pytest.fixture
def torch():
    return import_or_skip("torch")


@pytest.mark.parametrize("batch_size, drop_last", [(None, False), (1, False), (3, False),
                                                   (3, True), (7, True)])
def test_iterable_batches_are_pytorchs(torch, batch_size, drop_last):
    class TheirCounting(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10))

        def __len__(self):
            return 10

    ours = DataLoader(CountingIterableDataset(10), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(TheirCounting(), batch_size=batch_size,
                                         drop_last=drop_last)
    assert len(ours) == len(theirs)
    mine = [batch if batch_size is None else batch.tolist() for batch in ours]
    reference = [batch if batch_size is None else batch.tolist() for batch in theirs]
    assert mine == reference


def test_stack_dataset_is_pytorchs(torch):
    labels, names = [1, 2, 3], ["a", "b", "c"]
    ours, theirs = StackDataset(labels, names), torch.utils.data.StackDataset(labels, names)
    assert [ours[i] for i in range(3)] == [theirs[i] for i in range(3)]
    assert ours.__getitems__([2, 0]) == theirs.__getitems__([2, 0])
    ours = StackDataset(x=labels, y=names)
    theirs = torch.utils.data.StackDataset(x=labels, y=names)
    assert ours.__getitems__([1]) == theirs.__getitems__([1]) and ours[2] == theirs[2]
    for arguments, keywords in (((), {}), ((labels,), {"y": names}), ((labels, [1]), {})):
        same_error(lambda: StackDataset(*arguments, **keywords),
                   lambda: torch.utils.data.StackDataset(*arguments, **keywords))


def test_weighted_random_sampler_errors_are_pytorchs(torch):
    same_error(lambda: WeightedRandomSampler([1.0, 2.0], 0),
               lambda: torch.utils.data.WeightedRandomSampler([1.0, 2.0], 0))
    same_error(lambda: WeightedRandomSampler([[1.0], [2.0]], 2),
               lambda: torch.utils.data.WeightedRandomSampler([[1.0], [2.0]], 2))
    ours = WeightedRandomSampler([1.0, 2.0], 5)
    theirs = torch.utils.data.WeightedRandomSampler([1.0, 2.0], 5)
    assert ours.weights.tolist() == theirs.weights.tolist() and len(ours) == len(theirs)


def test_iterable_loader_errors_are_pytorchs(torch):
    class TheirCounting(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    for keywords in ({"shuffle": True}, {"sampler": [0, 1]}, {"batch_sampler": [[0]]}):
        same_error(lambda: DataLoader(CountingIterableDataset(3), **keywords),
                   lambda: torch.utils.data.DataLoader(TheirCounting(), **keywords))
