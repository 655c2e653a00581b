"""Malformed schemas: every problem is reported with its file:line:col, all at once."""
import textwrap

import pytest

from codegen.load import SchemaError
from codegen.model import build_api
from codegen.types import ARGUMENT_SPELLINGS, BUILTINS, GENERICS

VOCABULARY = ", ".join(sorted(set(BUILTINS) | set(ARGUMENT_SPELLINGS) | set(GENERICS)))

VALID = textwrap.dedent("""\
    schema_version: 1
    modules:
    - name: tensorplay
      doc: Top.
      submodules: [tensorplay.accelerator]
      classes:
      - name: device
        impl: device.DeviceCore
        doc: A device.
        init:
          params:
          - {name: type, type: str, doc: the type.}
          - {name: index, type: int | None, default: ~, doc: the index.}
        properties:
        - {name: index, impl: index_value, type: 'Optional[int]', doc: The index.}
    - name: tensorplay.accelerator
      doc: Accelerator.
      functions:
      - name: device_count
        impl: device.device_count
        returns: {type: int, doc: the count.}
        doc: Number of devices.
      - name: synchronize
        impl: device.synchronize
        params:
        - name: device
          type: Device
          default: null
          doc: the device.
        doc: Wait.
    """)


def errors_of(text, runtime_dir):
    with pytest.raises(SchemaError) as raised:
        build_api(text, runtime_dir)
    return [str(d) for d in raised.value.diagnostics]


@pytest.fixture
def runtime_dir(root):
    return root / "runtime"


def test_valid_schema_builds(runtime_dir):
    api = build_api(VALID, runtime_dir)
    assert [m.name for m in api.modules] == ["tensorplay", "tensorplay.accelerator"]
    assert len(api.schema_hash) == 16


# (description, text replaced in VALID, replacement, every message expected, in order)
CASES = [
    ('unknown key in a function',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    colour: red\n',
     ["api.yaml:23:5: unknown key 'colour' in 'tensorplay.accelerator.device_count'; allowed keys: name, impl, doc, params, returns, raises, deprecated, since, example"]),
    ('unknown top-level key',
     'schema_version: 1\n',
     'schema_version: 1\nextra: 1\n',
     ["api.yaml:2:1: unknown key 'extra' in the schema; allowed keys: schema_version, modules, bases, params"]),
    ('duplicate key',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    doc: Again.\n',
     ["api.yaml:23:5: duplicate key 'doc' (first given at line 22)"]),
    ('missing function doc',
     '    doc: Number of devices.\n',
     '',
     ["api.yaml:19:5: 'tensorplay.accelerator.device_count' has no doc; every public item needs one"]),
    ('empty doc',
     '    doc: Number of devices.\n',
     "    doc: ''\n",
     ["api.yaml:22:10: 'doc' of 'tensorplay.accelerator.device_count' must be a non-empty string, got ''"]),
    ('missing param doc',
     '      doc: the device.\n',
     '',
     ["api.yaml:26:7: parameter 'device' of 'tensorplay.accelerator.synchronize' has no doc; every public item needs one"]),
    ('missing return doc',
     '{type: int, doc: the count.}',
     '{type: int}',
     ["api.yaml:21:14: return value of 'tensorplay.accelerator.device_count' has no doc; every public item needs one"]),
    ('unknown type name',
     '      type: Device\n',
     '      type: Devise\n',
     ["api.yaml:27:13: parameter 'device' of 'tensorplay.accelerator.synchronize': unknown type name 'Devise' in 'Devise'; expected one of " + VOCABULARY + " or a class declared in the schema"]),
    ('malformed generic',
     "type: 'Optional[int]'",
     "type: 'Optional[int'",
     ["api.yaml:15:46: property 'index' of 'tensorplay.device': malformed type 'Optional[int': expected ]"]),
    ('generic arity',
     "type: 'Optional[int]'",
     "type: 'dict[int]'",
     ["api.yaml:15:46: property 'index' of 'tensorplay.device': malformed type 'dict[int]': dict takes 2 argument(s), got 1"]),
    ('default does not fit',
     '      default: null\n      doc: the device.\n',
     '      default: 1.5\n      doc: the device.\n',
     ["api.yaml:28:16: default 1.5 of parameter 'device' of 'tensorplay.accelerator.synchronize' does not fit its type 'Device'"]),
    ('null default for non-optional',
     '{name: type, type: str, doc: the type.}',
     '{name: type, type: str, default: null, doc: the type.}',
     ["api.yaml:12:42: default None of parameter 'type' of 'tensorplay.device' constructor does not fit its type 'str'"]),
    ('bool default for int',
     'returns: {type: int, doc: the count.}',
     'params: [{name: n, type: int, default: true, doc: n.}]\n    returns: {type: int, doc: the count.}',
     ["api.yaml:21:44: default True of parameter 'n' of 'tensorplay.accelerator.device_count' does not fit its type 'int'"]),
    ('duplicate function name',
     '  - name: synchronize\n',
     '  - name: device_count\n',
     ["api.yaml:23:5: duplicate name 'device_count' in module 'tensorplay.accelerator' (first declared at line 19)"]),
    ('duplicate param name',
     '    doc: Wait.\n',
     '    - {name: device, type: int, default: 0, doc: again.}\n    doc: Wait.\n',
     ["api.yaml:30:7: duplicate name 'device' in the parameters of 'tensorplay.accelerator.synchronize' (first declared at line 26)"]),
    ('impl module missing',
     'impl: device.device_count',
     'impl: devices.device_count',
     ["api.yaml:20:11: impl of 'tensorplay.accelerator.device_count': no runtime module 'devices' (no runtime/**/devices.pxd) nor Python module (no python/devices.py); nearest runtime modules: device, device_ops; Python modules: distributed, functional, grad_clipping, graphed_callables, init, report, torch_bridge"]),
    ('impl function missing',
     'impl: device.device_count',
     'impl: device.device_counter',
     ["api.yaml:20:11: impl of 'tensorplay.accelerator.device_count': runtime/devices/device.pxd declares no cdef function 'device_counter'"]),
    ('impl class missing',
     'impl: device.DeviceCore',
     'impl: device.DevCore',
     ["api.yaml:8:11: impl of 'tensorplay.device': runtime/devices/device.pxd declares no class 'DevCore'"]),
    ('impl property method missing',
     'impl: index_value',
     'impl: index_number',
     ["api.yaml:15:27: impl of property 'index' of 'tensorplay.device': runtime class device.DeviceCore declares no cdef method 'index_number'"]),
    ('impl without module',
     'impl: device.device_count',
     'impl: device_count',
     ["api.yaml:20:11: impl of 'tensorplay.accelerator.device_count' must be 'runtime_module.symbol', got 'device_count'"]),
    ('bad parameter kind',
     '      default: null\n',
     '      default: null\n      kind: keyword\n',
     ["api.yaml:29:13: kind of parameter 'device' of 'tensorplay.accelerator.synchronize' must be one of positional, positional_only, var_positional, keyword_only, var_keyword, got 'keyword'"]),
    ('non-default after default',
     '    doc: Wait.\n',
     '    - {name: other, type: int, doc: other.}\n    doc: Wait.\n',
     ["api.yaml:30:7: parameter 'other' of 'tensorplay.accelerator.synchronize' has no default but follows a parameter with one"]),
    ('keyword-only last parameter is valid',
     '      default: null\n',
     '      default: null\n      kind: keyword_only\n',
     []),
    ('keyword param name',
     '{name: type, type: str, doc: the type.}',
     '{name: class, type: str, doc: the type.}',
     ["api.yaml:12:16: parameter of 'tensorplay.device' constructor name 'class' is a Python keyword; the generated code could not define or call it"]),
    ('undeclared submodule',
     'submodules: [tensorplay.accelerator]',
     'submodules: [tensorplay.accelerator, tensorplay.cuda]',
     ["api.yaml:5:40: submodule 'tensorplay.cuda' of module 'tensorplay' is not declared in the schema"]),
    ('submodule not a child',
     'submodules: [tensorplay.accelerator]',
     'submodules: [tensorplay.accelerator, other.thing]',
     ["api.yaml:5:40: submodule 'other.thing' of module 'tensorplay' must be a direct child, 'tensorplay.<name>'"]),
    ('wrong schema version',
     'schema_version: 1',
     'schema_version: 2',
     ['api.yaml:1:17: schema_version must be 1, got 2']),
    ('yaml syntax error',
     '  doc: Accelerator.\n',
     '  doc: [Accelerator.\n',
     ["api.yaml:18:12: YAML syntax error: expected ',' or ']', but got ':'"]),
    ('params not a list',
     '    params:\n    - name: device\n',
     '    params: {name: device}\n    x:\n    - name: device\n',
     ["api.yaml:25:13: 'params' of 'tensorplay.accelerator.synchronize' must be a list", "api.yaml:26:5: unknown key 'x' in 'tensorplay.accelerator.synchronize'; allowed keys: name, impl, doc, params, returns, raises, deprecated, since, example"]),
    ('raises names an unknown exception',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    raises:\n    - {type: Oops, doc: never.}\n',
     ["api.yaml:24:14: 'raises' of 'tensorplay.accelerator.device_count': 'Oops' is neither a builtin exception nor an exception class declared in the schema"]),
    ('raises a builtin exception',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    raises:\n    - {type: RuntimeError, doc: without a GPU.}\n',
     []),
    ('keyword function name',
     '  - name: device_count\n',
     '  - name: lambda\n',
     ["api.yaml:19:11: item of tensorplay.accelerator name 'lambda' is a Python keyword; the generated code could not define or call it"]),
    ('keyword property name',
     "{name: index, impl: index_value,",
     "{name: class, impl: index_value,",
     ["api.yaml:15:14: property of 'tensorplay.device' name 'class' is a Python keyword; the generated code could not define or call it"]),
    ('function parameter count differs from the .pxd declaration',
     '    doc: Wait.\n',
     '    - {name: extra, type: int, default: 0, doc: one too many.}\n    doc: Wait.\n',
     ["api.yaml:24:11: impl of 'tensorplay.accelerator.synchronize': runtime/devices/device.pxd declares synchronize() with 1 argument, but the wrapper passes 2 (one per parameter)"]),
    ('constructor parameter count differs from the .pxd declaration',
     "      - {name: index, type: int | None, default: ~, doc: the index.}\n",
     '',
     ["api.yaml:11:7: impl of 'tensorplay.device' constructor: runtime class device.DeviceCore declares init() with 2 arguments, but the wrapper passes 1 (one per parameter)"]),
    ('property implemented by a method that takes arguments',
     "{name: index, impl: index_value,",
     "{name: index, impl: init,",
     ["api.yaml:15:27: impl of property 'index' of 'tensorplay.device': runtime class device.DeviceCore declares init() with 2 arguments, but the wrapper passes 0 (one per parameter)"]),
    # Docs fields (model.py, Note [Schema rules]): examples are doctests that compile, declared
    # for the device they need; groups place every member once.
    ('an example that is not a doctest',
     '    doc: Number of devices.\n',
     "    doc: Number of devices.\n    example: 'print(1)'\n",
     ["api.yaml:23:14: 'example' of 'tensorplay.accelerator.device_count' holds no '>>> ' statement"]),
    ('an example that does not compile',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    example: |\n      >>> x = (1,\n      1\n',
     ["api.yaml:23:14: 'example' of 'tensorplay.accelerator.device_count', its statement at line 1 of the example, does not compile: '(' was never closed"]),
    ('a CPU example that uses CUDA',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    example: ">>> tensorplay.zeros(1, device=\'cuda\')"\n',
     ["api.yaml:23:14: 'example' of 'tensorplay.accelerator.device_count' uses CUDA: declare it as {code: ..., needs: cuda}, so that it runs only on a GPU"]),
    ('an example needing an unknown device',
     '    doc: Number of devices.\n',
     "    doc: Number of devices.\n    example: {code: '>>> 1', needs: tpu}\n",
     ["api.yaml:23:37: 'needs' of the example of 'tensorplay.accelerator.device_count' must be one of cpu, cuda, nccl, got 'tpu'"]),
    ('a CUDA example',
     '    doc: Number of devices.\n',
     '    doc: Number of devices.\n    example: {code: ">>> tensorplay.accelerator.device_count() > 0\\nTrue", needs: cuda}\n',
     []),
    ('groups naming an unknown member, a member twice, with an unknown key',
     '    properties:\n',
     '    groups:\n    - {title: A, members: [nope, index]}\n    - {title: B, members: [index]}\n'
     '    - {title: C, members: [index], extra: 1}\n    properties:\n',
     ["api.yaml:15:28: group 'A' of 'tensorplay.device' names 'nope', which is not a member of 'tensorplay.device'",
      "api.yaml:16:28: group 'B' of 'tensorplay.device' names 'index', which group 'A' already lists",
      "api.yaml:17:28: group 'C' of 'tensorplay.device' names 'index', which group 'A' already lists",
      "api.yaml:17:36: unknown key 'extra' in a group of 'tensorplay.device'; allowed keys: title, members"]),
]


@pytest.mark.parametrize("description, old, new, expected", CASES,
                         ids=[case[0] for case in CASES])
def test_malformed_schema_is_reported_with_location(runtime_dir, description, old, new,
                                                    expected):
    assert old in VALID, f"test setup: {old!r} not in the valid schema"
    text = VALID.replace(old, new, 1)
    if not expected:
        build_api(text, runtime_dir)  # valid variant
        return
    assert errors_of(text, runtime_dir) == expected


def test_parameter_kinds_must_follow_python_order(runtime_dir):
    text = VALID.replace("      default: null\n",
                         "      default: null\n      kind: keyword_only\n", 1)
    text = text.replace("    doc: Wait.\n",
                        "    - {name: late, type: int, default: 0, doc: late.}\n"
                        "    doc: Wait.\n")
    assert errors_of(text, runtime_dir) == [
        "api.yaml:31:7: parameter 'late' of 'tensorplay.accelerator.synchronize' is "
        "positional but follows a keyword_only parameter"]


def test_a_var_keyword_parameter_comes_last_once_and_without_a_default(runtime_dir):
    text = VALID.replace("    doc: Wait.\n",
                         "    - {name: options, type: Any, kind: var_keyword, doc: more.}\n"
                         "    - {name: late, type: int, default: 0, doc: late.}\n"
                         "    - {name: others, type: Any, kind: var_keyword, default: 1, "
                         "doc: more.}\n    doc: Wait.\n")
    messages = "\n".join(errors_of(text, runtime_dir))
    assert "'late' of 'tensorplay.accelerator.synchronize' is positional but follows a " \
           "var_keyword parameter" in messages
    assert "'others' of 'tensorplay.accelerator.synchronize' is var_keyword and cannot have " \
           "a default" in messages
    assert "'others' of 'tensorplay.accelerator.synchronize': only one var_keyword " \
           "parameter is allowed" in messages


def test_three_planted_errors_give_three_located_messages(runtime_dir):
    text = VALID.replace("impl: device.device_count", "impl: device.device_counter")
    text = text.replace("      type: Device\n", "      type: Devise\n")
    text = text.replace("    doc: Wait.\n", "    doc: Wait.\n    colour: red\n")
    messages = errors_of(text, runtime_dir)
    assert len(messages) == 3
    assert [m.split(": ")[0] for m in messages] == ["api.yaml:20:11", "api.yaml:27:13",
                                                      "api.yaml:31:5"]


def test_runtime_index_counts_parameters_across_lines_and_optional_ones(tmp_path):
    from codegen.runtime_index import Arity, index_runtime
    (tmp_path / "demo.pxd").write_text(
        "cdef object spread(object first,\n"
        "                   object second, object third)\n"
        "cdef int callback(int (*hook)(int, int), object value=*) except -1\n"
        "cdef int nothing() except -1\n"
        "cdef class Core:\n"
        "    cdef object c_method(self, object value)\n")
    demo = index_runtime(tmp_path)["demo"]
    assert demo.functions == {"spread": Arity(3, 3), "callback": Arity(1, 2),
                              "nothing": Arity(0, 0)}
    assert demo.methods_of("Core") == {"c_method": Arity(1, 1)}


BASES = textwrap.dedent("""\
    bases:
    - name: Shared
      impl: graph.GraphBase
      doc: Members two classes share.
      methods:
      - {name: first, impl: c_capture_end, returns: {type: None, doc: nothing.}, doc: First.}
      - {name: second, impl: c_reset, returns: {type: None, doc: nothing.}, doc: Second.}
      properties:
      - {name: pool_id, impl: c_pool, type: Any, doc: The pool.}
    """)
GRAPHS = textwrap.indent(textwrap.dedent("""\
      classes:
      - name: One
        extends: Shared
        doc: One.
      - name: Two
        extends: Shared
        doc: Two.
        methods:
        - {name: first, impl: c_instantiate, returns: {type: None, doc: nothing.}, doc: Overridden.}
        - {name: third, impl: c_enable_debug_mode, returns: {type: None, doc: nothing.}, doc: Third.}
    """), "  ")


def with_bases(bases=BASES, graphs=GRAPHS):
    return VALID.replace("schema_version: 1\n", "schema_version: 1\n" + bases) + graphs


def test_classes_share_the_members_of_their_base_and_override_by_name(runtime_dir):
    api = build_api(with_bases(), runtime_dir)
    module = api.module("tensorplay.accelerator")
    one, two = module.classes
    assert [(m.name, m.impl_name, m.doc) for m in one.methods] == [
        ("first", "c_capture_end", "First."), ("second", "c_reset", "Second.")]
    # The override keeps the inherited position; new members follow.
    assert [(m.name, m.impl_name, m.doc) for m in two.methods] == [
        ("first", "c_instantiate", "Overridden."), ("second", "c_reset", "Second."),
        ("third", "c_enable_debug_mode", "Third.")]
    assert one.properties == two.properties and one.properties[0].name == "pool_id"
    assert one.extends == two.extends == "Shared"
    # Both take the base's core class; the generated base class holds what they inherit.
    assert (one.impl_module, one.impl_name) == (two.impl_module, two.impl_name) \
        == ("graph", "GraphBase")
    assert one.inherited == {"first", "second", "pool_id"} and two.inherited == {"second", "pool_id"}
    (shared,) = api.bases
    assert [m.name for m in shared.methods] == ["first", "second"]
    assert [p.name for p in shared.properties] == ["pool_id"]
    assert shared.methods[0].doc == "First."


def test_a_class_naming_another_core_than_its_base_is_an_error(runtime_dir):
    text = with_bases(graphs=GRAPHS.replace("extends: Shared\n    doc: One.",
                                            "extends: Shared\n    impl: stream.StreamCore\n"
                                            "    doc: One."))
    assert errors_of(text, runtime_dir) == [
        "api.yaml:43:11: impl of 'tensorplay.accelerator.One' must be the impl of its base "
        "'Shared' (graph.GraphBase), from which it derives; leave it out"]


def test_a_base_member_every_class_overrides_is_an_error(runtime_dir):
    graphs = GRAPHS.replace("doc: One.\n", "doc: One.\n    methods:\n    - {name: first, impl: "
                            "c_reset, returns: {type: None, doc: nothing.}, doc: Own.}\n")
    assert errors_of(with_bases(graphs=graphs), runtime_dir) == [
        "api.yaml:7:5: member 'first' of base 'Shared' is overridden by every class that "
        "extends it; move it into those classes"]


def test_unknown_base_is_a_located_error(runtime_dir):
    text = with_bases(graphs=GRAPHS.replace("extends: Shared\n    doc: Two.",
                                            "extends: Sharde\n    doc: Two."))
    assert errors_of(text, runtime_dir) == [
        "api.yaml:45:14: 'tensorplay.accelerator.Two' extends unknown base 'Sharde'; the "
        "schema's bases: Shared"]


def test_circular_bases_are_located_errors(runtime_dir):
    bases = BASES + textwrap.dedent("""\
        - name: Loop
          impl: graph.GraphBase
          doc: Extends itself through Back.
          extends: Back
        - name: Back
          impl: graph.GraphBase
          doc: Closes the loop.
          extends: Loop
        """)
    text = with_bases(bases=bases, graphs=GRAPHS.replace("extends: Shared\n    doc: Two.",
                                                         "extends: Loop\n    doc: Two."))
    assert errors_of(text, runtime_dir) == [
        "api.yaml:14:12: base 'Loop' extends 'Back', which is circular: Back -> Loop -> Back",
        "api.yaml:18:12: base 'Back' extends 'Loop', which is circular: Loop -> Back -> Loop"]


def test_base_no_class_extends_is_an_error(runtime_dir):
    bases = BASES + "- {name: Unused, impl: graph.GraphBase, doc: Nobody extends it.}\n"
    assert errors_of(with_bases(bases=bases), runtime_dir) == [
        "api.yaml:11:3: base 'Unused' is extended by no class; remove it or extend it"]


def test_base_member_missing_from_the_core_class_is_reported_per_class(runtime_dir):
    bases = BASES.replace("impl: c_reset", "impl: c_missing")
    messages = errors_of(with_bases(bases=bases), runtime_dir)
    assert messages == [f"api.yaml:8:26: impl of 'tensorplay.accelerator.{name}.second': runtime "
                        "class graph.GraphBase declares no cdef method 'c_missing'"
                        for name in ("One", "Two")]


def test_a_conversion_the_runtime_does_not_declare_is_a_located_error(runtime_dir, monkeypatch):
    from codegen import types
    spelling = types.ARGUMENT_SPELLINGS["Device"]
    monkeypatch.setitem(types.ARGUMENT_SPELLINGS, "Device",
                        (spelling[0], spelling[1], "_device.device_index_argument", spelling[3]))
    assert errors_of(VALID, runtime_dir) == [
        "api.yaml:27:13: parameter 'device' of 'tensorplay.accelerator.synchronize': type "
        "'Device' converts through device.device_index_argument(), which runtime/devices/device.pxd "
        "does not declare"]


# -- saying each idea once: shared parameters, aliases, defaults ---------------------------------

SHARED = textwrap.dedent("""\
    params:
    - {name: device, type: Device, default: null, doc: the device; None for the current one.}
    - {key: seed_value, name: seed, type: int, doc: the seed.}
    """)


def with_shared(text, shared=SHARED):
    return text.replace("schema_version: 1\n", "schema_version: 1\n" + shared)


def test_a_shared_parameter_is_declared_once_and_named_by_its_key(runtime_dir):
    text = with_shared(VALID.replace(
        "    params:\n    - name: device\n      type: Device\n      default: null\n"
        "      doc: the device.\n",
        "    params: [device]\n")) + textwrap.indent(textwrap.dedent("""\
        - name: manual_seed
          impl: rng.manual_seed
          params: [seed_value]
          doc: Seed.
        - name: memory_allocated
          impl: statistics.memory_allocated
          params:
          - {use: device, doc: the device to ask about.}
          returns: {type: int, doc: bytes.}
          doc: Bytes.
        """), "  ")
    module = build_api(text, runtime_dir).module("tensorplay.accelerator")
    synchronize, manual_seed, allocated = module.functions[1:]
    assert (synchronize.params[0].name, synchronize.params[0].doc,
            synchronize.params[0].default) == ("device", "the device; None for the current one.",
                                               None)
    assert manual_seed.params[0].name == "seed"  # the key is not the parameter's name
    assert allocated.params[0].doc == "the device to ask about."  # a field that differs
    assert allocated.params[0].type == synchronize.params[0].type
    # Defaults: no 'returns' means None, documented as "nothing.".
    assert (manual_seed.returns.type.name, manual_seed.returns.doc) == ("None", "nothing.")


def test_unknown_and_unused_shared_parameters_are_located_errors(runtime_dir):
    text = with_shared(VALID.replace(
        "    params:\n    - name: device\n      type: Device\n      default: null\n"
        "      doc: the device.\n",
        "    params: [devcie]\n"))
    assert errors_of(text, runtime_dir) == [
        "api.yaml:3:3: shared parameter 'device' is used by no parameter list; remove it or "
        "refer to it",
        "api.yaml:4:3: shared parameter 'seed_value' is used by no parameter list; remove it or "
        "refer to it",
        "api.yaml:28:14: a parameter of 'tensorplay.accelerator.synchronize' refers to 'devcie', "
        "which the schema's params: list does not declare; declared: device, seed_value"]


def test_an_alias_takes_its_targets_declaration_and_says_it_is_deprecated(runtime_dir):
    text = VALID + "  - {name: sync, alias_of: synchronize, deprecated: use synchronize().}\n"
    module = build_api(text, runtime_dir).module("tensorplay.accelerator")
    original, alias = module.functions[1:]
    assert (alias.impl_module, alias.impl_name, alias.params, alias.returns) == (
        original.impl_module, original.impl_name, original.params, original.returns)
    assert alias.doc == "(Deprecated) Wait." and alias.deprecated == "use synchronize()."
    wrong = VALID + "  - {name: sync, alias_of: synchronise}\n"
    assert errors_of(wrong, runtime_dir) == [
        "api.yaml:31:28: 'tensorplay.accelerator.sync' is an alias of 'synchronise', which "
        "module 'tensorplay.accelerator' does not declare as a function"]


def test_a_methods_impl_defaults_to_c_and_its_name(runtime_dir):
    text = VALID + textwrap.indent(textwrap.dedent("""\
        classes:
        - name: Stream
          impl: stream.StreamCore
          doc: A stream.
          methods:
          - {name: query, returns: {type: bool, doc: whether it is done.}, doc: Whether done.}
          - {name: wait, doc: Nothing to find.}
        """), "  ")
    assert errors_of(text, runtime_dir) == [
        "api.yaml:37:14: impl of 'tensorplay.accelerator.Stream.wait': runtime class "
        "stream.StreamCore declares no cdef method 'c_wait'"]
    fixed = text.replace("    - {name: wait, doc: Nothing to find.}\n", "")
    stream = build_api(fixed, runtime_dir).module("tensorplay.accelerator").classes[0]
    assert [(m.name, m.impl_name) for m in stream.methods] == [("query", "c_query")]


# -- parameter kinds: bounded ints and fixed sets of strings -------------------------------------

def test_range_and_choices_make_the_wrapper_check_the_argument(runtime_dir):
    text = VALID + textwrap.indent(textwrap.dedent("""\
        - name: get_memory_info
          impl: statistics.get_memory_info
          params:
          - {name: device, type: int, default: 0, range: [0, 63], doc: an index.}
          doc: Info.
        - name: export
          impl: statistics.get_memory_info
          params:
          - {name: mode, type: str, default: fast, choices: [fast, slow], doc: a mode.}
          doc: Info.
        """), "  ")
    module = build_api(text, runtime_dir).module("tensorplay.accelerator")
    bounded, chosen = module.functions[-2:]
    assert bounded.params[0].conversion_call() == "_errors.int_arg(device, 'device', 0, 63)"
    assert chosen.params[0].conversion_call() == \
        "_errors.choice_arg(mode, 'mode', ('fast', 'slow'))"


def test_limits_that_do_not_fit_are_located_errors(runtime_dir):
    text = VALID + textwrap.indent(textwrap.dedent("""\
        - name: get_memory_info
          impl: statistics.get_memory_info
          params:
          - {name: device, type: int, default: 99, range: [0, 63], doc: an index.}
          doc: Info.
        - name: export
          impl: statistics.get_memory_info
          params:
          - {name: mode, type: float, choices: [fast], doc: a mode.}
          doc: Info.
        - name: other
          impl: statistics.get_memory_info
          params:
          - {name: mode, type: int, range: [5, 1], doc: a mode.}
          doc: Info.
        """), "  ")
    assert errors_of(text, runtime_dir) == [
        "api.yaml:34:42: default 99 of parameter 'device' of "
        "'tensorplay.accelerator.get_memory_info' is outside its range [0, 63]",
        "api.yaml:39:42: parameter 'mode' of 'tensorplay.accelerator.export': choices apply to "
        "type 'str' only, not 'float'",
        "api.yaml:44:38: parameter 'mode' of 'tensorplay.accelerator.other': range must be "
        "[low, high], two ints with low <= high, got [5, 1]"]
