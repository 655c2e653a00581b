"""One rank of the two-GPU NCCL tests (tests/distributed/test_nccl_two_gpus.py starts one process
per GPU with torchrun's variables): python -m tests.distributed.nccl_worker SCENARIO OUT_DIR runs
the scenario and writes what it saw to OUT_DIR/rank<RANK>.json."""
import json
import sys
from pathlib import Path

import tensorplay as tp
from tensorplay import accelerator, cuda, distributed as dist, nn, optim


def synced(tensor):
    accelerator.synchronize()
    return tensor.tolist()


def collectives():
    """Eager and captured all-reduce and all-gather (and reduce-scatter, broadcast) of
    rank-dependent values; then the same all-gather inside a conditional body."""
    rank, world = dist.get_rank(), dist.get_world_size()
    seen = {}
    x = tp.tensor([1.0, 2.0, 3.0], device="cuda") * (rank + 1)
    summed = x.clone()
    dist.all_reduce(summed)
    seen["all_reduce_sum"] = synced(summed)
    biggest = x.clone()
    dist.all_reduce(biggest, op="max")
    seen["all_reduce_max"] = synced(biggest)
    gathered = tp.empty(3 * world, device="cuda")
    dist.all_gather_into_tensor(gathered, x)
    seen["all_gather"] = synced(gathered)
    in_place = tp.zeros(3 * world, device="cuda")
    in_place[3 * rank:3 * rank + 3].copy_(x)
    dist.all_gather_into_tensor(in_place, in_place[3 * rank:3 * rank + 3])
    seen["all_gather_in_place"] = synced(in_place)
    scattered = tp.empty(3, device="cuda")
    dist.reduce_scatter_tensor(scattered, tp.cat([x] * world), op="sum")
    seen["reduce_scatter"] = synced(scattered)
    sent = x.clone()
    dist.broadcast(sent, src=1)
    seen["broadcast"] = synced(sent)

    g = cuda.CUDAGraph()
    with cuda.graph(g):
        captured_sum = x * 1
        dist.all_reduce(captured_sum)
        captured_gather = tp.empty(3 * world, device="cuda")
        dist.all_gather_into_tensor(captured_gather, x * 2)
    seen["captured"] = []
    for step in (1, 2):
        x.fill_(float(10 * step + rank))
        g.replay()
        seen["captured"].append([synced(captured_sum), synced(captured_gather)])

    # NCCL does not document collectives in conditional bodies; the driver refuses a body that
    # holds node types it does not allow, which is reported rather than failed on.
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    out = tp.zeros(3 * world, device="cuda")
    try:
        body = cuda.CUDAGraph()
        with cuda.graph(body):
            body.begin_capture_to_if_node(flag)
            dist.all_gather_into_tensor(out, x)
            body.end_capture_to_conditional_node()
    except RuntimeError as error:
        seen["conditional"] = {"refused": str(error)}
    else:
        x.fill_(float(rank + 1))
        body.replay()
        first = synced(out)
        flag.fill_(False)
        x.fill_(-1.0)
        body.replay()
        seen["conditional"] = {"ran": first, "skipped": synced(out)}
    return seen


def mlp_batch():
    """The global batch (8 samples), the same on every rank, and the MLP's initial weights."""
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to("cuda")
    x = tp.randn(8, 16, device="cuda")
    y = tp.randn(8, 4, device="cuda")
    return model, x, y


STEPS = 5
LR = 0.05


def step_loss(model, x, y, global_batch):
    # The sum over this rank's samples over the global batch size: summed over ranks by the
    # all-reduce of the gradients, it is the gradient of the mean over the global batch.
    return ((model(x) - y) ** 2).sum() / global_batch


def mlp():
    """A data-parallel step (forward, backward, all-reduce of the gradients, SGD step) captured
    as one graph per rank and replayed STEPS times; rank 0 also runs the one-GPU reference on
    the concatenated batch, eagerly."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model, x, y = mlp_batch()
    share = x.shape[0] // world
    static_x = x[rank * share:(rank + 1) * share].clone()
    static_y = y[rank * share:(rank + 1) * share].clone()
    initial = {name: value.clone() for name, value in model.state_dict().items()}

    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # warm-up outside the capture, NCCL's kernels included
        warm = optim.SGD(model.parameters(), lr=LR)
        for _ in range(2):
            warm.zero_grad()
            step_loss(model, static_x, static_y, x.shape[0]).backward()
            for parameter in model.parameters():
                dist.all_reduce(parameter.grad)
            warm.step()
    cuda.current_stream().wait_stream(side)
    model.load_state_dict(initial)
    optimizer = optim.SGD(model.parameters(), lr=LR)
    optimizer.zero_grad()

    g = cuda.CUDAGraph()
    with cuda.graph(g):
        step_loss(model, static_x, static_y, x.shape[0]).backward()
        for parameter in model.parameters():
            dist.all_reduce(parameter.grad)     # gradients from the graph's pool
        optimizer.step()
    for _ in range(STEPS):
        g.replay()
    seen = {"weights": {name: synced(value) for name, value in model.state_dict().items()}}

    if rank == 0:
        reference, _, _ = mlp_batch()
        reference.load_state_dict(initial)
        reference_optimizer = optim.SGD(reference.parameters(), lr=LR)
        for _ in range(STEPS):
            reference_optimizer.zero_grad()
            step_loss(reference, x, y, x.shape[0]).backward()
            reference_optimizer.step()
        seen["reference"] = {name: synced(value)
                             for name, value in reference.state_dict().items()}
    return seen


def main():
    scenario, out_dir = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group()  # env://: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
    rank = dist.get_rank()
    try:
        seen = {"collectives": collectives, "mlp": mlp}[scenario]()
    finally:
        dist.destroy_process_group()
    (out_dir / f"rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main()
