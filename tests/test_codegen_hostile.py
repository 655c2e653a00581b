"""Hostile schema files and paths: the schema tool reports each as a located error (exit 3) or
a usage error (exit 2), never an internal error, and never writes outside --out."""
import os
import subprocess
import sys

import pytest

from codegen.load import SchemaError
from codegen.model import build_api
from codegen.render import Output, write_outputs

from test_codegen_schema import VALID, errors_of


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
                   "tensorplay.accelerator", "__unset__", "-1", "true", "'1.5'", "[1, [2, [3]]]"]


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
            build_api(text, runtime_dir)
        except SchemaError as error:
            assert all(str(d).startswith("api.yaml:") and len(str(d)) < 2000
                       for d in error.diagnostics)

    mutate()
