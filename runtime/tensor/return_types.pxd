# The named tuples of torch.return_types (return_types.pyx).
# The class tensorplay.return_types.<name> is: "max", "min", "sort" or "topk" (api.yaml's
# variables, and the operations that return them).
cdef object return_type(str name)
