"""NCCL over two GPUs, one process per GPU started with torchrun's variables (env://): eager and
captured collectives, and a graphed data-parallel MLP step. Skipped, with the reason, unless two
CUDA devices are visible and nccl4py with libnccl.so.2 is installed."""
import pytest

from tests.distributed.nccl_helpers import launch, needs_two_gpus

pytestmark = [pytest.mark.gpu, needs_two_gpus]


def test_collectives_eager_and_captured_on_two_ranks(tmp_path):
    ranks = launch("collectives", tmp_path)
    x = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]]           # rank r holds [1, 2, 3] * (r + 1)
    for rank, seen in enumerate(ranks):
        assert seen["all_reduce_sum"] == [3.0, 6.0, 9.0]
        assert seen["all_reduce_max"] == [2.0, 4.0, 6.0]
        assert seen["all_gather"] == x[0] + x[1]
        assert seen["all_gather_in_place"] == x[0] + x[1]
        assert seen["reduce_scatter"] == [v * 2 for v in x[rank]]
        assert seen["broadcast"] == x[1]
        for step, (summed, gathered) in zip((1, 2), seen["captured"]):
            value = [10.0 * step, 10.0 * step + 1]    # x.fill_(10 * step + rank)
            assert summed == [value[0] + value[1]] * 3
            assert gathered == [2 * value[0]] * 3 + [2 * value[1]] * 3
    conditional = [seen["conditional"] for seen in ranks]
    if "refused" in conditional[0]:
        pytest.skip(f"the driver refused NCCL's collective in a conditional body: "
                    f"{conditional[0]['refused']}")
    for seen in conditional:
        assert seen == {"ran": [1.0] * 3 + [2.0] * 3, "skipped": [1.0] * 3 + [2.0] * 3}


def test_a_graphed_data_parallel_step_matches_one_gpu_on_the_whole_batch(tmp_path):
    ranks = launch("mlp", tmp_path)
    weights = [seen["weights"] for seen in ranks]
    assert weights[0] == weights[1]                    # bitwise: the lists of floats are equal
    reference = ranks[0]["reference"]
    for name, values in weights[0].items():
        mine = _flat(values)
        theirs = _flat(reference[name])
        scale = max(abs(v) for v in theirs)
        worst = max(abs(a - b) for a, b in zip(mine, theirs))
        assert worst <= 1e-5 * scale, (name, worst, scale)


def _flat(values):
    if isinstance(values, list):
        return [v for item in values for v in _flat(item)]
    return [values]
