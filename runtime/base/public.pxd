# The public classes that generated/ derives from runtime core classes. The runtime creates
# instances of the public class (what users see) through this registry.
cdef int register_class(str core_name, type public_class) except -1
cdef type public_class(str core_name, type core)
