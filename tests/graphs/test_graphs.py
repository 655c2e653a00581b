"""CUDA graph capture and replay on a real GPU: replay, pools, failure paths, threads, interop."""
import concurrent.futures
import gc
import os
import threading

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from tests.graphs.graph_helpers import N, values, warmed
from tests.peers import import_or_skip

pytestmark = pytest.mark.gpu


def notes(error):
    return " ".join(getattr(error, "__notes__", []))


# -- capture and replay ------------------------------------------------------------------------


def test_capture_records_without_running_and_each_replay_runs_once(quiet_device):
    x = warmed(1.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    assert values(x) == {1.0}
    for expected in (2.0, 3.0, 4.0):
        g.replay()
        assert values(x) == {expected}


def test_capture_end_instantiates_so_instantiate_is_a_no_op(quiet_device):
    x = warmed(0.0)
    g = cuda.CUDAGraph()
    g.capture_begin()
    x += 5
    g.capture_end()
    g.instantiate()
    g.instantiate()
    g.replay()
    assert values(x) == {5.0}


def test_outputs_allocated_during_capture_follow_the_static_input(quiet_device):
    static_input = warmed(1.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        out = static_input * 2
    static_input.fill_(3.0)
    g.replay()
    assert values(out) == {6.0}
    static_input.fill_(-1.0)
    g.replay()
    assert values(out) == {-2.0}


def test_replay_on_a_given_stream_and_on_the_current_stream(quiet_device):
    x = warmed(0.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    given = cuda.Stream()
    g.replay(stream=given)
    given.synchronize()
    assert set(x.tolist()) == {1.0}
    current = cuda.Stream()
    with cuda.stream(current):
        g.replay()
    current.synchronize()
    assert set(x.tolist()) == {2.0}


def test_default_capture_stream_is_the_side_stream_and_the_previous_stream_returns(quiet_device):
    x = warmed()
    before = accelerator.current_stream()
    seen = []
    for _ in range(2):
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            seen.append(accelerator.current_stream())
            assert graphs.is_current_stream_capturing()
            x += 1
        assert accelerator.current_stream() == before
        assert not graphs.is_current_stream_capturing()
    assert seen[0] == seen[1] != before  # one dedicated side stream per device


def test_capture_on_a_given_stream_makes_it_current_for_the_body(quiet_device):
    x = warmed()
    chosen = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=chosen):
        assert accelerator.current_stream() == chosen
        x += 1
    g.replay()
    assert values(x) == {1.0}


def test_accelerator_graph_captures_on_the_current_stream_or_the_side_stream(quiet_device):
    x = warmed()
    chosen = cuda.Stream()
    with cuda.stream(chosen):
        with accelerator.Graph() as g:
            assert accelerator.current_stream() == chosen
            x += 1
        assert accelerator.current_stream() == chosen
    default = accelerator.current_stream()
    with accelerator.Graph(capture_error_mode="thread_local") as h:  # the legacy stream cannot
        assert accelerator.current_stream() != default
        x += 10
    assert accelerator.current_stream() == default
    g.replay()
    h.replay()
    assert values(x) == {11.0}
    assert g.pool() == g.pool_id and g.pool_id[1] == 0 and g.pool_id[0] > 0


def test_keep_graph_keeps_the_template_for_debug_dump_and_export_dot(quiet_device, tmp_path):
    x = warmed()
    kept = accelerator.Graph(keep_graph=True)
    with kept:
        x += 1
    kept.debug_dump(tmp_path / "kept.dot")
    assert "digraph" in (tmp_path / "kept.dot").read_text()
    plain = cuda.CUDAGraph()
    with cuda.graph(plain):
        x += 1
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        plain.debug_dump(str(tmp_path / "plain.dot"))
    assert graphs.export_dot(str(tmp_path / "last.dot")) == str(tmp_path / "last.dot")
    assert "digraph" in (tmp_path / "last.dot").read_text()
    debug = cuda.CUDAGraph()
    debug.enable_debug_mode()
    with cuda.graph(debug):
        x += 1
    debug.debug_dump(str(tmp_path / "debug.dot"))
    debug.debug_dump(str(tmp_path / "again.dot"))  # repeatable while the graph lives
    assert "digraph" in (tmp_path / "again.dot").read_text()
    kept.replay()
    assert values(x) == {1.0}


def test_an_empty_capture_warns(quiet_device):
    g = cuda.CUDAGraph()
    with pytest.warns(RuntimeWarning, match="is empty"):
        with cuda.graph(g):
            pass
    g.replay()


# -- conditional nodes ---------------------------------------------------------------------------


def test_if_node_runs_its_body_only_while_the_predicate_is_true(quiet_device):
    x = warmed(0.0, 1024)
    flag = tp.zeros(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
        g.begin_capture_to_if_node(flag)
        x += 10
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(x) == {1.0}
    flag.fill_(True)
    g.replay()
    assert values(x) == {12.0}


def test_a_pytorch_tensor_can_be_the_predicate(quiet_device):
    torch = import_or_skip("torch")
    x = warmed(0.0, 1024)
    flag = torch.zeros(1, dtype=torch.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_node(flag)  # shared through __cuda_array_interface__, no copy
        x += 1
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(x) == {0.0}
    flag.fill_(True)
    torch.cuda.synchronize()
    g.replay()
    assert values(x) == {1.0}


def test_while_node_loops_until_its_body_clears_the_predicate(quiet_device):
    counter = warmed(0.0, 1)
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    keep_going.copy_(counter < 5)  # the comparison and copy kernels load before the capture
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        keep_going.copy_(counter < 5)
        g.begin_capture_to_while_node(keep_going)
        counter += 1
        keep_going.copy_(counter < 5)  # allocates inside the body: from the body's pool
        g.end_capture_to_conditional_node()
    assert values(counter) == {0.0}
    g.replay()
    assert values(counter) == {5.0}
    counter.fill_(2.0)
    g.replay()
    assert values(counter) == {5.0}
    counter.fill_(7.0)
    g.replay()
    assert values(counter) == {7.0}  # tested before the first pass: no iteration


def test_a_while_body_keeps_the_memory_it_allocated_until_the_graph_is_reset(quiet_device):
    # The body's temporaries come from a pool of its own, and one it freed during the capture
    # is held for the graph, which writes it on every pass: empty_cache() after the capture
    # gives none of that memory back to CUDA; reset() does.
    counter = warmed(0.0, 1)
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    keep_going.copy_(counter < 5)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_while_node(keep_going)
        counter += 1
        keep_going.copy_(counter < 5)  # a temporary allocated and freed inside the body
        g.end_capture_to_conditional_node()
    reserved, frees = memory.memory_reserved(), memory.memory_stats()["num_device_free"]
    memory.empty_cache()
    assert memory.memory_reserved() == reserved
    assert memory.memory_stats()["num_device_free"] == frees
    g.replay()
    assert values(counter) == {5.0}
    g.reset()
    memory.empty_cache()
    assert memory.memory_reserved() < reserved


def test_set_conditional_handle_refreshes_the_innermost_node(quiet_device):
    counter = warmed(0.0, 1)
    stop = tp.zeros(1, dtype=tp.bool, device="cuda")
    go = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_while_node(go)
        counter += 1
        g.set_conditional_handle_for_current_node(stop)  # one pass only
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(counter) == {1.0}


def test_conditional_node_misuse_is_a_clear_error(quiet_device):
    x = warmed(0.0, 1024)
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    g.capture_begin()
    with pytest.raises(TypeError, match="scalar_pred must be a tensor"):
        g.begin_capture_to_if_node(True)
    with pytest.raises(ValueError, match="single-element bool tensor"):
        g.begin_capture_to_if_node(tp.ones(2, dtype=tp.bool, device="cuda"))
    g.begin_capture_to_if_node(flag)
    x += 1
    with pytest.raises(RuntimeError, match="still open"):
        g.capture_end()
    g.end_capture_to_conditional_node()
    g.capture_end()
    g.replay()
    assert values(x) == {1.0}


def test_an_exception_inside_a_conditional_body_unwinds_everything(quiet_device):
    x = warmed(0.0, 1024)
    before = accelerator.current_stream()
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with pytest.raises(KeyError):
        with cuda.graph(g):
            g.begin_capture_to_if_node(flag)
            x += 1
            raise KeyError("inside the body")
    gc.collect()
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 0
    _assert_clean_after_failure(g, x, before)


# -- clear errors --------------------------------------------------------------------------------


def test_misuse_gives_clear_runtime_errors(quiet_device):
    x = warmed()
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="without an open capture"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.replay()
    g.capture_begin()
    with pytest.raises(RuntimeError, match="already capturing"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="still capturing"):
        g.replay()
    x += 1
    g.capture_end()
    with pytest.raises(RuntimeError, match="already holds a captured graph"):
        g.capture_begin()
    g.reset()
    with pytest.raises(RuntimeError, match="reset"):
        g.replay()
    with pytest.raises(RuntimeError, match="legacy default stream"):
        g.capture_begin(stream=cuda.external_stream(0))
    with cuda.graph(g):  # recapturing after reset works
        x += 1
    g.replay()
    assert values(x) == {1.0}


def test_nested_capture_on_one_stream_is_refused(quiet_device):
    x = warmed()
    shared = cuda.Stream()
    outer, inner = cuda.CUDAGraph(), cuda.CUDAGraph()
    outer.capture_begin(stream=shared)
    with pytest.raises(RuntimeError, match="captures cannot nest on one stream"):
        inner.capture_begin(stream=shared)
    assert inner.pool_id is None
    x += 1
    outer.capture_end()
    outer.replay()
    assert values(x) == {1.0}


def test_replay_on_a_stream_of_another_device_is_refused(quiet_device):
    if accelerator.device_count() < 2:
        pytest.skip("needs two GPUs")
    x = warmed()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    with pytest.raises(ValueError, match="captured on cuda:0"):
        g.replay(stream=cuda.Stream(device=1))


# -- private pools -------------------------------------------------------------------------------


def test_capture_memory_lives_in_a_private_pool_until_reset_and_outputs_are_gone(quiet_device):
    x = warmed(1.0)
    memory.empty_cache()
    reserved_before = memory.memory_reserved()
    assert memory.memory_stats()["num_graph_pools"] == 0
    g = cuda.CUDAGraph()
    with cuda.graph(g):  # a fresh pool grows (cudaMalloc) inside a global-mode capture
        out = x * 2
    assert memory.memory_stats()["num_graph_pools"] == 1
    assert memory.memory_reserved() > reserved_before
    first, second = g.pool_id
    assert first > 0 and second == 0
    g.replay()
    assert values(out) == {2.0}
    g.reset()
    assert g.pool_id is None
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 1  # out still holds its segment
    del out
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 0
    assert memory.memory_reserved() == reserved_before


def test_graphs_share_a_pool_through_a_handle_a_graph_or_its_pool_id(quiet_device):
    x = warmed(1.0)
    handle = graphs.graph_pool_handle()
    first, second, third = cuda.CUDAGraph(), cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(first, pool=handle):
        out1 = x * 2
    with cuda.graph(second, pool=first):
        out2 = x * 3
    with cuda.graph(third, pool=second.pool_id):
        out3 = x * 4
    assert first.pool_id == second.pool_id == third.pool_id == handle
    assert memory.memory_stats()["num_graph_pools"] == 1
    for g in (first, second, third):
        g.replay()
    assert (values(out1), values(out2), values(out3)) == ({2.0}, {3.0}, {4.0})
    first.reset()
    second.reset()
    del out1, out2, out3
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 1  # third still holds it
    third.reset()
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 0


def test_sharing_the_pool_of_a_graph_without_one_is_a_value_error(quiet_device):
    with pytest.raises(ValueError, match="holds no pool"):
        with cuda.graph(cuda.CUDAGraph(), pool=cuda.CUDAGraph()):
            pass
    assert not graphs.is_current_stream_capturing()


def test_empty_cache_during_capture_frees_nothing_and_keeps_the_capture_valid(quiet_device):
    x = warmed(1.0)
    # Larger than what is left of x's 20 MiB segment, so it gets a segment of its own: once
    # freed, a whole free segment, which empty_cache() would cudaFree.
    cached = tp.empty((8 * N,), device="cuda")
    del cached
    reserved = memory.memory_reserved()
    g = cuda.CUDAGraph()
    g.capture_begin()
    memory.empty_cache()
    assert memory.memory_stats()["capturing"] == 1
    x += 1
    assert memory.memory_reserved() >= reserved
    g.capture_end()
    g.replay()
    assert values(x) == {2.0}
    memory.empty_cache()
    assert memory.memory_reserved() < reserved


# -- failure paths -------------------------------------------------------------------------------


def _assert_clean_after_failure(g, x, stream_before):
    assert accelerator.current_stream() == stream_before
    assert not graphs.is_current_stream_capturing()
    assert memory.memory_stats()["capturing"] == 0
    assert g.pool_id is None
    with cuda.graph(g):  # the next capture succeeds
        x += 1
    g.replay()


def test_a_synchronising_call_inside_the_body_raises_and_everything_is_released(quiet_device):
    x = warmed(0.0)
    pools_before = memory.memory_stats()["num_graph_pools"]
    before = accelerator.current_stream()
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="cudaErrorStreamCaptureUnsupported") as raised:
        with cuda.graph(g):
            out = x * 2
            accelerator.synchronize()
    assert "capture was ended and discarded" in notes(raised.value)
    del out
    memory.empty_cache()
    # The failed capture's pool is gone.
    assert memory.memory_stats()["num_graph_pools"] == pools_before
    _assert_clean_after_failure(g, x, before)
    assert values(x) == {1.0}


def test_capture_end_after_an_illegal_call_reports_the_failed_capture(quiet_device):
    x = warmed(0.0)
    before = accelerator.current_stream()
    g = cuda.CUDAGraph()
    g.capture_begin()
    x += 1
    # Waiting on a capturing stream is illegal, and invalidates the capture; tensorplay's own
    # calls refuse it beforehand (test_capture_safety.py), a raw CUDA call does not.
    from cuda.bindings import runtime
    status, = runtime.cudaStreamSynchronize(accelerator.current_stream().cuda_stream)
    assert status != runtime.cudaError_t.cudaSuccess
    with pytest.raises(RuntimeError, match="graph capture on cuda:0 failed.*discarded"):
        g.capture_end()
    _assert_clean_after_failure(g, x, before)
    assert values(x) == {1.0}


def test_an_exception_from_the_body_is_never_masked(quiet_device):
    x = warmed(0.0)
    before = accelerator.current_stream()
    g = cuda.CUDAGraph()
    with pytest.raises(KeyError, match="from the body") as raised:
        with cuda.graph(g):
            x += 1
            raise KeyError("from the body")
    assert "capture was ended and discarded" in notes(raised.value)
    _assert_clean_after_failure(g, x, before)
    assert values(x) == {1.0}


def test_accelerator_graph_body_failure_restores_the_stream(quiet_device):
    x = warmed(0.0)
    chosen = cuda.Stream()
    with cuda.stream(chosen):
        g = accelerator.Graph()
        with pytest.raises(ZeroDivisionError):
            with g:
                x += 1
                1 / 0
        assert accelerator.current_stream() == chosen
        assert not graphs.is_current_stream_capturing()
        with g:
            x += 1
        g.replay()
    chosen.synchronize()
    assert set(x.tolist()) == {1.0}


# -- capture modes and threads -------------------------------------------------------------------


def _cuda_malloc(pointers):
    """A raw cudaMalloc, unsafe during capture; what it allocated is freed after the capture."""
    from cuda.bindings import runtime
    status, pointer = runtime.cudaMalloc(256)
    if status == runtime.cudaError_t.cudaSuccess:
        pointers.append(pointer)
    return status.name


@pytest.fixture
def raw_pointers():
    pointers = []
    yield pointers
    from cuda.bindings import runtime
    for pointer in pointers:
        runtime.cudaFree(pointer)


def test_relaxed_mode_allows_unsafe_calls_on_the_capturing_thread(quiet_device, raw_pointers):
    x = warmed(0.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g, capture_error_mode="relaxed"):
        status = _cuda_malloc(raw_pointers)
        x += 1
    assert status == "cudaSuccess"
    g.replay()
    assert values(x) == {1.0}


def test_thread_local_mode_refuses_unsafe_calls_on_the_capturing_thread(quiet_device,
                                                                        raw_pointers):
    x = warmed(0.0)
    before = accelerator.current_stream()
    g = cuda.CUDAGraph()
    g.capture_begin(capture_error_mode="thread_local")
    assert _cuda_malloc(raw_pointers) == "cudaErrorStreamCaptureUnsupported"
    with pytest.raises(RuntimeError, match="failed"):
        g.capture_end()
    _assert_clean_after_failure(g, x, before)


@pytest.mark.parametrize("mode, other_thread_status, capture_survives", [
    ("global", "cudaErrorStreamCaptureUnsupported", False),
    ("thread_local", "cudaSuccess", True),
])
def test_unsafe_work_on_another_thread_during_capture(quiet_device, raw_pointers, mode,
                                                      other_thread_status, capture_survives):
    x = warmed(0.0)
    with concurrent.futures.ThreadPoolExecutor(1) as other_thread:
        # The thread's own CUDA setup happens before the capture.
        assert other_thread.submit(_cuda_malloc, raw_pointers).result() == "cudaSuccess"
        g = cuda.CUDAGraph()
        g.capture_begin(capture_error_mode=mode)
        x += 1
        assert other_thread.submit(_cuda_malloc, raw_pointers).result() == other_thread_status
        if capture_survives:
            g.capture_end()
            g.replay()
            assert values(x) == {1.0}
        else:
            with pytest.raises(RuntimeError, match="failed"):
                g.capture_end()
            assert memory.memory_stats()["capturing"] == 0


def test_two_threads_capture_on_two_streams_at_once_in_thread_local_mode(quiet_device):
    inputs = [warmed(float(k)) for k in (1, 2)]
    both_capturing = threading.Barrier(2, timeout=30)
    results = {}

    def capture(k):
        g = cuda.CUDAGraph()
        g.capture_begin(stream=cuda.Stream(), capture_error_mode="thread_local")
        try:
            out = inputs[k] * 10
            both_capturing.wait()  # both captures are open at this point
            capturing = graphs.is_current_stream_capturing()
            both_capturing.wait()
        finally:
            g.capture_end()
        results[k] = (g, out, capturing)

    threads = [threading.Thread(target=capture, args=(k,)) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [0, 1]
    assert results[0][0].pool_id != results[1][0].pool_id
    for k, (g, out, capturing) in results.items():
        assert capturing
        inputs[k].fill_(float(k + 5))
        g.replay()
        assert values(out) == {10.0 * (k + 5)}


def test_is_current_stream_capturing_tells_the_truth_on_every_stream(quiet_device):
    x = warmed()
    capture_stream, other = cuda.Stream(), cuda.Stream()
    g = cuda.CUDAGraph()
    g.capture_begin(stream=capture_stream, capture_error_mode="thread_local")
    try:
        assert graphs.is_current_stream_capturing()
        with cuda.stream(other):
            assert not graphs.is_current_stream_capturing()
        with cuda.stream(capture_stream):
            assert graphs.is_current_stream_capturing()
        with concurrent.futures.ThreadPoolExecutor(1) as other_thread:
            assert other_thread.submit(graphs.is_current_stream_capturing).result() is False
        x += 1
    finally:
        g.capture_end()
    assert not graphs.is_current_stream_capturing()


def test_capture_on_another_device_switches_and_restores_the_device(quiet_device):
    if accelerator.device_count() < 2:
        pytest.skip("needs two GPUs")
    accelerator.set_device_index(0)
    with accelerator.device_index(1):
        x = warmed()
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=cuda.Stream(device=1)):
        assert accelerator.current_device_index() == 1
        x += 1
    assert accelerator.current_device_index() == 0
    g.replay()
    accelerator.synchronize(1)
    assert set(x.tolist()) == {1.0}


# -- interop -------------------------------------------------------------------------------------


def test_capture_on_a_pytorch_stream_with_a_pytorch_tensor_as_static_input(quiet_device):
    torch = import_or_skip("torch")
    torch_stream = torch.cuda.Stream()
    shared = (cuda.external_stream(torch_stream) if hasattr(torch_stream, "__cuda_stream__")
              else cuda.external_stream(torch_stream.cuda_stream))
    static_input = torch.ones(N, device="cuda")
    counter = torch.zeros(4, device="cuda")
    view = tp.as_tensor(static_input)  # PyTorch's memory, no copy
    warmed()
    with torch.cuda.stream(torch_stream):
        counter.add_(0)  # PyTorch's kernel is loaded before the capture
    torch.cuda.synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=shared):
        out = view * 2
        with torch.cuda.stream(torch_stream):
            assert torch.cuda.is_current_stream_capturing()
            counter.add_(1)
    static_input.fill_(5.0)
    torch.cuda.synchronize()
    g.replay()
    g.replay()
    accelerator.synchronize()
    assert values(out) == {10.0}
    assert counter.tolist() == [2.0] * 4


def test_capture_on_a_cupy_stream(quiet_device):
    cupy = import_or_skip("cupy")
    cupy_stream = cupy.cuda.Stream(non_blocking=True)
    shared = (cuda.external_stream(cupy_stream) if hasattr(cupy_stream, "__cuda_stream__")
              else cuda.external_stream(cupy_stream.ptr))
    counter = cupy.zeros(4, dtype=cupy.float32)
    counter += 0  # compile CuPy's kernel before the capture
    x = warmed()
    cupy.cuda.Device().synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g, stream=shared):
        x += 1
        with cupy_stream:
            counter += 1
    for _ in range(3):
        g.replay()
    accelerator.synchronize()
    assert values(x) == {3.0} and counter.tolist() == [3.0] * 4


def test_garbage_collection_on_entry_is_opt_in(quiet_device, monkeypatch):
    collected = []
    monkeypatch.delenv("TENSORPLAY_GRAPH_GC", raising=False)
    monkeypatch.setattr(gc, "collect", lambda *args: collected.append(args) or 0)
    g = cuda.CUDAGraph()
    x = warmed()
    with cuda.graph(g):
        x += 1
    assert collected == []
    monkeypatch.setitem(os.environ, "TENSORPLAY_GRAPH_GC", "1")
    g.reset()
    with cuda.graph(g):
        x += 1
    assert len(collected) == 1


def test_report_demonstration_compares_one_replay_with_eager_launches(quiet_device):
    from tensorplay._python import report
    title, timings = report.capture_lines()
    assert title.startswith("capture/replay demonstration on cuda:0")
    assert "eager launches" in timings and "one replay()" in timings
    assert timings.endswith("replay gives the eager result: True")


# -- graph-safe random numbers -------------------------------------------------------------------


def test_replays_draw_fresh_random_numbers_and_advance_the_generator_as_eager_runs(quiet_device):
    random = accelerator.random
    out = tp.empty((4096,), device="cuda")
    out.uniform_()  # kernels loaded before the capture
    random.manual_seed(2024)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        out.uniform_()
        noise = tp.randn(4096, device="cuda")
    after_capture = random.get_rng_state().tolist()
    draws = []
    for _ in range(3):
        g.replay()
        accelerator.synchronize()
        draws.append((out.tolist(), noise.tolist()))
    assert len({tuple(u) for u, _ in draws}) == 3 and len({tuple(n) for _, n in draws}) == 3
    replayed_state = random.get_rng_state().tolist()
    # The same work run eagerly three times from the same state draws the same numbers.
    random.set_rng_state(bytes(after_capture))
    for uniforms, normals in draws:
        out.uniform_()
        again = tp.randn(4096, device="cuda")
        assert out.tolist() == uniforms and again.tolist() == normals
    assert random.get_rng_state().tolist() == replayed_state


def test_a_graph_that_draws_nothing_leaves_the_generator_alone(quiet_device):
    x = warmed(0.0)
    random = accelerator.random
    state = random.get_rng_state().tolist()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    for _ in range(5):
        g.replay()
    assert random.get_rng_state().tolist() == state
    assert values(x) == {5.0}
