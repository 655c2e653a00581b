# Tensors as plain values (serialization.pyx): pickling, deep copies, and the checkpoints of
# tensorplay.save and tensorplay.load (api.yaml).
from tensorplay._runtime.tensor.core cimport TensorCore

# A new C-contiguous host numpy array of tensor's values in its dtype's numpy storage (bfloat16:
# its bits as uint16), never tensor's own memory.
cdef object storage_values(TensorCore tensor)
# The arguments of rebuild_tensor() that make a tensor like this one again (pickle).
cdef tuple rebuild_arguments(TensorCore tensor)
# The tensor those arguments describe (what rebuild_tensor(), pickle's constructor, returns).
cdef object rebuilt(object values, object dtype, object device, object requires_grad)

# Tensor methods (api.yaml).
cdef tuple reduce_ex(TensorCore tensor, object protocol)
# A pickle protocol (an int from 0), or the error naming protocol.
cdef int protocol_arg(object protocol) except -1
cdef object deepcopy(TensorCore tensor, object memo)
# deepcopy in two steps, for a copy of another class (nn.pyx: a Parameter): a copy of tensor's
# values (memo checked, a non-leaf refused), then result entered in memo and given a copy of
# tensor's .grad.
cdef object copied_values(TensorCore tensor, object memo)
cdef object finish_copy(TensorCore tensor, object result, dict memo)

# The functions of the tensorplay module (api.yaml).
cdef object save(object obj, object f)
cdef object load(object f, object map_location)
