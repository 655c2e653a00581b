"""The layers import one way (docs/design.md, "Layers").

Every `import` and `cimport` of a tensorplay module under runtime/ and python/ is read from the
sources (Cython's cimports are invisible to most tools, so this reads the text, not the AST) and
checked against the order of the layers, lowest first:

    runtime/base < devices < memory < kernels < tensor < random < autograd < graphs
    < the generated public package (generated/tensorplay) < python/ (tensorplay._python)

A runtime module may import modules of its own subpackage or of a lower one, never a higher one,
the public package or the Python layer; no two modules may import each other, directly or
around a circle; and no import of a tensorplay module may sit inside a function, where it would
hide a cycle until the call, except the imports LOADED_ON_FIRST_USE names, each with its reason
(still checked for direction and circles). The Python layer uses the public API and the runtime below it; the
generated wrappers call into it only where api.yaml's impl: names one of its functions.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_LAYERS = ("base", "devices", "memory", "kernels", "tensor", "random", "autograd",
                  "graphs")

# from tensorplay.x cimport a, b as c | from tensorplay.x import (a, b) | [c]import tensorplay.x
_FROM = re.compile(r"^([ \t]*)from[ \t]+(tensorplay(?:\.\w+)*)[ \t]+c?import[ \t]+"
                   r"(\([^)]*\)|[^\n#]+)", re.MULTILINE)
# (importer, imported): why the import waits for its first use.
LOADED_ON_FIRST_USE = {
    ("tensor.linalg", "kernels.cublaslt"):
        "loads nvmath-python and the cuBLASLt library on the first CUDA matmul, which `import "
        "tensorplay` must not (docs/design.md, \"Matrix products\")",
}
_PLAIN = re.compile(r"^([ \t]*)c?import[ \t]+(tensorplay(?:\.\w+)*)", re.MULTILINE)


def sources(root=ROOT):
    """{module name: [source files]}: runtime/devices/stream.p{yx,xd} is devices.stream,
    python/report.py is python.report."""
    found = {}
    for top, prefix in (("runtime", ()), ("python", ("python",))):
        for path in sorted((root / top).rglob("*")):
            if path.suffix in (".pyx", ".pxd", ".py") and path.stem != "__init__":
                parts = prefix + path.relative_to(root / top).with_suffix("").parts
                found.setdefault(".".join(parts), []).append(path)
    return found


def layer_of(module):
    """The rank of a module's layer (higher may import lower), or None outside the layers."""
    head = module.split(".")[0]
    if head in RUNTIME_LAYERS:
        return RUNTIME_LAYERS.index(head)
    return {"public": len(RUNTIME_LAYERS), "python": len(RUNTIME_LAYERS) + 1}.get(head)


def target_of(dotted, known):
    """The module a dotted tensorplay name refers to, in this test's naming."""
    if dotted.startswith("tensorplay._runtime."):
        name = dotted[len("tensorplay._runtime."):]
    elif dotted.startswith("tensorplay._python."):
        name = "python." + dotted[len("tensorplay._python."):]
    elif dotted in ("tensorplay._runtime", "tensorplay._python"):
        return None  # a package: the names imported from it say which modules
    else:
        return "public"  # tensorplay itself, its generated modules, tensorplay._schema, ...
    while name and name not in known and "." in name:
        name = name.rpartition(".")[0]  # a name inside a module: the module
    return name


def imports(root=ROOT):
    """[(importer, imported, file, line, indented)] for every tensorplay import."""
    known = sources(root)
    edges = []
    for module, paths in known.items():
        for path in paths:
            text = path.read_text(encoding="utf-8")
            for match in _FROM.finditer(text):
                indent, package, names = match.groups()
                line = text.count("\n", 0, match.start()) + 1
                targets = []
                for name in names.strip("()").replace("\n", " ").split(","):
                    name = name.split()[0] if name.strip() else ""
                    candidate = target_of(f"{package}.{name}", known) if name else None
                    if candidate in known and (package + "." + name).endswith(candidate):
                        targets.append(candidate)  # from package cimport module
                if not targets:
                    targets.append(target_of(package, known))
                for imported in targets:
                    if imported is not None:
                        edges.append((module, imported, path, line, bool(indent)))
            for match in _PLAIN.finditer(text):
                indent, dotted = match.groups()
                line = text.count("\n", 0, match.start()) + 1
                imported = target_of(dotted, known)
                if imported is not None:
                    edges.append((module, imported, path, line, bool(indent)))
    return edges


def shown(path, line):
    return f"{path.relative_to(ROOT)}:{line}"


def test_every_runtime_subpackage_has_a_place_in_the_order():
    folders = {path.name for path in (ROOT / "runtime").iterdir()
               if path.is_dir() and path.name != "__pycache__"}
    assert folders == set(RUNTIME_LAYERS), (
        "runtime/ holds folders that the layer order does not name, or the order names folders "
        f"that are gone: {sorted(folders ^ set(RUNTIME_LAYERS))}; place each in RUNTIME_LAYERS "
        "and in docs/design.md's picture")
    loose = [path.name for path in (ROOT / "runtime").glob("*.p[xy]*")
             if path.stem != "__init__"]
    assert not loose, f"modules outside any layer's folder: {loose}"


def test_no_runtime_module_imports_upward():
    upward = []
    for importer, imported, path, line, _ in imports():
        rank, target_rank = layer_of(importer), layer_of(imported)
        if importer.startswith("python."):
            continue  # the top layer may use everything below it
        if target_rank is None or rank is None or target_rank > rank:
            upward.append(f"{shown(path, line)}: {importer} imports {imported}")
    assert not upward, "imports that point up the layers:\n" + "\n".join(upward)


def test_no_import_of_tensorplay_inside_a_function():
    hidden = [f"{shown(path, line)}: {importer} imports {imported} inside a function"
              for importer, imported, path, line, indented in imports()
              if indented and (importer, imported) not in LOADED_ON_FIRST_USE]
    assert not hidden, ("imports inside functions (a cycle hidden until the call; import at "
                        "the top, or let the lower layer offer a hook):\n" + "\n".join(hidden))


def test_each_import_on_first_use_exists_inside_a_function():
    found = {(importer, imported) for importer, imported, _, _, indented in imports() if indented}
    assert set(LOADED_ON_FIRST_USE) <= found, sorted(set(LOADED_ON_FIRST_USE) - found)


def test_no_circular_imports():
    graph = {}
    for importer, imported, path, line, _ in imports():
        if importer != imported:  # a .pyx cimporting its own .pxd
            graph.setdefault(importer, {}).setdefault(imported, shown(path, line))
    circles, state = [], {}

    def visit(module, trail):
        state[module] = "open"
        for imported, where in graph.get(module, {}).items():
            if state.get(imported) == "open":
                start = next(i for i, (name, _) in enumerate(trail) if name == imported)
                circle = [(imported, "")] + trail[start + 1:] + [(imported, where)]
                circles.append(" -> ".join(f"{name} ({at})" if at else name
                                           for name, at in circle))
            elif imported not in state:
                visit(imported, trail + [(imported, where)])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [(module, "")])
    assert not circles, "circular imports:\n" + "\n".join(circles)


@pytest.mark.parametrize("text, expected", [
    ("from tensorplay._runtime.devices cimport stream as _stream\n", ["devices.stream"]),
    ("from tensorplay._runtime.devices.stream cimport StreamCore, EventCore\n",
     ["devices.stream"]),
    ("from tensorplay._runtime.base cimport (errors,\n    public)\n", ["base.errors",
                                                                      "base.public"]),
    ("def f():\n    from tensorplay import zeros\n", ["public"]),
    ("import tensorplay.cuda\n", ["public"]),
    ("from tensorplay._schema import UNSET\n", ["public"]),
])
def test_the_reader_sees_every_form_of_import(tmp_path, text, expected):
    # The checks above are only as good as this reader: each form an import takes in the
    # sources is read as the module it names.
    fake = tmp_path / "project"
    for module in ("base/errors.pxd", "base/public.pxd", "devices/stream.pxd"):
        (fake / "runtime" / module).parent.mkdir(parents=True, exist_ok=True)
        (fake / "runtime" / module).write_text("")
    (fake / "runtime" / "graphs").mkdir()
    (fake / "runtime" / "graphs" / "probe.pyx").write_text(text)
    (fake / "python").mkdir()
    found = [imported for importer, imported, *_ in imports(fake) if importer == "graphs.probe"]
    assert found == expected
