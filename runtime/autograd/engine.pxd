# Reverse-mode automatic differentiation over the tape of Nodes (engine.pyx explains it at its
# top; tape.pyx records the Nodes, formulas.pyx holds their gradients).
from tensorplay._runtime.tensor.core cimport TensorCore

cdef bint is_grad_enabled()
cdef bint is_inference_mode_enabled()
cdef object no_grad_block()          # a public no_grad() for a with-block
cdef object zero_grads(object tensors, bint set_to_none)
# Tensor.backward (api.yaml): accumulate output's gradient into the leaves' .grad.
cdef object backward_from(TensorCore output, object gradient, object retain_graph)
# tensorplay.autograd.backward: several roots in one pass, optionally into inputs only.
cdef object backward(object tensors, object grad_tensors, object retain_graph, bint create_graph,
                     object inputs)
cdef object grad(object outputs, object inputs, object grad_outputs, object retain_graph,
                 bint create_graph, bint allow_unused)
cdef object apply_function(tuple args)
# Hooks on gradients (Note [Gradient hooks]): Tensor.register_hook, retain_grad, retains_grad,
# and the handle a hook's registration returns (Module.register_forward_hook's too).
cdef object register_hook(TensorCore tensor, object hook)
cdef object retain_grad(TensorCore tensor)
cdef bint retains_grad(TensorCore tensor)
cdef object removable_handle(dict hooks, object key)
