"""Tensor.register_hook, retain_grad and retains_grad, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own test/test_autograd.py:
- TestAutograd.test_hooks: hooks on a non-leaf see its gradient, a hook's return value
  replaces the gradient for what follows, handle.remove() unregisters it, and hooks run in
  registration order;
- test_hook_with_no_name / test_tensor_hooks_inplace_over_view's basic half: a leaf's hook
  runs once per backward pass on the gradient summed over every use, before .grad;
- test_retain_grad (a non-leaf's .grad after backward, accumulated over two passes, the
  retains_grad flag, a leaf's retain_grad() doing nothing) and
  test_retain_grad_inplace's companion test_retains_grad_can_always_observe_tensor_prehook
  (retain_grad sees the gradient after the other hooks);
- test_hook_none / test_hooks_cpp's error cases: registering on a tensor that does not
  require grad is refused with PyTorch's message.
Each case is compared with PyTorch where torch is installed.
"""
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def run(module, device=None):
    """The same computation in tensorplay or torch: hooks on a leaf and a non-leaf."""
    options = {"device": device} if device else {}
    x = module.tensor([1.0, 2.0, -1.0], requires_grad=True, **options)
    order, leaf_calls = [], []
    x.register_hook(lambda g: leaf_calls.append(g.tolist()))
    y = x * 3
    y.retain_grad()
    y.register_hook(lambda g: order.append("first"))
    y.register_hook(lambda g: g * 2)
    y.register_hook(lambda g: order.append(("second", g.tolist())))
    z = y * y + x * x  # x is used twice: its hook runs once, on the sum
    z.sum().backward()
    return x.grad.tolist(), y.grad.tolist(), order, leaf_calls, y.retains_grad, x.retains_grad


@pytest.mark.parametrize("device", DEVICES)
def test_hooks_and_retained_grads_match_pytorch(device):
    ours = run(tp, device)
    assert ours == ([38.0, 76.0, -38.0], [12.0, 24.0, -12.0],
                    ["first", ("second", [12.0, 24.0, -12.0])], [[38.0, 76.0, -38.0]], True,
                    False)
    torch = import_or_skip("torch")
    assert ours == run(torch)


@pytest.mark.parametrize("device", DEVICES)
def test_removal_and_accumulation(device):
    x = tp.tensor([1.0, 2.0], device=device, requires_grad=True)
    calls = []
    handle = x.register_hook(lambda g: calls.append(1))
    y = x * 2
    y.retain_grad()
    y.sum().backward(retain_graph=True)
    y.sum().backward()  # retained .grad accumulates, as a leaf's
    assert y.grad.tolist() == [2.0, 2.0] and x.grad.tolist() == [4.0, 4.0] and calls == [1, 1]
    handle.remove()
    handle.remove()  # a second remove does nothing
    (x * 2).sum().backward()
    assert calls == [1, 1]
    y.grad = None
    assert y.grad is None
    x.retain_grad()  # a leaf keeps its .grad anyway: nothing to do
    assert not x.retains_grad


def test_autograd_grad_sees_hooked_gradients():
    x = tp.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g + 1)
    (grad,) = tp.autograd.grad((x * x).sum(), x)
    assert grad.tolist() == [3.0, 5.0] and x.grad is None


def test_refusals():
    x = tp.tensor([1.0])
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        x.register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has "
                                           "requires_grad=False"):
        x.retain_grad()
    w = tp.tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="callable"):
        w.register_hook(3)
    w.register_hook(lambda g: tp.zeros(2))
    with pytest.raises(RuntimeError, match="gradient's shape"):
        (w * 2).sum().backward()
