"""Philox4x32-10 on the host with numpy, vectorised over counters.

This is the CPU generator and the reference the CUDA kernels (kernels/philox.cu) are tested
against: it follows Note [Philox stream layout] in that file exactly, so a seed gives the same
uniforms, bit for bit, on the CPU and on any GPU, and normals within 1e-5 (float32).
numpy is imported on first use, as everywhere in the runtime.
"""
MULTIPLIERS = (0xD2511F53, 0xCD9E8D57)
KEY_BUMPS = (0x9E3779B9, 0xBB67AE85)
ROUNDS = 10
MASK32 = 0xFFFFFFFF
# Groups per numpy pass: the six 64-bit work arrays stay in cache (about 3 MiB).
CHUNK_GROUPS = 1 << 16


def philox4x32_10(counter, key):
    """Philox4x32-10 of counters (an (n, 4) uint32 array) under key (two ints): (n, 4) uint32."""
    import numpy
    x0, x1, x2, x3 = (numpy.array(counter[:, lane], dtype=numpy.uint64) for lane in range(4))
    product0 = numpy.empty_like(x0)
    product1 = numpy.empty_like(x0)
    key0, key1 = key[0] & MASK32, key[1] & MASK32
    multiplier0, multiplier1 = numpy.uint64(MULTIPLIERS[0]), numpy.uint64(MULTIPLIERS[1])
    low_mask, shift = numpy.uint64(MASK32), numpy.uint64(32)
    for round_index in range(ROUNDS):
        if round_index:
            key0 = (key0 + KEY_BUMPS[0]) & MASK32
            key1 = (key1 + KEY_BUMPS[1]) & MASK32
        # In place, in an order that reads each old word before it is overwritten:
        # (x0, x1, x2, x3) = (hi(M1 x2) ^ x1 ^ k0, lo(M1 x2), hi(M0 x0) ^ x3 ^ k1, lo(M0 x0)).
        numpy.multiply(x0, multiplier0, out=product0)    # 32 x 32 bits: exact in 64
        numpy.multiply(x2, multiplier1, out=product1)
        numpy.right_shift(product1, shift, out=x0)
        numpy.bitwise_xor(x0, x1, out=x0)
        numpy.bitwise_xor(x0, numpy.uint64(key0), out=x0)
        numpy.bitwise_and(product1, low_mask, out=x1)
        numpy.right_shift(product0, shift, out=x2)
        numpy.bitwise_xor(x2, x3, out=x2)
        numpy.bitwise_xor(x2, numpy.uint64(key1), out=x2)
        numpy.bitwise_and(product0, low_mask, out=x3)
    return numpy.stack([x0, x1, x2, x3], axis=1).astype(numpy.uint32)


def blocks(seed, offset, first_group, group_count):
    """The Philox blocks of groups [first_group, first_group + group_count) of one call."""
    import numpy
    block = offset >> 2
    groups = numpy.arange(first_group, first_group + group_count, dtype=numpy.uint64)
    counter = numpy.empty((group_count, 4), dtype=numpy.uint32)
    counter[:, 0] = block & MASK32
    counter[:, 1] = (block >> 32) & MASK32
    counter[:, 2] = groups & numpy.uint64(MASK32)
    counter[:, 3] = groups >> numpy.uint64(32)
    return philox4x32_10(counter, (seed & MASK32, (seed >> 32) & MASK32))


def words(seed, offset, count, per_group):
    """Yield (first element, (groups, 4) uint32 blocks) covering count elements, chunk by chunk."""
    group_count = -(-count // per_group)
    for first in range(0, group_count, CHUNK_GROUPS):
        yield first * per_group, blocks(seed, offset, first, min(CHUNK_GROUPS, group_count - first))


def unit_float(words32):
    """Floats in [0, 1): (word >> 8) * 2^-24, exact."""
    import numpy
    return (words32 >> numpy.uint32(8)).astype(numpy.float32) * numpy.float32(2.0 ** -24)


def unit_double(high, low):
    """Doubles in [0, 1) from two words: (((high << 32) | low) >> 11) * 2^-53, exact."""
    import numpy
    combined = (high.astype(numpy.uint64) << numpy.uint64(32)) | low.astype(numpy.uint64)
    return (combined >> numpy.uint64(11)).astype(numpy.float64) * 2.0 ** -53


def uniform_values(block, double):
    """The uniforms of (n, 4) blocks in element order: 4 floats or 2 doubles per block."""
    if double:
        return unit_double(block[:, 0::2], block[:, 1::2]).reshape(-1)
    return unit_float(block).reshape(-1)


def normal_values(block, double):
    """Standard normals of (n, 4) blocks in element order (Box-Muller pairs), as float64.

    Computed in double precision whatever the output type. The GPU's double normals agree to
    about 2e-15 (short series for log and sin/cos, kernels/philox.cu); its float normals (fast
    hardware sine) to within 1e-5.
    """
    import numpy
    if double:
        u1 = 1.0 - unit_double(block[:, 0], block[:, 1])
        u2 = unit_double(block[:, 2], block[:, 3])
    else:
        u1 = 1.0 - unit_float(block[:, 0::2]).reshape(-1).astype(numpy.float64)
        u2 = unit_float(block[:, 1::2]).reshape(-1).astype(numpy.float64)
    radius = numpy.sqrt(-2.0 * numpy.log(u1))
    angle = 2.0 * numpy.pi * u2
    return numpy.stack([radius * numpy.cos(angle), radius * numpy.sin(angle)], axis=1).reshape(-1)


def integer_values(block, range_size):
    """Offsets in [0, range_size) in element order: one word per value below 2^32, else two."""
    import numpy
    if range_size <= MASK32:
        return (block % numpy.uint32(range_size)).reshape(-1).astype(numpy.uint64)
    combined = (block[:, 0::2].astype(numpy.uint64) << numpy.uint64(32)) | block[:, 1::2]
    return (combined % numpy.uint64(range_size)).reshape(-1)
