"""The parameter lists of tensorplay's own kernels, read from their CUDA sources.

Note [Kernel signatures]
Changing a captured graph's kernel parameters in place (graph_update.pyx) needs each
parameter's type: which bytes are a device address (to rebind tensors), which a scalar a user
may set (a length), which must never change (a conditional handle). The driver gives offsets
and sizes only (cuFuncGetParamInfo), so the types come from the declaration in the kernel's
source, `extern "C" __global__ void name(type name, ...)`, with the names the prelude and the
source define resolved:
- `typedef T name;` lines (the prelude's scalar_t, target_t, result_t; graphs.cu's handle);
- the two type functions of the sources, mirrored here: accumulate<T> (common.cu: float for
  half and bfloat16, long long for bool and integers narrower than 64 bits, else T) and
  real_of<T> (philox.cu: double for double, else float);
- the structs passed by value, whose fields are declared in STRUCTS below with the byte
  offsets of the device addresses they hold.
A declaration this module cannot read is an error naming the kernel: every shipped kernel is
read on a CPU by tests/test_graph_update.py for every element type, and on the GPU each
signature is compared with the driver's offsets and sizes before it is used.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass
from functools import lru_cache

# C scalar types: (size, kind, struct format). Kinds: "int", "float", "bool".
SCALARS = {
    "bool": (1, "bool", "?"),
    "signed char": (1, "int", "b"),
    "unsigned char": (1, "int", "B"),
    "short": (2, "int", "h"),
    "unsigned short": (2, "int", "H"),
    "int": (4, "int", "i"),
    "unsigned int": (4, "int", "I"),
    "long long": (8, "int", "q"),
    "unsigned long long": (8, "int", "Q"),
    "float": (4, "float", "f"),
    "double": (8, "float", "d"),
    "half_bits": (2, "float", "e"),
    "bfloat16_bits": (2, "float", "bfloat16"),
}

# Structs passed by value: (size, alignment, byte offsets of the device addresses they hold),
# each a function of the constants of kernels.pxd.
STRUCTS = {
    # common.cu: long long sizes[MAX_DIMS], strides[MAX_DIMS]; int ndim
    "Layout": lambda c: (_round_up(16 * c["MAX_DIMS"] + 4, 8), 8, ()),
    # matmul.cu: long long batch, row, column
    "MatrixStrides": lambda c: (24, 8, ()),
    # philox.cu: seed, offset, then the replay state's device address
    "PhiloxState": lambda c: (24, 8, (16,)),
    # staging.cu: target[STAGED_COPIES], source[STAGED_COPIES], nbytes[STAGED_COPIES] addresses
    "StagedCopies": lambda c: (24 * c["STAGED_COPIES"], 8,
                               tuple(range(0, 16 * c["STAGED_COPIES"], 8))),
}

# A conditional node's handle (graphs.cu): a value the driver gave, never to be changed.
HANDLES = ("cudaGraphConditionalHandle",)

_DECLARATION = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)', re.S)
_TYPEDEF = re.compile(r"^\s*typedef\s+([^;{}]+?)\s+(\w+)\s*;", re.M)
_TYPE_FUNCTION = re.compile(r"typename\s+(\w+)\s*<\s*(\w+)\s*>\s*::\s*type")
_WORDS_DROPPED = ("const", "__restrict__", "volatile")


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter: name, resolved C type, kind, and its place in the argument bytes."""

    name: str
    type: str        # the resolved spelling: "long long", "float*", "Layout"
    kind: str        # "int", "float", "bool", "pointer", "handle" or "struct"
    size: int
    align: int
    offset: int      # from the start of the argument bytes
    format: str      # struct format of a scalar ("q", "f", "bfloat16"); "" otherwise
    addresses: tuple[int, ...]  # offsets, within the parameter, of device addresses it holds

    def encode(self, value) -> bytes:
        """The bytes of value as this scalar parameter; a ValueError or TypeError names it."""
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise TypeError(f"argument {self.name!r} is a bool, got {_shown(value)}")
            return struct.pack("<?", value)
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"argument {self.name!r} is an integer ({self.type}), got "
                                f"{_shown(value)}")
            low, high = _int_range(self.format)
            if not low <= value <= high:
                raise ValueError(f"argument {self.name!r} ({self.type}) takes {low} to {high}, "
                                 f"got {value}")
            return struct.pack("<" + self.format, value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"argument {self.name!r} is a floating-point number ({self.type}), "
                            f"got {_shown(value)}")
        return _float_bytes(self, float(value))

    def decode(self, data: bytes):
        """The Python value of this scalar parameter's bytes."""
        if self.format == "bfloat16":
            return struct.unpack("<f", b"\0\0" + data[:2])[0]
        return struct.unpack("<" + self.format, data[:self.size])[0]


@dataclass(frozen=True)
class KernelSignature:
    """A kernel's parameters in order, and the size of its argument bytes."""

    kernel: str
    parameters: tuple[Parameter, ...]
    size: int

    def parameter(self, name: str) -> Parameter:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise ValueError(f"kernel {self.kernel!r} has no parameter {name!r}; its parameters are "
                         f"{', '.join(p.name for p in self.parameters)}")


def _shown(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:200]}"


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def _int_range(code: str) -> tuple[int, int]:
    bits = 8 * struct.calcsize(code)
    if code.isupper():
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _float_bytes(parameter: Parameter, value: float) -> bytes:
    overflow = ValueError(f"argument {parameter.name!r} ({parameter.type}) cannot hold "
                          f"{value}: it rounds to infinity")
    if parameter.format == "bfloat16":
        try:
            bits = struct.unpack("<I", struct.pack("<f", value))[0]
        except OverflowError:
            raise overflow from None
        if math.isnan(value):
            rounded = (bits >> 16) | 0x40
        else:  # round to nearest even, as float_to_bfloat16 in common.cu
            rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        if math.isinf(struct.unpack("<f", struct.pack("<I", rounded << 16))[0]) \
                and not math.isinf(value):
            raise overflow
        return struct.pack("<H", rounded)
    try:
        return struct.pack("<" + parameter.format, value)
    except (OverflowError, struct.error):
        raise overflow from None


def _typedefs(text: str) -> dict[str, str]:
    return {name: spelling.strip() for spelling, name in _TYPEDEF.findall(text)}


def _resolve(spelling: str, typedefs: dict[str, str], kernel: str) -> str:
    """A type spelling with every typedef name and type function replaced by its C type."""
    seen = 0
    while True:
        seen += 1
        if seen > 32:
            raise ValueError(f"kernel {kernel!r}: the type {spelling!r} does not resolve")
        function = _TYPE_FUNCTION.fullmatch(spelling)
        if function is not None:
            argument = _resolve(function.group(2), typedefs, kernel)
            spelling = _apply_type_function(function.group(1), argument, kernel)
            continue
        if spelling in typedefs and spelling not in HANDLES:
            spelling = typedefs[spelling]
            continue
        return spelling


def _apply_type_function(name: str, argument: str, kernel: str) -> str:
    if name == "accumulate":  # common.cu
        if argument in ("half_bits", "bfloat16_bits"):
            return "float"
        if argument in ("bool", "unsigned char", "signed char", "short", "int"):
            return "long long"
        return argument
    if name == "real_of":  # philox.cu
        return "double" if argument == "double" else "float"
    raise ValueError(f"kernel {kernel!r}: unknown type function {name}<{argument}>; teach "
                     "runtime/kernel_signature.py what it gives")


def _parameter(text: str, typedefs: dict[str, str], constants: dict[str, int], offset: int,
               kernel: str) -> Parameter:
    words = [word for word in re.findall(r"\w+|\*", text) if word not in _WORDS_DROPPED]
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
        raise ValueError(f"kernel {kernel!r}: cannot read the parameter {text.strip()!r}")
    name = words[-1]
    pointer = "*" in words
    spelling = " ".join(word for word in words[:-1] if word != "*")
    resolved = _resolve(spelling, typedefs, kernel)
    if pointer:
        return Parameter(name, resolved + "*", "pointer", 8, 8, _round_up(offset, 8), "", (0,))
    if spelling in HANDLES:
        return Parameter(name, spelling, "handle", 8, 8, _round_up(offset, 8), "", ())
    if resolved in SCALARS:
        size, kind, code = SCALARS[resolved]
        return Parameter(name, resolved, kind, size, size, _round_up(offset, size), code, ())
    if resolved in STRUCTS:
        size, align, addresses = STRUCTS[resolved](constants)
        return Parameter(name, resolved, "struct", size, align, _round_up(offset, align), "",
                         addresses)
    raise ValueError(f"kernel {kernel!r}: unknown parameter type {resolved!r} of {name!r}; "
                     "declare it in runtime/kernel_signature.py (SCALARS or STRUCTS)")


@lru_cache(maxsize=None)
def signature(source_text: str, prelude: str, kernel: str,
              constants: tuple[tuple[str, int], ...]) -> KernelSignature:
    """The signature of kernel in source_text compiled after prelude; constants are the
    #defines of kernels.pxd as (name, value) pairs."""
    for name, parameter_text in _DECLARATION.findall(source_text):
        if name == kernel:
            break
    else:
        raise ValueError(f"no declaration extern \"C\" __global__ void {kernel}(...) in its "
                         "source")
    typedefs = {**_typedefs(prelude), **_typedefs(source_text)}
    parameters = []
    offset = 0
    for text in parameter_text.split(","):
        if not text.strip():
            continue
        parameter = _parameter(text, typedefs, dict(constants), offset, kernel)
        parameters.append(parameter)
        offset = parameter.offset + parameter.size
    return KernelSignature(kernel, tuple(parameters), offset)


def kernels_of(source_text: str) -> list[str]:
    """The names of the kernels a source declares, in order."""
    return [name for name, _ in _DECLARATION.findall(source_text)]
