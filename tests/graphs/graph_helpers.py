"""Helpers of the GPU graph tests: a warmed-up input, a tensor's values, and PyTorch's
reset-and-recapture sequence run in a process of its own."""
import subprocess
import sys
import textwrap

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


# PyTorch's test_graph_capture_reset_recapture (test/test_cuda.py), on our API: the second
# capture writes a tensor of the first (b.fill_) and then rebinds it (b = b + 2), freeing its
# block mid-capture. With "joined", each capture's work runs on a stream forked from the capture
# stream and joined back, so the block is held only if frees there count as the capture's.
RESET_AND_RECAPTURE = textwrap.dedent("""
    import contextlib
    import sys

    import tensorplay as tp
    from tensorplay import accelerator, cuda
    from tensorplay.accelerator import memory

    JOINED = sys.argv[1] == "joined"
    s, side = cuda.Stream(), cuda.Stream()


    @contextlib.contextmanager
    def work():
        if not JOINED:
            yield
            return
        side.wait_stream(s)
        with cuda.stream(side):
            yield
        s.wait_stream(side)


    with cuda.stream(s):
        a = tp.full((1000,), 1.0, device="cuda")
        g = cuda.CUDAGraph()
        memory.empty_cache()
        g.capture_begin(stream=s if JOINED else None)
        with work():
            b = a
            for _ in range(10):
                b = b + 1
        g.capture_end()
    accelerator.current_stream().wait_stream(s)
    g.replay()
    assert b.sum().item() == 11000.0
    g.reset()
    with cuda.stream(s):
        g.capture_begin(stream=s if JOINED else None)
        with work():
            b.fill_(2.0)
            for _ in range(10):
                b = b + 2
        g.capture_end()
    accelerator.current_stream().wait_stream(s)
    memory.empty_cache()  # must not return the block the graph writes
    g.replay()
    assert b.sum().item() == 22000.0, b.sum().item()
    g.replay()
    accelerator.synchronize()
    g.reset()
    del g, b
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == 0
    print("ok")
""")


def reset_and_recapture(variant):
    """Run RESET_AND_RECAPTURE ("plain" or "joined") in a process of its own: should the freed
    block go back to CUDA, the replay faults (error 700) and the context is lost for the rest of
    the process. Returns the completed process."""
    return subprocess.run([sys.executable, "-c", RESET_AND_RECAPTURE, variant],
                          capture_output=True, text=True, timeout=300)
