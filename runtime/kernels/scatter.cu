// index_add, a scatter-add: the backward of index.cu's index_select. The prelude defines
// scalar_t, a floating-point type only (the host asks for no other: gradients are floating
// point), since atomic additions exist for those. The kernel sees the target, contiguous, as
// (outer, size, inner) and the source as (outer, index_count, inner); an index outside
// [0, size) adds nothing (index.cu says why nothing is raised on the device).
typedef typename accumulate<scalar_t>::type acc_t;

// Atomic additions of an acc_t, as the types allow: CUDA's own for float and double, a
// compare-and-swap of the 32-bit word holding a 16-bit float otherwise (header-free sources
// have no __half atomics). The host launches index_add for floating-point dtypes only.
__device__ inline void atomic_add(float* address, float value) { atomicAdd(address, value); }
__device__ inline void atomic_add(double* address, double value) { atomicAdd(address, value); }

template <typename T> __device__ inline void atomic_add_16(T* address, float value) {
    unsigned int* word = (unsigned int*)((size_t)address & ~(size_t)3);
    unsigned int shift = ((size_t)address & 2) ? 16 : 0;
    unsigned int old = *word, assumed;
    do {
        assumed = old;
        T current;
        current.bits = (unsigned short)((assumed >> shift) & 0xffffu);
        T sum = convert<T>(load(current) + value);
        unsigned int replaced = (assumed & ~(0xffffu << shift)) | ((unsigned int)sum.bits << shift);
        old = atomicCAS(word, assumed, replaced);
    } while (assumed != old);
}
__device__ inline void atomic_add(half_bits* address, float value) {
    atomic_add_16(address, value);
}
__device__ inline void atomic_add(bfloat16_bits* address, float value) {
    atomic_add_16(address, value);
}

// target[o][index[i]][k] += source[o][i][k]. Repeated indices add up; the order of the
// additions, and so the rounding of the sum, is not fixed (as PyTorch's index_add_ on CUDA).
//@ read source[outer * index_count * inner], index[index_count]
//@ update target[outer * size * inner]
//@ launch any
//@ in-place no
extern "C" __global__ void index_add(const scalar_t* source, const long long* index,
                                     scalar_t* target, long long outer, long long size,
                                     long long inner, long long index_count) {
    GRID_STRIDE_LOOP(n, outer * index_count * inner) {
        long long k = n % inner;
        long long row = n / inner;
        long long at = index[row % index_count];
        if (at >= 0 && at < size) {
            atomic_add(&target[((row / index_count) * size + at) * inner + k], load(source[n]));
        }
    }
}
