# Zero-copy sharing with other libraries through DLPack and __cuda_array_interface__
# (interop.pyx).
from tensorplay._runtime.tensor.core cimport TensorCore

# Tensor.__dlpack__, __dlpack_device__ and __cuda_array_interface__ (api.yaml).
cdef object to_dlpack(TensorCore tensor, object stream, object max_version, object dl_device,
                      object copy)
cdef tuple dlpack_device(TensorCore tensor)
cdef dict cuda_array_interface(TensorCore tensor)
# A tensor sharing producer's memory: tensorplay.from_dlpack (an object with __dlpack__, or a
# bare capsule), and through __cuda_array_interface__ (a CUDA tensor keeping producer alive).
cdef object from_dlpack(object producer)
cdef object from_cuda_array_interface(object producer)
