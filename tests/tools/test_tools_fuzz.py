"""Hostile and careless inputs to the tools, drawn by hypothesis beside the fixed cases:

- codegen: schemas whose docs and names are drawn from hostile texts (quotes, backslashes,
  triple quotes, NUL, lone surrogates, control characters) and words (Python's keywords and
  soft keywords, Cython's reserved and contextual words). Each is refused with located errors
  (file:line:col) exactly when its output could not parse or compile; otherwise the stubs
  parse with the texts as written, and the wrappers translate with Cython (one run at the end).
- bench/harness/render_report.py: results files with a field made NaN, infinite, negative, of the
  wrong type, truncated or not an object, and names holding <script>, README markers,
  backticks and pipes. A bad file is refused naming the file, the area and the field, with
  nothing written; a good one renders pages whose HTML holds no tag or comment of the data and
  a README with one marker each.
- docs/build.py: an --out folder holding a user's files is refused untouched; the build's own
  folder has only its src/, html/ and doctrees/ replaced.

Companion of tests/package/test_api_fuzz.py, which fuzzes the generated API's arguments.
"""
import ast
import copy
import importlib.util
import json
import keyword
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from codegen import cython_reserved
from codegen.load import SchemaError
from codegen.model import build_api
from codegen.render import Renderer

from tests.codegen.test_codegen_schema import VALID
from tests.tools.test_performance_report import results as report_results

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "bench" / "harness"
EXAMPLES = 120


def hypothesis():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    return given, settings(max_examples=EXAMPLES, derandomize=True, deadline=None,
                           database=None, suppress_health_check=list(HealthCheck)), st


# -- codegen: hostile docs and names -----------------------------------------------------------


def yaml_scalar(text):
    """text as a YAML double-quoted scalar that means it exactly, whatever it holds (a lone
    surrogate is spelled with its \\u escape, as a hostile schema would)."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif " " <= char <= "~":
            out.append(char)
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def refused_text(text):
    """Whether codegen must refuse text as a doc: a control character (but tab and newline)
    once the doc is stripped, or a lone surrogate anywhere."""
    return any("\ud800" <= c <= "\udfff" for c in text) or any(
        (c < " " or "\x7f" <= c <= "\x9f") and c not in "\t\n" for c in text.strip())


def refused_name(name):
    """Whether codegen must refuse name as a parameter (model.identifier_problem)."""
    return (not name.isidentifier() or keyword.iskeyword(name) or name == "self"
            or name in ("_", "case", "match", "warnings")
            or name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
            or name in cython_reserved.RESERVED | cython_reserved.EXPRESSIONS
            | cython_reserved.DECLARATIONS)


HOSTILE_PIECES = ['"', '""', '"""', "\\", "\\\\", "'", "`", "\x00", "\ud800", "\udfff", "\x1b",
                  "\r", "\n", "\t", "\u2028", "\x85", "{{ x }}", "%s", "\\N{BULLET}", "\\x00",
                  " ", "é", "\U0001f600", "*/", "#", "<script>", "|"]
WORDS = sorted(set(keyword.kwlist) | {"_", "case", "match", "type", "self"}
               | cython_reserved.RESERVED | cython_reserved.EXPRESSIONS
               | cython_reserved.DECLARATIONS | cython_reserved.CONTEXTUAL)
# Where a drawn doc goes: the text VALID has there.
DOC_SLOTS = {"module": "Top.", "function": "Wait.", "parameter": "the device.",
             "property": "The index."}


def docstring_of(tree, slot):
    """The docstring a slot's doc lands in, from the parsed stubs."""
    top, accelerator = tree["tensorplay/__init__.pyi"], tree["tensorplay/accelerator.pyi"]
    if slot == "module":
        return ast.get_docstring(top, clean=False)
    if slot == "property":
        device = next(n for n in top.body if isinstance(n, ast.ClassDef) and n.name == "device")
        return ast.get_docstring(next(n for n in device.body if isinstance(n, ast.FunctionDef)
                                      and n.name == "index"), clean=False)
    function = next(n for n in accelerator.body
                    if isinstance(n, ast.FunctionDef) and n.name == "synchronize")
    return ast.get_docstring(function, clean=False)


def render_stubs(api):
    outputs = {o.path: o.content for o in Renderer(api, ROOT / "templates").render_all()}
    for text in outputs.values():
        text.encode("utf-8")
    return outputs, {path: ast.parse(text, path) for path, text in outputs.items()
                     if path.endswith(".pyi")}


def assert_located(error):
    for diagnostic in error.diagnostics:
        assert re.match(r"api\.yaml:\d+:\d+: ", str(diagnostic)), diagnostic


def translate(sources, tmp_path):
    """Cythonize the wrappers (to C only) against the runtime's declarations."""
    cython = pytest.importorskip("Cython.Build", reason="Cython is not installed")
    tree = tmp_path / "tree"
    package = tree / "tensorplay"
    shutil.copytree(ROOT / "runtime", package / "_runtime",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "*.cpp", "__pycache__"))
    (package / "__init__.pxd").write_text("")
    (package / "_runtime" / "__init__.pxd").write_text("")
    paths = []
    for number, source in enumerate(sources):
        path = tree / f"wrapper_{number}.pyx"
        path.write_text(source, encoding="utf-8")
        paths.append(str(path))
    cython.cythonize(paths, include_path=[str(tree)], quiet=True, language_level=3, force=True)
    assert all(Path(p).with_suffix(".c").exists() for p in paths)


def test_hostile_docs_are_refused_exactly_when_no_source_could_hold_them(tmp_path):
    given, settings, st = hypothesis()
    runtime = ROOT / "runtime"
    accepted, refused = [], []

    @settings
    @given(st.sampled_from(sorted(DOC_SLOTS)),
           st.lists(st.sampled_from(HOSTILE_PIECES) | st.text(max_size=3), max_size=8)
           .map("".join).filter(str.strip))
    def check(slot, text):
        assert VALID.count(f"doc: {DOC_SLOTS[slot]}") == 1
        schema = VALID.replace(f"doc: {DOC_SLOTS[slot]}", f"doc: {yaml_scalar(text)}")
        try:
            api = build_api(schema, runtime)
        except SchemaError as error:
            assert refused_text(text), (text, error.diagnostics)
            assert_located(error)
            refused.append(text)
            return
        assert not refused_text(text), text
        outputs, stubs = render_stubs(api)
        # The docstring holds the doc as written (stripped, as the schema's texts are); the
        # module's is the doc alone, to the character.
        docstring = docstring_of(stubs, slot)
        if slot == "module":
            assert docstring.rstrip("\n") == text.strip()
        assert "".join(text.split()) in "".join(docstring.split())  # an Args entry is rewrapped
        if len(accepted) < 6:
            accepted.append(outputs["tensorplay/accelerator.pyx"] if slot != "module"
                            else outputs["tensorplay/__init__.pyx"])

    check()
    assert accepted and refused  # both kinds were drawn
    translate(accepted, tmp_path)


def test_hostile_names_are_refused_exactly_when_the_wrapper_could_not_compile(tmp_path):
    given, settings, st = hypothesis()
    runtime = ROOT / "runtime"
    accepted, refused = set(), set()

    @settings
    @given(st.sampled_from(WORDS) | st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True))
    def check(name):
        schema = VALID.replace("    - name: device\n", f"    - name: {yaml_scalar(name)}\n", 1)
        try:
            api = build_api(schema, runtime)
        except SchemaError as error:
            assert refused_name(name), (name, error.diagnostics)
            assert_located(error)
            refused.add(name)
            return
        assert not refused_name(name), name
        render_stubs(api)
        accepted.add(name)

    check()
    assert len(accepted) > 10 and len(refused) > 10, (accepted, refused)
    # Every name accepted, as a parameter of one function each, translates in one wrapper.
    functions = "".join(
        f"  - name: takes_{number}\n    impl: statistics.caching_allocator_delete\n    params:\n"
        f"    - {{name: {yaml_scalar(name)}, type: Any, doc: it.}}\n    doc: Takes it.\n"
        for number, name in enumerate(sorted(accepted)))
    api = build_api(VALID + functions, runtime)
    outputs, _ = render_stubs(api)
    translate([outputs["tensorplay/accelerator.pyx"]], tmp_path)


def test_hostile_schemas_exit_3_with_every_error_located(tmp_path):
    schema = tmp_path / "api.yaml"
    schema.write_text(VALID.replace("    doc: Wait.\n", '    doc: "ends \\ud800"\n')
                      .replace("    - name: device\n", "    - name: cdef\n")
                      .replace("  doc: Top.\n", '  doc: "NUL \\0 here"\n'), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "codegen", "--schema", str(schema), "generate",
                          "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    lines = run.stderr.splitlines()
    assert lines[-1] == "3 error(s)" and all(re.match(r"api\.yaml:\d+:\d+: ", line)
                                            for line in lines[:-1]), lines
    assert not (tmp_path / "out").exists()


# -- bench/harness/render_report.py: hostile results files -------------------------------------


@pytest.fixture(scope="module")
def renderer():
    sys.path.insert(0, str(HARNESS))  # the renderer imports its siblings baselines.py, report.py
    try:
        spec = importlib.util.spec_from_file_location("render_report_fuzzed",
                                                      HARNESS / "render_report.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(HARNESS))


def without_sweeps(data):
    """The test report's results without its plots (matplotlib is slow per example)."""
    data = copy.deepcopy(data)
    for entry in data["areas"].values():
        for record in entry.get("records") or []:
            record.pop("sweep", None)
            record.pop("x", None)
    return data


README = "# x\n\n<!-- headline:start -->\nold\n<!-- headline:end -->\nrest\n"
PAGE = ("<!-- Written by python bench/harness/render_report.py from bench/harness/report.py's "
        "results: do not edit. -->\n\nold page\n")


def snapshot(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def workspace(parent, data=None, raw=None):
    """A folder holding a results file, a docs folder with a page the renderer wrote and a
    README: (results path, docs folder, README path)."""
    folder = Path(tempfile.mkdtemp(dir=parent))
    (folder / "docs").mkdir()
    (folder / "docs" / "performance.md").write_text(PAGE)
    (folder / "README.md").write_text(README)
    path = folder / "results.json"
    path.write_text(raw if raw is not None else json.dumps(data), encoding="utf-8",
                    errors="surrogatepass")
    return path, folder / "docs", folder / "README.md"


def html_of(markdown):
    """The page as a CommonMark renderer with raw HTML on (as MyST and GitHub) makes it."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is not installed")
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def assert_shown_as_text(markdown):
    """No tag or comment of the data survives into the HTML (the page's first line and the
    README's markers are the renderer's own); every table row keeps its cells."""
    ours = {PAGE.split("\n", 1)[0], "<!-- headline:start -->", "<!-- headline:end -->"}
    html = html_of("\n".join(line for line in markdown.split("\n") if line not in ours))
    assert "<script" not in html and "<b>" not in html and "<!--" not in html
    for table in re.findall(r"<table>.*?</table>", html, flags=re.S):
        rows = re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)
        widths = {len(re.findall(r"<t[hd][ >]", row)) for row in rows}
        assert len(widths) == 1, table


HOSTILE_TEXTS = ["<script>alert(1)</script>", "<!-- headline:end -->", "<!-- headline:start -->",
                 "`code`", "``` fence", "a | b", "*bold* _it_", "$x$", "~~s~~", "&lt;b&gt;",
                 "[link](http://x)", "line\nbreak", "# heading", "- item", "1. item", ":::{note}",
                 "\x00\x1b[31m", "<b>", "-->", "\\", ""]
BAD_VALUES = [math.nan, math.inf, -math.inf, -1, -0.5, 10 ** 400, "1", True, [], {}]
NUMERIC = ("tensorplay", "tensorplay_spread", "peer", "peer_spread")
TEXTS = ("case", "unit", "peer_name", "area", "series")


def test_hostile_results_are_refused_or_shown_as_text(renderer, tmp_path):
    given, settings, st = hypothesis()
    base = without_sweeps(report_results())
    places = [(area, index) for area, entry in base["areas"].items()
              for index, _ in enumerate(entry.get("records") or [])]
    outcomes = []

    @settings
    @given(st.sampled_from(places), st.sampled_from(NUMERIC + TEXTS + ("note", "gpu", "area name",
                                                                      "reason", "error")),
           st.sampled_from(BAD_VALUES) | st.sampled_from(HOSTILE_TEXTS))
    def check(place, field, value):
        data = copy.deepcopy(base)
        area, index = place
        record = data["areas"][area]["records"][index]
        if field in NUMERIC + TEXTS:
            record[field] = value
        elif field == "note":
            data["areas"][area]["notes"] = [value]
        elif field == "gpu":
            data["machine"]["gpu"] = value
        elif field == "area name":
            data["areas"][value if isinstance(value, str) else "x"] = data["areas"].pop(area)
        else:
            data["areas"]["staging"][field] = value
        path, docs, readme = workspace(tmp_path, data)
        before = snapshot(path.parent)
        numeric = field in NUMERIC
        bad = (numeric and not (isinstance(value, (int, float)) and not isinstance(value, bool)
                                and 0 <= value <= 1e300)) \
            or (not numeric and not isinstance(value, str)) \
            or (field == "area name" and isinstance(value, str) and not value.strip()) \
            or (field == "area" and not value.strip()) \
            or (field == "peer_name" and not isinstance(value, str))
        if field == "area name" and not isinstance(value, str):
            bad = False  # the key stays a string ("x"); a JSON key is always one
        try:
            renderer.render(path, docs, readme)
        except renderer.Invalid as error:
            assert bad, (field, value, str(error))
            message = str(error)
            assert str(path) in message and "nothing was written" in message
            if field in NUMERIC + TEXTS:
                assert f"area {area!r}, record {index}" in message and f"'{field}'" in message
            assert snapshot(path.parent) == before  # nothing touched
            outcomes.append("refused")
            return
        assert not bad, (field, value)
        outcomes.append("rendered")
        page = (docs / "performance.md").read_text(encoding="utf-8")
        assert_shown_as_text(page)
        text = readme.read_text(encoding="utf-8")
        assert text.count("<!-- headline:start -->") == 1
        assert text.count("<!-- headline:end -->") == 1
        assert_shown_as_text(text)
        assert sorted(p.name for p in path.parent.rglob("*.tmp")) == []

    check()
    assert outcomes.count("refused") > 10 and outcomes.count("rendered") > 10, outcomes


@pytest.mark.parametrize("name, raw, expected", [
    ("NaN", None, "area 'replay', record 0 ('replay(), 1-kernel graph'), 'tensorplay': is NaN"),
    ("infinity", None, "'peer': is infinite"),
    ("negative", None, "'tensorplay_spread': is -2.0; it must be at least 0"),
    ("wrong type", None, "'unit': must be a string, got a list"),
    ("truncated", "cut", "not valid JSON: "),
    ("a list", "[1, 2, 3]",
     "must be a JSON object (the file bench/harness/report.py writes), got a list"),
    ("not UTF-8", b"\xff\xfe{}", "not UTF-8 text"),
    ("deep", "[" * 100_000, "cannot be read as JSON"),
    ("surrogate", None, "holds U+D800, a lone surrogate"),
])
def test_bad_results_files_exit_1_naming_the_problem_and_write_nothing(tmp_path, name, raw,
                                                                       expected):
    data = report_results()
    record = data["areas"]["replay"]["records"][0]
    mutate = {"NaN": ("tensorplay", math.nan), "infinity": ("peer", math.inf),
              "negative": ("tensorplay_spread", -2.0), "wrong type": ("unit", ["ns"]),
              "surrogate": ("case", "\ud800")}
    if name in mutate:
        record[mutate[name][0]] = mutate[name][1]
    text = json.dumps(data)
    if raw == "cut":
        raw = text[:len(text) // 2]
    path, docs, readme = workspace(tmp_path, data, raw if isinstance(raw, str) else None)
    if isinstance(raw, bytes):
        path.write_bytes(raw)
    images = docs / "performance"
    images.mkdir()
    (images / "replay-cost-against-graph-size.png").write_bytes(b"the committed plot")
    before = snapshot(path.parent)
    run = subprocess.run([sys.executable, str(HARNESS / "render_report.py"), str(path), "--docs",
                          str(docs), "--readme", str(readme)], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and str(path) in run.stderr
    assert expected in run.stderr, run.stderr
    assert snapshot(path.parent) == before


def test_a_readme_with_duplicate_markers_is_refused_and_untouched(renderer, tmp_path):
    path, docs, readme = workspace(tmp_path, without_sweeps(report_results()))
    readme.write_text(README + "<!-- headline:end -->\n")
    before = snapshot(path.parent)
    with pytest.raises(renderer.Invalid, match="holds 1 <!-- headline:start --> and 2 "
                                               "<!-- headline:end --> markers"):
        renderer.render(path, docs, readme)
    assert snapshot(path.parent) == before


def test_a_gpu_named_like_a_marker_leaves_a_readme_later_runs_accept(renderer, tmp_path):
    data = without_sweeps(report_results())
    data["machine"]["gpu"] = "H200 <!-- headline:end --> <!-- headline:start -->"
    path, docs, readme = workspace(tmp_path, data)
    renderer.render(path, docs, readme)
    renderer.render(path, docs, readme)  # the README it wrote is accepted again
    text = readme.read_text()
    assert text.count("<!-- headline:end -->") == 1 and "H200 \\<!-- headline:end --\\>" in text


def test_a_page_the_renderer_did_not_write_is_not_replaced(renderer, tmp_path):
    path, docs, readme = workspace(tmp_path, without_sweeps(report_results()))
    (docs / "performance.md").write_text("# My own notes\n")
    with pytest.raises(renderer.Invalid, match="was not written by this renderer"):
        renderer.render(path, docs, None)
    assert (docs / "performance.md").read_text() == "# My own notes\n"


def test_a_failed_write_leaves_the_old_files_and_no_temporary_file(renderer, tmp_path,
                                                                   monkeypatch):
    path, docs, readme = workspace(tmp_path, without_sweeps(report_results()))
    before = snapshot(path.parent)

    def full_disk(source, target):
        raise OSError(28, "No space left on device", str(target))

    monkeypatch.setattr(renderer.os, "replace", full_disk)
    with pytest.raises(renderer.Invalid, match="No space left on device"):
        renderer.render(path, docs, readme)
    assert snapshot(path.parent) == before


# -- docs/build.py: the --out folder -----------------------------------------------------------


@pytest.fixture(scope="module")
def docs_build():
    spec = importlib.util.spec_from_file_location("docs_build", ROOT / "docs" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("user_file", ["src/main.py", "html/index.html", "doctrees/x", "notes.txt",
                                       ".hidden"])
def test_a_folder_holding_a_users_file_is_refused_untouched(tmp_path, user_file):
    out = tmp_path / "site"
    (out / user_file).parent.mkdir(parents=True, exist_ok=True)
    (out / user_file).write_text("the user's own")
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "build.py"), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert f"--out {out} already holds files that docs/build.py did not write" in run.stderr
    assert "Name a new or empty folder" in run.stderr
    assert (out / user_file).read_text() == "the user's own"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) \
        == [user_file]


def test_the_builds_own_folder_has_only_its_folders_replaced(docs_build, tmp_path):
    out = tmp_path / "site"
    docs_build.claim(out)  # a new folder: the build's, with its marker
    assert (out / docs_build.MARKER).read_text() == docs_build.MARKER_TEXT
    for name in docs_build.OWNED:
        (out / name / "deep").mkdir(parents=True)
        (out / name / "deep" / "page.html").write_text("old")
    (out / "screenshots").mkdir()
    (out / "screenshots" / "page.png").write_text("a screenshot")
    docs_build.claim(out)
    assert not any((out / name).exists() for name in docs_build.OWNED)
    assert (out / "screenshots" / "page.png").read_text() == "a screenshot"
    empty = tmp_path / "empty"
    empty.mkdir()
    docs_build.claim(empty)  # an empty folder is taken too
    assert (empty / docs_build.MARKER).is_file()


@pytest.mark.parametrize("case", ["a file", "a link as src", "a file as html", "inside docs",
                                  "a forged marker"])
def test_what_the_build_cannot_own_is_refused_before_any_change(docs_build, tmp_path, case):
    out = tmp_path / "site"
    out.mkdir()
    (out / docs_build.MARKER).write_text(docs_build.MARKER_TEXT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    if case == "a file":
        out = tmp_path / "file"
        out.write_text("a file")
    elif case == "a link as src":
        (out / "src").symlink_to(elsewhere)
    elif case == "a file as html":
        (out / "html").write_text("a file")
    elif case == "inside docs":
        out = ROOT / "docs" / "no-such-build-folder"
    else:
        (out / docs_build.MARKER).write_text("not the build's text")
        (out / "src").mkdir()
        (out / "src" / "main.py").write_text("print(1)")
    with pytest.raises(SystemExit) as refused:
        docs_build.claim(out)
    assert str(out) in str(refused.value.code)
    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert not (ROOT / "docs" / "no-such-build-folder").exists()
    if case == "a forged marker":
        assert (out / "src" / "main.py").read_text() == "print(1)"
