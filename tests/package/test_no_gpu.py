"""Without a GPU every public function answers as docs/design.md, "Without a GPU", documents."""
import pickle

import pytest

import tensorplay
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory, random

pytestmark = pytest.mark.no_gpu

NO_ACCELERATOR = "no accelerator is available"


def test_queries_answer_without_a_device():
    assert accelerator.is_available() is False
    assert accelerator.device_count() == 0
    assert accelerator.current_accelerator() == tensorplay.device("cuda")
    assert accelerator.current_accelerator(check_available=True) is None
    # Made once (devices are immutable), the availability check still asked every time.
    assert accelerator.current_accelerator() is accelerator.current_accelerator()
    assert accelerator.current_accelerator(check_available=True) is None


def test_device_bound_calls_raise_that_no_accelerator_is_available():
    for call in (accelerator.current_device_index,
                 accelerator.get_device_capability,
                 accelerator.current_stream,
                 lambda: accelerator.set_stream(None),
                 memory.get_memory_info,
                 random.get_rng_state,
                 random.initial_seed,
                 lambda: random.set_rng_state(bytes(16)),
                 cuda.Stream,
                 cuda.Event,
                 lambda: cuda.caching_allocator_alloc(1024),
                 lambda: cuda.external_stream(0)):
        with pytest.raises((RuntimeError, TypeError)) as raised:
            call()
        if raised.type is RuntimeError:
            assert NO_ACCELERATOR in str(raised.value)


def test_nothing_is_pinned_and_pin_memory_needs_an_accelerator():
    t = tensorplay.tensor([1.0, 2.0])
    assert t.is_pinned() is False
    with pytest.raises(RuntimeError) as raised:
        t.pin_memory()
    assert str(raised.value).startswith("pin_memory() needs an accelerator")
    assert NO_ACCELERATOR in str(raised.value)
    assert t.tolist() == [1.0, 2.0] and t.is_pinned() is False
    assert cuda.host_memory_stats() == {}  # nothing was asked of the pinned host cache


def test_set_stream_none_is_a_type_error():
    with pytest.raises(TypeError, match="stream must be a tensorplay.cuda.Stream"):
        accelerator.set_stream(None)


def test_no_ops_stay_no_ops():
    assert accelerator.set_device_index(-1) is None
    assert accelerator.synchronize() is None
    assert accelerator.synchronize("cuda") is None
    assert memory.empty_cache() is None
    assert memory.empty_host_cache() is None
    assert memory.reset_peak_memory_stats() is None
    assert memory.reset_accumulated_memory_stats() is None
    with accelerator.device_index(None):
        pass


def test_an_explicit_device_index_names_a_visible_device_even_without_one():
    for call in (accelerator.synchronize, accelerator.set_device_index,
                 memory.memory_allocated, memory.memory_stats, memory.reset_peak_memory_stats):
        for device in (0, 63, "cuda:0", tensorplay.device("cuda", 2)):
            with pytest.raises(ValueError, match="out of range: no CUDA device is visible"):
                call(device)


def test_memory_statistics_are_empty():
    for device in (None, "cuda", tensorplay.device("cuda")):
        assert memory.memory_allocated(device) == 0
        assert memory.max_memory_allocated(device) == 0
        assert memory.memory_reserved(device) == 0
        assert memory.max_memory_reserved(device) == 0
        assert memory.memory_stats(device) == {}
    assert cuda.memory_stats_as_nested_dict() == {}
    assert cuda.host_memory_stats() == {}


def test_seeding_is_deferred_and_rng_lists_are_empty():
    assert random.manual_seed(1234) is None
    assert random.manual_seed_all(1234) is None
    assert random.seed() is None
    assert random.seed_all() is None
    assert random.get_rng_state_all() == []
    assert random.set_rng_state_all([]) is None
    with pytest.raises(ValueError, match="one state per device"):
        random.set_rng_state_all([bytes(16)])


def test_graph_calls_without_a_device():
    assert cuda.graphs.is_current_stream_capturing() is False
    handle = cuda.graphs.graph_pool_handle()
    assert handle[0] == 0 and handle[1] > 0 and cuda.graphs.graph_pool_handle() != handle
    graph = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=NO_ACCELERATOR):
        graph.capture_begin()
    with pytest.raises(RuntimeError, match=NO_ACCELERATOR):
        with cuda.graph(graph):
            pass
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        graph.replay()
    with pytest.raises(RuntimeError, match="needs a completed capture"):
        cuda.graphs.export_dot("graph.dot")
    with pytest.raises(RuntimeError, match=NO_ACCELERATOR):
        cuda.graphs.make_graphed_callables(lambda x: x, ())
    accelerator_graph = accelerator.Graph(pool=handle, capture_error_mode="relaxed")
    assert accelerator_graph.pool() == handle and accelerator_graph.pool_id == handle
    with pytest.raises(RuntimeError, match=NO_ACCELERATOR):
        with accelerator_graph.__class__() as _:
            pass


def test_graph_arguments_are_checked_before_anything_else():
    with pytest.raises(ValueError, match="capture_error_mode must be one of 'global', "
                                         "'thread_local', 'relaxed', got 'loose'"):
        accelerator.Graph(capture_error_mode="loose")
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        cuda.CUDAGraph().capture_begin(capture_error_mode="default")
    with pytest.raises(TypeError, match="pool must be None, a handle"):
        accelerator.Graph(pool="mine")
    with pytest.raises(TypeError, match="cuda_graph must be a tensorplay.cuda.CUDAGraph"):
        cuda.graph(object())
    with pytest.raises(TypeError, match="stream must be a tensorplay.cuda.Stream or None"):
        cuda.CUDAGraph().replay(stream=7)
    with pytest.raises(TypeError, match="keep_graph must be a bool"):
        accelerator.Graph(keep_graph="yes")


def test_dtypes_and_devices_are_plain_values():
    assert tensorplay.float32.itemsize == 4 and tensorplay.float32.is_floating_point
    assert repr(tensorplay.bfloat16) == "tensorplay.bfloat16"
    assert not tensorplay.uint8.is_signed and tensorplay.int8.is_signed
    assert pickle.loads(pickle.dumps(tensorplay.int64)) is tensorplay.int64
    assert isinstance(tensorplay.bool, tensorplay.dtype)
    with pytest.raises(TypeError, match="dtypes are not constructed"):
        tensorplay.dtype()
    assert issubclass(tensorplay.OutOfMemoryError, RuntimeError)
