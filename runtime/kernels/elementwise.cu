// Elementwise kernels over contiguous memory. The prelude defines scalar_t, the element type.
typedef typename accumulate<scalar_t>::type acc_t;

enum BinaryOp { ADD = 0, SUB = 1, MUL = 2, DIV = 3 };
enum CompareOp { EQ = 0, NE = 1, LT = 2, LE = 3, GT = 4, GE = 5 };
enum UnaryOp { NEG = 0, ABS = 1, RELU = 2, SIN = 3, COS = 4, EXP = 5, SQRT = 6 };

__device__ inline acc_t apply_binary(int op, acc_t a, acc_t b) {
    switch (op) {
        case ADD: return a + b;
        case SUB: return a - b;
        case MUL: return a * b;
        default: return a / b;
    }
}

__device__ inline bool apply_compare(int op, acc_t a, acc_t b) {
    switch (op) {
        case EQ: return a == b;
        case NE: return a != b;
        case LT: return a < b;
        case LE: return a <= b;
        case GT: return a > b;
        default: return a >= b;
    }
}

extern "C" __global__ void fill(scalar_t* out, long long count, scalar_t value) {
    GRID_STRIDE_LOOP(i, count) { out[i] = value; }
}

extern "C" __global__ void binary(const scalar_t* a, const scalar_t* b, scalar_t* out,
                                  long long count, int op) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = convert<scalar_t>(apply_binary(op, load(a[i]), load(b[i])));
    }
}

// Four elements per memory access: wide loads and stores keep the memory system busier than
// one element per thread can, which is what a bandwidth-bound add needs. The host uses it when
// count is a multiple of four and every pointer is aligned to four elements.
struct alignas(sizeof(scalar_t) * 4) vector4_t { scalar_t lane[4]; };

extern "C" __global__ void binary_vector4(const vector4_t* a, const vector4_t* b, vector4_t* out,
                                          long long vector_count, int op) {
    GRID_STRIDE_LOOP(i, vector_count) {
        vector4_t x = a[i], y = b[i], result;
#pragma unroll
        for (int lane = 0; lane < 4; ++lane) {
            result.lane[lane] =
                convert<scalar_t>(apply_binary(op, load(x.lane[lane]), load(y.lane[lane])));
        }
        out[i] = result;
    }
}

// The scalar operand is already in acc_t; reverse computes scalar (op) a.
extern "C" __global__ void binary_scalar(const scalar_t* a, acc_t scalar, scalar_t* out,
                                         long long count, int op, int reverse) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t value = load(a[i]);
        out[i] = convert<scalar_t>(reverse ? apply_binary(op, scalar, value)
                                           : apply_binary(op, value, scalar));
    }
}

extern "C" __global__ void compare(const scalar_t* a, const scalar_t* b, bool* out,
                                   long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = apply_compare(op, load(a[i]), load(b[i])); }
}

extern "C" __global__ void compare_scalar(const scalar_t* a, acc_t scalar, bool* out,
                                          long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = apply_compare(op, load(a[i]), scalar); }
}

// Transcendentals in the accumulation type's own precision (sinf for float, sin for double);
// integer tensors only reach NEG, ABS and RELU (the host checks), so they go through double.
__device__ inline float transcendental(int op, float x) {
    return op == SIN ? sinf(x) : op == COS ? cosf(x) : op == EXP ? expf(x) : sqrtf(x);
}
__device__ inline double transcendental(int op, double x) {
    return op == SIN ? sin(x) : op == COS ? cos(x) : op == EXP ? exp(x) : sqrt(x);
}
__device__ inline long long transcendental(int op, long long x) {
    return (long long)transcendental(op, (double)x);
}

__device__ inline acc_t apply_unary(int op, acc_t x) {
    switch (op) {
        case NEG: return -x;
        case ABS: return x < (acc_t)0 ? -x : x;
        case RELU: return x > (acc_t)0 ? x : (acc_t)0;
        default: return transcendental(op, x);
    }
}

extern "C" __global__ void unary(const scalar_t* a, scalar_t* out, long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = convert<scalar_t>(apply_unary(op, load(a[i]))); }
}
