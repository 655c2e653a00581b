"""Kernels near the hardware limit: every throughput (GB/s) and host-cost target, tensorplay
against PyTorch, one run.

    python bench/bench_limits.py [--before DIR] [--json PATH]

Each build is measured in a fresh interpreter, PyTorch beside it in the same process: the
tensorplay installed for this Python, and with --before the one installed under DIR
(`pip install --target DIR .` of the earlier tree), so one run prints both builds' ratios.
--json writes every record as a list of {build, area, case, tensorplay, peer, peer_name,
ratio, target, unit, met}.

- random: device throughput of rand/randn (in place, uniform_ and normal_), bernoulli_, randint
  and the factories on 64M elements, from CUDA events around repeated calls (harness/baselines.py),
  in GB/s written; ratio tensorplay / PyTorch, target >= 1.25 for 32- and 64-bit types, >= 1.0
  for float16 and bfloat16. Each line also gives tensorplay's bandwidth as a fraction of the
  device's peak, 2 x memory clock x bus width from the driver's attributes, and PyTorch's
  fill_ of the same bytes shows what writing alone reaches.
- random, small: host time of rand/randn of 1 to 64K elements (ns per call in a loop, best of
  ROUNDS), ratio <= 1.0.
- memory: empty(1 MiB) + release, ns per call, ratio <= 0.4.
- accelerator: current_accelerator(), ns per call, at most 100 ns.
- staging: stage_and_launch of 8 x 1 MiB against 8 copy_() + replay(), host µs per call in a
  loop, ratio <= 0.2.
Host-time figures are the best of ROUNDS trials, tensorplay's and PyTorch's interleaved.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from harness.baselines import ours_ms, torch_ms

HERE = Path(__file__).resolve().parent
COUNT = 64 << 20
SMALL_COUNTS = (1, 1 << 10, 1 << 16)
ROUNDS = 5
LOOP = 200          # calls per host-time trial: few enough that the launch queue never fills
FAST = 1.25         # throughput target for 32- and 64-bit types
LEVEL = 1.0         # for float16 and bfloat16


def peak_bandwidth_gbs():
    """2 x memory clock x bus width of device 0, from the driver, in GB/s (None if unknown)."""
    try:
        from cuda.bindings import driver
        driver.cuInit(0)
        _, device = driver.cuDeviceGet(0)
        attribute = driver.CUdevice_attribute
        _, clock_khz = driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
                                                   device)
        _, bus_bits = driver.cuDeviceGetAttribute(
            attribute.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device)
    except Exception:  # an old driver or bindings without the attributes: no fraction shown
        return None
    return 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9 if clock_khz and bus_bits else None


def record(area, case, ours, peer, peer_name, unit, target, higher_is_better, absolute=None):
    """One figure, also printed at once (on stderr, which the parent passes through)."""
    ratio = ours / peer
    if absolute is not None:
        met = ours <= absolute
    else:
        met = ratio >= target if higher_is_better else ratio <= target
    text = f"<= {absolute} {unit}" if absolute is not None else \
        (f">= {target}" if higher_is_better else f"<= {target}")
    print(f"  {case}: tensorplay {ours:.1f} {unit}, {peer_name} {peer:.1f} {unit}, ratio "
          f"{ratio:.3f} (target {text}: {'met' if met else 'MISSED'})", file=sys.stderr)
    return {"area": area, "case": case, "tensorplay": ours, "peer": peer, "peer_name": peer_name,
            "ratio": ratio, "target": text, "unit": unit, "met": met}


def host_ns(ours, theirs, synchronize_ours, synchronize_theirs, loop=LOOP):
    """Best ns per call of each over ROUNDS interleaved trials of loop calls each."""
    best = [float("inf"), float("inf")]
    for call in (ours, theirs):
        call()
    for _ in range(ROUNDS):
        for side, (call, synchronize) in enumerate(((ours, synchronize_ours),
                                                    (theirs, synchronize_theirs))):
            synchronize()
            start = time.perf_counter_ns()
            for _ in range(loop):
                call()
            best[side] = min(best[side], (time.perf_counter_ns() - start) / loop)
            synchronize()
    return best


def random_records(peak):
    import torch

    import tensorplay as tp
    records = []

    def throughput(case, nbytes, ours, theirs, target, peer_name):
        ours_gbs = nbytes / (ours_ms(ours) * 1e-3) / 1e9
        torch_gbs = nbytes / (torch_ms(theirs) * 1e-3) / 1e9
        entry = record("random", case, ours_gbs, torch_gbs, peer_name, "GB/s", target, True)
        entry["fraction_of_peak"] = ours_gbs / peak if peak else None
        records.append(entry)

    for name, size in (("float32", 4), ("float64", 8), ("float16", 2), ("bfloat16", 2)):
        ours = tp.empty(COUNT, dtype=getattr(tp, name), device="cuda")
        theirs = torch.empty(COUNT, dtype=getattr(torch, name), device="cuda")
        target = FAST if size >= 4 else LEVEL
        throughput(f"uniform_ {name} 64M", COUNT * size, ours.uniform_, theirs.uniform_, target,
                   "torch uniform_")
        throughput(f"normal_ {name} 64M", COUNT * size, ours.normal_, theirs.normal_, target,
                   "torch normal_")
        if size >= 4:
            throughput(f"bernoulli_(0.5) {name} 64M", COUNT * size, lambda: ours.bernoulli_(0.5),
                       lambda: theirs.bernoulli_(0.5), target, "torch bernoulli_")
            throughput(f"rand {name} 64M (factory)", COUNT * size,
                       lambda: tp.rand(COUNT, dtype=getattr(tp, name), device="cuda"),
                       lambda: torch.rand(COUNT, dtype=getattr(torch, name), device="cuda"),
                       target, "torch.rand")
            throughput(f"randn {name} 64M (factory)", COUNT * size,
                       lambda: tp.randn(COUNT, dtype=getattr(tp, name), device="cuda"),
                       lambda: torch.randn(COUNT, dtype=getattr(torch, name), device="cuda"),
                       target, "torch.randn")
        if name == "float32":
            fill = torch_ms(lambda: theirs.fill_(1.0))
            gbs = COUNT * size / (fill * 1e-3) / 1e9
            print(f"write ceiling: torch fill_ of {COUNT * size >> 20} MiB writes {gbs:.0f} GB/s"
                  + (f" ({gbs / peak:.2f} of peak {peak:.0f} GB/s)" if peak else ""),
                  file=sys.stderr)
        del ours, theirs
    for name, size, high in (("int64", 8, 1000), ("int32", 4, 1000), ("int64", 8, 1 << 40)):
        throughput(f"randint(0, {high}) {name} 64M", COUNT * size,
                   lambda: tp.randint(0, high, (COUNT,), dtype=getattr(tp, name), device="cuda"),
                   lambda: torch.randint(0, high, (COUNT,), dtype=getattr(torch, name),
                                         device="cuda"),
                   FAST, "torch.randint")
    for count in SMALL_COUNTS:
        for factory in ("rand", "randn"):
            ours, theirs = host_ns(
                lambda: getattr(tp, factory)(count, device="cuda"),
                lambda: getattr(torch, factory)(count, device="cuda"),
                tp.accelerator.synchronize, torch.cuda.synchronize)
            records.append(record("random", f"{factory}({count}) host", ours, theirs,
                                  f"torch.{factory}", "ns", 1.0, False))
    return records


def host_records():
    import torch

    import tensorplay as tp
    from bench_graph_extras import staged_ours, staged_torch
    records = []
    ours, theirs = host_ns(lambda: tp.empty(1 << 20, dtype=tp.uint8, device="cuda"),
                           lambda: torch.empty(1 << 20, dtype=torch.uint8, device="cuda"),
                           tp.accelerator.synchronize, torch.cuda.synchronize, loop=20_000)
    records.append(record("memory", "empty(1 MiB) + release", ours, theirs, "torch.empty + del",
                          "ns", 0.4, False))
    ours, theirs = host_ns(tp.accelerator.current_accelerator,
                           torch.accelerator.current_accelerator,
                           tp.accelerator.synchronize, torch.cuda.synchronize, loop=100_000)
    records.append(record("accelerator", "current_accelerator()", ours, theirs,
                          "torch.accelerator.current_accelerator", "ns", None, False,
                          absolute=100))
    ours_launch, check = staged_ours()
    torch_launch = staged_torch(torch)
    ours, theirs = host_ns(ours_launch, torch_launch, tp.accelerator.synchronize,
                           torch.cuda.synchronize, loop=50)
    check()
    records.append(record("staging", "stage_and_launch 8 x 1 MiB", ours / 1e3, theirs / 1e3,
                          "torch 8 copy_() + replay()", "us", 0.2, False))
    return records


def measure():
    """Every record for the tensorplay on sys.path (the child's side)."""
    import torch
    peak = peak_bandwidth_gbs()
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}; peak "
          + (f"{peak:.0f} GB/s" if peak else "bandwidth unknown"), file=sys.stderr)
    return random_records(peak) + host_records()


def run_child(build):
    path = [str(HERE), os.environ.get("PYTHONPATH", "")]
    if build is not None:
        path.insert(0, str(build))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    print(f"{'before' if build else 'after'}: {build or 'the installed tensorplay'}", flush=True)
    output = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"],
                            check=True, stdout=subprocess.PIPE, text=True, env=environment,
                            cwd=HERE)
    return json.loads(output.stdout.splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="directory holding the earlier build "
                        "(pip install --target DIR .)")
    parser.add_argument("--json", type=Path, help="write the records here")
    arguments = parser.parse_args()
    if arguments.before is not None and not (arguments.before / "tensorplay").is_dir():
        parser.error(f"{arguments.before} holds no installed tensorplay "
                     f"(pip install --target {arguments.before} .)")
    builds = {"after": run_child(None)}
    if arguments.before is not None:
        builds["before"] = run_child(arguments.before)
    before = {entry["case"]: entry for entry in builds.get("before", [])}
    print(f"{'case':36} {'unit':5} {'before':>9} {'b.ratio':>8} {'after':>9} {'peer':>9} "
          f"{'ratio':>7} {'peak':>5}  target   ")
    for entry in builds["after"]:
        earlier = before.get(entry["case"])
        fraction = entry.get("fraction_of_peak")
        print(f"{entry['case']:36} {entry['unit']:5} "
              f"{earlier['tensorplay'] if earlier else float('nan'):9.1f} "
              f"{earlier['ratio'] if earlier else float('nan'):8.3f} "
              f"{entry['tensorplay']:9.1f} {entry['peer']:9.1f} {entry['ratio']:7.3f} "
              f"{fraction if fraction else float('nan'):5.2f}  {entry['target']:9} "
              f"{'met' if entry['met'] else 'MISSED'}")
    missed = [entry["case"] for entry in builds["after"] if not entry["met"]]
    print(f"{len(builds['after']) - len(missed)} of {len(builds['after'])} targets met"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(
            [{"build": build, **entry} for build, entries in builds.items() for entry in entries],
            indent=1))


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(measure()))
    else:
        main()
