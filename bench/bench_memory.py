"""Memory benchmarks on the GPU: tensorplay against PyTorch, CuPy and raw CUDA C, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_memory.py
[--area allocation|statistics|import] [--quick] [--json PATH]. Each figure is the median over
interleaved trials (tensorplay, PyTorch, CuPy and the C program in turn) of the best of several
timeit repeats, in nanoseconds per call. Ratios are tensorplay / other: below 1.0 is faster.
Targets: alloc+free no slower than torch.empty+del, and for 1 KiB and 1 MiB no slower than
CuPy's MemoryPool.malloc + release (those two over HIT_TRIALS interleaved trials, as CuPy's
figure is close to ours); empty(1 MiB)+release at most 0.5x torch.empty; memory_stats() at
most 0.1x torch.cuda.memory_stats; memory_allocated() under 500 ns; import under 0.25 s, with
no CUDA call at import.
The live-blocks sweep: alloc+free of 512 bytes with 10 to 1,000,000 blocks of 512 bytes held
live in the same pool, so that the cache's free lists and block maps are that large. Target:
tensorplay's worst point at most 1.2x its figure with 10 blocks live.
"""
import importlib.util
import subprocess
import sys
import timeit

from harness.baselines import (CUPY, OURS, RAW_C, TORCH, compare, import_peer, interleaved,
                               main, per_call_ns, raw_c_side, record, trials)

SIZES = {"1 KiB": 1 << 10, "1 MiB": 1 << 20, "64 MiB": 64 << 20}
# The cache hits held to CuPy's figure too, and their trials (--quick: QUICK_HIT_TRIALS): the
# two libraries are within tens of nanoseconds, which 7 trials do not tell apart.
HITS = (1 << 10, 1 << 20)
HIT_TRIALS, QUICK_HIT_TRIALS = 30, 10
LIVE_SPREAD_TARGET = 1.2
LIVE_BLOCKS = (10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
LIVE_BLOCK_BYTES = 512
LIVE_SWEEP = "allocation cost against live blocks"


def allocation(quick, notes):
    import tensorplay
    from tensorplay import cuda
    torch = import_peer("torch", TORCH, notes)
    cupy = import_peer("cupy", CUPY, notes)
    raw = raw_c_side("raw_cuda.c", notes)

    def sides_of(sizes, empty):
        """The sides timing alloc+free of sizes (and, with empty, empty(1 MiB) + release)."""
        def ours():
            figures = {size: per_call_ns(lambda: cuda.caching_allocator_delete(
                cuda.caching_allocator_alloc(size))) for size in sizes}
            if empty:
                figures["empty"] = per_call_ns(lambda: tensorplay.empty(
                    1 << 20, dtype=tensorplay.uint8, device="cuda"))
            return figures

        sides = {OURS: ours}
        if torch is not None:
            def torch_empty():
                figures = {size: per_call_ns(lambda: torch.empty(size, dtype=torch.uint8,
                                                                 device="cuda"))
                           for size in sizes}
                if empty:
                    figures["empty"] = figures[1 << 20]
                return figures

            sides[TORCH] = torch_empty
            sides[f"{TORCH} caching_allocator_alloc"] = lambda: {
                size: per_call_ns(lambda: torch.cuda.caching_allocator_delete(
                    torch.cuda.caching_allocator_alloc(size))) for size in sizes}
        if cupy is not None:
            pool = cupy.get_default_memory_pool()
            sides[CUPY] = lambda: {size: per_call_ns(lambda: pool.malloc(size)) for size in sizes}
        return sides

    sides = sides_of([size for size in SIZES.values() if size not in HITS], empty=False)
    if raw is not None:  # no cache: every size in the fewer trials
        sides[RAW_C] = lambda: {size: value for (name, size), value in raw().items()
                                if name == "cudaMalloc+cudaFree"}
    figures = interleaved(sides, trials(quick), notes)
    hit_trials = QUICK_HIT_TRIALS if quick else HIT_TRIALS
    for name, cases in interleaved(sides_of(HITS, empty=True), hit_trials, notes).items():
        figures.setdefault(name, {}).update(cases)
    records = []
    for label, size in SIZES.items():
        targets = {TORCH: 1.0, CUPY: 1.0} if size in HITS else {TORCH: 1.0}
        records += compare("allocation", f"alloc+free {label} (cache hit)", "ns", figures,
                           key=size, targets=targets)
    notes.append(f"allocation: the {TORCH} column is torch.empty + release of a uint8 tensor; "
                 f"'{TORCH} caching_allocator_alloc' is the allocator's own call, as tensorplay's"
                 f"; {CUPY} is its default MemoryPool's malloc + release; {RAW_C} is cudaMalloc + "
                 "cudaFree, which caches nothing")
    notes.append(f"allocation: 1 KiB, 1 MiB and empty(1 MiB) over {hit_trials} interleaved "
                 f"trials, the others over {trials(quick)}")
    records += compare("allocation", "empty(1 MiB) + release", "ns",
                       {name: cases for name, cases in figures.items() if name in (OURS, TORCH)},
                       key="empty", targets={TORCH: 0.5})
    return records + live_blocks(quick, notes, torch, cupy)


def live_blocks(quick, notes, torch, cupy):
    """The sweep: each side holds LIVE_BLOCKS blocks in turn, growing, and times one more."""
    from tensorplay import cuda

    def sweep(allocate, free, one_more):
        held, figures = [], {}
        for count in LIVE_BLOCKS:
            held += [allocate(LIVE_BLOCK_BYTES) for _ in range(count - len(held))]
            figures[count] = per_call_ns(one_more, number=2_000, repeat=3)
        for block in held:
            free(block)
        return figures

    sides = {OURS: lambda: sweep(cuda.caching_allocator_alloc, cuda.caching_allocator_delete,
                                 lambda: cuda.caching_allocator_delete(
                                     cuda.caching_allocator_alloc(LIVE_BLOCK_BYTES)))}
    if torch is not None:
        sides[TORCH] = lambda: sweep(torch.cuda.caching_allocator_alloc,
                                     torch.cuda.caching_allocator_delete,
                                     lambda: torch.cuda.caching_allocator_delete(
                                         torch.cuda.caching_allocator_alloc(LIVE_BLOCK_BYTES)))
    if cupy is not None:
        pool = cupy.get_default_memory_pool()
        sides[CUPY] = lambda: sweep(pool.malloc, lambda block: None,
                                    lambda: pool.malloc(LIVE_BLOCK_BYTES))
    figures = interleaved(sides, trials(quick), notes)
    records = []
    for count in LIVE_BLOCKS:
        records += compare("allocation", f"alloc+free 512 B, {count:,} blocks live", "ns",
                           figures, key=count, sweep=LIVE_SWEEP, x=count)
    ours = figures[OURS]
    worst = max(LIVE_BLOCKS, key=lambda count: ours[count].median)
    first = LIVE_BLOCKS[0]
    records.append(record("allocation", f"alloc+free 512 B, the worst point of the live-blocks "
                          f"sweep against {first} blocks live", "ns", ours[worst],
                          f"{OURS}, {first} blocks live", ours[first],
                          target=LIVE_SPREAD_TARGET))
    notes.append(f"allocation: the live-blocks sweep's worst point (tensorplay) is {worst:,} "
                 "blocks live")
    return records


def statistics(quick, notes):
    from tensorplay.accelerator import memory
    torch = import_peer("torch", TORCH, notes)
    cupy = import_peer("cupy", CUPY, notes)
    raw = raw_c_side("raw_cuda.c", notes)
    sides = {OURS: lambda: {
        "allocated": per_call_ns(memory.memory_allocated, number=200_000),
        "stats": per_call_ns(memory.memory_stats, number=2_000),
        "info": per_call_ns(memory.get_memory_info, number=2_000)}}
    if torch is not None:
        torch.empty(1, device="cuda")
        sides[TORCH] = lambda: {
            "allocated": per_call_ns(torch.cuda.memory_allocated, number=20_000),
            "stats": per_call_ns(torch.cuda.memory_stats, number=2_000),
            "info": per_call_ns(torch.cuda.mem_get_info, number=2_000)}
        sides[f"{TORCH} (torch.accelerator.memory)"] = lambda: {
            "allocated": per_call_ns(torch.accelerator.memory.memory_allocated, number=2_000)}
    if cupy is not None:
        pool = cupy.get_default_memory_pool()
        sides[CUPY] = lambda: {"allocated": per_call_ns(pool.used_bytes, number=20_000),
                               "info": per_call_ns(cupy.cuda.runtime.memGetInfo, number=2_000)}
    if raw is not None:
        sides[RAW_C] = lambda: {"info": raw()[("cudaMemGetInfo", 0)]}
    figures = interleaved(sides, trials(quick), notes)
    return (compare("statistics", "memory_allocated()", "ns", figures, key="allocated",
                    targets={None: 500})
            + compare("statistics", "memory_stats()", "ns", figures, key="stats",
                      targets={TORCH: 0.1})
            + compare("statistics", "get_memory_info()", "ns", figures, key="info"))


def import_seconds(module):
    """Wall time of importing module in a fresh interpreter, minus the bare interpreter's."""
    def run(code):
        best = float("inf")
        for _ in range(3):
            start = timeit.default_timer()
            subprocess.run([sys.executable, "-c", code], check=True)
            best = min(best, timeit.default_timer() - start)
        return best
    return run(f"import {module}") - run("pass")


def import_makes_no_cuda_call():
    """cuDeviceGetCount answers CUDA_ERROR_NOT_INITIALIZED (3) until someone calls cuInit; where
    there is no driver to ask, it answers something else, and this says so."""
    code = ("import tensorplay, tensorplay.accelerator, tensorplay.cuda\n"
            "from cuda.bindings import driver\n"
            "print(int(driver.cuDeviceGetCount()[0]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    answer = result.stdout.strip() or (result.stderr.strip().splitlines() or ["nothing"])[-1]
    if answer not in ("0", "3"):
        return f"not checked ({answer})"
    return "yes" if answer == "3" else "no: something called cuInit"


def imports(quick, notes):
    """Needs no GPU: the report runs it on any machine."""
    sides = {OURS: lambda: {"import": import_seconds("tensorplay")}}
    for module, label in (("torch", TORCH), ("cupy", CUPY)):
        if importlib.util.find_spec(module) is None:
            notes.append(f"{label} skipped: {module} is not installed")
        else:
            sides[label] = lambda module=module: {"import": import_seconds(module)}
    figures = interleaved(sides, trials(quick), notes)
    notes.append(f"import: no CUDA call at import tensorplay (cuDeviceGetCount still answers "
                 f"CUDA_ERROR_NOT_INITIALIZED after it): {import_makes_no_cuda_call()}")
    return compare("import", "import (fresh interpreter, minus python -c pass)", "s", figures,
                   key="import", targets={None: 0.25})


AREAS = {"allocation": allocation, "statistics": statistics, "import": imports}

if __name__ == "__main__":
    main(AREAS, __doc__)
