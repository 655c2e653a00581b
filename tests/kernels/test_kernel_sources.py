"""Every kernel source compiles with NVRTC for sm_90 in every instantiation the tensor uses.

NVRTC needs no GPU, so this runs on CI machines; it catches a kernel that would only fail when
a user first calls the operation on a GPU.
"""
import pytest

from tensorplay._runtime.kernels import nvrtc as kernels

ELEMENT_TYPES = ["bool", "unsigned char", "signed char", "short", "int", "long long",
                 "half_bits", "bfloat16_bits", "float", "double"]
COMMON = kernels.read_kernel_source("common")


def compile_for_sm90(source, typedefs):
    # As the runtime assembles a source: the shared constants, common.cu, the typedefs.
    text = kernels.CONSTANTS_PRELUDE + COMMON + "\n" + typedefs + kernels.read_kernel_source(source)
    cubin = kernels.compile_cubin(text, "sm_90", f"{source}.cu")
    assert cubin.startswith(b"\x7fELF")
    return cubin


@pytest.mark.parametrize("element", ELEMENT_TYPES)
def test_elementwise_kernels_compile_for_every_dtype(element):
    cubin = compile_for_sm90("elementwise", f"typedef {element} scalar_t;\n")
    for function in (b"fill", b"binary", b"binary_vector4", b"binary_strided", b"binary_scalar",
                     b"compare", b"compare_strided", b"compare_scalar", b"unary", b"add_scaled",
                     b"clamp", b"clamp_strided", b"where", b"where_strided", b"arange_integral",
                     b"arange_floating"):
        assert function in cubin


PROMOTED = ("promoted_binary", "promoted_binary_scalar", "promoted_compare",
            "promoted_compare_scalar")


@pytest.mark.parametrize("common", ELEMENT_TYPES)
def test_promoted_kernels_compile_for_mixed_dtypes(common):
    # One instance per (op, operand dtypes, common dtype, result dtype), as the tensor layer
    # asks for them (device_ops.promoted_typedefs): here every common dtype, with operands and
    # results of other categories, and only the promoted kernels in it.
    for op, left, right, target in (("OP_ADD", "half_bits", "bool", common),
                                    ("OP_POW", "int", "double", "float"),
                                    ("OP_DIV_FLOOR", "bfloat16_bits", "long long", "half_bits"),
                                    ("OP_LT", "unsigned char", "signed char", "bool")):
        cubin = compile_for_sm90("elementwise", (
            f"#define PROMOTED_OP {op}\ntypedef {left} left_t;\ntypedef {right} right_t;\n"
            f"typedef {common} scalar_t;\ntypedef {target} target_t;\n"))
        assert all(function.encode() in cubin for function in PROMOTED)
        assert b"binary_vector4" not in cubin


@pytest.mark.parametrize("element", ELEMENT_TYPES)
@pytest.mark.parametrize("result", ["long long", "float", "double", "half_bits",
                                    "bfloat16_bits", "bool"])
def test_reductions_compile_for_every_dtype(element, result):
    cubin = compile_for_sm90("reduce", f"typedef {element} scalar_t;\ntypedef {result} result_t;\n")
    assert b"reduce_partial" in cubin and b"reduce_final" in cubin and b"reduce_dims" in cubin
    assert b"select_dim" in cubin


@pytest.mark.parametrize("source", ELEMENT_TYPES)
@pytest.mark.parametrize("target", ELEMENT_TYPES)
def test_copies_compile_between_every_pair_of_dtypes(source, target):
    cubin = compile_for_sm90("copy", f"typedef {source} scalar_t;\ntypedef {target} target_t;\n")
    assert b"copy_strided" in cubin


def test_conditional_node_kernel_compiles_and_calls_the_device_runtime():
    cubin = kernels.compile_cubin(kernels.read_kernel_source("graphs"), "sm_90", "graphs.cu")
    # cudaGraphSetConditional stays undefined in the cubin; the driver resolves it at load.
    assert b"set_conditional" in cubin and b"cudaGraphSetConditional" in cubin


def test_staging_kernel_compiles():
    assert b"stage_copies" in compile_for_sm90("staging", "")


@pytest.mark.parametrize("element", ELEMENT_TYPES)
def test_random_kernels_compile_for_every_dtype(element):
    cubin = compile_for_sm90("philox", f"typedef {element} scalar_t;\n")
    for function in (b"uniform", b"normal", b"bernoulli", b"randint32", b"randint64",
                     b"set_replay_state"):
        assert function in cubin


@pytest.mark.parametrize("element", ELEMENT_TYPES)
def test_index_select_compiles_for_every_dtype(element):
    assert b"index_select" in compile_for_sm90("index", f"typedef {element} scalar_t;\n")


@pytest.mark.parametrize("element", ["half_bits", "bfloat16_bits", "float", "double"])
def test_index_add_compiles_for_every_floating_dtype(element):
    # atomic adds: CUDA's for float and double, a compare-and-swap for the 16-bit floats
    assert b"index_add" in compile_for_sm90("scatter", f"typedef {element} scalar_t;\n")


@pytest.mark.parametrize("element", ELEMENT_TYPES)
def test_scan_compiles_for_every_dtype(element):
    # cumsum/cumprod: shuffles of every accumulation type (float, double, long long), into the
    # input's type or int64
    for result in (element, "long long"):
        assert b"scan_dim" in compile_for_sm90(
            "scan", f"typedef {element} scalar_t;\ntypedef {result} result_t;\n")


@pytest.mark.parametrize("element", ELEMENT_TYPES)
def test_sort_compiles_for_every_dtype(element):
    cubin = compile_for_sm90("sort", f"typedef {element} scalar_t;\n")
    for function in (b"sort_chunks", b"sort_merge_step", b"sort_merge_chunks"):
        assert function in cubin


def test_every_shipped_source_is_covered():
    assert set(kernels.kernel_source_names()) == {"common", "elementwise", "reduce", "copy",
                                                  "selftest", "philox", "graphs", "staging",
                                                  "index", "scatter", "scan", "sort"}
