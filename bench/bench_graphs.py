"""CUDA graph benchmarks on the GPU: tensorplay against raw CUDA C, PyTorch and CuPy, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_graphs.py
[--area replay|capture] [--quick] [--json PATH]. Graphs of 1 to 4096 one-block kernels (x += 1
on 32 floats), every library launching on a non-blocking stream of its own.
- replay: host nanoseconds per replay(), with the schedule of raw/raw_graph_launch.cu
  (max(20, 200 / kernels) launches per round, best of 7 rounds, the device synchronised
  between rounds); the C program calls cudaGraphLaunch in a loop. Target: tensorplay <= 1.1x
  the C loop for the 1-kernel graph.
- capture: microseconds from entering graph() to leaving it (synchronise, empty the cache,
  capture the kernels, instantiate), median of up to 50 captures, against torch.cuda.graph,
  CuPy's Stream.begin_capture / end_capture and the C program's capture and instantiate.
  Target: tensorplay <= 0.5x PyTorch for the 1-kernel body. And the capture of 1024 kernels in
  two parts, median of SPLIT_CAPTURES captures each (the device synchronised before each):
  from capture_begin() to the last launch returned, against PyTorch's CUDAGraph.capture_begin(),
  CuPy's begin_capture() and the C program's cudaStreamBeginCapture and loop of cuLaunchKernel
  (targets: tensorplay <= 0.35x PyTorch, <= 1.4x the C loop); then capture_end() (end the
  capture, instantiate) against theirs, no target. Against the C loop, which runs in a process
  of its own, tensorplay's split is also timed in a process of its own (a child that imports
  tensorplay alone), so that neither side shares its process with the peers' libraries; in
  each trial the C program and that child run back to back pinned to one CPU, the next CPU
  each trial (harness.baselines.pinned_on).
Each figure is the median over interleaved trials (C, tensorplay, PyTorch, CuPy in turn).
"""
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

from harness.baselines import (CUPY, OURS, RAW_C, TORCH, compare, import_peer, interleaved,
                               main, pinned_on, prepared, raw_c_figures, raw_c_side, replay_ns,
                               trials)

SIZES = (1, 4, 16, 64, 256, 1024, 4096)
REPLAY_TARGET = 1.1
CAPTURE_TARGET = 0.5
SPLIT_KERNELS = 1024  # the body of the split capture (raw/raw_graph_launch.cu's SPLIT_KERNELS)
SPLIT_CAPTURES = 15  # and its samples (SPLIT_CAPTURES there)
LAUNCHES_TARGETS = {TORCH: 0.35}
ALONE_TARGETS = {RAW_C: 1.4}  # tensorplay's split timed in a process of its own
REPLAY_SWEEP = "replay cost against graph size"
CAPTURE_SWEEP = "capture cost against graph size"


def launches_for(kernels):
    # Fewer launches than CUDA queues without blocking, so that the loop measures what the host
    # spends per launch, not how fast the device runs the graphs.
    return max(20, 200 // kernels)


def captures_for(kernels):
    return max(5, min(50, 4096 // kernels))


class Tensorplay:
    def __init__(self):
        import tensorplay as tp
        from tensorplay import cuda
        self.tp, self.cuda, self.stream = tp, cuda, cuda.Stream()

    def vector(self):
        x = self.tp.zeros(32, device="cuda")
        x += 1  # compile and load the kernel before capturing
        return x

    def capture(self, x, kernels):
        graph = self.cuda.CUDAGraph()
        with self.cuda.graph(graph):
            for _ in range(kernels):
                x += 1
        return graph

    def capture_split(self, x, kernels):
        """(graph, µs from capture_begin() to the last launch, µs of capture_end())."""
        graph = self.cuda.CUDAGraph()
        self.tp.accelerator.synchronize()
        start = time.perf_counter_ns()
        graph.capture_begin()
        for _ in range(kernels):
            x += 1
        launched = time.perf_counter_ns()
        graph.capture_end()
        return graph, (launched - start) / 1e3, (time.perf_counter_ns() - launched) / 1e3

    def release(self, graph):
        graph.reset()

    def replay(self, graph, launches):
        with self.cuda.stream(self.stream):
            return replay_ns(graph.replay, self.stream.synchronize, launches)


class Torch:
    def __init__(self, torch):
        self.torch, self.stream = torch, torch.cuda.Stream()

    def vector(self):
        torch = self.torch
        x = torch.zeros(32, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            x.add_(1)  # warm up on a side stream, as PyTorch's documentation asks
        torch.cuda.current_stream().wait_stream(side)
        return x

    def capture(self, x, kernels):
        graph = self.torch.cuda.CUDAGraph()
        with self.torch.cuda.graph(graph):
            for _ in range(kernels):
                x.add_(1)
        return graph

    def capture_split(self, x, kernels):
        """As Tensorplay.capture_split; capture_begin() captures the current stream, which must
        not be the default one, so this stream is made current before the clock starts."""
        graph = self.torch.cuda.CUDAGraph()
        self.torch.cuda.synchronize()
        with self.torch.cuda.stream(self.stream):
            start = time.perf_counter_ns()
            graph.capture_begin()
            for _ in range(kernels):
                x.add_(1)
            launched = time.perf_counter_ns()
            graph.capture_end()
            ended = time.perf_counter_ns()
        return graph, (launched - start) / 1e3, (ended - launched) / 1e3

    def release(self, graph):
        graph.reset()

    def replay(self, graph, launches):
        with self.torch.cuda.stream(self.stream):
            return replay_ns(graph.replay, self.stream.synchronize, launches)


class Cupy:
    """CuPy's graphs: Stream.begin_capture() / end_capture(), which instantiates, and
    Graph.launch(stream)."""

    def __init__(self, cupy):
        self.cupy, self.stream = cupy, cupy.cuda.Stream(non_blocking=True)

    def vector(self):
        with self.stream:
            x = self.cupy.zeros(32, dtype=self.cupy.float32)
            x += 1
        self.stream.synchronize()
        return x

    def capture(self, x, kernels):
        self.stream.synchronize()
        with self.stream:
            self.stream.begin_capture()
            try:
                for _ in range(kernels):
                    x += 1
            finally:  # a capture left open would make the other libraries' calls illegal
                graph = self.stream.end_capture()
        return graph

    def capture_split(self, x, kernels):
        """As Tensorplay.capture_split; end_capture() instantiates."""
        self.stream.synchronize()
        with self.stream:
            start = time.perf_counter_ns()
            self.stream.begin_capture()
            try:
                for _ in range(kernels):
                    x += 1
            finally:
                launched = time.perf_counter_ns()
                graph = self.stream.end_capture()
            ended = time.perf_counter_ns()
        return graph, (launched - start) / 1e3, (ended - launched) / 1e3

    def release(self, graph):
        pass  # CuPy frees a graph when its last reference goes

    def replay(self, graph, launches):
        return replay_ns(lambda: graph.launch(self.stream), self.stream.synchronize, launches)


def libraries(notes):
    found = {OURS: Tensorplay()}
    torch = import_peer("torch", TORCH, notes)
    if torch is not None:
        found[TORCH] = Torch(torch)
    cupy = import_peer("cupy", CUPY, notes)
    if cupy is not None:
        found[CUPY] = Cupy(cupy)
    return found


def graphs_of(name, library, notes, kept):
    """{kernels: graph} of a library, or, for a peer whose capture fails, None with a note."""
    def build():
        graphs = {}
        for kernels in SIZES:
            x = library.vector()
            graphs[kernels] = library.capture(x, kernels)
            kept.append(x)
        return graphs
    return build() if name == OURS else prepared(name, build, notes)


def c_side(notes, kinds):
    """The C program's side: its figures of the kinds named ({kind: tag}), each under its size
    where the tag is None, else under (tag, size)."""
    raw = raw_c_side("raw_graph_launch.cu", notes)
    if raw is None:
        return None
    return lambda: {size if kinds[kind] is None else (kinds[kind], size): value
                    for (kind, size), value in raw().items() if kind in kinds}


def replay(quick, notes):
    sides = {}
    raw = c_side(notes, {"cudaGraphLaunch": None})
    if raw is not None:
        sides[RAW_C] = raw
    kept = []  # the graphs' tensors
    for name, library in libraries(notes).items():
        graphs = graphs_of(name, library, notes, kept)
        if graphs is not None:
            sides[name] = lambda library=library, graphs=graphs: {
                kernels: library.replay(graph, launches_for(kernels))
                for kernels, graph in graphs.items()}
    figures = interleaved(sides, trials(quick), notes)
    records = []
    for kernels in SIZES:
        targets = {RAW_C: REPLAY_TARGET} if kernels == 1 else {}
        records += compare("replay", f"replay(), {kernels}-kernel graph", "ns", figures,
                           key=kernels, targets=targets, sweep=REPLAY_SWEEP, x=kernels)
    return records


def split_medians(library, x):
    """(median µs to the last launch, median µs of capture_end()) over SPLIT_CAPTURES split
    captures of SPLIT_KERNELS kernels."""
    launches, ends = [], []
    for _ in range(SPLIT_CAPTURES):
        graph, launched, ended = library.capture_split(x, SPLIT_KERNELS)
        library.release(graph)
        launches.append(launched)
        ends.append(ended)
    return statistics.median(launches), statistics.median(ends)


# The split capture in a child process that imports tensorplay alone, as the C program runs:
# prints [median µs to the last launch, median µs of capture_end()].
ALONE_SPLIT = f"""
import json, sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
from bench_graphs import Tensorplay, split_medians
library = Tensorplay()
print(json.dumps(split_medians(library, library.vector())))
"""


# The CPUs the split pairs take in turn.
PAIR_CPUS = itertools.cycle(sorted(os.sched_getaffinity(0)))


def split_pair():
    """The C program's split and tensorplay's, each timed in a process of its own (ALONE_SPLIT),
    back to back on the next CPU: tensorplay's figures, and the C program's under "raw"."""
    cpu = next(PAIR_CPUS)
    raw = raw_c_figures("raw_graph_launch.cu", (), cpu)
    child = subprocess.run([sys.executable, "-c", ALONE_SPLIT], capture_output=True, text=True,
                           timeout=120, check=True, preexec_fn=pinned_on(cpu))
    launches, end = json.loads(child.stdout.strip().splitlines()[-1])
    figures = {("launches alone", SPLIT_KERNELS): launches, ("end alone", SPLIT_KERNELS): end}
    for kind, tag in (("launches under capture", "launches alone"),
                      ("end capture and instantiate", "end alone")):
        if (kind, SPLIT_KERNELS) in raw:
            figures[("raw " + tag, SPLIT_KERNELS)] = raw[(kind, SPLIT_KERNELS)]
    return figures


def capture(quick, notes):
    def side(library, alone=dict):
        """alone: the figures timed in a process of the library's own (ours only)."""
        x = library.vector()

        def once(kernels):
            start = time.perf_counter_ns()
            graph = library.capture(x, kernels)
            elapsed = (time.perf_counter_ns() - start) / 1e3
            library.release(graph)
            return elapsed

        def split():
            launches, end = split_medians(library, x)
            return {("launches", SPLIT_KERNELS): launches, ("end", SPLIT_KERNELS): end}

        # x lives across the captures, so that no cached block waits for the empty_cache()
        # that tensorplay and PyTorch run on entry.
        return lambda: {**{kernels: statistics.median([once(kernels) for _ in
                                                       range(captures_for(kernels))])
                           for kernels in SIZES}, **split(), **alone()}

    sides = {}
    for name, library in libraries(notes).items():
        made = side(library, split_pair) if name == OURS else \
            prepared(name, lambda: side(library), notes)
        if made is not None:
            sides[name] = made
    raw = c_side(notes, {"capture": None})
    if raw is not None:
        sides[RAW_C] = raw
    figures = interleaved(sides, trials(quick), notes)
    for tag in ("launches alone", "end alone"):  # split_pair's C figures go to the C column
        paired = figures[OURS].pop(("raw " + tag, SPLIT_KERNELS), None)
        if paired is not None and RAW_C in figures:
            figures[RAW_C][(tag, SPLIT_KERNELS)] = paired
    records = []
    for kernels in SIZES:
        targets = {TORCH: CAPTURE_TARGET} if kernels == 1 else {}
        records += compare("capture", f"capture and instantiate, {kernels}-kernel graph", "us",
                           figures, key=kernels, targets=targets, sweep=CAPTURE_SWEEP, x=kernels)
    records += compare("capture", f"capture of {SPLIT_KERNELS} kernels, capture_begin() to the "
                       "last launch", "us", figures, key=("launches", SPLIT_KERNELS),
                       targets=LAUNCHES_TARGETS)
    records += compare("capture", f"capture_end() of {SPLIT_KERNELS} kernels (end, instantiate)",
                       "us", figures, key=("end", SPLIT_KERNELS))
    records += compare("capture", f"capture of {SPLIT_KERNELS} kernels, capture_begin() to the "
                       "last launch, in a process of its own", "us", figures,
                       key=("launches alone", SPLIT_KERNELS), targets=ALONE_TARGETS)
    records += compare("capture", f"capture_end() of {SPLIT_KERNELS} kernels, in a process of "
                       "its own", "us", figures, key=("end alone", SPLIT_KERNELS))
    notes.append(f"capture: the {SPLIT_KERNELS}-kernel split is timed around capture_begin(), "
                 "the launches and capture_end() (begin_capture() and end_capture() for CuPy), "
                 f"none of graph()'s synchronise and empty_cache() on entry; {RAW_C} launches "
                 "with cuLaunchKernel, as tensorplay does")
    return records


AREAS = {"replay": replay, "capture": capture}

if __name__ == "__main__":
    main(AREAS, __doc__)
