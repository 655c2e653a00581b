# einsum (einsum.pyx): operands is the tuple of tensors, or of one list or tuple of them.
cdef object einsum(object equation, tuple operands)
