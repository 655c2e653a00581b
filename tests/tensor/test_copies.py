"""tensor() copies, as_tensor() / from_numpy() / from_dlpack() share, as PyTorch documents.

Each test writes into the source after the tensor is made (and into the tensor where the
memory is shared) and reads the other side back. On the CPU, no GPU needed.
"""
import array
import gc
import weakref

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                "float64"]


class DLPackProducer:
    """Another library's CPU tensor that speaks DLPack only (no __array__)."""

    def __init__(self, values):
        self.values = values

    def __dlpack__(self, **kwargs):
        return self.values.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.values.__dlpack_device__()


# -- tensor() copies ------------------------------------------------------------------------


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_tensor_of_a_numpy_array_is_a_copy(name):
    source = numpy.arange(6).reshape(2, 3).astype(name)
    made = tp.tensor(source)
    assert made.dtype == getattr(tp, name)
    before = made.tolist()
    source[...] = 0
    assert made.tolist() == before
    made.fill_(1)
    assert not source.any()


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_tensor_requiring_grad_is_a_copy(name):
    source = numpy.array([1.0, 2.0, 3.0], dtype=name)
    made = tp.tensor(source, requires_grad=True)
    source[0] = 9
    assert made.tolist() == [1.0, 2.0, 3.0] and made.requires_grad and made.is_leaf


@pytest.mark.parametrize("make", [
    lambda: numpy.arange(12.0).reshape(3, 4)[:, 1:3],      # not contiguous
    lambda: numpy.arange(12.0).reshape(3, 4).T,            # Fortran order
    lambda: numpy.array(2.5),                              # 0-d
    lambda: numpy.arange(4, dtype=numpy.int32),            # converted to another dtype below
], ids=["strided", "transposed", "0-d", "converted"])
def test_tensor_copies_every_layout(make):
    source = make()
    made = tp.tensor(source, dtype=tp.float64 if source.dtype == numpy.int32 else None)
    expected = source.tolist()
    source[...] = 0
    assert made.tolist() == expected


def test_tensor_of_another_buffer_is_a_copy():
    # numpy.asarray() of a buffer (array.array, memoryview) is a view of it.
    buffer = array.array("d", [1.0, 2.0, 3.0])
    made = tp.tensor(buffer)
    buffer[0] = 9.0
    assert made.tolist() == [1.0, 2.0, 3.0]
    view = memoryview(bytearray(b"\x01\x02\x03"))
    made = tp.tensor(view)
    view[0] = 9
    assert made.tolist() == [1, 2, 3]


class ArrayHolder:
    """An object numpy reads through __array__, handing out the array it holds (as a pandas
    Series does)."""

    def __init__(self, values):
        self.values = values

    def __array__(self, dtype=None, copy=None):
        return self.values


def test_tensor_of_an_object_with_array_is_a_copy():
    source = numpy.arange(3, dtype=numpy.int64)
    made = tp.tensor(ArrayHolder(source))
    source[0] = 9
    assert made.tolist() == [0, 1, 2]


def test_tensor_of_a_tensor_is_a_detached_copy():
    source = tp.tensor([1.0, 2.0], requires_grad=True)
    made = tp.tensor(source)
    assert made.data_ptr() != source.data_ptr()
    assert made.grad_fn is None and not made.requires_grad
    with tp.no_grad():
        source.fill_(5)
    assert made.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("name", ["float32", "float64", "int64", "bool"])
def test_tensor_of_a_dlpack_producer_is_a_copy_of_its_dtype(name):
    source = numpy.arange(4).astype(name)
    made = tp.tensor(DLPackProducer(source))
    assert made.dtype == getattr(tp, name)
    expected = source.tolist()
    source[...] = not source[0] if name == "bool" else 9
    assert made.tolist() == expected


def test_tensor_of_a_dlpack_producer_takes_dtype_and_requires_grad():
    source = numpy.arange(3, dtype=numpy.int64)
    made = tp.tensor(DLPackProducer(source), dtype=tp.float32, requires_grad=True)
    source[0] = 5
    assert made.dtype == tp.float32 and made.requires_grad and made.tolist() == [0.0, 1.0, 2.0]


# -- as_tensor() and from_dlpack() share ----------------------------------------------------


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_as_tensor_shares_a_numpy_array(name):
    source = numpy.zeros(4, dtype=name)
    shared = tp.as_tensor(source)
    assert shared.data_ptr() == source.ctypes.data
    source[1] = 1
    assert shared.tolist()[1] == source.tolist()[1]
    shared.fill_(1)
    assert source.tolist() == [1] * 4


def test_as_tensor_copies_only_what_it_must():
    source = numpy.arange(3, dtype=numpy.int64)
    assert tp.as_tensor(source, dtype=tp.float32).data_ptr() != source.ctypes.data
    mine = tp.tensor([1.0, 2.0])
    assert tp.as_tensor(mine) is mine
    listed = [1.0, 2.0]
    made = tp.as_tensor(listed)
    listed[0] = 5.0
    assert made.tolist() == [1.0, 2.0]


def test_as_tensor_shares_a_dlpack_producer():
    source = numpy.arange(3.0)
    shared = tp.as_tensor(DLPackProducer(source))
    source[0] = 9.0
    assert shared.tolist() == [9.0, 1.0, 2.0]


def test_as_tensor_refuses_a_layout_it_cannot_share():
    # PyTorch's as_tensor raises here too rather than copying what it was asked to share.
    with pytest.raises(ValueError, match="negative"):
        tp.as_tensor(numpy.arange(3)[::-1])


def test_from_dlpack_shares():
    source = numpy.arange(3.0)
    shared = tp.from_dlpack(source)
    source[2] = 7.0
    assert shared.tolist() == [0.0, 1.0, 7.0]
    shared.fill_(1.0)
    assert source.tolist() == [1.0, 1.0, 1.0]


# -- from_numpy() shares, as torch.from_numpy ------------------------------------------------


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_from_numpy_shares_both_ways(name):
    source = numpy.zeros((2, 3), dtype=name)
    shared = tp.from_numpy(source)
    assert shared.dtype == getattr(tp, name) and shared.shape == (2, 3)
    assert shared.device.type == "cpu" and not shared.requires_grad
    assert shared.data_ptr() == source.ctypes.data
    source[1, 2] = 1
    assert shared.tolist()[1][2] == source[1, 2]
    shared.fill_(1)
    assert bool(numpy.all(source == 1))


def test_from_numpy_keeps_strides_views_and_the_array_alive():
    base = numpy.arange(12.0).reshape(3, 4)
    shared = tp.from_numpy(base[:, ::2])
    assert shared.stride() == (4, 2)
    base[2, 2] = 99.0
    assert shared.tolist()[2][1] == 99.0
    source = numpy.arange(5.0)
    alive = weakref.ref(source)
    shared = tp.from_numpy(source)
    del source
    gc.collect()
    assert alive() is not None and shared.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    del shared
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("value, error, words", [
    ([1, 2, 3], TypeError, "expected np.ndarray (got list)"),
    (tp.tensor([1.0]), TypeError, "expected np.ndarray"),
    (numpy.zeros(2, dtype=numpy.complex64), TypeError, "numpy.complex64"),
    (numpy.zeros(2, dtype=numpy.uint16), TypeError, "The only supported types are"),
    (numpy.zeros(2, dtype=object), TypeError, "numpy.object_"),
    (numpy.zeros(2, dtype=">f4"), ValueError, "byte order"),
    (numpy.arange(3)[::-1], ValueError, "negative"),
    (numpy.ndarray((2,), dtype=numpy.int32, buffer=numpy.zeros(9, numpy.uint8), offset=1,
                   strides=(3,)), ValueError, "not a multiple of the element byte size"),
], ids=["list", "tensor", "complex", "uint16", "object", "big-endian", "negative-stride",
        "odd-stride"])
def test_from_numpy_refuses_what_it_cannot_share(value, error, words):
    with pytest.raises(error) as caught:
        tp.from_numpy(value)
    assert words in str(caught.value)


# -- the same answers as PyTorch, where it is installed -------------------------------------


def test_copies_and_shares_as_pytorch_does():
    torch = import_or_skip("torch")
    for library, make in (("torch", torch), ("tensorplay", tp)):
        source = numpy.arange(3.0)
        copied, shared, converted = (make.tensor(source), make.as_tensor(source),
                                     make.from_numpy(source))
        source[0] = 9.0
        assert copied.tolist() == [0.0, 1.0, 2.0], library
        assert shared.tolist() == converted.tolist() == [9.0, 1.0, 2.0], library
    theirs = torch.arange(3.0, dtype=torch.float64)
    ours = tp.tensor(theirs)
    theirs[0] = 9.0
    assert ours.dtype == tp.float64 and ours.tolist() == [0.0, 1.0, 2.0]
    shared = tp.as_tensor(theirs)
    theirs[1] = 8.0
    assert shared.tolist() == [9.0, 8.0, 2.0]


def test_setitem_checks_the_values_type_before_the_selection():
    """Tensor.__setitem__'s value is typed (a tensor, bool, int or float): another type is the
    TypeError naming it, even with a selection that would fail next."""
    t = tp.zeros(2)
    for wrong in ("1", None, [1.0]):
        with pytest.raises(TypeError, match="^value must be a tensor or a bool, int or float, "
                                            f"got {type(wrong).__name__}$"):
            t[99] = wrong
    with pytest.raises(IndexError):
        t[99] = 1.0
