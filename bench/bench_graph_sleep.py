"""Sleeping graphs on the GPU: CUDAGraph.sleep() / wake() against the targets of issue 40.

Run on the GPU machine after installing the package:  python bench/bench_graph_sleep.py
[--area sleep|many graphs|hit path] [--quick] [--json PATH] (docs/design.md, "Sleeping graphs").
- sleep: for graph pools of 1, 8 and 32 GiB (one tensor the graph writes with one kernel),
  milliseconds per GiB of sleep() without copies to the host (target <= 1 ms/GiB) and of wake()
  (target <= 0.25 ms/GiB), median of the trials; the device memory freed while asleep
  (cuMemGetInfo, target >= 99% of the pool); the first replay after wake() against a steady
  replay (device time of replay + synchronize, target <= 1.1x).
- many graphs: 64 graphs of 1024 kernels sharing one pool: waking the pool (one wake() of any
  graph wakes it for all) against recapturing and instantiating all 64 (target <= 0.1x).
- hit path: alloc+free of 1 KiB and 1 MiB on a cache hit in a process with
  TENSORPLAY_CUDA_ALLOC_CONF=expandable_segments:True against one with it False (the cache-hit
  path is the same code; target <= 1.05x, within noise), and a 1024-kernel capture and a replay
  into an expandable graph pool against a cudaMalloc one (graph_expandable_segments, no target:
  the figures decide the defaults).
Ratios are tensorplay's figure over the reference (the target, or the other setting).
"""
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time

from harness.baselines import main

GiB = 1 << 30
POOL_GIBS = (1, 8, 32)
WAKE_TARGET_MS_PER_GIB = 0.25
SLEEP_TARGET_MS_PER_GIB = 1.0
FIRST_REPLAY_TARGET = 1.1
FREED_TARGET = 0.99
MANY_GRAPHS, MANY_KERNELS, MANY_TARGET = 64, 1024, 0.1
MANY_OUTPUT = 16 << 20
HIT_TARGET = 1.05


def result(area, case, ours, reference, reference_name, unit, target, higher_is_better=False):
    """One figure held to its target, printed at once."""
    ratio = ours / reference if reference else float("inf")
    met = ratio >= target if higher_is_better else ratio <= target
    text = f">= {target}" if higher_is_better else f"<= {target}"
    print(f"  {case}: tensorplay {ours:.4g} {unit}, {reference_name} {reference:.4g} {unit}, "
          f"ratio {ratio:.3f} (target {text}: {'met' if met else 'MISSED'})", file=sys.stderr)
    return {"area": area, "case": case, "tensorplay": ours, "peer": reference,
            "peer_name": reference_name, "ratio": ratio, "target": text, "unit": unit,
            "met": met}


def seconds(function):
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def sleep_area(quick, notes):
    import tensorplay as tp
    from tensorplay import accelerator, cuda
    from tensorplay.accelerator import memory
    trials = 3 if quick else 7
    records = []
    x = tp.ones(1, device="cuda")
    (x + 1).fill_(2.0)                      # load the kernels before capturing
    accelerator.synchronize()
    for gib in POOL_GIBS:
        free, _ = memory.get_memory_info()
        if free < (gib + 2) * GiB:
            notes.append(f"sleep: {gib} GiB pool skipped, {free / GiB:.1f} GiB free")
            continue
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            y = tp.empty(gib * GiB // 4, device="cuda")
            y.fill_(1.0)
        g.replay()
        accelerator.synchronize()
        pool = memory.pool_memory_stats()[g.pool_id]["reserved_bytes"]
        sleeps, wakes, firsts, steadies, freed = [], [], [], [], []
        for _ in range(trials):
            before, _ = memory.get_memory_info()
            sleeps.append(seconds(g.sleep))
            asleep, _ = memory.get_memory_info()
            freed.append((asleep - before) / pool)
            wakes.append(seconds(g.wake))
            firsts.append(seconds(lambda: (g.replay(), accelerator.synchronize())))
            steadies.append(statistics.median(
                seconds(lambda: (g.replay(), accelerator.synchronize())) for _ in range(5)))
        per_gib = 1e3 / gib
        records.append(result("sleep", f"sleep(), {gib} GiB pool", statistics.median(sleeps)
                              * per_gib, SLEEP_TARGET_MS_PER_GIB, "target", "ms/GiB", 1.0))
        records.append(result("sleep", f"wake(), {gib} GiB pool", statistics.median(wakes)
                              * per_gib, WAKE_TARGET_MS_PER_GIB, "target", "ms/GiB", 1.0))
        records.append(result("sleep", f"first replay after wake, {gib} GiB pool",
                              statistics.median(firsts) * 1e3,
                              statistics.median(steadies) * 1e3, "steady replay", "ms",
                              FIRST_REPLAY_TARGET))
        records.append(result("sleep", f"device memory freed asleep, {gib} GiB pool",
                              min(freed), 1.0, "the pool", "fraction", FREED_TARGET,
                              higher_is_better=True))
        del g, y
        memory.empty_cache()
    return records


def many_graphs_area(quick, notes):
    import tensorplay as tp
    from tensorplay import accelerator, cuda
    from tensorplay.accelerator import memory
    from tensorplay.cuda import graphs
    x = tp.zeros(32, device="cuda")
    x += 1
    accelerator.synchronize()
    pool = graphs.graph_pool_handle()

    def capture_all():
        # Each graph writes a 16 MiB output of its own in the shared pool (1 GiB in all).
        made = []
        for _ in range(MANY_GRAPHS):
            g = cuda.CUDAGraph()
            with cuda.graph(g, pool=pool):
                y = tp.empty(MANY_OUTPUT // 4, device="cuda")
                y.fill_(0.0)
                for _ in range(MANY_KERNELS - 1):
                    y.add_(1)
            made.append((g, y))
        return made

    made = capture_all()
    recapture = []
    for _ in range(2 if quick else 3):
        for g, _ in made:
            g.reset()
        made = None
        memory.empty_cache()
        start = time.perf_counter()
        made = capture_all()
        recapture.append(time.perf_counter() - start)
    first = made[0][0]
    wakes = []
    for _ in range(3 if quick else 7):
        first.sleep()
        wakes.append(seconds(first.wake))
    for g, _ in made:
        g.replay()
    accelerator.synchronize()
    return [result("many graphs", f"wake {MANY_GRAPHS} graphs of {MANY_KERNELS} kernels "
                   "sharing a pool", statistics.median(wakes) * 1e3,
                   statistics.median(recapture) * 1e3, "recapture + instantiate", "ms",
                   MANY_TARGET)]


CHILD = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {bench!r})
    from harness.baselines import per_call_ns
    import tensorplay as tp
    from tensorplay import accelerator, cuda
    figures = {{}}
    for size in (1 << 10, 1 << 20):
        cuda.caching_allocator_delete(cuda.caching_allocator_alloc(size))
        figures[f"alloc+free {{size}}"] = per_call_ns(lambda: cuda.caching_allocator_delete(
            cuda.caching_allocator_alloc(size)))
    x = tp.zeros(32, device="cuda")
    x += 1
    accelerator.synchronize()
    captures = []
    for _ in range(5):
        g = cuda.CUDAGraph()
        start = time.perf_counter()
        with cuda.graph(g):
            for _ in range(1024):
                x.add_(1)
        captures.append(time.perf_counter() - start)
    figures["capture of 1024 kernels"] = sorted(captures)[2] * 1e9
    figures["replay of 1024 kernels"] = per_call_ns(g.replay, number=200,
                                                     synchronize=accelerator.synchronize)
    print(json.dumps(figures))
""")


def child_figures(conf):
    env = dict(os.environ, TENSORPLAY_CUDA_ALLOC_CONF=conf)
    bench = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", CHILD.format(bench=bench)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def hit_path_area(quick, notes):
    expandable = child_figures("expandable_segments:True,graph_expandable_segments:True")
    plain = child_figures("expandable_segments:False,graph_expandable_segments:False")
    records = []
    for case in ("alloc+free 1024", "alloc+free 1048576"):
        records.append(result("hit path", f"{case} B, expandable against cudaMalloc segments",
                              expandable[case], plain[case], "cudaMalloc segments", "ns",
                              HIT_TARGET))
    for case in ("capture of 1024 kernels", "replay of 1024 kernels"):
        ours, theirs = expandable[case], plain[case]
        print(f"  {case}: expandable graph pool {ours:.0f} ns, cudaMalloc pool {theirs:.0f} ns, "
              f"ratio {ours / theirs:.3f} (no target)", file=sys.stderr)
        records.append({"area": "hit path", "case": f"{case}, expandable graph pool",
                        "tensorplay": ours, "peer": theirs, "peer_name": "cudaMalloc pool",
                        "ratio": ours / theirs, "target": None, "unit": "ns"})
    return records


AREAS = {"sleep": sleep_area, "many graphs": many_graphs_area, "hit path": hit_path_area}

if __name__ == "__main__":
    main(AREAS, __doc__)
