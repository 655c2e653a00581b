"""What every benchmark here compares with: raw CUDA C baselines, and the host-time and
device-time helpers."""
import atexit
import functools
import os
import shutil
import subprocess
import tempfile
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent


def per_call_ns(function, number=20_000, repeat=7):
    """Best of several timeit repeats, in nanoseconds per call, after one warm-up call."""
    function()
    return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e9


REPEATS = 50
ROUNDS = 7  # rounds of the host-time helpers below; each reports its best round


def device_ms(run, start, end, synchronize):
    """Milliseconds per run() on the device, from two CUDA events around REPEATS runs after a
    warm-up run (which compiles kernels and fills the allocator cache)."""
    run()
    synchronize()
    start.record()
    for _ in range(REPEATS):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / REPEATS


def best_us(launch, synchronize):
    """(host µs in launch(), µs until the device is done), each the best of ROUNDS."""
    launch()
    synchronize()
    host = total = float("inf")
    for _ in range(ROUNDS):
        synchronize()
        start = time.perf_counter_ns()
        launch()
        launched = time.perf_counter_ns()
        synchronize()
        done = time.perf_counter_ns()
        host = min(host, (launched - start) / 1e3)
        total = min(total, (done - start) / 1e3)
    return host, total


def replay_ns(replay, synchronize, launches):
    """Best per-launch host time over ROUNDS rounds of back-to-back replays."""
    replay()
    synchronize()
    best = float("inf")
    for _ in range(ROUNDS):
        synchronize()
        start = time.perf_counter_ns()
        for _ in range(launches):
            replay()
        best = min(best, (time.perf_counter_ns() - start) / launches)
    synchronize()
    return best


def ours_ms(run):
    import tensorplay as tp
    return device_ms(run, tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True),
                     tp.accelerator.synchronize)


def torch_ms(run):
    import torch
    return device_ms(run, torch.cuda.Event(enable_timing=True),
                     torch.cuda.Event(enable_timing=True), torch.cuda.synchronize)


def raw_c_figures(source="raw_cuda.c", arguments=("2000",)):
    """{(name, size): figure} from a C baseline here, or {} where nvcc is not available.

    The program is built once per process, so a benchmark can run it between its own
    measurements (interleaved, so that a noisy spell of the machine hits both sides)."""
    binary = _built(source)
    if binary is None:
        return {}
    output = subprocess.run([binary, *arguments], check=True, capture_output=True,
                            text=True).stdout
    figures = {}
    for line in output.splitlines():
        name, size, value = line.rsplit(" ", 2)
        figures[(name, int(size))] = float(value)
    return figures


@functools.cache
def _built(source):
    """The path of source built with nvcc (removed at exit), or None without nvcc."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        return None
    scratch = tempfile.mkdtemp(prefix="tensorplay-bench-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    binary = str(Path(scratch) / Path(source).stem)
    subprocess.run([nvcc, "-O2", "-o", binary, str(HERE / source)], check=True)
    return binary
