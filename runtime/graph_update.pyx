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

Note [Rebinding]
Rebinding points every node that refers to a static tensor's memory at another tensor's, with no
copy: each device address in a kernel argument of ours (pointer parameters, and the addresses
inside the structs they take), in a copy's source or target and in a memset's target that lies
inside the static tensor's bytes moves to the same offset in the new tensor. Addresses are
found once per static tensor and cached until the next update. A node whose addresses cannot be
known (a kernel of another library, a host callback, a child graph, memory allocation nodes, a
batch of memory operations) could hide a reference, so a graph holding one is refused before
anything changes, naming the node; so is a copy or memset that covers the tensor's bytes only in
part from outside them. replay_with() changes the executable for one launch: the next launch
without bindings puts the persistent addresses back first. Setters change future launches only;
launches already queued keep the parameters they were launched with (CUDA driver API,
cuGraphExecKernelNodeSetParams).
"""
import weakref

from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED,
                                     CUDA_KERNEL_NODE_PARAMS, CUDA_SUCCESS, CUcontext,
                                     CUfunction, CUgraph, CUgraphExec, CUgraphExecUpdateResultInfo,
                                     CUgraphNode, CUresult)
from cuda.bindings.cyruntime cimport (cudaGraphExec_t, cudaGraphNodeType, cudaGraphNode_t,
                                      cudaGraph_t, cudaStream_t)

from tensorplay._runtime cimport allocator, device as _device, errors, graph_topology, kernels
from tensorplay._runtime cimport public, tensor
from tensorplay._runtime.device cimport DeviceSwitch
from tensorplay._runtime.tensor cimport TensorCore

from tensorplay._runtime.graph_topology import CONDITIONAL_TYPES, NODE_TYPES

cdef enum:
    NODE_KERNEL = 0
    NODE_MEMCPY = 1
    NODE_MEMSET = 2
    NODE_CONDITIONAL = 13
    SLOT_ARGUMENT = 0
    SLOT_COPY_SOURCE = 1
    SLOT_COPY_TARGET = 2
    SLOT_FILL_TARGET = 3

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


cdef ExecutableState new_state(GraphTemplate template):
    cdef ExecutableState state = ExecutableState.__new__(ExecutableState)
    state.device = template.device
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


cdef int _add_slot(ExecutableState state, int record, int field, size_t offset,
                   uintptr_t address) except -1:
    cdef AddressSlot slot
    slot.record = record
    slot.field = field
    slot.offset = offset
    slot.persistent = address
    slot.current = address
    state.slots.push_back(slot)
    return 0


cdef int _add_slots(ExecutableState state, int index, NodeRecord record) except -1:
    cdef uintptr_t address
    if record.node_type == NODE_KERNEL and record.signature is not None:
        for parameter in record.signature.parameters:
            for inside in parameter.addresses:
                offset = parameter.offset + inside
                memcpy(&address, record.arguments + <size_t>offset, sizeof(uintptr_t))
                if address:
                    _add_slot(state, index, SLOT_ARGUMENT, offset, address)
    elif record.node_type == NODE_MEMCPY:
        if record.copy.srcMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
            _add_slot(state, index, SLOT_COPY_SOURCE, 0, _copy_start(&record.copy, True))
        if record.copy.dstMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
            _add_slot(state, index, SLOT_COPY_TARGET, 0, _copy_start(&record.copy, False))
    elif record.node_type == NODE_MEMSET:
        _add_slot(state, index, SLOT_FILL_TARGET, 0, record.fill.dst)
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
    state.generation += 1
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
        node.generation = state.generation
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
    return grid_dims, block_dims


cdef int set_kernel_node_params(ExecutableState state, cudaGraphExec_t executable, object graph,
                                object node, object grid, object block,
                                object arguments) except -1:
    grid_dims, block_dims = node_params_args(node, grid, block, arguments)
    cdef KernelNodeCore given = node
    if given.graph_ref() is not graph:
        raise ValueError(f"node {given.path} belongs to another graph; take it from this "
                         "graph's kernel_nodes()")
    if given.generation != state.generation:
        raise ValueError(f"node {given.path} was listed before the graph was captured again; "
                         "call kernel_nodes() again")
    state.read_nodes()
    cdef NodeRecord record = next(r for r in state.records if r.path == given.path)
    encoded = []
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
    # Everything checked: change the record, then the executable; put the record back if the
    # driver refuses.
    cdef CUDA_KERNEL_NODE_PARAMS saved_launch = record.kernel
    saved_bytes = (<char*>record.arguments)[:record.signature.size] \
        if record.signature is not None else b""
    for parameter, data in encoded:
        memcpy(record.arguments + <size_t>parameter.offset, <const char*>data, len(data))
    if grid_dims is not None:
        record.kernel.gridDimX, record.kernel.gridDimY, record.kernel.gridDimZ = grid_dims
    if block_dims is not None:
        record.kernel.blockDimX, record.kernel.blockDimY, record.kernel.blockDimZ = block_dims
    try:
        _apply(state, executable, record)
    except BaseException:
        record.kernel = saved_launch
        if saved_bytes:
            memcpy(record.arguments, <const char*>saved_bytes, len(saved_bytes))
        raise
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


cdef int _refuse_partial_cover(ExecutableState state, uintptr_t start, uintptr_t end,
                               str what) except -1:
    """A copy or memset reaching into [start, end) from an address outside it."""
    cdef NodeRecord record
    cdef uintptr_t first, last
    for record in state.records:
        if record.node_type == NODE_MEMCPY:
            extent = record.copy.WidthInBytes + record.copy.srcPitch * max(
                0, record.copy.Height * record.copy.Depth - 1)
            ranges = []
            if record.copy.srcMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
                ranges.append(_copy_start(&record.copy, True))
            if record.copy.dstMemoryType in (CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_UNIFIED):
                ranges.append(_copy_start(&record.copy, False))
        elif record.node_type == NODE_MEMSET:
            extent = record.fill.width * record.fill.elementSize + record.fill.pitch * max(
                0, record.fill.height - 1)
            ranges = [record.fill.dst]
        else:
            continue
        for first in ranges:
            last = first + extent
            if first < start < last:
                raise ValueError(f"{what}: the graph's {_node_text(record)} covers the tensor's "
                                 "memory from an address before it, so it cannot be moved to "
                                 "the new tensor alone; nothing was changed")
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
        static = tensor.tensor_arg(key, "bindings key", position)
        fresh = tensor.tensor_arg(value, "bindings value", position)
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
    cdef TensorCore static, fresh
    cdef uintptr_t start, end
    for position, (span, static, fresh) in enumerate(pairs):
        start, end = span
        found = state.span_slots.get(span)
        if found is None:
            found = _slots_in(state, start, end, what)
        if not found:
            raise ValueError(f"{what}: no node of the graph refers to the memory of binding "
                             f"{position}'s static tensor (at {start:#x}); give a tensor the "
                             "graph reads or writes, as it was bound at capture or by rebind()")
        for index in found:
            targets[index] = fresh.data + (state.slots[<Py_ssize_t>index].persistent - start)
    if not persistent:
        for index in state.dirty:  # bound by the previous replay_with() and not this one
            if index not in targets:
                targets[index] = state.slots[<Py_ssize_t>index].persistent
    changed = {index: address for index, address in targets.items()
               if state.slots[<Py_ssize_t>index].current != address}
    if changed:
        _move_slots(state, executable, changed)
    if persistent:
        _make_persistent(state, pairs, targets)
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


cdef list _slots_in(ExecutableState state, uintptr_t start, uintptr_t end, str what):
    """The slots whose persistent address lies in [start, end), cached per span; a copy or
    memset that reaches into the span from outside it is refused."""
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
