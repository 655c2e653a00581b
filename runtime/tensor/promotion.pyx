# cython: language_level=3
"""Type promotion: the dtype of an elementwise operation of mixed operands, by PyTorch's rules.

Note [Type promotion]
PyTorch documents the rules at https://pytorch.org/docs/stable/tensor_attributes.html
(torch.result_type, torch.promote_types, torch.can_cast); c10/core/ScalarType.h (promoteTypes)
and aten/src/ATen/native/TypeProperties.cpp (result_type, update_result_type_state,
combine_categories) compute them. In short:
- Dtypes fall into categories, bool < integer < floating. Two dtypes promote to the smaller
  dtype that holds both (promote_types): bool to the other; uint8 with a signed integer to the
  signed one, int16 at least (uint8 with int8 is int16); two floating dtypes to the wider,
  float16 with bfloat16 to float32; an integer with a floating dtype to the floating one.
- Operands come in three priority classes: tensors with dimensions, zero-dimensional tensors,
  Python scalars (a bool is bool, an int int64, a float the default float32). Each class
  promotes its own operands; a lower class then changes the result only when its category is
  higher (int32 tensor + 2.5 is float32; float16 tensor + float64 zero-dim tensor is float16;
  int8 tensor + int64 zero-dim tensor is int8; bool tensor + 1 is int64).
- An in-place result must be castable to the tensor it is written into (can_cast): never
  floating into integer or bool, never a non-bool into bool; PyTorch raises "result type Float
  can't be cast to the desired output type Long". It is computed in the promoted dtype and
  stored converted.
docs/design.md ("Type promotion") tabulates them.
"""
from tensorplay._runtime.base cimport dtypes
from tensorplay._runtime.base.dtypes cimport CODE_BOOL, DtypeCore
from tensorplay._runtime.tensor.core cimport TensorCore

from tensorplay._runtime.tensor.arguments import DtypeError

# PyTorch's ScalarType names (c10/core/ScalarType.h), which its errors print.
SCALAR_TYPE_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short",
                     "int32": "Int", "int64": "Long", "float16": "Half",
                     "bfloat16": "BFloat16", "float32": "Float", "float64": "Double"}


cdef DtypeCore promote_types(DtypeCore a, DtypeCore b):
    if a is b:
        return a
    if a.code == CODE_BOOL:
        return b
    if b.code == CODE_BOOL:
        return a
    if a.floating and b.floating:
        if a.itemsize == b.itemsize:  # float16 with bfloat16
            return dtypes.named_dtype("float32")
        return a if a.itemsize > b.itemsize else b
    if a.floating or b.floating:
        return a if a.floating else b
    if a.signed == b.signed:  # two signed integers (uint8 is the one unsigned dtype)
        return a if a.itemsize > b.itemsize else b
    signed = a if a.signed else b
    return signed if signed.itemsize > 1 else dtypes.named_dtype("int16")


cdef bint can_cast(DtypeCore source, DtypeCore target):
    if source.floating and not target.floating:
        return False
    return not (target.code == CODE_BOOL and source.code != CODE_BOOL)


cdef DtypeCore scalar_dtype(object value):
    """A Python scalar's dtype in promotion: bool, int64, or the default float32."""
    if isinstance(value, bool):
        return dtypes.named_dtype("bool")
    if isinstance(value, int):
        return dtypes.named_dtype("int64")
    return dtypes.named_dtype("float32")


cdef DtypeCore combine_categories(DtypeCore higher, DtypeCore lower):
    """PyTorch's combine_categories: higher's class wins unless lower's category is above
    it (None: a class without operands)."""
    if higher is None:
        return lower
    if lower is None or higher.floating:
        return higher
    if higher.code == CODE_BOOL or lower.floating:
        return promote_types(higher, lower)
    return higher


cdef DtypeCore result_type(object a, object b):
    cdef DtypeCore dimensioned = None, zero_dim = None, scalars = None, dtype
    for value in (a, b):
        if isinstance(value, TensorCore):
            dtype = (<TensorCore>value).dtype_object
            if len((<TensorCore>value).sizes):
                dimensioned = dtype if dimensioned is None else promote_types(dimensioned,
                                                                              dtype)
            else:
                zero_dim = dtype if zero_dim is None else promote_types(zero_dim, dtype)
        else:
            dtype = scalar_dtype(value)
            scalars = dtype if scalars is None else promote_types(scalars, dtype)
    return combine_categories(dimensioned, combine_categories(zero_dim, scalars))


cdef str scalar_type_name(DtypeCore dtype):
    return SCALAR_TYPE_NAMES[dtype.name]


cdef int check_cast(DtypeCore result, DtypeCore target, str name) except -1:
    if not can_cast(result, target):
        raise DtypeError(f"{name}: result type {scalar_type_name(result)} can't be cast to the "
                         f"desired output type {scalar_type_name(target)}")
    return 0
