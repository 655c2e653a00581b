"""Graph update without a GPU: the kernel signatures it relies on, and its argument checks."""
import itertools
import struct

import pytest

from tensorplay import cuda
from tensorplay._runtime import kernel_signature, kernels
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
