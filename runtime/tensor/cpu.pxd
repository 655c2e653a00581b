# The CPU path (cpu.pyx): numpy computing for CPU tensors.
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.core cimport TensorCore

# A CPU tensor's values as numpy computes with them (bfloat16 as float32).
cdef object computable(TensorCore tensor)
# numpy values as dtype stores them on the CPU.
cdef object stored(object values, DtypeCore dtype)
# A CPU tensor's values in the type the CUDA kernels compute in (float32 for 16-bit floats,
# int64 for integers).
cdef object opmath(TensorCore tensor)
# a (op) b in numpy, op a binary op of ops.pxd; a and b are arrays or Python scalars.
cdef object cpu_binary(int op, object a, object b)
# numpy values computed from the CPU tensor, stored as dtype: into it in place, or as a new
# tensor.
cdef object cpu_result(TensorCore tensor, object values, DtypeCore dtype, bint inplace)
