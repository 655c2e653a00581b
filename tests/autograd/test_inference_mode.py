"""tensorplay.inference_mode and is_inference_mode_enabled, and get_default_dtype.

Ported from PyTorch's test/test_autograd.py, TestAutogradInferenceMode:
- test_inference_mode_context_manager: inside the block is_inference_mode_enabled() is True
  and results do not require grad; after it both are as before;
- test_inference_mode_decorator: the bare class and an instance both decorate, keeping the
  function's name;
- test_inference_mode_enabled / test_nested (mode=False inside inference mode turns autograd
  back on and the flag off, and the outer block's modes come back after it);
- the thread-locality of grad mode (test_grad_mode_restored_reentrant's companion tests): a
  block in one thread leaves another thread's modes alone.
What differs from PyTorch (no inference tensors) is in docs/design.md.
"""
import threading

import pytest

import tensorplay as tp


def test_context_manager_turns_autograd_off_and_sets_the_flag():
    w = tp.ones(2, requires_grad=True)
    assert not tp.is_inference_mode_enabled()
    with tp.inference_mode():
        assert tp.is_inference_mode_enabled() and not tp.is_grad_enabled()
        y = w * 2
    assert not y.requires_grad and y.grad_fn is None
    assert tp.is_grad_enabled() and not tp.is_inference_mode_enabled()
    with tp.inference_mode(mode=False):  # outside inference mode: autograd stays on
        assert (w * 2).requires_grad and not tp.is_inference_mode_enabled()


def test_nested_blocks_restore_the_outer_modes():
    w = tp.ones(2, requires_grad=True)
    with tp.inference_mode():
        with tp.inference_mode(False):
            assert (w * 2).requires_grad and not tp.is_inference_mode_enabled()
        assert not (w * 2).requires_grad and tp.is_inference_mode_enabled()
        with tp.no_grad():
            assert tp.is_inference_mode_enabled()
    with tp.no_grad():
        with tp.inference_mode():
            pass
        assert not tp.is_grad_enabled()  # the no_grad block's mode comes back
    mode = tp.inference_mode()
    with mode:
        with mode:  # one object, nested
            assert tp.is_inference_mode_enabled()
        assert tp.is_inference_mode_enabled()
    assert not tp.is_inference_mode_enabled() and tp.is_grad_enabled()


def test_decorators():
    w = tp.ones(2, requires_grad=True)

    @tp.inference_mode
    def bare(x):
        assert tp.is_inference_mode_enabled()
        return x * w

    @tp.inference_mode()
    def called(x):
        return x * w

    @tp.inference_mode(False)
    def trained(x):
        return x * w

    assert not bare(tp.ones(2)).requires_grad and bare.__name__ == "bare"
    assert not called(tp.ones(2)).requires_grad and called.__name__ == "called"
    with tp.inference_mode():
        assert trained(tp.ones(2)).requires_grad
    with pytest.raises(TypeError, match="decorates a function"):
        tp.inference_mode()(3)
    with pytest.raises(TypeError, match="mode"):
        tp.inference_mode("yes")
    assert repr(tp.inference_mode(False)) == "tensorplay.inference_mode(mode=False)"


def test_the_modes_belong_to_the_thread():
    seen = []
    entered, release = threading.Event(), threading.Event()

    def other():
        entered.wait()
        seen.append((tp.is_inference_mode_enabled(), tp.is_grad_enabled()))
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with tp.inference_mode():
        entered.set()
        release.wait()
    thread.join()
    assert seen == [(False, True)]


def test_default_dtype_is_float32():
    assert tp.get_default_dtype() is tp.float32
    assert tp.tensor([1.5]).dtype is tp.get_default_dtype()
    assert tp.zeros(2).dtype is tp.get_default_dtype()
