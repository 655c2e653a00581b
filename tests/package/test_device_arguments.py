"""One parser for device arguments: tensorplay.device, "cuda", "cuda:1", ints, None."""
import pytest

import tensorplay
from tensorplay import accelerator, cuda
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
    (("gpu",), ValueError, "unknown device type in 'gpu'"),
    (("cuda:x",), ValueError, "invalid device index 'x' in 'cuda:x'"),
    (("cuda:-1",), ValueError, "invalid device index '-1'"),
    (("cuda:1", 2), ValueError, "type 'cuda:1' already has an index"),
    (("cuda", -1), ValueError, "index must be a non-negative int or None, got -1"),
    (("cuda", True), TypeError, "index must be an int or None, got bool (True)"),
    (("cuda", "1"), TypeError, "index must be an int or None, got str ('1')"),
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
    (1 << 40, ValueError, "device: device index 1099511627776 is out of range"),
    (-1, ValueError, "device must be a non-negative device index, got -1"),
    (-2 ** 70, ValueError, "device must be a non-negative device index, got -1180591620717411303424"),
    (accelerator.device_count(), ValueError, "is out of range"),
    ("cuda:abc", ValueError, "invalid device index 'abc'"),
])
def test_device_arguments_are_checked_everywhere(value, error, message):
    with pytest.raises(error, match=message):
        memory.memory_allocated(value)


def test_objects_with_type_and_index_are_accepted():
    class TorchLikeDevice:
        type, index = "cuda", None
    assert memory.memory_allocated(TorchLikeDevice()) == memory.memory_allocated()


def test_set_device_index_takes_minus_one_as_no_change_and_nothing_lower():
    for call in (accelerator.set_device_index, accelerator.device_index):
        with pytest.raises(ValueError, match=r"device must be -1 \(no change\) or a non-negative"):
            call(-7)
        with pytest.raises(ValueError, match="got -1180591620717411303424$"):
            call(-2 ** 70)
    assert accelerator.set_device_index(-1) is None


def test_an_echoed_value_is_cut_short():
    with pytest.raises(ValueError) as raised:
        accelerator.set_device_index("x" * 10 ** 7)
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("call, error, message", [
    (lambda: cuda.Stream(priority="tpu"), TypeError, "priority must be an int, got str"),
    (lambda: cuda.Stream(priority=2 ** 70), ValueError,
     "priority must be from -2\\*\\*31 to 2\\*\\*31 - 1, got 1180591620717411303424"),
    (lambda: accelerator.device_index("cuda:0"), TypeError,
     "device must be a device index \\(an int\\) or None, got str"),
    (lambda: cuda.external_stream(handle="tpu"), TypeError, "handle must be a cudaStream_t"),
    (lambda: cuda.external_stream(handle=2 ** 70), ValueError, "handle must be a cudaStream_t"),
    (lambda: cuda.caching_allocator_alloc(16, stream="tpu"), TypeError,
     "stream must be a tensorplay.cuda.Stream or None, got str"),
    (lambda: cuda.caching_allocator_alloc(None), TypeError, "size must be an int"),
    (lambda: cuda.caching_allocator_alloc(2 ** 70), ValueError,
     "size must be from 0 to 2\\*\\*63 - 1, got 1180591620717411303424"),
    (lambda: cuda.caching_allocator_delete(-1), ValueError, "ptr must be a pointer returned by"),
    (lambda: cuda.caching_allocator_delete(None), TypeError, "ptr must be a pointer"),
])
def test_arguments_are_checked_before_the_device_is_needed(call, error, message):
    """The same mistake gives the same error with or without a GPU."""
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: accelerator.current_accelerator(check_available="tpu"),
     "check_available must be a bool \\(True or False\\), got str \\('tpu'\\)"),
    (lambda: cuda.Event(enable_timing=object()), "enable_timing must be a bool"),
    (lambda: tensorplay.allclose(tensorplay.ones(2), tensorplay.ones(2), rtol="x"),
     "rtol must be a float \\(or an int\\), got str"),
    (lambda: tensorplay.ones(2).to("cpu", non_blocking=1), "non_blocking must be a bool"),
])
def test_builtin_typed_parameters_take_only_their_type(call, message):
    with pytest.raises(TypeError, match=message):
        call()
