"""Devices, streams and events on a real GPU."""
import pytest

import tensorplay
from tensorplay import accelerator, cuda

from tests.peers import import_or_skip

pytestmark = pytest.mark.gpu


def test_device_selection_and_its_errors():
    count = accelerator.device_count()
    assert count >= 1 and accelerator.is_available()
    assert accelerator.current_accelerator(check_available=True) == tensorplay.device("cuda")
    previous = accelerator.current_device_index()
    accelerator.set_device_index(-1)  # -1: no change
    assert accelerator.current_device_index() == previous
    accelerator.set_device_index("cuda:0")
    assert accelerator.current_device_index() == 0
    with pytest.raises(ValueError, match=f"device index {count} is out of range: {count} CUDA"):
        accelerator.set_device_index(count)
    with accelerator.device_index(0):
        assert accelerator.current_device_index() == 0
    accelerator.synchronize()
    accelerator.synchronize(tensorplay.device("cuda", 0))


def test_capability_map_answers_what_users_ask_next():
    capability = accelerator.get_device_capability(0)
    assert capability["supported_dtypes"] == {
        tensorplay.bool, tensorplay.uint8, tensorplay.int8, tensorplay.int16, tensorplay.int32,
        tensorplay.int64, tensorplay.float16, tensorplay.bfloat16, tensorplay.float32,
        tensorplay.float64}
    major, minor = capability["compute_capability"]
    assert major >= 5 and capability["total_memory"] > 2**30
    assert capability["multi_processor_count"] > 0 and capability["name"]
    assert isinstance(capability["conditional_nodes"], bool)
    free, total = accelerator.memory.get_memory_info(0)
    assert 0 < free <= total == capability["total_memory"]


def test_streams_have_the_protocol_and_a_per_thread_current_stream():
    import threading

    stream = cuda.Stream(priority=-1)
    assert stream.device == tensorplay.device("cuda", 0)
    assert stream.__cuda_stream__() == (0, stream.cuda_stream) and stream.cuda_stream != 0
    assert stream.priority <= 0 and stream.query()
    default = accelerator.current_stream()
    assert default.cuda_stream == 0
    with cuda.stream(stream):
        assert accelerator.current_stream() == stream
        seen = []
        worker = threading.Thread(target=lambda: seen.append(accelerator.current_stream()))
        worker.start()
        worker.join()
        assert seen[0].cuda_stream == 0  # another thread keeps its own current stream
    assert accelerator.current_stream() == default
    accelerator.set_stream(stream)
    assert cuda.current_stream(0) == stream
    accelerator.set_stream(default)
    wrapped = cuda.external_stream(stream)
    assert wrapped == stream and hash(wrapped) == hash(stream)
    assert cuda.external_stream(stream.cuda_stream) == stream
    stream.synchronize()


def test_events_time_and_order_work():
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    stream = cuda.Stream()
    start.record(stream)
    pointer = cuda.caching_allocator_alloc(1 << 20, stream=stream)
    end.record(stream)
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0.0
    other = cuda.Stream()
    other.wait_event(end)
    other.wait_stream(stream)
    event = stream.record_event()
    event.wait(other)
    other.synchronize()
    cuda.caching_allocator_delete(pointer)
    with pytest.raises(ValueError, match="enable_timing=True"):
        cuda.Event().elapsed_time(end)


def test_external_stream_from_pytorch_is_the_same_queue():
    torch = import_or_skip("torch")
    torch_stream = torch.cuda.Stream()
    ours = cuda.external_stream(torch_stream.cuda_stream)
    assert ours.cuda_stream == torch_stream.cuda_stream
    if hasattr(torch_stream, "__cuda_stream__"):
        assert cuda.external_stream(torch_stream).cuda_stream == torch_stream.cuda_stream
    owner = cuda.Stream()  # must outlive the PyTorch wrapper, which does not own the stream
    theirs = torch.cuda.ExternalStream(owner.cuda_stream)
    assert theirs.query()


SEED_BEFORE_INITIALISATION = """
import tensorplay.accelerator as accelerator
accelerator.random.manual_seed(111)
accelerator.random.manual_seed(1234)  # deferred: the latest call wins
print(accelerator.random.initial_seed(), accelerator.random.get_rng_state().tolist())
"""


def test_seeding_before_initialisation_is_deferred_and_the_latest_call_wins():
    import subprocess
    import sys
    output = subprocess.run([sys.executable, "-c", SEED_BEFORE_INITIALISATION],
                            capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert output[0] == "1234"
    assert output[1].strip() == str(list((1234).to_bytes(8, "little") + bytes(8)))


def test_rng_state_round_trips_as_a_uint8_tensor():
    random = tensorplay.accelerator.random
    random.manual_seed_all(7)  # every device, so that all states below are equal
    state = random.get_rng_state()
    assert state.dtype is tensorplay.uint8 and state.shape == (16,)
    assert state.device == tensorplay.device("cpu")
    random.set_rng_state(bytes(range(16)))
    assert random.get_rng_state().tolist() == list(range(16))
    random.set_rng_state(state)
    assert random.initial_seed() == 7
    assert [s.tolist() for s in random.get_rng_state_all()] == [state.tolist()] * \
        tensorplay.accelerator.device_count()
    with pytest.raises(ValueError, match="new_state must be 16 bytes"):
        random.set_rng_state(bytes(3))
    with pytest.raises(TypeError, match="new_state must be a uint8 tensor"):
        random.set_rng_state(tensorplay.zeros(16))
