"""Eager launches through executable graphs (runtime/kernels/nvrtc.pyx, Note [Eager launches
through graphs]): from a configuration's second launch on, an eager kernel launch updates the
arguments of a one-node executable graph and launches it. These tests check that results,
stream order and every capture stay as cuLaunchKernel would leave them: another library's
capture of the stream takes the kernels in (cuGraphLaunch there would invalidate it), a
global-mode capture on another stream survives, threads and streams keep their order.
"""
import threading

import numpy
import pytest

import tensorplay
from tensorplay import cuda
from tensorplay._runtime.kernels import nvrtc
from tests.devices.test_threads import run_fresh  # asserts exit status 0, answers stdout

pytestmark = pytest.mark.gpu


def test_a_configuration_gets_its_graph_at_its_second_launch():
    output = run_fresh(
        "import tensorplay\n"
        "from tensorplay._runtime.kernels import nvrtc\n"
        "x = tensorplay.ones(1000, device='cuda')\n"
        "made = [nvrtc.eager_graphs_made()]\n"
        "for _ in range(3):\n"
        "    x += 1\n"
        "    made.append(nvrtc.eager_graphs_made())\n"
        "print(*made, x.sum().item())\n")
    first, *after, total = output.split()
    assert [int(count) - int(first) for count in after] == [0, 1, 1]
    assert total == "4000.0"


def test_repeated_launches_compute_what_kernels_do():
    x = tensorplay.zeros(1000, device="cuda")
    for _ in range(50):
        x += 1
    # Each launch has its own arguments: outputs at other addresses, operands that change.
    a = tensorplay.arange(1000, device="cuda", dtype=tensorplay.float32)
    sums = [a + float(k) for k in range(20)]
    assert x.cpu().numpy().tolist() == [50.0] * 1000
    expected = numpy.arange(1000, dtype=numpy.float32)
    for k, total in enumerate(sums):
        assert numpy.array_equal(total.cpu().numpy(), expected + k)


def test_other_sizes_and_functions_each_keep_their_own_graph():
    results = []
    for _ in range(3):
        for size in (1, 300, 70_000):
            a = tensorplay.ones(size, device="cuda")
            results.append(((a * 3 - 1) / 2).sum().item() / size)
    assert results == [1.0] * 9


def test_order_with_another_stream_is_kept():
    side = cuda.Stream()
    x = tensorplay.zeros(4096, device="cuda")
    for _ in range(3):  # the configurations get their graphs
        x += 1
        x *= 2
    done = cuda.Event()
    with cuda.stream(side):
        side.wait_stream(cuda.current_stream())
        for _ in range(10):
            x += 1
        done.record()
    cuda.current_stream().wait_event(done)
    x *= 2
    assert x.cpu().numpy().tolist() == [(14.0 + 10) * 2] * 4096  # three (x + 1) * 2: 14


def test_another_librarys_capture_of_the_stream_takes_the_kernels_in():
    from cuda.bindings import runtime
    stream = cuda.Stream()
    with cuda.stream(stream):
        # Made on the stream that uses it: a stream of our own does not wait for the default one.
        x = tensorplay.zeros(256, device="cuda")
        for _ in range(5):  # graphs made for this stream's x += 1
            x += 1
        stream.synchronize()
        made = nvrtc.eager_graphs_made()
        status, = runtime.cudaStreamBeginCapture(
            stream.cuda_stream, runtime.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal)
        assert status == runtime.cudaError_t.cudaSuccess
        for _ in range(3):
            x += 1
        status, graph = runtime.cudaStreamEndCapture(stream.cuda_stream)
        assert status == runtime.cudaError_t.cudaSuccess  # not invalidated
        assert nvrtc.eager_graphs_made() == made
        status, executable = runtime.cudaGraphInstantiate(graph, 0)
        assert status == runtime.cudaError_t.cudaSuccess
        assert x.cpu().numpy().tolist() == [5.0] * 256  # captured, not run
        for _ in range(2):
            assert runtime.cudaGraphLaunch(executable, stream.cuda_stream)[0] == \
                runtime.cudaError_t.cudaSuccess
        stream.synchronize()
        runtime.cudaGraphExecDestroy(executable)
        runtime.cudaGraphDestroy(graph)
    assert x.cpu().numpy().tolist() == [11.0] * 256


def test_a_global_capture_on_another_stream_survives_eager_launches():
    from cuda.bindings import runtime
    capturing = cuda.Stream()
    with cuda.stream(capturing):
        y = tensorplay.zeros(64, device="cuda")
        y += 1  # the kernel is loaded before the capture
    x = tensorplay.zeros(64, device="cuda")
    # Done before the capture: the worker stream made during it does not wait for the default
    # stream that zeroed x (non-blocking streams, as PyTorch's).
    tensorplay.accelerator.synchronize()
    status, = runtime.cudaStreamBeginCapture(
        capturing.cuda_stream, runtime.cudaStreamCaptureMode.cudaStreamCaptureModeGlobal)
    assert status == runtime.cudaError_t.cudaSuccess
    try:
        worker = cuda.Stream()
        with cuda.stream(worker):
            for _ in range(6):  # first launches, then graphs made and launched
                x += 2
        with cuda.stream(capturing):
            y += 1
    finally:
        status, graph = runtime.cudaStreamEndCapture(capturing.cuda_stream)
    assert status == runtime.cudaError_t.cudaSuccess
    runtime.cudaGraphDestroy(graph)
    worker.synchronize()
    assert x.cpu().numpy().tolist() == [12.0] * 64
    assert y.cpu().numpy().tolist() == [1.0] * 64


def test_our_capture_records_kernels_after_eager_graphs_were_made():
    x = tensorplay.zeros(512, device="cuda")
    for _ in range(4):
        x += 1
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        for _ in range(3):
            x += 1
    assert x.cpu().numpy().tolist() == [4.0] * 512  # a capture runs nothing
    graph.replay()
    graph.replay()
    assert x.cpu().numpy().tolist() == [10.0] * 512


def test_threads_each_on_their_own_stream():
    errors = []

    def work(value):
        try:
            stream = cuda.Stream()
            with cuda.stream(stream):
                x = tensorplay.zeros(2048, device="cuda")
                for _ in range(200):
                    x += value
                stream.synchronize()
                assert x.cpu().numpy().tolist() == [200.0 * value] * 2048
        except Exception as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k + 1,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_turned_off_every_launch_goes_through_cu_launch_kernel():
    output = run_fresh(
        "import tensorplay\n"
        "from tensorplay._runtime.kernels import nvrtc\n"
        "x = tensorplay.zeros(10, device='cuda')\n"
        "for _ in range(20): x += 1\n"
        "print(nvrtc.eager_graphs_made(), x.sum().item())\n",
        TENSORPLAY_EAGER_GRAPHS="0")
    assert output.split() == ["0", "200.0"]


def test_the_limit_caps_the_graphs_made():
    output = run_fresh(
        "import tensorplay\n"
        "from tensorplay._runtime.kernels import nvrtc\n"
        "total = 0.0\n"
        "for size in (10, 1000, 100000, 1000000):\n"
        "    x = tensorplay.zeros(size, device='cuda')\n"
        "    for _ in range(3): x += 1\n"
        "    total += x.sum().item() / size\n"
        "print(nvrtc.eager_graphs_made(), total)\n",
        TENSORPLAY_EAGER_GRAPHS="2")
    assert output.split() == ["2", "12.0"]


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_a_bad_setting_is_refused_at_the_first_launch_and_after(value):
    output = run_fresh(
        "import tensorplay\n"
        "for attempt in range(2):\n"
        "    try:\n"
        "        x = tensorplay.ones(10, device='cuda')\n"
        "        x += 1\n"
        "    except ValueError as error:\n"
        "        print(error)\n",
        TENSORPLAY_EAGER_GRAPHS=value)
    lines = output.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0].startswith("TENSORPLAY_EAGER_GRAPHS must be the most executable graphs")
    assert lines[0].endswith(f"got {value!r}")
