"""tensorplay.distributed without a GPU: the argument checks that come before any NCCL call, the
unique-id exchange between ranks (over a stand-in for nccl4py), and the lazy import of nccl4py."""
import os
import socket
import subprocess
import sys
import threading

import pytest

import tensorplay as tp
from tensorplay import distributed as dist
from tensorplay._python import distributed as impl


def test_importing_tensorplay_does_not_import_nccl4py(root):
    code = ("import sys, tensorplay, tensorplay.distributed as d; "
            "d.is_initialized(); print(any(m == 'nccl' or m.startswith('nccl.') "
            "for m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=root)
    assert result.stdout.strip() == "False"


def test_is_available_is_a_bool_and_nccl_version_says_what_is_missing():
    assert isinstance(dist.is_available(), bool)
    if dist.is_available():
        assert len(dist.nccl_version()) == 3
        return
    with pytest.raises(RuntimeError, match=r"nccl4py|libnccl\.so\.2") as error:
        dist.nccl_version()
    assert "tensorplay[nccl]" in str(error.value)


def test_no_group_until_init_process_group():
    assert not dist.is_initialized()
    for function in (dist.get_rank, dist.get_world_size, dist.destroy_process_group,
                     dist.abort_process_group):
        with pytest.raises(RuntimeError, match="not initialized"):
            function()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"backend": "gloo"}, ValueError, "backend"),
    ({"init_method": "tcp://x:1"}, ValueError, "init_method must start with"),
    ({"init_method": "file://"}, ValueError, "names no file"),
    ({"init_method": 3}, TypeError, "init_method must be a str"),
    ({"world_size": 0, "rank": 0}, ValueError, "world_size must be at least 1"),
    ({"world_size": 2, "rank": 2}, ValueError, r"rank must be in \[0, 2\)"),
    ({"world_size": -2}, ValueError, "world_size"),
    ({"timeout": 0.0}, ValueError, "timeout must be a positive"),
    ({"timeout": float("inf")}, ValueError, "timeout must be a positive, finite"),
    ({"device_id": True}, TypeError, "device_id must be an int"),
    ({"device_id": "0"}, TypeError, "device_id must be an int"),
    ({"device_id": 64}, ValueError, r"device_id must be a device index in \[0, 64\), got 64"),
    ({"device_id": -1}, ValueError, "device_id must be a device index"),
])
def test_init_process_group_checks_its_arguments_first(kwargs, error, message):
    with pytest.raises(error, match=message):
        dist.init_process_group(**kwargs)
    assert not dist.is_initialized()


def test_init_process_group_names_the_missing_launcher_variable(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="RANK is not set"):
        dist.init_process_group()
    monkeypatch.setenv("RANK", "one")
    with pytest.raises(ValueError, match="RANK must be an integer, got 'one'"):
        dist.init_process_group()


@pytest.mark.no_gpu
def test_init_process_group_wants_a_device_once_its_arguments_are_right():
    for kwargs in ({}, {"device_id": 0}):
        with pytest.raises(RuntimeError, match="init_process_group needs an accelerator"):
            dist.init_process_group(world_size=1, rank=0, **kwargs)


@pytest.mark.parametrize("call", [
    lambda x: dist.all_reduce(x),
    lambda x: dist.broadcast(x),
    lambda x: dist.all_gather_into_tensor(x, x),
    lambda x: dist.reduce_scatter_tensor(x, x),
])
def test_collectives_check_their_tensors_before_the_group(call):
    with pytest.raises(TypeError, match="must be a tensorplay.Tensor, got list"):
        call([1.0])
    with pytest.raises(TypeError, match="dtype tensorplay.bool, which NCCL has no type for"):
        call(tp.zeros(2, dtype=tp.bool))
    with pytest.raises(TypeError, match="int16"):
        call(tp.zeros(2, dtype=tp.int16))
    with pytest.raises(ValueError, match="must be a CUDA tensor"):
        call(tp.zeros(2))


def test_collectives_check_op_and_stream():
    with pytest.raises(ValueError, match="op"):
        dist.all_reduce(tp.zeros(2), op="mean")
    with pytest.raises(ValueError, match="op"):
        dist.reduce_scatter_tensor(tp.zeros(2), tp.zeros(2), op="SUM")
    with pytest.raises(TypeError, match="stream must be a tensorplay.cuda.Stream"):
        dist.all_reduce(tp.zeros(2), stream=0)


# -- the unique-id exchange, over a stand-in for nccl4py -----------------------------------------


class FakeId:
    def __init__(self, data):
        self.data = data

    def __bytes__(self):
        return self.data


class FakeNccl:
    """nccl4py's get_unique_id, which is all the exchange calls."""

    def __init__(self, seed):
        self.data = bytes((seed + i) % 256 for i in range(128))

    def get_unique_id(self):
        return FakeId(self.data)


def run_ranks(share, world_size):
    """share(nccl, rank) on world_size threads; the ids they return, by rank."""
    results, errors = {}, []

    def run(rank):
        try:
            results[rank] = share(FakeNccl(rank), rank)
        except Exception as error:  # reported by the assertion below
            errors.append(error)
    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(world_size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    return [results[rank] for rank in range(world_size)]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_every_rank_gets_rank_0s_id_through_a_file(tmp_path):
    path = str(tmp_path / "uid")
    ids = run_ranks(lambda nccl, rank: impl._share_by_file(nccl, path, rank, 20.0), 4)
    assert ids == [FakeNccl(0).data] * 4
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_the_file_must_not_exist_beforehand(tmp_path):
    path = tmp_path / "uid"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="must not exist beforehand"):
        impl._share_by_file(FakeNccl(0), str(path), 0, 1.0)


def test_a_foreign_file_is_refused_and_a_missing_one_times_out(tmp_path):
    path = tmp_path / "uid"
    path.write_bytes(b"x" * 150)
    with pytest.raises(RuntimeError, match="did not hold tensorplay's NCCL unique id"):
        impl._share_by_file(FakeNccl(1), str(path), 1, 1.0)
    with pytest.raises(RuntimeError, match="rank 1 waited 0.2 s for rank 0"):
        impl._share_by_file(FakeNccl(1), str(tmp_path / "never"), 1, 0.2)


def test_every_rank_gets_rank_0s_id_over_tcp(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.delenv("TENSORPLAY_NCCL_PORT", raising=False)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    ids = run_ranks(lambda nccl, rank: impl._share_by_tcp(nccl, rank, 4, 20.0), 4)
    assert ids == [FakeNccl(0).data] * 4


def test_the_store_port_under_torchrun_and_when_named(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "host")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("TENSORPLAY_NCCL_PORT", raising=False)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert impl._store_address() == ("host", 29500)
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")  # torchrun's agent has 29500
    assert impl._store_address() == ("host", 29501)
    monkeypatch.setenv("TENSORPLAY_NCCL_PORT", "4000")
    assert impl._store_address() == ("host", 4000)
    monkeypatch.delenv("MASTER_PORT")
    with pytest.raises(ValueError, match="MASTER_PORT not set"):
        impl._store_address()


def test_a_rank_that_cannot_reach_rank_0_times_out(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.delenv("TENSORPLAY_NCCL_PORT", raising=False)
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    with pytest.raises(RuntimeError, match="rank 1 could not reach rank 0"):
        impl._share_by_tcp(FakeNccl(1), 1, 2, 0.3)
