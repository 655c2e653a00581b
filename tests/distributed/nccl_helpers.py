"""What the NCCL GPU tests share: the reason they skip, and the two-process launcher."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tensorplay import accelerator, distributed

ROOT = Path(__file__).resolve().parents[2]


def nccl_missing():
    """Why NCCL cannot run here, or "" when it can."""
    try:
        distributed.nccl_version()
    except RuntimeError as error:
        return str(error)
    return ""


needs_nccl = pytest.mark.skipif(bool(nccl_missing()), reason=nccl_missing() or "NCCL is usable")


def two_gpus_missing():
    if not accelerator.is_available() or accelerator.device_count() < 2:
        return "needs 2 visible CUDA devices (an nvidia-h200-x2 machine)"
    return nccl_missing()


needs_two_gpus = pytest.mark.skipif(bool(two_gpus_missing()),
                                    reason=two_gpus_missing() or "2 GPUs and NCCL")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(scenario, out_dir, world_size=2, timeout=300):
    """Run tests/distributed/nccl_worker.py's scenario in world_size processes, one per GPU,
    with the variables torchrun sets; each writes rank<r>.json under out_dir. Returns the
    processes' results by rank; a rank that fails fails the test with its output."""
    port = free_port()
    processes = []
    for rank in range(world_size):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world_size),
                   LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        env.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "tests.distributed.nccl_worker", scenario, str(out_dir)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=timeout)[0])
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    for rank, (process, output) in enumerate(zip(processes, outputs)):
        assert process.returncode == 0, f"rank {rank} exited {process.returncode}:\n{output}"
    return [json.loads((Path(out_dir) / f"rank{rank}.json").read_text())
            for rank in range(world_size)]
