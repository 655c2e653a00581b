"""The performance report's pages: turn the results of bench/report.py into docs/performance.md
and its plots, on any machine (no GPU; matplotlib, from the docs extra):

    python bench/render_report.py RESULTS.json [--docs DIR] [--readme README.md]

Writes DIR/performance.md (default docs/): the machine, driver, versions and dates, then a
table per area (tensorplay, PyTorch, CuPy, raw C, the ratios, the target and whether it is met)
with the notes of its run, and DIR/performance/<sweep>.png for each sweep (replay and capture
cost against graph size, allocation cost against live blocks), shown in its area's section.
Prints the headline ratios; with --readme, also writes them into README.md between
<!-- headline:start --> and <!-- headline:end -->.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from baselines import CUPY, OURS, RAW_C, TORCH, met
from report import AREAS, key

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
PEER_ORDER = (TORCH, CUPY, RAW_C)
MARKUP = re.compile(r"([\\`*_<>\[\]|#])")
COMMANDS = ("python bench/report.py --out results.json  # GPU machine; run again to resume\n"
            "python bench/render_report.py results.json --readme README.md")

# What the headline quotes: (label, area, the (case, peer) it quotes, first found first, as
# throughput). The cases are the bench scripts' (bench_graphs.py, bench_graph_extras.py,
# bench_memory.py, bench_random.py, bench_graphed_callables.py, then bench_limits.py's where it
# measures the same); a throughput is quoted as tensorplay's rate over the peer's.
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
)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


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


def plain(text: str) -> str:
    """text shown as written: Markdown's markup characters (a table's | too) escaped."""
    return MARKUP.sub(r"\\\1", text)


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


def plot(name: str, records: list[dict], path: Path) -> None:
    """Log-log lines of each library's figure against x, with the spread as error bars."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    lines: dict[str, dict[float, tuple]] = {OURS: {}}
    for entry in records:
        lines[OURS][entry["x"]] = (entry["tensorplay"], entry.get("tensorplay_spread") or 0)
        if entry.get("peer") is not None:
            lines.setdefault(entry["peer_name"], {})[entry["x"]] = (
                entry["peer"], entry.get("peer_spread") or 0)
    figure_, axes = pyplot.subplots(figsize=(7, 4.2), dpi=100)
    for label, points in lines.items():
        xs = sorted(points)
        axes.errorbar(xs, [points[x][0] for x in xs], yerr=[points[x][1] for x in xs],
                      marker="o", markersize=4, capsize=3, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_title(name)
    x_label = {"graph size": "kernels in the graph", "live blocks": "blocks live in the pool"}
    axes.set_xlabel(next((text for end, text in x_label.items() if name.endswith(end)), "x"))
    axes.set_ylabel(records[0]["unit"] + " (median of interleaved trials)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure_.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    # No Software stamp: the same figures give the same file.
    figure_.savefig(path, metadata={"Software": None})
    pyplot.close(figure_)


# -- the page ----------------------------------------------------------------------------------


def header(results: dict) -> list[str]:
    box = results.get("machine") or {}
    packages = box.get("packages", {})
    rows = [("GPU", f"{box.get('gpu')} ({box.get('gpus')} visible)" if box.get("gpu")
             else "none visible"),
            ("Driver", f"{box.get('driver')}, CUDA {box.get('cuda_driver')}"
             if box.get("driver") else "none"),
            ("nvcc (raw C)", box.get("nvcc") or "not found"),
            ("CPU", box.get("cpu")), ("Python", box.get("python")),
            ("Packages", ", ".join(f"{name} {version}" for name, version in packages.items())),
            ("Commit", ", ".join(dict.fromkeys(
                entry["commit"] for entry in results.get("areas", {}).values()
                if entry.get("status") == "done" and entry.get("commit"))) or box.get("commit")),
            ("Measured", f"{results.get('started')} to {results.get('updated')} (UTC)")]
    return ["| | |", "|---|---|"] + [f"| {name} | {plain(str(value or 'unknown'))} |"
                                     for name, value in rows]


def ordered_areas(results: dict) -> list[str]:
    """The registry's areas in its order, then any other area a script's records name."""
    names = [area.name for area in AREAS]
    known = {key(name) for name in names}
    for entry in results.get("areas", {}).values():
        for record in entry.get("records", []):
            if key(record["area"]) not in known:
                known.add(key(record["area"]))
                names.append(record["area"])
    return names


def page(results: dict, images: Path, image_prefix: str) -> str:
    """The Markdown of performance.md; writes the plots into images."""
    areas = results.get("areas", {})
    for stale in images.glob("*.png"):  # a sweep no longer measured leaves no plot behind
        stale.unlink()
    records = [r for entry in areas.values() for r in entry.get("records", [])]
    verdicts = [(r, met(r)) for r in records if met(r) is not None]
    missed = [r for r, verdict in verdicts if not verdict]
    lines = ["<!-- Written by python bench/render_report.py from bench/report.py's results: "
             "do not edit. -->", "", "# Performance", "",
             "tensorplay against PyTorch, CuPy (where it has the feature) and raw CUDA C, "
             "measured area by area on one machine, each comparison within one run. Figures are "
             "medians over interleaved trials (the libraries take turns, so that a noisy spell of "
             "the machine hits them alike) ± half the interquartile range, unless an area's notes "
             "say otherwise. Ratios are tensorplay / other: for times, below 1 tensorplay is "
             "faster; for throughputs (GB/s), above 1. Targets are those the issues set: for "
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
        lines += [f"## {name[0].upper() + name[1:]}", ""]
        if mine:
            lines += table(mine) + [""]
        status = entry.get("status")
        if status in ("skipped", "failed"):
            lines += [f"Not measured: {status}, {plain(entry.get('reason') or '')}".rstrip(", ")
                      + ("" if status == "skipped" else ":"), ""]
            if status == "failed":
                lines += ["```text", entry.get("error", ""), "```", ""]
        elif status is None and not mine:
            lines += ["Not measured yet.", ""]
        elsewhere = list(dict.fromkeys(r["area"] for r in entry.get("records", [])
                                       if key(r["area"]) != key(name)))
        if elsewhere:
            lines += [f"Its figures are in the tables of {', '.join(elsewhere)}.", ""]
        if status == "done":
            lines.append(f"Measured {entry.get('finished')} in {entry.get('seconds')} s"
                         + (" (--quick: fewer trials)" if entry.get("quick") else "") + ".")
            lines.append("")
            if entry.get("notes"):
                lines += [f"- {plain(note)}" for note in entry["notes"]] + [""]
        for sweep, points in sweeps(mine).items():
            plot(sweep, points, images / f"{slug(sweep)}.png")
            lines += [f"![{sweep}]({image_prefix}{slug(sweep)}.png)", ""]
    return "\n".join(lines).rstrip() + "\n"


# -- the headline ------------------------------------------------------------------------------


def headline(results: dict, report_link: str) -> str:
    """One paragraph of the headline ratios, for the README."""
    records = [r for entry in results.get("areas", {}).values()
               for r in entry.get("records", [])]
    parts: dict[str, list[str]] = {}
    for label, area, choices, throughput in HEADLINE:
        entry = next((r for case, peer in choices for r in records
                      if key(r["area"]) == key(area) and r["case"] == case
                      and r.get("peer_name") == peer and r.get("ratio")), None)
        if entry is None:
            continue
        if throughput:  # a rate's ratio (GB/s) is the quote; a time's is inverted
            rate = entry["ratio"] if entry.get("unit") == "GB/s" else 1 / entry["ratio"]
            text = f"{shown_ratio(rate, 2)}x {entry['peer_name']}'s"
        else:
            text = f"{shown_ratio(entry['ratio'], 2)}x {entry['peer_name']}"
        verdict = met(entry)
        if verdict is not None:
            text += " (target met)" if verdict else " (target not met)"
        parts.setdefault(label, []).append(text)
    if not parts:
        return (f"Performance: no measurements yet; [the performance report]({report_link}) "
                "says how to run them.")
    box = results.get("machine") or {}
    when = (results.get("updated") or "")[:10]
    return (f"Measured on {box.get('gpu')} (driver {box.get('driver')}, {when}), tensorplay "
            "against the others (a time's ratio below 1, a throughput's above 1, puts tensorplay "
            "ahead): " +
            "; ".join(f"{label} {' and '.join(texts)}" for label, texts in parts.items()) +
            f". Every figure, target and plot: [the performance report]({report_link}).")


def rewrite_readme(readme: Path, text: str) -> None:
    content = readme.read_text()
    if content.count(START) != 1 or content.count(END) != 1 or \
            content.index(START) > content.index(END):
        raise SystemExit(f"{readme} needs one {START} line and, after it, one {END} line")
    before, rest = content.split(START)
    _, after = rest.split(END)
    readme.write_text(f"{before}{START}\n{text}\n{END}{after}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python bench/render_report.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="the JSON file bench/report.py wrote")
    parser.add_argument("--docs", type=Path, default=ROOT / "docs",
                        help="where performance.md and performance/ go (default: docs/)")
    parser.add_argument("--readme", type=Path,
                        help="write the headline into this README between the markers")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    args.docs.mkdir(parents=True, exist_ok=True)
    markdown = page(results, args.docs / "performance", "performance/")
    (args.docs / "performance.md").write_text(markdown)
    print(f"wrote {args.docs / 'performance.md'}")
    text = headline(results, "docs/performance.md")
    print(text)
    if args.readme:
        rewrite_readme(args.readme, text)
        print(f"wrote the headline into {args.readme}")


if __name__ == "__main__":
    main()
