"""``python -m codegen {validate,generate,check,docs,list}``.

Exit status: 0 success, 1 drift found by ``check``, 2 schema errors.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .load import SchemaError
from .model import load_api
from .render import FIX_COMMAND, Renderer, drift, write_outputs

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__)
    parser.add_argument("--schema", type=Path, default=ROOT / "api.yaml")
    parser.add_argument("--out", type=Path, default=ROOT / "generated",
                        help="output directory (default: generated/)")
    parser.add_argument("--templates", type=Path, default=ROOT / "templates")
    parser.add_argument("--runtime", type=Path, default=ROOT / "runtime",
                        help="runtime sources whose .pxd declarations impl: entries name")
    parser.add_argument("--quiet", action="store_true")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("validate", help="check the schema only")
    commands.add_parser("generate", help="write generated/ (the default)")
    commands.add_parser("check", help="fail with a diff when generated/ is stale")
    commands.add_parser("list", help="print the paths generate writes")
    docs = commands.add_parser("docs", help="write the reference pages, or the schema as JSON")
    docs.add_argument("--format", choices=("md", "json"), default="md")
    docs.add_argument("--docs-out", type=Path, default=None,
                      help="directory for the Markdown pages (default: <out>/reference)")
    args = parser.parse_args(argv)
    command = args.command or "generate"

    def say(message: str) -> None:
        if not args.quiet:
            print(message)

    try:
        api = load_api(args.schema, args.runtime)
    except SchemaError as error:
        for diagnostic in error.diagnostics:
            print(diagnostic, file=sys.stderr)
        print(f"{len(error.diagnostics)} schema error(s)", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"cannot read the schema: {error}", file=sys.stderr)
        return 2

    if command == "validate":
        say(f"{args.schema.name}: valid (schema sha256:{api.schema_hash})")
        return 0
    renderer = Renderer(api, args.templates)
    if command == "docs" and args.format == "json":
        json.dump(api.normalised | {"schema_hash": api.schema_hash}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    if command == "docs":
        out = args.docs_out or args.out / "reference"
        outputs = [type(o)(o.path.removeprefix("reference/"), o.content)
                   for o in renderer.render_references()]
        for path in write_outputs(outputs, out, prune=False):
            say(f"wrote {out / path}")
        return 0
    outputs = renderer.render_all()
    if command == "list":
        for output in outputs:
            print((args.out / output.path).as_posix())
        return 0
    if command == "check":
        difference = drift(outputs, args.out)
        if difference:
            sys.stdout.write(difference)
            print(f"\n{args.out} is stale: it differs from what {args.schema.name} and "
                  f"templates/ produce. Fix it with: {FIX_COMMAND}", file=sys.stderr)
            return 1
        say(f"{args.out} is up to date (schema sha256:{api.schema_hash})")
        return 0
    touched = write_outputs(outputs, args.out)
    for path in touched:
        say(f"wrote {args.out / path}")
    say(f"{len(touched)} file(s) changed, {len(outputs) - len(touched)} unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
