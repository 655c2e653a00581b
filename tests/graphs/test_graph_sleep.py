"""Graphs that sleep (docs/design.md, "Sleeping graphs"): their pools on expandable segments
(runtime/memory/allocator.pyx, Note [Expandable segments]), the physical memory released and
mapped again at the same addresses, with no recapture."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from tests.graphs.graph_helpers import N, values, warmed

pytestmark = pytest.mark.gpu

MiB = 1 << 20


def captured(x, steps=1):
    """A graph whose pool holds y = x + steps, written by `steps` kernels."""
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        y = x + 1
        for _ in range(steps - 1):
            y += 1
    return g, y


def pool_stats(g):
    return memory.pool_memory_stats()[g.pool_id]


def run_alone(code, conf):
    """Run code in a process of its own with TENSORPLAY_CUDA_ALLOC_CONF=conf (read once)."""
    import os
    env = dict(os.environ, TENSORPLAY_CUDA_ALLOC_CONF=conf)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# -- expandable segments ------------------------------------------------------------------------


def test_a_graph_pool_grows_in_place(quiet_device):
    x = warmed()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        a = tp.empty(12 * MiB // 4, device="cuda")   # large requests of their own size
        b = tp.empty(12 * MiB // 4, device="cuda")
        a.fill_(1.0)
        b.fill_(1.0)
    assert b.data_ptr() == a.data_ptr() + 12 * MiB   # the segment grew at its end
    stats = pool_stats(g)
    assert stats["reserved_bytes"] == 24 * MiB
    assert stats["allocated_bytes"] == 24 * MiB
    g.replay()
    assert values(b) == {1.0}


def test_the_default_pool_grows_in_place_and_empties_when_configured():
    out = run_alone("""
        import tensorplay as tp
        from tensorplay.accelerator import memory
        a = tp.ones(12 << 18, device="cuda")
        b = tp.ones(12 << 18, device="cuda")
        assert b.data_ptr() == a.data_ptr() + (12 << 20), (a.data_ptr(), b.data_ptr())
        assert memory.memory_stats()["segment.large_pool.current"] == 1
        small = [tp.ones(1000, device="cuda") for _ in range(3000)]   # > one 2 MiB step
        c = a + b                                         # grows the segment again
        assert c[0].item() == 2.0
        del a, b, small, c
        memory.empty_cache()
        assert memory.memory_reserved() == 0, memory.memory_stats()
        print("ok")
        """, "expandable_segments:True")
    assert out.strip() == "ok"


def test_a_bad_setting_raises_at_the_first_allocation_naming_it():
    out = run_alone("""
        import tensorplay as tp
        try:
            tp.ones(4, device="cuda")
        except ValueError as error:
            print(error)
        """, "expandable_segments:yes")
    assert "TENSORPLAY_CUDA_ALLOC_CONF: expandable_segments must be True or False, got 'yes'" \
        in out


def test_graph_pools_of_cudamalloc_segments_cannot_sleep():
    out = run_alone("""
        import tensorplay as tp
        from tensorplay import cuda
        x = tp.ones(1024, device="cuda")
        y = x + 1                                     # load the kernel before capturing it
        g = cuda.CUDAGraph()
        with cuda.graph(g):
            y = x + 1
        try:
            g.sleep()
        except RuntimeError as error:
            print(error)
        g.replay()
        print(set(y.tolist()))
        """, "graph_expandable_segments:False")
    assert "graph_expandable_segments:False" in out and out.strip().endswith("{2.0}")


# -- sleep and wake -----------------------------------------------------------------------------


def test_sleep_releases_the_pool_and_wake_restores_kept_outputs(quiet_device):
    x = warmed(1.0, count=64 * N)  # 256 MiB
    g, y = captured(x)
    g.replay()
    address = y.data_ptr()
    reserved = memory.memory_reserved()
    pool_bytes = pool_stats(g)["reserved_bytes"]
    free_before, _ = memory.get_memory_info()
    g.sleep(keep=[y])
    free_asleep, _ = memory.get_memory_info()
    stats = pool_stats(g)
    assert stats["reserved_bytes"] == 0 and stats["sleeping_bytes"] == pool_bytes
    assert memory.memory_reserved() == reserved - pool_bytes
    if "PYTEST_XDIST_WORKER" not in os.environ:  # other processes on the GPU move the figure
        assert free_asleep - free_before >= 0.99 * pool_bytes   # cuMemGetInfo sees it free
    g.wake()
    assert y.data_ptr() == address
    assert values(y) == {2.0}                 # kept, before any replay
    assert pool_stats(g)["sleeping_bytes"] == 0
    assert memory.memory_reserved() == reserved
    x += 1
    g.replay()                                # no recapture
    assert values(y) == {3.0}


@pytest.mark.parametrize("keep", [None, "all"])
def test_sleep_with_nothing_or_everything_kept(quiet_device, keep):
    x = warmed(1.0)
    g, y = captured(x)
    g.replay()
    g.sleep(keep=keep)
    g.wake()
    if keep == "all":
        assert values(y) == {2.0}
    g.replay()
    assert values(y) == {2.0}


def test_sleep_waits_for_a_queued_replay(quiet_device):
    # Sleep synchronizes rather than refuses (docs/design.md, "Sleeping graphs").
    x = warmed(1.0)
    g, y = captured(x, steps=200)
    for _ in range(5):
        g.replay()
    g.sleep(keep=[y])                         # no synchronize before it
    g.wake()
    assert values(y) == {201.0}


def test_while_asleep_replay_and_capture_into_the_pool_are_refused(quiet_device):
    x = warmed(1.0)
    g, y = captured(x)
    g.sleep()
    name = f"put to sleep by CUDAGraph object at {id(g):#x}"
    for call in (g.replay, lambda: g.replay_with({}), lambda: g.stage_and_launch([], [])):
        with pytest.raises(RuntimeError, match="replay\\(\\) refused.*" + name):
            call()
    other = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="is asleep \\(" + name):
        with cuda.graph(other, pool=g.pool_id):
            x.add_(1)
    with pytest.raises(RuntimeError, match="already asleep"):
        g.sleep()
    z = x + 1                                 # other pools work normally
    assert values(z) == {2.0}
    g.wake()
    with pytest.raises(RuntimeError, match="is not asleep"):
        g.wake()
    g.replay()
    assert values(y) == {2.0}


def refused_naming(g, operation, what):
    """pytest.raises for check_awake's refusal (runtime/tensor/core.pyx, refuse_asleep)."""
    first, second = g.pool_id
    return pytest.raises(RuntimeError, match=(
        re.escape(f"{operation}: {what} lives in private pool ({first}, {second}) on device ")
        + r"\d+, which is asleep \(" + re.escape(f"put to sleep by CUDAGraph object at {id(g):#x}")
        + r".*call wake\(\) on that graph first"))


def test_while_asleep_operations_on_its_tensors_are_refused_naming_the_graph(quiet_device,
                                                                              tmp_path):
    x = warmed(1.0)
    g, out = captured(x)                        # out = x + 1, in g's pool
    h, other = captured(x)                      # another graph, another pool
    g.replay()
    h.replay()
    view = out.view(-1)                         # a view shares out's memory
    g.sleep(keep=[out])
    refusals = [
        (lambda: out + 1, "Tensor.__add__()", "this tensor"),
        (lambda: out.add_(1), "Tensor.add_()", "this tensor"),
        (out.cpu, "Tensor.cpu()", "this tensor"),
        (out.sum, "Tensor.sum()", "this tensor"),
        (lambda: out.tolist(), "Tensor.tolist()", "this tensor"),
        (lambda: repr(out), "Tensor.__repr__()", "this tensor"),
        (lambda: out[0], "Tensor.__getitem__()", "this tensor"),
        (lambda: view.sum(), "Tensor.sum()", "this tensor"),
        (lambda: tp.cat([x, out]), "tensorplay.cat()", "tensors[1]"),
        (lambda: x + out, "Tensor.__add__()", "other"),
        (lambda: x.copy_(out), "Tensor.copy_()", "src"),
        (lambda: tp.where(x > 0, out, x), "tensorplay.where()", "input"),
        (out.__dlpack__, "Tensor.__dlpack__()", "this tensor"),
        (lambda: out.__cuda_array_interface__, "Tensor.__cuda_array_interface__",
         "this tensor"),
        (lambda: tp.from_dlpack(out), "tensorplay.from_dlpack()", "ext_tensor"),
        (lambda: tp.save({"out": out}, tmp_path / "out.safetensors"), "tensorplay.save()",
         "obj['out']"),
    ]
    for call, operation, what in refusals:
        with refused_naming(g, operation, what):
            call()
    # Metadata needs no memory; nothing ran on the device, so it is healthy.
    assert out.shape == (N,) and out.data_ptr() == view.data_ptr()
    assert not (tmp_path / "out.safetensors").exists()
    z = x + 1                                   # other tensors and graphs work normally
    accelerator.synchronize()
    assert values(z) == {2.0}
    h.replay()
    assert values(other) == {2.0}
    g.wake()
    assert values(out) == {2.0}                 # the refused add_ changed nothing
    assert values(out + 1) == {3.0}
    assert (x + out).cpu().tolist()[:2] == [3.0, 3.0]
    assert out.sum().item() == 2.0 * N
    assert values(tp.cat([x, out])) == {1.0, 2.0}
    assert tp.from_dlpack(out).data_ptr() == out.data_ptr()
    out.add_(1)
    assert values(out) == {3.0}


def test_backward_refuses_a_saved_tensor_of_a_sleeping_pool(quiet_device):
    x = warmed(1.0)
    g, out = captured(x)                        # out = 2, in g's pool
    g.replay()
    w = tp.ones(N, device="cuda", requires_grad=True)
    loss = (out * w).sum()                      # saves out for w's gradient
    g.sleep(keep=[out])
    with refused_naming(g, "backward()", "a tensor saved for it by MulBackward"):
        loss.backward()
    assert w.grad is None                       # refused before any gradient moved
    g.wake()
    loss.backward()
    assert values(w.grad) == {2.0}


def test_two_graphs_sharing_a_pool_sleep_together(quiet_device):
    x = warmed(1.0)
    pool = graphs.graph_pool_handle()
    g1, g2 = cuda.CUDAGraph(), cuda.CUDAGraph()
    with cuda.graph(g1, pool=pool):
        y1 = x + 1
    with cuda.graph(g2, pool=pool):
        y2 = y1 + 1
    g1.replay()
    g2.replay()
    g1.sleep(keep=[y1, y2])
    assert pool_stats(g2)["reserved_bytes"] == 0
    with pytest.raises(RuntimeError, match=f"CUDAGraph object at {id(g1):#x}"):
        g2.replay()                           # names the graph that put the pool to sleep
    g2.wake()                                 # either graph wakes the shared pool
    assert (values(y1), values(y2)) == ({2.0}, {3.0})
    g1.replay()
    g2.replay()
    assert values(y2) == {3.0}


def test_sleep_is_refused_while_a_capture_is_open(quiet_device):
    x = warmed(1.0)
    g, y = captured(x)
    other = cuda.CUDAGraph()
    with cuda.graph(other):
        with pytest.raises(RuntimeError, match="sleep\\(\\) is refused while a graph capture "
                                               "is open"):
            g.sleep()
        x.add_(1)                             # captured, not run: x stays 1
    g.replay()
    assert values(y) == {2.0}


def test_a_failed_wake_leaves_the_graph_asleep_and_intact(quiet_device):
    x = warmed(1.0, count=64 * N)  # 256 MiB
    g, y = captured(x)
    g.replay()
    g.sleep(keep=[y])
    free, _ = memory.get_memory_info()
    hog = None
    margin = 16 * MiB                          # less than the 256 MiB the pool needs back
    while hog is None and margin < free:
        try:
            hog = tp.empty(free - margin, dtype=tp.uint8, device="cuda")
        except tp.OutOfMemoryError:
            margin *= 2
    assert hog is not None and margin < pool_stats(g)["sleeping_bytes"]
    with pytest.raises(tp.OutOfMemoryError, match="stays asleep and intact"):
        g.wake()
    assert pool_stats(g)["sleeping_bytes"] > 0
    with pytest.raises(RuntimeError, match="replay\\(\\) refused"):
        g.replay()
    del hog
    g.wake()                                   # ready for another wake()
    assert values(y) == {2.0}
    g.replay()
    assert values(y) == {2.0}


def test_the_generator_offset_survives_sleep(quiet_device):
    generator = tp.Generator("cuda").manual_seed(7)
    eager = tp.Generator("cuda").manual_seed(7)
    out = tp.empty(1024, device="cuda")
    out.uniform_(generator=eager)               # load the kernel
    eager.manual_seed(7)
    accelerator.synchronize()
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        out.uniform_(generator=generator)
    g.replay()
    first = tp.empty(1024, device="cuda").uniform_(generator=eager)
    assert out.tolist() == first.tolist()
    g.sleep()
    g.wake()
    g.replay()                                  # the second draw, not the first again
    second = tp.empty(1024, device="cuda").uniform_(generator=eager)
    assert out.tolist() == second.tolist()
    assert generator.get_offset() == eager.get_offset()


def test_conditional_bodies_sleep_with_their_graph(quiet_device):
    x = warmed(1.0)
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    before = set(memory.pool_memory_stats())
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_node(flag)
        inside = x + 1                           # allocated in the body's pool
        inside += 1
        g.end_capture_to_conditional_node()
    g.replay()
    body_pools = set(memory.pool_memory_stats()) - before - {g.pool_id}
    assert body_pools                          # the body's own pool
    g.sleep(keep="all")
    stats = memory.pool_memory_stats()
    assert all(stats[key]["reserved_bytes"] == 0 for key in body_pools)
    g.wake()
    assert values(inside) == {3.0}
    g.replay()
    assert values(inside) == {3.0}


# -- accounting -----------------------------------------------------------------------------------


def test_pool_stats_sum_to_memory_reserved(quiet_device):
    x = warmed(1.0)
    g, y = captured(x)
    pool = graphs.graph_pool_handle()
    h = cuda.CUDAGraph()
    with cuda.graph(h, pool=pool):
        z = x * 2
    stats = memory.pool_memory_stats()
    assert {(0, 0), g.pool_id, h.pool_id} <= set(stats)
    assert sum(s["reserved_bytes"] for s in stats.values()) == memory.memory_reserved()
    assert sum(s["allocated_bytes"] for s in stats.values()) == memory.memory_allocated()
    assert stats[g.pool_id]["allocated_bytes"] == N * 4
    assert stats[g.pool_id]["active_bytes"] >= stats[g.pool_id]["allocated_bytes"]
    g.sleep()
    stats = memory.pool_memory_stats()
    assert sum(s["reserved_bytes"] for s in stats.values()) == memory.memory_reserved()
    assert stats[g.pool_id]["sleeping_bytes"] > 0 and stats[h.pool_id]["sleeping_bytes"] == 0
    g.wake()
    del y, z
