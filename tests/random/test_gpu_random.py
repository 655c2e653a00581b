"""Random numbers on the GPU: exactness against the CPU reference, statistics, state, streams."""
import subprocess
import sys

import numpy
import pytest

import tensorplay
from tensorplay import accelerator

pytestmark = pytest.mark.gpu

MILLIONS = 10_000_000
FLOATS = ["float16", "bfloat16", "float32", "float64"]


def values(tensor):
    tensor = tensor.cpu()
    return tensor.to(tensorplay.float32).numpy() if tensor.dtype is tensorplay.bfloat16 \
        else tensor.numpy()


def pair(seed):
    """A CUDA and a CPU generator with one seed."""
    return tensorplay.Generator("cuda").manual_seed(seed), tensorplay.Generator().manual_seed(seed)


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


def test_wide_integer_ranges_equal_the_cpu_reference():
    on_gpu, on_cpu = pair(6)
    gpu = tensorplay.randint(-(1 << 62), 1 << 62, (4099,), device="cuda", generator=on_gpu)
    cpu = tensorplay.randint(-(1 << 62), 1 << 62, (4099,), generator=on_cpu)
    assert numpy.array_equal(values(gpu), values(cpu))


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


@pytest.mark.parametrize("low, high", [(0, 256), (-8, 8), (0, 1 << 40), (5, 5 + (1 << 33) + 1),
                                       (0, 1000), (0, 3), (-3, (1 << 31) + 7), (0, (1 << 32) - 1)])
def test_power_of_two_and_other_ranges_equal_the_cpu_reference(low, high):
    # Power-of-two ranges are masks in the kernels, the others a modulo (for 32-bit ranges into
    # int64, Lemire's direct remainder, up to the largest range of one word): the same numbers.
    on_gpu, on_cpu = pair(high)
    gpu = tensorplay.randint(low, high, ((1 << 20) + 1,), device="cuda", generator=on_gpu)
    cpu = tensorplay.randint(low, high, ((1 << 20) + 1,), generator=on_cpu)
    assert numpy.array_equal(values(gpu), values(cpu))


def test_ten_million_uniforms_have_the_right_mean_and_variance():
    tensorplay.manual_seed(2026)
    drawn = values(tensorplay.rand(MILLIONS, device="cuda")).astype(numpy.float64)
    assert drawn.min() >= 0.0 and drawn.max() < 1.0
    # Five standard errors: sd(mean) = sqrt(1/12/n), sd(var) = sqrt((1/80 - 1/144)/n).
    assert abs(drawn.mean() - 0.5) < 5 * (1 / 12 / MILLIONS) ** 0.5
    assert abs(drawn.var() - 1 / 12) < 5 * ((1 / 80 - 1 / 144) / MILLIONS) ** 0.5


def test_ten_million_normals_have_the_right_mean_and_variance():
    tensorplay.manual_seed(2027)
    drawn = values(tensorplay.randn(MILLIONS, device="cuda")).astype(numpy.float64)
    assert abs(drawn.mean()) < 5 * (1 / MILLIONS) ** 0.5
    assert abs(drawn.var() - 1.0) < 5 * (2 / MILLIONS) ** 0.5
    # Tails: P(|z| > 3) = 0.0026998.
    assert abs((numpy.abs(drawn) > 3).mean() - 0.0026998) < 5 * (0.0027 / MILLIONS) ** 0.5


def test_randint_stays_in_range_with_a_flat_histogram():
    tensorplay.manual_seed(7)
    drawn = values(tensorplay.randint(-5, 5, (MILLIONS,), device="cuda"))
    assert drawn.min() == -5 and drawn.max() == 4
    counts = numpy.bincount(drawn + 5, minlength=10)
    expected = MILLIONS / 10
    assert numpy.all(numpy.abs(counts - expected) < 5 * (expected * 0.9) ** 0.5)


def test_bernoulli_rate_matches_p():
    mask = tensorplay.empty(MILLIONS, device="cuda").bernoulli_(0.3)
    rate = values(mask).mean()
    assert abs(rate - 0.3) < 5 * (0.21 / MILLIONS) ** 0.5
    assert set(numpy.unique(values(mask))) == {0.0, 1.0}


def test_consecutive_calls_draw_independent_numbers():
    tensorplay.manual_seed(3)
    first = values(tensorplay.rand(1_000_000, device="cuda")).astype(numpy.float64)
    second = values(tensorplay.rand(1_000_000, device="cuda")).astype(numpy.float64)
    assert not numpy.array_equal(first, second)
    assert abs(numpy.corrcoef(first, second)[0, 1]) < 5e-3


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


def test_top_level_manual_seed_seeds_cpu_and_cuda_alike():
    tensorplay.manual_seed(77)
    assert accelerator.random.initial_seed() == 77 and tensorplay.initial_seed() == 77
    assert numpy.array_equal(values(tensorplay.rand(1000, device="cuda")),
                             values(tensorplay.rand(1000)))


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


def test_generator_and_tensor_must_share_a_device():
    with pytest.raises(ValueError, match="generator is on cpu but the tensor is on cuda:0"):
        tensorplay.rand(3, device="cuda", generator=tensorplay.Generator())
    assert tensorplay.Generator("cuda").device == tensorplay.device("cuda", 0)


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


def test_fork_after_deferred_seeding_gives_the_child_the_seeded_stream():
    output = subprocess.run([sys.executable, "-c", FORK_AFTER_DEFERRED_SEED],
                            capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "0", output.stderr
