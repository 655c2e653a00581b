"""Arguments are checked before anything needs the device (docs/design.md, "Where arguments are
checked"), so a bad argument gets the same error with and without a GPU.

These run on every machine: on one without a GPU they show that no bad argument is answered with
"no accelerator is available", and on a GPU machine that the messages are the same there.
tests/package/test_api_fuzz.py holds the whole public surface to the same rule.
"""
import pytest

import tensorplay
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory, random

NO_ACCELERATOR = "no accelerator is available"


@pytest.mark.parametrize("state, error, message", [
    (b"\x00" * 15, ValueError, "new_state must be 16 bytes .* got 15 bytes"),
    (bytes(range(17)), ValueError, "new_state must be 16 bytes .* got 17 bytes"),
    (bytes(8) + (6).to_bytes(8, "little"), ValueError, "offset 6, which is not a multiple of 4"),
    ("tpu", TypeError, "new_state must be the 16-byte state"),
    (1.5, TypeError, "new_state must be the 16-byte state"),
    ("float tensor", TypeError, "new_state must be a uint8 tensor, got float32"),
    ("short tensor", ValueError, "got a uint8 tensor of 15 elements"),
])
def test_set_rng_state_checks_the_state_before_the_device(state, error, message):
    state = {"float tensor": lambda: tensorplay.zeros(16),
             "short tensor": lambda: tensorplay.zeros(15, dtype=tensorplay.uint8)}.get(
        state, lambda: state)()
    with pytest.raises(error, match=message) as raised:
        random.set_rng_state(state)
    assert NO_ACCELERATOR not in str(raised.value)


def test_set_rng_state_all_checks_every_state_before_the_device_count():
    with pytest.raises(ValueError, match=r"new_states\[1\]: new_state must be 16 bytes"):
        random.set_rng_state_all([bytes(16), b"\x00" * 15])
    with pytest.raises(TypeError, match=r"new_states\[0\]: new_state must be a uint8 tensor"):
        random.set_rng_state_all([tensorplay.zeros(16)])


class NullPointer:
    """A __cuda_array_interface__ producer whose data pointer is NULL for a non-empty shape."""

    __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (0, False),
                                "version": 3, "strides": None}


def test_a_null_pointer_for_elements_is_refused_before_the_device():
    with pytest.raises(ValueError, match=r"\['data'\] is a NULL pointer, but the shape has 4 "
                                         "elements"):
        tensorplay.as_tensor(NullPointer())


class HostileRepr:
    def __repr__(self):
        raise RuntimeError("repr of the argument failed")


class NotAStringRepr:
    def __repr__(self):
        return 7


@pytest.mark.parametrize("value", [HostileRepr(), NotAStringRepr()])
def test_an_argument_whose_repr_fails_still_gets_its_type_error(value):
    for call in (memory.memory_allocated, memory.memory_stats, accelerator.synchronize):
        with pytest.raises(TypeError, match=f"device must be a device.*got {type(value).__name__} "
                                            rf"\(a {type(value).__name__} that cannot be shown\)"):
            call(value)
    with pytest.raises(TypeError, match="cannot be shown"):
        tensorplay.ones(1).to(value)


def test_stage_and_launch_checks_its_pairs_before_the_graph_state():
    with pytest.raises(TypeError, match=r"inputs\[0\]"):
        cuda.CUDAGraph().stage_and_launch([tensorplay.zeros(2)], ["not a tensor"])


def test_make_graphed_callables_checks_its_arguments_before_the_device():
    with pytest.raises(TypeError, match="callables must be a function or a tensorplay.nn.Module"):
        cuda.graphs.make_graphed_callables(None, None)
