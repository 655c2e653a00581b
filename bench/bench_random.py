"""Random-number benchmarks on the GPU: tensorplay against PyTorch, as ratios, in one run.

Run on the GPU machine after installing the package:  python bench/bench_random.py
Device times come from CUDA events around repeated draws into a preallocated tensor (the
allocator is not what is measured); host costs are timeit per call. Ratios are
tensorplay / PyTorch: below 1.0 is faster. Targets (issue 10): rand and randn of 64M float32 at
least 0.9x PyTorch's throughput (time ratio <= 1/0.9), get_rng_state and set_rng_state at most
0.5x PyTorch's per-call cost, manual_seed below PyTorch's.
"""
import torch
from baselines import ours_ms, per_call_ns, torch_ms

import tensorplay as tp

COUNT = 64 << 20


def report(name, ours, theirs, unit, target_text, met):
    ratio = ours / theirs
    print(f"{name}: tensorplay {ours:.4f} {unit}  torch {theirs:.4f} {unit}  ratio {ratio:.3f}  "
          f"target {target_text}: {'met' if met(ratio) else 'MISSED'}")


def main():
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    ours = tp.empty(COUNT, device="cuda")
    theirs = torch.empty(COUNT, device="cuda")
    gigabytes = COUNT * 4 / 1e9

    uniform_ours = ours_ms(lambda: ours.uniform_())
    uniform_torch = torch_ms(lambda: theirs.uniform_())
    print(f"  uniform_ writes {gigabytes / (uniform_ours * 1e-3):.0f} GB/s (tensorplay)")
    report("rand 64M float32 (uniform_)", uniform_ours, uniform_torch, "ms",
           "throughput >= 0.9x", lambda ratio: ratio <= 1 / 0.9)
    normal_ours = ours_ms(lambda: ours.normal_())
    normal_torch = torch_ms(lambda: theirs.normal_())
    report("randn 64M float32 (normal_)", normal_ours, normal_torch, "ms",
           "throughput >= 0.9x", lambda ratio: ratio <= 1 / 0.9)
    # With allocation, as users call them (both libraries cache device memory).
    report("rand(64M) factory", ours_ms(lambda: tp.rand(COUNT, device="cuda")),
           torch_ms(lambda: torch.rand(COUNT, device="cuda")), "ms", "throughput >= 0.9x",
           lambda ratio: ratio <= 1 / 0.9)
    report("randn(64M) factory", ours_ms(lambda: tp.randn(COUNT, device="cuda")),
           torch_ms(lambda: torch.randn(COUNT, device="cuda")), "ms", "throughput >= 0.9x",
           lambda ratio: ratio <= 1 / 0.9)
    del ours, theirs

    random = tp.accelerator.random
    state_ours, state_torch = random.get_rng_state(), torch.cuda.get_rng_state()
    report("get_rng_state (host)", per_call_ns(random.get_rng_state) / 1e3,
           per_call_ns(torch.cuda.get_rng_state) / 1e3, "us", "<= 0.5x",
           lambda ratio: ratio <= 0.5)
    report("set_rng_state (host)", per_call_ns(lambda: random.set_rng_state(state_ours)) / 1e3,
           per_call_ns(lambda: torch.cuda.set_rng_state(state_torch)) / 1e3, "us", "<= 0.5x",
           lambda ratio: ratio <= 0.5)
    report("manual_seed (host)", per_call_ns(lambda: random.manual_seed(1234)) / 1e3,
           per_call_ns(lambda: torch.cuda.manual_seed(1234)) / 1e3, "us", "< 1.0x",
           lambda ratio: ratio < 1.0)
    report("tensorplay.manual_seed vs torch.manual_seed (host)",
           per_call_ns(lambda: tp.manual_seed(1234)) / 1e3,
           per_call_ns(lambda: torch.manual_seed(1234)) / 1e3, "us", "< 1.0x",
           lambda ratio: ratio < 1.0)

    small_ours, small_torch = tp.empty(8, device="cuda"), torch.empty(8, device="cuda")
    report("uniform_ of 8 elements (host launch)",
           per_call_ns(lambda: small_ours.uniform_(), number=20_000) / 1e3,
           per_call_ns(lambda: small_torch.uniform_(), number=20_000) / 1e3, "us",
           "informational", lambda ratio: True)
    tp.accelerator.synchronize()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
