"""Graphed training on the GPU: tensorplay against PyTorch on the same MLP, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_graphed_callables.py
[--quick] [--json PATH]. Each figure is the median over interleaved trials (tensorplay and
PyTorch in turn).
The model is Linear(IN, HIDDEN), ReLU, Dropout(0.1), Linear(HIDDEN, HIDDEN), ReLU,
Linear(HIDDEN, OUT) on a batch of BATCH, float32, in both libraries.
- graphed iteration: host nanoseconds per iteration of: call the graphed module (from
  make_graphed_callables) on a fresh input (a copy into the static input and the forward
  replay), compute a small loss eagerly ((y * y).mean()), backward() (the backward replay and
  the gradient accumulation); no optimiser step. Iterations run back to back, ITERATIONS a round,
  best of 7 rounds (baselines.replay_ns), against torch.cuda.make_graphed_callables. Target:
  tensorplay <= 0.5x PyTorch.
- whole-step graph: one graph holding forward, loss, backward and an SGD step (momentum 0.9),
  captured as PyTorch's documentation captures a whole network; host nanoseconds per replay()
  (back to back, as above) and device milliseconds per replay (CUDA events). Target: tensorplay
  <= 0.9x PyTorch in host time; the device time is printed beside it.
"""
from harness.baselines import (OURS, TORCH, compare, import_peer, interleaved, main, ours_ms,
                               replay_ns, torch_ms, trials)

import tensorplay as tp
from tensorplay import cuda, nn, optim

BATCH, IN, HIDDEN, OUT = 32, 64, 256, 10
ITERATIONS = 50
ITERATION_TARGET = 0.5
WHOLE_STEP_TARGET = 0.9


def tensorplay_model():
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT)).to("cuda")


def torch_model(torch):
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Dropout(0.1), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUT)).cuda()


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


def tensorplay_whole_step():
    model = tensorplay_model()
    optimizer = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = tp.randn(BATCH, IN, device="cuda")
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # warm up: kernels loaded before the capture
        for _ in range(3):
            optimizer.zero_grad()
            output = model(static_x)
            (output * output).mean().backward()
            optimizer.step()
    cuda.current_stream().wait_stream(side)
    optimizer.zero_grad()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        output = model(static_x)
        (output * output).mean().backward()
        optimizer.step()
    return graph, (model, optimizer, static_x)


def torch_whole_step(torch):
    model = torch_model(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    static_x = torch.randn(BATCH, IN, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            output = model(static_x)
            (output * output).mean().backward()
            optimizer.step()
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
        ours_graph, ours_kept = tensorplay_whole_step()
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
            theirs_graph, theirs_kept = torch_whole_step(torch)
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


AREAS = {"graphed callables": graphed_callables}

if __name__ == "__main__":
    main(AREAS, __doc__)
