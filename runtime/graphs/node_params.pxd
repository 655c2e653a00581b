from cuda.bindings.cyruntime cimport cudaGraphExec_t

from tensorplay._runtime.graphs.graph_update cimport ExecutableState

# Kernel node parameters (node_params.pyx; the graph's public methods call these).
cdef list kernel_nodes(ExecutableState state, object graph)
cdef int set_kernel_node_params(ExecutableState state, cudaGraphExec_t executable, object graph,
                                object node, object grid, object block,
                                object arguments) except -1
# The argument checks that come before anything needs the graph's executable.
cdef tuple node_params_args(object node, object grid, object block, object arguments)


# What CUDAGraph.kernel_nodes() returns: one kernel node, as it was when listed.
cdef class KernelNodeCore:
    cdef object graph_ref              # weakref to the graph; None: not made by kernel_nodes()
    cdef unsigned long long executable_id  # the ExecutableState's when listed; 0: made by hand
    cdef readonly tuple path
    cdef object name
    cdef tuple grid
    cdef tuple block
    cdef unsigned int shared_bytes
    cdef object argument_values        # dict name -> value of the scalar arguments; None: foreign
    cdef tuple parameter_types         # ((name, C type), ...); () for a foreign kernel
    cdef object c_id(self)
    cdef object c_name(self)
    cdef object c_grid(self)
    cdef object c_block(self)
    cdef object c_shared_memory_bytes(self)
    cdef object c_arguments(self)
    cdef object c_signature(self)
    cdef object c_repr(self)
