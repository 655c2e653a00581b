// Sorting along one dimension (torch.sort, argsort and topk; sort.pyx). The prelude defines
// scalar_t, the element type.
//
// One block sorts one row (the elements along the dimension at one position of the others)
// with a bitonic network whose comparators all put the element that comes first at the lower
// position: for each power of two `size`, the mirror step (i <-> the end of i's block of size,
// minus i's offset), then half-cleaners at distances size/4, ..., 1, with __syncthreads
// between steps. Because every comparator orders ascending, a row whose length is not a power
// of two behaves as one padded with elements that come last: comparators that would reach past
// the end are skipped. The steps whose pairs lie within aligned chunks of SORT_CHUNK elements
// run in shared memory, a chunk at a time (every stage up to the chunk's size, then the last
// steps of each larger stage); only the steps of larger distances run in the output itself,
// which holds the row between them.
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

#define SORT_CHUNK 2048  // elements sorted in shared memory at a time: a pair per thread of 1024

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

// The comparators of one step (distance half within blocks of size) among count elements from
// base, of a row of length: pair t's positions relative to base, those reaching past the end
// skipped.
__device__ inline void network_step(scalar_t* values, long long* positions, long long step,
                                    long long size, long long half, long long base,
                                    long long count, long long length, int descending) {
    for (long long t = threadIdx.x; t < (count >> 1); t += blockDim.x) {
        long long i, j;
        if (half == (size >> 1)) {  // the mirror step
            long long start = (t / half) * size, offset = t % half;
            i = start + offset;
            j = start + size - 1 - offset;
        } else {
            i = (t / half) * (2 * half) + t % half;
            j = i + half;
        }
        if (base + j < length) order_pair(values, positions, i, j, step, descending);
    }
}

// values and indices at out_kept(row) + r * out_stride, r < length: the input's row at kept(row)
// + r * stride, sorted, and each element's position in it.
//@ read input[reach(kept, length, stride)]
//@ write values[reach(out_kept, length, out_stride)], indices[reach(out_kept, length, out_stride)]
//@ launch any
//@ in-place no
extern "C" __global__ void sort_dim(const scalar_t* input, Layout kept, long long length,
                                    long long stride, scalar_t* values, long long* indices,
                                    Layout out_kept, long long out_stride, long long rows,
                                    int descending) {
    __shared__ scalar_t chunk_values[SORT_CHUNK];
    __shared__ long long chunk_positions[SORT_CHUNK];
    long long padded = 1;
    while (padded < length) padded <<= 1;
    const long long chunk = padded < SORT_CHUNK ? padded : SORT_CHUNK;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const scalar_t* in_row = input + strided_offset(row, kept);
        long long out_offset = strided_offset(row, out_kept);
        scalar_t* v = values + out_offset;
        long long* at = indices + out_offset;
        // Every stage up to the chunk's size, a chunk at a time, from the input.
        for (long long base = 0; base < length; base += chunk) {
            for (long long c = threadIdx.x; c < chunk && base + c < length; c += blockDim.x) {
                chunk_values[c] = in_row[(base + c) * stride];
                chunk_positions[c] = base + c;
            }
            __syncthreads();
            for (long long size = 2; size <= chunk; size <<= 1) {
                for (long long half = size >> 1; half > 0; half >>= 1) {
                    network_step(chunk_values, chunk_positions, 1, size, half, base, chunk,
                                 length, descending);
                    __syncthreads();
                }
            }
            for (long long c = threadIdx.x; c < chunk && base + c < length; c += blockDim.x) {
                v[(base + c) * out_stride] = chunk_values[c];
                at[(base + c) * out_stride] = chunk_positions[c];
            }
            __syncthreads();
        }
        // Larger stages: the steps across chunks in the output, the rest chunk by chunk.
        for (long long size = 2 * chunk; size <= padded; size <<= 1) {
            for (long long half = size >> 1; 2 * half > chunk; half >>= 1) {
                network_step(v, at, out_stride, size, half, 0, padded, length, descending);
                __syncthreads();
            }
            for (long long base = 0; base < length; base += chunk) {
                for (long long c = threadIdx.x; c < chunk && base + c < length;
                     c += blockDim.x) {
                    chunk_values[c] = v[(base + c) * out_stride];
                    chunk_positions[c] = at[(base + c) * out_stride];
                }
                __syncthreads();
                for (long long half = chunk >> 1; half > 0; half >>= 1) {
                    network_step(chunk_values, chunk_positions, 1, size, half, base, chunk,
                                 length, descending);
                    __syncthreads();
                }
                for (long long c = threadIdx.x; c < chunk && base + c < length;
                     c += blockDim.x) {
                    v[(base + c) * out_stride] = chunk_values[c];
                    at[(base + c) * out_stride] = chunk_positions[c];
                }
                __syncthreads();
            }
        }
    }
}
