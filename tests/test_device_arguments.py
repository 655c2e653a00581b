"""One parser for device arguments: tensorplay.device, "cuda", "cuda:1", ints, None."""
import pytest

import tensorplay
from tensorplay.accelerator import memory


def test_device_constructor_spellings():
    assert tensorplay.device("cuda:1") == tensorplay.device("cuda", 1)
    assert tensorplay.device(tensorplay.device("cuda:2")) == tensorplay.device("cuda", index=2)
    assert tensorplay.device(type="cpu").type == "cpu"
    assert tensorplay.device("cuda").index is None
    assert str(tensorplay.device("cuda", 3)) == "cuda:3"
    assert repr(tensorplay.device("cuda", 3)) == "device(type='cuda', index=3)"
    assert repr(tensorplay.device("cpu")) == "device(type='cpu')"
    assert len({tensorplay.device("cuda:0"), tensorplay.device("cuda", 0)}) == 1
    assert tensorplay.device("cuda:0") != "cuda:0"


@pytest.mark.parametrize("args, error, message", [
    (("gpu",), ValueError, "unknown device type 'gpu' in 'gpu'"),
    (("cuda:x",), ValueError, "invalid device index 'x' in 'cuda:x'"),
    (("cuda:-1",), ValueError, "invalid device index '-1'"),
    (("cuda:1", 2), ValueError, "type 'cuda:1' already has an index"),
    (("cuda", -1), ValueError, "index must be a non-negative int or None, got -1"),
    (("cuda", True), ValueError, "index must be a non-negative int or None, got True"),
    ((7,), TypeError, "type must be a string such as 'cuda' or 'cuda:1', or a device, got int"),
    (("cuda:99",), ValueError, "device index 99 is too large"),
])
def test_device_constructor_rejects_bad_input(args, error, message):
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        tensorplay.device(*args)


@pytest.mark.parametrize("value, error, message", [
    ("cpu", ValueError, "device must be a CUDA device, got 'cpu'"),
    (tensorplay.device("cpu"), ValueError, "device must be a CUDA device, got 'cpu'"),
    (1.5, TypeError, "device must be a device, a string such as 'cuda:1', an int or None, got "
                     "float"),
    (True, TypeError, "got a bool"),
    (1 << 40, ValueError, "is not a valid device index"),
    ("cuda:abc", ValueError, "invalid device index 'abc'"),
])
def test_device_arguments_are_checked_everywhere(value, error, message):
    with pytest.raises(error, match=message):
        memory.memory_allocated(value)


def test_objects_with_type_and_index_are_accepted():
    class TorchLikeDevice:
        type, index = "cuda", 0
    assert memory.memory_allocated(TorchLikeDevice()) == 0
