# cython: language_level=3
"""The caching allocator's settings: TENSORPLAY_CUDA_ALLOC_CONF, in the style of PyTorch's
PYTORCH_CUDA_ALLOC_CONF ("key:value" pairs separated by commas; docs/design.md, "Expandable
segments").

Parsed strictly: an unknown key, a value other than True or False, a key given twice or an
empty entry raise ValueError naming it, at the allocator's first use of a device (PyTorch
checks its setting when its allocator starts, and raises for an unknown key too). The text is
read once; later changes of the environment variable have no effect, as in PyTorch.
"""
import os

ENVIRONMENT_VARIABLE = "TENSORPLAY_CUDA_ALLOC_CONF"
# Every key, with its default: the shared pools keep PyTorch's default (plain cudaMalloc
# segments); graph private pools grow by mapping, so that their graphs can sleep().
DEFAULTS = {"expandable_segments": False, "graph_expandable_segments": True}
_BOOLEANS = {"True": True, "False": False}

cdef AllocSettings _settings
cdef bint _loaded = False


def parse(str text):
    """The settings text holds, as a dict of every key (defaults filled in)."""
    found = dict(DEFAULTS)
    if not text.strip():
        return found
    given = set()
    for index, entry in enumerate(text.split(",")):
        key, colon, value = entry.partition(":")
        key, value = key.strip(), value.strip()
        if not key:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: entry {index} ({entry!r}) is empty; "
                             f"expected key:value pairs separated by commas, e.g. "
                             f"'expandable_segments:True'")
        if key not in DEFAULTS:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: unknown key {key!r}; the keys are "
                             f"{', '.join(sorted(DEFAULTS))}")
        if key in given:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: key {key!r} is given twice")
        if not colon or value not in _BOOLEANS:
            raise ValueError(f"{ENVIRONMENT_VARIABLE}: {key} must be True or False, got "
                             f"{value!r}" if colon else
                             f"{ENVIRONMENT_VARIABLE}: {key} has no value; write {key}:True "
                             f"or {key}:False")
        given.add(key)
        found[key] = _BOOLEANS[value]
    return found


cdef AllocSettings* settings() except NULL:
    global _loaded
    if not _loaded:
        found = parse(os.environ.get(ENVIRONMENT_VARIABLE, ""))
        _settings.expandable_segments = found["expandable_segments"]
        _settings.graph_expandable_segments = found["graph_expandable_segments"]
        _loaded = True
    return &_settings
