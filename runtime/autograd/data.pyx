# cython: language_level=3
"""tensorplay.utils.data: datasets, samplers and the DataLoader, as torch.utils.data.

See docs/design.md, "tensorplay.utils.data".

Note [Loading in the calling thread]
The DataLoader loads every batch in the thread that iterates it, as PyTorch's with
num_workers=0: the sampler's indices, dataset[index] for each, then the collate function (an
IterableDataset's next batch_size samples, in its own order, then the collate function). Worker
processes are not offered (num_workers other than 0 is a ValueError naming it): a forked worker
must not touch CUDA (docs/design.md, "Fork safety"), and the samples of a tensor dataset on a
device are views that cost no work to load. A batch is what the collate function returns; the
default one stacks tensors with stack(), so a dataset of CUDA tensors gives CUDA batches.

Note [Shuffled order]
PyTorch shuffles with torch.randperm, and so does this module: tensorplay.randperm on the CPU
(Note [Permutations] in random_ops.pyx), from the generator given or the default CPU one. Every
order is as likely as under PyTorch's, and one seed gives one order, but not PyTorch's order for
the same seed. PyTorch's RandomSampler without a
generator seeds a new one from the default generator for each epoch; here the epoch draws from
the default generator itself, so tensorplay.manual_seed() fixes the orders of the epochs that
follow. Draws with replacement are randint(0, n), 32 at a time, as PyTorch's.
"""
import bisect
import collections.abc
import copy
import itertools
import math
import operator
import re
import warnings

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.base cimport public
from tensorplay._runtime.tensor cimport copies, factories
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.random cimport random_ops, rng
from tensorplay._runtime.random.rng cimport GeneratorCore

# PyTorch's words (torch/utils/data/_utils/collate.py).
COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or "
                 "lists; found {}")
STRING_OR_OBJECT_ARRAY = re.compile(r"[SaUO]")  # numpy dtype.str of str, bytes and object arrays
DRAWS_PER_CALL = 32  # RandomSampler's draws with replacement per randint, as PyTorch's
LARGEST_COUNT = 2 ** 63 - 1  # the largest batch_size and num_samples (api.yaml)


# --------------------------------------------------------------------------------------------
# Argument checks


cdef int _check_dataset(object dataset, str argument, bint sized) except -1:
    """A map-style dataset: indexable (anything with __getitem__, a list too, as PyTorch's), and
    with a length where sized."""
    if not hasattr(type(dataset), "__getitem__"):
        raise TypeError(f"{argument} must be a map-style dataset (with __getitem__, such as a "
                        f"Dataset or a list), got {errors.shown(dataset)}; a stream of samples "
                        "is an IterableDataset, whose __iter__ gives them")
    if sized and not hasattr(type(dataset), "__len__"):
        raise TypeError(f"{argument} must have a length (__len__), got "
                        f"{errors.shown(dataset)}")
    return 0


cdef int _check_count_type(object value, str argument) except -1:
    """An int (not a bool) for a count that PyTorch checks with one message for both."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{argument} should be a positive integer value, but got "
                        f"{argument}={errors.shown(value)}")
    return 0


cdef int _check_count_value(object value, str argument) except -1:
    """A count from 1 to 2**63 - 1, in PyTorch's words."""
    if not 0 < value <= LARGEST_COUNT:
        raise ValueError(f"{argument} should be a positive integer value, but got "
                         f"{argument}={errors.shown(value)}")
    return 0


cdef int _check_indices(object indices) except -1:
    """Subset's and SubsetRandomSampler's indices: a sequence (a list, a range, ...)."""
    if isinstance(indices, (str, bytes)) or not (
            hasattr(type(indices), "__getitem__") and hasattr(type(indices), "__len__")):
        raise TypeError(f"indices must be a sequence of indices (a list, a range, ...), got "
                        f"{errors.shown(indices)}")
    return 0


cdef int _check_iterable(object value, str argument) except -1:
    if not (hasattr(type(value), "__iter__") or hasattr(type(value), "__getitem__")):
        raise TypeError(f"{argument} must be an iterable (a Sampler, a list of indices, ...), "
                        f"got {errors.shown(value)}")
    return 0


cdef int _check_generator_type(object generator) except -1:
    if generator is not None and not isinstance(generator, GeneratorCore):
        raise TypeError(f"generator must be None or a tensorplay.Generator, got "
                        f"{errors.shown(generator)}")
    return 0


cdef int _check_generator_device(object generator) except -1:
    if generator is not None and (<GeneratorCore>generator).device_index != -1:
        raise ValueError(f"generator must be a CPU generator (the indices are drawn on the "
                         f"CPU), got {errors.shown(generator)}")
    return 0


cdef list _dataset_list(object datasets, str kind):
    """ConcatDataset's and ChainDataset's datasets: any iterable of them, kept as a list."""
    if isinstance(datasets, (str, bytes)) or not isinstance(datasets, collections.abc.Iterable):
        raise TypeError(f"datasets must be an iterable of {kind}, got {errors.shown(datasets)}")
    return list(datasets)


cdef object _public(str core_name, type core):
    """The public class of core, which the generated module registered."""
    return public.public_class(core_name, core)


# --------------------------------------------------------------------------------------------
# Random indices (Note [Shuffled order])


cdef list _permutation(Py_ssize_t n, object generator):
    """A random permutation of range(n), drawn from generator (None: the default CPU one)."""
    return random_ops.randperm(n, generator, None, None, False).tolist()


cdef list _draws(Py_ssize_t n, Py_ssize_t count, object generator):
    """count indices of range(n) drawn with replacement."""
    return random_ops.randint(0, n, [count], generator, None, None).tolist()


# --------------------------------------------------------------------------------------------
# Datasets


class DatasetCore:
    """torch.utils.data.Dataset: a subclass defines __getitem__ (and usually __len__)."""

    def c_getitem(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def c_add(self, other):
        return _public("ConcatDatasetCore", ConcatDatasetCore)([self, other])


class TensorDatasetCore(DatasetCore):
    """torch.utils.data.TensorDataset: sample i is (tensor[i] for each tensor)."""

    def init(self, tensors):
        for index, tensor in enumerate(tensors):
            if not isinstance(tensor, TensorCore):
                raise TypeError(f"tensors[{index}] must be a Tensor, got {errors.shown(tensor)}")
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor (tensors is empty)")
        for index, tensor in enumerate(tensors):
            if not (<TensorCore>tensor).sizes:
                raise ValueError(f"tensors[{index}] has no dimensions (a 0-d tensor); the first "
                                 "dimension of each tensor indexes the samples")
        sizes = [(<TensorCore>tensor).sizes[0] for tensor in tensors]
        if any(size != sizes[0] for size in sizes):
            raise ValueError(f"Size mismatch between tensors: the first dimensions are "
                             f"{errors.shown(sizes)}, where they must be equal")
        self.tensors = tuple(tensors)

    def c_getitem(self, index):
        return tuple(tensor[index] for tensor in self.tensors)

    def c_len(self):
        return (<TensorCore>self.tensors[0]).sizes[0]


class ConcatDatasetCore(DatasetCore):
    """torch.utils.data.ConcatDataset: the samples of several datasets, one after another."""

    def init(self, datasets):
        datasets = _dataset_list(datasets, "datasets")
        for index, dataset in enumerate(datasets):
            if isinstance(dataset, IterableDatasetCore):  # PyTorch's words, then ours
                raise TypeError(f"ConcatDataset does not support IterableDataset: "
                                f"datasets[{index}] is one; chain iterable datasets with "
                                "ChainDataset")
            _check_dataset(dataset, f"datasets[{index}]", True)
        if not datasets:
            raise ValueError("datasets should not be an empty iterable")
        self.datasets = datasets
        self.cumulative_sizes = list(itertools.accumulate(len(dataset) for dataset in datasets))

    def c_len(self):
        return self.cumulative_sizes[-1]

    def c_getitem(self, index):
        if isinstance(index, bool):
            raise TypeError("ConcatDataset indices must be integers, got bool")
        try:
            index = operator.index(index)
        except TypeError:
            raise TypeError(f"ConcatDataset indices must be integers, got "
                            f"{errors.shown(index)}") from None
        length = self.cumulative_sizes[-1]
        if index < 0:
            if -index > length:  # PyTorch's words
                raise ValueError("absolute value of index should not exceed dataset length")
            index += length
        if index >= length:
            raise IndexError(f"index {index} is out of range for a ConcatDataset of length "
                             f"{length}")
        dataset_index = bisect.bisect_right(self.cumulative_sizes, index)
        if dataset_index:
            index -= self.cumulative_sizes[dataset_index - 1]
        return self.datasets[dataset_index][index]


class SubsetCore(DatasetCore):
    """torch.utils.data.Subset: the samples of dataset at indices, in that order."""

    def init(self, dataset, indices):
        _check_dataset(dataset, "dataset", False)
        _check_indices(indices)
        self.dataset = dataset
        self.indices = indices

    def c_getitem(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def c_getitems(self, indices):
        # The dataset's own __getitems__ where it has one (a Subset of a Subset), as PyTorch's.
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[index] for index in indices])
        return [self.dataset[self.indices[index]] for index in indices]

    def c_len(self):
        return len(self.indices)


class StackDatasetCore(DatasetCore):
    """torch.utils.data.StackDataset: sample i is (dataset[i] for each dataset), as a tuple of
    the positional datasets or a dict of the keyword ones."""

    def init(self, tuple args, dict kwargs):
        if args and kwargs:  # PyTorch's words
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        named = kwargs.items() if kwargs else ((f"args[{index}]", dataset)
                                               for index, dataset in enumerate(args))
        lengths = []
        for name, dataset in named:
            if isinstance(dataset, IterableDatasetCore):
                raise TypeError(f"StackDataset does not support IterableDataset: {name} is one "
                                "(a StackDataset indexes its datasets)")
            _check_dataset(dataset, name, True)
            lengths.append(len(dataset))
        if any(length != lengths[0] for length in lengths):
            raise ValueError(f"Size mismatch between datasets: their lengths are "
                             f"{errors.shown(lengths)}, where they must be equal")
        self._length = lengths[0]
        self.datasets = kwargs if kwargs else args

    def c_getitem(self, index):
        if isinstance(self.datasets, dict):
            return {key: dataset[index] for key, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def c_getitems(self, indices):
        # Each dataset's samples at once where it loads a batch at once, as PyTorch's.
        indices = list(indices)
        named = self.datasets.items() if isinstance(self.datasets, dict) else \
            enumerate(self.datasets)
        fields = {}
        for key, dataset in named:
            getitems = getattr(dataset, "__getitems__", None)
            if callable(getitems):
                items = list(getitems(indices))
                if len(items) != len(indices):  # PyTorch's words
                    raise ValueError(f"Nested dataset's output size mismatch. Expected "
                                     f"{len(indices)}, got {len(items)}")
            else:
                items = [dataset[index] for index in indices]
            fields[key] = items
        if isinstance(self.datasets, dict):
            return [{key: items[place] for key, items in fields.items()}
                    for place in range(len(indices))]
        return [tuple(items[place] for items in fields.values())
                for place in range(len(indices))]

    def c_len(self):
        return self._length


class IterableDatasetCore(DatasetCore):
    """torch.utils.data.IterableDataset: a subclass defines __iter__, the samples in order."""

    def c_iter(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def c_add(self, other):
        return _public("ChainDatasetCore", ChainDatasetCore)([self, other])


class ChainDatasetCore(IterableDatasetCore):
    """torch.utils.data.ChainDataset: the samples of several iterable datasets in turn."""

    def init(self, datasets):
        datasets = _dataset_list(datasets, "IterableDatasets")
        for index, dataset in enumerate(datasets):
            if not isinstance(dataset, IterableDatasetCore):  # PyTorch's words, then ours
                raise TypeError(f"ChainDataset only supports IterableDataset: datasets[{index}] "
                                f"is {errors.shown(dataset)}")
        self.datasets = datasets

    def c_iter(self):
        return itertools.chain.from_iterable(self.datasets)

    def c_len(self):
        return sum(len(dataset) for dataset in self.datasets)


cdef object get_worker_info():
    # Every batch loads in the calling thread (Note [Loading in the calling thread]): no code
    # runs in a worker, where PyTorch's would describe it.
    return None


cdef object random_split(object dataset, object lengths, object generator):
    _check_dataset(dataset, "dataset", True)
    if not isinstance(lengths, (list, tuple)):
        raise TypeError(f"lengths must be a list or tuple of ints or fractions, got "
                        f"{errors.shown(lengths)}")
    for index, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, (int, float)):
            raise TypeError(f"lengths[{index}] must be an int or a float, got "
                            f"{errors.shown(length)}")
    _check_generator_type(generator)
    _check_generator_device(generator)
    size = len(dataset)
    total = sum(lengths)
    try:
        fractions = math.isclose(total, 1) and total <= 1  # PyTorch's test
    except OverflowError:  # an int beyond any float: no fraction, and no length either
        fractions = False
    if fractions:
        split = []
        for index, fraction in enumerate(lengths):
            if not 0 <= fraction <= 1:
                raise ValueError(f"Fraction at index {index} is not between 0 and 1")
            split.append(math.floor(size * fraction))
        # The remainder, one item to each split in turn from the first.
        for index in range(size - sum(split)):
            split[index % len(split)] += 1
        lengths = split
        for index, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {index} is 0. This might result in "
                              "an empty dataset.", UserWarning)
    else:
        for index, length in enumerate(lengths):
            if not isinstance(length, int) or length < 0:
                raise ValueError(f"lengths[{index}] must be a length (an int from 0) unless "
                                 f"lengths are fractions summing to 1, got "
                                 f"{errors.shown(length)}")
    if sum(lengths) != size:  # PyTorch's words
        raise ValueError(f"Sum of input lengths does not equal the length of the input dataset! "
                         f"({sum(lengths)} against {size})")
    indices = _permutation(size, generator)
    subset = _public("SubsetCore", SubsetCore)
    return [subset(dataset, indices[end - length:end])
            for end, length in zip(itertools.accumulate(lengths), lengths)]


# --------------------------------------------------------------------------------------------
# Samplers


class SamplerCore:
    """torch.utils.data.Sampler: a subclass defines __iter__ (and usually __len__)."""

    def c_iter(self):
        raise NotImplementedError("Subclasses of Sampler should implement __iter__.")


class SequentialSamplerCore(SamplerCore):
    """torch.utils.data.SequentialSampler: 0, 1, ..., len(data_source) - 1."""

    def init(self, data_source):
        if not hasattr(type(data_source), "__len__"):
            raise TypeError(f"data_source must have a length (__len__), got "
                            f"{errors.shown(data_source)}")
        self.data_source = data_source

    def c_iter(self):
        return iter(range(len(self.data_source)))

    def c_len(self):
        return len(self.data_source)


class RandomSamplerCore(SamplerCore):
    """torch.utils.data.RandomSampler (Note [Shuffled order])."""

    def init(self, data_source, bint replacement, num_samples, generator):
        if not hasattr(type(data_source), "__len__"):
            raise TypeError(f"data_source must have a length (__len__), got "
                            f"{errors.shown(data_source)}")
        if num_samples is not None:
            _check_count_type(num_samples, "num_samples")
        _check_generator_type(generator)
        # PyTorch's check of num_samples: an empty data_source is refused too.
        _check_count_value(len(data_source) if num_samples is None else num_samples,
                           "num_samples")
        _check_generator_device(generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator

    def c_num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def c_iter(self):
        return self._indices()

    def _indices(self):
        n = len(self.data_source)
        count = self.c_num_samples()
        if n == 0:
            raise ValueError("RandomSampler cannot draw from an empty data_source")
        if self.replacement:
            for _ in range(count // DRAWS_PER_CALL):
                yield from _draws(n, DRAWS_PER_CALL, self.generator)
            if count % DRAWS_PER_CALL:
                yield from _draws(n, count % DRAWS_PER_CALL, self.generator)
        else:
            for _ in range(count // n):
                yield from _permutation(n, self.generator)
            if count % n:
                yield from _permutation(n, self.generator)[:count % n]

    def c_len(self):
        return self.c_num_samples()


class SubsetRandomSamplerCore(SamplerCore):
    """torch.utils.data.SubsetRandomSampler: the given indices in a random order
    (Note [Shuffled order])."""

    def init(self, indices, generator):
        _check_indices(indices)
        _check_generator_type(generator)
        _check_generator_device(generator)
        self.indices = indices
        self.generator = generator

    def c_iter(self):
        return self._indices()

    def _indices(self):
        indices = self.indices
        for place in _permutation(len(indices), self.generator):
            yield indices[place]

    def c_len(self):
        return len(self.indices)


class WeightedRandomSamplerCore(SamplerCore):
    """torch.utils.data.WeightedRandomSampler: num_samples indices drawn with the probabilities
    of weights, by multinomial() on the CPU."""

    def init(self, weights, num_samples, bint replacement, generator):
        _check_count_type(num_samples, "num_samples")
        _check_generator_type(generator)
        _check_count_value(num_samples, "num_samples")
        _check_generator_device(generator)
        weights = factories.as_tensor(weights, dtypes.named_dtype("float64"), "cpu")
        if len((<TensorCore>weights).sizes) != 1:  # PyTorch's words
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple((<TensorCore>weights).sizes)}")
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def c_iter(self):
        return self._indices()

    def _indices(self):
        # Drawn at the first index asked for, as PyTorch's generator draws.
        yield from random_ops.multinomial(self.weights, self.num_samples, self.replacement,
                                          self.generator).tolist()

    def c_len(self):
        return self.num_samples


class BatchSamplerCore(SamplerCore):
    """torch.utils.data.BatchSampler: the sampler's indices in lists of batch_size."""

    def init(self, sampler, batch_size, bint drop_last):
        _check_iterable(sampler, "sampler")
        _check_count_type(batch_size, "batch_size")
        _check_count_value(batch_size, "batch_size")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def c_iter(self):
        return self._batches()

    def _batches(self):
        indices = iter(self.sampler)
        if self.drop_last:
            # batch_size references to one iterator: zip takes batch_size indices at a time and
            # stops before a short batch.
            for batch in zip(*[indices] * self.batch_size):
                yield list(batch)
        else:
            batch = list(itertools.islice(indices, self.batch_size))
            while batch:
                yield batch
                batch = list(itertools.islice(indices, self.batch_size))

    def c_len(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


# --------------------------------------------------------------------------------------------
# Collation


cdef object default_collate(object batch):
    if isinstance(batch, (str, bytes)) or not isinstance(batch, collections.abc.Sequence):
        raise TypeError(f"batch must be a sequence of samples (a list), got "
                        f"{errors.shown(batch)}")
    if not len(batch):
        raise ValueError("batch must hold at least one sample, got an empty one")
    return _collate(batch)


cdef object _collate(object batch):
    """PyTorch's collate with default_collate_fn_map: by the type of the first sample."""
    elem = batch[0]
    elem_type = type(elem)
    numpy = np()
    if isinstance(elem, TensorCore):
        return copies.stack(list(batch), 0)
    if isinstance(elem, numpy.ndarray):
        if STRING_OR_OBJECT_ARRAY.search(elem.dtype.str) is not None:
            raise TypeError(COLLATE_ERROR.format(elem.dtype))
        return _collate([factories.as_tensor(sample, None, None) for sample in batch])
    if isinstance(elem, (numpy.bool_, numpy.number, numpy.object_)):
        return factories.as_tensor(list(batch), None, None)
    if isinstance(elem, float):
        return factories.tensor(list(batch), dtypes.named_dtype("float64"), None, False)
    if isinstance(elem, int):  # bool too: bool samples give a bool tensor, as PyTorch's
        return factories.tensor(list(batch), None, None, False)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuilt_mapping(elem, {key: _collate([sample[key] for sample in batch])
                                       for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return elem_type(*(_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):  # PyTorch's words
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [_collate(samples) for samples in transposed]  # a list, as PyTorch's
        return _rebuilt_sequence(elem, [_collate(samples) for samples in transposed])
    raise TypeError(COLLATE_ERROR.format(elem_type))


cdef object _rebuilt_mapping(object original, dict fields):
    """fields in original's mapping type, as PyTorch's collate and convert rebuild one: a copy
    of a mutable mapping updated, else the type called on them, else the dict itself."""
    try:
        if isinstance(original, collections.abc.MutableMapping):
            clone = copy.copy(original)
            clone.update(fields)
            return clone
        return type(original)(fields)
    except TypeError:
        return fields


cdef object _rebuilt_sequence(object original, list fields):
    """fields in original's sequence type, likewise (a list where neither works)."""
    try:
        if isinstance(original, collections.abc.MutableSequence):
            clone = copy.copy(original)
            for index, field in enumerate(fields):
                clone[index] = field
            return clone
        return type(original)(fields)
    except TypeError:
        return fields


cdef object default_convert(object data):
    """PyTorch's default_convert: numpy arrays and scalars to tensors, containers by field."""
    data_type = type(data)
    numpy = np()
    if isinstance(data, TensorCore):
        return data
    if data_type.__module__ == "numpy" and data_type.__name__ not in ("str_", "bytes_"):
        if isinstance(data, numpy.ndarray) and \
                STRING_OR_OBJECT_ARRAY.search(data.dtype.str) is not None:
            return data
        return factories.as_tensor(data, None, None)
    if isinstance(data, collections.abc.Mapping):
        return _rebuilt_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return data_type(*(default_convert(field) for field in data))
    if isinstance(data, tuple):
        return [default_convert(field) for field in data]  # a list, as PyTorch's
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt_sequence(data, [default_convert(field) for field in data])
    return data


def collate(batch):
    """default_collate, as the loader's collate_fn when none is given."""
    return default_collate(batch)


def convert(data):
    """default_convert, as the loader's collate_fn without automatic batching."""
    return default_convert(data)


# --------------------------------------------------------------------------------------------
# The DataLoader (Note [Loading in the calling thread])


class DataLoaderCore:
    """torch.utils.data.DataLoader over a map-style or iterable dataset, loading in the calling
    thread."""

    def init(self, dataset, batch_size, shuffle, sampler, batch_sampler, num_workers,
             collate_fn, bint drop_last, generator):
        # Every argument's type first, then the values, then PyTorch's exclusions; but an
        # IterableDataset refuses a shuffle, sampler or batch_sampler of any type, as PyTorch's.
        _check_dataset(dataset, "dataset", False)
        iterable = isinstance(dataset, IterableDatasetCore)
        if iterable:  # PyTorch's words, whatever the types: no order but the dataset's
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        if batch_size is not None:
            _check_count_type(batch_size, "batch_size")
        if shuffle is not None and shuffle is not True and shuffle is not False:
            raise TypeError(f"shuffle must be None or a bool, got {errors.shown(shuffle)}")
        if sampler is not None:
            _check_iterable(sampler, "sampler")
        if batch_sampler is not None:
            _check_iterable(batch_sampler, "batch_sampler")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int):
            raise TypeError(f"num_workers must be an int, got {errors.shown(num_workers)}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"collate_fn must be None or callable, got "
                            f"{errors.shown(collate_fn)}")
        _check_generator_type(generator)
        if batch_size is not None:
            _check_count_value(batch_size, "batch_size")
        if num_workers < 0:  # PyTorch's words
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers > 0:
            raise ValueError(f"num_workers={num_workers}: worker processes are not offered; "
                             "use num_workers=0, which loads in the calling thread (a forked "
                             "worker must not touch CUDA)")
        _check_generator_device(generator)
        shuffle = shuffle is True
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        sized = hasattr(type(dataset), "__len__")
        if sampler is None and not sized and batch_sampler is None and not iterable:
            raise TypeError(f"dataset must have a length (__len__) for the default samplers, "
                            f"got {errors.shown(dataset)}; give a sampler or a batch_sampler")
        if sampler is None and sized and not iterable:
            if shuffle:
                sampler = _public("RandomSamplerCore", RandomSamplerCore)(
                    dataset, generator=generator)
            else:
                sampler = _public("SequentialSamplerCore", SequentialSamplerCore)(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = _public("BatchSamplerCore", BatchSamplerCore)(
                sampler, batch_size, drop_last)
        self._iterable = iterable
        self._IterableDataset_len_called = None
        self.dataset = dataset
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = collate if self._auto_collation else convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self):
        if self._iterable:
            return self.batch_size is not None
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def c_len(self):
        if not self._iterable:
            return len(self._index_sampler)
        # PyTorch's: the dataset's own length, kept to warn when more batches come.
        length = self._IterableDataset_len_called = len(self.dataset)
        if self.batch_size is not None:
            if self.drop_last:
                return length // self.batch_size
            return (length + self.batch_size - 1) // self.batch_size
        return length

    def c_iter(self):
        return self._streamed() if self._iterable else self._batches()

    def _streamed(self):
        """The batches of an IterableDataset: its samples in its order, batch_size at a time
        (a short last batch kept unless drop_last), or one by one without batch_size."""
        samples = iter(self.dataset)
        collate_fn = self.collate_fn
        yielded = 0
        while True:
            if self.batch_size is None:
                try:
                    data = collate_fn(next(samples))
                except StopIteration:
                    return
            else:
                batch = list(itertools.islice(samples, self.batch_size))
                if not batch or (self.drop_last and len(batch) < self.batch_size):
                    return
                data = collate_fn(batch)
            yielded += 1
            reported = self._IterableDataset_len_called
            if reported is not None and yielded > reported:  # PyTorch's warning and words
                warnings.warn(f"Length of IterableDataset {self.dataset} was reported to be "
                              f"{reported}(when accessing len(dataloader)), but {yielded} "
                              "samples have been fetched. ", UserWarning)
            yield data

    def _batches(self):
        dataset = self.dataset
        collate_fn = self.collate_fn
        if not self._auto_collation:
            for index in self.sampler:
                yield collate_fn(dataset[index])
            return
        getitems = getattr(dataset, "__getitems__", None)
        for indices in self.batch_sampler:
            if getitems:  # PyTorch's fetcher: a dataset that loads a batch at once
                samples = getitems(indices)
            else:
                samples = [dataset[index] for index in indices]
            yield collate_fn(samples)
