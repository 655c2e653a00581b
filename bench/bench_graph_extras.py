"""A while node against host-driven loops, and stage_and_launch against copies plus replay.

Run on the GPU machine after installing the package:  python bench/bench_graph_extras.py
[--area staging|"conditional nodes"] [--quick] [--json PATH]. Each figure is the median over
interleaved trials.
stage_and_launch: 8 inputs of 1 MiB staged into a graph's static inputs and the graph launched,
in one call, against PyTorch's 8 copy_() calls and replay() (target: at most 0.35x its host
time), and against a C program's 8 cudaMemcpyAsync calls and cudaGraphLaunch
(raw/raw_staging.cu, built with nvcc where it is installed).
For N in 1..1000 loop iterations of a body that adds one to x, counts, and compares the count
with N to decide whether to go on (three kernels and a one-byte copy):
- while graph: one replay() of a graph whose while node runs the body N times;
- N replays: N replay() calls of a graph holding the same body alone.
Printed: host microseconds spent in the launching calls (the device is synchronised outside the
timed part), and microseconds from the first launch to the end of a synchronize, best of
ROUNDS; ratios are while graph / N replays, so below 1 means the while node is cheaper.
"""

from harness.baselines import (OURS, RAW_C, TORCH, best_us, compare, import_peer, interleaved,
                               main, raw_c_side, trials)

import tensorplay as tp
from tensorplay import accelerator, cuda

ITERATIONS = (1, 10, 100, 1000)
STAGED_INPUTS = 8
STAGED_ELEMENTS = (1 << 20) // 4  # float32: 1 MiB each
STAGE_TARGET = 0.35
REPLAYS = "N replay() calls"


def loop_state(iterations):
    """(counter, keep_going) of a loop, after loading every kernel the loop's captures use."""
    counter = tp.zeros(1, device="cuda")
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    keep_going.copy_(counter < iterations)
    counter += 1
    counter.fill_(0)
    accelerator.synchronize()
    return counter, keep_going


def capture_body(x, counter, keep_going, iterations):
    x += 1
    counter += 1
    keep_going.copy_(counter < iterations)


def while_graph(x, counter, keep_going, iterations):
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        counter.fill_(0)
        keep_going.copy_(counter < iterations)
        graph.begin_capture_to_while_node(keep_going)
        capture_body(x, counter, keep_going, iterations)
        graph.end_capture_to_conditional_node()
    return graph


def body_graph(x, counter, keep_going, iterations):
    """The while node's body on its own: what the N replays run."""
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        capture_body(x, counter, keep_going, iterations)
    return graph


def staging(quick, notes):
    """stage_and_launch against PyTorch's copies + replay and the C program's, over graphs that
    read 8 static inputs."""
    ours_launch, check = staged_ours()
    sides = {OURS: lambda: {"stage": best_us(ours_launch, accelerator.synchronize)[0]}}
    torch = import_peer("torch", TORCH, notes)
    if torch is not None:
        theirs_launch = staged_torch(torch)
        sides[TORCH] = lambda: {"stage": best_us(theirs_launch, torch.cuda.synchronize)[0]}
    raw = raw_c_side("raw_staging.cu", notes)
    if raw is not None:
        sides[RAW_C] = lambda: {"stage": raw()[("memcpy_and_launch", STAGED_INPUTS)]}
    figures = interleaved(sides, trials(quick), notes)
    check()
    return compare("staging", f"stage_and_launch(), {STAGED_INPUTS} inputs of 1 MiB, host",
                   "us", figures, key="stage", targets={TORCH: STAGE_TARGET})


def staged_ours():
    """(a call that stages 8 inputs of 1 MiB into a graph's static inputs and launches it with
    stage_and_launch, a check that it staged them)."""
    static = [tp.zeros(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    fresh = [tp.ones(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    for tensor in static:
        tensor *= 2  # load the kernel before the capture
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        for tensor in static:
            tensor *= 2

    def check():
        accelerator.synchronize()
        assert set(static[0].tolist()) == {2.0}, "stage_and_launch did not stage the inputs"

    return lambda: graph.stage_and_launch(static, fresh), check


def staged_torch(torch):
    """The same work in PyTorch: 8 copy_() calls into the static inputs, then replay()."""
    static = [torch.zeros(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    fresh = [torch.ones(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for tensor in static:
            tensor.mul_(2)  # warm up on a side stream, as PyTorch's documentation asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for tensor in static:
            tensor.mul_(2)

    def launch():
        for tensor, new in zip(static, fresh):
            tensor.copy_(new)
        graph.replay()

    return launch


def conditional_nodes(quick, notes):
    """A while node running its body N times against N replay() calls of the body alone."""
    x = tp.zeros(32, device="cuda")
    x += 1
    graphs = {}
    for iterations in ITERATIONS:
        counter, keep_going = loop_state(iterations)
        looping = while_graph(x, counter, keep_going, iterations)
        body = body_graph(x, counter, keep_going, iterations)
        before = x.tolist()[0]
        looping.replay()
        accelerator.synchronize()
        assert x.tolist()[0] == before + iterations, "the while node ran the wrong count"
        graphs[iterations] = looping, body

    def while_side():
        figures = {}
        for iterations, (looping, _) in graphs.items():
            host, total = best_us(looping.replay, accelerator.synchronize)
            figures[("host", iterations)], figures[("total", iterations)] = host, total
        return figures

    def replays_side():
        figures = {}
        for iterations, (_, body) in graphs.items():
            def replays():
                for _ in range(iterations):
                    body.replay()
            host, total = best_us(replays, accelerator.synchronize)
            figures[("host", iterations)], figures[("total", iterations)] = host, total
        return figures

    figures = interleaved({OURS: while_side, REPLAYS: replays_side}, trials(quick), notes)
    notes.append(f"conditional nodes: the tensorplay column is one replay() of a graph whose "
                 f"while node runs the body N times; '{REPLAYS}' is N replay() calls of the "
                 "body alone, launched from the host")
    records = []
    for iterations in ITERATIONS:
        records += compare("conditional nodes", f"while loop of {iterations}, host", "us",
                           figures, key=("host", iterations))
        records += compare("conditional nodes", f"while loop of {iterations}, until done", "us",
                           figures, key=("total", iterations))
    return records


AREAS = {"staging": staging, "conditional nodes": conditional_nodes}

if __name__ == "__main__":
    main(AREAS, __doc__)
