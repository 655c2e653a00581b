# cython: language_level=3
"""The topology of a CUDA graph as plain Python data, for CUDAGraph.get_graph_data().

A graph becomes {"handle": its cudaGraph_t as an int, "nodes": [...]}, each node a dict:
- "id": its position in cudaGraphGetNodes' order, which "dependencies" and "dependents" use;
- "handle": the cudaGraphNode_t as an int (for cuda.bindings, valid while the graph lives);
- "type": "kernel", "memcpy", "memset", "host", "graph", "empty", "wait_event",
  "event_record", "ext_semaphore_signal", "ext_semaphore_wait", "mem_alloc", "mem_free",
  "batch_mem_op" or "conditional";
- "kernel_name": the kernel's name as the driver reports it (cuFuncGetName), kernel nodes only;
- "conditional_type": "if", "while" or "switch", conditional nodes only;
- "body_graphs": the bodies of a conditional node, or the graph of a child-graph node, each
  described the same way (recursively).

A conditional node's type and bodies come from cudaGraphNodeGetParams where the driver reports
them (cuda.core reads them the same way and notes that drivers before 13.2 do not); otherwise
from what the capture recorded when it added the node (recorded_bodies), which covers every
conditional node tensorplay captured.
"""
from libc.stdint cimport uintptr_t
from libc.stdlib cimport calloc, free
from libc.string cimport memset

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport CUDA_KERNEL_NODE_PARAMS, CUDA_SUCCESS, CUgraphNode
from cuda.bindings.cyruntime cimport (cudaError_t, cudaGraphEdgeData, cudaGraphNodeParams,
                                      cudaGraphNodeType, cudaGraphNodeTypeConditional,
                                      cudaGraphNodeTypeGraph, cudaGraphNodeTypeKernel,
                                      cudaGraphNode_t, cudaGraph_t, cudaSuccess)

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices.device cimport DeviceSwitch

# cudaGraphNodeType values (CUDA Runtime API, "cudaGraphNodeType") in the user's words.
NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 3: "host", 4: "graph", 5: "empty",
              6: "wait_event", 7: "event_record", 8: "ext_semaphore_signal",
              9: "ext_semaphore_wait", 10: "mem_alloc", 11: "mem_free", 12: "batch_mem_op",
              13: "conditional"}
# cudaGraphConditionalNodeType values.
CONDITIONAL_TYPES = {0: "if", 1: "while", 2: "switch"}


cdef dict graph_data(cudaGraph_t graph, int device, dict recorded_bodies):
    cdef DeviceSwitch saved
    _device.enter_device(device, &saved)
    try:
        return _describe(graph, recorded_bodies)
    finally:
        _device.exit_device(&saved)


cdef dict _describe(cudaGraph_t graph, dict recorded_bodies):
    cdef list handles = graph_nodes(graph)
    cdef dict position = {handle: index for index, handle in enumerate(handles)}
    cdef list nodes = []
    cdef cudaGraphNode_t node
    cdef cudaGraphNodeType node_type
    for index, handle in enumerate(handles):
        node = <cudaGraphNode_t><uintptr_t>handle
        errors.check(cyruntime.cudaGraphNodeGetType(node, &node_type), b"cudaGraphNodeGetType")
        entry = {"id": index, "handle": handle,
                 "type": NODE_TYPES.get(<int>node_type, f"unknown ({<int>node_type})"),
                 "dependencies": [position[other] for other in _neighbours(node, False)],
                 "dependents": [position[other] for other in _neighbours(node, True)]}
        if node_type == cudaGraphNodeTypeKernel:
            entry["kernel_name"] = kernel_name(node)
        elif node_type == cudaGraphNodeTypeConditional:
            kind, bodies = conditional_of(node, recorded_bodies)
            entry["conditional_type"] = kind
            entry["body_graphs"] = [_describe(<cudaGraph_t><uintptr_t>body, recorded_bodies)
                                    for body in bodies]
        elif node_type == cudaGraphNodeTypeGraph:
            entry["body_graphs"] = [_describe(<cudaGraph_t><uintptr_t>_child_graph(node),
                                              recorded_bodies)]
        nodes.append(entry)
    return {"handle": <uintptr_t>graph, "nodes": nodes}


cdef list graph_nodes(cudaGraph_t graph):
    cdef size_t count = 0
    errors.check(cyruntime.cudaGraphGetNodes(graph, NULL, &count), b"cudaGraphGetNodes")
    if count == 0:
        return []
    cdef cudaGraphNode_t* found = <cudaGraphNode_t*>calloc(count, sizeof(cudaGraphNode_t))
    if found == NULL:
        raise MemoryError(f"cannot list the {count} nodes of a graph")
    try:
        errors.check(cyruntime.cudaGraphGetNodes(graph, found, &count), b"cudaGraphGetNodes")
        return [<uintptr_t>found[i] for i in range(count)]
    finally:
        free(found)


cdef list _neighbours(cudaGraphNode_t node, bint dependents):
    """The nodes node depends on, or (dependents) those that depend on it."""
    cdef size_t count = 0
    cdef cudaGraphNode_t* found = NULL
    cdef cudaGraphEdgeData* edges = NULL
    _edges(node, dependents, NULL, NULL, &count)
    if count == 0:
        return []
    found = <cudaGraphNode_t*>calloc(count, sizeof(cudaGraphNode_t))
    # Edge data is asked for too: without it the query fails (cudaErrorLossyQuery) when an
    # edge carries any, such as a programmatic-launch edge.
    edges = <cudaGraphEdgeData*>calloc(count, sizeof(cudaGraphEdgeData))
    try:
        if found == NULL or edges == NULL:
            raise MemoryError(f"cannot list the {count} edges of a graph node")
        _edges(node, dependents, found, edges, &count)
        return [<uintptr_t>found[i] for i in range(count)]
    finally:
        free(found)
        free(edges)


cdef int _edges(cudaGraphNode_t node, bint dependents, cudaGraphNode_t* found,
                cudaGraphEdgeData* edges, size_t* count) except -1:
    if dependents:
        errors.check(cyruntime.cudaGraphNodeGetDependentNodes(node, found, edges, count),
                     b"cudaGraphNodeGetDependentNodes")
    else:
        errors.check(cyruntime.cudaGraphNodeGetDependencies(node, found, edges, count),
                     b"cudaGraphNodeGetDependencies")
    return 0


cdef object kernel_name(cudaGraphNode_t node):
    cdef CUDA_KERNEL_NODE_PARAMS params
    cdef const char* name = NULL
    memset(&params, 0, sizeof(params))
    errors.check_driver(cydriver.cuGraphKernelNodeGetParams(<CUgraphNode>node, &params),
                        b"cuGraphKernelNodeGetParams")
    # A kernel launched from a library may be recorded by its CUkernel rather than a CUfunction.
    if params.func != NULL and cydriver.cuFuncGetName(&name, params.func) == CUDA_SUCCESS:
        return name.decode(errors="replace")
    if params.kern != NULL and cydriver.cuKernelGetName(&name, params.kern) == CUDA_SUCCESS:
        return name.decode(errors="replace")
    return None


cdef tuple conditional_of(cudaGraphNode_t node, dict recorded_bodies):
    """(type name, body graph addresses) of a conditional node."""
    cdef cudaGraphNodeParams* params = <cudaGraphNodeParams*>calloc(1, sizeof(cudaGraphNodeParams))
    cdef cudaError_t status
    if params == NULL:
        raise MemoryError("cannot allocate the parameters of a conditional graph node")
    try:
        status = cyruntime.cudaGraphNodeGetParams(node, params)
        if (status == cudaSuccess and params.type == cudaGraphNodeTypeConditional
                and params.conditional.phGraph_out != NULL):
            return (CONDITIONAL_TYPES.get(<int>params.conditional.type),
                    [<uintptr_t>params.conditional.phGraph_out[i]
                     for i in range(params.conditional.size)])
        if status != cudaSuccess:
            cyruntime.cudaGetLastError()  # an older driver's answer, not an error to keep
    finally:
        free(params)
    return recorded_bodies.get(<uintptr_t>node, (None, []))


cdef uintptr_t _child_graph(cudaGraphNode_t node) except? 0:
    cdef cudaGraph_t child = NULL
    errors.check(cyruntime.cudaGraphChildGraphNodeGetGraph(node, &child),
                 b"cudaGraphChildGraphNodeGetGraph")
    return <uintptr_t>child
