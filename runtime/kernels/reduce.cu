// Whole-tensor reductions in two launches: partial results per block, then one block combines
// them; and sums over some dimensions in one. The prelude defines scalar_t (input) and result_t
// (output).
// The op codes (OP_SUM, OP_MAX, OP_MIN) are the prelude's #defines, from the op table
// (runtime/kernels/ops.pyx).
typedef typename accumulate<scalar_t>::type acc_t;

__device__ inline acc_t combine(int op, acc_t a, acc_t b) {
    if (op == OP_SUM) return a + b;
    if (op == OP_MAX) return (a > b || a != a) ? a : b;  // NaN propagates, as in PyTorch
    return (a < b || a != a) ? a : b;
}

__device__ inline acc_t block_reduce(int op, acc_t value) {
    __shared__ acc_t shared[THREADS];
    shared[threadIdx.x] = value;
    __syncthreads();
    for (int width = THREADS / 2; width > 0; width >>= 1) {
        if (threadIdx.x < width) {
            shared[threadIdx.x] = combine(op, shared[threadIdx.x], shared[threadIdx.x + width]);
        }
        __syncthreads();
    }
    return shared[0];
}

// identity: 0 for sums; for max/min the first element, which every thread may start from (so
// a max or min, op != OP_SUM, reads input[0] even when count is 0: its annotation says so).
//@ read input[op == OP_SUM ? count : max(count, 1)]
//@ write partials[gridDim.x]
//@ launch fixed: each block writes one partial result, and reduce_final combines them
//@ in-place no
extern "C" __global__ void reduce_partial(const scalar_t* input, long long count, acc_t* partials,
                                          int op) {
    acc_t value = op == OP_SUM ? (acc_t)0 : load(input[0]);
    GRID_STRIDE_LOOP(i, count) { value = combine(op, value, load(input[i])); }
    value = block_reduce(op, value);
    if (threadIdx.x == 0) partials[blockIdx.x] = value;
}

// As reduce_partial: a max or min reads partials[0] whatever count is.
//@ read partials[op == OP_SUM ? count : max(count, 1)]
//@ write out[1]
//@ launch fixed: one block of THREADS threads combines the partial results
//@ in-place no
extern "C" __global__ void reduce_final(const acc_t* partials, int count, result_t* out, int op,
                                        double divisor) {
    acc_t value = op == OP_SUM ? (acc_t)0 : partials[0];
    for (int i = threadIdx.x; i < count; i += blockDim.x) value = combine(op, value, partials[i]);
    value = block_reduce(op, value);
    if (threadIdx.x == 0) {
        out[0] = divisor == 1.0 ? convert<result_t>(value)
                                : convert<result_t>((acc_t)(value / divisor));
    }
}

// Sums over some dimensions, one block per output element (blocks stride over them): out[o] sums
// the input elements at kept(o) + reduced(r) for every r < reduced_count (Layouts of the kept and
// the reduced dimensions with the input's strides), divided by divisor (the count, for a mean).
//@ read input[reach(kept, reduced)]
//@ write out[out_count]
//@ launch grid: block_reduce needs blocks of THREADS threads
//@ in-place no
extern "C" __global__ void reduce_dims(const scalar_t* input, Layout kept, Layout reduced,
                                       long long reduced_count, result_t* out,
                                       long long out_count, double divisor) {
    for (long long o = blockIdx.x; o < out_count; o += gridDim.x) {
        const scalar_t* base = input + strided_offset(o, kept);
        acc_t value = 0;
        for (long long r = threadIdx.x; r < reduced_count; r += blockDim.x) {
            value += load(base[strided_offset(r, reduced)]);
        }
        value = block_reduce(OP_SUM, value);
        if (threadIdx.x == 0) {
            out[o] = divisor == 1.0 ? convert<result_t>(value)
                                    : convert<result_t>((acc_t)(value / divisor));
        }
        __syncthreads();  // every thread has read the block's result before shared is reused
    }
}

// max or min (op) over one dimension with the index where it is, as torch.max(dim) and
// torch.argmax: the first occurrence, and NaN counts as both the largest and the smallest (the
// first NaN wins), as PyTorch's kernels. One thread per output element o reads the input at
// kept(o) + r * stride for r < length (length >= 1: the host refuses an empty dimension);
// values is null for argmax / argmin.
//@ read input[reach(kept, length, stride)]
//@ write values[count], indices[count]
//@ launch any
//@ in-place no
extern "C" __global__ void select_dim(const scalar_t* input, Layout kept, long long length,
                                      long long stride, scalar_t* values, long long* indices,
                                      long long count, int op) {
    GRID_STRIDE_LOOP(o, count) {
        const scalar_t* row = input + strided_offset(o, kept);
        acc_t best = load(row[0]);
        long long where = 0;
        for (long long r = 1; r < length && best == best; ++r) {
            acc_t value = load(row[r * stride]);
            if (value != value || (op == OP_MAX ? value > best : value < best)) {
                best = value;
                where = r;
            }
        }
        if (values) values[o] = row[where * stride];
        indices[o] = where;
    }
}
