"""Several streams in one CUDA graph capture: fork and join, side streams, replays on other
streams (docs/design.md, "Capture rules"; CUDA Programming Guide, "Cross-stream Dependencies and
Events" and "Prohibited and Unhandled Operations").

A stream that waits on work recorded in a capture (wait_stream(), or an event recorded there and
wait_event()) joins the capture: its work is captured, it allocates from the graph's pool and
counts as capturing, until it is joined back into the stream that began the capture, which
every fork must be before the capture ends.

Most tests are ports of the peers' own tests, each citing its source; the others check what the
ports leave out. Adaptations throughout: PyTorch's capture_begin() captures on the current
stream, tensorplay's CUDAGraph.capture_begin() on the runtime's side stream, so the ports pass
stream=; sums become the set of element values (exact in float32); torch.add(a, b, out=c)
becomes c.copy_(a + b).

Not ported, and why:
- PyTorch test_graph_rng_functional, test_graph_rng_distributions: their streams only surround
  the capture (the pattern test_graph_two_successive ports); their subject is distributions
  tensorplay lacks (dropout, rrelu, poisson, ...). Draws on a joined stream are tested here,
  the rest in tests/random/test_random.py.
- PyTorch test_graph_cudnn_dropout, test_graph_grad_scaling: tensorplay has no cuDNN RNN and
  no AMP GradScaler.
- PyTorch test_graph_concurrent_replay with a shared pool: it expects the concurrent replays
  to corrupt each other, which needs torch.cuda._sleep to line their kernels up; tensorplay
  has no sleep kernel, and the corruption is undefined behaviour rather than a result. The
  unshared case is ported.
- PyTorch test_graph_capture_reclaim_2_streams / _4_streams, the reuse of the freed block after
  the join: that needs PyTorch's graph_capture_record_stream_reuse allocator setting, which
  tensorplay lacks (a block freed with record_stream() during a capture is reused only after
  it). The topology, the values and "no reuse before the join" are ported.
- PyTorch test_graph_error: one stream only (a capture on the legacy default stream), covered
  by test_graphs.py::test_misuse_gives_clear_runtime_errors.
- CuPy test_stream_capture_failure2: it ends a capture through a forked stream
  (s2.end_capture()); tensorplay ends captures through the graph, so there is no such call.
  CuPy's upload=True variants: tensorplay has no Graph.upload().
- cuda.core GraphBuilder.split(1) / join(left) argument errors and test_graph_is_join_required:
  tensorplay has no builder API; forks are wait_stream() / wait_event().
"""
import concurrent.futures
import gc
import re

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from tests.graphs.graph_helpers import N, reset_and_recapture, values, warmed

pytestmark = pytest.mark.gpu

COUNT = 1024
MiB = 1 << 20
# PyTorch's allocator constants (c10/cuda/CUDACachingAllocator.cpp), which tensorplay's follow.
SMALL_SIZE = MiB          # kSmallSize: the largest request of the small pool
SMALL_BUFFER = 2 * MiB    # kSmallBuffer: a small-pool segment
LARGE_BUFFER = 20 * MiB   # kLargeBuffer: a shared large-pool segment
MIN_LARGE_ALLOC = 10 * MiB  # kMinLargeAlloc: from here a request gets a segment of its own
ROUND_LARGE = 2 * MiB     # kRoundLarge: ... rounded up to this


def named(stream):
    """A pattern matching the stream's handle as repr(stream) shows it."""
    return re.escape(f"{stream.cuda_stream:#x}")


def capturing_on(stream):
    with cuda.stream(stream):
        return graphs.is_current_stream_capturing()


def func_with_temps(t, val):
    """The helper of PyTorch's graph tests: temporaries allocated and freed in the capture."""
    x = t.clone() + val
    y = t.clone() + val
    return x + y


# -- ports of PyTorch's test/test_cuda.py ---------------------------------------------------------


def test_two_successive_graphs_captured_on_a_side_stream(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_graph_two_successive
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py)."""
    size = 1000
    s = cuda.Stream()
    reserved = {}
    for share in ("none", "pool_id", "graph_pool_handle"):
        g0, g1 = cuda.CUDAGraph(), cuda.CUDAGraph()
        a = tp.ones(size, device="cuda")
        s.wait_stream(cuda.current_stream())
        with cuda.stream(s):
            pool = graphs.graph_pool_handle() if share == "graph_pool_handle" else None
            g0.capture_begin(pool, stream=s)
            b = a.clone()
            for _ in range(5):
                b = func_with_temps(b, 1)
            g0.capture_end()
            g1.capture_begin(g0.pool_id if share == "pool_id" else pool, stream=s)
            for _ in range(5):
                b = func_with_temps(b, 1)
            g1.capture_end()
        cuda.current_stream().wait_stream(s)
        # Unrelated eager work between the replays.
        c = a.clone()
        for _ in range(2):
            c = func_with_temps(c, 3)
        g0.replay()
        for _ in range(2):
            c = func_with_temps(c, 3)
        g1.replay()
        for _ in range(2):
            c = func_with_temps(c, 3)
        assert values(b) == {3070.0} and values(c) == {442.0}
        reserved[share] = memory.memory_stats()["reserved_bytes.all.current"]
        del a, b, c, g0, g1
        accelerator.synchronize()
        memory.empty_cache()
    # Graphs sharing a pool share its small-pool segment.
    assert reserved["none"] - reserved["pool_id"] == SMALL_BUFFER
    assert reserved["none"] - reserved["graph_pool_handle"] == SMALL_BUFFER


def test_two_graphs_replay_at_once_on_two_streams(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_graph_concurrent_replay
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py), its "Don't share" case
    (the module docstring says why the shared-pool cases are not ported)."""
    s, s0, s1 = cuda.Stream(), cuda.Stream(), cuda.Stream()
    g0, g1 = cuda.CUDAGraph(), cuda.CUDAGraph()
    a = tp.ones(N, device="cuda")  # largeish, to help expose races
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        g0.capture_begin(stream=s)
        b = a.clone()
        for _ in range(5):
            b = func_with_temps(b, 1)
        g0.capture_end()
        g1.capture_begin(stream=s)
        c = a.clone()
        for _ in range(5):
            c = func_with_temps(c, 2)
        g1.capture_end()
    accelerator.synchronize()
    with cuda.stream(s0):
        s1.wait_stream(s0)
        g0.replay()
    with cuda.stream(s1):
        g1.replay()
    cuda.current_stream().wait_stream(s0)
    cuda.current_stream().wait_stream(s1)
    assert values(b) == {94.0} and values(c) == {156.0}


@pytest.mark.parametrize("share", ["none", "pool_id", "graph_pool_handle"])
def test_three_successive_graphs_and_the_replay_order_a_shared_pool_needs(quiet_device, share):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_graph_three_successive
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py)."""
    s = cuda.Stream()
    a = tp.ones(1000, device="cuda")
    g0, g1, g2 = cuda.CUDAGraph(), cuda.CUDAGraph(), cuda.CUDAGraph()
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        pool = graphs.graph_pool_handle() if share == "graph_pool_handle" else None
        g0.capture_begin(pool, stream=s)
        b = a.clone()
        c = b + 1
        d = b + 2
        g0.capture_end()
        pool = g0.pool_id if share == "pool_id" else pool
        g1.capture_begin(pool, stream=s)
        e = c + 3
        del c
        g1.capture_end()
        g2.capture_begin(pool, stream=s)
        f = d + 4
        g2.capture_end()
    cuda.current_stream().wait_stream(s)
    for g in (g0, g1, g2):  # replaying in capture order is valid
        g.replay()
    assert values(e) == {5.0} and values(f) == {7.0}
    g0.replay()
    g2.replay()
    g1.replay()
    # With a shared pool, g2's capture reused c's block (freed in g1's capture) for f, so g1
    # read f's values: graphs sharing a pool must replay in capture order.
    assert values(e) == ({5.0} if share == "none" else {10.0})
    assert values(f) == {7.0}


MEMORY_CASES = [  # elements, segments, bytes reserved while the graph lives, then after, pool
    (512 // 4, 1, SMALL_BUFFER, SMALL_BUFFER, "small_pool"),
    (SMALL_SIZE // 4, 2, 2 * SMALL_BUFFER, SMALL_BUFFER, "small_pool"),
    ((SMALL_SIZE + 512) // 4, 1, LARGE_BUFFER, LARGE_BUFFER, "large_pool"),
    ((MIN_LARGE_ALLOC - 512) // 4, 2, 2 * LARGE_BUFFER, LARGE_BUFFER, "large_pool"),
    ((MIN_LARGE_ALLOC + 512) // 4, 3,
     3 * ROUND_LARGE * ((MIN_LARGE_ALLOC + 512 + ROUND_LARGE - 1) // ROUND_LARGE),
     ROUND_LARGE * ((MIN_LARGE_ALLOC + 512 + ROUND_LARGE - 1) // ROUND_LARGE), "large_pool"),
]


# The same cases with graph pools on expandable segments (TENSORPLAY_CUDA_ALLOC_CONF's
# graph_expandable_segments, the default; docs/design.md, "Expandable segments"): one segment
# that grows in place (2 MiB steps in the small pool, at least 20 MiB for large requests under
# 10 MiB, else what is missing beyond the free tail rounded up to 2 MiB), which keeps all of
# its memory while the result lives (we do not unmap free pages inside a segment).
EXPANDABLE_CASES = {  # elements -> segments, reserved while the graph lives, then after
    512 // 4: (1, SMALL_BUFFER, SMALL_BUFFER),
    SMALL_SIZE // 4: (1, 2 * SMALL_BUFFER, 2 * SMALL_BUFFER),
    (SMALL_SIZE + 512) // 4: (1, LARGE_BUFFER, LARGE_BUFFER),
    (MIN_LARGE_ALLOC - 512) // 4: (1, 2 * LARGE_BUFFER, 2 * LARGE_BUFFER),
    (MIN_LARGE_ALLOC + 512) // 4: (1, 32 * MiB, 32 * MiB),
}


def graph_pools_expandable():
    import os

    from tensorplay._runtime.memory import alloc_conf
    return alloc_conf.parse(os.environ.get(alloc_conf.ENVIRONMENT_VARIABLE, ""))[
        "graph_expandable_segments"]


@pytest.mark.parametrize("numel, segments, reserved, reserved_after, pool", MEMORY_CASES)
def test_graph_memory_stats_and_use_of_the_result_after_the_graph_is_deleted(
        quiet_device, numel, segments, reserved, reserved_after, pool):
    """Port of PyTorch test/test_cuda.py,
    TestCuda.test_graph_memory_stats_and_use_result_after_destroy_graph
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py). PyTorch's small-pool
    cases count two more active blocks (1024 bytes), its graph's RNG seed and offset holders;
    a tensorplay graph that draws no random numbers allocates none. The statistics are read
    again after empty_cache(), which must take nothing from the graph. PyTorch's figures hold
    for cudaMalloc graph pools (graph_expandable_segments:False); EXPANDABLE_CASES otherwise."""
    if graph_pools_expandable():
        segments, reserved, reserved_after = EXPANDABLE_CASES[numel]
    def deltas(stats):
        return tuple(stats[f"{name}.{pool}.current"] - before[f"{name}.{pool}.current"]
                     for name in ("segment", "reserved_bytes", "active", "active_bytes"))

    s = cuda.Stream()
    g = cuda.CUDAGraph()
    s.wait_stream(cuda.current_stream())
    with cuda.stream(s):
        a = tp.ones(numel, device="cuda")  # on the capture stream, as PyTorch's figures assume
        before = memory.memory_stats()
        g.capture_begin(stream=s)
        b = a.clone()
        for _ in range(5):
            b = b.clone() + 1
        g.capture_end()
    cuda.current_stream().wait_stream(s)
    gc.collect()
    for _ in range(2):
        assert deltas(memory.memory_stats()) == (segments, reserved, 1, numel * 4)
        g.replay()
        assert values(b) == {6.0}
        memory.empty_cache()
    del g
    gc.collect()
    memory.empty_cache()
    assert values(b) == {6.0}  # the result outlives its graph
    assert deltas(memory.memory_stats()) == (1, reserved_after, 1, numel * 4)


def test_record_stream_on_a_forked_stream_inside_a_capture(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_graph_record_stream
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py): allocating during the
    capture must not query the end-of-life event of a block another stream still uses, and a
    block record_stream() marks on a forked stream is reclaimed after the capture. Adapted:
    kernels on a large tensor keep s0 busy (tensorplay has no torch.cuda._sleep), and
    a += b gives the replays a result to check."""
    potential_problem = tp.zeros(3, device="cuda")
    a = tp.zeros(3, device="cuda")
    busy = tp.zeros(N, device="cuda")
    s0, s1, s2 = cuda.Stream(), cuda.Stream(), cuda.Stream()
    g = cuda.CUDAGraph()
    accelerator.synchronize()
    with cuda.stream(s0):
        potential_problem.record_stream(s0)
        for _ in range(50):
            busy += 1
        potential_problem.fill_(1.0)
    del potential_problem
    with cuda.stream(s1):
        g.capture_begin(stream=s1)
        b = a.clone()
        s2.wait_stream(s1)
        with cuda.stream(s2):
            b.fill_(1.0)
            a += b
            b.record_stream(s2)
            del b
        s1.wait_stream(s2)
        g.capture_end()
    accelerator.synchronize()
    tp.zeros(3, device="cuda")  # processes b's end-of-life event
    g.replay()
    g.replay()
    assert values(a) == {2.0} and values(busy) == {50.0}


def test_reset_and_recapture_with_the_work_on_a_joined_stream_replays_without_a_fault():
    """Adapted from PyTorch test/test_cuda.py, TestCuda.test_graph_capture_reset_recapture
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py): the same sequence
    (graph_helpers.RESET_AND_RECAPTURE), with each capture's work on a forked stream joined
    back before the capture ends."""
    result = reset_and_recapture("joined")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_debug_dump_of_a_capture_with_a_fork_shows_the_cross_stream_edge(quiet_device, tmp_path):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_graph_debugdump
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py). Added: the topology
    (an event fork is an edge, no node) and the replayed value."""
    x, y = warmed(1.0, COUNT), warmed(2.0, COUNT)
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    s0, s1 = cuda.Stream(), cuda.Stream()
    s0.wait_stream(cuda.current_stream())
    with cuda.stream(s0):
        g.capture_begin(stream=s0)
        z = x + y
        with cuda.stream(s1):
            s1.wait_stream(s0)
            w = z + y
        s0.wait_stream(s1)
        g.capture_end()
    g.debug_dump(tmp_path / "out_multi_stream.dot")
    assert (tmp_path / "out_multi_stream.dot").read_text().lstrip().startswith("digraph")
    nodes = g.get_graph_data()["nodes"]
    assert [node["type"] for node in nodes] == ["kernel", "kernel"]
    (first,) = [node for node in nodes if not node["dependencies"]]
    (second,) = [node for node in nodes if node["dependencies"]]
    assert second["dependencies"] == [first["id"]]
    g.replay()
    assert values(w) == {5.0}


def test_allocations_on_a_joined_stream_come_from_the_graphs_pool(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestCuda.test_cuda_graph_allocator_propagates_stream
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py). PyTorch reads the new
    segments' pool ids from memory_snapshot(), which tensorplay lacks; here both segments show
    as memory the graph keeps reserved after its tensors are gone, until it is reset."""
    segment = 8 * N * 4  # a 32 MiB result: a segment of its own
    x = warmed(1.0, 8 * N)
    memory.empty_cache()
    reserved = memory.memory_reserved()
    g = cuda.CUDAGraph()
    s0, s1 = cuda.Stream(), cuda.Stream()
    s0.wait_stream(cuda.current_stream())
    with cuda.stream(s0):
        g.capture_begin(stream=s0)
        z = x + 1
    with cuda.stream(s1):
        s1.wait_stream(s0)
        w = z + 1  # allocated on the joined stream
    s0.wait_stream(s1)
    with cuda.stream(s0):
        g.capture_end()
    assert memory.memory_stats()["num_graph_pools"] == 1
    assert memory.memory_reserved() == reserved + 2 * segment
    g.replay()
    assert values(w) == {3.0}
    del z, w
    memory.empty_cache()
    assert memory.memory_reserved() == reserved + 2 * segment  # the graph's pool keeps both
    g.reset()
    memory.empty_cache()
    assert memory.memory_reserved() == reserved
    assert memory.memory_stats()["num_graph_pools"] == 0


def test_a_block_freed_before_the_join_is_not_reused_in_the_capture(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestMemPool.test_graph_capture_reclaim_2_streams
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py), without the reuse after
    the join (the module docstring says why). Adapted: data1 is ones, not empty, so that the
    forked work has a value to check."""
    s1, s2 = cuda.Stream(), cuda.Stream()
    g = cuda.CUDAGraph()
    accelerator.synchronize()
    with cuda.stream(s1):
        g.capture_begin(stream=s1)
        sink1 = tp.empty(8, device="cuda")  # allocated first, so that it takes no block later
        data1 = tp.ones(8, device="cuda")
        data1_ptr = data1.data_ptr()
        s2.wait_stream(s1)  # fork: s2 reads data1
        with cuda.stream(s2):
            buf2 = tp.empty_like(data1)
            buf2.copy_(data1 + 2)
            data1.record_stream(s2)
        del data1
        data2 = tp.empty(8, device="cuda")  # before the join: s2 may still read data1
        assert data2.data_ptr() != data1_ptr
        s1.wait_stream(s2)  # join
        sink1.fill_(1.0)
        g.capture_end()
    g.replay()
    assert values(buf2) == {3.0} and values(sink1) == {1.0}


def test_partial_joins_of_four_streams_reuse_nothing_before_the_last_join(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestMemPool.test_graph_capture_reclaim_4_streams
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py), without the reuse after
    the last join (the module docstring says why): s4 joins s3, which joins s1, so s4's work
    reaches the origin stream through a chain of joins."""
    s1, s2, s3, s4 = (cuda.Stream() for _ in range(4))
    g = cuda.CUDAGraph()
    accelerator.synchronize()
    with cuda.stream(s1):
        g.capture_begin(stream=s1)
        data1 = tp.ones(8, device="cuda")
        data1_ptr = data1.data_ptr()
        sink1 = tp.empty_like(data1)
        sink3 = tp.empty_like(data1)
        bufs = []
        for stream, added in ((s2, 2.0), (s3, 3.0), (s4, 4.0)):
            stream.wait_stream(s1)
            with cuda.stream(stream):
                buf = tp.empty_like(data1)
                buf.copy_(data1 + added)
                data1.record_stream(stream)
            bufs.append(buf)
        del data1
        s1.wait_stream(s2)  # partial joins: s2 into s1, s4 into s3
        sink1.fill_(1.0)
        s3.wait_stream(s4)
        with cuda.stream(s3):
            sink3.fill_(3.0)
            sink3.record_stream(s3)
        data2 = tp.empty(8, device="cuda")  # s1 and s3 are not joined yet
        assert data2.data_ptr() != data1_ptr
        s1.wait_stream(s3)  # the final join
        sink1.add_(sink3)
        g.capture_end()
    g.replay()
    assert [values(buf) for buf in bufs] == [{3.0}, {4.0}, {5.0}]
    assert values(sink3) == {3.0} and values(sink1) == {4.0}


def test_a_graph_replayed_on_one_stream_waits_for_an_event_another_graph_records(quiet_device):
    """Port of PyTorch test/test_cuda.py, TestCudaDeviceParametrized
    .test_graph_external_wait_and_record
    (https://github.com/pytorch/pytorch/blob/main/test/test_cuda.py). PyTorch holds the
    signalling graph in a spin-wait kernel until the host releases it (torch.cuda._compile_kernel
    and pinned memory); tensorplay cannot launch a kernel of the user's, so a chain of kernels
    delays the record instead, and the checks made while the kernel spins are dropped."""
    source = tp.zeros(1 << 22, device="cuda")
    copy = tp.zeros(1 << 22, device="cuda")
    start, end = cuda.Event(external=True), cuda.Event(external=True)
    signalling = cuda.CUDAGraph()
    with cuda.graph(signalling):
        for _ in range(40):
            source += 1
        start.record()
    # A record captured as a graph node is no record yet: the event stands for no work.
    assert start.query()
    work = cuda.CUDAGraph()
    with cuda.graph(work):
        start.wait()
        copy.copy_(source)
        end.record()
    assert values(copy) == {0.0}  # the copy waits for start, recorded by a replay
    signalling_stream, work_stream = cuda.Stream(), cuda.Stream()
    signalling.replay(stream=signalling_stream)
    work.replay(stream=work_stream)
    end.synchronize()
    assert work_stream.query()  # end.synchronize() completing means work_stream is done
    assert values(copy) == {40.0}


# -- ports of CuPy's tests/cupy_tests/cuda_tests/test_graph.py -------------------------------------


def test_a_fork_and_a_join_through_events(quiet_device):
    """Port of CuPy tests/cupy_tests/cuda_tests/test_graph.py, TestGraph.test_stream_fork_join
    (https://github.com/cupy/cupy/blob/main/tests/cupy_tests/cuda_tests/test_graph.py)."""
    s1, s2 = cuda.Stream(), cuda.Stream()
    e1, e2 = cuda.Event(), cuda.Event()
    a = warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=s1):
        out1 = a * 100
        e1.record(s1)
        s2.wait_event(e1)
        with cuda.stream(s2):
            out2 = 3 * out1 + 1
            e2.record(s2)
        s1.wait_event(e2)
    assert not capturing_on(s1) and not capturing_on(s2)
    g.replay()
    assert values(out2) == {301.0}


def test_a_graph_captured_on_one_stream_replays_on_another(quiet_device):
    """Port of CuPy tests/cupy_tests/cuda_tests/test_graph.py,
    TestGraph.test_capture_run_on_different_streams
    (https://github.com/cupy/cupy/blob/main/tests/cupy_tests/cuda_tests/test_graph.py), with its
    arithmetic helper only (tensorplay has no FFT, and refuses the helper that synchronises);
    7.5 and t * t in place of 7.6 and t ** 2 keep the values exact."""
    def helper(t):
        t = t + 3
        t = t * 7.5
        return t * t

    s1, s2 = cuda.Stream(), cuda.Stream()
    a = warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=s1):
        out1 = helper(a)
    with cuda.stream(s2):
        g.replay()
    s2.synchronize()
    assert set(out1.tolist()) == {900.0}
    assert out1.tolist() == helper(a).tolist()


def test_work_on_a_fork_that_never_joins_fails_the_capture_and_both_streams_stay_usable(
        quiet_device):
    """Port of CuPy tests/cupy_tests/cuda_tests/test_graph.py,
    TestGraph.test_stream_capture_failure3
    (https://github.com/cupy/cupy/blob/main/tests/cupy_tests/cuda_tests/test_graph.py): a call
    that synchronises is refused on the forked stream, and the capture, left unjoined, fails."""
    s1, s2 = cuda.Stream(), cuda.Stream()
    e2 = cuda.Event()
    a = warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    g.capture_begin(stream=s1)
    e2.record(s1)
    s2.wait_event(e2)
    with cuda.stream(s2):
        b = a * 3
        with pytest.raises(RuntimeError, match=named(s2)):
            b.tolist()  # a copy to the host waits for the capturing stream
    with pytest.raises(RuntimeError, match=named(s2)):
        g.capture_end()
    assert not capturing_on(s1) and not capturing_on(s2)
    s1.synchronize()
    s2.synchronize()
    assert s1.query() and s2.query()


# -- ports of NVIDIA cuda.core's graph tests ------------------------------------------------------


def test_a_diamond_of_forked_work_replays_with_the_fork_and_join_edges(quiet_device):
    """Port of NVIDIA/cuda-python cuda_core/tests/graph/test_graph_builder.py (formerly
    cuda_core/tests/test_graph.py), test_graph_fork_join
    (https://github.com/NVIDIA/cuda-python/blob/main/cuda_core/tests/graph/test_graph_builder.py):
    a root kernel, two branches of two kernels, a join and a last kernel. Added: the values and
    the topology."""
    x, y = warmed(0.0, COUNT), warmed(0.0, COUNT)
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    with cuda.graph(g):
        origin = cuda.current_stream()
        x += 1
        side.wait_stream(origin)  # split(2)
        x += 1
        x += 1
        with cuda.stream(side):
            y += 1
            y += 1
        origin.wait_stream(side)  # GraphBuilder.join(left, right)
        x += y
    nodes = g.get_graph_data()["nodes"]
    assert [node["type"] for node in nodes] == ["kernel"] * 6
    assert sorted(len(node["dependencies"]) for node in nodes) == [0, 1, 1, 1, 1, 2]
    assert sorted(len(node["dependents"]) for node in nodes) == [0, 1, 1, 1, 1, 2]
    g.replay()
    assert (values(x), values(y)) == ({5.0}, {2.0})


@pytest.mark.parametrize("condition", [True, False])
def test_a_fork_inside_an_if_body_joins_back_inside_it(quiet_device, condition):
    """Port of NVIDIA/cuda-python cuda_core/tests/graph/test_graph_builder_conditional.py
    (formerly in cuda_core/tests/test_graph.py), test_graph_conditional_if
    (https://github.com/NVIDIA/cuda-python/blob/main/cuda_core/tests/graph/test_graph_builder_conditional.py)."""
    first, second = warmed(0.0, COUNT), warmed(0.0, COUNT)
    flag = tp.full((1,), condition, dtype=tp.bool, device="cuda")
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_node(flag)
        first += 1
        body = cuda.current_stream()
        side.wait_stream(body)  # split(2): left on the body's stream, right on side
        first += 1
        with cuda.stream(side):
            second += 1
        body.wait_stream(side)  # join
        first += 1
        g.end_capture_to_conditional_node()
        first += 1  # after the conditional node
    g.replay()
    assert (values(first), values(second)) == (({4.0}, {1.0}) if condition else ({1.0}, {0.0}))


@pytest.mark.parametrize("condition", [True, False])
def test_a_fork_inside_the_if_body_of_an_if_else_node(quiet_device, condition):
    """Port of NVIDIA/cuda-python cuda_core/tests/graph/test_graph_builder_conditional.py
    (formerly in cuda_core/tests/test_graph.py), test_graph_conditional_if_else
    (https://github.com/NVIDIA/cuda-python/blob/main/cuda_core/tests/graph/test_graph_builder_conditional.py)."""
    first, second = warmed(0.0, COUNT), warmed(0.0, COUNT)
    flag = tp.full((1,), condition, dtype=tp.bool, device="cuda")
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_else_node(flag)
        first += 1
        body = cuda.current_stream()
        side.wait_stream(body)
        first += 1
        with cuda.stream(side):
            second += 1
        body.wait_stream(side)
        first += 1
        g.begin_capture_to_next_body()  # the else body
        for _ in range(3):
            second += 1
        g.end_capture_to_conditional_node()
        first += 1
    g.replay()
    assert (values(first), values(second)) == (({4.0}, {1.0}) if condition else ({1.0}, {3.0}))


@pytest.mark.parametrize("case, expected", [
    (0, (4.0, 0.0, 0.0)), (1, (1.0, 2.0, 1.0)), (2, (1.0, 0.0, 3.0)), (3, (1.0, 0.0, 0.0))])
def test_a_fork_inside_a_switch_case(quiet_device, case, expected):
    """Port of NVIDIA/cuda-python cuda_core/tests/graph/test_graph_builder_conditional.py
    (formerly in cuda_core/tests/test_graph.py), test_graph_conditional_switch
    (https://github.com/NVIDIA/cuda-python/blob/main/cuda_core/tests/graph/test_graph_builder_conditional.py):
    case 1 forks and joins; case 3 is out of range, so no case runs."""
    counters = [warmed(0.0, COUNT) for _ in range(3)]
    index = tp.full((1,), case, dtype=tp.int32, device="cuda")
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_switch_node(index, 3)
        for _ in range(3):
            counters[0] += 1
        g.begin_capture_to_next_body()
        counters[1] += 1
        body = cuda.current_stream()
        side.wait_stream(body)
        counters[1] += 1
        with cuda.stream(side):
            counters[2] += 1
        body.wait_stream(side)
        g.begin_capture_to_next_body()
        for _ in range(3):
            counters[2] += 1
        g.end_capture_to_conditional_node()
        counters[0] += 1
    g.replay()
    assert [values(counter) for counter in counters] == [{value} for value in expected]


# -- the semantics the ports leave out ------------------------------------------------------------


def test_a_fork_inside_a_while_body_joins_back_on_every_iteration(quiet_device):
    counter, forked = warmed(0.0, 1), warmed(0.0, COUNT)
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    keep_going.copy_(counter < 3)  # the comparison and copy kernels load before the capture
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        keep_going.copy_(counter < 3)
        g.begin_capture_to_while_node(keep_going)
        body = cuda.current_stream()
        side.wait_stream(body)
        with cuda.stream(side):
            forked += 1
        counter += 1
        body.wait_stream(side)
        keep_going.copy_(counter < 3)
        g.end_capture_to_conditional_node()
    g.replay()
    assert (values(counter), values(forked)) == ({3.0}, {3.0})


def test_a_joined_stream_is_a_capturing_stream_everywhere(quiet_device):
    x = warmed(1.0, COUNT)
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        assert not capturing_on(side)  # not before it waits on the capture
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            assert graphs.is_current_stream_capturing()
            out = x * 2
            with pytest.raises(RuntimeError, match=named(side)):
                side.synchronize()
            with pytest.raises(RuntimeError, match=named(side)):
                side.query()
            with pytest.raises(RuntimeError, match=named(side)):
                out.tolist()
        cuda.current_stream().wait_stream(side)
    assert not capturing_on(side)
    side.synchronize()
    assert side.query()
    g.replay()
    assert values(out) == {2.0}


def test_a_chain_of_forks_joins_the_capture_and_joins_back_through_its_last_stream(quiet_device):
    x, y = warmed(1.0, COUNT), warmed(0.0, COUNT)
    first, second = cuda.Stream(), cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        origin = cuda.current_stream()
        first.wait_stream(origin)
        with cuda.stream(first):
            x += 1
        second.wait_stream(first)  # waits on the side stream, not on the origin: joins too
        assert capturing_on(second)
        with cuda.stream(second):
            y.copy_(x * 2)
        origin.wait_stream(second)  # first's work precedes second's, so both are joined
    g.replay()
    assert (values(x), values(y)) == ({2.0}, {4.0})


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_a_stream_joins_the_capture_from_another_thread(quiet_device, mode):
    x, y = warmed(1.0, COUNT), warmed(0.0, COUNT)
    side = cuda.Stream()

    def eager_work():  # the thread's own CUDA setup, before the capture
        own = cuda.Stream()
        with cuda.stream(own):
            scratch = x * 3
            own.synchronize()
        return scratch.tolist()[0]

    def joined_work(fork):
        side.wait_event(fork)
        with cuda.stream(side):
            capturing = graphs.is_current_stream_capturing()
            y.copy_(x * 3)  # x * 3 is allocated on the joined stream
        return capturing

    with concurrent.futures.ThreadPoolExecutor(1) as other_thread:
        assert other_thread.submit(eager_work).result() == 3.0
        g = cuda.CUDAGraph()
        g.capture_begin(capture_error_mode=mode)
        fork = cuda.current_stream().record_event()
        assert other_thread.submit(joined_work, fork).result() is True
        cuda.current_stream().wait_stream(side)
        g.capture_end()
    g.replay()
    assert values(y) == {3.0}
    x.fill_(2.0)
    g.replay()
    assert values(y) == {6.0}


def test_random_draws_on_a_joined_stream_are_fresh_on_every_replay(quiet_device):
    random = accelerator.random
    noise = tp.empty((4096,), device="cuda")
    noise.uniform_()  # kernels loaded before the capture
    side = cuda.Stream()
    random.manual_seed(2024)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            noise.uniform_()
        cuda.current_stream().wait_stream(side)
    after_capture = random.get_rng_state().tolist()
    draws = []
    for _ in range(3):
        g.replay()
        accelerator.synchronize()
        draws.append(noise.tolist())
    assert len({tuple(drawn) for drawn in draws}) == 3
    # The same draws made eagerly from the same state give the same numbers.
    random.set_rng_state(bytes(after_capture))
    for drawn in draws:
        noise.uniform_()
        assert noise.tolist() == drawn


@pytest.mark.parametrize("ending", ["capture_end", "graph block"])
def test_a_fork_that_never_joins_back_fails_naming_the_stream_and_leaves_everything_usable(
        quiet_device, ending):
    x = warmed(1.0, COUNT)
    side = cuda.Stream()
    before = cuda.current_stream()
    pools = memory.memory_stats()["num_graph_pools"]
    g = cuda.CUDAGraph()

    def fork_to_side():
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            return x * 2  # allocated from the graph's pool

    with pytest.raises(RuntimeError, match=named(side)):
        if ending == "capture_end":
            g.capture_begin()
            out = fork_to_side()
            g.capture_end()
        else:
            with cuda.graph(g):
                out = fork_to_side()
    assert cuda.current_stream() == before
    assert not graphs.is_current_stream_capturing() and not capturing_on(side)
    assert memory.memory_stats()["capturing"] == 0
    side.synchronize()
    assert g.pool_id is None
    del out
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == pools
    with cuda.graph(g):  # the same graph captures again, joining side back this time
        out = fork_to_side()
        cuda.current_stream().wait_stream(side)
    g.replay()
    assert values(out) == {2.0}


def test_waiting_on_an_event_of_a_capture_that_has_ended_is_refused(quiet_device):
    x = warmed(0.0, COUNT)
    outside = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
        in_capture = cuda.current_stream().record_event()
    with pytest.raises(RuntimeError, match="capture that has ended.*cudaErrorInvalidValue"):
        outside.wait_event(in_capture)
    with pytest.raises(RuntimeError, match="capture that has ended"):
        in_capture.wait(outside)
    with pytest.raises(RuntimeError, match="capture that has ended"):
        in_capture.query()
    outside.synchronize()
    g.replay()
    assert values(x) == {1.0}
    in_capture.record(outside)  # recorded eagerly: an ordinary event again
    cuda.current_stream().wait_event(in_capture)


def test_waiting_from_one_capture_on_an_event_of_another_open_capture_is_refused(quiet_device):
    # CUDA would merge the two captures (cudaErrorStreamCaptureMerge) and invalidate both.
    x, y = warmed(0.0, COUNT), warmed(0.0, COUNT)
    first, second = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(first):
        x += 1
        in_first = cuda.current_stream().record_event()
        with cuda.graph(second, stream=cuda.Stream(), capture_error_mode="relaxed"):
            y += 1
            with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureMerge"):
                cuda.current_stream().wait_event(in_first)
            y += 1
        x += 1
    first.replay()
    second.replay()
    assert (values(x), values(y)) == ({2.0}, {2.0})


def test_a_capturing_stream_waits_for_outside_work_only_through_an_external_event(quiet_device):
    # An ordinary event recorded outside any capture would cross the capture's boundary
    # (cudaErrorStreamCaptureIsolation); an external one becomes a wait node of the graph.
    x = warmed(0.0, COUNT)
    producer = cuda.Stream()
    ordinary, external = cuda.Event(), cuda.Event(external=True)
    ordinary.record(producer)
    external.record(producer)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureIsolation"):
            cuda.current_stream().wait_event(ordinary)
        with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureIsolation"):
            ordinary.wait()
        external.wait()
        x += 1
    g.replay()
    assert values(x) == {1.0}
    ordinary.synchronize()


def test_the_legacy_default_stream_cannot_join_a_capture(quiet_device):
    # CUDA refuses the wait (cudaErrorStreamCaptureImplicit); the runtime refuses it first, and
    # the capture goes on.
    x = warmed(0.0, COUNT)
    legacy = cuda.current_stream()
    assert legacy.cuda_stream == 0
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
        marker = cuda.current_stream().record_event()
        with pytest.raises(RuntimeError, match="legacy default stream.*cudaErrorStreamCaptureImplicit"):
            legacy.wait_event(marker)
        x += 1
    g.replay()
    assert values(x) == {2.0}


@pytest.mark.parametrize("node", ["if", "if_else"])
def test_a_body_with_an_unjoined_fork_refuses_to_end_and_stays_open(quiet_device, node):
    # CUDA would fail the body's end (cudaErrorStreamCaptureUnjoined); the refusal changes
    # nothing, so joining back and ending again completes the node.
    x, y = warmed(0.0, COUNT), warmed(0.0, COUNT)
    flag = tp.full((1,), True, dtype=tp.bool, device="cuda")
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        if node == "if":
            g.begin_capture_to_if_node(flag)
        else:
            g.begin_capture_to_if_else_node(flag)
        body = cuda.current_stream()
        side.wait_stream(body)
        with cuda.stream(side):
            y += 1
        ending = g.end_capture_to_conditional_node if node == "if" \
            else g.begin_capture_to_next_body
        with pytest.raises(RuntimeError, match=named(side) + ".*still open"):
            ending()
        assert cuda.current_stream() == body and capturing_on(side)
        body.wait_stream(side)
        ending()
        if node == "if_else":
            x += 10  # the else body
            g.end_capture_to_conditional_node()
        x += 1
    g.replay()
    assert (values(x), values(y)) == ({1.0}, {1.0})


def test_a_capture_discarded_with_an_unjoined_fork_in_a_body_leaves_everything_usable(
        quiet_device):
    # The body's capture is ended joined (CUDA cannot end it otherwise), then discarded.
    x, y = warmed(0.0, COUNT), warmed(0.0, COUNT)
    flag = tp.full((1,), True, dtype=tp.bool, device="cuda")
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with pytest.raises(KeyError):
        with cuda.graph(g):
            g.begin_capture_to_while_node(flag)
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):
                y += 1
            raise KeyError("the body failed")
    assert not graphs.is_current_stream_capturing() and not capturing_on(side)
    with cuda.stream(side):
        y += 1
    side.synchronize()
    with cuda.graph(g):
        x += 1
    g.replay()
    assert (values(x), values(y)) == ({1.0}, {1.0})
