from cuda.bindings.cydriver cimport CUresult
from cuda.bindings.cyruntime cimport cudaError_t

cdef int raise_cuda_error(int code, str call) except -1
cdef int check(cudaError_t code, const char* call) except -1 nogil
cdef int check_driver(CUresult code, const char* call) except -1 nogil
cdef int raise_no_accelerator(str what) except -1
cdef object out_of_memory_error(str message)
# repr(value) cut to about 200 characters, for error messages that echo what the user gave.
cdef str shown(object value)
# The checks generated wrappers apply to parameters of the builtin types bool, float and str,
# of ints with a `range:`, strings with `choices:` and paths (codegen/types.py, Note [Parameter
# kinds]): a wrong type is a TypeError, a wrong value a ValueError, each naming the argument.
cdef object bool_arg(object value, str argument)
cdef object float_arg(object value, str argument)
cdef object str_arg(object value, str argument)
cdef object int_arg(object value, str argument, object low, object high)
cdef object choice_arg(object value, str argument, tuple choices)
cdef object path_arg(object value, str argument)
