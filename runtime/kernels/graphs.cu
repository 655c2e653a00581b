// Conditional graph nodes: copy a one-element bool predicate into a node's condition handle,
// read by the driver when the node runs (CUDA Programming Guide, "Conditional Graph Nodes").
// Header-free: the device runtime's declaration is spelled out here, as NVRTC has no CUDA
// headers at run time (docs/design.md, "Kernel caches").
typedef unsigned long long cudaGraphConditionalHandle;
extern "C" __device__ __cudart_builtin__ void cudaGraphSetConditional(
    cudaGraphConditionalHandle handle, unsigned int value);

// Launched with one thread: concurrent calls on one handle are undefined behaviour.
//@ read predicate[1]
//@ launch fixed: one thread: concurrent calls on one handle are undefined behaviour
//@ in-place no
extern "C" __global__ void set_conditional(cudaGraphConditionalHandle handle,
                                           const bool* predicate) {
    cudaGraphSetConditional(handle, *predicate ? 1u : 0u);
}

// A switch node runs the body its index names; a negative index, read as unsigned, is out of
// range, and then no body runs (CUDA Runtime API, cudaConditionalNodeParams).
//@ read index[1]
//@ launch fixed: one thread: concurrent calls on one handle are undefined behaviour
//@ in-place no
extern "C" __global__ void set_conditional_index(cudaGraphConditionalHandle handle,
                                                 const int* index) {
    cudaGraphSetConditional(handle, (unsigned int)*index);
}

// The body of a while node that captured no work ends with this instead of re-reading its
// predicate, so that the loop stops after one pass instead of running forever (conditional.pyx).
//@ launch fixed: one thread: concurrent calls on one handle are undefined behaviour
//@ in-place no
extern "C" __global__ void clear_conditional(cudaGraphConditionalHandle handle) {
    cudaGraphSetConditional(handle, 0u);
}
