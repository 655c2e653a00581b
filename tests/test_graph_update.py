"""Graph update without a GPU: the kernel signatures it relies on, and its argument checks."""
import itertools
import struct

import pytest

from tensorplay import cuda
from tensorplay._runtime.kernels import signature as kernel_signature, nvrtc as kernels
from tensorplay._runtime.kernels.ops import Op
from tensorplay.cuda import graphs

ELEMENT_TYPES = ("bool", "unsigned char", "signed char", "short", "int", "long long",
                 "half_bits", "bfloat16_bits", "float", "double")


def every_signature():
    common = kernels.read_kernel_source("common")
    for source_name in kernels.kernel_source_names():
        source = kernels.read_kernel_source(source_name)
        for kernel, element in itertools.product(kernel_signature.kernels_of(source),
                                                 ELEMENT_TYPES):
            prelude = (f"{common}\ntypedef {element} scalar_t;\ntypedef {element} target_t;\n"
                       f"typedef {element} result_t;\n")
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
    assert {"fill", "binary_vector4", "copy_strided", "reduce_partial", "matmul", "uniform",
            "stage_copies", "set_conditional", "tp_selftest_iota"} <= seen


def test_launch_rules_and_in_place_per_kernel_family():
    by_kernel = {signature.kernel: signature for signature in every_signature()}
    for name in ("fill", "binary", "binary_vector4", "binary_strided", "unary", "where",
                 "clamp_strided", "copy_strided"):
        assert by_kernel[name].launch == "any", name
    for name in ("matmul", "reduce_dims", "uniform", "normal", "bernoulli", "randint32",
                 "randint64"):
        assert by_kernel[name].launch == "grid", name
    for name in ("reduce_partial", "reduce_final", "stage_copies", "set_conditional",
                 "set_conditional_index", "clear_conditional", "set_replay_state",
                 "advance_replay_offset", "tp_selftest_iota"):
        assert by_kernel[name].launch == "fixed", name
    for name in ("binary", "binary_vector4", "binary_scalar", "compare", "unary", "add_scaled",
                 "clamp", "where"):
        assert by_kernel[name].in_place, name
    for name in ("binary_strided", "clamp_strided", "copy_strided", "reduce_partial",
                 "reduce_dims", "matmul", "stage_copies"):
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
    """Argument bytes with the given values: ints, addresses, Layouts as (sizes, strides),
    MatrixStrides as (batch, row, column) and other structs as {field: value or list}."""
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
        elif parameter.type == "MatrixStrides":
            struct.pack_into("<3q", data, parameter.offset, *value)
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


def test_contiguous_vector_matmul_philox_and_reduction_extents():
    vector = float_signature("elementwise", "binary_vector4")
    data = arguments_of(vector, a=0x1000, b=0x2000, out=0x3000, vector_count=10, op=0)
    assert extents_by_name(vector, data) == {"a": (0, 160), "b": (0, 160), "out": (0, 160)}
    negative = arguments_of(vector, a=0x1000, b=0x2000, out=0x3000, vector_count=-10, op=0)
    assert set(extents_by_name(vector, negative).values()) == {(0, 0)}
    matmul = float_signature("matmul", "matmul")
    # a: 2 x (3, 4) row-major; b: (4, 5) broadcast over the batch and transposed; c: 2 x (3, 5)
    data = arguments_of(matmul, a=0x1000, a_strides=(12, 4, 1), b=0x2000, b_strides=(0, 1, 4),
                        c=0x3000, batch=2, m=3, n=5, k=4)
    assert extents_by_name(matmul, data) == {"a": (0, 96), "b": (0, 80), "c": (0, 120)}
    no_k = arguments_of(matmul, a=0x1000, a_strides=(12, 4, 1), b=0x2000, b_strides=(0, 1, 4),
                        c=0x3000, batch=2, m=3, n=5, k=0)
    assert extents_by_name(matmul, no_k) == {"a": (0, 0), "b": (0, 0), "c": (0, 120)}
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
    from tensorplay._runtime.graphs import graph_update
    for hand_made in (graphs.KernelNode(), graph_update.KernelNodeCore.__new__(
            graph_update.KernelNodeCore)):
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
