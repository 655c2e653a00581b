from libc.stdint cimport uintptr_t

from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport (cudaGraphConditionalHandle, cudaGraphNode_t, cudaGraph_t,
                                      cudaStream_t)

from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.tensor.core cimport TensorCore

# One open conditional node of a capture: its handle and the stream its body captures on.
cdef class ConditionalBody:
    cdef cudaStream_t stream           # owned; destroyed when the body closes
    cdef cudaStream_t parent           # where capture continues after the body
    cdef cudaGraphConditionalHandle handle
    cdef TensorCore predicate
    cdef bint is_while
    cdef bint capturing
    cdef bint routing                  # begin_allocate_to_pool done for the body's pool
    cdef unsigned long long capture_id # the capture of the body (branch) being captured now
    cdef PoolId pool
    cdef cudaGraphNode_t node          # the conditional node, in the parent graph
    cdef cudaGraph_t* graphs           # its size body graphs: a CUDA-owned array, as the node
    cdef unsigned int size
    cdef unsigned int branch           # the body capturing now (if/else and switch nodes)
    cdef bint is_switch                # the condition is an index (int32), not a bool


# The conditional-node steps of a capture (conditional.pyx); graph.pyx's GraphBase drives them.
cdef int begin_body(int device, CUfunction setter, uintptr_t predicate, int node_type,
                    unsigned int size, int capture_mode, ConditionalBody body,
                    unsigned long long* body_capture_id) except -1
cdef bint captured_nothing(int device, cudaStream_t stream) except -1
cdef int end_loop(int device, ConditionalBody body) except -1
cdef CUfunction setter_kernel(int device, bint index=*) except NULL
cdef int set_predicate(int device, ConditionalBody body, TensorCore predicate) except -1
cdef int require_multi_body_nodes(str what) except -1
cdef int next_body(int device, int capture_mode, ConditionalBody body,
                   unsigned long long holder) except -1
cdef int fill_empty_bodies(int device, ConditionalBody body) except -1
