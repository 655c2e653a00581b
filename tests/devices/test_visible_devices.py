"""CUDA_VISIBLE_DEVICES as the driver reads it, applied to NVML's device list."""
import os
import subprocess
import sys

import pytest

from tensorplay._runtime.devices.device import parse_visible_devices, visible_device_count

UUIDS = ["GPU-1111aaaa", "GPU-2222bbbb", "GPU-2222cccc", "GPU-3333dddd"]


@pytest.mark.parametrize("value, expected", [
    (None, list(range(64))),             # unset: every device
    ("", []),                            # empty: none
    ("0", [0]),
    ("1,0", [1, 0]),
    (" 2 , 3", [2, 3]),
    ("1gpu2,2ampere", [1, 2]),           # strtoul reads the leading digits
    ("0,0", []),                         # a repeated ordinal empties the list
    ("1,2,1", []),
    ("0,-1,2", [0]),                     # a negative entry ends the list
    ("-1", []),
    ("abc", []),                         # no digits: ends the list
    ("GPU-1111,GPU-2222", ["GPU-1111", "GPU-2222"]),
    ("GPU-1111,3", ["GPU-1111"]),        # cut at the first entry without the prefix
    ("GPU-1111,GPU-1111", []),
    ("MIG-abcd", ["MIG-abcd"]),
    ("\u0661,0", []),                     # Arabic-Indic digit one: not a digit to strtoul
    ("0,\u00b2", [0]),                    # superscript two ends the list
    ("+1,2", [1, 2]),                     # strtoul takes a plus sign
    ("\u20031", []),                      # em space: not C whitespace, so no digits
    ("9" * 5000, []),                     # more digits than any ordinal: out of range
    ("0," + "9" * 5000, [0]),
])
def test_parse_visible_devices(value, expected):
    assert parse_visible_devices(value) == expected


@pytest.mark.parametrize("visible, raw_count, expected", [
    (list(range(64)), 2, 2),
    ([], 4, 0),
    ([0, 1], 4, 2),
    ([3, 1], 2, 0),            # the first ordinal beyond the device count ends the list
    ([1, 5, 0], 2, 1),
    (["GPU-1111", "GPU-3333"], 4, 2),
    (["GPU-2222"], 4, 0),      # ambiguous prefix: the driver stops there
    (["GPU-1111", "GPU-9"], 4, 1),
    (["GPU-1111a", "GPU-1111"], 4, 0),  # two prefixes of one device: repeated
    (["MIG-abcd"], 4, -1),     # only the CUDA runtime can resolve MIG UUIDs
])
def test_visible_device_count(visible, raw_count, expected):
    assert visible_device_count(visible, raw_count, UUIDS) == expected


def test_uuid_lists_need_nvml_uuids():
    assert visible_device_count(["GPU-1111"], 4, None) == -1


@pytest.mark.parametrize("value", ["", "-1", "0,0", "99"])
def test_device_count_honours_the_variable_in_a_fresh_process(value):
    code = "import tensorplay.accelerator as a; print(a.device_count(), a.is_available())"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"CUDA_VISIBLE_DEVICES": value, "PATH": "/usr/bin:/bin"},
                            check=True).stdout.split()
    assert output == ["0", "False"]


DRIVER_COUNT = """
import tensorplay.accelerator as accelerator
ours = accelerator.device_count()  # NVML and the variable, without initialising CUDA
from cuda.bindings import driver
status, = driver.cuInit(0)
status, count = driver.cuDeviceGetCount() if status == 0 else (status, 0)
print(ours, count)
"""


@pytest.mark.gpu
def test_the_driver_agrees_on_every_spelling():
    """The count tensorplay reads without initialising CUDA equals the driver's, for spellings
    of CUDA_VISIBLE_DEVICES the driver reads in its own way (checked on the GPU machine)."""
    pynvml = pytest.importorskip("pynvml")
    pynvml.nvmlInit()
    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    pynvml.nvmlShutdown()
    values = ["", "0", " 0", "+0", "0gpu", "0,0", "0,-1", "-1", "1", "99", "\u0660", "0,\u00b2",
              "\u20030", "9" * 40, uuid, uuid[:12], uuid + ",0", "GPU-zzzz", "abc"]
    seen = {}
    for value in values:
        output = subprocess.run([sys.executable, "-c", DRIVER_COUNT], capture_output=True,
                                text=True, check=True,
                                env={**os.environ, "CUDA_VISIBLE_DEVICES": value})
        seen[value] = tuple(int(part) for part in output.stdout.split())
    assert {value: ours for value, (ours, _) in seen.items()} == \
        {value: driver for value, (_, driver) in seen.items()}
