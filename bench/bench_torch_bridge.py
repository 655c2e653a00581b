"""The PyTorch bridge on the GPU: K decode steps of a PyTorch model in one replay (a tensorplay
while node) against K replays of a PyTorch CUDA graph of one step (issue 38, item 4), and the
bridge's host costs against PyTorch's own graphs (item 5).

Run on the GPU machine after installing the package (PyTorch installed):
    python bench/bench_torch_bridge.py [--quick] [--json PATH]

The model is a tiny PyTorch MLP language model: Embedding(VOCAB, WIDTH), Linear(WIDTH, HIDDEN),
ReLU, Linear(HIDDEN, VOCAB), float32, BATCH sequences decoded in parallel. One decode step reads
the last token of each sequence, computes the logits, samples the next token by inverse CDF
(softmax(logits / TEMPERATURE), cumsum, count of entries below a uniform draw), writes it at
the step's position of the token buffer and advances the counter; the loop stops after K steps
or when every sequence has produced END_TOKEN.

- tensorplay: the whole loop is one graph, captured through tensorplay.torch.graph: the step's
  PyTorch ops inside one while node whose predicate (a PyTorch bool tensor: step < K and not all
  done) is recomputed on the device at the end of each pass; the uniform draws come from
  tensorplay's graph-safe generator, written by Tensor.uniform_() into a PyTorch tensor viewed
  through DLPack (tensorplay.from_dlpack), so every pass draws fresh numbers and a replay takes
  the offsets the same draws made eagerly would take. One replay() decodes up to K tokens.
- PyTorch: one step captured with torch.cuda.graph, replayed K times from the host: the same
  device work (its own graph-safe torch.rand for the draws), the stop condition computed on the
  device as ours is, but never read (stopping would need a host read per step), so both sides
  do the same work per step and the figures compare the loops.
Both are timed from the host's first call to the device done (CUDA events), median of ROUNDS,
per decode step (one token for each of the BATCH sequences).

The same run also measures the bridge's host costs against PyTorch's own graphs, on the MLP
Linear(WIDTH, HIDDEN), ReLU, Linear(HIDDEN, WIDTH) at batch BATCH:
- replay: host microseconds per replay() of its forward pass captured through
  tensorplay.torch.graph, against torch.cuda.CUDAGraph.replay() of the same capture, HOST_CALLS
  calls back to back, best of ROUNDS;
- graphed iteration: host microseconds per call of the module graphed by
  tensorplay.torch.make_graphed_callables plus backward() of (y * y).mean(), against
  torch.cuda.make_graphed_callables, likewise.

Check: the tokens of one tensorplay replay equal those of the eager loop (the same PyTorch ops
and the same tensorplay draws, one Python iteration per step, with the host reading the stop
condition) after the same tensorplay.manual_seed(SEED). The script exits non-zero otherwise.
"""
import argparse
import json
import statistics
import sys
import time

import torch

import tensorplay
import tensorplay.torch
from tensorplay import cuda

VOCAB, WIDTH, HIDDEN, BATCH = 256, 128, 512, 8
TEMPERATURE = 0.8
END_TOKEN = 0
SEED = 1234
KS = (1, 8, 64)
ROUNDS, QUICK_ROUNDS = 20, 5
WARMUP = 3
HOST_CALLS = 200
AREA = "torch bridge"  # the performance report's section (bench/harness/report.py)


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.up = torch.nn.Linear(WIDTH, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens):
        return self.down(torch.relu(self.up(self.embed(tokens))))


class DecodeState:
    """The device buffers one decode loop reads and writes, PyTorch tensors all; uniform_tp is
    the tensorplay view of uniform (DLPack), which the sampler fills."""

    def __init__(self, k):
        device = "cuda"
        self.k = k
        self.tokens = torch.zeros(k, BATCH, dtype=torch.int64, device=device)
        self.last = torch.zeros(BATCH, dtype=torch.int64, device=device)
        self.step = torch.zeros((), dtype=torch.int64, device=device)
        self.done = torch.zeros(BATCH, dtype=torch.bool, device=device)
        self.keep_going = torch.ones(1, dtype=torch.bool, device=device)
        self.uniform = torch.empty(BATCH, 1, dtype=torch.float32, device=device)
        self.uniform_tp = tensorplay.from_dlpack(self.uniform)

    def reset(self, first):
        self.tokens.zero_()
        self.last.copy_(first)
        self.step.zero_()
        self.done.zero_()
        self.keep_going.fill_(True)


def decode_step(model, state, draw=None):
    """One step: sample the next token of each sequence into state (device work only). draw
    fills state.uniform; by default tensorplay's generator, graph-safe in a while body."""
    logits = model(state.last)
    probs = torch.softmax(logits / TEMPERATURE, dim=-1)
    if draw is None:
        state.uniform_tp.uniform_()
    else:
        draw()
    cdf = torch.cumsum(probs, dim=-1)
    token = (cdf < state.uniform).sum(dim=-1).clamp_(max=VOCAB - 1)
    token = torch.where(state.done, torch.full_like(token, END_TOKEN), token)
    state.tokens.index_copy_(0, state.step.view(1), token.view(1, BATCH))
    state.last.copy_(token)
    state.done |= token == END_TOKEN
    state.step += 1
    state.keep_going.copy_(torch.logical_and(state.step < state.k, ~state.done.all()))


def eager_tokens(model, state, first):
    tensorplay.manual_seed(SEED)
    state.reset(first)
    for _ in range(state.k):
        decode_step(model, state)
        if not bool(state.keep_going):
            break
    torch.cuda.synchronize()
    return state.tokens.clone()


def capture_while_loop(model, state, first):
    """The whole loop as one tensorplay graph: one while node over decode_step."""
    state.reset(first)
    graph = cuda.CUDAGraph()
    with tensorplay.torch.graph(graph):
        graph.begin_capture_to_while_node(state.keep_going)
        decode_step(model, state)
        graph.end_capture_to_conditional_node()
    return graph


def capture_torch_step(model, state, first):
    """One step as a PyTorch graph: the same device work as decode_step (the stop condition
    included, though no replay reads it), with PyTorch's own graph-safe sampling."""
    state.reset(first)

    def torch_step():
        decode_step(model, state,
                    lambda: torch.rand(BATCH, 1, device="cuda", out=state.uniform))

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):  # each from the first position: the buffer holds K tokens
            state.reset(first)
            torch_step()
    torch.cuda.current_stream().wait_stream(side)
    state.reset(first)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        torch_step()
    return graph


def timed_ms(run, rounds):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def measure(k, rounds):
    torch.manual_seed(0)
    model = TinyLM().cuda().eval()
    first = torch.randint(1, VOCAB, (BATCH,), device="cuda")
    # The eager loop also loads every kernel before the captures.
    reference_state = DecodeState(k)
    with torch.no_grad():
        expected = eager_tokens(model, reference_state, first)

        state = DecodeState(k)
        ours = capture_while_loop(model, state, first)
        tensorplay.manual_seed(SEED)
        state.reset(first)
        # Replays run on tensorplay's current stream, the legacy default one, as PyTorch's
        # eager work here does.
        ours.replay()
        torch.cuda.synchronize()
        got = state.tokens.clone()
        steps = int(state.step)

        def run_ours():
            state.reset(first)
            ours.replay()

        ours_ms = timed_ms(run_ours, rounds)

        torch_state = DecodeState(k)
        theirs = capture_torch_step(model, torch_state, first)

        def run_theirs():
            torch_state.reset(first)
            for _ in range(k):
                theirs.replay()

        theirs_ms = timed_ms(run_theirs, rounds)
    return {
        "k": k,
        "tokens_equal_eager": bool(torch.equal(got, expected)),
        "steps_decoded": steps,
        "tensorplay_us_per_step": 1000.0 * ours_ms / max(steps, 1),
        "pytorch_us_per_step": 1000.0 * theirs_ms / k,
    }


def host_us(call, rounds):
    """Best, over rounds, of host microseconds per call of HOST_CALLS calls back to back."""
    best = float("inf")
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(HOST_CALLS):
            call()
        best = min(best, (time.perf_counter() - start) * 1e6 / HOST_CALLS)
    torch.cuda.synchronize()
    return best


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, WIDTH)).cuda()


def measure_host_costs(rounds):
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(BATCH, WIDTH, device="cuda")
    with torch.no_grad():
        model(x)
        torch.cuda.synchronize()
        ours = cuda.CUDAGraph()
        with tensorplay.torch.graph(ours):
            model(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(x)
        torch.cuda.current_stream().wait_stream(side)
        theirs = torch.cuda.CUDAGraph()
        with torch.cuda.graph(theirs):
            model(x)
    replay = (host_us(ours.replay, rounds), host_us(theirs.replay, rounds))

    sample = torch.randn(BATCH, WIDTH, device="cuda")
    graphed_ours = tensorplay.torch.make_graphed_callables(mlp(), (sample,))
    graphed_theirs = torch.cuda.make_graphed_callables(mlp(), (sample,))
    fresh = torch.randn(BATCH, WIDTH, device="cuda")

    def iteration(module):
        def call():
            y = module(fresh)
            (y * y).mean().backward()
        return call

    graphed = (host_us(iteration(graphed_ours), rounds),
               host_us(iteration(graphed_theirs), rounds))
    return {"replay_host_us": {"tensorplay": replay[0], "pytorch": replay[1]},
            "graphed_iteration_host_us": {"tensorplay": graphed[0], "pytorch": graphed[1]}}


def records(results, costs):
    """The figures as bench/harness/report.py collects them (Note [Records] in
    bench/harness/baselines.py): one record per K and per host cost, tensorplay over PyTorch."""
    found = []
    for row in results:
        found.append({"area": AREA, "case": f"decode, K={row['k']}: time per step", "unit": "us",
                      "tensorplay": row["tensorplay_us_per_step"],
                      "peer_name": "PyTorch (torch.cuda.graph of one step, K replays)",
                      "peer": row["pytorch_us_per_step"],
                      "ratio": row["tensorplay_us_per_step"] / row["pytorch_us_per_step"],
                      "target": None, "steps_decoded": row["steps_decoded"],
                      "tokens_equal_eager": row["tokens_equal_eager"]})
    names = {"replay_host_us": "replay(), host", "graphed_iteration_host_us":
             "make_graphed_callables iteration (forward + backward), host"}
    for name, pair in costs.items():
        found.append({"area": AREA, "case": names[name], "unit": "us",
                      "tensorplay": pair["tensorplay"], "peer_name": "PyTorch",
                      "peer": pair["pytorch"], "ratio": pair["tensorplay"] / pair["pytorch"],
                      "target": None})
    notes = [f"{AREA}: decode steps of a {WIDTH}-{HIDDEN}-{VOCAB} MLP language model, batch "
             f"{BATCH}; tokens of one tensorplay replay equal the eager loop's: "
             f"{all(row['tokens_equal_eager'] for row in results)}"]
    return {"records": found, "notes": notes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_ROUNDS} rounds")
    parser.add_argument("--json", help="write the results to this file")
    options = parser.parse_args()
    rounds = QUICK_ROUNDS if options.quick else ROUNDS
    results = [measure(k, rounds) for k in KS]
    costs = measure_host_costs(rounds)
    for row in results:
        ratio = row["tensorplay_us_per_step"] / row["pytorch_us_per_step"]
        print(f"K={row['k']:>3}: tensorplay {row['tensorplay_us_per_step']:8.2f} us/step "
              f"({row['steps_decoded']} steps), PyTorch graph x K "
              f"{row['pytorch_us_per_step']:8.2f} us/step, ratio {ratio:.2f}x, tokens equal "
              f"eager: {row['tokens_equal_eager']}")
    for name, pair in costs.items():
        print(f"{name}: tensorplay {pair['tensorplay']:.2f} us, PyTorch {pair['pytorch']:.2f} us, "
              f"ratio {pair['tensorplay'] / pair['pytorch']:.2f}x")
    if options.json:
        with open(options.json, "w", encoding="utf-8") as handle:
            json.dump(records(results, costs), handle, indent=2)
    if not all(row["tokens_equal_eager"] for row in results):
        sys.exit("tensorplay's tokens differ from the eager loop's")


if __name__ == "__main__":
    main()
