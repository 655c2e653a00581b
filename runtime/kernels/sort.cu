// Sorting along one dimension (torch.sort, argsort and topk; sort.pyx). The prelude defines
// scalar_t, the element type.
//
// Each row (the elements along the dimension at one position of the others) is sorted by a
// bitonic network whose comparators all put the element that comes first at the lower
// position: for each power of two `size`, the mirror step (i <-> the end of i's block of size,
// minus i's offset), then half-cleaners at distances size/4, ..., 1. Because every comparator
// orders ascending, a row whose length is not a power of two behaves as one padded with
// elements that come last: comparators that would reach past the end are skipped. The network
// runs in three kernels (device_ops.pyx launches them in order, each step after the last):
// - sort_chunks: a block per chunk of SORT_CHUNK elements (or the whole row, when shorter)
//   runs every stage up to the chunk's size in shared memory, from the input into the outputs;
// - for each larger stage, sort_merge_step once per step whose pairs span chunks, a thread per
//   pair of every row, in the outputs;
// - then sort_merge_chunks, a block per chunk, the stage's remaining steps in shared memory.
// So a row shorter than a chunk is one launch, and every launch keeps the whole device busy.
// Elements compare as (value, position), so equal values keep their order (a stable sort, as
// PyTorch's stable=True, whatever stable asks) and the result does not depend on the launch.
// NaN counts as larger than every number, as PyTorch's sort: last ascending, first descending.
typedef typename accumulate<scalar_t>::type acc_t;

__device__ inline bool comes_first(acc_t a, long long i, acc_t b, long long j, int descending) {
    bool a_nan = a != a, b_nan = b != b;
    if (a_nan != b_nan) return descending ? a_nan : b_nan;
    if (!a_nan && a != b) return descending ? a > b : a < b;
    return i < j;
}

__device__ inline void order_pair(scalar_t* values, long long* positions, long long i, long long j,
                                  long long step, int descending) {
    scalar_t a = values[i * step], b = values[j * step];
    long long a_at = positions[i * step], b_at = positions[j * step];
    if (comes_first(load(b), b_at, load(a), a_at, descending)) {
        values[i * step] = b;
        values[j * step] = a;
        positions[i * step] = b_at;
        positions[j * step] = a_at;
    }
}

// Comparator t of a step of distance half (a power of two) within blocks of size: the
// (t mod half)-th pair of the (t / half)-th block of 2 * half elements, in masks and shifts (a
// 64-bit division costs tens of instructions), its positions in i and j.
__device__ inline void pair_of(long long t, long long size, long long half, long long* i,
                               long long* j) {
    long long offset = t & (half - 1);
    *i = ((t - offset) << 1) + offset;
    *j = half == (size >> 1) ? *i - offset + 2 * half - 1 - offset : *i + half;
}

// The length of each row's chunks: the row's power of two, at most SORT_CHUNK.
__device__ inline long long chunk_of(long long length) {
    long long chunk = 1;
    while (chunk < length && chunk < SORT_CHUNK) chunk <<= 1;
    return chunk;
}

// The steps of distance half_from down to 1 of the stage of size (every stage from 2 to size
// when all_stages is set) over the chunk in shared memory whose first element is element base
// of a row of length.
__device__ inline void chunk_steps(scalar_t* values, long long* positions, long long chunk,
                                   long long base, long long length, long long size,
                                   bool all_stages, int descending) {
    for (long long stage = all_stages ? 2 : size; stage <= size; stage <<= 1) {
        for (long long half = (stage < chunk ? stage : chunk) >> 1; half > 0; half >>= 1) {
            for (long long t = threadIdx.x; t < (chunk >> 1); t += blockDim.x) {
                long long i, j;
                pair_of(t, stage, half, &i, &j);
                if (base + j < length) order_pair(values, positions, i, j, 1, descending);
            }
            __syncthreads();
        }
    }
}

// values and indices at out_kept(row) + r * out_stride, r < length: the input's row at kept(row)
// + r * stride with each chunk sorted, and each element's position in the row.
//@ read input[reach(kept, length, stride)]
//@ write values[reach(out_kept, length, out_stride)], indices[reach(out_kept, length, out_stride)]
//@ launch any
//@ in-place no
extern "C" __global__ void sort_chunks(const scalar_t* input, Layout kept, long long length,
                                       long long stride, scalar_t* values, long long* indices,
                                       Layout out_kept, long long out_stride, long long rows,
                                       int descending) {
    __shared__ scalar_t chunk_values[SORT_CHUNK];
    __shared__ long long chunk_positions[SORT_CHUNK];
    const long long chunk = chunk_of(length);
    const long long chunks = (length + chunk - 1) / chunk;
    for (long long block = blockIdx.x; block < rows * chunks; block += gridDim.x) {
        long long row = block / chunks, base = (block % chunks) * chunk;
        const scalar_t* in_row = input + strided_offset(row, kept);
        long long out_offset = strided_offset(row, out_kept);
        for (long long c = threadIdx.x; c < chunk && base + c < length; c += blockDim.x) {
            chunk_values[c] = in_row[(base + c) * stride];
            chunk_positions[c] = base + c;
        }
        __syncthreads();
        chunk_steps(chunk_values, chunk_positions, chunk, base, length, chunk, true, descending);
        for (long long c = threadIdx.x; c < chunk && base + c < length; c += blockDim.x) {
            values[out_offset + (base + c) * out_stride] = chunk_values[c];
            indices[out_offset + (base + c) * out_stride] = chunk_positions[c];
        }
        __syncthreads();  // the next block's loads wait for these stores' reads of shared memory
    }
}

// One step of distance half (at least SORT_CHUNK) of the stage of size, over every row: pairs
// is half the rows' padded length, a power of two (pairs_log2 its logarithm).
//@ update values[reach(out_kept, length, out_stride)], indices[reach(out_kept, length, out_stride)]
//@ launch any
//@ in-place no
extern "C" __global__ void sort_merge_step(scalar_t* values, long long* indices, Layout out_kept,
                                           long long out_stride, long long length,
                                           long long rows, long long pairs, int pairs_log2,
                                           long long size, long long half, int descending) {
    GRID_STRIDE_LOOP(n, rows * pairs) {
        long long row = n >> pairs_log2, i, j;
        pair_of(n & (pairs - 1), size, half, &i, &j);
        if (j < length) {
            long long out_offset = strided_offset(row, out_kept);
            order_pair(values + out_offset, indices + out_offset, i, j, out_stride, descending);
        }
    }
}

// The steps of distance SORT_CHUNK / 2 down to 1 of the stage of size (larger than a chunk),
// a block per chunk of each row, in shared memory.
//@ update values[reach(out_kept, length, out_stride)], indices[reach(out_kept, length, out_stride)]
//@ launch any
//@ in-place no
extern "C" __global__ void sort_merge_chunks(scalar_t* values, long long* indices,
                                             Layout out_kept, long long out_stride,
                                             long long length, long long rows, long long size,
                                             int descending) {
    __shared__ scalar_t chunk_values[SORT_CHUNK];
    __shared__ long long chunk_positions[SORT_CHUNK];
    const long long chunks = (length + SORT_CHUNK - 1) / SORT_CHUNK;
    for (long long block = blockIdx.x; block < rows * chunks; block += gridDim.x) {
        long long row = block / chunks, base = (block % chunks) * SORT_CHUNK;
        long long out_offset = strided_offset(row, out_kept);
        for (long long c = threadIdx.x; c < SORT_CHUNK && base + c < length; c += blockDim.x) {
            chunk_values[c] = values[out_offset + (base + c) * out_stride];
            chunk_positions[c] = indices[out_offset + (base + c) * out_stride];
        }
        __syncthreads();
        chunk_steps(chunk_values, chunk_positions, SORT_CHUNK, base, length, size, false,
                    descending);
        for (long long c = threadIdx.x; c < SORT_CHUNK && base + c < length; c += blockDim.x) {
            values[out_offset + (base + c) * out_stride] = chunk_values[c];
            indices[out_offset + (base + c) * out_stride] = chunk_positions[c];
        }
        __syncthreads();
    }
}
