from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.tensor cimport TensorCore

# value as our tensor (ours, or a view through __cuda_array_interface__ or DLPack), or a
# TypeError naming argument (argument[index] when index >= 0).
cdef TensorCore tensor_arg(object value, str argument, Py_ssize_t index)
# stage_and_launch()'s copies of every pair, on stream, after checking them all.
cdef int stage(int device, object static_inputs, object inputs, cudaStream_t stream) except -1
