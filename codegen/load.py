"""Load api.yaml keeping the line and column of every key and value.

PyYAML's plain loaders forget where things came from and silently keep the last of duplicate
keys. We compose the node graph ourselves and convert it into dicts and lists that remember
locations, so every later diagnostic can say ``api.yaml:LINE:COL: message``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


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


def load_schema(text: str, file: str = "api.yaml") -> LocatedMap:
    """Parse schema text; raise SchemaError for syntax errors and duplicate keys."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = Location(file, mark.line + 1, mark.column + 1) if mark else Location(file, 1, 1)
        raise SchemaError([Diagnostic(where, f"YAML syntax error: {error.problem}")]) from None
    if root is None:
        raise SchemaError([Diagnostic(Location(file, 1, 1), "the schema is empty")])
    constructor = yaml.SafeLoader("")
    diagnostics: list[Diagnostic] = []

    def convert(node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            result = LocatedMap()
            result.location = _location(file, node)
            result.key_locations = {}
            result.value_locations = {}
            for key_node, value_node in node.value:
                key = constructor.construct_object(key_node)
                if not isinstance(key, str):
                    diagnostics.append(Diagnostic(_location(file, key_node),
                                                  f"keys must be strings, got {key!r}"))
                    continue
                if key in result:
                    first = result.key_locations[key]
                    diagnostics.append(Diagnostic(
                        _location(file, key_node),
                        f"duplicate key '{key}' (first given at line {first.line})"))
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
        return constructor.construct_object(node)

    document = convert(root)
    if diagnostics:
        raise SchemaError(diagnostics)
    if not isinstance(document, LocatedMap):
        raise SchemaError([Diagnostic(_location(file, root), "the schema must be a mapping")])
    return document
