"""The parameter lists of tensorplay's own kernels, read from their CUDA sources.

Note [Kernel signatures]
Changing a captured graph's kernel parameters in place (node_params.pyx, rebinding.pyx) needs each
parameter's type: which bytes are a device address (to rebind tensors), which a scalar a user
may set (a length), which must never change (a conditional handle). The driver gives offsets
and sizes only (cuFuncGetParamInfo), so the types come from the declaration in the kernel's
source, `extern "C" __global__ void name(type name, ...)`, with the names the prelude and the
source define resolved:
- `typedef T name;` lines (the prelude's scalar_t, target_t, result_t; graphs.cu's handle);
- the two type functions of the sources, mirrored here: accumulate<T> (common.cu: float for
  half and bfloat16, long long for bool and integers narrower than 64 bits, else T) and
  real_of<T> (philox.cu: double for double, else float);
- the structs passed by value, whose fields are declared in STRUCTS below (offsets, formats,
  and which are device addresses, with the size of what each points at).
A declaration this module cannot read is an error naming the kernel: every shipped kernel is
read on a CPU by tests/graphs/test_graph_update.py for every element type, and on the GPU each
signature is compared with the driver's offsets and sizes before it is used.

Note [Kernel access annotations]
Types alone do not say which memory a kernel touches, whether its result depends on its launch
dimensions, or whether an output may be an input's memory; the graph update code needs all
three to change a captured node safely (Notes [Extents and bounds] in graph_update.pyx, [Launch
dimensions] in node_params.pyx, [Rebinding] in rebinding.pyx). Each kernel declares them in
lines that start with `//@`, directly above its `extern "C" __global__` line (no other line
between), one directive per line:

    //@ read a[count], b[count]        addresses the kernel reads through, each with its extent
    //@ write out[count]               ... writes through
    //@ update replay_state[2]         ... reads and writes through
    //@ launch any                     grid and block may change (grid-stride loops)
    //@ launch grid: <why>             the grid may change, the block must not
    //@ launch fixed: <why>            neither may change (the grid decides the result)
    //@ in-place yes                   a written address may be exactly a read one's memory
    //@ frozen blocks_per_copy: <why>  scalar parameters set_kernel_node_params() refuses

An address is a pointer parameter (`out`), an address field of a struct parameter
(`state.replay_state`, STRUCTS below), or every item of an array of addresses with an index
named for the extent (`copies.target[i][copies.nbytes[i]]`). Every address the parameters hold
is declared exactly once; `launch` and `in-place` come exactly once; read, write, update and
frozen lines may repeat. The extent inside the brackets counts elements of what the address
points at (scalar_t for `scalar_t*`, four of them for `vector4_t*`, POINTEES; the element a
struct's address field declares: bytes for staging's raw addresses), from the address on:
- an integer expression n, the elements [0, n) (none when n <= 0): integers, the prelude's
  constants (`OP_SUM`), integer parameters, struct fields (`a_strides.row`,
  `copies.nbytes[i]`), `gridDim.x` and `blockDim.x` (y, z too), + - * / (C's division), `<`
  and `==` (1 or 0), `c ? a : b`, min(), max() and parentheses;
- or, as the whole extent, reach(...) of Layout parameters and (size, stride) pairs, the
  offsets sum(index_i * stride_i) for 0 <= index_i < size_i (a Layout contributes its ndim
  sizes and strides): 1 + sum((size_i - 1) * stride_i) elements from the address for
  non-negative strides, nothing when a size is 0 or less.
An extent must be exactly what the kernel touches when launched as tensorplay launches it: the
one computed from a captured node's arguments is the memory that node may touch from then on.
A null address is an operand the kernel does not read (clamp's, where's), and has no extent.
A missing or malformed annotation on a shipped kernel is a ValueError naming the kernel and the
line (tests/graphs/test_graph_update.py reads every one for every element type); a kernel of another
library has none, so its arguments, launch dimensions and rebinding are refused.
"""
from __future__ import annotations

import dataclasses
import math
import re
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

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

@dataclass(frozen=True)
class Field:
    """One field of a struct passed by value: items of a struct format (an array when count >
    1). An address field has unit > 0: the bytes of one element of what it points at."""

    name: str
    offset: int
    format: str
    count: int = 1
    unit: int = 0


@dataclass(frozen=True)
class StructType:
    size: int
    align: int
    fields: tuple[Field, ...]

    @property
    def addresses(self) -> tuple[int, ...]:
        return tuple(field.offset + 8 * item for field in self.fields if field.unit
                     for item in range(field.count))


# Structs passed by value, each a function of the constants of nvrtc.pxd.
STRUCTS = {
    # common.cu: long long sizes[MAX_DIMS], strides[MAX_DIMS]; int ndim
    "Layout": lambda c: StructType(_round_up(16 * c["MAX_DIMS"] + 4, 8), 8, (
        Field("sizes", 0, "q", c["MAX_DIMS"]), Field("strides", 8 * c["MAX_DIMS"], "q",
                                                     c["MAX_DIMS"]),
        Field("ndim", 16 * c["MAX_DIMS"], "i"))),
    # philox.cu: seed, offset, then the replay state's device address (unsigned long long*)
    "PhiloxState": lambda c: StructType(24, 8, (Field("seed", 0, "Q"), Field("offset", 8, "Q"),
                                                Field("replay_state", 16, "Q", unit=8))),
    # staging.cu: target[STAGED_COPIES], source[STAGED_COPIES] (raw byte addresses),
    # nbytes[STAGED_COPIES]
    "StagedCopies": lambda c: StructType(24 * c["STAGED_COPIES"], 8, (
        Field("target", 0, "Q", c["STAGED_COPIES"], unit=1),
        Field("source", 8 * c["STAGED_COPIES"], "Q", c["STAGED_COPIES"], unit=1),
        Field("nbytes", 16 * c["STAGED_COPIES"], "Q", c["STAGED_COPIES"]))),
}

# Element types pointed at that are neither scalars nor typedefs: (element type, count).
POINTEES = {
    "vector4_t": ("scalar_t", 4),   # elementwise.cu: four scalar_t in one aligned load
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
    unit: int = 0    # a pointer's: bytes of one element it points at (0: unknown)
    struct: StructType | None = None  # a struct's fields

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
    # From the kernel's annotation (Note [Kernel access annotations]):
    accesses: tuple[Access, ...] = ()   # one per device address the parameters hold
    launch: str = "fixed"               # "any", "grid" or "fixed"
    launch_reason: str = ""             # why the block (grid) or both (fixed) must stay
    in_place: bool = False              # a written address may be exactly a read one's memory
    frozen: tuple[tuple[str, str], ...] = ()  # (scalar parameter, why it must not change)
    source: str = ""                    # the source's name ("elementwise"), when known

    def parameter(self, name: str) -> Parameter:
        for parameter in self.parameters:
            if parameter.name == name:
                return parameter
        raise ValueError(f"kernel {self.kernel!r} has no parameter {name!r}; its parameters are "
                         f"{', '.join(p.name for p in self.parameters)}")

    def extents(self, arguments: bytes, grid: tuple = (1, 1, 1),
                block: tuple = (1, 1, 1)) -> tuple[tuple[int, int, int, int], ...]:
        """Per access, in the order of accesses: (offset of its address in the argument bytes,
        role, low, high), where [address + low, address + high) are the bytes the kernel may
        touch through that address when launched with these arguments and dimensions (low ==
        high == 0: none). An ExtentError (a ValueError) names the kernel and the access when an
        extent cannot be computed (a Layout of an impossible ndim, a division by zero)."""
        environment = _Environment(self, arguments, grid, block)
        result = []
        for access in self.accesses:
            try:
                low, high = access.extent(environment)
            except ExtentError as error:
                raise ExtentError(f"kernel {self.kernel!r}: the extent of {access.name!r} "
                                  f"({access.text}) cannot be computed: {error}") from None
            if high <= low:
                low = high = 0
            result.append((access.offset, access.role, low * access.unit, high * access.unit))
        return tuple(result)

    def frozen_reason(self, name: str) -> str | None:
        for frozen, reason in self.frozen:
            if frozen == name:
                return reason
        return None


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
                     "runtime/kernels/signature.py what it gives")


def _element_size(resolved: str, typedefs: dict[str, str], kernel: str) -> int:
    """Bytes of one element a pointer to resolved points at; 0 when unknown."""
    if resolved in SCALARS:
        return SCALARS[resolved][0]
    if resolved in POINTEES:
        element, count = POINTEES[resolved]
        if element not in typedefs:
            return 0
        inner = _resolve(element, typedefs, kernel)
        return count * SCALARS[inner][0] if inner in SCALARS else 0
    return 0


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
        return Parameter(name, resolved + "*", "pointer", 8, 8, _round_up(offset, 8), "", (0,),
                         _element_size(resolved, typedefs, kernel))
    if spelling in HANDLES:
        return Parameter(name, spelling, "handle", 8, 8, _round_up(offset, 8), "", ())
    if resolved in SCALARS:
        size, kind, code = SCALARS[resolved]
        return Parameter(name, resolved, kind, size, size, _round_up(offset, size), code, ())
    if resolved in STRUCTS:
        layout = STRUCTS[resolved](constants)
        return Parameter(name, resolved, "struct", layout.size, layout.align,
                         _round_up(offset, layout.align), "", layout.addresses, 0, layout)
    raise ValueError(f"kernel {kernel!r}: unknown parameter type {resolved!r} of {name!r}; "
                     "declare it in runtime/kernels/signature.py (SCALARS or STRUCTS)")


@lru_cache(maxsize=None)
def signature(source_text: str, prelude: str, kernel: str,
              constants: tuple[tuple[str, int], ...], source_name: str = "") -> KernelSignature:
    """The signature of kernel in source_text compiled after prelude, with what its annotation
    declares; constants are the prelude's #defines (nvrtc.KERNEL_CONSTANTS) as (name, value)
    pairs, source_name the source's name for messages. A ValueError names the kernel when its
    declaration or its annotation cannot be read."""
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
    try:
        lines = _annotations(source_text)[kernel]
    except ValueError as error:
        raise ValueError(f"kernel {kernel!r}: {error}") from None
    return _annotated(KernelSignature(kernel, tuple(parameters), offset, source=source_name),
                      lines, dict(constants))


def kernels_of(source_text: str) -> list[str]:
    """The names of the kernels a source declares, in order."""
    return [name for name, _ in _DECLARATION.findall(source_text)]


# -- access annotations (Note [Kernel access annotations]) -----------------------------------

READ, WRITE, UPDATE = 1, 2, 3
ROLES = {"read": READ, "write": WRITE, "update": UPDATE}
ROLE_NAMES = {READ: "reads", WRITE: "writes", UPDATE: "reads and writes"}
LAUNCH_RULES = ("any", "grid", "fixed")
ANNOTATION = "//@"
_FUNCTIONS = ("min", "max")
_DIMENSIONS = {"gridDim": "grid", "blockDim": "block"}
_AXES = {"x": 0, "y": 1, "z": 2}


class ExtentError(ValueError):
    """An extent that cannot be computed from a node's arguments."""


class _Malformed(Exception):
    """A problem with one annotation line, reported with the kernel and the line."""


@dataclass(frozen=True)
class Access:
    """A device address a kernel's parameters hold, and what the kernel does through it."""

    name: str        # "out", "state.replay_state", "copies.target[3]"
    offset: int      # of the address, in the argument bytes
    role: int        # READ, WRITE or UPDATE
    unit: int        # bytes of one element of the extent
    text: str        # the extent as written
    uses: tuple[str, ...]  # the scalar parameters it reads, and "grid" / "block"
    # _Environment -> (low, high) in elements
    extent: Callable[[Any], tuple[int, int]] = dataclasses.field(compare=False, repr=False)


class _Environment:
    """A node's argument bytes and launch dimensions, read as an extent asks."""

    __slots__ = ("arguments", "grid", "block", "values")

    def __init__(self, signature, arguments, grid, block):
        if len(arguments) < signature.size:
            raise ExtentError(f"kernel {signature.kernel!r}: {len(arguments)} argument bytes, "
                              f"its parameters take {signature.size}")
        self.arguments = bytes(arguments)
        self.grid = tuple(grid)
        self.block = tuple(block)
        self.values = {}

    def scalar(self, parameter):
        found = self.values.get(parameter.name)
        if found is None:
            found = self.values[parameter.name] = int(parameter.decode(
                self.arguments[parameter.offset:parameter.offset + parameter.size]))
        return found

    def field(self, parameter, field, index):
        if not 0 <= index < field.count:
            raise ExtentError(f"{parameter.name}.{field.name}[{index}] is outside its "
                              f"{field.count} items")
        code = "<" + field.format
        return struct.unpack_from(code, self.arguments, parameter.offset + field.offset
                                  + index * struct.calcsize(code))[0]

    def layout(self, parameter):
        fields = {field.name: field for field in parameter.struct.fields}
        ndim = self.field(parameter, fields["ndim"], 0)
        if not 0 <= ndim <= fields["sizes"].count:
            raise ExtentError(f"{parameter.name} has ndim {ndim}, outside 0 to "
                              f"{fields['sizes'].count}")
        return [(self.field(parameter, fields["sizes"], dim),
                 self.field(parameter, fields["strides"], dim)) for dim in range(ndim)]

    def dimension(self, which, axis):
        return (self.grid if which == "grid" else self.block)[axis]


def reach(pairs) -> tuple[int, int]:
    """The element offsets [low, high) that (size, stride) pairs index from a base: every
    offset sum(index_i * stride_i) with 0 <= index_i < size_i; (0, 0) when a size is 0 or less
    (nothing is indexed)."""
    low = high = 0
    for size, stride in pairs:
        if size <= 0:
            return 0, 0
        step = (size - 1) * stride
        if step < 0:
            low += step
        else:
            high += step
    return low, high + 1


def _c_divide(a: int, b: int) -> int:
    if b == 0:
        raise ExtentError("a division by zero")
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(==|[-+*/<?:()\[\],.]))")


def _tokens(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The tokens of an annotation line, and where each is in it."""
    tokens, spans = [], []
    position = 0
    while text[position:].strip():
        match = _TOKEN.match(text, position)
        if match is None:
            raise _Malformed(f"cannot read {text[position:].strip()!r}")
        group = match.lastindex or 0
        tokens.append(match.group(group))
        spans.append(match.span(group))
        position = match.end()
    return tokens, spans


class _Parser:
    """Extents in the annotation's grammar, compiled to functions of an _Environment."""

    def __init__(self, tokens, parameters, constants, bound=None):
        self.tokens = tokens
        self.position = 0
        self.parameters = parameters       # name -> Parameter
        self.constants = constants         # a #define of the prelude -> its value
        self.bound = bound or {}           # an index variable -> its value
        self.uses = set()

    def peek(self, ahead=0):
        index = self.position + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def take(self):
        token = self.peek()
        if token is None:
            raise _Malformed("the line ends too early (an extent, or a name, is missing)")
        self.position += 1
        return token

    def expect(self, wanted):
        token = self.take()
        if token != wanted:
            raise _Malformed(f"expected {wanted!r}, found {token!r}")

    def name(self):
        token = self.take()
        if not re.fullmatch(r"[A-Za-z_]\w*", token):
            raise _Malformed(f"expected a name, found {token!r}")
        return token

    # extent := 'reach' '(' items ')' | expression
    def extent(self):
        if self.peek() == "reach" and self.peek(1) == "(":
            self.position += 2
            items = []
            while True:
                token = self.peek()
                parameter = self.parameters.get(token)
                if (parameter is not None and parameter.type == "Layout"
                        and self.peek(1) in (",", ")")):
                    self.position += 1
                    self.uses.add(parameter.name)
                    items.append((True, parameter))
                else:
                    items.append((False, self.expression()))
                if self.take() == ")":
                    break
                if self.tokens[self.position - 1] != ",":
                    raise _Malformed("expected ',' or ')' in reach()")
            loose = [item for layout, item in items if not layout]
            if len(loose) % 2:
                raise _Malformed("reach() takes Layout parameters and (size, stride) pairs; "
                                 f"it has {len(loose)} expressions outside Layouts")

            def extent(environment, items=tuple(items)):
                pairs, loose = [], []
                for layout, item in items:
                    if layout:
                        pairs.extend(environment.layout(item))
                    else:
                        loose.append(item(environment))
                        if len(loose) == 2:
                            pairs.append(tuple(loose))
                            loose = []
                return reach(pairs)
            return extent
        count = self.expression()
        return lambda environment: (0, count(environment))

    # expression := comparison ['?' expression ':' expression]
    def expression(self):
        condition = self.comparison()
        if self.peek() != "?":
            return condition
        self.position += 1
        then = self.expression()
        self.expect(":")
        otherwise = self.expression()
        return lambda e: then(e) if condition(e) else otherwise(e)

    # comparison := sum [('<' | '==') sum]
    def comparison(self):
        left = self.sum()
        token = self.peek()
        if token not in ("<", "=="):
            return left
        self.position += 1
        right = self.sum()
        if token == "<":
            return lambda e: int(left(e) < right(e))
        return lambda e: int(left(e) == right(e))

    # sum := term (('+' | '-') term)*
    def sum(self):
        value = self.term()
        while self.peek() in ("+", "-"):
            token = self.take()
            right = self.term()
            if token == "+":
                value = (lambda left, right: lambda e: left(e) + right(e))(value, right)
            else:
                value = (lambda left, right: lambda e: left(e) - right(e))(value, right)
        return value

    # term := unary (('*' | '/') unary)*
    def term(self):
        value = self.unary()
        while self.peek() in ("*", "/"):
            token = self.take()
            right = self.unary()
            if token == "*":
                value = (lambda left, right: lambda e: left(e) * right(e))(value, right)
            else:
                value = (lambda left, right: lambda e: _c_divide(left(e), right(e)))(value,
                                                                                   right)
        return value

    # unary := '-' unary | atom
    def unary(self):
        if self.peek() == "-":
            self.position += 1
            inner = self.unary()
            return lambda e: -inner(e)
        return self.atom()

    # atom := integer | '(' expression ')' | ('min' | 'max') '(' expression, ... ')'
    #       | name | name '.' name | name '.' name '[' expression ']'
    def atom(self):
        token = self.take()
        if token.isdigit():
            value = int(token)
            return lambda e: value
        if token == "(":
            inner = self.expression()
            self.expect(")")
            return inner
        if not re.fullmatch(r"[A-Za-z_]\w*", token):
            raise _Malformed(f"expected a value, found {token!r}")
        if self.peek() == "(":
            if token == "reach":
                raise _Malformed("reach() must be a whole extent, not part of one")
            if token not in _FUNCTIONS:
                raise _Malformed(f"unknown function {token}(); extents may call "
                                 f"{', '.join(_FUNCTIONS)} and reach()")
            self.position += 1
            arguments = [self.expression()]
            while self.take() == ",":
                arguments.append(self.expression())
            if self.tokens[self.position - 1] != ")":
                raise _Malformed(f"expected ',' or ')' in {token}()")
            if len(arguments) < 2:
                raise _Malformed(f"{token}() takes two values or more")
            function = min if token == "min" else max
            return lambda e: function(argument(e) for argument in arguments)
        if self.peek() == ".":
            self.position += 1
            member = self.name()
            return self.member(token, member)
        if token in self.bound or token in self.constants:
            value = self.bound[token] if token in self.bound else self.constants[token]
            return lambda e: value
        parameter = self.parameters.get(token)
        if parameter is None:
            raise _Malformed(f"{token!r} is not a parameter of the kernel")
        if parameter.kind != "int":
            raise _Malformed(f"{token!r} is a {parameter.kind} ({parameter.type}); extents "
                             "compute with integer parameters, the fields of structs, and "
                             "gridDim / blockDim")
        self.uses.add(token)
        return lambda e: e.scalar(parameter)

    def member(self, owner, member):
        if owner in _DIMENSIONS:
            if member not in _AXES:
                raise _Malformed(f"{owner} has x, y and z, not {member!r}")
            which, axis = _DIMENSIONS[owner], _AXES[member]
            self.uses.add(which)
            return lambda e: e.dimension(which, axis)
        parameter = self.parameters.get(owner)
        if parameter is None or parameter.struct is None:
            raise _Malformed(f"{owner!r} is not a struct parameter of the kernel")
        field = _field(parameter, member)
        if field.unit:
            raise _Malformed(f"{owner}.{member} is a device address, not a value")
        self.uses.add(owner)
        if field.count == 1:
            if self.peek() == "[":
                raise _Malformed(f"{owner}.{member} is not an array")
            return lambda e: e.field(parameter, field, 0)
        if self.peek() != "[":
            raise _Malformed(f"{owner}.{member} is an array of {field.count}: index it")
        self.position += 1
        index = self.expression()
        self.expect("]")
        return lambda e: e.field(parameter, field, index(e))


def _field(parameter: Parameter, name: str) -> Field:
    fields = parameter.struct.fields if parameter.struct is not None else ()
    for field in fields:
        if field.name == name:
            return field
    raise _Malformed(f"{parameter.type} has no field {name!r}; its fields are "
                     f"{', '.join(field.name for field in fields)}")


def _address_items(parser: _Parser, role: int, text: str,
                   spans: list[tuple[int, int]]) -> list[Access]:
    """The accesses of one read / write / update line: ADDRESS[EXTENT], ..."""
    accesses = []
    while True:
        owner = parser.name()
        parameter = parser.parameters.get(owner)
        if parameter is None:
            raise _Malformed(f"{owner!r} is not a parameter of the kernel")
        targets: list[tuple[str, int, int, dict[str, int]]] = []  # name, offset, unit, index
        if parser.peek() == ".":
            parser.position += 1
            member = parser.name()
            if parameter.struct is None:
                raise _Malformed(f"{owner!r} is a {parameter.kind}, not a struct")
            field = _field(parameter, member)
            if not field.unit:
                raise _Malformed(f"{owner}.{member} is not a device address")
            if field.count == 1:
                targets.append((f"{owner}.{member}", parameter.offset + field.offset,
                                field.unit, {}))
            else:
                parser.expect("[")
                variable = parser.name()
                parser.expect("]")
                if variable in parser.parameters:
                    raise _Malformed(f"the index {variable!r} is also a parameter's name")
                for item in range(field.count):
                    targets.append((f"{owner}.{member}[{item}]",
                                    parameter.offset + field.offset + 8 * item, field.unit,
                                    {variable: item}))
        else:
            if parameter.kind != "pointer":
                raise _Malformed(f"{owner!r} is a {parameter.kind} ({parameter.type}), not a "
                                 "pointer; name the address field of a struct as "
                                 "parameter.field")
            if not parameter.unit:
                raise _Malformed(f"the size of what {owner!r} ({parameter.type}) points at is "
                                 "unknown; declare its element type in POINTEES")
            targets.append((owner, parameter.offset, parameter.unit, {}))
        parser.expect("[")
        start = parser.position
        for name, offset, unit, binding in targets:
            parser.position = start
            sub = _Parser(parser.tokens, parser.parameters, parser.constants, binding)
            sub.position = start
            extent = sub.extent()
            if sub.peek() is None:
                raise _Malformed(f"the line ends before the ']' that closes the extent of "
                                 f"{owner!r}")
            if sub.peek() != "]":
                raise _Malformed(f"expected ']' after the extent of {owner!r}, found "
                                 f"{sub.peek()!r}")
            end = sub.position
            words = text[spans[start][0]:spans[end - 1][1]] if end > start else ""
            accesses.append(Access(name, offset, role, unit, words, tuple(sorted(sub.uses)),
                                   extent))
        parser.position = end + 1
        token = parser.peek()
        if token is None:
            return accesses
        parser.expect(",")


@lru_cache(maxsize=None)
def _annotations(source_text: str) -> dict[str, tuple[tuple[int, str], ...]]:
    """Each kernel's annotation lines (number, text after //@), those directly above its
    declaration; a ValueError for an annotation line above no declaration."""
    lines = source_text.splitlines()
    found = {}
    claimed = set()
    for match in _DECLARATION.finditer(source_text):
        index = source_text.count("\n", 0, match.start()) - 1
        block = []
        while index >= 0 and lines[index].lstrip().startswith(ANNOTATION):
            block.append((index + 1, lines[index].strip()[len(ANNOTATION):].strip()))
            claimed.add(index)
            index -= 1
        found[match.group(1)] = tuple(reversed(block))
    for index, line in enumerate(lines):
        if line.lstrip().startswith(ANNOTATION) and index not in claimed:
            raise ValueError(f"line {index + 1} ({line.strip()!r}) is an annotation line above "
                             f"no extern \"C\" __global__ declaration (Note [Kernel access "
                             "annotations] in runtime/kernels/signature.py)")
    return found


def _address_names(parameter: Parameter) -> list[tuple[str, tuple[int, ...]]]:
    """(name as an annotation writes it, offsets in the argument bytes) of each address."""
    if parameter.kind == "pointer":
        return [(parameter.name, (parameter.offset,))]
    names = []
    if parameter.struct is not None:
        for field in parameter.struct.fields:
            if field.unit:
                suffix = "" if field.count == 1 else "[i]"
                names.append((f"{parameter.name}.{field.name}{suffix}",
                              tuple(parameter.offset + field.offset + 8 * item
                                    for item in range(field.count))))
    return names


def _annotated(signature: KernelSignature, lines, constants: dict[str, int]) -> KernelSignature:
    """signature with what its annotation lines declare, all checked; constants are the
    prelude's #defines, which extents may name."""
    kernel = signature.kernel
    note = "(Note [Kernel access annotations] in runtime/kernels/signature.py)"
    if not lines:
        raise ValueError(f"kernel {kernel!r} has no annotation: declare the memory it touches, "
                         "its launch rule and whether it may run in place, in //@ lines "
                         f"directly above its extern \"C\" __global__ declaration {note}")
    parameters = {parameter.name: parameter for parameter in signature.parameters}
    accesses = []
    launch = in_place = None
    frozen: list[tuple[str, str]] = []
    for number, text in lines:
        directive, _, rest = text.partition(" ")
        rest = rest.strip()
        try:
            if directive in ROLES:
                if not rest:
                    raise _Malformed(f"{directive} names no address")
                tokens, spans = _tokens(rest)
                accesses.extend(_address_items(_Parser(tokens, parameters, constants),
                                               ROLES[directive], rest, spans))
            elif directive == "launch":
                if launch is not None:
                    raise _Malformed("a second launch line")
                rule, colon, reason = (part.strip() for part in rest.partition(":"))
                if rule not in LAUNCH_RULES:
                    raise _Malformed(f"the launch rule is one of {', '.join(LAUNCH_RULES)}, "
                                     f"not {rule!r}")
                if rule != "any" and not reason:
                    raise _Malformed(f"launch {rule} needs its reason after a colon")
                if rule == "any" and colon:
                    raise _Malformed("launch any takes no reason")
                launch = (rule, reason)
            elif directive == "in-place":
                if in_place is not None:
                    raise _Malformed("a second in-place line")
                if rest not in ("yes", "no"):
                    raise _Malformed(f"in-place is yes or no, not {rest!r}")
                in_place = rest == "yes"
            elif directive == "frozen":
                names, _, reason = (part.strip() for part in rest.partition(":"))
                if not reason:
                    raise _Malformed("frozen needs its reason after a colon")
                for name in (name.strip() for name in names.split(",")):
                    parameter = parameters.get(name)
                    if parameter is None or parameter.kind not in ("int", "float", "bool"):
                        raise _Malformed(f"{name!r} is not a scalar parameter of the kernel")
                    if any(name == seen for seen, _ in frozen):
                        raise _Malformed(f"{name!r} is frozen twice")
                    frozen.append((name, reason))
            else:
                raise _Malformed(f"unknown directive {directive!r}; the directives are read, "
                                 "write, update, launch, in-place and frozen")
        except _Malformed as problem:
            raise ValueError(f"kernel {kernel!r}: annotation line {number} "
                             f"({ANNOTATION} {text}): {problem} {note}") from None
    declared = {}
    for access in accesses:
        if access.offset in declared:
            raise ValueError(f"kernel {kernel!r}: the annotation declares {access.name!r} "
                             f"twice {note}")
        declared[access.offset] = access
    for parameter in signature.parameters:
        for name, offsets in _address_names(parameter):
            if any(offset not in declared for offset in offsets):
                raise ValueError(f"kernel {kernel!r}: the annotation does not declare what "
                                 f"the kernel touches through {name!r} (a read, write or "
                                 f"update line) {note}")
    if launch is None:
        raise ValueError(f"kernel {kernel!r}: the annotation has no launch line (launch any, "
                         f"launch grid: why, or launch fixed: why) {note}")
    if in_place is None:
        raise ValueError(f"kernel {kernel!r}: the annotation has no in-place line (in-place "
                         f"yes or in-place no) {note}")
    ordered = tuple(sorted(accesses, key=lambda access: access.offset))
    return dataclasses.replace(signature, accesses=ordered, launch=launch[0],
                               launch_reason=launch[1], in_place=in_place, frozen=tuple(frozen))
