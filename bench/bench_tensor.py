"""Tensor benchmarks on the GPU: tensorplay against PyTorch and raw CUDA C, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_tensor.py
Device times come from CUDA events around repeated operations on the current stream; host
launch overhead is timeit over a tiny op. Ratios are tensorplay / other: below 1.0 is faster.
"""
import torch
from baselines import ours_ms, per_call_ns, raw_c_figures, torch_ms

import tensorplay as tp


def main():
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    raw = raw_c_figures()
    copy_bytes = 256 << 20

    ours_source = tp.ones(copy_bytes // 4, device="cuda")
    ours_target = tp.empty(copy_bytes // 4, device="cuda")
    torch_source = torch.ones(copy_bytes // 4, device="cuda")
    torch_target = torch.empty(copy_bytes // 4, device="cuda")
    ours_copy = ours_ms(lambda: ours_target.copy_(ours_source))
    torch_copy = torch_ms(lambda: torch_target.copy_(torch_source))
    bandwidth = 2 * copy_bytes / (ours_copy * 1e-3) / 1e9  # bytes read + written
    line = (f"copy_ 256 MiB device-to-device: tensorplay {ours_copy:.4f} ms ({bandwidth:.0f} GB/s)"
            f"  torch {torch_copy:.4f} ms  ratio {ours_copy / torch_copy:.3f}")
    if ("cudaMemcpyDeviceToDevice", copy_bytes) in raw:
        raw_copy = raw[("cudaMemcpyDeviceToDevice", copy_bytes)]
        line += f"  raw C {raw_copy:.4f} ms  ratio {ours_copy / raw_copy:.3f}"
    print(line)

    count = 64 << 20
    a, b = tp.ones(count, device="cuda"), tp.ones(count, device="cuda")
    ta, tb = torch.ones(count, device="cuda"), torch.ones(count, device="cuda")
    ours_add = ours_ms(lambda: a + b)
    torch_add = torch_ms(lambda: ta + tb)
    print(f"add 64M float32: tensorplay {ours_add:.4f} ms "
          f"({3 * count * 4 / (ours_add * 1e-3) / 1e9:.0f} GB/s)  torch {torch_add:.4f} ms  "
          f"ratio {ours_add / torch_add:.3f}")

    small_a, small_b = tp.ones(8, device="cuda"), tp.ones(8, device="cuda")
    small_ta, small_tb = torch.ones(8, device="cuda"), torch.ones(8, device="cuda")
    ours_launch = per_call_ns(lambda: small_a + small_b, number=20_000) / 1e3
    torch_launch = per_call_ns(lambda: small_ta + small_tb, number=20_000) / 1e3
    tp.accelerator.synchronize()
    torch.cuda.synchronize()
    print(f"launch overhead, 8-element add (host): tensorplay {ours_launch:.2f} us  "
          f"torch {torch_launch:.2f} us  ratio {ours_launch / torch_launch:.3f}")

    print("\ntargets")
    print(f"  copy_ bandwidth within 10% of PyTorch: "
          f"{'met' if ours_copy <= torch_copy * 1.10 else 'MISSED'} "
          f"(ratio {ours_copy / torch_copy:.3f})")
    print(f"  add within 15% of PyTorch: {'met' if ours_add <= torch_add * 1.15 else 'MISSED'} "
          f"(ratio {ours_add / torch_add:.3f})")


if __name__ == "__main__":
    main()
