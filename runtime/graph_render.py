"""Pictures of graph dumps: DOT text rendered to SVG or PNG by Graphviz's `dot` program.

debug_dump(path) and export_dot(path) write DOT text (cudaGraphDebugDotPrint); a path ending
in .svg or .png gets a picture instead. The DOT text goes to a temporary file first, and `dot`
runs as a subprocess without a shell, so no path is ever interpreted by one.
"""
import contextlib
import os
import shutil
import subprocess
import tempfile

PICTURE_FORMATS = {".svg": "svg", ".png": "png"}


def picture_format(path):
    """"svg" or "png" when path names a picture, else None: the dump stays DOT text."""
    return PICTURE_FORMATS.get(os.path.splitext(path)[1].lower())


def dot_program():
    """Where Graphviz's dot program is, or a RuntimeError that says what to install."""
    program = shutil.which("dot")
    if program is None:
        raise RuntimeError("rendering a graph dump to .svg or .png needs Graphviz's 'dot' "
                           "program on PATH, and none was found; install Graphviz (e.g. "
                           "'apt-get install graphviz', 'brew install graphviz' or "
                           "'conda install graphviz'), or pass a path ending in .dot for the "
                           "DOT text")
    return program


@contextlib.contextmanager
def rendered_to(path, picture):
    """Yield a temporary DOT path to write; on leaving, render it to path as picture."""
    program = dot_program()  # before anything is written, so a missing dot costs nothing
    with tempfile.TemporaryDirectory(prefix="tensorplay-graph-") as folder:
        dot_path = os.path.join(folder, "graph.dot")
        yield dot_path
        result = subprocess.run([program, f"-T{picture}", dot_path, "-o", path],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"Graphviz's dot could not render the graph dump to {path!r} "
                               f"(exit status {result.returncode}): "
                               f"{result.stderr.strip()[:200]}")
