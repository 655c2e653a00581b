"""Capture never corrupts memory: lifetimes of what graphs reference, calls made during a
capture, and misuse refused before it does harm (docs/design.md, "Capture rules")."""
import concurrent.futures
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from tests.graphs.graph_helpers import N, reset_and_recapture, values, warmed

pytestmark = pytest.mark.gpu


def usable():
    """The library still captures and replays."""
    x = warmed(1.0, 1024)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    g.replay()
    assert values(x) == {2.0}


# -- lifetimes ---------------------------------------------------------------------------------

def test_pytorchs_reset_and_recapture_sequence_replays_without_a_fault():
    result = reset_and_recapture("plain")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


COLD_KERNELS = textwrap.dedent("""
    import tensorplay as tp
    from tensorplay import accelerator, cuda
    x = tp.full((1000,), 2.0, device="cuda")
    accelerator.synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g):  # global mode; no kernel of these ops was compiled or loaded before
        y = (x * 3).sqrt()
        z = tp.where(y > 2.0, y, -y)
    g.replay()
    print(all(abs(v - 6.0 ** 0.5) < 1e-6 for v in z.tolist()))
""")


def test_kernels_first_used_inside_a_global_capture_need_no_warm_up(tmp_path):
    # A fresh process and an empty kernel cache: compiling and loading happen inside the
    # capture, which must neither invalidate it nor fail (nvrtc.pyx loads in relaxed mode).
    result = subprocess.run([sys.executable, "-c", COLD_KERNELS], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TENSORPLAY_CACHE_DIR": str(tmp_path)})
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr[-2000:]


def test_a_block_freed_during_a_capture_stays_reserved_until_the_graph_is_reset(quiet_device):
    # Larger than what is left of the earlier segments: a segment of its own, which
    # empty_cache() would give back to CUDA if the block were free.
    dropped = warmed(1.0, 8 * N)
    memory.empty_cache()
    reserved = memory.memory_reserved()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        dropped += 1          # the graph writes it ...
        out = dropped * 2
        del dropped           # ... and the capture frees it
    memory.empty_cache()
    assert memory.memory_reserved() >= reserved  # still held for the graph
    for _ in range(3):
        g.replay()
    assert values(out) == {8.0}  # (1 + 3) * 2: the graph's writes land in held memory
    g.reset()
    del out
    memory.empty_cache()
    assert memory.memory_reserved() < reserved


def _captured_behind_slow_work(work):
    """A graph of 300 adds over 64 MiB (some 30 us each on an H200), so that the host acts while
    its replay is still queued, then work(); returns the graph and what work returned."""
    slow = warmed(0.0, 16 * N)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        for _ in range(300):
            slow += 1
        result = work()
    return g, result


@pytest.mark.parametrize("release", ["reset", "delete"])
def test_a_replay_still_queued_keeps_the_blocks_its_graph_lets_go(quiet_device, release):
    # docs/design.md, "Capture rules" (Note [Streams a graph was launched on] in graph.pyx): the
    # blocks a graph lets go of wait for the streams it was launched on before any reuse.
    written = [warmed(1.0, N)]  # allocated on the legacy default stream, in the shared pool

    def write_then_free():
        written[0] += 1
        address = written[0].data_ptr()
        written[0] = written[0] * 2  # the capture frees the block it wrote: held for the graph
        return address

    g, address = _captured_behind_slow_work(write_then_free)
    replayer = cuda.Stream()
    g.replay(stream=replayer)
    if release == "reset":
        g.reset()
    else:
        del g  # its last reference: deleted now
    assert not replayer.query()  # the replay is still running
    fresh = tp.empty((N,), device="cuda")  # the legacy stream's cache, the held block's size
    assert fresh.data_ptr() != address
    replayer.synchronize()
    assert values(written[0]) == {4.0}
    del fresh


def test_a_replay_still_queued_keeps_the_tensor_rebind_replaced(quiet_device):
    static = warmed(1.0, N)
    g = _captured_behind_slow_work(lambda: static.add_(1))[0]  # add_ returns static: not kept
    replayer = cuda.Stream()
    g.replay(stream=replayer)
    address = static.data_ptr()
    g.rebind({static: tp.full((N,), 5.0, device="cuda")})
    del static  # the user's last reference: the queued replay still writes it
    assert not replayer.query()  # the replay is still running
    fresh = tp.empty((N,), device="cuda")
    assert fresh.data_ptr() != address
    replayer.synchronize()
    del fresh


def test_outputs_outlive_reset_deletion_and_the_last_sharer(quiet_device):
    x = warmed(1.0)
    reserved = memory.memory_reserved()
    handle = graphs.graph_pool_handle()
    first, second = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(first, pool=handle):
        out1 = x * 2
    with cuda.graph(second, pool=handle):
        out2 = x * 3
    first.replay()
    second.replay()
    first.reset()
    del second
    gc.collect()
    memory.empty_cache()
    # No graph holds the pool, but the outputs still back it: their memory stays valid.
    assert memory.memory_stats()["num_graph_pools"] == 1
    assert (values(out1), values(out2)) == ({2.0}, {3.0})
    y = tp.full((N,), 9.0, device="cuda")  # reuse of the cache must not land on them
    assert (values(out1), values(out2)) == ({2.0}, {3.0})
    del out1
    memory.empty_cache()
    assert values(out2) == {3.0}
    del out2, y
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 0
    assert memory.memory_reserved() <= reserved + 4 * N


def test_recapture_into_a_reset_graph_reads_tensors_of_the_earlier_capture(quiet_device):
    x = warmed(1.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        out = x * 2
    g.replay()
    g.reset()
    with cuda.graph(g):
        out += 5      # a tensor of the reset capture's pool
        out = out * 2  # rebinding frees it during the capture
    memory.empty_cache()
    g.replay()
    assert values(out) == {14.0}
    g.replay()
    assert values(out) == {24.0}  # (2 + 5 + 5) * 2: the first output keeps its writes


def test_export_dot_does_not_keep_a_deleted_graph_alive(quiet_device, tmp_path):
    x = warmed(0.0, 1024)
    g = accelerator.Graph(keep_graph=True)
    with g:
        x += 1
    alive = weakref.ref(g)
    graphs.export_dot(str(tmp_path / "kept.dot"))
    assert (tmp_path / "kept.dot").read_text().startswith("digraph")
    del g
    gc.collect()
    assert alive() is None
    with pytest.raises(RuntimeError, match="has been deleted since"):
        graphs.export_dot(str(tmp_path / "gone.dot"))
    assert not (tmp_path / "gone.dot").exists()
    usable()
    graphs.export_dot(str(tmp_path / "next.dot"))  # the newest capture, not kept by its graph


def test_the_current_stream_lives_while_it_is_current(quiet_device):
    x = warmed(1.0, 1024)
    previous = accelerator.current_stream()
    accelerator.set_stream(cuda.Stream())  # the caller keeps no reference
    gc.collect()
    current = accelerator.current_stream()
    assert current != previous
    x += 1  # launched on the stream nobody but the thread holds
    current.synchronize()
    assert values(x) == {2.0}
    del current
    gc.collect()
    with cuda.stream(cuda.Stream()):
        gc.collect()
        x += 1
        accelerator.current_stream().synchronize()
    accelerator.set_stream(previous)
    assert values(x) == {3.0}


def test_record_stream_on_a_capturing_stream_works(quiet_device):
    x = warmed(1.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        temporary = x * 2
        temporary.record_stream(accelerator.current_stream())
        x.copy_(temporary + 1)
        del temporary
    g.replay()
    assert values(x) == {3.0}
    g.reset()
    usable()


# -- calls during capture ------------------------------------------------------------------------


def test_synchronising_calls_on_a_capturing_stream_are_refused_and_the_capture_survives(
        quiet_device):
    x = warmed(0.0)
    other = cuda.Stream()
    g = cuda.CUDAGraph()
    g.capture_begin()
    x += 1
    capture_stream = accelerator.current_stream()
    event = capture_stream.record_event()  # recorded into the capture
    with pytest.raises(RuntimeError, match=r"synchronize\(\) cannot run while a graph capture"):
        accelerator.synchronize()
    with pytest.raises(RuntimeError, match=r"Stream.synchronize\(\) cannot run on stream"):
        capture_stream.synchronize()
    with pytest.raises(RuntimeError, match=r"Stream.query\(\) cannot run on stream"):
        capture_stream.query()
    with pytest.raises(RuntimeError, match="last recorded inside a graph capture"):
        event.query()
    with pytest.raises(RuntimeError, match="last recorded inside a graph capture"):
        event.synchronize()
    # Legal in every mode: queries of streams that do not capture, new streams and events.
    other.synchronize()
    assert other.query()
    eager = cuda.Event()
    memory.memory_stats()
    memory.empty_cache()  # frees nothing while a capture is open
    # A stream that waits on the captured event joins the capture (CUDA Programming Guide,
    # "Cross-stream Dependencies and Events"), and joins back before it ends.
    joined = cuda.Stream()
    joined.wait_event(event)
    with cuda.stream(joined):
        assert graphs.is_current_stream_capturing()
        x += 1
    capture_stream.wait_stream(joined)
    g.capture_end()
    with pytest.raises(RuntimeError, match="capture"):
        other.wait_event(event)  # the capture has ended: its event orders no stream
    g.replay()
    assert values(x) == {2.0}
    eager.record(other)
    eager.synchronize()
    event.record()  # recorded eagerly again: usable as before
    event.synchronize()
    other.wait_event(event)


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_another_thread_synchronises_its_own_stream_during_a_capture(quiet_device, mode):
    x = warmed(0.0)
    with concurrent.futures.ThreadPoolExecutor(1) as other_thread:
        def eager_work():
            s = cuda.Stream()
            with cuda.stream(s):
                y = tp.full((1024,), 3.0, device="cuda")
                z = y * 2
                s.synchronize()
            e = cuda.Event()
            e.record(s)
            e.synchronize()
            del y
            return z.tolist()[0]

        assert other_thread.submit(eager_work).result() == 6.0  # warm the thread
        g = cuda.CUDAGraph()
        g.capture_begin(capture_error_mode=mode)
        x += 1
        assert other_thread.submit(eager_work).result() == 6.0
        g.capture_end()  # the capture survived the other thread's calls
    g.replay()
    assert values(x) == {1.0}


def test_entering_a_capture_on_a_capturing_stream_is_refused_and_the_outer_one_survives(
        quiet_device):
    x = warmed(0.0)
    outer, inner = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(outer):
        x += 1
        with pytest.raises(RuntimeError, match="already capturing a graph"):
            with cuda.graph(inner):  # the same side stream
                pass
        with pytest.raises(RuntimeError, match="already capturing a graph"):
            with accelerator.Graph():  # the capture stream is current
                pass
        x += 1
    outer.replay()
    assert values(x) == {2.0}
    assert memory.memory_stats()["capturing"] == 0


def test_a_capture_on_another_stream_inside_a_capture_keeps_both(quiet_device):
    x, y = warmed(0.0), warmed(0.0)
    outer, inner = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(outer):
        x += 1
        # Entering skips the device synchronize and the cache flush: either would invalidate
        # the outer capture.
        with cuda.graph(inner, stream=cuda.Stream(), capture_error_mode="relaxed"):
            y += 2
        x += 1
    outer.replay()
    inner.replay()
    assert (values(x), values(y)) == ({2.0}, {2.0})


@pytest.mark.parametrize("mode", ["global", "thread_local"])
def test_ending_a_capture_from_another_thread_is_refused(quiet_device, mode):
    x = warmed(0.0)
    g = cuda.CUDAGraph()
    g.capture_begin(capture_error_mode=mode)
    x += 1
    with concurrent.futures.ThreadPoolExecutor(1) as other_thread:
        for call in (g.capture_end, g.reset):
            with pytest.raises(RuntimeError, match=f"began on thread .* in '{mode}' mode"):
                other_thread.submit(call).result()
    assert graphs.is_current_stream_capturing()
    g.capture_end()
    g.replay()
    assert values(x) == {1.0}


def test_a_relaxed_capture_may_end_on_another_thread_and_restores_the_stream(quiet_device):
    x = warmed(0.0)
    before = accelerator.current_stream()
    g = cuda.CUDAGraph()
    g.capture_begin(capture_error_mode="relaxed")
    x += 1
    assert accelerator.current_stream() != before
    thread = threading.Thread(target=g.capture_end)
    thread.start()
    thread.join(60)
    assert accelerator.current_stream() == before
    assert not graphs.is_current_stream_capturing()
    g.replay()
    assert values(x) == {1.0}


# -- misuse refused before it does harm ----------------------------------------------------------


def test_seeding_a_generator_an_open_capture_registered_changes_nothing(quiet_device):
    tp.manual_seed(7)
    cpu_seed = tp.initial_seed()
    device_state = accelerator.random.get_rng_state()
    x = warmed(0.0, 1024)
    g = cuda.CUDAGraph()
    g.capture_begin()
    x += 1
    for call, match in ((lambda: tp.manual_seed(11), "manual_seed"),
                        (lambda: tp.seed(), "seed"),
                        (lambda: accelerator.random.manual_seed_all(11), "manual_seed_all"),
                        (lambda: accelerator.random.manual_seed(11), "manual_seed"),
                        (lambda: accelerator.random.set_rng_state_all([device_state]),
                         "set_rng_state_all"),
                        (lambda: accelerator.random.set_rng_state(device_state), "set_state")):
        with pytest.raises(RuntimeError, match=rf"{match}\(\) cannot run while"):
            call()
    assert tp.initial_seed() == cpu_seed  # not even the CPU generator moved
    g.capture_end()
    assert accelerator.random.get_rng_state().tolist() == device_state.tolist()
    g.replay()
    assert values(x) == {1.0}


def test_a_switch_node_with_too_many_cases_is_refused_before_allocating(quiet_device):
    x = warmed(0.0, 1024)
    index = tp.zeros(1, dtype=tp.int32, device="cuda")
    g = cuda.CUDAGraph()
    g.capture_begin()
    allocated = memory.memory_allocated()
    with pytest.raises(ValueError, match="num_cases must be from 1 to 1024, got 1025"):
        g.begin_capture_to_switch_node(index, 1025)
    assert memory.memory_allocated() == allocated
    x += 1
    g.capture_end()
    g.replay()
    assert values(x) == {1.0}


def test_stage_and_launch_refuses_overlapping_pairs_and_skips_a_tensor_onto_itself(
        quiet_device):
    static = warmed(0.0, 1024)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        static += 1
    g.stage_and_launch([static], [static[0:1024]])  # the same tensor: no copy, then the replay
    assert values(static) == {1.0}
    whole = tp.full((2048,), 5.0, device="cuda")
    for statics, inputs, names in (
            ([whole[0:1024]], [whole[512:1536]], r"inputs\[0\] and static_inputs\[0\]"),
            ([whole[0:1024], whole[1024:2048]], [static, whole[0:1024]],
             r"inputs\[1\] and static_inputs\[0\]"),
            ([whole[0:1024], whole[512:1536]], [static, static],
             r"static_inputs\[0\] and static_inputs\[1\]")):
        with pytest.raises(ValueError, match=f"{names} overlap in memory.*Nothing was copied"):
            g.stage_and_launch(statics, inputs)
        assert values(whole) == {5.0} and values(static) == {1.0}  # nothing copied or run
    g.stage_and_launch([whole[0:1024]], [whole[1024:2048]])  # adjacent, not overlapping
    assert values(static) == {2.0}


def test_sizes_beyond_2_63_bytes_are_refused_with_the_size_named(quiet_device):
    for device in ("cpu", "cuda"):
        with pytest.raises(ValueError, match=r"float64 tensor of shape \(1152921504606846976,\) "
                                             r"would take 9223372036854775808 bytes"):
            tp.empty(1 << 60, dtype=tp.float64, device=device)
        with pytest.raises(ValueError, match="strides of 2\\*\\*63 elements or more"):
            tp.empty((0, 1 << 62, 4), device=device)
    x = tp.zeros(8, device="cuda")
    view = x[:: 1 << 70]  # one element: the huge step never becomes a stride
    assert view.shape == (1,) and view.stride() == (1,)
    usable()


def test_dump_paths_that_cannot_be_written_name_the_path(quiet_device, tmp_path):
    x = warmed(0.0, 1024)
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    with cuda.graph(g):
        x += 1
    with pytest.raises(ValueError, match="path contains a NUL character"):
        g.debug_dump(str(tmp_path / "a\0b.dot"))
    for target in (str(tmp_path / "missing" / "graph.dot"), "/dev/full"):
        with pytest.raises(OSError, match="cannot write the graph dump") as raised:
            g.debug_dump(target)
        assert raised.value.filename == target
        with pytest.raises(OSError, match="cannot write the graph dump"):
            graphs.export_dot(target)
    g.debug_dump(str(tmp_path / "graph.dot"))
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")
    g.replay()
    assert values(x) == {1.0}


def test_a_while_body_that_captured_no_work_is_refused_and_replay_ends(quiet_device):
    x = warmed(0.0, 1024)
    go = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    g.capture_begin()
    x += 1
    g.begin_capture_to_while_node(go)
    body_stream = accelerator.current_stream()
    with pytest.raises(RuntimeError,
                       match=f"captured no work: nothing was launched on its capture stream "
                             f"{body_stream.cuda_stream:#x}"):
        g.end_capture_to_conditional_node()
    x += 1
    g.capture_end()
    g.replay()  # would loop forever with go true, if the body had been kept as captured
    assert values(x) == {2.0}
    assert values(go) == {True}
