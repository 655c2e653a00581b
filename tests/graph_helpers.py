"""Helpers of the GPU graph tests: a warmed-up input and a tensor's values."""
import tensorplay as tp
from tensorplay import accelerator

N = 1 << 20  # float32 elements: 4 MiB, a large-pool block


def warmed(value=0.0, count=N):
    """A CUDA tensor, after running every kernel the captures of the tests use, so that they
    are compiled and loaded before any capture."""
    x = tp.full((count,), value, device="cuda")
    scratch = x * 2
    scratch += 1
    scratch -= 1
    scratch = x + 2
    scratch.fill_(1.0)
    del scratch
    accelerator.synchronize()
    return x


def values(tensor):
    accelerator.synchronize()
    return set(tensor.tolist())
