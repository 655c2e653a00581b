"""Graph update on the GPU: updating an executable, node parameters and rebinding, as ratios.

Run on the GPU machine after installing the package:
    python bench/bench_graph_update.py [--json PATH]
- update: microseconds of recapture_end() (end the capture, cuGraphExecUpdate) against
  capture_end() (end the capture, instantiate) for the same graph of 16, 256 and 1024 kernels,
  median of SAMPLES; beside it the whole cycle, recapture_begin() to recapture_end() against
  reset() and capture_begin() to capture_end(). Target: update <= 0.25x instantiate.
- node parameters: host microseconds of set_kernel_node_params() plus replay() of a 16-kernel
  graph against capturing it again (reset, capture, instantiate) plus replay(), best of the
  rounds of baselines.best_us (the device synchronised between rounds). Target: <= 0.1x.
- rebinding: replay_with() of a 256 MiB input plus the replay, end to end (until the device is
  done), against stage_and_launch() and PyTorch's copy_() plus replay(), for a graph that reads
  the whole input (its sum) and one that reads a small part (its first 64 KiB, doubled).
  Targets against PyTorch: <= 0.6x reading the whole input, <= 0.1x reading a small part; and
  replay_with()'s host cost independent of the input's size (1 MiB to 256 MiB: the largest at
  most 1.5x the smallest).
PyTorch's figures are skipped, with a note, when torch is not installed. --json PATH writes
every figure as a list of {area, case, tensorplay, peer, peer_name, ratio, target, unit}.
"""
import argparse
import json
import statistics
import time

from harness.baselines import best_us

import tensorplay as tp
from tensorplay import _schema, accelerator, cuda
from tensorplay.cuda import graphs

KERNEL_COUNTS = (16, 256, 1024)
SAMPLES = 15
UPDATE_TARGET = 0.25
PARAMETER_TARGET = 0.1
WHOLE_TARGET = 0.6
PART_TARGET = 0.1
HOST_SPREAD_TARGET = 1.5
INPUT_BYTES = 256 << 20
PART_BYTES = 64 << 10
RECORDS = []


def record(area, case, ours, peer, peer_name, target, unit):
    ratio = ours / peer if peer else float("nan")
    RECORDS.append({"area": area, "case": case, "tensorplay": ours, "peer": peer,
                    "peer_name": peer_name, "ratio": ratio, "target": target, "unit": unit})
    verdict = "" if target is None else \
        f"  (target <= {target}x: {'met' if ratio <= target else 'NOT met'})"
    print(f"{area:>12} {case:<34} {ours:>10.2f} {peer:>10.2f} {unit:<3} vs {peer_name:<22} "
          f"{ratio:>7.3f}x{verdict}")


def kernels(x, count):
    for _ in range(count):
        x += 1


def timed(call):
    start = time.perf_counter_ns()
    result = call()
    return (time.perf_counter_ns() - start) / 1e3, result


def update_figures(count):
    """Median µs of (capture_end, recapture_end, whole capture cycle, whole recapture cycle)."""
    x = tp.zeros(32, device="cuda")
    x += 1  # compile and load before capturing
    graph = cuda.CUDAGraph()
    instantiate, update, capture_cycle, recapture_cycle = [], [], [], []
    for _ in range(SAMPLES):
        accelerator.synchronize()
        start = time.perf_counter_ns()
        graph.reset()
        graph.capture_begin()
        kernels(x, count)
        ended, _ = timed(graph.capture_end)
        capture_cycle.append((time.perf_counter_ns() - start) / 1e3)
        instantiate.append(ended)
    for _ in range(SAMPLES):
        accelerator.synchronize()
        start = time.perf_counter_ns()
        graph.recapture_begin()
        kernels(x, count)
        ended, outcome = timed(graph.recapture_end)
        recapture_cycle.append((time.perf_counter_ns() - start) / 1e3)
        update.append(ended)
        assert outcome == "updated", outcome
    graph.reset()
    return tuple(statistics.median(samples)
                 for samples in (instantiate, update, capture_cycle, recapture_cycle))


def parameter_figures():
    """Host µs of (a node-parameter change plus replay, a new capture plus replay)."""
    x = tp.zeros(1024, device="cuda")
    x += 1
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        x.fill_(1.0)
        kernels(x, 15)
    node = next(node for node in graph.kernel_nodes() if node.name == "fill")
    values = iter(range(1 << 30))

    def change_and_replay():
        graph.set_kernel_node_params(node, arguments={"value": float(next(values) % 7)})
        graph.replay()

    other = cuda.CUDAGraph()

    def capture_and_replay():
        other.reset()
        other.capture_begin()
        x.fill_(1.0)
        kernels(x, 15)
        other.capture_end()
        other.replay()

    changed, _ = best_us(change_and_replay, accelerator.synchronize)
    captured, _ = best_us(capture_and_replay, accelerator.synchronize)
    other.reset()
    graph.reset()
    return changed, captured


def reading(view, whole):
    """The graph's work: a sum reads the whole input; a product reads a small part of it."""
    return view.sum() if whole else view * 2


def reading_graph(static, part):
    graph = cuda.CUDAGraph()
    view = static[:part] if part else static
    reading(view, not part)  # compile and load before capturing
    with cuda.graph(graph):
        result = reading(view, not part)
    return graph, result


def rebinding_figures(torch, part):
    """End-to-end µs of (replay_with, stage_and_launch, torch copy_ + replay) per call."""
    count = INPUT_BYTES // 4
    part_count = part // 4 if part else 0
    static = tp.zeros(count, device="cuda")
    inputs = [tp.full((count,), float(i + 1), device="cuda") for i in range(2)]
    graph, _ = reading_graph(static, part_count)
    staged_static = tp.zeros(count, device="cuda")
    staged, _ = reading_graph(staged_static, part_count)
    calls = iter(range(1 << 30))

    def rebound():
        graph.replay_with({static: inputs[next(calls) % 2]})

    def copied():
        staged.stage_and_launch([staged_static], [inputs[next(calls) % 2]])

    _, ours = best_us(rebound, accelerator.synchronize)
    _, staging = best_us(copied, accelerator.synchronize)
    theirs = float("nan")
    if torch is not None:
        torch_static = torch.zeros(count, device="cuda")
        torch_inputs = [torch.full((count,), float(i + 1), device="cuda") for i in range(2)]
        view = torch_static[:part_count] if part_count else torch_static
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            reading(view, not part_count)
        torch.cuda.current_stream().wait_stream(side)
        torch_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(torch_graph):
            reading(view, not part_count)

        def torch_copied():
            torch_static.copy_(torch_inputs[next(calls) % 2])
            torch_graph.replay()

        _, theirs = best_us(torch_copied, torch.cuda.synchronize)
        del torch_graph, torch_static, torch_inputs
    graph.reset()
    staged.reset()
    return ours, staging, theirs


def host_figures():
    """Host µs of replay_with() by input size, {MiB: µs}."""
    figures = {}
    for mib in (1, 16, 256):
        count = (mib << 20) // 4
        static = tp.zeros(count, device="cuda")
        inputs = [tp.zeros(count, device="cuda") for _ in range(2)]
        graph, _ = reading_graph(static, 0)
        calls = iter(range(1 << 30))
        figures[mib], _ = best_us(lambda: graph.replay_with({static: inputs[next(calls) % 2]}),
                                  accelerator.synchronize)
        graph.reset()
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON records")
    options = parser.parse_args()
    try:
        import torch
        torch.zeros(1, device="cuda")
        torch_note = f"torch {torch.__version__}"
    except ImportError:
        torch, torch_note = None, "torch not installed: PyTorch comparisons skipped"
    print(f"device: cuda:0; {torch_note}; tensorplay schema {_schema.SCHEMA_HASH}")
    print(f"{'area':>12} {'case':<34} {'tensorplay':>10} {'peer':>10}")
    for count in KERNEL_COUNTS:
        instantiate, update, capture_cycle, recapture_cycle = update_figures(count)
        record("update", f"{count} kernels: end of capture", update, instantiate,
               "capture_end (instantiate)", UPDATE_TARGET, "us")
        record("update", f"{count} kernels: whole cycle", recapture_cycle, capture_cycle,
               "reset + capture", None, "us")
    changed, captured = parameter_figures()
    record("parameters", "16 kernels: set + replay (host)", changed, captured,
           "capture + replay", PARAMETER_TARGET, "us")
    for case, part, target in (("256 MiB input, read whole", 0, WHOLE_TARGET),
                               ("256 MiB input, read 64 KiB", PART_BYTES, PART_TARGET)):
        ours, staging, theirs = rebinding_figures(torch, part)
        record("rebinding", case, ours, staging, "stage_and_launch", None, "us")
        if torch is not None:
            record("rebinding", case, ours, theirs, "torch copy_ + replay", target, "us")
    host = host_figures()
    smallest, largest = host[min(host)], host[max(host)]
    for mib, figure in host.items():
        print(f"{'rebinding':>12} replay_with host cost, {mib:>3} MiB input {figure:>10.2f} us")
    record("rebinding", "host cost, 256 MiB vs 1 MiB input", largest, smallest,
           "the same, 1 MiB input", HOST_SPREAD_TARGET, "us")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as stream:
            json.dump(RECORDS, stream, indent=1)


if __name__ == "__main__":
    main()
