"""Two GPUs: devices, streams, statistics, RNG state and copies per device and per thread.

Skipped, with the reason, where fewer than two CUDA devices are visible.
"""
import inspect
import os
import subprocess
import sys
import threading

import pytest

import tensorplay
from tensorplay import accelerator, cuda

memory = accelerator.memory
MiB = 1 << 20

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(accelerator.device_count() < 2,
                       reason="needs two CUDA devices; fewer are visible"),
]


@pytest.fixture(autouse=True)
def back_on_device_zero():
    yield
    accelerator.set_device_index(0)


def test_two_devices_are_counted():
    assert accelerator.device_count() == 2


def test_current_device_and_stream_are_per_device_and_per_thread():
    default_one = accelerator.current_stream(1)
    stream_one = cuda.Stream(device=1)
    assert stream_one.device == tensorplay.device("cuda", 1)
    accelerator.set_device_index(1)
    assert accelerator.current_device_index() == 1
    accelerator.set_stream(stream_one)
    assert accelerator.current_stream(1) == stream_one
    assert accelerator.current_stream(0).cuda_stream == 0
    seen = []

    def other_thread():
        seen.append((accelerator.current_device_index(), accelerator.current_stream(1).cuda_stream))

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert seen == [(0, 0)]
    accelerator.set_stream(default_one)
    assert accelerator.current_stream(1).cuda_stream == 0
    with accelerator.device_index(0):
        assert accelerator.current_device_index() == 0
    assert accelerator.current_device_index() == 1


def test_pools_and_statistics_are_kept_per_device():
    memory.empty_cache()
    before = (memory.memory_allocated(0), memory.memory_allocated(1))
    on_one = tensorplay.ones(1 << 21, device="cuda:1")  # 8 MiB of float32
    assert accelerator.current_device_index() == 0
    assert memory.memory_allocated(1) - before[1] == 8 * MiB
    assert memory.memory_allocated(0) == before[0]
    assert memory.memory_stats(1)["allocation.all.current"] >= 1
    assert on_one.sum().item() == float(1 << 21)
    del on_one
    memory.empty_cache()
    assert memory.memory_allocated(1) == before[1]


def test_rng_state_of_every_device():
    random = accelerator.random
    random.manual_seed_all(11)
    states = random.get_rng_state_all()
    assert len(states) == 2 and states[0].tolist() == states[1].tolist()
    assert random.initial_seed(1) == 11
    accelerator.set_device_index(1)
    random.manual_seed(5)  # the current device only
    assert random.initial_seed(1) == 5 and random.initial_seed(0) == 11
    random.set_rng_state_all(states)
    assert [s.tolist() for s in random.get_rng_state_all()] == [s.tolist() for s in states]


def test_streams_events_and_tensors_on_the_second_device_from_device_zero():
    assert accelerator.current_device_index() == 0
    stream = cuda.Stream(device=1)
    event = cuda.Event(enable_timing=True)
    with cuda.stream(stream):
        assert accelerator.current_device_index() == 1
        values = tensorplay.arange(1000, device="cuda:1", dtype=tensorplay.float32) * 2
        event.record()
    assert accelerator.current_device_index() == 0
    event.synchronize()
    assert values.device == tensorplay.device("cuda", 1)
    assert values.sum().item() == 999000.0
    again = values + 1  # from device 0's thread, on the current stream of device 1
    assert again[999].item() == 1999.0
    assert accelerator.current_device_index() == 0


def test_mixing_devices_in_one_operation_names_both():
    a = tensorplay.ones(4, device="cuda:0")
    b = tensorplay.ones(4, device="cuda:1")
    with pytest.raises(ValueError, match="cuda:0 and cuda:1"):
        a + b


@pytest.mark.parametrize("source, target", [(0, 1), (1, 0)])
def test_copies_between_devices_both_ways(source, target):
    values = tensorplay.arange(1 << 20, device=f"cuda:{source}", dtype=tensorplay.float32)
    moved = values.to(f"cuda:{target}")
    assert moved.device == tensorplay.device("cuda", target)
    assert tensorplay.allclose(moved.cpu(), values.cpu()) and moved[12345].item() == 12345.0
    strided = values[::2].to(f"cuda:{target}")  # a non-contiguous source takes the staged path
    assert strided.shape == (1 << 19,) and strided[3].item() == 6.0
    into = tensorplay.zeros(1 << 20, device=f"cuda:{target}")
    into.copy_(values)
    assert into.sum().item() == values.sum().item()


def test_two_threads_work_on_two_devices_at_once():
    results = {}
    barrier = threading.Barrier(2)

    def work(device):
        accelerator.set_device_index(device)
        barrier.wait()
        total = 0.0
        for step in range(40):
            total += (tensorplay.full((4096,), float(step), device="cuda") + device).sum().item()
        results[device] = (accelerator.current_device_index(), total)

    threads = [threading.Thread(target=work, args=(device,)) for device in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = {device: (device, 4096.0 * (780 + 40 * device)) for device in (0, 1)}
    assert results == expected


def bus_id(device):
    from cuda.bindings import runtime
    error, text = runtime.cudaDeviceGetPCIBusId(32, device)
    assert error == runtime.cudaError_t.cudaSuccess
    return text.split(b"\0")[0].decode()


def test_visible_devices_one_leaves_the_second_gpu_as_index_zero():
    accelerator.synchronize(1)  # initialised, so that bus_id's runtime calls are safe
    code = (
        "import tensorplay as tp\nfrom tensorplay import accelerator\n"
        + inspect.getsource(bus_id) +
        "print(accelerator.device_count(), accelerator.current_device_index(),"
        " tp.ones(3, device='cuda:0').sum().item())\n"
        "print(bus_id(0))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": "1"})
    assert result.returncode == 0, result.stderr
    counts, seen_bus = result.stdout.splitlines()
    assert counts.split() == ["1", "0", "3.0"]
    assert seen_bus == bus_id(1) != bus_id(0)


def test_a_graph_captured_on_the_second_device_keeps_its_pool_there():
    pools_on_zero = memory.memory_stats(0).get("num_graph_pools", 0)
    x = tensorplay.ones(1024, device="cuda:1")
    x += 0  # kernels loaded before the capture
    with accelerator.device_index(1):
        g = tensorplay.cuda.CUDAGraph()
        with tensorplay.cuda.graphs.graph(g):
            y = x * 3  # allocated in the graph's pool on cuda:1
    assert accelerator.current_device_index() == 0
    assert y.device == tensorplay.device("cuda", 1)
    assert memory.memory_stats(1)["num_graph_pools"] >= 1
    assert memory.memory_stats(0).get("num_graph_pools", 0) == pools_on_zero
    x.fill_(2)
    g.replay()  # from device 0: replays on the current stream of the graph's device
    accelerator.synchronize(1)
    assert set(y.cpu().tolist()) == {6.0}
    del y
    g.reset()
    memory.empty_cache()
    assert memory.memory_stats(1)["num_graph_pools"] == 0


def test_two_threads_capture_and_replay_on_two_devices_at_once():
    results = {}
    barrier = threading.Barrier(2, timeout=60)

    def work(device):
        accelerator.set_device_index(device)
        x = tensorplay.full((4096,), float(device), device="cuda")
        x += 0
        g = tensorplay.cuda.CUDAGraph()
        barrier.wait()
        with tensorplay.cuda.graphs.graph(g, capture_error_mode="thread_local"):
            x += 1
        barrier.wait()
        for _ in range(10):
            g.replay()
        accelerator.synchronize(device)
        results[device] = set(x.cpu().tolist())

    threads = [threading.Thread(target=work, args=(device,)) for device in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    # The capture itself does not run the body; ten replays add ten.
    assert results == {0: {10.0}, 1: {11.0}}
