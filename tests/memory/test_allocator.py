"""The caching allocator on a real GPU: exact figures, stream safety, OOM, threads, fork."""
import gc
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from hypothesis import given, settings, strategies as st

import tensorplay
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory

from tests.peers import import_or_skip

pytestmark = pytest.mark.gpu

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def release_process_caches():
    """Free the device memory that earlier tests of this process left to the runtime's own
    caches (nn.pyx keeps the index tensors of one_hot, conv2d, max_pool2d and causal attention
    per size), as PyTorch's leak check clears its cuBLAS workspaces first: the exact figures
    below need an allocator with no live block, and pytest-xdist runs other files' tests in the
    same process."""
    from tensorplay._runtime.autograd import nn as runtime_nn
    runtime_nn._CLASS_INDICES.clear()
    gc.collect()  # tensors in reference cycles (a failed test's traceback) of earlier tests
    accelerator.synchronize()
    memory.empty_cache()


@pytest.fixture
def clean_device():
    """Start from an empty cache with no live blocks and reset peaks; check nothing leaks."""
    release_process_caches()
    baseline = memory.memory_allocated()
    assert baseline == 0, "a previous test leaked allocations"
    memory.reset_peak_memory_stats()
    memory.reset_accumulated_memory_stats()
    yield
    accelerator.synchronize()
    assert memory.memory_allocated() == 0
    memory.empty_cache()


def stat(key):
    return memory.memory_stats()[key]


def test_exact_figures_for_rounding_segments_split_and_merge(clean_device):
    first = cuda.caching_allocator_alloc(1)
    assert memory.memory_allocated() == 512
    assert memory.memory_reserved() == 2 * MiB  # a small-pool segment
    second = cuda.caching_allocator_alloc(1000)
    assert second == first + 512  # split from the same segment
    assert memory.memory_allocated() == 512 + 1024 and memory.memory_reserved() == 2 * MiB
    large = cuda.caching_allocator_alloc(MiB + 1)
    assert memory.memory_reserved() == 22 * MiB  # under 10 MiB: a 20 MiB segment
    middle = cuda.caching_allocator_alloc(12 * MiB + 3)
    assert middle == large + MiB + 512  # best fit is the rest of that segment
    assert memory.memory_reserved() == 22 * MiB
    huge = cuda.caching_allocator_alloc(20 * MiB)
    assert memory.memory_reserved() == 42 * MiB  # 10 MiB and over: rounded to 2 MiB
    allocated = 512 + 1024 + (MiB + 512) + (12 * MiB + 512) + 20 * MiB
    assert memory.memory_allocated() == allocated
    assert stat("segment.all.current") == 3
    assert stat("segment.small_pool.current") == 1 and stat("segment.large_pool.current") == 2
    assert stat("allocation.all.current") == 5
    assert stat("requested_bytes.all.current") == 1 + 1000 + MiB + 1 + 12 * MiB + 3 + 20 * MiB
    for pointer in (first, second, large, middle, huge):
        cuda.caching_allocator_delete(pointer)
    assert memory.memory_allocated() == 0 and memory.memory_reserved() == 42 * MiB
    assert memory.max_memory_allocated() == allocated
    # Merged back: the small segment is one free block again, reused from its start.
    again = cuda.caching_allocator_alloc(1500)
    assert again == first
    cuda.caching_allocator_delete(again)
    # Large split and merge: two 4 MiB blocks side by side, then one 8 MiB block in their place.
    a = cuda.caching_allocator_alloc(4 * MiB)
    b = cuda.caching_allocator_alloc(4 * MiB)
    assert b == a + 4 * MiB
    cuda.caching_allocator_delete(a)
    cuda.caching_allocator_delete(b)
    merged = cuda.caching_allocator_alloc(8 * MiB)
    assert merged == a
    cuda.caching_allocator_delete(merged)
    assert stat("num_device_alloc") == 3
    memory.empty_cache()
    assert memory.memory_reserved() == 0 and stat("num_device_free") == 3
    assert memory.max_memory_reserved() == 42 * MiB
    memory.reset_peak_memory_stats()
    assert memory.max_memory_reserved() == 0


def test_stats_schema_and_nested_form(clean_device):
    pointer = cuda.caching_allocator_alloc(3 * KiB)
    stats = memory.memory_stats()
    for name in ("allocation", "segment", "active", "inactive_split", "allocated_bytes",
                 "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for field in ("current", "peak", "allocated", "freed"):
                assert f"{name}.{pool}.{field}" in stats
    for extra in ("num_alloc_retries", "num_ooms", "largest_free_block", "num_graph_pools",
                  "capturing", "num_device_alloc", "num_device_free"):
        assert extra in stats
    assert list(stats) == sorted(stats)
    assert stats["largest_free_block"] == 2 * MiB - 3 * KiB
    nested = cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == 3 * KiB
    cuda.caching_allocator_delete(pointer)
    assert stat("allocated_bytes.all.freed") == 3 * KiB


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 24 * MiB)), min_size=1, max_size=60))
def test_stats_invariants_hold_for_random_sequences(operations):
    release_process_caches()
    live = {}  # pointer -> requested size
    try:
        for allocate, size in operations:
            if allocate or not live:
                pointer = cuda.caching_allocator_alloc(size)
                assert pointer not in live
                live[pointer] = size
            else:
                oldest = next(iter(live))
                del live[oldest]
                cuda.caching_allocator_delete(oldest)
            stats = memory.memory_stats()
            # A block too small to split is handed out whole, so allocated bytes may exceed the
            # rounded requests (as in PyTorch); requested bytes are exact.
            rounded = sum(max(512, -(-size // 512) * 512) for size in live.values())
            assert stats["requested_bytes.all.current"] == sum(live.values())
            assert stats["allocated_bytes.all.current"] >= rounded
            assert stats["allocation.all.current"] == len(live)
            assert stats["reserved_bytes.all.current"] >= stats["allocated_bytes.all.current"]
            assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
            for name in ("allocated_bytes", "reserved_bytes", "segment", "requested_bytes"):
                assert stats[f"{name}.all.current"] == \
                    stats[f"{name}.small_pool.current"] + stats[f"{name}.large_pool.current"]
                assert stats[f"{name}.all.current"] == \
                    stats[f"{name}.all.allocated"] - stats[f"{name}.all.freed"]
    finally:
        for pointer in live:
            cuda.caching_allocator_delete(pointer)
    assert memory.memory_allocated() == 0
    memory.empty_cache()
    assert memory.memory_reserved() == 0


def test_block_used_on_another_stream_is_not_reused_until_its_work_completes(clean_device):
    torch = import_or_skip("torch")
    producer, consumer = cuda.Stream(), cuda.Stream()
    pointer = cuda.caching_allocator_alloc(MiB, stream=producer)
    cuda.caching_allocator_record_stream(pointer, consumer)
    with torch.cuda.stream(torch.cuda.ExternalStream(consumer.cuda_stream)):
        torch.cuda._sleep(200_000_000)  # keeps the consumer busy for a good fraction of a second
    cuda.caching_allocator_delete(pointer)
    while_busy = cuda.caching_allocator_alloc(MiB, stream=producer)
    assert while_busy != pointer and not consumer.query()
    consumer.synchronize()
    after = cuda.caching_allocator_alloc(MiB, stream=producer)
    assert after == pointer
    for p in (while_busy, after):
        cuda.caching_allocator_delete(p)


def test_blocks_are_reused_only_on_their_own_stream(clean_device):
    first, second = cuda.Stream(), cuda.Stream()
    pointer = cuda.caching_allocator_alloc(KiB, stream=first)
    cuda.caching_allocator_delete(pointer)
    other = cuda.caching_allocator_alloc(KiB, stream=second)
    assert other != pointer
    same = cuda.caching_allocator_alloc(KiB, stream=first)
    assert same == pointer
    for p in (other, same):
        cuda.caching_allocator_delete(p)


def test_a_stream_the_allocator_refers_to_outlives_its_stream_object(clean_device):
    """runtime/devices/stream.pyx, Note [Streams the allocator refers to]: a block that recorded a use
    of a stream gets its event when it is released, after the Stream object is gone (here a
    block freed during a capture, whose event waits until no capture is open; recording it on
    a destroyed stream crashed the process). The stream is kept, and the next Stream() of its
    priority takes it over."""
    side = cuda.Stream()
    handle = side.cuda_stream
    g = cuda.CUDAGraph()
    g.capture_begin()
    data = tensorplay.ones(8, device="cuda")
    side.wait_stream(accelerator.current_stream())
    with cuda.stream(side):
        doubled = data * 2
        data.record_stream(side)
    accelerator.current_stream().wait_stream(side)
    del data  # freed during the capture: its event is deferred
    g.capture_end()
    del side
    g.replay()
    accelerator.synchronize()
    memory.empty_cache()  # records and waits for the deferred event on the kept stream
    assert doubled.tolist() == [2.0] * 8
    assert cuda.Stream().cuda_stream == handle
    del doubled, g
    memory.empty_cache()


# It takes most of the device's memory for a moment, which would make the allocations of
# tests running beside it in other processes fail (pytest -n): it runs in serial runs only.
@pytest.mark.skipif(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1,
                    reason="fills the device's memory: run without pytest -n (other workers' "
                           "allocations would fail)")
def test_out_of_memory_frees_the_cache_raises_and_leaks_nothing(clean_device):
    free, total = memory.get_memory_info()
    with pytest.raises(tensorplay.OutOfMemoryError) as raised:
        cuda.caching_allocator_alloc(4 * total)
    message = str(raised.value)
    assert f"{4 * total} bytes" in message and "free on device" in message
    assert isinstance(raised.value, RuntimeError)
    assert stat("num_ooms") == 1 and stat("num_alloc_retries") == 1
    assert memory.memory_allocated() == 0
    # A cache full of freed blocks is released to satisfy a request that needs the space.
    chunk = 4 * GiB
    pointers = [cuda.caching_allocator_alloc(chunk) for _ in range(int(free * 0.8) // chunk)]
    for pointer in pointers:
        cuda.caching_allocator_delete(pointer)
    reserved = memory.memory_reserved()
    big = cuda.caching_allocator_alloc(int(free * 0.6))
    assert stat("num_alloc_retries") == 2 and memory.memory_reserved() < reserved + free * 0.6
    cuda.caching_allocator_delete(big)
    later = cuda.caching_allocator_alloc(MiB)
    cuda.caching_allocator_delete(later)


def test_eight_threads_of_ten_thousand_allocations_keep_counters_consistent(clean_device):
    errors = []

    def work(seed):
        try:
            sizes = [(seed * 7919 + i * 104729) % (2 * MiB) + 1 for i in range(10_000)]
            held = []
            for i, size in enumerate(sizes):
                held.append(cuda.caching_allocator_alloc(size))
                if i % 3 == 2:
                    for pointer in held:
                        cuda.caching_allocator_delete(pointer)
                    held.clear()
            for pointer in held:
                cuda.caching_allocator_delete(pointer)
        except Exception as error:  # reported below with the thread's seed
            errors.append((seed, error))

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stats = memory.memory_stats()
    assert stats["allocated_bytes.all.current"] == 0 and stats["allocation.all.current"] == 0
    assert stats["allocation.all.allocated"] == stats["allocation.all.freed"] == 80_000
    assert stats["active_bytes.all.current"] == 0


def test_bad_pointers_and_sizes_are_clear_errors(clean_device):
    with pytest.raises(ValueError, match="size must be from 0 to 2\\*\\*63 - 1, got -1"):
        cuda.caching_allocator_alloc(-1)
    with pytest.raises(TypeError, match="ptr must be a pointer"):
        cuda.caching_allocator_delete("0x10")
    with pytest.raises(ValueError, match="0x1234"):
        cuda.caching_allocator_delete(0x1234)
    with pytest.raises(ValueError, match="belongs to cuda:0 but device is cuda:1") \
            if accelerator.device_count() > 1 else pytest.raises(ValueError, match="out of range"):
        cuda.caching_allocator_alloc(1, device=1, stream=cuda.Stream(0))


def test_pinned_host_blocks_are_reused_only_after_their_copies_complete():
    torch = import_or_skip("torch")
    memory.empty_host_cache()
    frees_before = cuda.host_memory_stats().get("num_host_free", 0)
    busy = cuda.Stream()
    pointer = cuda.caching_host_allocator_alloc(3000)  # rounded up to 4096
    stats = cuda.host_memory_stats()
    assert stats["allocated_bytes.current"] == 4096 and stats["allocations.current"] == 1
    cuda.caching_host_allocator_record_stream(pointer, busy)
    with torch.cuda.stream(torch.cuda.ExternalStream(busy.cuda_stream)):
        torch.cuda._sleep(200_000_000)
    cuda.caching_host_allocator_record_stream(pointer, busy)  # the "copy" now queued behind it
    cuda.caching_host_allocator_delete(pointer)
    while_busy = cuda.caching_host_allocator_alloc(4096)
    assert while_busy != pointer and not busy.query()
    busy.synchronize()
    after = cuda.caching_host_allocator_alloc(4096)
    assert after == pointer
    for p in (while_busy, after):
        cuda.caching_host_allocator_delete(p)
    assert cuda.host_memory_stats()["reserved_bytes.current"] == 2 * 4096
    memory.empty_host_cache()
    stats = cuda.host_memory_stats()
    assert stats["reserved_bytes.current"] == 0 and stats["num_host_free"] - frees_before == 2
    with pytest.raises(TypeError, match="ptr must be a pointer"):
        cuda.caching_host_allocator_delete(None)


FORK_CHILD = textwrap.dedent("""
    import multiprocessing, sys
    import tensorplay.accelerator as accelerator, tensorplay.cuda as cuda

    def child(queue):
        try:
            pointer = cuda.caching_allocator_alloc(1024)
            cuda.caching_allocator_delete(pointer)
            queue.put("ok")
        except Exception as error:
            queue.put(f"{type(error).__name__}: {error}")

    if __name__ == "__main__":
        assert accelerator.device_count() >= 1
        if sys.argv[1] == "initialised":
            accelerator.synchronize(); cuda.caching_allocator_alloc(1)
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        process = context.Process(target=child, args=(queue,))
        process.start(); process.join(60)
        print(queue.get(timeout=5))
""")


def test_a_child_forked_after_device_count_can_use_the_gpu(tmp_path):
    script = tmp_path / "fork_child.py"
    script.write_text(FORK_CHILD)
    result = subprocess.run([sys.executable, str(script), "counted"], capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


def test_a_child_forked_after_initialisation_gets_a_clear_error(tmp_path):
    script = tmp_path / "fork_child.py"
    script.write_text(FORK_CHILD)
    result = subprocess.run([sys.executable, str(script), "initialised"], capture_output=True,
                            text=True, timeout=120)
    assert "RuntimeError: Cannot re-initialize CUDA in forked subprocess" in result.stdout, \
        result.stdout + result.stderr
