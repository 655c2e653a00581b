# cython: language_level=3
"""Registry of the public subclasses generated/ declares for each runtime core class.

Generated wrappers own signatures and docs; the runtime owns state. When the runtime itself
creates an object (current_stream() returning a Stream), it must create the public class, which
it cannot cimport without a cycle, so generated modules register it here at import.
"""

cdef dict _public_classes = {}


cdef int register_class(str core_name, type public_class) except -1:
    _public_classes[core_name] = public_class
    return 0


cdef type public_class(str core_name, type core):
    return _public_classes.get(core_name, core)
