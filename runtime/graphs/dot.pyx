# cython: language_level=3, auto_pickle=False
"""DOT export of a captured graph: debug_dump() and export_dot() (graph.pyx) write a template
through here. The driver prints the DOT text (cudaGraphDebugDotPrint); graph_render.py writes
it whole, or runs Graphviz to draw an .svg or .png, and names the path in any failure.
"""
import os

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport cudaGraphDebugDotFlagsVerbose, cudaGraph_t

from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices.device cimport DeviceSwitch

from tensorplay._runtime.graphs import graph_render


cdef int write_dot(cudaGraph_t template, int device, str path, bint verbose) except -1:
    """The driver's DOT text of template, written to path (or rendered, for .svg and .png)
    through graph_render, which names path in any failure."""
    picture = graph_render.picture_format(path)
    if picture is not None:
        graph_render.dot_program()  # before any work: a missing Graphviz costs nothing
    cdef bytes encoded
    cdef unsigned int flags = cudaGraphDebugDotFlagsVerbose if verbose else 0
    cdef DeviceSwitch saved
    # The GIL stays held: export_dot()'s template is replaced (and destroyed) under it.
    with graph_render.scratch_path() as scratch:
        encoded = os.fsencode(scratch)
        _device.enter_device(device, &saved)
        try:
            errors.check(cyruntime.cudaGraphDebugDotPrint(template, encoded, flags),
                         b"cudaGraphDebugDotPrint")
        finally:
            _device.exit_device(&saved)
        text = graph_render.read_back(scratch)
    if picture is not None:
        graph_render.render_dump(text, path, picture)
    else:
        graph_render.write_dump(text, path)
    return 0
