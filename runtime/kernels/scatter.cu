// The scatter-adds: index_add, the backward of index.cu's index_select, and scatter_add, the
// backward of its gather and Tensor.scatter_add's. The prelude defines scalar_t, a floating-point
// type or int32/int64 only (the host converts the narrower integers and bool to int64 first),
// since atomic additions exist for those. index.cu says why an index outside [0, size) adds
// nothing rather than failing on the device.
typedef typename accumulate<scalar_t>::type acc_t;

// Atomic additions of an acc_t, as the types allow: CUDA's own for float, double, int and
// (as the unsigned 64-bit addition, which wraps as a signed one does) long long, a
// compare-and-swap of the 32-bit word holding a 16-bit float otherwise (header-free sources
// have no __half atomics).
__device__ inline void atomic_add(float* address, float value) { atomicAdd(address, value); }
__device__ inline void atomic_add(double* address, double value) { atomicAdd(address, value); }
__device__ inline void atomic_add(int* address, long long value) {
    atomicAdd(address, (int)value);
}
__device__ inline void atomic_add(long long* address, long long value) {
    atomicAdd((unsigned long long*)address, (unsigned long long)value);
}

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

// target[i][index[i][j][k]][k] += source[i][j][k] for axis 1 (Tensor.scatter_add_, and gather's
// gradient): the layouts as index.cu's scatter takes them. Repeated indices add up, in an order
// that is not fixed (as PyTorch's scatter_add_ on CUDA).
//@ read source[reach(source_layout)], index[reach(index_layout)]
//@ update target[reach(target_layout)]
//@ launch any
//@ in-place no
extern "C" __global__ void scatter_add(const scalar_t* source, Layout source_layout,
                                       const long long* index, Layout index_layout,
                                       scalar_t* target, Layout target_layout, long long count,
                                       int axis) {
    GRID_STRIDE_LOOP(n, count) {
        IndexedOffsets at = indexed_offsets(n, index_layout, source_layout, target_layout, axis);
        long long chosen = index[at.index];
        if (chosen >= 0 && chosen < target_layout.sizes[axis]) {
            atomic_add(&target[at.along + chosen * target_layout.strides[axis]],
                       load(source[at.with]));
        }
    }
}
