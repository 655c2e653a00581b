"""Names Cython reads as its own words, which a schema name must not be (model.py refuses them).

Source: Cython 3.3.0 (github.com/cython/cython, tag 3.3.0, commit bcd04a29668), the version
the build uses; tests/codegen/test_codegen_hostile.py checks RESERVED against the installed Cython's
scanner and compiles wrappers that use the contextual words left allowed below.

- RESERVED: ``pyx_reserved_words`` of Cython/Compiler/Scanning.py less ``py_reserved_words``
  (Python's keywords, which keyword.kwlist covers). The scanner makes these keywords in every
  .pyx, so ``def f(cdef)`` or ``def include(self)`` is a syntax error wherever the name stands.
- EXPRESSIONS: ``sizeof`` (p_factor) and ``NULL`` (p_atom_ident_constants) of
  Cython/Compiler/Parsing.py, which Cython reads as an operator and a constant: a parameter,
  class or setter named so does not compile.
- DECLARATIONS: the words that start a C type in Cython/Compiler/Parsing.py:
  ``basic_c_type_names``, ``sign_and_longness_words``, ``special_basic_c_types`` and
  ``calling_convention_words``, and the qualifiers ``const`` and ``volatile``
  (p_c_simple_base_type). Where the wrapper writes a parameter (``def f(int)`` declares an
  unnamed C int) or a class header (``cdef class const``), Cython reads a declaration instead;
  as a method, property or function name (``Tensor.float()``, as PyTorch spells it) they compile,
  so only parameters and classes are refused them.

Cython's other contextual words (nogil, gil, extern, inline, readonly, public, api, noexcept,
fused, struct, union, enum, packed, cppclass, namespace, new, operator, template, by, property,
typeof, address, check_size, restrict, complex, print, exec) mean something only after cdef,
ctypedef or a C declaration, which the generated code never writes before a schema name: every
form the templates give a name (a def, its parameters, a method, a property and its setter, a
class) compiles with them, so they stay allowed.
"""
from __future__ import annotations

RESERVED = frozenset({"include", "ctypedef", "cdef", "cpdef", "cimport", "DEF", "IF", "ELIF",
                      "ELSE"})
EXPRESSIONS = frozenset({"sizeof", "NULL"})
DECLARATIONS = frozenset({
    # basic_c_type_names
    "void", "char", "int", "float", "double", "bint",
    # sign_and_longness_words
    "short", "long", "signed", "unsigned",
    # special_basic_c_types
    "Py_UNICODE", "Py_UCS4", "Py_hash_t", "Py_ssize_t", "ssize_t", "size_t", "ptrdiff_t",
    "Py_tss_t",
    # calling_convention_words
    "__stdcall", "__cdecl", "__fastcall",
    # the qualifiers of p_c_simple_base_type
    "const", "volatile",
})
# Contextual words that compile in every form the templates give a name (see above).
CONTEXTUAL = frozenset({"nogil", "gil", "extern", "inline", "readonly", "public", "api",
                        "noexcept", "fused", "struct", "union", "enum", "packed", "cppclass",
                        "namespace", "new", "operator", "template", "by", "property", "typeof",
                        "address", "check_size", "restrict", "complex", "print", "exec"})
