"""Class forms the schema can declare for what comes next (tensorplay.nn, tensorplay.autograd):
Python classes users subclass, static methods, settable properties, and context managers that
also decorate functions. A small example schema over a small runtime module is rendered, and
the wrappers are translated by Cython where it is installed (the build's own check)."""
import shutil
import textwrap

import pytest

from codegen.load import SchemaError
from codegen.model import build_api
from codegen.render import Renderer

DEMO_PXD = textwrap.dedent("""\
    cdef class GradModeCore:
        cdef bint previous
        cdef object c_enter(self)
        cdef object c_exit(self, object exc_type, object exc_value, object traceback)
        cdef object c_enabled(self)
        cdef object c_set_enabled(self, bint value)
    cdef object apply_function(object cls, object args)
    """)
DEMO_PYX = textwrap.dedent("""\
    class FunctionCore:
        def c_save(self, tensors):
            self.saved = tensors
    """)
SCHEMA = textwrap.dedent("""\
    schema_version: 1
    modules:
    - name: tensorplay
      doc: Top.
      classes:
      - name: Function
        kind: python
        impl: demo.FunctionCore
        doc: Subclass me.
        methods:
        - name: apply
          static: true
          impl: demo.apply_function
          params:
          - {name: cls, type: Any, doc: the Function subclass.}
          - {name: args, type: Any, doc: its arguments.}
          returns: {type: Any, doc: the outputs.}
          doc: Run forward, record backward.
        - name: save
          params:
          - {name: tensors, type: Any, doc: what backward needs.}
          doc: Keep tensors for backward.
      - name: no_grad
        impl: demo.GradModeCore
        decorator: true
        doc: Disable gradients.
        methods:
        - {name: __enter__, impl: c_enter, returns: {type: Any, doc: the context.}, doc: Enter.}
        - name: __exit__
          impl: c_exit
          params:
          - {name: exc_type, type: Any, kind: positional_only, doc: the type.}
          - {name: exc_value, type: Any, kind: positional_only, doc: the exception.}
          - {name: traceback, type: Any, kind: positional_only, doc: the traceback.}
          doc: Exit.
        properties:
        - {name: enabled, type: bool, setter: c_set_enabled, doc: Whether gradients are on.}
    """)


@pytest.fixture
def runtime_dir(tmp_path, root):
    runtime = tmp_path / "runtime"
    shutil.copytree(root / "runtime", runtime)
    (runtime / "demo.pxd").write_text(DEMO_PXD)
    (runtime / "demo.pyx").write_text(DEMO_PYX)
    return runtime


def render(runtime_dir, root, text=SCHEMA):
    api = build_api(text, runtime_dir)
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    return api, outputs["tensorplay.pyx"], outputs["tensorplay.pyi"]


def test_python_classes_static_methods_setters_and_decorators_render(runtime_dir, root):
    api, wrapper, stub = render(runtime_dir, root)
    function, no_grad = api.module("tensorplay").classes
    assert function.kind == "python" and function.methods[0].static
    assert no_grad.decorator and no_grad.properties[0].setter == "c_set_enabled"
    # A Python class users can subclass, deriving from the runtime's Python class.
    assert "class Function(_demo_classes.FunctionCore):" in wrapper
    assert "from tensorplay._runtime import demo as _demo_classes" in wrapper
    assert ("    @staticmethod\n    def apply(cls, args):" in wrapper
            and "return _demo.apply_function(cls, args)" in wrapper)
    assert "        self.c_save(tensors)" in wrapper
    # The setter checks its value by the property's type, as a parameter of that type.
    assert ("    @enabled.setter\n    def enabled(self, value):\n"
            "        self.c_set_enabled(_errors.bool_arg(value, 'enabled'))") in wrapper
    # A context manager that decorates: each call runs in a new instance.
    assert "import functools as _functools" in wrapper
    assert "            with context():\n                return function(*args, **kwargs)" \
        in wrapper
    assert "_inspect.isgeneratorfunction(function)" in wrapper  # generators: each step inside
    assert "    @staticmethod\n    def apply(cls: Any, args: Any) -> Any:" in stub
    assert "    @enabled.setter\n    def enabled(self, value: bool) -> None: ..." in stub
    assert "    def __call__(self, function: Callable[..., Any]) -> Callable[..., Any]:" in stub
    compile(stub, "__init__.pyi", "exec")  # the stub is valid Python


def translates_with_cython(wrapper, runtime_dir, tmp_path):
    """Cython translates a rendered wrapper against a copy of runtime_dir as the runtime."""
    cython = pytest.importorskip("Cython.Build")
    package = tmp_path / "tree" / "tensorplay"
    shutil.copytree(runtime_dir, package / "_runtime")
    (package / "__init__.pxd").write_text("")
    (package / "_runtime" / "__init__.pxd").write_text("")
    source = tmp_path / "tree" / "wrapper.pyx"
    source.write_text(wrapper)
    cython.cythonize([str(source)], include_path=[str(tmp_path / "tree")], quiet=True,
                     language_level=3, force=True)
    return source.with_suffix(".c").exists() or source.with_suffix(".cpp").exists()


def test_the_wrappers_translate_with_cython(runtime_dir, root, tmp_path):
    _, wrapper, _ = render(runtime_dir, root)
    assert translates_with_cython(wrapper, runtime_dir, tmp_path)


def test_misdeclared_forms_are_located_errors(runtime_dir):
    text = SCHEMA.replace("    - {name: __enter__, impl: c_enter, returns: {type: Any, doc: "
                          "the context.}, doc: Enter.}\n", "").replace(
        "setter: c_set_enabled", "setter: c_set_enable").replace(
        "      static: true\n", "      static: yes please\n")
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    messages = [str(d) for d in raised.value.diagnostics]
    assert any("static of 'tensorplay.Function.apply' must be true or false" in m
               for m in messages)
    assert any("setter of property 'enabled' of 'tensorplay.no_grad': runtime class "
               "demo.GradModeCore declares no cdef method 'c_set_enable'" in m for m in messages)
    assert any("'tensorplay.no_grad' is a decorator, so it must declare __enter__" in m
               for m in messages)


SUBCLASS = textwrap.indent(textwrap.dedent("""\
    - name: Sum
      kind: python
      impl: demo.SumCore
      subclass_of: Function
      doc: A Function of its own.
    """), "  ")


def test_a_python_class_derives_from_the_class_it_is_a_subclass_of(runtime_dir, root):
    (runtime_dir / "demo.pyx").write_text(DEMO_PYX + "\n\nclass SumCore(FunctionCore):\n"
                                          "    pass\n")
    api, wrapper, stub = render(runtime_dir, root, SCHEMA + SUBCLASS)
    assert api.module("tensorplay").classes[-1].subclass_of == ("tensorplay", "Function")
    # Its own runtime class first (its members win), then the public class it is one of.
    assert "class Sum(_demo_classes.SumCore, Function):" in wrapper
    assert "class Sum(Function):" in stub
    compile(stub, "__init__.pyi", "exec")


def test_subclass_of_must_name_an_earlier_class_and_a_python_kind(runtime_dir):
    (runtime_dir / "demo.pyx").write_text(DEMO_PYX + "\n\nclass SumCore(FunctionCore):\n"
                                          "    pass\n")
    later = SCHEMA.replace("  - name: Function\n", SUBCLASS + "  - name: Function\n")
    with pytest.raises(SchemaError) as raised:
        build_api(later, runtime_dir)
    assert any("subclass_of of 'tensorplay.Sum' must name a class the schema declares before "
               "it, got 'Function'" in str(d) for d in raised.value.diagnostics)
    extension = SCHEMA + SUBCLASS.replace("kind: python", "kind: extension")
    with pytest.raises(SchemaError) as raised:
        build_api(extension, runtime_dir)
    assert any("subclass_of of 'tensorplay.Sum' needs kind: python, got 'extension'" in str(d)
               for d in raised.value.diagnostics)
