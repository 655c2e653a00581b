from cuda.bindings.cyruntime cimport cudaStream_t

# stage_and_launch()'s copies of every pair, on stream, after checking them all.
cdef int stage(int device, object static_inputs, object inputs, cudaStream_t stream) except -1
