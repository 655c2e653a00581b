"""Render api.yaml through templates/ into generated/: the Cython wrappers, the stubs and the
reference pages. The options --schema, --out, --templates, --runtime, --quiet and --debug may
stand before or after the command.

Exit status:
  0    success
  1    check found generated/ stale (drift); the message names the fixing command
  2    usage error: a bad command line, or an option naming a path that cannot be used
  3    schema or template errors, each printed with its file and line (FILE:LINE:COL:)
  4    internal error: a bug in codegen (--debug or CODEGEN_DEBUG=1 prints the traceback)
  130  interrupted (Ctrl-C)
  141  the reader of the output went away (as in `python -m codegen list | head -1`)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import jinja2

from .load import SchemaError, read_text, shown
from .model import build_api
from .runtime_index import RuntimeLayoutError
from .render import FIX_COMMAND, Output, Renderer, drift, write_outputs
from .site import SiteRenderer

ROOT = Path(__file__).resolve().parent.parent

OK, DRIFT, USAGE, INVALID, INTERNAL = 0, 1, 2, 3, 4
# What a shell reports for a command ended by a signal (128 + the signal number): a closed
# pipe (SIGPIPE) is not an error of ours but not a success either, as the output was cut short.
BROKEN_PIPE = 128 + 13
INTERRUPTED = 128 + 2
REPORT_TO = "report it with the command you ran and the traceback that --debug prints"


class UsageError(Exception):
    """An option names a path that cannot be used; the message names option and path."""


def add_global_options(parser: argparse.ArgumentParser, after_command: bool) -> None:
    """The options accepted on both sides of the command.

    After the command they default to SUPPRESS, so that leaving them out there keeps the
    value given (or defaulted) before the command instead of overwriting it.
    """
    def default(value: object) -> object:
        return argparse.SUPPRESS if after_command else value

    parser.add_argument("--schema", type=Path, default=default(ROOT / "api.yaml"),
                        help="the API schema (default: api.yaml)")
    parser.add_argument("--out", type=Path, default=default(ROOT / "generated"),
                        help="output directory (default: generated/)")
    parser.add_argument("--templates", type=Path, default=default(ROOT / "templates"),
                        help="the Jinja2 templates (default: templates/)")
    parser.add_argument("--runtime", type=Path, default=default(ROOT / "runtime"),
                        help="runtime sources whose .pxd declarations impl: entries name "
                             "(default: runtime/); the Python layer impl: may name is read "
                             "from python/ beside it")
    parser.add_argument("--quiet", action="store_true", default=default(False),
                        help="print only errors and requested output")
    parser.add_argument("--debug", action="store_true", default=default(False),
                        help="print the traceback of an internal error")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m codegen", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_global_options(parser, after_command=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        add_global_options(sub, after_command=True)
        return sub

    command("validate", "check the schema only")
    command("generate", "write generated/ (the default)")
    command("check", "fail with a diff when generated/ is stale")
    command("list", "print the paths generate writes")
    docs = command("docs", "write the reference pages, the docs site's pages, or the schema "
                           "as JSON")
    docs.add_argument("--format", choices=("md", "site", "json"), default="md",
                      help="md: the reference pages; site: the MyST pages of the docs site "
                           "(docs/build.py builds it); json: the normalised schema")
    docs.add_argument("--docs-out", type=Path, default=None,
                      help="directory for the pages (default: <out>/reference; required with "
                           "--format site)")
    return parser


def require_directory(option: str, path: Path, holding: str) -> None:
    if not path.is_dir():
        raise UsageError(f"{option} {shown(str(path))}: no such directory")
    if not any(path.glob(holding)):
        raise UsageError(f"{option} {shown(str(path))}: the directory holds no {holding} files")


def run(args: argparse.Namespace) -> int:
    """Carry out the command; errors it can name are raised as UsageError or SchemaError."""
    command = args.command or "generate"

    def say(message: str) -> None:
        if not args.quiet:
            print(message)

    require_directory("--runtime", args.runtime, "**/*.pxd")
    try:
        text = read_text(args.schema)
    except OSError as error:
        raise UsageError(f"--schema {shown(str(args.schema))}: cannot read it "
                         f"({error.strerror or error})") from None
    try:
        api = build_api(text, args.runtime, args.schema.name)
    except OSError as error:  # a runtime source that is not a readable regular file
        raise UsageError(f"--runtime {shown(str(args.runtime))}: cannot read "
                         f"{shown(str(error.filename))} ({error.strerror or error})") from None
    except RuntimeLayoutError as error:  # two modules share a name
        raise UsageError(f"--runtime {shown(str(args.runtime))}: {error}") from None

    if command == "validate":
        say(f"{args.schema.name}: valid (schema sha256:{api.schema_hash})")
        return OK
    if command == "docs" and args.format == "json":
        json.dump(api.normalised | {"schema_hash": api.schema_hash}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return OK
    require_directory("--templates", args.templates, "*.j2")
    for option, path in (("--out", args.out), ("--docs-out", getattr(args, "docs_out", None))):
        if path is not None and path.exists() and not path.is_dir():
            raise UsageError(f"{option} {shown(str(path))}: not a directory; name the folder "
                             "the generated files go to")
    site = command == "docs" and args.format == "site"
    if site and args.docs_out is None:
        raise UsageError("docs --format site: name the folder the pages go to with --docs-out")
    renderer = Renderer(api, args.templates)
    try:
        if site:
            outputs = SiteRenderer(renderer, args.schema, args.runtime).render()
        elif command == "docs":
            outputs = renderer.render_references()
        else:
            outputs = renderer.render_all()
    except UnicodeDecodeError:  # Jinja reads templates as UTF-8
        raise not_utf8(args.templates, ("**/*.j2",)) from None
    if command == "docs":
        out = args.docs_out or args.out / "reference"
        outputs = [type(o)(o.path.removeprefix("reference/"), o.content) for o in outputs]
        for path in write(outputs, out, "--docs-out", prune=False):
            say(f"wrote {out / path}")
        return OK
    if command == "list":
        for output in outputs:
            print((args.out / output.path).as_posix())
        return OK
    if command == "check":
        difference = drift(outputs, args.out)
        if difference:
            sys.stdout.write(difference)
            print(f"\n{args.out} is stale: it differs from what {args.schema.name} and "
                  f"templates/ produce. Fix it with: {FIX_COMMAND}", file=sys.stderr)
            return DRIFT
        say(f"{args.out} is up to date (schema sha256:{api.schema_hash})")
        return OK
    touched = write(outputs, args.out, "--out")
    for path in touched:
        say(f"wrote {args.out / path}")
    say(f"{len(touched)} file(s) changed, {len(outputs) - len(touched)} unchanged")
    return OK


def not_utf8(directory: Path, patterns: tuple[str, ...]) -> SchemaError:
    """The located error for the first source file under directory that is not UTF-8."""
    for path in sorted(p for pattern in patterns for p in directory.glob(pattern)):
        try:
            read_text(path, path.relative_to(directory.parent).as_posix())
        except SchemaError as error:
            return error
    raise AssertionError(f"a file under {directory} failed to decode, then decoded")


def write(outputs: list[Output], out: Path, option: str, prune: bool = True) -> list[str]:
    try:
        return write_outputs(outputs, out, prune=prune)
    except OSError as error:
        where = error.filename or out
        raise UsageError(f"{option} {shown(str(out))}: cannot write {shown(str(where))} "
                         f"({error.strerror or error})") from None


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)  # a usage error exits here with status 2 (USAGE)
    try:
        return run(args)
    except UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return USAGE
    except jinja2.TemplateNotFound as error:
        print(f"{parser.prog}: error: --templates {shown(str(args.templates))}: no template "
              f"{shown(error.name)}", file=sys.stderr)
        return USAGE
    except SchemaError as error:
        for diagnostic in error.diagnostics:
            print(diagnostic, file=sys.stderr)
        print(f"{len(error.diagnostics)} error(s)", file=sys.stderr)
        return INVALID
    except jinja2.TemplateSyntaxError as error:
        name = error.filename or error.name or "template"
        print(f"{name}:{error.lineno}: template error: {shown(error.message)}",
              file=sys.stderr)
        return INVALID
    except jinja2.TemplateError as error:
        # Raised while rendering (StrictUndefined: a name the template uses is missing). Jinja
        # puts the template's own file and line into the traceback; report the innermost.
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if f.filename.endswith(".j2")]
        where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
        print(f"{where}template error: {shown(str(error))}", file=sys.stderr)
        return INVALID
    except BrokenPipeError:
        raise
    except Exception as error:  # anything else is a bug in codegen, reported in one line
        if args.debug or os.environ.get("CODEGEN_DEBUG"):
            traceback.print_exc()
        print(f"{parser.prog}: internal error: {type(error).__name__}: {shown(str(error))}; "
              f"this is a bug in codegen, please {REPORT_TO}", file=sys.stderr)
        return INTERNAL


def entry_point() -> int:
    """main(), ending quietly when the reader of stdout closes the pipe early.

    This is the recipe of Python's signal documentation ("Note on SIGPIPE"): point stdout at
    devnull so that the flush at interpreter exit does not raise again.
    """
    try:
        status = main()
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except KeyboardInterrupt:
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(entry_point())
