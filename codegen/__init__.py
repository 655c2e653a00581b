"""Schema-driven generator: api.yaml -> Cython wrappers, .pyi stubs and reference pages.

The flow is one way: load (YAML with locations) -> model (validated, frozen) -> render -> files.
Run it as ``python -m codegen {validate,generate,check,docs,list}``.
"""
