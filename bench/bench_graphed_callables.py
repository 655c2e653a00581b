"""Graphed training on the GPU: tensorplay against PyTorch on the same MLPs, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_graphed_callables.py
[--area "graphed callables"|"training step"] [--quick] [--json PATH]. Each figure is the median
over interleaved trials (tensorplay and PyTorch in turn), each library on a non-blocking stream
of its own. The models are Linear(IN, HIDDEN), ReLU, [Dropout(0.1),] Linear(HIDDEN, HIDDEN),
ReLU, Linear(HIDDEN, OUT), float32, in both libraries.
- graphed callables: the model 64-256-256-10 with Dropout(0.1), batch 32.
  - graphed iteration: host nanoseconds per iteration of: call the graphed module (from
    make_graphed_callables) on a fresh input (a copy into the static input and the forward
    replay), compute a small loss eagerly ((y * y).mean()), backward() (the backward replay and
    the gradient accumulation); no optimiser step. Iterations run back to back, ITERATIONS a
    round, best of 7 rounds (baselines.replay_ns), against torch.cuda.make_graphed_callables.
    Target: tensorplay <= 0.5x PyTorch.
  - whole-step graph: one graph holding forward, loss, backward and an SGD step (momentum 0.9),
    captured as PyTorch's documentation captures a whole network; host nanoseconds per
    replay() (back to back, as above) and device milliseconds per replay (CUDA events). Target:
    tensorplay <= 0.5x PyTorch in host time; the device time is printed beside it.
- training step: the whole-step graph (loss (y * y).mean(), SGD momentum 0.9) of models with no
  dropout, batch STEP_BATCH, TF32 off on both sides.
  - time per step: STEP_REPLAYS replays back to back, from the host's first call to the device
    done, per replay, median of STEP_ROUNDS rounds; swept over the width HIDDEN in WIDTHS (IN =
    OUT = HIDDEN / 4), plotted against it. Target for 1024-4096-4096-1024: <= 1.0x PyTorch.
  - device time in and outside matrix multiplies, per step of 1024-4096-4096-1024:
    torch.profiler over PROFILED_REPLAYS replays of each library's graph (CUPTI records every
    kernel of the process, tensorplay's too), each kernel's device time summed by name, a kernel
    a matrix multiply when its name matches MATMUL_KERNEL; the notes list the kernels of each
    class with their milliseconds per step. Target: outside matrix multiplies <= 1.1x PyTorch.
"""
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from harness.baselines import (OURS, TORCH, compare, import_peer, interleaved, main, ours_ms,
                               replay_ns, tf32_off, torch_ms, trials)

import tensorplay as tp
from tensorplay import cuda, nn, optim

BATCH, IN, HIDDEN, OUT = 32, 64, 256, 10
ITERATIONS = 50
ITERATION_TARGET = 0.5
WHOLE_STEP_TARGET = 0.5

STEP_BATCH = 256
WIDTHS = (256, 1024, 2048, 4096)
QUICK_WIDTHS = (1024, 4096)
TARGET_WIDTH = 4096  # the model 1024-4096-4096-1024
STEP_REPLAYS = 20
STEP_ROUNDS = 3
STEP_TARGET = 1.0
OUTSIDE_TARGET = 1.1
PROFILED_REPLAYS = 5
PROFILE_TRIALS, QUICK_PROFILE_TRIALS = 3, 1
WIDTH_SWEEP = "training step time against model width"
# cuBLAS's and CUTLASS's kernel names (sgemm, xmma_gemm, cutlass, nvjet, splitKreduce, gemv; an
# sm90_ or ampere_ prefix) and tensorplay's own matmul kernel.
MATMUL_KERNEL = re.compile(r"gemm|gemv|cutlass|xmma|cublas|nvjet|splitk|sm\d+_|ampere|hopper|"
                           r"matmul", re.IGNORECASE)
NAME_SHOWN = 90  # characters of a kernel's name in the notes (C++ templates run to thousands)


def tensorplay_model(fan_in=IN, hidden=HIDDEN, fan_out=OUT, dropout=0.1):
    layers = [nn.Linear(fan_in, hidden), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers += [nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, fan_out)]
    return nn.Sequential(*layers).to("cuda")


def torch_model(torch, fan_in=IN, hidden=HIDDEN, fan_out=OUT, dropout=0.1):
    layers = [torch.nn.Linear(fan_in, hidden), torch.nn.ReLU()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    layers += [torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
               torch.nn.Linear(hidden, fan_out)]
    return torch.nn.Sequential(*layers).cuda()


def tensorplay_iteration():
    model = tp.cuda.graphs.make_graphed_callables(tensorplay_model(),
                                                  (tp.randn(BATCH, IN, device="cuda"),))
    fresh = tp.randn(BATCH, IN, device="cuda")

    def iteration():
        output = model(fresh)
        (output * output).mean().backward()

    return iteration


def torch_iteration(torch):
    model = torch.cuda.make_graphed_callables(torch_model(torch),
                                              (torch.randn(BATCH, IN, device="cuda"),))
    fresh = torch.randn(BATCH, IN, device="cuda")

    def iteration():
        output = model(fresh)
        (output * output).mean().backward()

    return iteration


def tensorplay_whole_step(model, batch=BATCH, fan_in=IN):
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = tp.randn(batch, fan_in, device="cuda")
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # warm up: kernels loaded before the capture
        for _ in range(3):
            optimizer.zero_grad()
            output = model(static_x)
            (output * output).mean().backward()
            optimizer.step()
    del output  # the last warm-up's autograd graph, as in PyTorch's (below)
    cuda.current_stream().wait_stream(side)
    optimizer.zero_grad()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        output = model(static_x)
        (output * output).mean().backward()
        optimizer.step()
    return graph, (model, optimizer, static_x)


def torch_whole_step(torch, model, batch=BATCH, fan_in=IN):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = torch.randn(batch, fan_in, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            output = model(static_x)
            (output * output).mean().backward()
            optimizer.step()
    # The last warm-up's autograd graph: alive, it keeps the parameters' AccumulateGrad nodes,
    # tied to the warm-up's stream, which PyTorch warns would synchronise in the capture.
    del output
    torch.cuda.current_stream().wait_stream(side)
    optimizer.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        output = model(static_x)
        (output * output).mean().backward()
        optimizer.step()
    return graph, (model, optimizer, static_x)


def graphed_callables(quick, notes):
    torch = import_peer("torch", TORCH, notes)
    notes.append(f"graphed callables: MLP {IN}-{HIDDEN}-{HIDDEN}-{OUT} with Dropout(0.1), "
                 f"batch {BATCH}, float32")
    # Each runs on a non-blocking stream of its own (launches on the legacy default stream
    # synchronise with every other blocking stream, and cost more).
    ours_stream = cuda.Stream()
    with cuda.stream(ours_stream):
        ours_iteration = tensorplay_iteration()
        ours_graph, ours_kept = tensorplay_whole_step(tensorplay_model())
    kept = [ours_kept]  # the models and optimisers the graphs replay on, alive until measured

    def ours():
        with cuda.stream(ours_stream):
            return {"iteration": replay_ns(ours_iteration, ours_stream.synchronize, ITERATIONS),
                    "replay": replay_ns(ours_graph.replay, ours_stream.synchronize, ITERATIONS),
                    "device": ours_ms(ours_graph.replay)}

    sides = {OURS: ours}
    if torch is not None:
        theirs_stream = torch.cuda.Stream()
        with torch.cuda.stream(theirs_stream):
            theirs_iteration = torch_iteration(torch)
            theirs_graph, theirs_kept = torch_whole_step(torch, torch_model(torch))
        kept.append(theirs_kept)

        def theirs():
            with torch.cuda.stream(theirs_stream):
                return {"iteration": replay_ns(theirs_iteration, theirs_stream.synchronize,
                                               ITERATIONS),
                        "replay": replay_ns(theirs_graph.replay, theirs_stream.synchronize,
                                            ITERATIONS),
                        "device": torch_ms(theirs_graph.replay)}

        sides[TORCH] = theirs
    figures = interleaved(sides, trials(quick), notes)
    del kept
    return (compare("graphed callables", "graphed iteration (forward, eager loss, backward), "
                    "host", "ns", figures, key="iteration", targets={TORCH: ITERATION_TARGET})
            + compare("graphed callables", "whole training step replay(), host", "ns", figures,
                      key="replay", targets={TORCH: WHOLE_STEP_TARGET})
            + compare("graphed callables", "whole training step replay(), device", "ms",
                      figures, key="device"))


def until_done_ms(replay, synchronize):
    """Milliseconds per replay of STEP_REPLAYS replays back to back, from the host's first call
    to the device done, median of STEP_ROUNDS rounds after a warm-up replay."""
    replay()
    synchronize()
    rounds = []
    for _ in range(STEP_ROUNDS):
        synchronize()
        start = time.perf_counter_ns()
        for _ in range(STEP_REPLAYS):
            replay()
        synchronize()
        rounds.append((time.perf_counter_ns() - start) / STEP_REPLAYS / 1e6)
    return statistics.median(rounds)


def kernel_ms(torch, replay, synchronize):
    """{kernel name: device milliseconds per replay} over PROFILED_REPLAYS replays, from
    torch.profiler's trace of the device (its CUPTI activity records every kernel of the
    process, whichever library launched it)."""
    from torch.profiler import ProfilerActivity, profile
    synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        for _ in range(PROFILED_REPLAYS):
            replay()
        synchronize()
    with tempfile.TemporaryDirectory(prefix="tensorplay-bench-") as scratch:
        trace = Path(scratch) / "trace.json"
        profiler.export_chrome_trace(str(trace))
        events = json.loads(trace.read_text()).get("traceEvents", [])
    found = {}
    for event in events:
        if event.get("cat") == "kernel":  # "dur" in microseconds
            found[event["name"]] = (found.get(event["name"], 0.0)
                                    + event["dur"] / 1e3 / PROFILED_REPLAYS)
    if not found:
        raise RuntimeError("torch.profiler recorded no kernel of the replays")
    return found


def shown_kernels(kernels):
    """name ms, ..., the most costly first, each name cut to NAME_SHOWN characters."""
    ranked = sorted(kernels.items(), key=lambda item: -item[1])
    return ", ".join(f"{name if len(name) <= NAME_SHOWN else name[:NAME_SHOWN] + '...'} "
                     f"{ms:.3f}" for name, ms in ranked)


def training_step(quick, notes):
    torch = import_peer("torch", TORCH, notes)
    widths = QUICK_WIDTHS if quick else WIDTHS
    notes.append(f"training step: {tf32_off(tp, torch)}")
    notes.append(f"training step: models H/4-H-H-H/4 for H in {', '.join(map(str, widths))}, no "
                 f"dropout, batch {STEP_BATCH}, float32, loss (y * y).mean(), SGD "
                 f"momentum 0.9, forward, loss, backward and step captured as one graph; "
                 f"{STEP_REPLAYS} replays back to back, until the device is done")
    ours_stream = cuda.Stream()
    ours_graphs, kept = {}, []  # kept: the models and optimisers the graphs replay on
    with cuda.stream(ours_stream):
        for hidden in widths:
            ours_graphs[hidden], held = tensorplay_whole_step(
                tensorplay_model(hidden // 4, hidden, hidden // 4, dropout=0), STEP_BATCH,
                hidden // 4)
            kept.append(held)
    replays = {OURS: (ours_graphs, ours_stream)}

    def ours():
        with cuda.stream(ours_stream):
            return {hidden: until_done_ms(graph.replay, ours_stream.synchronize)
                    for hidden, graph in ours_graphs.items()}

    sides = {OURS: ours}
    if torch is not None:
        theirs_stream = torch.cuda.Stream()
        theirs_graphs = {}
        with torch.cuda.stream(theirs_stream):
            for hidden in widths:
                theirs_graphs[hidden], held = torch_whole_step(
                    torch, torch_model(torch, hidden // 4, hidden, hidden // 4, dropout=0),
                    STEP_BATCH, hidden // 4)
                kept.append(held)
        replays[TORCH] = (theirs_graphs, theirs_stream)

        def theirs():
            with torch.cuda.stream(theirs_stream):
                return {hidden: until_done_ms(graph.replay, theirs_stream.synchronize)
                        for hidden, graph in theirs_graphs.items()}

        sides[TORCH] = theirs
    figures = interleaved(sides, trials(quick), notes)
    records = []
    for hidden in widths:
        model = f"{hidden // 4}-{hidden}-{hidden}-{hidden // 4}"
        targets = {TORCH: STEP_TARGET} if hidden == TARGET_WIDTH else {}
        records += compare("training step", f"step of {model}, batch {STEP_BATCH}, until the "
                           "device is done", "ms", figures, key=hidden, targets=targets,
                           sweep=WIDTH_SWEEP, x=hidden)
    if torch is None:
        notes.append("training step: the device time in and outside matrix multiplies is "
                     f"measured with torch.profiler, and {TORCH} is not there")
        return records
    return records + device_split(torch, replays, quick, notes)


def device_split(torch, replays, quick, notes):
    """The records of the TARGET_WIDTH step's device time in and outside matrix multiplies."""
    model = f"{TARGET_WIDTH // 4}-{TARGET_WIDTH}-{TARGET_WIDTH}-{TARGET_WIDTH // 4}"
    seen = {}  # the kernels of each side's last trial, for the notes

    def side(name):
        graphs, stream = replays[name]

        def measure():
            with (cuda.stream(stream) if name == OURS else torch.cuda.stream(stream)):
                kernels = kernel_ms(torch, graphs[TARGET_WIDTH].replay, stream.synchronize)
            seen[name] = kernels
            inside = sum(ms for kernel, ms in kernels.items() if MATMUL_KERNEL.search(kernel))
            return {"matmul": inside, "other": sum(kernels.values()) - inside}
        return measure

    try:
        figures = interleaved({name: side(name) for name in replays},
                              QUICK_PROFILE_TRIALS if quick else PROFILE_TRIALS, notes)
    except Exception as error:  # the profiler, not tensorplay: the other records stand
        notes.append(f"training step: device time in and outside matrix multiplies not "
                     f"measured: torch.profiler failed ({type(error).__name__}: {error})")
        return []
    for name, kernels in seen.items():
        inside = {kernel: ms for kernel, ms in kernels.items() if MATMUL_KERNEL.search(kernel)}
        outside = {kernel: ms for kernel, ms in kernels.items() if kernel not in inside}
        notes.append(f"training step {model}, {name}'s kernels, device ms per step: matrix "
                     f"multiplies: {shown_kernels(inside) or 'none'}; others: "
                     f"{shown_kernels(outside) or 'none'}")
    notes.append(f"training step: a kernel is a matrix multiply when its name matches "
                 f"{MATMUL_KERNEL.pattern!r} (any case)")
    return (compare("training step", f"step of {model}, device time in matrix multiplies",
                    "ms", figures, key="matmul")
            + compare("training step", f"step of {model}, device time outside matrix "
                      "multiplies", "ms", figures, key="other", targets={TORCH: OUTSIDE_TARGET}))


AREAS = {"graphed callables": graphed_callables, "training step": training_step}

if __name__ == "__main__":
    main(AREAS, __doc__)
