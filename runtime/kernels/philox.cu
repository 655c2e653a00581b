// Random numbers from Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC11). The prelude defines scalar_t, the output element type; common.cu comes first.
//
// Note [Philox stream layout] (the host reference, runtime/random/philox.py, follows it exactly)
// A call that fills `count` elements owns one Philox block per group of PER elements (PER = 4,
// or 2 for 64-bit values). Group g is cuRAND's curand_init(seed, subsequence=g, offset) followed
// by one curand4: counter = (offset / 4 as 64 bits in words 0-1, g as 64 bits in words 2-3),
// key = (seed low, seed high). Every call therefore advances the generator's offset by 4, and
// the numbers depend only on (seed, offset, element index): not on the grid, the GPU model or
// the CPU, which draws the same groups with numpy.
//
// Transforms: 32-bit words become floats in [0, 1) as (word >> 8) * 2^-24, exact in float; two
// words become a double in [0, 1) as (((hi << 32) | lo) >> 11) * 2^-53. Scaling uses explicit
// round-to-nearest multiply and add (no fused multiply-add), so the host computes the same bits.
// Normals are Box-Muller pairs: u1 in (0, 1], radius sqrt(-2 log u1), angle 2 pi u2.

struct PhiloxState {               // matches PhiloxState in runtime/random/rng.pxd
    unsigned long long seed;
    unsigned long long offset;     // in 32-bit outputs, a multiple of 4
    // Captured into a CUDA graph: device memory holding (seed, base offset), written before each
    // replay; offset above is then the offset within the graph, added to the base.
    const unsigned long long* replay_state;
};

struct uint4_t { unsigned int x, y, z, w; };

__device__ inline void unpack(const PhiloxState& state, unsigned long long& seed,
                              unsigned long long& offset) {
    if (state.replay_state != nullptr) {
        seed = state.replay_state[0];
        offset = state.replay_state[1] + state.offset;
    } else {
        seed = state.seed;
        offset = state.offset;
    }
}

__device__ inline uint4_t philox4x32_10(uint4_t counter, unsigned int key0, unsigned int key1) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            key0 += 0x9E3779B9u;
            key1 += 0xBB67AE85u;
        }
        unsigned int hi0 = __umulhi(0xD2511F53u, counter.x), lo0 = 0xD2511F53u * counter.x;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, counter.z), lo1 = 0xCD9E8D57u * counter.z;
        counter = {hi1 ^ counter.y ^ key0, lo1, hi0 ^ counter.w ^ key1, lo0};
    }
    return counter;
}

__device__ inline uint4_t draw(unsigned long long seed, unsigned long long offset,
                               unsigned long long group) {
    unsigned long long block = offset >> 2;
    uint4_t counter = {(unsigned int)block, (unsigned int)(block >> 32), (unsigned int)group,
                       (unsigned int)(group >> 32)};
    return philox4x32_10(counter, (unsigned int)seed, (unsigned int)(seed >> 32));
}

// The real type values are computed in: double for double output, float otherwise.
template <typename T> struct real_of { typedef float type; };
template <> struct real_of<double> { typedef double type; };
typedef typename real_of<scalar_t>::type real_t;

// Values per Philox block: four 32-bit draws, or two 64-bit ones.
#define REAL_PER_DRAW (sizeof(real_t) == 8 ? 2 : 4)

__device__ inline float unit_float(unsigned int word) {
    return (float)(word >> 8) * 5.9604644775390625e-08f;  // 2^-24
}
// (word >> 11) * 2^-53 for word = (hi << 32) | lo, exactly, without the slow 64-bit integer
// conversion: the top 52 bits as the mantissa of a double in [1, 2), less 1, plus bit 11's 2^-53
// (the sum is a multiple of 2^-53 below 1, so both steps are exact).
__device__ inline double unit_double(unsigned int hi, unsigned int lo) {
    const unsigned long long word = ((unsigned long long)hi << 32) | lo;
    const double top = __longlong_as_double((long long)(0x3FF0000000000000ull | (word >> 12)));
    return __dadd_rn(__dsub_rn(top, 1.0), (word & 0x800ull) ? 1.1102230246251565e-16 : 0.0);
}

// The uniforms in [0, 1) of one block.
__device__ inline void uniforms(uint4_t r, float* u) {
    u[0] = unit_float(r.x); u[1] = unit_float(r.y); u[2] = unit_float(r.z); u[3] = unit_float(r.w);
}
__device__ inline void uniforms(uint4_t r, double* u) {
    u[0] = unit_double(r.x, r.y); u[1] = unit_double(r.z, r.w);
}

// Standard normals of one block, Box-Muller in the type's own precision. As cuRAND's
// curand_normal4, float uses the accurate logf (the radius of u1 near 1 needs it) and the fast
// hardware __sincosf, whose absolute error is about 2^-20.5 over the angle's range (PTX ISA,
// sin.approx.f32): normals stay within 1e-5 of the host's double-precision ones.
__device__ inline void normals(uint4_t r, float* z) {
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
        unsigned int a = pair ? r.z : r.x, b = pair ? r.w : r.y;
        float u1 = 1.0f - unit_float(a);               // (0, 1]: log stays finite
        float radius = sqrtf(-2.0f * logf(u1));
        float s, c;
        __sincosf(6.2831853071795865f * unit_float(b), &s, &c);
        z[2 * pair] = radius * c;
        z[2 * pair + 1] = radius * s;
    }
}
// Double normals spend their time in log and sin/cos, not in Philox or the stores; the
// library's log and sincospi (1 ulp, every input) take about three times the instructions
// needed here, where u1 is in (0, 1] and the angle a multiple of 2^-52 turns. So both are
// short series whose coefficients sit in constant memory (operands of the multiply-adds, no
// register moves): about 2e-15 from the exact values, where the host reference (numpy, in
// double) is itself within a few ulp; tests/random/test_random.py holds them to 1e-12.
// log(u1): u1 = m 2^k with m in [sqrt(1/2), sqrt(2)], log(m) = 2 atanh(s) for s = (m-1)/(m+1),
// |s| <= 0.1716, summed through s^17 (the next term is below 4e-16).
__constant__ double LOG_SERIES[8] = {0.6666666666666666, 0.4, 0.2857142857142857, 0.2222222222222222, 0.18181818181818182, 0.15384615384615385, 0.13333333333333333, 0.11764705882352941};  // 2 / (2n + 1), n = 1..8
// sin(pi r) and cos(pi r) for |r| <= 1/4: Taylor series in r through r^15 and r^16.
__constant__ double SINPI_SERIES[8] = {3.141592653589793, -5.167712780049969, 2.550164039877345, -0.5992645293207919, 0.08214588661112819, -0.007370430945714348, 0.00046630280576761234, -2.1915353447830204e-05};
__constant__ double COSPI_SERIES[9] = {1.0, -4.934802200544679, 4.058712126416768, -1.3352627688545893, 0.23533063035889312, -0.02580689139001405, 0.001929574309403922, -0.00010463810492484565, 4.303069587032944e-06};

template <int N> __device__ inline double series(const double (&coefficients)[N], double z) {
    double sum = coefficients[N - 1];
#pragma unroll
    for (int i = N - 2; i >= 0; --i) sum = fma(sum, z, coefficients[i]);
    return sum;
}

__device__ inline double log_unit(double x) {  // x in (0, 1], never subnormal (>= 2^-53)
    const long long bits = __double_as_longlong(x);
    int exponent = (int)(bits >> 52) - 1023;
    double m = __longlong_as_double((bits & 0x000FFFFFFFFFFFFFll) | 0x3FF0000000000000ll);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        exponent += 1;
    }
    const double f = m - 1.0, d = 2.0 + f;  // both exact
    double inverse;  // 1 / d: the hardware's approximation and two Newton steps
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(inverse) : "d"(d));
    inverse = fma(inverse, fma(-d, inverse, 1.0), inverse);
    inverse = fma(inverse, fma(-d, inverse, 1.0), inverse);
    double s = f * inverse;
    s = fma(fma(-s, d, f), inverse, s);
    const double z = s * s;
    return fma((double)exponent, 0.6931471805599453, fma(s * z, series(LOG_SERIES, z), 2.0 * s));
}

// sin and cos of 2 pi u for u = word53 * 2^-53 in [0, 1): with t = 2u = q / 2 + r, q the
// nearest quarter turn (from the integer, no rounding instruction) and |r| <= 1/4 exact.
__device__ inline void sincos_turn(unsigned long long word53, double* sine, double* cosine) {
    const unsigned int q = (unsigned int)((word53 + (1ull << 50)) >> 51);  // 0..4
    const double r = __dsub_rn(2.0 * ((double)word53 * 1.1102230246251565e-16), 0.5 * q);
    const double z = r * r;
    const double sp = r * series(SINPI_SERIES, z), cp = series(COSPI_SERIES, z);
    const double a = (q & 1) ? cp : sp, b = (q & 1) ? sp : cp;
    *sine = (q & 2) ? -a : a;
    *cosine = ((q + 1) & 2) ? -b : b;
}

__device__ inline void normals(uint4_t r, double* z) {
    const double u1 = 1.0 - unit_double(r.x, r.y);
    const double radius = sqrt(-2.0 * log_unit(u1));
    double s, c;
    sincos_turn(((((unsigned long long)r.z) << 32) | r.w) >> 11, &s, &c);
    z[0] = radius * c;
    z[1] = radius * s;
}

// Note [Philox kernel shape]
// The kernels are bound by the arithmetic of Philox (ten rounds of two 32 x 32-bit products per
// block) and by the bandwidth of the stores, so every launch is a persistent grid: as many
// blocks as the device holds at once (kernels.resident_blocks), each thread drawing groups
// g, g + stride, g + 2 stride, ... with stride the grid's thread count. The first Philox round
// of a call multiplies the call's block offset, the same for every group, so the compiler hoists
// it (and the round keys) out of the loop; each pass draws UNROLL groups, independent chains
// that keep the multipliers busy, and stores each as one vector (16 bytes for float32, float64
// and 64-bit integers). Groups past the last whole vector, and outputs not aligned to one, take
// the element-by-element tail. The launch shape never changes the numbers: group g is drawn from
// (seed, offset, g) wherever it runs.
#define UNROLL 2

template <int PER> struct alignas(sizeof(scalar_t) * PER) group_t { scalar_t lane[PER]; };
struct alignas(16) chunk_t { unsigned long long low, high; };

// Stores group g's packed values, g on this lane of a warp whose 32 lanes store consecutive
// groups (the main loop of fill). A group of 16 bytes or less is one store, and the warp's
// stores cover whole 32-byte sectors. A wider group (four 64-bit integers) would be two 16-byte
// stores, each writing half of every sector it touches, which ran at under half the bandwidth
// on an H200; so the warp passes its groups through shared memory and stores them as 16-byte
// chunks in order, each instruction writing 512 contiguous bytes.
template <int PER>
__device__ inline void store_whole(group_t<PER>* vectors, long long g, const group_t<PER>& packed,
                                   group_t<PER>* staged) {
    if constexpr (sizeof(group_t<PER>) <= 16) {
        vectors[g] = packed;
    } else {
        constexpr int CHUNKS = sizeof(group_t<PER>) / sizeof(chunk_t);
        const unsigned int lane = threadIdx.x & 31;
        group_t<PER>* warp_slots = staged + (threadIdx.x - lane);
        __syncwarp();  // the warp's previous chunks are read
        warp_slots[lane] = packed;
        __syncwarp();
        const chunk_t* chunks = reinterpret_cast<const chunk_t*>(warp_slots);
        chunk_t* target = reinterpret_cast<chunk_t*>(vectors + (g - lane));
#pragma unroll
        for (int part = 0; part < CHUNKS; ++part) target[part * 32 + lane] = chunks[part * 32 + lane];
    }
}

// fill<PER>(out, count, state, transform): transform(block, values) turns the Philox block of
// group g into its PER output values, stored at out[g * PER ...]. The main loop runs while the
// warp's last lane (group | 31: blocks and the stride are multiples of 32 threads) has UNROLL
// whole groups, so a warp enters and leaves it together.
template <int PER, typename Transform>
__device__ inline void fill(scalar_t* out, long long count, const PhiloxState& state,
                            const Transform& transform) {
    __shared__ group_t<PER> staged[sizeof(group_t<PER>) <= 16 ? 1 : THREADS];
    unsigned long long seed, offset;
    unpack(state, seed, offset);
    const unsigned long long block = offset >> 2;
    const unsigned int key0 = (unsigned int)seed, key1 = (unsigned int)(seed >> 32);
    const bool aligned = ((unsigned long long)out % sizeof(group_t<PER>)) == 0;
    const long long groups = (count + PER - 1) / PER;
    const long long whole = aligned ? count / PER : 0;  // groups stored as one vector
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long group = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    group_t<PER>* vectors = reinterpret_cast<group_t<PER>*>(out);
    for (; (group | 31) + (UNROLL - 1) * stride < whole; group += UNROLL * stride) {
        uint4_t r[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            const unsigned long long g = group + k * stride;
            r[k] = philox4x32_10({(unsigned int)block, (unsigned int)(block >> 32),
                                  (unsigned int)g, (unsigned int)(g >> 32)}, key0, key1);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            group_t<PER> packed;
            transform(r[k], packed.lane);
            store_whole<PER>(vectors, group + k * stride, packed, staged);
        }
    }
    for (; group < groups; group += stride) {
        scalar_t values[PER];
        transform(draw(seed, offset, group), values);
        const long long first = group * PER;
        if (group < whole) {
            group_t<PER> packed;
#pragma unroll
            for (int lane = 0; lane < PER; ++lane) packed.lane[lane] = values[lane];
            vectors[group] = packed;
        } else {
            for (int lane = 0; lane < PER && first + lane < count; ++lane) {
                out[first + lane] = values[lane];
            }
        }
    }
}

// Uniform on [low, high): low + u * (high - low); a value that rounds to high becomes low, as
// PyTorch's uniform_ does (pytorch/pytorch#16706).
struct UniformTransform {
    real_t low, range, high_stored;
    __device__ inline void operator()(uint4_t r, scalar_t* values) const {
        real_t u[REAL_PER_DRAW];
        uniforms(r, u);
#pragma unroll
        for (int lane = 0; lane < REAL_PER_DRAW; ++lane) {
            scalar_t value = convert<scalar_t>(add_rn(mul_rn(u[lane], range), low));
            values[lane] = (real_t)load(value) == high_stored ? convert<scalar_t>(low) : value;
        }
    }
};

//@ write out[count]
//@ read state.replay_state[2]
//@ launch grid: fill() needs blocks of THREADS threads (whole warps, THREADS staged groups)
//@ in-place no
extern "C" __global__ void uniform(scalar_t* out, long long count, PhiloxState state, real_t low,
                                   real_t range, real_t high) {
    const UniformTransform transform = {low, range, (real_t)load(convert<scalar_t>(high))};
    fill<REAL_PER_DRAW>(out, count, state, transform);
}

struct NormalTransform {
    real_t mean, std;
    __device__ inline void operator()(uint4_t r, scalar_t* values) const {
        real_t z[REAL_PER_DRAW];
        normals(r, z);
#pragma unroll
        for (int lane = 0; lane < REAL_PER_DRAW; ++lane) {
            values[lane] = convert<scalar_t>(add_rn(mul_rn(z[lane], std), mean));
        }
    }
};

//@ write out[count]
//@ read state.replay_state[2]
//@ launch grid: fill() needs blocks of THREADS threads (whole warps, THREADS staged groups)
//@ in-place no
extern "C" __global__ void normal(scalar_t* out, long long count, PhiloxState state, real_t mean,
                                  real_t std) {
    const NormalTransform transform = {mean, std};
    fill<REAL_PER_DRAW>(out, count, state, transform);
}

// 1 where a uniform in [0, 1) is below p, else 0.
struct BernoulliTransform {
    real_t p;
    __device__ inline void operator()(uint4_t r, scalar_t* values) const {
        real_t u[REAL_PER_DRAW];
        uniforms(r, u);
#pragma unroll
        for (int lane = 0; lane < REAL_PER_DRAW; ++lane) {
            values[lane] = convert<scalar_t>((long long)(u[lane] < p));
        }
    }
};

//@ write out[count]
//@ read state.replay_state[2]
//@ launch grid: fill() needs blocks of THREADS threads (whole warps, THREADS staged groups)
//@ in-place no
extern "C" __global__ void bernoulli(scalar_t* out, long long count, PhiloxState state, real_t p) {
    const BernoulliTransform transform = {p};
    fill<REAL_PER_DRAW>(out, count, state, transform);
}

// Integers in [low, low + range): one 32-bit word per value while range fits in 32 bits, else
// two words per value. Modulo reduction, as PyTorch's random_from_to (its bias is below
// range / 2^32, or range / 2^64). A power-of-two range, the common case (bits, bytes, indices
// into power-of-two tables), is a mask instead of a division.
//
// For 64-bit outputs the 32-bit remainder is Lemire's direct computation (Lemire, Kaser and
// Kurz, "Faster remainder by direct computation", 2019, https://arxiv.org/abs/1902.01961):
// word mod range = the high 64 bits of ((inverse * word) mod 2^64) * range, with inverse =
// 2^64 / range rounded up (exact for every 32-bit word and range, so the numbers do not change).
// On an H200 it lifts randint(0, 1000) into int64 from 3.86 to 4.06 TB/s, where the stores
// through shared memory (store_whole) leave fewer cycles for the division; for 32-bit outputs
// the compiler's % is faster (3.33 against 2.75 TB/s), so they keep it.
struct Integers32Transform {
    long long low;
    unsigned int range;
    unsigned long long inverse;  // ceil(2^64 / range), for 64-bit outputs only
    __device__ inline unsigned int reduce(unsigned int word) const {
        if ((range & (range - 1)) == 0) return word & (range - 1);
        if constexpr (sizeof(scalar_t) == 8) {
            return (unsigned int)__umul64hi(inverse * word, range);
        } else {
            return word % range;
        }
    }
    __device__ inline void operator()(uint4_t r, scalar_t* values) const {
        values[0] = convert<scalar_t>(low + (long long)reduce(r.x));
        values[1] = convert<scalar_t>(low + (long long)reduce(r.y));
        values[2] = convert<scalar_t>(low + (long long)reduce(r.z));
        values[3] = convert<scalar_t>(low + (long long)reduce(r.w));
    }
};

//@ write out[count]
//@ read state.replay_state[2]
//@ launch grid: fill() needs blocks of THREADS threads (whole warps, THREADS staged groups)
//@ in-place no
extern "C" __global__ void randint32(scalar_t* out, long long count, PhiloxState state,
                                     long long low, unsigned int range) {
    const unsigned long long inverse = sizeof(scalar_t) == 8 ? ~0ull / range + 1 : 0;
    const Integers32Transform transform = {low, range, inverse};
    fill<4>(out, count, state, transform);
}

struct Integers64Transform {
    long long low;
    unsigned long long range;
    __device__ inline unsigned long long reduce(unsigned long long word) const {
        return (range & (range - 1)) == 0 ? (word & (range - 1)) : word % range;
    }
    __device__ inline void operator()(uint4_t r, scalar_t* values) const {
        const unsigned long long first = ((unsigned long long)r.x << 32) | r.y;
        const unsigned long long second = ((unsigned long long)r.z << 32) | r.w;
        values[0] = convert<scalar_t>((long long)((unsigned long long)low + reduce(first)));
        values[1] = convert<scalar_t>((long long)((unsigned long long)low + reduce(second)));
    }
};

//@ write out[count]
//@ read state.replay_state[2]
//@ launch grid: fill() needs blocks of THREADS threads (whole warps, THREADS staged groups)
//@ in-place no
extern "C" __global__ void randint64(scalar_t* out, long long count, PhiloxState state,
                                     long long low, unsigned long long range) {
    const Integers64Transform transform = {low, range};
    fill<2>(out, count, state, transform);
}

// Before each replay of a graph that drew random numbers: the state its kernels read.
//@ write replay_state[2]
//@ launch fixed: one thread writes the state
//@ in-place no
extern "C" __global__ void set_replay_state(unsigned long long* replay_state,
                                            unsigned long long seed, unsigned long long offset) {
    replay_state[0] = seed;
    replay_state[1] = offset;
}

// Note [Offsets on the device] (runtime/random/rng.pyx): before a replay whose generator's offset a
// previous replay left on the device, the base comes from there (source may be replay_state).
//@ read source[2]
//@ write replay_state[2]
//@ launch fixed: one thread, which reads the base before it writes the state
//@ in-place yes
extern "C" __global__ void follow_replay_state(unsigned long long* replay_state,
                                               const unsigned long long* source,
                                               unsigned long long seed, unsigned long long add) {
    const unsigned long long base = source[1] + add;
    replay_state[0] = seed;
    replay_state[1] = base;
}

// Captured at the end of each pass of a conditional body: what the pass drew moves the base, so
// the next pass, and the draws after the body, take fresh offsets.
//@ update replay_state[2]
//@ launch fixed: one thread: each thread would add drawn again
//@ in-place no
extern "C" __global__ void advance_replay_offset(unsigned long long* replay_state,
                                                 unsigned long long drawn) {
    replay_state[1] += drawn;
}
