"""generate / check / docs / list: deterministic output, drift detection, the reference pages."""
import json
import re
import shutil
import subprocess
import sys

import pytest

from codegen.model import Function, Param, Raises, Returns, load_api
from codegen.render import MARKER_TEXT, Renderer, described
from codegen.types import TypeExpr


def run_codegen(root, *args, cwd=None):
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=cwd or root,
                          capture_output=True, text=True)


@pytest.fixture
def workspace(tmp_path, root):
    """A copy of the schema, templates and runtime declarations, to edit freely."""
    for name in ("api.yaml",):
        shutil.copy(root / name, tmp_path / name)
    shutil.copytree(root / "templates", tmp_path / "templates")
    shutil.copytree(root / "runtime", tmp_path / "runtime")
    shutil.copytree(root / "python", tmp_path / "python")
    shutil.copytree(root / "codegen", tmp_path / "codegen")
    return tmp_path


def test_committed_generated_tree_is_up_to_date(root):
    result = run_codegen(root, "check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_generating_twice_gives_identical_bytes_and_leaves_files_untouched(workspace):
    assert run_codegen(workspace, "generate").returncode == 0
    out = workspace / "generated"
    first = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    result = run_codegen(workspace, "generate")
    assert result.returncode == 0
    assert "0 file(s) changed" in result.stdout
    second = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in out.rglob("*") if p.is_file()}
    assert first == second


def test_every_output_carries_the_marker_and_only_schema_py_the_hash(root):
    api = load_api(root / "api.yaml", root / "runtime")
    for output in Renderer(api, root / "templates").render_all():
        assert MARKER_TEXT in output.content.splitlines()[0], output.path
        assert (api.schema_hash in output.content) == output.path.endswith("/_schema.py"), \
            output.path


def test_editing_one_function_leaves_other_modules_outputs_byte_identical(workspace):
    assert run_codegen(workspace, "generate").returncode == 0
    out = workspace / "generated"
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    schema = workspace / "api.yaml"
    text = schema.read_text(encoding="utf-8")
    old_doc = "doc: 'one state per device, as from get_rng_state_all().'"
    assert text.count(old_doc) == 1  # a parameter of tensorplay.accelerator.random
    schema.write_text(text.replace(old_doc, old_doc.replace("one state", "one generator state")),
                      encoding="utf-8")
    assert run_codegen(workspace, "generate").returncode == 0
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    changed = sorted(p.relative_to(out).as_posix() for p in before if before[p] != after[p])
    assert changed == ["reference/tensorplay.accelerator.random.md",
                       "tensorplay/_schema.py",
                       "tensorplay/accelerator/random.pyi",
                       "tensorplay/accelerator/random.pyx"]


def test_check_catches_a_hand_edit_and_names_the_fix(workspace):
    run_codegen(workspace, "generate")
    target = workspace / "generated" / "tensorplay" / "accelerator" / "memory.pyx"
    target.write_text(target.read_text().replace("return _statistics.empty_cache()",
                                                 "return None"))
    result = run_codegen(workspace, "check")
    assert result.returncode == 1
    assert "-    return None" in result.stdout and "+    return _statistics.empty_cache()" in result.stdout
    assert "python -m codegen generate" in result.stderr


def test_check_catches_a_template_edit(workspace):
    run_codegen(workspace, "generate")
    template = workspace / "templates" / "module.pyi.j2"
    template.write_text(template.read_text().replace("import os\n", "import os\nimport sys\n"))
    result = run_codegen(workspace, "check")
    assert result.returncode == 1
    assert "+import sys" in result.stdout


def test_check_catches_a_schema_edit(workspace):
    run_codegen(workspace, "generate")
    schema = workspace / "api.yaml"
    schema.write_text(schema.read_text().replace(
        "Release unoccupied cached host memory.", "Release unused cached host memory."))
    result = run_codegen(workspace, "check")
    assert result.returncode == 1
    assert "+    \"\"\"Release unused cached host memory.\"\"\"" in result.stdout


def test_outputs_no_longer_produced_are_reported_and_removed(workspace):
    run_codegen(workspace, "generate")
    stale = workspace / "generated" / "tensorplay" / "old.pyx"
    stale.write_text(f"# {MARKER_TEXT} — DO NOT EDIT\n")
    result = run_codegen(workspace, "check")
    assert result.returncode == 1 and "orphan file" in result.stdout
    assert run_codegen(workspace, "generate").returncode == 0
    assert not stale.exists()


def test_schema_errors_exit_3_with_locations(workspace):
    schema = workspace / "api.yaml"
    text = schema.read_text()
    text = text.replace("impl: device.device_count", "impl: device.device_counter", 1)
    text = text.replace("    type: Device\n", "    type: Devise\n", 1)
    text = text.replace("- name: tensorplay.cuda\n", "- name: tensorplay.cuda\n  colour: red\n", 1)
    schema.write_text(text)
    for command in ("validate", "generate", "check"):
        result = run_codegen(workspace, command)
        assert result.returncode == 3
        messages = [line for line in result.stderr.splitlines() if line.startswith("api.yaml:")]
        assert len(messages) == 3, result.stderr
        assert all(re.match(r"api\.yaml:\d+:\d+: ", line) for line in messages)


def test_list_names_every_output(root):
    result = run_codegen(root, "list")
    listed = {line.split("generated/", 1)[1] for line in result.stdout.splitlines()}
    on_disk = {p.relative_to(root / "generated").as_posix()
               for p in (root / "generated").rglob("*") if p.is_file()}
    assert listed == on_disk


def test_docs_json_is_the_normalised_schema(root):
    result = run_codegen(root, "docs", "--format", "json")
    document = json.loads(result.stdout)
    api = load_api(root / "api.yaml", root / "runtime")
    assert document["schema_hash"] == api.schema_hash
    assert [m["name"] for m in document["modules"]] == [m.name for m in api.modules]
    graph = next(c for m in document["modules"] for c in m["classes"] if c["name"] == "Graph")
    assert [p["name"] for p in graph["init"]] == ["keep_graph", "pool", "capture_error_mode"]


def test_docs_md_writes_the_reference_pages(root, tmp_path):
    result = run_codegen(root, "docs", "--docs-out", str(tmp_path))
    assert result.returncode == 0
    assert (tmp_path / "tensorplay.accelerator.md").read_text() == \
        (root / "generated" / "reference" / "tensorplay.accelerator.md").read_text()


def test_reference_section_counts_match_the_schema(root):
    api = load_api(root / "api.yaml", root / "runtime")
    for module in api.modules:
        page = (root / "generated" / "reference" / f"{module.name}.md").read_text()
        functions = len(module.functions) + sum(
            1 for r in module.reexports if api.find(r.source, r.name) in
            api.module(r.source).functions)
        classes = len(module.classes) + sum(
            1 for r in module.reexports if api.find(r.source, r.name) in
            api.module(r.source).classes)
        if functions:
            assert f"## Functions {functions}\n" in page
        if classes:
            assert f"## Classes {classes}\n" in page
        for name in [f.name for f in module.functions] + [c.name for c in module.classes]:
            assert len(re.findall(rf"^### {re.escape(name)}$", page, re.M)) == 1, name


def test_accelerator_page_has_the_spec_signatures(root):
    page = (root / "generated" / "reference" / "tensorplay.accelerator.md").read_text()
    # The spec's names, kinds and defaults; the types are the schema's (a pool, a stream).
    assert ("class tensorplay.accelerator.Graph(keep_graph: bool = False, *, pool: GraphPool = "
            "None, capture_error_mode: str = 'global')") in page
    assert "capture_begin(pool: GraphPool | Unset = '__unset__', capture_error_mode: str = " \
           "'__unset__', stream: Optional[Stream] = None) → None" in page
    assert "tensorplay.accelerator.get_device_capability(device: Device = None) → " \
           "dict[str, Any]" in page


def test_docstrings_carry_args_returns_and_raises_sections_without_a_signature_line(root):
    function = Function(
        "memory_allocated", "memory", "memory_allocated", "Bytes in use.", (
            Param("device", TypeExpr("Device"), "positional", "the device; None for the "
                  "current one.", None),
            Param("shape", TypeExpr("int"), "var_positional", "line one\nline two"),
            Param("options", TypeExpr("Any"), "var_keyword", "the rest.")),
        Returns(TypeExpr("int"), "the byte count."), None, None,
        (Raises("ValueError", "device is below -1."),))
    assert described(function) == (
        "Bytes in use.\n\n"
        "Args:\n    device: the device; None for the current one.\n"
        "    *shape: line one\n        line two\n"
        "    **options: the rest.\n\n"
        "Returns:\n    int: the byte count.\n\n"
        "Raises:\n    ValueError: device is below -1.")
    api = load_api(root / "api.yaml", root / "runtime")
    wrappers = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    assert "embedsignature=False" in wrappers["tensorplay/accelerator/memory.pyx"]  # help()
    # takes the signature from inspect.signature(), so the docstring does not repeat it.
    for path in ("tensorplay/accelerator/memory.pyx", "tensorplay/accelerator/memory.pyi"):
        assert ('def memory_allocated(device' in wrappers[path]
                and '    """Bytes currently occupied by live tensors on the given device.\n\n'
                    "    Args:\n        device: " in wrappers[path]
                and "    Returns:\n        int: bytes.\n" in wrappers[path]), path


def test_both_graph_classes_share_one_declaration_and_differ_where_the_specs_do(root):
    api = load_api(root / "api.yaml", root / "runtime")
    graph = api.find("tensorplay.accelerator.graphs", "Graph")
    cuda_graph = api.find("tensorplay.cuda.graphs", "CUDAGraph")
    assert graph.extends == cuda_graph.extends == "GraphBase"
    graph_methods = {m.name: m for m in graph.methods}
    cuda_methods = {m.name: m for m in cuda_graph.methods}
    assert set(graph_methods) - set(cuda_methods) == {"__enter__", "__exit__", "pool"}
    assert set(cuda_methods) <= set(graph_methods)
    differing = {name for name in cuda_methods if graph_methods[name] != cuda_methods[name]}
    assert differing == {"capture_begin"}
    assert graph.properties == cuda_graph.properties
    assert [(p.name, p.default) for p in graph_methods["capture_begin"].params] == [
        ("pool", "__unset__"), ("capture_error_mode", "__unset__"), ("stream", None)]
    assert "settings given to the constructor" in graph_methods["capture_begin"].doc
    assert [(p.name, p.default) for p in cuda_methods["capture_begin"].params] == [
        ("pool", None), ("capture_error_mode", "global"), ("stream", None)]


def test_pool_arguments_are_typed_in_the_stubs(root):
    api = load_api(root / "api.yaml", root / "runtime")
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    for path in ("tensorplay/accelerator/graphs.pyi", "tensorplay/cuda/graphs.pyi"):
        stub = outputs[path]
        assert "_GraphPool: TypeAlias = tuple[int, int] | Graph | CUDAGraph | None" in stub
        assert "pool: Any" not in stub and "stream: Any" not in stub, path
    assert "pool: _GraphPool | Literal['__unset__'] = '__unset__'" in \
        outputs["tensorplay/accelerator/graphs.pyi"]
    assert "def graph_pool_handle() -> tuple[int, int]:" in outputs["tensorplay/cuda/graphs.pyi"]


def test_accelerator_reexports_the_memory_functions_as_torch_accelerator_does(root):
    api = load_api(root / "api.yaml", root / "runtime")
    accelerator = api.module("tensorplay.accelerator")
    reexported = {r.name for r in accelerator.reexports
                  if r.source == "tensorplay.accelerator.memory"}
    assert reexported == {"empty_cache", "max_memory_allocated", "max_memory_reserved",
                          "memory_allocated", "memory_reserved", "memory_stats",
                          "reset_accumulated_memory_stats", "reset_peak_memory_stats"}
    assert reexported <= set(accelerator.public_names())
    # Re-exports, not copies: the declaration lives once, in tensorplay.accelerator.memory.
    assert not reexported & {f.name for f in accelerator.functions}
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    assert "from tensorplay.accelerator.memory import memory_stats\n" in \
        outputs["tensorplay/accelerator/__init__.pyx"]
    assert "from tensorplay.accelerator.memory import memory_stats as memory_stats\n" in \
        outputs["tensorplay/accelerator/__init__.pyi"]
