"""make_graphed_callables' restrictions on Modules, checked before any GPU work (so on any
machine): no hooks anywhere in the module, no trainable buffers, parameters on CUDA. The
module's restrictions are checked through graphed_callables.py directly, since the public
function first reports a missing accelerator on a machine without a GPU. The graphs themselves
are tested in test_gpu_graphed_callables.py."""
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay._runtime import graphed_callables


def make(callables, sample_args):
    return graphed_callables.make_graphed_callables(callables, sample_args, 3, False, None,
                                                    "global")


def test_a_module_with_a_forward_hook_is_refused_naming_where():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    model[1].register_forward_hook(lambda module, args, output: None)
    with pytest.raises(ValueError, match=r"callables must not carry hooks, and its submodule '1' "
                                         r"has 1 forward hook\(s\)"):
        make(model, ())
    handle = model.register_forward_hook(lambda module, args, output: None)
    with pytest.raises(ValueError, match=r"callables\[1\] must not carry hooks, and it has 1"):
        make((lambda: tp.zeros(1), model), ((), ()))
    handle.remove()


def test_a_module_with_a_trainable_buffer_is_refused():
    model = nn.Linear(2, 2)
    model.register_buffer("running", tp.zeros(2, requires_grad=True))
    with pytest.raises(ValueError, match=r"callables has a buffer that requires grad "
                                         r"\('running'\): in a graphed module only parameters "
                                         "may be trainable"):
        make(model, ())


def test_a_module_on_the_cpu_is_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="the parameter 'weight' of callables must be a CUDA "
                                         "tensor, got one on cpu"):
        make(nn.Linear(2, 2), ())
