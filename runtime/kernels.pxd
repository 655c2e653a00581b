# Run-time kernel compilation (kernels.pyx explains the caches at its top).
from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t

cdef CUfunction get_kernel(int device, str source_name, str function_name, str prelude) except NULL
# Launches on device, whatever context the calling thread has current (Note [One rule for
# contexts] in device.pyx).
cdef int launch(int device, CUfunction function, unsigned int grid_x, unsigned int block_x,
                unsigned int shared_bytes, cudaStream_t stream, void** arguments) except -1 nogil
