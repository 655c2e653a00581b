"""The same programs in tensorplay and in PyTorch (CPU), compared: outputs, their dtypes and
shapes, every leaf's .grad, the results of autograd.grad, and the errors (type and the key part
of the message). PyTorch is only an oracle here: the module is skipped without it."""
import itertools
import re

import numpy
import pytest

import tensorplay as tp
from tensorplay import autograd

from tests.peers import import_or_skip

torch = import_or_skip("torch")

DTYPES = {"float32": (tp.float32, torch.float32), "float64": (tp.float64, torch.float64),
          "float16": (tp.float16, torch.float16), "bfloat16": (tp.bfloat16, torch.bfloat16)}
ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
              "float64"]


def tp_dtype(name):
    return getattr(tp, name)


def torch_dtype(name):
    return getattr(torch, name)


def values(shape, seed, kind="signed"):
    rng = numpy.random.default_rng(seed)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, shape)
    if kind == "distinct":
        count = int(numpy.prod(shape))
        return (rng.permutation(count).astype(float) / 3.0 - 1.0).reshape(shape)
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def as_numpy(value):
    # numpy has no bfloat16: its values compare as float32, which holds each exactly.
    if isinstance(value, torch.Tensor):
        value = value.detach()
        return (value.float() if value.dtype == torch.bfloat16 else value).numpy()
    name = str(value.dtype).split(".")[-1]
    return numpy.array(value.tolist(), dtype="float32" if name == "bfloat16" else name).reshape(
        value.shape)


def assert_same_tensor(got, expected, what, rtol=1e-6, atol=1e-9):
    assert got is not None and expected is not None or got is expected is None, (
        f"{what}: {got!r} against PyTorch's {expected!r}")
    if expected is None:
        return
    assert tuple(got.shape) == tuple(expected.shape), (
        f"{what}: shape {tuple(got.shape)}, PyTorch's {tuple(expected.shape)}")
    assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], (
        f"{what}: dtype {got.dtype}, PyTorch's {expected.dtype}")
    assert got.requires_grad == expected.requires_grad, (
        f"{what}: requires_grad {got.requires_grad}, PyTorch's {expected.requires_grad}")
    numpy.testing.assert_allclose(as_numpy(got).astype(float), as_numpy(expected).astype(float),
                                  rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def run_both(program, arrays, dtype="float64", grad=(), rtol=1e-6, atol=1e-9, seed=1,
             device="cpu"):
    """program(module, *leaves) in tensorplay and in PyTorch, with leaves made from arrays (all
    requiring grad unless grad names the indices that do); compares the outputs, then the
    leaves' .grad after backward() of a random weighting of every output."""
    tp_type, torch_type = DTYPES[dtype]
    wanted = range(len(arrays)) if grad == () else grad
    ours = [tp.tensor(a, dtype=tp_type, device=device, requires_grad=i in wanted)
            for i, a in enumerate(arrays)]
    theirs = [torch.tensor(a, dtype=torch_type, requires_grad=i in wanted)
              for i, a in enumerate(arrays)]
    got, expected = program(tp, *ours), program(torch, *theirs)
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    tp_loss, torch_loss = None, None
    for index, (g, e) in enumerate(zip(got, expected)):
        assert_same_tensor(g, e, f"output {index}", rtol, atol)
        if e.requires_grad:
            weights = numpy.random.default_rng(seed + index).standard_normal(tuple(e.shape))
            term_tp = (g * tp.tensor(weights, dtype=g.dtype, device=device)).sum().to(tp_type)
            term_torch = (e * torch.tensor(weights, dtype=e.dtype)).sum().to(torch_type)
            tp_loss = term_tp if tp_loss is None else tp_loss + term_tp
            torch_loss = term_torch if torch_loss is None else torch_loss + term_torch
    if torch_loss is not None:
        torch_loss.backward()
        tp_loss.backward()
    for index, (ours_leaf, their_leaf) in enumerate(zip(ours, theirs)):
        assert_same_tensor(ours_leaf.grad, their_leaf.grad, f"grad of input {index}", rtol, atol)
    return ours, theirs


def same_error(tp_call, torch_call, fragment=None):
    """Both calls raise; tensorplay's error is an instance of PyTorch's error type; the message
    holds fragment (a part of PyTorch's message) when given."""
    with pytest.raises(Exception) as theirs:
        torch_call()
    with pytest.raises(Exception) as ours:
        tp_call()
    assert isinstance(ours.value, type(theirs.value)), (
        f"tensorplay raised {type(ours.value).__name__}: {ours.value}; PyTorch raised "
        f"{type(theirs.value).__name__}: {theirs.value}")
    if fragment is not None:
        assert fragment in str(theirs.value), f"PyTorch says: {theirs.value}"
        assert fragment in str(ours.value), f"tensorplay says: {ours.value}"


# -- broadcasting elementwise ops -------------------------------------------------------------


def random_broadcast_pair(rng):
    """Two shapes that broadcast (with 0-d, size-1 and size-0 dimensions)."""
    ndim = int(rng.integers(0, 4))
    full = [int(rng.choice([0, 1, 2, 3])) if rng.random() < 0.1 else int(rng.integers(1, 4))
            for _ in range(ndim)]
    shapes = []
    for _ in range(2):
        drop = int(rng.integers(0, ndim + 1))
        shape = [1 if rng.random() < 0.3 else size for size in full[drop:]]
        shapes.append(tuple(shape))
    return shapes


BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "pow": lambda m, a, b: a.abs() ** b,
    "add alpha": lambda m, a, b: a.add(b, alpha=2.5),
    "sub alpha": lambda m, a, b: a.sub(b, alpha=-1.5),
    "where": lambda m, a, b: m.where(a > b, a, b),
    "clamp min": lambda m, a, b: a.clamp(min=b),
    "clamp max": lambda m, a, b: a.clamp(max=b),
    "reused": lambda m, a, b: a * b + a * a - b / (a.abs() + 1) + b,
}


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("seed", range(12))
def test_binary_ops_broadcast_and_reduce_gradients(name, seed):
    rng = numpy.random.default_rng(seed)
    a_shape, b_shape = random_broadcast_pair(rng)
    run_both(BINARY[name], [values(a_shape, seed), values(b_shape, seed + 100)])


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops_on_non_contiguous_operands(name):
    def program(m, a, b):
        return BINARY[name](m, a.transpose(0, 1)[:, 1:], b[:, ::2].unsqueeze(-1).expand(3, 2, 2))
    run_both(program, [values((3, 3, 2), 0), values((3, 4), 1)])


UNARY = {
    "neg": lambda a: -a, "abs": lambda a: a.abs(), "relu": lambda a: a.relu(),
    "sin": lambda a: a.sin(), "cos": lambda a: a.cos(), "exp": lambda a: a.exp(),
    "sqrt": lambda a: a.abs().sqrt(), "log": lambda a: a.abs().log(),
    "rsub": lambda a: 2.0 - a, "rdiv": lambda a: 3.0 / a, "rpow": lambda a: 2.0 ** a,
    "scalar pow": lambda a: a ** 3, "half pow": lambda a: a.abs() ** 0.5,
    "zero pow": lambda a: a ** 0, "negative pow": lambda a: a ** -2,
    "clone": lambda a: a.clone(), "sum": lambda a: a.sum(), "mean": lambda a: a.mean(),
    "max": lambda a: a.max(), "min": lambda a: a.min(),
}


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 3), (2, 1, 3)])
def test_unary_ops(name, shape):
    kind = "distinct" if name in ("max", "min") else "signed"
    run_both(lambda m, a: UNARY[name](a), [values(shape, 3, kind)])


@pytest.mark.parametrize("name", [name for name in UNARY if name not in ("max", "min")])
def test_unary_ops_on_empty_and_non_contiguous(name):
    run_both(lambda m, a: UNARY[name](a), [values((0, 3), 3)])
    run_both(lambda m, a: UNARY[name](a.t()[1:]), [values((2, 3), 3)])


# -- reductions ---------------------------------------------------------------------------


REDUCTION_DIMS = [None, 0, -1, 1, (0, 2), (-1, 0), [1], (), (0, 1, 2), (-3,)]


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("dim", REDUCTION_DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 1, 0)])
def test_reductions_over_dims(op, dim, keepdim, shape):
    def program(m, a):
        reduce = getattr(a, op)
        if dim is None:
            return reduce() if not keepdim else reduce(dim=None, keepdim=True)
        return reduce(dim, keepdim=keepdim)
    if dim is None and keepdim:
        pytest.skip("sum(dim=None, keepdim=True) is newer than some PyTorch versions")
    run_both(program, [values(shape, 4)])


@pytest.mark.parametrize("op", ["sum", "mean"])
@pytest.mark.parametrize("dim", [None, 0, -1, ()], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_reductions_of_0d_tensors(op, dim, keepdim):
    def program(m, a):
        if dim is None:
            return getattr(a, op)()
        return getattr(a, op)(dim, keepdim=keepdim)
    run_both(program, [values((), 4)])


# -- views ----------------------------------------------------------------------------------


VIEWS = {
    "t": lambda a: a.t(),
    "transpose": lambda a: a.transpose(0, -1),
    "transpose same": lambda a: a.transpose(1, 1),
    "unsqueeze": lambda a: a.unsqueeze(-1) * a.unsqueeze(1),
    "expand": lambda a: a.unsqueeze(1).expand(-1, 4, -1) * 2,
    "expand lead": lambda a: a.expand(2, 3, 2) + a,
    "view": lambda a: a.view(-1) * 3,
    "reshape": lambda a: a.t().reshape(6),
    "getitem": lambda a: a[1] * a[:, 0:1] + a[-1, 1:],
    "detach": lambda a: a * a.detach(),
    "chain": lambda a: a.t().unsqueeze(0).expand(2, 2, 3).transpose(0, 2).sum((0, 1)),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views(name):
    run_both(lambda m, a: VIEWS[name](a), [values((3, 2), 5)])


def test_dims_of_0d_tensors():
    run_both(lambda m, a: (a.transpose(0, -1) * 2, a.transpose(-1, -1), a.sum(-1), a.mean(0),
                           a.unsqueeze(-1), a.unsqueeze(0)), [values((), 0)])
    same_error(lambda: tp.ones(()).sum(1), lambda: torch.ones(()).sum(1), "out of range")
    same_error(lambda: tp.ones(()).sum(-2), lambda: torch.ones(()).sum(-2), "out of range")
    same_error(lambda: tp.ones(()).stride(-1), lambda: torch.ones(()).stride(-1))


def test_t_of_small_tensors():
    run_both(lambda m, a, b: (a.t() * 2, b.t() * 3), [values((), 0), values((3,), 1)])


# -- matmul ---------------------------------------------------------------------------------


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((2, 3), (2, 3, 4)),
                 ((1, 2, 3), (2, 3, 4)), ((2, 2, 3), (1, 3, 4)), ((2, 2, 3), (3,)),
                 ((3,), (2, 3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3)), ((0,), (0,)),
                 ((2, 0, 3), (3, 1))]


MATMUL_TOLERANCES = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": {},
                     "float16": dict(rtol=1e-2, atol=1e-2), "bfloat16": dict(rtol=4e-2, atol=4e-2)}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", list(MATMUL_TOLERANCES))
@pytest.mark.parametrize("a_shape, b_shape", MATMUL_SHAPES, ids=str)
def test_matmul(device, dtype, a_shape, b_shape):
    # On CUDA the forward and both gradients (g @ b^T, a^T @ g) run in cuBLASLt.
    tolerance = MATMUL_TOLERANCES[dtype]
    run_both(lambda m, a, b: a @ b, [values(a_shape, 6), values(b_shape, 7)], dtype=dtype,
             device=device, **tolerance)
    run_both(lambda m, a, b: a.matmul(b), [values(a_shape, 6), values(b_shape, 7)], dtype=dtype,
             grad=(1,), device=device, **tolerance)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_column_major_operand_gets_a_column_major_gradient(device):
    # PyTorch's mm_mat1_backward / mm_mat2_backward (torch/csrc/autograd/FunctionsManual.cpp):
    # the gradient of weight.t() is made in weight.t()'s layout, so weight's own is contiguous.
    x = tp.tensor(values((5, 4), 0), dtype=tp.float32, device=device, requires_grad=True)
    w = tp.tensor(values((3, 4), 1), dtype=tp.float32, device=device, requires_grad=True)
    wt, xt = w.t(), x.t().contiguous().t()
    out = xt @ wt
    grad_x, grad_wt = tp.autograd.grad(out.sum(), [xt, wt], retain_graph=True)
    assert grad_wt.stride() == wt.stride() == (1, 4) and grad_x.stride() == xt.stride() == (1, 5)
    out.sum().backward()
    assert w.grad.is_contiguous() and x.grad.is_contiguous()
    tw = torch.tensor(values((3, 4), 1), dtype=torch.float32, requires_grad=True)
    tx = torch.tensor(values((5, 4), 0), dtype=torch.float32, requires_grad=True)
    (tx.t().contiguous().t() @ tw.t()).sum().backward()
    assert_same_tensor(w.grad, tw.grad, "weight's gradient", rtol=1e-6, atol=1e-6)
    assert_same_tensor(x.grad, tx.grad, "input's gradient", rtol=1e-6, atol=1e-6)


def test_matmul_of_transposed_operands():
    run_both(lambda m, a, b: a.t() @ b.transpose(-1, -2), [values((3, 2), 0), values((2, 4, 3), 1)])


@pytest.mark.parametrize("a_shape, b_shape", [((2, 3), (4,)), ((2, 2, 3), (3, 2, 4)),
                                              ((2, 3), (2, 4)), ((), (3,))], ids=str)
def test_matmul_errors(a_shape, b_shape):
    same_error(lambda: tp.ones(a_shape) @ tp.ones(b_shape),
               lambda: torch.ones(a_shape) @ torch.ones(b_shape))


# -- pow ------------------------------------------------------------------------------------


POW_CASES = {
    "negative base, integer exponents": ([-2.0, -1.0, -0.5, 0.5, 3.0], [2.0, 3.0, -1.0, 0.0,
                                                                        -2.0]),
    "zero base": ([0.0, 0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 0.5, 0.0, -1.0]),
    "zero exponent": ([0.0, -1.0, 2.0, 0.0, 5.0], [0.0, 0.0, 0.0, 0.0, 0.0]),
    "fractional": ([0.5, 1.5, 2.5, 4.0, 9.0], [0.5, -0.5, 1.5, 2.5, -1.5]),
}


@pytest.mark.parametrize("case", list(POW_CASES))
def test_pow_with_tensor_exponents(case):
    base, exponent = POW_CASES[case]
    run_both(lambda m, a, b: a ** b, [numpy.array(base), numpy.array(exponent)])
    run_both(lambda m, a, b: a.pow(b), [numpy.array(base), numpy.array(exponent)], grad=(0,))
    run_both(lambda m, a, b: a.pow(b), [numpy.array(base), numpy.array(exponent)], grad=(1,))


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5, 0.0, 1.0])
def test_pow_with_scalar_exponents(exponent):
    run_both(lambda m, a: a ** exponent, [numpy.array([-2.0, -0.5, 0.0, 0.5, 3.0])])
    run_both(lambda m, a: a.pow(exponent), [numpy.array([-2.0, -0.5, 0.0, 0.5, 3.0])])


@pytest.mark.parametrize("base", [2.0, 0.5, 0.0, -2.0, 1, 0, 3])
def test_pow_with_scalar_bases(base):
    run_both(lambda m, a: base ** a, [numpy.array([-2.0, -0.5, 0.0, 0.5, 3.0])])


# -- dtypes of results ------------------------------------------------------------------------


def make_pair(name, shape_a=(2, 3), shape_b=(3,)):
    rng = numpy.random.default_rng(0)
    a = rng.integers(1, 5, shape_a) * rng.choice([-1, 1], shape_a)
    b = rng.integers(1, 5, shape_b)
    if name == "bool":
        a, b = a > 0, b > 2
    elif name == "uint8":
        a = numpy.abs(a)
    return ((tp.tensor(a, dtype=tp_dtype(name)), tp.tensor(b, dtype=tp_dtype(name))),
            (torch.tensor(a, dtype=torch_dtype(name)), torch.tensor(b, dtype=torch_dtype(name))))


DTYPE_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "floor div": lambda a, b: a.div(b, rounding_mode="floor"),
    "trunc div": lambda a, b: a.div(b, rounding_mode="trunc"),
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "scalar int": lambda a, b: a * 2, "scalar float": lambda a, b: a * 2.5,
    "scalar div": lambda a, b: a / 2, "rdiv": lambda a, b: 2 / b,
    "scalar eq": lambda a, b: a == 1, "scalar lt float": lambda a, b: a < 1.5,
    "where": lambda a, b: (tp if isinstance(a, tp.Tensor) else torch).where(a > 0, a, b),
    "sum": lambda a, b: a.sum(), "sum dim": lambda a, b: a.sum(0),
    "mean": lambda a, b: a.mean(), "mean dim": lambda a, b: a.mean(1, keepdim=True),
    "neg": lambda a, b: -a, "abs": lambda a, b: a.abs(),
    "pow scalar": lambda a, b: a ** 2, "pow tensor": lambda a, b: a.abs() ** b,
    "rpow": lambda a, b: 2 ** b, "max": lambda a, b: a.max(), "min": lambda a, b: a.min(),
    "clamp": lambda a, b: a.clamp(0, 2), "sqrt": lambda a, b: b.sqrt(),
    "exp": lambda a, b: b.exp(), "relu": lambda a, b: a.relu(),
    "matmul": lambda a, b: a @ b,
}


# Refused on purpose (docs/design.md, "Autograd", differences from PyTorch): matmul of integers
# and bool, which PyTorch's CPU computes but its CUDA matmul refuses, with a TypeError saying so.
BOOL_ARITHMETIC = {"matmul"}


def refused_on_purpose(op, dtype):
    return (op == "matmul" and dtype not in ("float32", "float64", "float16", "bfloat16")) or (
        dtype == "bool" and op in BOOL_ARITHMETIC)


@pytest.mark.parametrize("op", list(DTYPE_OPS))
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_result_dtypes_and_errors_match(op, dtype):
    (a, b), (ta, tb) = make_pair(dtype)
    if refused_on_purpose(op, dtype):
        with pytest.raises(TypeError, match="not supported|supports floating-point tensors"):
            DTYPE_OPS[op](a, b)
        return
    try:
        expected = DTYPE_OPS[op](ta, tb)
    except Exception as error:  # PyTorch refuses: so must we, with an error of its type
        with pytest.raises(Exception) as ours:
            DTYPE_OPS[op](a, b)
        assert isinstance(ours.value, type(error)), (
            f"tensorplay raised {type(ours.value).__name__}: {ours.value}; PyTorch raised "
            f"{type(error).__name__}: {error}")
        return
    got = DTYPE_OPS[op](a, b)
    assert_same_tensor(got, expected, f"{op} on {dtype}", rtol=1e-3, atol=1e-3)


# -- autograd API and errors ------------------------------------------------------------------


def test_grad_accumulates_at_a_fixed_address():
    ours, theirs = run_both(lambda m, w, x: (w * x).sum() + (w * w).sum(),
                            [values((3,), 0), values((2, 3), 1)], grad=(0,))
    address = ours[0].grad.data_ptr()
    (ours[0] * 2).sum().backward()
    (theirs[0] * 2).sum().backward()
    assert ours[0].grad.data_ptr() == address
    assert_same_tensor(ours[0].grad, theirs[0].grad, "accumulated grad")


def test_backward_twice_through_a_freed_graph():
    for program in (lambda m, x: (x * x).sum(), lambda m, x: (x.exp()).sum(),
                    lambda m, x: (x ** 2).sum(), lambda m, x: (x / 2.0).sum()):
        x, tx = tp.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        y, ty = program(tp, x), program(torch, tx)
        y.backward()
        ty.backward()
        same_error(y.backward, ty.backward, "Trying to backward through the graph a second time")


@pytest.mark.parametrize("name", ["neg", "add", "sum", "mean", "t", "expand", "add scalar",
                                  "mul scalar", "div scalar", "sub"])
def test_backward_twice_when_nothing_was_saved(name):
    program = {"neg": lambda x: (-x).sum(), "add": lambda x: (x + x).sum(),
               "sum": lambda x: x.sum(), "mean": lambda x: x.mean(),
               "t": lambda x: x.t().sum(), "expand": lambda x: x.expand(2, 3).sum(),
               "add scalar": lambda x: (x + 2).sum(), "mul scalar": lambda x: (x * 2).sum(),
               "div scalar": lambda x: (x / 2).sum(), "sub": lambda x: (x - x * 0).sum()}[name]
    x, tx = tp.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    y, ty = program(x), program(tx)
    ty.backward()
    y.backward()
    try:
        ty.backward()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="second time"):
            y.backward()
    else:
        y.backward()
    assert_same_tensor(x.grad, tx.grad, "grad")


def test_retain_graph_allows_a_second_backward():
    x, tx = tp.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    y, ty = (x * x * x).sum(), (tx * tx * tx).sum()
    y.backward(retain_graph=True)
    ty.backward(retain_graph=True)
    y.backward()
    ty.backward()
    assert_same_tensor(x.grad, tx.grad, "grad")


def test_in_place_change_of_a_saved_tensor():
    def program(m, w, a):
        return (w * a).sum()
    w, tw = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    a, ta = tp.ones(2), torch.ones(2)
    y, ty = program(tp, w, a), program(torch, tw, ta)
    a.add_(1)
    ta.add_(1)
    same_error(y.backward, ty.backward, "modified by an inplace operation")


def test_in_place_change_of_a_saved_output():
    # exp saves its output in PyTorch: changing the input (under no_grad) is fine there.
    w, tw = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    y, ty = w.exp().sum(), tw.exp().sum()
    with tp.no_grad():
        w.mul_(2)
    with torch.no_grad():
        tw.mul_(2)
    ty.backward()
    y.backward()
    assert_same_tensor(w.grad, tw.grad, "grad")
    # ... and changing the output is refused, through the output's own version counter.
    for program in (lambda x: x.exp(), lambda x: x.sqrt(), lambda x: x.relu(),
                    lambda x: x ** x, lambda x: 2.0 ** x):
        y, ty = program(w), program(tw)
        with tp.no_grad():
            y.mul_(2)
        with torch.no_grad():
            ty.mul_(2)
        same_error(lambda: y.sum().backward(), lambda: ty.sum().backward(),
                   "modified by an inplace operation")


@pytest.mark.parametrize("name", ["mul", "rmul", "div", "matmul", "rmatmul", "rdiv"])
def test_in_place_change_of_an_operand_not_saved(name):
    # PyTorch saves a product's operand only when the other operand needs its gradient, and a
    # quotient's dividend only when the divisor needs one: changing w (which requires grad,
    # under no_grad) is fine unless the gradient of c needs it.
    program = {"mul": lambda w, c: (w * c).sum(), "rmul": lambda w, c: (c * w).sum(),
               "div": lambda w, c: (w / c).sum(), "rdiv": lambda w, c: (c / w).sum(),
               "matmul": lambda w, c: (w @ c).sum(), "rmatmul": lambda w, c: (c @ w).sum()}[name]
    w, tw = tp.ones(2, 2, requires_grad=True), torch.ones(2, 2, requires_grad=True)
    c, tc = tp.full((2, 2), 2.0), torch.full((2, 2), 2.0)
    y, ty = program(w, c), program(tw, tc)
    with tp.no_grad():
        w.mul_(3)
    with torch.no_grad():
        tw.mul_(3)
    if name == "rdiv":
        same_error(y.backward, ty.backward, "modified by an inplace operation")
        return
    ty.backward()
    y.backward()
    assert_same_tensor(w.grad, tw.grad, "grad")


def test_grad_of_a_non_scalar_needs_grad_outputs():
    x, tx = tp.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)
    same_error(lambda: (x * 2).backward(), lambda: (tx * 2).backward(),
               "grad can be implicitly created only for scalar outputs")
    same_error(lambda: autograd.grad(x * 2, x), lambda: torch.autograd.grad(tx * 2, tx),
               "grad can be implicitly created only for scalar outputs")


def test_grad_with_grad_outputs_and_allow_unused():
    x, tx = tp.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0],
                                                                    requires_grad=True)
    u, tu = tp.ones(1, requires_grad=True), torch.ones(1, requires_grad=True)
    g = numpy.array([[0.5, -1.0], [2.0, 3.0]])
    ours = autograd.grad(x * x.unsqueeze(1), (x, u), grad_outputs=tp.tensor(g, dtype=tp.float32),
                         allow_unused=True, retain_graph=True)
    theirs = torch.autograd.grad(tx * tx.unsqueeze(1), (tx, tu),
                                 grad_outputs=torch.tensor(g, dtype=torch.float32),
                                 allow_unused=True)
    assert_same_tensor(ours[0], theirs[0], "grad")
    assert ours[1] is None and theirs[1] is None
    assert x.grad is None
    y, ty = (x * 2).sum(), (tx * 2).sum()
    same_error(lambda: autograd.grad(y, [u], retain_graph=True),
               lambda: torch.autograd.grad(ty, [tu], retain_graph=True),
               "appears to not have been used in the graph")
    same_error(lambda: autograd.grad(y, [tp.ones(1)]), lambda: torch.autograd.grad(ty, [
        torch.ones(1)]), "does not require grad")
    # A non-leaf input, and an output that is an input.
    z, tz = x * 3, tx * 3
    ours = autograd.grad((z * z).sum(), [z, x])
    theirs = torch.autograd.grad((tz * tz).sum(), [tz, tx])
    for got, expected in zip(ours, theirs):
        assert_same_tensor(got, expected, "grad")
    ours = autograd.grad(x.sum(), x)
    theirs = torch.autograd.grad(tx.sum(), tx)
    assert_same_tensor(ours[0], theirs[0], "grad")


def test_grad_with_several_outputs_and_none_grad_outputs():
    x, tx = tp.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0],
                                                                    requires_grad=True)
    ours = autograd.grad([(x * x).sum(), (x * 3).sum()], [x], grad_outputs=[None, None])
    theirs = torch.autograd.grad([(tx * tx).sum(), (tx * 3).sum()], [tx],
                                 grad_outputs=[None, None])
    assert_same_tensor(ours[0], theirs[0], "grad")


def test_create_graph_is_refused_clearly():
    x = tp.ones(2, requires_grad=True)
    with pytest.raises((ValueError, RuntimeError, NotImplementedError),
                       match="create_graph=True is not supported"):
        autograd.grad((x * x).sum(), x, create_graph=True)


def test_requires_grad_on_integer_and_bool_dtypes():
    for name in ("int64", "int32", "bool", "uint8"):
        same_error(lambda: tp.zeros(2, dtype=tp_dtype(name), requires_grad=True),
                   lambda: torch.zeros(2, dtype=torch_dtype(name), requires_grad=True),
                   "Only Tensors of floating point and complex dtype can require gradients")
        same_error(lambda: tp.zeros(2, dtype=tp_dtype(name)).requires_grad_(),
                   lambda: torch.zeros(2, dtype=torch_dtype(name)).requires_grad_(),
                   "only Tensors of floating point dtype can require gradients")

        def set_attribute(t):
            t.requires_grad = True
        same_error(lambda: set_attribute(tp.zeros(2, dtype=tp_dtype(name))),
                   lambda: set_attribute(torch.zeros(2, dtype=torch_dtype(name))),
                   "only Tensors of floating point and complex dtype can require gradients")
    # requires_grad_(False) on an integer tensor is allowed in both
    assert not tp.zeros(2, dtype=tp.int64).requires_grad_(False).requires_grad


def test_in_place_on_leaf_requiring_grad():
    x, tx = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    same_error(lambda: x.add_(1), lambda: tx.add_(1), "a leaf Variable that requires grad")
    same_error(lambda: x.mul_(2), lambda: tx.mul_(2), "a leaf Variable that requires grad")


def test_grad_mode():
    x, tx = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    with tp.no_grad():
        y = x * 2
        with tp.enable_grad():
            z = x * 2
    with torch.no_grad():
        ty = tx * 2
        with torch.enable_grad():
            tz = tx * 2
    assert y.requires_grad == ty.requires_grad and z.requires_grad == tz.requires_grad
    assert y.grad_fn is None and y.is_leaf == ty.is_leaf

    @tp.no_grad()
    def f(a):
        return a * 2

    @torch.no_grad()
    def tf(a):
        return a * 2
    assert f(x).requires_grad == tf(tx).requires_grad
    d, td = (x * 2).detach(), (tx * 2).detach()
    assert d.requires_grad == td.requires_grad and d.is_leaf == td.is_leaf
    assert d.grad_fn is None


def test_bare_grad_mode_decorators_decorate_as_in_pytorch():
    x, tx = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    for ours, theirs in ((tp.no_grad, torch.no_grad), (tp.enable_grad, torch.enable_grad)):
        @ours
        def double(a):
            """Doubles."""
            return a * 2

        @theirs
        def double_torch(a):
            return a * 2

        with tp.no_grad(), torch.no_grad():
            assert double(x).requires_grad == double_torch(tx).requires_grad
        assert double(x).requires_grad == double_torch(tx).requires_grad
        assert double.__name__ == "double" and double.__doc__ == "Doubles."
    with pytest.raises(TypeError, match=r"no_grad\(\) takes no arguments"):
        tp.no_grad(3)


def test_detach_shares_memory_and_version():
    x, tx = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    y, ty = (x * x).sum(), (tx * tx).sum()
    d, td = x.detach(), tx.detach()
    d.add_(1)
    td.add_(1)
    assert x.tolist() == tx.tolist()
    same_error(y.backward, ty.backward, "modified by an inplace operation")


def square_function(library):
    """x * x * y as an autograd.Function of library (tensorplay or torch), with its backward."""
    class Square(library.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            return x * x * y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * 2 * x * y, grad * x * x

    return Square


Square, TorchSquare = square_function(tp), square_function(torch)


def test_function_subclasses():
    def program(m, a, b):
        square = Square if m is tp else TorchSquare
        return square.apply(a, b) + square.apply(a, b.t()) * a
    run_both(program, [values((3, 3), 0), values((3, 3), 1)])
    run_both(program, [values((3, 3), 0), values((3, 3), 1)], grad=(0,))
    x, tx = tp.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    y, ty = Square.apply(x, x).sum(), TorchSquare.apply(tx, tx).sum()
    y.backward()
    ty.backward()
    assert_same_tensor(x.grad, tx.grad, "grad")
    same_error(y.backward, ty.backward, "second time")


def test_gradient_accumulation_into_one_node_used_many_times():
    def program(m, a, b):
        c = a * b
        d = c.sum(0) + c.sum(1).sum() + c.t() @ c + c.mean()
        return d * c[0] + c.max()
    run_both(program, [values((3, 3), 0, "distinct"), values((3, 3), 1)])


def test_mixed_chain():
    def program(m, x, w, b):
        h = (x @ w + b).relu()
        h2 = h.unsqueeze(0).expand(2, -1, -1)
        return ((h2 - 1.0) ** 2).mean((0, 2)) + (h / (1 + h.abs())).sum(-1, keepdim=True).t()
    run_both(program, [values((4, 3), 0), values((3, 5), 1), values((5,), 2)])


def test_broadcast_errors():
    for a_shape, b_shape in (((3,), (4,)), ((2, 3), (3, 2)), ((0,), (2,))):
        same_error(lambda: tp.ones(a_shape) + tp.ones(b_shape),
                   lambda: torch.ones(a_shape) + torch.ones(b_shape),
                   "must match the size of tensor b")


# -- in-place operations on tensors that are not leaves requiring grad --------------------------


IN_PLACE = {
    "add_": lambda m, y, w: y.add_(w),
    "iadd": lambda m, y, w: y.__iadd__(w),
    "sub_ alpha": lambda m, y, w: y.sub_(w, alpha=2.0),
    "mul_": lambda m, y, w: y.mul_(w),
    "div_": lambda m, y, w: y.div_(w.abs() + 1),
    "mul_ scalar": lambda m, y, w: y.mul_(3.0),
    "clamp_": lambda m, y, w: y.clamp_(min=w * 0 - 0.5, max=w),
    "copy_": lambda m, y, w: y.copy_(w * 2),
    "zero_ then add_": lambda m, y, w: y.zero_().add_(w),
    "fill_ then mul_": lambda m, y, w: y.fill_(1.5).mul_(w),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_operations_on_non_leaves_are_recorded(name):
    def program(m, x, w):
        y = x * 2
        z = IN_PLACE[name](m, y, w)
        assert z is y
        return y * x + y
    run_both(program, [values((2, 3), 0), values((3,), 1)])
    run_both(program, [values((2, 3), 0), values((3,), 1)], grad=(1,))


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_operations_on_buffers_take_the_operands_history(name):
    def program(m, x, w):
        buffer = m.ones(2, 3, dtype=x.dtype, device=x.device)
        IN_PLACE[name](m, buffer, w)
        return buffer * x
    ours, theirs = run_both(program, [values((2, 3), 0), values((3,), 1)])


def test_in_place_change_of_a_saved_non_leaf():
    for change in (lambda y: y.add_(1), lambda y: y.mul_(2)):
        x, tx = tp.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        y, ty = x * 2, tx * 2
        z, tz = (y * y).sum(), (ty * ty).sum()
        change(y)
        change(ty)
        same_error(z.backward, tz.backward, "modified by an inplace operation")
        a, ta = x.exp(), tx.exp()  # exp saves its output
        change(a)
        change(ta)
        same_error(lambda: a.sum().backward(), lambda: ta.sum().backward(),
                   "modified by an inplace operation")


def test_item_assignment_is_recorded():
    def program(m, x, w):
        out = m.zeros(3, 4, dtype=x.dtype, device=x.device)
        out[0] = x.sum(0)
        out[1:, ::2] = w
        out[2, 1] = 5.0
        y = x * 1.0
        y[1] = w[0, 0]
        y[:, 0] = 0.0
        return out * out, y
    run_both(program, [values((2, 4), 0), values((2, 2), 1)])
    run_both(program, [values((2, 4), 0), values((2, 2), 1)], grad=(1,))


def test_in_place_operations_on_views_are_recorded_through_the_base():
    # PyTorch's CopySlices (tests/autograd/test_inplace_views.py has the rest).
    def program(m, x, w):
        y = x * 2
        y[0].mul_(2)
        y.t().add_(w.t())
        return (y,)
    run_both(program, [values((2, 3), 0), values((2, 3), 1)])
    x = tp.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.add_(1)


# -- more corners ------------------------------------------------------------------------------


def test_max_and_min_share_the_gradient_among_ties():
    run_both(lambda m, a: a.max() * 2 + a.min(), [numpy.array([[1.0, 3.0, 3.0], [-2.0, 3.0,
                                                                                -2.0]])])


def test_getitem_gradients():
    def program(m, a):
        return (a[1:, ::2] * 3, a[-1], a[0, -2:], a[:, 1], a[1:2, 0:0], a[..., 1:] if m is torch
                else a[:, :, 1:])
    run_both(program, [values((3, 4, 2), 0)])


def test_conversions_carry_gradients():
    def program(m, a):
        wide = a.to(m.float64)
        return wide * wide, a.to(m.float32) + 1, (a * 2).to(m.int64)
    run_both(program, [values((2, 3), 0)], dtype="float32")


def test_mean_and_sum_over_empty_dims():
    run_both(lambda m, a: (a.sum(0), a.mean(1), a.sum((0, 1), keepdim=True)),
             [values((0, 3), 0)])


def test_where_with_scalars_and_broadcast_condition():
    run_both(lambda m, a, b: (m.where(a > 0, a, 0.5), m.where(b > 0, 2.0, a),
                              m.where((a > 0)[0], a, b)), [values((2, 3), 0), values((3,), 1)])


def test_leaf_backward_and_reuse_across_graphs():
    def program(m, a, b):
        c = a * b
        return c, c * a, (c + a).sum(0), c.t() @ c
    run_both(program, [values((3, 3), 0), values((3, 3), 1)])
    x, tx = tp.tensor(2.0, requires_grad=True), torch.tensor(2.0, requires_grad=True)
    x.backward()
    tx.backward()
    assert_same_tensor(x.grad, tx.grad, "grad of a leaf's own backward")


def split_function(library):
    """Two tensor outputs and a string as an autograd.Function of library (tensorplay or
    torch), with a backward that ignores the string."""
    class Split(library.autograd.Function):
        @staticmethod
        def forward(ctx, x, factor):
            ctx.factor = factor
            return x * factor, x + 1, "label"

        @staticmethod
        def backward(ctx, grad_a, grad_b, grad_label):
            return grad_a * ctx.factor + grad_b, None

    return Split


Split, TorchSplit = split_function(tp), split_function(torch)


def test_function_with_non_tensor_outputs():
    def program(m, x):
        a, b, label = (Split if m is tp else TorchSplit).apply(x, 3.0)
        assert label == "label"
        return a * b
    run_both(program, [values((4,), 0)])


# -- PyTorch's words for the errors ------------------------------------------------------------


def test_errors_carry_pytorchs_words():
    cases = [
        (lambda m: m.ones(3) + m.ones(4), "The size of tensor a (3) must match the size of tensor "
                                          "b (4) at non-singleton dimension 0"),
        (lambda m: m.ones(3).add_(m.ones(2, 3)), "output with shape [3] doesn't match the "
                                                 "broadcast shape [2, 3]"),
        (lambda m: m.ones(2, 3).sum(2), "Dimension out of range (expected to be in range of "
                                        "[-2, 1], but got 2)"),
        (lambda m: m.ones(2, 3).unsqueeze(3), "Dimension out of range (expected to be in range "
                                              "of [-3, 2], but got 3)"),
        (lambda m: m.ones(2, 3).view(4), "is invalid for input of size 6"),
        (lambda m: m.ones(2, 3).t().view(6), "view size is not compatible with input tensor's "
                                             "size and stride"),
        (lambda m: m.ones(2, 2, 2).t(), "t() expects a tensor with <= 2 dimensions, but self "
                                        "is 3D"),
        (lambda m: m.ones(3).expand(2, 4), "The expanded size of the tensor (4) must match the "
                                           "existing size (3) at non-singleton dimension 1"),
        (lambda m: m.ones(()) @ m.ones(3), "both arguments to matmul need to be at least 1D, "
                                           "but they are 0D and 1D"),
        (lambda m: m.ones(2, dtype=m.int64) ** -1, "Integers to negative integer powers are not "
                                                   "allowed"),
        (lambda m: m.ones(2, dtype=m.int64).mean(), "mean(): could not infer output dtype. Input "
                                                    "dtype must be either a floating point or "
                                                    "complex dtype"),
        (lambda m: m.ones(2, 3).sum((1, 1)), "appears multiple times in the list of dims"),
    ]
    for program, words in cases:
        same_error(lambda: program(tp), lambda: program(torch), words)


def test_autograd_errors_carry_pytorchs_words():
    def unused(m):
        x, u = m.ones(2, requires_grad=True), m.ones(2, requires_grad=True)
        return m.autograd.grad((x * 2).sum(), [x, u])

    def not_requiring(m):
        x = m.ones(2, requires_grad=True)
        return m.autograd.grad((x * 2).sum(), [m.ones(2)])

    def wrong_grad_size(m):
        x = m.ones(2, requires_grad=True)
        x.grad = m.ones(3)

    def wrong_grad_type(m):
        x = m.ones(2, requires_grad=True)
        x.grad = m.ones(2, dtype=m.float64)

    for program, words in ((unused, "appears to not have been used in the graph. Set "
                                    "allow_unused=True if this is the desired behavior."),
                           (not_requiring, "One of the differentiated Tensors does not require "
                                           "grad"),
                           (wrong_grad_size, "attempting to assign a gradient of size '[3]' to a "
                                             "tensor of size '[2]'"),
                           (wrong_grad_type, "attempting to assign a gradient with dtype")):
        same_error(lambda: program(tp), lambda: program(torch), words)


def bad_shape_function(library):
    """x * 2 as an autograd.Function of library whose backward returns the wrong shape."""
    class BadShape(library.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad.sum(0)[:2]

    return BadShape


BadShape, TorchBadShape = bad_shape_function(tp), bad_shape_function(torch)


class Reduced(autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad.sum(0, keepdim=True) * 0 + grad * 2  # the input's shape, broadcast


def test_function_gradients_of_other_shapes():
    x, tx = tp.ones(2, 3, requires_grad=True), torch.ones(2, 3, requires_grad=True)
    same_error(lambda: BadShape.apply(x).sum().backward(),
               lambda: TorchBadShape.apply(tx).sum().backward(),
               "returned an invalid gradient at index 0 - got [2] but expected shape compatible "
               "with [2, 3]")
    y = tp.ones(1, 3, requires_grad=True)
    (Reduced.apply(y) * tp.ones(2, 3)).sum().backward()
    assert y.grad.tolist() == [[4.0, 4.0, 4.0]]


BOUNDARY = numpy.array([-1.0, -0.5, 0.0, 0.5, 1.0])
TORCH_VERSION = tuple(int(part) for part in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
# PyTorch 2.14 gives clamp the minimum-norm subgradient at its bounds (pytorch/pytorch#191142):
# 0 at a scalar bound, split evenly between the input and a tensor bound. tensorplay keeps the
# subgradient 1 at a bound that PyTorch gave from 0.4 (pytorch/pytorch#7049) to 2.13
# (docs/design.md, "Autograd"); from 2.14 on the oracle is PyTorch computing that rule itself.
CLAMP_MINIMUM_NORM = TORCH_VERSION >= (2, 14)


def clamp_kept(m, a, low, high):
    """a.clamp(low, high) with the gradient tensorplay keeps: 1 wherever low <= a <= high."""
    if m is tp or not CLAMP_MINIMUM_NORM:
        return a.clamp(low, high)
    return torch.where((a >= low) & (a <= high), a, a.clamp(low, high).detach())


@pytest.mark.parametrize("name", ["abs", "relu", "sqrt", "log", "clamp", "clamp tensors",
                                  "div by zero", "rdiv", "max", "min", "where", "pow 0.5",
                                  "pow -1", "rpow zero"])
def test_gradients_at_kinks_and_poles(name):
    program = {
        "abs": lambda m, a: a.abs(), "relu": lambda m, a: a.relu(),
        "sqrt": lambda m, a: a.abs().sqrt(), "log": lambda m, a: a.abs().log(),
        "clamp": lambda m, a: clamp_kept(m, a, -0.5, 0.5),
        "clamp tensors": lambda m, a: clamp_kept(m, a, a * 0 - 0.5, a * 0 + 0.5),
        "div by zero": lambda m, a: 1.0 / a, "rdiv": lambda m, a: a / a,
        "max": lambda m, a: (a * 0).max() + a.abs().max(),
        "min": lambda m, a: (a * 0).min() + a.abs().min(),
        "where": lambda m, a: m.where(a >= 0, a.abs().sqrt(), a),
        "pow 0.5": lambda m, a: a ** 0.5, "pow -1": lambda m, a: a ** -1,
        "rpow zero": lambda m, a: 0.0 ** a,
    }[name]
    run_both(program, [BOUNDARY])


# -- the same on CUDA (gpu marker): tensorplay on the GPU against PyTorch on the CPU --------------


CUDA_CASES = {
    **{f"binary {name}": (BINARY[name], [values((2, 1, 3), 0), values((4, 1), 1)])
       for name in BINARY},
    **{f"unary {name}": ((lambda f: lambda m, a: f(a))(UNARY[name]),
                         [values((2, 3), 3, "distinct" if name in ("max", "min") else "signed")])
       for name in UNARY},
    **{f"in place {name}": ((lambda f: lambda m, x, w: (lambda y: (f(m, y, w), y * x)[1])(
        x * 2))(IN_PLACE[name]), [values((2, 3), 0), values((3,), 1)]) for name in IN_PLACE},
    "reductions": (lambda m, a: (a.sum((0, 2)), a.mean(-1, keepdim=True), a.sum()),
                   [values((2, 3, 4), 4)]),
    "matmul batched": (lambda m, a, b: a @ b, [values((2, 2, 3), 6), values((3, 4), 7)]),
    "matmul vectors": (lambda m, a, b: (a @ b, b.t() @ a), [values((3,), 6), values((3, 2), 7)]),
    "views": (lambda m, a: a.t().unsqueeze(0).expand(2, 2, 3).transpose(0, 2)[1:] * 2,
              [values((3, 2), 5)]),
    "pow at zero": (lambda m, a, b: (a ** b, 0.0 ** b), [numpy.array([0.0, 0.0, 2.0, -1.0]),
                                                         numpy.array([0.0, -1.0, 0.5, 2.0])]),
    "abs at zero": (lambda m, a: a.abs().sqrt(), [BOUNDARY]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CUDA_CASES))
def test_on_cuda_as_on_the_cpu(name):
    program, arrays = CUDA_CASES[name]
    run_both(program, arrays, device="cuda")


@pytest.mark.gpu
def test_item_assignment_on_cuda():
    def program(m, x, w):
        out = m.zeros(3, 4, dtype=x.dtype, device=x.device)
        out[0] = x.sum(0)
        out[1:, ::2] = w
        return out * out
    run_both(program, [values((2, 4), 0), values((2, 2), 1)], device="cuda")


BOOL_OPS = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
            "add int": lambda a, b: a + 1, "radd int": lambda a, b: 2 + b,
            "mul float": lambda a, b: a * 2.5, "div int": lambda a, b: a / 2,
            "rdiv": lambda a, b: 1 / b, "add bool": lambda a, b: a + True,
            "mul bool": lambda a, b: b * False, "pow int": lambda a, b: a ** 2,
            "rpow int": lambda a, b: 2 ** b, "add_": lambda a, b: a.clone().add_(b[0]),
            "mul_": lambda a, b: a.clone().mul_(b[0]), "add_ int": lambda a, b: a.add_(1),
            "sub": lambda a, b: a - b, "rsub": lambda a, b: 1 - a, "neg": lambda a, b: -a,
            "abs": lambda a, b: a.abs(), "relu": lambda a, b: a.relu(),
            "pow tensor": lambda a, b: a ** b,
            "floor": lambda a, b: a.div(b, rounding_mode="floor"),
            "clamp ints": lambda a, b: a.clamp(0, 1), "clamp float": lambda a, b: a.clamp(0.5),
            "clamp max int": lambda a, b: a.clamp(max=0), "clamp tensor": lambda a, b: a.clamp(b),
            "clamp bools": lambda a, b: a.clamp(False, True),
            "clamp mixed": lambda a, b: a.clamp(min=True, max=1),
            "clamp_ ints": lambda a, b: a.clone().clamp_(0, 1),
            "clamp_ tensors": lambda a, b: a.clone().clamp_(b[0], b[1])}


@pytest.mark.parametrize("name", list(BOOL_OPS))
def test_bool_arithmetic_promotes_as_pytorch(name):
    rng = numpy.random.default_rng(0)
    a, b = rng.random((2, 1, 3)) > 0.5, rng.random((4, 1)) > 0.5
    ours, theirs = tp.tensor(a), torch.tensor(a)
    other, their_other = tp.tensor(b), torch.tensor(b)
    try:
        expected = BOOL_OPS[name](theirs, their_other)
    except Exception as error:
        with pytest.raises(type(error)):
            BOOL_OPS[name](ours, other)
        return
    assert_same_tensor(BOOL_OPS[name](ours, other), expected, name)


def test_more_errors_carry_pytorchs_words():
    for program, words in ((lambda m: m.ones(0, 3).max(), "Expected reduction dim to be "
                                                           "specified for input.numel() == 0"),
                           (lambda m: m.ones(2, 3).view(-1, -1), "only one dimension can be "
                                                                 "inferred"),
                           (lambda m: m.ones(2).item(), "a Tensor with 2 elements cannot be "
                                                        "converted to Scalar")):
        same_error(lambda: program(tp), lambda: program(torch), words)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_relu_keeps_nan_and_its_gradient_is_threshold_backward(device, dtype):
    # PyTorch's relu keeps a NaN, and its gradient is threshold_backward(grad, output, 0): zero
    # only where the output is <= 0, so a NaN output passes the gradient on.
    array = numpy.array([numpy.nan, -numpy.inf, -1.0, -0.0, 0.0, 0.5, numpy.inf, numpy.nan])
    weights = numpy.arange(1.0, 9.0)
    tp_type, torch_type = DTYPES[dtype]
    ours = tp.tensor(array, dtype=tp_type, device=device, requires_grad=True)
    theirs = torch.tensor(array, dtype=torch_type, requires_grad=True)
    got, expected = ours.relu(), theirs.relu()
    assert_same_tensor(got.detach(), expected.detach(), f"relu of {array}")
    (got * tp.tensor(weights, dtype=tp_type, device=device)).sum().backward()
    (expected * torch.tensor(weights, dtype=torch_type)).sum().backward()
    assert_same_tensor(ours.grad, theirs.grad, f"relu's gradient at {array}")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("shapes", [((6, 8), (8,)), ((8,), (6, 8)), ((2, 3, 8), (1, 3, 8)),
                                    ((2, 3, 8), (1, 8)), ((5, 4), (1, 4)), ((3, 6), (6,)),
                                    ((4, 3), (3,)), ((2, 3, 4), (3, 4))])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_a_row_broadcast_over_a_batch_matches_pytorch(device, shapes, op):
    # The bias-over-a-batch broadcast has a kernel of its own on CUDA (rows of a length that is
    # a multiple of four; others, (4, 3) + (3,), take the general one), in either operand order.
    program = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
               "mul": lambda a, b: a * b, "div": lambda a, b: a / b}[op]
    run_both(lambda m, a, b: program(a, b), [values(shapes[0], 2), values(shapes[1], 3)],
             dtype="float32", rtol=1e-6, atol=1e-6, device=device)


# -- autograd.backward() of several roots, and grad-mode decorators of generators ------------

def test_autograd_backward_of_several_roots_and_into_inputs_only():
    grads = []
    for lib in (tp, torch):
        w = lib.tensor([2.0, 3.0], requires_grad=True)
        v = lib.tensor([1.0, -1.0], requires_grad=True)
        shared = w * v  # a Node both roots reach, run once with the sum of their gradients
        lib.autograd.backward([shared.sum(), (shared * w).sum(), shared],
                              [None, lib.tensor(2.0), lib.tensor([1.0, 3.0])])
        first = (w.grad.tolist(), v.grad.tolist())
        h = w * 1  # a non-leaf input accumulates too; w and v are left alone
        lib.autograd.backward((h * v).sum(), inputs=[h, v, v])
        u = lib.ones(2, requires_grad=True)  # an unused input keeps grad None
        lib.autograd.backward((w * v).sum(), inputs=u, retain_graph=False)
        grads.append((first, w.grad.tolist(), v.grad.tolist(), h.grad.tolist(), u.grad))
    assert grads[0] == grads[1]


def test_autograd_backward_errors_as_pytorch():
    def both(call):
        ours = lambda: call(tp, tp.ones(2, requires_grad=True))
        theirs = lambda: call(torch, torch.ones(2, requires_grad=True))
        return ours, theirs
    same_error(*both(lambda lib, w: lib.autograd.backward([(w * 2).sum(), w.sum()],
                                                         [lib.tensor(1.0)])),
               "got 2 tensors and 1 gradients")
    same_error(*both(lambda lib, w: lib.autograd.backward(w * 2)),
               "grad can be implicitly created only for scalar outputs")
    same_error(*both(lambda lib, w: lib.autograd.backward((w * 2).sum(), inputs=[])),
               "`inputs` argument to `backward()` cannot be empty.")
    same_error(*both(lambda lib, w: lib.autograd.backward([lib.ones(2).sum()])),
               "element 0 of tensors does not require grad and does not have a grad_fn")
    same_error(*both(lambda lib, w: lib.autograd.backward((w * 2).sum(),
                                                         inputs=[lib.ones(2)])))
    same_error(*both(lambda lib, w: lib.autograd.backward(3)))
    w = tp.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="create_graph=True is not supported"):
        autograd.backward((w * 2).sum(), create_graph=True)
    assert w.grad is None


@pytest.mark.parametrize("decorator", ["no_grad", "enable_grad"])
def test_grad_mode_decorators_keep_the_mode_at_every_generator_step(decorator):
    def run(lib):
        seen = []

        @getattr(lib, decorator)()
        def steps(count):
            for index in range(count):
                received = yield lib.is_grad_enabled()
                seen.append((index, received, lib.is_grad_enabled()))
            return "finished"

        outer = decorator == "no_grad"  # the caller's mode, the opposite of the decorator's
        with lib.set_grad_enabled(outer) if lib is torch else \
                (tp.enable_grad() if outer else tp.no_grad()):
            generator = steps(3)
            first = next(generator)
            between = lib.is_grad_enabled()
            second = generator.send("hello")
            try:
                generator.throw(KeyError("x"))
            except KeyError:
                thrown = "propagated"
            closed = steps(2)
            next(closed)
            closed.close()
            with pytest.raises(StopIteration) as stop:
                gen = steps(0)
                next(gen)
        return first, between, second, thrown, seen, stop.value.value, lib.is_grad_enabled()
    assert run(tp) == run(torch)


def test_grad_mode_decorators_decorate_methods():
    class Model:
        def __init__(self, library):
            self.weight = library.ones(2, requires_grad=True)

        @tp.no_grad()
        def ours(self, a):
            return self.weight * a

        @torch.no_grad()
        def theirs(self, a):
            return self.weight * a

        @tp.no_grad()
        def our_steps(self):
            yield self.weight * 2
    model, torch_model = Model(tp), Model(torch)
    assert model.ours(3).requires_grad == torch_model.theirs(3).requires_grad == False
    assert [each.requires_grad for each in model.our_steps()] == [False]


def test_autograd_backward_retain_graph_as_pytorch():
    results = []
    for lib in (tp, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        loss = (w * w).sum()
        lib.autograd.backward([loss], retain_graph=True)
        lib.autograd.backward([loss])  # the kept graph runs again; grads accumulate
        with pytest.raises(RuntimeError) as second:
            lib.autograd.backward([loss])  # freed by the previous pass
        results.append((w.grad.tolist(), type(second.value)))
    assert results[0] == results[1]


@pytest.mark.gpu
def test_autograd_backward_of_several_roots_on_cuda():
    grads = []
    for device in ("cpu", "cuda"):
        w = tp.tensor([2.0, 3.0], device=device, requires_grad=True)
        shared = w * w
        tp.autograd.backward([shared.sum(), shared],
                             [None, tp.tensor([1.0, 3.0], device=device)])
        grads.append(w.grad.tolist())
    assert grads[0] == grads[1] == [2 * 2.0 * 2, 2 * 3.0 * 4]
