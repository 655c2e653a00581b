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

Note [Class and module pages]
A class's page shows its constructor as users call it (CUDAGraph(), Graph(keep_graph=False)),
its example, a summary table of its members, grouped as the schema's `groups:` group them
(Capture, Replay, ...; methods then properties without groups), each with its first doc line,
and then the members in that order, under the groups' titles. A module page opens each of its
sections (Functions, Classes, Submodules, Variables) with a table of names and summaries. A
re-export's page (tensorplay.cuda.CUDAGraph) is the class's description, unindexed, members
left out: its members are documented, and indexed, once, on the home page, to which its
summary table links, so that search lists each member once; a doc's link to a member through
the re-exported name goes to the home page's entry too.

Note [Examples and sources]
Every function and class page shows the schema's example (model.Example), which
tests/tools/test_docs_examples.py runs as a doctest (CUDA ones as gpu tests). Each page and member
links its schema entry (api.yaml line) and the runtime symbol that implements it, shown in
the site's source view: source/<file>.html, the file's text with an anchor per line (#L12),
written for api.yaml and each file linked, so that the site stays offline and whole.

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

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from .model import Class, Example, Function, Group, Module
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
    def __init__(self, renderer: Renderer, schema: Path, runtime: Path):
        self.api = renderer.api
        self.env = renderer.env
        self.class_home = renderer.class_home
        self.package = renderer.package
        self.schema = schema
        # The repository's root: runtime/ and python/ stand in it, and source links name files
        # relative to it (runtime/graphs/graph.pyx).
        self.root = runtime.resolve().parent
        self.entries = {m.name: self.module_entries(m) for m in self.api.modules}
        # Every name the site indexes, which a doc may link, and the name its link goes to: a
        # re-export's members are indexed on the home page only (Note [Class and module pages]).
        self.targets: dict[str, str] = {m.name: m.name for m in self.api.modules}
        for entries in self.entries.values():
            for entry in entries:
                self.targets[entry.name] = entry.name
                if isinstance(entry.item, Class):
                    home = f"{entry.home}.{entry.item.name}"
                    self.targets.update({f"{entry.name}.{m}": f"{home}.{m}"
                                         for m in self.members(entry.item)})
        # The source files the pages link (repository-relative path -> its lines).
        self.sources: dict[str, list[str]] = {}

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
        return next((self.targets[c] for c in candidates if c in self.targets), None)

    def text(self, doc: str, module: str, owner: Optional[str] = None) -> str:
        """A schema doc as MyST: names linked, the rest escaped, as the docs are plain text
        (__dlpack__ is not bold, <MulBackward> not an HTML tag, a leading > not a quote)."""
        out, last = [], 0
        for match in NAME.finditer(doc):
            out.append(escape(doc[last:match.start()]))
            qualified = match.group("qualified")
            if qualified:
                target = self.targets.get(qualified)
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

    # -- classes, examples and sources (Notes [Class and module pages], [Examples and sources])

    @staticmethod
    def groups(cls: Class) -> tuple[Group, ...]:
        """The member groups of a class's page, in page order."""
        if cls.groups:
            return cls.groups
        default = (Group("Methods", tuple(m.name for m in cls.methods)),
                   Group("Properties", tuple(p.name for p in cls.properties)))
        return tuple(group for group in default if group.members)

    @staticmethod
    def summary(doc: str) -> str:
        """A doc's first paragraph, a summary table's description."""
        return " ".join(doc.strip().split("\n\n")[0].split())

    @staticmethod
    def member(cls: Class, name: str):
        return next(m for m in cls.methods + cls.properties if m.name == name)

    @staticmethod
    def example(example: Optional[Example]) -> str:
        """An example as a MyST block: a pycon fence, noted where it needs a CUDA device or NCCL."""
        if example is None:
            return ""
        note = {"cuda": "Needs a CUDA device (the test suite runs it on a GPU machine).\n\n",
                "nccl": "Needs a CUDA device and NVIDIA's nccl4py (`pip install "
                        "'tensorplay[nccl]'`; the test suite runs it where both are).\n\n",
                }.get(example.needs, "")
        return f"{note}```pycon\n{example.code}\n```"

    def source_lines(self, path: str) -> list[str]:
        if path not in self.sources:
            self.sources[path] = (self.root / path).read_text(encoding="utf-8").splitlines()
        return self.sources[path]

    def runtime_file(self, module: str, python: bool = False) -> str:
        if python:
            return f"python/{module}.py"
        folders = self.api.runtime_packages[module].split(".")[2:]  # after tensorplay._runtime
        return "/".join(["runtime", *folders, f"{module}.pyx"])

    def find_line(self, path: str, pattern: str, after: int = 0) -> int:
        """The 1-based line of path where pattern first matches, at or after line after (the
        whole file when it does not match there); 0 when it matches nowhere."""
        lines = self.source_lines(path)
        found = re.compile(pattern)
        for start in (after, 0):
            for number, text in enumerate(lines[start:], start + 1):
                if found.search(text):
                    return number
        return 0

    def source_link(self, path: str, line: int, label: str) -> str:
        """An inline HTML link into the source view (every page is one folder deep)."""
        self.source_lines(path)
        anchor = f"#L{line}" if line else ""
        return (f'<a class="reference external tp-source" href="../source/{path}.html{anchor}">'
                f"{html.escape(label)}</a>")

    def schema_link(self, line: int) -> str:
        return self.source_link(self.schema.name, line, f"{self.schema.name}:{line}")

    def impl_link(self, item: Union[Function, Class], owner: Optional[Class] = None) -> str:
        """The link to the runtime symbol that implements item (owner: the class of a method
        whose impl is a method of its core class)."""
        if isinstance(item, Function) and item.method_of:  # the method's own source
            cls = next(c for m in self.api.modules if item in m.functions for c in m.classes
                       if c.name == item.method_of)
            return self.impl_link(next(m for m in cls.methods if m.name == item.impl_name), cls)
        if isinstance(item, Class):
            path = self.runtime_file(item.impl_module)
            line = self.find_line(path, rf"^\s*(cdef\s+)?class\s+{item.impl_name}\b")
            return self.source_link(path, line, f"{path}:{line} {item.impl_name}")
        if item.impl_module:  # a module function (of the Python layer, or the instance first)
            path = self.runtime_file(item.impl_module, item.python)
            line = self.find_line(path, rf"^\s*(cp?def|def)\b[^=]*\b{item.impl_name}\(")
            return self.source_link(path, line, f"{path}:{line} {item.impl_name}()")
        assert owner is not None, item.name
        path = self.runtime_file(owner.impl_module)
        start = self.find_line(path, rf"^\s*(cdef\s+)?class\s+{owner.impl_name}\b")
        line = self.find_line(path, rf"^\s*(cp?def|def)\b[^=]*\b{item.impl_name}\(", start)
        return self.source_link(path, line,
                                f"{path}:{line} {owner.impl_name}.{item.impl_name}()")

    def source_page(self, path: str) -> str:
        """The source view of one file: its lines, each anchored #L<number>."""
        rows = "\n".join(f'<span class="line" id="L{number}"><a href="#L{number}">{number:>5}</a>'
                         f" {html.escape(text)}</span>"
                         for number, text in enumerate(self.sources[path], 1))
        return ("<!DOCTYPE html>\n"
                f"<!-- {MARKER} -->\n"
                '<html lang="en"><head><meta charset="utf-8">'
                '<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{html.escape(path)} · tensorplay source</title><style>"
                "body{margin:0;font:14px/1.45 ui-monospace,SFMono-Regular,Menlo,monospace}"
                "h1{font-size:16px;margin:0;padding:12px 16px;background:#f3f4f6;"
                "overflow-wrap:anywhere}"
                "pre{margin:0;padding:8px 0;overflow-x:auto}"
                ".line{display:block;padding:0 16px;white-space:pre}"
                ".line a{color:#888;text-decoration:none;user-select:none}"
                ".line:target{background:#fff3b0}</style></head><body>"
                f"<h1>{html.escape(path)}</h1><pre>{rows}</pre></body></html>\n")

    # -- pages ---------------------------------------------------------------------------------

    def context(self, **extra) -> dict:
        return dict(marker=MARKER, class_home=self.class_home, text=self.text, line=self.line,
                    type_name=self.type_name, groups=self.groups, member=self.member,
                    summary=self.summary,
                    example=self.example, schema_link=self.schema_link, impl_link=self.impl_link,
                    **extra)

    def render(self) -> list[Output]:
        outputs = [Output("api/index.md", self.env.get_template("site/index.md.j2").render(
            self.context(modules=self.api.modules)))]
        spellings = [(name, ARGUMENT_SPELLINGS[name][3].partition("= ")[2])
                     for name in ARGUMENT_SPELLINGS]
        spellings += [(name, BUILTINS[name][0]) for name in SITE_TYPES]
        # Generic forms that are not Python builtins (Note [Closed type vocabulary]).
        spellings.append(("ContextManager", "typing.ContextManager[T]: use it in a with "
                                            "statement, whose as gives the T"))
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
        # The source view of every file a page links (Note [Examples and sources]);
        # docs/conf.py publishes _extra/ at the site's root.
        outputs += [Output(f"_extra/source/{path}.html", self.source_page(path))
                    for path in sorted(self.sources)]
        return sorted(outputs, key=lambda output: output.path)
