"""The performance report's pages: turn the results of bench/harness/report.py into
docs/performance.md and its plots, on any machine (no GPU; matplotlib, from the docs extra):

    python bench/harness/render_report.py RESULTS.json [--docs DIR] [--readme README.md]

Writes DIR/performance.md (default docs/): the machine, driver, versions and dates, then a
table per area (tensorplay, PyTorch, CuPy, raw C, the ratios, the target and whether it is met)
with the notes of its run, and DIR/performance/<sweep>.png for each sweep (replay and capture
cost against graph size, allocation cost against live blocks, matmul throughput against matrix
size, training step time against model width), shown in its area's section: a line per library,
or per library and series where a sweep's records name one (float32, bfloat16).
Prints the headline ratios; with --readme, also writes them into README.md between
<!-- headline:start --> and <!-- headline:end -->.

The results file is checked whole before any output is touched: a file that is not JSON, a
field of the wrong type, a figure that is NaN, infinite or negative is refused, naming the
file, the area, the record and the field, and nothing is written. Every output is written to a
temporary file beside it and renamed into place. Every text quoted from the results (names,
notes, GPU names) is escaped, so that it shows as written and can be neither markup nor a
README marker. Only what the renderer wrote is replaced or removed: a performance.md it did
not write is refused, and the plots it removes are those its previous page showed.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import re
import sys
import tempfile
import zlib
from pathlib import Path

from baselines import CUPY, OURS, RAW_C, TORCH, met
from report import AREAS, key

ROOT = Path(__file__).resolve().parents[2]
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
PEER_ORDER = (TORCH, CUPY, RAW_C)
# Markdown's markup characters (MyST's for the docs page, GitHub's for the README): escaped in
# every quoted text, so that a name shows as written, never as emphasis, a link, a table cell,
# an entity (&lt;), math ($), strikethrough (~~) or HTML (<script>, <!-- -->).
MARKUP = re.compile(r"([\\`*_<>\[\]|#&~$])")
# Where a quoted text starts a line's content (a list item's), what would start a block there.
# The escape goes before the character that makes the block (1\\. x, not \\1. x).
LINE_START = re.compile(r"^(\d*)([-+=:.)])")
# Control characters but tab and newline: shown as U+FFFD (an error's ANSI colours, a NUL).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# The first line of the page, which says the renderer wrote it (and may write it again).
PAGE_MARK = ("<!-- Written by python bench/harness/render_report.py from bench/harness/report.py's "
             "results: do not edit. -->")
PROG = "python bench/harness/render_report.py"
COMMANDS = ("python bench/harness/report.py --out results.json  # GPU machine; run again to "
            "resume\npython bench/harness/render_report.py results.json --readme README.md")

# What the headline quotes: (label, area, the (case, peer) it quotes, first found first, as
# throughput). The cases are the bench scripts' (bench_graphs.py, bench_graph_extras.py,
# bench_memory.py, bench_random.py, bench_graphed_callables.py, bench_matmul.py, then
# bench_limits.py's where it measures the same); a throughput is quoted as tensorplay's rate over
# the peer's.
HEADLINE = (
    ("replay", "replay", (("replay(), 1-kernel graph", RAW_C),), False),
    ("replay", "replay", (("replay(), 1-kernel graph", TORCH),), False),
    ("capture", "capture", (("capture and instantiate, 1-kernel graph", TORCH),), False),
    ("stage_and_launch", "staging", (("stage_and_launch(), 8 inputs of 1 MiB, host", TORCH),
                                     ("stage_and_launch 8 x 1 MiB", "torch 8 copy_() + replay()")),
     False),
    ("memory_allocated()", "statistics", (("memory_allocated()", TORCH),), False),
    ("random-number throughput", "RNG", (("uniform_() of 64M float32, device", TORCH),
                                         ("uniform_ float32 64M", "torch uniform_")), True),
    ("graphed training iteration", "graphed callables",
     (("graphed iteration (forward, eager loss, backward), host", TORCH),), False),
    ("float32 matmul throughput", "matmul",
     (("a @ b, 4096 x 4096 x 4096 float32, device", TORCH),), True),
    ("bfloat16 matmul throughput", "matmul",
     (("a @ b, 4096 x 4096 x 4096 bfloat16, device", TORCH),), True),
    ("graphed training step", "training step",
     (("step of 1024-4096-4096-1024, batch 256, until the device is done", TORCH),), False),
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "sweep"


def number(value: float) -> str:
    """Three significant figures, without an exponent for the sizes a report shows."""
    if value == 0:
        return "0"
    digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{digits}f}"


def figure(value, spread) -> str:
    if value is None:
        return ""
    return number(value) + (f" ± {number(spread)}" if spread else "")


def clean(text: str) -> str:
    """text with its control characters (but tab and newline) shown as U+FFFD."""
    return CONTROL.sub("\ufffd", text)


def plain(text: str, line_start: bool = False) -> str:
    """text shown as written on one line: Markdown's markup characters (a table's | too)
    escaped, line breaks made spaces; with line_start, also what would start a block there (a
    list marker, a colon fence)."""
    text = MARKUP.sub(r"\\\1", clean(re.sub(r"\s*[\r\n]\s*", " ", text)))
    return LINE_START.sub(r"\1\\\2", text) if line_start else text


def fenced(text: str, info: str = "text") -> list[str]:
    """text as a fenced code block, its fence longer than any run of backticks in it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", clean(text), fence]


def label(text: str) -> str:
    """text for matplotlib: its $ escaped (mathtext), and shown even where it starts with _
    (which a legend leaves out)."""
    text = clean(text).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


# -- the results file, checked whole ------------------------------------------------------------

# Problems listed at most; the count says how many more.
MAX_PROBLEMS = 40
STATUSES = ("done", "failed", "skipped")


class Invalid(Exception):
    """The results file cannot be rendered; the message names the file and what is wrong."""


def check_results(results, problems: list[str]) -> None:
    """Append to problems every field the renderer reads that it could not show: each names
    the area, the record and the field (Note [Records] in bench/harness/baselines.py)."""

    def say(where: str, message: str) -> None:
        problems.append(f"{where}: {message}")

    def shown(value) -> str:
        text = repr(value)
        return text if len(text) <= 80 else text[:80] + "..."

    def kind(value) -> str:
        return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
                type(None): "null"}.get(type(value), type(value).__name__)

    def text(value, where: str, optional: bool = True) -> bool:
        if value is None and optional:
            return True
        if not isinstance(value, str):
            say(where, f"must be a string{' or null' if optional else ''}, got {kind(value)}")
            return False
        surrogate = re.search("[\ud800-\udfff]", value)
        if surrogate:
            say(where, f"holds U+{ord(surrogate.group()):04X}, a lone surrogate, which UTF-8 "
                       "cannot encode")
            return False
        return True

    def figure(value, where: str, optional: bool = True, nan: bool = False,
               positive: bool = False) -> bool:
        if value is None and optional:
            return True
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            say(where, f"must be a number{' or null' if optional else ''}, got {kind(value)}")
            return False
        if isinstance(value, float) and math.isnan(value):
            if nan:
                return True
            say(where, "is NaN; a figure must be a number (null where there is none)")
            return False
        if isinstance(value, int) and abs(value) > 1e300:  # more digits than a float holds
            say(where, f"is an integer of {len(str(abs(value)))} digits; a figure must be a "
                       "finite float")
            return False
        if isinstance(value, float) and math.isinf(value):
            say(where, f"is {'-' if value < 0 else ''}infinite; a figure must be finite")
            return False
        if value < 0 or (positive and value == 0):
            say(where, f"is {value!r}; it must be {'above' if positive else 'at least'} 0")
            return False
        return True

    def flag(value, where: str) -> None:
        if value is not None and not isinstance(value, bool):
            say(where, f"must be true, false or null, got {kind(value)}")

    if not isinstance(results, dict):
        problems.append(f"must be a JSON object (the file bench/harness/report.py writes), got "
                        f"{kind(results)}")
        return
    if "format" in results and results["format"] != 1:
        problems.append(f"'format': {shown(results['format'])} is not this report's format, 1")
    for field in ("started", "updated"):
        text(results.get(field), f"'{field}'")
    machine = results.get("machine")
    if machine is not None and not isinstance(machine, dict):
        say("'machine'", f"must be an object, got {kind(machine)}")
    elif machine:
        for field in ("gpu", "driver", "cuda_driver", "nvcc", "cpu", "python", "commit"):
            text(machine.get(field), f"machine, '{field}'")
        gpus = machine.get("gpus")
        if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int)
                                 or gpus < 0):
            say("machine, 'gpus'", f"must be a count (an integer, at least 0), got {shown(gpus)}")
        packages = machine.get("packages")
        if packages is not None and not isinstance(packages, dict):
            say("machine, 'packages'", f"must be an object, got {kind(packages)}")
        elif packages:
            for name, version in packages.items():
                if text(name, "machine, 'packages', a name"):
                    text(version, f"machine, 'packages', {shown(name)}", optional=False)
    areas = results.get("areas")
    if areas is None:
        return
    if not isinstance(areas, dict):
        say("'areas'", f"must be an object of areas by name, got {kind(areas)}")
        return
    for name, entry in areas.items():
        if not text(name, "an area's name", optional=False) or not name.strip():
            if isinstance(name, str):
                say(f"area {shown(name)}", "an area's name must not be empty")
            continue
        area = f"area {shown(name)}"
        if not isinstance(entry, dict):
            say(area, f"must be an object, got {kind(entry)}")
            continue
        status = entry.get("status")
        if status is not None and status not in STATUSES:
            say(f"{area}, 'status'", f"must be one of {', '.join(STATUSES)}, got {shown(status)}")
        for field in ("reason", "error", "finished", "commit"):
            text(entry.get(field), f"{area}, '{field}'")
        figure(entry.get("seconds"), f"{area}, 'seconds'")
        flag(entry.get("quick"), f"{area}, 'quick'")
        lists = {}
        for field in ("notes", "records"):
            lists[field] = entry.get(field) or []
            if not isinstance(lists[field], list):
                say(f"{area}, '{field}'", f"must be a list, got {kind(lists[field])}")
                lists[field] = []
        for index, note in enumerate(lists["notes"]):
            text(note, f"{area}, note {index}", optional=False)
        for index, record in enumerate(lists["records"]):
            where = f"{area}, record {index}"
            if not isinstance(record, dict):
                say(where, f"must be an object, got {kind(record)}")
                continue
            if isinstance(record.get("case"), str):
                where += f" ({record['case'][:60]!r})"
            for field in ("area", "case", "unit"):
                text(record.get(field), f"{where}, '{field}'", optional=False)
            if isinstance(record.get("area"), str) and not record["area"].strip():
                say(f"{where}, 'area'", "must not be empty")
            figure(record.get("tensorplay"), f"{where}, 'tensorplay'", optional=False)
            for field in ("tensorplay_spread", "peer", "peer_spread"):
                figure(record.get(field), f"{where}, '{field}'")
            # NaN: the script had no ratio to give (a peer of 0), shown without a verdict.
            figure(record.get("ratio"), f"{where}, 'ratio'", nan=True)
            text(record.get("peer_name"), f"{where}, 'peer_name'")
            if record.get("peer_name") is None and (record.get("peer") is not None
                                                    or record.get("ratio") is not None):
                say(f"{where}, 'peer_name'", "must name the other library, as the record "
                                             "has its figure or a ratio")
            target = record.get("target")
            if isinstance(target, str):
                text(target, f"{where}, 'target'")
            else:
                figure(target, f"{where}, 'target'")
            flag(record.get("met"), f"{where}, 'met'")
            text(record.get("series"), f"{where}, 'series'")
            if record.get("sweep") is not None and text(record["sweep"], f"{where}, 'sweep'"):
                # A point of a plot with logarithmic axes.
                figure(record.get("x"), f"{where}, 'x'", optional=False, positive=True)


def read_results(path: Path) -> dict:
    """The results file, checked whole; Invalid, naming the file and every problem."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise Invalid(f"{path}: cannot read it ({error.strerror or error})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Invalid(f"{path}: not UTF-8 text (byte 0x{data[error.start]:02x} at offset "
                      f"{error.start}); bench/harness/report.py writes JSON") from None
    try:
        results = json.loads(text)
    except json.JSONDecodeError as error:
        cut = " (the file ends early: was it cut short?)" if error.pos >= len(text.rstrip()) \
            else ""
        raise Invalid(f"{path}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}{cut}; "
                      "bench/harness/report.py writes the whole file at once") from None
    except (RecursionError, ValueError) as error:  # nesting too deep; a number too long
        raise Invalid(f"{path}: cannot be read as JSON ({type(error).__name__}: "
                      f"{str(error)[:200]})") from None
    problems: list[str] = []
    check_results(results, problems)
    if problems:
        shown = [f"{path}: {problem}" for problem in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - MAX_PROBLEMS} more")
        raise Invalid("\n".join(shown) + f"\n{path}: {len(problems)} problem(s); nothing was "
                      "written. Fix the file, or measure again with bench/harness/report.py")
    return results


# -- tables ------------------------------------------------------------------------------------


def bound(entry: dict) -> str:
    """A record's target as the table shows it."""
    target, peer = entry["target"], entry.get("peer_name")
    if isinstance(target, str):  # the script's own words (Note [Records])
        return f"{target} ({peer})" if peer and entry.get("peer") is not None else target
    if entry.get("peer") is None:
        return f"≤ {number(target)} {entry['unit']}"
    return f"≤ {target:.3g}x {peer}"


def shown_ratio(ratio: float, places: int) -> str:
    """ratio with places decimals, or two significant digits where those would show only zeros
    (memory_allocated() is thousands of times faster than PyTorch's: 0.00041x, not 0.000x)."""
    return f"{ratio:.{places}f}" if ratio >= 10 ** -places else f"{ratio:.2g}"


def ratio_text(entry: dict) -> str | None:
    ratio = entry.get("ratio")
    if ratio is None or ratio != ratio:
        return None
    return f"{shown_ratio(ratio, 3)}x {entry['peer_name']}"


def table(records: list[dict]) -> list[str]:
    """A Markdown table, a row per case in the order measured, a column per peer."""
    rows: dict[str, list[dict]] = {}
    for entry in records:
        rows.setdefault(entry["case"], []).append(entry)
    named = {entry["peer_name"] for entry in records if entry.get("peer") is not None}
    peers = [p for p in PEER_ORDER if p in named] + sorted(named - set(PEER_ORDER))
    lines = ["| case | unit | tensorplay | " + " | ".join(plain(p) for p in peers) +
             (" | " if peers else "") + "ratio | target | met |",
             "|---|---|---:|" + "---:|" * len(peers) + "---|---|---|"]
    for case, entries in rows.items():
        first = entries[0]
        values = {e["peer_name"]: figure(e["peer"], e.get("peer_spread")) for e in entries
                  if e.get("peer") is not None}
        ratios = [text for text in map(ratio_text, entries) if text]
        targets, verdicts = [], []
        for entry in entries:
            verdict = met(entry)
            if verdict is not None:
                targets.append(bound(entry))
                verdicts.append("met" if verdict else "**not met**")
        cells = [case, first["unit"], figure(first["tensorplay"], first.get("tensorplay_spread")),
                 *(values.get(p, "") for p in peers), "; ".join(ratios), "; ".join(targets)]
        lines.append("| " + " | ".join(plain(str(c)) for c in cells) + " | "
                     + "; ".join(verdicts) + " |")
    return lines


# -- plots -------------------------------------------------------------------------------------


def sweeps(records: list[dict]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for entry in records:
        if entry.get("sweep"):
            found.setdefault(entry["sweep"], []).append(entry)
    return found


# The x axis of a sweep, by how its name ends.
X_LABELS = {"graph size": "kernels in the graph", "live blocks": "blocks live in the pool",
            "matrix size": "n, of n x n matrices",
            "model width": "width H of the model H/4-H-H-H/4"}


def line_name(library: str, series) -> str:
    return library if series is None else f"{library}, {series}"


def lines_of(records: list[dict]) -> dict[tuple, dict[float, tuple]]:
    """{(library, series): {x: (figure, spread)}} of a sweep: a line per library, or per library
    and series where the records name a series (None where they do not); tensorplay's first."""
    ours: dict[tuple, dict[float, tuple]] = {}
    peers: dict[tuple, dict[float, tuple]] = {}
    for entry in records:
        series = entry.get("series")
        ours.setdefault((OURS, series), {})[entry["x"]] = (
            entry["tensorplay"], entry.get("tensorplay_spread") or 0)
        if entry.get("peer") is not None:
            peers.setdefault((entry["peer_name"], series), {})[entry["x"]] = (
                entry["peer"], entry.get("peer_spread") or 0)
    return {**ours, **peers}


# A series' line style, in the order the series come: a library keeps its colour across them.
LINE_STYLES = ("-", "--", ":", "-.")
# One colour per library in every plot, whatever else a plot shows: a line's library is the
# first of these whose name starts its name ("torch.randn" is PyTorch's), tensorplay's is
# matplotlib's first colour; another library takes one of OTHER_COLOURS by a hash of its name,
# so that it too keeps its colour from plot to plot and run to run.
LIBRARY_COLOURS = ((OURS, "#1f77b4"), (TORCH, "#ee4c2c"), ("torch", "#ee4c2c"),
                   (CUPY, "#2ca02c"), (RAW_C, "#555555"))
OTHER_COLOURS = ("#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#ff7f0e")
# The plots' size: drawn at 1200 x 660 px, shown at the page's width with text still readable.
FIGURE_INCHES, FIGURE_DPI, FONT_POINTS = (10, 5.5), 120, 13


def library_colour(library: str) -> str:
    for prefix, colour in LIBRARY_COLOURS:
        if library.startswith(prefix):
            return colour
    return OTHER_COLOURS[zlib.crc32(library.encode()) % len(OTHER_COLOURS)]


def sweep_table(name: str, records: list[dict]) -> list[str]:
    """The figures of a sweep's plot as a Markdown table: a row per x, a column per line."""
    lines = lines_of(records)
    xs = sorted({x for points in lines.values() for x in points})
    x_label = next((text for end, text in X_LABELS.items() if name.endswith(end)), "x")
    out = [f"| {plain(x_label)} | " + " | ".join(
               plain(f"{line_name(library, series)} ({records[0]['unit']})")
               for library, series in lines) + " |",
           "|---:|" + "---:|" * len(lines)]
    for x in xs:
        cells = [figure(*points[x]) if x in points else "" for points in lines.values()]
        shown_x = f"{int(x):,}" if float(x).is_integer() else number(x)  # sizes are counts
        out.append(f"| {shown_x} | " + " | ".join(cells) + " |")
    return out


def plot(name: str, records: list[dict]) -> bytes:
    """The PNG of log-log lines (lines_of) against x, with the spread as error bars."""
    try:
        import matplotlib
    except ImportError as error:
        raise Invalid(f"matplotlib is needed to draw the plots of the sweeps ({error}); install "
                      "the docs extra: pip install '.[docs]'") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    lines = lines_of(records)
    series_ = list(dict.fromkeys(series for _, series in lines))
    pyplot.rcParams.update({"font.size": FONT_POINTS})
    figure_, axes = pyplot.subplots(figsize=FIGURE_INCHES, dpi=FIGURE_DPI)
    for (library, series), points in lines.items():
        xs = sorted(points)
        axes.errorbar(xs, [points[x][0] for x in xs], yerr=[points[x][1] for x in xs],
                      marker="o", markersize=6, capsize=4, linewidth=2,
                      color=library_colour(library),
                      linestyle=LINE_STYLES[series_.index(series) % len(LINE_STYLES)],
                      label=label(line_name(library, series)))
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_title(label(name))
    axes.set_xlabel(next((text for end, text in X_LABELS.items() if name.endswith(end)), "x"))
    axes.set_ylabel(label(records[0]["unit"]) + " (median of interleaved trials)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure_.tight_layout()
    image = io.BytesIO()
    # No Software stamp: the same figures give the same file.
    figure_.savefig(image, format="png", metadata={"Software": None})
    pyplot.close(figure_)
    return image.getvalue()


# -- the page ----------------------------------------------------------------------------------


def area_entries(results: dict) -> dict:
    return results.get("areas") or {}


def header(results: dict) -> list[str]:
    box = results.get("machine") or {}
    packages = box.get("packages") or {}
    rows = [("GPU", f"{box.get('gpu')} ({box.get('gpus')} visible)" if box.get("gpu")
             else "none visible"),
            ("Driver", f"{box.get('driver')}, CUDA {box.get('cuda_driver')}"
             if box.get("driver") else "none"),
            ("nvcc (raw C)", box.get("nvcc") or "not found"),
            ("CPU", box.get("cpu")), ("Python", box.get("python")),
            ("Packages", ", ".join(f"{name} {version}" for name, version in packages.items())),
            ("Commit", ", ".join(dict.fromkeys(
                entry["commit"] for entry in area_entries(results).values()
                if entry.get("status") == "done" and entry.get("commit"))) or box.get("commit")),
            ("Measured", f"{results.get('started')} to {results.get('updated')} (UTC)")]
    return ["| | |", "|---|---|"] + [f"| {name} | {plain(str(value or 'unknown'))} |"
                                     for name, value in rows]


def ordered_areas(results: dict) -> list[str]:
    """The registry's areas in its order, then any other area a script's records name, then
    any other area the results hold (a registry of another version), so that nothing in the
    file goes unshown."""
    names = [area.name for area in AREAS]
    known = {key(name) for name in names}
    others = [record["area"] for entry in area_entries(results).values()
              for record in entry.get("records") or []] + list(area_entries(results))
    for name in others:
        if key(name) not in known:
            known.add(key(name))
            names.append(name)
    return names


def page(results: dict, image_prefix: str) -> tuple[str, dict[str, bytes]]:
    """The Markdown of performance.md, and its plots by file name (in image_prefix)."""
    areas = area_entries(results)
    records = [r for entry in areas.values() for r in entry.get("records") or []]
    verdicts = [(r, met(r)) for r in records if met(r) is not None]
    missed = [r for r, verdict in verdicts if not verdict]
    plots: dict[str, bytes] = {}
    lines = [PAGE_MARK, "", "# Performance", "",
             "tensorplay against PyTorch, CuPy (where it has the feature) and raw CUDA C, "
             "measured area by area on one machine, each comparison within one run. Figures are "
             "medians over interleaved trials (the libraries take turns, so that a noisy spell of "
             "the machine hits them alike) ± half the interquartile range, unless an area's notes "
             "say otherwise. Ratios are tensorplay / other: for times, below 1 tensorplay is "
             "faster; for throughputs (GB/s), above 1. Targets are the project's: for "
             "times, the most the ratio (or, with no other library, the figure) may be.", "",
             "Regenerate with:", "", "```bash", COMMANDS, "```", ""]
    if not records:
        lines += ["No measurements yet: the report has not been run on a GPU machine.", ""]
    else:
        lines += header(results) + [""]
        lines.append(f"Targets: {len(verdicts) - len(missed)} of {len(verdicts)} met." +
                     ("" if not missed else " Not met: " + "; ".join(plain(
                         f"{r['area']}, {r['case']}: "
                         f"{ratio_text(r) or number(r['tensorplay']) + ' ' + r['unit']}, "
                         f"target {bound(r)}") for r in missed) + "."))
        lines.append("")
    for name in ordered_areas(results):
        entry = next((e for n, e in areas.items() if key(n) == key(name)), {})
        mine = [r for r in records if key(r["area"]) == key(name)]
        lines += [f"## {plain(name[0].upper() + name[1:])}", ""]
        if mine:
            lines += table(mine) + [""]
        status = entry.get("status")
        if status in ("skipped", "failed"):
            lines += [f"Not measured: {status}, {plain(entry.get('reason') or '')}".rstrip(", ")
                      + ("" if status == "skipped" else ":"), ""]
            if status == "failed":
                lines += fenced(entry.get("error") or "") + [""]
        elif status is None and not mine:
            lines += ["Not measured yet.", ""]
        elsewhere = list(dict.fromkeys(r["area"] for r in entry.get("records") or []
                                       if key(r["area"]) != key(name)))
        if elsewhere:
            lines += [f"Its figures are in the tables of {', '.join(map(plain, elsewhere))}.", ""]
        if status == "done":
            lines.append(f"Measured {plain(str(entry.get('finished')))} in "
                         f"{entry.get('seconds')} s"
                         + (" (--quick: fewer trials)" if entry.get("quick") else "") + ".")
            lines.append("")
            if entry.get("notes"):
                lines += [f"- {plain(note, line_start=True)}" for note in entry["notes"]] + [""]
        for sweep, points in sweeps(mine).items():
            # One file per sweep, named after it; a name another sweep took gets a number.
            file = f"{slug(sweep)}.png"
            number_ = 2
            while file in plots:
                file, number_ = f"{slug(sweep)}-{number_}.png", number_ + 1
            plots[file] = plot(sweep, points)
            lines += [f"![{plain(sweep)}]({image_prefix}{file})", "",
                      f"The figures of the plot, {plain(sweep)}:", ""]
            lines += sweep_table(sweep, points) + [""]
    return "\n".join(lines).rstrip() + "\n", plots


def shown_plots(markdown: str, image_prefix: str) -> set[str]:
    """The plot files a page the renderer wrote shows (those it may remove once unused)."""
    found = re.findall(r"^!\[.*\]\(" + re.escape(image_prefix) + r"([a-z0-9-]+\.png)\)$",
                       markdown, flags=re.M)
    return set(found)


# -- the headline ------------------------------------------------------------------------------


def headline(results: dict, report_link: str) -> str:
    """One paragraph of the headline ratios, for the README; what it quotes from the results
    (the GPU, the driver, the date, the peers' names) is escaped (plain)."""
    records = [r for entry in area_entries(results).values() for r in entry.get("records") or []]
    parts: dict[str, list[str]] = {}
    for name, area, choices, throughput in HEADLINE:
        entry = next((r for case, peer in choices for r in records
                      if key(r["area"]) == key(area) and r["case"] == case
                      and r.get("peer_name") == peer and r.get("ratio")
                      and not math.isnan(r["ratio"])), None)
        if entry is None:
            continue
        peer = plain(entry["peer_name"])
        if throughput:  # a rate's ratio (GB/s) is the quote; a time's is inverted
            rate = entry["ratio"] if entry.get("unit") == "GB/s" else 1 / entry["ratio"]
            text = f"{shown_ratio(rate, 2)}x {peer}'s"
        else:
            text = f"{shown_ratio(entry['ratio'], 2)}x {peer}"
        verdict = met(entry)
        if verdict is not None:
            text += " (target met)" if verdict else " (target not met)"
        parts.setdefault(name, []).append(text)
    if not parts:
        return (f"Performance: no measurements yet; [the performance report]({report_link}) "
                "says how to run them.")
    box = results.get("machine") or {}
    when = plain((results.get("updated") or "")[:10])
    return (f"Measured on {plain(str(box.get('gpu')))} (driver {plain(str(box.get('driver')))}, "
            f"{when}), tensorplay against the others (a time's ratio below 1, a throughput's "
            "above 1, puts tensorplay ahead): " +
            "; ".join(f"{name} {' and '.join(texts)}" for name, texts in parts.items()) +
            f". Every figure, target and plot: [the performance report]({report_link}).")


def read_readme(readme: Path) -> str:
    """The README's text, with exactly one START marker and, after it, one END marker."""
    try:
        content = readme.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise Invalid(f"--readme {readme}: cannot read it "
                      f"({getattr(error, 'strerror', None) or error})") from None
    starts, ends = content.count(START), content.count(END)
    if starts > 1 or ends > 1:
        raise Invalid(f"--readme {readme}: it holds {starts} {START} and {ends} {END} markers; "
                      f"it needs one {START} line and, after it, one {END} line. Remove the "
                      "extra markers (the headline is what stands between the two), then run "
                      "again; nothing was written")
    if starts != 1 or ends != 1 or content.index(START) > content.index(END):
        raise Invalid(f"--readme {readme}: it needs one {START} line and, after it, one {END} "
                      "line, between which the headline goes; nothing was written")
    return content


def with_headline(content: str, text: str) -> str:
    """The README's content with text between its markers. The text cannot hold a marker nor
    open an HTML comment (what it quotes is escaped: \\< is no tag), and this checks that the
    markers stay one each."""
    before, rest = content.split(START)
    _, after = rest.split(END)
    written = f"{before}{START}\n{text}\n{END}{after}"
    if START in text or END in text or re.search(r"(?<!\\)<!--|-->", text) \
            or written.count(START) != 1 or written.count(END) != 1:
        raise Invalid("the headline would hold a README marker or an HTML comment, which its "
                      "escaping should have prevented; nothing was written (a bug of the "
                      "renderer)")
    return written


def write_atomically(path: Path, data: bytes) -> None:
    """path replaced by data at once, through a temporary file beside it; on any failure the
    old file stays and no temporary file is left. An existing file keeps its mode."""
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as temporary:
            temporary.write(data)
        os.chmod(name, mode)
        os.replace(name, path)
    except BaseException:
        try:
            os.unlink(name)
        except OSError:
            pass
        raise


def render(results_path: Path, docs: Path, readme: Path | None) -> str:
    """Check everything, then write the page, its plots and the headline; return the
    headline. Invalid, before anything is written, for whatever cannot be rendered."""
    results = read_results(results_path)
    content = read_readme(readme) if readme else None
    target, images = docs / "performance.md", docs / "performance"
    for path in (docs, images):
        if path.exists() and not path.is_dir():
            raise Invalid(f"{path} is not a folder; --docs names the folder performance.md "
                          "and performance/ go to")
    previous = ""
    if target.exists() or target.is_symlink():
        try:
            previous = target.read_text(encoding="utf-8") if target.is_file() else ""
        except (OSError, UnicodeDecodeError):
            previous = ""
        if target.is_symlink() or previous.split("\n", 1)[0] != PAGE_MARK:
            raise Invalid(f"{target} was not written by this renderer (its first line is not "
                          "the renderer's mark), so it is not replaced; move it away or pass "
                          "another --docs; nothing was written")
    markdown, plots = page(results, "performance/")
    text = headline(results, "docs/performance.md")
    new_readme = with_headline(content, text) if content is not None else None
    try:
        images.mkdir(parents=True, exist_ok=True)
        for file, data in plots.items():
            write_atomically(images / file, data)
        write_atomically(target, markdown.encode("utf-8"))
        print(f"wrote {target}")
        # A sweep no longer measured leaves no plot behind: the previous page's plots that
        # this one does not show are removed, and nothing else.
        for stale in sorted(shown_plots(previous, "performance/") - set(plots)):
            if (images / stale).is_file() and not (images / stale).is_symlink():
                (images / stale).unlink()
                print(f"removed {images / stale}, a plot of a sweep no longer measured")
        if new_readme is not None:
            write_atomically(readme, new_readme.encode("utf-8"))
    except OSError as error:
        raise Invalid(f"cannot write {error.filename or docs} ({error.strerror or error})") \
            from None
    return text


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the JSON file bench/harness/report.py wrote")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs",
                        help="where performance.md and performance/ go (default: docs/)")
    parser.add_argument("--readme", type=Path,
                        help="write the headline into this README between the markers")
    args = parser.parse_args(argv)
    try:
        text = render(args.results, args.docs, args.readme)
    except Invalid as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    print(text)
    if args.readme:
        print(f"wrote the headline into {args.readme}")


if __name__ == "__main__":
    main()
