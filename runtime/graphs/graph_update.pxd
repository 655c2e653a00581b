from libc.stdint cimport uintptr_t
from libcpp.vector cimport vector

from cuda.bindings.cydriver cimport (CUDA_KERNEL_NODE_PARAMS, CUDA_MEMCPY3D,
                                     CUDA_MEMSET_NODE_PARAMS, CUgraphNode)
from cuda.bindings.cyruntime cimport cudaGraphExec_t, cudaGraph_t, cudaStream_t

# cudaGraphNodeType values of the nodes read, an AddressSlot's fields, and its roles.
cdef enum:
    NODE_KERNEL = 0
    NODE_MEMCPY = 1
    NODE_MEMSET = 2
    NODE_CONDITIONAL = 13
    SLOT_ARGUMENT = 0
    SLOT_COPY_SOURCE = 1
    SLOT_COPY_TARGET = 2
    SLOT_FILL_TARGET = 3
    ROLE_READ = 1                      # kernel_signature.READ, WRITE, UPDATE (both bits)
    ROLE_WRITE = 2

# A captured graph (cudaGraph_t), owned: destroyed with the object. The graph that instantiated
# an executable keeps it for the executable's life (its node handles are the ones the
# executable's setters accept); export_dot() may hold the newest one too.
cdef class GraphTemplate:
    cdef cudaGraph_t graph
    cdef int device
    cdef dict conditional_nodes        # recorded bodies (graph_topology.pxd), by node address

cdef GraphTemplate own_template(int device, cudaGraph_t graph, dict conditional_nodes)


# One node of an executable, as graph_update.pyx reads and changes it (Note [Executable nodes]).
cdef class NodeRecord:
    cdef readonly tuple path           # (position,), or (conditional's position, body, position..)
    cdef int node_type                 # cudaGraphNodeType
    cdef CUgraphNode node              # in the newest capture, whose parameters the executable has
    cdef CUgraphNode exec_node         # the same position in the template the executable came from
    cdef object name                   # a kernel's name, if the driver tells
    cdef object signature              # kernel_signature.KernelSignature of our kernels, else None
    cdef str unknown                   # why a kernel's parameters cannot be read, else None
    cdef int max_threads               # the driver's threads-per-block limit; 0: unknown
    cdef Py_ssize_t first_slot         # the node's AddressSlots: slots[first_slot:+slot_count]
    cdef Py_ssize_t slot_count
    cdef CUDA_KERNEL_NODE_PARAMS kernel   # kernelParams points into arguments
    cdef unsigned char* arguments      # owned: the argument bytes, in the signature's layout
    cdef void** argument_slots         # owned: each parameter's address in arguments
    cdef CUDA_MEMCPY3D copy
    cdef CUDA_MEMSET_NODE_PARAMS fill


# A device address held in a node's parameters: a kernel argument, a copy's source or target,
# a memset's target. persistent: what replay() uses; current: what the executable holds now
# (differs only between replay_with() and the next launch). The byte offsets low/high and
# bound_low/bound_high are from the address (Note [Extents and bounds] in graph_update.pyx).
cdef struct AddressSlot:
    int record
    int field                          # SLOT_ARGUMENT (at offset), SLOT_COPY_SOURCE, ...
    size_t offset
    uintptr_t persistent
    uintptr_t current
    int role                           # kernel_signature.READ, WRITE or UPDATE
    int access                         # its index in the kernel's accesses; -1 for a copy, memset
    long long low                      # the node touches [address + low, address + high) now
    long long high
    long long bound_low                # and may touch at most [address + bound_low, + bound_high)
    long long bound_high


# What graph.pyx's GraphBase keeps of its executable for updates, node parameters
# (node_params.pyx) and rebinding (rebinding.pyx).
cdef class ExecutableState:
    cdef int device
    cdef GraphTemplate first           # the executable was instantiated from it
    cdef GraphTemplate current         # the newest capture (first, until a recapture updates)
    cdef unsigned long long executable_id  # unique in the process, new with every update or
                                           # instantiation; KernelNodes carry it
    cdef list records                  # NodeRecord per node, read at first use; None until then
    cdef vector[AddressSlot] slots
    cdef dict span_slots               # (start, end) -> [slot index]: addresses inside the span
    cdef set dirty                     # slots whose current differs from persistent
    cdef dict holding                  # start address -> tensor rebind() bound: kept alive
    cdef list call_holding             # the tensors of the last replay_with(), until restored
    cdef str unscannable               # why rebinding could miss a reference; None: it cannot
    cdef int read_nodes(self) except -1

cdef ExecutableState new_state(GraphTemplate template)

# Recapture: update executable in place from template (Note [Updating from a recapture]); a
# RuntimeError naming the first node that differs when the topology does not match, with the
# executable unchanged.
cdef int update_executable(ExecutableState state, cudaGraphExec_t executable,
                           GraphTemplate template) except -1

# What node_params.pyx and rebinding.pyx share: a node in words ("node 1 of body 0 of node 3
# (kernel 'fill')"), a kernel record's (grid, block), a record's parameters put onto the
# executable's node, slots moved to new addresses (index -> address; all or nothing), and what a
# refusal calls a kernel ("a reduction kernel (reduce.cu)").
cdef str node_text(NodeRecord record)
cdef tuple launch_of(NodeRecord record)
cdef int apply_record(ExecutableState state, cudaGraphExec_t executable,
                      NodeRecord record) except -1
cdef int move_slots(ExecutableState state, cudaGraphExec_t executable, dict targets) except -1
cdef str kernel_family(object signature)
