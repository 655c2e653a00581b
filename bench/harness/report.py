"""The performance report's measurements: every benchmark area, one after another, into one JSON
file. Run on the GPU machine after installing the package:

    python bench/harness/report.py [--out PATH] [--areas AREA ...] [--force] [--quick]
                                   [--timeout S] [--budget S] [--list]

Each area runs its bench script in a process of its own (`python bench/SCRIPT.py --json FILE`,
Note [Records] in bench/harness/baselines.py), where tensorplay, PyTorch, CuPy and raw CUDA C
take turns (interleaved trials, medians and spread). The figures of an area are saved into PATH
(default build/report/results.json) as soon as it finishes, with the machine, the package
versions and the date, so the run is resumable: a second call skips the areas PATH holds as
done, which lets each call fit a 10-minute limit (with --budget S, no area after the first
starts once the call has run S seconds). --areas runs the areas named (again, if done); --force
runs them all again. An area that fails or runs past --timeout is recorded with its error and
the run goes on; an area whose script is absent, or that needs a GPU where none is visible, is
recorded as skipped with the reason. Missing peers (PyTorch, CuPy, nvcc for the C programs) are
skipped by the scripts with a note. The commit measured is git's HEAD ("-dirty" with changes);
on a copy of the tree without its own history, name it: TENSORPLAY_COMMIT=<rev> python
bench/harness/report.py. Then, on any machine: python bench/harness/render_report.py PATH.

Adding an area is one entry of AREAS below: its name (the report's section), the script in
bench/ and its arguments. Records keep the area they name where it is one of the registry's
(after the entry's labels map the script's own names onto them); others go to the entry's. A
new script qualifies when it takes --json PATH and writes its records there, as a list or as
{"records": [...], "notes": [...]}.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]  # the area scripts
ROOT = BENCH.parent
DEFAULT_OUT = ROOT / "build" / "report" / "results.json"
FORMAT = 1
OPTIONAL = ("tensorplay_spread", "peer_name", "peer", "peer_spread", "ratio", "target")


@dataclass(frozen=True)
class Area:
    name: str
    script: str  # in bench/ (BENCH), or an absolute path
    arguments: tuple = ()
    # Added with --quick; a script that has no --quick option gets ().
    quick: tuple = ("--quick",)
    needs_gpu: bool = True
    # The script's own area labels that mean one of the report's areas: {"random": "RNG"}.
    labels: dict = field(default_factory=dict)


AREAS = (
    Area("allocation", "bench_memory.py", ("--area", "allocation")),
    Area("statistics", "bench_memory.py", ("--area", "statistics")),
    Area("RNG", "bench_random.py"),
    Area("copies", "bench_tensor.py", ("--area", "copies")),
    Area("elementwise", "bench_tensor.py", ("--area", "elementwise")),
    Area("small ops", "bench_tensor.py", ("--area", "small ops")),
    Area("matmul", "bench_matmul.py", ("--area", "matmul")),
    Area("small matmul", "bench_matmul.py", ("--area", "small matmul")),
    Area("replay", "bench_graphs.py", ("--area", "replay")),
    Area("staging", "bench_graph_extras.py", ("--area", "staging")),
    Area("capture", "bench_graphs.py", ("--area", "capture")),
    Area("conditional nodes", "bench_graph_extras.py", ("--area", "conditional nodes")),
    Area("update and rebinding", "bench_graph_update.py", quick=()),
    # The hardware-limit targets: their throughputs (GB/s) and host costs join the report's
    # tables, each record in the area it measures.
    Area("limits", "bench_limits.py", quick=(),
         labels={"random": "RNG", "memory": "allocation", "accelerator": "statistics"}),
    Area("graphed callables", "bench_graphed_callables.py", ("--area", "graphed callables")),
    Area("training step", "bench_graphed_callables.py", ("--area", "training step")),
    # NCCL all-reduce, one rank on the machine's first GPU (bench_collectives.py says how to run
    # it over more); its records say where nccl4py or PyTorch's NCCL is missing.
    Area("collectives", "bench_collectives.py"),
    Area("import", "bench_memory.py", ("--area", "import"), needs_gpu=False),
    # Issue 40's targets: sleeping graph pools, judged by the script itself ("met").
    Area("graph sleep", "bench_graph_sleep.py", quick=("--quick",)),
    # Issue 38: PyTorch work in tensorplay's graphs (K decode steps in one replay, host costs).
    Area("torch bridge", "bench_torch_bridge.py"),
)


def key(name: str) -> str:
    """An area's name as --areas matches it: any case, '-' or '_' for spaces."""
    return name.lower().replace("-", " ").replace("_", " ")


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# -- the machine -------------------------------------------------------------------------------


def machine() -> dict:
    """The GPU, driver, CUDA and package versions the figures were measured with."""
    found = {"gpu": None, "driver": None, "cuda_driver": None, "gpus": 0,
             "python": platform.python_version(), "platform": platform.platform(),
             "cpu": cpu_model(), "nvcc": nvcc_version(), "commit": commit(),
             "packages": package_versions()}
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            found["gpus"] = pynvml.nvmlDeviceGetCount()
            if found["gpus"]:
                name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
                found["gpu"] = name.decode() if isinstance(name, bytes) else name
            driver = pynvml.nvmlSystemGetDriverVersion()
            found["driver"] = driver.decode() if isinstance(driver, bytes) else driver
            version = pynvml.nvmlSystemGetCudaDriverVersion()
            found["cuda_driver"] = f"{version // 1000}.{version % 1000 // 10}"
        finally:
            pynvml.nvmlShutdown()
    except Exception as error:  # no NVML library, no driver: a machine without a GPU
        found["nvml_error"] = f"{type(error).__name__}: {error}"
    return found


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        return None
    output = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return output.strip().splitlines()[-1] if output.strip() else None


def commit() -> str | None:
    """The tree's commit, "-dirty" when tracked files differ from it; TENSORPLAY_COMMIT names it
    where the tree is a copy whose git history is not its own (a GPU machine's copy)."""
    if os.environ.get("TENSORPLAY_COMMIT"):
        return os.environ["TENSORPLAY_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True)
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                 cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("-dirty" if changed.stdout.strip() else "")


def package_versions() -> dict:
    """Versions from the installed distributions, without importing the packages."""
    from importlib import metadata
    versions = {}
    for distribution in ("tensorplay", "torch", "cupy-cuda13x", "cupy-cuda12x", "cupy",
                         "cuda-bindings", "numpy"):
        try:
            versions[distribution] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            pass
    return versions


def gpu_visible() -> tuple[bool, str]:
    try:
        import tensorplay.accelerator
    except ImportError as error:
        return False, f"tensorplay is not importable ({error}): install the package first"
    if tensorplay.accelerator.is_available():
        return True, ""
    return False, "no CUDA device is visible (tensorplay.accelerator.is_available() is False)"


# -- running the areas -------------------------------------------------------------------------


def load(path: Path) -> dict:
    if not path.exists():
        return {"format": FORMAT, "areas": {}}
    results = json.loads(path.read_text())
    if results.get("format") != FORMAT:
        raise SystemExit(f"{path} is not a results file of this report (format "
                         f"{results.get('format')!r}, expected {FORMAT}); pass another --out")
    return results


def save(results: dict, path: Path) -> None:
    """Written whole to a neighbour, then renamed: an interrupted run leaves the last file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(results, indent=1) + "\n")
    partial.replace(path)


def run_area(area: Area, quick: bool, timeout: float, names: set[str]) -> dict:
    """One area's entry of the results: done (records, notes), failed (error) or skipped."""
    script = BENCH / area.script
    with tempfile.TemporaryDirectory(prefix="tensorplay-report-") as scratch:
        output, errors = Path(scratch) / "records.json", Path(scratch) / "stderr"
        command = [sys.executable, str(script), *area.arguments, *(area.quick if quick else ()),
                   "--json", str(output)]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(errors, "w+") as stderr:
            # The script's own output is the progress; its errors are kept for the record.
            process = subprocess.Popen(command, cwd=BENCH, env=environment, stderr=stderr)
            try:
                status = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                status = None
            stderr.seek(0)
            error_text = stderr.read()
        sys.stderr.write(error_text)
        if status != 0 or not output.is_file():
            reason = (f"ran past --timeout {timeout:.0f} s" if status is None
                      else f"exit status {status}" if status != 0
                      else f"{script.name} wrote no --json file")
            return {"status": "failed", "error": f"{reason}\n{tail(error_text)}".strip()}
        found = json.loads(output.read_text())
    records, notes = (found, []) if isinstance(found, list) else (found["records"],
                                                                  found.get("notes", []))
    for number, entry in enumerate(records):
        missing = [field for field in ("case", "unit", "tensorplay") if entry.get(field) is None]
        if missing:
            return {"status": "failed", "error": f"record {number} of {script.name} has no "
                                                 f"{', '.join(missing)} (Note [Records])"}
        # A script of one area labels its records by it; one that spans several keeps its own
        # labels where the registry knows them.
        entry["area"] = area.labels.get(entry.get("area"), entry.get("area"))
        if key(entry.get("area") or "") not in names:
            entry["area"] = area.name
        for name in OPTIONAL:
            entry.setdefault(name, None)
        if entry["ratio"] is None and entry["peer"]:
            entry["ratio"] = entry["tensorplay"] / entry["peer"]
    return {"status": "done", "records": records, "notes": notes}


def tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(areas, selected, out: Path, force: bool, quick: bool, timeout: float,
        budget: float | None = None) -> dict:
    """Run the selected areas (None: all) of the registry areas into out; return the results.
    With a budget, no area after the first starts once this call has run that many seconds."""
    began = time.monotonic()
    results = load(out)
    current = machine()
    measured = results.get("machine")
    done = any(entry.get("status") == "done" for entry in results["areas"].values())
    if measured and done and not force and (
            (measured.get("gpu"), measured.get("driver")) != (current["gpu"], current["driver"])):
        raise SystemExit(f"{out} holds figures measured on {measured.get('gpu')} with driver "
                         f"{measured.get('driver')}, and this machine has {current['gpu']} with "
                         f"{current['driver']}: pass --force to start again, or another --out")
    results["machine"] = current
    results.setdefault("started", now())
    names = {key(area.name) for area in areas}
    visible, no_gpu = gpu_visible()
    chosen = [area for area in areas if selected is None or key(area.name) in selected]
    print(f"{len(chosen)} areas into {out}; GPU: {current['gpu'] or 'none'}", flush=True)
    ran = 0
    for number, area in enumerate(chosen, 1):
        previous = results["areas"].get(area.name, {})
        if previous.get("status") == "done" and not force and selected is None:
            print(f"[{number}/{len(chosen)}] {area.name}: done in an earlier run, kept "
                  f"(--areas '{area.name}' or --force measures it again)", flush=True)
            continue
        if budget is not None and ran and time.monotonic() - began > budget:
            print(f"--budget {budget:.0f} s spent: {area.name} and the areas after it are left "
                  "for the next call", flush=True)
            break
        print(f"[{number}/{len(chosen)}] {area.name}: {area.script} ...", flush=True)
        started = time.monotonic()
        script = BENCH / area.script
        if not script.is_file():
            shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
            entry = {"status": "skipped", "reason": f"{shown} is not in this tree"}
        elif area.needs_gpu and not visible:
            entry = {"status": "skipped", "reason": no_gpu}
        else:
            entry = run_area(area, quick, timeout, names)
        entry.update(seconds=round(time.monotonic() - started, 1), finished=now(), quick=quick,
                     commit=current["commit"])
        results["areas"][area.name] = entry
        ran += 1
        results["updated"] = entry["finished"]
        save(results, out)
        why = entry.get("reason") or entry.get("error", "").partition("\n")[0]
        print(f"[{number}/{len(chosen)}] {area.name}: {entry['status']} in "
              f"{entry['seconds']:.1f} s{': ' + why if why else ''}", flush=True)
    return results


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python bench/harness/report.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="the results file, read if present (default: %(default)s)")
    parser.add_argument("--areas", nargs="+", metavar="AREA",
                        help="run these areas, even if done: " +
                        ", ".join(repr(area.name) for area in AREAS))
    parser.add_argument("--force", action="store_true", help="run every chosen area again")
    parser.add_argument("--quick", action="store_true",
                        help="fewer interleaved trials (the scripts' --quick)")
    parser.add_argument("--timeout", type=float, default=540,
                        help="seconds an area may run before it is stopped (default: 540)")
    parser.add_argument("--budget", type=float, metavar="S",
                        help="start no area after the first once this call has run S seconds (the "
                             "rest wait for the next call): S plus --timeout within a command's "
                             "limit")
    parser.add_argument("--list", action="store_true",
                        help="list the areas and their state in --out, and stop")
    args = parser.parse_args(argv)
    known = {key(area.name) for area in AREAS}
    selected = None if args.areas is None else {key(name) for name in args.areas}
    if selected is not None and selected - known:
        parser.error(f"unknown areas {sorted(selected - known)}; known: "
                     f"{', '.join(area.name for area in AREAS)}")
    if args.list:
        held = load(args.out)["areas"]
        for area in AREAS:
            entry = held.get(area.name, {})
            print(f"{area.name:<22} {area.script:<28} {entry.get('status', 'not run')}")
        return
    started = time.monotonic()
    results = run(AREAS, selected, args.out, args.force, args.quick, args.timeout,
                  args.budget)
    states = [entry["status"] for entry in results["areas"].values()]
    print(f"{states.count('done')} done, {states.count('failed')} failed, "
          f"{states.count('skipped')} skipped, "
          f"{len(AREAS) - len(results['areas'])} not run; this call took "
          f"{time.monotonic() - started:.0f} s. Render: python bench/harness/render_report.py "
          f"{args.out}")


if __name__ == "__main__":
    main()
