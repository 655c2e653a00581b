"""`python -m tensorplay`: its options, and on a machine without a GPU, why none is visible and
what works without one (python/report.py). The probes are also run against a stand-in NVML
for the cases this machine cannot show (no devices, a driver not loaded, devices hidden)."""
import os
import subprocess
import sys

import pytest

from tensorplay._python import report


def run(*arguments, **environment):
    env = dict(os.environ, **environment)
    return subprocess.run([sys.executable, "-m", "tensorplay", *arguments], env=env,
                          capture_output=True, text=True, timeout=120)


def test_help_lists_the_options():
    done = run("--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m tensorplay [-h] [--version] [--no-demo]")
    assert "--no-demo" in done.stdout and "why not and what works" in done.stdout


def test_version_and_unknown_options():
    done = run("--version")
    assert done.returncode == 0 and done.stdout.startswith("tensorplay ")
    done = run("--frobnicate")
    assert done.returncode == 2 and "unrecognized arguments: --frobnicate" in done.stderr


@pytest.mark.no_gpu
def test_without_a_gpu_the_report_says_why_and_what_works():
    done = run()
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "accelerator: none available" in text and "devices: 0" in text
    assert "why no GPU is visible:\n  NVML: " in text
    assert "  CUDA_VISIBLE_DEVICES: " in text and "  check: " in text
    assert "works on the CPU, without a GPU:" in text and "autograd" in text
    assert "tensorplay.nn" in text and "tensorplay.optim" in text
    assert "a GPU adds:" in text and "CUDA graphs" in text


@pytest.mark.no_gpu
def test_an_empty_visible_devices_variable_is_named():
    done = run("--no-demo", CUDA_VISIBLE_DEVICES="")
    assert "CUDA_VISIBLE_DEVICES: set but empty, which hides every device" in done.stdout
    assert "capture/replay demonstration" not in done.stdout


class FakeError(Exception):
    def __init__(self, value):
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNVML:
    """What the probes use of pynvml, answering as a machine with `uuids` devices would."""
    NVML_ERROR_DRIVER_NOT_LOADED = 9
    NVML_ERROR_LIBRARY_NOT_FOUND = 12

    def __init__(self, uuids=(), error=None):
        self.uuids, self.error, self.open = list(uuids), error, 0

    def nvmlInit(self):
        if self.error is not None:
            raise FakeError(self.error)
        self.open += 1

    def nvmlShutdown(self):
        self.open -= 1

    def nvmlDeviceGetCount(self):
        return len(self.uuids)

    def nvmlSystemGetDriverVersion(self):
        return b"580.1"

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetUUID(self, handle):
        return self.uuids[handle]


def findings(nvml, environ, driver_loads=False):
    result = report.probe_accelerator(nvml, environ,
                                      lambda: (driver_loads, "libcuda.so.1 stand-in"))
    return dict(result["findings"]), result["check"]


def test_probe_names_a_missing_nvml_library_and_a_driver_that_is_not_loaded():
    found, check = findings(FakeNVML(error=12), {})
    assert "libnvidia-ml.so.1 was not found" in found["NVML"]
    assert "NVML_ERROR_LIBRARY_NOT_FOUND" in found["NVML"] and "install the NVIDIA" in check
    assert found["CUDA driver"] == "libcuda.so.1 stand-in"
    found, check = findings(FakeNVML(error=9), {}, driver_loads=True)
    assert "kernel driver is not loaded" in found["NVML"] and "lsmod" in check
    assert "loads, but the CUDA runtime counts no device" in found["CUDA driver"]


def test_probe_names_a_machine_without_devices():
    nvml = FakeNVML()
    found, check = findings(nvml, {})
    assert found["NVML"] == "driver 580.1, 0 device(s) in this machine"
    assert "nvidia-smi" in check and "CUDA driver" not in found and nvml.open == 0


@pytest.mark.parametrize("value, words", [
    ("", "set but empty, which hides every device"),
    ("2", "'2' hides all 2 device(s)"),
    ("0,0", "'0,0' hides all 2"),
    ("-1", "'-1' hides all 2"),
    ("GPU-ffff", "'GPU-ffff' hides all 2"),
])
def test_probe_names_visible_devices_that_hide_every_device(value, words):
    found, check = findings(FakeNVML(["GPU-aaaa", "GPU-bbbb"]), {"CUDA_VISIBLE_DEVICES": value})
    assert words in found["CUDA_VISIBLE_DEVICES"]
    assert "CUDA_VISIBLE_DEVICES" in check


def test_probe_accepts_visible_devices_that_show_a_device():
    found, check = findings(FakeNVML(["GPU-aaaa", "GPU-bbbb"]), {"CUDA_VISIBLE_DEVICES": "1"})
    assert found["CUDA_VISIBLE_DEVICES"] == "'1'"
    assert found["NVML"] == "driver 580.1, 2 device(s) in this machine"


def test_probe_names_a_missing_binding(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    result = report.probe_accelerator(None, {}, lambda: (False, "none"))
    assert "nvidia-ml-py is not installed" in dict(result["findings"])["NVML"]
