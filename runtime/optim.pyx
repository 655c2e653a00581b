# cython: language_level=3
"""tensorplay.optim: optimisers that update parameters from their gradients.

See docs/design.md, "tensorplay.optim".

Note [Capturable step]
SGD.step() can be captured into a CUDA graph with the forward and backward passes, so that a
whole training step is one graph launch. Everything it does on the device is an in-place kernel
with the hyperparameters as arguments (mul_, add_), or an allocation, which a capture takes
from the graph's private pool; it never reads device memory on the host and never
synchronises. What a replay repeats is fixed at capture:
- the hyperparameters: the values in param_groups when step() was captured;
- which parameters are updated: those whose grad existed then (a step skips a parameter
  without grad, as PyTorch's);
- the momentum buffers: allocated, as zeros, when the optimiser is made, so their addresses
  never change and no step has to create one. PyTorch's first step copies the gradient into a
  new buffer; momentum * 0 + gradient is the same value.
"""
from tensorplay._runtime cimport autograd, errors, tensor
from tensorplay._runtime.tensor cimport TensorCore


class SGDCore:
    """Stochastic gradient descent with momentum and weight decay (PyTorch's update rule)."""

    def init(self, params, lr, momentum, weight_decay):
        if isinstance(params, TensorCore):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        try:
            params = list(params)
        except TypeError:
            raise TypeError(f"params must be an iterable of tensors, got "
                            f"{errors.shown(params)}") from None
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        seen = set()
        for index, param in enumerate(params):
            if not isinstance(param, TensorCore):
                raise TypeError(f"optimizer can only optimize Tensors, but params[{index}] is "
                                f"{type(param).__name__}")
            if not param.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (params[{index}])")
            if id(param) in seen:
                raise ValueError(f"params[{index}] appears more than once; each parameter "
                                 "must be given once")
            seen.add(id(param))
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        self.param_groups = [{"params": params, "lr": lr, "momentum": momentum,
                              "weight_decay": weight_decay}]
        # Note [Capturable step]: every buffer exists, at a fixed address, before any capture.
        self.momentum_buffers = [
            (<TensorCore>tensor.zeros_like(param, None, None, False)) if momentum else None
            for param in params]

    def c_step(self):
        group = self.param_groups[0]
        lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
        if momentum and any(buffer is None for buffer in self.momentum_buffers):
            raise RuntimeError("SGD was made with momentum=0, so it has no momentum buffers; "
                               "make a new SGD to use momentum")
        with autograd.no_grad_block():
            for param, buffer in zip(group["params"], self.momentum_buffers):
                gradient = param.grad
                if gradient is None:
                    continue
                if weight_decay:
                    gradient = gradient.add(param, alpha=weight_decay)
                if momentum:
                    buffer.mul_(momentum).add_(gradient)
                    gradient = buffer
                param.sub_(gradient, alpha=lr)

    def c_zero_grad(self, set_to_none):
        autograd.zero_grads(self.param_groups[0]["params"], set_to_none)
