"""Build the docs site: python docs/build.py [--out DIR] (default build/docs).

One command does it all: the handwritten pages of docs/ and the pages codegen renders from
api.yaml (python -m codegen docs --format site) are assembled in DIR/src, then Sphinx builds
DIR/html with warnings as errors, so a broken cross-reference fails the build. Serve DIR/html
under /docs/: the reference pages' URLs are /docs/generated/<qualified name>.html.

The build owns DIR only when it made it: it writes into a new or empty folder, leaving its
marker file DIR/.docs-build there, or into a folder that holds that marker, and it replaces
DIR/src, DIR/html and DIR/doctrees alone on each build (other files in DIR stay). A folder
that holds anything else and no marker is refused, untouched.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# The file that says a folder is the build's: written into the folder the build made, its
# text checked before the build replaces anything there.
MARKER = ".docs-build"
MARKER_TEXT = ("This folder was made by python docs/build.py, which replaces src/, html/ and "
               "doctrees/ here on each build and leaves everything else alone.\n")
OWNED = ("src", "html", "doctrees")


def is_marked(out: Path) -> bool:
    marker = out / MARKER
    try:
        return (marker.is_file() and not marker.is_symlink()
                and marker.read_text(encoding="utf-8") == MARKER_TEXT)
    except (OSError, UnicodeDecodeError):
        return False


def check(out: Path) -> None:
    """Raise SystemExit, naming the folder and what to do, where out is not the build's to
    write: a file, a folder holding files of others (no marker), or a marked folder whose
    src/, html/ or doctrees/ is a link or a file. Changes nothing."""
    if out.exists() and not out.is_dir():
        raise SystemExit(f"python docs/build.py: --out {out} is not a folder; name a new or "
                         "empty folder for the site")
    if out.resolve().is_relative_to(DOCS):
        raise SystemExit(f"python docs/build.py: --out {out} is inside {DOCS}, whose pages the "
                         "build copies; name a folder outside it (default: build/docs)")
    if out.is_dir() and not is_marked(out) and any(out.iterdir()):
        raise SystemExit(
            f"python docs/build.py: --out {out} already holds files that docs/build.py did not "
            f"write (it has no {MARKER} marker file), and a build replaces src/, html/ and "
            "doctrees/ in its folder, so it does not build there. Name a new or empty folder "
            "with --out, or move that folder's files elsewhere first.")
    for name in OWNED:
        path = out / name
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise SystemExit(f"python docs/build.py: {path} is a link or a file, not a folder "
                             "an earlier build made; move it away, or name another --out")


def claim(out: Path) -> None:
    """Make out the build's folder (check() first), then remove the folders an earlier build
    wrote there (OWNED), so that a page whose object left the schema does not linger."""
    check(out)
    try:
        if not is_marked(out):  # new or empty: the build's from now on
            out.mkdir(parents=True, exist_ok=True)
            (out / MARKER).write_text(MARKER_TEXT, encoding="utf-8")
        for name in OWNED:
            if (out / name).exists():
                shutil.rmtree(out / name)
    except OSError as error:
        raise SystemExit(f"python docs/build.py: --out {out}: cannot prepare the build folder: "
                         f"{error.filename or out} ({error.strerror or error})") from None


def build(out: Path) -> Path:
    """Build the site into out/html and return that folder; raise SystemExit on failure."""
    check(out)  # before anything else, so that a refusal is the first thing said
    # Imported here so that --help works without the docs extra.
    try:
        from sphinx.cmd.build import build_main
    except ImportError as error:
        raise SystemExit(f"python docs/build.py: Sphinx is not importable ({error}); install "
                         "the docs extra: pip install '.[docs]'") from None

    sys.path.insert(0, str(ROOT))
    from codegen.__main__ import main as codegen

    claim(out)
    src, html, doctrees = out / "src", out / "html", out / "doctrees"
    shutil.copytree(DOCS, src, ignore=shutil.ignore_patterns("build.py", "__pycache__"))
    status = codegen(["docs", "--format", "site", "--docs-out", str(src), "--quiet"])
    if status:
        raise SystemExit(f"python -m codegen docs --format site failed (exit status {status})")
    # -W --keep-going: report every warning, then fail. -d: Sphinx's cache stays out of the
    # folder that is published.
    status = build_main(["-W", "--keep-going", "-q", "-b", "html", "-d", str(doctrees),
                         str(src), str(html)])
    if status:
        raise SystemExit(f"sphinx-build failed (exit status {status}); the warnings above say why")
    return html


def main() -> None:
    parser = argparse.ArgumentParser(prog="python docs/build.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "docs",
                        help="build folder (default: build/docs)")
    args = parser.parse_args()
    started = time.monotonic()
    html = build(args.out.resolve())
    print(f"built {html} in {time.monotonic() - started:.0f} s; open {html / 'index.html'}")


if __name__ == "__main__":
    main()
