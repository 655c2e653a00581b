"""Random numbers: on the CPU, the Philox reference, the generator API and the random ops; on
the GPU (marked gpu), exactness against the CPU reference, statistics, state, streams.

The CPU generator runs the same Philox4x32-10 stream as the CUDA kernels (Note [Philox stream
layout] in runtime/kernels/philox.cu); the GPU tests at the end check the GPU against it.
"""
import subprocess
import sys

import numpy
import pytest

import tensorplay
from tensorplay import accelerator
from tensorplay._runtime.random import philox

DEFAULT_SEED = 67280421310721

# Random123's known-answer vectors for philox4x32 with 10 rounds (counter, key, output), from
# https://github.com/DEShawResearch/random123/blob/main/tests/kat_vectors
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000, 0x00000000, 0x00000000), (0x00000000, 0x00000000),
     (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
    ((0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff),
     (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
    ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
     (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1)),
]


def state_of(seed, offset):
    return list(seed.to_bytes(8, "little") + offset.to_bytes(8, "little"))


def values(tensor):
    tensor = tensor.cpu()
    return tensor.to(tensorplay.float32).numpy() if tensor.dtype is tensorplay.bfloat16 \
        else tensor.numpy()


# -- the Philox reference ----------------------------------------------------------------------


@pytest.mark.parametrize("counter, key, expected", KNOWN_ANSWERS)
def test_reference_matches_random123_known_answers(counter, key, expected):
    output = philox.philox4x32_10(numpy.array([counter], dtype=numpy.uint32), key)
    assert output.dtype == numpy.uint32
    assert tuple(int(word) for word in output[0]) == expected


def test_reference_is_vectorised_over_counters():
    counters = numpy.array([answer[0] for answer in KNOWN_ANSWERS], dtype=numpy.uint32)
    # One key for all rows: the first and last answers share no key, so check row by row.
    for row, (counter, key, expected) in enumerate(KNOWN_ANSWERS):
        assert tuple(philox.philox4x32_10(counters, key)[row]) == expected


def test_blocks_follow_curand_counter_layout():
    seed, offset = 0x0123456789ABCDEF, 8 + (5 << 34)
    block = offset >> 2
    expected = philox.philox4x32_10(
        numpy.array([[block & 0xFFFFFFFF, block >> 32, 7, 0],
                     [block & 0xFFFFFFFF, block >> 32, 8, 0]], dtype=numpy.uint32),
        (seed & 0xFFFFFFFF, seed >> 32))
    assert numpy.array_equal(philox.blocks(seed, offset, 7, 2), expected)


def test_rand_is_the_documented_transform_of_the_stream():
    generator = tensorplay.Generator().manual_seed(42)
    drawn = tensorplay.rand(10, generator=generator).numpy()
    words = philox.blocks(42, 0, 0, 3).reshape(-1)[:10]
    assert numpy.array_equal(drawn, (words >> 8).astype(numpy.float32) * numpy.float32(2 ** -24))


def test_float64_uniforms_take_two_words_each():
    generator = tensorplay.Generator().manual_seed(9)
    drawn = tensorplay.rand(4, generator=generator, dtype=tensorplay.float64).numpy()
    words = philox.blocks(9, 0, 0, 2).astype(numpy.uint64)
    expected = (((words[:, 0::2] << numpy.uint64(32)) | words[:, 1::2]) >> numpy.uint64(11))
    assert numpy.array_equal(drawn, expected.reshape(-1).astype(numpy.float64) * 2.0 ** -53)


# -- generators and seeding ---------------------------------------------------------------------


def test_new_generator_starts_from_pytorch_default_seed_on_the_cpu():
    generator = tensorplay.Generator()
    assert generator.device == tensorplay.device("cpu")
    assert generator.initial_seed() == DEFAULT_SEED
    assert generator.get_state().tolist() == state_of(DEFAULT_SEED, 0)
    assert "cpu" in repr(generator)


def test_manual_seed_returns_the_generator_and_restarts_the_stream():
    generator = tensorplay.Generator()
    assert generator.manual_seed(5) is generator
    first = tensorplay.rand(6, generator=generator).numpy()
    assert generator.get_state().tolist() == state_of(5, 4)
    generator.manual_seed(5)
    assert numpy.array_equal(tensorplay.rand(6, generator=generator).numpy(), first)


def test_negative_seeds_read_as_unsigned_64_bit():
    assert tensorplay.Generator().manual_seed(-1).initial_seed() == (1 << 64) - 1


def test_each_op_advances_the_offset_by_four():
    generator = tensorplay.Generator().manual_seed(1)
    for op in (lambda: tensorplay.rand(1000, generator=generator),
               lambda: tensorplay.randn(3, generator=generator),
               lambda: tensorplay.randint(0, 1 << 40, (5,), generator=generator),
               lambda: tensorplay.zeros(7).bernoulli_(0.5, generator=generator)):
        before = int.from_bytes(bytes(generator.get_state().tolist()[8:]), "little")
        op()
        after = int.from_bytes(bytes(generator.get_state().tolist()[8:]), "little")
        assert after - before == 4


def test_empty_tensors_draw_nothing():
    generator = tensorplay.Generator().manual_seed(1)
    assert tensorplay.rand(0, 3, generator=generator).shape == (0, 3)
    assert generator.get_state().tolist() == state_of(1, 0)


def test_consecutive_draws_differ_and_restore_repeats_them():
    generator = tensorplay.Generator().manual_seed(11)
    state = generator.get_state()
    first = tensorplay.rand(1000, generator=generator).numpy()
    second = tensorplay.rand(1000, generator=generator).numpy()
    assert not numpy.array_equal(first, second)
    assert abs(numpy.corrcoef(first, second)[0, 1]) < 0.15
    assert generator.set_state(state) is generator
    assert numpy.array_equal(tensorplay.rand(1000, generator=generator).numpy(), first)


def test_state_is_a_fresh_uint8_tensor_and_bytes_restore_it():
    generator = tensorplay.Generator().manual_seed(3)
    state = generator.get_state()
    assert state.dtype is tensorplay.uint8 and state.shape == (16,)
    state[0] = 99  # writable, and a copy: the generator is unchanged
    assert generator.initial_seed() == 3
    generator.set_state(bytes(state_of(77, 40)))
    assert generator.initial_seed() == 77
    assert generator.get_state().tolist() == state_of(77, 40)


def test_seed_draws_a_fresh_seed():
    generator = tensorplay.Generator()
    chosen = generator.seed()
    assert isinstance(chosen, int) and generator.initial_seed() == chosen
    assert generator.get_state().tolist() == state_of(chosen, 0)


def test_top_level_seeding_sets_the_default_cpu_generator():
    default = tensorplay.manual_seed(2024)
    assert isinstance(default, tensorplay.Generator)
    assert tensorplay.initial_seed() == 2024
    first = tensorplay.rand(8).numpy()
    assert numpy.array_equal(first, tensorplay.rand(8, generator=tensorplay.Generator()
                                                    .manual_seed(2024)).numpy())
    chosen = tensorplay.seed()
    assert tensorplay.initial_seed() == chosen


def test_set_state_rejects_bad_states():
    generator = tensorplay.Generator()
    with pytest.raises(ValueError, match="new_state must be 16 bytes"):
        generator.set_state(bytes(8))
    with pytest.raises(ValueError, match="not a multiple of 4"):
        generator.set_state(bytes(state_of(1, 6)))
    with pytest.raises(TypeError, match="new_state must be a uint8 tensor"):
        generator.set_state(tensorplay.zeros(16))
    with pytest.raises(TypeError, match="new_state must be the 16-byte state"):
        generator.set_state(12)
    assert generator.get_state().tolist() == state_of(DEFAULT_SEED, 0)


def test_set_state_takes_any_uint8_tensor_of_16_elements_and_refuses_others():
    generator = tensorplay.Generator()
    state = tensorplay.tensor(state_of(5, 8), dtype=tensorplay.uint8)
    strided = tensorplay.zeros(32, dtype=tensorplay.uint8)
    strided[::2] = state
    generator.set_state(strided[::2])  # not contiguous: copied
    assert generator.get_state().tolist() == state_of(5, 8)
    generator.set_state(state.view(4, 4).t())  # bytes in the tensor's row-major order
    assert generator.get_state().tolist() == \
        numpy.array(state_of(5, 8)).reshape(4, 4).T.reshape(-1).tolist()
    generator.set_state(state.view(2, 8))
    assert generator.get_state().tolist() == state_of(5, 8)
    generator.set_state(tensorplay.tensor(state_of(7, 0), dtype=tensorplay.uint8).unsqueeze(0))
    assert generator.get_state().tolist() == state_of(7, 0)
    for wrong in (tensorplay.zeros(15, dtype=tensorplay.uint8),
                  tensorplay.zeros(32, dtype=tensorplay.uint8)[::3]):
        with pytest.raises(ValueError, match="new_state must be 16 bytes .*got a uint8 tensor of "
                                             r"(15|11) elements"):
            generator.set_state(wrong)
    with pytest.raises(TypeError, match="new_state must be a uint8 tensor, got int8"):
        generator.set_state(tensorplay.zeros(16, dtype=tensorplay.int8))
    assert generator.get_state().tolist() == state_of(7, 0)


def test_seed_argument_errors():
    with pytest.raises(TypeError, match="seed must be an int, got float"):
        tensorplay.Generator().manual_seed(1.5)
    with pytest.raises(ValueError, match=r"seed must be from -2\*\*63 to 2\*\*64 - 1"):
        tensorplay.manual_seed(1 << 64)


@pytest.mark.no_gpu
def test_cuda_generator_needs_an_accelerator():
    with pytest.raises(RuntimeError, match="no accelerator is available"):
        tensorplay.Generator("cuda")


# -- the random ops on the CPU ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_rand_is_in_unit_interval_for_every_float_dtype(dtype):
    drawn = tensorplay.rand(4, 1000, dtype=getattr(tensorplay, dtype))
    assert drawn.dtype is getattr(tensorplay, dtype) and drawn.shape == (4, 1000)
    array = values(drawn)
    assert array.min() >= 0.0 and array.max() < 1.0
    assert 0.45 < array.mean() < 0.55


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_randn_has_unit_variance_for_every_float_dtype(dtype):
    array = values(tensorplay.randn(200_000, dtype=getattr(tensorplay, dtype))).astype("f8")
    assert abs(array.mean()) < 0.02 and abs(array.var() - 1.0) < 0.02


def test_uniform_and_normal_scale_and_shift():
    generator = tensorplay.Generator().manual_seed(8)
    uniform = tensorplay.empty(100_000).uniform_(-3, 5, generator=generator).numpy()
    assert uniform.min() >= -3 and uniform.max() < 5 and abs(uniform.mean() - 1) < 0.05
    normal = tensorplay.empty(100_000, dtype=tensorplay.float64).normal_(10, 2).numpy()
    assert abs(normal.mean() - 10) < 0.05 and abs(normal.std() - 2) < 0.05


def test_uniform_never_returns_high_in_half_precision():
    drawn = tensorplay.empty(1_000_000, dtype=tensorplay.float16).uniform_(0, 1).numpy()
    assert drawn.max() < 1.0


def test_randint_covers_the_range_in_both_call_forms():
    narrow = tensorplay.randint(-3, 4, (100_000,)).numpy()
    assert narrow.dtype == numpy.int64 and set(numpy.unique(narrow)) == set(range(-3, 4))
    two_arguments = tensorplay.randint(10, (5, 6))
    assert two_arguments.shape == (5, 6) and 0 <= two_arguments.numpy().min()
    assert two_arguments.numpy().max() < 10
    wide = tensorplay.randint(-(1 << 62), 1 << 62, (10_000,)).numpy()
    assert wide.min() >= -(1 << 62) and wide.max() < (1 << 62) and wide.min() < -(1 << 60)
    small = tensorplay.randint(0, 256, (10_000,), dtype=tensorplay.uint8).numpy()
    assert small.dtype == numpy.uint8 and small.max() > 250


def test_bernoulli_fills_masks_of_any_dtype_at_rate_p():
    mask = tensorplay.zeros(200_000, dtype=tensorplay.bool).bernoulli_(0.25).numpy()
    assert mask.dtype == numpy.bool_ and abs(mask.mean() - 0.25) < 0.01
    ones = tensorplay.zeros(100, dtype=tensorplay.int32).bernoulli_(1.0).numpy()
    assert (ones == 1).all()
    assert (tensorplay.ones(100).bernoulli_(0).numpy() == 0).all()


def test_like_factories_keep_shape_and_dtype():
    source = tensorplay.zeros(3, 4, dtype=tensorplay.float64)
    for factory in (tensorplay.rand_like, tensorplay.randn_like):
        made = factory(source)
        assert made.shape == (3, 4) and made.dtype is tensorplay.float64
        assert factory(source, dtype=tensorplay.float16).dtype is tensorplay.float16


def test_strided_targets_get_the_numbers_of_a_contiguous_draw():
    base = tensorplay.zeros(4, 6)
    view = base[:, 1:4]
    view.uniform_(generator=tensorplay.Generator().manual_seed(6))
    dense = tensorplay.empty(4, 3).uniform_(generator=tensorplay.Generator().manual_seed(6))
    assert numpy.array_equal(base.numpy()[:, 1:4], dense.numpy())
    assert (base.numpy()[:, 0] == 0).all() and (base.numpy()[:, 4:] == 0).all()


# -- argument errors ----------------------------------------------------------------------------


def test_sizes_must_be_non_negative_ints():
    with pytest.raises(ValueError, match="size must be non-negative"):
        tensorplay.rand(2, -1)
    with pytest.raises(TypeError, match="size must be ints"):
        tensorplay.randn(2.5)


def test_dtypes_must_fit_the_op():
    with pytest.raises(TypeError, match=r"rand\(\): dtype must be one of .*int64"):
        tensorplay.rand(2, dtype=tensorplay.int64)
    with pytest.raises(TypeError, match=r"randint\(\): dtype must be one of .*bool"):
        tensorplay.randint(0, 2, (2,), dtype=tensorplay.bool)
    with pytest.raises(TypeError, match="uniform_.. needs a floating-point tensor"):
        tensorplay.zeros(2, dtype=tensorplay.int32).uniform_()
    with pytest.raises(TypeError, match="normal_.. needs a floating-point tensor"):
        tensorplay.zeros(2, dtype=tensorplay.bool).normal_()
    with pytest.raises(TypeError, match="dtype must be a tensorplay dtype"):
        tensorplay.randn(2, dtype="float32")


def test_randint_bounds_are_checked():
    with pytest.raises(ValueError, match="low must be less than high, got low=5, high=5"):
        tensorplay.randint(5, 5, (2,))
    with pytest.raises(ValueError, match=r"\[0, 300\) does not fit in tensorplay.uint8"):
        tensorplay.randint(0, 300, (2,), dtype=tensorplay.uint8)
    with pytest.raises(TypeError, match=r"randint\(\): high must be an int"):
        tensorplay.randint(0, 2.5, (2,))
    with pytest.raises(TypeError, match="size must be a tuple or list"):
        tensorplay.randint(0, 3, 4)


def test_distribution_parameters_are_checked():
    with pytest.raises(ValueError, match="needs low <= high"):
        tensorplay.empty(2).uniform_(3, 1)
    with pytest.raises(ValueError, match="std must be >= 0, got -1"):
        tensorplay.empty(2).normal_(0, -1)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\], got 1.5"):
        tensorplay.empty(2).bernoulli_(1.5)
    with pytest.raises(TypeError, match="p must be an int or float"):
        tensorplay.empty(2).bernoulli_("0.5")


def refused_random_calls(target):
    yield lambda: target.uniform_(5, 1)
    yield lambda: target.normal_(0, -1)
    yield lambda: target.bernoulli_(2.0)
    yield lambda: target.uniform_(0, 1e39)
    yield lambda: target.normal_(float("nan"), 1)
    yield lambda: target.uniform_(0, 1, generator=3)
    yield lambda: target.normal_("0")


def test_a_refused_random_fill_changes_nothing():
    # The tensor a later backward() needs: a refused call must not count as a change.
    weight = tensorplay.ones(3, requires_grad=True)
    saved = tensorplay.tensor([2.0, 3.0, 4.0])
    loss = (weight * saved).sum()
    for call in refused_random_calls(saved):
        with pytest.raises((TypeError, ValueError)):
            call()
    assert saved.tolist() == [2.0, 3.0, 4.0]
    # "modified by an inplace operation" if any call had counted
    loss.backward(retain_graph=True)
    assert weight.grad.tolist() == [2.0, 3.0, 4.0]
    saved.uniform_()  # a valid fill still counts
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_random_fills_of_tensors_that_require_grad_are_refused_unchanged():
    leaf = tensorplay.ones(2, requires_grad=True)
    for call in (lambda: leaf.uniform_(), lambda: leaf.normal_(), lambda: leaf.bernoulli_()):
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            call()
    assert leaf.tolist() == [1.0, 1.0]
    with tensorplay.no_grad():
        leaf.uniform_(2, 3)
    assert all(2 <= v < 3 for v in leaf.tolist())


@pytest.mark.parametrize("dtype, low, high, name, limit", [
    ("float16", 0, 1e6, "high", "65504"),
    ("float16", -7e4, 0, "low", "65504"),
    ("float16", -4e4, 4e4, "the range", "65504"),
    ("bfloat16", 0, 3.4e38, "high", r"3.38953e\+38"),
    ("float32", 0, 1e39, "high", r"3.40282e\+38"),
    ("float32", -3e38, 3e38, "the range", r"3.40282e\+38"),
    ("float64", 0, float("inf"), "high", r"1.79769e\+308"),
    ("float64", -1e308, 1e308, "the range", r"1.79769e\+308"),
    ("float32", float("nan"), 1, "low", r"3.40282e\+38"),
])
def test_uniform_bounds_the_dtype_cannot_hold_are_refused(dtype, low, high, name, limit):
    target = tensorplay.zeros(4, dtype=getattr(tensorplay, dtype))
    with pytest.raises(ValueError, match=rf"uniform_\(\): {name}.*tensorplay.{dtype}.*{limit}"):
        target.uniform_(low, high)
    assert values(target).tolist() == [0.0] * 4


@pytest.mark.parametrize("dtype, mean, std, name", [
    ("float16", 1e5, 1, "mean"), ("float16", 0, 7e4, "std"), ("float32", 1e39, 1, "mean"),
    ("float64", float("inf"), 1, "mean"), ("float32", float("nan"), 1, "mean"),
    ("bfloat16", 0, 1e39, "std"), ("float32", 0, float("nan"), "std"),
])
def test_normal_parameters_the_dtype_cannot_hold_are_refused(dtype, mean, std, name):
    target = tensorplay.zeros(4, dtype=getattr(tensorplay, dtype))
    with pytest.raises(ValueError, match=rf"normal_\(\): {name}"):
        target.normal_(mean, std)
    assert values(target).tolist() == [0.0] * 4


def test_bounds_at_the_dtype_limits_draw_finite_numbers():
    half = tensorplay.empty(4096, dtype=tensorplay.float16).uniform_(0, 65504)
    assert numpy.isfinite(values(half)).all() and values(half).max() > 30000
    assert (values(half) == 0).mean() < 0.01
    wide = tensorplay.empty(4096).uniform_(-1.7e38, 1.7e38)
    assert numpy.isfinite(values(wide)).all() and (values(wide) < 0).any()
    spread = tensorplay.empty(16, dtype=tensorplay.float16).normal_(100, 1)
    assert numpy.isfinite(values(spread)).all()


def test_generator_must_be_a_generator():
    with pytest.raises(TypeError, match="generator must be a tensorplay.Generator or None, "
                                        "got int"):
        tensorplay.rand(2, generator=3)


# -- graph-safe state objects (PyTorch's graphsafe_get_state / graphsafe_set_state / clone_state)


def test_graphsafe_get_state_shares_the_state_and_clone_state_copies_it():
    generator = tensorplay.Generator().manual_seed(11)
    shared = generator.graphsafe_get_state()
    copy = generator.clone_state()
    assert isinstance(shared, tensorplay.Generator) and isinstance(copy, tensorplay.Generator)
    tensorplay.rand(5, generator=shared)
    assert generator.get_offset() == shared.get_offset() == 4  # one state, two handles
    assert copy.get_offset() == 0 and copy.initial_seed() == 11
    # The copy draws what the original drew from the same state.
    assert values(tensorplay.rand(5, generator=copy)).tolist() == \
        values(tensorplay.rand(5, generator=tensorplay.Generator().manual_seed(11))).tolist()
    generator.graphsafe_set_state(copy)
    assert generator.get_offset() == 4 and shared.get_offset() == 4
    tensorplay.rand(5, generator=generator)
    assert copy.get_offset() == 8 and shared.get_offset() == 4
    assert generator.graphsafe_set_state(shared) is None


def test_offsets_are_read_and_set_in_steps_of_four():
    generator = tensorplay.Generator().manual_seed(3)
    assert generator.set_offset(8) is generator and generator.get_offset() == 8
    assert generator.initial_seed() == 3
    assert generator.get_state().tolist() == state_of(3, 8)
    with pytest.raises(ValueError, match="multiple of 4"):
        generator.set_offset(6)
    for bad in (-4, 1 << 64):
        with pytest.raises(ValueError, match="offset"):
            generator.set_offset(bad)
    with pytest.raises(TypeError, match="offset"):
        generator.set_offset(4.0)
    assert generator.get_offset() == 8  # nothing changed


def test_graphsafe_set_state_checks_its_argument():
    generator = tensorplay.Generator()
    for bad in (None, 3, generator.get_state()):
        with pytest.raises(TypeError, match="state must be a tensorplay.Generator"):
            generator.graphsafe_set_state(bad)


def test_register_generator_state_checks_its_argument_without_a_device():
    graph = tensorplay.cuda.CUDAGraph()
    for bad in (None, 3, "cuda"):
        with pytest.raises(TypeError, match="generator must be a tensorplay.Generator"):
            graph.register_generator_state(bad)
    with pytest.raises(ValueError, match="CPU generator"):
        graph.register_generator_state(tensorplay.Generator())
    with pytest.raises(ValueError, match="CPU generator"):
        tensorplay.accelerator.Graph().register_generator_state(tensorplay.Generator())


def test_external_is_a_keyword_only_flag_of_event():
    import inspect
    parameters = inspect.signature(tensorplay.cuda.Event).parameters
    assert parameters["external"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["external"].default is False
    with pytest.raises(TypeError):
        tensorplay.cuda.Event(False, False, True)
    with pytest.raises(TypeError, match="external"):
        tensorplay.cuda.Event(external="yes")


# --------------------------------------------------------------------------------------------
# On a GPU (marked gpu): exactness against the CPU reference, statistics, state, streams
# --------------------------------------------------------------------------------------------

MILLIONS = 10_000_000
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def pair(seed):
    """A CUDA and a CPU generator with one seed."""
    return tensorplay.Generator("cuda").manual_seed(seed), tensorplay.Generator().manual_seed(seed)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("count", [1, 7, 4096, 1_000_003])
def test_cuda_uniforms_equal_the_cpu_reference_bit_for_bit(dtype, count):
    on_gpu, on_cpu = pair(1234)
    element = getattr(tensorplay, dtype)
    for low, high in ((0, 1), (-2.5, 7.0)):
        gpu = tensorplay.empty(count, dtype=element, device="cuda").uniform_(low, high,
                                                                              generator=on_gpu)
        cpu = tensorplay.empty(count, dtype=element).uniform_(low, high, generator=on_cpu)
        assert numpy.array_equal(values(gpu), values(cpu))
    assert on_gpu.get_state().tolist() == on_cpu.get_state().tolist()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_cuda_normals_equal_the_cpu_reference_to_float_rounding(dtype):
    on_gpu, on_cpu = pair(99)
    element = getattr(tensorplay, dtype)
    gpu = values(tensorplay.randn(100_003, dtype=element, device="cuda", generator=on_gpu))
    cpu = values(tensorplay.randn(100_003, dtype=element, generator=on_cpu))
    # float: the kernel's fast hardware sine is within about 2^-20.5 (kernels/philox.cu);
    # 16-bit types: one rounding step of the output type.
    tolerance = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-12}[dtype]
    assert numpy.allclose(gpu, cpu, rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "float32"])
def test_cuda_integers_and_masks_equal_the_cpu_reference(dtype):
    on_gpu, on_cpu = pair(5)
    element = getattr(tensorplay, dtype)
    low, high = (0, 200) if dtype == "uint8" else (-100, 100)
    gpu = tensorplay.randint(low, high, (10_001,), dtype=element, device="cuda", generator=on_gpu)
    cpu = tensorplay.randint(low, high, (10_001,), dtype=element, generator=on_cpu)
    assert numpy.array_equal(values(gpu), values(cpu))
    gpu_mask = tensorplay.empty(10_001, dtype=element, device="cuda").bernoulli_(
        0.3, generator=on_gpu)
    cpu_mask = tensorplay.empty(10_001, dtype=element).bernoulli_(0.3, generator=on_cpu)
    assert numpy.array_equal(values(gpu_mask), values(cpu_mask))


@pytest.mark.gpu
def test_wide_integer_ranges_equal_the_cpu_reference():
    on_gpu, on_cpu = pair(6)
    gpu = tensorplay.randint(-(1 << 62), 1 << 62, (4099,), device="cuda", generator=on_gpu)
    cpu = tensorplay.randint(-(1 << 62), 1 << 62, (4099,), generator=on_cpu)
    assert numpy.array_equal(values(gpu), values(cpu))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOATS)
def test_persistent_grid_passes_and_misaligned_outputs_equal_the_cpu_reference(dtype):
    # 2M + 3 elements: several grid-stride passes of the persistent grid and a partial last
    # group. Written once aligned, once from element 1 of a buffer (no vector stores at all).
    count = (2 << 20) + 3
    element = getattr(tensorplay, dtype)
    for start in (0, 1):
        on_gpu, on_cpu = pair(77 + start)
        gpu = tensorplay.empty(count + start, dtype=element, device="cuda")[start:]
        gpu.uniform_(-1.0, 3.0, generator=on_gpu)
        cpu = tensorplay.empty(count, dtype=element).uniform_(-1.0, 3.0, generator=on_cpu)
        assert numpy.array_equal(values(gpu), values(cpu))
        normal = values(tensorplay.empty(count + start, dtype=element, device="cuda")[start:]
                        .normal_(generator=on_gpu))
        reference = values(tensorplay.empty(count, dtype=element).normal_(generator=on_cpu))
        tolerance = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5,
                     "float64": 1e-12}[dtype]
        assert numpy.allclose(normal, reference, rtol=tolerance, atol=tolerance)


@pytest.mark.gpu
def test_four_int64_groups_through_shared_memory_equal_the_cpu_reference():
    # Groups of four 64-bit values (32 bytes) are stored through shared memory by whole warps;
    # at element 1 of a buffer they are not aligned, and every group takes the direct stores.
    count = (2 << 20) + 3
    for start in (0, 1):
        on_gpu, on_cpu = pair(31 + start)
        gpu = tensorplay.empty(count + start, dtype=tensorplay.int64, device="cuda")[start:]
        gpu.bernoulli_(0.25, generator=on_gpu)
        cpu = tensorplay.empty(count, dtype=tensorplay.int64).bernoulli_(0.25, generator=on_cpu)
        assert numpy.array_equal(values(gpu), values(cpu))
        gpu = tensorplay.randint(-7, 1000, (count,), device="cuda", generator=on_gpu)
        cpu = tensorplay.randint(-7, 1000, (count,), generator=on_cpu)
        assert numpy.array_equal(values(gpu), values(cpu))


@pytest.mark.gpu
@pytest.mark.parametrize("low, high", [(0, 256), (-8, 8), (0, 1 << 40), (5, 5 + (1 << 33) + 1),
                                       (0, 1000), (0, 3), (-3, (1 << 31) + 7), (0, (1 << 32) - 1)])
def test_power_of_two_and_other_ranges_equal_the_cpu_reference(low, high):
    # Power-of-two ranges are masks in the kernels, the others a modulo (for 32-bit ranges into
    # int64, Lemire's direct remainder, up to the largest range of one word): the same numbers.
    on_gpu, on_cpu = pair(high)
    gpu = tensorplay.randint(low, high, ((1 << 20) + 1,), device="cuda", generator=on_gpu)
    cpu = tensorplay.randint(low, high, ((1 << 20) + 1,), generator=on_cpu)
    assert numpy.array_equal(values(gpu), values(cpu))


@pytest.mark.gpu
def test_ten_million_uniforms_have_the_right_mean_and_variance():
    tensorplay.manual_seed(2026)
    drawn = values(tensorplay.rand(MILLIONS, device="cuda")).astype(numpy.float64)
    assert drawn.min() >= 0.0 and drawn.max() < 1.0
    # Five standard errors: sd(mean) = sqrt(1/12/n), sd(var) = sqrt((1/80 - 1/144)/n).
    assert abs(drawn.mean() - 0.5) < 5 * (1 / 12 / MILLIONS) ** 0.5
    assert abs(drawn.var() - 1 / 12) < 5 * ((1 / 80 - 1 / 144) / MILLIONS) ** 0.5


@pytest.mark.gpu
def test_ten_million_normals_have_the_right_mean_and_variance():
    tensorplay.manual_seed(2027)
    drawn = values(tensorplay.randn(MILLIONS, device="cuda")).astype(numpy.float64)
    assert abs(drawn.mean()) < 5 * (1 / MILLIONS) ** 0.5
    assert abs(drawn.var() - 1.0) < 5 * (2 / MILLIONS) ** 0.5
    # Tails: P(|z| > 3) = 0.0026998.
    assert abs((numpy.abs(drawn) > 3).mean() - 0.0026998) < 5 * (0.0027 / MILLIONS) ** 0.5


@pytest.mark.gpu
def test_randint_stays_in_range_with_a_flat_histogram():
    tensorplay.manual_seed(7)
    drawn = values(tensorplay.randint(-5, 5, (MILLIONS,), device="cuda"))
    assert drawn.min() == -5 and drawn.max() == 4
    counts = numpy.bincount(drawn + 5, minlength=10)
    expected = MILLIONS / 10
    assert numpy.all(numpy.abs(counts - expected) < 5 * (expected * 0.9) ** 0.5)


@pytest.mark.gpu
def test_bernoulli_rate_matches_p():
    mask = tensorplay.empty(MILLIONS, device="cuda").bernoulli_(0.3)
    rate = values(mask).mean()
    assert abs(rate - 0.3) < 5 * (0.21 / MILLIONS) ** 0.5
    assert set(numpy.unique(values(mask))) == {0.0, 1.0}


@pytest.mark.gpu
def test_consecutive_calls_draw_independent_numbers():
    tensorplay.manual_seed(3)
    first = values(tensorplay.rand(1_000_000, device="cuda")).astype(numpy.float64)
    second = values(tensorplay.rand(1_000_000, device="cuda")).astype(numpy.float64)
    assert not numpy.array_equal(first, second)
    assert abs(numpy.corrcoef(first, second)[0, 1]) < 5e-3


@pytest.mark.gpu
def test_saving_and_restoring_the_state_repeats_the_numbers():
    random = accelerator.random
    random.manual_seed(42)
    state = random.get_rng_state()
    first = values(tensorplay.randn(12345, device="cuda"))
    assert random.get_rng_state().tolist()[8:] == list((4).to_bytes(8, "little"))
    random.set_rng_state(state)
    assert numpy.array_equal(values(tensorplay.randn(12345, device="cuda")), first)
    # The default generator of the device is what rand uses without generator=.
    on_cpu = tensorplay.Generator().set_state(state)
    random.set_rng_state(state)
    assert numpy.array_equal(values(tensorplay.rand(99, device="cuda")),
                             values(tensorplay.rand(99, generator=on_cpu)))


@pytest.mark.gpu
def test_top_level_manual_seed_seeds_cpu_and_cuda_alike():
    tensorplay.manual_seed(77)
    assert accelerator.random.initial_seed() == 77 and tensorplay.initial_seed() == 77
    assert numpy.array_equal(values(tensorplay.rand(1000, device="cuda")),
                             values(tensorplay.rand(1000)))


@pytest.mark.gpu
def test_generators_on_different_streams_keep_their_own_sequences():
    first, second = tensorplay.cuda.Stream(), tensorplay.cuda.Stream()
    generators = [tensorplay.Generator("cuda").manual_seed(seed) for seed in (1, 2)]
    outputs = []
    for stream, generator in zip((first, second), generators):
        with tensorplay.cuda.stream(stream):
            outputs.append([tensorplay.rand(100_000, device="cuda", generator=generator)
                            for _ in range(3)])
    first.synchronize()
    second.synchronize()
    for seed, drawn in zip((1, 2), outputs):
        reference = tensorplay.Generator().manual_seed(seed)
        for tensor in drawn:
            assert numpy.array_equal(values(tensor),
                                     values(tensorplay.rand(100_000, generator=reference)))


@pytest.mark.gpu
def test_generator_and_tensor_must_share_a_device():
    with pytest.raises(ValueError, match="generator is on cpu but the tensor is on cuda:0"):
        tensorplay.rand(3, device="cuda", generator=tensorplay.Generator())
    assert tensorplay.Generator("cuda").device == tensorplay.device("cuda", 0)


@pytest.mark.gpu
def test_random_ops_refuse_an_unregistered_capture():
    from cuda.bindings import runtime
    target = tensorplay.empty(1024, device="cuda").uniform_()  # compiles the kernel first
    stream = tensorplay.cuda.Stream()
    with tensorplay.cuda.stream(stream):
        status, = runtime.cudaStreamBeginCapture(
            stream.cuda_stream, runtime.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal)
        assert status == runtime.cudaError_t.cudaSuccess
        try:
            with pytest.raises(RuntimeError, match="not registered with the CUDA graph capture"):
                target.uniform_()
        finally:
            status, graph = runtime.cudaStreamEndCapture(stream.cuda_stream)
            runtime.cudaGraphDestroy(graph)


FORK_AFTER_DEFERRED_SEED = """
import os
import tensorplay
tensorplay.accelerator.random.manual_seed(4321)    # deferred: CUDA is not initialised
assert tensorplay.accelerator.device_count() >= 1  # counted through NVML, still not initialised
pid = os.fork()
if pid == 0:
    gpu = tensorplay.rand(1000, device="cuda").cpu().numpy()
    cpu = tensorplay.rand(1000, generator=tensorplay.Generator().manual_seed(4321)).numpy()
    os._exit(0 if (gpu == cpu).all() else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.gpu
def test_fork_after_deferred_seeding_gives_the_child_the_seeded_stream():
    output = subprocess.run([sys.executable, "-c", FORK_AFTER_DEFERRED_SEED],
                            capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "0", output.stderr
