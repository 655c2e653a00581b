"""Matrix products on the GPU: tensorplay against PyTorch, as ratios.

Run on the GPU machine after installing the package:  python bench/bench_matmul.py
[--area matmul|"small matmul"] [--quick] [--json PATH]. TF32 is off on both sides, so float32
products are float32 products (baselines.tf32_off). The operands are normal random numbers,
the same on both sides. Each figure is the median over interleaved trials (tensorplay
and PyTorch in turn).
- matmul: a @ b of n x n matrices, float32 and bfloat16, n from 256 to 8192 (QUICK_SIZES with
  --quick): device milliseconds per product from CUDA events around repeated products
  (baselines.device_ms, fewer repeats where they would take more than SECONDS; the events
  queued behind BUSY_COPIES copies of BUSY_BYTES, so that the host has queued every product
  before the device starts them, and a small product is timed on the device, not at the pace of
  its launches), and the throughput 2 n^3 / time in TFLOP/s, plotted against n. Target at
  n = 4096: at least 0.95x PyTorch's TFLOP/s, stated as time: tensorplay <= 1 / 0.95 x PyTorch.
- small matmul: host nanoseconds per a @ b of SMALL (64 x 512 by 512 x 1024, float32): the
  argument checks, the output's allocation and the launch, in repeats of REPEAT_CALLS products
  with the device synchronised between repeats (so the launch queue never fills and the host
  never waits for the device), best repeat. Target: <= 1.0x PyTorch.
Once a run, each area checks tensorplay's products against PyTorch's (allclose within the
dtype's TOLERANCE) and says so in its notes.
"""
import math

from harness.baselines import (OURS, TORCH, compare, import_peer, interleaved, main, ours_ms,
                               per_call_ns, tf32_off, torch_ms, trials)

SIZES = (256, 512, 1024, 2048, 4096, 8192)
QUICK_SIZES = (256, 1024, 4096)
TARGET_SIZE = 4096
DTYPES = ("float32", "bfloat16")
THROUGHPUT_TARGET = 1 / 0.95  # at least 0.95x PyTorch's TFLOP/s, as a ratio of times
SECONDS = 0.25  # the most one device-time figure spends on its repeats (an 8192 float32 product)
SWEEP = "matmul throughput against matrix size"
# The device work queued before the first event: 4 copies of 1 GiB, about 2 ms on an H200, more
# than the host takes to queue REPEATS products (PyTorch's cost ~15 µs each).
BUSY_BYTES, BUSY_COPIES = 1 << 30, 4
SMALL = (64, 512, 1024)  # m, k, n: (m x k) @ (k x n)
REPEAT_CALLS = 200  # products a host-time repeat queues: fewer than CUDA's launch queue holds
HOST_REPEATS = 25
SMALL_TARGET = 1.0
# allclose's (rtol, atol / sqrt(k)) by dtype: two libraries sum the k products of an element in
# different orders (tiles, split-k), an error that grows as sqrt(k); bfloat16's result is
# rounded to 8 significant bits, float32's to 24 (PyTorch's assert_close takes rtol 1.6e-2 for
# bfloat16).
TOLERANCE = {"float32": (1e-4, 1e-5), "bfloat16": (1.6e-2, 1e-3)}


def supported(tp, notes):
    """The DTYPES tensorplay's a @ b takes; each other one is left out with a note."""
    found = []
    for name in DTYPES:
        probe = tp.ones(16, 16, device="cuda", dtype=getattr(tp, name))
        try:
            probe @ probe
        except (TypeError, ValueError, NotImplementedError) as error:
            notes.append(f"matmul: {name} not measured: tensorplay's a @ b raises "
                         f"{type(error).__name__}: {error}")
            continue
        found.append(name)
    tp.accelerator.synchronize()
    return found


def operands(tp, torch, name, m, k, n):
    """(a, b) of tensorplay, m x k and k x n, and PyTorch's copies of them (None without it)."""
    dtype = getattr(tp, name)
    ours = (tp.randn(m, k, device="cuda", dtype=dtype), tp.randn(k, n, device="cuda", dtype=dtype))
    theirs = None if torch is None else tuple(torch.from_dlpack(x).clone() for x in ours)
    tp.accelerator.synchronize()
    return ours, theirs


def busy_work(library):
    """A call queueing BUSY_COPIES device copies of BUSY_BYTES of a library's memory (its
    tensors' copy_)."""
    source = library.empty(BUSY_BYTES // 4, device="cuda")
    target = library.empty(BUSY_BYTES // 4, device="cuda")

    def busy():
        for _ in range(BUSY_COPIES):
            target.copy_(source)

    return busy


def agreement(torch, ours, theirs, name, k):
    """Whether tensorplay's product is allclose to PyTorch's, as the notes say it."""
    rtol, atol = TOLERANCE[name]
    atol *= math.sqrt(k)
    mine, other = torch.from_dlpack(ours).float(), theirs.float()
    close = torch.allclose(mine, other, rtol=rtol, atol=atol)
    largest = (mine - other).abs().max().item()
    return (f"{'yes' if close else 'NO'} (rtol {rtol:g}, atol {atol:.2g}; largest difference "
            f"{largest:.3g})")


def matmul(quick, notes):
    import tensorplay as tp
    torch = import_peer("torch", TORCH, notes)
    notes.append(f"matmul: {tf32_off(tp, torch)}")
    sizes = QUICK_SIZES if quick else SIZES
    ours, theirs = {}, {}
    for name in supported(tp, notes):
        for n in sizes:
            ours[name, n], theirs[name, n] = operands(tp, torch, name, n, n, n)
        if torch is not None:
            (a, b), (ta, tb) = ours[name, TARGET_SIZE], theirs[name, TARGET_SIZE]
            notes.append(f"matmul: {TARGET_SIZE} x {TARGET_SIZE} {name} product allclose to "
                         f"{TORCH}'s: {agreement(torch, a @ b, ta @ tb, name, TARGET_SIZE)}")

    def side(products, milliseconds, busy):
        def measure():
            figures = {}
            for (name, n), (a, b) in products.items():
                ms = milliseconds(lambda a=a, b=b: a @ b, SECONDS, busy)
                figures["ms", name, n] = ms
                figures["TFLOP/s", name, n] = 2 * n ** 3 / (ms * 1e-3) / 1e12
            return figures
        return measure

    sides = {OURS: side(ours, ours_ms, busy_work(tp))}
    if torch is not None:
        sides[TORCH] = side(theirs, torch_ms, busy_work(torch))
    figures = interleaved(sides, trials(quick), notes)
    names = list(dict.fromkeys(name for name, _ in ours))
    records = []
    for name in names:
        records += compare("matmul", f"a @ b, {TARGET_SIZE} x {TARGET_SIZE} x {TARGET_SIZE} "
                           f"{name}, device", "ms", figures, key=("ms", name, TARGET_SIZE),
                           targets={TORCH: THROUGHPUT_TARGET})
    for name in names:
        for n in sizes:
            records += compare("matmul", f"a @ b, {n} x {n} x {n} {name}, throughput",
                               "TFLOP/s", figures, key=("TFLOP/s", name, n), sweep=SWEEP,
                               series=name, x=n)
    notes.append(f"matmul: the target is on the {TARGET_SIZE} product's time (at least 0.95x "
                 f"{TORCH}'s TFLOP/s: at most {THROUGHPUT_TARGET:.3f}x its time); in the "
                 "throughput rows, above 1 puts tensorplay ahead")
    return records


def small_matmul(quick, notes):
    import tensorplay as tp
    torch = import_peer("torch", TORCH, notes)
    notes.append(f"small matmul: {tf32_off(tp, torch)}")
    m, k, n = SMALL
    (a, b), theirs = operands(tp, torch, "float32", m, k, n)
    sides = {OURS: lambda: {"host": per_call_ns(lambda: a @ b, number=REPEAT_CALLS,
                                                repeat=HOST_REPEATS,
                                                synchronize=tp.accelerator.synchronize)}}
    if torch is not None:
        ta, tb = theirs
        notes.append(f"small matmul: the product allclose to {TORCH}'s: "
                     f"{agreement(torch, a @ b, ta @ tb, 'float32', k)}")
        sides[TORCH] = lambda: {"host": per_call_ns(lambda: ta @ tb, number=REPEAT_CALLS,
                                                    repeat=HOST_REPEATS,
                                                    synchronize=torch.cuda.synchronize)}
    figures = interleaved(sides, trials(quick), notes)
    return compare("small matmul", f"a @ b, {m} x {k} by {k} x {n} float32, host", "ns",
                   figures, key="host", targets={TORCH: SMALL_TARGET})


AREAS = {"matmul": matmul, "small matmul": small_matmul}

if __name__ == "__main__":
    main(AREAS, __doc__)
