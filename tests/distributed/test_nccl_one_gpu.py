"""NCCL collectives on one GPU, through a group of one rank: eager, on given streams, captured in
graphs (buffers from the graph's pool, conditional bodies, recapture), and the checks that need a
group. Skipped, with the reason, where no GPU is visible or nccl4py / libnccl.so.2 is missing."""
import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda, distributed as dist
from tensorplay.cuda import graphs

from tests.distributed.nccl_helpers import needs_nccl

pytestmark = [pytest.mark.gpu, needs_nccl]


@pytest.fixture
def group(quiet_device):
    dist.init_process_group(world_size=1, rank=0)
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def values(tensor):
    accelerator.synchronize()
    return tensor.tolist()


def test_a_group_of_one_rank(group):
    assert dist.is_initialized()
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    with pytest.raises(RuntimeError, match="already initialized"):
        dist.init_process_group(world_size=1, rank=0)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16, tp.bfloat16, tp.float64, tp.int32,
                                   tp.int64, tp.int8, tp.uint8])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_all_reduce_of_one_rank_keeps_the_values(group, dtype, op):
    x = tp.tensor([1, 2, 3, 4], dtype=dtype, device="cuda")
    dist.all_reduce(x, op=op)
    assert values(x) == [1, 2, 3, 4]


def test_all_gather_and_reduce_scatter_in_and_out_of_place(group):
    x = tp.tensor([1.0, 2.0, 3.0], device="cuda")
    out = tp.zeros(3, device="cuda")
    dist.all_gather_into_tensor(out, x)
    assert values(out) == [1.0, 2.0, 3.0]
    dist.all_gather_into_tensor(out, out)           # rank 0's slice of out is all of it
    assert values(out) == [1.0, 2.0, 3.0]
    scattered = tp.zeros(3, device="cuda")
    dist.reduce_scatter_tensor(scattered, x * 2, op="avg")
    assert values(scattered) == [2.0, 4.0, 6.0]
    dist.broadcast(scattered, src=0)
    assert values(scattered) == [2.0, 4.0, 6.0]


def test_checks_that_need_the_group(group):
    x = tp.zeros(4, device="cuda")
    with pytest.raises(ValueError, match="must be contiguous"):
        dist.all_reduce(tp.zeros(4, 4, device="cuda").t())
    with pytest.raises(ValueError, match=r"world_size \(1\) times input_tensor's 4 elements, "
                                         "got 8"):
        dist.all_gather_into_tensor(tp.zeros(8, device="cuda"), x)
    with pytest.raises(ValueError, match=r"world_size \(1\) times output's 2 elements, got 4"):
        dist.reduce_scatter_tensor(tp.zeros(2, device="cuda"), x)
    with pytest.raises(TypeError, match="one dtype"):
        dist.all_gather_into_tensor(tp.zeros(4, dtype=tp.float16, device="cuda"), x)
    big = tp.zeros(8, device="cuda")
    with pytest.raises(ValueError, match="overlaps"):
        dist.all_gather_into_tensor(big[0:4], big[2:6])
    with pytest.raises(ValueError, match=r"src must be a rank in \[0, 1\), got 1"):
        dist.broadcast(x, src=1)


def test_collectives_run_in_order_on_a_given_stream(group):
    side = cuda.Stream()
    x = tp.ones(1 << 20, device="cuda")
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        y = x * 3
    dist.all_reduce(y, stream=side)                 # after y = x * 3 on side
    out = tp.empty(1 << 20, device="cuda")
    dist.all_gather_into_tensor(out, y, stream=side)
    cuda.current_stream().wait_stream(side)
    assert set(values(out)) == {3.0}


def test_destroy_and_abort_end_the_group(quiet_device):
    dist.init_process_group(world_size=1, rank=0)
    dist.destroy_process_group()
    assert not dist.is_initialized()
    dist.init_process_group(world_size=1, rank=0)   # a new communicator after destroy
    dist.abort_process_group()
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="not initialized"):
        dist.all_reduce(tp.zeros(1, device="cuda"))


def test_init_from_launcher_variables_with_a_file(quiet_device, monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("LOCAL_RANK", "0")
    dist.init_process_group(init_method=f"file://{tmp_path / 'uid'}")
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    dist.destroy_process_group()


# -- captured in graphs ----------------------------------------------------------------------


def warm_up(x):
    """Run the captured work once eagerly, so that NCCL's and our kernels load outside capture."""
    out = tp.empty(x.numel(), device="cuda")
    dist.all_gather_into_tensor(out, x * 2)
    dist.reduce_scatter_tensor(out, x + 1, op="avg")
    dist.all_reduce(out)
    accelerator.synchronize()


def test_collectives_captured_replay_on_fresh_inputs_with_buffers_of_the_graphs_pool(group):
    x = tp.tensor([1.0, 2.0, 3.0, 4.0], device="cuda")
    warm_up(x)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        doubled = x * 2                             # from the graph's pool
        gathered = tp.empty(4, device="cuda")       # likewise
        dist.all_gather_into_tensor(gathered, doubled)
        dist.all_reduce(gathered, op="sum")
        averaged = tp.empty(4, device="cuda")
        dist.reduce_scatter_tensor(averaged, gathered + 1, op="avg")
        dist.broadcast(averaged, src=0)
    assert dist.is_initialized()
    for step in range(3):
        x.copy_(tp.tensor([1.0, 2.0, 3.0, 4.0], device="cuda") * (step + 1))
        g.replay()
        expected = [2.0 * v * (step + 1) for v in (1, 2, 3, 4)]
        assert values(gathered) == expected
        assert values(averaged) == [v + 1 for v in expected]


def test_a_collective_captured_on_a_joined_stream(group):
    x = tp.tensor([5.0, 6.0], device="cuda")
    warm_up(x)
    side = cuda.Stream()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        y = x + 1
        side.wait_stream(cuda.current_stream())     # side joins the capture
        out = tp.empty(2, device="cuda")
        dist.all_gather_into_tensor(out, y, stream=side)
        cuda.current_stream().wait_stream(side)     # and joins back before the end
        z = out * 10
    x.fill_(1.0)
    g.replay()
    assert values(z) == [20.0, 20.0]


def test_a_collective_in_a_conditional_body_runs_only_when_the_predicate_holds(group):
    # A group of one rank turns each collective into a copy or a kernel on the caller's
    # stream, node types conditional bodies allow (docs/design.md, "NCCL collectives"); NCCL
    # does not document it, so a refusal by the driver is reported as the skip's reason.
    x = tp.tensor([1.0, 2.0], device="cuda")
    out = tp.zeros(2, device="cuda")
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    warm_up(x)
    g = cuda.CUDAGraph()
    try:
        with cuda.graph(g):
            g.begin_capture_to_if_node(flag)
            dist.all_gather_into_tensor(out, x * 3)
            g.end_capture_to_conditional_node()
    except RuntimeError as error:  # NCCL put a node there that the driver does not allow
        pytest.skip(f"the driver refused NCCL's collective in a conditional body: {error}")
    g.replay()
    assert values(out) == [3.0, 6.0]
    flag.fill_(False)
    x.fill_(100.0)
    g.replay()
    assert values(out) == [3.0, 6.0]                # the body was skipped


def test_a_graph_of_collectives_updated_by_a_recapture(group):
    a = tp.tensor([1.0, 2.0], device="cuda")
    b = tp.tensor([7.0, 8.0], device="cuda")
    warm_up(a)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        out = tp.empty(2, device="cuda")
        dist.all_gather_into_tensor(out, a * 2)
    g.replay()
    assert values(out) == [2.0, 4.0]
    # The same topology from other tensors: the driver updates the executable in place when
    # NCCL's nodes allow it (docs/design.md, "NCCL collectives"), else reinstantiates.
    with graphs.recapture(g, reinstantiate=True):
        out2 = tp.empty(2, device="cuda")
        dist.all_gather_into_tensor(out2, b * 2)
    g.replay()
    assert values(out2) == [14.0, 16.0]

