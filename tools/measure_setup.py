"""Time the README's set-up command in new virtual environments, as a new user runs it.

    python tools/measure_setup.py              # median of 3 runs; exit status 1 over a budget
    python tools/measure_setup.py --runs 1 --json times.json

Each run copies the committed tree (git archive of HEAD, so no build/ folder helps), makes a
new virtual environment and times the README's first command in it,
`python -m pip install ".[dev,docs]" && python -m tensorplay`, with pip's cache as it is (warm
after the first run). pip runs without -q and its lines are timestamped as they arrive, which
splits the time into its phases:

    build environment   installing the build requirements into pip's isolated environment
    build metadata      setup.py asked for its requirements and metadata
    dependencies        resolving the runtime and extra requirements (from the cache)
    tensorplay wheel    cythonizing and compiling (setup.py's own timings, through
                        TENSORPLAY_BUILD_TIMES, break this down by module)
    install             unpacking every wheel, tensorplay's and its dependencies', into the venv
    python -m tensorplay

"tensorplay itself" is the build environment, the metadata and the wheel: what building and
installing the package costs beyond its dependencies. The budgets are the project's, on the
2-core CI machine: tensorplay itself at most 90 s, the whole command at most 150 s (medians).
The machine may be shared: run several times and read the medians.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ".[dev,docs]"
# pip's progress lines (not a terminal: "started" and "finished" on lines of their own).
MARKERS = {
    "build environment": ("Installing build dependencies: started",
                          "Installing build dependencies: finished"),
    "build metadata": ("Getting requirements to build wheel: started",
                       "Preparing metadata (pyproject.toml): finished"),
    "tensorplay wheel": ("Building wheel for tensorplay (pyproject.toml): started",
                         "Building wheel for tensorplay (pyproject.toml): finished"),
    "install": ("Installing collected packages:", "Successfully installed"),
}
OWN = ("build environment", "build metadata", "tensorplay wheel")


def timed_lines(command, cwd, env):
    """Run command; return [(seconds since start, line)] of its output and the total time."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = [(time.monotonic() - started, line.rstrip("\n")) for line in process.stdout]
    if process.wait() != 0:
        sys.stdout.write("\n".join(line for _, line in lines[-40:]) + "\n")
        raise SystemExit(f"{' '.join(command)} failed with exit status {process.returncode}")
    return lines, time.monotonic() - started


def first(lines, text, after=0.0):
    return next((t for t, line in lines if t >= after and text in line), None)


def phases(lines, total):
    """{phase: seconds} from pip's timestamped lines."""
    found = {}
    for phase, (start_text, end_text) in MARKERS.items():
        start = first(lines, start_text)
        end = first(lines, end_text, start or 0.0)
        if start is not None and end is not None:
            found[phase] = end - start
    metadata_end = first(lines, "Preparing metadata (pyproject.toml): finished")
    wheel_start = first(lines, "Building wheel for tensorplay (pyproject.toml): started")
    if metadata_end is not None and wheel_start is not None:
        found["dependencies"] = wheel_start - metadata_end
    accounted = sum(found.values())
    found["pip, other"] = max(0.0, total - accounted)
    return found


def one_run(workspace: Path, ref: str = "HEAD", extras: str = EXTRAS) -> dict:
    tree = workspace / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(workspace / "venv")], check=True)
    python = str(workspace / "venv" / "bin" / "python")
    env = dict(os.environ, TENSORPLAY_BUILD_TIMES=str(workspace / "build-times.json"))
    env.pop("PYTHONPATH", None)
    lines, pip_seconds = timed_lines([python, "-m", "pip", "install", extras], tree, env)
    report_started = time.monotonic()
    subprocess.run([python, "-m", "tensorplay"], cwd=workspace, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    result = {"pip install": pip_seconds, "python -m tensorplay": time.monotonic() - report_started}
    result["whole command"] = result["pip install"] + result["python -m tensorplay"]
    result.update(phases(lines, pip_seconds))
    result["tensorplay itself"] = sum(result.get(phase, 0.0) for phase in OWN)
    build_times = workspace / "build-times.json"
    if build_times.is_file():
        build = json.loads(build_times.read_text())
        result["build_ext wall"] = build["build_ext_wall_s"]
        result["cythonize, sum over modules (jobs overlap)"] = build["cythonize_total_s"]
        result["compile, sum over modules (jobs overlap)"] = build["compile_total_s"]
        result["modules"] = build["modules"]
    return result


def show(result, prefix=""):
    for key, value in result.items():
        if key != "modules":
            print(f"{prefix}{key:54s} {value:7.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=150.0,
                        help="seconds the whole command's median may take")
    parser.add_argument("--own-budget", type=float, default=90.0,
                        help="seconds the median of building and installing tensorplay may take")
    parser.add_argument("--modules", action="store_true",
                        help="print each module's cythonize and compile seconds (last run)")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--ref", default="HEAD",
                        help="the commit to time (an older one, to compare; default HEAD)")
    parser.add_argument("--extras", default=EXTRAS, help=f"what to install (default {EXTRAS})")
    arguments = parser.parse_args()
    runs = []
    for run in range(arguments.runs):
        with tempfile.TemporaryDirectory(prefix="tensorplay-setup-") as workspace:
            runs.append(one_run(Path(workspace), arguments.ref, arguments.extras))
        print(f"run {run + 1}: whole command {runs[-1]['whole command']:.1f} s, tensorplay "
              f"itself {runs[-1]['tensorplay itself']:.1f} s", flush=True)
    keys = [key for key in runs[-1] if key != "modules"]
    median = {key: statistics.median(r[key] for r in runs if key in r) for key in keys}
    print(f"median of {len(runs)} run(s) of `pip install \"{arguments.extras}\" && python -m "
          f"tensorplay` ({arguments.ref}):")
    show(median, "  ")
    if arguments.modules and "modules" in runs[-1]:
        print("per module, last run (seconds in the worker; 2 cythonize and 2 compile jobs "
              "share the CPUs):")
        for name, times in sorted(runs[-1]["modules"].items(),
                                  key=lambda item: -item[1].get("compile_s", 0)):
            print(f"  {name:40s} cythonize {times.get('cythonize_s', 0):5.1f}  compile "
                  f"{times.get('compile_s', 0):5.1f}  {times['flags']}")
    if arguments.json:
        arguments.json.write_text(json.dumps(runs, indent=1) + "\n")
    within = (median["whole command"] <= arguments.budget
              and median["tensorplay itself"] <= arguments.own_budget)
    print(f"{'within' if within else 'OVER'} the budgets: tensorplay itself "
          f"{median['tensorplay itself']:.1f} s of {arguments.own_budget:.0f} s, whole command "
          f"{median['whole command']:.1f} s of {arguments.budget:.0f} s")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
