from cuda.bindings.cydriver cimport CUDA_SUCCESS, CUresult
from cuda.bindings.cyruntime cimport cudaError_t, cudaSuccess

cdef int raise_cuda_error(int code, str call) except -1
# The raise of check() and check_driver(), out of line: on every CUDA call of the runtime the
# check is one compare inlined at the call, and the raising code stays off the hot paths.
cdef int raise_runtime_failure(cudaError_t code, const char* call) except -1 nogil
cdef int raise_driver_failure(CUresult code, const char* call) except -1 nogil

# Runtime calls return their error; they raise only when the library cannot be loaded, and
# Cython propagates that through the ?-except value of each declaration. Driver calls alike.
cdef inline int check(cudaError_t code, const char* call) except -1 nogil:
    if code != cudaSuccess:
        return raise_runtime_failure(code, call)
    return 0

cdef inline int check_driver(CUresult code, const char* call) except -1 nogil:
    if code != CUDA_SUCCESS:
        return raise_driver_failure(code, call)
    return 0

# Python-callable too: the Python layer (python/) raises it where a call needs a device.
cpdef int raise_no_accelerator(str what) except -1
cdef object out_of_memory_error(str message)
# repr(value) cut to about 200 characters, for error messages that echo what the user gave.
cdef str shown(object value)
# The checks generated wrappers apply to parameters of the builtin types bool, float and str,
# of ints with a `range:`, strings with `choices:` and paths (codegen/types.py, Note [Parameter
# kinds]): a wrong type is a TypeError, a wrong value a ValueError, each naming the argument.
# Each returns the C type the kind delivers to the runtime, which codegen validate holds the
# runtime's declarations to: a bool as bint, a float as double, a choice as its index in the
# schema's choices (UNSET_CHOICE for the sentinel UNSET, base/sentinels.py), a path as str. A
# bounded int stays an object, which the runtime declares in a C integer type that holds the
# range (or object, where none does).
cdef enum:
    UNSET_CHOICE = -1
cdef bint bool_arg(object value, str argument) except -1
cdef double float_arg(object value, str argument) except? -1.0
cdef str str_arg(object value, str argument)
cdef object int_arg(object value, str argument, object low, object high)
cdef int choice_arg(object value, str argument, tuple choices) except -2
cdef str path_arg(object value, str argument)
cdef str str_path_arg(object value, str argument)   # a path the API reference types as str
