"""Graphed training on the GPU: tensorplay against PyTorch on the same MLP, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_graphed_callables.py
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
TRIALS passes measure tensorplay and PyTorch in turn; each figure is the best over them.
"""
import torch
from baselines import ours_ms, replay_ns, torch_ms

import tensorplay as tp
from tensorplay import _schema, cuda, nn, optim

BATCH, IN, HIDDEN, OUT = 32, 64, 256, 10
TRIALS = 5
ITERATIONS = 50
ITERATION_TARGET = 0.5
WHOLE_STEP_TARGET = 0.9


def tensorplay_model():
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, OUT)).to("cuda")


def torch_model():
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


def torch_iteration():
    model = torch.cuda.make_graphed_callables(torch_model(),
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


def torch_whole_step():
    model = torch_model()
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


def verdict(ratio, target):
    return f"target <= {target}x: {'met' if ratio <= target else 'NOT met'}"


def main():
    torch.zeros(1, device="cuda")
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; "
          f"tensorplay schema {_schema.SCHEMA_HASH}")
    print(f"MLP {IN}-{HIDDEN}-{HIDDEN}-{OUT} with Dropout(0.1), batch {BATCH}, float32")
    # Both run on a non-blocking stream of their own (launches on the legacy default stream
    # synchronise with every other blocking stream, and cost more).
    ours_stream, theirs_stream = cuda.Stream(), torch.cuda.Stream()
    with cuda.stream(ours_stream):
        ours_iteration = tensorplay_iteration()
        ours_graph, ours_kept = tensorplay_whole_step()
    with torch.cuda.stream(theirs_stream):
        theirs_iteration = torch_iteration()
        theirs_graph, theirs_kept = torch_whole_step()

    best = {"iteration": [float("inf")] * 2, "replay": [float("inf")] * 2,
            "device": [float("inf")] * 2}
    for _ in range(TRIALS):
        with cuda.stream(ours_stream):
            ours = (replay_ns(ours_iteration, ours_stream.synchronize, ITERATIONS),
                    replay_ns(ours_graph.replay, ours_stream.synchronize, ITERATIONS),
                    ours_ms(ours_graph.replay))
        with torch.cuda.stream(theirs_stream):
            theirs = (replay_ns(theirs_iteration, theirs_stream.synchronize, ITERATIONS),
                      replay_ns(theirs_graph.replay, theirs_stream.synchronize, ITERATIONS),
                      torch_ms(theirs_graph.replay))
        for key, mine, their in zip(best, ours, theirs):
            best[key] = [min(best[key][0], mine), min(best[key][1], their)]

    (ours_it, theirs_it), (ours_rp, theirs_rp), (ours_dev, theirs_dev) = best.values()
    print(f"\nbest of {TRIALS} trials")
    print(f"{'':>34} {'tensorplay':>12} {'torch':>12} {'tp/torch':>9}")
    print(f"{'graphed iteration, host ns':>34} {ours_it:>12.0f} {theirs_it:>12.0f} "
          f"{ours_it / theirs_it:>9.3f}")
    print(f"{'whole-step replay, host ns':>34} {ours_rp:>12.0f} {theirs_rp:>12.0f} "
          f"{ours_rp / theirs_rp:>9.3f}")
    print(f"{'whole-step replay, device ms':>34} {ours_dev:>12.4f} {theirs_dev:>12.4f} "
          f"{ours_dev / theirs_dev:>9.3f}")
    print("\nsummary")
    print(f"graphed iteration (forward replay, eager loss, backward replay and accumulation): "
          f"tensorplay {ours_it / 1e3:.1f} us, torch.cuda.make_graphed_callables "
          f"{theirs_it / 1e3:.1f} us; ratio {ours_it / theirs_it:.3f} "
          f"({verdict(ours_it / theirs_it, ITERATION_TARGET)})")
    print(f"whole-step graph replay, host: tensorplay {ours_rp:.0f} ns, torch {theirs_rp:.0f} ns; "
          f"ratio {ours_rp / theirs_rp:.3f} ({verdict(ours_rp / theirs_rp, WHOLE_STEP_TARGET)}); "
          f"device: {ours_dev * 1e3:.1f} us against {theirs_dev * 1e3:.1f} us "
          f"(ratio {ours_dev / theirs_dev:.3f})")
    del ours_kept, theirs_kept


if __name__ == "__main__":
    main()
