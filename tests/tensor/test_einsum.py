"""einsum() on the CPU and on CUDA (marked gpu), against numpy's einsum and PyTorch's.

Ported from PyTorch's test/test_linalg.py:
- test_einsum: every equation of its vector, matrix, tensor, diagonal and ellipsis groups, the
  bilinear form over non-contiguous and strided operands, and the six-operand equation;
- test_einsum_corner_cases: the equation's spaces, empty terms, sizes of 0, broadcasting of
  sizes of 1 and of the ellipsis, each with its expected value;
- test_einsum_error_cases: each malformed equation with PyTorch's message;
- test_einsum_sublist_format: its cases of the sublist form, einsum(op, [0, 1], ...), and its
  subscript out of range;
- test_einsum_random's idea: gradients of every operand compared with PyTorch's.
Values are compared with numpy.einsum, gradients with torch where it is installed.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
RNG = numpy.random.default_rng(0)
SHAPES = {"x": (5,), "y": (7,), "A": (3, 5), "B": (2, 5), "C": (2, 3, 5), "D": (2, 5, 7),
          "E": (7, 9), "F": (2, 3, 3, 5), "G": (5, 4, 6), "H": (4, 4), "I": (2, 3, 2),
          "N": (2, 1, 3, 1, 4), "K": (5, 3), "L": (2, 5, 2, 3)}
ARRAYS = {name: RNG.standard_normal(shape) for name, shape in SHAPES.items()}
ARRAYS["At"] = ARRAYS["A"].T
# test_einsum's equations, with the names of their operands.
EQUATIONS = [
    ("i->", "x"), ("i,i->", "x x"), ("i,i->i", "x x"), ("i,j->ij", "x y"),
    ("ij->ji", "A"), ("ij->j", "A"), ("ij->i", "A"), ("ij,ij->ij", "A A"), ("ij,j->i", "A x"),
    ("ij,kj->ik", "A B"), ("ij,ab->ijab", "A E"),
    ("Aij,Ajk->Aik", "C D"), ("ijk,jk->i", "C A"), ("aij,jk->aik", "D E"),
    ("abCd,dFg->abCFg", "F G"), ("ijk,jk->ik", "C A"), ("ijk,jk->ij", "C A"),
    ("ijk,ik->j", "C B"), ("ijk,ik->jk", "C B"),
    ("ii", "H"), ("ii->i", "H"), ("iji->j", "I"), ("ngrg...->nrg...", "N"),
    ("i...->...", "H"), ("ki,...k->i...", "At B"), ("k...,jk->...", "At B"),
    ("...ik, ...j -> ...ij", "C x"), ("Bik,k...j->i...j", "C K"),
    ("i...j, ij... -> ...ij", "C L"),
    ("...,be,b...,beg,gi,bc...->bi...", "A B C D E F"),
]


def as_numpy(tensor):
    return numpy.asarray(tensor.detach().cpu().numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("equation, names", EQUATIONS, ids=[e for e, _ in EQUATIONS])
def test_pytorchs_equations_match_numpy(device, equation, names):
    arrays = [ARRAYS[name] for name in names.split()]
    ours = tp.einsum(equation, *[tp.tensor(array, device=device) for array in arrays])
    expected = numpy.einsum(equation.replace(" ", ""), *arrays)
    assert tuple(ours.shape) == numpy.shape(expected)
    numpy.testing.assert_allclose(as_numpy(ours), expected, rtol=1e-10, atol=1e-10)
    as_list = tp.einsum(equation, [tp.tensor(array, device=device) for array in arrays])
    numpy.testing.assert_allclose(as_numpy(as_list), expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_bilinear_of_non_contiguous_and_strided_operands(device):
    left = tp.tensor(RNG.standard_normal((10, 5)), device=device).t()   # (5, 10), transposed
    right = tp.tensor(RNG.standard_normal((20, 5)), device=device).t()
    weight = tp.tensor(RNG.standard_normal((15, 10, 20)), device=device)
    for operands in ((left, weight, right),
                     (left[:, ::2], weight[:, ::2, ::2], right[:, ::2])):
        ours = tp.einsum("bn,anm,bm->ba", *operands)
        expected = numpy.einsum("bn,anm,bm->ba", *[as_numpy(t) for t in operands])
        numpy.testing.assert_allclose(as_numpy(ours), expected, rtol=1e-10, atol=1e-10)


# test_einsum_corner_cases: (equation, operands, expected)
CORNERS = [
    (" ", [1], 1), (" -> ", [1], 1), (" , ", [2, 2], 4), (" , , ", [2, 2, 2], 8),
    (" , -> ", [2, 2], 4), (" i ", [[1]], [1]), (" i -> ", [[1]], 1), (" i -> i ", [[1]], [1]),
    (" i , i ", [[2], [2]], 4), (" i , i -> i ", [[2], [2]], [4]),
    ("i", [[]], []), (" i j -> j", [[[], []]], []), ("ij->i", [[[], []]], [0.0, 0.0]),
    (" i j k  ,  k  -> i j ", [numpy.ones((3, 0, 6)), numpy.ones(6)],
     numpy.zeros((3, 0))),
    ("i,j", [[2], [1, 2]], [[2, 4]]),
    ("i,ij->ij", [[1, 2], [[1, 2, 3], [2, 3, 4]]], [[1, 2, 3], [4, 6, 8]]),
    ("...", [1], 1), ("...->", [1], 1), ("...->...", [1], 1), ("...", [[1]], [1]),
    ("...->", [[1]], 1), ("z...->z", [[1]], [1]), ("Z...->...Z", [[1]], [1]),
    ("...a->", [[[2], [4]]], 6), ("a...b->ab", [[[[1], [2]], [[3], [4]]]], [[3], [7]]),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("equation, operands, expected", CORNERS)
def test_corner_cases(device, equation, operands, expected):
    ours = tp.einsum(equation, [tp.tensor(numpy.asarray(operand, dtype=numpy.float32),
                                          device=device) for operand in operands])
    assert ours.dtype is tp.float32
    numpy.testing.assert_array_equal(as_numpy(ours), numpy.asarray(expected, numpy.float32))


@pytest.mark.parametrize("device", DEVICES)
def test_integers_and_16_bit_floats(device):
    a = RNG.integers(-5, 5, (3, 4))
    b = RNG.integers(-5, 5, (4, 2))
    ours = tp.einsum("ij,jk->ik", tp.tensor(a, device=device), tp.tensor(b, device=device))
    assert ours.dtype is tp.int64
    numpy.testing.assert_array_equal(as_numpy(ours), a @ b)
    half = tp.einsum("ij,jk", tp.tensor(a, dtype=tp.float16, device=device),
                     tp.tensor(b, dtype=tp.float16, device=device))
    assert half.dtype is tp.float16
    numpy.testing.assert_array_equal(as_numpy(half).astype(numpy.int64), a @ b)


# test_einsum_error_cases: (equation, operand shapes, PyTorch's message)
ERRORS = [
    (". ..", [(2,)], "einsum(): found '.' for operand 0 that is not part of any ellipsis"),
    ("... ...", [(2,)], "einsum(): found '.' for operand 0 for which an ellipsis was already "
                        "found"),
    ("1", [(2,)], "einsum(): invalid subscript given at index 0"),
    (",", [(2,)], "einsum(): fewer operands were provided than specified in the equation"),
    ("", [(2,), (2,)], "einsum(): more operands were provided than specified in the equation"),
    ("", [(2,)], "einsum(): the number of subscripts in the equation (0) does not match the "
                 "number of dimensions (1) for operand 0 and no ellipsis was given"),
    ("ai", [(2,)], "einsum(): the number of subscripts in the equation (2) does not match the "
                   "number of dimensions (1) for operand 0 and no ellipsis was given"),
    ("ai...", [(2,)], "einsum(): the number of subscripts in the equation (2) is more than the "
                      "number of dimensions (1) for operand 0"),
    ("a->... .", [(2,)], "einsum(): found '.' for output but an ellipsis (...) was already "
                         "found"),
    ("a->..", [(2,)], "einsum(): found '.' for output that is not part of any ellipsis (...)"),
    ("a->1", [(2,)], "einsum(): invalid subscript given at index 3"),
    ("a->aa", [(2,)], "einsum(): output subscript a appears more than once in the output"),
    ("a->i", [(2,)], "einsum(): output subscript i does not appear in the equation for any "
                     "input operand"),
    ("aa", [(2, 3)], "einsum(): subscript a is repeated for operand 0 but the sizes don't "
                     "match, 3 != 2"),
    ("...,...", [(2,), (2, 3)], "does not broadcast"),
    ("a,a", [(2,), (3,)], "einsum(): subscript a has size 3 for operand 1 which does not "
                          "broadcast with previously seen size 2"),
]


@pytest.mark.parametrize("equation, shapes, message", ERRORS, ids=[e for e, _, _ in ERRORS])
def test_errors_are_pytorchs(equation, shapes, message):
    with pytest.raises(RuntimeError) as raised:
        tp.einsum(equation, *[tp.ones(*shape) for shape in shapes])
    assert message in str(raised.value)
    torch = import_or_skip("torch")
    with pytest.raises(RuntimeError) as theirs:
        torch.einsum(equation, *[torch.ones(*shape) for shape in shapes])
    assert message in str(theirs.value)


def test_argument_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="at least one operand"):
        tp.einsum("i")
    with pytest.raises(TypeError, match="operands must be tensors, but operand 1 is a list"):
        tp.einsum("i,i", tp.ones(2), [1.0, 2.0])
    with pytest.raises(TypeError, match="equation must be a str"):
        tp.einsum(3, tp.ones(2))
    with pytest.raises(RuntimeError, match="float32 for operand 0 and float64 for operand 1"):
        tp.einsum("i,i", tp.ones(2), tp.ones(2, dtype=tp.float64))
    with pytest.raises(TypeError, match="bool operands are not supported"):
        tp.einsum("i", tp.ones(2, dtype=tp.bool))


@pytest.mark.parametrize("equation, names", EQUATIONS[:22] + EQUATIONS[23:],
                         ids=[e for e, _ in EQUATIONS[:22] + EQUATIONS[23:]])
def test_gradients_match_pytorch(equation, names):
    torch = import_or_skip("torch")
    arrays = [ARRAYS[name] for name in names.split()]
    ours = [tp.tensor(array, requires_grad=True) for array in arrays]
    theirs = [torch.tensor(array, requires_grad=True) for array in arrays]
    mine, reference = tp.einsum(equation, *ours), torch.einsum(equation, *theirs)
    weights = RNG.standard_normal(tuple(reference.shape))
    (mine * tp.tensor(weights)).sum().backward()
    (reference * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_allclose(as_numpy(mine), reference.detach().numpy(), rtol=1e-10,
                                  atol=1e-10)
    for got, expected in zip(ours, theirs):
        numpy.testing.assert_allclose(as_numpy(got.grad), expected.grad.numpy(), rtol=1e-10,
                                      atol=1e-10)


@pytest.mark.gpu
def test_a_captured_einsum_replays_with_new_values(quiet_device):
    q = tp.tensor(RNG.standard_normal((2, 4, 8)), dtype=tp.float32, device="cuda")
    k = tp.tensor(RNG.standard_normal((2, 6, 8)), dtype=tp.float32, device="cuda")
    tp.einsum("bqd,bkd->bqk", q, k)  # the warm-up, as PyTorch's recipe
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        scores = tp.einsum("bqd,bkd->bqk", q, k)
    fresh = RNG.standard_normal((2, 4, 8))
    q.copy_(tp.tensor(fresh, dtype=tp.float32, device="cuda"))
    graph.replay()
    numpy.testing.assert_allclose(as_numpy(scores),
                                  numpy.einsum("bqd,bkd->bqk", fresh, as_numpy(k)),
                                  rtol=1e-5, atol=1e-5)


# test_einsum_sublist_format's cases: (operands by name, each followed by its sublist, and an
# optional output sublist), against the equation they stand for.
SUBLISTS = [
    (("x", [0]), "A"),
    (("x", [0], []), "A->"),
    (("x", [0], "y", [1]), "A,B"),
    (("A", [0, 1], "B", [2, 1], [0, 2]), "AB,CB->AC"),
    (("C", [0, 1, 2], "A", [1, 2], [0]), "ABC,BC->A"),
    (("H", [0, 0]), "AA"),
    (("C", [Ellipsis, 0, 1], "x", [1], [Ellipsis, 0]), "...AB,B->...A"),
    (("A", [26, 51], "B", [27, 51], [26, 27]), "az,bz->ab"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("arguments, equation", SUBLISTS)
def test_sublist_format(device, arguments, equation):
    tensors = {name: tp.tensor(array, device=device) for name, array in ARRAYS.items()}
    args = [tensors[item] if isinstance(item, str) else item for item in arguments]
    operands = [argument for argument in args if isinstance(argument, tp.Tensor)]
    expected = tp.einsum(equation, *operands)
    got = tp.einsum(*args)
    assert got.shape == expected.shape
    numpy.testing.assert_allclose(numpy.asarray(got.tolist()), numpy.asarray(expected.tolist()),
                                  rtol=1e-12, atol=1e-12)


def test_sublist_format_errors():
    x = tp.ones(2)
    with pytest.raises(ValueError, match=r"einsum\(\): subscript in subscript list is not within "
                                         r"the valid range \[0, 52\)"):
        tp.einsum(x, [52])
    with pytest.raises(ValueError, match="valid range"):
        tp.einsum(x, [0], x, [-1])
    with pytest.raises(ValueError, match="or at least one operand and its subscripts list"):
        tp.einsum(x)
    with pytest.raises(TypeError, match=r"takes a list of subscripts after each operand"):
        tp.einsum(x, "i")
    with pytest.raises(TypeError, match=r"subscripts must be ints from 0 to 51 or Ellipsis, "
                                        r"got 'i'"):
        tp.einsum(x, ["i"])
    with pytest.raises(TypeError, match="operands must be tensors, but operand 1 is a list"):
        tp.einsum(x, [0], [1.0, 2.0], [0])


def test_sublist_format_is_pytorchs():
    torch = import_or_skip("torch")
    a, b = ARRAYS["A"], ARRAYS["B"]
    mine = tp.einsum(tp.tensor(a), [0, Ellipsis], tp.tensor(b), [1, Ellipsis])
    theirs = torch.einsum(torch.tensor(a), [0, Ellipsis], torch.tensor(b), [1, Ellipsis])
    numpy.testing.assert_allclose(numpy.asarray(mine.tolist()), theirs.numpy(), rtol=1e-12)
    for args in (([52],), ([0], [0, 1]), ()):
        with pytest.raises(ValueError) as ours:
            tp.einsum(tp.ones(2), *args)
        with pytest.raises((ValueError, RuntimeError)) as reference:
            torch.einsum(torch.ones(2), *args)
        assert str(ours.value).startswith(str(reference.value)[:40])
