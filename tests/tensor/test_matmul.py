"""Matrix products (runtime/tensor/linalg.pyx; on CUDA through cuBLASLt, kernels/cublaslt.pyx):
every float dtype and layout against numpy (and PyTorch where it is installed), inside and
outside captures, the float32 precision setting, and loading cuBLASLt only on first use.

The shape pairs of test_shapes_against_numpy are CuPy's (tests/cupy_tests/math_tests/
test_matmul.py, TestMatmul, up to 3 dimensions, the most tensorplay's matmul takes); the
non-contiguous layouts follow PyTorch's test_linalg.py (test_matmul_small_brute_force_*d_Nd,
which multiply noncontiguous make_tensor operands against numpy).
"""
import subprocess
import sys
import textwrap
import threading

import numpy
import pytest

import tensorplay as tp
from tensorplay import cuda

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]
# Tolerances against a float64 product of the operands as stored: the result is rounded to the
# dtype (float32 accumulates; 16-bit floats too, in float32).
TOLERANCES = {"float32": (2e-5, 1e-5), "float64": (1e-12, 1e-12), "float16": (2e-3, 2e-3),
              "bfloat16": (1.6e-2, 1.6e-2)}

CUPY_SHAPE_PAIRS = [
    ((3, 2), (2, 4)), ((3, 0), (0, 4)), ((0, 2), (2, 4)), ((3, 2), (2, 0)), ((2,), (2, 4)),
    ((0,), (0, 4)), ((3, 2), (2,)), ((3, 0), (0,)), ((2,), (2,)), ((0,), (0,)),
    ((5, 3, 2), (5, 2, 4)), ((0, 3, 2), (0, 2, 4)), ((5, 3, 2), (2, 4)), ((0, 3, 2), (2, 4)),
    ((3, 2), (5, 2, 4)), ((3, 2), (0, 2, 4)), ((5, 3, 2), (1, 2, 4)), ((1, 3, 2), (5, 2, 4)),
    ((5, 3, 2), (2,)), ((2,), (5, 2, 4)),
]


def operand(shape, dtype, device, seed):
    values = numpy.random.default_rng(seed).standard_normal(shape).astype(numpy.float32)
    return tp.tensor(values, device=device).to(getattr(tp, dtype))


def as_float64(tensor):
    values = numpy.array(tensor.to(tp.float64).tolist(), dtype=numpy.float64)
    return values.reshape(tuple(tensor.shape))  # tolist() of an empty dimension loses the rest


def check_product(a, b, dtype):
    result = a @ b
    expected = numpy.matmul(as_float64(a), as_float64(b))
    assert result.dtype is getattr(tp, dtype) and tuple(result.shape) == expected.shape
    rtol, atol = TOLERANCES[dtype]
    k = a.shape[-1]
    numpy.testing.assert_allclose(as_float64(result), expected, rtol=rtol,
                                  atol=atol * max(1, k) ** 0.5)
    return result


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("a_shape, b_shape", CUPY_SHAPE_PAIRS)
def test_shapes_against_numpy(device, dtype, a_shape, b_shape):
    check_product(operand(a_shape, dtype, device, 1), operand(b_shape, dtype, device, 2), dtype)


# Layouts: (name, make) where make(shape, dtype, device, seed) gives a tensor of that shape
# laid out so. "transposed" and "batch-transposed" pass to cuBLASLt as they lie (a transpose
# flag); "expanded" is a batch of stride 0; "strided" (every other column) and "permuted" (batch
# innermost) are copied first.
def transposed(shape, dtype, device, seed):
    return operand(shape[:-2] + (shape[-1], shape[-2]), dtype, device, seed).transpose(-1, -2)


def strided(shape, dtype, device, seed):
    wide = operand(shape[:-1] + (2 * shape[-1],), dtype, device, seed)
    return wide[(slice(None),) * (len(shape) - 1) + (slice(None, None, 2),)]


def expanded(shape, dtype, device, seed):
    return operand((1,) + shape[1:], dtype, device, seed).expand(*shape)


def permuted(shape, dtype, device, seed):
    # (batch, rows, columns) stored as (rows, columns, batch)
    inner = operand(shape[1:] + shape[:1], dtype, device, seed)
    return inner.transpose(1, 2).transpose(0, 1)


def offset(shape, dtype, device, seed):
    # A view that starts one element in: an address cuBLASLt sees with a small alignment.
    flat = operand((1 + numpy.prod(shape, dtype=int),), dtype, device, seed)
    return flat[1:].reshape(shape)


LAYOUTS_2D = {"contiguous": operand, "transposed": transposed, "strided": strided,
              "offset": offset}
LAYOUTS_3D = dict(LAYOUTS_2D, expanded=expanded, permuted=permuted)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("a_layout", sorted(LAYOUTS_2D))
@pytest.mark.parametrize("b_layout", sorted(LAYOUTS_2D))
def test_two_dimensional_layouts(device, dtype, a_layout, b_layout):
    a = LAYOUTS_2D[a_layout]((33, 17), dtype, device, 3)
    b = LAYOUTS_2D[b_layout]((17, 65), dtype, device, 4)
    check_product(a, b, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("a_layout", sorted(LAYOUTS_3D))
@pytest.mark.parametrize("b_layout", sorted(LAYOUTS_3D))
def test_batched_layouts(device, dtype, a_layout, b_layout):
    a = LAYOUTS_3D[a_layout]((4, 9, 6), dtype, device, 5)
    b = LAYOUTS_3D[b_layout]((4, 6, 7), dtype, device, 6)
    check_product(a, b, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_vector_operands_and_broadcast_batches(device, dtype):
    matrix, batch = operand((8, 5), dtype, device, 7), operand((3, 5, 8), dtype, device, 8)
    vector = operand((5,), dtype, device, 9)
    check_product(matrix, vector, dtype)
    check_product(vector, operand((5, 8), dtype, device, 10), dtype)
    check_product(batch, operand((8,), dtype, device, 11), dtype)
    check_product(operand((3, 8, 5), dtype, device, 12), batch, dtype)
    check_product(matrix, batch, dtype)
    check_product(transposed((8, 5), dtype, device, 13), vector, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_large_products_agree_with_pytorch(dtype):
    torch = import_or_skip("torch")
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = operand((256, 384), dtype, "cuda", 14), operand((384, 320), dtype, "cuda", 15)
    ours = (a @ b).to(tp.float64)
    theirs = (torch.from_dlpack(a) @ torch.from_dlpack(b)).double()
    rtol, atol = TOLERANCES[dtype]
    numpy.testing.assert_allclose(as_float64(ours), theirs.cpu().numpy(), rtol=rtol,
                                  atol=atol * 20)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_mixed_products_are_refused(device):
    ints = tp.ones(2, 2, dtype=tp.int64, device=device)
    with pytest.raises(TypeError, match="matmul supports floating-point tensors .* got int64"):
        ints @ ints
    with pytest.raises(TypeError, match="got bool"):
        tp.ones(2, 2, dtype=tp.bool, device=device) @ tp.ones(2, 2, dtype=tp.bool,
                                                              device=device)
    with pytest.raises(TypeError, match="the same dtype, but got float32 and float64"):
        tp.ones(2, 2, device=device) @ tp.ones(2, 2, dtype=tp.float64, device=device)


def test_the_precision_setting_is_checked_and_kept():
    assert tp.get_float32_matmul_precision() == "highest"
    try:
        for precision in ("high", "medium", "highest"):
            tp.set_float32_matmul_precision(precision)
            assert tp.get_float32_matmul_precision() == precision
        with pytest.raises(ValueError, match="precision must be one of 'highest', 'high', "
                                             "'medium', got 'tf32'"):
            tp.set_float32_matmul_precision("tf32")
        assert tp.get_float32_matmul_precision() == "highest"
    finally:
        tp.set_float32_matmul_precision("highest")


@pytest.mark.gpu
def test_tf32_only_when_asked():
    # 1 + 2**-12 is a float32 but not a TF32 input (10 mantissa bits): TF32 rounds it to 1.
    k = 64
    a = tp.full((16, k), 1 + 2 ** -12, device="cuda")
    b = tp.ones(k, 16, device="cuda")
    try:
        assert set(numpy.ravel(as_float64(a @ b))) == {k * (1 + 2 ** -12)}
        tp.set_float32_matmul_precision("high")
        assert set(numpy.ravel(as_float64(a @ b))) == {float(k)}
        assert set(numpy.ravel(as_float64((a @ b.to(tp.float64).to(tp.float32))))) == {float(k)}
    finally:
        tp.set_float32_matmul_precision("highest")
    assert set(numpy.ravel(as_float64(a.to(tp.float64) @ b.to(tp.float64)))) == \
        {k * (1 + 2 ** -12)}


@pytest.mark.gpu
def test_plans_are_cached_per_problem():
    from tensorplay._runtime.kernels import cublaslt
    a, b = operand((24, 40), "float32", "cuda", 16), operand((40, 8), "float32", "cuda", 17)
    a @ b
    before = cublaslt.cached_plans()
    for _ in range(5):
        a @ b
    assert cublaslt.cached_plans() == before
    a @ operand((40, 9), "float32", "cuda", 18)
    assert cublaslt.cached_plans() == before + 1


@pytest.mark.gpu
def test_products_from_several_threads(quiet_device):
    pairs = [(operand((64, 48), "float32", "cuda", 20 + i), operand((48, 32), "float32", "cuda",
                                                                      40 + i)) for i in range(4)]
    results, errors = [None] * 4, []

    def work(index):
        try:
            a, b = pairs[index]
            for _ in range(20):
                results[index] = a @ b
            tp.accelerator.synchronize()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for (a, b), result in zip(pairs, results):
        numpy.testing.assert_allclose(as_float64(result), as_float64(a) @ as_float64(b),
                                      rtol=2e-5, atol=1e-4)


# -- captures -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_a_captured_product_replays_with_new_inputs(quiet_device, dtype):
    a, b = operand((64, 96), dtype, "cuda", 21), operand((96, 128), dtype, "cuda", 22)
    a @ b  # warm: the plan exists; the capture below also allocates its workspace
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        c = a @ b.t().contiguous().t()  # a transposed operand inside the capture
    a.copy_(operand((64, 96), dtype, "cuda", 23))
    g.replay()
    rtol, atol = TOLERANCES[dtype]
    numpy.testing.assert_allclose(as_float64(c), as_float64(a) @ as_float64(b), rtol=rtol,
                                  atol=atol * 10)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_the_first_product_of_a_process_may_be_inside_a_capture(mode):
    # A fresh process: cuBLASLt's module, this thread's handle and the plan are all made
    # during the capture, which global mode would invalidate if any of it were illegal there.
    script = textwrap.dedent(f"""
        import numpy, tensorplay as tp
        from tensorplay import cuda
        a = tp.tensor(numpy.arange(12.0, dtype=numpy.float32).reshape(3, 4), device="cuda")
        b = tp.ones(4, 5, device="cuda")
        g = cuda.CUDAGraph()
        with cuda.graph(g, capture_error_mode={mode!r}):
            c = a @ b
        g.replay()
        assert c.tolist() == [[6.0] * 5, [22.0] * 5, [38.0] * 5], c.tolist()
        a.fill_(1.0)
        g.replay()
        assert c.tolist() == [[4.0] * 5] * 3, c.tolist()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


@pytest.mark.gpu
def test_products_in_conditional_bodies(quiet_device):
    x = operand((32, 32), "float32", "cuda", 24)
    identity = tp.tensor(numpy.eye(32, dtype=numpy.float32) * 0.5, device="cuda")
    counter = tp.zeros(1, device="cuda")
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    flag = tp.zeros(1, dtype=tp.bool, device="cuda")
    start = as_float64(x)
    x @ identity
    keep_going.copy_(counter < 3)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        keep_going.copy_(counter < 3)
        g.begin_capture_to_while_node(keep_going)
        x.copy_(x @ identity)       # halves x, three times
        counter += 1
        keep_going.copy_(counter < 3)
        g.end_capture_to_conditional_node()
        g.begin_capture_to_if_node(flag)
        x.copy_(x @ identity)       # once more, when flag is set
        g.end_capture_to_conditional_node()
    g.replay()
    numpy.testing.assert_allclose(as_float64(x), start / 8, rtol=1e-6)
    counter.fill_(0.0)
    flag.fill_(True)
    g.replay()
    numpy.testing.assert_allclose(as_float64(x), start / 128, rtol=1e-6)


@pytest.mark.gpu
def test_cublaslt_kernels_are_listed_as_foreign_nodes(quiet_device):
    a, b = operand((64, 64), "float32", "cuda", 25), operand((64, 64), "float32", "cuda", 26)
    a @ b
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        a @ b
    nodes = g.kernel_nodes()
    assert nodes and all(node.arguments is None for node in nodes), nodes
    with pytest.raises(ValueError, match="its launch dimensions cannot be changed"):
        g.set_kernel_node_params(nodes[0], grid=nodes[0].grid[0] + 1)
    with pytest.raises(ValueError, match="its arguments cannot be set"):
        g.set_kernel_node_params(nodes[0], arguments={"m": 1})


@pytest.mark.gpu
def test_a_graphed_linear_layer_matches_eager(quiet_device):
    tp.manual_seed(0)
    layer = tp.nn.Linear(48, 24, device="cuda")
    sample = operand((16, 48), "float32", "cuda", 27).requires_grad_()
    graphed = cuda.make_graphed_callables(layer, (sample,))
    x = operand((16, 48), "float32", "cuda", 28).requires_grad_()
    expected = as_float64(x.detach()) @ as_float64(layer.weight.detach()).T + \
        as_float64(layer.bias.detach())
    layer.zero_grad()
    out = graphed(x)
    out.sum().backward()
    numpy.testing.assert_allclose(as_float64(out.detach()), expected, rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(as_float64(x.grad),
                                  numpy.ones((16, 24)) @ as_float64(layer.weight.detach()),
                                  rtol=1e-5, atol=1e-5)
    numpy.testing.assert_allclose(as_float64(layer.weight.grad),
                                  numpy.ones((24, 16)) @ as_float64(x.detach()), rtol=1e-5,
                                  atol=1e-5)


# -- loading ------------------------------------------------------------------------------------


def test_cublaslt_is_loaded_on_the_first_cuda_product_only():
    script = textwrap.dedent("""
        import sys, tensorplay as tp
        assert "nvmath" not in sys.modules
        tp.ones(2, 3) @ tp.ones(3, 2)
        assert "nvmath" not in sys.modules
        assert "tensorplay._runtime.kernels.cublaslt" not in sys.modules
        if tp.accelerator.is_available():
            tp.ones(2, 3, device="cuda") @ tp.ones(3, 2, device="cuda")
            assert "nvmath" in sys.modules
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
