"""The performance report's two commands without a GPU: bench/harness/render_report.py turns a
results file into tables, plots and the README headline; bench/harness/report.py runs an area
registry into a resumable results file, records failures and skips with their reasons, and goes
on. And the harness finds what it runs: the area scripts in bench/, the raw C programs in
bench/raw/."""
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"  # the area scripts
HARNESS = BENCH / "harness"  # what they share, the runner and the renderer
# The harness's modules are scripts: load the runner from its file.
_spec = importlib.util.spec_from_file_location("bench_report", HARNESS / "report.py")
report = sys.modules["bench_report"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)


def entry(area, case, unit, ours, peer_name=None, peer=None, target=None, **extra):
    return {"area": area, "case": case, "unit": unit, "tensorplay": ours,
            "tensorplay_spread": ours / 50, "peer_name": peer_name, "peer": peer,
            "peer_spread": None if peer is None else peer / 40,
            "ratio": None if peer is None else ours / peer, "target": target, **extra}


def results():
    replay = []
    for kernels in (1, 4, 16):
        case = f"replay(), {kernels}-kernel graph"
        sweep = {"sweep": "replay cost against graph size", "x": kernels}
        replay += [entry("replay", case, "ns", 2000.0 + kernels, "raw C", 1900.0,
                         1.15 if kernels == 1 else None, **sweep),
                   entry("replay", case, "ns", 2000.0 + kernels, "PyTorch", 4000.0, **sweep),
                   entry("replay", case, "ns", 2000.0 + kernels, "CuPy", 3000.0, **sweep)]
    return {"format": 1, "started": "2026-12-01T10:00:00+00:00",
            "updated": "2026-12-01T10:30:00+00:00",
            "machine": {"gpu": "NVIDIA H200", "gpus": 1, "driver": "580.95.05",
                        "cuda_driver": "13.0", "python": "3.12.3", "cpu": "a CPU",
                        "nvcc": "Build cuda_13.0", "commit": "abc1234",
                        "packages": {"tensorplay": "0.1.0", "torch": "2.11.0"}},
            "areas": {
                "replay": {"status": "done", "seconds": 40.2, "quick": False,
                           "finished": "2026-12-01T10:10:00+00:00", "records": replay,
                           "notes": ["CuPy launches with Graph.launch"]},
                "capture": {"status": "done", "seconds": 3.0, "quick": True,
                            "finished": "2026-12-01T10:11:00+00:00", "notes": [],
                            "records": [entry("capture",
                                              "capture and instantiate, 1-kernel graph", "us",
                                              30.0, "PyTorch", 50.0, 0.5)]},
                "statistics": {"status": "done", "seconds": 5.0, "quick": False,
                               "finished": "2026-12-01T10:12:00+00:00", "notes": [],
                               "records": [entry("statistics", "memory_allocated()", "ns",
                                                 600.0, target=500),
                                           entry("statistics", "memory_allocated()", "ns",
                                                 600.0, "PyTorch", 3000.0)]},
                "RNG": {"status": "done", "seconds": 9.0, "quick": False, "notes": [],
                        "finished": "2026-12-01T10:13:00+00:00",
                        "records": [entry("RNG", "uniform_() of 64M float32, device", "ms",
                                          0.08, "PyTorch", 0.1, 1 / 0.9)]},
                # Records of a script that spans several areas, as it writes them.
                "limits": {"status": "done", "seconds": 20.0, "quick": False, "notes": [],
                           "finished": "2026-12-01T10:14:00+00:00",
                           "records": [{"area": "RNG", "case": "uniform_ float32 64M",
                                        "tensorplay": 3000.0, "peer": 2300.0,
                                        "peer_name": "torch uniform_", "ratio": 1.3,
                                        "target": ">= 1.25", "unit": "GB/s", "met": True},
                                       {"area": "RNG", "case": "normal_ float16 64M",
                                        "tensorplay": 1800.0, "peer": 2000.0,
                                        "peer_name": "torch normal_", "ratio": 0.9,
                                        "target": ">= 1.0", "unit": "GB/s", "met": False}]},
                "update and rebinding": {
                    "status": "done", "seconds": 5.0, "quick": False, "notes": [],
                    "finished": "2026-12-01T10:15:00+00:00",
                    "records": [{"area": "update and rebinding", "case": "16 kernels: update",
                                 "tensorplay": 3.0, "peer": 0.0, "peer_name": "instantiate",
                                 "ratio": float("nan"), "target": 0.25, "unit": "us"}]},
                "staging": {"status": "failed", "error": "exit status 1\nRuntimeError: boom",
                            "seconds": 1.0},
                "graphed callables": {"status": "skipped",
                                      "reason": "bench/bench_graphed_callables.py is not in "
                                                "this tree"},
            }}


def render(tmp_path, data, *extra):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    run = subprocess.run([sys.executable, str(HARNESS / "render_report.py"), str(path),
                          "--docs", str(tmp_path / "docs"), *extra],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout, (tmp_path / "docs" / "performance.md").read_text()


def test_the_page_has_a_table_per_area_with_targets_and_notes(tmp_path):
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    _, page = render(tmp_path, results())
    assert "| GPU | NVIDIA H200 (1 visible) |" in page
    assert "580.95.05, CUDA 13.0" in page and "torch 2.11.0" in page
    assert "## Replay" in page and "## Capture" in page
    header = next(line for line in page.splitlines() if line.startswith("| case")
                  and "raw C" in line)
    assert header.split(" | ")[3:6] == ["PyTorch", "CuPy", "raw C"]
    row = next(line for line in page.splitlines() if line.startswith("| replay(), 1-kernel"))
    assert "1.053x raw C" in row and "≤ 1.15x raw C" in row and "met" in row
    assert "2,001 ± 40.0" in row
    # An absolute bound: memory_allocated() of 600 ns against at most 500 ns.
    row = next(line for line in page.splitlines() if line.startswith("| memory\\_allocated()"))
    assert "≤ 500 ns" in row and "**not met**" in row
    assert "Targets: 3 of 6 met. Not met: capture, capture and instantiate, 1-kernel graph: " \
        "0.600x PyTorch, target ≤ 0.5x PyTorch; statistics, memory\\_allocated(): 600 ns, " \
        "target ≤ 500 ns; RNG, normal\\_ float16 64M: 0.900x torch normal\\_, target \\>= 1.0 " \
        "(torch normal\\_)." in page
    # A script's own verdict and words for its target (a throughput: higher is better).
    row = next(line for line in page.splitlines() if line.startswith("| uniform\\_ float32"))
    assert "\\>= 1.25 (torch uniform\\_)" in row and row.endswith("| met |")
    # A ratio the script could not give (NaN) gives no verdict.
    row = next(line for line in page.splitlines() if line.startswith("| 16 kernels: update"))
    assert row.endswith("|  |  |  |") and "nan" not in row
    assert "## Limits\n\nIts figures are in the tables of RNG." in page
    assert "CuPy launches with Graph.launch" in page
    assert "Not measured: failed:" in page and "RuntimeError: boom" in page
    assert "bench\\_graphed\\_callables.py is not in this tree" in page
    assert "(--quick: fewer trials)" in page
    assert "## Copies\n\nNot measured yet." in page


def test_sweeps_become_plots_in_their_section(tmp_path):
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    _, page = render(tmp_path, results())
    image = tmp_path / "docs" / "performance" / "replay-cost-against-graph-size.png"
    assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    replay = page.split("## Replay")[1].split("## ")[0]
    assert "![replay cost against graph size](performance/replay-cost-against-graph-size.png)" \
        in replay
    # Rendering again gives the same file.
    first = image.read_bytes()
    (image.parent / "mine.png").write_bytes(b"a picture of the user's own")
    render(tmp_path, results())
    assert image.read_bytes() == first
    # A sweep no longer measured leaves no plot behind; a file the renderer did not write stays.
    data = results()
    for record in data["areas"]["replay"]["records"]:
        del record["sweep"]
    _, page = render(tmp_path, data)
    assert not image.exists() and "![" not in page
    assert (image.parent / "mine.png").read_bytes() == b"a picture of the user's own"
    assert sorted(p.name for p in image.parent.iterdir()) == ["mine.png"]  # no temporary file


def test_each_plot_has_its_figures_in_a_table_and_each_library_one_colour(tmp_path,
                                                                          monkeypatch):
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    _, page = render(tmp_path, results())
    replay = page.split("## Replay")[1].split("## ")[0]
    after = replay.split("(performance/replay-cost-against-graph-size.png)")[1]
    assert "| kernels in the graph | tensorplay (ns) | raw C (ns) | PyTorch (ns) | CuPy (ns) |" \
        in after
    assert "| 4 | 2,004 ± 40.1 | 1,900 ± 47.5 | 4,000 ± 100 | 3,000 ± 75.0 |" in after
    monkeypatch.syspath_prepend(str(HARNESS))  # the renderer imports its sibling baselines.py
    renderer = load_bench("render_report")
    # A library's colour depends on its name alone: the same in every plot, whatever else the
    # plot shows; PyTorch's lines ("torch.randn") share PyTorch's.
    colours = {name: renderer.library_colour(name)
               for name in ("tensorplay", "PyTorch", "torch.randn", "CuPy", "raw C", "other")}
    assert colours["torch.randn"] == colours["PyTorch"]
    assert len({colours[n] for n in ("tensorplay", "PyTorch", "CuPy", "raw C")}) == 4
    assert renderer.library_colour("other") == colours["other"]


def test_a_sweep_of_several_series_draws_a_line_per_library_and_series(tmp_path,
                                                                       monkeypatch):
    """A matmul's throughput sweep: float32 and bfloat16 lines of tensorplay and PyTorch on one
    plot."""
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    sweep = "matmul throughput against matrix size"
    records = [entry("matmul", f"a @ b, {n} x {n} x {n} {dtype}, throughput", "TFLOP/s",
                     rate * n / 4096, "PyTorch", rate * n / 4000, sweep=sweep, series=dtype, x=n)
               for dtype, rate in (("float32", 50.0), ("bfloat16", 700.0))
               for n in (256, 1024, 4096)]
    data = results()
    data["areas"]["matmul"] = {"status": "done", "seconds": 30.0, "quick": False, "notes": [],
                               "finished": "2026-12-01T10:16:00+00:00", "records": records}
    _, page = render(tmp_path, data)
    section = page.split("## Matmul")[1].split("## ")[0]
    assert "![matmul throughput against matrix size](performance/matmul-throughput-against-" \
        "matrix-size.png)" in section
    image = tmp_path / "docs" / "performance" / "matmul-throughput-against-matrix-size.png"
    assert image.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    monkeypatch.syspath_prepend(str(HARNESS))  # the renderer imports its sibling baselines.py
    renderer = load_bench("render_report")
    lines = renderer.lines_of(records)
    assert list(lines) == [("tensorplay", "float32"), ("tensorplay", "bfloat16"),
                           ("PyTorch", "float32"), ("PyTorch", "bfloat16")]
    assert sorted(lines["PyTorch", "bfloat16"]) == [256, 1024, 4096]
    assert lines["tensorplay", "float32"][4096] == (50.0, 1.0)  # the figure and its spread
    assert renderer.line_name("PyTorch", "bfloat16") == "PyTorch, bfloat16"
    # Without a series, a line per library, as before.
    assert list(renderer.lines_of(data["areas"]["replay"]["records"])) == [
        ("tensorplay", None), ("raw C", None), ("PyTorch", None), ("CuPy", None)]


def test_the_headline_goes_between_the_readme_markers(tmp_path):
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\nintro\n<!-- headline:start -->\nold\n<!-- headline:end -->\nrest\n")
    printed, _ = render(tmp_path, results(), "--readme", str(readme))
    text = readme.read_text()
    assert text.startswith("# x\n\nintro\n<!-- headline:start -->\nMeasured on NVIDIA H200")
    assert text.endswith("<!-- headline:end -->\nrest\n") and "old" not in text
    line = text.split("\n")[4]
    assert line in printed
    assert "replay 1.05x raw C (target met) and 0.50x PyTorch" in line
    assert "capture 0.60x PyTorch (target not met)" in line
    assert "memory_allocated() 0.20x PyTorch" in line
    assert "random-number throughput 1.25x PyTorch's (target met)" in line
    assert "graphed training iteration" not in line  # not measured here
    readme.write_text("no markers\n")
    path = tmp_path / "results.json"
    run = subprocess.run([sys.executable, str(HARNESS / "render_report.py"), str(path), "--docs",
                          str(tmp_path / "docs"), "--readme", str(readme)],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "needs one <!-- headline:start --> line" in run.stderr


def test_the_committed_page_and_headline_are_what_the_renderer_writes(tmp_path):
    """docs/performance.md (in the site's table of contents) and README's headline are the
    renderer's output for the committed results, docs/performance/results.json: a drift check."""
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    committed = json.loads((ROOT / "docs" / "performance" / "results.json").read_text())
    readme = tmp_path / "README.md"
    readme.write_text((ROOT / "README.md").read_text())
    _, page = render(tmp_path, committed, "--readme", str(readme))
    assert page == (ROOT / "docs" / "performance.md").read_text()
    assert readme.read_text() == (ROOT / "README.md").read_text()
    assert "performance" in (ROOT / "docs" / "index.md").read_text()


# -- the runner --------------------------------------------------------------------------------


SCRIPT = """import json, sys, pathlib
counter = pathlib.Path(sys.argv[0]).with_suffix(".runs")
counter.write_text(counter.read_text() + "x" if counter.exists() else "x")
if "--fail" in sys.argv:
    sys.exit("this area broke")
path = sys.argv[sys.argv.index("--json") + 1]
records = [{"area": "elsewhere", "case": "a case", "unit": "ns", "tensorplay": 1.0,
            "peer_name": "PyTorch", "peer": 2.0, "target": 0.6},
           {"area": "import", "case": "kept", "unit": "s", "tensorplay": 0.1}]
if "--list" in sys.argv:
    json.dump(records, open(path, "w"))
else:
    json.dump({"records": records, "notes": ["quick" if "--quick" in sys.argv else "full"]},
              open(path, "w"))
print("measuring", flush=True)
"""


@pytest.fixture
def registry(tmp_path):
    script = tmp_path / "fake_bench.py"
    script.write_text(SCRIPT)
    return script, (report.Area("works", str(script), needs_gpu=False),
                     report.Area("as a list", str(script), ("--list",), quick=(),
                                 needs_gpu=False),
                     report.Area("breaks", str(script), ("--fail",), needs_gpu=False),
                     report.Area("absent", str(tmp_path / "no_such_bench.py")),
                     report.Area("import", str(script), needs_gpu=False))


def test_areas_run_into_one_file_and_failures_do_not_stop_the_run(tmp_path, registry, capsys):
    script, areas = registry
    out = tmp_path / "results.json"
    results = report.run(areas, None, out, force=False, quick=True, timeout=60)
    assert json.loads(out.read_text()) == results
    works = results["areas"]["works"]
    assert works["status"] == "done" and works["quick"] is True
    assert works["notes"] == ["quick"]
    # A record labelled with an area the registry lacks takes the area it ran under; one
    # labelled with a registry area keeps it.
    assert [r["area"] for r in works["records"]] == ["works", "import"]
    # Fields a script leaves out are filled in, the ratio computed.
    assert works["records"][0]["ratio"] == 0.5 and works["records"][1]["peer"] is None
    assert results["areas"]["as a list"]["notes"] == []
    broken = results["areas"]["breaks"]
    assert broken["status"] == "failed" and "exit status 1" in broken["error"]
    assert "this area broke" in broken["error"]
    absent = results["areas"]["absent"]
    assert absent["status"] == "skipped"
    assert absent["reason"] == f"{areas[3].script} is not in this tree"
    assert results["machine"]["python"] and results["started"]
    printed = capsys.readouterr().out
    assert "[3/5] breaks: failed in" in printed and "[4/5] absent: skipped" in printed


def test_a_second_run_resumes(tmp_path, registry, capsys):
    script, areas = registry
    out = tmp_path / "results.json"
    report.run(areas, None, out, force=False, quick=False, timeout=60)
    runs = script.with_suffix(".runs")
    assert runs.read_text() == "xxxx"  # works, as a list, breaks, import
    results = report.run(areas, None, out, force=False, quick=False, timeout=60)
    assert runs.read_text() == "xxxxx"  # only the failed area ran again
    assert "works: done in an earlier run, kept" in capsys.readouterr().out
    report.run(areas, {"works"}, out, force=False, quick=False, timeout=60)
    assert runs.read_text() == "xxxxxx"  # named, so measured again
    report.run(areas, None, out, force=True, quick=False, timeout=60)
    assert runs.read_text() == "x" * 10
    assert results["areas"]["works"]["status"] == "done"


def test_an_area_past_its_timeout_is_stopped_and_recorded(tmp_path):
    slow = tmp_path / "slow_bench.py"
    slow.write_text("import time\ntime.sleep(60)\n")
    results = report.run((report.Area("slow", str(slow), needs_gpu=False),), None,
                         tmp_path / "results.json", force=False, quick=False, timeout=1)
    assert results["areas"]["slow"]["status"] == "failed"
    assert results["areas"]["slow"]["error"].startswith("ran past --timeout 1 s")


@pytest.mark.no_gpu
def test_areas_that_need_a_gpu_are_skipped_with_the_reason(tmp_path, registry):
    script, _ = registry
    results = report.run((report.Area("on a GPU", str(script)),), None,
                         tmp_path / "results.json", force=False, quick=False, timeout=60)
    assert results["areas"]["on a GPU"]["status"] == "skipped"
    assert "no CUDA device is visible" in results["areas"]["on a GPU"]["reason"]


def test_the_registry_covers_the_report_areas():
    names = [area.name for area in report.AREAS]
    assert len(set(names)) == len(names)
    for area in ("allocation", "statistics", "RNG", "copies", "matmul", "small matmul",
                 "replay", "staging", "capture", "conditional nodes", "update and rebinding",
                 "graphed callables", "training step", "collectives", "import"):
        assert area in names
    for area in report.AREAS:
        assert (BENCH / area.script).is_file(), area.script


def test_every_raw_program_a_script_names_is_in_bench_raw():
    baselines = load_bench("baselines")
    named = set()
    for script in BENCH.glob("bench_*.py"):
        named |= set(re.findall(r'raw_c_(?:side|figures)\("([^"]+)"', script.read_text()))
    assert named, "no bench script names a raw C program"
    for source in sorted(named):
        assert (baselines.RAW / source).is_file(), f"{source} is not in {baselines.RAW}"


def test_the_import_area_end_to_end(tmp_path):
    """The one area that needs no GPU, measured for real and rendered."""
    pytest.importorskip("matplotlib", reason="the docs extra is not installed")
    out = tmp_path / "results.json"
    run = subprocess.run([sys.executable, str(HARNESS / "report.py"), "--out", str(out),
                          "--areas", "import", "--quick"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[1/1] import: done" in run.stdout
    records = json.loads(out.read_text())["areas"]["import"]["records"]
    assert records[0]["case"].startswith("import") and records[0]["target"] == 0.25
    _, page = render(tmp_path, json.loads(out.read_text()))
    assert "| import (fresh interpreter" in page


def test_a_spent_budget_leaves_the_remaining_areas_for_the_next_call(tmp_path, registry, capsys):
    script, areas = registry
    out = tmp_path / "results.json"
    results = report.run(areas, None, out, force=False, quick=False, timeout=60, budget=0)
    assert list(results["areas"]) == ["works"]  # one area runs in every call
    assert "as a list and the areas after it are left for the next call" in capsys.readouterr().out
    results = report.run(areas, None, out, force=False, quick=False, timeout=60)
    assert len(results["areas"]) == 5


# -- the shared measuring helpers (bench/harness/baselines.py) ---------------------------------


def load_bench(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HARNESS / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_interleaved_trials_give_medians_and_drop_a_failing_peer():
    baselines = load_bench("baselines")
    order, values = [], iter([10.0, 30.0, 20.0, 40.0, 15.0])

    def ours():
        order.append("ours")
        return {"case": next(values)}

    def peer():
        order.append("peer")
        return {"case": 100.0}

    def broken():
        order.append("broken")
        raise RuntimeError("no such feature")

    notes = []
    figures = baselines.interleaved({"tensorplay": ours, "PyTorch": peer, "CuPy": broken}, 5,
                                    notes)
    assert order[:4] == ["ours", "peer", "broken", "ours"]  # turns, not blocks
    assert figures["tensorplay"]["case"] == baselines.Figure(20.0, 7.5)
    assert "CuPy" not in figures and notes == ["CuPy left out: RuntimeError: no such feature"]
    records = baselines.compare("area", "a case", "ns", figures, key="case",
                                targets={"PyTorch": 0.5, None: 25})
    assert [(r["peer_name"], r["ratio"], r["target"], baselines.met(r)) for r in records] == [
        (None, None, 25, True), ("PyTorch", 0.2, 0.5, True)]
    with pytest.raises(RuntimeError):
        baselines.interleaved({"tensorplay": broken}, 1, [])


def test_per_call_ns_lowers_the_call_count_of_a_slow_call():
    baselines = load_bench("baselines")
    calls = []

    def slow():
        calls.append(None)
        time.sleep(0.002)

    figure = baselines.per_call_ns(slow, number=20_000, repeat=2)
    assert 2e6 <= figure < 2e7  # ns: the call's own cost
    # A warm-up, the probe of 10, and two repeats of about REPEAT_SECONDS each, not 40,000 calls.
    assert len(calls) <= 1 + 10 + 2 * (baselines.REPEAT_SECONDS / 0.002 + 1)


def test_per_call_ns_synchronises_before_every_repeat_when_asked():
    """So a repeat starts with an empty launch queue and queues at most number launches."""
    baselines = load_bench("baselines")
    order = []
    figure = baselines.per_call_ns(lambda: order.append("call"), number=5, repeat=3,
                                   synchronize=lambda: order.append("sync"))
    assert figure > 0
    timed = order[1 + 5:]  # after the warm-up call and the probe of 5
    assert timed == (["sync"] + ["call"] * 5) * 3 + ["sync"]


class FakeEvent:
    """An event of a device where every run takes run_ms: elapsed_time counts the runs between
    two records."""

    def __init__(self, clock):
        self.clock = clock

    def record(self):
        self.at = self.clock["ms"]

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return end.at - self.at


@pytest.mark.parametrize("run_ms, seconds, repeats", [
    (1.0, None, 50), (1.0, 10.0, 50), (100.0, 1.0, 10), (1000.0, 1.0, 3)])
def test_device_ms_runs_fewer_repeats_of_a_long_run_when_given_seconds(run_ms, seconds,
                                                                        repeats):
    baselines = load_bench("baselines")
    clock, runs = {"ms": 0.0}, []

    def run():
        clock["ms"] += run_ms
        runs.append(None)

    figure = baselines.device_ms(run, FakeEvent(clock), FakeEvent(clock), lambda: None, seconds)
    assert figure == run_ms
    # The warm-up, the run timed alone (with seconds), then the repeats.
    assert len(runs) == 1 + (seconds is not None) + repeats
    # Busy work queued before the first event is not timed.
    busy = []
    figure = baselines.device_ms(run, FakeEvent(clock), FakeEvent(clock), lambda: None, seconds,
                                 busy=lambda: busy.append(clock.update(ms=clock["ms"] + 5.0)))
    assert figure == run_ms and len(busy) == 1


def test_tiny_ratios_keep_two_significant_digits(monkeypatch):
    monkeypatch.syspath_prepend(str(HARNESS))  # the renderer imports its sibling baselines.py
    renderer = load_bench("render_report")
    assert renderer.shown_ratio(0.000412, 3) == "0.00041"
    assert renderer.shown_ratio(0.0412, 3) == "0.041"
    assert renderer.shown_ratio(0.5, 2) == "0.50"
    assert renderer.shown_ratio(1.2345, 3) == "1.234"
