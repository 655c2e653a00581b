"""Graph-safe state on a real GPU: registered user generators, graph-safe state swaps, random
draws inside conditional bodies (Note [Offsets on the device] in runtime/random/rng.pyx) and external
events recorded and waited on inside graphs (Note [Events in graphs] in runtime/devices/stream.pyx).

Every graph here is compared with the same work run eagerly from the same generator state: the
numbers must match bit for bit, over several replays, and the generators must end where the
eager runs leave theirs."""
import time

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda

from tests.graphs.graph_helpers import warmed

pytestmark = pytest.mark.gpu

COUNT = 4096


def numbers(tensor):
    accelerator.synchronize()
    return tensor.tolist()


def twin(generator):
    """A generator of the same device with a copy of generator's state."""
    copy = tp.Generator("cuda")
    copy.set_state(generator.get_state())
    return copy


@pytest.fixture
def loaded(quiet_device):
    """Every kernel the captures below launch, loaded before any capture."""
    x = warmed(0.0, COUNT)
    scratch = tp.Generator("cuda")
    x.uniform_(generator=scratch)
    x.normal_(generator=scratch)
    tp.rand(COUNT, device="cuda", generator=scratch)
    flag = tp.zeros(1, dtype=tp.bool, device="cuda")
    counter = tp.zeros(1, device="cuda")
    flag.copy_(counter < counter)
    x += x
    yield x


# -- every generator graph-safe -----------------------------------------------------------------


def test_a_registered_user_generator_draws_fresh_numbers_as_eager_runs_would(loaded):
    out = tp.empty(COUNT, device="cuda")
    generator = tp.Generator("cuda").manual_seed(7)
    default_state = accelerator.random.get_rng_state().tolist()
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        out.uniform_(generator=generator)
        noise = tp.randn(COUNT, device="cuda", generator=generator)
    reference = twin(generator)
    draws = []
    for _ in range(3):
        g.replay()
        draws.append((numbers(out), numbers(noise)))
    assert len({tuple(u) for u, _ in draws}) == 3  # fresh numbers on every replay
    for uniforms, normals in draws:
        again = tp.empty(COUNT, device="cuda").uniform_(generator=reference)
        assert numbers(again) == uniforms
        assert numbers(tp.randn(COUNT, device="cuda", generator=reference)) == normals
    assert generator.get_state().tolist() == reference.get_state().tolist()
    # The default generator was registered too, but drew nothing: left alone.
    assert accelerator.random.get_rng_state().tolist() == default_state


def test_an_unregistered_user_generator_is_refused_inside_a_capture(loaded):
    out = tp.empty(COUNT, device="cuda")
    generator = tp.Generator("cuda")
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="register_generator_state"):
        with cuda.graph(g):
            out.uniform_(generator=generator)
    assert generator.get_offset() == 0


def test_registration_during_a_capture_and_reset_clears_it(loaded):
    out = tp.empty(COUNT, device="cuda")
    generator = tp.Generator("cuda").manual_seed(5)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.register_generator_state(generator)
        out.uniform_(generator=generator)
    reference = twin(generator)
    g.replay()
    assert numbers(out) == numbers(tp.empty(COUNT, device="cuda").uniform_(generator=reference))
    g.reset()
    with pytest.raises(RuntimeError, match="register_generator_state"):
        with cuda.graph(g):
            out.uniform_(generator=generator)


def test_recaptures_draw_as_eager_runs_and_a_failed_one_keeps_the_previous_draws(loaded):
    from tensorplay.cuda import graphs
    out = tp.empty(COUNT, device="cuda")
    generator = tp.Generator("cuda").manual_seed(17)
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        out.uniform_(generator=generator)
    reference = twin(generator)

    def replay_matches():
        g.replay()
        assert numbers(out) == numbers(tp.empty(COUNT, device="cuda").uniform_(
            generator=reference))

    replay_matches()
    with pytest.raises(ZeroDivisionError):
        with graphs.recapture(g):  # registrations last until reset(): no new registration
            out.uniform_(generator=generator)
            1 / 0
    replay_matches()  # the replaced capture's draws, as before
    with graphs.recapture(g):
        out.uniform_(generator=generator)
    replay_matches()
    replay_matches()
    assert generator.get_state().tolist() == reference.get_state().tolist()


def test_registered_state_cannot_be_read_or_set_during_the_capture(loaded):
    out = tp.empty(COUNT, device="cuda")
    generator = tp.Generator("cuda")
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        out.uniform_(generator=generator)
        for call in (generator.get_state, generator.get_offset, generator.clone_state,
                     lambda: generator.manual_seed(1), lambda: generator.set_offset(0)):
            with pytest.raises(RuntimeError, match="registered with a CUDA graph capture"):
                call()
    assert generator.get_offset() == 0  # the capture reserved nothing eagerly


def test_graphsafe_state_swaps_inside_a_capture_replay_as_eager_swaps(loaded):
    # PyTorch's test_graphsafe_set_get_rng_state, on a user generator.
    def states(seed):
        generator = tp.Generator("cuda").manual_seed(seed)
        return generator, generator.graphsafe_get_state(), generator.clone_state()

    def steps(generator, old, new):
        generator.graphsafe_set_state(new)
        first = tp.rand(5, device="cuda", generator=generator)
        generator.graphsafe_set_state(old)
        return [first] + [tp.rand(5, device="cuda", generator=generator) for _ in range(2)]

    graphed = states(0)
    eager = states(0)
    g = cuda.CUDAGraph()
    g.register_generator_state(graphed[1])
    g.register_generator_state(graphed[2])
    with cuda.graph(g):
        captured = steps(*graphed)
    for replay in range(3):
        expected = [numbers(t) for t in steps(*eager)]
        g.replay()
        assert [numbers(t) for t in captured] == expected
        assert (graphed[1].get_offset(), graphed[2].get_offset()) == \
            (eager[1].get_offset(), eager[2].get_offset())
        if replay == 0:
            assert expected[0] == expected[1]  # the clone began where the original stood
    # After the capture the generator draws from the state set last, as in PyTorch.
    assert graphed[0].get_offset() == graphed[1].get_offset()


# -- random draws inside conditional bodies -----------------------------------------------------


def test_draws_inside_a_while_body_match_eager_draws_number_for_number(loaded):
    generator = tp.Generator("cuda").manual_seed(99)
    x = tp.empty(COUNT, device="cuda")
    total = tp.zeros(COUNT, device="cuda")
    counter = tp.zeros(1, device="cuda")
    limit = tp.zeros(1, device="cuda")
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        before = tp.rand(COUNT, device="cuda", generator=generator)
        total.fill_(0.0)
        counter.fill_(0.0)
        keep_going.copy_(counter < limit)
        g.begin_capture_to_while_node(keep_going)
        x.uniform_(generator=generator)
        total += x
        x.normal_(generator=generator)
        total += x
        counter += 1
        keep_going.copy_(counter < limit)
        g.end_capture_to_conditional_node()
        after = tp.rand(COUNT, device="cuda", generator=generator)
    reference = twin(generator)
    passes_seen = set()
    for passes in (3, 0, 5, 1, 2):
        limit.fill_(float(passes))
        g.replay()
        # An eager draw right after the replay: the offset is still on the device.
        follow = tp.rand(COUNT, device="cuda", generator=generator)
        e_before = tp.rand(COUNT, device="cuda", generator=reference)
        e_total = tp.zeros(COUNT, device="cuda")
        e_x = tp.empty(COUNT, device="cuda")
        for _ in range(passes):
            e_x.uniform_(generator=reference)
            e_total += e_x
            e_x.normal_(generator=reference)
            e_total += e_x
        e_after = tp.rand(COUNT, device="cuda", generator=reference)
        e_follow = tp.rand(COUNT, device="cuda", generator=reference)
        assert numbers(counter) == [float(passes)]
        assert numbers(before) == numbers(e_before)
        assert numbers(total) == numbers(e_total)
        if passes:
            assert numbers(x) == numbers(e_x)
            passes_seen.add(tuple(numbers(x)))
        assert numbers(after) == numbers(e_after)
        assert numbers(follow) == numbers(e_follow)
    assert len(passes_seen) == 4  # fresh numbers on every replay that looped
    # Reading the state brings the offset back from the device.
    assert generator.get_state().tolist() == reference.get_state().tolist()
    assert generator.get_offset() == reference.get_offset()


@pytest.mark.parametrize("with_else", [False, True], ids=["if", "if_else"])
def test_draws_inside_if_bodies_happen_only_in_the_branch_that_runs(loaded, with_else):
    generator = tp.Generator("cuda").manual_seed(3)
    x = tp.zeros(COUNT, device="cuda")
    flag = tp.zeros(1, dtype=tp.bool, device="cuda")

    def branch(target, run, source):
        """The draws of the branch taken: one uniform, or (else branch) two normals."""
        if run:
            target.uniform_(generator=source)
        elif with_else:
            target.normal_(generator=source)
            target.normal_(generator=source)

    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        if with_else:
            g.begin_capture_to_if_else_node(flag)
            branch(x, True, generator)
            g.begin_capture_to_next_body()
            branch(x, False, generator)
        else:
            g.begin_capture_to_if_node(flag)
            branch(x, True, generator)
        g.end_capture_to_conditional_node()
        after = tp.rand(COUNT, device="cuda", generator=generator)
    reference = twin(generator)
    e_x = tp.zeros(COUNT, device="cuda")
    for run in (True, False, False, True, True):
        flag.fill_(run)
        g.replay()
        branch(e_x, run, reference)
        e_after = tp.rand(COUNT, device="cuda", generator=reference)
        assert numbers(x) == numbers(e_x)
        assert numbers(after) == numbers(e_after)
        if not with_else:  # read back after every replay; the if/else run reads it at the end
            assert generator.get_offset() == reference.get_offset()
    assert generator.get_state().tolist() == reference.get_state().tolist()


def test_nested_bodies_and_the_default_generator_compose(loaded):
    random = accelerator.random
    random.manual_seed(1234)
    x = tp.zeros(COUNT, device="cuda")
    total = tp.zeros(COUNT, device="cuda")
    counter = tp.zeros(1, device="cuda")
    limit = tp.zeros(1, device="cuda")
    half = tp.zeros(1, device="cuda")
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    early = tp.zeros(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        counter.fill_(0.0)
        total.fill_(0.0)
        keep_going.copy_(counter < limit)
        g.begin_capture_to_while_node(keep_going)
        early.copy_(counter < half)
        g.begin_capture_to_if_node(early)
        x.uniform_()
        total += x
        g.end_capture_to_conditional_node()
        x.normal_()
        total += x
        counter += 1
        keep_going.copy_(counter < limit)
        g.end_capture_to_conditional_node()
        after = tp.rand(COUNT, device="cuda")
    start = random.get_rng_state()
    results = []
    for passes, early_passes in ((4, 2), (3, 0), (2, 2)):
        limit.fill_(float(passes))
        half.fill_(float(early_passes))
        g.replay()
        results.append((passes, early_passes, numbers(total), numbers(after)))
    replayed_state = random.get_rng_state().tolist()
    random.set_rng_state(start)
    for passes, early_passes, graphed_total, graphed_after in results:
        e_total = tp.zeros(COUNT, device="cuda")
        e_x = tp.zeros(COUNT, device="cuda")
        for index in range(passes):
            if index < early_passes:
                e_x.uniform_()
                e_total += e_x
            e_x.normal_()
            e_total += e_x
        assert numbers(e_total) == graphed_total
        assert numbers(tp.rand(COUNT, device="cuda")) == graphed_after
    assert random.get_rng_state().tolist() == replayed_state


def test_reading_an_offset_left_on_the_device_is_refused_during_a_capture(loaded):
    generator = tp.Generator("cuda")
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    x = tp.zeros(COUNT, device="cuda")
    g = cuda.CUDAGraph()
    g.register_generator_state(generator)
    with cuda.graph(g):
        g.begin_capture_to_if_node(flag)
        x.uniform_(generator=generator)
        g.end_capture_to_conditional_node()
    g.replay()
    other = cuda.CUDAGraph()
    with cuda.graph(other):
        x += 1
        with pytest.raises(RuntimeError, match="synchronises the device"):
            generator.get_state()
    assert generator.get_offset() == 4  # after the capture: read back
    generator.manual_seed(2)  # seeding drops the device offset without reading it
    assert generator.get_offset() == 0


# -- events inside graphs -------------------------------------------------------------------------


def test_external_timing_events_inside_a_graph_measure_its_kernels(loaded):
    x = tp.ones(1 << 22, device="cuda")
    start, middle, end = (cuda.Event(enable_timing=True, external=True) for _ in range(3))
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        start.record()
        x += 1
        middle.record()
        for _ in range(40):
            x += 1
        end.record()
    assert start.query()  # recorded as graph nodes: nothing of the capture to refuse
    # ... but nothing recorded them yet either: no record to time or wait for.
    with pytest.raises(RuntimeError, match="no replay has recorded it yet"):
        start.elapsed_time(end)
    with pytest.raises(RuntimeError, match="no replay has recorded it yet"):
        end.synchronize()
    for replay in range(2):
        begun = time.perf_counter()
        g.replay()
        end.synchronize()
        wall_ms = (time.perf_counter() - begun) * 1000
        light, heavy = start.elapsed_time(middle), middle.elapsed_time(end)
        assert 0 < light < heavy <= wall_ms
        assert start.elapsed_time(end) == pytest.approx(light + heavy, rel=0.01, abs=0.01)
    assert numbers(x)[0] == 1 + 2 * 41


def test_an_external_event_wait_inside_a_graph_orders_it_after_another_stream(loaded):
    source = tp.zeros(1 << 22, device="cuda")
    copy = tp.zeros(1 << 22, device="cuda")
    ready = cuda.Event(external=True)
    producer = cuda.Stream()
    ready.record(producer)  # created and recorded once before the capture
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        ready.wait()  # a wait node: each replay waits for the latest record
        copy.copy_(source)
    for value in (1.0, 2.0, 3.0):
        with cuda.stream(producer):
            for _ in range(20):
                source += 0.0  # keeps the producer busy before the value lands
            source.fill_(value)
            ready.record()
        g.replay()
        assert set(numbers(copy)) == {value}


def test_external_events_are_refused_inside_conditional_bodies(loaded):
    x = tp.zeros(COUNT, device="cuda")
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    marker = cuda.Event(external=True)
    marker.record()
    internal = cuda.Event()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_node(flag)
        x += 1
        with pytest.raises(RuntimeError, match="inside conditional bodies"):
            marker.record()
        with pytest.raises(RuntimeError, match="inside conditional bodies"):
            marker.wait()
        internal.record()  # an internal event only orders the body's streams: allowed
        internal.wait()
        g.end_capture_to_conditional_node()
        marker.record()  # outside the body: a record node
    g.replay()
    marker.synchronize()
    assert set(numbers(x)) == {1.0}
