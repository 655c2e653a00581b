"""Render the model into the MyST sources of the docs site (templates/site/); docs/build.py
adds the handwritten pages of docs/ and builds the HTML with Sphinx.

Note [Docs site pages]
The pages, relative to the site's root (served under /docs/):
- api/<module>.md: a page per module, laid out like the spec's module pages: its functions and
  classes (those it re-exports too, under the name users import them by), each with its
  signature, its doc and a "Full reference" link, then its submodules and variables.
- generated/<qualified name>.md: a page per function and class, the URL the spec's "Full
  reference" links expect, re-exports included: tensorplay.accelerator.Graph has a page of its
  own beside tensorplay.accelerator.graphs.Graph, which it links, and both names are indexed,
  so a cross-reference may use either. The module pages' descriptions are unindexed copies.
- api/types.md: the argument spellings (Device, GraphPool, ...) that signatures use, declared
  as py:type so that every name in a signature links somewhere (Sphinx 9 and later resolve a
  signature's names to py:type declarations; earlier versions do not).
Signatures spell every schema class by its qualified name. Sphinx looks the type names of a
signature up loosely (any indexed object whose name ends in .bool answers bool), so the module
variables (the dtypes tensorplay.bool, tensorplay.float32, ...) are listed on their module page
but not declared as Python objects: declared, every bool in a signature would link the dtype.

Note [Links in docs]
The schema's docs are plain text. Two forms in them become cross-references: a qualified name
the schema declares (tensorplay.cuda.CUDAGraph), and a call such as reset() or
CUDAGraph.capture_begin(), looked up as a member of the class being described, a public name
of the current module, a member of a schema class (Class.member()) or a function of a
tensorplay module (autograd.grad()). Anything else stays text: the names of other projects
(tensorplay.amp.autocast, which tensorplay lacks) and the calls users write themselves
(forward()). Sphinx runs with nitpicky and warnings as errors, so a link made here that does
not resolve fails the build.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Union

from .model import Class, Function, Module
from .render import MARKER_TEXT, Output, Renderer
from .types import ARGUMENT_SPELLINGS, BUILTINS

MARKER = f"{MARKER_TEXT} — DO NOT EDIT; run: python docs/build.py"
# Builtin names of the schema that are not Python builtins: documented on the types page.
SITE_TYPES = ("Path", "Unset")
# Characters that are markup in MyST inline text; a doc's are escaped.
INLINE_MARKUP = re.compile(r"([\\`*_<\[\]{}|])")
# What a doc may link (Note [Links in docs]): a qualified name, called or not, or a call
# written as name() or owner.name().
NAME = re.compile(r"(?P<qualified>\btensorplay(?:\.[A-Za-z_]\w*)+)(?:\(\))?"
                  r"|(?<![\w.])(?P<call>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\(\)")


def escape(text: str) -> str:
    return INLINE_MARKUP.sub(r"\\\1", text)


@dataclass(frozen=True)
class Entry:
    """A function or class as a module page lists it: declared there or re-exported."""

    kind: str  # "function" or "class"
    item: Union[Function, Class]
    module: str  # the module it is listed under (users import it from there)
    home: str  # the module that declares it

    @property
    def name(self) -> str:
        return f"{self.module}.{self.item.name}"

    @property
    def reexported(self) -> bool:
        return self.module != self.home


class SiteRenderer:
    def __init__(self, renderer: Renderer):
        self.api = renderer.api
        self.env = renderer.env
        self.class_home = renderer.class_home
        self.package = renderer.package
        self.entries = {m.name: self.module_entries(m) for m in self.api.modules}
        # Every name the site indexes, which a doc may link.
        self.targets: set[str] = {m.name for m in self.api.modules}
        for entries in self.entries.values():
            for entry in entries:
                self.targets.add(entry.name)
                if isinstance(entry.item, Class):
                    self.targets |= {f"{entry.name}.{m}" for m in self.members(entry.item)}

    def home(self, module: str, name: str) -> str:
        """The module that declares name, following re-exports from module."""
        for reexport in self.api.module(module).reexports:
            if reexport.name == name:
                return self.home(reexport.source, name)
        return module

    def module_entries(self, module: Module) -> list[Entry]:
        """Functions, then classes, each in schema order with the re-exports after them."""
        reexported = [(self.api.find(module.name, r.name), self.home(module.name, r.name))
                      for r in module.reexports]
        entries = [Entry("function", f, module.name, module.name) for f in module.functions]
        entries += [Entry("function", item, module.name, home) for item, home in reexported
                    if isinstance(item, Function)]
        entries += [Entry("class", c, module.name, module.name) for c in module.classes]
        entries += [Entry("class", item, module.name, home) for item, home in reexported
                    if isinstance(item, Class)]
        return entries

    @staticmethod
    def members(cls: Class) -> list[str]:
        return [m.name for m in cls.methods] + [p.name for p in cls.properties]

    # -- text ----------------------------------------------------------------------------------

    def resolve_call(self, name: str, module: str, owner: Optional[str]) -> Optional[str]:
        """The target of a call name() in a doc (Note [Links in docs]), or None."""
        candidates = [f"{owner}.{name}"] if owner else []
        candidates.append(f"{module}.{name}")
        head, _, tail = name.partition(".")
        if tail and head in self.class_home:
            candidates.append(f"{self.class_home[head]}.{name}")
        if tail:
            candidates.append(f"{self.package}.{name}")
        return next((c for c in candidates if c in self.targets), None)

    def text(self, doc: str, module: str, owner: Optional[str] = None) -> str:
        """A schema doc as MyST: names linked, the rest escaped, as the docs are plain text
        (__dlpack__ is not bold, <MulBackward> not an HTML tag, a leading > not a quote)."""
        out, last = [], 0
        for match in NAME.finditer(doc):
            out.append(escape(doc[last:match.start()]))
            qualified = match.group("qualified")
            if qualified:
                target = qualified if qualified in self.targets else None
            else:
                target = self.resolve_call(match.group("call"), module, owner)
            out.append(f"{{py:obj}}`{match.group(0)} <{target}>`" if target
                       else escape(match.group(0)))
            last = match.end()
        out.append(escape(doc[last:]))
        return re.sub(r"^(\s*)([>#])", r"\1\\\2", "".join(out), flags=re.M)

    def line(self, doc: str, module: str, owner: Optional[str] = None) -> str:
        """A doc on one line, for a field list entry (:param x: ...)."""
        return " ".join(self.text(doc, module, owner).split())

    def type_name(self, name: str) -> str:
        """An exception or type name in a field list, qualified when the schema declares it."""
        return f"{self.class_home[name]}.{name}" if name in self.class_home else name

    # -- pages ---------------------------------------------------------------------------------

    def context(self, **extra) -> dict:
        return dict(marker=MARKER, class_home=self.class_home, text=self.text, line=self.line,
                    type_name=self.type_name, **extra)

    def render(self) -> list[Output]:
        outputs = [Output("api/index.md", self.env.get_template("site/index.md.j2").render(
            self.context(modules=self.api.modules)))]
        spellings = [(name, ARGUMENT_SPELLINGS[name][3].partition("= ")[2])
                     for name in ARGUMENT_SPELLINGS]
        spellings += [(name, BUILTINS[name][0]) for name in SITE_TYPES]
        outputs.append(Output("api/types.md", self.env.get_template("site/types.md.j2").render(
            self.context(spellings=spellings))))
        for module in self.api.modules:
            outputs.append(Output(f"api/{module.name}.md", self.env.get_template(
                "site/module.md.j2").render(self.context(
                    module=module, entries=self.entries[module.name],
                    submodules=[self.api.module(s) for s in module.submodules],
                    submodule_entries=self.entries))))
            for entry in self.entries[module.name]:
                outputs.append(Output(f"generated/{entry.name}.md", self.env.get_template(
                    "site/object.md.j2").render(self.context(entry=entry))))
        return sorted(outputs, key=lambda output: output.path)
