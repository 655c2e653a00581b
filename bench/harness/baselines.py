"""What every benchmark in bench/ compares with: raw CUDA C baselines (the programs in
bench/raw/), the host-time and device-time helpers, and the paired measurements, records and
command line every bench script shares.

Note [Records]
Each bench script groups its measurements in areas (allocation, replay, ...), each a function
(quick, notes) -> records. A record is one comparison, the form bench/harness/report.py
collects from every script (`python bench/SCRIPT.py --json PATH` writes {"records": [...],
"notes": [...]}):
  area, case, unit            what was measured, and in what (ns, us, ms, s)
  tensorplay, peer            the medians over interleaved trials; peer is None for a figure
                              with no other library beside it
  tensorplay_spread,          half the interquartile range of the trials, in the unit
  peer_spread
  peer_name                   "PyTorch", "CuPy", "raw C", or a variant ("PyTorch (...)")
  ratio                       tensorplay / peer: below 1.0 tensorplay is faster
  target                      the most the ratio may be, or, with no peer, the most the
                              tensorplay figure may be; None where there is none
  met                         optional: the script's own verdict, where its target is text
                              (">= 1.25" for a throughput in GB/s, where higher is better)
  sweep, x                    for a point of a sweep (the plots of the report): its name and x
  series                      optional, for a sweep of several lines per library (a matmul's
                              float32 and bfloat16): the line's name, shown beside the library's
Lower is better everywhere: a throughput target ("at least 0.9x PyTorch's") is stated as the
time ratio (at most 1 / 0.9), on a record of the time; a sweep of a throughput (TFLOP/s) is
plotted, with no target. notes say which peers were skipped and why, and what else a reader
needs (bandwidths, checks).
"""
import argparse
import atexit
import functools
import importlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import timeit
from dataclasses import dataclass
from pathlib import Path

RAW = Path(__file__).resolve().parents[1] / "raw"  # the raw CUDA C programs


# A repeat of per_call_ns takes about this long at most: a peer's slow call (torch.manual_seed
# at 115 µs, 20,000 times, 7 repeats, 7 trials) would otherwise hold a report area for minutes,
# and a slow call's figure is steady with fewer calls.
REPEAT_SECONDS = 0.05


def per_call_ns(function, number=20_000, repeat=7, synchronize=None):
    """Best of several timeit repeats, in nanoseconds per call, after one warm-up call; number
    is lowered where that many calls would take more than REPEAT_SECONDS. With synchronize, it
    runs before every repeat, untimed, so that a repeat starts with an empty launch queue and
    queues at most number launches: a call that launches work slower on the device than on
    the host (a matmul) would otherwise fill the queue, and the host would wait on the device
    (CUDA blocks a launch when the queue is full)."""
    function()
    probe = min(10, number)
    estimate = timeit.timeit(function, number=probe) / probe
    if estimate * number > REPEAT_SECONDS:
        number = max(probe, int(REPEAT_SECONDS / estimate))
    if synchronize is None:
        return min(timeit.repeat(function, number=number, repeat=repeat)) / number * 1e9
    best = float("inf")
    for _ in range(repeat):
        synchronize()
        best = min(best, timeit.timeit(function, number=number))
    synchronize()
    return best / number * 1e9


REPEATS = 50
ROUNDS = 7  # rounds of the host-time helpers below; each reports its best round


def device_ms(run, start, end, synchronize, seconds=None, busy=None):
    """Milliseconds per run() on the device, from two CUDA events around REPEATS runs after a
    warm-up run (which compiles kernels and fills the allocator cache). With seconds, fewer
    runs (at least 3) where REPEATS would take longer, as one more run timed alone says: a
    large matmul's figure is steady with fewer. With busy, a call queueing device work (large
    copies) before the first event, long enough that the host has queued every run before the
    device reaches them: a run shorter on the device than its launch on the host (a small
    matmul) is then timed on the device, not at the host's pace."""
    run()
    synchronize()
    repeats = REPEATS
    if seconds is not None:
        start.record()
        run()
        end.record()
        end.synchronize()
        once = start.elapsed_time(end) / 1e3
        if once * REPEATS > seconds:
            repeats = max(3, int(seconds / once))
    if busy is not None:
        busy()
    start.record()
    for _ in range(repeats):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats


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


def ours_ms(run, seconds=None, busy=None):
    import tensorplay as tp
    return device_ms(run, tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True),
                     tp.accelerator.synchronize, seconds, busy)


def torch_ms(run, seconds=None, busy=None):
    import torch
    return device_ms(run, torch.cuda.Event(enable_timing=True),
                     torch.cuda.Event(enable_timing=True), torch.cuda.synchronize, seconds, busy)


def tf32_off(tp, torch):
    """float32 matmuls in float32 on both sides (TF32 off): PyTorch's allow_tf32 False and
    float32_matmul_precision "highest", tensorplay's set_float32_matmul_precision("highest")
    where it has one (else its default, TF32 off); the settings as the notes say them. torch
    may be None."""
    setter = getattr(tp, "set_float32_matmul_precision", None)
    if setter is not None:
        setter("highest")
    text = "TF32 off: tensorplay " + ('set_float32_matmul_precision("highest")'
                                      if setter is not None
                                      else "its default (it has no set_float32_matmul_precision)")
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        text += (f"; PyTorch allow_tf32 {torch.backends.cuda.matmul.allow_tf32}, "
                 f"float32_matmul_precision {torch.get_float32_matmul_precision()!r}, "
                 "allow_bf16_reduced_precision_reduction "
                 f"{torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction}")
    return text


def raw_c_figures(source="raw_cuda.c", arguments=("2000",), cpu=None):
    """{(name, size): figure} from a C baseline in bench/raw/, or {} where nvcc is not available;
    run on that one CPU where cpu is given (pinned_on).

    The program is built once per process, so a benchmark can run it between its own
    measurements (interleaved, so that a noisy spell of the machine hits both sides)."""
    binary = _built(source)
    if binary is None:
        return {}
    output = subprocess.run([binary, *arguments], check=True, capture_output=True,
                            text=True, preexec_fn=pinned_on(cpu)).stdout
    figures = {}
    for line in output.splitlines():
        name, size, value = line.rsplit(" ", 2)
        figures[(name, int(size))] = float(value)
    return figures


def pinned_on(cpu):
    """A preexec_fn for subprocess that keeps the child on one CPU (None: no pinning).

    The H200 machine runs in a faster or a slower state that changes within seconds
    (docs/design.md, "Performance report"); two programs compared from processes of their own
    run back to back on one CPU, so that they are paired in time and place."""
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


@functools.cache
def _built(source):
    """The path of source built with nvcc (removed at exit), or None without nvcc."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        return None
    scratch = tempfile.mkdtemp(prefix="tensorplay-bench-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    binary = str(Path(scratch) / Path(source).stem)
    # With the driver library: raw_graph_launch.cu launches through cuLaunchKernel, as
    # tensorplay does (nvcc's default library path holds its stub).
    subprocess.run([nvcc, "-O2", "-o", binary, str(RAW / source), "-lcuda"], check=True)
    return binary


# -- paired measurements and their records (Note [Records]) -----------------------------------

OURS, TORCH, CUPY, RAW_C = "tensorplay", "PyTorch", "CuPy", "raw C"
TRIALS, QUICK_TRIALS = 7, 3


def trials(quick):
    return QUICK_TRIALS if quick else TRIALS


@dataclass(frozen=True)
class Figure:
    """The median of a figure over interleaved trials, and half its interquartile range."""

    median: float
    spread: float


def summarise(values):
    if len(values) < 2:
        return Figure(values[0], 0.0)
    low, _, high = statistics.quantiles(values, n=4, method="inclusive")
    return Figure(statistics.median(values), (high - low) / 2)


def interleaved(sides, count, notes):
    """{side: {case: Figure}} from count trials; each trial runs every side in turn.

    sides maps a name (OURS, TORCH, ...) to a function returning {case: value} for one trial, so
    that a noisy spell of the machine hits every side alike, not whichever ran during it. A
    peer's side that raises is dropped with a note and the others go on; tensorplay's raises.
    """
    sides = dict(sides)
    samples = {name: {} for name in sides}
    for _ in range(count):
        for name, side in list(sides.items()):
            try:
                figures = side()
            except Exception as error:
                if name == OURS:
                    raise
                notes.append(f"{name} left out: {type(error).__name__}: {error}")
                del sides[name], samples[name]
                continue
            for case, value in figures.items():
                samples[name].setdefault(case, []).append(value)
    return {name: {case: summarise(values) for case, values in cases.items()}
            for name, cases in samples.items()}


def prepared(name, build, notes):
    """build() for a peer's side, or None with a note where it fails: a peer that cannot set up
    its part leaves the other columns standing."""
    try:
        return build()
    except Exception as error:
        notes.append(f"{name} left out: {type(error).__name__}: {error}")
        return None


def record(area, case, unit, ours, peer_name=None, peer=None, target=None, **extra):
    """One comparison (Note [Records]); ours and peer are Figures."""
    return {"area": area, "case": case, "unit": unit,
            "tensorplay": ours.median, "tensorplay_spread": ours.spread,
            "peer_name": peer_name, "peer": None if peer is None else peer.median,
            "peer_spread": None if peer is None else peer.spread,
            "ratio": None if peer is None else ours.median / peer.median,
            "target": target, **extra}


def compare(area, case, unit, figures, key=None, targets=None, **extra):
    """The records of one case: tensorplay against every peer measured for it (figures from
    interleaved(), looked up by key, default case). targets maps a peer's name to its target;
    under None, a target on tensorplay's own figure, which adds a record with no peer."""
    key = case if key is None else key
    targets = targets or {}
    ours = figures[OURS][key]
    records = [record(area, case, unit, ours, target=targets[None], **extra)] \
        if None in targets else []
    for name, cases in figures.items():
        if name != OURS and key in cases:
            records.append(record(area, case, unit, ours, name, cases[key], targets.get(name),
                                  **extra))
    if not records:
        records.append(record(area, case, unit, ours, **extra))
    return records


def met(entry):
    """True or False where a record has a target, None where it has none (or no ratio to hold
    to it). A script that judges its own records (a throughput, where higher is better, with
    its target as text such as ">= 1.25") gives its verdict as "met"."""
    if isinstance(entry.get("met"), bool):
        return entry["met"]
    if not isinstance(entry.get("target"), (int, float)):
        return None
    value = entry["tensorplay"] if entry.get("peer") is None else entry.get("ratio")
    if value is None or value != value:  # NaN: the script had no ratio to give
        return None
    return value <= entry["target"]


def optional_module(name, label, notes):
    """The module, or None with a note saying that label's figures are skipped."""
    try:
        return importlib.import_module(name)
    except Exception as error:  # ImportError, or a library that fails to load its CUDA parts
        notes.append(f"{label} skipped: import {name} failed ({type(error).__name__}: {error})")
        return None


def raw_c_side(source, notes, arguments=()):
    """A side for interleaved() that runs a C baseline once per trial, or None (with a note)
    where nvcc is not available."""
    if _built(source) is None:
        notes.append(f"{RAW_C} skipped: nvcc not found, so {source} could not be built")
        return None
    return lambda: raw_c_figures(source, arguments)


def cupy_ms(cupy, run):
    """Milliseconds per run() on the device, timed with CuPy's events as device_ms() times."""
    class Timer:
        def __init__(self):
            self.event = cupy.cuda.Event()

        def record(self):
            self.event.record()

        def synchronize(self):
            self.event.synchronize()

        def elapsed_time(self, end):
            return cupy.cuda.get_elapsed_time(self.event, end.event)

    return device_ms(run, Timer(), Timer(), cupy.cuda.Device().synchronize)


def print_records(records):
    for entry in records:
        unit = entry["unit"]
        line = (f"{entry['area']:>18} | {entry['case']:<44} tensorplay "
                f"{entry['tensorplay']:>12.4g} {unit}")
        if entry.get("peer") is not None:
            line += (f"  {entry['peer_name']} {entry['peer']:.4g} {unit}"
                     f"  ratio {entry['ratio']:.3f}")
        verdict = met(entry)
        if verdict is not None:
            bound = "x" if entry.get("peer") is not None else f" {unit}"
            target = entry["target"]
            # A script that judges its own records gives its target as text (">= 1.25").
            shown = f"<= {target:.3g}{bound}" if isinstance(target, (int, float)) else target
            line += f"  target {shown}: {'met' if verdict else 'NOT met'}"
        print(line, flush=True)


def main(areas, doc):
    """The command line of a bench script: its areas ({name: function(quick, notes)}), each
    printed as it finishes, and with --json PATH all the records and notes written to PATH."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--area", action="append", choices=list(areas),
                        help="measure this area only (repeatable; default: every area)")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_TRIALS} interleaved trials instead of {TRIALS}")
    parser.add_argument("--json", type=Path, metavar="PATH",
                        help="write the records and notes to PATH (Note [Records])")
    arguments = parser.parse_args()
    records, notes = [], []
    for name in arguments.area or list(areas):
        print(f"-- {name}", flush=True)
        found = areas[name](arguments.quick, notes)
        print_records(found)
        records += found
    for note in dict.fromkeys(notes):
        print(f"note: {note}")
    if arguments.json:
        arguments.json.write_text(json.dumps({"records": records,
                                              "notes": list(dict.fromkeys(notes))}, indent=1))


def import_peer(name, label, notes):
    """optional_module() for a peer that needs a GPU: None, with a note, where it has none."""
    module = optional_module(name, label, notes)
    if module is not None and name == "torch" and not module.cuda.is_available():
        notes.append(f"{label} skipped: torch sees no CUDA device")
        return None
    return module
