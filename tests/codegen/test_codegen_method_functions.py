"""A method's or a property's impl may name a module function that takes the instance first
(`impl: demo.scaled`): the operation lives in a module of its own, not on the core class. The
generator resolves it and checks its arity as it checks core methods, and the wrapper calls it
with self first."""
import shutil
import textwrap

import pytest

from codegen.load import SchemaError
from codegen.model import build_api
from tests.codegen.test_codegen_class_forms import render as render_schema
from tests.codegen.test_codegen_class_forms import translates_with_cython

DEMO_PXD = textwrap.dedent("""\
    cdef class ThingCore:
        cdef int count
        cdef object c_size(self)
    cdef object scaled(ThingCore thing, double factor, object offset=*)
    cdef object clear(ThingCore thing)
    cdef tuple shape_of(ThingCore thing)
    """)
SCHEMA = textwrap.dedent("""\
    schema_version: 1
    modules:
    - name: tensorplay
      doc: Top.
      classes:
      - name: Thing
        impl: demo.ThingCore
        doc: A thing.
        methods:
        - {name: size, returns: {type: int, doc: the size.}, doc: Its size.}
        - name: scaled
          impl: demo.scaled
          params:
          - {name: factor, type: float, doc: the factor.}
          returns: {type: Any, doc: the result.}
          doc: Scaled.
        - {name: clear, impl: demo.clear, doc: Empty it.}
        properties:
        - {name: shape, type: 'tuple[int, ...]', impl: demo.shape_of, doc: Its shape.}
    """)


@pytest.fixture
def runtime_dir(tmp_path, root):
    runtime = tmp_path / "runtime"
    shutil.copytree(root / "runtime", runtime)
    (runtime / "demo.pxd").write_text(DEMO_PXD)
    return runtime


def render(runtime_dir, root, text=SCHEMA):
    return render_schema(runtime_dir, root, text)


def test_methods_and_properties_call_module_functions_with_the_instance_first(runtime_dir, root):
    api, wrapper, stub = render(runtime_dir, root)
    (thing,) = api.module("tensorplay").classes
    size, scaled, clear = thing.methods
    assert (size.impl_module, size.impl_name) == ("", "c_size")
    assert (scaled.impl_module, scaled.impl_name) == ("demo", "scaled") and not scaled.static
    assert (thing.properties[0].impl_module, thing.properties[0].impl_name) == ("demo", "shape_of")
    assert "from tensorplay._runtime cimport demo as _demo" in wrapper
    assert "        return self.c_size()" in wrapper
    assert "        return _demo.scaled(self, _errors.float_arg(factor, 'factor'))" in wrapper
    assert "        _demo.clear(self)\n" in wrapper
    assert "    @property\n    def shape(self):" in wrapper
    assert "        return _demo.shape_of(self)" in wrapper
    # The stub shows the public method, whatever implements it.
    assert "    def scaled(self, factor: float) -> Any:\n        \"\"\"Scaled." in stub
    compile(stub, "__init__.pyi", "exec")


def test_a_module_function_may_share_the_methods_public_name(runtime_dir, root):
    # Unlike a core method, a module function is no attribute of the class it could shadow.
    (runtime_dir / "demo.pxd").write_text(DEMO_PXD + "cdef object size(ThingCore thing)\n")
    text = SCHEMA.replace("- {name: size, returns:", "- {name: size, impl: demo.size, returns:")
    _, wrapper, _ = render(runtime_dir, root, text)
    assert "        return _demo.size(self)" in wrapper


def test_unknown_functions_and_wrong_arities_are_located_errors(runtime_dir):
    text = (SCHEMA.replace("impl: demo.scaled", "impl: demo.scale")
            .replace("{name: clear, impl: demo.clear,", "{name: clear, impl: nowhere.clear,")
            .replace("impl: demo.shape_of", "impl: demo.scaled"))
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    messages = [str(d) for d in raised.value.diagnostics]
    assert any("impl of 'tensorplay.Thing.scaled': runtime/demo.pxd declares no cdef function "
               "'scale'" in m for m in messages), messages
    assert any("impl of 'tensorplay.Thing.clear': no runtime module 'nowhere'" in m
               for m in messages), messages
    # scaled() takes the instance and one or two more; a property passes the instance alone.
    assert any("impl of property 'shape' of 'tensorplay.Thing': runtime/demo.pxd declares "
               "scaled() with 2 to 3 arguments, but the wrapper passes 1 (the instance, then "
               "one per parameter)" in m for m in messages), messages
    assert all(":" in m.split(" ")[0] for m in messages)  # each located, file:line:col


def test_a_method_function_must_take_the_instance(runtime_dir):
    text = SCHEMA.replace("{name: clear, impl: demo.clear,", "{name: clear, impl: demo.shape_of,"
                          " params: [{name: deep, type: bool, doc: how deep.}],")
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    assert any("declares shape_of() with 1 argument, but the wrapper passes 2 (the instance, "
               "then one per parameter)" in str(d) for d in raised.value.diagnostics)


def test_the_wrapper_translates_with_cython(runtime_dir, root, tmp_path):
    _, wrapper, _ = render(runtime_dir, root)
    assert translates_with_cython(wrapper, runtime_dir, tmp_path)


# A module function that is a method of a class of its module, the instance first as `input`
# (method_of), as torch.add(input, other) is input.add(other).
MIRRORS = textwrap.dedent("""\
      functions:
      - name: scaled
        method_of: Thing.scaled
        example: |
          >>> 1
          1
      - {name: size, method_of: Thing.size, doc: The size of input.}
    """)


def test_a_function_may_be_a_method_with_the_instance_first(runtime_dir, root, tmp_path):
    text = SCHEMA.replace("  classes:\n", textwrap.indent(MIRRORS, "  ") + "  classes:\n")
    api, wrapper, stub = render(runtime_dir, root, text)
    scaled, size = api.module("tensorplay").functions
    thing = api.module("tensorplay").classes[0]
    assert scaled.method_of == "Thing" and scaled.impl_name == "scaled"
    assert [p.name for p in scaled.params] == ["input", "factor"]
    assert scaled.params[1:] == thing.methods[1].params and scaled.doc == "Scaled."
    assert scaled.returns == thing.methods[1].returns and size.doc == "The size of input."
    assert "    if not isinstance(input, Thing):\n" in wrapper
    assert "    return input.scaled(factor)\n" in wrapper
    assert "def scaled(input: Thing, factor: float) -> Any:" in stub
    assert translates_with_cython(wrapper, runtime_dir, tmp_path)


@pytest.mark.parametrize("target", ["Thing.grow", "Nothing.size", "size"])
def test_a_function_must_be_a_method_of_a_class_of_its_module(runtime_dir, target):
    mirrors = textwrap.indent(MIRRORS.replace("Thing.size", target), "  ")
    text = SCHEMA.replace("  classes:\n", mirrors + "  classes:\n")
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    assert [str(d).split(": ", 1)[1] for d in raised.value.diagnostics] == [
        f"'tensorplay.size' is method_of {target!r}, which must be 'Class.method': a method "
        "(not static, with no parameter named input) of a class that module 'tensorplay' "
        "declares"]
