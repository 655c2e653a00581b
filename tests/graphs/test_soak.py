"""Soak: threads capturing, replaying, resetting and recapturing graphs at once.

Four threads, each on a stream of its own in 'thread_local' mode, run for
TENSORPLAY_SOAK_SECONDS (20 by default; at most 300 for figures): graphs of random sizes in
private pools and in a pool the thread's graphs share, recaptures into reset graphs that write
outputs of the earlier capture and free them mid-capture, outputs kept alive across resets,
and empty_cache() now and then, as a long-running program calls
it. Every output is checked against the value eager execution gives; once everything is dropped,
memory_reserved() after empty_cache() is back where it started. Run it alone for figures:
TENSORPLAY_SOAK_SECONDS=120 python -m pytest tests/graphs/test_soak.py -s

TENSORPLAY_SOAK_EMPTY_CACHE=0 leaves out the empty_cache() calls, so that reserved memory grows
with every released pool (about 20 GiB in two minutes on an H200) and the held blocks of
thousands of released pools are carried to the end.
"""
import gc
import os
import random
import threading
import time

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

pytestmark = pytest.mark.gpu

THREADS = 4
# TENSORPLAY_SOAK_EMPTY_CACHE=0: never call empty_cache() while the threads run, so that
# reserved memory grows with every released pool until the end.
EMPTY_CACHE = os.environ.get("TENSORPLAY_SOAK_EMPTY_CACHE", "1") != "0"


def _work(seed, deadline, counts, failures):
    rng = random.Random(seed)
    stream = cuda.Stream()
    shared = graphs.graph_pool_handle()
    kept = []  # (tensor, value it must hold) that outlive their graphs
    try:
        with cuda.stream(stream):
            while time.monotonic() < deadline:
                size = rng.choice((1, 7, 512, 4096, 1 << 16, 1 << 18))
                base = float(rng.randrange(1, 100))
                x = tp.full((size,), base, device="cuda")
                g = cuda.CUDAGraph()
                pool = shared if rng.random() < 0.5 else None
                g.capture_begin(pool=pool, stream=stream, capture_error_mode="thread_local")
                y = x * 2
                y += 3
                out = y + 1  # y is freed inside the capture: its own pool
                del y
                g.capture_end()
                replays = rng.randrange(1, 4)
                for _ in range(replays):
                    g.replay()
                expected = base * 2 + 4
                assert set(out.tolist()) == {expected}, (size, base)
                counts["captures"] += 1
                counts["replays"] += replays
                if rng.random() < 0.5:
                    # Recapture into the reset graph: write the earlier output, then free it
                    # during the capture (PyTorch's reset-and-recapture pattern).
                    g.reset()
                    g.capture_begin(pool=pool, stream=stream,
                                    capture_error_mode="thread_local")
                    out += 1
                    out = out * 3
                    g.capture_end()
                    for step in range(1, 3):
                        g.replay()
                        assert set(out.tolist()) == {(expected + step) * 3}
                    expected = (expected + 2) * 3
                    counts["recaptures"] += 1
                    counts["replays"] += 2
                if rng.random() < 0.3:
                    kept.append((out, expected))
                if len(kept) > 8 or rng.random() < 0.2:
                    tensor, value = kept.pop(rng.randrange(len(kept))) if kept else (out, expected)
                    assert set(tensor.tolist()) == {value}
                if rng.random() < 0.5:
                    g.reset()
                del g, out, x
                if EMPTY_CACHE and rng.random() < 0.05:
                    # Memory of released pools goes back to CUDA here, as in PyTorch; it does
                    # nothing while any capture is open, which with four threads is often.
                    memory.empty_cache()
            for tensor, value in kept:
                assert set(tensor.tolist()) == {value}
    except BaseException as error:  # reported by the main thread
        failures.append(error)


def test_threads_capture_replay_and_reset_without_corruption_or_leaks(quiet_device):
    seconds = float(os.environ.get("TENSORPLAY_SOAK_SECONDS", "20"))
    warm = tp.full((16,), 1.0, device="cuda")
    warm = (warm * 2 + 3) + 1
    warm += 1
    warm = warm * 3
    accelerator.synchronize()
    del warm
    memory.empty_cache()
    reserved = memory.memory_reserved()
    pools = memory.memory_stats()["num_graph_pools"]
    counts = {"captures": 0, "recaptures": 0, "replays": 0}
    failures = []
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=_work, args=(seed, deadline, counts, failures))
               for seed in range(THREADS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 300)
    elapsed = time.monotonic() - started
    assert not failures, failures[0]
    peak = memory.max_memory_reserved()
    gc.collect()
    accelerator.synchronize()
    memory.empty_cache()
    print(f"\nsoak: {THREADS} threads, {elapsed:.0f} s: {counts['captures']} captures, "
          f"{counts['recaptures']} recaptures, {counts['replays']} replays; peak reserved "
          f"{peak / 2**20:.0f} MiB; reserved after empty_cache(): "
          f"{memory.memory_reserved()} bytes (start {reserved})")
    assert memory.memory_reserved() == reserved
    assert memory.memory_stats()["num_graph_pools"] == pools
    assert counts["captures"] > 0
