from cuda.bindings.cyruntime cimport cudaGraphExec_t, cudaStream_t

from tensorplay._runtime.graphs.graph_update cimport ExecutableState

# Rebinding static tensors (rebinding.pyx, Note [Rebinding]): persistent (rebind()), or for one
# launch on stream (replay_with()).
cdef int rebind(ExecutableState state, cudaGraphExec_t executable, object bindings,
                bint persistent, cudaStream_t stream, str what) except -1
# The check of the bindings argument that comes before anything needs the graph's executable.
cdef int bindings_arg(object bindings, str what) except -1
# Put back what replay_with() changed, before a plain launch.
cdef int restore_bindings(ExecutableState state, cudaGraphExec_t executable) except -1
