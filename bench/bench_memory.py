"""Memory benchmarks on the GPU: tensorplay against PyTorch and raw CUDA C, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_memory.py
Each figure is the best of several timeit repeats, in nanoseconds per call. Ratios are
tensorplay / other, so below 1.0 means tensorplay is faster.
"""
import subprocess
import sys
import timeit

import torch
from baselines import per_call_ns, raw_c_figures

import tensorplay
from tensorplay import _schema, cuda
from tensorplay.accelerator import memory

SIZES = {"1 KiB": 1 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}


def import_seconds(module):
    """Wall time of importing module in a fresh interpreter, minus the bare interpreter."""
    def run(code):
        best = float("inf")
        for _ in range(5):
            start = timeit.default_timer()
            subprocess.run([sys.executable, "-c", code], check=True)
            best = min(best, timeit.default_timer() - start)
        return best
    return run(f"import {module}") - run("pass")


def import_makes_no_cuda_call():
    """cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED (3) until someone calls cuInit."""
    code = ("import tensorplay, tensorplay.accelerator, tensorplay.cuda\n"
            "from cuda.bindings import driver\n"
            "print(int(driver.cuDeviceGetCount()[0]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return result.stdout.strip() == "3"


def row(name, ours, others):
    cells = [f"{name:<34}", f"tensorplay {ours:10.1f} ns"]
    for label, value in others:
        cells.append(f"{label} {value:10.1f} ns  ratio {ours / value:6.3f}")
    print("  ".join(cells))


def main():
    device = torch.device("cuda", 0)
    torch.empty(1, device=device)
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"tensorplay schema {_schema.SCHEMA_HASH}")
    raw = raw_c_figures()
    results = {}
    print("\nallocate + free, cache hits")
    for label, size in SIZES.items():
        ours = per_call_ns(lambda: cuda.caching_allocator_delete(cuda.caching_allocator_alloc(size)))
        empty = per_call_ns(lambda: torch.empty(size, dtype=torch.uint8, device=device))
        direct = per_call_ns(lambda: torch.cuda.caching_allocator_delete(
            torch.cuda.caching_allocator_alloc(size)))
        others = [("torch.empty+del", empty), ("torch.cuda.caching_allocator", direct)]
        if ("cudaMalloc+cudaFree", size) in raw:
            others.append(("raw C cudaMalloc+cudaFree", raw[("cudaMalloc+cudaFree", size)]))
        row(f"alloc+free {label}", ours, others)
        results[label] = ours / empty

    print("\ntensor factory, cache hits")
    ours_empty = per_call_ns(lambda: tensorplay.empty(1 << 20, dtype=tensorplay.uint8,
                                                      device="cuda"))
    torch_empty = per_call_ns(lambda: torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
    row("empty(1 MiB)+release", ours_empty, [("torch.empty+del", torch_empty)])

    print("\nstatistics")
    ours_allocated = per_call_ns(memory.memory_allocated, number=200_000)
    torch_allocated = per_call_ns(torch.cuda.memory_allocated, number=20_000)
    accelerator_allocated = per_call_ns(torch.accelerator.memory.memory_allocated, number=2_000)
    row("memory_allocated()", ours_allocated,
        [("torch.cuda", torch_allocated), ("torch.accelerator.memory", accelerator_allocated)])
    ours_stats = per_call_ns(memory.memory_stats, number=2_000)
    torch_stats = per_call_ns(torch.cuda.memory_stats, number=2_000)
    row("memory_stats()", ours_stats, [("torch.cuda", torch_stats)])
    ours_info = per_call_ns(memory.get_memory_info, number=2_000)
    info_others = [("torch.cuda.mem_get_info", per_call_ns(torch.cuda.mem_get_info, number=2_000))]
    if ("cudaMemGetInfo", 0) in raw:
        info_others.append(("raw C cudaMemGetInfo", raw[("cudaMemGetInfo", 0)]))
    row("get_memory_info()", ours_info, info_others)

    print("\nimport")
    ours_import, torch_import = import_seconds("tensorplay"), import_seconds("torch")
    no_cuda = import_makes_no_cuda_call()
    print(f"import tensorplay {ours_import:.3f} s   import torch {torch_import:.3f} s   "
          f"ratio {ours_import / torch_import:.3f}   no CUDA call at import: {no_cuda}")

    print("\ntargets")
    for label, ratio in results.items():
        print(f"  alloc+free {label} no slower than torch.empty+del: "
              f"{'met' if ratio <= 1.0 else 'MISSED'} (ratio {ratio:.3f})")
    print(f"  empty(1 MiB)+release at most 0.5x torch.empty: "
          f"{'met' if ours_empty <= 0.5 * torch_empty else 'MISSED'} "
          f"(ratio {ours_empty / torch_empty:.3f})")
    print(f"  memory_stats() at most 0.1x torch.cuda.memory_stats: "
          f"{'met' if ours_stats <= 0.1 * torch_stats else 'MISSED'} "
          f"(ratio {ours_stats / torch_stats:.3f})")
    print(f"  memory_allocated() under 500 ns: "
          f"{'met' if ours_allocated < 500 else 'MISSED'} ({ours_allocated:.1f} ns)")
    print(f"  import under 0.25 s with no CUDA call: "
          f"{'met' if ours_import < 0.25 and no_cuda else 'MISSED'} ({ours_import:.3f} s)")


if __name__ == "__main__":
    main()
