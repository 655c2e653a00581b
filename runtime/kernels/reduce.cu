// Whole-tensor reductions in two launches: partial results per block, then one block combines
// them; sums over some dimensions in one; softmax and its gradient along one dimension, and
// nll_loss and its gradient, in one each. The prelude defines scalar_t (input) and result_t
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

// exp and log in the accumulation type's own precision (expf for float, exp for double); the
// long long forms are never run (softmax refuses integer tensors on the host), there for the
// kernels below to compile for every scalar_t this source is built for.
__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline long long exp_of(long long x) { return x; }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }
__device__ inline long long log_of(long long x) { return x; }

// softmax (take_log 0) or log_softmax (take_log 1) along one dimension of a contiguous tensor
// seen as (outer, length, inner), length >= 1: one block per row (blocks stride over the
// outer * inner rows), whose elements lie inner apart. Each row is shifted by its own maximum
// before exp, as PyTorch's kernels: exp(x - max) / sum(exp(x - max)), and (x - max) -
// log(sum(exp(x - max))); the sums accumulate in acc_t (float for 16-bit floats), and a NaN in a
// row makes its maximum, and so the whole row, NaN, as PyTorch's.
//@ read input[outer * length * inner]
//@ write out[outer * length * inner]
//@ launch grid: block_reduce needs blocks of THREADS threads
//@ in-place no
extern "C" __global__ void softmax_dim(const scalar_t* input, scalar_t* out, long long outer,
                                       long long length, long long inner, int take_log) {
    for (long long row = blockIdx.x; row < outer * inner; row += gridDim.x) {
        long long start = row / inner * length * inner + row % inner;
        const scalar_t* values = input + start;
        acc_t largest = load(values[0]);
        for (long long k = threadIdx.x; k < length; k += blockDim.x) {
            largest = combine(OP_MAX, largest, load(values[k * inner]));
        }
        largest = block_reduce(OP_MAX, largest);
        __syncthreads();  // every thread has read the maximum before shared is reused
        acc_t total = 0;
        for (long long k = threadIdx.x; k < length; k += blockDim.x) {
            total += exp_of(load(values[k * inner]) - largest);
        }
        total = block_reduce(OP_SUM, total);
        __syncthreads();
        acc_t log_total = log_of(total);
        for (long long k = threadIdx.x; k < length; k += blockDim.x) {
            acc_t shifted = load(values[k * inner]) - largest;
            out[start + k * inner] = convert<scalar_t>(take_log ? shifted - log_total
                                                                : exp_of(shifted) / total);
        }
    }
}

// The gradient of softmax_dim, from its output y and the gradient g of it, both contiguous of
// the same (outer, length, inner) shape, as PyTorch's softmax_backward_data: y * (g - sum(g * y))
// for softmax, g - exp(y) * sum(g) for log_softmax, the sums along the row in acc_t.
//@ read output[outer * length * inner], grad[outer * length * inner]
//@ write out[outer * length * inner]
//@ launch grid: block_reduce needs blocks of THREADS threads
//@ in-place no
extern "C" __global__ void softmax_backward_dim(const scalar_t* output, const scalar_t* grad,
                                                scalar_t* out, long long outer,
                                                long long length, long long inner,
                                                int take_log) {
    for (long long row = blockIdx.x; row < outer * inner; row += gridDim.x) {
        long long start = row / inner * length * inner + row % inner;
        acc_t total = 0;
        for (long long k = threadIdx.x; k < length; k += blockDim.x) {
            long long at = start + k * inner;
            total += take_log ? load(grad[at]) : load(grad[at]) * load(output[at]);
        }
        total = block_reduce(OP_SUM, total);
        __syncthreads();
        for (long long k = threadIdx.x; k < length; k += blockDim.x) {
            long long at = start + k * inner;
            acc_t y = load(output[at]), g = load(grad[at]);
            out[at] = convert<scalar_t>(take_log ? g - exp_of(y) * total : y * (g - total));
        }
    }
}

// nll_loss of log-probabilities logp, contiguous of shape (outer, classes, inner), at the int64
// targets, contiguous of shape (outer, inner): row r = (o, i) loses -logp[o][target[r]][i] times
// its class's weight (weight null: 1) and weighs that weight; a target equal to ignore_index
// loses and weighs nothing, and one outside [0, classes) reads a zero, as gather's (weighing 1
// without weights, 0 with). reduction 0 (none) writes each row's loss to out, any grid; 1 (sum)
// and 2 (mean, the sum over the total weight: NaN when it is 0, as PyTorch's) write out[0] and
// the total weight to total[0], which the gradient reads, from one block of THREADS threads.
//@ read logp[outer * classes * inner], target[outer * inner], weight[classes]
//@ write out[reduction == 0 ? outer * inner : 1], total[reduction == 0 ? 0 : 1]
//@ launch fixed: with a reduction one block sums every row (block_reduce needs THREADS threads)
//@ in-place no
extern "C" __global__ void nll_loss_rows(const scalar_t* logp, const long long* target,
                                         const scalar_t* weight, scalar_t* out, acc_t* total,
                                         long long outer, long long classes, long long inner,
                                         long long ignore_index, int reduction) {
    acc_t sum = 0, weights = 0;
    GRID_STRIDE_LOOP(r, outer * inner) {
        long long chosen = target[r];
        acc_t loss = 0, w = 0;
        if (chosen != ignore_index) {
            bool inside = chosen >= 0 && chosen < classes;
            w = weight == nullptr ? (acc_t)1 : inside ? load(weight[chosen]) : (acc_t)0;
            if (inside) loss = -load(logp[(r / inner * classes + chosen) * inner + r % inner]) * w;
        }
        if (reduction == 0) out[r] = convert<scalar_t>(loss);
        sum += loss;
        weights += w;
    }
    if (reduction == 0) return;
    sum = block_reduce(OP_SUM, sum);
    __syncthreads();
    weights = block_reduce(OP_SUM, weights);
    if (threadIdx.x == 0) {
        total[0] = weights;
        out[0] = convert<scalar_t>(reduction == 2 ? sum / weights : sum);
    }
}

// The gradient of nll_loss_rows for logp, contiguous of shape (outer, classes, inner): at each
// row's target class -weight * g, zero elsewhere (an ignored or outside target takes nothing),
// g the row's gradient (reduction 0), the loss's (1), or the loss's over total[0] (2). total is
// declared for both reductions, which both allocate it, though a sum does not read it.
//@ read target[outer * inner], weight[classes], total[reduction == 0 ? 0 : 1]
//@ read grad[reduction == 0 ? outer * inner : 1]
//@ write out[outer * classes * inner]
//@ launch any
//@ in-place no
extern "C" __global__ void nll_loss_backward_rows(const long long* target, const scalar_t* weight,
                                                  const scalar_t* grad, const acc_t* total,
                                                  scalar_t* out, long long outer,
                                                  long long classes, long long inner,
                                                  long long ignore_index, int reduction) {
    GRID_STRIDE_LOOP(n, outer * classes * inner) {
        long long r = n / (classes * inner) * inner + n % inner;
        long long chosen = target[r];
        acc_t value = 0;
        if (chosen == n / inner % classes && chosen != ignore_index) {
            acc_t g = load(grad[reduction == 0 ? r : 0]);
            if (reduction == 2) g = g / total[0];
            value = -(weight == nullptr ? (acc_t)1 : load(weight[chosen])) * g;
        }
        out[n] = convert<scalar_t>(value);
    }
}
