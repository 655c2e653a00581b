// Shared by every tensorplay kernel source: element types and their conversions.
//
// Sources are compiled header-free (docs/design.md, "Kernel caches"), so half and bfloat16 are
// 16-bit containers converted with PTX instructions and bit arithmetic instead of cuda_fp16.h.
// Arithmetic runs in an accumulation type: float for 16-bit floats and float, double for double,
// long long for integers and bool.

struct half_bits { unsigned short bits; };
struct bfloat16_bits { unsigned short bits; };

template <typename T> struct accumulate { typedef T type; };
template <> struct accumulate<half_bits> { typedef float type; };
template <> struct accumulate<bfloat16_bits> { typedef float type; };
template <> struct accumulate<bool> { typedef long long type; };
template <> struct accumulate<unsigned char> { typedef long long type; };
template <> struct accumulate<signed char> { typedef long long type; };
template <> struct accumulate<short> { typedef long long type; };
template <> struct accumulate<int> { typedef long long type; };

template <typename T> __device__ inline typename accumulate<T>::type load(T value) {
    return (typename accumulate<T>::type)value;
}
template <> __device__ inline float load<half_bits>(half_bits value) {
    float result;
    asm("cvt.f32.f16 %0, %1;" : "=f"(result) : "h"(value.bits));
    return result;
}
template <> __device__ inline float load<bfloat16_bits>(bfloat16_bits value) {
    return __uint_as_float(((unsigned int)value.bits) << 16);
}

template <typename T, typename A> __device__ inline T convert(A value) { return (T)value; }
template <> __device__ inline bool convert<bool, float>(float value) { return value != 0.0f; }
template <> __device__ inline bool convert<bool, double>(double value) { return value != 0.0; }
template <> __device__ inline bool convert<bool, long long>(long long value) { return value != 0; }
__device__ inline half_bits float_to_half(float value) {
    half_bits result;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(result.bits) : "f"(value));
    return result;
}
__device__ inline bfloat16_bits float_to_bfloat16(float value) {
    // Round to nearest even; NaN stays a (quiet) NaN.
    unsigned int bits = __float_as_uint(value);
    bfloat16_bits result;
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        result.bits = (unsigned short)((bits >> 16) | 0x40u);
    } else {
        result.bits = (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
    }
    return result;
}
template <> __device__ inline half_bits convert<half_bits, float>(float v) { return float_to_half(v); }
template <> __device__ inline half_bits convert<half_bits, double>(double v) { return float_to_half((float)v); }
template <> __device__ inline half_bits convert<half_bits, long long>(long long v) { return float_to_half((float)v); }
template <> __device__ inline bfloat16_bits convert<bfloat16_bits, float>(float v) { return float_to_bfloat16(v); }
template <> __device__ inline bfloat16_bits convert<bfloat16_bits, double>(double v) { return float_to_bfloat16((float)v); }
template <> __device__ inline bfloat16_bits convert<bfloat16_bits, long long>(long long v) { return float_to_bfloat16((float)v); }

// Strided element addressing for up to MAX_DIMS dimensions (sizes and strides in elements;
// MAX_DIMS and THREADS come from the constants prelude, nvrtc.pxd).
struct Layout {
    long long sizes[MAX_DIMS];
    long long strides[MAX_DIMS];
    int ndim;
};

// Products and sums rounded as written: the compiler may contract a * b + c into one FMA, which
// rounds once, so a kernel that must round as separate launches would (sgd_step) or as a
// reference does (philox.cu) spells them with these.
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline long long mul_rn(long long a, long long b) { return a * b; }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }

__device__ inline long long strided_offset(long long linear, const Layout& layout) {
    long long offset = 0;
    for (int dim = layout.ndim - 1; dim >= 0; --dim) {
        long long size = layout.sizes[dim];
        offset += (linear % size) * layout.strides[dim];
        linear /= size;
    }
    return offset;
}

// For gather and the scatters (index.cu, scatter.cu): the coordinates of element n of a tensor
// of the index's shape (index_layout.sizes), as three offsets: into the index (its strides),
// into a tensor read at the same coordinates (with_layout's strides; its sizes are not read),
// and into one addressed at them along every dimension but axis (along_layout's strides), which
// the caller completes with the index's value times axis's stride.
struct IndexedOffsets {
    long long index;
    long long with;
    long long along;
};

__device__ inline IndexedOffsets indexed_offsets(long long n, const Layout& index_layout,
                                                 const Layout& with_layout,
                                                 const Layout& along_layout, int axis) {
    IndexedOffsets offsets = {0, 0, 0};
    for (int dim = index_layout.ndim - 1; dim >= 0; --dim) {
        long long size = index_layout.sizes[dim];
        long long coordinate = n % size;
        n /= size;
        offsets.index += coordinate * index_layout.strides[dim];
        offsets.with += coordinate * with_layout.strides[dim];
        if (dim != axis) offsets.along += coordinate * along_layout.strides[dim];
    }
    return offsets;
}

#define GRID_STRIDE_LOOP(index, count) \
    for (long long index = (long long)blockIdx.x * blockDim.x + threadIdx.x; index < (count); \
         index += (long long)blockDim.x * gridDim.x)
