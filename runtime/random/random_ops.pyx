# cython: language_level=3
"""Random ops: rand, randn, randint, rand_like, randn_like, and the in-place uniform_, normal_
and bernoulli_ of a tensor, on CUDA (kernels/philox.cu) and on the CPU (philox.py, numpy).

Both devices draw the same Philox stream (Note [Philox stream layout] in kernels/philox.cu): for
one generator state, a CPU tensor and a CUDA tensor get the same uniforms, integers and masks
bit for bit, and normals within 1e-5 (float32). Each op reserves one Philox block per element
group from its generator, an offset step of 4 (rng.pyx).
"""
from libc.stdint cimport int64_t, uint64_t, uintptr_t

from cuda.bindings.cydriver cimport CUfunction
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.kernels cimport nvrtc as kernels
from tensorplay._runtime.random cimport rng
from tensorplay._runtime.tensor cimport (arguments, copies, core as tensor, elementwise,
                                         reduction, scan, sort)
from tensorplay._runtime.kernels.nvrtc cimport THREADS
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.random.rng cimport GeneratorCore, PhiloxState
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.random import philox
from tensorplay._runtime.base.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits

cdef enum Distribution:
    UNIFORM = 0
    NORMAL = 1
    BERNOULLI = 2
    INTEGERS = 3

cdef enum:
    GROUP_STEP = 4              # offset each op reserves: one Philox block per group
    SMALL_GRID = 128            # grids this small fit on any GPU at once: no occupancy query

FLOATING = ("float16", "bfloat16", "float32", "float64")
INTEGER_LIMITS = {"uint8": (0, 255), "int8": (-128, 127), "int16": (-(1 << 15), (1 << 15) - 1),
                  "int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}
cdef uint64_t WORD_RANGE = 0xFFFFFFFF   # largest range drawn from one 32-bit word per value


# --------------------------------------------------------------------------------------------
# Arguments


cdef DtypeCore _dtype_arg(object value, str default, tuple allowed, str op):
    if value is None:
        return dtypes.named_dtype(default)
    if not isinstance(value, DtypeCore):
        raise TypeError(f"{op}: dtype must be a tensorplay dtype (e.g. tensorplay.float32) or "
                        f"None, got {errors.shown(value)}")
    if (<DtypeCore>value).name not in allowed:
        raise TypeError(f"{op}: dtype must be one of {', '.join(allowed)}, got "
                        f"tensorplay.{(<DtypeCore>value).name}")
    return value


cdef int _device_arg(object value, int default) except -3:
    cdef int index = _device.tensor_device_arg(value, "device")
    return default if index == -2 else index


cdef int _check_floating(TensorCore target, str op) except -1:
    if target.dtype_object.name not in FLOATING:
        raise TypeError(f"{op} needs a floating-point tensor (float16, bfloat16, float32 or "
                        f"float64), got tensorplay.{target.dtype_object.name}")
    return 0


cdef double _number_arg(object value, str name, str op) except? -1:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{op}: {name} must be an int or float, got {errors.shown(value)}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{op}: {name} {errors.shown(value)} is too large for a float") from None


# --------------------------------------------------------------------------------------------
# Generation into a tensor: the CUDA kernels or the numpy reference


cdef int _launch(TensorCore target, int distribution, GeneratorCore generator, double a,
                 double b, double c, int64_t low, uint64_t range_size) except -1:
    """Fill the contiguous CUDA tensor target with one kernel of kernels/philox.cu."""
    cdef int device = target.device_index
    cdef DtypeCore dtype = target.dtype_object
    cdef int64_t count = target.element_count
    cdef cudaStream_t stream = _stream.current_stream_handle(device)
    cdef bint double_precision = dtype.name == "float64"
    cdef bint wide = distribution == INTEGERS and range_size > WORD_RANGE
    cdef int per_group = 2 if (wide or (double_precision and distribution != INTEGERS)) else 4
    cdef int64_t groups = (count + per_group - 1) // per_group
    cdef str name = ("uniform", "normal", "bernoulli",
                     "randint64" if wide else "randint32")[distribution]
    cdef CUfunction function = kernels.get_kernel(device, "philox", name,
                                                  rng.philox_prelude(dtype))
    # A thread per group up to the blocks the device holds at once; past that, the kernels'
    # grid-stride loops (Note [Philox kernel shape]).
    cdef int64_t blocks = (groups + THREADS - 1) // THREADS
    if blocks > SMALL_GRID:
        blocks = min(blocks, kernels.resident_blocks(device, function, THREADS))
    cdef PhiloxState state
    generator.philox_state(GROUP_STEP, stream, &state)
    cdef uintptr_t out = target.data
    cdef float reals[3]
    cdef double doubles[3]
    cdef unsigned int range32 = <unsigned int>range_size
    cdef int index
    cdef void* arguments[6]
    arguments[0] = &out
    arguments[1] = &count
    arguments[2] = &state
    if distribution == INTEGERS:
        arguments[3] = &low
        if wide:
            arguments[4] = &range_size
        else:
            arguments[4] = &range32
    else:
        doubles[0], doubles[1], doubles[2] = a, b, c
        reals[0], reals[1], reals[2] = <float>a, <float>b, <float>c
        for index in range(3):
            arguments[3 + index] = <void*>&doubles[index] if double_precision \
                else <void*>&reals[index]
    return kernels.launch(device, function, <unsigned int>blocks, THREADS, 0, stream, arguments)


cdef object _stored(object values, DtypeCore dtype):
    """numpy values (float64, float32 or int64) as dtype stores them on the CPU. Integers go to
    16-bit floats through float32, as the kernels' conversions do."""
    import numpy
    if dtype.name == "bfloat16":
        return float32_to_bfloat16_bits(values.astype(numpy.float32))
    if dtype.name == "float16" and values.dtype.kind != "f":
        values = values.astype(numpy.float32)
    return values.astype(dtype.numpy_name)


cdef object _as_real(object values, DtypeCore dtype):
    """Stored CPU values back as float32 (float64 for float64), to compare as the kernels do."""
    if dtype.name == "bfloat16":
        return bfloat16_bits_to_float32(values)
    return values.astype("f8" if dtype.name == "float64" else "f4")


cdef object _cpu_chunk(object block, int distribution, DtypeCore dtype, double a, double b,
                       double c, int64_t low, uint64_t range_size):
    """Values of one chunk of Philox blocks, as dtype stores them: the kernels' arithmetic."""
    import numpy
    cdef bint double_precision = dtype.name == "float64"
    real = numpy.float64 if double_precision else numpy.float32
    if distribution == INTEGERS:
        offsets = philox.integer_values(block, range_size)
        values = (numpy.uint64(low & 0xFFFFFFFFFFFFFFFF) + offsets).view(numpy.int64)
        return _stored(values, dtype)
    uniforms = philox.uniform_values(block, double_precision) \
        if distribution != NORMAL else None
    if distribution == BERNOULLI:
        return _stored((uniforms < real(a)).astype(numpy.int64), dtype)
    if distribution == NORMAL:
        normals = philox.normal_values(block, double_precision).astype(real)
        return _stored(normals * real(b) + real(a), dtype)
    # UNIFORM: a = low, b = range, c = high; a value stored as high becomes low.
    values = _stored(uniforms * real(b) + real(a), dtype)
    high_stored = _as_real(_stored(numpy.array([c], dtype=real), dtype), dtype)[0]
    values[_as_real(values, dtype) == high_stored] = _stored(numpy.array([a], dtype=real), dtype)
    return values


cdef int _fill_cpu(TensorCore target, int distribution, GeneratorCore generator, double a,
                   double b, double c, int64_t low, uint64_t range_size) except -1:
    cdef int64_t count = target.element_count
    cdef bint wide = distribution == INTEGERS and range_size > WORD_RANGE
    cdef bint double_precision = target.dtype_object.name == "float64"
    cdef int per_group = 2 if (wide or (double_precision and distribution != INTEGERS)) else 4
    cdef PhiloxState state
    generator.philox_state(GROUP_STEP, NULL, &state)
    flat = target.array.reshape(-1)  # a view: the tensor is contiguous here
    for first, block in philox.words(state.seed, state.offset, count, per_group):
        values = _cpu_chunk(block, distribution, target.dtype_object, a, b, c, low, range_size)
        end = min(first + len(values), count)
        flat[first:end] = values[:end - first]
    return 0


cdef object _fill(TensorCore target, int distribution, object generator, double a, double b,
                  double c, int64_t low, uint64_t range_size):
    """Fill target in place and return it; strided targets are filled through a contiguous
    copy, so the numbers depend only on the element's row-major position."""
    return _fill_from(target, distribution, rng.generator_for(generator, target.device_index),
                      a, b, c, low, range_size)


cdef object _fill_from(TensorCore target, int distribution, GeneratorCore source, double a,
                       double b, double c, int64_t low, uint64_t range_size):
    if target.element_count == 0:
        return target
    cdef TensorCore dense = target if tensor.is_contiguous(target) and (
        target.device_index >= 0 or target.array.flags.c_contiguous) else \
        tensor.new_empty(target.sizes, target.dtype_object, target.device_index)
    if dense.device_index < 0:
        _fill_cpu(dense, distribution, source, a, b, c, low, range_size)
    else:
        _launch(dense, distribution, source, a, b, c, low, range_size)
    if dense is not target:
        copies.copy_(target, dense, False)
    return target


# --------------------------------------------------------------------------------------------
# In place (Tensor methods, api.yaml). Every argument is checked, against the tensor's dtype
# too, before anything is drawn or counted (core.pyx, Note [Refused calls change nothing]): the
# refusals of an in-place change, the values, the generator; the change is counted once the
# numbers are written.


cdef int _check_in_range(double value, str name, DtypeCore dtype, str op) except -1:
    """value, a bound or parameter of a distribution, must be a finite value of dtype: the
    numbers are computed from it in dtype's precision (float32 for the 16-bit types), and a
    bound beyond the largest value would make them infinities, or zeros where an infinite
    high is folded back to low. PyTorch's check_uniform_bounds refuses the same."""
    cdef double largest = dtypes.largest_finite(dtype)
    if not -largest <= value <= largest:  # NaN too
        raise ValueError(f"{op}: {name}={value!r} is outside the range of "
                         f"tensorplay.{dtype.name} (-{dtypes.largest_text(dtype)} to "
                         f"{dtypes.largest_text(dtype)})")
    return 0


cdef object uniform_(TensorCore target, object low, object high, object generator):
    target.c_check_in_place("uniform_")
    _check_floating(target, "uniform_()")
    cdef double start = _number_arg(low, "low", "uniform_()")
    cdef double end = _number_arg(high, "high", "uniform_()")
    cdef DtypeCore dtype = target.dtype_object
    _check_in_range(start, "low", dtype, "uniform_()")
    _check_in_range(end, "high", dtype, "uniform_()")
    if not start <= end:
        raise ValueError(f"uniform_(): needs low <= high, got low={errors.shown(low)}, "
                         f"high={errors.shown(high)}")
    if end - start > dtypes.largest_finite(dtype):
        raise ValueError(f"uniform_(): the range high - low = {end - start!r} (low="
                         f"{errors.shown(low)}, high={errors.shown(high)}) is beyond the largest "
                         f"tensorplay.{dtype.name} ({dtypes.largest_text(dtype)})")
    source = rng.generator_for(generator, target.device_index)
    _fill_from(target, UNIFORM, source, start, end - start, end, 0, 0)
    target.c_mark_modified("uniform_")
    return target


cdef object normal_(TensorCore target, object mean, object std, object generator):
    target.c_check_in_place("normal_")
    _check_floating(target, "normal_()")
    cdef double center = _number_arg(mean, "mean", "normal_()")
    cdef double spread = _number_arg(std, "std", "normal_()")
    if not spread >= 0.0:
        raise ValueError(f"normal_(): std must be >= 0, got {errors.shown(std)}")
    _check_in_range(center, "mean", target.dtype_object, "normal_()")
    _check_in_range(spread, "std", target.dtype_object, "normal_()")
    source = rng.generator_for(generator, target.device_index)
    _fill_from(target, NORMAL, source, center, spread, 0.0, 0, 0)
    target.c_mark_modified("normal_")
    return target


cdef object bernoulli_(TensorCore target, object p, object generator):
    target.c_check_in_place("bernoulli_")
    cdef double probability = _number_arg(p, "p", "bernoulli_()")
    if not 0.0 <= probability <= 1.0:
        raise ValueError(f"bernoulli_(): p must be in [0, 1], got {errors.shown(p)}")
    source = rng.generator_for(generator, target.device_index)
    _fill_from(target, BERNOULLI, source, probability, 0.0, 0.0, 0, 0)
    target.c_mark_modified("bernoulli_")
    return target


# --------------------------------------------------------------------------------------------
# Factories (api.yaml: tensorplay)


# The floating-point factories take requires_grad (their dtypes can all require grad).


cdef object rand(tuple size, object generator, object dtype, object device, bint requires_grad):
    target = tensor.new_empty(arguments.size_arg(size, "size"),
                              _dtype_arg(dtype, "float32", FLOATING, "rand()"),
                              _device_arg(device, -1))
    return tensor.requiring_grad(_fill(target, UNIFORM, generator, 0.0, 1.0, 1.0, 0, 0),
                                 requires_grad)


cdef object randn(tuple size, object generator, object dtype, object device, bint requires_grad):
    target = tensor.new_empty(arguments.size_arg(size, "size"),
                              _dtype_arg(dtype, "float32", FLOATING, "randn()"),
                              _device_arg(device, -1))
    return tensor.requiring_grad(_fill(target, NORMAL, generator, 0.0, 1.0, 0.0, 0, 0),
                                 requires_grad)


cdef object randint(object low, object high, object size, object generator, object dtype,
                    object device):
    size_name = "size"
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size), PyTorch's form
        low, high, size = 0, low, high
        size_name = "high (the size, in the form randint(high, size))"
    # Every argument's type and the placement first, then the values.
    cdef int where = _device_arg(device, -1)
    rng.generator_for(generator, where)
    allowed = tuple(INTEGER_LIMITS) + FLOATING
    cdef DtypeCore element = _dtype_arg(dtype, "int64", allowed, "randint()")
    for name, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"randint(): {name} must be an int, got {errors.shown(value)}")
    if low >= high:
        raise ValueError(f"randint(): low must be less than high, got low={errors.shown(low)}, "
                         f"high={errors.shown(high)}")
    limits = INTEGER_LIMITS.get(element.name)
    if limits is not None and not (limits[0] <= low and high - 1 <= limits[1]):
        raise ValueError(f"randint(): [low, high) = [{errors.shown(low)}, {errors.shown(high)}) "
                         f"does not fit in "
                         f"tensorplay.{element.name} ({limits[0]} to {limits[1]})")
    if not (-(1 << 63) <= low and high <= (1 << 63) and high - low < (1 << 64)):
        raise ValueError(f"randint(): low and high must fit in 64-bit integers and high - low "
                         f"below 2**64, got low={errors.shown(low)}, high={errors.shown(high)}")
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"randint(): size must be a tuple or list of ints (randint(low, high, "
                        f"size) or randint(high, size)), got {errors.shown(size)}")
    target = tensor.new_empty(arguments.size_arg(tuple(size), size_name), element, where)
    return _fill(target, INTEGERS, generator, 0.0, 0.0, 0.0, low, <uint64_t>(high - low))


# The largest n whose permutation each floating dtype holds exactly (n - 1 its largest value),
# PyTorch's limits.
PERMUTATION_LIMITS = {"float16": (1 << 11) + 1, "bfloat16": (1 << 8) + 1,
                      "float32": (1 << 24) + 1, "float64": (1 << 53) + 1}
SORT_KEYS = 1 << 63  # a permutation sorts draws from [0, SORT_KEYS) (Note [Permutations])


# Note [Permutations]
# randperm(n) is the order that sorts n draws of randint(0, 2**63), stable for equal draws, on
# the tensor's device (sort.pyx's kernel there, numpy's stable argsort on the CPU). Every order
# is as likely as under PyTorch's randperm (ties aside, at most n**2 / 2**64 likely) and one
# seed gives one order on both devices (Philox draws the same integers on both), but not
# PyTorch's order for the same seed: its CPU shuffle and its CUDA sort of random keys are
# algorithms of their own. Nothing is read back, so a CUDA graph captures it.
cdef object randperm(object n, object generator, object dtype, object device,
                     bint requires_grad):
    # Every argument's type and the placement first, then the values.
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"randperm(): n must be an int, got {errors.shown(n)}")
    cdef int where = _device_arg(device, -1)
    rng.generator_for(generator, where)
    cdef DtypeCore element = _dtype_arg(dtype, "int64", tuple(INTEGER_LIMITS) + FLOATING,
                                        "randperm()")
    arguments.require_grad_arg(element, None, requires_grad)
    if n < 0:
        raise ValueError(f"randperm(): n must be at least 0, got {n}")
    limits = INTEGER_LIMITS.get(element.name)
    if limits is not None and n - 1 > limits[1]:
        raise ValueError(f"randperm(): n - 1 = {n - 1}, the largest value, does not fit in "
                         f"tensorplay.{element.name} (at most {limits[1]})")
    if n > PERMUTATION_LIMITS.get(element.name, n):  # PyTorch's limit, in its words
        raise ValueError(f"randperm(): n cannot be greater than "
                         f"{PERMUTATION_LIMITS[element.name]} for tensorplay.{element.name} "
                         "(its integers are exact only so far)")
    keys = randint(0, SORT_KEYS, [n], generator, None, device)
    order = sort.argsort(<TensorCore>keys, 0, False, True) if n else keys
    if element.name != "int64":
        order = copies.to(<TensorCore>order, None, element, False, False)
    return tensor.requiring_grad(order, requires_grad)


cdef object _random_like(object input, object generator, object dtype, object device,
                         int distribution, str op, bint requires_grad):
    cdef TensorCore source = tensor.own_tensor_arg(input, "input")
    element = source.dtype_object if dtype is None else dtype
    target = tensor.new_empty(source.sizes, _dtype_arg(element, "float32", FLOATING, op),
                              _device_arg(device, source.device_index))
    if distribution == UNIFORM:
        _fill(target, UNIFORM, generator, 0.0, 1.0, 1.0, 0, 0)
    else:
        _fill(target, NORMAL, generator, 0.0, 1.0, 0.0, 0, 0)
    return tensor.requiring_grad(target, requires_grad)


cdef object rand_like(object input, object generator, object dtype, object device,
                      bint requires_grad):
    return _random_like(input, generator, dtype, device, UNIFORM, "rand_like()", requires_grad)


cdef object randn_like(object input, object generator, object dtype, object device,
                       bint requires_grad):
    return _random_like(input, generator, dtype, device, NORMAL, "randn_like()", requires_grad)


# --------------------------------------------------------------------------------------------
# Sampling (api.yaml: tensorplay.multinomial and Tensor.multinomial)

# Note [Multinomial sampling]
# torch.multinomial's rules and messages, and its algorithms, of other operations here so that
# nothing is read back and a CUDA graph captures a draw (its numbers from the generator's
# capture-safe state, as rand's):
# - without replacement, and for one sample with replacement, the exponential race PyTorch's
#   CUDA kernel runs: each category's probability divided by an exponential draw, the largest
#   num_samples of those keys (sort.pyx's topk); a zero probability gets a key below every other,
#   so it is drawn only once the others are (PyTorch's order: the first such categories);
# - with replacement, each draw a uniform number times the row's sum, placed in the cumulative
#   sums (scan.pyx's cumsum): the first category whose sum passes it.
# Probabilities are read on the CPU and refused there as PyTorch refuses them (inf, NaN, negative,
# a row summing to 0); on a device they are not read back, and such rows draw unspecified
# categories (PyTorch's kernel asserts on the device).
cdef object multinomial(TensorCore input, long long num_samples, bint replacement,
                        object generator):
    sizes = input.sizes
    if len(sizes) not in (1, 2):  # PyTorch's messages, from here on
        raise RuntimeError(f"prob_dist must be 1 or 2 dim (got {len(sizes)})")
    if not input.dtype_object.floating:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype_object.name}")
    if num_samples <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples (num_samples={num_samples})")
    categories = sizes[-1]
    if not replacement and num_samples > categories:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                           f"replacement (num_samples={num_samples}, {categories} categories)")
    if categories > 2 ** 24:
        raise RuntimeError("number of categories cannot exceed 2^24")
    if categories == 0 and (len(sizes) == 1 or sizes[0] > 0):  # rows with nothing to draw
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    cdef GeneratorCore source = rng.generator_for(generator, input.device_index)
    if input.device_index < 0:
        _check_probabilities(input)
    cdef DtypeCore real = input.dtype_object if input.dtype_object.itemsize == 8 else \
        dtypes.named_dtype("float32")
    rows = copies.to(input.c_detach(), None, real, False, False)
    rows = copies.reshape(<TensorCore>rows, (-1, categories))
    if not replacement or num_samples == 1:
        noise = _fill_from(tensor.new_empty((<TensorCore>rows).sizes, real, input.device_index),
                           UNIFORM, source, 0.0, 1.0, 1.0, 0, 0)
        waits = elementwise.neg(<TensorCore>elementwise.log1p(<TensorCore>elementwise.neg(noise)))
        keys = elementwise.where(elementwise.gt(<TensorCore>rows, 0),
                                 elementwise.truediv(<TensorCore>rows, waits), -1.0)
        drawn = sort.topk(<TensorCore>keys, num_samples, -1, True, True)[1]
    else:
        sums = scan.cumsum(<TensorCore>rows, -1, None)
        total = copies.narrow(<TensorCore>sums, -1, categories - 1, 1)
        noise = _fill_from(tensor.new_empty(((<TensorCore>rows).sizes[0], num_samples), real,
                                            input.device_index),
                           UNIFORM, source, 0.0, 1.0, 1.0, 0, 0)
        targets = elementwise.mul(<TensorCore>noise, total)
        passed = elementwise.le(<TensorCore>copies.reshape(<TensorCore>sums, (-1, 1, categories)),
                                copies.reshape(<TensorCore>targets, (-1, num_samples, 1)))
        drawn = elementwise.clamp(<TensorCore>reduction.sum_over(<TensorCore>passed, -1, False),
                                  None, categories - 1)
    return copies.reshape(<TensorCore>drawn, (num_samples,)) if len(sizes) == 1 else drawn


cdef int _check_probabilities(TensorCore input) except -1:
    values = arguments.np().asarray(copies.host_values(input), dtype=arguments.np().float64)
    values = values.reshape(-1, values.shape[-1])
    if not arguments.np().isfinite(values).all() or (values < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if values.shape[0] and (values.sum(-1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    return 0
