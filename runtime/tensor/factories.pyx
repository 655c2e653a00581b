# cython: language_level=3
"""The factories (api.yaml: tensorplay): empty, zeros, ones, full, arange, linspace, tensor
(always a copy), as_tensor and from_numpy (which share memory when they can), the *_like forms
and allclose; and tensor_arg, which takes another library's tensor as one of ours, without a
copy.
"""
from libc.stdint cimport int64_t

from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.kernels cimport device_ops
from tensorplay._runtime.tensor cimport interop
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.tensor.arguments cimport (BYTES_LIMIT, broadcast_shape, device_arg,
                                                   dtype_arg, dtype_of_scalar, is_scalar, np,
                                                   require_grad_arg, sequence_arg, size_arg)
from tensorplay._runtime.tensor.copies cimport (copied_to, fill_, host_values,
                                                index_select, item, to_named)
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, current_stream, device_text,
                                              dim_with_size, new_empty, own_tensor_arg,
                                              requiring_grad, strided_view, wrap_cpu)
from tensorplay._runtime.tensor.cpu cimport stored
from tensorplay._runtime.tensor.promotion cimport promote_types

from tensorplay._runtime.base.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
from tensorplay._runtime.tensor.arguments import ShapeError

import math


cdef object empty(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    sizes = size_arg(size, "size")
    cdef DtypeCore chosen = dtype if isinstance(dtype, DtypeCore) else dtype_arg(
        dtype, dtypes.named_dtype("float32"), "dtype")  # the default only when needed
    return requiring_grad(new_empty(sizes, chosen, device_arg(device, CPU)), requires_grad)


cdef object zeros(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    return requiring_grad(fill_(<TensorCore>empty(size, dtype, device, False), 0),
                          requires_grad)


cdef object ones(tuple size, object dtype, object device, bint requires_grad):
    require_grad_arg(dtype, "float32", requires_grad)
    return requiring_grad(fill_(<TensorCore>empty(size, dtype, device, False), 1),
                          requires_grad)


cdef object eye(object n, object m, object dtype, object device, bint requires_grad):
    """The n x m identity, as torch.eye: zeros, then ones along the diagonal (a strided view,
    step m + 1), so nothing is copied from the host and a capture takes it."""
    require_grad_arg(dtype, "float32", requires_grad)
    for name, value in (("n", n), ("m", m)):
        if value is None and name == "m":
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"eye: {name} must be an int, got {type(value).__name__}")
        if value < 0:  # PyTorch's words, and its RuntimeError
            raise ShapeError(f"{name} must be greater or equal to 0, got {value}")
        if value >= 1 << 63:
            raise ShapeError(f"eye: {name} must be below 2**63, got {errors.shown(value)}")
    columns = n if m is None else m
    result = <TensorCore>empty((n, columns), dtype, device, False)
    fill_(result, 0)
    fill_(<TensorCore>strided_view(result, (min(n, columns),), (columns + 1,)), 1)
    return requiring_grad(result, requires_grad)


cdef int check_fill_value_type(object fill_value) except -1:
    """full()'s and full_like()'s fill_value is a bool, int or float (its range is checked
    against the dtype, before anything is allocated)."""
    if not is_scalar(fill_value):
        raise TypeError(f"fill_value must be a bool, int or float, got "
                        f"{type(fill_value).__name__}")
    return 0


cdef object full(object size, object fill_value, object dtype, object device,
                 bint requires_grad):
    check_fill_value_type(fill_value)
    shape = size_arg(tuple(size) if isinstance(size, (tuple, list)) else (size,), "size")
    cdef DtypeCore chosen = dtype_arg(dtype, dtype_of_scalar(fill_value), "dtype")
    dtypes.check_scalar(fill_value, chosen, "fill_value")  # before anything is allocated
    require_grad_arg(chosen, None, requires_grad)
    result = new_empty(shape, chosen, device_arg(device, CPU))
    return requiring_grad(fill_(<TensorCore>result, fill_value), requires_grad)


cdef object arange(object start, object end, object step, object dtype, object device,
                   bint requires_grad):
    for name, value in (("start", start), ("end", end), ("step", step)):
        if (isinstance(value, bool) or not isinstance(value, (int, float))) and not (
                name == "end" and value is None):
            raise TypeError(f"{name} must be an int or float, got {type(value).__name__} "
                            f"({errors.shown(value)})")
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
            raise ValueError(f"{name} {errors.shown(value)} does not fit in int64")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value}")
    if step == 0:
        raise ValueError("step must be non-zero")
    if end is None:
        start, end = 0, start
    integral = all(isinstance(v, int) for v in (start, end, step))
    default = dtypes.named_dtype("int64" if integral else "float32")
    # Every argument is checked before the values are made, which may take long.
    cdef DtypeCore chosen = dtype_arg(dtype, default, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    # The length, in Python numbers, before anything is made (numpy would try to allocate it).
    span = (end - start) / step
    if not math.isfinite(span) or span * 8 > BYTES_LIMIT:
        raise ValueError(f"arange({errors.shown(start)}, {errors.shown(end)}, "
                         f"{errors.shown(step)}) has about {span:.3g} elements, more than a "
                         "tensor can hold (2**63 - 1 bytes)")
    if target == CPU:
        values = np().arange(start, end, step, dtype=np().int64 if integral else np().float64)
        return requiring_grad(from_numpy_values(values, chosen, CPU, "arange()'s values", True),
                              requires_grad)
    # numpy's length (Note [Arange on the device]).
    count = len(range(start, end, step)) if integral else max(0, math.ceil(span))
    result = new_empty((count,), chosen, target)
    device_ops.arange(target, chosen, (<TensorCore>result).data, count, start, step,
                      current_stream(target))
    return requiring_grad(result, requires_grad)


# Note [Arange on the device]
# A CUDA arange is computed by a kernel (elementwise.cu, arange_integral / arange_floating)
# rather than copied from host memory, so that it is legal under graph capture, as PyTorch's
# is: a copy from pageable host memory is not (CUDA Programming Guide, "Stream Capture";
# tril, triu, flip, roll, conv2d's patches and attention's causal mask build their indices
# with arange). Its values are those numpy computes for the CPU tensor, as the C of numpy's
# arange fills them (numpy/_core/src/multiarray/arraytypes.c.src, @NAME@_fill): int64
# arithmetic for integer arguments; otherwise element 0 is start, element 1 start + step (Python's
# arithmetic), and element i start + i * delta in float64 with delta = element 1 - start, each
# operation rounded once (the kernel's __dadd_rn / __dmul_rn forbid the fused multiply-add a
# compiler would otherwise make). Each value is then converted to the dtype as the CPU result
# is (a float64 rounded once to float16, as numpy rounds it; bfloat16 through float32, as
# cpu.stored converts). The length is numpy's too: len(range(...)) for integers, the ceiling
# of (end - start) / step otherwise.


# Note [Linspace as PyTorch computes it]
# PyTorch's CPU linspace (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, linspace_kernel)
# computes step = (end - start) / (steps - 1) in the result's dtype (double for integer dtypes)
# and element i as start + step * i for i < steps / 2 and as end - step * (steps - 1 - i)
# otherwise, so that both ends are exact. The values of its float32 and float64 builds are
# those of one fused multiply-add each, rounded once (the compiler contracts them; measured
# against torch 2.13 on an x86-64 CPU, where unfused arithmetic differs in about two calls of
# three), so the values here are computed as fused products too: in float64 for float32 (the
# product of a float32 step and an index below 2**29 is exact there, and a sum exactly halfway
# between two float32 values is settled by the sum's exact error), and with error-free
# transformations (Dekker's product, Knuth's sum) for float64 and the integer dtypes' double
# arithmetic, whose result C++ truncates toward zero. float16 and bfloat16 round every
# operation to the dtype (c10::Half's operators convert each result). Tested bit for bit
# against torch.linspace (tests/tensor/test_habits.py). CUDA tensors get the same values,
# computed here and copied to the device (during a graph capture that copy from pageable
# memory is refused, as every host-to-device copy from pageable memory is).


cdef tuple two_sum(object a, object b):
    """(a + b rounded, its exact error), for float64 arrays (Knuth's TwoSum)."""
    total = a + b
    shifted = total - a
    return total, (a - (total - shifted)) + (b - shifted)


cdef tuple two_product(object a, object b):
    """(a * b rounded, its exact error), for float64 arrays (Dekker's product by splitting)."""
    product = a * b
    scaled = a * 134217729.0  # 2**27 + 1 splits a float64 into two 26-bit halves
    a_high = scaled - (scaled - a)
    a_low = a - a_high
    scaled = b * 134217729.0
    b_high = scaled - (scaled - b)
    b_low = b - b_high
    return product, ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low


cdef object fused64(object a, object b, object c):
    """a * b + c for float64 arrays, rounded once but for near-ties of the last correction."""
    product, product_error = two_product(a, b)
    total, total_error = two_sum(c, product)
    return total + (total_error + product_error)


cdef object fused32(object a, object b, object c):
    """a * b + c for float32 arrays (b exact integers below 2**29), rounded once to float32."""
    numpy = np()
    total, error = two_sum(c.astype(numpy.float64), a.astype(numpy.float64) *
                           b.astype(numpy.float64))
    result = total.astype(numpy.float32)
    # A float64 sum exactly halfway between two float32 values rounds the way its error says.
    other = numpy.nextafter(result, numpy.where(total > result, numpy.inf, -numpy.inf).astype(
        numpy.float32))
    halfway = (numpy.abs(other.astype(numpy.float64) - total) ==
               numpy.abs(result.astype(numpy.float64) - total)) & (error != 0) & (other != result)
    toward = halfway & (numpy.sign(other.astype(numpy.float64) - total) == numpy.sign(error))
    return numpy.where(toward, other, result)


cdef object rounded_to(object values, bint bfloat16):
    """float16 values as they are (numpy rounds every float16 operation), or float32 values
    rounded to bfloat16 (to nearest even), as float32."""
    if not bfloat16:
        return values.astype(np().float16)
    return bfloat16_bits_to_float32(float32_to_bfloat16_bits(values))


cdef object linspace_values(object start, object end, int64_t steps, DtypeCore dtype):
    """The values of linspace(start, end, steps) in dtype, as numpy values of dtype's storage
    (float32 for bfloat16), computed as PyTorch's CPU kernel does (Note [Linspace as PyTorch
    computes it])."""
    numpy = np()
    index = numpy.arange(steps, dtype=numpy.int64)
    halfway = index < steps // 2
    # The multiplier of step from the nearer end: i, or -(steps - 1 - i).
    count = numpy.where(halfway, index, index - (steps - 1))
    if dtype.name in ("float32", "float64"):
        kind = numpy.float32 if dtype.name == "float32" else numpy.float64
        first, last = kind(start), kind(end)
        if steps == 1:
            return numpy.array([first], kind)
        step = (last - first) / kind(steps - 1)
        base = numpy.where(halfway, first, last).astype(kind)
        multiplied = numpy.full(steps, step, kind)
        if kind is numpy.float32:
            return fused32(multiplied, count.astype(numpy.float32), base)
        return fused64(multiplied, count.astype(numpy.float64), base)
    if dtype.floating:  # float16 and bfloat16: every operation rounded to the dtype
        bfloat16 = dtype.name == "bfloat16"
        kind = numpy.float32 if bfloat16 else numpy.float16
        # A Python float reaches the dtype through float32, as c10's conversions take it.
        first = rounded_to(numpy.array([start], numpy.float32), bfloat16)
        last = rounded_to(numpy.array([end], numpy.float32), bfloat16)
        if steps == 1:
            return first
        step = rounded_to(rounded_to(last - first, bfloat16) /
                          rounded_to(numpy.array([steps - 1], kind), bfloat16), bfloat16)
        low = rounded_to(first + rounded_to(step * rounded_to(index.astype(kind), bfloat16),
                                            bfloat16), bfloat16)
        high = rounded_to(last - rounded_to(step * rounded_to((steps - 1 - index).astype(kind),
                                                              bfloat16), bfloat16), bfloat16)
        return numpy.where(halfway, low, high).astype(kind)
    # Integer dtypes: start and end as the dtype holds them (truncated), the rest in double.
    first, last = float(int(start)), float(int(end))
    if steps == 1:
        return numpy.array([int(start)], numpy.int64)
    step = (last - first) / (steps - 1)
    values = fused64(numpy.full(steps, step), count.astype(numpy.float64),
                     numpy.where(halfway, first, last))
    return numpy.trunc(values).astype(numpy.int64)


cdef object linspace(object start, object end, int64_t steps, object dtype, object device,
                     bint requires_grad):
    for name, value in (("start", start), ("end", end)):
        if not is_scalar(value):
            raise TypeError(f"{name} must be a bool, int or float, got {type(value).__name__} "
                            f"({errors.shown(value)})")
    # steps is checked by the wrapper: an int, 0 or more (api.yaml, range).
    cdef DtypeCore chosen = dtype_arg(dtype, dtypes.named_dtype("float32"), "dtype")
    if chosen.name == "bool":
        raise TypeError("dtype: linspace() is not implemented for bool, as in PyTorch; use a "
                        "numeric dtype")
    for name, value in (("start", start), ("end", end)):
        dtypes.check_scalar(value, chosen, name)
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    if <object>steps * chosen.itemsize > BYTES_LIMIT:
        raise ValueError(f"steps {steps} is more elements than a tensor can hold "
                         "(2**63 - 1 bytes)")
    with np().errstate(all="ignore"):  # infinite or NaN ends give NaN, as in PyTorch
        values = linspace_values(start, end, steps, chosen)
    return requiring_grad(from_numpy_values(values, chosen, target, "linspace()'s values", True),
                          requires_grad)


cdef object from_numpy_values(object values, DtypeCore dtype, int device, str argument,
                              bint fresh=False):
    """A new tensor holding values converted to dtype, on device. It never shares memory with
    values: tensor() copies, as PyTorch's does (as_tensor() and from_numpy() are the ones that
    share). A CPU result takes a copy unless the conversion already made one, or values is
    fresh (made for this call from Python numbers, which nothing else holds)."""
    converted = np().asarray(stored(values, dtype), order="C")
    if device == CPU and not fresh and (converted is values or not converted.flags.owndata):
        converted = converted.copy()  # values' own memory, or a view of someone else's
    host = wrap_cpu(converted, dtype)
    return host if device == CPU else copied_to(host, device, dtype, False, False, argument)


cdef object tensor(object data, object dtype, object device, bint requires_grad):
    if isinstance(data, TensorCore):  # a copy that is a new leaf, as PyTorch's
        require_grad_arg(dtype, (<TensorCore>data).dtype_object, requires_grad)
        return requiring_grad(to_named((<TensorCore>data).c_detach(), device, dtype, False,
                                       True, "data"), requires_grad)
    if isinstance(data, np().generic):  # a numpy scalar keeps its dtype, as in PyTorch
        data = np().asarray(data)
    if not isinstance(data, np().ndarray) and (hasattr(data, "__cuda_array_interface__") or
                                               hasattr(data, "__dlpack__")):
        # Another library's tensor (PyTorch's, CuPy's): viewed without a copy, then copied as
        # one of ours, keeping its dtype and, unless device says otherwise, its device.
        return tensor(as_tensor(data, None, None), dtype, device, requires_grad)
    if isinstance(data, np().ndarray):
        inferred = dtypes.dtype_from_numpy(data.dtype)
        values = data
    else:
        nested = type(data) is list or type(data) is tuple
        try:
            values = np().asarray(data)
        except ValueError:
            if not nested:
                raise
            if _holds_tensor(data, 0):  # [tensor([1.5]), 2.0]: numpy cannot read it
                return _tensor_of_tensors(data, dtype, device, requires_grad)
            # numpy's "inhomogeneous shape" names neither the place nor the element: say
            # which (Note [Nested data]).
            _refuse_nested(data)
            raise
        if _holds_wide_ints(values):
            # Python ints beyond int64 make numpy choose uint64, float64 or object: the dtype
            # comes from the kinds of the numbers given, and each wide int is checked against
            # it (Note [Values that fit]), as PyTorch refuses them.
            made = _tensor_of_wide_ints(data, values, dtype, device, requires_grad)
            if made is not None:
                return made
        if values.dtype == object or values.dtype.kind not in "biuf":
            if nested and _holds_tensor(data, 0):  # numpy keeps our tensors as objects
                return _tensor_of_tensors(data, dtype, device, requires_grad)
            if nested:
                _refuse_nested(data)
            raise TypeError(f"data must be numbers (nested lists of bool, int or float) or a "
                            f"numpy array, got {type(data).__name__}")
        # Python floats become float32 and ints int64, as in PyTorch.
        inferred = dtypes.named_dtype({"b": "bool", "f": "float32"}.get(values.dtype.kind,
                                                                        "int64"))
    if inferred is None and dtype is None:
        raise TypeError(f"numpy dtype {data.dtype} has no tensorplay equivalent")
    cdef DtypeCore chosen = dtype_arg(dtype, inferred, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    if values.dtype.kind in "biuf":
        dtypes.check_values(values, chosen, "data")
    # Nested lists and Python numbers become a new array; anything else numpy reads (a buffer,
    # an object with __array__) may be viewed in place, and is copied.
    fresh = type(data) is list or type(data) is tuple or is_scalar(data)
    return requiring_grad(from_numpy_values(values, chosen, target, "data", fresh),
                          requires_grad)


# Note [Tensors in nested data]
# tensor([a.sum(), b.sum()]): PyTorch reads a tensor among nested data as the one number it
# holds (one element, else "only one element tensors can be converted to Python scalars"), and
# the result's dtype is the promotion of every element's (a tensor's own; bool, int64 or the
# default float32 for a Python number): tensor([int32 tensor, 2]) is int64, tensor([float16
# tensor, 2]) float16, tensor([float16 tensor, 2.5]) float32 (torch/csrc/utils/tensor_new.cpp,
# infer_scalar_type). The numbers are read as item() reads them (a CUDA tensor's waits for the
# device, and is refused during a capture), then made into a tensor as Python numbers are.


cdef object _tensor_of_tensors(object data, object dtype, object device, bint requires_grad):
    """tensor(data) of nested data holding tensors (Note [Tensors in nested data]); only called
    once numpy could not read data as numbers, so plain data pays for no second walk."""
    found = []
    numbers = _numbers_of_tensors(data, found, 0)
    inferred = found[0]
    for each in found[1:]:
        inferred = promote_types(inferred, each)
    return tensor(numbers, inferred if dtype is None else dtype, device, requires_grad)


cdef bint _holds_tensor(object data, int depth):
    """Whether nested lists and tuples hold one of our tensors (depth-limited as
    _number_leaves is: deeper data is left to numpy's reading)."""
    if isinstance(data, TensorCore):
        return True
    if (type(data) is list or type(data) is tuple) and depth <= 64:
        for element in data:
            if _holds_tensor(element, depth + 1):
                return True
    return False


cdef object _numbers_of_tensors(object data, list found, int depth):
    """data with each tensor replaced by its one number; the dtype of every element appended
    to found (Note [Tensors in nested data])."""
    cdef TensorCore each
    if isinstance(data, TensorCore):
        each = data
        if each.element_count != 1:  # PyTorch's words
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(a tensor of shape {each.sizes} among data)")
        found.append(each.dtype_object)
        return item(each)
    if (type(data) is list or type(data) is tuple) and depth <= 64:
        return [_numbers_of_tensors(element, found, depth + 1) for element in data]
    if is_scalar(data):
        found.append(dtype_of_scalar(data))
    return data  # anything else: refused by the reading of the numbers, naming it


cdef bint _is_sequence(object item):
    """Whether tensor() reads item as a dimension: a list, a tuple or a numpy array of at
    least one dimension (PyTorch reads any sequence; a str is refused as an element)."""
    return isinstance(item, (list, tuple)) or (isinstance(item, np().ndarray) and item.ndim)


cdef bint _is_number(object item):
    return isinstance(item, (bool, int, float, np().bool_, np().integer, np().floating)) or (
        isinstance(item, np().ndarray) and item.ndim == 0 and item.dtype.kind in "biuf")


cdef str _position(list path):
    """data[1][0], or for a deep position its first and last indices and the depth."""
    if len(path) > 12:
        return ("data" + "".join(f"[{index}]" for index in path[:4]) + "..." +
                "".join(f"[{index}]" for index in path[-4:]) + f" ({len(path)} deep)")
    return "data" + "".join(f"[{index}]" for index in path)


cdef int _refuse_nested(object data) except -1:
    """Note [Nested data]
    tensor() of nested lists that numpy could not read as numbers: raise PyTorch's error for the
    first problem in reading order, naming the element's position and type. The shape is read
    as PyTorch reads it (torch/csrc/utils/tensor_new.cpp, compute_sizes and recursive_store):
    each dimension's length is that of the first sequence at that depth (data, data[0],
    data[0][0], ...), and every element must match it. A sequence of another length is
    PyTorch's ValueError "expected sequence of length N at dim D (got M)"; a number where a
    sequence belongs, a sequence where a number belongs and an element that is no number (a
    str, None, an object) are TypeErrors. Returns 0 where it finds no problem (the caller then
    raises its own error). Only called on failure, so the common case walks nothing twice."""
    cdef list sizes = []
    cdef list stack
    cdef list path
    cdef Py_ssize_t depth
    item = data
    while _is_sequence(item):
        sizes.append(len(item))
        if not len(item):
            break
        item = item[0]
    # Depth first, in reading order, without recursion (nesting may be deeper than the stack).
    stack = [(data, [])]
    while stack:
        item, path = stack.pop()
        depth = len(path)
        if depth < len(sizes):
            if not _is_sequence(item):
                raise TypeError(f"not a sequence: {_position(path)} must be a sequence of "
                                f"length {sizes[depth]} at dim {depth}, as "
                                f"{_position([0] * depth)} is, got {type(item).__name__}")
            if len(item) != sizes[depth]:
                raise ValueError(f"expected sequence of length {sizes[depth]} at dim {depth} "
                                 f"(got {len(item)}): {_position(path)} has {len(item)} "
                                 f"elements, {_position([0] * depth)} has {sizes[depth]}")
            for index in range(len(item) - 1, -1, -1):
                stack.append((item[index], path + [index]))
        elif _is_sequence(item):
            raise TypeError(f"{_position(path)} must be a number, as "
                            f"{_position([0] * depth)} is, got {type(item).__name__}")
        elif not _is_number(item):
            raise TypeError(f"data must be numbers (nested lists of bool, int or float), got "
                            f"{type(item).__name__} at {_position(path)}")
    return 0


cdef bint _holds_wide_ints(object values):
    """Whether numpy's array of Python data may hold an int outside int64: numpy makes such
    data uint64 (ints up to 2**64 - 1), float64 (those mixed with negative ints) or object."""
    kind = values.dtype.kind
    if values.dtype == object or (kind == "u" and values.dtype.itemsize == 8):
        return True
    # float64 made of ints: only where a magnitude reaches 2**63 (rare for real floats).
    return kind == "f" and values.size and values.dtype.itemsize == 8 and \
        bool(np().nanmax(np().abs(np().where(np().isfinite(values), values, 0))) >= 2.0 ** 63)


cdef int _number_leaves(object data, list kinds, list wide, int depth) except -1:
    """Walk nested lists and tuples of Python numbers: the kinds found ("b", "i", "f") and the
    ints outside int64. Returns 1 when something else is found (left to numpy's reading)."""
    if isinstance(data, (list, tuple)):
        if depth > 64:
            return 1
        for item in data:
            if _number_leaves(item, kinds, wide, depth + 1):
                return 1
        return 0
    if isinstance(data, bool) or isinstance(data, np().bool_):
        kind = "b"
    elif isinstance(data, (int, np().integer)):
        kind = "i"
        if not -(1 << 63) <= data < (1 << 63):
            wide.append(int(data))
    elif isinstance(data, (float, np().floating)):
        kind = "f"
    else:
        return 1
    if kind not in kinds:
        kinds.append(kind)
    return 0


cdef object _tensor_of_wide_ints(object data, object values, object dtype, object device,
                                 bint requires_grad):
    """tensor(data) where data may hold Python ints beyond int64: the dtype of the kinds given
    (float32 if any float, else int64, else bool), then every wide int checked against it;
    None where data is not nested lists of Python numbers."""
    cdef list kinds = [], wide = []
    if _number_leaves(data, kinds, wide, 0):
        return None  # not plain Python numbers (numpy arrays inside, say): numpy's reading
    inferred = dtypes.named_dtype("float32" if "f" in kinds else
                                  "int64" if "i" in kinds else "bool")
    cdef DtypeCore chosen = dtype_arg(dtype, inferred, "dtype")
    require_grad_arg(chosen, None, requires_grad)
    cdef int target = device_arg(device, CPU)
    for value in wide:  # the first that does not fit is named, with the dtype's range
        dtypes.check_scalar(value, chosen, "data")
    if chosen.name == "bool":
        exact = np().asarray(data, dtype=np().bool_)
    elif chosen.floating:
        exact = np().asarray(data, dtype=np().float64)  # each fits: no overflow to infinity
    else:
        exact = np().asarray(data, dtype=np().int64)
    dtypes.check_values(exact, chosen, "data")
    return requiring_grad(from_numpy_values(exact, chosen, target, "data"), requires_grad)


cdef object empty_like(object input, object dtype, object device, bint requires_grad):
    cdef TensorCore source = own_tensor_arg(input, "input")
    require_grad_arg(dtype, source.dtype_object, requires_grad)
    return requiring_grad(new_empty(source.sizes, dtype_arg(dtype, source.dtype_object, "dtype"),
                                    device_arg(device, source.device_index)), requires_grad)


cdef object zeros_like(object input, object dtype, object device, bint requires_grad):
    if isinstance(input, TensorCore):
        require_grad_arg(dtype, (<TensorCore>input).dtype_object, requires_grad)
    return requiring_grad(fill_(<TensorCore>empty_like(input, dtype, device, False), 0),
                          requires_grad)


cdef object ones_like(object input, object dtype, object device, bint requires_grad):
    return full_like(input, 1, dtype, device, requires_grad)


cdef object full_like(object input, object fill_value, object dtype, object device,
                      bint requires_grad):
    # Every argument checked before anything is allocated; the dtype is input's unless given
    # (PyTorch's full_like does not infer it from fill_value, as full does).
    cdef TensorCore source = own_tensor_arg(input, "input")
    check_fill_value_type(fill_value)
    dtypes.check_scalar(fill_value, dtype_arg(dtype, source.dtype_object, "dtype"), "fill_value")
    require_grad_arg(dtype, source.dtype_object, requires_grad)
    return requiring_grad(fill_(<TensorCore>empty_like(input, dtype, device, False), fill_value),
                          requires_grad)


cdef bint allclose(object input, object other, double rtol, double atol, bint equal_nan) except -1:
    own_tensor_arg(input, "input")
    own_tensor_arg(other, "other")
    broadcast_shape((<TensorCore>input).sizes, (<TensorCore>other).sizes, "allclose")
    a = host_values(input).astype(np().float64)
    b = host_values(other).astype(np().float64)
    return bool(np().allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))


cdef object as_tensor(object data, object dtype, object device):
    if isinstance(data, TensorCore):
        return to_named(data, device, dtype, False, False, "data")
    if hasattr(data, "__cuda_array_interface__") or (
            hasattr(data, "__dlpack__") and not isinstance(data, np().ndarray)):
        shared = interop.from_cuda_array_interface(data) \
            if hasattr(data, "__cuda_array_interface__") else interop.from_dlpack(data)
        return to_named(shared, device, dtype, False, False, "data")
    if isinstance(data, np().ndarray) and dtypes.dtype_from_numpy(data.dtype) is not None:
        return to_named(shared_numpy(data, "data"), device, dtype, False, False, "data")
    return tensor(data, dtype, device, False)


cdef TensorCore tensor_arg(object value, str argument, Py_ssize_t index):
    """value as our tensor: ours, or a view of any tensor that shares its memory through
    __cuda_array_interface__ or DLPack (PyTorch's, CuPy's), no copy. index >= 0: the argument
    is one item of a sequence, named argument[index] in errors."""
    if isinstance(value, TensorCore):
        return value
    if hasattr(value, "__cuda_array_interface__") or hasattr(value, "__dlpack__"):
        return as_tensor(value, None, None)
    name = argument if index < 0 else f"{argument}[{index}]"
    raise TypeError(f"{name} must be a tensor (tensorplay's, or one with "
                    f"__cuda_array_interface__ or __dlpack__), got {type(value).__name__}")


cdef object from_numpy(object ndarray):
    if not isinstance(ndarray, np().ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    return shared_numpy(ndarray, "ndarray")


cdef TensorCore shared_numpy(object array, str argument):
    """A CPU tensor sharing array's memory, or PyTorch's error (torch.from_numpy's words and
    order of checks) where it cannot: a layout a tensor cannot describe is refused rather than
    copied, since the caller asked for the same memory."""
    if any(stride % array.itemsize for stride in array.strides):
        raise ValueError(f"{argument}: given numpy array strides not a multiple of the element "
                         "byte size. Copy the numpy array to reallocate the memory.")
    if any(stride < 0 for stride in array.strides):
        raise ValueError(f"{argument}: at least one stride in the given numpy array is "
                         "negative, and tensors with negative strides are not currently "
                         "supported. (You can probably work around this by making a copy of "
                         "your array with array.copy().)")
    if not array.dtype.isnative:
        raise ValueError(f"{argument}: given numpy array has byte order different from the "
                         "native byte order. Conversion between byte orders is currently not "
                         "supported.")
    dtype = dtypes.dtype_from_numpy(array.dtype)
    if dtype is None:
        raise TypeError(f"can't convert np.ndarray of type {array.dtype.type.__module__}."
                        f"{array.dtype.type.__name__}. The only supported types are: float64, "
                        "float32, float16, int64, int32, int16, int8, uint8, and bool.")
    return wrap_cpu(array, dtype)


# Tensor.new_empty(), new_zeros(), new_ones(), new_full() and new_tensor(), as PyTorch's: the
# factories, with this tensor's dtype and device where dtype or device is None.
cdef object own_dtype(TensorCore like, object dtype):
    return like.dtype_object if dtype is None else dtype


cdef object own_device(TensorCore like, object device):
    return device_text(like.device_index) if device is None else device


cdef object new_empty_of(TensorCore tensor, tuple size, object dtype, object device,
                         bint requires_grad):
    return empty(size, own_dtype(tensor, dtype), own_device(tensor, device), requires_grad)


cdef object new_zeros_of(TensorCore tensor, tuple size, object dtype, object device,
                         bint requires_grad):
    return zeros(size, own_dtype(tensor, dtype), own_device(tensor, device), requires_grad)


cdef object new_ones_of(TensorCore tensor, tuple size, object dtype, object device,
                        bint requires_grad):
    return ones(size, own_dtype(tensor, dtype), own_device(tensor, device), requires_grad)


cdef object new_full_of(TensorCore tensor, object size, object fill_value, object dtype,
                        object device, bint requires_grad):
    if not isinstance(size, (tuple, list)):  # PyTorch's new_full takes a sequence only
        raise TypeError(f"new_full(): size must be a tuple or list of ints, got "
                        f"{type(size).__name__}")
    return full(size, fill_value, own_dtype(tensor, dtype), own_device(tensor, device),
                requires_grad)


cdef object new_tensor_of(TensorCore like, object data, object dtype, object device,
                          bint requires_grad):
    return tensor(data, own_dtype(like, dtype), own_device(like, device), requires_grad)


# tril() and triu(), as PyTorch's: the elements on and below (above) the diagonal-th diagonal of
# each matrix (the last two dimensions), the others zero, through masked_fill, so autograd and
# a capture take them as they take masked_fill; the mask compares aranges, made on the device
# (Note [Arange on the device]).
cdef object tril(TensorCore tensor, long long diagonal):
    return tensor.masked_fill(outside_triangle(tensor, diagonal, True, "tril"), 0)


cdef object triu(TensorCore tensor, long long diagonal):
    return tensor.masked_fill(outside_triangle(tensor, diagonal, False, "triu"), 0)


cdef object tril_(TensorCore tensor, long long diagonal):
    return tensor.masked_fill_(outside_triangle(tensor, diagonal, True, "tril_"), 0)


cdef object triu_(TensorCore tensor, long long diagonal):
    return tensor.masked_fill_(outside_triangle(tensor, diagonal, False, "triu_"), 0)


cdef object outside_triangle(TensorCore tensor, long long diagonal, bint lower, str name):
    if len(tensor.sizes) < 2:  # PyTorch's message
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    device = device_text(tensor.device_index)
    int64 = dtypes.named_dtype("int64")
    rows = arange(0, tensor.sizes[-2], 1, int64, device, False)
    columns = arange(0, tensor.sizes[-1], 1, int64, device, False)
    offset = columns - rows.unsqueeze(-1)  # column - row of each element
    return offset > diagonal if lower else offset < diagonal


# flip() and roll(), as PyTorch's: copies, each dimension's elements gathered (index_select) in
# the order of an index made with arange on the tensor's device, so autograd takes them as it
# takes index_select; a capture takes them too (Note [Arange on the device]).
cdef object flip_of(object input, object dims):
    return flip(own_tensor_arg(input, "input"), sequence_arg(dims, "flip: dims"))


cdef object flip(TensorCore tensor, tuple dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if any(isinstance(dim, bool) or not isinstance(dim, int) for dim in dims):
        raise TypeError(f"flip: dims must be ints, got {errors.shown(dims)}")
    axes = [tensor.c_dim(dim, "dims") for dim in dims]
    if len(set(axes)) != len(axes):  # PyTorch's message
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(axes)}, but "
                           f"unique flip dims size={len(set(axes))}")
    if not tensor.sizes:  # dims 0 and -1 of a 0-d tensor: its one element, copied
        return tensor.clone()
    output = tensor
    for axis in axes:
        size = tensor.sizes[axis]
        output = index_select(<TensorCore>output, axis, arange(size - 1, -1, -1,
                                                               dtypes.named_dtype("int64"),
                                                               device_text(tensor.device_index),
                                                               False))
    return output if axes else tensor.clone()


cdef object roll(TensorCore tensor, object shifts, object dims):
    shift_list = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    dim_list = [] if dims is None else list(dims) if isinstance(dims, (tuple, list)) else [dims]
    for values, name in ((shift_list, "shifts"), (dim_list, "dims")):
        if any(isinstance(value, bool) or not isinstance(value, int) for value in values):
            raise TypeError(f"roll: {name} must be ints, got {errors.shown(values)}")
    for values, name in ((shift_list, "shifts"), (dim_list, "dims")):
        for value in values:
            errors.int_arg(value, name, -(1 << 63), (1 << 63) - 1)
    if dims is None:
        if len(shift_list) != 1:
            raise RuntimeError(f"roll: with dims=None, shifts must be one int, got {shifts}")
        flat = roll(<TensorCore>tensor.flatten(), shift_list[0], 0)
        return flat.reshape(tensor.sizes)
    if len(shift_list) != len(dim_list):  # PyTorch's message
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shift_list)}, "
                           f"dims:{len(dim_list)}")
    output = tensor
    for shift, dim in zip(shift_list, dim_list):
        axis = dim_with_size(tensor, dim, "dims")
        size = tensor.sizes[axis]
        if size == 0:
            continue
        # element i of the result is element (i - shift) mod size of the input
        start = (-shift) % size
        positions = arange(start, start + size, 1, dtypes.named_dtype("int64"),
                           device_text(tensor.device_index), False) % size
        output = index_select(<TensorCore>output, axis, positions)
    return output if output is not tensor else tensor.clone()
