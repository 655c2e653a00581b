"""memory_stats() keys, without a GPU: PyTorch's flat schema (docs/design.md, "Memory
statistics"), built once in runtime/memory/statistics.pyx (Note [Building memory_stats]) from the
allocator's snapshot layout (runtime/memory/allocator.pxd)."""
from tensorplay._runtime.memory import statistics

STATS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
         "active_bytes", "inactive_split_bytes", "requested_bytes")
POOL_KINDS = ("all", "small_pool", "large_pool")
COUNTERS = ("current", "peak", "allocated", "freed")


def test_the_keys_are_pytorchs_flat_schema_sorted():
    expected = {f"{stat}.{kind}.{counter}" for stat in STATS for kind in POOL_KINDS
                for counter in COUNTERS}
    expected |= {"num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
                 "num_device_free", "max_split_size", "largest_free_block", "num_graph_pools",
                 "capturing"}
    expected |= {f"oversize_{what}.{counter}" for what in ("allocations", "segments")
                 for counter in COUNTERS}
    assert set(statistics.STATS_KEYS) == expected
    assert list(statistics.STATS_KEYS) == sorted(expected)


def test_the_snapshot_lays_out_counters_then_scalars_then_the_figures_of_the_moment():
    names = statistics.SNAPSHOT_NAMES
    counters = len(STATS) * len(POOL_KINDS) * len(COUNTERS)
    # [stat][pool kind][counter], as the allocator's counters array is indexed.
    assert names[0] == "allocation.all.current"
    assert names[len(COUNTERS)] == "allocation.small_pool.current"
    assert names[counters - 1] == "requested_bytes.large_pool.freed"
    assert names[counters:counters + 5] == ["num_alloc_retries", "num_ooms",
                                            "num_sync_all_streams", "num_device_alloc",
                                            "num_device_free"]
    assert names[counters + 5:counters + 8] == ["largest_free_block", "num_graph_pools",
                                                "capturing"]
    assert len(names) == len(set(names)) == counters + 8 + len(statistics.FIXED_STATS)
