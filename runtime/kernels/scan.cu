// Cumulative sums and products along one dimension (torch.cumsum and torch.cumprod; scan.pyx).
// The prelude defines scalar_t (the input) and result_t (the output: the input's type, or int64
// for integers and bool). Both are read and written through strides, so nothing is copied first.
//
// One warp scans one row (the elements along the dimension at one position of the others): its
// 32 lanes take 32 elements at a time, scan them with shuffles (Hillis-Steele, 5 steps) and
// carry the last lane's total into the next 32. Values accumulate in acc_t (common.cu: float
// for the 16-bit floats, long long for the integers), as PyTorch's kernels accumulate in
// acc_type, so the order of additions differs from a sequential loop only within each 32.
typedef typename accumulate<scalar_t>::type acc_t;

__device__ inline acc_t scan_combine(int product, acc_t a, acc_t b) {
    return product ? a * b : a + b;
}

// The inclusive scan of value over a warp's 32 lanes (Hillis-Steele, 5 shuffles).
__device__ inline acc_t warp_scan(int product, acc_t value, unsigned int lane) {
    for (unsigned int shift = 1; shift < 32; shift <<= 1) {
        acc_t before = __shfl_up_sync(0xffffffffu, value, shift);
        if (lane >= shift) value = scan_combine(product, before, value);
    }
    return value;
}

// out at out_kept(row) + r * out_stride is the sum (product) of the input's elements at
// kept(row) + i * stride for i <= r, or for i >= r with reverse set (the gradient's reversed
// sum), for each of the rows (kept's sizes) and r < length. In place (out the input, the same
// strides) each lane reads its element before the warp writes any of its 32, and rows are
// disjoint.
//@ read input[reach(kept, length, stride)]
//@ write out[reach(out_kept, length, out_stride)]
//@ launch grid: each warp of 32 lanes scans whole rows, so blocks must stay whole warps
//@ in-place yes
extern "C" __global__ void scan_dim(const scalar_t* input, Layout kept, long long length,
                                    long long stride, result_t* out, Layout out_kept,
                                    long long out_stride, long long rows, int product,
                                    int reverse) {
    const unsigned int lane = threadIdx.x & 31u;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const acc_t identity = product ? (acc_t)1 : (acc_t)0;
    for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; row < rows;
         row += warps) {
        const scalar_t* in_row = input + strided_offset(row, kept);
        result_t* out_row = out + strided_offset(row, out_kept);
        acc_t carry = identity;
        for (long long start = 0; start < length; start += 32) {
            long long r = start + lane;
            long long at = reverse ? length - 1 - r : r;
            acc_t value = r < length ? load(in_row[at * stride]) : identity;
            value = scan_combine(product, carry, warp_scan(product, value, lane));
            if (r < length) out_row[at * out_stride] = convert<result_t>(value);
            carry = __shfl_sync(0xffffffffu, value, 31);
        }
    }
}

// scan_dim for few long rows: one block per row, its warps scanning blockDim.x elements at a
// time (each warp its 32, then the warps' totals scanned by the first warp through shared
// memory) and carrying the chunk's total on, so a row is not left to one warp. Same results
// and parameters as scan_dim; the host picks between them by the rows' count and length.
//@ read input[reach(kept, length, stride)]
//@ write out[reach(out_kept, length, out_stride)]
//@ launch grid: each block scans whole rows in chunks of its threads, whole warps of 32 and at most 32 of them
//@ in-place yes
extern "C" __global__ void scan_dim_blocks(const scalar_t* input, Layout kept, long long length,
                                           long long stride, result_t* out, Layout out_kept,
                                           long long out_stride, long long rows, int product,
                                           int reverse) {
    __shared__ acc_t totals[32];
    __shared__ acc_t chunk_carry;
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned int warps = blockDim.x >> 5;
    const acc_t identity = product ? (acc_t)1 : (acc_t)0;
    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const scalar_t* in_row = input + strided_offset(row, kept);
        result_t* out_row = out + strided_offset(row, out_kept);
        acc_t carry = identity;
        for (long long start = 0; start < length; start += blockDim.x) {
            long long r = start + threadIdx.x;
            long long at = reverse ? length - 1 - r : r;
            acc_t value = warp_scan(product, r < length ? load(in_row[at * stride]) : identity,
                                    lane);
            if (lane == 31) totals[warp] = value;
            __syncthreads();
            if (warp == 0) {
                acc_t total = lane < warps ? totals[lane] : identity;
                totals[lane] = warp_scan(product, total, lane);  // inclusive, over the warps
            }
            __syncthreads();
            if (warp > 0) value = scan_combine(product, totals[warp - 1], value);
            value = scan_combine(product, carry, value);
            if (r < length) out_row[at * out_stride] = convert<result_t>(value);
            if (threadIdx.x == blockDim.x - 1) chunk_carry = value;
            __syncthreads();
            carry = chunk_carry;
            __syncthreads();  // every thread has read it before the next chunk's totals
        }
    }
}
