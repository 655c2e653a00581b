# distutils: language = c++
# cython: language_level=3, auto_pickle=False
"""The executable a graph keeps, read node by node, and its update from a recapture
(docs/design.md, "Graph update"). The changes made through those node records have modules of
their own: kernel node parameters (node_params.pyx) and rebinding static tensors (rebinding.pyx).

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
"""
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                     CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE,
                                     CU_LAUNCH_PARAM_END, CU_MEMORYTYPE_DEVICE,
                                     CU_MEMORYTYPE_UNIFIED,
                                     CUDA_KERNEL_NODE_PARAMS, CUDA_SUCCESS, CUcontext,
                                     CUfunction, CUgraph, CUgraphExec, CUgraphExecUpdateResultInfo,
                                     CUgraphNode, CUresult)
from cuda.bindings.cyruntime cimport (cudaGraphExec_t, cudaGraphNodeType, cudaGraphNode_t,
                                      cudaGraph_t, cudaStream_t)

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.graphs cimport graph_topology
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.devices.device cimport DeviceSwitch

from tensorplay._runtime.graphs.graph_topology import NODE_TYPES

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
# What a refusal (of new launch dimensions, of a binding that would overlap) calls each
# source's kernels.
KERNEL_FAMILIES = {"elementwise": "elementwise", "copy": "copy", "reduce": "reduction",
                   "philox": "random-number", "staging": "staging", "graphs": "conditional-node",
                   "selftest": "self-test"}


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


cdef str node_text(NodeRecord record):
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


cdef const void* packed_buffer(void** extra, size_t* size) noexcept:
    """The buffer of a kernel's parameters in an extra list (CU_LAUNCH_PARAM_BUFFER_POINTER, as
    nvrtc.launch_packed gives it), with its size; NULL where there is none."""
    cdef const void* buffer = NULL
    cdef size_t index = 0
    while extra != NULL and extra[index] != <void*>CU_LAUNCH_PARAM_END:
        if extra[index] == <void*>CU_LAUNCH_PARAM_BUFFER_POINTER:
            buffer = extra[index + 1]
        elif extra[index] == <void*>CU_LAUNCH_PARAM_BUFFER_SIZE:
            size[0] = (<size_t*>extra[index + 1])[0]
        index += 2
    return buffer


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
    cdef size_t buffer_size = 0
    cdef const unsigned char* buffer = NULL
    if record.kernel.kernelParams == NULL:
        buffer = <const unsigned char*>packed_buffer(record.kernel.extra, &buffer_size)
        if buffer == NULL or buffer_size < signature.size:
            record.unknown = "its arguments were given in a form the driver did not report"
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
        memcpy(record.arguments + <size_t>parameter.offset,
               <const void*>record.kernel.kernelParams[index] if buffer == NULL
               else <const void*>(buffer + <size_t>parameter.offset), <size_t>parameter.size)
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


cdef tuple launch_of(NodeRecord record):
    return ((record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ),
            (record.kernel.blockDimX, record.kernel.blockDimY, record.kernel.blockDimZ))


cdef int _add_slots(ExecutableState state, int index, NodeRecord record) except -1:
    """The node's addresses, each with the bytes the node touches through it now, which are
    also its bound (Note [Extents and bounds])."""
    cdef uintptr_t address
    record.first_slot = <Py_ssize_t>state.slots.size()
    if record.node_type == NODE_KERNEL and record.signature is not None:
        grid, block = launch_of(record)
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


cdef str _unscannable(list records):
    """Why rebinding (rebinding.pyx) could miss a reference in the graph of these records; None
    if it cannot. Read with the records, once per executable state."""
    cdef NodeRecord record
    for record in records:
        if record.node_type == NODE_KERNEL and record.signature is None:
            return (f"the graph's {node_text(record)} cannot be scanned for the tensor's "
                    f"address ({record.unknown}), so rebinding could miss a reference")
        if record.node_type not in (NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET, NODE_CONDITIONAL) \
                and record.node_type not in ADDRESS_FREE_TYPES:
            return (f"the graph's {node_text(record)} may hold device addresses tensorplay "
                    "cannot read, so rebinding could miss a reference")
    return None


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

cdef int apply_record(ExecutableState state, cudaGraphExec_t executable,
                      NodeRecord record) except -1:
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


cdef int move_slots(ExecutableState state, cudaGraphExec_t executable, dict targets) except -1:
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
            apply_record(state, executable, record)
    except BaseException:
        for record, undo in reversed(done):
            for index, address in undo:
                _move(record, &state.slots[<Py_ssize_t>index], <uintptr_t>address)
            try:
                apply_record(state, executable, record)
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


cdef str kernel_family(object signature):
    """What a refusal calls the kernel: "a reduction kernel (reduce.cu)"."""
    source = signature.source
    family = KERNEL_FAMILIES.get(source, "tensorplay")
    article = "an" if family[0] in "aeiou" else "a"
    return f"{article} {family} kernel ({source}.cu)" if source else f"{article} {family} kernel"

