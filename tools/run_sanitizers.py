"""Run GPU test files under NVIDIA's compute-sanitizer and print one summary.

    python tools/run_sanitizers.py                       # memcheck over the capture-related files
    python tools/run_sanitizers.py --tools memcheck,racecheck,synccheck tests/graphs/test_graphs.py

Each (tool, file) pair runs as its own process, `compute-sanitizer --tool TOOL python -m pytest
FILE`, so a fault cannot poison the next. The summary gives, per pair, the sanitizer's error
count ("ERROR SUMMARY") and pytest's summary line; the exit status is 0 only when every pair
reported zero sanitizer errors and no failed test. memcheck checks every access of every kernel
(graph replays included); racecheck looks for shared-memory races and synccheck for misused
barriers, which apply to the kernels that use shared memory (reductions, matmul, staging).
Run it alone on an idle GPU: with other work sharing the GPU, memcheck has flagged a while
body's first write into memory allocated during its capture (docs/design.md, "Proof").
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The capture-related test files (tests/tools/test_run_sanitizers.py checks that each exists
# and holds tests marked gpu); their tests that need no GPU run too, making no CUDA call.
DEFAULT_FILES = ["tests/graphs/test_capture_safety.py", "tests/graphs/test_capture_streams.py",
                 "tests/graphs/test_graphs.py", "tests/graphs/test_graph_extras.py",
                 "tests/memory/test_allocator.py", "tests/graphs/test_graph_update.py"]
TOOLS = ("memcheck", "racecheck", "synccheck")


def sanitizer():
    for candidate in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if candidate and os.path.exists(candidate):
            return candidate
    sys.exit("compute-sanitizer was not found on PATH nor in /usr/local/cuda/bin; it ships with "
             "the CUDA toolkit")


def tool_list(text):
    tools = [tool.strip() for tool in text.split(",")]
    unknown = [tool for tool in tools if tool not in TOOLS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown tool {', '.join(map(repr, unknown))}: expected "
                                         f"a comma-separated list of {', '.join(TOOLS)}")
    return tools


def run(program, tool, test_file, timeout, extra):
    # API errors are not memory errors: the runtime meets some by design (an event or stream
    # that is not ready yet, the failures the tests provoke, cuda-bindings probing for driver
    # entry points), so only the device-side checks of each tool are reported. Host backtraces
    # are off: to print them, the sanitizer keeps the Python frames of every CUDA call alive,
    # and with them each test's tensors and graphs, so pools that the tests expect to be
    # returned stay held (what made earlier runs under memcheck fail); device backtraces of a
    # bad access are still shown.
    command = [program, "--tool", tool, "--report-api-errors", "no", "--show-backtrace",
               "device", "--print-limit", "20", sys.executable, "-m", "pytest",
               "-q", "-p", "no:cacheprovider", test_file, *extra]
    started = time.monotonic()
    # A session of its own, so that a run out of time is killed with the Python process the
    # sanitizer started, which would otherwise keep the GPU busy.
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        output, _ = process.communicate(timeout=timeout)
        status = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = "timeout"
    # memcheck and synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: N hazards
    # displayed (E errors, W warnings)".
    counts = re.findall(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: .*\((\d+) error", output)
    errors = int(next(count for count in counts[-1] if count)) if counts else None
    summary = [line.strip("= ") for line in output.splitlines()
               if re.search(r"\d+ (passed|failed|skipped|errors?)\b.* in [\d.]+s", line)]
    # A file whose tests all skip (the two-GPU file on one GPU) makes no CUDA call for the
    # sanitizer to watch; it says so and exits non-zero, having found nothing wrong.
    if ("terminated before first instrumented API call" in output and summary
            and not re.search(r"\d+ (failed|errors?)\b", summary[-1])):
        status, errors = 0, 0
    return {"tool": tool, "file": test_file, "status": status, "sanitizer_errors": errors,
            "pytest": summary[-1] if summary else "(no pytest summary)",
            "seconds": time.monotonic() - started, "output": output}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    # One comma-separated value, so that the test files may follow it on the command line.
    parser.add_argument("--tools", type=tool_list, default=["memcheck"],
                        help=f"comma-separated, of {', '.join(TOOLS)} (default memcheck)")
    parser.add_argument("--timeout", type=float, default=1200,
                        help="seconds allowed per (tool, file) run")
    parser.add_argument("--log-dir", help="write each run's full output here")
    parser.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[],
                        help="passed to pytest (e.g. -k capture)")
    arguments = parser.parse_args()
    program = sanitizer()
    results = []
    for tool in arguments.tools:
        for test_file in arguments.files:
            result = run(program, tool, test_file, arguments.timeout, arguments.pytest_args)
            results.append(result)
            print(f"{tool:10} {test_file:40} sanitizer errors: {result['sanitizer_errors']}  "
                  f"pytest: {result['pytest']}  ({result['seconds']:.0f} s)", flush=True)
            if arguments.log_dir:
                os.makedirs(arguments.log_dir, exist_ok=True)
                name = f"{tool}-{Path(test_file).stem}.log"
                Path(arguments.log_dir, name).write_text(result["output"])
    clean = all(r["sanitizer_errors"] == 0 and r["status"] == 0 for r in results)
    total = sum(r["sanitizer_errors"] or 0 for r in results)
    print(f"summary: {len(results)} runs, {total} sanitizer errors, "
          f"{sum(r['status'] != 0 for r in results)} runs with failed tests or no result: "
          f"{'clean' if clean else 'NOT clean'}")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
