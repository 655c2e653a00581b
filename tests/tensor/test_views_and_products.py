"""mm, bmm, dot, outer; narrow, select, movedim/moveaxis, swapaxes/swapdims, unflatten;
reciprocal, clamp_min/clamp_max, the logical operations, tril/triu and is_floating_point, as
Tensor methods and tensorplay functions, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests:
- test/test_linalg.py: TestLinalg.test_mm / test_bmm (products against a reference for
  several shapes, the errors for operands of the wrong dimensions), test_dot_invalid_args
  ("1D tensors expected", "inconsistent tensor size", "same dtype") and test_outer;
- test/test_view_ops.py: TestViewOps.test_narrow / test_select / test_movedim (and
  test_shape_ops.py's test_movedim_invalid: "Invalid source or destination dims", "repeated
  dim"), test_swapaxes / test_swapdims and test_unflatten (the error for sizes that do not
  multiply up to the dimension); each result is a view where PyTorch's is one (a write shows
  in the base);
- test/test_binary_ufuncs.py: test_logical_and / or / xor over mixed dtypes, and
  test_unary_ufuncs.py's logical_not and reciprocal (integers give float32);
- test/test_torch.py: test_tril_triu over diagonals from -3 to 3 and batched matrices.
Values and gradients are compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.fixture
def torch():
    return import_or_skip("torch")


@pytest.mark.parametrize("device", DEVICES)
def test_products_match_pytorch(device, torch):
    rng = numpy.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    p, q = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    u, v = rng.standard_normal(4), rng.standard_normal(6)
    ours = {name: tp.tensor(value.tolist(), dtype=tp.float64, device=device,
                            requires_grad=True) for name, value in
            (("a", a), ("b", b), ("p", p), ("q", q), ("u", u), ("v", v))}
    theirs = {name: torch.tensor(value, requires_grad=True) for name, value in
              (("a", a), ("b", b), ("p", p), ("q", q), ("u", u), ("v", v))}
    for call in (lambda n, t: n.mm(t["a"], t["b"]), lambda n, t: t["a"].mm(t["b"]),
                 lambda n, t: n.bmm(t["p"], t["q"]), lambda n, t: t["p"].bmm(t["q"]),
                 lambda n, t: n.dot(t["u"], t["u"]), lambda n, t: t["u"].dot(t["u"]),
                 lambda n, t: n.outer(t["u"], t["v"]), lambda n, t: t["u"].outer(t["v"])):
        mine, reference = call(tp, ours), call(torch, theirs)
        assert tuple(mine.shape) == tuple(reference.shape)
        numpy.testing.assert_allclose(values(mine), reference.detach().numpy(), rtol=1e-12)
        mine.sum().backward()
        reference.sum().backward()
    for name in ours:
        numpy.testing.assert_allclose(values(ours[name].grad), theirs[name].grad.numpy(),
                                      rtol=1e-12)
    assert tp.outer(tp.tensor([1, 2], device=device), tp.tensor([0.5], device=device)).dtype \
        is tp.float32  # promoted, as PyTorch's


def test_product_refusals():
    matrix, batch, vector = tp.ones(2, 3), tp.ones(2, 2, 3), tp.ones(3)
    with pytest.raises(ValueError, match="self must be a matrix"):
        tp.mm(vector, matrix)
    with pytest.raises(ValueError, match="mat2 must be a matrix"):
        matrix.mm(batch)
    with pytest.raises(ValueError, match="batch1 must be a 3D tensor"):
        matrix.bmm(batch)
    with pytest.raises(ValueError, match="Expected size for first two dimensions of batch2"):
        batch.bmm(tp.ones(1, 3, 2))  # bmm does not broadcast its batch
    with pytest.raises(ValueError, match="1D tensors expected, but got 2D and 1D tensors"):
        tp.dot(matrix, vector)
    with pytest.raises(ValueError, match="inconsistent tensor size"):
        tp.dot(vector, tp.ones(4))
    with pytest.raises(TypeError, match="same dtype"):
        tp.dot(vector, tp.ones(3, dtype=tp.float64))
    with pytest.raises(ValueError, match="Expected 1-D argument vec2"):
        tp.outer(vector, matrix)
    with pytest.raises(TypeError, match="mat2"):
        matrix.mm([[1.0]])


@pytest.mark.parametrize("device", DEVICES)
def test_views_match_pytorch_and_share_memory(device, torch):
    data = numpy.arange(24.0).reshape(2, 3, 4)
    cases = [
        lambda m, x: m.narrow(x, 2, 1, 2), lambda m, x: x.narrow(-1, -3, 3),
        lambda m, x: x.narrow(1, 3, 0), lambda m, x: m.select(x, 1, -1),
        lambda m, x: x.select(0, 1), lambda m, x: m.movedim(x, 0, -1),
        lambda m, x: x.movedim((0, 2), (2, 0)), lambda m, x: m.moveaxis(x, [1], [0]),
        lambda m, x: m.swapaxes(x, 0, 2), lambda m, x: x.swapdims(-1, 1),
        lambda m, x: m.unflatten(x, 2, (2, 2)), lambda m, x: x.unflatten(-1, (-1, 1, 2)),
    ]
    for case in cases:
        ours = case(tp, tp.tensor(data.tolist(), device=device))
        theirs = case(torch, torch.tensor(data))
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert ours.flatten().tolist() == theirs.flatten().tolist()
    base = tp.zeros(2, 3, 4, device=device)
    for view, written in ((base.narrow(2, 1, 2), 12), (base.select(1, 0), 8),
                          (base.swapaxes(0, 1), 24), (base.unflatten(2, (2, 2)), 24)):
        view.fill_(1.0)
        assert base.sum().item() == written  # written through the view
        base.zero_()
    x = tp.tensor(data.tolist(), device=device, requires_grad=True)
    (x.narrow(2, 1, 2) * 2).sum().backward()
    assert values(x.grad)[0, 0].tolist() == [0.0, 2.0, 2.0, 0.0]


def test_view_refusals_use_pytorchs_messages():
    x = tp.zeros(2, 5)
    with pytest.raises(IndexError, match=r"start out of range \(expected to be in range of "
                                         r"\[-5, 5\], but got 6\)"):
        x.narrow(1, 6, 0)
    with pytest.raises(IndexError, match=r"start \(2\) \+ length \(4\) exceeds dimension size"):
        x.narrow(1, 2, 4)
    with pytest.raises(ValueError, match="length"):
        x.narrow(1, 0, -1)
    with pytest.raises(IndexError, match="index 2 out of range"):
        x.select(0, 2)
    with pytest.raises(IndexError, match="0-dim"):
        tp.tensor(1.0).select(0, 0)
    with pytest.raises(ValueError, match="Invalid source or destination dims"):
        x.movedim((0, 1), 0)
    with pytest.raises(ValueError, match="repeated dim in `source`"):
        x.movedim((0, 0), (0, 1))
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.movedim(2, 0)
    with pytest.raises(RuntimeError, match="don't multiply up to the size of dim 1"):
        x.unflatten(1, (2, 2))
    with pytest.raises(RuntimeError, match="non-empty"):
        x.unflatten(1, ())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float32", "float64"])
def test_logical_operations_match_pytorch(device, dtype, torch):
    first = [0, 1, 2, 0, 3, 1] if dtype != "bool" else [0, 1, 1, 0, 1, 1]
    second = [0.0, 0.0, 2.5, 1.0, -1.0, float("nan")]
    ours = tp.tensor(first, dtype=getattr(tp, dtype), device=device)
    theirs = torch.tensor(first, dtype=getattr(torch, dtype))
    other, their_other = tp.tensor(second, device=device), torch.tensor(second)
    for name in ("logical_and", "logical_or", "logical_xor"):
        for result, expected in ((getattr(tp, name)(ours, other),
                                  getattr(torch, name)(theirs, their_other)),
                                 (getattr(ours, name)(other), getattr(theirs, name)(their_other))):
            assert result.dtype is tp.bool and result.tolist() == expected.tolist(), name
    assert tp.logical_not(ours).tolist() == torch.logical_not(theirs).tolist()
    assert ours.logical_not().dtype is tp.bool
    with pytest.raises(TypeError, match="other"):
        ours.logical_and(1)


@pytest.mark.parametrize("device", DEVICES)
def test_reciprocal_and_one_sided_clamps(device, torch):
    data = [-2.0, -0.5, 0.0, 0.25, 4.0]
    ours = tp.tensor(data, dtype=tp.float64, device=device, requires_grad=True)
    theirs = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    for call in (lambda t: t.reciprocal(), lambda t: t.clamp_min(-0.5),
                 lambda t: t.clamp_max(0.25)):
        mine, reference = call(ours), call(theirs)
        numpy.testing.assert_array_equal(values(mine), reference.detach().numpy())
    # Bounds no element equals: at a bound, PyTorch 2.14 takes the minimum-norm subgradient and
    # tensorplay keeps 1 (docs/design.md, "Autograd"; test_autograd_against_torch.py checks it).
    (ours.clamp_min(-0.6) * 3 + ours.clamp_max(0.3)).sum().backward()
    (theirs.clamp_min(-0.6) * 3 + theirs.clamp_max(0.3)).sum().backward()
    assert values(ours.grad).tolist() == theirs.grad.tolist()
    assert tp.reciprocal(tp.tensor([2, 4], device=device)).dtype is tp.float32
    x = tp.tensor([2.0, 8.0], device=device)
    assert x.reciprocal_() is x and x.tolist() == [0.5, 0.125]
    assert x.clamp_min_(0.25).tolist() == [0.5, 0.25]
    assert x.clamp_max_(0.375).tolist() == [0.375, 0.25]
    with pytest.raises(RuntimeError, match="can't be cast"):
        tp.tensor([2, 4], device=device).reciprocal_()


@pytest.mark.parametrize("device", DEVICES)
def test_tril_and_triu_match_pytorch(device, torch):
    data = numpy.arange(1.0, 1.0 + 2 * 3 * 4).reshape(2, 3, 4)
    for diagonal in range(-3, 4):
        for name in ("tril", "triu"):
            ours = getattr(tp, name)(tp.tensor(data.tolist(), device=device), diagonal)
            theirs = getattr(torch, name)(torch.tensor(data), diagonal)
            numpy.testing.assert_array_equal(values(ours), theirs.numpy())
            x = tp.tensor(data.tolist(), device=device)
            assert getattr(x, name + "_")(diagonal) is x
            numpy.testing.assert_array_equal(values(x), theirs.numpy())
    x = tp.tensor(data.tolist(), device=device, requires_grad=True)
    x.triu(1).sum().backward()
    numpy.testing.assert_array_equal(values(x.grad), numpy.triu(numpy.ones((3, 4)), 1)[None]
                                     .repeat(2, 0))
    assert tp.ones(2, 2, dtype=tp.bool, device=device).tril().tolist() == [[True, False],
                                                                            [True, True]]
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        tp.ones(3).tril()


def test_is_floating_point_and_split():
    assert tp.is_floating_point(tp.zeros(1, dtype=tp.bfloat16))
    assert not tp.zeros(1, dtype=tp.int8).is_floating_point()
    assert [piece.tolist() for piece in tp.split(tp.arange(5), [1, 4])] == [[0], [1, 2, 3, 4]]


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    a = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    b = tp.tensor([1.0, -1.0], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = (a.mm(a), tp.dot(b, b), tp.outer(b, b), a.narrow(1, 1, 1).clone(),
                   a.movedim(0, 1).contiguous(), a.reciprocal(), a.clamp_min(2.5),
                   tp.logical_and(a > 2, b > 0))
    a.copy_(tp.tensor([[0.5, 1.0], [2.0, 4.0]], device="cuda"))
    b.copy_(tp.tensor([2.0, 3.0], device="cuda"))
    graph.replay()
    cpu_a, cpu_b = a.cpu(), b.cpu()
    expected = (cpu_a.mm(cpu_a), tp.dot(cpu_b, cpu_b), tp.outer(cpu_b, cpu_b),
                cpu_a.narrow(1, 1, 1), cpu_a.movedim(0, 1), cpu_a.reciprocal(),
                cpu_a.clamp_min(2.5), tp.logical_and(cpu_a > 2, cpu_b > 0))
    for output, want in zip(outputs, expected):
        numpy.testing.assert_allclose(values(output), values(want), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_tile_stacks_isclose_and_count_nonzero_match_pytorch(device, torch):
    data = [[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]
    ours, theirs = tp.tensor(data, device=device), torch.tensor(data)
    for dims in ((2,), (2, 1), (1, 2, 2), [3]):
        assert ours.tile(dims).tolist() == theirs.tile(dims).tolist()
    assert tp.tile(ours, (2, 1)).tolist() == torch.tile(theirs, (2, 1)).tolist()
    pieces = [[1, 2], [3, 4]]
    ours_pieces = [tp.tensor(piece, device=device) for piece in pieces]
    theirs_pieces = [torch.tensor(piece) for piece in pieces]
    assert tp.hstack(ours_pieces).tolist() == torch.hstack(theirs_pieces).tolist()
    assert tp.vstack(ours_pieces).tolist() == torch.vstack(theirs_pieces).tolist()
    assert tp.hstack([ours, ours]).tolist() == torch.hstack([theirs, theirs]).tolist()
    assert tp.vstack([ours, tp.tensor([7.0, 8.0, 9.0], device=device)]).tolist() == \
        torch.vstack([theirs, torch.tensor([7.0, 8.0, 9.0])]).tolist()
    for dim in (None, 0, 1, (0, 1)):
        assert tp.count_nonzero(ours, dim).tolist() == torch.count_nonzero(theirs, dim).tolist()
    a = [1.0, 2.0, float("nan"), float("inf"), -float("inf"), 1e-9, 100.0]
    b = [1.0 + 1e-6, 2.001, float("nan"), float("inf"), float("inf"), 0.0, 100.001]
    for options in ({}, {"equal_nan": True}, {"rtol": 1e-3, "atol": 0.0}):
        assert tp.isclose(tp.tensor(a, device=device), tp.tensor(b, device=device),
                          **options).tolist() == \
            torch.isclose(torch.tensor(a), torch.tensor(b), **options).tolist()
    ints = tp.tensor([1, 5, 9], device=device)
    assert ints.isclose(tp.tensor([1, 6, 9], device=device), atol=1.0).tolist() == \
        [True, True, True]
    with pytest.raises(TypeError, match="dtype"):
        tp.isclose(ours, tp.ones(2, 3, dtype=tp.float64, device=device))
    with pytest.raises(ValueError, match="rtol must be greater than or equal to zero"):
        tp.isclose(ours, ours, rtol=-1.0)
    with pytest.raises(TypeError, match="non-empty"):
        tp.hstack([])


@pytest.mark.parametrize("device", DEVICES)
def test_flip_and_roll_match_pytorch(device, torch):
    # After PyTorch's test/test_shape_ops.py TestShapeOps.test_flip (several dims, negative
    # dims, the duplicate refusal) and test_roll (shifts over one and several dims, negative
    # and oversized shifts, dims=None rolling the flattened tensor), with gradients.
    data = numpy.arange(24.0).reshape(2, 3, 4)
    cases = [lambda m, x: x.flip(0), lambda m, x: x.flip(-1, 1), lambda m, x: x.flip([0, 2]),
             lambda m, x: m.flip(x, (0, 1, 2)), lambda m, x: x.roll(1), lambda m, x: x.roll(-7),
             lambda m, x: x.roll(5, 2), lambda m, x: m.roll(x, (1, -2), (0, 2)),
             lambda m, x: x.roll((4,), (1,))]
    for case in cases:
        ours = tp.tensor(data.tolist(), dtype=tp.float64, device=device, requires_grad=True)
        theirs = torch.tensor(data, requires_grad=True)
        mine, reference = case(tp, ours), case(torch, theirs)
        assert values(mine).tolist() == reference.detach().numpy().tolist()
        weights = numpy.arange(1.0, 25.0).reshape(2, 3, 4)
        (mine * tp.tensor(weights.tolist(), dtype=tp.float64, device=device)).sum().backward()
        (reference * torch.tensor(weights)).sum().backward()
        assert values(ours.grad).tolist() == theirs.grad.numpy().tolist()
    x = tp.tensor([[1, 2]], device=device)
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        x.flip(0, -2)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        x.roll((1, 2), 0)
    with pytest.raises(TypeError, match="shifts"):
        x.roll(1.5, 0)
    assert x.flip().tolist() == [[1, 2]] and tp.roll(tp.zeros(0, device=device), 3).shape == (0,)


@pytest.mark.parametrize("device", DEVICES)
def test_type_and_equal_match_pytorch(device, torch):
    # After PyTorch's test/test_torch.py TestTorch.test_type (the legacy names, conversion by
    # dtype and by name) and test_equal (shape mismatch, dtype promotion, NaN).
    x = tp.ones(2, device=device)
    prefix = "tensorplay.cuda." if device == "cuda" else "tensorplay."
    for dtype, name in ((tp.float32, "FloatTensor"), (tp.float64, "DoubleTensor"),
                        (tp.bfloat16, "BFloat16Tensor"), (tp.int64, "LongTensor"),
                        (tp.uint8, "ByteTensor"), (tp.bool, "BoolTensor")):
        converted = x.type(dtype)
        assert converted.dtype is dtype and converted.type() == prefix + name
        torch_name = torch.ones(2, dtype=getattr(torch, str(dtype).split(".")[-1])).type()
        assert torch_name == "torch." + name
    assert x.type(tp.float32) is x
    assert x.type("torch.IntTensor").dtype is tp.int32
    assert x.type("tensorplay.IntTensor").device.type == "cpu"
    with pytest.raises(ValueError, match="invalid type"):
        x.type("torch.NoSuchTensor")
    with pytest.raises(TypeError, match="dtype"):
        x.type(3)
    for a, b in (([1, 2], [1.0, 2.0]), ([1, 2], [[1, 2]]), ([float("nan")], [float("nan")]),
                 ([1.0, 2.0], [1.0, 2.5])):
        assert tp.equal(tp.tensor(a, device=device), tp.tensor(b, device=device)) == \
            torch.equal(torch.tensor(a), torch.tensor(b))
