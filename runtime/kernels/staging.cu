// CUDAGraph.stage_and_launch(): the raw byte copies of up to STAGED_COPIES pairs in one launch.
// The driver's cudaMemcpyAsync costs about 4.6 us of host time per 1 MiB device-to-device copy
// on an H200 (8 copies: 37 us, bench/bench_graph_extras.py prints it), more than a kernel
// launch that moves them all; so the copies are one kernel on the launch stream.
// The launch gives each pair blocks_per_copy consecutive blocks. Pairs whose addresses and
// size are all 16-byte multiples move 16 bytes per load; any other pair moves bytes.
#define STAGED_COPIES 32  // keep equal to STAGED_COPIES in graph.pyx

struct StagedCopies {
    unsigned long long target[STAGED_COPIES];
    unsigned long long source[STAGED_COPIES];
    unsigned long long bytes[STAGED_COPIES];
};

struct alignas(16) sixteen_bytes { unsigned long long low, high; };

extern "C" __global__ void stage_copies(StagedCopies copies, unsigned int blocks_per_copy) {
    const unsigned int pair = blockIdx.x / blocks_per_copy;
    const unsigned long long first =
        (unsigned long long)(blockIdx.x % blocks_per_copy) * blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)blocks_per_copy * blockDim.x;
    const unsigned long long target = copies.target[pair];
    const unsigned long long source = copies.source[pair];
    const unsigned long long bytes = copies.bytes[pair];
    if (((target | source | bytes) & 15ull) == 0) {
        sixteen_bytes* to = (sixteen_bytes*)target;
        const sixteen_bytes* from = (const sixteen_bytes*)source;
        for (unsigned long long i = first; i < bytes / 16; i += stride) to[i] = from[i];
    } else {
        char* to = (char*)target;
        const char* from = (const char*)source;
        for (unsigned long long i = first; i < bytes; i += stride) to[i] = from[i];
    }
}
