"""Tensor benchmarks on the GPU: tensorplay against PyTorch, CuPy and raw CUDA C, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_tensor.py
[--area copies|elementwise|small ops|promotion] [--quick] [--json PATH]. Device times come from
CUDA events around repeated operations on the current stream; the host cost of an eager op is
timeit over an op on SMALL float32 elements (a + b, and x += 1 in place), in repeats of
LAUNCH_CALLS ops with the device synchronised between repeats, best repeat, beside raw C's
cuLaunchKernel of one kernel on the same schedule (raw/raw_graph_launch.cu: the floor no library
goes below). Each figure is the median over interleaved trials. Ratios are tensorplay / other:
below 1.0 is faster. Targets: copy_ within 10% of PyTorch's time, add within 15%; the host cost
of a small op at most 0.5x PyTorch's. The small ops area times, on the same schedule, the host
cost of composite ops of small tensors (softmax, cross_entropy, indexing, cat, stack) beside
PyTorch's, target no slower. The promotion area times the first float32 + float64 of a fresh
process (its kernel compiled by NVRTC on first use, or read from the disk cache), in a
subprocess per trial.
"""
import os
import subprocess
import sys
import tempfile

from harness.baselines import (CUPY, OURS, RAW_C, TORCH, compare, cupy_ms, import_peer,
                               interleaved, main, ours_ms, per_call_ns, raw_c_side, torch_ms,
                               trials)

COPY_BYTES = 256 << 20
COUNT = 64 << 20
SMALL = 16
# Ops a host-time repeat queues: fewer than CUDA's launch queue holds, so that the host never
# waits for the device, whichever is faster.
LAUNCH_CALLS = 500
LAUNCH_REPEATS = 15
LAUNCH_TARGET = 0.5


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
    small = [tp.ones(SMALL, device="cuda") for _ in range(3)]
    sides = {OURS: lambda: {"add": ours_ms(lambda: a + b),
                            **small_ops(*small, tp.accelerator.synchronize)}}
    raw = raw_c_side("raw_graph_launch.cu", notes)
    if raw is not None:
        def raw_launch():
            launch = raw()[("eager launches", LAUNCH_CALLS)]
            return {"small add": launch, "small increment": launch}
        sides[RAW_C] = raw_launch
    if torch is not None:
        ta, tb = torch.ones(COUNT, device="cuda"), torch.ones(COUNT, device="cuda")
        small_torch = [torch.ones(SMALL, device="cuda") for _ in range(3)]
        sides[TORCH] = lambda: {"add": torch_ms(lambda: ta + tb),
                                **small_ops(*small_torch, torch.cuda.synchronize)}
    if cupy is not None:
        ca, cb = cupy.ones(COUNT, dtype=cupy.float32), cupy.ones(COUNT, dtype=cupy.float32)
        small_cupy = [cupy.ones(SMALL, dtype=cupy.float32) for _ in range(3)]
        sides[CUPY] = lambda: {"add": cupy_ms(cupy, lambda: ca + cb),
                               **small_ops(*small_cupy, cupy.cuda.Device().synchronize)}
    figures = interleaved(sides, trials(quick), notes)
    tp.accelerator.synchronize()
    return (compare("elementwise", "a + b, 64M float32, device", "ms", figures, key="add",
                    targets={TORCH: 1.15})
            + compare("elementwise", f"a + b, {SMALL} float32, host", "ns", figures,
                      key="small add", targets={TORCH: LAUNCH_TARGET})
            + compare("elementwise", f"x += 1, {SMALL} float32, host", "ns", figures,
                      key="small increment", targets={TORCH: LAUNCH_TARGET}))


def small_ops(a, b, x, synchronize):
    """Host ns per a + b and per x += 1 (x.__iadd__(1), what the statement calls) of one
    library's small tensors."""
    return {"small add": per_call_ns(lambda: a + b, number=LAUNCH_CALLS, repeat=LAUNCH_REPEATS,
                                     synchronize=synchronize),
            "small increment": per_call_ns(lambda: x.__iadd__(1), number=LAUNCH_CALLS,
                                           repeat=LAUNCH_REPEATS, synchronize=synchronize)}


# Composite ops of small float32 tensors, each a few launches or more: the host cost where an op
# may be several kernels (softmax, cross_entropy) or compute positions first (indexing).
SMALL_OPS = {"softmax": "m.softmax(1), 16 x 16 float32, host",
             "cross_entropy": "F.cross_entropy, (8, 10) logits, int64 targets, host",
             "index": "a[index], 8 int64 indices into 16 float32, host",
             "cat": f"cat([a, b]), {SMALL} float32 each, host",
             "stack": f"stack([a, b]), {SMALL} float32 each, host"}


def small_op_calls(library, functional):
    """{SMALL_OPS key: a call of that op} on one library's CUDA tensors."""
    a, b = library.ones(SMALL, device="cuda"), library.ones(SMALL, device="cuda")
    m = library.ones(16, 16, device="cuda")
    index = library.arange(8, device="cuda")
    logits = library.ones(8, 10, device="cuda")
    target = library.zeros(8, dtype=library.int64, device="cuda")
    return {"softmax": lambda: m.softmax(1),
            "cross_entropy": lambda: functional.cross_entropy(logits, target),
            "index": lambda: a[index], "cat": lambda: library.cat([a, b]),
            "stack": lambda: library.stack([a, b])}


def small_ops_host_ns(calls, synchronize):
    return {name: per_call_ns(call, number=LAUNCH_CALLS, repeat=LAUNCH_REPEATS,
                              synchronize=synchronize) for name, call in calls.items()}


def small_ops_area(quick, notes):
    import tensorplay as tp
    import tensorplay.nn.functional as functional
    torch = import_peer("torch", TORCH, notes)
    ours = small_op_calls(tp, functional)
    sides = {OURS: lambda: small_ops_host_ns(ours, tp.accelerator.synchronize)}
    if torch is not None:
        theirs = small_op_calls(torch, torch.nn.functional)
        sides[TORCH] = lambda: small_ops_host_ns(theirs, torch.cuda.synchronize)
    figures = interleaved(sides, trials(quick), notes)
    return [row for key, case in SMALL_OPS.items()
            for row in compare("small ops", case, "ns", figures, key=key,
                               targets={TORCH: 1.0})]


# A fresh process: CUDA and the same-dtype add warmed up first, so that the time is the mixed
# kernel's compile (or disk read), load and launch alone.
FIRST_MIXED_ADD = """
import time, tensorplay as tp
a, b = tp.ones(1024, device="cuda"), tp.ones(1024, device="cuda", dtype=tp.float64)
a + a
tp.accelerator.synchronize()
start = time.perf_counter()
a + b
tp.accelerator.synchronize()
print((time.perf_counter() - start) * 1e3)
"""


def first_mixed_add_ms(cache):
    environment = dict(os.environ, TENSORPLAY_CACHE_DIR=cache)
    done = subprocess.run([sys.executable, "-c", FIRST_MIXED_ADD], env=environment, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.split()[-1])


def promotion(quick, notes):
    def trial():
        with tempfile.TemporaryDirectory() as cache:
            return {"cold": first_mixed_add_ms(cache), "disk": first_mixed_add_ms(cache)}

    figures = interleaved({OURS: trial}, trials(quick), notes)
    notes.append("promotion: the first mixed-dtype op of a process compiles one small kernel "
                 "instance per (op, dtypes) with NVRTC, then reads it from the disk cache")
    return (compare("promotion", "first float32 + float64, empty kernel cache", "ms", figures,
                    key="cold")
            + compare("promotion", "first float32 + float64, kernel on disk", "ms", figures,
                      key="disk"))


AREAS = {"copies": copies, "elementwise": elementwise, "small ops": small_ops_area,
         "promotion": promotion}

if __name__ == "__main__":
    main(AREAS, __doc__)
