from cuda.bindings.cyruntime cimport cudaGraphNode_t, cudaGraph_t

# The topology of graph (and of the bodies of its conditional and child-graph nodes) as plain
# Python data, read on device. recorded_bodies maps a conditional node's address to
# (type name, [body graph addresses]) as the capture recorded them, for drivers that cannot
# report a conditional node's parameters (graph_topology.pyx explains).
cdef dict graph_data(cudaGraph_t graph, int device, dict recorded_bodies)
# The pieces graph_update.pyx shares: a graph's node addresses in the driver's order, a kernel
# node's kernel name (None when the driver cannot tell), and a conditional node's
# (type name, [body graph addresses]). Called inside the graph's device context.
cdef list graph_nodes(cudaGraph_t graph)
cdef object kernel_name(cudaGraphNode_t node)
cdef tuple conditional_of(cudaGraphNode_t node, dict recorded_bodies)
