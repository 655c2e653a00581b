from cuda.bindings.cyruntime cimport cudaError_t

cdef int raise_cuda_error(int code, str call) except -1
cdef int check(cudaError_t code, const char* call) except -1 nogil
cdef int raise_no_accelerator(str what) except -1
cdef object out_of_memory_error(str message)
