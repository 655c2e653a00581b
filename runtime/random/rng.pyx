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
(PhiloxCudaState, aten/src/ATen/cuda/detail/PhiloxCudaStateRaw.cuh), a generator state registered
with a capture hands captured kernels a pointer to device memory holding (seed, base offset) plus
the offset within the graph; the capture counts the offset its kernels consume. Before each
replay the host writes the state's current (seed, offset) there and advances the offset by what
the graph consumes, so a replay draws what the same kernels run eagerly would have drawn. The
device's default generator is registered with every capture; other generators through
register_generator_state(). A state is registered per capture id, so captures running at once on
several threads each count their own offset; a random op finds its capture through its stream's
capture id. rng.pxd lists the calls the graph code makes. While registered, reading or changing
the state raises: the captured kernels read it only when the graph replays. Swapping the state a
generator uses (graphsafe_set_state()) is the one change allowed during a capture.

Note [Offsets on the device]
A conditional body runs any number of times per replay (a while body), or not at all (an if
body), so its draws cannot take fixed offsets: every pass would repeat them, and the host cannot
know how far a replay moved the generator. The base offset the captured kernels read from device
memory is therefore also the counter of what the bodies drew: the kernels read base + the offset
fixed at capture, and at the end of each body pass (each branch of an if/else or switch node) a
captured one-thread kernel adds what that pass drew to the base. The capture keeps counting the
fixed offsets outside the body, so draws after a body read the advanced base plus their own fixed
offset, and nested bodies compose. Every pass draws what the same draws made eagerly would, and
the draw kernels are the same ones eager draws run.
After a replay of such a graph the state's offset lives on the device: the record's base plus
what the graph drew outside bodies (`pending`, `offset`). Until it is read, nothing waits for it:
eager draws and later replays read it on the device (an eager kernel takes the same pointer, a
replay copies it with one one-thread kernel), stream-ordered after the replay. Reading the state
(get_state(), get_offset(), clone_state()) synchronises the device and brings it back to the
host; seeding or setting the state drops it. Generators never used in a body, and eager draws
from them, pay nothing for this.
"""
import os

cimport cython
from libc.stdint cimport uint64_t, uintptr_t
from libc.string cimport memcpy
from cpython.buffer cimport (PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBuffer_Release,
                             PyObject_GetBuffer)

from cuda.bindings cimport cyruntime
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t, cudaStreamCaptureStatus

from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport dtypes, errors, public
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.tensor cimport copies, core as tensor
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.kernels.nvrtc import read_kernel_source

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
    cdef TensorCore result = tensor.new_tensor()
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
    cdef TensorCore host
    if isinstance(new_state, TensorCore):
        if (<TensorCore>new_state).dtype_object.name != "uint8":
            raise TypeError(f"new_state must be a uint8 tensor, got "
                            f"{(<TensorCore>new_state).dtype_object.name}")
        if (<TensorCore>new_state).element_count != STATE_BYTES:
            raise ValueError(f"new_state must be {STATE_BYTES} bytes (u64 seed, u64 offset, "
                             f"little-endian), got a uint8 tensor of "
                             f"{(<TensorCore>new_state).element_count} elements")
        # Any layout and device: the bytes in row-major order (a strided or CUDA tensor is
        # copied to a contiguous host array first).
        host = <TensorCore>(<TensorCore>new_state).c_detach()
        if host.device_index != -1:
            host = <TensorCore>copies.cpu(host)
        import numpy
        new_state = numpy.ascontiguousarray(host.array).reshape(-1)
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


cdef class GeneratorState:
    def __cinit__(self, *args, **kwargs):
        self.device_index = -1
        self.seed = DEFAULT_SEED
        self.offset = 0
        self.captures = {}

    cdef int check_not_captured(self, str call) except -1:
        if self.captures:
            raise RuntimeError(
                f"{call} cannot run while the {_where(self.device_index)} generator's state is "
                "registered with a CUDA graph capture: the captured kernels read it only when the "
                "graph replays. Save or set the state before capture_begin() or after "
                "capture_end(), or swap states with graphsafe_get_state() and "
                "graphsafe_set_state(), which a capture allows")
        return 0

    cdef int settle(self, str call) except -1:
        cdef uint64_t base = 0
        cdef const uint64_t* source
        cdef DeviceSwitch saved
        cdef int mode
        if self.pending is None:
            return 0
        if _device.device_capturing(self.device_index):
            raise RuntimeError(
                f"{call} must read the generator's offset back from {_where(self.device_index)}, "
                "where a graph that draws inside conditional nodes left it, and that synchronises "
                "the device, which an open graph capture forbids; call it before capture_begin() "
                "or after capture_end()")
        _device.synchronize(self.device_index)
        source = self.pending.replay_state + 1
        with nogil:
            _device.enter_device(self.device_index, &saved)
            _device.enter_relaxed(&mode)
            try:
                errors.check(cyruntime.cudaMemcpy(&base, source, sizeof(uint64_t),
                                                  cyruntime.cudaMemcpyDeviceToHost), b"cudaMemcpy")
            finally:
                _device.exit_relaxed(&mode)
                _device.exit_device(&saved)
        self.offset += base
        self.pending = None
        return 0

    cdef int restart(self, uint64_t seed, uint64_t offset) except -1:
        self.seed = seed
        self.offset = offset
        self.pending = None
        return 0

    cdef int reserve(self, uint64_t increment, cudaStream_t stream,
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
                    "device's default generator, and register any other generator (or state from "
                    "graphsafe_get_state() / clone_state()) with the graph's "
                    "register_generator_state()")
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
        state.seed = self.seed
        state.offset = self.offset
        # Note [Offsets on the device]: the kernel adds offset to the base a replay left there.
        if self.pending is None:
            state.replay_state = NULL
        else:
            state.replay_state = self.pending.replay_state
        self.offset += increment
        return 0


cdef class GeneratorCore:
    def __cinit__(self, *args, **kwargs):
        self.device_index = -1
        self.state = GeneratorState()

    cdef int init(self, object device) except -1:
        cdef int index = _device.tensor_device_arg(device, "device")
        if index >= 0:
            _device.checked_device(index)
        self.device_index = -1 if index == -2 else index
        self.state.device_index = self.device_index
        return 0

    cdef object c_manual_seed(self, object seed):
        cdef uint64_t value = _seed_value(seed)
        self.state.check_not_captured("manual_seed()")
        self.state.restart(value, 0)
        return self

    cdef object c_seed(self):
        self.state.check_not_captured("seed()")
        self.state.restart(_random_seed(), 0)
        return self.state.seed

    cdef object c_initial_seed(self):
        return self.state.seed

    cdef object c_get_state(self):
        self.state.check_not_captured("get_state()")
        self.state.settle("get_state()")
        return _state_tensor(self.state.seed, self.state.offset)

    cdef object c_set_state(self, object new_state):
        cdef uint64_t seed = 0, offset = 0
        _read_state(new_state, &seed, &offset)
        self.state.check_not_captured("set_state()")
        self.state.restart(seed, offset)
        return self

    cdef object c_get_offset(self):
        self.state.check_not_captured("get_offset()")
        self.state.settle("get_offset()")
        return self.state.offset

    cdef object c_set_offset(self, uint64_t offset):
        if offset % OFFSET_STEP:
            raise ValueError(f"offset must be a multiple of {OFFSET_STEP} (each random op "
                             f"takes one Philox block of 4 outputs), got {offset}")
        self.state.check_not_captured("set_offset()")
        self.state.restart(self.state.seed, offset)
        return self

    cdef object c_graphsafe_get_state(self):
        # Shares the state object, as PyTorch does: no read, so legal during a capture.
        cdef GeneratorCore view = _new_generator(self.device_index)
        view.state = self.state
        return view

    cdef object c_graphsafe_set_state(self, object state):
        if not isinstance(state, GeneratorCore):
            raise TypeError(f"state must be a tensorplay.Generator (from graphsafe_get_state() or "
                            f"clone_state()), got {type(state).__name__}")
        if (<GeneratorCore>state).device_index != self.device_index:
            raise ValueError(f"state belongs to a generator of "
                             f"{_where((<GeneratorCore>state).device_index)}, but this generator "
                             f"is on {_where(self.device_index)}")
        self.state = (<GeneratorCore>state).state
        return None

    cdef object c_clone_state(self):
        self.state.check_not_captured("clone_state()")
        self.state.settle("clone_state()")
        cdef GeneratorCore copy = _new_generator(self.device_index)
        copy.state.seed = self.state.seed
        copy.state.offset = self.state.offset
        return copy

    cdef object c_device(self):
        if self.device_index < 0:
            return public.public_class("DeviceCore", _device.DeviceCore)("cpu")
        return _device.device_object(self.device_index)

    cdef str repr_text(self):
        return f"<Generator device={_where(self.device_index)} seed={self.state.seed}>"

    cdef int philox_state(self, uint64_t increment, cudaStream_t stream,
                          PhiloxState* state) except -1:
        return self.state.reserve(increment, stream, state)


cdef GeneratorCore _new_generator(int device):
    cls = public.public_class("GeneratorCore", GeneratorCore)
    cdef GeneratorCore generator = cls.__new__(cls)
    generator.device_index = device
    generator.state.device_index = device
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


# Note [Graph teardown in the garbage collector]
# A graph caught in a reference cycle is cleared by the garbage collector before its __dealloc__
# ends its capture, and clearing sets every object attribute to None. Records and a graph's
# GraphGenerators keep theirs (no_gc_clear: they hold no cycle of their own that only they could
# break), the graph may hand in None for its GraphGenerators, and a state may have lost its
# captures dict: the teardown steps below accept all three.


@cython.no_gc_clear
cdef class CaptureRecord:
    def __cinit__(self):
        self.replay_state = NULL
        self.consumed = 0
        self.open = False
        self.dynamic = False
        self.marks = []

    def __dealloc__(self):
        # Back to the caching allocator, which reuses it only in stream order; a forked child
        # must not touch the parent's allocator.
        if self.replay_state != NULL and _device.is_initialized():
            allocator.release(self.replay_state)


@cython.no_gc_clear
cdef class GraphGenerators:
    def __cinit__(self):
        self.device = -1
        self.registered = []
        self.records = []
        self.body_ids = []


cdef GraphGenerators graph_generators():
    return GraphGenerators()


cdef GeneratorState _cuda_state(object generator):
    if not isinstance(generator, GeneratorCore):
        raise TypeError(f"generator must be a tensorplay.Generator of a CUDA device (or a state "
                        f"from graphsafe_get_state() or clone_state()), got "
                        f"{type(generator).__name__}")
    if (<GeneratorCore>generator).device_index < 0:
        raise ValueError("generator is a CPU generator; CUDA graphs draw from CUDA generators, "
                         "so register a tensorplay.Generator('cuda') instead")
    return (<GeneratorCore>generator).state


cdef int _open_record(GraphGenerators generators, GeneratorState state) except -1:
    """Register state with the open capture, and with its open bodies (draws there count from
    the start of each)."""
    if generators.capture_id in state.captures:
        return 0
    cdef CaptureRecord record = CaptureRecord()
    record.state = state
    record.capture_id = generators.capture_id
    record.open = True
    record.marks = [0] * len(generators.body_ids)
    state.captures[generators.capture_id] = record
    for body_id in generators.body_ids:
        state.captures[body_id] = record
    generators.records.append(record)
    return 0


cdef int register_generator(GraphGenerators generators, object generator) except -1:
    cdef GeneratorState state = _cuda_state(generator)
    if generators.capturing and state.device_index != generators.device:
        raise ValueError(f"generator is on {_where(state.device_index)}, but the graph captures "
                         f"on cuda:{generators.device}; register a generator of that device")
    for known in generators.registered:
        if known is state:
            return 0
    generators.registered.append(state)
    if generators.capturing:
        _open_record(generators, state)
    return 0


cdef int begin_capture(GraphGenerators generators, int device,
                       unsigned long long capture_id) except -1:
    cdef GeneratorState state
    for state in generators.registered:  # every check before any registration
        if state.device_index != device:
            raise ValueError(f"a generator registered with register_generator_state() is on "
                             f"{_where(state.device_index)}, but the capture is on cuda:{device}; "
                             "register generators of the capture's device")
    generators.device = device
    generators.capture_id = capture_id
    generators.records = []
    generators.body_ids = []
    generators.draws = False
    generators.capturing = True
    _open_record(generators, default_generator(device).state)
    for state in generators.registered:
        _open_record(generators, state)
    return 0


cdef int enter_body(GraphGenerators generators, unsigned long long body_capture_id) except -1:
    cdef CaptureRecord record
    for record in generators.records:
        record.marks.append(record.consumed)
        record.state.captures[body_capture_id] = record
    generators.body_ids.append(body_capture_id)
    return 0


cdef int _unregister(CaptureRecord record, object capture_id) except -1:
    if record.state.captures is not None:  # Note [Graph teardown in the garbage collector]
        record.state.captures.pop(capture_id, None)
    return 0


cdef int leave_branch(GraphGenerators generators, cudaStream_t stream, bint keep) except -1:
    """Note [Offsets on the device]: what this pass drew moves to the device's base offset, and
    the capture's fixed count goes back to where the body began."""
    cdef CaptureRecord record
    cdef uint64_t drawn
    if generators is None or not generators.body_ids:
        return 0
    body_id = generators.body_ids[-1]
    for record in generators.records:
        drawn = record.consumed - <uint64_t>record.marks[-1]
        record.consumed = record.marks[-1]
        _unregister(record, body_id)
        if keep and drawn:
            _capture_advance(record, stream, drawn)
            record.dynamic = True
    return 0


cdef int _capture_advance(CaptureRecord record, cudaStream_t stream, uint64_t drawn) except -1:
    cdef CUfunction function = kernels.get_kernel(record.state.device_index, "philox",
                                                  "advance_replay_offset", _state_prelude())
    cdef uint64_t* replay_state = record.replay_state
    cdef void* arguments[2]
    arguments[0] = &replay_state
    arguments[1] = &drawn
    kernels.launch(record.state.device_index, function, 1, 1, 0, stream, arguments)
    return 0


cdef int next_branch(GraphGenerators generators, unsigned long long body_capture_id) except -1:
    cdef CaptureRecord record
    generators.body_ids[-1] = body_capture_id
    for record in generators.records:
        record.state.captures[body_capture_id] = record
    return 0


cdef int leave_body(GraphGenerators generators) except -1:
    cdef CaptureRecord record
    if generators is None or not generators.body_ids:
        return 0
    generators.body_ids.pop()
    for record in generators.records:
        record.marks.pop()
    return 0


cdef int end_capture(GraphGenerators generators) except -1:
    cdef CaptureRecord record
    if generators is None or not generators.capturing:
        return 0
    generators.capturing = False
    for record in generators.records:
        record.open = False
        _unregister(record, record.capture_id)
        for body_id in generators.body_ids:
            _unregister(record, body_id)
    generators.body_ids = []
    # A graph that drew nothing keeps no record, and its replays skip the prologue.
    generators.records = [record for record in generators.records
                          if record.consumed or record.dynamic]
    generators.draws = bool(generators.records)
    return 0


cdef str _state_prelude():
    return philox_prelude(dtypes.named_dtype("float32"))


cdef int advance_for_replay(GraphGenerators generators, cudaStream_t stream) except -1:
    # Captures in progress elsewhere are no obstacle: their kernels read the state from their
    # own records at their own replays, never the offset advanced here.
    cdef CaptureRecord record
    cdef GeneratorState state
    cdef CUfunction function
    cdef uint64_t* replay_state
    cdef const uint64_t* source
    cdef uint64_t seed, offset
    cdef void* arguments[4]
    for record in generators.records:
        state = record.state
        replay_state = record.replay_state
        seed = state.seed
        offset = state.offset
        arguments[0] = &replay_state
        if state.pending is None:
            function = kernels.get_kernel(state.device_index, "philox", "set_replay_state",
                                          _state_prelude())
            arguments[1] = &seed
            arguments[2] = &offset
        else:
            # Note [Offsets on the device]: the base comes from where the last replay left it.
            function = kernels.get_kernel(state.device_index, "philox", "follow_replay_state",
                                          _state_prelude())
            source = state.pending.replay_state
            arguments[1] = &source
            arguments[2] = &seed
            arguments[3] = &offset
        kernels.launch(state.device_index, function, 1, 1, 0, stream, arguments)
        if state.pending is None and not record.dynamic:
            state.offset += record.consumed
        else:
            state.pending = record
            state.offset = record.consumed
    return 0


cdef int forget_capture(GraphGenerators generators) except -1:
    if generators is None:
        return 0
    generators.records = []
    generators.draws = False
    return 0


cdef tuple saved_capture(GraphGenerators generators):
    """What replays of the current capture use, kept while a recapture may replace it."""
    return (generators.records, generators.draws)


cdef int restore_capture(GraphGenerators generators, tuple saved) except -1:
    """A recapture failed: replays go on with the records of the capture it would replace."""
    if generators is None:  # Note [Graph teardown in the garbage collector]
        return 0
    generators.records, generators.draws = saved
    return 0


cdef int clear(GraphGenerators generators) except -1:
    if generators is None:
        return 0
    forget_capture(generators)
    generators.registered = []
    return 0


# --------------------------------------------------------------------------------------------
# The accelerator API: default generators of CUDA devices


def _seed_current(uint64_t seed_value):
    cdef GeneratorCore generator = default_generator(_device.current_device())
    generator.state.check_not_captured("manual_seed()")
    generator.state.restart(seed_value, 0)


def _seed_every_device(uint64_t seed_value):
    cdef GeneratorCore generator
    _check_no_device_captured("manual_seed_all()")  # all or nothing
    for index in range(_device.device_count()):
        generator = default_generator(index)
        generator.state.restart(seed_value, 0)


cdef int _check_no_device_captured(str call) except -1:
    """Refuse call when any device's default generator is registered with an open capture,
    before any generator (the CPU's included) changes."""
    for generator in _device_generators:
        if generator is not None:
            (<GeneratorCore>generator).state.check_not_captured(call)
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
    return default_generator(device).state.seed


cdef object get_rng_state(int device):
    return default_generator(device).c_get_state()


cdef list get_rng_state_all():
    if not _device.is_available():
        return []
    return [get_rng_state(index) for index in range(_device.device_count())]


cdef object set_rng_state(object new_state, int device):
    # The state is read before the device's generator is looked up, so a bad state reads the
    # same without a GPU (docs/design.md, "Where arguments are checked").
    cdef uint64_t seed = 0, offset = 0
    _read_state(new_state, &seed, &offset)
    default_generator(device).c_set_state(new_state)
    return None


cdef object set_rng_state_all(object new_states):
    if not isinstance(new_states, (list, tuple)):
        raise TypeError(f"new_states must be a list or tuple of states, one per device, got "
                        f"{type(new_states).__name__} ({errors.shown(new_states)})")
    states = list(new_states)
    # Every state read (before the device count, so a bad state reads the same without a GPU)
    # and every generator checked before any changes: all or nothing.
    cdef uint64_t seed = 0, offset = 0
    parsed = []
    for index, state in enumerate(states):
        try:
            _read_state(state, &seed, &offset)
        except (TypeError, ValueError) as error:
            raise type(error)(f"new_states[{index}]: {error}") from None
        parsed.append((seed, offset))
    count = _device.device_count()
    if len(states) != count:
        raise ValueError(f"new_states must hold one state per device ({count}), got "
                         f"{len(states)}")
    _check_no_device_captured("set_rng_state_all()")
    cdef GeneratorCore generator
    for index, (seed, offset) in enumerate(parsed):
        generator = default_generator(index)
        generator.state.restart(seed, offset)
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
    return default_generator(-1).state.seed
