# cython: language_level=3
"""Per-device Philox4x32-10 generator state: a 64-bit seed and a 64-bit offset.

get_rng_state() is a CPU uint8 tensor of 16 bytes, seed then offset, little-endian
(docs/design.md, "RNG state"), as PyTorch's generator states are uint8 tensors. Seeding
before CUDA is initialised is deferred and the latest call wins (PyTorch's _lazy_call rule,
torch/cuda/random.py), so seeding never initialises CUDA and never poisons
fork.
"""
import os
import struct

from tensorplay._runtime cimport device as _device, dtypes, tensor
from tensorplay._runtime.tensor cimport TensorCore

# PyTorch's default CUDA seed (c10::detail::default_rng_seed_val), so unseeded runs of both
# libraries start from the same state.
DEFAULT_SEED = 67280421310721
STATE_FORMAT = "<QQ"
STATE_BYTES = struct.calcsize(STATE_FORMAT)
SEED_MASK = (1 << 64) - 1

# device index -> [seed, offset]; filled at initialisation.
cdef dict _states = {}


cdef list _device_state(int device):
    _device.checked_device(device)
    if device not in _states:
        _states[device] = [DEFAULT_SEED, 0]
    return _states[device]


cdef object _seed_value(object seed):
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    # PyTorch accepts negative seeds and reads them as unsigned 64-bit.
    if not -(1 << 63) <= seed <= SEED_MASK:
        raise ValueError(f"seed must fit in 64 bits, got {seed}")
    return seed & SEED_MASK


def _seed_current(seed_value):
    state = _device_state(_device.current_device())
    state[0], state[1] = seed_value, 0


def _seed_every_device(seed_value):
    for index in range(_device.device_count()):
        state = _device_state(index)
        state[0], state[1] = seed_value, 0


cdef object _random_seed():
    return int.from_bytes(os.urandom(8), "little")


cdef object manual_seed(object seed):
    seed_value = _seed_value(seed)
    _device.call_when_initialized(lambda: _seed_current(seed_value))
    return None


cdef object manual_seed_all(object seed):
    seed_value = _seed_value(seed)
    _device.call_when_initialized(lambda: _seed_every_device(seed_value))
    return None


cdef object seed():
    seed_value = _random_seed()
    _device.call_when_initialized(lambda: _seed_current(seed_value))
    return None


cdef object seed_all():
    seed_value = _random_seed()
    _device.call_when_initialized(lambda: _seed_every_device(seed_value))
    return None


cdef object initial_seed(int device):
    if device < 0:
        raise ValueError(f"device must be a non-negative index, got {device}")
    return _device_state(device)[0]


cdef object get_rng_state(int device):
    if device < 0:
        raise ValueError(f"device must be a non-negative index, got {device}")
    state = _device_state(device)
    return tensor.tensor(list(struct.pack(STATE_FORMAT, state[0], state[1])),
                         dtypes.named_dtype("uint8"), "cpu")


cdef list get_rng_state_all():
    if not _device.is_available():
        return []
    return [get_rng_state(index) for index in range(_device.device_count())]


cdef object set_rng_state(object new_state, int device):
    if device < 0:
        raise ValueError(f"device must be a non-negative index, got {device}")
    if isinstance(new_state, TensorCore):
        if (<TensorCore>new_state).dtype_object.name != "uint8":
            raise TypeError(f"new_state must be a uint8 tensor, got "
                            f"{(<TensorCore>new_state).dtype_object.name}")
        new_state = bytes((<TensorCore>(<TensorCore>new_state).c_reshape((-1,))).c_tolist())
    try:
        raw = bytes(memoryview(new_state).cast("B"))
    except TypeError:
        raise TypeError(f"new_state must be the {STATE_BYTES} bytes returned by "
                        f"get_rng_state(), got {type(new_state).__name__}") from None
    if len(raw) != STATE_BYTES:
        raise ValueError(f"new_state must be {STATE_BYTES} bytes (u64 seed, u64 offset, "
                         f"little-endian), got {len(raw)} bytes")
    seed_value, offset = struct.unpack(STATE_FORMAT, raw)
    state = _device_state(device)
    state[0], state[1] = seed_value, offset
    return None


cdef object set_rng_state_all(object new_states):
    states = list(new_states)
    count = _device.device_count()
    if len(states) != count:
        raise ValueError(f"new_states must hold one state per device ({count}), got "
                         f"{len(states)}")
    for index, state in enumerate(states):
        set_rng_state(state, index)
    return None
