"""Build the docs site: python docs/build.py [--out DIR] (default build/docs).

One command does it all: the handwritten pages of docs/ and the pages codegen renders from
api.yaml (python -m codegen docs --format site) are assembled in DIR/src, then Sphinx builds
DIR/html with warnings as errors, so a broken cross-reference fails the build. Serve DIR/html
under /docs/: the reference pages' URLs are /docs/generated/<qualified name>.html.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def build(out: Path) -> Path:
    """Build the site into out/html and return that folder; raise SystemExit on failure."""
    # Imported here so that --help works without the docs extra.
    from sphinx.cmd.build import build_main

    sys.path.insert(0, str(ROOT))
    from codegen.__main__ import main as codegen

    src, html, doctrees = out / "src", out / "html", out / "doctrees"
    # Fresh folders each time: a page whose object left the schema must not linger.
    for folder in (src, html, doctrees):
        shutil.rmtree(folder, ignore_errors=True)
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
