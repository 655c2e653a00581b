// Sorting along one dimension (torch.sort, argsort and topk; sort.pyx). The prelude defines
// scalar_t, the element type.
//
// One block sorts one row (the elements along the dimension at one position of the others),
// in the output itself: the row is copied into values with its positions 0..length-1 in
// indices, then a bitonic network whose comparators all put the element that comes first at
// the lower position (for each power of two `size`, the mirror step i <-> block end - offset,
// then half-cleaners at distances size/4, ..., 1), with __syncthreads between steps. Because
// every comparator orders ascending, a row whose length is not a power of two behaves as one
// padded with elements that come last: comparators that would reach past the end are skipped.
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
    long long padded = 1;
    while (padded < length) padded <<= 1;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const scalar_t* in_row = input + strided_offset(row, kept);
        long long out_offset = strided_offset(row, out_kept);
        scalar_t* v = values + out_offset;
        long long* at = indices + out_offset;
        for (long long r = threadIdx.x; r < length; r += blockDim.x) {
            v[r * out_stride] = in_row[r * stride];
            at[r * out_stride] = r;
        }
        __syncthreads();
        for (long long size = 2; size <= padded; size <<= 1) {
            for (long long half = size >> 1; half > 0; half >>= 1) {
                for (long long t = threadIdx.x; t < (padded >> 1); t += blockDim.x) {
                    long long i, j;
                    if (half == (size >> 1)) {  // the mirror step
                        long long start = (t / half) * size, offset = t % half;
                        i = start + offset;
                        j = start + size - 1 - offset;
                    } else {
                        i = (t / half) * (2 * half) + t % half;
                        j = i + half;
                    }
                    if (j >= length) continue;
                    scalar_t a = v[i * out_stride], b = v[j * out_stride];
                    long long a_at = at[i * out_stride], b_at = at[j * out_stride];
                    if (comes_first(load(b), b_at, load(a), a_at, descending)) {
                        v[i * out_stride] = b;
                        v[j * out_stride] = a;
                        at[i * out_stride] = b_at;
                        at[j * out_stride] = a_at;
                    }
                }
                __syncthreads();
            }
        }
    }
}
