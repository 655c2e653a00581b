"""``python -m tensorplay``: what was built, and what this machine offers.

Counting devices goes through NVML first, so the report itself initialises CUDA only where a
device is visible; there it also captures a few kernels into a graph and compares the host
time of one replay with launching them eagerly.
"""
import sys
import time

from tensorplay import _build_info, _schema, accelerator, cuda


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
    from tensorplay import zeros
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


def main():
    for line in build_lines() + device_lines() + allocator_lines() + capture_lines():
        print(line)
