"""Tensor benchmarks on the GPU: tensorplay against PyTorch, CuPy and raw CUDA C, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_tensor.py
[--area copies|elementwise] [--quick] [--json PATH]. Device times come from CUDA events around
repeated operations on the current stream; host launch overhead is timeit over a tiny op. Each
figure is the median over interleaved trials. Ratios are tensorplay / other: below 1.0 is
faster. Targets: copy_ within 10% of PyTorch's time, add within 15%.
"""
from harness.baselines import (CUPY, OURS, RAW_C, TORCH, compare, cupy_ms, import_peer,
                               interleaved, main, ours_ms, per_call_ns, raw_c_side, torch_ms,
                               trials)

COPY_BYTES = 256 << 20
COUNT = 64 << 20


def copies(quick, notes):
    import tensorplay as tp
    torch = import_peer("torch", TORCH, notes)
    cupy = import_peer("cupy", CUPY, notes)
    raw = raw_c_side("raw_cuda.c", notes)
    source, target = tp.ones(COPY_BYTES // 4, device="cuda"), tp.empty(COPY_BYTES // 4,
                                                                         device="cuda")
    sides = {OURS: lambda: {"copy": ours_ms(lambda: target.copy_(source))}}
    if torch is not None:
        torch_source = torch.ones(COPY_BYTES // 4, device="cuda")
        torch_target = torch.empty(COPY_BYTES // 4, device="cuda")
        sides[TORCH] = lambda: {"copy": torch_ms(lambda: torch_target.copy_(torch_source))}
    if cupy is not None:
        cupy_source = cupy.ones(COPY_BYTES // 4, dtype=cupy.float32)
        cupy_target = cupy.empty(COPY_BYTES // 4, dtype=cupy.float32)
        sides[CUPY] = lambda: {"copy": cupy_ms(cupy, lambda: cupy.copyto(cupy_target,
                                                                          cupy_source))}
    if raw is not None:
        sides[RAW_C] = lambda: {"copy": raw()[("cudaMemcpyDeviceToDevice", COPY_BYTES)]}
    figures = interleaved(sides, trials(quick), notes)
    seconds = figures[OURS]["copy"].median * 1e-3
    notes.append(f"copies: copy_ of 256 MiB moves {2 * COPY_BYTES / seconds / 1e9:.0f} GB/s, "
                 "read plus written (tensorplay)")
    return compare("copies", "copy_() 256 MiB device to device", "ms", figures, key="copy",
                   targets={TORCH: 1.10})


def elementwise(quick, notes):
    import tensorplay as tp
    torch = import_peer("torch", TORCH, notes)
    cupy = import_peer("cupy", CUPY, notes)
    a, b = tp.ones(COUNT, device="cuda"), tp.ones(COUNT, device="cuda")
    small_a, small_b = tp.ones(8, device="cuda"), tp.ones(8, device="cuda")
    sides = {OURS: lambda: {"add": ours_ms(lambda: a + b),
                            "launch": per_call_ns(lambda: small_a + small_b) / 1e3}}
    if torch is not None:
        ta, tb = torch.ones(COUNT, device="cuda"), torch.ones(COUNT, device="cuda")
        small_ta, small_tb = torch.ones(8, device="cuda"), torch.ones(8, device="cuda")
        sides[TORCH] = lambda: {"add": torch_ms(lambda: ta + tb),
                                "launch": per_call_ns(lambda: small_ta + small_tb) / 1e3}
    if cupy is not None:
        ca, cb = cupy.ones(COUNT, dtype=cupy.float32), cupy.ones(COUNT, dtype=cupy.float32)
        small_ca, small_cb = cupy.ones(8, dtype=cupy.float32), cupy.ones(8, dtype=cupy.float32)
        sides[CUPY] = lambda: {"add": cupy_ms(cupy, lambda: ca + cb),
                               "launch": per_call_ns(lambda: small_ca + small_cb) / 1e3}
    figures = interleaved(sides, trials(quick), notes)
    tp.accelerator.synchronize()
    return (compare("elementwise", "a + b, 64M float32, device", "ms", figures, key="add",
                    targets={TORCH: 1.15})
            + compare("elementwise", "a + b, 8 elements, host launch", "us", figures,
                      key="launch"))


AREAS = {"copies": copies, "elementwise": elementwise}

if __name__ == "__main__":
    main(AREAS, __doc__)
