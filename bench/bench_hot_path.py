"""Hot-path host time of two builds of tensorplay, interleaved in one run.

    python bench/bench_hot_path.py BEFORE_DIR AFTER_DIR [--rounds 7]

Each directory holds an installed tensorplay (`pip install --target DIR .` of each tree). The
calls that programs make in loops (queries, allocation, stream switches, a small launch, a graph
replay) are timed in a fresh interpreter per build and round, the builds alternating and taking
turns to go first, so that a noisy spell of the machine hits both; each call's figure is the
median over rounds of the best timeit repeat, in nanoseconds per call. The ratio is after /
before: above 1.05 is a call more than 5% slower, more than a change that keeps behaviour may
cost a hot path.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from harness.baselines import per_call_ns

HERE = Path(__file__).resolve().parent


def measure():
    """{call: ns per call} for the tensorplay on sys.path (the child's side)."""
    import tensorplay as tp
    from tensorplay import accelerator, cuda
    from tensorplay.accelerator import memory

    a = tp.ones((16,), device="cuda")
    b = tp.ones((16,), device="cuda")
    stream = cuda.Stream()
    static = tp.zeros((16,), device="cuda")
    side = cuda.Stream()
    with cuda.stream(side):  # warm the kernels before capturing them
        static += 1
    accelerator.synchronize()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        static += 1
    accelerator.synchronize()

    def switch_stream():
        with cuda.stream(stream):
            pass

    calls = {
        "accelerator.is_available()": accelerator.is_available,
        "accelerator.device_count()": accelerator.device_count,
        "accelerator.current_device_index()": accelerator.current_device_index,
        "accelerator.current_stream()": accelerator.current_stream,
        "memory.memory_allocated()": memory.memory_allocated,
        "memory.memory_reserved()": memory.memory_reserved,
        "caching_allocator_alloc + delete (1 KiB)":
            lambda: cuda.caching_allocator_delete(cuda.caching_allocator_alloc(1024)),
        "tensorplay.empty(1024, device='cuda')":
            lambda: tp.empty(1024, dtype=tp.uint8, device="cuda"),
        "with cuda.stream(s): pass": switch_stream,
        "a + b (16 float32)": lambda: a + b,
        "CUDAGraph.replay()": graph.replay,
    }
    figures = {}
    for name, call in calls.items():
        figures[name] = per_call_ns(call, number=5_000, repeat=5)
        accelerator.synchronize()  # launches queue up; drain them between calls
    return figures


def run_child(build):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(build), str(HERE), os.environ.get("PYTHONPATH", "")])}
    output = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"],
                            check=True, capture_output=True, text=True, env=environment,
                            cwd=HERE).stdout
    return json.loads(output.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="directory holding the earlier build")
    parser.add_argument("after", type=Path, help="directory holding the later build")
    parser.add_argument("--rounds", type=int, default=7)
    arguments = parser.parse_args()
    for build in (arguments.before, arguments.after):
        if not (build / "tensorplay").is_dir():
            parser.error(f"{build} holds no installed tensorplay (pip install --target {build} .)")
    samples = {"before": [], "after": []}
    builds = [("before", arguments.before), ("after", arguments.after)]
    for _ in range(arguments.rounds):
        for label, build in builds:
            samples[label].append(run_child(build))
        builds.reverse()  # each build goes first in every other round
    print(f"{'call':42} {'before ns':>10} {'after ns':>10} {'after/before':>13}")
    worst = 0.0
    for name in samples["before"][0]:
        before = statistics.median(run[name] for run in samples["before"])
        after = statistics.median(run[name] for run in samples["after"])
        worst = max(worst, after / before)
        flag = "  slower by more than 5%" if after / before > 1.05 else ""
        print(f"{name:42} {before:10.0f} {after:10.0f} {after / before:13.3f}{flag}")
    print(f"worst ratio {worst:.3f} over {arguments.rounds} interleaved rounds")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(measure()))
    else:
        main()
