"""The methods and functions a PyTorch user types first (size, dim, T, mT, permute, squeeze,
flatten, square, the dtype conversions, float(t)/int(t)/bool(t), cat, stack, linspace, matmul,
exp, relu, the dtype aliases, cuda.is_available), against PyTorch on the CPU: values, dtypes,
gradients, warnings and errors. The CUDA variants (gpu marker) compare tensorplay on the GPU
with PyTorch on the CPU."""
import operator
import random
import warnings

import numpy
import pytest

import tensorplay as tp
from tensorplay import accelerator

from tests.peers import import_or_skip

torch = import_or_skip("torch")

from tests.autograd.test_autograd_against_torch import (  # noqa: E402 (after import_or_skip)
    ALL_DTYPES, as_numpy, run_both, same_error, values)

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


# -- views and reshapes, with gradients ------------------------------------------------------

VIEWS = {
    "permute": ((2, 3, 4), lambda m, a: a.permute(2, 0, 1)),
    "permute sequence": ((2, 3, 4), lambda m, a: a.permute([1, -1, 0])),
    "permute 0-d": ((), lambda m, a: a.permute(())),
    "permute then matmul": ((2, 3), lambda m, a: a.permute(1, 0) @ a),
    "T 2-D": ((2, 3), lambda m, a: a.T),
    "T 1-D": ((3,), lambda m, a: a.T),
    "mT": ((2, 3, 4), lambda m, a: a.mT),
    "mT 2-D": ((2, 3), lambda m, a: a.mT * 2),
    "squeeze all": ((1, 2, 1, 3), lambda m, a: a.squeeze()),
    "squeeze int": ((1, 2, 1, 3), lambda m, a: a.squeeze(2)),
    "squeeze size 2": ((1, 2, 1, 3), lambda m, a: a.squeeze(1)),
    "squeeze tuple": ((1, 2, 1, 3), lambda m, a: a.squeeze((0, -2))),
    "squeeze 0-d": ((), lambda m, a: a.squeeze(0)),
    "flatten": ((2, 3, 4), lambda m, a: a.flatten()),
    "flatten middle": ((2, 3, 4, 5), lambda m, a: a.flatten(1, 2)),
    "flatten negative": ((2, 3, 4), lambda m, a: a.flatten(-2)),
    "flatten transposed": ((2, 3, 4), lambda m, a: a.transpose(0, 2).flatten()),
    "flatten 0-d": ((), lambda m, a: a.flatten()),
    "flatten one dim": ((2, 3), lambda m, a: a.flatten(1, 1) * 3),
    "square": ((2, 3), lambda m, a: a.square()),
    "float of float64": ((2, 3), lambda m, a: a.float() * 2),
    "double": ((2, 3), lambda m, a: a.double().square()),
    "matmul": ((3, 3), lambda m, a: m.matmul(a, a.T)),
    "exp": ((2, 3), lambda m, a: m.exp(a)),
    "relu": ((2, 3), lambda m, a: m.relu(a)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_and_their_gradients_match_pytorch(name, device):
    shape, program = VIEWS[name]
    run_both(program, [values(shape, 0)], device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_permute_and_transposes_are_views_of_the_same_memory(device):
    x = tp.tensor(values((2, 3, 4), 0), device=device)
    for view in (x.permute(2, 0, 1), x.mT, x.squeeze(), x.flatten(0, 0)):
        assert view.data_ptr() == x.data_ptr()
    assert x.permute(2, 0, 1).stride() == (1, 12, 4)
    assert x.mT.stride() == (12, 1, 4)
    assert x.flatten(0, 0) is x  # nothing to join: the tensor itself, as PyTorch's


def test_grad_fn_names():
    a = tp.ones(2, 3, requires_grad=True)
    assert repr(a.permute(1, 0).grad_fn) == "<PermuteBackward>"
    assert repr(a.T.grad_fn) == "<PermuteBackward>"
    assert repr(a.mT.grad_fn) == "<TransposeBackward>"
    assert repr(tp.cat([a, a]).grad_fn) == "<CatBackward>"
    assert repr(tp.stack([a, a]).grad_fn) == "<StackBackward>"
    assert repr(a.square().grad_fn) == "<PowBackward>"


def test_T_warns_as_pytorch_does():
    # PyTorch 2.13 warns once per process (TORCH_WARN_ONCE), so its words are written here.
    expected = {(): "Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                    "these cases.",
                (3,): None, (2, 3): None,
                (2, 3, 4): "The use of `x.T` on tensors of dimension other than 2 to reverse "
                           "their shape is deprecated and it will throw an error in a future "
                           "release."}
    for shape, message in expected.items():
        with warnings.catch_warnings(record=True) as ours:
            warnings.simplefilter("always")
            got = tp.zeros(*shape).T.shape
        assert tuple(got) == tuple(reversed(shape))
        assert [w.category for w in ours] == ([] if message is None else [UserWarning]), shape
        if message is not None:
            assert str(ours[0].message).startswith(message)


def test_size_and_dim_match_pytorch():
    for shape in [(), (3,), (2, 0, 4)]:
        ours, theirs = tp.zeros(*shape), torch.zeros(shape)
        assert ours.size() == tuple(theirs.size()) == ours.shape
        assert isinstance(ours.size(), tuple)  # torch.Size is a tuple too
        assert ours.dim() == theirs.dim() == ours.ndim
        for dim in range(-len(shape), len(shape)):
            assert ours.size(dim) == theirs.size(dim)


ERRORS = [
    ("permute count", lambda m: m.zeros(2, 3, 4).permute(0, 1),
     "does not match the length of the desired ordering of dimensions"),
    ("permute duplicate", lambda m: m.zeros(2, 3, 4).permute(0, 1, 1), "duplicate dims"),
    ("permute range", lambda m: m.zeros(2, 3, 4).permute(0, 1, 3), "Dimension out of range"),
    ("mT 1-D", lambda m: m.zeros(3).mT, "tensor.mT is only supported on matrices"),
    ("flatten order", lambda m: m.zeros(2, 3, 4).flatten(2, 1),
     "start_dim cannot come after end_dim"),
    ("flatten range", lambda m: m.zeros(2, 3).flatten(5), "Dimension out of range"),
    ("squeeze range", lambda m: m.zeros(2, 3).squeeze(5), "Dimension out of range"),
    ("squeeze twice", lambda m: m.zeros(1, 2).squeeze((0, 0)), "appears multiple times"),
    ("size range", lambda m: m.zeros(2, 3).size(3), "Dimension out of range"),
    ("size of 0-d", lambda m: m.tensor(1.0).size(0), "tensor has no dimensions"),
    ("size type", lambda m: m.zeros(2).size(1.0), None),
    ("cat empty", lambda m: m.cat([]), "expected a non-empty list of Tensors"),
    ("cat ndim", lambda m: m.cat([m.zeros(2), m.zeros(2, 3)]),
     "Tensors must have same number of dimensions: got 1 and 2"),
    ("cat sizes", lambda m: m.cat([m.zeros(2, 3), m.zeros(3, 3)], dim=1),
     "Sizes of tensors must match except in dimension 1. Expected size 2 but got size 3 for "
     "tensor number 1 in the list."),
    ("cat dim", lambda m: m.cat([m.zeros(2, 3), m.zeros(2, 3)], dim=2), "Dimension out of range"),
    ("cat 0-d", lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]),
     "zero-dimensional tensor (at position 0) cannot be concatenated"),
    ("cat a tensor", lambda m: m.cat(m.zeros(2)), None),
    ("cat an int", lambda m: m.cat([m.zeros(2), 3]), "expected Tensor as element 1"),
    ("stack sizes", lambda m: m.stack([m.zeros(2), m.zeros(3)]),
     "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1"),
    ("stack empty", lambda m: m.stack([]), "stack expects a non-empty TensorList"),
    ("stack dim", lambda m: m.stack([m.zeros(2)], dim=2), "Dimension out of range"),
    ("bool of many", lambda m: bool(m.zeros(2)),
     "Boolean value of Tensor with more than one value is ambiguous"),
    ("bool of none", lambda m: bool(m.zeros(0)),
     "Boolean value of Tensor with no values is ambiguous"),
    ("float of many", lambda m: float(m.zeros(2)),
     "only one element tensors can be converted to Python scalars"),
    ("int of none", lambda m: int(m.zeros(0)),
     "only one element tensors can be converted to Python scalars"),
    ("index of float", lambda m: operator.index(m.ones(1)),
     "only integer tensors of a single element can be converted to an index"),
    ("index of many", lambda m: operator.index(m.ones(2, dtype=m.int64)),
     "only integer tensors of a single element can be converted to an index"),
    ("linspace grad of int", lambda m: m.linspace(0, 1, 3, dtype=m.int64, requires_grad=True),
     None),
]


@pytest.mark.parametrize("name,program,fragment", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_match_pytorch(name, program, fragment):
    same_error(lambda: program(tp), lambda: program(torch), fragment)


# -- dtype conversions and Python numbers ------------------------------------------------------

CONVERSIONS = ["float", "double", "half", "bfloat16", "long", "int", "bool"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("source", ALL_DTYPES)
def test_dtype_conversions_match_pytorch(source, device):
    data = numpy.array([[0, 1, 2], [-3, 5, 127]]) if source != "bool" else \
        numpy.array([[True, False, True], [False, False, True]])
    if source == "uint8":
        data = numpy.abs(data)
    ours = tp.tensor(data, dtype=getattr(tp, source), device=device)
    theirs = torch.tensor(data, dtype=getattr(torch, source))
    for method in CONVERSIONS:
        got, expected = getattr(ours, method)(), getattr(theirs, method)()
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], method
        assert got.device == ours.device
        numpy.testing.assert_array_equal(as_numpy(got.cpu()), as_numpy(expected), method)
    assert ours.to(ours.dtype) is ours
    same = {"float32": "float", "float64": "double", "int64": "long", "int32": "int",
            "bool": "bool", "float16": "half"}.get(source)
    if same is not None:
        assert getattr(ours, same)() is ours  # no copy when the dtype is already that


@pytest.mark.parametrize("device", DEVICES)
def test_python_numbers_of_one_element_tensors(device):
    for value, dtype in [(2.75, "float32"), (-2.75, "float64"), (-3, "int64"), (7, "uint8"),
                         (True, "bool"), (0.0, "float16"), (1.5, "bfloat16")]:
        ours = tp.tensor([[value]], dtype=getattr(tp, dtype), device=device)
        theirs = torch.tensor([[value]], dtype=getattr(torch, dtype))
        assert float(ours) == float(theirs) and type(float(ours)) is float
        assert int(ours) == int(theirs) and type(int(ours)) is int
        assert bool(ours) == bool(theirs) and type(bool(ours)) is bool
        if not ours.dtype.is_floating_point:
            assert operator.index(ours) == operator.index(theirs)
            assert [10, 20, 30, 40, 50, 60, 70, 80][ours] == [10, 20, 30, 40, 50, 60, 70, 80][
                theirs]
    assert bool(tp.tensor(float("nan"))) is bool(torch.tensor(float("nan"))) is True


# -- cat and stack --------------------------------------------------------------------------------

JOINS = {
    "cat dim 0": ([(2, 3), (1, 3), (4, 3)], lambda m, *t: m.cat(t)),
    "cat dim 1": ([(2, 3), (2, 1)], lambda m, *t: m.cat(list(t), dim=1)),
    "cat dim -1": ([(2, 3, 1), (2, 3, 2)], lambda m, *t: m.cat(t, -1)),
    "cat one": ([(2, 3)], lambda m, a: m.cat([a], dim=1)),
    "cat transposed": ([(3, 2), (2, 2)], lambda m, a, b: m.cat([a.T, b], dim=1)),
    "cat with empty": ([(2, 3), (0,)], lambda m, a, b: m.cat([a, b])),
    "cat size 0": ([(2, 0), (2, 3)], lambda m, a, b: m.cat([a, b], 1)),
    "cat same twice": ([(2, 3)], lambda m, a: m.cat([a, a * 2])),
    "stack dim 0": ([(2, 3), (2, 3), (2, 3)], lambda m, *t: m.stack(t)),
    "stack dim 1": ([(2, 3), (2, 3)], lambda m, *t: m.stack(list(t), dim=1)),
    "stack dim -1": ([(2, 3), (2, 3)], lambda m, *t: m.stack(t, -1)),
    "stack 0-d": ([(), ()], lambda m, *t: m.stack(t)),
    "stack views": ([(3, 2)], lambda m, a: m.stack([a.T, a.T * 3], 2)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(JOINS))
def test_cat_and_stack_match_pytorch(name, device):
    shapes, program = JOINS[name]
    run_both(program, [values(shape, seed) for seed, shape in enumerate(shapes)],
             device=device)


@pytest.mark.parametrize("device", DEVICES)
def test_cat_and_stack_of_integers_and_bfloat16(device):
    for dtype in ["int64", "uint8", "bool", "bfloat16", "float16"]:
        a = numpy.array([[1, 0], [1, 1]]).astype(bool if dtype == "bool" else "int64")
        ours = [tp.tensor(a, dtype=getattr(tp, dtype), device=device)] * 2
        theirs = [torch.tensor(a, dtype=getattr(torch, dtype))] * 2
        for join in ("cat", "stack"):
            got, expected = getattr(tp, join)(ours, 1), getattr(torch, join)(theirs, 1)
            assert got.dtype == getattr(tp, dtype)
            numpy.testing.assert_array_equal(as_numpy(got.cpu()), as_numpy(expected))


def test_cat_promotes_mixed_dtypes_as_pytorch():
    # torch.cat gives the dtype its tensors promote to (tests/tensor/test_promotion.py has
    # every pair).
    joined = tp.cat([tp.ones(2), tp.ones(2, dtype=tp.float64), tp.ones(1, dtype=tp.int64)])
    expected = torch.cat([torch.ones(2), torch.ones(2, dtype=torch.float64),
                          torch.ones(1, dtype=torch.int64)])
    assert str(joined.dtype) == str(expected.dtype).replace("torch", "tensorplay")
    assert joined.tolist() == expected.tolist()


@pytest.mark.gpu
def test_cat_refuses_tensors_on_two_devices():
    with pytest.raises(ValueError, match="different devices"):
        tp.cat([tp.zeros(2), tp.zeros(2, device="cuda")])


# -- linspace -------------------------------------------------------------------------------------


def linspace_cases(count, seed):
    rng = random.Random(seed)
    for trial in range(count):
        start, end = rng.uniform(-100, 100), rng.uniform(-100, 100)
        if trial % 3 == 0:
            start, end = rng.randint(-50, 50), rng.randint(-50, 50)
        if trial % 7 == 0:
            start, end = rng.uniform(-1e-3, 1e-3), rng.uniform(-1e6, 1e6)
        steps = rng.choice([0, 1, 2, 3, 5, 7, 16, 17, 31, 32, 33, 64, 65, 100, 1000,
                            rng.randint(0, 5000)])
        yield start, end, steps


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64",
                                   "int32", "int16", "int8"])
def test_linspace_matches_pytorch_bit_for_bit(dtype):
    for start, end, steps in linspace_cases(400, hash(dtype) % 1000):
        if dtype in ("int8", "int16", "float16"):  # within the dtype (PyTorch refuses more)
            start, end = start % 100, end % 100
        expected = torch.linspace(start, end, steps, dtype=getattr(torch, dtype))
        got = tp.linspace(start, end, steps, dtype=getattr(tp, dtype))
        assert got.dtype == getattr(tp, dtype) and got.shape == (steps,)
        ours, theirs = as_numpy(got), as_numpy(expected)
        assert numpy.array_equal(ours.view(numpy.uint8), theirs.view(numpy.uint8)), (
            f"linspace({start}, {end}, {steps}, dtype={dtype}) differs at "
            f"{numpy.nonzero(ours != theirs)[0][:10]}")


def test_linspace_defaults_and_edges_match_pytorch():
    for args in [(0, 1, 0), (0, 1, 1), (2, 2, 3), (True, 3, 4), (0, float("inf"), 3),
                 (0, float("nan"), 3), (-3.5, 7, 4), (10, 0, 11)]:
        got, expected = tp.linspace(*args), torch.linspace(*args)
        assert got.dtype == tp.float32 and got.shape == tuple(expected.shape)
        numpy.testing.assert_array_equal(as_numpy(got), as_numpy(expected))
    x = tp.linspace(0, 1, 3, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    with pytest.raises(ValueError, match="steps"):
        tp.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="steps"):
        tp.linspace(0, 1, 2.0)
    with pytest.raises(TypeError, match="start"):
        tp.linspace("0", 1, 2)
    with pytest.raises(TypeError, match="bool"):
        tp.linspace(0, 1, 2, dtype=tp.bool)


@pytest.mark.gpu
def test_linspace_on_cuda_matches_the_cpu():
    for dtype in ["float32", "float64", "float16", "bfloat16", "int64"]:
        for start, end, steps in linspace_cases(30, 5):
            if dtype == "float16":  # within the dtype, as in the CPU test above
                start, end = start % 100, end % 100
            cpu = tp.linspace(start, end, steps, dtype=getattr(tp, dtype))
            cuda = tp.linspace(start, end, steps, dtype=getattr(tp, dtype), device="cuda")
            assert cuda.device.type == "cuda"
            assert numpy.array_equal(as_numpy(cuda.cpu()).view(numpy.uint8),
                                     as_numpy(cpu).view(numpy.uint8))


@pytest.mark.gpu
def test_linspace_is_refused_during_a_capture_which_goes_on():
    # Its values are computed on the host and copied from pageable memory, which a capture
    # refuses (Tensor.copy_()); the capture is not invalidated.
    static = tp.zeros(4, device="cuda")
    static += 1  # the kernel compiled and loaded before the capture
    accelerator.synchronize()
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        static += 1
        with pytest.raises(RuntimeError, match="pageable host memory"):
            tp.linspace(0, 1, 4, device="cuda")
        static += 1
    graph.replay()
    accelerator.synchronize()
    assert static.tolist() == [3.0] * 4


# -- names ----------------------------------------------------------------------------------------


def test_dtype_aliases_are_the_same_objects_as_pytorch():
    for alias in ["float", "double", "half", "long", "int", "short"]:
        assert getattr(tp, alias) is getattr(tp, str(getattr(torch, alias)).split(".")[-1])
    assert tp.zeros(2, dtype=tp.float).dtype is tp.float32
    assert not hasattr(tp, "cfloat")  # no complex dtypes


def test_cuda_discovery_answers_as_the_accelerator():
    assert tp.cuda.is_available is accelerator.is_available
    assert tp.cuda.device_count is accelerator.device_count
    assert tp.cuda.is_available() == accelerator.is_available()
    assert tp.cuda.device_count() == accelerator.device_count()


def test_square_of_integers_and_bools_matches_pytorch():
    for dtype in ["bool", "uint8", "int8", "int32", "int64", "float16"]:
        data = numpy.array([0, 1, 1, 0]) if dtype == "bool" else numpy.array([0, 3, 5, 11])
        ours = tp.tensor(data.astype(bool) if dtype == "bool" else data,
                         dtype=getattr(tp, dtype)).square()
        theirs = torch.tensor(data.astype(bool) if dtype == "bool" else data,
                              dtype=getattr(torch, dtype)).square()
        assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], dtype
        numpy.testing.assert_array_equal(as_numpy(ours), as_numpy(theirs))


@pytest.mark.parametrize("device", DEVICES)
def test_comparison_methods_and_the_as_forms_match_pytorch(device):
    # PyTorch's MNIST example counts its hits as pred.eq(target.view_as(pred)).sum().item().
    scores = [[0.1, 2.0, -1.0], [3.0, 0.5, 0.2], [0.0, 0.1, 0.9]]
    labels = [1, 0, 1]
    ours = tp.tensor(scores, device=device).argmax(dim=1, keepdim=True)
    theirs = torch.tensor(scores).argmax(dim=1, keepdim=True)
    assert ours.eq(tp.tensor(labels, device=device).view_as(ours)).sum().item() == \
        theirs.eq(torch.tensor(labels).view_as(theirs)).sum().item() == 2
    a, b = [1.0, 2.0, 3.0], [3.0, 2.0, 1.0]
    for name in ("eq", "ne", "lt", "le", "gt", "ge"):
        assert getattr(tp.tensor(a, device=device), name)(tp.tensor(b, device=device)).tolist() \
            == getattr(torch.tensor(a), name)(torch.tensor(b)).tolist()
        assert getattr(tp.tensor(a, device=device), name)(2).tolist() == \
            getattr(torch.tensor(a), name)(2).tolist()
    x = tp.arange(6, device=device)
    assert tuple(x.reshape_as(tp.ones(2, 3)).shape) == (2, 3)
    assert tuple(tp.ones(3, device=device).expand_as(tp.ones(4, 3)).shape) == (4, 3)
    assert x.type_as(tp.ones(1)).dtype is tp.float32
    with pytest.raises(TypeError, match="other"):
        x.view_as([2, 3])


@pytest.mark.parametrize("device", DEVICES)
def test_new_factories_and_clip_match_pytorch(device):
    ours = tp.ones(2, 3, dtype=tp.int32, device=device)
    theirs = torch.ones(2, 3, dtype=torch.int32)
    for make in (lambda t: t.new_zeros(2), lambda t: t.new_ones((1, 2)),
                 lambda t: t.new_full((2,), 7), lambda t: t.new_tensor([1.7, -2.2]),
                 lambda t: t.new_zeros(2, dtype=t.dtype), lambda t: t.new_empty(3).zero_()):
        result, expected = make(ours), make(theirs)
        assert result.tolist() == expected.tolist()
        assert str(result.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        assert result.device == ours.device
    assert ours.new_zeros(2, dtype=tp.float64).dtype is tp.float64
    assert ours.new_ones(1, device="cpu").device == tp.device("cpu")
    assert ours.new_zeros(2, dtype=tp.float32, requires_grad=True).requires_grad
    x = [-3.0, 0.5, 5.0]
    assert tp.tensor(x, device=device).clip(-1, 1).tolist() == torch.tensor(x).clip(-1, 1).tolist()
    y = tp.tensor(x, device=device)
    assert y.clip_(max=0) is y and y.tolist() == torch.tensor(x).clip_(max=0).tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_eye_is_tensor_and_numel_match_pytorch(device):
    for arguments in ((3,), (2, 4), (4, 2), (0,), (1, 0)):
        assert tp.eye(*arguments, device=device).tolist() == torch.eye(*arguments).tolist()
    assert tp.eye(2, dtype=tp.int64, device=device).tolist() == [[1, 0], [0, 1]]
    assert tp.eye(2, dtype=tp.bool, device=device).tolist() == torch.eye(2, dtype=torch.bool).tolist()
    assert tp.eye(3, device=device, requires_grad=True).requires_grad
    same_error(lambda: tp.eye(-1), lambda: torch.eye(-1))
    with pytest.raises(TypeError, match="n must be an int"):
        tp.eye(2.5)
    assert tp.is_tensor(tp.ones(1)) and tp.is_tensor(tp.nn.Parameter(tp.ones(1)))
    assert not tp.is_tensor([1.0]) and not tp.is_tensor(torch.ones(1))
    assert tp.numel(tp.ones(2, 3, device=device)) == torch.numel(torch.ones(2, 3)) == 6


@pytest.mark.parametrize("device", DEVICES)
def test_logsumexp_matches_pytorch(device):
    data = numpy.random.default_rng(5).normal(0, 30, (3, 4, 5))
    inf = float("inf")
    for dim, keepdim in ((1, False), (-1, True), ((0, 2), False), ([0, 1, 2], True)):
        ours = tp.tensor(data.tolist(), device=device, requires_grad=True)
        theirs = torch.tensor(data.tolist(), requires_grad=True)
        result, expected = ours.logsumexp(dim, keepdim), theirs.logsumexp(dim, keepdim)
        assert tuple(result.shape) == tuple(expected.shape)
        numpy.testing.assert_allclose(as_numpy(result), expected.detach().numpy(), rtol=1e-5)
        result.sum().backward()
        expected.sum().backward()
        numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-5,
                                      atol=1e-7)
    extremes = [[inf, 1.0], [-inf, -inf], [1e4, 1e4]]
    assert tp.tensor(extremes, device=device).logsumexp(1).tolist() == \
        torch.tensor(extremes).logsumexp(1).tolist()
    assert tp.tensor([1, 2, 3], device=device).logsumexp(0).item() == pytest.approx(
        torch.tensor([1, 2, 3]).logsumexp(0).item())


@pytest.mark.parametrize("device", DEVICES)
def test_norm_matches_pytorch(device):
    # Tensor.norm as torch.linalg.vector_norm, a zero row and a zero element included: PyTorch's
    # gradient at a norm of 0 (and, for 0 < p < 1, at an element of 0) is 0, not NaN.
    data = numpy.random.default_rng(6).normal(0, 2, (3, 4))
    data[1] = 0
    data[0, 1] = 0
    for p in ("fro", 2, 1, 3, 0.5, 0, float("inf"), float("-inf"), 2.5, -1):
        for dim, keepdim in ((None, False), (None, True), (1, False), (0, True), ((0, 1), False)):
            ours = tp.tensor(data.tolist(), device=device, requires_grad=True)
            theirs = torch.tensor(data.tolist(), requires_grad=True)
            result, expected = ours.norm(p, dim, keepdim), theirs.norm(p, dim, keepdim)
            assert tuple(result.shape) == tuple(expected.shape), (p, dim, keepdim)
            numpy.testing.assert_allclose(as_numpy(result), expected.detach().numpy(),
                                          rtol=1e-5, err_msg=f"p={p} dim={dim}")
            if p != "fro" and p <= 0:
                continue
            result.sum().backward()
            expected.sum().backward()
            numpy.testing.assert_allclose(as_numpy(ours.grad), theirs.grad.numpy(), rtol=1e-5,
                                          atol=1e-7, err_msg=f"p={p} dim={dim}")
    same_error(lambda: tp.tensor([1, 2]).norm(), lambda: torch.tensor([1, 2]).norm(),
               "Expected a floating point")
    with pytest.raises(ValueError, match="'fro'"):
        tp.ones(2).norm("nuc")


@pytest.mark.parametrize("device", DEVICES)
def test_a_norm_without_identity_of_no_element_is_refused_as_pytorch(device):
    # A negative or infinite p over an empty dimension has no value (a max, a min or a power of
    # no element): PyTorch's RuntimeError, in its words; p of 0 and above give 0.
    inf = float("inf")
    for p, dim, shape in ((-1, None, (0,)), (inf, None, (0,)), (-inf, None, (0,)),
                          (inf, 1, (2, 0)), (-2, 1, (2, 0))):
        same_error(lambda: tp.ones(shape, device=device).norm(p, dim),
                   lambda: torch.ones(shape).norm(p, dim),
                   f"cannot compute the {'-' if p < 0 else ''}")
    for p in (0, 0.5, 1, 2):
        assert tp.ones(0, device=device).norm(p).item() == torch.ones(0).norm(p).item() == 0.0
    assert tp.ones(2, 0, device=device).norm(inf, 0).shape == (0,)  # nothing reduced is empty
