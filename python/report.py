"""``python -m tensorplay``: what was built, and what this machine offers.

Counting devices goes through NVML first, so the report itself initialises CUDA only where a
device is visible; there it also captures a few kernels into a graph and compares the host
time of one replay with launching them eagerly. Where no device is visible it says which probe
found none (the NVML library, the driver, NVML's count, CUDA_VISIBLE_DEVICES), what to check,
and what works without a GPU.
"""
import argparse
import os
import sys
import time

from tensorplay import _build_info, _schema, accelerator, cuda, zeros
from tensorplay._runtime.devices.device import parse_visible_devices, visible_device_count

DESCRIPTION = ("Report how tensorplay was built (CUDA headers, cuda-bindings, Cython), the "
               "accelerator and each device; where no GPU is visible, why not and what works "
               "without one. On a machine with a GPU it also exercises the caching allocator and "
               "captures 16 kernels into a CUDA graph, timing one replay against eager launches.")
WORKS_ON_CPU = [
    "tensors on the CPU (numpy underneath): ten dtypes, views, broadcasting arithmetic, "
    "reductions, matmul, numpy and DLPack interop",
    "autograd: backward(), autograd.grad(), autograd.Function, no_grad()",
    "tensorplay.nn (Module, containers, Linear, Embedding, activations, LayerNorm, Dropout, "
    "losses) and tensorplay.optim (SGD, Adam, AdamW, RMSprop, Adagrad, learning-rate "
    "schedulers, weight averaging)",
    "tensorplay.utils.data: datasets (map-style and iterable), samplers and the DataLoader",
    "random numbers (the same Philox streams as on a GPU) and NVRTC kernel compilation",
]
GPU_ADDS = [
    "CUDA tensors and kernels, streams and events",
    "the caching allocator, memory statistics and pinned host memory",
    "CUDA graphs: capture and replay, conditional nodes, graph update, graphed callables",
]
def _mib(value):
    return f"{value / 2**20:,.0f} MiB"


def build_lines():
    from cuda.bindings import __version__ as bindings_version
    return [
        f"tensorplay {_package_version()} (schema sha256:{_schema.SCHEMA_HASH})",
        f"python {sys.version.split()[0]}",
        f"built with Cython {_build_info.CYTHON_VERSION}, cuda-bindings "
        f"{_build_info.CUDA_BINDINGS_VERSION} and CUDA "
        f"{_build_info.CUDA_HEADERS_VERSION or '(version unknown)'} headers",
        "  CUDA headers: " + "; ".join(_build_info.CUDA_HEADERS_FROM),
        f"running with cuda-bindings {bindings_version}",
    ]


def _package_version():
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("tensorplay")
    except PackageNotFoundError:
        return "(not installed)"


def device_lines():
    count = accelerator.device_count()
    accelerator_device = accelerator.current_accelerator(check_available=True)
    lines = [f"accelerator: {accelerator_device if accelerator_device else 'none available'}",
             f"devices: {count}"]
    if not count:
        lines += no_accelerator_lines()
    for index in range(count):
        capability = accelerator.get_device_capability(index)
        free, total = accelerator.memory.get_memory_info(index)
        major, minor = capability["compute_capability"]
        dtypes = ", ".join(sorted(str(d).removeprefix("tensorplay.")
                                  for d in capability["supported_dtypes"]))
        lines += [
            f"  cuda:{index}: {capability['name']}",
            f"    compute capability {major}.{minor}, "
            f"{capability['multi_processor_count']} multiprocessors",
            f"    memory: {_mib(total)} total, {_mib(free)} free",
            f"    driver {capability['driver_version']}, runtime {capability['runtime_version']}, "
            f"conditional graph nodes: {'yes' if capability['conditional_nodes'] else 'no'}",
            f"    dtypes: {dtypes}",
        ]
    return lines


def no_accelerator_lines(probes=None):
    """Why no device is visible, what to check, and what works without a GPU."""
    probes = probe_accelerator() if probes is None else probes
    lines = ["why no GPU is visible:"]
    lines += [f"  {name}: {finding}" for name, finding in probes["findings"]]
    lines.append(f"  check: {probes['check']}")
    lines.append("works on the CPU, without a GPU:")
    lines += [f"  - {item}" for item in WORKS_ON_CPU]
    lines.append("a GPU adds:")
    lines += [f"  - {item}" for item in GPU_ADDS]
    return lines


NVML_FAILURES = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (
        "the library libnvidia-ml.so.1 was not found: no NVIDIA driver is installed (it "
        "ships NVML)", "install the NVIDIA driver (580 or later for CUDA 13); in a container, "
        "start it with the GPU passed in (docker run --gpus all, or the NVIDIA container "
        "toolkit)"),
    "NVML_ERROR_DRIVER_NOT_LOADED": (
        "the NVIDIA kernel driver is not loaded", "nvidia-smi; lsmod | grep nvidia; reboot "
        "after installing or updating the driver"),
    "NVML_ERROR_NO_PERMISSION": (
        "no permission to open the GPU devices", "the permissions of /dev/nvidia* (your user "
        "may need the video or render group)"),
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": (
        "the NVML library and the loaded kernel driver are of different versions",
        "reboot after the driver update (or reload the nvidia kernel modules)"),
}


def probe_accelerator(nvml=None, environ=None, load_driver_library=None):
    """{"findings": [(probe, finding)], "check": what to check first}: each probe tensorplay's
    device count depends on, in its order, without initialising CUDA (docs/design.md, "Device
    discovery"). nvml, environ and load_driver_library stand in for pynvml, os.environ and
    loading libcuda.so.1 in tests."""
    environ = os.environ if environ is None else environ
    findings, check = [], None
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            nvml = None
    raw_count = None
    if nvml is None:
        findings.append(("NVML", "the binding nvidia-ml-py is not installed (a dependency of "
                                 "tensorplay: pip install nvidia-ml-py)"))
        check = "pip install nvidia-ml-py"
    else:
        try:
            nvml.nvmlInit()
            try:
                raw_count = nvml.nvmlDeviceGetCount()
                driver = _text(nvml.nvmlSystemGetDriverVersion())
                try:
                    uuids = [_text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)))
                             for i in range(raw_count)]
                except Exception:  # the runtime would have to tell (as device.pyx does)
                    uuids = None
            finally:
                nvml.nvmlShutdown()
        except Exception as error:  # pynvml.NVMLError, or a broken binding
            code = getattr(error, "value", None)
            name = next((n for n in NVML_FAILURES if getattr(nvml, n, object()) == code), None)
            finding, check = NVML_FAILURES.get(name, (
                f"nvmlInit failed: {error}", "nvidia-smi, which uses NVML too, says more"))
            findings.append(("NVML", f"{finding} ({name or type(error).__name__})"))
            raw_count = None
        else:
            findings.append(("NVML", f"driver {driver}, {raw_count} device(s) in this machine"))
            if raw_count == 0:
                check = ("nvidia-smi lists the GPUs; in a container or VM, the GPU is passed "
                         "through to it")
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        findings.append(("CUDA_VISIBLE_DEVICES", "unset (every device visible)"))
    elif not value.strip():
        findings.append(("CUDA_VISIBLE_DEVICES", "set but empty, which hides every device"))
        check = check or "unset CUDA_VISIBLE_DEVICES, or set it to the devices to use (0,1)"
    else:
        visible = parse_visible_devices(value)
        if raw_count:
            shown = visible_device_count(visible, raw_count, uuids)
            if shown == 0:
                findings.append(("CUDA_VISIBLE_DEVICES", f"{value!r} hides all {raw_count} "
                                 "device(s): read as the driver reads it, it names none of them "
                                 "(ordinals from 0 to "
                                 f"{raw_count - 1}, or GPU- UUID prefixes; a repeated entry "
                                 "empties the list, the first invalid entry ends it)"))
                check = check or (f"CUDA_VISIBLE_DEVICES: name devices 0 to {raw_count - 1} "
                                  "(nvidia-smi -L lists them), or unset it")
            else:
                findings.append(("CUDA_VISIBLE_DEVICES", f"{value!r}"))
        else:
            findings.append(("CUDA_VISIBLE_DEVICES", f"{value!r}"))
    if raw_count is None:  # NVML could not count: the CUDA runtime answered instead
        loaded, detail = (load_driver_library or _load_driver_library)()
        findings.append(("CUDA driver", (f"{detail} loads, but the CUDA runtime counts no "
                                         "device") if loaded else f"{detail}"))
    return {"findings": findings, "check": check or "nvidia-smi"}


def _load_driver_library():
    """(whether libcuda.so.1 loads, what to say). Loading it does not initialise CUDA."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "libcuda.so.1 (the CUDA driver library) was not found either"
    return True, "libcuda.so.1"


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def allocator_lines():
    """Exercise the caching allocator on device 0: one miss, then a cache hit."""
    if not accelerator.is_available():
        return []
    first = cuda.caching_allocator_alloc(1 << 20)
    cuda.caching_allocator_delete(first)
    start = time.perf_counter()
    second = cuda.caching_allocator_alloc(1 << 20)
    elapsed = time.perf_counter() - start
    cuda.caching_allocator_delete(second)
    stats = accelerator.memory.memory_stats()
    return [
        "caching allocator on cuda:0:",
        f"  1 MiB allocation reused the cached block: {first == second}, "
        f"cache hit in {elapsed * 1e6:.1f} us",
        f"  reserved {_mib(stats['reserved_bytes.all.current'])}, "
        f"segments {stats['segment.all.current']}",
    ]


DEMO_KERNELS = 16


def _host_us(work, repeat=200):
    """Best host time of one call to work, in microseconds, over five synchronised batches."""
    best = float("inf")
    for _ in range(5):
        accelerator.synchronize()
        start = time.perf_counter()
        for _ in range(repeat):
            work()
        best = min(best, (time.perf_counter() - start) / repeat)
    accelerator.synchronize()
    return best * 1e6


def capture_lines():
    """Capture DEMO_KERNELS elementwise kernels once; compare one replay with eager launches."""
    if not accelerator.is_available():
        return ["capture/replay demonstration: skipped, no GPU visible"]
    x = zeros(1024, device="cuda")
    step = x.__iadd__

    def eager():
        for _ in range(DEMO_KERNELS):
            step(1)

    eager()  # compiles and loads the kernel before the capture
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        eager()
    eager_us, replay_us = _host_us(eager), _host_us(graph.replay)
    before = x[0].item()
    graph.replay()
    replayed_right = x[0].item() == before + DEMO_KERNELS
    graph.reset()
    return [
        f"capture/replay demonstration on cuda:0, {DEMO_KERNELS} elementwise kernels:",
        f"  host time: eager launches {eager_us:.1f} us, one replay() {replay_us:.1f} us "
        f"({eager_us / replay_us:.1f}x less); replay gives the eager result: {replayed_right}",
    ]


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tensorplay", description=DESCRIPTION)
    parser.add_argument("--version", action="version",
                        version=f"tensorplay {_package_version()}")
    parser.add_argument("--no-demo", action="store_true",
                        help="on a GPU, skip exercising the caching allocator and the "
                             "capture/replay demonstration (both initialise CUDA)")
    return parser.parse_args(argv)


def main(argv=None):
    arguments = parse_arguments(argv)
    lines = build_lines() + device_lines()
    if not arguments.no_demo:
        lines += allocator_lines() + capture_lines()
    for line in lines:
        print(line)
