"""NCCL all-reduce captured in a tensorplay graph against eager calls and PyTorch's NCCL process
group in a PyTorch graph: host cost and bus bandwidth, 4 KiB to 256 MiB of float32.

Run on the GPU machine with the nccl extra installed (nccl4py, nvidia-nccl-cu13):
    python bench/bench_collectives.py [--quick] [--json PATH]
one process (a group of one rank), or one process per GPU under a launcher:
    torchrun --nproc-per-node 2 bench/bench_collectives.py
(every rank runs the same calls, as NCCL requires; rank 0 alone returns records, so run the
multi-rank form without --json, which every rank would write).
- host: nanoseconds per call, back to back, of replay() of a graph holding one captured
  all_reduce, against the eager nccl4py call (nccl.bindings.nccl.all_reduce on the same
  communicator, buffer and stream, no checks of ours) and against replay() of a PyTorch graph
  holding torch.distributed.all_reduce on PyTorch's NCCL process group; our eager
  tensorplay.distributed.all_reduce is a note.
- bandwidth: device microseconds per all-reduce, captured (replay) against eager, with bus
  bandwidth as nccl-tests defines it for all-reduce: busbw = algbw * 2 (n - 1) / n, algbw =
  bytes / time (nccl-tests, doc/PERFORMANCE.md). With one rank, busbw is 0 by that definition
  and NCCL's in-place all-reduce of one rank moves nothing: the one-GPU figures are host costs
  and launch latencies only; bus bandwidth needs two GPUs.
PyTorch's figures are left out, with a note, where torch (or its NCCL) is not available.
"""
import os
import socket

from harness.baselines import (OURS, TORCH, import_peer, interleaved, main, ours_ms, record,
                               replay_ns, trials)

import tensorplay as tp
from tensorplay import accelerator, cuda, distributed as dist

SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20)
QUICK_SIZES = (4 << 10, 1 << 20, 256 << 20)
CALLS = 200  # back-to-back calls per host figure
NCCL4PY = "nccl4py (eager call)"
EAGER = "eager (device)"


def label(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def bus_bandwidth(size, microseconds, world_size):
    """nccl-tests' all-reduce busbw in GB/s."""
    return size / (microseconds * 1e-6) / 1e9 * 2 * (world_size - 1) / world_size


def torch_group(torch):
    """PyTorch's NCCL process group: from the launcher's variables, else one rank of its own."""
    import torch.distributed as tdist
    if not tdist.is_nccl_available():
        raise RuntimeError("torch.distributed has no NCCL backend")
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(device)
    if "WORLD_SIZE" in os.environ:
        tdist.init_process_group("nccl", device_id=device)
    else:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        tdist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", world_size=1,
                                 rank=0, device_id=device)
    return tdist


def all_reduce(quick, notes):
    sizes = QUICK_SIZES if quick else SIZES
    try:
        dist.nccl_version()
    except RuntimeError as error:  # no nccl extra: nothing to measure, and the note says why
        notes.append(f"collectives skipped: {error}")
        return []
    dist.init_process_group()  # the launcher's variables, else a group of one rank
    world = dist.get_world_size()
    from tensorplay._python import distributed as impl
    group = impl._group
    stream = cuda.Stream()
    notes.append(f"all-reduce: float32 sum, in place, {world} rank(s), NCCL "
                 f"{'.'.join(map(str, dist.nccl_version()))}; each side on a stream of its own")
    ours_buffers, graphs = {}, {}
    with cuda.stream(stream):
        for size in sizes:
            x = tp.ones(size // 4, device="cuda")
            dist.all_reduce(x)  # NCCL's kernels load, its buffers are set up, outside capture
            accelerator.synchronize()
            graph = cuda.CUDAGraph()
            with cuda.graph(graph, stream=stream):
                dist.all_reduce(x)
            ours_buffers[size], graphs[size] = x, graph

    def raw_call(size):
        x = ours_buffers[size]
        return lambda: group.nccl.all_reduce(x.data_ptr(), x.data_ptr(), x.numel(), 7, 0,
                                             group.comm, stream.cuda_stream)

    def ours():
        figures = {}
        with cuda.stream(stream):
            for size in sizes:
                figures[f"host {size}"] = replay_ns(graphs[size].replay, stream.synchronize,
                                                    CALLS)
                figures[f"eager host {size}"] = replay_ns(
                    lambda: dist.all_reduce(ours_buffers[size]), stream.synchronize, CALLS)
                figures[f"device {size}"] = 1e3 * ours_ms(graphs[size].replay)
        return figures

    def nccl4py():
        figures = {}
        with cuda.stream(stream):
            for size in sizes:
                call = raw_call(size)
                figures[f"host {size}"] = replay_ns(call, stream.synchronize, CALLS)
                figures[f"device {size}"] = 1e3 * ours_ms(call)
        return figures

    sides = {OURS: ours, NCCL4PY: nccl4py}
    torch = import_peer("torch", TORCH, notes)
    tdist = None
    if torch is not None:
        try:
            tdist = torch_group(torch)
        except Exception as error:
            notes.append(f"{TORCH} left out: {type(error).__name__}: {error}")
    if tdist is not None:
        torch_stream = torch.cuda.Stream()
        torch_graphs, torch_buffers = {}, {}
        with torch.cuda.stream(torch_stream):
            for size in sizes:
                t = torch.ones(size // 4, device="cuda")
                tdist.all_reduce(t)  # the communicator is made on the first collective
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=torch_stream):
                    tdist.all_reduce(t)
                torch_graphs[size], torch_buffers[size] = graph, t

        def theirs():
            with torch.cuda.stream(torch_stream):
                return {f"host {size}": replay_ns(torch_graphs[size].replay,
                                                  torch_stream.synchronize, CALLS)
                        for size in sizes}

        sides[TORCH + " (NCCL process group, torch graph)"] = theirs
    figures = interleaved(sides, trials(quick), notes)
    records = []
    for size in sizes:
        ours_host = figures[OURS][f"host {size}"]
        for name, cases in figures.items():
            if name != OURS and f"host {size}" in cases:
                records.append(record("collectives", f"all-reduce {label(size)}: captured "
                                      "replay, host", "ns", ours_host, name,
                                      cases[f"host {size}"]))
        eager_host = figures[OURS][f"eager host {size}"]
        notes.append(f"all-reduce {label(size)}: eager tensorplay.distributed.all_reduce, host "
                     f"{eager_host.median:.0f} ns per call")
        captured = figures[OURS][f"device {size}"]
        eager = figures[NCCL4PY][f"device {size}"]
        records.append(record(
            "collectives", f"all-reduce {label(size)}: captured vs eager, device", "us",
            captured, EAGER, eager,
            busbw=bus_bandwidth(size, captured.median, world),
            peer_busbw=bus_bandwidth(size, eager.median, world)))
        notes.append(f"all-reduce {label(size)}: busbw captured "
                     f"{bus_bandwidth(size, captured.median, world):.1f} GB/s, eager "
                     f"{bus_bandwidth(size, eager.median, world):.1f} GB/s ({world} rank(s))")
    del graphs, ours_buffers
    if tdist is not None:
        del torch_graphs, torch_buffers
        tdist.destroy_process_group()
    dist.destroy_process_group()
    if world > 1 and int(os.environ.get("RANK", 0)) != 0:
        return []
    return records


AREAS = {"collectives": all_reduce}

if __name__ == "__main__":
    main(AREAS, __doc__)
