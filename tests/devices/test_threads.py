"""Kernels, allocations and streams from any thread (one GPU is enough).

The driver API, which launches kernels, acts on the CUDA context current on the calling thread,
and a new thread has none; these tests prove that every thread gets the right one
(docs/design.md, "Devices, threads and contexts").
"""
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import tensorplay
from tensorplay import accelerator, cuda

pytestmark = pytest.mark.gpu


def run_fresh(code, **environment):
    """Run code in a new interpreter, so that no thread has touched CUDA before it starts."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**os.environ, **environment})
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_main_thread_launches_after_a_worker_thread_launched_first():
    output = run_fresh(
        "import threading, tensorplay as tp\n"
        "seen = []\n"
        "worker = threading.Thread(target=lambda: seen.append(tp.ones(10, device='cuda')"
        ".sum().item()))\n"
        "worker.start(); worker.join()\n"
        "print(seen[0], tp.ones(10, device='cuda').sum().item(),"
        " (tp.ones(4, device='cuda') * 3).tolist())\n")
    assert output.split() == ["10.0", "10.0", "[3.0,", "3.0,", "3.0,", "3.0]"]


def test_a_thread_that_never_set_a_device_works_on_device_zero():
    results = {}

    def work():
        results["device"] = accelerator.current_device_index()
        results["sum"] = (tensorplay.arange(100, device="cuda") * 2).sum().item()
        results["stream"] = accelerator.current_stream().cuda_stream

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert results == {"device": 0, "sum": 9900, "stream": 0}


def test_eight_threads_launch_allocate_and_synchronise_at_once():
    def work(index):
        stream = cuda.Stream()
        with cuda.stream(stream):
            total = 0.0
            for step in range(50):
                values = tensorplay.full((1000,), float(index), device="cuda")
                values = values + step
                total += values.sum().item()
            stream.synchronize()
            accelerator.synchronize()
        return index, total

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = dict(pool.map(work, range(8)))
    # sum over steps of 1000 * (index + step) = 1000 * (50 * index + 1225)
    assert results == {index: 1000.0 * (50 * index + 1225) for index in range(8)}
    assert accelerator.memory.memory_allocated(0) >= 0
    assert tensorplay.ones(3, device="cuda").tolist() == [1.0, 1.0, 1.0]


def test_a_thread_choosing_a_device_does_not_move_another_thread():
    count = accelerator.device_count()
    outcome = {}

    def choose_last_device():
        if count == 1:  # with one visible device, index 1 is out of range and says so
            with pytest.raises(ValueError, match="device index 1 is out of range"):
                accelerator.set_device_index(1)
            outcome["chooser"] = accelerator.current_device_index()
        else:
            accelerator.set_device_index(1)
            outcome["chooser"] = tensorplay.ones(5, device="cuda").sum().item()

    def use_device_zero():
        accelerator.set_device_index(0)
        outcome["user"] = (accelerator.current_device_index(),
                           tensorplay.ones(7, device="cuda").sum().item())

    first = threading.Thread(target=choose_last_device)
    first.start()
    first.join()
    second = threading.Thread(target=use_device_zero)
    second.start()
    second.join()
    assert outcome["user"] == (0, 7.0)
    assert outcome["chooser"] == (0 if count == 1 else 5.0)
    assert accelerator.current_device_index() == 0


def test_one_visible_device_is_index_zero_in_every_thread():
    output = run_fresh(
        "import threading, tensorplay as tp\n"
        "from tensorplay import accelerator\n"
        "seen = []\n"
        "def work():\n"
        "    seen.append((accelerator.device_count(), accelerator.current_device_index(),\n"
        "                 tp.ones(3, device='cuda:0').sum().item()))\n"
        "threads = [threading.Thread(target=work) for _ in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(sorted(set(seen)))\n",
        CUDA_VISIBLE_DEVICES="0")
    assert output.strip() == "[(1, 0, 3.0)]"


def test_launches_from_a_thread_with_another_context_current_leave_it_current():
    # A thread whose current context is not the device's primary one (a context the user made
    # with cuCtxCreate) takes launch's slow path (Note [Driver entry points] in device.pyx): the
    # launch runs in the primary context, and the user's context is current again afterwards.
    from cuda.bindings import driver

    result = {}

    def work():
        (error,) = driver.cuInit(0)
        assert error == driver.CUresult.CUDA_SUCCESS
        error, device = driver.cuDeviceGet(0)
        error, own = driver.cuCtxCreate(None, 0, device)
        assert error == driver.CUresult.CUDA_SUCCESS, error
        try:
            x = tensorplay.zeros(1000, device="cuda")
            for _ in range(10):
                x += 1
            result["sum"] = x.sum().item()
            error, current = driver.cuCtxGetCurrent()
            result["kept"] = int(current) == int(own)
        finally:
            driver.cuCtxDestroy(own)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert result == {"sum": 10000.0, "kept": True}


@pytest.mark.parametrize("current", ["no context", "another context"])
def test_launches_on_a_stream_of_their_context_run_whatever_context_is_current(current):
    # Note [Launches without a context check] in nvrtc.pyx: on a stream of the primary context
    # the fast path launches without asking which context is current, and the driver runs the
    # kernel with none current or with one the user made, eagerly and under capture. The
    # thread's context is left alone, which shows that no switch (enter_device) took place.
    from cuda.bindings import driver

    x = tensorplay.zeros(1000, device="cuda")
    x += 1  # loaded in the primary context; the launch entry points are asked
    stream = cuda.Stream()
    accelerator.synchronize()
    result = {}

    def work():
        nonlocal x
        (error,) = driver.cuInit(0)
        assert error == driver.CUresult.CUDA_SUCCESS
        own = driver.CUcontext(0)
        if current == "another context":
            error, device = driver.cuDeviceGet(0)
            error, own = driver.cuCtxCreate(None, 0, device)
            assert error == driver.CUresult.CUDA_SUCCESS, error
        try:
            with cuda.stream(stream):
                driver.cuCtxSetCurrent(own)
                for _ in range(3):
                    x += 1
                result["eager"] = int(driver.cuCtxGetCurrent()[1]) == int(own)
                graph = cuda.CUDAGraph()
                graph.capture_begin()
                driver.cuCtxSetCurrent(own)  # the capture's runtime calls may have set one
                for _ in range(2):
                    x += 1
                result["captured"] = int(driver.cuCtxGetCurrent()[1]) == int(own)
                graph.capture_end()
                graph.replay()
                stream.synchronize()
                result["values"] = sorted(set(x.tolist()))
        finally:
            if current == "another context":
                driver.cuCtxDestroy(own)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert result == {"eager": True, "captured": True, "values": [6.0]}


def test_per_thread_default_stream_mode_orders_launches_replays_and_copies_alike():
    # With cuda-bindings' per-thread default stream (CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM
    # =1), the driver's entry points are asked for the same mode, so stream 0 is one stream for
    # launches, replays, copies and synchronisation alike (Note [Driver entry points]).
    output = run_fresh(
        "import tensorplay as tp\n"
        "x = tp.zeros(1 << 16, device='cuda')\n"
        "for _ in range(100):\n"
        "    x += 1\n"
        "g = tp.cuda.CUDAGraph()\n"
        "with tp.cuda.graph(g):\n"
        "    x += 1\n"
        "for _ in range(100):\n"
        "    g.replay()\n"
        "print(x.cpu().numpy().min(), x.sum().item())\n",
        CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM="1")
    assert output.split() == ["200.0", str(200.0 * (1 << 16))]
