"""Shared fixtures. GPU tests carry the `gpu` marker and skip, with the reason, without a GPU."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gpu_visible():
    try:
        import tensorplay.accelerator
    except ImportError as error:  # an unbuilt tree: let the import error surface in the tests
        return False, f"tensorplay is not importable: {error}"
    if tensorplay.accelerator.is_available():
        return True, ""
    return False, "no CUDA device is visible (tensorplay.accelerator.is_available() is False)"


def pytest_collection_modifyitems(config, items):
    visible, reason = _gpu_visible()
    for item in items:
        if "gpu" in item.keywords and not visible:
            item.add_marker(pytest.mark.skip(reason=reason))
        if "no_gpu" in item.keywords and visible:
            item.add_marker(pytest.mark.skip(reason="checks the behaviour without a GPU"))


def pytest_configure(config):
    config.addinivalue_line("markers", "no_gpu: checks behaviour on a machine without a GPU")


@pytest.fixture(scope="session")
def root():
    return ROOT


@pytest.fixture
def quiet_device():
    """A synchronised device with an empty cache, and no capture or graph pool left behind."""
    import gc

    from tensorplay import accelerator
    from tensorplay.accelerator import memory
    from tensorplay.cuda import graphs
    gc.collect()  # graphs and outputs kept alive by earlier tracebacks release their pools
    accelerator.synchronize()
    memory.empty_cache()
    yield
    assert not graphs.is_current_stream_capturing()
    accelerator.synchronize()
    memory.empty_cache()
    assert memory.memory_stats().get("capturing", 0) == 0
