"""In-place changes of views under autograd (engine.pyx, Note [Views and in-place changes]), on
the CPU and on CUDA (marked gpu), against PyTorch where it is installed.

Ported from PyTorch's test/test_autograd.py (TestAutogradDeviceType): test_inplace_view_
backprop_base, _backprop_view_of_view, _of_view and _backprop_view (a view, or a view of a view,
changed in place; the gradient through the base, another view or the view itself),
test_inplace_view_gradcheck's program (two slices of a clone changed by mul_ with a tensor
that requires grad; compared with PyTorch's gradients instead of gradcheck),
test_inplace_view_makes_base_require_grad, test_inplace_view_modify_base (a view taken before
its base changed in place follows the change), test_inplace_view_non_contig,
test_inplace_view_weak_grad_fn and test_inplace_view_multi_output_safe's programs (which
PyTorch now refuses; here each piece is a view of its own); and TestAutograd's refusals of a
view of a leaf, of a view made in no_grad mode and of an expanded view, with PyTorch's
messages (VariableTypeUtils.h, TensorIterator's overlap check).
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


# Programs over two leaves, x (3, 4) and w (4,), that change views in place; each returns the
# tensors whose weighted sum is differentiated. m is the library (tensorplay or torch).
def slice_mul(m, x, w):
    b = x * 1
    b[1:].mul_(w)
    return (b,)


def two_slices_of_a_clone(m, x, w):  # test_inplace_view_gradcheck's func
    b = x.clone()
    b.narrow(1, 2, 2).narrow(0, 1, 2).mul_(w[:2])
    b.narrow(1, 0, 2).narrow(0, 1, 2).mul_(w[2:])
    return (b,)


def narrow_add_alpha(m, x, w):
    b = x.clone()
    b.narrow(1, 1, 2).add_(w[:2], alpha=3)
    return (b,)


def column_of_transpose(m, x, w):  # test_inplace_on_view_non_contig
    b = x * 2
    b.t()[0].mul_(w[:3])
    return (b,)


def view_of_view(m, x, w):  # test_inplace_on_view_of_view
    b = x * 1
    v = b[1:]
    v[:, 1:3].mul_(w[1:3])
    return (b, v)


def select_then_setitem(m, x, w):
    b = x * 1
    row = b[2]
    row[1:3] = w[:2] * 5
    return (b, row)


def buffer_takes_the_gradient(m, x, w):  # test_inplace_on_view_makes_base_require_grad
    buffer = m.zeros(3, 4, dtype=x.dtype, device=x.device)
    buffer[:, 1].copy_(x[:, 0] * 2)
    buffer[0].add_(w)
    return (buffer,)


def fill_and_zero(m, x, w):
    b = x * w
    b[0].fill_(2.0)
    b[:, 3].zero_()
    return (b,)


def unary_in_place(m, x, w):
    b = x + 0.5
    b[:, :2].clamp_(-1.0, 1.0)
    b[1:].exp_()  # PyTorch's exp_ saves its result: nothing may change b after it
    return (b,)


def view_then_base_changes(m, x, w):  # test_inplace_on_view_modify_base
    b = x * 1
    column = b[:, 0]
    row = b[0]
    b.mul_(w)
    row.mul_(3)
    return (column, row, b)


def overlapping_views(m, x, w):
    b = x * 1
    first, second = b[:2], b[1:]
    first.mul_(2)
    second.add_(w)
    return (first, second, b)


def reshaped_view(m, x, w):
    b = x * 1
    flat = b.view(12)
    flat[::2].mul_(3)
    return (b, flat)


def unsqueezed_and_used_twice(m, x, w):
    b = x * 1
    v = b.unsqueeze(0)[0, 1]
    y = v * 2  # uses the view's values before the change
    v.mul_(w)
    return (y, v, b)


def chained_in_place(m, x, w):
    b = x * 1
    v = b[1]
    v.mul_(w)
    v.add_(1)
    v.div_(w + 2)
    return (b,)


def multi_output_pieces(m, x, w):  # test_inplace_on_view_multi_output_safe's values
    b = x * 1
    first, second = b.split(2, 0)
    y = first * 1 + 0
    return (y, second * w)


PROGRAMS = [slice_mul, two_slices_of_a_clone, narrow_add_alpha, column_of_transpose,
            view_of_view, select_then_setitem, buffer_takes_the_gradient, fill_and_zero,
            unary_in_place, view_then_base_changes, overlapping_views, reshaped_view,
            unsqueezed_and_used_twice, chained_in_place,
            multi_output_pieces]


def run(m, program, device, x_data, w_data):
    x = m.tensor(x_data, dtype=m.float64, device=device, requires_grad=True)
    w = m.tensor(w_data, dtype=m.float64, device=device, requires_grad=True)
    outputs = program(m, x, w)
    total = 0
    for index, output in enumerate(outputs):
        weights = numpy.arange(1.0, 1.0 + output.numel()).reshape(tuple(output.shape))
        total = total + (output * m.tensor(weights * (index + 1), dtype=m.float64,
                                           device=device)).sum()
    total.backward()
    def array(tensor):
        if tensor is None:
            return None
        return values(tensor) if m is tp else tensor.detach().numpy()

    return [array(output) for output in outputs] + [array(leaf.grad) for leaf in (x, w)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.__name__)
def test_values_and_gradients_match_pytorch(device, program):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(7)
    x_data, w_data = rng.normal(0, 1, (3, 4)).tolist(), rng.normal(0, 1, 4).tolist()
    ours = run(tp, program, device, x_data, w_data)
    theirs = run(torch, program, "cpu", x_data, w_data)
    assert len(ours) == len(theirs)
    for mine, reference in zip(ours, theirs):
        assert (mine is None) == (reference is None)
        if mine is not None:
            numpy.testing.assert_allclose(mine, reference, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_the_base_and_the_view_take_pytorchs_nodes(device):
    x = tp.ones(2, 3, device=device, requires_grad=True)
    b = x * 1
    v = b[0]
    v.mul_(2)
    assert repr(b.grad_fn) == "<CopySlices>" and repr(v.grad_fn) == "<AsStridedBackward>"
    other = b[1]
    b.add_(1)  # the base changed: a view taken before follows it
    assert repr(other.grad_fn) == "<AsStridedBackward>" and not other.is_leaf
    other.sum().backward()
    assert values(x.grad).tolist() == [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_a_view_of_a_buffer_makes_it_require_grad(device):
    # test_inplace_on_view_makes_base_require_grad
    a = tp.ones(4, device=device)
    b = tp.ones(2, device=device, requires_grad=True)
    view = a[1:3]
    other = a[:2]
    assert not a.requires_grad and not view.requires_grad
    view.mul_(b)
    assert a.requires_grad and view.requires_grad and other.requires_grad
    a.sum().backward()
    assert values(b.grad).tolist() == [1.0, 1.0]


# PyTorch's TestAutogradDeviceType tests of in-place changes of views, with their expected
# gradients (gradcheck's programs are compared with PyTorch above).
@pytest.mark.parametrize("device", DEVICES)
def test_pytorchs_backprop_through_base_view_and_view_of_view(device):
    def root():
        return tp.tensor([[0.5, -1.0], [2.0, 3.0]], device=device, requires_grad=True)

    r = root()  # test_inplace_view_backprop_base
    x = r.clone()
    x.narrow(0, 0, 1).mul_(2)
    x.sum().backward()
    assert values(r.grad).tolist() == [[2.0, 2.0], [1.0, 1.0]]
    r = root()  # test_inplace_view_backprop_view_of_view
    x = r.clone()
    v1, v2 = x.narrow(0, 0, 1), x.narrow(0, 0, 1)
    v1.mul_(2)
    v2.sum().backward()
    assert values(r.grad).tolist() == [[2.0, 2.0], [0.0, 0.0]]
    r = root()  # test_inplace_view_of_view
    x = r.clone()
    x.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    x.sum().backward()
    assert values(r.grad).tolist() == [[1.0, 2.0], [1.0, 1.0]]
    a = tp.tensor([2.0, 5.0], device=device)  # test_inplace_view_backprop_view
    b = tp.tensor([3.0], device=device, requires_grad=True)
    result = a.narrow(0, 1, 1).mul_(b)
    result.sum().backward()
    assert values(b.grad).tolist() == [5.0] and a.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_pytorchs_modify_base_and_non_contiguous_root(device):
    r = tp.ones(1, device=device, requires_grad=True)  # test_inplace_view_modify_base
    x = tp.ones(5, device=device)
    v = x.select(0, 1)
    assert not v.requires_grad and v.grad_fn is None
    x.add_(r)  # v now depends on r through the change of its base
    assert v.requires_grad
    v.backward()
    assert values(r.grad).tolist() == [1.0]
    # test_inplace_view_non_contig: a transposed root whose clone keeps its layout or not
    root = tp.ones(2, 3, 2, device=device).select(2, 1).t().requires_grad_(True)
    x = root.clone()
    x.narrow(0, 0, 1).narrow(1, 1, 1).mul_(2)
    x.sum().backward()
    assert values(root.grad).tolist() == [[1.0, 2.0], [1.0, 1.0], [1.0, 1.0]]


@pytest.mark.parametrize("device", DEVICES)
def test_pytorchs_weak_grad_fn_and_pieces(device):
    # test_inplace_view_weak_grad_fn: the base's history outlives the view changed in place
    a = tp.arange(10.0, device=device, requires_grad=True)
    b = a.narrow(0, 0, 2).clone().view(-1)
    b.relu_()
    c = b.clone()
    del b
    total = c.sum()
    total.backward()
    assert total.item() == 1.0 and values(a.grad).tolist() == [0.0, 1.0] + [0.0] * 8
    # test_inplace_view_multi_output_safe's programs, which PyTorch refuses since 1.7 (a
    # piece of split() or chunk() changed in place): each piece here is a view of its own, so
    # the change is recorded; one piece changed by another, which its Node saved, is then the
    # saved tensor's refusal at backward().
    for split in (lambda t: t.split(1), lambda t: t.chunk(3), lambda t: t.unbind(0)):
        a = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], device=device,
                      requires_grad=True)
        s1, s2, s3 = split(a + a)
        s1.mul_(3)
        (s1.sum() + s2.sum()).backward()
        assert values(a.grad).tolist() == [[6.0] * 3, [2.0] * 3, [0.0] * 3]
        s1, s2, s3 = split(a + a)
        s1.mul_(s2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            s1.sum().backward()


def test_a_base_with_gaps_in_its_memory_takes_the_change():
    # The legal pattern beside the overlap refusal: a base made from a strided numpy array
    # (every other column) is no dense tensor, and its view changes as PyTorch's does.
    torch = import_or_skip("torch")
    data = numpy.arange(24.0).reshape(4, 6)
    results = []
    for m in (tp, torch):
        base = m.from_numpy(data.copy()[:, ::2])
        w = m.tensor([0.5, -1.0, 2.0], dtype=m.float64, requires_grad=True)
        base[1:3].mul_(w)
        (base * m.arange(12.0, dtype=m.float64).reshape(4, 3)).sum().backward()
        results.append((base.tolist(), w.grad.tolist()))
    assert results[0] == results[1]


def test_refusals_are_pytorchs():
    x = tp.ones(3, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is "
                                           "being used in an in-place operation"):
        x[0].mul_(2)  # test_inplace_on_view_leaf_errors
    b = x * 1
    with tp.no_grad():
        made_without_grad = b[0]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being "
                                           "modified inplace with grad mode enabled"):
        made_without_grad.mul_(2)
    with tp.no_grad():  # test_inplace_on_view_then_no_grad: both inside, nothing recorded
        inside = b[1]
        inside.mul_(2)
    assert repr(b.grad_fn) == "<MulBackward>"
    expanded = (x[:1] * 1).expand(3, 4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        expanded.add_(x)
    assert values(b).tolist()[1] == [2.0] * 4 and x.grad is None


def test_refused_changes_leave_everything_as_it_was():
    x = tp.ones(2, 3, requires_grad=True)
    b = x * 1
    view = b[0]
    with pytest.raises(RuntimeError):
        view.mul_(tp.ones(3, requires_grad=True).expand(2, 3))  # shapes differ
    assert repr(b.grad_fn) == "<MulBackward>" and repr(view.grad_fn) == "<GetitemBackward>"
    assert values(b).tolist() == [[1.0] * 3] * 2
    (view * 2).sum().backward()  # the history is intact: nothing was saved over
    assert values(x.grad).tolist() == [[2.0] * 3, [0.0] * 3]


@pytest.mark.gpu
def test_capture_and_replay_of_a_view_changed_in_place(quiet_device):
    x = tp.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda", requires_grad=True)
    w = tp.tensor([5.0, 6.0], device="cuda", requires_grad=True)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        b = x * 1
        b[0].mul_(w)
        b.sum().backward()
    x.grad.zero_()
    w.grad.zero_()
    with tp.no_grad():
        x.copy_(tp.tensor([[2.0, 2.0], [2.0, 2.0]], device="cuda"))
    graph.replay()
    assert values(x.grad).tolist() == [[5.0, 6.0], [1.0, 1.0]]
    assert values(w.grad).tolist() == [2.0, 2.0]
