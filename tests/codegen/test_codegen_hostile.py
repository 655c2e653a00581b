"""Hostile schema files and paths: the schema tool reports each as a located error (exit 3) or
a usage error (exit 2), never an internal error, and never writes outside --out."""
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codegen.load import SchemaError
from codegen.model import build_api
from codegen.render import Output, Renderer, write_outputs

from tests.codegen.test_codegen_schema import VALID, errors_of


def codegen(root, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=root,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def runtime_dir(root):
    return root / "runtime"


@pytest.mark.parametrize("old, new, message", [
    ("- name: tensorplay.accelerator\n", "- name: /tmp/evil\n",
     "module name '/tmp/evil' must be dotted Python identifiers: '/tmp/evil' is not a Python "
     "identifier"),
    ("- name: tensorplay.accelerator\n", "- name: tensorplay.class\n",
     "module name 'tensorplay.class' must be dotted Python identifiers: 'class' is a Python "
     "keyword"),
    ("  - name: device_count\n", "  - name: globals\n",
     "item of tensorplay.accelerator name 'globals' is a name the generated code uses itself"),
    ("  - name: device_count\n", "  - name: _hidden\n",
     "name '_hidden' starts with an underscore"),
    ("  - name: device_count\n", "  - name: \ufb01le\n",
     "name 'ﬁle' is not in the form Python reads it in (NFKC: 'file')"),
    ("    - name: device\n", "    - name: self\n",
     "parameter of 'tensorplay.accelerator.synchronize' name 'self' is a name the generated "
     "code uses itself"),
    ("      default: null\n", "      default: .nan\n", "must be a finite number, got nan"),
    ("      default: null\n", "      default: 2024-01-01\n",
     "must be null, a bool, an int, a float or a string; YAML read date"),
    ("      default: null\n", f"      default: {'7' * 5000}\n",
     "YAML value cannot be read: 'Exceeds the limit (4300 digits)"),
    ("      default: null\n", f"      default: {10 ** 30}\n", "must fit in 64 bits"),
])
def test_hostile_names_and_defaults_are_located_errors(runtime_dir, old, new, message):
    assert old in VALID
    messages = errors_of(VALID.replace(old, new, 1), runtime_dir)
    assert any(message in m and m.startswith("api.yaml:") for m in messages), messages


def test_hostile_files_are_usage_or_located_errors_never_internal(root, tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (5 << 20) + "\n")
    cases = [(["--schema", "/dev/zero", "validate"], 2, "not a regular file"),
             (["--schema", str(tmp_path), "validate"], 2, "cannot read it"),
             (["--schema", str(big), "validate"], 3, "big.yaml:1:1: the file is larger than"),
             (["--out", str(root / "api.yaml"), "check"], 2, "--out"),
             (["--out", str(root / "api.yaml"), "generate"], 2, "not a directory")]
    for args, status, message in cases:
        result = codegen(root, *args)
        assert result.returncode == status, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert len(result.stdout) < 1000  # no diff of everything against a file


def test_pipes_among_the_inputs_never_block(root, tmp_path):
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    for source in list((root / "runtime").glob("*.pxd")) + list((root / "runtime").glob("*.pyx")):
        (runtime / source.name).write_bytes(source.read_bytes())
    os.mkfifo(runtime / "pipe.pxd")
    os.mkfifo(tmp_path / "schema.yaml")
    for args, message in ((["--runtime", str(runtime), "validate"], "pipe.pxd' (not a regular"),
                          (["--schema", str(tmp_path / "schema.yaml"), "validate"],
                           "not a regular file")):
        result = codegen(root, *args, timeout=30)  # a blocking open would hang here
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    outputs = [Output("pkg/a.pyx", "a\n"), Output("pkg/b.pyx", "b\n")]

    def full_disk(source, target):
        raise OSError(28, "No space left on device", str(target))

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_outputs(outputs, tmp_path / "out")
    assert [p.name for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


def test_writes_never_leave_the_output_directory(tmp_path):
    out = tmp_path / "out"
    (out / "pkg").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "pkg" / "link").symlink_to(elsewhere)
    with pytest.raises(OSError, match="outside the output directory"):
        write_outputs([Output("pkg/link/a.pyx", "a\n")], out)
    assert list(elsewhere.iterdir()) == []


def test_build_api_never_raises_anything_but_schema_errors_on_these(runtime_dir):
    for text in ("modules: !!python/object:os.system [x]\n", "- 1\n- 2\n", "\x00", "{{{{",
                 "schema_version: 1\nmodules: [{name: 7}]\n"):
        with pytest.raises(SchemaError):
            build_api(text, runtime_dir)


HOSTILE_SCALARS = ["7" * 5000, ".nan", "-.inf", "2024-02-30", "2024-01-01", "1e400", "0x" + "f" * 40,
                   "/etc/passwd", "../up", "class", "self", "_private", "\ufb01le", "'a\\x00b'",
                   "[]", "{}", "null", "~", "!!binary aGVsbG8=", "&a [*a]", "'" + "x" * 2000 + "'",
                   "tensorplay.accelerator", "__unset__", "-1", "true", "'1.5'", "[1, [2, [3]]]",
                   # Texts the generated sources must quote right, or that they cannot hold.
                   "'ends in a \"'", "'\"\"\"'", "'a \\ b \\'", '"\\0"', '"\\ud800"',
                   '"\\e[1m"', '"a\\\"\\\""', "cdef", "match", "int", "_", "type"]


@pytest.mark.parametrize("schema", ["small", "api.yaml"])
def test_schema_mutations_give_schema_errors_never_anything_else(runtime_dir, root, schema):
    """Every scalar of a valid schema (a small one, and the project's own, with its shared
    parameters, bases, aliases and kinds) replaced, one at a time, by a hostile YAML value: the
    schema either still builds or is refused with located errors, never another exception."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    source = VALID if schema == "small" else (root / "api.yaml").read_text(encoding="utf-8")
    lines = source.splitlines(keepends=True)
    slots = [(i, line.index(": ") + 2) for i, line in enumerate(lines)
             if ": " in line and not line.rstrip().endswith(":")]

    @settings(max_examples=150 if schema == "small" else 120, derandomize=True, deadline=None,
              database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(slots), st.sampled_from(HOSTILE_SCALARS))
    def mutate(slot, value):
        index, column = slot
        text = "".join(lines[:index] + [lines[index][:column] + value + "\n"] + lines[index + 1:])
        try:
            api = build_api(text, runtime_dir)
        except SchemaError as error:
            assert all(str(d).startswith("api.yaml:") and len(str(d)) < 2000
                       for d in error.diagnostics)
            return
        # What still builds renders to stubs Python parses (the Cython side: the tests above).
        for output in Renderer(api, root / "templates").render_all():
            output.content.encode("utf-8")
            if output.path.endswith(".pyi"):
                ast.parse(output.content, output.path)

    mutate()


# -- hostile texts and names: refused where the output could not compile, escaped otherwise ----

# Texts a doc may hold, each written as a YAML double-quoted scalar (whose escapes spell them).
TRICKY_DOCS = {
    "a trailing quote": 'Ends in a "quote"',
    "two trailing quotes": 'Ends in two ""',
    "a triple quote": 'Holds """ and """" and """"" inside',
    "backslashes": "A \\ and \\\\, \\N{BULLET} and \\x00 as text, and a trailing \\",
    "a leading quote": '"Starts" with a quote',
    "separators": "Line\u2028and paragraph\u2029separators",
    "a tab": "A\ttab",
}


def yaml_string(text):
    """text as a YAML double-quoted scalar."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return '"' + escaped.replace("\u2028", "\\L").replace("\u2029", "\\P") + '"'


def docstring_value(text, indent):
    """What the docstring filter's literal must mean: text, its lines after the first indented
    for the block (blank lines stay empty), the closing quotes on a line of their own."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    lines = lines or [""]
    if len(lines) == 1:
        return lines[0]
    pad = " " * indent
    return "\n".join([lines[0]] + [pad + line if line else "" for line in lines[1:]]) \
        + "\n" + pad


def assert_literals_mean(text):
    from codegen.render import docstring, string_literal
    for indent in (0, 8):
        source = docstring(text, indent)
        source.encode("utf-8")  # no lone surrogate written raw
        assert "\x00" not in source and "\r" not in source
        assert ast.literal_eval(source) == docstring_value(text, indent)
    assert ast.literal_eval(string_literal(text)) == text
    assert "\n" not in string_literal(text)


@pytest.mark.parametrize("text", [
    *TRICKY_DOCS.values(), "", "\x00", "a\x00b", "\ud800", "x\udfff\"", "\r\n", "\x1b[31m",
    '"', '""', '"""', '\\"', "\\", "a\n\n\"\"\"\nb\\\n\"", "\u2028\u2029\x85\x0b\x0c"])
def test_every_text_renders_as_a_literal_that_means_it(text):
    assert_literals_mean(text)


def test_any_text_renders_as_a_literal_that_means_it():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, derandomize=True, deadline=None, database=None)
    @given(st.text(st.characters(codec=None), max_size=40)
           | st.text(st.sampled_from('"\\\n\x00\ud800 x\u2028'), max_size=12))
    def check(text):
        assert_literals_mean(text)

    check()


def tricky_schema():
    """VALID with a tricky doc on every kind of item, a deprecated alias whose message holds
    quotes and backslashes, and parameters, methods and properties named by the contextual words
    of Cython (cython_reserved.py) that the wrappers may use."""
    docs = list(TRICKY_DOCS.values())
    text = VALID
    for old, new in (
            ("  doc: Top.\n", f"  doc: {yaml_string(docs[0])}\n"),
            ("    doc: A device.\n", f"    doc: {yaml_string(docs[2])}\n"),
            ("{name: type, type: str, doc: the type.}",
             f"{{name: type, type: str, doc: {yaml_string(docs[3])}}}"),
            ("    doc: Wait.\n", f"    doc: {yaml_string(docs[4])}\n"),
            ("      doc: the device.\n", f"      doc: {yaml_string(docs[1])}\n"),
            ("doc: The index.}", f"doc: {yaml_string(docs[5])}}}"),
            ("    properties:\n",
             "    methods:\n"
             "    - {name: float, impl: str_text, returns: {type: str, doc: it.}, "
             f"doc: {yaml_string(docs[6])}}}\n"
             "    - {name: long, impl: repr_text, returns: {type: str, doc: it.}, doc: Long.}\n"
             "    properties:\n"
             "    - {name: double, impl: index_value, type: int, doc: '\"'}\n")):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    words = ("nogil", "gil", "extern", "inline", "readonly", "public", "api", "noexcept", "fused",
             "struct", "union", "enum", "cppclass", "new", "operator", "by", "property",
             "print", "exec", "complex", "type")
    functions = "".join(
        f"  - name: with_{word}\n    impl: statistics.caching_allocator_delete\n    params:\n"
        f"    - {{name: {word}, type: Any, doc: 'a \"{word}\" \\'}}\n    doc: Takes {word}.\n"
        for word in words)
    functions += ("  - name: sync\n    alias_of: synchronize\n"
                  "    deprecated: 'use \"synchronize()\" \\ instead; it says \"\"\"'\n")
    return text + functions


def test_tricky_but_legal_texts_and_names_render_to_sources_that_parse(runtime_dir, root):
    api = build_api(tricky_schema(), runtime_dir)
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    stubs = {path: ast.parse(text) for path, text in outputs.items() if path.endswith(".pyi")}
    top = stubs["tensorplay/__init__.pyi"]
    assert ast.get_docstring(top) == TRICKY_DOCS["a trailing quote"]
    device = next(n for n in top.body if isinstance(n, ast.ClassDef) and n.name == "device")
    assert ast.get_docstring(device).startswith(TRICKY_DOCS["a triple quote"])
    assert TRICKY_DOCS["backslashes"] in ast.get_docstring(device)
    members = {n.name: n for n in device.body if isinstance(n, ast.FunctionDef)}
    assert ast.get_docstring(members["double"]) == '"'
    assert ast.get_docstring(members["float"], clean=False).startswith(TRICKY_DOCS["a tab"])
    accelerator = stubs["tensorplay/accelerator.pyi"]
    functions = {n.name: n for n in accelerator.body if isinstance(n, ast.FunctionDef)}
    synchronize = ast.get_docstring(functions["synchronize"])
    assert synchronize.startswith(TRICKY_DOCS["a leading quote"])
    assert synchronize.endswith(TRICKY_DOCS["two trailing quotes"])
    # The wrappers: the deprecation message means what the schema says.
    wrapper = outputs["tensorplay/accelerator.pyx"]
    warning = next(line for line in wrapper.splitlines() if "warnings.warn(" in line)
    message = ast.literal_eval(warning.strip().removeprefix("warnings.warn(").rstrip(","))
    assert message == ('tensorplay.accelerator.sync() is deprecated; use "synchronize()" \\ '
                       'instead; it says """')


def test_tricky_but_legal_wrappers_translate_with_cython(runtime_dir, root, tmp_path):
    cython = pytest.importorskip("Cython.Build", reason="Cython is not installed")
    api = build_api(tricky_schema(), runtime_dir)
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    package = tmp_path / "tree" / "tensorplay"
    shutil.copytree(runtime_dir, package / "_runtime",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "*.cpp", "__pycache__"))
    (package / "__init__.pxd").write_text("")
    (package / "_runtime" / "__init__.pxd").write_text("")
    sources = []
    for path in ("tensorplay/__init__.pyx", "tensorplay/accelerator.pyx"):
        # Outside the package folder, so that Cython does not look for its other modules.
        source = tmp_path / "tree" / (path.replace("/", "_"))
        source.write_text(outputs[path], encoding="utf-8")
        sources.append(str(source))
    cython.cythonize(sources, include_path=[str(tmp_path / "tree")], quiet=True,
                     language_level=3, force=True, nthreads=0)
    for source in sources:
        assert Path(source).with_suffix(".c").exists() or Path(source).with_suffix(".cpp").exists()


# Each edit makes VALID illegal in one way; every one is reported, located, in one run.
ILLEGAL = [
    ("  doc: Top.\n", '  doc: "Top \\0 with a NUL"\n',
     "'doc' of module 'tensorplay' holds U+0000 (NUL) at character 5"),
    ("    doc: Number of devices.\n", '    doc: "A lone \\ud800 surrogate"\n',
     "this string holds U+D800 at character 8, a lone surrogate, which UTF-8 cannot encode"),
    ("    doc: A device.\n", '    doc: "Colour \\e[31m codes"\n',
     "'doc' of 'tensorplay.const' holds U+001B"),  # the class is renamed below
    ("{name: type, type: str, doc: the type.}", "{name: cdef, type: str, doc: the type.}",
     "name 'cdef' is a Cython reserved word (Cython/Compiler/Scanning.py)"),
    ("{name: index, type: int | None, default: ~, doc: the index.}",
     "{name: int, type: int | None, default: ~, doc: the index.}",
     "name 'int' starts a C type in Cython (Cython/Compiler/Parsing.py), so Cython would read "
     "the parameter as a C declaration"),
    ("    - name: device\n", "    - name: class\n", "name 'class' is a Python keyword"),
    ("  - name: synchronize\n", "  - name: match\n",
     "item of tensorplay.accelerator name 'match' is a Python soft keyword"),
    ("{name: index, impl: index_value,", "{name: include, impl: index_value,",
     "property of 'tensorplay.const' name 'include' is a Cython reserved word"),
    ("  - name: device\n", "  - name: const\n",
     "class of tensorplay name 'const' starts a C type in Cython"),
]


def test_illegal_texts_and_names_are_located_errors_all_at_once(runtime_dir, tmp_path, root):
    text = VALID
    for old, new, _ in ILLEGAL:
        assert old in text, old
        text = text.replace(old, new, 1)
    messages = errors_of(text, runtime_dir)
    for _, _, expected in ILLEGAL:
        assert any(expected in m and m.startswith("api.yaml:") for m in messages), \
            (expected, messages)
    # The command line: exit status 3, each error as FILE:LINE:COL, nothing written.
    schema = tmp_path / "hostile.yaml"
    schema.write_text(text, encoding="utf-8")
    for command in ("validate", "generate"):
        result = codegen(root, "--schema", str(schema), "--out", str(tmp_path / "out"), command)
        assert result.returncode == 3, result.stderr
        lines = result.stderr.splitlines()
        assert lines[-1] == f"{len(lines) - 1} error(s)" and len(lines) - 1 >= len(ILLEGAL)
        assert all(re.match(r"hostile\.yaml:\d+:\d+: ", line) for line in lines[:-1]), lines
        assert "internal error" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("word", ["_", "case", "match"])
def test_soft_keywords_are_refused_but_type_is_allowed(runtime_dir, word):
    messages = errors_of(VALID.replace("    - name: device\n", f"    - name: {word}\n", 1),
                         runtime_dir)
    assert any(f"name '{word}' is a Python soft keyword" in m for m in messages), messages
    build_api(VALID.replace("    - name: device\n", "    - name: type\n", 1), runtime_dir)


def test_the_reserved_words_are_those_of_the_installed_cython():
    scanning = pytest.importorskip("Cython.Compiler.Scanning", reason="Cython is not installed")
    from codegen import cython_reserved
    python = set(scanning.py_reserved_words)
    assert set(scanning.pyx_reserved_words) - python == cython_reserved.RESERVED
    # Every word is refused, or allowed for a reason the module gives; none is both.
    groups = (cython_reserved.RESERVED, cython_reserved.EXPRESSIONS,
              cython_reserved.DECLARATIONS, cython_reserved.CONTEXTUAL)
    assert sum(len(group) for group in groups) == len(set().union(*groups))
