// Elementwise kernels. The prelude defines scalar_t, the element type. Most take contiguous
// memory; the *_strided kernels read each operand through a Layout of the output's sizes and the
// operand's own strides, so a broadcast dimension (stride 0) is read in place, never copied.
// The op codes (OP_ADD, OP_EQ, OP_NEG...) are the prelude's #defines, from the op table
// (runtime/kernels/ops.pyx).
typedef typename accumulate<scalar_t>::type acc_t;

// Division rounded toward zero and toward negative infinity: torch.div's rounding_mode "trunc"
// and "floor" (and a // b). An integer divided by zero gives 0 rather than undefined behaviour
// (the CPU raises ZeroDivisionError, as PyTorch's CPU kernels do).
__device__ inline float divide_trunc(float a, float b) { return truncf(a / b); }
__device__ inline double divide_trunc(double a, double b) { return trunc(a / b); }
__device__ inline long long divide_trunc(long long a, long long b) { return b == 0 ? 0 : a / b; }

__device__ inline long long divide_floor(long long a, long long b) {
    if (b == 0) return 0;
    long long quotient = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient;
}

// Floating floor division as Python's float // defines it (Objects/floatobject.c, float_divmod),
// which PyTorch and numpy follow: derived from fmod so that it agrees with the remainder.
#define DIVIDE_FLOOR_FLOATING(F, FMOD, FLOOR, COPYSIGN)                                        \
    __device__ inline F divide_floor(F a, F b) {                                               \
        if (b == (F)0) return a / b;                                                           \
        F remainder = FMOD(a, b);                                                              \
        F quotient = (a - remainder) / b;                                                      \
        if (remainder != (F)0 && (b < (F)0) != (remainder < (F)0)) quotient -= (F)1;           \
        if (quotient == (F)0) return COPYSIGN((F)0, a / b);                                    \
        F floored = FLOOR(quotient);                                                           \
        return quotient - floored > (F)0.5 ? floored + (F)1 : floored;                         \
    }
DIVIDE_FLOOR_FLOATING(float, fmodf, floorf, copysignf)
DIVIDE_FLOOR_FLOATING(double, fmod, floor, copysign)

// a % b as Python and torch.remainder compute it: the remainder of the floored quotient, with
// the divisor's sign (PyTorch's kernels: fmod, then + b where the signs differ). An integer
// divisor of zero gives 0, as the divisions above (the CPU raises ZeroDivisionError).
__device__ inline float floor_modulo(float a, float b) {
    float r = fmodf(a, b);
    return r != 0.0f && ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
__device__ inline double floor_modulo(double a, double b) {
    double r = fmod(a, b);
    return r != 0.0 && ((r < 0.0) != (b < 0.0)) ? r + b : r;
}
__device__ inline long long floor_modulo(long long a, long long b) {
    if (b == 0) return 0;
    long long r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

// Powers: floats through the math library; integers by repeated squaring, where a negative
// exponent gives 1 for a base of 1, +-1 for -1 and 0 otherwise, as PyTorch's kernels (and
// integer_power in tensor/cpu.pyx, where numpy would refuse it).
__device__ inline float power(float a, float b) { return powf(a, b); }
__device__ inline double power(double a, double b) { return pow(a, b); }
__device__ inline long long power(long long a, long long b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 == 0 ? 1 : -1) : 0;
    long long result = 1;
    while (b) {
        if (b & 1) result *= a;
        b >>= 1;
        a *= a;
    }
    return result;
}

// Bitwise operations and shifts of integers, in the long long every integer dtype computes in
// (its value sign- or zero-extended). The result is converted to the dtype, which keeps its low
// bits, so 64-bit shift rules give PyTorch's for every width: PyTorch shifts left by a negative
// amount or one of the dtype's width or more to 0, and right by such an amount to the sign
// (0 for uint8). Floating operands never reach them (the host refuses them, as PyTorch); their
// overloads are there for apply_binary and apply_unary to compile for every scalar_t.
__device__ inline long long bitwise(int op, long long a, long long b) {
    switch (op) {
        case OP_BITWISE_AND: return a & b;
        case OP_BITWISE_OR: return a | b;
        case OP_BITWISE_XOR: return a ^ b;
        case OP_LSHIFT: return (b < 0 || b >= 64) ? 0 : (long long)((unsigned long long)a << b);
        default: return (b < 0 || b >= 64) ? a >> 63 : a >> b;
    }
}
__device__ inline float bitwise(int, float a, float) { return a; }
__device__ inline double bitwise(int, double a, double) { return a; }
__device__ inline long long bitwise_not(long long x) { return ~x; }
__device__ inline float bitwise_not(float x) { return x; }
__device__ inline double bitwise_not(double x) { return x; }

__device__ inline acc_t apply_binary(int op, acc_t a, acc_t b) {
    switch (op) {
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        case OP_DIV_TRUNC: return divide_trunc(a, b);
        case OP_DIV_FLOOR: return divide_floor(a, b);
        case OP_REMAINDER: return floor_modulo(a, b);
        case OP_POW: return power(a, b);
        // PyTorch's threshold_backward: zero where the output is <= 0, so a NaN output
        // passes the gradient through.
        case OP_RELU_BACKWARD: return b <= (acc_t)0 ? (acc_t)0 : a;
        case OP_BITWISE_AND:
        case OP_BITWISE_OR:
        case OP_BITWISE_XOR:
        case OP_LSHIFT:
        case OP_RSHIFT: return bitwise(op, a, b);
        default: return a / b;
    }
}

__device__ inline bool apply_compare(int op, acc_t a, acc_t b) {
    switch (op) {
        case OP_EQ: return a == b;
        case OP_NE: return a != b;
        case OP_LT: return a < b;
        case OP_LE: return a <= b;
        case OP_GT: return a > b;
        default: return a >= b;
    }
}

// An instance for mixed dtypes (PROMOTED_OP defined) holds only the promoted kernels at the end
// of this file, so that compiling one per (op, dtypes) on first use stays quick.
#ifndef PROMOTED_OP

//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void fill(scalar_t* out, long long count, scalar_t value) {
    GRID_STRIDE_LOOP(i, count) { out[i] = value; }
}

// arange()'s values as numpy's arange fills them (factories.pyx, Note [Arange on the device]):
// start + i * step in long long for integer arguments; for others, in double, element 1 given
// (numpy stores start + step there) and element i start + i * (second - start), each operation
// rounded once, as numpy's loop computes it. A double becomes a float16 in one rounding, as
// numpy converts the CPU's values (common.cu's convert goes through float).
template <typename T> __device__ inline T arange_value(double value) { return convert<T>(value); }
template <> __device__ inline half_bits arange_value<half_bits>(double value) {
    half_bits result;
    asm("cvt.rn.f16.f64 %0, %1;" : "=h"(result.bits) : "d"(value));
    return result;
}

//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void arange_integral(scalar_t* out, long long count, long long start,
                                           long long step) {
    GRID_STRIDE_LOOP(i, count) { out[i] = convert<scalar_t>(start + i * step); }
}

//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void arange_floating(scalar_t* out, long long count, double start,
                                           double second) {
    double delta = second - start;
    GRID_STRIDE_LOOP(i, count) {
        double value = i == 0 ? start
                     : i == 1 ? second : __dadd_rn(start, __dmul_rn((double)i, delta));
        out[i] = arange_value<scalar_t>(value);
    }
}

//@ read a[count], b[count]
//@ write out[count]
//@ launch any
//@ in-place yes
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

//@ read a[vector_count], b[vector_count]
//@ write out[vector_count]
//@ launch any
//@ in-place yes
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

// A contiguous operand against a contiguous row repeated along the leading dimensions (a bias
// added to a batch: y + b with b of y's last sizes), four elements per access: row_vectors is
// the row's length over four, and reverse computes row (op) a. The general strided kernel pays
// an index computation per dimension and element for this most common broadcast.
//@ read a[vector_count], row[row_vectors]
//@ write out[vector_count]
//@ launch any
//@ in-place yes
extern "C" __global__ void binary_rows_vector4(const vector4_t* a, const vector4_t* row,
                                               vector4_t* out, long long vector_count,
                                               long long row_vectors, int op, int reverse) {
    GRID_STRIDE_LOOP(i, vector_count) {
        vector4_t x = a[i], y = row[i % row_vectors], result;
#pragma unroll
        for (int lane = 0; lane < 4; ++lane) {
            acc_t left = load(x.lane[lane]), right = load(y.lane[lane]);
            result.lane[lane] = convert<scalar_t>(reverse ? apply_binary(op, right, left)
                                                          : apply_binary(op, left, right));
        }
        out[i] = result;
    }
}

// Operands of other shapes broadcast to the output's, or of any strides: out is contiguous.
//@ read a[reach(a_layout)], b[reach(b_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void binary_strided(const scalar_t* a, Layout a_layout, const scalar_t* b,
                                          Layout b_layout, scalar_t* out, long long count,
                                          int op) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = convert<scalar_t>(apply_binary(op, load(a[strided_offset(i, a_layout)]),
                                                load(b[strided_offset(i, b_layout)])));
    }
}

// The scalar operand is already in acc_t; reverse computes scalar (op) a.
//@ read a[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void binary_scalar(const scalar_t* a, acc_t scalar, scalar_t* out,
                                         long long count, int op, int reverse) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t value = load(a[i]);
        out[i] = convert<scalar_t>(reverse ? apply_binary(op, scalar, value)
                                           : apply_binary(op, value, scalar));
    }
}

//@ read a[count], b[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void compare(const scalar_t* a, const scalar_t* b, bool* out,
                                   long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = apply_compare(op, load(a[i]), load(b[i])); }
}

//@ read a[reach(a_layout)], b[reach(b_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void compare_strided(const scalar_t* a, Layout a_layout,
                                           const scalar_t* b, Layout b_layout, bool* out,
                                           long long count, int op) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = apply_compare(op, load(a[strided_offset(i, a_layout)]),
                               load(b[strided_offset(i, b_layout)]));
    }
}

//@ read a[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void compare_scalar(const scalar_t* a, acc_t scalar, bool* out,
                                          long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = apply_compare(op, load(a[i]), scalar); }
}

// The floating functions, in the accumulation type's own precision (sinf for float, sin for
// double). Integer tensors only reach OP_NEG, OP_BITWISE_NOT, OP_ABS, OP_SIGN and OP_RELU (the
// host converts them to float32 for the others, or copies them for rounding), so the long long
// form is never run; it is there for apply_unary to compile for every scalar_t. sigmoid is
// PyTorch's 1 / (1 + exp(-x)); round is rint, the nearest integer with ties to even, as
// PyTorch's nearbyint. log1p, expm1 and rsqrt are CUDA's own, exact near 0 where log(1 + x)
// and exp(x) - 1 lose every digit, as PyTorch's kernels call them.
#define FLOATING_FUNCTION(F, SIN, COS, EXP, LOG, SQRT, TANH, ERF, LOG1P, EXPM1, RSQRT, TAN,    \
                          ATAN, ASIN, ACOS, SINH, COSH, LOG2, LOG10, EXP2, FLOOR, CEIL, RINT,  \
                          TRUNC)                                                               \
    __device__ inline F floating_function(int op, F x) {                                       \
        switch (op) {                                                                          \
            case OP_SIN: return SIN(x);                                                        \
            case OP_COS: return COS(x);                                                        \
            case OP_EXP: return EXP(x);                                                        \
            case OP_LOG: return LOG(x);                                                        \
            case OP_SIGMOID: return (F)1 / ((F)1 + EXP(-x));                                   \
            case OP_TANH: return TANH(x);                                                      \
            case OP_ERF: return ERF(x);                                                        \
            case OP_LOG1P: return LOG1P(x);                                                    \
            case OP_EXPM1: return EXPM1(x);                                                    \
            case OP_RSQRT: return RSQRT(x);                                                    \
            case OP_TAN: return TAN(x);                                                        \
            case OP_ATAN: return ATAN(x);                                                      \
            case OP_ASIN: return ASIN(x);                                                      \
            case OP_ACOS: return ACOS(x);                                                      \
            case OP_SINH: return SINH(x);                                                      \
            case OP_COSH: return COSH(x);                                                      \
            case OP_LOG2: return LOG2(x);                                                      \
            case OP_LOG10: return LOG10(x);                                                    \
            case OP_EXP2: return EXP2(x);                                                      \
            case OP_FLOOR: return FLOOR(x);                                                    \
            case OP_CEIL: return CEIL(x);                                                      \
            case OP_ROUND: return RINT(x);                                                     \
            case OP_TRUNC: return TRUNC(x);                                                    \
            default: return SQRT(x);                                                           \
        }                                                                                      \
    }
FLOATING_FUNCTION(float, sinf, cosf, expf, logf, sqrtf, tanhf, erff, log1pf, expm1f, rsqrtf, tanf,
                  atanf, asinf, acosf, sinhf, coshf, log2f, log10f, exp2f, floorf, ceilf, rintf,
                  truncf)
FLOATING_FUNCTION(double, sin, cos, exp, log, sqrt, tanh, erf, log1p, expm1, rsqrt, tan, atan,
                  asin, acos, sinh, cosh, log2, log10, exp2, floor, ceil, rint, trunc)
__device__ inline long long floating_function(int op, long long x) {
    return (long long)floating_function(op, (double)x);
}

__device__ inline acc_t apply_unary(int op, acc_t x) {
    switch (op) {
        case OP_NEG: return -x;
        case OP_BITWISE_NOT: return bitwise_not(x);
        case OP_ABS: return x < (acc_t)0 ? -x : x;
        case OP_SIGN: return (acc_t)((x > (acc_t)0) - (x < (acc_t)0));
        case OP_RELU: return x <= (acc_t)0 ? (acc_t)0 : x;  // NaN stays NaN, as PyTorch's
        default: return floating_function(op, x);
    }
}

//@ read a[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void unary(const scalar_t* a, scalar_t* out, long long count, int op) {
    GRID_STRIDE_LOOP(i, count) { out[i] = convert<scalar_t>(apply_unary(op, load(a[i]))); }
}

// a + alpha * b in the accumulation type, as torch.add(a, b, alpha=alpha); sub passes -alpha.
//@ read a[count], b[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void add_scaled(const scalar_t* a, const scalar_t* b, acc_t alpha,
                                      scalar_t* out, long long count) {
    GRID_STRIDE_LOOP(i, count) { out[i] = convert<scalar_t>(load(a[i]) + alpha * load(b[i])); }
}

// One SGD step of a parameter in one pass (optim.pyx, SGD.step), rounding to scalar_t where the
// unfused steps would (add_scaled, then binary_scalar's multiply): g = grad + weight_decay *
// param; with a momentum buffer, buffer = buffer * momentum, then buffer + g, and g = buffer;
// param = param - lr * g. A null buffer is no momentum.
//@ read grad[count]
//@ update param[count], buffer[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void sgd_step(scalar_t* param, const scalar_t* grad, scalar_t* buffer,
                                    acc_t lr, acc_t momentum, acc_t weight_decay,
                                    long long count) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t g = load(grad[i]);
        if (weight_decay != 0) g = load(convert<scalar_t>(g + weight_decay * load(param[i])));
        if (buffer != nullptr) {
            // mul_rn: binary_scalar's product is rounded before the sum, never fused into it.
            scalar_t kept = convert<scalar_t>(mul_rn(load(buffer[i]), momentum));
            buffer[i] = convert<scalar_t>(load(kept) + g);
            g = load(buffer[i]);
        }
        param[i] = convert<scalar_t>(load(param[i]) + (-lr) * g);
    }
}

// min(max(x, low), high) as torch.clamp: a NaN in x or in either bound gives NaN, and low > high
// gives high. bounds says which bounds apply; a null bound tensor selects the scalar instead.
enum ClampBounds { CLAMP_LOW = 1, CLAMP_HIGH = 2 };

__device__ inline acc_t at_least(acc_t x, acc_t low) { return (x != x || x > low) ? x : low; }
__device__ inline acc_t at_most(acc_t x, acc_t high) { return (x != x || x < high) ? x : high; }

//@ read a[count], low_tensor[count], high_tensor[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void clamp(const scalar_t* a, const scalar_t* low_tensor,
                                 const scalar_t* high_tensor, acc_t low, acc_t high, int bounds,
                                 scalar_t* out, long long count) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t x = load(a[i]);
        if (bounds & CLAMP_LOW) x = at_least(x, low_tensor ? load(low_tensor[i]) : low);
        if (bounds & CLAMP_HIGH) x = at_most(x, high_tensor ? load(high_tensor[i]) : high);
        out[i] = convert<scalar_t>(x);
    }
}

// clamp over operands broadcast to the output's shape (or of any strides); out is contiguous.
//@ read a[reach(a_layout)], low_tensor[reach(low_layout)]
//@ read high_tensor[reach(high_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void clamp_strided(const scalar_t* a, Layout a_layout,
                                         const scalar_t* low_tensor, Layout low_layout,
                                         const scalar_t* high_tensor, Layout high_layout,
                                         acc_t low, acc_t high, int bounds, scalar_t* out,
                                         long long count) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t x = load(a[strided_offset(i, a_layout)]);
        if (bounds & CLAMP_LOW) {
            x = at_least(x, low_tensor ? load(low_tensor[strided_offset(i, low_layout)]) : low);
        }
        if (bounds & CLAMP_HIGH) {
            x = at_most(x, high_tensor ? load(high_tensor[strided_offset(i, high_layout)]) : high);
        }
        out[i] = convert<scalar_t>(x);
    }
}

// torch.where: elements of a where condition holds, else of b; a null operand tensor selects
// its scalar instead. Elements are copied, never converted.
//@ read condition[count], a[count], b[count]
//@ write out[count]
//@ launch any
//@ in-place yes
extern "C" __global__ void where(const bool* condition, const scalar_t* a, const scalar_t* b,
                                 scalar_t a_scalar, scalar_t b_scalar, scalar_t* out,
                                 long long count) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = condition[i] ? (a ? a[i] : a_scalar) : (b ? b[i] : b_scalar);
    }
}

// where() over operands broadcast to the output's shape (or of any strides); out is contiguous.
//@ read condition[reach(condition_layout)], a[reach(a_layout)]
//@ read b[reach(b_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void where_strided(const bool* condition, Layout condition_layout,
                                         const scalar_t* a, Layout a_layout, const scalar_t* b,
                                         Layout b_layout, scalar_t a_scalar, scalar_t b_scalar,
                                         scalar_t* out, long long count) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = condition[strided_offset(i, condition_layout)]
                     ? (a ? a[strided_offset(i, a_layout)] : a_scalar)
                     : (b ? b[strided_offset(i, b_layout)] : b_scalar);
    }
}
#endif  // PROMOTED_OP

#ifdef PROMOTED_OP
// Operands of mixed dtypes (runtime/tensor/promotion.pyx, Note [Type promotion]), read in
// place: left_t and right_t are their element types, scalar_t the dtype they promote to, which
// each element is converted to before the op computes in acc_t, as PyTorch converts its
// operands to the common dtype; target_t is the result's (scalar_t, or the dtype of a tensor
// written in place; bool for a comparison). PROMOTED_OP, the op, is fixed per instance.
template <typename T> __device__ inline acc_t promoted_load(T value) {
    return load(convert<scalar_t>(load(value)));
}

// The result rounded to the common dtype first, then stored as target_t.
__device__ inline target_t promoted_store(acc_t value) {
    return convert<target_t>(load(convert<scalar_t>(value)));
}

// Operands broadcast to the output's shape, or of any strides; out is contiguous.
//@ read a[reach(a_layout)], b[reach(b_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void promoted_binary(const left_t* a, Layout a_layout, const right_t* b,
                                           Layout b_layout, target_t* out, long long count) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = promoted_store(apply_binary(PROMOTED_OP,
                                             promoted_load(a[strided_offset(i, a_layout)]),
                                             promoted_load(b[strided_offset(i, b_layout)])));
    }
}

// The scalar operand is already in acc_t; reverse computes scalar (op) a.
//@ read a[reach(a_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void promoted_binary_scalar(const left_t* a, Layout a_layout, acc_t scalar,
                                                  target_t* out, long long count, int reverse) {
    GRID_STRIDE_LOOP(i, count) {
        acc_t value = promoted_load(a[strided_offset(i, a_layout)]);
        out[i] = promoted_store(reverse ? apply_binary(PROMOTED_OP, scalar, value)
                                        : apply_binary(PROMOTED_OP, value, scalar));
    }
}

//@ read a[reach(a_layout)], b[reach(b_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void promoted_compare(const left_t* a, Layout a_layout, const right_t* b,
                                            Layout b_layout, bool* out, long long count) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = apply_compare(PROMOTED_OP, promoted_load(a[strided_offset(i, a_layout)]),
                               promoted_load(b[strided_offset(i, b_layout)]));
    }
}

//@ read a[reach(a_layout)]
//@ write out[count]
//@ launch any
//@ in-place no
extern "C" __global__ void promoted_compare_scalar(const left_t* a, Layout a_layout,
                                                   acc_t scalar, bool* out, long long count) {
    GRID_STRIDE_LOOP(i, count) {
        out[i] = apply_compare(PROMOTED_OP, promoted_load(a[strided_offset(i, a_layout)]),
                               scalar);
    }
}
#endif  // PROMOTED_OP
