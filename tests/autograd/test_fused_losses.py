"""softmax, log_softmax and nll_loss as one recorded node each (reduction.pyx, Notes [Fused
softmax] and [Fused nll_loss]: on a CUDA device one kernel forward and one backward, on the CPU
numpy) against PyTorch's on the same device: values and gradients for every floating dtype; for softmax the shapes and dims of PyTorch's OpInfo
samples (sample_inputs_softmax_variant in torch/testing/_internal/opinfo/definitions/_masked.py:
S = 5, M = 10), rows longer than a block, dimensions in the middle, non-contiguous inputs, NaN
and infinities, large offsets (in the manner of PyTorch's test_log_softmax_big in
test/test_nn.py); for nll_loss and cross_entropy every reduction, class weights, ignore_index
(a class's, and one outside the classes as in PyTorch's test_nll_loss_out_of_bounds_ignore_index),
extra dimensions, a lone sample, all targets ignored and no sample (after PyTorch's
test_nll_loss_all_ignored and test_nll_loss_empty_tensor_reduction_*); for both the saved
tensors' version checks and PyTorch's grad_fn names; and, on a CUDA device, one launch each way
and a capture replayed with new inputs."""
import numpy
import pytest

import tensorplay as tp
from tensorplay import cuda
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

torch = import_or_skip("torch")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

NAMES = ["softmax", "log_softmax"]
DTYPES = ["float32", "float64", "float16", "bfloat16"]
# Relative and absolute tolerances against PyTorch's kernels, by dtype: the sums of both run in
# float for the 16-bit floats, in a different order.
TOLERANCES = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "float16": (2e-3, 2e-3),
              "bfloat16": (2e-2, 2e-2)}
S, M = 5, 10
OPINFO_CASES = [((S,), 0), ((S, S), 0), ((S, S), 1), ((S, S), -1), ((S, M, S), 2),
                ((S, 0, 0), -1), ((), 0)]
OUR_CASES = [((4, 1536), -1), ((2, 700, 3), 1), ((3, 1), 1), ((1, 1), 0), ((2, 3, 4, 5), 0)]


def pair(values, dtype, requires_grad=True, device="cuda"):
    """The same values as a tensorplay and a PyTorch tensor of dtype on device."""
    ours = tp.tensor(values, dtype=tp.float64, device=device).to(getattr(tp, dtype))
    theirs = torch.tensor(values, dtype=torch.float64, device=device).to(getattr(torch, dtype))
    return ours.requires_grad_(requires_grad), theirs.requires_grad_(requires_grad)


def as_numpy(tensor):
    if isinstance(tensor, torch.Tensor):
        return tensor.detach().double().cpu().numpy()
    return tensor.detach().to(tp.float64).cpu().numpy()


def assert_close(ours, theirs, dtype):
    rtol, atol = TOLERANCES[dtype]
    assert tuple(ours.shape) == tuple(theirs.shape)
    numpy.testing.assert_allclose(as_numpy(ours), as_numpy(theirs), rtol=rtol, atol=atol,
                                  equal_nan=True)


def check_result_and_gradient(result, expected, x, expected_x, dtype):
    """The results alike, then the gradients of both for x after the same random upstream
    gradient."""
    assert result.dtype == x.dtype
    assert_close(result, expected, dtype)
    upstream = numpy.random.default_rng(3).standard_normal(tuple(expected.shape))
    ours_up, theirs_up = pair(upstream, dtype, requires_grad=False, device=expected.device.type)
    (result * ours_up).sum().backward()
    (expected * theirs_up).sum().backward()
    assert_close(x.grad, expected_x.grad, dtype)


def check_sum_and_gradient(result, expected, x, expected_x):
    """float32 results alike, then the gradients of their sums for x."""
    assert_close(result, expected, "float32")
    result.sum().backward()
    expected.sum().backward()
    assert_close(x.grad, expected_x.grad, "float32")


def check_against_pytorch(values, dim, name, dtype, device):
    x, expected_x = pair(values, dtype, device=device)
    check_result_and_gradient(getattr(F, name)(x, dim=dim),
                              getattr(torch.nn.functional, name)(expected_x, dim=dim),
                              x, expected_x, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape, dim", OPINFO_CASES + OUR_CASES)
def test_values_and_gradients_as_pytorchs(shape, dim, name, dtype, device):
    values = numpy.random.default_rng(len(shape) + dim).standard_normal(shape) * 4
    check_against_pytorch(values, dim, name, dtype, device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_a_non_contiguous_input(name, device):
    values = numpy.random.default_rng(5).standard_normal((6, 300))
    x, expected_x = pair(values, "float32", device=device)
    result = getattr(F, name)(x.t(), dim=1)
    expected = getattr(torch.nn.functional, name)(expected_x.t(), dim=1)
    assert_close(result, expected, "float32")
    assert result.is_contiguous()
    result.sum().backward()
    expected.sum().backward()
    assert_close(x.grad, expected_x.grad, "float32")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_nan_and_infinities_as_pytorchs(name, device):
    inf, nan = float("inf"), float("nan")
    values = numpy.array([[1.0, nan, 2.0], [-inf, -inf, -inf], [inf, 1.0, 2.0],
                          [-inf, 0.0, 1.0], [1.0, 2.0, 3.0]])
    for dtype in ("float32", "float64"):
        x, expected_x = pair(values, dtype, requires_grad=False, device=device)
        assert_close(getattr(F, name)(x, dim=1),
                     getattr(torch.nn.functional, name)(expected_x, dim=1), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(16, 4), (4, 1536)])
def test_large_offsets_change_nothing(shape, device):
    # In the manner of PyTorch's test_log_softmax_big: integers, and the same plus an offset
    # large enough that exp of the unshifted values would overflow; each row is shifted by its
    # own maximum, so both give the same result.
    small = numpy.random.default_rng(7).integers(0, 100, shape).astype(numpy.float64)
    for name in NAMES:
        function = getattr(F, name)
        near = function(tp.tensor(small, device=device), dim=-1)
        far = function(tp.tensor(small + 4e9, device=device), dim=-1)
        numpy.testing.assert_allclose(as_numpy(far), as_numpy(near), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_one_kernel_each_way(name, quiet_device):
    x = tp.randn(8, 10, device="cuda", requires_grad=True)
    upstream = tp.randn(8, 10, device="cuda")
    getattr(F, name)(x, dim=1).backward(upstream)  # loads both kernels before the capture
    x.grad = None
    graph = cuda.CUDAGraph()
    graph.enable_debug_mode()  # keeps the captured graph for get_graph_data()
    with cuda.graph(graph):
        getattr(F, name)(x, dim=1).backward(upstream)
    kernels = [node["kernel_name"] for node in graph.get_graph_data()["nodes"]
               if node["type"] == "kernel"]
    assert kernels.count("softmax_dim") == 1
    assert kernels.count("softmax_backward_dim") == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_an_output_changed_in_place_refuses_backward(name, device):
    # The gradient reads the saved output, as PyTorch's does: changing it first is an error.
    x = tp.randn(3, 4, device=device, requires_grad=True)
    y = getattr(F, name)(x, dim=1)
    with tp.no_grad():
        y.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@pytest.mark.gpu
def test_captured_softmax_replays_with_new_inputs(quiet_device):
    rng = numpy.random.default_rng(11)
    static = tp.zeros(32, 100, device="cuda", requires_grad=True)
    target = tp.zeros(32, dtype=tp.int64, device="cuda")
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # warm-up: the kernels load outside the capture
        F.cross_entropy(static, target).backward()
    cuda.current_stream().wait_stream(side)
    static.grad = None
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        loss = F.cross_entropy(static, target)
        loss.backward()
    for _ in range(3):
        logits = rng.standard_normal((32, 100)) * 3
        labels = rng.integers(0, 100, 32)
        with tp.no_grad():
            static.copy_(tp.tensor(logits, dtype=tp.float32, device="cuda"))
        target.copy_(tp.tensor(labels, device="cuda"))
        graph.replay()
        expected_x = torch.tensor(logits, dtype=torch.float32, device="cuda", requires_grad=True)
        expected = torch.nn.functional.cross_entropy(expected_x,
                                                     torch.tensor(labels, device="cuda"))
        expected.backward()
        assert_close(loss, expected, "float32")
        assert_close(static.grad, expected_x.grad, "float32")


REDUCTION_NAMES = ["none", "sum", "mean"]
LOSS_CASES = [((8, 5), (8,)), ((4, 5, 3), (4, 3)), ((5,), ()), ((2, 5, 3, 2), (2, 3, 2))]


def loss_operands(shape, target_shape, dtype, seed, device, ignore_index=-100, weighted=False):
    rng = numpy.random.default_rng(seed)
    classes = shape[1] if len(shape) > 1 else shape[0]
    labels = rng.integers(0, classes, target_shape)
    if labels.size > 1:
        labels.flat[1] = ignore_index  # one ignored target
    x, expected_x = pair(rng.standard_normal(shape) * 3, dtype, device=device)
    targets = (tp.tensor(labels, device=device), torch.tensor(labels, device=device))
    weights = pair(rng.uniform(0.5, 2.0, classes), dtype, requires_grad=False,
                   device=device) if weighted \
        else (None, None)
    return (x, expected_x), targets, weights


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTION_NAMES)
@pytest.mark.parametrize("shape, target_shape", LOSS_CASES)
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_losses_of_class_indices_as_pytorchs(name, shape, target_shape, reduction, weighted,
                                             dtype, device):
    (x, expected_x), (y, expected_y), (w, expected_w) = loss_operands(
        shape, target_shape, dtype, len(shape), device, weighted=weighted)
    inputs = (x, expected_x) if name == "cross_entropy" else (
        F.log_softmax(x, dim=1 if len(shape) > 1 else 0),
        torch.nn.functional.log_softmax(expected_x, dim=1 if len(shape) > 1 else 0))
    check_result_and_gradient(
        getattr(F, name)(inputs[0], y, weight=w, reduction=reduction),
        getattr(torch.nn.functional, name)(inputs[1], expected_y, weight=expected_w,
                                           reduction=reduction),
        x, expected_x, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", REDUCTION_NAMES)
def test_an_ignore_index_among_the_classes(reduction, device):
    (x, expected_x), (y, expected_y), _ = loss_operands((6, 4), (6,), "float32", 9, device,
                                                         ignore_index=2)
    loss = F.cross_entropy(x, y, ignore_index=2, reduction=reduction)
    expected = torch.nn.functional.cross_entropy(expected_x, expected_y, ignore_index=2,
                                                 reduction=reduction)
    check_sum_and_gradient(loss, expected, x, expected_x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_an_ignore_index_outside_the_classes(reduction, device):
    # After PyTorch's test_nll_loss_out_of_bounds_ignore_index (test/test_nn.py).
    values = numpy.random.default_rng(2).standard_normal((6, 3))
    x, expected_x = pair(values, "float32", device=device)
    labels = [0, 1, 255, 0, 1, 2]
    loss = F.nll_loss(x, tp.tensor(labels, device=device), ignore_index=255,
                      reduction=reduction)
    expected = torch.nn.functional.nll_loss(expected_x, torch.tensor(labels, device=device),
                                            ignore_index=255, reduction=reduction)
    check_sum_and_gradient(loss, expected, x, expected_x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", REDUCTION_NAMES)
def test_all_targets_ignored_and_no_sample(reduction, device):
    # After PyTorch's test_nll_loss_all_ignored and test_nll_loss_empty_tensor_reduction_*: the
    # mean of nothing is NaN, the sum 0, and no sample gives an empty loss without reduction.
    for rows, labels in ((3, [-100, -100, -100]), (0, [])):
        x, expected_x = pair(numpy.ones((rows, 4)), "float32", device=device)
        y = tp.tensor(labels, dtype=tp.int64, device=device)
        expected_y = torch.tensor(labels, dtype=torch.int64, device=device)
        loss = F.nll_loss(x, y, reduction=reduction)
        expected = torch.nn.functional.nll_loss(expected_x, expected_y, reduction=reduction)
        check_sum_and_gradient(loss, expected, x, expected_x)


@pytest.mark.parametrize("device", DEVICES)
def test_label_smoothing_as_pytorchs(device):
    # Smoothing keeps the composition (Note [Fused nll_loss]); its log_softmax is fused.
    (x, expected_x), (y, expected_y), (w, expected_w) = loss_operands((8, 5), (8,), "float32", 6,
                                                                      device, weighted=True)
    loss = F.cross_entropy(x, y, weight=w, label_smoothing=0.1)
    expected = torch.nn.functional.cross_entropy(expected_x, expected_y, weight=expected_w,
                                                 label_smoothing=0.1)
    check_sum_and_gradient(loss, expected, x, expected_x)


@pytest.mark.gpu
def test_a_target_outside_the_classes_reads_a_zero():
    # PyTorch asserts on the device, which poisons the CUDA context; tensorplay's kernels read
    # a zero there, as gather's and index_select's do (index.cu), so that row loses nothing.
    logp = tp.tensor([[-1.0, -2.0], [-3.0, -4.0]], device="cuda")
    losses = F.nll_loss(logp, tp.tensor([1, 7], device="cuda"), reduction="none")
    assert losses.tolist() == [2.0, 0.0]


@pytest.mark.gpu
def test_cross_entropy_is_four_kernels(quiet_device):
    x = tp.randn(16, 10, device="cuda", requires_grad=True)
    y = tp.randint(0, 10, (16,), device="cuda")
    F.cross_entropy(x, y).backward()  # loads the kernels before the capture
    x.grad = None
    graph = cuda.CUDAGraph()
    graph.enable_debug_mode()
    with cuda.graph(graph):
        F.cross_entropy(x, y).backward()
    kernels = [node["kernel_name"] for node in graph.get_graph_data()["nodes"]
               if node["type"] == "kernel"]
    for name in ("softmax_dim", "nll_loss_rows", "nll_loss_backward_rows",
                 "softmax_backward_dim"):
        assert kernels.count(name) == 1, kernels


@pytest.mark.parametrize("device", DEVICES)
def test_changed_targets_refuse_backward(device):
    # The gradient reads the saved targets, as PyTorch's does.
    x = tp.randn(4, 3, device=device, requires_grad=True)
    y = tp.tensor([0, 1, 2, 0], device=device)
    loss = F.cross_entropy(x, y)
    y.add_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_grad_fn_names_as_pytorchs(device):
    x = tp.randn(4, 3, device=device, requires_grad=True)
    y = tp.tensor([0, 1, 2, 0], device=device)
    expected_x = torch.randn(4, 3, device=device, requires_grad=True)
    expected_y = torch.tensor([0, 1, 2, 0], device=device)
    for ours, theirs in ((F.softmax(x, dim=1), torch.softmax(expected_x, dim=1)),
                         (F.log_softmax(x, dim=1), torch.log_softmax(expected_x, dim=1)),
                         (F.nll_loss(x, y), torch.nn.functional.nll_loss(expected_x, expected_y))):
        # PyTorch numbers its nodes (SoftmaxBackward0); tensorplay's names carry no number.
        assert type(theirs.grad_fn).__name__ == ours.grad_fn.name() + "0"
