# distutils: language = c++
# cython: language_level=3, auto_pickle=False
"""Changing a captured graph without capturing it again from scratch: updates from a recapture,
kernel node parameters, and rebinding static tensors (docs/design.md, "Graph update").

Note [Updating from a recapture]
A recapture records the same work into a new template and updates the executable in place with
cuGraphExecUpdate, which costs a fraction of an instantiation (about 0.3 us a node against 2 on
an H200). The driver pairs the new template's nodes with the executable's by position (the
order cudaGraphGetNodes gives, which is capture order), and refuses a template whose topology,
node types or kernels differ; the executable is then unchanged and replays as before. Before it
is raised, the refusal is explained: both templates are walked by position, conditional bodies
included, and the first node whose type, kernel, dependencies or bodies differ is named; the
driver's own answer (its result and error node) is used when the walk finds nothing.

Note [Executable nodes]
The setters on an executable (cuGraphExec*NodeSetParams) take node handles of the template the
executable was instantiated from, never of a later one it was updated from. So the graph keeps
that first template for the executable's life, and pairs each later template's nodes with it by
position, as the driver did. There is no getter on an executable: the parameters it holds are
read from the newest template (they are the ones the update copied) into NodeRecords, once,
when first needed, and the records are changed together with the executable from then on.
A kernel's arguments can be read and changed only for kernels tensorplay launched itself: their
signature comes from their source (kernel_signature.py) and is checked against the driver's
offsets and sizes (cuFuncGetParamInfo) before use. Other kernels (PyTorch's, cuBLAS's) are
listed, but their arguments are opaque bytes.

Note [Extents and bounds]
Every address a node of the executable can touch must lie in memory the graph owns or keeps
alive. Each address a node holds (an AddressSlot) therefore carries two byte ranges, as offsets
from the address:
- its extent, [low, high): what the node touches through it with its current arguments and
  launch dimensions. A kernel's comes from its annotation (kernel_signature.py, Note [Kernel
  access annotations]): out[count] is count elements of out's type, reach(layout) a Layout's
  reach; a copy's is its rows and slices, a memset's its rows.
- its bound, [bound_low, bound_high): what it may touch. At capture it is the extent: that
  memory was valid then (the captured launch touched it), and the graph keeps it alive (its
  pool, its held blocks, the static tensors it was given). It stays the bound when a change
  shrinks the extent, so a count can go back up to what was captured; a persistent rebinding
  moves it with the address and narrows it to the new tensor's span, which the graph keeps alive.
The bound is the range itself, not the allocator's block around it: memory past what the node
touched at capture may be the rest of a block that another tensor (a view of the same storage)
uses, or rounding no tensor owns, or memory of another library the allocator does not know; the
range is what is known to be the node's. So a scalar change whose extent would leave the bound
is refused (naming the argument, the node, the extent and the bound), and so is a rebinding
whose new tensor does not hold a moved address's whole extent (a static tensor that is a view
of less than the node covers), or that leaves a node reaching into the static tensor's memory
from an address outside it (the graph lets that memory go).

Note [Launch dimensions]
Each kernel's annotation says how its result depends on its grid and block: "any" for the
grid-stride kernels (elementwise, copy), whose every element is computed by one thread whatever
the grid, so grid and block may change, one-dimensional (x alone divides the work: a y or z of 2
would run it twice, and an in-place kernel would read what it wrote) and within the driver's
CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; "grid" where blocks stride over independent items but
the code assumes its block size (matmul's tiles, reduce_dims' block reduction, the Philox fill),
so the grid alone may change; "fixed" where the grid decides the result (reduce_partial writes a
partial result per block, reduce_final combines them in one block) or the kernel runs with one
thread (graphs.cu, the replay-state kernels) or maps blocks to work (stage_copies). A kernel of
another library has no annotation, so its dimensions are refused, as its arguments are.

Note [Listed nodes]
A KernelNode carries the id of the executable state it was listed from, unique in the process
(a counter, never 0): a new one for every instantiation (capture, reset() and capture again,
recapture_end(reinstantiate=True) that reinstantiated) and every update from a recapture. A node
of another state, of another graph, or made by hand (id 0, no graph) is refused with a
ValueError that says to list the nodes again with kernel_nodes(), before anything changes.

Note [Rebinding]
Rebinding points every node that refers to a static tensor's memory at another tensor's, with no
copy: each device address in a kernel argument of ours (pointer parameters, and the addresses
inside the structs they take), in a copy's source or target and in a memset's target that lies
inside the static tensor's bytes moves to the same offset in the new tensor. Addresses are
found once per static tensor and cached until the next update. A node whose addresses cannot be
known (a kernel of another library, a host callback, a child graph, memory allocation nodes, a
batch of memory operations) could hide a reference, so a graph holding one is refused before
anything changes, naming the node; so is a node that covers the tensor's bytes only in part
from an address outside them, and a moved address whose extent the new tensor does not hold
(Note [Extents and bounds]). Two addresses of one node, one of them written, whose memory would
overlap after the move are refused (the node would read what it already wrote), unless they
moved by the same amount (they were that way at capture, where the node ran so) or are exactly
the same memory of a kernel whose annotation says it runs in place (elementwise kernels over
contiguous memory; not the strided, reduction, matmul or copy kernels, where an output element
is not the input element at the same offset). replay_with() changes the executable for one
launch: the next launch without bindings puts the persistent addresses back first. Setters
change future launches only; launches already queued keep the parameters they were launched
with (CUDA driver API, cuGraphExecKernelNodeSetParams). Every check comes before anything
changes, so a refusal leaves the executable as it was.
"""
import weakref

from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                     CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED,
                                     CUDA_KERNEL_NODE_PARAMS, CUDA_SUCCESS, CUcontext,
                                     CUfunction, CUgraph, CUgraphExec, CUgraphExecUpdateResultInfo,
                                     CUgraphNode, CUresult)
from cuda.bindings.cyruntime cimport (cudaGraphExec_t, cudaGraphNodeType, cudaGraphNode_t,
                                      cudaGraph_t, cudaStream_t)

from tensorplay._runtime.memory cimport allocator
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.graphs cimport graph_topology
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.base cimport public
from tensorplay._runtime.tensor cimport core as tensor, factories
from tensorplay._runtime.devices.device cimport DeviceSwitch
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.graphs.graph_topology import CONDITIONAL_TYPES, NODE_TYPES

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

# Node types that hold no device address a tensor could be behind: empty, event record and
# wait, external semaphore signal and wait.
ADDRESS_FREE_TYPES = frozenset((5, 6, 7, 8, 9))
# CUgraphExecUpdateResult in words (CUDA driver API, cuGraphExecUpdate).
UPDATE_RESULTS = {
    1: "the update failed for a reason the driver did not give",
    2: "the topology (nodes or edges) changed",
    3: "the node's type changed",
    4: "the kernel changed",
    5: "a parameter that cannot be updated changed",
    6: "the node cannot be updated",
    7: "the kernel changed in a way that cannot be updated",
    8: "the node's attributes changed",
}
# The widest load of our kernels (a vector4_t of doubles, elementwise.cu): a kernel captured
# with an address aligned for it must get one aligned the same way.
VECTOR_BYTES = 32
# Launch limits of every CUDA device tensorplay supports (compute capability 7.0 and newer).
MAX_GRID = (2 ** 31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
# What a refusal of new launch dimensions calls each source's kernels.
KERNEL_FAMILIES = {"elementwise": "elementwise", "copy": "copy", "reduce": "reduction",
                   "matmul": "matrix-product", "philox": "random-number", "staging": "staging",
                   "graphs": "conditional-node", "selftest": "self-test"}


cdef class GraphTemplate:
    def __dealloc__(self):
        # A forked child must not touch the parent's objects (graph.pyx does the same).
        cdef int mode
        cdef DeviceSwitch saved
        if self.graph == NULL or not _device.is_initialized():
            return
        try:
            _device.enter_device(self.device, &saved)
            _device.enter_relaxed(&mode)  # legal while another thread captures
            cyruntime.cudaGraphDestroy(self.graph)
            _device.exit_relaxed(&mode)
            _device.exit_device(&saved)
        except Exception:
            pass  # nothing to report to: the graph's memory is the driver's to reclaim
        self.graph = NULL


cdef GraphTemplate own_template(int device, cudaGraph_t graph, dict conditional_nodes):
    cdef GraphTemplate template = GraphTemplate.__new__(GraphTemplate)
    template.graph = graph
    template.device = device
    template.conditional_nodes = conditional_nodes
    return template


cdef class NodeRecord:
    def __dealloc__(self):
        free(self.arguments)
        free(self.argument_slots)


# The last executable id handed out (Note [Listed nodes]); 0 is never one.
cdef unsigned long long _last_executable_id = 0


cdef unsigned long long _new_executable_id():
    global _last_executable_id
    _last_executable_id += 1
    return _last_executable_id


cdef ExecutableState new_state(GraphTemplate template):
    cdef ExecutableState state = ExecutableState.__new__(ExecutableState)
    state.device = template.device
    state.executable_id = _new_executable_id()
    state.first = template
    state.current = template
    state.span_slots = {}
    state.dirty = set()
    state.holding = {}
    return state


cdef str _path_text(tuple path):
    """node 4, or node 1 of body 0 of node 3."""
    cdef Py_ssize_t i
    text = f"node {path[-1]}"
    for i in range(len(path) - 3, -1, -2):
        text += f" of body {path[i + 1]} of node {path[i]}"
    return text


cdef str _node_text(NodeRecord record):
    kind = NODE_TYPES.get(record.node_type, f"type {record.node_type}")
    if record.node_type == NODE_KERNEL:
        return f"{_path_text(record.path)} (kernel {record.name!r})"
    return f"{_path_text(record.path)} ({kind})"


# -- reading the nodes (Note [Executable nodes]) ---------------------------------------------

cdef class ExecutableState:
    cdef int read_nodes(self) except -1:
        if self.records is not None:
            return 0
        cdef DeviceSwitch saved
        cdef list records = []
        _device.enter_device(self.device, &saved)
        try:
            _read_graph(self.current.graph, self.first.graph, self.current.conditional_nodes,
                        self.first.conditional_nodes, (), records)
        finally:
            _device.exit_device(&saved)
        self.slots.clear()
        cdef Py_ssize_t index
        for index in range(len(records)):
            _add_slots(self, index, records[index])
        self.records = records
        self.span_slots = {}
        self.dirty = set()
        self.unscannable = _unscannable(records)
        return 0


cdef int _read_graph(cudaGraph_t current, cudaGraph_t first, dict current_recorded,
                     dict first_recorded, tuple prefix, list records) except -1:
    cdef list nodes = graph_topology.graph_nodes(current)
    cdef list first_nodes = graph_topology.graph_nodes(first)
    cdef cudaGraphNodeType node_type
    cdef NodeRecord record
    cdef Py_ssize_t index
    if len(nodes) != len(first_nodes):  # an update succeeded, so this cannot happen
        raise RuntimeError(f"the executable's template has {len(first_nodes)} nodes and the "
                           f"newest capture {len(nodes)}; call reset() and capture again")
    for index in range(len(nodes)):
        record = NodeRecord.__new__(NodeRecord)
        record.path = prefix + (index,)
        record.node = <CUgraphNode><uintptr_t>nodes[index]
        record.exec_node = <CUgraphNode><uintptr_t>first_nodes[index]
        errors.check(cyruntime.cudaGraphNodeGetType(<cudaGraphNode_t>record.node, &node_type),
                     b"cudaGraphNodeGetType")
        record.node_type = <int>node_type
        if record.node_type == NODE_KERNEL:
            _read_kernel(record)
        elif record.node_type == NODE_MEMCPY:
            errors.check_driver(cydriver.cuGraphMemcpyNodeGetParams(record.node, &record.copy),
                                b"cuGraphMemcpyNodeGetParams")
        elif record.node_type == NODE_MEMSET:
            errors.check_driver(cydriver.cuGraphMemsetNodeGetParams(record.node, &record.fill),
                                b"cuGraphMemsetNodeGetParams")
        records.append(record)
        if record.node_type == NODE_CONDITIONAL:
            _, bodies = graph_topology.conditional_of(<cudaGraphNode_t>record.node,
                                                      current_recorded)
            _, first_bodies = graph_topology.conditional_of(
                <cudaGraphNode_t>record.exec_node, first_recorded)
            for body in range(len(bodies)):
                _read_graph(<cudaGraph_t><uintptr_t>bodies[body],
                            <cudaGraph_t><uintptr_t>first_bodies[body], current_recorded,
                            first_recorded, record.path + (body,), records)
    return 0


cdef int _read_kernel(NodeRecord record) except -1:
    memset(&record.kernel, 0, sizeof(record.kernel))
    errors.check_driver(cydriver.cuGraphKernelNodeGetParams(record.node, &record.kernel),
                        b"cuGraphKernelNodeGetParams")
    record.name = graph_topology.kernel_name(<cudaGraphNode_t>record.node)
    signature = None
    if record.kernel.func != NULL:
        signature = kernels.kernel_signature_of(<uintptr_t>record.kernel.func)
    if signature is None and record.kernel.kern != NULL:
        signature = kernels.kernel_signature_of(<uintptr_t>record.kernel.kern)
    if signature is None:
        record.unknown = "tensorplay did not launch it, so the types of its parameters are unknown"
        return 0
    if record.kernel.kernelParams == NULL:
        record.unknown = "its arguments were given as one buffer (extra), not one by one"
        return 0
    cdef CUfunction function = record.kernel.func
    if function == NULL:
        errors.check_driver(cydriver.cuKernelGetFunction(&function, record.kernel.kern),
                            b"cuKernelGetFunction")
    cdef int max_threads = 0
    if cydriver.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                   function) == CUDA_SUCCESS:
        record.max_threads = max_threads
    cdef size_t offset = 0, size = 0
    cdef Py_ssize_t index
    for index, parameter in enumerate(signature.parameters):
        if (cydriver.cuFuncGetParamInfo(function, index, &offset, &size) != CUDA_SUCCESS
                or offset != parameter.offset or size != parameter.size):
            record.unknown = (f"the driver's layout of its parameter {index} differs from its "
                              "declaration in its source")
            return 0
    if cydriver.cuFuncGetParamInfo(function, len(signature.parameters), &offset,
                                   &size) == CUDA_SUCCESS:
        record.unknown = "the driver reports more parameters than its source declares"
        return 0
    record.arguments = <unsigned char*>calloc(max(1, signature.size), 1)
    record.argument_slots = <void**>calloc(max(1, len(signature.parameters)), sizeof(void*))
    if record.arguments == NULL or record.argument_slots == NULL:
        raise MemoryError("cannot hold the arguments of a kernel node")
    for index, parameter in enumerate(signature.parameters):
        memcpy(record.arguments + <size_t>parameter.offset, record.kernel.kernelParams[index],
               <size_t>parameter.size)
        record.argument_slots[index] = record.arguments + <size_t>parameter.offset
    record.kernel.kernelParams = record.argument_slots
    record.kernel.extra = NULL
    record.signature = signature
    return 0


cdef uintptr_t _copy_start(CUDA_MEMCPY3D* copy, bint source) noexcept nogil:
    if source:
        return (copy.srcDevice + copy.srcXInBytes
                + copy.srcPitch * (copy.srcY + copy.srcHeight * copy.srcZ))
    return (copy.dstDevice + copy.dstXInBytes
            + copy.dstPitch * (copy.dstY + copy.dstHeight * copy.dstZ))


cdef long long _copy_extent(CUDA_MEMCPY3D* copy, bint source) noexcept nogil:
    """The bytes a copy spans from its start on one side: whole rows of its pitch, whole
    slices of its pitch times its height, then one row's width."""
    cdef long long pitch = copy.srcPitch if source else copy.dstPitch
    cdef long long height = copy.srcHeight if source else copy.dstHeight
    if copy.WidthInBytes == 0 or copy.Height == 0 or copy.Depth == 0:
        return 0
    return (<long long>copy.WidthInBytes + pitch * <long long>(copy.Height - 1)
            + pitch * height * <long long>(copy.Depth - 1))


cdef long long _fill_extent(CUDA_MEMSET_NODE_PARAMS* fill) noexcept nogil:
    if fill.width == 0 or fill.height == 0:
        return 0
    return (<long long>fill.width * fill.elementSize
            + <long long>fill.pitch * <long long>(fill.height - 1))


cdef int _add_slot(ExecutableState state, int record, int field, size_t offset,
                   uintptr_t address, int role, int access, long long low,
                   long long high) except -1:
    cdef AddressSlot slot
    slot.record = record
    slot.field = field
    slot.offset = offset
    slot.persistent = address
    slot.current = address
    slot.role = role
    slot.access = access
    if high <= low:
        low = high = 0
    slot.low = slot.bound_low = low
    slot.high = slot.bound_high = high
    state.slots.push_back(slot)
    return 0


cdef tuple _launch_of(NodeRecord record):
    return ((record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ),
            (record.kernel.blockDimX, record.kernel.blockDimY, record.kernel.blockDimZ))


cdef int _add_slots(ExecutableState state, int index, NodeRecord record) except -1:
    """The node's addresses, each with the bytes the node touches through it now, which are
    also its bound (Note [Extents and bounds])."""
    cdef uintptr_t address
    record.first_slot = <Py_ssize_t>state.slots.size()
    if record.node_type == NODE_KERNEL and record.signature is not None:
        grid, block = _launch_of(record)
        try:
            extents = record.signature.extents(
                (<char*>record.arguments)[:record.signature.size], grid, block)
        except ValueError as error:  # not for a kernel as we launch them: treat it as foreign
            record.unknown = f"its extents cannot be computed from its arguments ({error})"
            record.signature = None
            extents = ()
        for access, (offset, role, low, high) in enumerate(extents):
            memcpy(&address, record.arguments + <size_t>offset, sizeof(uintptr_t))
            if address:  # a null pointer is an operand the kernel does not read (clamp, where)
                _add_slot(state, index, SLOT_ARGUMENT, offset, address, role, access, low,
                          high)
    elif record.node_type == NODE_MEMCPY:
        if record.copy.srcMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
            _add_slot(state, index, SLOT_COPY_SOURCE, 0, _copy_start(&record.copy, True),
                      ROLE_READ, -1, 0, _copy_extent(&record.copy, True))
        if record.copy.dstMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
            _add_slot(state, index, SLOT_COPY_TARGET, 0, _copy_start(&record.copy, False),
                      ROLE_WRITE, -1, 0, _copy_extent(&record.copy, False))
    elif record.node_type == NODE_MEMSET:
        _add_slot(state, index, SLOT_FILL_TARGET, 0, record.fill.dst, ROLE_WRITE, -1, 0,
                  _fill_extent(&record.fill))
    record.slot_count = <Py_ssize_t>state.slots.size() - record.first_slot
    return 0


# -- updating from a recapture (Note [Updating from a recapture]) ----------------------------

cdef int update_executable(ExecutableState state, cudaGraphExec_t executable,
                           GraphTemplate template) except -1:
    cdef CUgraphExecUpdateResultInfo info
    cdef CUresult status
    cdef DeviceSwitch saved
    cdef int mode
    memset(&info, 0, sizeof(info))
    with nogil:
        _device.enter_device(state.device, &saved)
        _device.enter_relaxed(&mode)  # not captured work: legal during another capture
        status = cydriver.cuGraphExecUpdate(<CUgraphExec>executable, <CUgraph>template.graph,
                                            &info)
        _device.exit_relaxed(&mode)
        _device.exit_device(&saved)
    if status != CUDA_SUCCESS:
        cyruntime.cudaGetLastError()
        _device.enter_device(state.device, &saved)
        try:
            difference = _first_difference(template.graph, state.first.graph,
                                           template.conditional_nodes,
                                           state.first.conditional_nodes, ())
            if difference is None:
                difference = _driver_difference(template, &info, <int>status)
        finally:
            _device.exit_device(&saved)
        raise RuntimeError(
            f"the recapture cannot update the graph's executable in place: {difference}. The "
            "graph keeps its previous executable, which replays as before; capture the same "
            "work again, or pass reinstantiate=True to instantiate the new capture instead")
    state.current = template
    state.executable_id = _new_executable_id()
    state.records = None
    state.span_slots = {}
    state.dirty = set()
    state.holding = {}
    state.call_holding = None
    return 0


cdef str _describe_node(cudaGraphNode_t node):
    cdef cudaGraphNodeType node_type
    errors.check(cyruntime.cudaGraphNodeGetType(node, &node_type), b"cudaGraphNodeGetType")
    if <int>node_type == NODE_KERNEL:
        return f"kernel {graph_topology.kernel_name(node)!r}"
    return NODE_TYPES.get(<int>node_type, f"type {<int>node_type}")


cdef object _kernel_of(cudaGraphNode_t node):
    cdef CUDA_KERNEL_NODE_PARAMS params
    memset(&params, 0, sizeof(params))
    errors.check_driver(cydriver.cuGraphKernelNodeGetParams(<CUgraphNode>node, &params),
                        b"cuGraphKernelNodeGetParams")
    return (<uintptr_t>params.func, <uintptr_t>params.kern)


cdef list _dependency_positions(cudaGraphNode_t node, dict position):
    cdef size_t count = 0
    errors.check(cyruntime.cudaGraphNodeGetDependencies(node, NULL, NULL, &count),
                 b"cudaGraphNodeGetDependencies")
    if count == 0:
        return []
    cdef cudaGraphNode_t* found = <cudaGraphNode_t*>calloc(count, sizeof(cudaGraphNode_t))
    cdef cyruntime.cudaGraphEdgeData* edges = <cyruntime.cudaGraphEdgeData*>calloc(
        count, sizeof(cyruntime.cudaGraphEdgeData))
    try:
        if found == NULL or edges == NULL:
            raise MemoryError("cannot list a graph node's dependencies")
        errors.check(cyruntime.cudaGraphNodeGetDependencies(node, found, edges, &count),
                     b"cudaGraphNodeGetDependencies")
        return sorted(position[<uintptr_t>found[i]] for i in range(count))
    finally:
        free(found)
        free(edges)


cdef object _first_difference(cudaGraph_t new, cudaGraph_t old, dict new_recorded,
                              dict old_recorded, tuple prefix):
    """The first node, by position, where new differs from old, in words; None if none."""
    cdef list new_nodes = graph_topology.graph_nodes(new)
    cdef list old_nodes = graph_topology.graph_nodes(old)
    cdef dict new_position = {handle: i for i, handle in enumerate(new_nodes)}
    cdef dict old_position = {handle: i for i, handle in enumerate(old_nodes)}
    cdef cudaGraphNodeType new_type, old_type
    cdef cudaGraphNode_t new_node, old_node
    cdef Py_ssize_t index
    for index in range(min(len(new_nodes), len(old_nodes))):
        path = _path_text(prefix + (index,))
        new_node = <cudaGraphNode_t><uintptr_t>new_nodes[index]
        old_node = <cudaGraphNode_t><uintptr_t>old_nodes[index]
        errors.check(cyruntime.cudaGraphNodeGetType(new_node, &new_type), b"cudaGraphNodeGetType")
        errors.check(cyruntime.cudaGraphNodeGetType(old_node, &old_type), b"cudaGraphNodeGetType")
        if new_type != old_type:
            return (f"{path} is a {_describe_node(new_node)} node in the recapture but a "
                    f"{_describe_node(old_node)} node in the graph (its type changed)")
        if <int>new_type == NODE_KERNEL and _kernel_of(new_node) != _kernel_of(old_node):
            return (f"{path} runs {_describe_node(new_node)} in the recapture but "
                    f"{_describe_node(old_node)} in the graph (its kernel changed)")
        new_dependencies = _dependency_positions(new_node, new_position)
        old_dependencies = _dependency_positions(old_node, old_position)
        if new_dependencies != old_dependencies:
            return (f"{path} ({_describe_node(new_node)}) depends on nodes "
                    f"{new_dependencies} in the recapture but on {old_dependencies} in the "
                    "graph (its dependencies changed)")
        if <int>new_type == NODE_CONDITIONAL:
            new_kind, new_bodies = graph_topology.conditional_of(new_node, new_recorded)
            old_kind, old_bodies = graph_topology.conditional_of(old_node, old_recorded)
            if new_kind != old_kind or len(new_bodies) != len(old_bodies):
                return (f"{path} is a {new_kind} node of {len(new_bodies)} bodies in the "
                        f"recapture but a {old_kind} node of {len(old_bodies)} in the graph")
            for body in range(len(new_bodies)):
                found = _first_difference(<cudaGraph_t><uintptr_t>new_bodies[body],
                                          <cudaGraph_t><uintptr_t>old_bodies[body],
                                          new_recorded, old_recorded, prefix + (index, body))
                if found is not None:
                    return found
    if len(new_nodes) > len(old_nodes):
        index = len(old_nodes)
        return (f"the recapture has {len(new_nodes)} nodes where the graph has "
                f"{len(old_nodes)}: {_path_text(prefix + (index,))} "
                f"({_describe_node(<cudaGraphNode_t><uintptr_t>new_nodes[index])}) is new")
    if len(new_nodes) < len(old_nodes):
        index = len(new_nodes)
        return (f"the recapture has {len(new_nodes)} nodes where the graph has "
                f"{len(old_nodes)}: {_path_text(prefix + (index,))} "
                f"({_describe_node(<cudaGraphNode_t><uintptr_t>old_nodes[index])}) is missing")
    return None


cdef str _driver_difference(GraphTemplate template, CUgraphExecUpdateResultInfo* info,
                            int status):
    reason = UPDATE_RESULTS.get(<int>info.result, f"update result {<int>info.result}")
    if info.errorNode == NULL:
        return f"{reason} (cuGraphExecUpdate: CUDA error {status})"
    where = _find_path(template.graph, template.conditional_nodes,
                       <uintptr_t>info.errorNode, ())
    name = _path_text(where) if where is not None else "a node"
    return (f"{name} ({_describe_node(<cudaGraphNode_t>info.errorNode)}): {reason} "
            f"(cuGraphExecUpdate: CUDA error {status})")


cdef object _find_path(cudaGraph_t graph, dict recorded, uintptr_t wanted, tuple prefix):
    cdef cudaGraphNodeType node_type
    for index, handle in enumerate(graph_topology.graph_nodes(graph)):
        if handle == wanted:
            return prefix + (index,)
        errors.check(cyruntime.cudaGraphNodeGetType(<cudaGraphNode_t><uintptr_t>handle,
                                                    &node_type), b"cudaGraphNodeGetType")
        if <int>node_type == NODE_CONDITIONAL:
            _, bodies = graph_topology.conditional_of(<cudaGraphNode_t><uintptr_t>handle,
                                                      recorded)
            for body, body_graph in enumerate(bodies):
                found = _find_path(<cudaGraph_t><uintptr_t>body_graph, recorded, wanted,
                                   prefix + (index, body))
                if found is not None:
                    return found
    return None


# -- setting parameters on the executable ----------------------------------------------------

cdef int _apply(ExecutableState state, cudaGraphExec_t executable, NodeRecord record) except -1:
    """The record's parameters onto the executable's node (future launches only)."""
    cdef CUcontext context = NULL
    cdef CUresult status
    cdef DeviceSwitch saved
    with nogil:
        _device.enter_device(state.device, &saved)
        if record.node_type == NODE_KERNEL:
            status = cydriver.cuGraphExecKernelNodeSetParams(<CUgraphExec>executable,
                                                             record.exec_node, &record.kernel)
        else:
            status = cydriver.cuCtxGetCurrent(&context)
            if status == CUDA_SUCCESS and record.node_type == NODE_MEMCPY:
                status = cydriver.cuGraphExecMemcpyNodeSetParams(
                    <CUgraphExec>executable, record.exec_node, &record.copy, context)
            elif status == CUDA_SUCCESS:
                status = cydriver.cuGraphExecMemsetNodeSetParams(
                    <CUgraphExec>executable, record.exec_node, &record.fill, context)
        _device.exit_device(&saved)
    if status != CUDA_SUCCESS:
        errors.check_driver(status, b"cuGraphExec*NodeSetParams")
    return 0


cdef inline void _move(NodeRecord record, AddressSlot* slot, uintptr_t address) noexcept:
    """Point slot at address in the record (a copy's offsets are kept: its base moves)."""
    cdef uintptr_t delta = address - slot.current
    if slot.field == SLOT_ARGUMENT:
        memcpy(record.arguments + slot.offset, &address, sizeof(uintptr_t))
    elif slot.field == SLOT_COPY_SOURCE:
        record.copy.srcDevice += delta
    elif slot.field == SLOT_COPY_TARGET:
        record.copy.dstDevice += delta
    else:
        record.fill.dst += delta
    slot.current = address


cdef int _move_slots(ExecutableState state, cudaGraphExec_t executable, dict targets) except -1:
    """Point each slot of targets (index -> address) there, node by node; on a failure every
    node changed so far is put back before the error is raised."""
    cdef dict by_record = {}
    cdef AddressSlot* slot
    cdef NodeRecord record
    for index, address in targets.items():
        by_record.setdefault(state.slots[<Py_ssize_t>index].record, []).append((index, address))
    cdef list done = []
    try:
        for record_index, moves in by_record.items():
            record = state.records[record_index]
            undo = [(index, state.slots[<Py_ssize_t>index].current) for index, _ in moves]
            for index, address in moves:
                _move(record, &state.slots[<Py_ssize_t>index], <uintptr_t>address)
            done.append((record, undo))
            _apply(state, executable, record)
    except BaseException:
        for record, undo in reversed(done):
            for index, address in undo:
                _move(record, &state.slots[<Py_ssize_t>index], <uintptr_t>address)
            try:
                _apply(state, executable, record)
            except Exception:
                pass  # the first error is the one to report
        raise
    for index in targets:
        slot = &state.slots[<Py_ssize_t>index]
        if slot.current != slot.persistent:
            state.dirty.add(index)
        else:
            state.dirty.discard(index)
    return 0


# -- kernel nodes ------------------------------------------------------------------------------

cdef class KernelNodeCore:
    cdef object c_id(self):
        return self.path

    cdef object c_name(self):
        return self.name

    cdef object c_grid(self):
        return self.grid

    cdef object c_block(self):
        return self.block

    cdef object c_shared_memory_bytes(self):
        return self.shared_bytes

    cdef object c_arguments(self):
        return None if self.argument_values is None else dict(self.argument_values)

    cdef object c_signature(self):
        return self.parameter_types

    cdef object c_repr(self):
        return (f"KernelNode(id={self.path}, name={self.name!r}, grid={self.grid}, "
                f"block={self.block}, arguments={self.argument_values})")


cdef dict _scalar_arguments(NodeRecord record):
    values = {}
    for parameter in record.signature.parameters:
        if parameter.kind in ("int", "float", "bool"):
            values[parameter.name] = parameter.decode(
                (<char*>record.arguments)[parameter.offset:parameter.offset + parameter.size])
    return values


cdef list kernel_nodes(ExecutableState state, object graph):
    state.read_nodes()
    cdef list nodes = []
    cdef NodeRecord record
    cdef KernelNodeCore node
    cls = _kernel_node_class()
    for record in state.records:
        if record.node_type != NODE_KERNEL:
            continue
        node = cls.__new__(cls)
        node.graph_ref = weakref.ref(graph)
        node.executable_id = state.executable_id
        node.path = record.path
        node.name = record.name
        node.grid = (record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ)
        node.block = (record.kernel.blockDimX, record.kernel.blockDimY,
                      record.kernel.blockDimZ)
        node.shared_bytes = record.kernel.sharedMemBytes
        if record.signature is not None:
            node.argument_values = _scalar_arguments(record)
            node.parameter_types = tuple((p.name, p.type) for p in record.signature.parameters)
        else:
            node.parameter_types = ()
        nodes.append(node)
    return nodes


cdef object _kernel_node_class():
    # The public class generated from the schema derives from KernelNodeCore.
    return public.public_class("KernelNodeCore", KernelNodeCore)


cdef tuple _dimensions(object value, str argument, tuple limits):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if (not isinstance(value, (tuple, list)) or not 1 <= len(value) <= 3
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise TypeError(f"{argument} must be an int or a tuple of 1 to 3 ints, got "
                        f"{errors.shown(value)}")
    dims = tuple(value) + (1,) * (3 - len(value))
    for axis, (size, limit) in enumerate(zip(dims, limits)):
        if not 1 <= size <= limit:
            raise ValueError(f"{argument}[{axis}] must be from 1 to {limit}, got {size}")
    return dims


cdef tuple node_params_args(object node, object grid, object block, object arguments):
    """(grid, block) as three sizes each (None: unchanged), after checking every argument of
    set_kernel_node_params() that needs no graph."""
    if not isinstance(node, KernelNodeCore):
        raise TypeError(f"node must be a KernelNode from kernel_nodes(), got "
                        f"{errors.shown(node)}")
    cdef tuple grid_dims = _dimensions(grid, "grid", MAX_GRID)
    cdef tuple block_dims = _dimensions(block, "block", MAX_BLOCK)
    if block_dims is not None and block_dims[0] * block_dims[1] * block_dims[2] > MAX_BLOCK_THREADS:
        raise ValueError(f"block {block_dims} has more than {MAX_BLOCK_THREADS} threads")
    if arguments is not None and not isinstance(arguments, dict):
        raise TypeError(f"arguments must be a dict of argument names to values, got "
                        f"{errors.shown(arguments)}")
    if (<KernelNodeCore>node).graph_ref is None or (<KernelNodeCore>node).executable_id == 0:
        raise ValueError("node was not listed by a graph (a KernelNode made by hand); list "
                         "the graph's nodes with kernel_nodes() and pass one of those; nothing "
                         "was changed")
    return grid_dims, block_dims


cdef NodeRecord _listed_record(ExecutableState state, object graph, KernelNodeCore given):
    """The record of a node kernel_nodes() listed for this graph's executable as it is now
    (Note [Listed nodes])."""
    owner = given.graph_ref() if given.graph_ref is not None else None
    if owner is not graph:
        raise ValueError(f"node {given.path} belongs to another graph (or to one that no longer "
                         "exists); list this graph's nodes with kernel_nodes() and pass one of "
                         "those; nothing was changed")
    if given.executable_id != state.executable_id:
        raise ValueError(f"node {given.path} was listed before the graph's executable changed "
                         "(a recapture, reset() and a new capture, or a reinstantiation); call "
                         "kernel_nodes() again and pass a node it lists; nothing was changed")
    state.read_nodes()
    cdef NodeRecord record
    for record in state.records:
        if record.path == given.path and record.node_type == NODE_KERNEL:
            return record
    raise ValueError(f"node {given.path} is not a kernel node of this graph's executable; call "
                     "kernel_nodes() again and pass a node it lists; nothing was changed")


cdef str _family(object signature):
    source = signature.source
    family = KERNEL_FAMILIES.get(source, "tensorplay")
    article = "an" if family[0] in "aeiou" else "a"
    return f"{article} {family} kernel ({source}.cu)" if source else f"{article} {family} kernel"


cdef int _check_launch(NodeRecord record, tuple grid, tuple block) except -1:
    """Refuse new launch dimensions the kernel's result or memory would depend on
    (Note [Launch dimensions])."""
    old_grid, old_block = _launch_of(record)
    if grid == old_grid and block == old_block:
        return 0
    where = _node_text(record)
    if record.signature is None:
        raise ValueError(f"{where}: its launch dimensions cannot be changed: nothing tells "
                         f"whether its result or the memory it touches depends on them "
                         f"({record.unknown}); nothing was changed")
    signature = record.signature
    if signature.launch == "fixed":
        raise ValueError(f"{where}: the result of {_family(signature)} depends on its launch "
                         f"dimensions ({signature.launch_reason}), so its grid and block cannot "
                         f"change from {old_grid} and {old_block}; nothing was changed")
    if signature.launch == "grid" and block != old_block:
        raise ValueError(f"{where}: the result of {_family(signature)} depends on its block "
                         f"size ({signature.launch_reason}), so its block stays {old_block}; "
                         "only its grid can change; nothing was changed")
    if grid[1:] != (1, 1) or block[1:] != (1, 1):
        raise ValueError(f"{where}: the kernel divides its work by x alone, so a grid {grid} or "
                         f"block {block} of y or z other than 1 would run it more than once "
                         "(an in-place kernel would then read what it wrote); nothing was "
                         "changed")
    if record.max_threads and block[0] > record.max_threads:
        raise ValueError(f"{where}: a block of {block[0]} threads is more than the kernel "
                         f"runs with, at most {record.max_threads} (the driver's "
                         "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); nothing was changed")
    return 0


cdef list _checked_extents(ExecutableState state, NodeRecord record, bytes data, tuple grid,
                           tuple block, dict changed):
    """The extents of the record's kernel with these argument bytes and dimensions, each
    checked against its slot's bound (Note [Extents and bounds])."""
    where = _node_text(record)
    try:
        extents = record.signature.extents(data, grid, block)
    except ValueError as error:
        raise ValueError(f"{where}: {error}; nothing was changed") from None
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    for index in range(record.first_slot, record.first_slot + record.slot_count):
        slot = &state.slots[index]
        _, _, low, high = extents[slot.access]  # Python ints: a huge count does not overflow
        if high > low and (low < slot.bound_low or high > slot.bound_high):
            access = record.signature.accesses[slot.access]
            causes = [f"argument {name!r} = {value!r}" for name, value in changed.items()
                      if name in access.uses]
            if "grid" in access.uses and grid != _launch_of(record)[0]:
                causes.append(f"grid {grid}")
            if "block" in access.uses and block != _launch_of(record)[1]:
                causes.append(f"block {block}")
            cause = " and ".join(causes) if causes else "the change"
            raise ValueError(
                f"{cause} of {where}: the kernel would touch bytes [{low}, {high}) from "
                f"{access.name!r} at {slot.current:#x} ({(high - low) // access.unit} elements "
                f"of {access.unit} bytes: {access.name}[{access.text}]), outside the bytes "
                f"[{slot.bound_low}, {slot.bound_high}) it covered when captured or last "
                "rebound, the memory the graph knows it may touch; nothing was changed")
    return list(extents)


cdef int set_kernel_node_params(ExecutableState state, cudaGraphExec_t executable, object graph,
                                object node, object grid, object block,
                                object arguments) except -1:
    grid_dims, block_dims = node_params_args(node, grid, block, arguments)
    cdef NodeRecord record = _listed_record(state, graph, <KernelNodeCore>node)
    old_grid, old_block = _launch_of(record)
    cdef tuple new_grid = grid_dims if grid_dims is not None else old_grid
    cdef tuple new_block = block_dims if block_dims is not None else old_block
    encoded = []
    changed = {}
    if arguments:
        if record.signature is None:
            raise ValueError(f"{_node_text(record)}: its arguments cannot be set: "
                             f"{record.unknown}")
        for name, value in arguments.items():
            parameter = record.signature.parameter(name) if isinstance(name, str) else None
            if parameter is None:
                raise TypeError(f"argument names must be str, got {errors.shown(name)}")
            if parameter.kind not in ("int", "float", "bool"):
                raise ValueError(f"argument {name!r} of {_node_text(record)} is a "
                                 f"{parameter.kind} ({parameter.type}); only scalar arguments "
                                 "can be set (rebind() moves tensors)")
            encoded.append((parameter, parameter.encode(value)))
            reason = record.signature.frozen_reason(name)
            if reason is not None:
                raise ValueError(f"argument {name!r} of {_node_text(record)} cannot be changed: "
                                 f"{reason}; nothing was changed")
            changed[name] = value
    _check_launch(record, new_grid, new_block)
    extents = None
    if record.signature is not None and (encoded or new_grid != old_grid
                                         or new_block != old_block):
        data = bytearray((<char*>record.arguments)[:record.signature.size])
        for parameter, encoded_bytes in encoded:
            data[parameter.offset:parameter.offset + len(encoded_bytes)] = encoded_bytes
        extents = _checked_extents(state, record, bytes(data), new_grid, new_block, changed)
    # Everything checked: change the record, then the executable; put the record back if the
    # driver refuses.
    cdef CUDA_KERNEL_NODE_PARAMS saved_launch = record.kernel
    saved_bytes = (<char*>record.arguments)[:record.signature.size] \
        if record.signature is not None else b""
    for parameter, data in encoded:
        memcpy(record.arguments + <size_t>parameter.offset, <const char*>data, len(data))
    record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ = new_grid
    record.kernel.blockDimX, record.kernel.blockDimY, record.kernel.blockDimZ = new_block
    try:
        _apply(state, executable, record)
    except BaseException:
        record.kernel = saved_launch
        if saved_bytes:
            memcpy(record.arguments, <const char*>saved_bytes, len(saved_bytes))
        raise
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    if extents is not None:
        for index in range(record.first_slot, record.first_slot + record.slot_count):
            slot = &state.slots[index]
            _, _, low, high = extents[slot.access]
            slot.low, slot.high = (low, high) if high > low else (0, 0)
    return 0


# -- rebinding (Note [Rebinding]) --------------------------------------------------------------

cdef tuple _span(TensorCore value):
    cdef size_t itemsize = value.dtype_object.itemsize
    if tensor.is_contiguous(value):
        return (value.data, value.data + <size_t>value.element_count * itemsize)
    return (value.data, value.data + tensor.reach_bytes(value.sizes, value.element_strides,
                                                       itemsize))


cdef str _unscannable(list records):
    """Why rebinding could miss a reference in the graph of these records; None if it cannot."""
    cdef NodeRecord record
    for record in records:
        if record.node_type == NODE_KERNEL and record.signature is None:
            return (f"the graph's {_node_text(record)} cannot be scanned for the tensor's "
                    f"address ({record.unknown}), so rebinding could miss a reference")
        if record.node_type not in (NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET, NODE_CONDITIONAL) \
                and record.node_type not in ADDRESS_FREE_TYPES:
            return (f"the graph's {_node_text(record)} may hold device addresses tensorplay "
                    "cannot read, so rebinding could miss a reference")
    return None


cdef str _slot_text(ExecutableState state, Py_ssize_t index):
    """What a node does through one of its addresses, in words: "reads 'a'", "writes its
    target"."""
    cdef AddressSlot* slot = &state.slots[index]
    cdef NodeRecord record = state.records[slot.record]
    verb = ("reads", "writes", "reads and writes")[slot.role - 1]
    if slot.field == SLOT_ARGUMENT and record.signature is not None:
        return f"{verb} {record.signature.accesses[slot.access].name!r}"
    if slot.field == SLOT_COPY_SOURCE:
        return f"{verb} its source"
    return f"{verb} its target"


cdef int _refuse_partial_cover(ExecutableState state, uintptr_t start, uintptr_t end,
                               str what) except -1:
    """A node reaching into [start, end) through an address outside it: moving the addresses
    inside would leave it on the static tensor's memory, which the graph lets go."""
    cdef AddressSlot* slot
    cdef Py_ssize_t index
    cdef long long first, last
    for index in range(<Py_ssize_t>state.slots.size()):
        slot = &state.slots[index]
        if start <= slot.persistent < end or slot.bound_high <= slot.bound_low:
            continue
        first = <long long>slot.persistent + slot.bound_low
        last = <long long>slot.persistent + slot.bound_high
        if first < <long long>end and <long long>start < last:
            side = "before" if slot.persistent < start else "after"
            raise ValueError(f"{what}: the graph's {_node_text(state.records[slot.record])} "
                             f"covers the tensor's memory from an address {side} it "
                             f"({_slot_text(state, index)} at {slot.persistent:#x}, bytes "
                             f"[{slot.bound_low}, {slot.bound_high}) from there), so it cannot "
                             "be moved to the new tensor alone; bind the tensor that holds all "
                             "the node covers; nothing was changed")
    return 0


cdef int _check_cover(ExecutableState state, Py_ssize_t index, uintptr_t address,
                      uintptr_t fresh_start, uintptr_t fresh_end, Py_ssize_t position,
                      str what) except -1:
    """The bytes the slot's node touches from its new address lie in the new tensor's."""
    cdef AddressSlot* slot = &state.slots[index]
    if slot.high <= slot.low:
        return 0
    cdef long long first = <long long>address + slot.low
    cdef long long last = <long long>address + slot.high
    if <long long>fresh_start <= first and last <= <long long>fresh_end:
        return 0
    raise ValueError(
        f"{what}: binding {position}'s new tensor does not cover what the graph's "
        f"{_node_text(state.records[slot.record])} touches: it {_slot_text(state, index)}, "
        f"bytes [{first - <long long>fresh_start}, {last - <long long>fresh_start}) from the new "
        f"tensor's start, and the tensor holds {fresh_end - fresh_start} bytes (at "
        f"{fresh_start:#x}). The node covers more than the static tensor (a view of less than "
        "the node reads or writes?): bind the tensor that holds all it covers; nothing was "
        "changed")


cdef int _refuse_overlaps(ExecutableState state, dict targets, str what) except -1:
    """Two addresses of one node, one of them written, whose memory would overlap after the
    move, unless they moved together (as captured) or are exactly the same memory of a kernel
    that runs in place (Note [Rebinding])."""
    cdef set touched = set()
    cdef AddressSlot* slot
    cdef AddressSlot* one
    cdef AddressSlot* other
    cdef Py_ssize_t index, i, j, end
    cdef long long first_low, first_high, second_low, second_high, first_move, second_move
    for index, address in targets.items():
        slot = &state.slots[<Py_ssize_t>index]
        if slot.persistent != <uintptr_t>address:
            touched.add(slot.record)
    cdef NodeRecord record
    for record_index in touched:
        record = state.records[record_index]
        in_place = (record.node_type == NODE_KERNEL and record.signature is not None
                    and record.signature.in_place)
        end = record.first_slot + record.slot_count
        for i in range(record.first_slot, end):
            one = &state.slots[i]
            if one.high <= one.low:
                continue
            first_move = <long long>targets.get(i, one.persistent) - <long long>one.persistent
            first_low = <long long>one.persistent + first_move + one.low
            first_high = <long long>one.persistent + first_move + one.high
            for j in range(i + 1, end):
                other = &state.slots[j]
                if other.high <= other.low or not ((one.role | other.role) & ROLE_WRITE):
                    continue
                second_move = (<long long>targets.get(j, other.persistent)
                               - <long long>other.persistent)
                if second_move == first_move:
                    continue  # as they were: the node ran that way when captured
                second_low = <long long>other.persistent + second_move + other.low
                second_high = <long long>other.persistent + second_move + other.high
                if first_high <= second_low or second_high <= first_low:
                    continue
                if first_low == second_low and first_high == second_high:
                    if in_place:
                        continue
                    how = (f"the same memory, and {_family(record.signature)} does not run in "
                           "place" if record.signature is not None
                           else "the same memory, which a copy does not allow")
                else:
                    how = "memory that partly overlaps, so it would read what it already wrote"
                raise ValueError(
                    f"{what}: after the binding the graph's {_node_text(record)} "
                    f"{_slot_text(state, i)} at bytes [{first_low:#x}, {first_high:#x}) and "
                    f"{_slot_text(state, j)} at [{second_low:#x}, {second_high:#x}): {how}; "
                    "an output must be apart from the inputs, or exactly an input's memory "
                    "for a kernel that runs in place; nothing was changed")
    return 0


cdef int bindings_arg(object bindings, str what) except -1:
    if not isinstance(bindings, dict):
        raise TypeError(f"{what}: bindings must be a dict of static tensors to new tensors, "
                        f"got {errors.shown(bindings)}")
    return 0


cdef list _checked_pairs(ExecutableState state, object bindings, str what):
    """[(static span, static, new)] of a {static tensor: new tensor} mapping, all checked."""
    bindings_arg(bindings, what)
    cdef list pairs = []
    cdef TensorCore static, fresh
    for position, (key, value) in enumerate(bindings.items()):
        static = factories.tensor_arg(key, "bindings key", position)
        fresh = factories.tensor_arg(value, "bindings value", position)
        if static.device_index != state.device or fresh.device_index != state.device:
            raise ValueError(f"{what}: binding {position} pairs a tensor on "
                             f"{tensor.device_text(static.device_index)} with one on "
                             f"{tensor.device_text(fresh.device_index)}; both must be on the "
                             f"graph's device, cuda:{state.device}")
        if (static.sizes != fresh.sizes or static.dtype_object is not fresh.dtype_object
                or static.element_strides != fresh.element_strides):
            raise ValueError(f"{what}: binding {position} pairs a tensor of shape "
                             f"{static.sizes}, {static.dtype_object.name}, strides "
                             f"{static.element_strides} with one of shape {fresh.sizes}, "
                             f"{fresh.dtype_object.name}, strides {fresh.element_strides}; the "
                             "new tensor must have the static tensor's shape, dtype and strides")
        if (fresh.data - static.data) % VECTOR_BYTES:
            raise ValueError(f"{what}: binding {position}'s new tensor is at {fresh.data:#x}, "
                             f"{(fresh.data - static.data) % VECTOR_BYTES} bytes off the "
                             f"static tensor's alignment; the graph's kernels may have been "
                             f"captured loading {VECTOR_BYTES} bytes at a time, so the two "
                             f"addresses must differ by a multiple of {VECTOR_BYTES}")
        if static.element_count == 0:
            raise ValueError(f"{what}: binding {position}'s static tensor has no elements, so "
                             "the graph cannot refer to it")
        pairs.append((_span(static), static, fresh))
    if len(pairs) < 2:
        return pairs
    ordered = sorted(pairs, key=lambda pair: pair[0])
    for before, after in zip(ordered, ordered[1:]):
        if after[0][0] < before[0][1]:
            raise ValueError(f"{what}: two static tensors of the bindings overlap in memory, so "
                             "an address inside both could not be told apart; nothing was "
                             "changed")
    return pairs


cdef int rebind(ExecutableState state, cudaGraphExec_t executable, object bindings,
                bint persistent, cudaStream_t stream, str what) except -1:
    cdef list pairs = _checked_pairs(state, bindings, what)
    state.read_nodes()
    if state.unscannable is not None:
        raise ValueError(f"{what}: {state.unscannable}; nothing was changed. Copy new values "
                         "into the static tensor instead (stage_and_launch())")
    cdef dict targets = {}
    cdef dict covers = {}  # slot index -> the new tensor's span, to narrow its bound to
    cdef TensorCore static, fresh
    cdef uintptr_t start, end, address, fresh_start, fresh_end
    cdef Py_ssize_t slot_index
    for position, (span, static, fresh) in enumerate(pairs):
        start, end = span
        found = state.span_slots.get(span)
        if found is None:
            found = _slots_in(state, start, end, what)
        if not found:
            raise ValueError(f"{what}: no node of the graph refers to the memory of binding "
                             f"{position}'s static tensor (at {start:#x}); give a tensor the "
                             "graph reads or writes, as it was bound at capture or by rebind()")
        fresh_span = _span(fresh)
        fresh_start, fresh_end = fresh_span
        for index in found:
            slot_index = index
            address = fresh.data + (state.slots[slot_index].persistent - start)
            _check_cover(state, slot_index, address, fresh_start, fresh_end, position, what)
            targets[index] = address
            covers[index] = fresh_span
    if not persistent:
        for index in state.dirty:  # bound by the previous replay_with() and not this one
            if index not in targets:
                targets[index] = state.slots[<Py_ssize_t>index].persistent
    _refuse_overlaps(state, targets, what)
    changed = {index: address for index, address in targets.items()
               if state.slots[<Py_ssize_t>index].current != address}
    if changed:
        _move_slots(state, executable, changed)
    if persistent:
        _make_persistent(state, pairs, targets)
        _narrow_bounds(state, covers)
    else:
        # Until the next launch puts the persistent addresses back, the executable refers to
        # these tensors: keep them alive, and keep the allocator from handing their memory to
        # another stream before this launch is done with it.
        state.call_holding = [fresh for _, _, fresh in pairs]
        for _, _, fresh in pairs:
            if isinstance(fresh.owner, tensor.DeviceStorage):
                allocator.record_stream(<void*>(<tensor.DeviceStorage>fresh.owner).pointer,
                                        stream, state.device)
    return 0


cdef int _narrow_bounds(ExecutableState state, dict covers) except -1:
    """After a persistent move, what a slot may touch is what it could before, moved, and
    inside the new tensor: the memory the graph keeps alive for it (Note [Extents and
    bounds])."""
    cdef AddressSlot* slot
    cdef long long base, low, high
    for index, (fresh_start, fresh_end) in covers.items():
        slot = &state.slots[<Py_ssize_t>index]
        base = <long long>slot.persistent
        low = max(slot.bound_low, <long long>fresh_start - base)
        high = min(slot.bound_high, <long long>fresh_end - base)
        if high <= low:
            low = high = 0
        slot.bound_low = low
        slot.bound_high = high
    return 0


cdef list _slots_in(ExecutableState state, uintptr_t start, uintptr_t end, str what):
    """The slots whose persistent address lies in [start, end), cached per span; a node that
    reaches into the span from an address outside it is refused."""
    _refuse_partial_cover(state, start, end, what)
    cdef list found = [i for i in range(<Py_ssize_t>state.slots.size())
                       if start <= state.slots[i].persistent < end]
    state.span_slots[(start, end)] = found
    return found


cdef int _make_persistent(ExecutableState state, list pairs, dict targets) except -1:
    cdef AddressSlot* slot
    for index, address in targets.items():
        slot = &state.slots[<Py_ssize_t>index]
        slot.persistent = address
        state.dirty.discard(index)
    state.span_slots = {}
    for span, static, fresh in pairs:
        # The graph now refers to fresh: keep it alive, and let static go.
        state.holding.pop(span[0], None)
        state.holding[(<TensorCore>fresh).data] = fresh
    return 0


cdef int restore_bindings(ExecutableState state, cudaGraphExec_t executable) except -1:
    if state.dirty:
        _move_slots(state, executable,
                    {index: state.slots[<Py_ssize_t>index].persistent for index in state.dirty})
    state.call_holding = None
    return 0
