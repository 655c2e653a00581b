// CUDAGraph.stage_and_launch(): the raw byte copies of up to STAGED_COPIES pairs in one launch.
// The driver's cudaMemcpyAsync costs 4 to 6 us of host time per 1 MiB device-to-device copy on
// an H200 (bench/raw/raw_staging.cu: 8 copies and a graph launch, 29 to 52 us), more than one
// kernel launch that moves them all; so the copies are one kernel on the launch stream.
// The launch gives each pair blocks_per_copy consecutive blocks. Pairs whose addresses and
// size are all 16-byte multiples move 16 bytes per load; any other pair moves bytes.
// STAGED_COPIES, the most pairs one launch takes, comes from the constants prelude (nvrtc.pxd).

struct StagedCopies {
    unsigned long long target[STAGED_COPIES];
    unsigned long long source[STAGED_COPIES];
    unsigned long long nbytes[STAGED_COPIES];
};

struct alignas(16) sixteen_bytes { unsigned long long low, high; };

//@ read copies.source[i][i < gridDim.x / blocks_per_copy ? copies.nbytes[i] : 0]
//@ write copies.target[i][i < gridDim.x / blocks_per_copy ? copies.nbytes[i] : 0]
//@ launch fixed: the grid gives each pair blocks_per_copy consecutive blocks
//@ frozen blocks_per_copy: it maps the grid's blocks to the pairs
//@ in-place no
extern "C" __global__ void stage_copies(StagedCopies copies, unsigned int blocks_per_copy) {
    const unsigned int pair = blockIdx.x / blocks_per_copy;
    const unsigned long long first =
        (unsigned long long)(blockIdx.x % blocks_per_copy) * blockDim.x + threadIdx.x;
    const unsigned long long stride = (unsigned long long)blocks_per_copy * blockDim.x;
    const unsigned long long target = copies.target[pair];
    const unsigned long long source = copies.source[pair];
    const unsigned long long nbytes = copies.nbytes[pair];
    if (((target | source | nbytes) & 15ull) == 0) {
        sixteen_bytes* to = (sixteen_bytes*)target;
        const sixteen_bytes* from = (const sixteen_bytes*)source;
        for (unsigned long long i = first; i < nbytes / 16; i += stride) to[i] = from[i];
    } else {
        char* to = (char*)target;
        const char* from = (const char*)source;
        for (unsigned long long i = first; i < nbytes; i += stride) to[i] = from[i];
    }
}
