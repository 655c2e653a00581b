# cython: language_level=3
"""The tape (engine.pyx, Note [Tape]): a Node per recorded operation, which the tensor layer
records through the recorder this module installs when it is imported (core.pyx, Note [Tape
recorder]); the saved tensors a Node hands its gradient, checked against their versions (Note
[Version counters]).
"""
from tensorplay._runtime.base cimport public
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.kernels cimport ops
from tensorplay._runtime.tensor cimport core as tensor
from tensorplay._runtime.tensor.core cimport TensorCore


FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")


cdef tuple meta_of(object value):
    """(sizes, dtype, device) of a tensor operand, None for anything else."""
    if isinstance(value, TensorCore):
        return ((<TensorCore>value).sizes, (<TensorCore>value).dtype_object,
                (<TensorCore>value).device_index)
    return None


cdef class Node:
    def __init__(self, *args, **kwargs):
        raise TypeError("Nodes are recorded by operations on tensors that require grad; read "
                        "one from a tensor's grad_fn")

    cdef str c_name(self):
        if self.operation is None:  # made by Node.__new__, never recorded
            return "Node"
        if self.op == ops.OP_FUNCTION:
            return f"{self.state[0].__name__}Backward"
        if self.op == ops.OP_COPY_SLICES:
            return "CopySlices"  # PyTorch's name
        return "".join(part.capitalize() for part in self.operation.split("_")) + "Backward"

    cdef str c_repr(self):
        return f"<{self.c_name()}>"

    cdef tuple unpack(self):
        """The saved tensors, checked: still held, awake, and unchanged since they were saved."""
        if self.released:
            raise RuntimeError(FREED_MESSAGE)
        cdef TensorCore saved
        for value, version in zip(self.saved, self.saved_versions):
            if not isinstance(value, TensorCore):
                continue
            saved = value
            # A saved tensor of a sleeping graph's pool (core.pxd, check_awake): the gradient
            # formulas would read unmapped memory.
            if tensor.memory_asleep(saved):
                tensor.refuse_asleep(saved, b"backward()", b"a tensor saved for it by ",
                                     self.c_name())
            if saved.version.value != version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [{saved.dtype_object.name} tensor of "
                    f"shape {list(saved.sizes)} on {tensor.device_text(saved.device_index)}], "
                    f"saved by {self.c_name()}, is at version {saved.version.value}; "
                    f"expected version {version} instead. Hint: modify a copy (clone()), or "
                    f"make the change before the operation that saved it.")
        return self.saved


cdef object record(object outputs, int op, tuple inputs, tuple saved, object state):
    """Record a Node for op (ops.pxd) on inputs (tensors or anything else) on outputs (a tensor
    or a tuple of them), making each floating-point output require grad; returns the Node."""
    cls = public.public_class("Node", Node)
    cdef Node node = cls.__new__(cls)
    cdef TensorCore value
    node.op = op
    node.operation = ops.gradient_name(op)
    edges = []
    for operand in inputs:
        if isinstance(operand, TensorCore) and tensor.stale(<TensorCore>operand):
            tensor.refresh_view(<TensorCore>operand)
        if isinstance(operand, TensorCore) and (<TensorCore>operand).grad_required:
            value = operand
            edges.append(value if value.grad_node is None else (value.grad_node,
                                                                 value.output_number))
        else:
            edges.append(None)
    node.edges = tuple(edges)
    node.inputs_meta = tuple(meta_of(operand) for operand in inputs)
    node.saved = saved
    node.saved_versions = tuple((<TensorCore>item).version.value
                                if isinstance(item, TensorCore) else None for item in saved)
    node.state = state
    results = outputs if isinstance(outputs, tuple) else (outputs,)
    node.outputs_meta = tuple(meta_of(result) for result in results)
    node.stream = None
    for number, result in enumerate(results):
        if isinstance(result, TensorCore) and (<TensorCore>result).dtype_object.floating:
            value = result
            value.grad_required = True
            value.grad_node = node
            value.output_number = number
            if value.device_index != tensor.CPU and node.stream is None:
                node.stream = _stream.current_stream(value.device_index)
    return node


# From here on the tensor layer records its operations through record() (core.pyx, Note [Tape
# recorder]).
tensor.install_recorder(record)
