"""The libraries the tests compare against (PyTorch, CuPy): the module where it imports, else
a skip that says why.

pytest.importorskip skips on ImportError alone. A library that is installed but does not load
fails otherwise: a PyTorch whose shared libraries are missing (an install or uninstall cut
short) raises OSError from ctypes, and that error, raised at collection, stopped the whole run.
Whatever stops a peer from loading means there is nothing to compare against, so the tests that
need it skip and say what happened; the others run."""
import importlib

import pytest

_WHY_NOT: dict[str, str] = {}  # name -> why it did not load; a failed import is not retried


def load(name: str):
    """(module, "") where name imports, else (None, why it did not)."""
    if name not in _WHY_NOT:
        try:
            return importlib.import_module(name), ""
        except ImportError as error:
            _WHY_NOT[name] = f"{name} is not installed ({error})"
        except Exception as error:  # noqa: BLE001 - any failure to load leaves nothing to compare
            _WHY_NOT[name] = (f"{name} is installed but does not load here: "
                              f"{type(error).__name__}: {error}")
    return None, _WHY_NOT[name]


def import_or_skip(name: str):
    """The module name, or a skip of the test (or, at a module's top, of the module) saying
    why it did not load."""
    module, why_not = load(name)
    if module is None:
        raise pytest.skip.Exception(why_not, allow_module_level=True)
    return module
