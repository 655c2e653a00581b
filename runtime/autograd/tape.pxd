# The tape of recorded operations (tape.pyx; engine.pyx explains it, Note [Tape]).

cdef class Node:
    # One recorded operation: see Note [Tape].
    cdef int op                          # the operation's code in the op table (ops.pxd)
    cdef readonly str operation          # its gradient's name, "mul": name() gives "MulBackward"
    cdef tuple edges                     # per input: None, a leaf tensor, or (Node, output)
    cdef tuple inputs_meta               # per input: (sizes, dtype, device) or None
    cdef tuple outputs_meta              # per output: (sizes, dtype, device)
    cdef tuple saved                     # tensors (or None) the gradient needs
    cdef tuple saved_versions
    cdef bint released                   # saved tensors dropped after a backward pass
    cdef object state                    # what else the gradient needs (dims, a scalar, ...)
    cdef object stream                   # the forward's stream (a CUDA operation), else None
    cdef dict hooks                      # output number -> {key: hook} (register_hook), or None
    cdef dict retained                   # output number -> the slot retain_grad() fills, or None
    cdef str c_name(self)
    cdef str c_repr(self)
    cdef tuple unpack(self)

# Record a Node for op (ops.pxd) on inputs (tensors or anything else) on outputs (a tensor or a
# tuple of them), making each floating-point output require grad; returns the Node. The
# tensor layer's recorder (core.pxd, Recorder).
cdef object record(object outputs, int op, tuple inputs, tuple saved, object state)
