"""A while node against host-driven loops, and stage_and_launch against copies plus replay.

Run on the GPU machine after installing the package:  python bench/bench_graph_extras.py
stage_and_launch: 8 inputs of 1 MiB staged into a graph's static inputs and the graph launched,
in one call, against PyTorch's 8 copy_() calls and replay() (target: at most 0.35x its host
time), and against a C program's 8 cudaMemcpyAsync calls and cudaGraphLaunch (raw_staging.cu,
built with nvcc where it is installed).
For N in 1..1000 loop iterations of a body that adds one to x, counts, and compares the count
with N to decide whether to go on (three kernels and a one-byte copy):
- while graph: one replay() of a graph whose while node runs the body N times;
- N replays: N replay() calls of a graph holding the same body alone.
Printed: host microseconds spent in the launching calls (the device is synchronised outside the
timed part), and microseconds from the first launch to the end of a synchronize, best of
ROUNDS; ratios are while graph / N replays, so below 1 means the while node is cheaper.
"""

from baselines import ROUNDS, best_us, raw_c_figures

import tensorplay as tp
from tensorplay import accelerator, cuda

ITERATIONS = (1, 10, 100, 1000)
STAGED_INPUTS = 8
STAGED_ELEMENTS = (1 << 20) // 4  # float32: 1 MiB each
STAGE_TARGET = 0.35


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


def staged_calls():
    """(stage_and_launch, PyTorch's copies + replay, a check that staging staged), over graphs
    that read 8 static inputs of 1 MiB."""
    import torch

    ours_static = [tp.zeros(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    ours_fresh = [tp.ones(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    for static in ours_static:
        static *= 2  # load the kernel before the capture
    ours = cuda.CUDAGraph()
    with cuda.graph(ours):
        for static in ours_static:
            static *= 2
    torch_static = [torch.zeros(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    torch_fresh = [torch.ones(STAGED_ELEMENTS, device="cuda") for _ in range(STAGED_INPUTS)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for static in torch_static:
            static.mul_(2)  # warm up on a side stream, as PyTorch's documentation asks
    torch.cuda.current_stream().wait_stream(side)
    theirs = torch.cuda.CUDAGraph()
    with torch.cuda.graph(theirs):
        for static in torch_static:
            static.mul_(2)

    def ours_launch():
        ours.stage_and_launch(ours_static, ours_fresh)

    def torch_launch():
        for static, fresh in zip(torch_static, torch_fresh):
            static.copy_(fresh)
        theirs.replay()

    def check():
        accelerator.synchronize()
        assert set(ours_static[0].tolist()) == {2.0}, "stage_and_launch did not stage the inputs"

    return ours_launch, torch_launch, check


def staged_graphs():
    """(stage_and_launch, PyTorch's copies + replay): host µs of one call, best of ROUNDS."""
    import torch

    ours_launch, torch_launch, check = staged_calls()
    ours_host, _ = best_us(ours_launch, accelerator.synchronize)
    torch_host, _ = best_us(torch_launch, torch.cuda.synchronize)
    check()
    return ours_host, torch_host


def main():
    x = tp.zeros(32, device="cuda")
    x += 1
    print(f"device: {accelerator.current_accelerator()}, {ROUNDS} rounds, best of each")
    print(f"{'N':>6} {'while host us':>14} {'replays host us':>16} {'host ratio':>11} "
          f"{'while total us':>15} {'replays total us':>17} {'total ratio':>12}")
    for iterations in ITERATIONS:
        counter, keep_going = loop_state(iterations)
        looping = while_graph(x, counter, keep_going, iterations)
        body = body_graph(x, counter, keep_going, iterations)
        before = x.tolist()[0]
        looping.replay()
        accelerator.synchronize()
        assert x.tolist()[0] == before + iterations, "the while node ran the wrong count"

        def replays():
            for _ in range(iterations):
                body.replay()

        while_host, while_total = best_us(looping.replay, accelerator.synchronize)
        replays_host, replays_total = best_us(replays, accelerator.synchronize)
        print(f"{iterations:>6} {while_host:>14.1f} {replays_host:>16.1f} "
              f"{while_host / replays_host:>11.3f} {while_total:>15.1f} {replays_total:>17.1f} "
              f"{while_total / replays_total:>12.3f}")
        del looping, body

    ours_host, torch_host = staged_graphs()
    ratio = ours_host / torch_host
    print(f"\nstage_and_launch, {STAGED_INPUTS} inputs of 1 MiB: tensorplay {ours_host:.1f} us, "
          f"torch 8 copy_() + replay() {torch_host:.1f} us; ratio {ratio:.3f} "
          f"(target <= {STAGE_TARGET}x: {'met' if ratio <= STAGE_TARGET else 'NOT met'})")
    raw = raw_c_figures("raw_staging.cu", ())
    if raw:
        c_host = raw[("memcpy_and_launch", STAGED_INPUTS)]
        print(f"C, {STAGED_INPUTS} cudaMemcpyAsync + cudaGraphLaunch: {c_host:.1f} us; "
              f"tensorplay/C {ours_host / c_host:.3f}, torch/C {torch_host / c_host:.3f}")
    else:
        print("C baseline skipped: nvcc not found")


if __name__ == "__main__":
    main()
