"""Sentinels: the values that stand for "not given" where a caller of the runtime must say so.

They are defined here, in the runtime, once: the runtime's checks read them from this module,
and the generator reads them from this file's source (codegen/runtime_index.py,
read_sentinels), so that the wrappers' defaults, the stubs and the checks cannot disagree. The
file holds plain assignments of literals only, which the generator can read without importing
it.
"""

# The default of Graph.capture_begin's pool and capture_error_mode: "the setting given to the
# constructor". The graph pool check (graphs/graph.pyx, pool_arg) lets it pass, and a choice
# argument that is UNSET arrives as errors.UNSET_CHOICE (base/errors.pxd).
UNSET = "__unset__"
