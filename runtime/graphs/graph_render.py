"""Graph dumps on disk: DOT text as the driver prints it, or rendered to SVG or PNG by Graphviz.

debug_dump(path) and export_dot(path) write DOT text (cudaGraphDebugDotPrint); a path ending
in .svg or .png gets a picture instead. The driver prints into an in-memory file (dot_text), so
that nothing reaches the target but through write_dump, which reports every failure (a NUL in
the path, a folder that cannot be written, a full disk, a short write) as an OSError that names
the path: the driver's own printing would leave a truncated file without a word. `dot` runs as
a subprocess without a shell, so no path is ever interpreted by one.
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


@contextlib.contextmanager
def scratch_path():
    """A path the driver can print to and that is read back afterwards: an anonymous
    in-memory file where Linux offers one (no disk to fill), else a temporary file."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("tensorplay-graph-dump")
        try:
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
    else:
        with tempfile.TemporaryDirectory(prefix="tensorplay-graph-") as folder:
            yield os.path.join(folder, "graph.dot")


def read_back(path):
    with open(path, "rb") as scratch:
        return scratch.read()


def write_dump(data, path):
    """Write data to path, whole, or raise an OSError naming path."""
    try:
        with open(path, "wb") as target:
            written = target.write(data)
        if written != len(data):
            raise OSError(0, f"short write ({written} of {len(data)} bytes)")
    except OSError as error:
        raise OSError(error.errno, f"cannot write the graph dump: {error.strerror}",
                      path) from error


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


def render_dump(data, path, picture):
    """Render DOT text to path as picture ("svg" or "png") with Graphviz."""
    program = dot_program()
    result = subprocess.run([program, f"-T{picture}"], input=data, capture_output=True,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"Graphviz's dot could not render the graph dump to {path!r} "
                           f"(exit status {result.returncode}): "
                           f"{result.stderr.decode(errors='replace').strip()[:200]}")
    write_dump(result.stdout, path)
