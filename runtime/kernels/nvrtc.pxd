# Run-time kernel compilation (nvrtc.pyx explains the caches at its top).
from libc.stdint cimport uintptr_t

from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t

# Numbers the launchers here and the kernel sources must agree on, declared once: every source
# is compiled with them as #defines (nvrtc.pyx, CONSTANTS_PRELUDE), and with the op codes of
# ops.pxd.
cdef enum:
    THREADS = 256            # threads per block of the elementwise, reduction and random kernels
    MAX_DIMS = 8             # dimensions of a strided Layout (common.cu, device_ops.pyx)
    STAGED_COPIES = 32       # pairs one stage_copies launch moves (staging.cu, staging.pyx)
    SORT_CHUNK = 2048        # elements one block sorts in shared memory (sort.cu, device_ops.pyx)

cdef CUfunction get_kernel(int device, str source_name, str function_name, str prelude) except NULL
# Blocks of block_x threads of function that the whole device runs at once: the grid of a
# persistent, grid-stride kernel (cached per function and block size).
cdef unsigned int resident_blocks(int device, CUfunction function, unsigned int block_x) except 0
# The parameters (kernel_signature.KernelSignature) of a kernel loaded by get_kernel, with what
# its source's annotation declares (the extents of its addresses, its launch rule, whether it
# runs in place), by its CUfunction or CUkernel address; None for any other kernel (PyTorch's,
# cuBLAS's).
cdef object kernel_signature_of(uintptr_t handle)
# Launches on device, whatever context the calling thread has current (Note [One rule for
# contexts] in device.pyx).
cdef int launch(int device, CUfunction function, unsigned int grid_x, unsigned int block_x,
                unsigned int shared_bytes, cudaStream_t stream, void** arguments) except -1 nogil
# launch() of parameters packed in one buffer of size bytes, laid out as the kernel's image
# lays them out (Note [Packed parameters] in nvrtc.pyx).
cdef int launch_packed(int device, CUfunction function, unsigned int grid_x,
                       unsigned int block_x, unsigned int shared_bytes, cudaStream_t stream,
                       void* parameters, size_t size) except -1 nogil
# Refuse (RuntimeError) a launch_packed struct whose fields, count of them at offsets with sizes,
# are not function's parameters, or whose bytes to pass, end, are not where the last one ends;
# name is the kernel's, for the message.
cdef int check_packed_layout(CUfunction function, str name, const size_t* offsets,
                             const size_t* sizes, size_t count, size_t end) except -1
