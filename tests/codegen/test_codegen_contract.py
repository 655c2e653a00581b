"""The wrapper/runtime contract: what `impl:` may name and the C types the runtime takes.

A module function's impl may name a function of the Python layer (python/), which the generated
wrapper imports; validate checks that it exists and takes one argument per parameter. Every
parameter kind declares the C type its conversion delivers (codegen/types.py, Note [Parameter
kinds]); validate holds each runtime declaration, and each conversion's return type, to it, so
that the runtime never converts or checks again what the wrapper converted. Each problem is a
located error, like the arity errors.
"""
import shutil
import subprocess
import sys
import textwrap

import pytest

from codegen import types
from codegen.load import SchemaError
from codegen.model import build_api, load_api
from codegen.render import Renderer
from codegen.runtime_index import (RuntimeLayoutError, index_python, index_runtime,
                                   read_sentinels)

LAYER = textwrap.dedent("""\
    def run(first, second=None):
        return first, second


    def _helper():
        return None
    """)
DEMO_PXD = textwrap.dedent("""\
    from tensorplay._runtime.devices cimport stream as _stream
    from tensorplay._runtime.devices.stream cimport StreamCore

    cdef object typed(int device, StreamCore stream, bint flag, double ratio, str name,
                      int mode, unsigned int count, object anything, tuple shape)
    cdef object untyped(object device, _stream.StreamCore stream, object flag, object ratio,
                        object name, object mode, object count, object anything, object shape)
    cdef object counted(int small, unsigned long long large, object seed)
    cdef class DemoCore:
        cdef int init(self, bint flag) except -1
        cdef object c_set_ratio(self, double value)
        cdef object c_ratio(self)
    """)
SCHEMA = textwrap.dedent("""\
    schema_version: 1
    modules:
    - name: tensorplay
      doc: Top.
      functions:
      - name: run
        impl: layer_demo.run
        params:
        - {name: first, type: Any, doc: the first.}
        - {name: second, type: bool, default: false, doc: the second.}
        doc: Run.
      - name: typed
        impl: demo.typed
        params:
        - {name: device, type: Device, default: null, doc: a device.}
        - {name: stream, type: 'Optional[Stream]', default: null, doc: a stream.}
        - {name: flag, type: bool, default: false, doc: a flag.}
        - {name: ratio, type: float, default: 0.5, doc: a ratio.}
        - {name: name, type: str, default: x, doc: a name.}
        - {name: mode, type: str, default: one, choices: [one, two], doc: a mode.}
        - {name: count, type: int, default: 1, range: [0, 4294967295], doc: a count.}
        - {name: anything, type: Any, default: null, doc: anything.}
        - {name: shape, type: int, kind: var_positional, doc: a shape.}
        doc: Typed.
      classes:
      - name: Stream
        impl: stream.StreamCore
        doc: A stream.
      - name: Demo
        impl: demo.DemoCore
        doc: A demo.
        init:
          params:
          - {name: flag, type: bool, default: false, doc: a flag.}
        properties:
        - {name: ratio, type: float, setter: c_set_ratio, doc: A ratio.}
    """)


@pytest.fixture
def workspace(tmp_path, root):
    """A copy of the runtime with demo.pxd added, and a Python layer beside it."""
    shutil.copytree(root / "runtime", tmp_path / "runtime",
                    ignore=shutil.ignore_patterns("__pycache__", "*.cu"))
    (tmp_path / "runtime" / "demo.pxd").write_text(DEMO_PXD)
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "layer_demo.py").write_text(LAYER)
    return tmp_path


def errors_of(text, runtime_dir):
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    return [str(diagnostic) for diagnostic in raised.value.diagnostics]


# -- impl: a function of the Python layer -----------------------------------------------------


def test_a_python_function_implements_a_module_function_and_is_imported_last(workspace, root):
    api = build_api(SCHEMA, workspace / "runtime")
    run = api.module("tensorplay").functions[0]
    assert (run.impl_module, run.impl_name, run.python) == ("layer_demo", "run", True)
    module = api.module("tensorplay")
    assert "layer_demo" not in module.runtime_modules()
    assert module.python_modules() == ["layer_demo"]
    wrapper = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}[
        "tensorplay.pyx"]
    assert "return _layer_demo.run(first, _errors.bool_arg(second, 'second'))" in wrapper
    assert "cimport layer_demo" not in wrapper
    # After everything the module defines and registers: the Python layer uses the module.
    assert wrapper.rstrip().endswith("from tensorplay._python import layer_demo as _layer_demo")
    assert wrapper.index("_public.register_class(\"DemoCore\", Demo)") < wrapper.index(
        "from tensorplay._python import")


def test_a_missing_python_function_is_a_located_error(workspace):
    text = SCHEMA.replace("impl: layer_demo.run", "impl: layer_demo.walk")
    assert errors_of(text, workspace / "runtime") == [
        "api.yaml:7:11: impl of 'tensorplay.run': python/layer_demo.py defines no function "
        "'walk'"]


def test_a_python_function_of_another_arity_is_a_located_error(workspace):
    text = SCHEMA.replace("    doc: Run.\n",
                          "    - {name: third, type: Any, default: null, doc: more.}\n"
                          "    doc: Run.\n")
    assert errors_of(text, workspace / "runtime") == [
        "api.yaml:7:11: impl of 'tensorplay.run': python/layer_demo.py defines run() with 1 to "
        "2 arguments, but the wrapper passes 3 (one per parameter)"]
    private = SCHEMA.replace("impl: layer_demo.run", "impl: layer_demo._helper")
    assert errors_of(private, workspace / "runtime") == [
        "api.yaml:7:11: impl of 'tensorplay.run': python/layer_demo.py defines _helper() with 0 "
        "arguments, but the wrapper passes 2 (one per parameter)"]


def test_an_unknown_module_of_a_function_names_both_layers(workspace):
    text = SCHEMA.replace("impl: layer_demo.run", "impl: nowhere.run")
    [message] = errors_of(text, workspace / "runtime")
    assert message.startswith("api.yaml:7:11: impl of 'tensorplay.run': no runtime module "
                              "'nowhere' (no runtime/**/nowhere.pxd) nor Python module (no "
                              "python/nowhere.py); nearest runtime modules: ")
    assert message.endswith("; Python modules: layer_demo")


def test_only_a_module_function_may_name_the_python_layer(workspace):
    text = SCHEMA.replace("    properties:\n",
                          "    methods:\n"
                          "    - {name: make, static: true, impl: layer_demo.run, doc: Make.}\n"
                          "    properties:\n")
    [message] = errors_of(text, workspace / "runtime")
    assert message.startswith("api.yaml:36:40: impl of 'tensorplay.Demo.make': no runtime module "
                              "'layer_demo' (no runtime/**/layer_demo.pxd); nearest runtime modules: ")


def test_a_python_module_named_like_a_runtime_module_is_refused(workspace):
    (workspace / "python" / "stream.py").write_text("def run():\n    pass\n")
    runtime = index_runtime(workspace / "runtime")
    with pytest.raises(RuntimeLayoutError, match=r"python/stream.py and "
                                                 r"runtime/devices/stream share the name 'stream'"):
        index_python(workspace / "python", runtime)


def test_a_name_clash_is_a_usage_error_of_the_command_line(workspace, root):
    for name in ("api.yaml", "codegen", "templates"):
        copy = shutil.copytree if (root / name).is_dir() else shutil.copy
        copy(root / name, workspace / name)
    shutil.copy(root / "python" / "graphed_callables.py", workspace / "python")
    (workspace / "python" / "stream.py").write_text("def run():\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "codegen", "validate"], cwd=workspace,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert "python/stream.py and runtime/devices/stream share the name 'stream'" in result.stderr


def test_the_schema_implements_make_graphed_callables_in_the_python_layer(root):
    api = load_api(root / "api.yaml", root / "runtime")
    function = api.find("tensorplay.cuda.graphs", "make_graphed_callables")
    assert (function.impl_module, function.python) == ("graphed_callables", True)
    assert api.runtime_packages["graphed_callables"] == "tensorplay._python"


# -- the C types each kind delivers -----------------------------------------------------------


def test_each_kind_reaches_the_runtime_in_the_c_type_it_declares(workspace):
    api = build_api(SCHEMA, workspace / "runtime")
    typed = api.module("tensorplay").functions[1]
    assert [p.c_types()[0] for p in typed.params] == [
        "int", "StreamCore", "bint", "double", "str", "int", "unsigned int", "object", "tuple"]


def test_a_runtime_declaration_in_another_c_type_is_a_located_error_per_parameter(workspace):
    text = SCHEMA.replace("impl: demo.typed", "impl: demo.untyped")
    declared = "impl of 'tensorplay.typed': runtime/demo.pxd declares untyped() taking"
    # Reported in the order of their text (all at the impl).
    assert errors_of(text, workspace / "runtime") == [
        f"api.yaml:13:11: {declared} 'count' as object, but the wrapper passes it as one of "
        "unsigned int, uint32_t, long long, int64_t, Py_ssize_t, unsigned long long, uint64_t "
        "or size_t (type 'int' with a range converts through errors.int_arg())",
        f"api.yaml:13:11: {declared} 'device' as object, but the wrapper passes it as int (type "
        "'Device' converts through device.device_index_arg())",
        f"api.yaml:13:11: {declared} 'flag' as object, but the wrapper passes it as bint (type "
        "'bool' converts through errors.bool_arg())",
        f"api.yaml:13:11: {declared} 'mode' as object, but the wrapper passes it as int (type "
        "'str' with choices (passed as the choice's index) converts through "
        "errors.choice_arg())",
        f"api.yaml:13:11: {declared} 'ratio' as object, but the wrapper passes it as double (type "
        "'float' converts through errors.float_arg())",
        f"api.yaml:13:11: {declared} 'shape' as object, but the wrapper passes it as tuple (a "
        "var_positional parameter is passed as the tuple of its arguments)"]


def test_a_str_may_be_taken_as_object_and_a_cimported_class_by_its_module(workspace):
    # untyped() declares name as object (a str needs no conversion) and stream as
    # _stream.StreamCore: neither is an error above.
    runtime = index_runtime(workspace / "runtime")
    assert runtime["demo"].functions["untyped"].types[:2] == ("object", "StreamCore")


def test_a_bounded_int_is_declared_in_a_c_integer_type_that_holds_its_range(workspace):
    functions = textwrap.indent(textwrap.dedent("""\
        - name: counted
          impl: demo.counted
          params:
          - {name: small, type: int, range: [-5, 5], doc: small.}
          - {name: large, type: int, range: [0, 18446744073709551615], doc: large.}
          - {name: seed, type: int, range: [-9223372036854775808, 18446744073709551615], doc: any.}
          doc: Counted.
        """), "  ")
    text = SCHEMA.replace("  classes:\n", functions + "  classes:\n")
    build_api(text, workspace / "runtime")  # int, unsigned long long; a seed fits none: object
    too_wide = text.replace("range: [-5, 5]", "range: [-5, 4294967296]")
    assert errors_of(too_wide, workspace / "runtime") == [
        "api.yaml:26:11: impl of 'tensorplay.counted': runtime/demo.pxd declares counted() taking "
        "'small' as int, but the wrapper passes it as one of long long, int64_t or Py_ssize_t "
        "(type 'int' with a range converts through errors.int_arg())"]
    assert types.integer_c_types(-2 ** 63, 2 ** 64 - 1) == ("object",)


def test_constructors_and_setters_are_held_to_the_c_types_too(workspace):
    demo = workspace / "runtime" / "demo.pxd"
    demo.write_text(DEMO_PXD.replace("init(self, bint flag)", "init(self, object flag)"))
    assert errors_of(SCHEMA, workspace / "runtime") == [
        "api.yaml:33:7: impl of 'tensorplay.Demo' constructor: runtime class demo.DemoCore "
        "declares init() taking 'flag' as object, but the wrapper passes it as bint (type 'bool' "
        "converts through errors.bool_arg())"]
    demo.write_text(DEMO_PXD.replace("c_set_ratio(self, double value)", "c_set_ratio(self, value)"))
    assert errors_of(SCHEMA, workspace / "runtime") == [
        "api.yaml:36:42: impl of property 'ratio' of 'tensorplay.Demo': runtime class "
        "demo.DemoCore declares c_set_ratio() taking 'value' as object, but the wrapper passes it "
        "as double (type 'float' converts through errors.float_arg())"]


def test_a_conversion_declared_returning_another_c_type_is_a_located_error(workspace):
    errors_pxd = workspace / "runtime" / "base" / "errors.pxd"
    errors_pxd.write_text(errors_pxd.read_text().replace(
        "cdef bint bool_arg(object value, str argument) except -1",
        "cdef object bool_arg(object value, str argument)"))
    located = {"second": "api.yaml:10:28", "flag": "api.yaml:17:26"}
    assert errors_of(SCHEMA, workspace / "runtime") == [
        f"{located[name]}: parameter '{name}' of '{what}': type 'bool' converts through "
        "errors.bool_arg(), which runtime/base/errors.pxd declares returning object, but the "
        "kind delivers bint (codegen/types.py, Note [Parameter kinds])"
        for name, what in (("second", "tensorplay.run"), ("flag", "tensorplay.typed"))] + [
        "api.yaml:34:28: parameter 'flag' of 'tensorplay.Demo' constructor: type 'bool' converts "
        "through errors.bool_arg(), which runtime/base/errors.pxd declares returning object, but "
        "the kind delivers bint (codegen/types.py, Note [Parameter kinds])"]


def test_the_runtime_index_reads_each_parameter_type_and_return_type(tmp_path):
    (tmp_path / "spelled.pxd").write_text(textwrap.dedent("""\
        cdef inline _stream.StreamCore spelled(_stream.StreamCore a, const char *text,
                                               bint flag=*, value, unsigned  long long n)
        cdef double ratio(object value) except? -1.0
        """))
    spelled = index_runtime(tmp_path)["spelled"]
    assert spelled.functions["spelled"].types == (
        "StreamCore", "const char*", "bint", "object", "unsigned long long")
    assert spelled.returns == {"spelled": "StreamCore", "ratio": "double"}


# -- choices as indices, sentinels from the runtime, paths as str -----------------------------


def test_capture_modes_arrive_as_their_cuda_stream_capture_mode(root):
    """graph.pyx uses a capture_error_mode's index as its cudaStreamCaptureMode."""
    runtime = pytest.importorskip("cuda.bindings.runtime",
                                  reason="cuda-bindings is not installed")
    api = load_api(root / "api.yaml", root / "runtime")
    modes = {p.choices for m in api.modules for f in m.functions for p in f.params
             if p.name == "capture_error_mode"}
    assert modes == {("global", "thread_local", "relaxed")}
    enum = runtime.cudaStreamCaptureMode
    assert [int(enum.cudaStreamCaptureModeGlobal), int(enum.cudaStreamCaptureModeThreadLocal),
            int(enum.cudaStreamCaptureModeRelaxed)] == [0, 1, 2]


def test_the_unset_sentinel_is_the_runtimes(root):
    assert read_sentinels(root / "runtime") == {"UNSET": "__unset__"}
    assert types.UNSET == "__unset__"
    assert types.BUILTINS["Unset"][0] == "Literal['__unset__']"
    api = load_api(root / "api.yaml", root / "runtime")
    outputs = {o.path: o.content for o in Renderer(api, root / "templates").render_all()}
    assert "UNSET" not in outputs["tensorplay/_schema.py"]  # the runtime no longer reads it there


def test_a_missing_sentinels_file_is_named(tmp_path):
    with pytest.raises(RuntimeLayoutError, match=r"runtime/base/sentinels.py: cannot read the "
                                                 r"runtime's sentinels"):
        read_sentinels(tmp_path)


def test_path_true_checks_a_str_once_as_a_path(workspace):
    text = SCHEMA.replace("{name: name, type: str, default: x, doc: a name.}",
                          "{name: name, type: str, path: true, default: x, doc: a name.}")
    api = build_api(text, workspace / "runtime")
    param = api.module("tensorplay").functions[1].params[4]
    assert param.conversion_call() == "_errors.str_path_arg(name, 'name')"
    assert param.type.annotation() == "str"  # the stub and reference keep the reference's str
    wrong = [text.replace("type: str, path: true, default: x", "type: int, path: true, default: 3"),
             text.replace("path: true", "path: 1"),
             text.replace("path: true, default: x", "path: true, default: one, choices: [one]")]
    assert [errors_of(variant, workspace / "runtime") for variant in wrong] == [
        ["api.yaml:19:37: parameter 'name' of 'tensorplay.typed': path applies to type 'str' "
         "only, not 'int' (type Path takes os.PathLike too)"],
        ["api.yaml:19:37: parameter 'name' of 'tensorplay.typed': path must be true (a str that "
         "names a file), got 1; leave it out for any other str"],
        ["api.yaml:19:37: parameter 'name' of 'tensorplay.typed' has both choices and path"]]
