# cython: language_level=3
"""Errors: CUDA failures name the CUDA error and the call; missing devices say so plainly."""
import os

from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact

from cuda.bindings cimport cydriver, cyruntime
from cuda.bindings.cydriver cimport CUDA_SUCCESS, CUresult
from cuda.bindings.cyruntime cimport cudaError_t, cudaSuccess

from tensorplay._runtime.base cimport public

from tensorplay._runtime.base.sentinels import UNSET


class OutOfMemoryErrorCore(RuntimeError):
    """Base of tensorplay.OutOfMemoryError; the public subclass is declared in api.yaml."""


cdef int raise_cuda_error(int code, str call) except -1:
    cdef const char* name = cyruntime.cudaGetErrorName(<cudaError_t>code)
    cdef const char* text = cyruntime.cudaGetErrorString(<cudaError_t>code)
    raise RuntimeError(f"CUDA error {name.decode()} ({code}) from {call}: {text.decode()}")


cdef int raise_runtime_failure(cudaError_t code, const char* call) except -1 nogil:
    with gil:
        raise_cuda_error(<int>code, call.decode())


cdef int SHOWN_CHARACTERS = 200


cdef str shown(object value):
    """At most about SHOWN_CHARACTERS of repr(value), for an error message. Never fails: an
    error is being reported, so a repr that raises (a hostile or broken __repr__) or returns
    something other than a str shows the type's name instead."""
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts (int_max_str_digits)
        if isinstance(value, int):
            return f"an int of {value.bit_length()} bits"
        if isinstance(value, (tuple, list)):
            inner = ", ".join(shown(item) for item in value[:8])
            more = ", ..." if len(value) > 8 else ""
            text = f"({inner}{more})" if isinstance(value, tuple) else f"[{inner}{more}]"
        else:
            return _unshown(value)
    except Exception:  # noqa: BLE001  (whatever the repr raised, the caller's error wins)
        return _unshown(value)
    if type(text) is not str:  # a str subclass whose methods could fail again
        return _unshown(value)
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_CHARACTERS - 40]}... ({len(text)} characters) ...{text[-20:]}"


cdef str _unshown(object value):
    return f"a {type(value).__name__} that cannot be shown"


cdef int _wrong_type(object value, str argument, str expected) except -1:
    raise TypeError(f"{argument} must be {expected}, got {type(value).__name__} "
                    f"({shown(value)})")


cdef bint bool_arg(object value, str argument) except -1:
    # Only True and False: Cython would read any object as a C truth value, so a mistake such
    # as check_available='tpu' would pass silently.
    if value is not True and value is not False:
        _wrong_type(value, argument, "a bool (True or False)")
    return value is True


cdef double float_arg(object value, str argument) except? -1.0:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _wrong_type(value, argument, "a float (or an int)")
    try:
        return float(value)
    except OverflowError:  # an int beyond the largest float
        raise ValueError(f"{argument} {shown(value)} is too large for a float") from None


cdef str str_arg(object value, str argument):
    if not isinstance(value, str):
        _wrong_type(value, argument, "a str")
    return _plain(value)


cdef str _plain(object text):
    """text, a str, as the runtime takes one: a str subclass's value as a plain str (a C-level
    str parameter accepts nothing else)."""
    return text if type(text) is str else str.__str__(text)


cdef str _bound_text(object bound):
    """2147483647 as 2**31 - 1, 4096 as 2**12: the way people write C limits."""
    if bound > 1024 and (bound + 1) & bound == 0:
        return f"2**{(bound + 1).bit_length() - 1} - 1"
    if bound > 1024 and bound & (bound - 1) == 0:
        return f"2**{bound.bit_length() - 1}"
    if bound < -1024 and -bound & (-bound - 1) == 0:
        return f"-2**{(-bound).bit_length() - 1}"
    return str(bound)


cdef object int_arg(object value, str argument, object low, object high):
    """An int from low to high (both included), as the schema's `range:` declares it."""
    cdef long long number, lowest, highest
    cdef int overflow = 0
    # The common case in C: an exact int and bounds that fit in 64 signed bits (bool is a
    # subclass, so it is not exact); anything else takes the general path below.
    if PyLong_CheckExact(value):
        number = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow == 0:
            lowest = PyLong_AsLongLongAndOverflow(low, &overflow)
            if overflow == 0:
                highest = PyLong_AsLongLongAndOverflow(high, &overflow)
                if overflow == 0 and lowest <= number <= highest:
                    return value
    if isinstance(value, bool) or not isinstance(value, int):
        _wrong_type(value, argument, "an int")
    if not low <= value <= high:
        raise ValueError(f"{argument} must be from {_bound_text(low)} to {_bound_text(high)}, "
                         f"got {shown(value)}")
    return value


cdef int choice_arg(object value, str argument, tuple choices) except -2:
    """One of the strings the schema's `choices:` lists, as its index there (UNSET_CHOICE for
    UNSET, which the wrapper lists last where it is the default)."""
    if not isinstance(value, str):
        _wrong_type(value, argument, "a str")
    cdef Py_ssize_t index
    for index in range(len(choices)):
        if choices[index] == value:
            return UNSET_CHOICE if value == UNSET else index
    # UNSET is accepted where it is the default (the constructor's setting), not advertised.
    named = ", ".join(repr(choice) for choice in choices if choice != UNSET)
    raise ValueError(f"{argument} must be one of {named}, got {shown(value)}")


# The longest path Linux accepts (PATH_MAX, with its terminating NUL).
cdef int PATH_BYTES = 4096


cdef str path_arg(object value, str argument):
    """A file path as a str: a str or os.PathLike of str that a path can be."""
    if not isinstance(value, (str, os.PathLike)):
        _wrong_type(value, argument, "a str or os.PathLike")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError(f"{argument} must name a path as str, got {shown(path)}")
    return _path_text(_plain(path), argument)


cdef str str_path_arg(object value, str argument):
    """A file path the API reference types as str (`path: true`): a str, no os.PathLike, that a
    path can be."""
    return _path_text(str_arg(value, argument), argument)


cdef str _path_text(str path, str argument):
    """path, which must be text a file path can be."""
    if "\0" in path:
        raise ValueError(f"{argument} contains a NUL character, which no file path can: "
                         f"{shown(path)}")
    if len(os.fsencode(path)) >= PATH_BYTES:
        raise ValueError(f"{argument} is {len(path)} characters long, longer than a path can be "
                         f"({PATH_BYTES - 1} bytes): {shown(path)}")
    return path


cdef str _c_text(const char* text, str fallback):
    return text.decode(errors="replace") if text != NULL else fallback


cdef int _raise_driver_error(CUresult code, str call) except -1:
    cdef const char* name = NULL
    cdef const char* text = NULL
    # Both leave NULL for a code they do not know (one from a newer driver).
    cydriver.cuGetErrorName(code, &name)
    cydriver.cuGetErrorString(code, &text)
    raise RuntimeError(f"CUDA error {_c_text(name, 'CUDA_ERROR_UNKNOWN')} ({<int>code}) from "
                       f"{call}: {_c_text(text, 'unknown error')}")


cdef int raise_driver_failure(CUresult code, const char* call) except -1 nogil:
    with gil:
        _raise_driver_error(code, call.decode())


cpdef int raise_no_accelerator(str what) except -1:
    raise RuntimeError(f"{what} needs an accelerator, but no accelerator is available: no CUDA "
                       "device is visible (check the driver, nvidia-smi and CUDA_VISIBLE_DEVICES)")


cdef object out_of_memory_error(str message):
    return public.public_class("OutOfMemoryErrorCore", OutOfMemoryErrorCore)(message)
