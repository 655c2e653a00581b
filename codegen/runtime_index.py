"""What runtime/ declares at C level, read from its .pxd (and .pyx for Python classes).

The schema's ``impl:`` entries name runtime symbols; validation checks them against this index
so a typo fails in ``codegen validate`` with a location instead of in the C compiler.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FUNCTION = re.compile(r"^(?:cdef|cpdef)\s+(?!class\b|extern\b|struct\b|enum\b)[^(=]*?\b(\w+)\s*\(")
_CDEF_CLASS = re.compile(r"^cdef\s+class\s+(\w+)\s*(?:\(\s*([\w.]+)\s*\))?\s*:")
_METHOD = re.compile(r"^\s+(?:cdef|cpdef)\s+[^(=]*?\b(\w+)\s*\(")
_PY_CLASS = re.compile(r"^class\s+(\w+)\s*[(:]")


@dataclass
class RuntimeModule:
    functions: set[str] = field(default_factory=set)
    classes: dict[str, set[str]] = field(default_factory=dict)
    class_bases: dict[str, str] = field(default_factory=dict)
    python_classes: set[str] = field(default_factory=set)

    def methods_of(self, class_name: str) -> set[str]:
        """Methods of a class including those of its bases in the same module."""
        methods: set[str] = set()
        while class_name in self.classes:
            methods |= self.classes[class_name]
            class_name = self.class_bases.get(class_name, "")
        return methods


def index_runtime(runtime_dir: Path) -> dict[str, RuntimeModule]:
    """Map runtime module name (file stem) to what it declares."""
    modules: dict[str, RuntimeModule] = {}
    for pxd in sorted(runtime_dir.glob("*.pxd")):
        module = modules.setdefault(pxd.stem, RuntimeModule())
        current_class = None
        for line in pxd.read_text().splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            class_match = _CDEF_CLASS.match(line)
            if class_match:
                current_class = class_match.group(1)
                module.classes.setdefault(current_class, set())
                if class_match.group(2):
                    module.class_bases[current_class] = class_match.group(2).split(".")[-1]
                continue
            if not line[0].isspace():
                current_class = None
                function_match = _FUNCTION.match(line)
                if function_match:
                    module.functions.add(function_match.group(1))
                continue
            method_match = _METHOD.match(line)
            if current_class and method_match:
                module.classes[current_class].add(method_match.group(1))
    for pyx in sorted(runtime_dir.glob("*.pyx")):
        module = modules.setdefault(pyx.stem, RuntimeModule())
        for line in pyx.read_text().splitlines():
            class_match = _PY_CLASS.match(line)
            if class_match:
                module.python_classes.add(class_match.group(1))
    return modules
