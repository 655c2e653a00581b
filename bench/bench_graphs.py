"""CUDA graph benchmarks on the GPU: tensorplay against a raw CUDA C loop and PyTorch, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_graphs.py
- replay: host nanoseconds per replay() of a graph of 1 to 1024 one-block kernels, with the
  schedule of raw_graph_launch.cu (max(20, 200 / kernels) launches per round, best of 7
  rounds, the device synchronised between rounds); the C program calls cudaGraphLaunch in a
  loop. TRIALS passes run the C program, tensorplay and PyTorch in turn; each figure is the
  best over them. Target: tensorplay <= 1.15x the C loop for the 1-kernel graph.
- capture: microseconds from entering graph() to leaving it (synchronise, empty the cache,
  capture a 1-kernel body, instantiate), median of 50, against torch.cuda.graph in this same
  warmed process. Target: tensorplay <= 0.5x PyTorch.
"""
import statistics
import time

import torch
from baselines import raw_c_figures, replay_ns

import tensorplay as tp
from tensorplay import _schema, cuda

SIZES = (1, 4, 16, 64, 256, 1024)
TRIALS = 5
CAPTURES = 50
REPLAY_TARGET = 1.15
CAPTURE_TARGET = 0.5


def launches_for(kernels):
    # Fewer launches than CUDA queues without blocking, so that the loop measures what the host
    # spends per launch, not how fast the device runs the graphs.
    return max(20, 200 // kernels)


def tensorplay_graph(kernels):
    x = tp.zeros(32, device="cuda")
    x += 1  # compile and load the kernel before capturing
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        for _ in range(kernels):
            x += 1
    return graph, x


def torch_graph(kernels):
    x = torch.zeros(32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        x.add_(1)  # warm up on a side stream, as PyTorch's documentation asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(kernels):
            x.add_(1)
    return graph, x


def capture_us(capture_once, x):
    """Median microseconds of one graph() block, entry to exit; each graph is reset outside.

    x lives across the captures, so that no cached block is waiting for the empty_cache() that
    both libraries run on entry.
    """
    samples = []
    for _ in range(CAPTURES + 5):
        graph, elapsed = capture_once(x)
        samples.append(elapsed / 1e3)
        graph.reset()
    return statistics.median(samples[5:])


def tensorplay_capture(x):
    graph = cuda.CUDAGraph()
    start = time.perf_counter_ns()
    with cuda.graph(graph):
        x += 1
    return graph, time.perf_counter_ns() - start


def torch_capture(x):
    graph = torch.cuda.CUDAGraph()
    start = time.perf_counter_ns()
    with torch.cuda.graph(graph):
        x.add_(1)
    return graph, time.perf_counter_ns() - start


def verdict(ratio, target):
    return f"target <= {target}x: {'met' if ratio <= target else 'NOT met'}"


def main():
    torch.zeros(1, device="cuda")
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"tensorplay schema {_schema.SCHEMA_HASH}")
    # All three launch on a non-blocking stream, as the C loop does: launches on the legacy
    # default stream cost more, since it synchronises with every other blocking stream.
    ours_stream, theirs_stream = cuda.Stream(), torch.cuda.Stream()
    graphs = {kernels: (tensorplay_graph(kernels), torch_graph(kernels)) for kernels in SIZES}
    # TRIALS passes over C, tensorplay and PyTorch in turn, best of each: a noisy spell of the
    # machine then shows in every column alike, not in whichever was measured during it.
    replay = {kernels: [float("inf")] * 3 for kernels in SIZES}
    for _ in range(TRIALS):
        raw = raw_c_figures("raw_graph_launch.cu", ())
        for kernels, ((ours, _), (theirs, _)) in graphs.items():
            with cuda.stream(ours_stream):
                ours_ns = replay_ns(ours.replay, ours_stream.synchronize, launches_for(kernels))
            with torch.cuda.stream(theirs_stream):
                theirs_ns = replay_ns(theirs.replay, theirs_stream.synchronize,
                                      launches_for(kernels))
            c_ns = raw.get(("cudaGraphLaunch", kernels), float("inf"))
            replay[kernels] = [min(pair) for pair in zip(replay[kernels],
                                                         (c_ns, ours_ns, theirs_ns))]
    if not raw:
        print("nvcc not found: the C cudaGraphLaunch loop is missing from the ratios")
        for figures in replay.values():
            figures[0] = float("nan")

    print(f"\nreplay() host cost per launch, ns, best of {TRIALS} trials (ratios against the C "
          f"loop)")
    print(f"{'kernels':>8} {'C loop':>10} {'tensorplay':>11} {'torch':>10} "
          f"{'tp/C':>7} {'torch/C':>8} {'tp/torch':>9}")
    for kernels, (c_ns, ours_ns, theirs_ns) in replay.items():
        print(f"{kernels:>8} {c_ns:>10.1f} {ours_ns:>11.1f} {theirs_ns:>10.1f} "
              f"{ours_ns / c_ns:>7.3f} {theirs_ns / c_ns:>8.3f} {ours_ns / theirs_ns:>9.3f}")
    for (ours, _), (theirs, _) in graphs.values():
        ours.reset()
        theirs.reset()
    del graphs

    ours_us = capture_us(tensorplay_capture, tp.zeros(32, device="cuda"))
    theirs_us = capture_us(torch_capture, torch.zeros(32, device="cuda"))

    c_ns, ours_ns, theirs_ns = replay[1]
    print("\nsummary")
    print(f"replay, 1-kernel graph: tensorplay {ours_ns:.1f} ns, C loop {c_ns:.1f} ns, "
          f"torch {theirs_ns:.1f} ns; tensorplay/C {ours_ns / c_ns:.3f} "
          f"({verdict(ours_ns / c_ns, REPLAY_TARGET)}), torch/C {theirs_ns / c_ns:.3f}")
    print(f"capture, graph() entry to exit with a 1-kernel body: tensorplay {ours_us:.1f} us, "
          f"torch.cuda.graph {theirs_us:.1f} us; ratio {ours_us / theirs_us:.3f} "
          f"({verdict(ours_us / theirs_us, CAPTURE_TARGET)})")


if __name__ == "__main__":
    main()
