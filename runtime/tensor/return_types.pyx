# cython: language_level=3
"""The named tuples of the operations that return values with their indices (torch.return_types):
tensorplay.return_types.max, min, sort, topk, median, nanmedian, kthvalue, mode, cummax and
cummin, fields (values, indices). They live in the
public module tensorplay.return_types (api.yaml), so that a result pickles, and is an instance
of the class that module names, as PyTorch's."""
import collections

_BY_NAME = {name: collections.namedtuple(name, ("values", "indices"),
                                         module="tensorplay.return_types")
            for name in ("max", "min", "sort", "topk", "median", "nanmedian", "kthvalue",
                         "mode", "cummax", "cummin")}


cdef object return_type(str name):
    return _BY_NAME[name]
