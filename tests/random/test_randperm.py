"""randperm() on the CPU and on CUDA (marked gpu).

Ported from PyTorch's test/test_tensor_creation_ops.py (test_randperm: for n in 5, 100, 50000
and 100000, two draws from generators of one seed are equal and each sorts to arange(n), the
default dtype is int64, every integer and floating dtype that holds n - 1 gives the same order,
n too large for a dtype (2049 for float16, 257 for bfloat16, 128 for int8) is refused, n = 0 gives
an empty tensor; test_randperm_device_compatibility: a generator of another device is refused)
and from CuPy's tests/cupy_tests/random_tests/test_permutations.py (TestPermutationSoundness:
each permutation holds every integer once; TestPermutationRandomness: the first element is
spread evenly over the n values).
"""
import numpy
import pytest

import tensorplay as tp

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [5, 100, 50000, 100000])
def test_pytorch_randperm_is_a_permutation_fixed_by_the_seed(device, n):
    first = tp.randperm(n, generator=tp.Generator(device).manual_seed(123456), device=device)
    second = tp.randperm(n, generator=tp.Generator(device).manual_seed(123456), device=device)
    assert first.dtype == tp.int64 and tuple(first.shape) == (n,)
    assert first.device.type == tp.device(device).type
    numpy.testing.assert_array_equal(first.cpu().numpy(), second.cpu().numpy())
    numpy.testing.assert_array_equal(numpy.sort(first.cpu().numpy()), numpy.arange(n))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype, n", [("int64", 100), ("int32", 100), ("int16", 100),
                                      ("int8", 128), ("uint8", 256), ("float64", 100),
                                      ("float32", 100), ("float16", 2049), ("bfloat16", 257)])
def test_pytorch_every_dtype_gives_the_same_order(device, dtype, n):
    expected = tp.randperm(n, generator=tp.Generator(device).manual_seed(7), device=device)
    found = tp.randperm(n, generator=tp.Generator(device).manual_seed(7),
                        dtype=getattr(tp, dtype), device=device)
    assert found.dtype == getattr(tp, dtype)
    numpy.testing.assert_array_equal(found.to(tp.float64).cpu().numpy(),
                                     expected.cpu().numpy().astype(numpy.float64))


def test_one_seed_gives_one_order_on_every_device():
    cpu = tp.randperm(1000, generator=tp.Generator().manual_seed(3))
    again = tp.randperm(1000, generator=tp.Generator().manual_seed(3))
    assert cpu.tolist() == again.tolist()
    if tp.accelerator.is_available():
        cuda = tp.randperm(1000, generator=tp.Generator("cuda").manual_seed(3), device="cuda")
        assert cuda.tolist() == cpu.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_cupy_first_elements_spread_evenly(device):
    n, draws = 8, 4000
    generator = tp.Generator(device).manual_seed(11)
    counts = numpy.zeros(n)
    for _ in range(draws):
        counts[tp.randperm(n, generator=generator, device=device)[0].item()] += 1
    expected = draws / n
    chi_square = ((counts - expected) ** 2 / expected).sum()
    assert chi_square < 24.3  # the 0.999 quantile of chi-square with 7 degrees of freedom


def test_pytorch_edge_cases_and_refusals():
    assert tp.randperm(0).shape == (0,) and tp.randperm(0).dtype == tp.int64
    assert tp.randperm(1).tolist() == [0]
    floats = tp.randperm(6, dtype=tp.float32, requires_grad=True)
    assert floats.requires_grad and sorted(floats.tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="n cannot be greater than 2049 for tensorplay.float16"):
        tp.randperm(2050, dtype=tp.float16)
    with pytest.raises(ValueError, match="n cannot be greater than 257 for tensorplay.bfloat16"):
        tp.randperm(258, dtype=tp.bfloat16)
    with pytest.raises(ValueError, match="does not fit in tensorplay.int8"):
        tp.randperm(129, dtype=tp.int8)
    with pytest.raises(ValueError, match="n must be at least 0, got -1"):
        tp.randperm(-1)
    with pytest.raises(TypeError, match="n must be an int, got 3.0"):
        tp.randperm(3.0)
    with pytest.raises(TypeError, match="dtype must be one of"):
        tp.randperm(3, dtype=tp.bool)
    with pytest.raises(RuntimeError, match="Only Tensors of floating point"):
        tp.randperm(3, requires_grad=True)


@pytest.mark.gpu
def test_pytorch_a_generator_of_another_device_is_refused():
    with pytest.raises(ValueError, match="generator"):
        tp.randperm(5, generator=tp.Generator("cpu"), device="cuda")
    with pytest.raises(ValueError, match="generator"):
        tp.randperm(5, generator=tp.Generator("cuda"))


@pytest.mark.gpu
def test_a_capture_draws_new_permutations_on_each_replay(quiet_device):
    graph = tp.cuda.CUDAGraph()
    tp.randperm(64, device="cuda")  # the warm-up
    with tp.cuda.graph(graph):
        order = tp.randperm(64, device="cuda")
    seen = set()
    for _ in range(4):
        graph.replay()
        values = order.tolist()
        assert sorted(values) == list(range(64))
        seen.add(tuple(values))
    assert len(seen) == 4  # each replay draws from the default generator's next offset
