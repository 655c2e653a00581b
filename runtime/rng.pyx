# cython: language_level=3
"""Philox4x32-10 generators: one default per CUDA device, one for the CPU, and user Generators.

A generator is a 64-bit seed and a 64-bit offset counted in 32-bit outputs per subsequence, as
cuRAND and PyTorch count it. Each random op reserves 4 (one Philox block per group of elements,
Note [Philox stream layout] in kernels/philox.cu), so the offset stays a multiple of 4. The state
is a CPU uint8 tensor of 16 bytes, seed then offset, little-endian: PyTorch's CUDA generator
state (aten/src/ATen/cuda/CUDAGeneratorImpl.cpp, get_state). The CPU generator runs the same
Philox stream with numpy, so one seed gives the same numbers on the CPU and on every GPU.

Seeding the accelerator before CUDA is initialised is deferred and the latest call wins
(PyTorch's _lazy_call, torch/cuda/__init__.py), so seeding never initialises CUDA and never
poisons fork.

Note [Graph-safe random numbers]
A kernel captured into a CUDA graph replays with the arguments it was captured with, so a
captured (seed, offset) would give the same numbers on every replay. As PyTorch does
(PhiloxCudaState, aten/src/ATen/cuda/detail/PhiloxCudaStateRaw.cuh), a generator registered with
a capture hands captured kernels a pointer to device memory holding (seed, base offset) plus the
offset within the graph; the capture counts the offset its kernels consume. Before each replay
the host writes the generator's current (seed, offset) there and advances the offset by what the
graph consumes, so a replay draws what the same kernels run eagerly would have drawn. A
generator is registered per capture id, so captures running at once on several threads each
count their own offset; a random op finds its capture through its stream's capture id. rng.pxd
lists the calls the graph code makes. While registered, reading or changing the generator's
state raises: the captured kernels read it only when the graph replays.
"""
import os

from libc.stdint cimport uint64_t, uintptr_t
from libc.string cimport memcpy
from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)

from cuda.bindings cimport cyruntime
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t, cudaStreamCaptureStatus

from tensorplay._runtime cimport allocator, device as _device, dtypes, errors, kernels, public
from tensorplay._runtime.device cimport DeviceSwitch
from tensorplay._runtime.dtypes cimport DtypeCore
from tensorplay._runtime.tensor cimport TensorCore
from tensorplay._runtime.kernels import read_kernel_source

# PyTorch's default seed (c10::detail::default_rng_seed_val), for new generators and the
# defaults until seeded.
DEFAULT_SEED = 67280421310721
STATE_BYTES = 16
cdef uint64_t OFFSET_STEP = 4      # offsets are multiples of one Philox block's 4 outputs

cdef GeneratorCore _cpu_generator = None
cdef list _device_generators = []  # index -> GeneratorCore or None, filled on first use
cdef object _state_template = None   # 16 zero bytes, copied for each state tensor
cdef DtypeCore _uint8 = None
cdef dict _preludes = {}          # DtypeCore -> prelude of kernels/philox.cu


# --------------------------------------------------------------------------------------------
# Arguments


cdef uint64_t _seed_value(object seed) except? 0:
    # The wrapper checked the range, -2**63 to 2**64 - 1 (api.yaml); PyTorch accepts negative
    # seeds and reads them as unsigned 64-bit.
    return <uint64_t>(seed & 0xFFFFFFFFFFFFFFFF)


cdef uint64_t _random_seed():
    return int.from_bytes(os.urandom(8), "little")


cdef str _where(int device):
    return "cpu" if device < 0 else f"cuda:{device}"


# --------------------------------------------------------------------------------------------
# The state tensor


cdef object _state_tensor(uint64_t seed, uint64_t offset):
    """A CPU uint8 tensor of (seed, offset), built directly: this is the whole cost of
    get_rng_state(), so it skips the general factories' argument handling."""
    global _state_template, _uint8
    cdef Py_buffer view
    if _state_template is None:
        import numpy
        _state_template = numpy.zeros(STATE_BYTES, dtype=numpy.uint8)
        _uint8 = dtypes.named_dtype("uint8")
    array = _state_template.copy()
    PyObject_GetBuffer(array, &view, PyBUF_ANY_CONTIGUOUS | PyBUF_WRITABLE)
    memcpy(view.buf, &seed, 8)             # little-endian hosts only (x86-64, aarch64)
    memcpy(<char*>view.buf + 8, &offset, 8)
    PyBuffer_Release(&view)
    cls = public.public_class("TensorCore", TensorCore)
    cdef TensorCore result = cls.__new__(cls)
    result.array = array
    result.owner = array
    result.sizes = (STATE_BYTES,)
    result.element_strides = (1,)
    result.dtype_object = _uint8
    result.device_index = -1
    result.element_count = STATE_BYTES
    return result


cdef int _read_state(object new_state, uint64_t* seed, uint64_t* offset) except -1:
    """(seed, offset) from a get_state() tensor or any 16-byte contiguous buffer."""
    cdef Py_buffer view
    if isinstance(new_state, TensorCore):
        if (<TensorCore>new_state).dtype_object.name != "uint8":
            raise TypeError(f"new_state must be a uint8 tensor, got "
                            f"{(<TensorCore>new_state).dtype_object.name}")
        if (<TensorCore>new_state).device_index != -1 or \
                not (<TensorCore>new_state).array.flags.c_contiguous:
            new_state = (<TensorCore>new_state).c_cpu().c_contiguous()
        new_state = (<TensorCore>new_state).array
    try:
        PyObject_GetBuffer(new_state, &view, PyBUF_ANY_CONTIGUOUS)
    except (TypeError, BufferError):
        raise TypeError(f"new_state must be the {STATE_BYTES}-byte state from get_state() or "
                        f"get_rng_state() (a uint8 tensor or bytes), got "
                        f"{type(new_state).__name__}") from None
    try:
        if view.len != STATE_BYTES:
            raise ValueError(f"new_state must be {STATE_BYTES} bytes (u64 seed, u64 offset, "
                             f"little-endian), got {view.len} bytes")
        memcpy(seed, view.buf, 8)
        memcpy(offset, <char*>view.buf + 8, 8)
    finally:
        PyBuffer_Release(&view)
    if offset[0] % OFFSET_STEP:
        raise ValueError(f"new_state holds offset {offset[0]}, which is not a multiple of "
                         f"{OFFSET_STEP}; states come from get_state() or get_rng_state()")
    return 0


# --------------------------------------------------------------------------------------------
# Generators


cdef class GeneratorCore:
    def __cinit__(self, *args, **kwargs):
        self.device_index = -1
        self.seed_value = DEFAULT_SEED
        self.offset = 0
        self.captures = {}

    cdef int init(self, object device) except -1:
        cdef int index = _device.tensor_device_arg(device, "device")
        if index >= 0:
            _device.checked_device(index)
        self.device_index = -1 if index == -2 else index
        return 0

    cdef int _check_not_captured(self, str call) except -1:
        if self.captures:
            raise RuntimeError(
                f"{call} cannot run while the {_where(self.device_index)} generator is registered "
                "with a CUDA graph capture: the captured kernels read its state only when the "
                "graph replays. Save or set the state before capture_begin() or after "
                "capture_end() instead")
        return 0

    cdef object c_manual_seed(self, object seed):
        cdef uint64_t value = _seed_value(seed)
        self._check_not_captured("manual_seed()")
        self.seed_value = value
        self.offset = 0
        return self

    cdef object c_seed(self):
        self._check_not_captured("seed()")
        self.seed_value = _random_seed()
        self.offset = 0
        return self.seed_value

    cdef object c_initial_seed(self):
        return self.seed_value

    cdef object c_get_state(self):
        self._check_not_captured("get_state()")
        return _state_tensor(self.seed_value, self.offset)

    cdef object c_set_state(self, object new_state):
        cdef uint64_t seed = 0, offset = 0
        _read_state(new_state, &seed, &offset)
        self._check_not_captured("set_state()")
        self.seed_value = seed
        self.offset = offset
        return self

    cdef object c_device(self):
        if self.device_index < 0:
            return public.public_class("DeviceCore", _device.DeviceCore)("cpu")
        return _device.device_object(self.device_index)

    cdef str repr_text(self):
        return f"<Generator device={_where(self.device_index)} seed={self.seed_value}>"

    cdef int philox_state(self, uint64_t increment, cudaStream_t stream,
                          PhiloxState* state) except -1:
        cdef cudaStreamCaptureStatus status = cyruntime.cudaStreamCaptureStatusNone
        cdef unsigned long long capture_id = 0
        cdef DeviceSwitch saved
        cdef CaptureRecord capture
        increment = (increment + OFFSET_STEP - 1) // OFFSET_STEP * OFFSET_STEP
        if self.device_index >= 0:
            with nogil:
                _device.enter_device(self.device_index, &saved)
                try:
                    errors.check(cyruntime.cudaStreamGetCaptureInfo(
                        stream, &status, &capture_id, NULL, NULL, NULL, NULL),
                        "cudaStreamGetCaptureInfo")
                finally:
                    _device.exit_device(&saved)
        if status == cyruntime.cudaStreamCaptureStatusActive:
            capture = self.captures.get(capture_id)
            if capture is None:
                raise RuntimeError(
                    f"the {_where(self.device_index)} generator is not registered with the CUDA "
                    "graph capture in progress on this stream, so its numbers would repeat on "
                    "every replay; capture through tensorplay.cuda.graphs, which registers the "
                    "device's default generator, and pass that generator (or none)")
            if capture.replay_state == NULL:
                # The first random kernel of this capture: the (seed, offset) slot comes from
                # the capture's private pool, so graphs that draw nothing allocate nothing.
                capture.replay_state = <uint64_t*>allocator.allocate(
                    self.device_index, 2 * sizeof(uint64_t), stream)
            state.seed = 0
            state.offset = capture.consumed
            state.replay_state = capture.replay_state
            capture.consumed += increment
            return 0
        state.seed = self.seed_value
        state.offset = self.offset
        state.replay_state = NULL
        self.offset += increment
        return 0


cdef GeneratorCore _new_generator(int device):
    cls = public.public_class("GeneratorCore", GeneratorCore)
    cdef GeneratorCore generator = cls.__new__(cls)
    generator.device_index = device
    return generator


cdef GeneratorCore default_generator(int device):
    global _cpu_generator
    if device < 0:
        if _cpu_generator is None:
            _cpu_generator = _new_generator(-1)
        return _cpu_generator
    if device >= len(_device_generators) or _device_generators[device] is None:
        # Initialising CUDA here runs the deferred seeding, which may create this very
        # generator: keep the one it seeded.
        _device.checked_device(device)
        while len(_device_generators) <= device:
            _device_generators.append(None)
        if _device_generators[device] is None:
            _device_generators[device] = _new_generator(device)
    return _device_generators[device]


cdef GeneratorCore generator_for(object generator, int device):
    if generator is None:
        return default_generator(device)
    if not isinstance(generator, GeneratorCore):
        raise TypeError(f"generator must be a tensorplay.Generator or None, got "
                        f"{type(generator).__name__}")
    if (<GeneratorCore>generator).device_index != device:
        raise ValueError(f"generator is on {_where((<GeneratorCore>generator).device_index)} "
                         f"but the tensor is on {_where(device)}; use a Generator of the "
                         f"tensor's device")
    return generator


cdef str philox_prelude(DtypeCore dtype):
    """Cached per dtype: get_kernel hashes the prelude on every launch, and a string built anew
    would be hashed anew."""
    cached = _preludes.get(dtype)
    if cached is None:
        cached = _preludes[dtype] = (f"{read_kernel_source('common')}\n"
                                     f"typedef {dtype.kernel_type} scalar_t;\n")
    return cached


# --------------------------------------------------------------------------------------------
# Graph capture (Note [Graph-safe random numbers]; the protocol is documented in rng.pxd)


cdef class CaptureRecord:
    def __cinit__(self):
        self.replay_state = NULL
        self.consumed = 0
        self.open = False

    def __dealloc__(self):
        # Back to the caching allocator, which reuses it only in stream order; a forked child
        # must not touch the parent's allocator.
        if self.replay_state != NULL and _device.is_initialized():
            allocator.release(self.replay_state)


cdef CaptureRecord register_capture(GeneratorCore generator, unsigned long long capture_id):
    if generator.device_index < 0:
        raise ValueError("CUDA graphs capture CUDA generators; this one is on the CPU")
    cdef CaptureRecord record = CaptureRecord()
    record.generator = generator
    record.capture_id = capture_id
    record.open = True
    generator.captures[capture_id] = record
    return record


cdef uint64_t capture_offset_consumed(CaptureRecord record) except? 0xFFFFFFFFFFFFFFFF:
    if record.open:
        record.open = False
        del record.generator.captures[record.capture_id]
    return record.consumed


cdef int share_capture(CaptureRecord record, unsigned long long body_capture_id) except -1:
    record.generator.captures[body_capture_id] = record
    return 0


cdef int unshare_capture(CaptureRecord record, unsigned long long body_capture_id) except -1:
    record.generator.captures.pop(body_capture_id, None)
    return 0


cdef int advance_for_replay(CaptureRecord record, cudaStream_t stream) except -1:
    if record.open:
        raise RuntimeError("advance_for_replay() before the capture ended; call "
                           "capture_offset_consumed() at capture end first")
    if record.consumed == 0:
        return 0
    # Captures in progress elsewhere are no obstacle: their kernels read the state from their
    # own records at their own replays, never the offset advanced here.
    cdef GeneratorCore generator = record.generator
    cdef CUfunction function = kernels.get_kernel(generator.device_index, "philox",
                                                  "set_replay_state",
                                                  philox_prelude(dtypes.named_dtype("float32")))
    cdef uint64_t* replay_state = record.replay_state
    cdef uint64_t seed = generator.seed_value
    cdef uint64_t offset = generator.offset
    cdef void* arguments[3]
    arguments[0] = &replay_state
    arguments[1] = &seed
    arguments[2] = &offset
    kernels.launch(generator.device_index, function, 1, 1, 0, stream, arguments)
    generator.offset += record.consumed
    return 0


# --------------------------------------------------------------------------------------------
# The accelerator API: default generators of CUDA devices


def _seed_current(uint64_t seed_value):
    cdef GeneratorCore generator = default_generator(_device.current_device())
    generator._check_not_captured("manual_seed()")
    generator.seed_value = seed_value
    generator.offset = 0


def _seed_every_device(uint64_t seed_value):
    cdef GeneratorCore generator
    _check_no_device_captured("manual_seed_all()")  # all or nothing
    for index in range(_device.device_count()):
        generator = default_generator(index)
        generator.seed_value = seed_value
        generator.offset = 0


cdef int _check_no_device_captured(str call) except -1:
    """Refuse call when any device's default generator is registered with an open capture,
    before any generator (the CPU's included) changes."""
    for generator in _device_generators:
        if generator is not None:
            (<GeneratorCore>generator)._check_not_captured(call)
    return 0


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
    # One random seed for every device, as torch.cuda.seed_all.
    seed_value = _random_seed()
    _device.call_when_initialized(lambda: _seed_every_device(seed_value))
    return None


cdef object initial_seed(int device):
    return default_generator(device).seed_value


cdef object get_rng_state(int device):
    return default_generator(device).c_get_state()


cdef list get_rng_state_all():
    if not _device.is_available():
        return []
    return [get_rng_state(index) for index in range(_device.device_count())]


cdef object set_rng_state(object new_state, int device):
    default_generator(device).c_set_state(new_state)
    return None


cdef object set_rng_state_all(object new_states):
    if not isinstance(new_states, (list, tuple)):
        raise TypeError(f"new_states must be a list or tuple of states, one per device, got "
                        f"{type(new_states).__name__} ({errors.shown(new_states)})")
    states = list(new_states)
    count = _device.device_count()
    if len(states) != count:
        raise ValueError(f"new_states must hold one state per device ({count}), got "
                         f"{len(states)}")
    # Every state read and every generator checked before any changes: all or nothing.
    cdef uint64_t seed = 0, offset = 0
    parsed = []
    for state in states:
        _read_state(state, &seed, &offset)
        parsed.append((seed, offset))
    _check_no_device_captured("set_rng_state_all()")
    cdef GeneratorCore generator
    for index, (seed, offset) in enumerate(parsed):
        generator = default_generator(index)
        generator.seed_value = seed
        generator.offset = offset
    return None


# --------------------------------------------------------------------------------------------
# Top-level seeding (tensorplay.manual_seed, seed, initial_seed): the CPU and every device


cdef object manual_seed_everywhere(object seed):
    cdef GeneratorCore cpu = default_generator(-1)
    _check_no_device_captured("manual_seed()")
    cpu.c_manual_seed(seed)
    # Before initialisation the CUDA seeding waits in a queue: only queue it where a device
    # exists (is_available() asks NVML, which is slower than seeding).
    if _device.is_initialized() or _device.is_available():
        manual_seed_all(seed)
    return cpu


cdef object seed_everywhere():
    cdef GeneratorCore cpu = default_generator(-1)
    _check_no_device_captured("seed()")
    seed_value = cpu.c_seed()
    if _device.is_initialized() or _device.is_available():
        manual_seed_all(seed_value)
    return seed_value


cdef object initial_seed_cpu():
    return default_generator(-1).seed_value
