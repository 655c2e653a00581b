from cuda.bindings.cyruntime cimport (cudaGraphConditionalHandle, cudaGraphNode_t, cudaGraph_t,
                                      cudaStream_t)

from tensorplay._runtime.memory.pools cimport PoolId
from tensorplay._runtime.graphs.capture cimport CaptureState
from tensorplay._runtime.random.rng cimport GraphGenerators
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


# A graph's conditional nodes (conditional.pyx): the bodies open in its capture, and what the
# nodes of its capture hold. Each step takes the graph's capture (the stream, id, mode and thread
# its bodies capture under) and generator states (random draws inside bodies), and its device.
cdef class ConditionalStack:
    cdef list bodies                   # open ConditionalBody objects, innermost last
    cdef list pools                    # (first, second) pool ids retained for bodies' allocations
    cdef list predicates               # predicate tensors the graph reads at replay: kept alive
    cdef dict nodes                    # conditional node address -> (type, [body graph address])
                                       # recorded for graph_topology.pyx
    # begin_capture_to_*_node(): open a node of node_type (cudaGraphConditionalNodeType) with
    # size bodies, whose predicate (or index) is the tensor predicate_arg() gave for argument;
    # what names the call in errors.
    cdef int open(self, CaptureState capture, GraphGenerators generators, int device,
                  TensorCore predicate, str argument, int node_type, str what,
                  unsigned int size) except -1
    # The innermost body's end: kept (its node stays), or on the way to discarding the capture.
    cdef int close(self, CaptureState capture, GraphGenerators generators, int device,
                   bint keep) except -1
    # end_capture_to_conditional_node(), begin_capture_to_next_body() and
    # set_conditional_handle_for_current_node().
    cdef int end_node(self, CaptureState capture, GraphGenerators generators,
                      int device) except -1
    cdef int next_body(self, CaptureState capture, GraphGenerators generators,
                       int device) except -1
    cdef int set_handle(self, int device, TensorCore predicate) except -1

# A conditional node's predicate (or index) argument as our tensor, before any state is looked
# at: ours, or a view of one shared through __cuda_array_interface__ or DLPack (PyTorch's,
# CuPy's); anything else is a TypeError naming argument. Its dtype, size and device are checked
# by open() and set_handle(), against the open capture's device.
cdef TensorCore predicate_arg(object value, str argument)
# If/else and switch nodes need a CUDA 12.8 driver: refused, naming what, before anything.
cdef int require_multi_body_nodes(str what) except -1
# Release each conditional body's pool (first, second) in pool_ids, emptying the list.
cdef int release_pools(int device, list pool_ids) except -1
