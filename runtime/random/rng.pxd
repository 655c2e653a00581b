# Philox4x32-10 generators: state, seeding, and the graph-capture protocol (rng.pyx explains).
from libc.stdint cimport uint64_t
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.base.dtypes cimport DtypeCore

cdef struct PhiloxState:            # matches PhiloxState in kernels/philox.cu
    uint64_t seed
    uint64_t offset                 # in 32-bit outputs, a multiple of 4
    const uint64_t* replay_state    # device (seed, base offset) the kernel adds offset to; else NULL

cdef class CaptureRecord

# What a generator draws from: a seed and an offset (PyTorch's generator state object).
# Generators share one through graphsafe_get_state() / graphsafe_set_state(); clone_state()
# copies one. Note [Offsets on the device] in rng.pyx explains `pending`.
cdef class GeneratorState:
    cdef readonly int device_index  # -1: the CPU
    cdef uint64_t seed
    # The offset of the next draw, in 32-bit outputs (cuRAND's unit). While pending is set the
    # offset lives on the device: pending.replay_state[1] + offset.
    cdef uint64_t offset
    cdef CaptureRecord pending
    cdef dict captures              # capture id -> CaptureRecord, for captures in progress
    cdef int check_not_captured(self, str call) except -1
    # Bring an offset that lives on the device back to the host (synchronises the device).
    cdef int settle(self, str call) except -1
    cdef int restart(self, uint64_t seed, uint64_t offset) except -1
    # Reserve `increment` 32-bit outputs per subsequence for one kernel launched on stream and
    # fill the state that kernel takes: captured (device pointer plus in-graph offset) when
    # stream is capturing and this state is registered with that capture, else eager; a
    # RuntimeError when stream captures and the state is not registered.
    cdef int reserve(self, uint64_t increment, cudaStream_t stream, PhiloxState* state) except -1

cdef class GeneratorCore:
    cdef readonly int device_index  # -1: the CPU
    cdef GeneratorState state
    cdef int init(self, object device) except -1
    cdef object c_manual_seed(self, object seed)
    cdef object c_seed(self)
    cdef object c_initial_seed(self)
    cdef object c_get_state(self)
    cdef object c_set_state(self, object new_state)
    cdef object c_get_offset(self)
    cdef object c_set_offset(self, uint64_t offset)
    cdef object c_graphsafe_get_state(self)
    cdef object c_graphsafe_set_state(self, object state)
    cdef object c_clone_state(self)
    cdef object c_device(self)
    cdef str repr_text(self)
    cdef int philox_state(self, uint64_t increment, cudaStream_t stream,
                          PhiloxState* state) except -1

# The generator a random op uses: generator if given (checked to be a Generator on device), else
# the default one of device (-1: the CPU).
cdef GeneratorCore generator_for(object generator, int device)
cdef GeneratorCore default_generator(int device)
# common.cu and the element type: the prelude that instantiates kernels/philox.cu.
cdef str philox_prelude(DtypeCore dtype)

# Graph capture: Note [Graph-safe random numbers] in rng.pyx. One CaptureRecord per (generator
# state, capture); the graph's GraphGenerators holds them and the graph code calls, in order:
#   register_generator(generators, generator)    register_generator_state(): at any time before
#       reset(); during a capture the state is registered with it at once.
#   begin_capture(generators, device, capture_id)   right after cudaStreamBeginCapture, before
#       any work is captured: registers the device's default generator's state and every
#       registered one with the capture (found by the stream's capture id).
#   enter_body(generators, body_capture_id)     a conditional body's capture began: random ops
#       there count against the same records.
#   leave_branch(generators, stream, keep)      before the body's capture on stream ends (each
#       branch of an if/else or switch node, and the body's end): captures there a one-thread
#       kernel that advances each state's device offset by what one pass drew.
#   next_branch(generators, body_capture_id)    the next branch's capture began.
#   leave_body(generators)                      the body closed.
#   end_capture(generators)                     after cudaStreamEndCapture (or when capture
#       fails): unregisters; records that drew are kept for replay.
#   advance_for_replay(generators, stream)      before each replay on stream (only when
#       generators.draws): writes each state's (seed, offset) to its record's device memory,
#       stream-ordered, and advances the state as an eager run would.
#   forget_capture(generators) / clear(generators)   the pool is released / reset().
cdef class GraphGenerators:
    cdef int device                 # of the open or last capture; -1 before
    cdef bint capturing
    cdef bint draws                 # a record of the last capture drew: replays run the prologue
    cdef list registered            # GeneratorState objects from register_generator_state()
    cdef list records               # CaptureRecord of the open (or last) capture
    cdef unsigned long long capture_id  # of the open (or last) capture
    cdef list body_ids              # capture ids of the open conditional bodies, innermost last

cdef class CaptureRecord:
    cdef GeneratorState state
    cdef unsigned long long capture_id
    cdef uint64_t* replay_state     # device memory: (seed, base offset) for the next replay
    cdef uint64_t consumed          # offset the captured kernels use, reserved so far
    cdef bint open                  # registered, capture not yet ended
    cdef bint dynamic               # drew inside a conditional body: see Note [Offsets on the device]
    cdef list marks                 # consumed when each open body began, innermost last

cdef GraphGenerators graph_generators()
cdef int register_generator(GraphGenerators generators, object generator) except -1
cdef int begin_capture(GraphGenerators generators, int device,
                       unsigned long long capture_id) except -1
cdef int enter_body(GraphGenerators generators, unsigned long long body_capture_id) except -1
cdef int leave_branch(GraphGenerators generators, cudaStream_t stream, bint keep) except -1
cdef int next_branch(GraphGenerators generators, unsigned long long body_capture_id) except -1
cdef int leave_body(GraphGenerators generators) except -1
cdef int end_capture(GraphGenerators generators) except -1
cdef int advance_for_replay(GraphGenerators generators, cudaStream_t stream) except -1
# A recapture (graph.pyx, Note [Recapture]) keeps the replaced capture's records until it ends.
cdef tuple saved_capture(GraphGenerators generators)
cdef int restore_capture(GraphGenerators generators, tuple saved) except -1
cdef int forget_capture(GraphGenerators generators) except -1
cdef int clear(GraphGenerators generators) except -1

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
