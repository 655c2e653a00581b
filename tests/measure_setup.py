"""Time the README's set-up command in new virtual environments, as a new user runs it.

    python tests/measure_setup.py              # median of 3 runs; exit status 1 over the budget
    python tests/measure_setup.py --runs 1 --budget 120

Each run copies the committed tree (git archive of HEAD, so no build/ folder helps), makes a
new virtual environment and times `python -m pip install ".[dev]"` in it, with pip's cache as
it is (warm after the first run). The budget is the one the project keeps: 90 s on the 2-core
CI machine.
"""
import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(workspace: Path) -> float:
    tree = workspace / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", str(workspace / "venv")], check=True)
    python = workspace / "venv" / "bin" / "python"
    started = time.monotonic()
    subprocess.run([str(python), "-m", "pip", "install", "-q", ".[dev]"], cwd=tree, check=True)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--budget", type=float, default=90.0, help="seconds the median may take")
    arguments = parser.parse_args()
    seconds = []
    for run in range(arguments.runs):
        with tempfile.TemporaryDirectory(prefix="tensorplay-setup-") as workspace:
            seconds.append(one_run(Path(workspace)))
        print(f"run {run + 1}: {seconds[-1]:.1f} s", flush=True)
    median = statistics.median(seconds)
    verdict = "within" if median <= arguments.budget else "OVER"
    print(f"median of {len(seconds)}: {median:.1f} s, {verdict} the budget of "
          f"{arguments.budget:.0f} s")
    return 0 if median <= arguments.budget else 1


if __name__ == "__main__":
    sys.exit(main())
