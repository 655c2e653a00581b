# Philox4x32-10 generators: state, seeding, and the graph-capture protocol (rng.pyx explains).
from libc.stdint cimport uint64_t
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.dtypes cimport DtypeCore

cdef struct PhiloxState:            # matches PhiloxState in kernels/philox.cu
    uint64_t seed
    uint64_t offset                 # in 32-bit outputs, a multiple of 4
    const uint64_t* replay_state    # captured kernels: device (seed, base offset); else NULL

cdef class CaptureRecord

cdef class GeneratorCore:
    cdef readonly int device_index  # -1: the CPU
    cdef uint64_t seed_value
    cdef uint64_t offset            # the next call's offset, in 32-bit outputs (cuRAND's unit)
    cdef dict captures              # capture id -> CaptureRecord, for captures in progress
    cdef int init(self, object device) except -1
    cdef object c_manual_seed(self, object seed)
    cdef object c_seed(self)
    cdef object c_initial_seed(self)
    cdef object c_get_state(self)
    cdef object c_set_state(self, object new_state)
    cdef object c_device(self)
    cdef str repr_text(self)
    cdef int _check_not_captured(self, str call) except -1
    # Reserve `increment` 32-bit outputs per subsequence for one kernel launched on stream and
    # fill the state that kernel takes: captured (device pointer plus in-graph offset) when
    # stream is capturing and this generator is registered with a capture, eager when stream is
    # not capturing; a RuntimeError when stream captures and the generator is not registered.
    cdef int philox_state(self, uint64_t increment, cudaStream_t stream,
                          PhiloxState* state) except -1

# The generator a random op uses: generator if given (checked to be a Generator on device), else
# the default one of device (-1: the CPU).
cdef GeneratorCore generator_for(object generator, int device)
cdef GeneratorCore default_generator(int device)
# common.cu and the element type: the prelude that instantiates kernels/philox.cu.
cdef str philox_prelude(DtypeCore dtype)

# Graph capture. Note [Graph-safe random numbers] in rng.pyx; the graph code calls, in order:
#   record = register_capture(generator, capture_id)    right after cudaStreamBeginCapture, before
#       any work is captured: the generator's kernels captured into that capture (found by the
#       stream's capture id) read (seed, offset) from device memory that the record allocates,
#       from the capture's private pool, at the first such kernel. A generator may be registered
#       with several captures at once (two threads capturing on one device).
#   consumed = capture_offset_consumed(record)    after cudaStreamEndCapture (or when capture
#       fails): unregisters and returns the offset the graph consumes per replay (0: it drew
#       nothing). The graph must reject captures that drew random numbers inside conditional
#       (IF/WHILE) bodies, as PyTorch does: a fixed in-graph offset would repeat numbers.
#   advance_for_replay(record, stream)        before each replay on stream: writes the
#       generator's current (seed, offset) into record's device memory (one one-thread kernel,
#       stream-ordered) and advances the generator by consumed, so every replay draws fresh
#       numbers, the same ones eager execution would have drawn. Does nothing when consumed is 0.
# The graph keeps the record alive as long as it can replay; the record returns its memory.
cdef class CaptureRecord:
    cdef GeneratorCore generator
    cdef unsigned long long capture_id
    cdef uint64_t* replay_state     # device memory: (seed, base offset) for the next replay
    cdef uint64_t consumed          # offset the captured kernels use, reserved so far
    cdef bint open                  # registered, capture not yet ended

cdef CaptureRecord register_capture(GeneratorCore generator, unsigned long long capture_id)
cdef uint64_t capture_offset_consumed(CaptureRecord record) except? 0xFFFFFFFFFFFFFFFF
# A conditional node's body is captured under a capture id of its own: random ops there count
# against the graph's record while the body is open, so that the graph can refuse them.
cdef int share_capture(CaptureRecord record, unsigned long long body_capture_id) except -1
cdef int unshare_capture(CaptureRecord record, unsigned long long body_capture_id) except -1
cdef int advance_for_replay(CaptureRecord record, cudaStream_t stream) except -1

# The accelerator API (api.yaml: tensorplay.accelerator.random).
cdef object get_rng_state(int device)
cdef list get_rng_state_all()
cdef object initial_seed(int device)
cdef object manual_seed(object seed)
cdef object manual_seed_all(object seed)
cdef object seed()
cdef object seed_all()
cdef object set_rng_state(object new_state, int device)
cdef object set_rng_state_all(object new_states)

# Top-level seeding (api.yaml: tensorplay): the CPU generator and every device's.
cdef object manual_seed_everywhere(object seed)
cdef object seed_everywhere()
cdef object initial_seed_cpu()
