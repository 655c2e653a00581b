"""Host-to-device copies: pin_memory() and is_pinned(), eager copies from pageable and pinned
memory, and copies during a CUDA graph capture, which must read pinned memory (copies.pyx, Note
[Host copies during capture]; docs/design.md, "Capture rules" and "Pinned host cache")."""
import gc
import subprocess
import sys
import textwrap

import numpy
import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda

from tests.graphs.graph_helpers import N, values, warmed
from tests.peers import import_or_skip

pytestmark = pytest.mark.gpu

COUNT = 4096
# What every refusal of a host copy during a capture says (its cause, and the fix).
PAGEABLE = r"a copy from pageable host memory cannot be captured into a CUDA graph"
FIX = r"\.pin_memory\(\) before the capture"


def pinned_full(value, count=COUNT, dtype=None):
    return tp.full((count,), value, dtype=dtype).pin_memory()


def host_allocations():
    return cuda.host_memory_stats().get("allocations.current", 0)


def busy_stream():
    """Queue a few milliseconds of kernels on the current stream, so that work queued after
    them is still pending when the host carries on."""
    busy = warmed(0.0, 8 * N)
    for _ in range(200):
        busy += 1
    return busy


# -- pin_memory() and is_pinned() -------------------------------------------------------------


@pytest.mark.parametrize("name", ["bool", "uint8", "int32", "int64", "float16", "bfloat16",
                                  "float32", "float64"])
def test_pin_memory_copies_the_values_into_page_locked_memory(quiet_device, name):
    dtype = getattr(tp, name)
    source = tp.tensor(numpy.arange(12).reshape(3, 4) % 2 == 0 if name == "bool" else
                       numpy.arange(12).reshape(3, 4).tolist(), dtype=dtype)
    strided = source.t()  # not contiguous: the pinned copy is
    for tensor in (source, strided):
        pinned = tensor.pin_memory()
        assert pinned is not tensor and pinned.is_pinned() and not tensor.is_pinned()
        assert pinned.device == tp.device("cpu") and pinned.dtype == dtype
        assert pinned.shape == tensor.shape and pinned.is_contiguous()
        assert pinned.tolist() == tensor.tolist()
        assert pinned.pin_memory() is pinned  # pinned already: itself, as in PyTorch
    empty = tp.empty(0).pin_memory()
    assert empty.is_pinned() and empty.shape == (0,)


def test_views_of_pinned_tensors_are_pinned_and_keep_the_block(quiet_device):
    before = host_allocations()
    pinned = tp.tensor(numpy.arange(24.0).reshape(4, 6).tolist()).pin_memory()
    assert host_allocations() == before + 1
    views = [pinned[1], pinned[1:3, ::2], pinned.t(), pinned.view(24), pinned[0].expand(3, 6),
             pinned.numpy()[2:]]
    assert all(view.is_pinned() for view in views[:-1])
    assert tp.as_tensor(views[-1]).is_pinned()  # a numpy view of its memory, wrapped again
    del pinned
    gc.collect()
    assert host_allocations() == before + 1  # the views keep the block
    assert views[0].tolist() == [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]
    del views
    gc.collect()
    assert host_allocations() == before  # back to the cache with the last of them


def test_pin_memory_refuses_cuda_tensors_and_they_are_not_pinned(quiet_device):
    x = tp.ones(4, device="cuda")
    assert x.is_pinned() is False
    with pytest.raises(RuntimeError, match="only CPU tensors can be pinned"):
        x.pin_memory()


def test_pageable_cpu_tensors_are_not_pinned(quiet_device):
    tp.ones(1, device="cuda")  # CUDA initialised: is_pinned() asks it
    for tensor in (tp.ones(8), tp.ones(8)[::2], tp.as_tensor(numpy.zeros((2, 3))), tp.empty(0)):
        assert tensor.is_pinned() is False


def test_pinned_memory_of_pytorch_is_pinned_through_dlpack(quiet_device):
    torch = import_or_skip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA cannot pin memory")
    tp.ones(1, device="cuda")
    shared = tp.from_dlpack(torch.arange(8, dtype=torch.float32).pin_memory())
    assert shared.device == tp.device("cpu") and shared.is_pinned()
    assert tp.from_dlpack(torch.arange(8, dtype=torch.float32)).is_pinned() is False


IS_PINNED_BEFORE_INITIALISATION = textwrap.dedent("""
    import os
    import tensorplay as tp
    assert tp.tensor([1.0, 2.0]).is_pinned() is False
    # Had is_pinned() initialised CUDA, a forked child could not use it.
    pid = os.fork()
    if pid == 0:
        try:
            ok = tp.full((4,), 2.0, device="cuda").tolist() == [2.0] * 4
        except BaseException:
            os._exit(2)
        os._exit(0 if ok else 1)
    print(os.waitpid(pid, 0)[1])
""")


def test_is_pinned_does_not_initialise_cuda():
    result = subprocess.run([sys.executable, "-c", IS_PINNED_BEFORE_INITIALISATION],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip() == "0", result.stderr[-2000:]


def test_pin_memory_is_an_identity_for_autograd(quiet_device):
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.pin_memory()
    assert y.is_pinned() and y.requires_grad and not y.is_leaf
    assert y.grad_fn.name() == "PinMemoryBackward"
    (y * 3).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]
    with tp.no_grad():
        assert not x.pin_memory().requires_grad
    leaf = tp.tensor([1.0], requires_grad=True).pin_memory().detach().requires_grad_()
    assert leaf.pin_memory() is leaf  # pinned already


# -- eager copies ---------------------------------------------------------------------------------


def _sources(pinned):
    base = numpy.arange(2 * 3 * 4, dtype=numpy.float64).reshape(2, 3, 4) - 7.5
    made = {
        "contiguous": tp.tensor(base.tolist(), dtype=tp.float32),
        "strided": tp.tensor(base.transpose(2, 1, 0).tolist(), dtype=tp.float32)
                     .transpose(0, 2),
        "converted": tp.tensor(base.tolist(), dtype=tp.float64),
        "bfloat16": tp.tensor(base.tolist(), dtype=tp.bfloat16),
    }
    if pinned:
        # pin_memory() makes them contiguous: take the strided one as a view of a pinned one.
        made = {key: value.pin_memory() for key, value in made.items()}
        made["strided"] = tp.tensor(base.transpose(2, 1, 0).tolist(), dtype=tp.float32) \
            .pin_memory().transpose(0, 2)
        assert all(value.is_pinned() for value in made.values())
    return base, made


@pytest.mark.parametrize("pinned", [False, True], ids=["pageable", "pinned"])
@pytest.mark.parametrize("non_blocking", [False, True], ids=["blocking", "non_blocking"])
def test_eager_copies_from_the_host_give_the_values(quiet_device, pinned, non_blocking):
    base, sources = _sources(pinned)
    for kind, source in sources.items():
        dtype = tp.bfloat16 if kind == "bfloat16" else tp.float32
        dense = tp.zeros((2, 3, 4), dtype=dtype, device="cuda")
        strided = tp.zeros((4, 3, 2), dtype=dtype, device="cuda").transpose(0, 2)
        for target in (dense, strided):
            target.copy_(source, non_blocking=non_blocking)
            accelerator.synchronize()
            assert target.tolist() == base.tolist(), (kind, target.is_contiguous())
        moved = source.to("cuda", non_blocking=non_blocking)
        assert moved.device == tp.device("cuda", 0) and moved.dtype == source.dtype
        assert moved.tolist() == base.tolist()
        assert source.cuda(non_blocking=non_blocking).tolist() == base.tolist()


def test_a_blocking_copy_from_pinned_memory_has_read_it_when_it_returns(quiet_device):
    pinned = tp.full((N,), 1.0).pin_memory()
    target = tp.zeros(N, device="cuda")
    busy = busy_stream()
    target.copy_(pinned)     # queued behind the busy kernels, but blocking
    pinned.fill_(2.0)        # so this change comes after the copy read the memory
    assert values(target) == {1.0}
    del busy


def test_a_non_blocking_copy_keeps_its_pinned_block_from_reuse_until_it_ran(quiet_device):
    pinned = tp.full((N,), 1.0).pin_memory()
    target = tp.zeros(N, device="cuda")
    busy = busy_stream()
    target.copy_(pinned, non_blocking=True)  # reads the block in place, still queued
    del pinned
    gc.collect()
    # The block went back to the cache with a pending copy recorded on it: another tensor of
    # the same size must not get it (and overwrite it) before the copy ran.
    again = tp.full((N,), 2.0).pin_memory()
    assert values(target) == {1.0}
    del busy, again


def test_pageable_non_blocking_copies_stage_through_the_host_cache(quiet_device):
    before = cuda.host_memory_stats().get("num_host_alloc", 0)
    target = tp.zeros(COUNT, device="cuda")
    for value in (1.0, 2.0, 3.0):
        target.copy_(tp.full((COUNT,), value), non_blocking=True)
        assert values(target) == {value}
    assert cuda.host_memory_stats()["num_host_alloc"] <= before + 1  # one block, reused


# -- copies during a capture ----------------------------------------------------------------------


def _refusals():
    """Every host-to-device path, from pageable memory or through a temporary host buffer,
    each with the argument its refusal must name."""
    pageable = tp.full((COUNT,), 3.0)
    converted = pinned_full(3.0, dtype=tp.float64)      # pinned, but float64 into float32
    strided = pinned_full(3.0, 2 * COUNT)[::2]           # pinned, but not contiguous
    one = tp.full((1,), 3.0).pin_memory()                # pinned, but read through stride 0
    return [
        ("copy_", "src", lambda x: x.copy_(pageable)),
        ("copy_ non_blocking", "src", lambda x: x.copy_(pageable, non_blocking=True)),
        ("copy_ float64", "src", lambda x: x.copy_(converted, non_blocking=True)),
        ("copy_ strided", "src", lambda x: x.copy_(strided)),
        ("copy_ broadcast", "src", lambda x: x.copy_(one)),
        ("item assignment", "value", lambda x: x.__setitem__(slice(None), pageable)),
        ("to", "self", lambda x: pageable.to("cuda")),
        ("to non_blocking", "self", lambda x: pageable.to("cuda", non_blocking=True)),
        ("cuda", "self", lambda x: pageable.cuda()),
        ("tensor", "data", lambda x: tp.tensor([3.0] * COUNT, device="cuda")),
        ("as_tensor", "data", lambda x: tp.as_tensor(numpy.full(COUNT, 3.0), device="cuda")),
        ("linspace", "linspace()'s values", lambda x: tp.linspace(0, 1, COUNT, device="cuda")),
    ]  # arange is a device kernel, which a capture takes (tests/tensor/test_arange.py)


def test_pageable_copies_are_refused_during_a_capture_which_then_replays(quiet_device):
    x = warmed(1.0, COUNT)
    refusals = _refusals()
    seen = []
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        for what, argument, call in refusals:
            with pytest.raises(RuntimeError, match=PAGEABLE) as raised:
                call(x)
            message = str(raised.value)
            assert f"the source ({argument})" in message, (what, message)
            assert "pin_memory()" in message and "the capture goes on" in message, what
            seen.append(what)
        x += 1  # the capture goes on: every refusal came before any CUDA call
    assert len(seen) == len(refusals)
    assert values(x) == {1.0}  # nothing ran or was copied during the capture
    for expected in (2.0, 3.0):
        g.replay()
        assert values(x) == {expected}


def test_a_stream_that_joined_the_capture_refuses_pageable_copies_too(quiet_device):
    x = warmed(0.0, COUNT)
    pinned = pinned_full(4.0)
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        origin = accelerator.current_stream()
        side.wait_stream(origin)  # side joins the capture through an event wait
        with cuda.stream(side):
            with pytest.raises(RuntimeError, match=PAGEABLE):
                x.copy_(tp.full((COUNT,), 3.0), non_blocking=True)
            x.copy_(pinned, non_blocking=True)  # captured on the joined stream
        origin.wait_stream(side)
    assert values(x) == {0.0}
    g.replay()
    assert values(x) == {4.0}


def test_stage_and_launch_refuses_a_pageable_input_during_a_capture(quiet_device):
    static = warmed(0.0, COUNT)
    doubling = cuda.CUDAGraph()
    with cuda.graph(doubling):
        static *= 2
    # Outside a capture, pageable and pinned inputs are copied (then the graph doubles them).
    doubling.stage_and_launch([static], [tp.full((COUNT,), 2.0)])
    assert values(static) == {4.0}
    doubling.stage_and_launch([static], [pinned_full(3.0)])
    assert values(static) == {6.0}
    y = warmed(1.0, COUNT)
    outer = cuda.CUDAGraph()
    with cuda.graph(outer):
        with pytest.raises(RuntimeError, match=PAGEABLE) as raised:
            doubling.stage_and_launch([static], [tp.full((COUNT,), 5.0)])
        assert "the source (inputs[0])" in str(raised.value)
        y += 1
    assert values(static) == {6.0}  # nothing was copied or launched
    outer.replay()
    assert values(y) == {2.0}


def test_host_record_stream_refuses_a_capturing_stream(quiet_device):
    pointer = cuda.caching_host_allocator_alloc(1024)
    x = warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    try:
        with cuda.graph(g):
            with pytest.raises(RuntimeError, match="capturing a CUDA graph"):
                cuda.caching_host_allocator_record_stream(pointer, accelerator.current_stream())
            x += 1
    finally:
        cuda.caching_host_allocator_delete(pointer)
    g.replay()
    assert values(x) == {2.0}


@pytest.mark.parametrize("non_blocking", [False, True], ids=["blocking", "non_blocking"])
def test_a_pinned_source_is_read_on_every_replay(quiet_device, non_blocking):
    x = warmed(0.0, COUNT)
    pinned = pinned_full(3.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.copy_(pinned, non_blocking=non_blocking)
        y = x * 2
    assert values(x) == {0.0}  # captured, not run
    for value in (3.0, 5.0, -8.0):
        pinned.fill_(value)  # the previous replay is over: values() synchronised
        g.replay()
        assert values(x) == {value} and values(y) == {2 * value}


def test_later_host_copies_do_not_change_what_a_replay_writes(quiet_device):
    # The bug this catches: a captured copy read a staging block of the host cache, which went
    # back to the cache at once; later copies of 107.0 staged through it, and every replay wrote
    # 107.0 where 3.0 had been captured.
    x = warmed(0.0, COUNT)
    pinned = pinned_full(3.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.copy_(pinned, non_blocking=True)
    other = tp.zeros(COUNT, device="cuda")
    for _ in range(4):
        other.copy_(tp.full((COUNT,), 107.0), non_blocking=True)
        other.copy_(tp.full((COUNT,), 107.0))
        tp.full((COUNT,), 107.0).to("cuda", non_blocking=True)
        transient = pinned_full(107.0)
        other.copy_(transient, non_blocking=True)
        del transient
    assert values(other) == {107.0}
    for _ in range(3):
        g.replay()
        assert values(x) == {3.0}


def test_the_graph_keeps_the_pinned_source_alive(quiet_device):
    x = warmed(0.0, COUNT)
    pinned = pinned_full(3.0)
    address = pinned.data_ptr()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.copy_(pinned, non_blocking=True)
    del pinned
    gc.collect()
    # Tensors of the same size would get the block back, had the graph let it go.
    others = [pinned_full(100.0 + index) for index in range(4)]
    assert all(other.data_ptr() != address for other in others)
    for _ in range(2):
        g.replay()
        assert values(x) == {3.0}
    del others


def test_a_reset_graph_gives_the_pinned_source_back(quiet_device):
    x = warmed(0.0, COUNT)
    before = host_allocations()
    pinned = pinned_full(3.0)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.copy_(pinned)
    del pinned
    gc.collect()
    assert host_allocations() == before + 1
    g.replay()
    accelerator.synchronize()
    g.reset()
    del g
    gc.collect()
    assert host_allocations() == before


def test_a_pinned_copy_into_a_strided_destination_is_captured(quiet_device):
    base = tp.zeros((COUNT, 2), device="cuda")
    target = base.t()[0]  # every other element
    assert not target.is_contiguous()
    pinned = tp.arange(COUNT, dtype=tp.float32).pin_memory()
    warmed(0.0, COUNT)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        target.copy_(pinned)  # through a contiguous buffer of the graph's pool
    assert values(base.reshape((2 * COUNT,))) == {0.0}
    for scale in (1.0, 2.0):
        pinned.copy_(tp.arange(COUNT, dtype=tp.float32) * scale)
        g.replay()
        accelerator.synchronize()
        assert target.tolist() == [index * scale for index in range(COUNT)]
        assert set(base.t()[1].tolist()) == {0.0}


def test_pytorch_pinned_memory_is_captured_and_kept(quiet_device):
    torch = import_or_skip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA cannot pin memory")
    x = warmed(0.0, COUNT)
    source = torch.full((COUNT,), 3.0).pin_memory()
    shared = tp.from_dlpack(source)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.copy_(shared, non_blocking=True)
    del shared
    for value in (3.0, 6.0):
        source.fill_(value)
        g.replay()
        assert values(x) == {value}
