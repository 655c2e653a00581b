from cuda.bindings.cyruntime cimport cudaGraph_t

# The topology of graph (and of the bodies of its conditional and child-graph nodes) as plain
# Python data, read on device. recorded_bodies maps a conditional node's address to
# (type name, [body graph addresses]) as the capture recorded them, for drivers that cannot
# report a conditional node's parameters (graph_topology.pyx explains).
cdef dict graph_data(cudaGraph_t graph, int device, dict recorded_bodies)
