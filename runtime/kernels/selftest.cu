// The smallest kernel source: the tests of runtime/kernels/nvrtc.pyx compile it without a GPU, and it
// shows the shape every source takes. Header-free (docs/design.md, "Kernel caches"), and
// extern "C" so that the cubin names the kernel exactly as get_kernel asks for it.
//@ write out[min(count, gridDim.x * blockDim.x)]
//@ launch fixed: one thread per element, with no grid-stride loop
//@ in-place no
extern "C" __global__ void tp_selftest_iota(unsigned int* out, unsigned int count) {
    unsigned int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < count) {
        out[index] = index;
    }
}
