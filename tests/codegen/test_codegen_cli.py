"""The codegen command line: hostile input gets one clear message, never a traceback or a
runaway; exit statuses tell usage errors, schema errors, drift and bugs apart; global options
stand on either side of the command; check notices line endings and file modes."""
import os
import resource
import shutil
import subprocess
import sys
import time

import pytest

from codegen import __main__ as cli
from codegen.load import MAX_DEPTH

OK, DRIFT, USAGE, INVALID, INTERNAL, BROKEN_PIPE = 0, 1, 2, 3, 4, 141


def run_codegen(cwd, *args, timeout=60, memory_limit=None):
    """python3 -m codegen ARGS, optionally under an address-space limit in bytes."""
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))

    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit_memory if memory_limit else None)


def assert_one_error(result, status, *fragments):
    """The command failed with `status` and one message holding every fragment."""
    assert result.returncode == status, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if not line.endswith("error(s)")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], result.stderr


@pytest.fixture
def workspace(tmp_path, root):
    """A copy of the schema, templates, runtime declarations and generator, to edit freely."""
    shutil.copy(root / "api.yaml", tmp_path / "api.yaml")
    for name in ("templates", "runtime", "python", "codegen"):
        shutil.copytree(root / name, tmp_path / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.c", "*.cpp"))
    return tmp_path


# --- hostile schemas ---------------------------------------------------------------------------


def test_a_stray_0xff_byte_in_a_doc_is_one_located_error(workspace, tmp_path):
    schema = tmp_path / "bad.yaml"
    schema.write_bytes(b"modules:\n  - name: tensorplay\n    doc: 'caf\xff'\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "bad.yaml:3:14:", "UTF-8", "0xff")


def test_binary_bytes_in_a_schema_are_one_located_error(workspace, tmp_path):
    schema = tmp_path / "bad.yaml"
    schema.write_bytes(b"modules:\n  - name: \x00\x01\x02tensorplay\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "bad.yaml:2:11:", "character 0x00")


def test_brackets_nested_100000_deep_stop_at_the_nesting_limit(workspace, tmp_path):
    schema = tmp_path / "deep.yaml"
    schema.write_text("modules: " + "[" * 100_000 + "]" * 100_000 + "\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "deep.yaml:1:", f"nesting deeper than {MAX_DEPTH} levels")


def test_a_billion_laughs_alias_bomb_fails_fast_in_bounded_memory(workspace, tmp_path):
    # Ten levels of ten aliases each: 520 bytes that expand to ten billion strings.
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [" + ",".join([f"*a{n - 1}"] * 10) + "]" for n in range(1, 10)]
    schema = tmp_path / "bomb.yaml"
    schema.write_text("\n".join(lines) + "\n")
    assert len(schema.read_bytes()) < 1000
    started = time.monotonic()
    result = run_codegen(workspace, "validate", "--schema", str(schema), timeout=30,
                         memory_limit=1 << 30)
    assert time.monotonic() - started < 15
    assert_one_error(result, INVALID, "bomb.yaml:", "holds more than", "aliases expand to")
    assert len(result.stdout) + len(result.stderr) < 1000


def test_aliases_that_nest_past_the_depth_limit_are_refused(workspace, tmp_path):
    # Each anchor is 60 levels deep, within the limit; the second holds the first.
    schema = tmp_path / "nested.yaml"
    schema.write_text("a: &a " + "[" * 60 + "]" * 60 + "\n"
                      "b: &b " + "[" * 60 + "*a" + "]" * 60 + "\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "nested.yaml:2:", f"nests deeper than {MAX_DEPTH} levels",
                     "aliases expand to")


def test_an_alias_inside_the_node_it_names_is_refused(workspace, tmp_path):
    schema = tmp_path / "loop.yaml"
    schema.write_text("modules: &loop [*loop]\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "loop.yaml:1:17:", "alias *loop", "expand forever")


def test_a_python_tag_is_a_located_error_not_a_constructor_crash(workspace, tmp_path):
    schema = tmp_path / "tag.yaml"
    schema.write_text("modules: !!python/name:os.system x\n")
    result = run_codegen(workspace, "validate", "--schema", str(schema))
    assert_one_error(result, INVALID, "tag.yaml:1:10:", "python/name:os.system")


def test_echoed_values_are_cut_to_about_200_characters(workspace):
    schema = workspace / "api.yaml"
    text = schema.read_text(encoding="utf-8")
    assert "    type: Device\n" in text
    schema.write_text(text.replace("    type: Device\n", "    type: " + "Q" * 100_000 + "\n", 1),
                      encoding="utf-8")
    result = run_codegen(workspace, "validate")
    assert_one_error(result, INVALID, "api.yaml:", "QQQQ", "characters")
    assert len(result.stderr) < 1000


# --- options naming paths --------------------------------------------------------------------


def test_a_missing_templates_directory_is_one_message_naming_the_option(workspace, tmp_path):
    missing = tmp_path / "no-templates"
    for command in ("generate", "check", "list", "docs"):
        result = run_codegen(workspace, command, "--templates", str(missing))
        assert_one_error(result, USAGE, "--templates", str(missing), "no such directory")


def test_a_templates_directory_without_a_needed_template_names_it(workspace):
    (workspace / "templates" / "module.pyi.j2").unlink()
    result = run_codegen(workspace, "check")
    assert_one_error(result, USAGE, "--templates", "'module.pyi.j2'")


def test_a_template_syntax_error_is_located_in_the_template(workspace):
    template = workspace / "templates" / "module.pyi.j2"
    template.write_text(template.read_text(encoding="utf-8") + "{% if %}\n", encoding="utf-8")
    result = run_codegen(workspace, "check")
    assert_one_error(result, INVALID, "module.pyi.j2:", "template error")


def test_a_template_naming_a_missing_value_is_located_in_the_template(workspace):
    template = workspace / "templates" / "module.pyi.j2"
    text = template.read_text(encoding="utf-8")
    template.write_text(text + "{{ no_such_value }}\n", encoding="utf-8")
    result = run_codegen(workspace, "check")
    line = text.count("\n") + 1
    assert_one_error(result, INVALID, f"module.pyi.j2:{line}: template error",
                     "'no_such_value' is undefined")


def test_a_template_that_is_not_utf8_is_one_located_error(workspace):
    template = workspace / "templates" / "module.pyx.j2"
    template.write_bytes(template.read_bytes() + b"# caf\xff\n")
    result = run_codegen(workspace, "generate")
    assert_one_error(result, INVALID, "templates/module.pyx.j2:", "UTF-8", "0xff")


def test_a_runtime_source_that_is_not_utf8_is_one_located_error(workspace):
    source = workspace / "runtime" / "devices" / "device.pxd"
    source.write_bytes(b"# caf\xff\n" + source.read_bytes())
    result = run_codegen(workspace, "validate")
    assert_one_error(result, INVALID, "runtime/devices/device.pxd:1:6:", "UTF-8", "0xff")


def test_runtime_pointing_nowhere_is_one_message_naming_the_option(workspace, tmp_path):
    result = run_codegen(workspace, "validate", "--runtime", str(tmp_path / "nowhere"))
    assert_one_error(result, USAGE, "--runtime", "nowhere", "no such directory")
    result = run_codegen(workspace, "validate", "--runtime", str(workspace / "templates"))
    assert_one_error(result, USAGE, "--runtime", "holds no **/*.pxd files")


def test_a_missing_schema_file_is_one_message_naming_the_option(workspace, tmp_path):
    result = run_codegen(workspace, "validate", "--schema", str(tmp_path / "absent.yaml"))
    assert_one_error(result, USAGE, "--schema", "absent.yaml", "No such file")


# --- output and exit statuses -----------------------------------------------------------------


def test_a_closed_output_pipe_ends_quietly(workspace):
    # The reading end is closed before the command writes, as when `head -1` has exited.
    process = subprocess.Popen([sys.executable, "-m", "codegen", "list"], cwd=workspace,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=60) == BROKEN_PIPE
    assert stderr == ""


def test_list_piped_into_head_prints_one_line_and_no_traceback(workspace):
    result = subprocess.run(f"{sys.executable} -m codegen list | head -1", shell=True,
                            cwd=workspace, capture_output=True, text=True, timeout=60)
    assert result.stdout.count("\n") == 1 and result.stdout.strip().endswith(".md")
    assert result.stderr == ""


def test_usage_schema_drift_and_success_have_distinct_statuses(workspace):
    assert run_codegen(workspace, "frobnicate").returncode == USAGE
    assert run_codegen(workspace, "validate", "--no-such-option").returncode == USAGE
    assert run_codegen(workspace, "generate").returncode == OK
    assert run_codegen(workspace, "check").returncode == OK
    (workspace / "generated" / "tensorplay" / "py.typed").write_text("edited\n")
    assert run_codegen(workspace, "check").returncode == DRIFT
    schema = workspace / "api.yaml"
    schema.write_text(schema.read_text(encoding="utf-8") + "colour: red\n", encoding="utf-8")
    assert run_codegen(workspace, "check").returncode == INVALID


def test_help_lists_every_exit_status(workspace):
    result = run_codegen(workspace, "--help")
    assert result.returncode == OK
    for status, meaning in ((OK, "success"), (DRIFT, "stale"), (USAGE, "usage error"),
                            (INVALID, "schema or template errors"), (INTERNAL, "internal error"),
                            (BROKEN_PIPE, "reader of the output went away")):
        assert any(line.split()[:1] == [str(status)] and meaning in line
                   for line in result.stdout.splitlines()), (status, result.stdout)


def _a_bug(args):
    raise RuntimeError("x" * 1_000_000)


def test_an_internal_error_is_one_line_saying_how_to_report_it(monkeypatch, capsys):
    monkeypatch.delenv("CODEGEN_DEBUG", raising=False)
    monkeypatch.setattr(cli, "run", _a_bug)  # stands in for a bug anywhere in the generator
    assert cli.main(["validate"]) == INTERNAL
    stderr = capsys.readouterr().err
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert "internal error: RuntimeError" in stderr and "report" in stderr
    assert "--debug" in stderr and len(stderr) < 1000


@pytest.mark.parametrize("switch", ["--debug", "CODEGEN_DEBUG"])
def test_debug_or_codegen_debug_prints_the_traceback_of_an_internal_error(switch, monkeypatch,
                                                                         capsys):
    monkeypatch.setattr(cli, "run", _a_bug)
    if switch == "CODEGEN_DEBUG":
        monkeypatch.setenv("CODEGEN_DEBUG", "1")
        argv = ["validate"]
    else:
        monkeypatch.delenv("CODEGEN_DEBUG", raising=False)
        argv = ["validate", "--debug"]
    assert cli.main(argv) == INTERNAL
    stderr = capsys.readouterr().err
    assert "Traceback" in stderr and "_a_bug" in stderr and "internal error" in stderr


# --- check: line endings and file modes ---------------------------------------------------------


def test_check_notices_crlf_line_endings_and_names_the_fix(workspace):
    assert run_codegen(workspace, "generate").returncode == OK
    target = workspace / "generated" / "tensorplay" / "accelerator" / "memory.pyi"
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r\n"))
    result = run_codegen(workspace, "check")
    assert result.returncode == DRIFT and "Traceback" not in result.stderr
    assert "line endings differ" in result.stdout and "tensorplay/accelerator/memory.pyi" \
        in result.stdout
    assert "python -m codegen generate" in result.stderr
    assert run_codegen(workspace, "generate").returncode == OK
    assert b"\r\n" not in target.read_bytes()
    assert run_codegen(workspace, "check").returncode == OK


def test_check_notices_a_generated_file_made_executable_and_names_the_fix(workspace):
    assert run_codegen(workspace, "generate").returncode == OK
    target = workspace / "generated" / "tensorplay" / "cuda" / "__init__.pyx"
    target.chmod(0o755)
    result = run_codegen(workspace, "check")
    assert result.returncode == DRIFT
    assert "file mode differs" in result.stdout and "tensorplay/cuda/__init__.pyx" in result.stdout
    assert "python -m codegen generate" in result.stderr
    assert run_codegen(workspace, "generate").returncode == OK
    assert not os.access(target, os.X_OK)
    assert run_codegen(workspace, "check").returncode == OK


# --- global options on either side of the command ----------------------------------------------


def test_global_options_are_accepted_before_and_after_the_command(workspace, tmp_path):
    other = tmp_path / "other.yaml"
    shutil.copy(workspace / "api.yaml", other)
    before = run_codegen(workspace, "--schema", str(other), "validate")
    after = run_codegen(workspace, "validate", "--schema", str(other))
    for result in (before, after):
        assert result.returncode == OK, result.stderr
        assert result.stdout.startswith("other.yaml: valid")
    assert run_codegen(workspace, "validate", "--quiet").stdout == ""
    assert run_codegen(workspace, "--quiet", "validate").stdout == ""
    out = tmp_path / "elsewhere"
    assert run_codegen(workspace, "generate", "--out", str(out), "--quiet").returncode == OK
    assert (out / "tensorplay" / "_schema.py").is_file()
    assert run_codegen(workspace, "--out", str(out), "check").returncode == OK
    listed = run_codegen(workspace, "list", "--out", str(out), "--templates",
                         str(workspace / "templates"), "--runtime", str(workspace / "runtime"))
    assert listed.returncode == OK
    assert all(line.startswith(out.as_posix()) for line in listed.stdout.splitlines())
