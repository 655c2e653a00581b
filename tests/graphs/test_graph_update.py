"""Graph update: without a GPU, the kernel signatures it relies on and its argument checks; on a
real GPU (marked gpu), recapture into an executable, kernel node parameters, rebinding."""
import gc
import itertools
import struct

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay._runtime.graphs import node_params
from tensorplay._runtime.kernels import signature as kernel_signature, nvrtc as kernels
from tensorplay._runtime.kernels.ops import Op
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from tests.graphs.graph_helpers import N, values, warmed

ELEMENT_TYPES = ("bool", "unsigned char", "signed char", "short", "int", "long long",
                 "half_bits", "bfloat16_bits", "float", "double")


def every_signature():
    common = kernels.read_kernel_source("common")
    for source_name in kernels.kernel_source_names():
        source = kernels.read_kernel_source(source_name)
        for kernel, element in itertools.product(kernel_signature.kernels_of(source),
                                                 ELEMENT_TYPES):
            prelude = (f"{common}\ntypedef {element} scalar_t;\ntypedef {element} target_t;\n"
                       f"typedef {element} result_t;\ntypedef {element} left_t;\n"
                       f"typedef {element} right_t;\n")
            yield kernel_signature.signature(source, prelude, kernel, kernels.KERNEL_CONSTANTS)


def test_every_shipped_kernel_declaration_reads_for_every_element_type():
    signatures = list(every_signature())
    assert len(signatures) > 200
    for signature in signatures:
        offset = 0
        for parameter in signature.parameters:
            assert parameter.offset >= offset and parameter.offset % parameter.align == 0
            offset = parameter.offset + parameter.size
        assert signature.size == offset


def plausible_arguments(signature):
    """Argument bytes a launch of signature could have: every integer 3 (a grid of 3 blocks
    of 2 for staging's frozen blocks_per_copy), Layouts of shape (2, 3), addresses nonzero."""
    data = bytearray(signature.size)
    for parameter in signature.parameters:
        if parameter.kind == "int":
            value = 2 if parameter.name == "blocks_per_copy" else 3
            data[parameter.offset:parameter.offset + parameter.size] = parameter.encode(value)
        elif parameter.kind == "pointer":
            struct.pack_into("<Q", data, parameter.offset, 0x10000)
        elif parameter.kind == "struct":
            for field in parameter.struct.fields:
                code = "<" + field.format
                for item in range(field.count):
                    value = 0x10000 if field.unit else {"ndim": 2}.get(field.name, 3)
                    struct.pack_into(code, data, parameter.offset + field.offset
                                     + item * struct.calcsize(code), value)
    return bytes(data)


def test_every_shipped_kernel_declares_its_extents_launch_rule_and_in_place():
    seen = set()
    for signature in every_signature():
        addresses = {parameter.offset + inside for parameter in signature.parameters
                     for inside in parameter.addresses}
        assert {access.offset for access in signature.accesses} == addresses, signature.kernel
        assert signature.launch in kernel_signature.LAUNCH_RULES
        assert (signature.launch == "any") == (not signature.launch_reason)
        assert isinstance(signature.in_place, bool)
        for access in signature.accesses:
            assert access.unit > 0 and access.role in (kernel_signature.READ,
                                                       kernel_signature.WRITE,
                                                       kernel_signature.UPDATE)
        extents = signature.extents(plausible_arguments(signature), (3, 1, 1), (2, 1, 1))
        assert len(extents) == len(signature.accesses)
        for (offset, role, low, high), access in zip(extents, signature.accesses):
            assert offset == access.offset and role == access.role
            assert low <= high and (low, high) != (0, 0) or access.name.startswith("copies.")
        seen.add(signature.kernel)
    assert {"fill", "binary_vector4", "copy_strided", "reduce_partial", "uniform",
            "stage_copies", "set_conditional", "tp_selftest_iota"} <= seen


def test_launch_rules_and_in_place_per_kernel_family():
    by_kernel = {signature.kernel: signature for signature in every_signature()}
    for name in ("fill", "binary", "binary_vector4", "binary_strided", "unary", "where",
                 "clamp_strided", "copy_strided"):
        assert by_kernel[name].launch == "any", name
    for name in ("reduce_dims", "uniform", "normal", "bernoulli", "randint32", "randint64"):
        assert by_kernel[name].launch == "grid", name
    for name in ("reduce_partial", "reduce_final", "stage_copies", "set_conditional",
                 "set_conditional_index", "clear_conditional", "set_replay_state",
                 "advance_replay_offset", "tp_selftest_iota"):
        assert by_kernel[name].launch == "fixed", name
    for name in ("binary", "binary_vector4", "binary_scalar", "compare", "unary", "add_scaled",
                 "clamp", "where"):
        assert by_kernel[name].in_place, name
    for name in ("binary_strided", "clamp_strided", "copy_strided", "reduce_partial",
                 "reduce_dims", "stage_copies"):
        assert not by_kernel[name].in_place, name
    assert by_kernel["stage_copies"].frozen_reason("blocks_per_copy")
    assert by_kernel["binary"].frozen_reason("count") is None


def test_every_shipped_source_has_no_stray_annotation_line():
    for source_name in kernels.kernel_source_names():
        source = kernels.read_kernel_source(source_name)
        lines = kernel_signature._annotations(source)
        assert set(lines) == set(kernel_signature.kernels_of(source))
        assert all(lines[kernel] for kernel in lines), source_name


ELEMENTWISE = kernels.read_kernel_source("elementwise")
FLOAT_PRELUDE = (f"{kernels.read_kernel_source('common')}\ntypedef float scalar_t;\n"
                 "typedef float result_t;\n")


def float_signature(source_name, kernel):
    return kernel_signature.signature(kernels.read_kernel_source(source_name), FLOAT_PRELUDE,
                                      kernel, kernels.KERNEL_CONSTANTS, source_name)


def arguments_of(signature, **values):
    """Argument bytes with the given values: ints, addresses, Layouts as (sizes, strides) and
    other structs as {field: value or list}."""
    data = bytearray(signature.size)
    for name, value in values.items():
        parameter = signature.parameter(name)
        if parameter.kind == "pointer":
            struct.pack_into("<Q", data, parameter.offset, value)
        elif parameter.type == "Layout":
            sizes, strides = value
            padding = (0,) * (8 - len(sizes))
            struct.pack_into("<8q8qi", data, parameter.offset, *sizes, *padding, *strides,
                             *padding, len(sizes))
        elif parameter.kind == "struct":
            fields = {field.name: field for field in parameter.struct.fields}
            for field_name, field_value in value.items():
                field = fields[field_name]
                items = field_value if isinstance(field_value, list) else [field_value]
                struct.pack_into(f"<{len(items)}{field.format}", data,
                                 parameter.offset + field.offset, *items)
        else:
            data[parameter.offset:parameter.offset + parameter.size] = parameter.encode(value)
    return bytes(data)


def extents_by_name(signature, data, grid=(1, 1, 1), block=(256, 1, 1)):
    return {access.name: (low, high) for access, (_, _, low, high)
            in zip(signature.accesses, signature.extents(data, grid, block))}


def test_reach_is_the_offsets_a_layout_indexes():
    assert kernel_signature.reach([]) == (0, 1)                 # a 0-d tensor: one element
    assert kernel_signature.reach([(2, 3), (3, 1)]) == (0, 6)   # contiguous (2, 3)
    assert kernel_signature.reach([(3, 1), (2, 3)]) == (0, 6)   # its transpose
    assert kernel_signature.reach([(4, 0), (5, 1)]) == (0, 5)   # a broadcast dimension
    assert kernel_signature.reach([(4, 10), (5, 1)]) == (0, 35)  # rows of a wider matrix
    assert kernel_signature.reach([(3, -2)]) == (-4, 1)         # a negative stride
    assert kernel_signature.reach([(2, 3), (0, 1)]) == (0, 0)   # a zero size: nothing
    assert kernel_signature.reach([(1, 99)]) == (0, 1)


def test_strided_extents_are_each_layouts_reach_in_bytes():
    signature = float_signature("elementwise", "binary_strided")
    data = arguments_of(signature, a=0x1000, a_layout=((4, 5), (5, 1)), b=0x2000,
                        b_layout=((4, 5), (0, 1)), out=0x3000, count=20, op=0)
    assert extents_by_name(signature, data) == {"a": (0, 80), "b": (0, 20), "out": (0, 80)}
    wide = arguments_of(signature, a=0x1000, a_layout=((4, 5), (10, 2)), b=0x2000,
                        b_layout=((4, 5), (0, 0)), out=0x3000, count=0, op=0)
    assert extents_by_name(signature, wide) == {"a": (0, 156), "b": (0, 4), "out": (0, 0)}
    empty = arguments_of(signature, a=0x1000, a_layout=((4, 0), (5, 1)), b=0x2000,
                         b_layout=((), ()), out=0x3000, count=0, op=0)
    assert extents_by_name(signature, empty) == {"a": (0, 0), "b": (0, 4), "out": (0, 0)}
    broken = arguments_of(signature, a=0x1000, a_layout=((4,), (1,)), out=0x3000, count=4)
    broken = bytearray(broken)
    struct.pack_into("<i", broken, signature.parameter("a_layout").offset + 128, 9)
    with pytest.raises(ValueError, match=r"kernel 'binary_strided': the extent of 'a' "
                                         r"\(reach\(a_layout\)\) cannot be computed: a_layout "
                                         r"has ndim 9"):
        signature.extents(bytes(broken))
    reduce = float_signature("reduce", "reduce_dims")
    data = arguments_of(reduce, input=0x1000, kept=((3,), (4,)), reduced=((4,), (1,)),
                        reduced_count=4, out=0x2000, out_count=3, divisor=1.0)
    assert extents_by_name(reduce, data) == {"input": (0, 48), "out": (0, 12)}


def test_contiguous_vector_philox_and_reduction_extents():
    vector = float_signature("elementwise", "binary_vector4")
    data = arguments_of(vector, a=0x1000, b=0x2000, out=0x3000, vector_count=10, op=0)
    assert extents_by_name(vector, data) == {"a": (0, 160), "b": (0, 160), "out": (0, 160)}
    negative = arguments_of(vector, a=0x1000, b=0x2000, out=0x3000, vector_count=-10, op=0)
    assert set(extents_by_name(vector, negative).values()) == {(0, 0)}
    uniform = float_signature("philox", "uniform")
    data = arguments_of(uniform, out=0x1000, count=10, state={"replay_state": 0x2000})
    assert extents_by_name(uniform, data) == {"out": (0, 40), "state.replay_state": (0, 16)}
    partial = float_signature("reduce", "reduce_partial")
    summed = arguments_of(partial, input=0x1000, count=0, partials=0x2000, op=Op.OP_SUM)
    assert extents_by_name(partial, summed, grid=(7, 1, 1)) == {"input": (0, 0),
                                                                "partials": (0, 28)}
    maximum = arguments_of(partial, input=0x1000, count=0, partials=0x2000, op=Op.OP_MAX)
    assert extents_by_name(partial, maximum)["input"] == (0, 4)  # max reads input[0]


def test_staging_and_selftest_extents_follow_the_launch():
    staging = kernel_signature.signature(kernels.read_kernel_source("staging"), "",
                                         "stage_copies", kernels.KERNEL_CONSTANTS)
    copies = {"target": [0x1000, 0x2000, 0x3000] + [0] * 29,
              "source": [0x4000, 0x5000, 0x6000] + [0] * 29,
              "nbytes": [100, 48, 999] + [7] * 29}
    data = arguments_of(staging, copies=copies, blocks_per_copy=2)
    found = extents_by_name(staging, data, grid=(4, 1, 1))  # two pairs of two blocks
    assert found["copies.target[0]"] == (0, 100) and found["copies.source[1]"] == (0, 48)
    assert found["copies.target[2]"] == (0, 0) and found["copies.source[31]"] == (0, 0)
    iota = kernel_signature.signature(kernels.read_kernel_source("selftest"), "",
                                      "tp_selftest_iota", kernels.KERNEL_CONSTANTS)
    data = arguments_of(iota, out=0x1000, count=1000)
    assert extents_by_name(iota, data, (2, 1, 1), (128, 1, 1)) == {"out": (0, 1024)}
    assert extents_by_name(iota, data, (8, 1, 1), (256, 1, 1)) == {"out": (0, 4000)}


MALFORMED = [
    ('extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k' has no annotation"),
    ('//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': the annotation does not declare what the kernel touches through 'out'"),
    ('//@ write out[count]\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': the annotation has no launch line"),
    ('//@ write out[count]\n//@ launch any\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': the annotation has no in-place line"),
    ('//@ write out[cnt]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     r"kernel 'k': annotation line 1 \(//@ write out\[cnt\]\): 'cnt' is not a parameter"),
    ('//@ write out[value]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, float value) {}',
     "kernel 'k': annotation line 1 .*'value' is a float"),
    ('//@ write out[count], out[count]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': the annotation declares 'out' twice"),
    ('//@ write out[count]\n//@ launch grid\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 2 .*launch grid needs its reason"),
    ('//@ write out[count]\n//@ launch sometimes\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 2 .*the launch rule is one of any, grid, fixed"),
    ('//@ write out[count]\n//@ launch any\n//@ in-place maybe\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 3 .*in-place is yes or no"),
    ('//@ write out[2 * reach(layout)]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, Layout layout) {}',
     r"kernel 'k': annotation line 1 .*reach\(\) must be a whole extent"),
    ('//@ write out[count $ 2]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     r"kernel 'k': annotation line 1 .*cannot read '\$ 2\]'"),
    ('//@ write out[count\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 1 .*the line ends before the ']' that closes the extent"),
    ('//@ write out[count]\n//@ launch any\n//@ in-place no\n//@ frozen out: no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 4 .*'out' is not a scalar parameter"),
    ('//@ write out[count]\n//@ launch any\n//@ in-place no\n//@ touches out\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': annotation line 4 .*unknown directive 'touches'"),
    ('//@ write out[count]\n//@ launch any\n//@ in-place no\n\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     "kernel 'k': line 1 .*an annotation line above no extern"),
    ('//@ read state[2]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(PhiloxState state) {}',
     r"kernel 'k': annotation line 1 .*'state' is a struct \(PhiloxState\), not a pointer"),
    ('//@ read state.seed[2]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(PhiloxState state) {}',
     "kernel 'k': annotation line 1 .*state.seed is not a device address"),
    ('//@ write out[min(count)]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(float* out, long long count) {}',
     r"kernel 'k': annotation line 1 .*min\(\) takes two values or more"),
    ('//@ write out[count]\n//@ launch any\n//@ in-place no\n'
     'extern "C" __global__ void k(vector4_t* out, long long count) {}',
     "kernel 'k': annotation line 1 .*the size of what 'out' .* points at is unknown"),
]


@pytest.mark.parametrize("source, message", MALFORMED)
def test_a_malformed_or_missing_annotation_is_an_error_naming_the_kernel(source, message):
    with pytest.raises(ValueError, match=message):
        kernel_signature.signature(source, "", "k", kernels.KERNEL_CONSTANTS)


def test_an_annotation_may_span_lines_and_index_struct_arrays():
    source = ('//@ read a[count]\n//@ read copies.source[j][j < 2 ? copies.nbytes[j] : 0]\n'
              '//@ write copies.target[j][copies.nbytes[j]], out[(count + 1) / 2]\n'
              '//@ launch fixed: its own reason\n//@ in-place no\n'
              'extern "C" __global__ void k(const float* a, StagedCopies copies, float* out,\n'
              '                             long long count) {}')
    signature = kernel_signature.signature(source, "", "k", kernels.KERNEL_CONSTANTS)
    assert signature.launch == "fixed" and signature.launch_reason == "its own reason"
    data = arguments_of(signature, a=0x1000, out=0x2000, count=7,
                        copies={"nbytes": [10, 20, 30] + [0] * 29})
    found = extents_by_name(signature, data)
    assert found["a"] == (0, 28) and found["out"] == (0, 16)
    assert found["copies.source[1]"] == (0, 20) and found["copies.source[2]"] == (0, 0)
    assert found["copies.target[2]"] == (0, 30)


def test_types_resolve_through_the_prelude_and_the_type_functions():
    common = kernels.read_kernel_source("common")
    source = kernels.read_kernel_source("elementwise")
    half = kernel_signature.signature(source, f"{common}\ntypedef half_bits scalar_t;\n",
                                      "binary_scalar", kernels.KERNEL_CONSTANTS)
    assert [(p.name, p.type, p.kind) for p in half.parameters] == [
        ("a", "half_bits*", "pointer"), ("scalar", "float", "float"),
        ("out", "half_bits*", "pointer"), ("count", "long long", "int"), ("op", "int", "int"),
        ("reverse", "int", "int")]
    integer = kernel_signature.signature(source, f"{common}\ntypedef int scalar_t;\n", "fill",
                                         kernels.KERNEL_CONSTANTS)
    assert integer.parameter("value").type == "int"


def test_struct_parameters_declare_the_addresses_they_hold():
    staging = kernel_signature.signature(kernels.read_kernel_source("staging"), "",
                                         "stage_copies", kernels.KERNEL_CONSTANTS)
    copies = staging.parameter("copies")
    assert copies.kind == "struct" and len(copies.addresses) == 64
    handle = kernel_signature.signature(kernels.read_kernel_source("graphs"), "",
                                        "set_conditional", kernels.KERNEL_CONSTANTS)
    assert [p.kind for p in handle.parameters] == ["handle", "pointer"]


def test_scalar_values_are_checked_against_their_parameter_type():
    source = kernels.read_kernel_source("philox")
    prelude = f"{kernels.read_kernel_source('common')}\ntypedef float scalar_t;\n"
    randint = kernel_signature.signature(source, prelude, "randint32", kernels.KERNEL_CONSTANTS)
    count, span = randint.parameter("count"), randint.parameter("range")
    assert count.decode(count.encode(-5)) == -5
    assert span.encode(2 ** 32 - 1) == struct.pack("<I", 2 ** 32 - 1)
    with pytest.raises(ValueError, match=r"argument 'range' \(unsigned int\) takes 0 to"):
        span.encode(-1)
    with pytest.raises(TypeError, match="argument 'count' is an integer"):
        count.encode(True)
    uniform = kernel_signature.signature(source, prelude, "uniform", kernels.KERNEL_CONSTANTS)
    low = uniform.parameter("low")
    assert low.decode(low.encode(0.5)) == 0.5
    with pytest.raises(ValueError, match="rounds to infinity"):
        low.encode(1e300)
    with pytest.raises(TypeError, match="floating-point"):
        low.encode("1")


def test_bfloat16_scalars_round_to_nearest_even():
    bfloat = kernel_signature.Parameter("value", "bfloat16_bits", "float", 2, 2, 0, "bfloat16",
                                        ())
    assert bfloat.decode(bfloat.encode(1.0)) == 1.0
    assert bfloat.decode(bfloat.encode(1.00390625)) == 1.0  # halfway: to the even neighbour
    for huge in (3.4e38, 3.5e38):
        with pytest.raises(ValueError, match="rounds to infinity"):
            bfloat.encode(huge)


def test_an_unknown_parameter_type_is_named():
    with pytest.raises(ValueError, match="unknown parameter type 'Mystery' of 'thing'"):
        kernel_signature.signature('extern "C" __global__ void k(Mystery thing) {}', "", "k",
                                   kernels.KERNEL_CONSTANTS)


def test_graph_update_arguments_are_checked_before_the_graph_is():
    g = cuda.CUDAGraph()
    with pytest.raises(TypeError, match="bindings must be a dict of static tensors"):
        g.rebind([1, 2])
    with pytest.raises(TypeError, match="bindings must be a dict of static tensors"):
        g.replay_with((1, 2))
    with pytest.raises(TypeError, match="node must be a KernelNode from kernel_nodes"):
        g.set_kernel_node_params(3)
    for hand_made in (graphs.KernelNode(), node_params.KernelNodeCore.__new__(
            node_params.KernelNodeCore)):
        with pytest.raises(ValueError, match=r"made by hand.*kernel_nodes\(\)"):
            g.set_kernel_node_params(hand_made, grid=1)
    with pytest.raises(TypeError, match="reinstantiate must be a bool"):
        g.recapture_end(reinstantiate="yes")
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        g.recapture_begin(capture_error_mode="loose")
    with pytest.raises(TypeError, match="cuda_graph must be a tensorplay.cuda.CUDAGraph"):
        graphs.recapture(object())
    with pytest.raises(TypeError, match="reinstantiate must be a bool"):
        graphs.recapture(g, reinstantiate=1)
    with pytest.raises(RuntimeError, match="recapture_end\\(\\) called without an open "
                                           "recapture"):
        g.recapture_end()
    for call in (g.kernel_nodes, lambda: g.rebind({})):
        with pytest.raises(RuntimeError, match="needs a captured graph"):
            call()


# --------------------------------------------------------------------------------------------
# On a GPU (marked gpu): recapture into an executable, kernel node parameters, rebinding
# --------------------------------------------------------------------------------------------

COUNT = 1 << 12


def captured(body, *, keep=False):
    g = cuda.CUDAGraph()
    if keep:
        g.enable_debug_mode()
    with cuda.graph(g):
        result = body()
    return g, result


def fill_node(g, value=None):
    return next(node for node in g.kernel_nodes() if node.name == "fill"
                and (value is None or node.arguments["value"] == value))


# -- updates from a recapture ------------------------------------------------------------------


@pytest.mark.gpu
def test_recapture_updates_the_executable_in_place_with_a_fresh_captures_results(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(4.0, COUNT)
    g, y = captured(lambda: x * 2 + 1)
    executable = g.raw_cuda_graph_exec()
    pool = g.pool_id
    with graphs.recapture(g):
        z = other * 3 + 1
    assert g.raw_cuda_graph_exec() == executable and g.pool_id == pool
    g.replay()
    assert values(z) == {13.0}
    fresh, expected = captured(lambda: other * 3 + 1)
    fresh.replay()
    assert values(z) == values(expected)
    g.recapture_begin()
    w = x * 5 + 1
    assert g.recapture_end() == "updated"
    g.replay()
    assert values(w) == {6.0}


@pytest.mark.gpu
def test_a_topology_mismatch_names_the_first_differing_node_and_keeps_the_old_executable(
        quiet_device):
    x, other = warmed(0.0, COUNT), warmed(5.0, COUNT)
    g, _ = captured(lambda: (x.__iadd__(1), x.__iadd__(1)))
    executable = g.raw_cuda_graph_exec()
    with pytest.raises(RuntimeError, match=r"node 2 \(kernel '\w+'\) is new.*previous "
                                           r"executable, which replays as before"):
        with graphs.recapture(g):
            x += 1
            x += 1
            x += 1
    with pytest.raises(RuntimeError, match=r"node 1 is a memcpy node in the recapture but a "
                                           r"kernel '\w+' node in the graph \(its type "
                                           r"changed\)"):
        with graphs.recapture(g):
            x += 1
            x.copy_(other)
    assert g.raw_cuda_graph_exec() == executable
    g.replay()
    assert values(x) == {2.0}
    assert memory.memory_stats()["capturing"] == 0


@pytest.mark.gpu
def test_reinstantiate_instantiates_a_recapture_of_another_topology(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.__iadd__(1))
    executable = g.raw_cuda_graph_exec()
    g.recapture_begin()
    x += 1
    x += 2
    assert g.recapture_end(reinstantiate=True) == "reinstantiated"
    assert g.raw_cuda_graph_exec() != executable
    g.replay()
    assert values(x) == {3.0}
    with graphs.recapture(g):  # the new executable takes updates from its own capture
        x += 5
        x += 5
    g.replay()
    assert values(x) == {13.0}


@pytest.mark.gpu
def test_an_exception_in_a_recapture_block_keeps_the_graph_as_it_was(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.__iadd__(1))
    with pytest.raises(ZeroDivisionError):
        with graphs.recapture(g):
            x += 7
            1 / 0
    g.replay()
    assert values(x) == {1.0}
    assert not graphs.is_current_stream_capturing()


@pytest.mark.gpu
def test_recapture_gives_back_blocks_only_the_replaced_capture_held(quiet_device):
    x = warmed(0.0, COUNT)
    held = tp.full((1 << 18,), 1.0, device="cuda")  # 1 MiB from the shared pool
    accelerator.synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        held.fill_(2.0)
        del held  # freed during the capture: held for the graph, which writes it
    active = memory.memory_stats()["active_bytes.all.current"]
    with pytest.raises(RuntimeError, match="is new"):
        with graphs.recapture(g):  # fails: the held block stays with the graph
            x.fill_(1.0)
            x += 1
    assert memory.memory_stats()["active_bytes.all.current"] == active
    g.recapture_begin()
    x.fill_(5.0)
    g.recapture_end()
    assert memory.memory_stats()["active_bytes.all.current"] <= active - (1 << 20)
    g.replay()
    assert values(x) == {5.0}


@pytest.mark.gpu
def test_repeated_recaptures_reuse_the_graphs_pool(quiet_device):
    x = warmed(1.0, COUNT)
    g, out = captured(lambda: x * 2)
    reserved = None
    for step in range(20):
        del out
        with graphs.recapture(g):
            out = x * (step + 3)
        if step == 2:
            reserved = memory.memory_reserved()
    assert memory.memory_reserved() == reserved
    g.replay()
    assert values(out) == {22.0}


# -- kernel node parameters --------------------------------------------------------------------


@pytest.mark.gpu
def test_kernel_nodes_show_dimensions_and_scalar_arguments(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(2.5))
    (node,) = g.kernel_nodes()
    assert node.name == "fill" and node.id == (0,)
    assert node.block == (256, 1, 1) and node.grid[1:] == (1, 1)
    assert node.arguments == {"count": COUNT, "value": 2.5}
    assert [name for name, _ in node.signature] == ["out", "count", "value"]
    assert dict(node.signature)["out"] == "float*"
    assert "fill" in repr(node)


@pytest.mark.gpu
def test_changed_arguments_take_effect_from_the_next_replay_only(quiet_device):
    x, total = warmed(0.0, COUNT), warmed(0.0, COUNT)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.fill_(1.0)
        total.add_(x)
    g.replay()  # queued before the change: runs with value 1
    g.set_kernel_node_params(fill_node(g), arguments={"value": 5.0})
    assert fill_node(g).arguments["value"] == 5.0
    g.replay()
    assert values(total) == {6.0}
    g.set_kernel_node_params(fill_node(g), arguments={"count": 16, "value": 9.0})
    g.replay()
    result = total.tolist()
    assert result[:16] == [15.0] * 16 and set(result[16:]) == {11.0}


@pytest.mark.gpu
def test_launch_dimensions_can_change(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(3.0))
    g.set_kernel_node_params(fill_node(g), grid=1, block=(32,))
    node = fill_node(g)
    assert node.grid == (1, 1, 1) and node.block == (32, 1, 1)
    g.replay()  # grid-stride loop: one block of 32 threads still fills everything
    assert values(x) == {3.0}


@pytest.mark.gpu
def test_kernel_arguments_inside_a_conditional_body_can_change(quiet_device):
    x = warmed(0.0, COUNT)
    predicate = tp.full((1,), True, device="cuda", dtype=tp.bool)
    g = cuda.CUDAGraph()
    g.capture_begin()
    g.begin_capture_to_if_node(predicate)
    x.fill_(2.0)
    g.end_capture_to_conditional_node()
    g.capture_end()
    node = fill_node(g, 2.0)
    assert len(node.id) == 3  # (conditional node, body 0, position)
    g.set_kernel_node_params(node, arguments={"value": 7.0})
    g.replay()
    assert values(x) == {7.0}


@pytest.mark.gpu
def test_invalid_node_parameters_are_refused_and_change_nothing(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(1.0))
    node = fill_node(g)
    with pytest.raises(ValueError, match="has no parameter 'length'; its parameters are out, "
                                         "count, value"):
        g.set_kernel_node_params(node, arguments={"length": 3})
    with pytest.raises(ValueError, match="argument 'out' .* is a pointer"):
        g.set_kernel_node_params(node, arguments={"out": 0})
    with pytest.raises(TypeError, match="argument 'count' is an integer"):
        g.set_kernel_node_params(node, arguments={"count": 2.5})
    with pytest.raises(ValueError, match=r"argument 'count' \(long long\) takes"):
        g.set_kernel_node_params(node, arguments={"count": 1 << 70})
    with pytest.raises(ValueError, match="block .* more than 1024 threads"):
        g.set_kernel_node_params(node, block=(64, 64))
    with pytest.raises(ValueError, match=r"grid\[0\] must be from 1"):
        g.set_kernel_node_params(node, grid=0, arguments={"value": 4.0})
    other, _ = captured(lambda: x.fill_(1.0))
    with pytest.raises(ValueError, match="belongs to another graph"):
        other.set_kernel_node_params(node, arguments={"value": 4.0})
    g.replay()
    assert values(x) == {1.0}
    with graphs.recapture(g):
        x.fill_(1.0)
    with pytest.raises(ValueError, match="call kernel_nodes\\(\\) again"):
        g.set_kernel_node_params(node, arguments={"value": 4.0})


# -- rebinding ---------------------------------------------------------------------------------


@pytest.mark.gpu
def test_rebinding_inputs_and_outputs_needs_no_copy(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(10.0, COUNT)
    g, y = captured(lambda: x * 2)
    out = tp.zeros(COUNT, device="cuda")
    g.rebind({x: other, y: out})
    g.replay()
    assert values(out) == {20.0}
    other.fill_(3.0)
    g.replay()
    assert values(out) == {6.0}
    g.rebind({other: x})  # the graph reads other now: it is the static tensor to name
    g.replay()
    assert values(out) == {2.0}


@pytest.mark.gpu
def test_rebinding_keeps_offsets_and_moves_copies_and_conditional_bodies(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(5.0, COUNT)
    copy = tp.zeros(COUNT, device="cuda")
    tail = tp.zeros(10, device="cuda")
    predicate = tp.full((1,), True, device="cuda", dtype=tp.bool)
    g = cuda.CUDAGraph()
    g.capture_begin()
    copy.copy_(x)                      # a memcpy node
    tail.copy_(x[100:110] * 1)         # a kernel reading at an offset into x
    g.begin_capture_to_if_node(predicate)
    copy.add_(x)                       # inside a conditional body
    g.end_capture_to_conditional_node()
    g.capture_end()
    other[100:110].fill_(7.0)
    g.rebind({x: other})
    g.replay()
    assert values(tail) == {7.0}
    result = copy.tolist()
    assert result[0] == 10.0 and result[105] == 14.0


@pytest.mark.gpu
def test_rebinding_moves_a_memset_node(quiet_device):
    runtime = pytest.importorskip("cuda.bindings.runtime")
    x, other = warmed(1.0, COUNT), warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    g.capture_begin()
    (status,) = runtime.cudaMemsetAsync(x.data_ptr(), 0, COUNT * 4,
                                        accelerator.current_stream().cuda_stream)
    assert status == runtime.cudaError_t.cudaSuccess
    g.capture_end()
    g.rebind({x: other})
    g.replay()
    assert values(other) == {0.0} and values(x) == {1.0}


@pytest.mark.gpu
def test_replay_with_binds_tensors_for_one_replay_on_several_streams(quiet_device):
    x = warmed(1.0, COUNT)
    g, y = captured(lambda: x * 2)
    inputs = [tp.full((COUNT,), float(i), device="cuda") for i in range(4)]
    outputs = [tp.zeros(COUNT, device="cuda") for _ in range(4)]
    streams = [cuda.Stream(), cuda.Stream()]
    accelerator.synchronize()
    for i in range(4):
        g.replay_with({x: inputs[i], y: outputs[i]}, stream=streams[i % 2])
    accelerator.synchronize()
    assert [values(out) for out in outputs] == [{0.0}, {2.0}, {4.0}, {6.0}]
    g.replay()  # the graph's own tensors again
    assert values(y) == {2.0}
    assert values(outputs[3]) == {6.0}


@pytest.mark.gpu
def test_a_rebinding_that_could_miss_a_reference_is_refused_and_changes_nothing(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(3.0, COUNT)
    y, big = tp.zeros(COUNT, device="cuda"), tp.zeros(COUNT, device="cuda")
    function = _foreign_kernel()
    g = cuda.CUDAGraph()
    g.capture_begin()
    y.copy_(x)
    _launch_foreign(function, x)
    g.capture_end()
    with pytest.raises(ValueError, match=r"node 1 \(kernel 'foreign_add_one'\) cannot be "
                                         r"scanned .* nothing was changed"):
        g.rebind({x: other})
    with pytest.raises(ValueError, match="nothing was changed"):
        g.replay_with({x: other})
    g.replay()
    assert values(y) == {1.0} and values(other) == {3.0}
    partial = cuda.CUDAGraph()
    with cuda.graph(partial):
        big.copy_(x)
    with pytest.raises(ValueError, match="covers the tensor's memory from an address before "
                                         "it"):
        partial.rebind({x[10:20]: other[10:20]})
    with pytest.raises(ValueError, match="no node of the graph refers to the memory"):
        partial.rebind({other: x})
    with pytest.raises(ValueError, match="the new tensor must have the static tensor's shape"):
        partial.rebind({x: other[:10]})
    with pytest.raises(ValueError, match="4 bytes off the static tensor's alignment"):
        partial.rebind({x[:10]: other[1:11]})
    partial.replay()
    assert values(big) == {2.0}


FOREIGN_SOURCE = """
extern "C" __global__ void foreign_add_one(float* data, long long count) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)blockDim.x * gridDim.x) data[i] += 1.0f;
}
"""


def _foreign_kernel():
    """A kernel loaded outside tensorplay's cache, as another library's would be."""
    driver = pytest.importorskip("cuda.bindings.driver")
    runtime = pytest.importorskip("cuda.bindings.runtime")
    _, major = runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, 0)
    _, minor = runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, 0)
    cubin = kernels.compile_cubin(FOREIGN_SOURCE, f"sm_{major}{minor}")
    status, library = driver.cuLibraryLoadData(cubin, [], [], 0, [], [], 0)
    assert status == driver.CUresult.CUDA_SUCCESS
    status, kernel = driver.cuLibraryGetKernel(library, b"foreign_add_one")
    assert status == driver.CUresult.CUDA_SUCCESS
    status, function = driver.cuKernelGetFunction(kernel)
    assert status == driver.CUresult.CUDA_SUCCESS
    (status,) = driver.cuFuncLoad(function)
    assert status == driver.CUresult.CUDA_SUCCESS
    return function


def _launch_foreign(function, tensor):
    import numpy
    driver = pytest.importorskip("cuda.bindings.driver")
    pointer = numpy.array([tensor.data_ptr()], dtype=numpy.uint64)
    count = numpy.array([tensor.numel()], dtype=numpy.int64)
    arguments = numpy.array([pointer.ctypes.data, count.ctypes.data], dtype=numpy.uint64)
    stream = driver.CUstream(accelerator.current_stream().cuda_stream)
    (status,) = driver.cuLaunchKernel(function, 4, 1, 1, 128, 1, 1, 0, stream,
                                      arguments.ctypes.data, 0)
    assert status == driver.CUresult.CUDA_SUCCESS


@pytest.mark.gpu
def test_reset_after_rebinding_and_updates_leaves_nothing_behind(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(2.0, COUNT)
    pools = memory.memory_stats().get("num_graph_pools", 0)
    g, y = captured(lambda: x + 1)
    g.rebind({x: other})
    g.replay_with({other: x})
    with graphs.recapture(g):
        y = other + 1
    g.replay()
    assert values(y) == {3.0}
    g.reset()
    del g, y
    gc.collect()
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == pools


# -- extents, launch rules and listed nodes (Note [Extents and bounds] in graph_update.pyx, Notes
# [Launch dimensions], [Listed nodes] in node_params.pyx) ----------------------------------------


def kernel_node(g, *names):
    """The first kernel node of g running one of the kernels named."""
    return next(node for node in g.kernel_nodes() if node.name in names)


@pytest.mark.gpu
def test_a_count_past_the_tensor_is_refused_and_the_graph_replays_as_before(quiet_device):
    x = warmed(1.0, COUNT)
    g, y = captured(lambda: x * 2)
    node = kernel_node(g, "binary_scalar")
    grid = node.grid
    with pytest.raises(ValueError, match=rf"argument 'count' = {3 * COUNT} of node 0 \(kernel "
                                         rf"'binary_scalar'\): the kernel would touch bytes "
                                         rf"\[0, {12 * COUNT}\) .* outside the bytes "
                                         rf"\[0, {4 * COUNT}\) it covered"):
        g.set_kernel_node_params(node, arguments={"count": 3 * COUNT})
    with pytest.raises(ValueError, match="argument 'count'"):  # with a valid change beside it
        g.set_kernel_node_params(node, grid=2, arguments={"scalar": 5.0, "count": COUNT + 1})
    node = kernel_node(g, "binary_scalar")
    assert node.arguments["count"] == COUNT and node.arguments["scalar"] == 2.0
    assert node.grid == grid
    g.replay()
    assert values(y) == {2.0}


@pytest.mark.gpu
def test_a_count_reduced_within_bounds_works_and_can_grow_back(quiet_device):
    x = tp.arange(0, COUNT, dtype=tp.float32, device="cuda")
    g, y = captured(lambda: x * 3)
    y.fill_(-1.0)
    g.set_kernel_node_params(kernel_node(g, "binary_scalar"), arguments={"count": COUNT // 2})
    g.replay()
    result = y.tolist()
    assert result[:COUNT // 2] == [3.0 * i for i in range(COUNT // 2)]
    assert set(result[COUNT // 2:]) == {-1.0}
    g.set_kernel_node_params(kernel_node(g, "binary_scalar"), arguments={"count": COUNT})
    g.replay()
    assert y.tolist() == [3.0 * i for i in range(COUNT)]


@pytest.mark.gpu
def test_a_grid_change_on_an_elementwise_kernel_gives_the_same_result(quiet_device):
    x = tp.arange(0, COUNT, dtype=tp.float32, device="cuda")
    w = tp.full((COUNT,), 0.5, device="cuda")
    g, y = captured(lambda: (x + w) * 3)
    expected = [(i + 0.5) * 3 for i in range(COUNT)]
    g.replay()
    assert y.tolist() == expected
    y.fill_(0.0)
    g.set_kernel_node_params(kernel_node(g, "binary", "binary_vector4"), grid=1, block=64)
    g.set_kernel_node_params(kernel_node(g, "binary_scalar"), grid=(3,), block=(512,))
    g.replay()
    assert y.tolist() == expected


@pytest.mark.gpu
def test_launch_dimensions_of_a_reduction_are_refused_and_the_sum_stays_exact(quiet_device):
    x = warmed(2.0, N)
    x.sum()  # load the reduction kernels before the capture
    accelerator.synchronize()
    g, total = captured(lambda: x.sum())
    g.replay()
    assert total.item() == 2.0 * N
    partial, final = kernel_node(g, "reduce_partial"), kernel_node(g, "reduce_final")
    for node, change in ((partial, {"grid": 1}), (partial, {"block": 128}),
                         (final, {"grid": 2}), (final, {"block": 512})):
        with pytest.raises(ValueError, match=r"the result of a reduction kernel \(reduce.cu\) "
                                             r"depends on its launch dimensions"):
            g.set_kernel_node_params(node, **change)
    assert kernel_node(g, "reduce_partial").grid == partial.grid
    total.fill_(0.0)
    g.replay()
    assert total.item() == 2.0 * N


@pytest.mark.gpu
def test_a_matrix_products_cublaslt_kernels_are_foreign(quiet_device):
    # cuBLASLt's kernels are another library's: neither their dimensions nor their arguments
    # can be changed, as for any kernel tensorplay did not launch.
    a = tp.full((64, 32), 1.0, device="cuda")
    b = tp.full((32, 48), 2.0, device="cuda")
    g, c = captured(lambda: a @ b)
    node = next(node for node in g.kernel_nodes() if node.arguments is None)
    with pytest.raises(ValueError, match="its launch dimensions cannot be changed"):
        g.set_kernel_node_params(node, grid=node.grid[0] + 1)  # a change: the same grid is none
    g.replay()
    assert values(c.reshape((-1,))) == {64.0}


@pytest.mark.gpu
def test_a_foreign_kernels_launch_dimensions_are_refused(quiet_device):
    x = warmed(1.0, COUNT)
    function = _foreign_kernel()
    g = cuda.CUDAGraph()
    g.capture_begin()
    _launch_foreign(function, x)
    g.capture_end()
    node = kernel_node(g, "foreign_add_one")
    with pytest.raises(ValueError, match="its launch dimensions cannot be changed"):
        g.set_kernel_node_params(node, grid=1)
    with pytest.raises(ValueError, match="its arguments cannot be set"):
        g.set_kernel_node_params(node, arguments={"count": 1})
    g.replay()
    assert values(x) == {2.0}


@pytest.mark.gpu
def test_a_rebinding_onto_less_than_a_node_covers_is_refused(quiet_device):
    half = COUNT // 2
    buffer = warmed(1.0, COUNT)
    g, y = captured(lambda: buffer * 2)  # reads all of buffer
    short = tp.full((half,), 5.0, device="cuda")
    wide = tp.full((COUNT,), 5.0, device="cuda")
    for fresh in (short, wide[:half]):  # a tensor of its own, a view of a larger one
        with pytest.raises(ValueError, match=rf"binding 0's new tensor does not cover what the "
                                             rf"graph's node 0 \(kernel 'binary_scalar'\) "
                                             rf"touches: it reads 'a', bytes \[0, {4 * COUNT}\) "
                                             rf"from the new tensor's start, and the tensor "
                                             rf"holds {4 * half} bytes"):
            g.rebind({buffer[:half]: fresh})
        y.fill_(0.0)
        with pytest.raises(ValueError, match="does not cover"):
            g.replay_with({buffer[:half]: fresh})
        assert values(y) == {0.0}  # nothing was launched
    g.replay()
    assert values(y) == {2.0} and values(wide) == {5.0} and values(short) == {5.0}
    g.rebind({buffer: wide})  # the whole of what the node reads: fine
    g.replay()
    assert values(y) == {10.0}


@pytest.mark.gpu
def test_a_rebinding_of_an_input_and_output_that_partly_overlap_is_refused(quiet_device):
    x = warmed(1.0, COUNT)
    g, y = captured(lambda: x * 2)
    shared = tp.full((COUNT + 8,), 3.0, device="cuda")
    for bindings in ({x: shared[:COUNT], y: shared[8:COUNT + 8]},
                     {x: shared[8:COUNT + 8], y: shared[:COUNT]}):
        with pytest.raises(ValueError, match=r"node 0 \(kernel 'binary_scalar'\) reads 'a' .* "
                                             r"and writes 'out' .*memory that partly "
                                             r"overlaps"):
            g.rebind(bindings)
        with pytest.raises(ValueError, match="partly overlaps"):
            g.replay_with(bindings)
    g.replay()
    assert values(y) == {2.0} and values(shared) == {3.0}


@pytest.mark.gpu
def test_an_in_place_rebinding_of_an_elementwise_kernel_works(quiet_device):
    x = warmed(1.0, COUNT)
    g, y = captured(lambda: x * 2)
    both = tp.full((COUNT,), 3.0, device="cuda")
    g.replay_with({x: both, y: both})
    assert values(both) == {6.0}
    g.rebind({x: both, y: both})
    g.replay()
    g.replay()
    assert values(both) == {24.0} and values(x) == {1.0}


@pytest.mark.gpu
def test_a_rebinding_of_a_graph_with_a_matrix_product_is_refused(quiet_device):
    # cuBLASLt's kernel arguments cannot be scanned for the addresses to move, so a rebinding
    # could miss one: refused, as for any foreign kernel, and nothing changes.
    a = tp.full((32, 32), 1.0, device="cuda")
    b = tp.full((32, 32), 2.0, device="cuda")
    g, c = captured(lambda: a @ b)
    target = tp.full((32, 32), 3.0, device="cuda")
    with pytest.raises(ValueError, match=r"cannot be scanned .* nothing was changed"):
        g.rebind({a: target})
    g.replay()
    assert values(c.reshape((-1,))) == {64.0} and values(target.reshape((-1,))) == {3.0}


@pytest.mark.gpu
def test_a_node_listed_before_reset_and_a_new_capture_is_refused(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(1.0))
    stale = fill_node(g)
    g.reset()
    with cuda.graph(g):
        x.fill_(2.0)  # the same topology: a fill at node 0 again
    for change in ({"arguments": {"value": 5.0}}, {"grid": 1}):
        with pytest.raises(ValueError, match=r"listed before the graph's executable changed.*"
                                             r"call kernel_nodes\(\) again"):
            g.set_kernel_node_params(stale, **change)
    g.replay()
    assert values(x) == {2.0}
    g.set_kernel_node_params(fill_node(g), arguments={"value": 5.0})
    g.replay()
    assert values(x) == {5.0}


@pytest.mark.gpu
def test_a_node_listed_before_a_reinstantiating_recapture_is_refused(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(1.0))
    stale = fill_node(g)
    g.recapture_begin()
    x.fill_(3.0)
    x += 1
    assert g.recapture_end(reinstantiate=True) == "reinstantiated"
    with pytest.raises(ValueError, match=r"call kernel_nodes\(\) again"):
        g.set_kernel_node_params(stale, arguments={"value": 9.0})
    g.replay()
    assert values(x) == {4.0}


@pytest.mark.gpu
def test_nodes_of_another_graph_and_hand_made_nodes_are_refused(quiet_device):
    x, other = warmed(0.0, COUNT), warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(1.0))
    h, _ = captured(lambda: other.fill_(7.0))
    with pytest.raises(ValueError, match=r"belongs to another graph.*kernel_nodes\(\)"):
        g.set_kernel_node_params(fill_node(h), arguments={"value": 4.0})
    for hand_made in (graphs.KernelNode(),
                      node_params.KernelNodeCore.__new__(node_params.KernelNodeCore)):
        with pytest.raises(ValueError, match=r"made by hand.*kernel_nodes\(\)"):
            g.set_kernel_node_params(hand_made, arguments={"value": 4.0})
    g.replay()
    h.replay()
    assert values(x) == {1.0} and values(other) == {7.0}
