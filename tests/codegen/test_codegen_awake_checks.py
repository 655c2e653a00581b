"""The wrappers' awake checks (codegen/render.py, Note [Awake checks]): tensor operations refuse
memory that a sleeping graph released, checked before the runtime is called; metadata members
check nothing."""
import re
import textwrap

import pytest

from codegen.load import SchemaError
from codegen.model import build_api, load_api
from codegen.render import Renderer


@pytest.fixture(scope="module")
def wrappers(root):
    api = load_api(root / "api.yaml", root / "runtime")
    return {o.path: o.content for o in Renderer(api, root / "templates").render_all()}


def body(source, header):
    """The lines of the wrapper whose def line starts with header, up to the next def."""
    start = source.index(header)
    following = re.search(r"\n\s*(@|def |cdef class |class )", source[start + len(header):])
    end = start + len(header) + following.start() if following else len(source)
    return source[start:end]


def checks(source, header):
    return re.findall(r"_core\.check_awake\w*\(.*\)", body(source, header))


def tensor_class(wrappers):
    source = wrappers["tensorplay/__init__.pyx"]
    return source[source.index("cdef class Tensor("):
                  source.index('_public.register_class("TensorCore"')]


def test_a_tensor_method_checks_self_and_its_tensor_operand_before_the_call(wrappers):
    source = tensor_class(wrappers)
    assert checks(source, "    def add(self,") == [
        '_core.check_awake(self, b"Tensor.add()", NULL)',
        '_core.check_awake_value(other, b"Tensor.add()", b"other")']
    add = body(source, "    def add(self,")
    assert add.index("check_awake") < add.index("return _elementwise.add_scaled(")
    # The reflected and in-place dunders too, and methods without a tensor operand.
    assert checks(source, "    def __radd__(self,") == [
        '_core.check_awake(self, b"Tensor.__radd__()", NULL)']
    assert checks(source, "    def __iadd__(self,")[1] == \
        '_core.check_awake_value(other, b"Tensor.__iadd__()", b"other")'
    for header in ("    def cpu(self)", "    def item(self)", "    def tolist(self)",
                   "    def __repr__(self)", "    def __dlpack__(self,",
                   "    def __cuda_array_interface__(self)", "    def sum(self,",
                   "    def __getitem__(self,"):
        assert checks(source, header)[0].startswith("_core.check_awake(self, "), header


def test_metadata_members_check_nothing(wrappers):
    tensor = tensor_class(wrappers)
    for header in ("    def stride(self,", "    def data_ptr(self)", "    def numel(self)",
                   "    def is_contiguous(self)", "    def size(self,", "    def dim(self)",
                   "    def transpose(self,", "    def view(self,", "    def detach(self)",
                   "    def __len__(self)", "    def __hash__(self)",
                   "    def record_stream(self,", "    def shape(self)", "    def dtype(self)",
                   "    def device(self)", "    def grad(self)", "    def requires_grad(self)",
                   "    def requires_grad(self, value)", "    def __dlpack_device__(self)"):
        assert checks(tensor, header) == [], header


def test_sequences_of_tensors_are_checked_item_by_item(wrappers):
    source = wrappers["tensorplay/__init__.pyx"]
    assert checks(source, "def cat(") == [
        '_core.check_awake_each(tensors, b"tensorplay.cat()", b"tensors")']
    assert checks(source, "def where(") == [
        '_core.check_awake_value(condition, b"tensorplay.where()", b"condition")',
        '_core.check_awake_value(input, b"tensorplay.where()", b"input")',
        '_core.check_awake_value(other, b"tensorplay.where()", b"other")']
    bases = wrappers["tensorplay/_bases.pyx"]
    assert "from tensorplay._runtime.tensor cimport core as _core" in bases
    assert checks(bases, "    def stage_and_launch(self,") == [
        '_core.check_awake_each(static_inputs, b"GraphBase.stage_and_launch()", '
        'b"static_inputs")',
        '_core.check_awake_each(inputs, b"GraphBase.stage_and_launch()", b"inputs")']
    assert checks(bases, "    def rebind(self,") == [
        '_core.check_awake_each(bindings, b"GraphBase.rebind()", b"bindings")']
    # A graph is no tensor: its own methods check their tensor arguments only.
    assert checks(bases, "    def replay(self,") == []


def test_modules_of_other_layers_check_their_tensor_arguments(wrappers):
    nn = wrappers["tensorplay/nn/__init__.pyx"]
    assert "from tensorplay._runtime.tensor cimport core as _core" in nn
    assert checks(nn, "    def forward(self, input)") == [
        '_core.check_awake_value(input, b"Linear.forward()", b"input")']
    assert checks(nn, "    def __call__(self, *args") == [  # **kwargs' values too
        '_core.check_awake_each(args, b"Module.__call__()", b"args")',
        '_core.check_awake_each(kwargs, b"Module.__call__()", b"kwargs")']
    # nn.Parameter is a tensor class (subclass_of Tensor): its own members check self.
    assert checks(nn, "    def __repr__(self)")[0] == \
        '_core.check_awake(self, b"Parameter.__repr__()", NULL)'


TENSOR_SCHEMA = textwrap.dedent("""\
    schema_version: 1
    modules:
    - name: tensorplay
      doc: Top.
      classes:
      - name: Tensor
        impl: core.TensorCore
        doc: A tensor.
        properties:
        - {name: shape, type: 'tuple[int, ...]', doc: The sizes., metadata: METADATA}
      - name: device
        impl: device.DeviceCore
        doc: A device.
        properties:
        - {name: index, impl: index_value, type: 'Optional[int]', doc: The index.FOREIGN}
    """)


def test_metadata_is_a_bool_of_tensor_class_members_only(root):
    text = TENSOR_SCHEMA.replace("METADATA", "true").replace("FOREIGN", "")
    api = build_api(text, root / "runtime")
    assert api.tensor_classes == frozenset({"Tensor"})
    assert api.modules[0].classes[0].properties[0].metadata
    with pytest.raises(SchemaError) as raised:
        build_api(TENSOR_SCHEMA.replace("METADATA", "1").replace(
            "FOREIGN", ", metadata: true"), root / "runtime")
    problems = [str(d) for d in raised.value.diagnostics]
    assert len(problems) == 2
    assert "metadata of property 'shape' of 'tensorplay.Tensor' must be true or false" in \
        problems[0]
    assert "only the members of a tensor class (impl core.TensorCore, or subclass_of one)" in \
        problems[1] and "'tensorplay.device'" in problems[1]
