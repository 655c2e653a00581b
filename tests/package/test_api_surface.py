"""The installed package matches the schema: names, signatures, docs, __all__, stubs, hash."""
import importlib
import inspect
import subprocess
import sys

import pytest

from codegen.model import NO_DEFAULT, load_api
from codegen.render import described

KIND = {
    "positional": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "positional_only": inspect.Parameter.POSITIONAL_ONLY,
    "var_positional": inspect.Parameter.VAR_POSITIONAL,
    "keyword_only": inspect.Parameter.KEYWORD_ONLY,
    "var_keyword": inspect.Parameter.VAR_KEYWORD,
}


@pytest.fixture(scope="module")
def api(root):
    return load_api(root / "api.yaml", root / "runtime")


def schema_items(root):
    api = load_api(root / "api.yaml", root / "runtime")
    for module in api.modules:
        for function in module.functions:
            yield pytest.param(module.name, None, function, id=f"{module.name}.{function.name}")
        for cls in module.classes:
            for method in cls.methods:
                yield pytest.param(module.name, cls.name, method,
                                   id=f"{module.name}.{cls.name}.{method.name}")


def expected_parameters(params, with_self=False):
    # self shares the kind of the first parameter when that one is positional-only.
    self_kind = KIND["positional_only"] if params and params[0].kind == "positional_only" \
        else KIND["positional"]
    expected = [("self", self_kind, inspect.Parameter.empty)] if with_self else []
    for param in params:
        default = inspect.Parameter.empty if param.default is NO_DEFAULT else param.default
        expected.append((param.name, KIND[param.kind], default))
    return expected


def has_signature(obj):
    try:
        inspect.signature(obj)
    except ValueError:
        return False
    return True


def actual_parameters(obj):
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


from pathlib import Path  # noqa: E402  (collection needs the root before fixtures exist)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("module_name, class_name, item", list(schema_items(ROOT)))
def test_every_function_and_method_has_the_schema_signature_and_doc(module_name, class_name,
                                                                    item):
    module = importlib.import_module(module_name)
    owner = getattr(module, class_name) if class_name else module
    obj = getattr(owner, item.name)
    if item.name.startswith("__") and (not has_signature(obj) or
                                       isinstance(obj, type(object.__init__))):
        # Special methods of extension types become C slots (__eq__, __add__, ...): CPython
        # keeps no signature for most of them, and a generic one, (self, /), for a few
        # (__bool__), so existence is what can be checked.
        return
    assert actual_parameters(obj) == expected_parameters(
        item.params, with_self=bool(class_name) and not getattr(item, "static", False))
    # help() shows the signature once (from inspect) and the docstring with its Args: section.
    assert inspect.getdoc(obj) == described(item)


def test_every_class_property_and_variable_exists_with_its_doc(api):
    for module in api.modules:
        runtime_module = importlib.import_module(module.name)
        for cls in module.classes:
            runtime_class = getattr(runtime_module, cls.name)
            assert inspect.getdoc(runtime_class) == described(cls)
            assert runtime_class.__module__ == module.name
            for prop in cls.properties:
                assert inspect.getdoc(getattr(runtime_class, prop.name)) == prop.doc
            if cls.init is not None:
                # The class carries its constructor's text signature (templates/module.pyx.j2).
                assert actual_parameters(runtime_class) == expected_parameters(cls.init)
        for variable in module.variables:
            assert hasattr(runtime_module, variable.name)


def test_each_module_all_equals_the_schema_names(api):
    for module in api.modules:
        runtime_module = importlib.import_module(module.name)
        assert runtime_module.__all__ == module.public_names()
        for name in runtime_module.__all__:
            assert hasattr(runtime_module, name), f"{module.name}.{name}"


def test_reexports_are_the_same_objects(api):
    import tensorplay.accelerator
    import tensorplay.cuda
    assert tensorplay.accelerator.Graph is tensorplay.accelerator.graphs.Graph
    assert tensorplay.cuda.CUDAGraph is tensorplay.cuda.graphs.CUDAGraph
    assert tensorplay.cuda.graph is tensorplay.cuda.graphs.graph
    # As torch.accelerator, the memory functions are reachable at the top level too.
    for name in ("empty_cache", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
                 "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
                 "reset_peak_memory_stats"):
        assert getattr(tensorplay.accelerator, name) is getattr(tensorplay.accelerator.memory, name)
        assert name in tensorplay.accelerator.__all__


def test_installed_package_was_built_from_this_schema(api):
    from tensorplay import _schema
    assert _schema.SCHEMA_HASH == api.schema_hash
    assert _schema.MODULES == {m.name: m.public_names() for m in api.modules}


def test_package_ships_stubs_and_py_typed():
    import tensorplay
    package = Path(tensorplay.__file__).parent
    assert (package / "py.typed").is_file()
    for stub in ("__init__.pyi", "accelerator/__init__.pyi", "accelerator/memory.pyi",
                 "accelerator/random.pyi", "accelerator/graphs.pyi", "cuda/__init__.pyi",
                 "cuda/graphs.pyi", "optim/__init__.pyi", "optim/lr_scheduler.pyi",
                 "utils/__init__.pyi", "utils/data.pyi"):
        assert (package / stub).is_file(), stub


def test_deprecated_names_warn_and_forward():
    import tensorplay.accelerator as accelerator
    with pytest.warns(FutureWarning, match="use set_device_index"):
        accelerator.set_device_idx(-1)
    with pytest.warns(FutureWarning, match="use current_device_index"):
        try:
            accelerator.current_device_idx()
        except RuntimeError:
            pass  # no GPU: the forwarded call answers as current_device_index() does


def test_stubtest_passes_on_both_public_modules(root):
    pytest.importorskip("mypy.stubtest", reason="mypy is not installed (pip install '.[dev]')")
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "tensorplay",  # and all its submodules
         "--allowlist", str(root / "codegen" / "stubtest_allowlist.txt"),
         "--mypy-config-file", str(root / "codegen" / "stubtest_mypy.ini")],
        capture_output=True, text=True, cwd=root / "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_help_shows_the_signature_once_and_the_parameter_docs():
    import pydoc
    import tensorplay.accelerator
    text = pydoc.render_doc(tensorplay.accelerator.memory_allocated, renderer=pydoc.plaintext)
    assert text.count("memory_allocated(device=None)") == 1
    assert "Args:\n" in text and "device: a device object" in text
    assert "Returns:\n" in text and "int: bytes." in text
