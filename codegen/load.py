"""Load api.yaml keeping the line and column of every key and value.

PyYAML's plain loaders forget where things came from and silently keep the last of duplicate
keys. We compose the node graph ourselves and convert it into dicts and lists that remember
locations, so every later diagnostic can say ``api.yaml:LINE:COL: message``.

Hostile input fails with one located diagnostic instead of a traceback or a runaway: bytes
that are not UTF-8, nesting deeper than ``MAX_DEPTH`` (PyYAML composes recursively, so deep
brackets would exhaust Python's stack) and aliases that expand to more than ``MAX_NODES``
nodes (a "billion laughs" bomb is a few hundred bytes that expand to billions of nodes).
"""
from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

# api.yaml is about 10 levels deep and expands to under 5,000 nodes; these limits leave ample
# room for growth while keeping recursion far below Python's limit and memory in megabytes.
MAX_DEPTH = 100
MAX_NODES = 200_000

# Error messages echo at most this many characters of a value the user wrote.
MAX_SHOWN = 200


def shown(value: object) -> str:
    """repr(value), cut to MAX_SHOWN characters so a huge value cannot flood a message."""
    text = repr(value)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]}... ({len(text)} characters)"


@dataclass(frozen=True, order=True)
class Location:
    """A 1-based line and column inside a schema file."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One schema problem, printed as ``file:line:col: message``."""

    location: Location
    message: str

    def __post_init__(self) -> None:
        # A safety net for messages that echo a value without shown(): keep the start (what
        # is wrong) and the end (what was expected), drop the middle.
        if len(self.message) > 2 * MAX_SHOWN + 100:
            head, tail = self.message[:MAX_SHOWN], self.message[-MAX_SHOWN:]
            omitted = len(self.message) - 2 * MAX_SHOWN
            object.__setattr__(self, "message",
                               f"{head}... ({omitted} characters omitted) ...{tail}")

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


class SchemaError(Exception):
    """Raised with every problem found, so a maintainer fixes them all in one pass."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = sorted(set(diagnostics))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class LocatedMap(dict):
    """A mapping that knows where it, each key and each value were written."""

    location: Location
    key_locations: dict[str, Location]
    value_locations: dict[str, Location]


class LocatedList(list):
    """A sequence that knows where it and each item were written."""

    location: Location
    item_locations: list[Location]


def _location(file: str, node: yaml.Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


def _text_location(file: str, text: str, index: int) -> Location:
    """The line and column of a character index inside text."""
    line_start = text.rfind("\n", 0, index) + 1
    return Location(file, text.count("\n", 0, index) + 1, index - line_start + 1)


# No schema, template or runtime declaration comes near this; a larger input is refused before
# it is parsed (a YAML bomb or a wrong file would otherwise take memory and time).
MAX_INPUT_BYTES = 4 << 20


def read_text(path: Path, file: str | None = None) -> str:
    """A source file's text; SchemaError located at file (default: the file's name) when it
    is not UTF-8 or larger than MAX_INPUT_BYTES.

    OSError (a missing or unreadable file, or one that is not a regular file: a device or a
    pipe could block or never end) is left to the caller, which knows the option that named
    the path.
    """
    # Opened without blocking: opening a pipe would otherwise wait for a writer.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with os.fdopen(descriptor, "rb") as handle:
        data = handle.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise SchemaError([Diagnostic(Location(file or path.name, 1, 1),
                                      f"the file is larger than {MAX_INPUT_BYTES >> 20} MiB, "
                                      "more than any schema or template needs")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        good = data[:error.start].decode("utf-8")
        where = _text_location(file or path.name, good, len(good))
        raise SchemaError([Diagnostic(where, f"the file must be UTF-8 text; byte "
                                             f"0x{data[error.start]:02x} here is not "
                                             f"({error.reason})")]) from None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with limits on nesting depth and alias expansion.

    While composing, it records for every node how many nodes and how many levels it stands
    for once its aliases are expanded, and stops at the first node over a limit, at that
    node's location. It also refuses an alias inside the node it names (``&a [*a]``), which
    would expand forever.
    """

    def __init__(self, text: str, file: str):
        super().__init__(text)
        self.file = file
        self.depth = 0
        self.open_anchors: set[str] = set()
        self.expanded: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, levels)

    def fail(self, mark: yaml.Mark, message: str) -> NoReturn:
        raise SchemaError([Diagnostic(Location(self.file, mark.line + 1, mark.column + 1),
                                      message)])

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                self.fail(event.start_mark, f"alias *{event.anchor} is inside "
                                            f"the node it names, so it would expand forever")
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(event.start_mark, f"nesting deeper than {MAX_DEPTH} levels; the "
                                        f"schema needs far fewer")
        if event.anchor is not None:
            self.open_anchors.add(event.anchor)
        node = super().compose_node(parent, index)
        self.open_anchors.discard(event.anchor)
        self.depth -= 1
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            children = []
        sizes = [self.expanded[id(child)] for child in children]
        nodes = 1 + sum(count for count, _ in sizes)
        levels = 1 + max((depth for _, depth in sizes), default=0)
        if nodes > MAX_NODES:
            self.fail(event.start_mark, f"this value holds more than {MAX_NODES:,} nodes, "
                                        f"counting what its aliases expand to; the schema "
                                        f"needs far fewer")
        if levels > MAX_DEPTH:
            self.fail(event.start_mark, f"this value nests deeper than {MAX_DEPTH} levels, "
                                        f"counting what its aliases expand to; the schema "
                                        f"needs far fewer")
        self.expanded[id(node)] = (nodes, levels)
        return node


def _compose(text: str, file: str) -> yaml.Node | None:
    """The YAML node graph of text; SchemaError, located, for anything YAML rejects."""
    try:
        loader = _BoundedLoader(text, file)  # the reader checks every character here
        try:
            return loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file, 1, 1)
        raise SchemaError([Diagnostic(where, f"YAML syntax error: {error.problem}")]) from None
    except yaml.reader.ReaderError as error:
        # Control characters such as NUL: valid UTF-8 that YAML does not accept as text.
        raise SchemaError([Diagnostic(_text_location(file, text, error.position),
                                      f"character 0x{error.character:02x} is not allowed in "
                                      f"YAML text ({error.reason})")]) from None


SURROGATES = re.compile("[\ud800-\udfff]")


def unencodable(value: str) -> str | None:
    """Why a string of the schema cannot be written into a UTF-8 file, or None: a lone
    surrogate, which YAML's escapes ("\\ud800") can spell but UTF-8 cannot encode."""
    for index, char in enumerate(value):
        if "\ud800" <= char <= "\udfff":
            return (f"this string holds U+{ord(char):04X} at character {index + 1}, a lone "
                    "surrogate, which UTF-8 cannot encode, so no generated file could hold it; "
                    "remove it (a character beyond U+FFFF is written as itself or as one "
                    "\\U00XXXXXX escape, not as two \\u escapes)")
    return None


def load_schema(text: str, file: str = "api.yaml",
                deferred: list[Diagnostic] | None = None) -> LocatedMap:
    """Parse schema text; raise SchemaError for syntax errors and duplicate keys.

    A string UTF-8 cannot encode (unencodable) is a problem of its value, not of the
    document's shape: with a deferred list, its diagnostic goes there and the string is kept
    with U+FFFD in place of each surrogate, so that the schema's other problems are found
    in the same run; without one, it is raised with the others."""
    root = _compose(text, file)
    if root is None:
        raise SchemaError([Diagnostic(Location(file, 1, 1), "the schema is empty")])
    constructor = yaml.SafeLoader("")
    diagnostics: list[Diagnostic] = []

    def construct(node: yaml.Node) -> Any:
        """A plain value; a tag the safe loader refuses (``!!python/...``) is a diagnostic."""
        try:
            value = constructor.construct_object(node)
            if isinstance(value, str):
                problem = unencodable(value)
                if problem:
                    (diagnostics if deferred is None else deferred).append(
                        Diagnostic(_location(file, node), problem))
                    value = SURROGATES.sub("\ufffd", value)
            return value
        except yaml.MarkedYAMLError as error:
            diagnostics.append(Diagnostic(_location(file, node), f"YAML error: {error.problem}"))
            return None
        except (ValueError, OverflowError) as error:
            # A scalar YAML resolves but Python cannot build: an integer of more digits than
            # Python converts (int_max_str_digits), a date that does not exist.
            diagnostics.append(Diagnostic(_location(file, node),
                                          f"YAML value cannot be read: {shown(str(error))}"))
            return None

    def convert(node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            result = LocatedMap()
            result.location = _location(file, node)
            result.key_locations = {}
            result.value_locations = {}
            for key_node, value_node in node.value:
                key = construct(key_node)
                if not isinstance(key, str):
                    diagnostics.append(Diagnostic(_location(file, key_node),
                                                  f"keys must be strings, got {shown(key)}"))
                    continue
                if key in result:
                    first = result.key_locations[key]
                    diagnostics.append(Diagnostic(
                        _location(file, key_node),
                        f"duplicate key {shown(key)} (first given at line {first.line})"))
                    continue
                result[key] = convert(value_node)
                result.key_locations[key] = _location(file, key_node)
                result.value_locations[key] = _location(file, value_node)
            return result
        if isinstance(node, yaml.SequenceNode):
            items = LocatedList(convert(item) for item in node.value)
            items.location = _location(file, node)
            items.item_locations = [_location(file, item) for item in node.value]
            return items
        return construct(node)

    document = convert(root)
    if diagnostics:
        raise SchemaError(diagnostics)
    if not isinstance(document, LocatedMap):
        raise SchemaError([Diagnostic(_location(file, root), "the schema must be a mapping")])
    return document
