"""tensorplay.set_grad_enabled as PyTorch's: a plain call, a block, a decorator, nesting with
no_grad and enable_grad, threads, and the argument check.

Ported from PyTorch's test/test_autograd.py: TestAutograd.test_set_grad_enabled (inside the
block results do not require grad; after it, grad mode is back), test_set_grad_enabled_wraps
(the decorated function runs in the mode and keeps its name), test_grad_mode_restored_reentrant
and test_no_grad_python_function's nesting with no_grad / enable_grad.
"""
import threading

import pytest

import tensorplay as tp


@pytest.fixture(autouse=True)
def grad_mode_back():
    yield
    tp.set_grad_enabled(True)


def test_block():
    x = tp.ones(2, requires_grad=True)
    with tp.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with tp.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not tp.is_grad_enabled()
    assert tp.is_grad_enabled() and (x * 2).requires_grad


def test_plain_call_sets_the_mode():
    switch = tp.set_grad_enabled(False)
    assert not tp.is_grad_enabled()
    assert repr(switch) == "tensorplay.set_grad_enabled(mode=False)"
    tp.set_grad_enabled(True)
    assert tp.is_grad_enabled()


def test_decorator():
    @tp.set_grad_enabled(False)
    def inside():
        """The doc."""
        return tp.is_grad_enabled()

    assert tp.is_grad_enabled()  # making the decorator changed nothing
    assert inside() is False and tp.is_grad_enabled()
    assert inside.__name__ == "inside" and inside.__doc__ == "The doc."


def test_nesting_with_no_grad_and_enable_grad():
    with tp.no_grad():
        with tp.set_grad_enabled(True):
            assert tp.is_grad_enabled()
            with tp.no_grad():
                assert not tp.is_grad_enabled()
        assert not tp.is_grad_enabled()
        with tp.enable_grad():
            with tp.set_grad_enabled(False):
                assert not tp.is_grad_enabled()
            assert tp.is_grad_enabled()
    assert tp.is_grad_enabled()


def test_restored_after_an_exception():
    with pytest.raises(ZeroDivisionError):
        with tp.set_grad_enabled(False):
            1 / 0
    assert tp.is_grad_enabled()


def test_mode_is_per_thread():
    seen = []
    with tp.set_grad_enabled(False):
        thread = threading.Thread(target=lambda: seen.append(tp.is_grad_enabled()))
        thread.start()
        thread.join()
    assert seen == [True]


def test_arguments():
    with pytest.raises(TypeError, match="mode"):
        tp.set_grad_enabled(1)
    with pytest.raises(TypeError):
        tp.set_grad_enabled()
    assert tp.is_grad_enabled()
    with pytest.raises(TypeError, match="decorates a function"):
        tp.set_grad_enabled(False)(3)
    assert tp.is_grad_enabled()
