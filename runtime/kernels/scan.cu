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
            for (unsigned int shift = 1; shift < 32; shift <<= 1) {
                acc_t before = __shfl_up_sync(0xffffffffu, value, shift);
                if (lane >= shift) value = scan_combine(product, before, value);
            }
            value = scan_combine(product, carry, value);
            if (r < length) out_row[at * out_stride] = convert<result_t>(value);
            carry = __shfl_sync(0xffffffffu, value, 31);
        }
    }
}
