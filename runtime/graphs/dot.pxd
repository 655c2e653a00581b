from cuda.bindings.cyruntime cimport cudaGraph_t

# The driver's DOT text of template (verbose: with every node attribute), written to path, or
# rendered into a picture for a path ending in .svg or .png (dot.pyx).
cdef int write_dot(cudaGraph_t template, int device, str path, bint verbose) except -1
