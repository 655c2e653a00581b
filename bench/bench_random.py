"""Random-number benchmarks on the GPU: tensorplay against PyTorch and CuPy, as ratios, in one run.

Run on the GPU machine after installing the package:  python bench/bench_random.py [--quick]
[--json PATH]. Device times come from CUDA events around repeated draws into a preallocated
tensor (the allocator is not what is measured), and around the factories as users call them;
host costs are timeit per call. Each figure is the median over interleaved trials. Ratios are
tensorplay / other: below 1.0 is faster. Targets: rand and randn of 64M float32 at
least 0.9x PyTorch's throughput (time ratio <= 1/0.9), get_rng_state and set_rng_state at most
0.5x PyTorch's per-call cost, manual_seed below PyTorch's.
"""
from harness.baselines import (CUPY, OURS, TORCH, compare, cupy_ms, import_peer, interleaved,
                               main, ours_ms, per_call_ns, torch_ms, trials)

COUNT = 64 << 20
THROUGHPUT = 1 / 0.9


def rng(quick, notes):
    import tensorplay as tp
    random = tp.accelerator.random
    torch = import_peer("torch", TORCH, notes)
    cupy = import_peer("cupy", CUPY, notes)
    ours, small_ours = tp.empty(COUNT, device="cuda"), tp.empty(8, device="cuda")
    state_ours = random.get_rng_state()
    sides = {OURS: lambda: {
        "uniform": ours_ms(lambda: ours.uniform_()),
        "normal": ours_ms(lambda: ours.normal_()),
        "rand": ours_ms(lambda: tp.rand(COUNT, device="cuda")),
        "randn": ours_ms(lambda: tp.randn(COUNT, device="cuda")),
        "get": per_call_ns(random.get_rng_state) / 1e3,
        "set": per_call_ns(lambda: random.set_rng_state(state_ours)) / 1e3,
        "seed": per_call_ns(lambda: random.manual_seed(1234)) / 1e3,
        "global seed": per_call_ns(lambda: tp.manual_seed(1234)) / 1e3,
        "small": per_call_ns(lambda: small_ours.uniform_()) / 1e3}}
    if torch is not None:
        theirs, small_theirs = torch.empty(COUNT, device="cuda"), torch.empty(8, device="cuda")
        state_theirs = torch.cuda.get_rng_state()
        sides[TORCH] = lambda: {
            "uniform": torch_ms(lambda: theirs.uniform_()),
            "normal": torch_ms(lambda: theirs.normal_()),
            "rand": torch_ms(lambda: torch.rand(COUNT, device="cuda")),
            "randn": torch_ms(lambda: torch.randn(COUNT, device="cuda")),
            "get": per_call_ns(torch.cuda.get_rng_state) / 1e3,
            "set": per_call_ns(lambda: torch.cuda.set_rng_state(state_theirs)) / 1e3,
            "seed": per_call_ns(lambda: torch.cuda.manual_seed(1234)) / 1e3,
            "global seed": per_call_ns(lambda: torch.manual_seed(1234)) / 1e3,
            "small": per_call_ns(lambda: small_theirs.uniform_()) / 1e3}
    if cupy is not None:
        generator = cupy.random.default_rng(1234)
        sides[CUPY] = lambda: {
            "rand": cupy_ms(cupy, lambda: generator.random(COUNT, dtype=cupy.float32)),
            "randn": cupy_ms(cupy, lambda: generator.standard_normal(COUNT,
                                                                     dtype=cupy.float32))}
        notes.append("RNG: CuPy's figures are cupy.random.default_rng()'s random() and "
                     "standard_normal() of 64M float32, which allocate as the factories do")
    figures = interleaved(sides, trials(quick), notes)
    seconds = figures[OURS]["uniform"].median * 1e-3
    notes.append(f"RNG: uniform_ of 64M float32 writes {COUNT * 4 / seconds / 1e9:.0f} GB/s "
                 "(tensorplay)")
    tp.accelerator.synchronize()
    return (compare("RNG", "uniform_() of 64M float32, device", "ms", figures, key="uniform",
                    targets={TORCH: THROUGHPUT})
            + compare("RNG", "normal_() of 64M float32, device", "ms", figures, key="normal",
                      targets={TORCH: THROUGHPUT})
            + compare("RNG", "rand(64M) factory, device", "ms", figures, key="rand",
                      targets={TORCH: THROUGHPUT})
            + compare("RNG", "randn(64M) factory, device", "ms", figures, key="randn",
                      targets={TORCH: THROUGHPUT})
            + compare("RNG", "get_rng_state(), host", "us", figures, key="get",
                      targets={TORCH: 0.5})
            + compare("RNG", "set_rng_state(), host", "us", figures, key="set",
                      targets={TORCH: 0.5})
            + compare("RNG", "accelerator manual_seed(), host", "us", figures, key="seed",
                      targets={TORCH: 1.0})
            + compare("RNG", "tensorplay.manual_seed(), host", "us", figures, key="global seed",
                      targets={TORCH: 1.0})
            + compare("RNG", "uniform_() of 8 elements, host launch", "us", figures,
                      key="small"))


AREAS = {"RNG": rng}

if __name__ == "__main__":
    main(AREAS, __doc__)
