"""tensorplay.nn.functional, nn.MSELoss, nn.NLLLoss, nn.CrossEntropyLoss and nn.Flatten against
PyTorch's (CPU): values and gradients, every reduction, ignore_index, label smoothing, class
probabilities, class weights (test_nn.py's test_cross_entropy_label_smoothing_weight and
test_nll_loss_invalid_weights), more than two dimensions, the margin losses (MarginRankingLoss,
HingeEmbeddingLoss, SoftMarginLoss, CosineEmbeddingLoss, with their OpInfo samples' shapes), and
the errors; pickling and copy.deepcopy of modules; marked gpu, the same on
a CUDA device and a training step with a loss and Adam captured into one CUDA graph."""
import copy
import pickle

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.nn import functional as F

from tests.autograd.against_pytorch import same_error
from tests.autograd.training import eager_losses
from tests.peers import import_or_skip

torch = import_or_skip("torch")
TF = torch.nn.functional


def both(array, requires_grad=True, device="cpu"):
    ours = tp.tensor(array, dtype=tp.float64, device=device, requires_grad=requires_grad)
    theirs = torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)
    return ours, theirs


def close(ours, theirs, tolerance=1e-10):
    assert numpy.allclose(numpy.array(ours.tolist()), theirs.detach().numpy(), rtol=tolerance,
                          atol=tolerance)


def check_with_grad(ours_fn, theirs_fn, *arrays, device="cpu"):
    pairs = [both(array, device=device) for array in arrays]
    ours = ours_fn(*(mine for mine, _ in pairs))
    theirs = theirs_fn(*(other for _, other in pairs))
    close(ours, theirs)
    weights = numpy.random.default_rng(9).standard_normal(tuple(theirs.shape))
    (ours * tp.tensor(weights, dtype=tp.float64, device=device)).sum().backward()
    (theirs * torch.tensor(weights)).sum().backward()
    for mine, other in pairs:
        close(mine.grad, other.grad)


RNG = numpy.random.default_rng(0)
LOGITS = RNG.standard_normal((5, 4)) * 3


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_and_log_softmax_as_pytorchs(name, dim):
    check_with_grad(lambda x: getattr(F, name)(x, dim=dim),
                    lambda x: getattr(TF, name)(x, dim=dim), LOGITS)


def test_softmax_implicit_dim_warns_as_pytorch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        ours = F.softmax(tp.tensor(LOGITS))
    close(ours, torch.softmax(torch.tensor(LOGITS), 1))


def test_relu_and_linear_as_pytorchs():
    check_with_grad(F.relu, TF.relu, LOGITS)
    weight, bias = RNG.standard_normal((3, 4)), RNG.standard_normal(3)
    check_with_grad(F.linear, TF.linear, LOGITS, weight, bias)
    check_with_grad(lambda x, w: F.linear(x, w), lambda x, w: TF.linear(x, w), LOGITS, weight)
    x = tp.tensor([-1.0, 2.0])
    assert F.relu(x, inplace=True) is x and x.tolist() == [0.0, 2.0]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_as_pytorchs(reduction):
    target = RNG.standard_normal((5, 4))
    check_with_grad(lambda x, y: F.mse_loss(x, y, reduction=reduction),
                    lambda x, y: TF.mse_loss(x, y, reduction=reduction), LOGITS, target)
    check_with_grad(lambda x, y: nn.MSELoss(reduction=reduction)(x, y),
                    lambda x, y: torch.nn.MSELoss(reduction=reduction)(x, y), LOGITS, target)


def test_mse_loss_warns_of_broadcasting_as_pytorch():
    with pytest.warns(UserWarning, match=r"Using a target size \(torch.Size\(\[4\]\)\) that is "
                                         r"different to the input size"):
        F.mse_loss(tp.tensor(LOGITS), tp.zeros(4, dtype=tp.float64))


CROSS_ENTROPY_CASES = [
    ({}, [0, 3, 1, 2, 2]),
    ({"reduction": "sum"}, [0, 3, 1, 2, 2]),
    ({"reduction": "none"}, [0, 3, 1, 2, 2]),
    ({"ignore_index": 1}, [0, 3, 1, 2, 1]),
    ({"ignore_index": -100}, [0, -100, 1, 2, -100]),
    ({"ignore_index": -100, "reduction": "none"}, [0, -100, 1, 2, -100]),
    ({"label_smoothing": 0.2}, [0, 3, 1, 2, 2]),
    ({"label_smoothing": 0.1, "ignore_index": 2}, [0, 3, 1, 2, 2]),
    ({"label_smoothing": 0.1, "reduction": "none"}, [0, 3, 1, 2, 2]),
]


@pytest.mark.parametrize("options, target", CROSS_ENTROPY_CASES)
def test_cross_entropy_of_class_indices_as_pytorchs(options, target):
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(target), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(target), **options), LOGITS)
    check_with_grad(lambda x: nn.CrossEntropyLoss(**options)(x, tp.tensor(target)),
                    lambda x: torch.nn.CrossEntropyLoss(**options)(x, torch.tensor(target)),
                    LOGITS)


@pytest.mark.parametrize("options", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                     {"label_smoothing": 0.3}])
def test_cross_entropy_of_class_probabilities_as_pytorchs(options):
    probabilities = RNG.random((5, 4))
    probabilities /= probabilities.sum(1, keepdims=True)
    check_with_grad(lambda x, y: F.cross_entropy(x, y, **options),
                    lambda x, y: TF.cross_entropy(x, y, **options), LOGITS, probabilities)


@pytest.mark.parametrize("options", [{}, {"reduction": "none"}, {"ignore_index": 0}])
def test_cross_entropy_over_more_dimensions_and_of_one_prediction(options):
    logits = RNG.standard_normal((2, 3, 4, 2))
    target = RNG.integers(0, 3, (2, 4, 2))
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(target), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(target), **options), logits)
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(2), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(2), **options), LOGITS[0])


NLL_CASES = [case for case in CROSS_ENTROPY_CASES if "label_smoothing" not in case[0]]


@pytest.mark.parametrize("options, target", NLL_CASES)
def test_nll_loss_of_log_softmax_as_pytorchs(options, target):
    # PyTorch's MNIST example: log_softmax, then nll_loss (what cross_entropy composes).
    check_with_grad(lambda x: F.nll_loss(F.log_softmax(x, dim=1), tp.tensor(target), **options),
                    lambda x: TF.nll_loss(TF.log_softmax(x, dim=1), torch.tensor(target),
                                          **options), LOGITS)
    check_with_grad(lambda x: nn.NLLLoss(**options)(x, tp.tensor(target)),
                    lambda x: torch.nn.NLLLoss(**options)(x, torch.tensor(target)), LOGITS)


def test_nll_loss_reads_only_the_targets_log_probability():
    # PyTorch gathers the target's entry: an infinite log-probability of another class (a
    # masked-out logit) leaves the loss and its gradient finite, as PyTorch's.
    logp = numpy.array([[-0.5, -numpy.inf, -1.0], [-numpy.inf, -0.25, -2.0]])
    check_with_grad(lambda x: F.nll_loss(x, tp.tensor([0, 1])),
                    lambda x: TF.nll_loss(x, torch.tensor([0, 1])), logp)
    loss = F.nll_loss(tp.tensor(logp), tp.tensor([2, 1]), reduction="none")
    assert loss.tolist() == [1.0, 0.25]


def test_nll_loss_over_more_dimensions_and_its_errors():
    logp = RNG.standard_normal((2, 3, 4))
    target = RNG.integers(0, 3, (2, 4))
    check_with_grad(lambda x: F.nll_loss(x, tp.tensor(target)),
                    lambda x: TF.nll_loss(x, torch.tensor(target)), logp)
    check_with_grad(lambda x: F.nll_loss(x, tp.tensor(1)),
                    lambda x: TF.nll_loss(x, torch.tensor(1)), LOGITS[0])
    x, theirs = tp.tensor(LOGITS), torch.tensor(LOGITS)
    same_error(lambda: F.nll_loss(x, tp.tensor([0, 1, 2, 3, 4])),
               lambda: TF.nll_loss(theirs, torch.tensor([0, 1, 2, 3, 4])))
    with pytest.raises(ValueError, match="Expected target size"):
        F.nll_loss(x, tp.tensor([0, 1]))
    with pytest.raises(RuntimeError, match="class indices"):
        F.nll_loss(x, tp.tensor([0.0] * 5, dtype=tp.float64))


# The class weights (PyTorch's weight argument): one per class of LOGITS' four.
WEIGHT = [0.5, 2.0, 1.0, 3.0]


def weights(library, device="cpu"):
    return library.tensor(WEIGHT, dtype=library.float64, device=device) if library is tp \
        else library.tensor(WEIGHT, dtype=library.float64)


@pytest.mark.parametrize("options, target", CROSS_ENTROPY_CASES)
def test_weighted_cross_entropy_of_class_indices_as_pytorchs(options, target):
    # test_nn.py's test_cross_entropy_label_smoothing_weight and the weighted OpInfo samples
    # of nn.functional.cross_entropy: the weighted mean divides by the kept targets' weights.
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(target), weights(tp), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(target), weights(torch),
                                               **options), LOGITS)
    check_with_grad(lambda x: nn.CrossEntropyLoss(weights(tp), **options)(x, tp.tensor(target)),
                    lambda x: torch.nn.CrossEntropyLoss(weights(torch), **options)(
                        x, torch.tensor(target)), LOGITS)


@pytest.mark.parametrize("options", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                     {"label_smoothing": 0.3}])
def test_weighted_cross_entropy_of_class_probabilities_as_pytorchs(options):
    probabilities = RNG.random((5, 4))
    probabilities /= probabilities.sum(1, keepdims=True)
    check_with_grad(lambda x, y: F.cross_entropy(x, y, weights(tp), **options),
                    lambda x, y: TF.cross_entropy(x, y, weights(torch), **options), LOGITS,
                    probabilities)


@pytest.mark.parametrize("options, target", NLL_CASES)
def test_weighted_nll_loss_as_pytorchs(options, target):
    check_with_grad(lambda x: F.nll_loss(F.log_softmax(x, dim=1), tp.tensor(target),
                                         weights(tp), **options),
                    lambda x: TF.nll_loss(TF.log_softmax(x, dim=1), torch.tensor(target),
                                          weights(torch), **options), LOGITS)
    check_with_grad(lambda x: nn.NLLLoss(weights(tp), **options)(x, tp.tensor(target)),
                    lambda x: torch.nn.NLLLoss(weights(torch), **options)(
                        x, torch.tensor(target)), LOGITS)


@pytest.mark.parametrize("options", [{}, {"reduction": "none"}, {"ignore_index": 0},
                                     {"label_smoothing": 0.2}])
def test_weighted_losses_over_more_dimensions_and_of_one_prediction(options):
    logits = RNG.standard_normal((2, 4, 3, 2))
    target = RNG.integers(0, 4, (2, 3, 2))
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(target), weights(tp), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(target), weights(torch),
                                               **options), logits)
    check_with_grad(lambda x: F.cross_entropy(x, tp.tensor(2), weights(tp), **options),
                    lambda x: TF.cross_entropy(x, torch.tensor(2), weights(torch), **options),
                    LOGITS[0])


def test_class_weight_errors_as_pytorchs():
    # test_nn.py's test_nll_loss_invalid_weights: a weight per class, or none.
    x, theirs = tp.tensor(LOGITS), torch.tensor(LOGITS)
    target = [0, 1, 2, 3, 0]
    for wrong in ([1.0, 2.0], [1.0] * 5, [[1.0] * 4]):
        for ours_fn, their_fn in ((F.cross_entropy, TF.cross_entropy), (F.nll_loss, TF.nll_loss)):
            same_error(lambda: ours_fn(x, tp.tensor(target), tp.tensor(wrong, dtype=tp.float64)),
                       lambda: their_fn(theirs, torch.tensor(target),
                                        torch.tensor(wrong, dtype=torch.float64)))
    with pytest.raises(RuntimeError, match=r"expected scalar type float64 but found float32 "
                                           r"\(weight\)"):
        F.cross_entropy(x, tp.tensor(target), tp.tensor(WEIGHT))
    with pytest.raises(TypeError, match="weight must be a tensorplay.Tensor"):
        F.nll_loss(x, tp.tensor(target), WEIGHT)
    with pytest.raises(TypeError, match="CrossEntropyLoss: weight"):
        nn.CrossEntropyLoss(WEIGHT)


def test_class_weight_is_a_buffer_as_pytorchs():
    for ours, theirs in ((nn.CrossEntropyLoss(weights(tp)),
                          torch.nn.CrossEntropyLoss(weights(torch))),
                         (nn.NLLLoss(weights(tp), ignore_index=1),
                          torch.nn.NLLLoss(weights(torch), ignore_index=1))):
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
        assert ours.weight.tolist() == theirs.weight.tolist()
        copied = pickle.loads(pickle.dumps(ours))
        assert copied.weight.tolist() == WEIGHT
        assert list(nn.CrossEntropyLoss().state_dict()) == \
            list(torch.nn.CrossEntropyLoss().state_dict()) == []


# The margin losses, with the OpInfo samples' shapes of
# torch/testing/_internal/common_methods_invocations.py (nn.functional.margin_ranking_loss,
# hinge_embedding_loss, soft_margin_loss, cosine_embedding_loss): targets of 1 and -1.
# The second scores are shifted so that no pair ties: at a tie the loss sits on its kink,
# where PyTorch 2.14's clamp gradient differs from tensorplay's (docs/design.md, "Where
# PyTorch versions differ").
SIGNS = numpy.where(RNG.random((5, 4)) < 0.5, -1.0, 1.0)
OTHERS = LOGITS[::-1] + 0.1
MARGIN_LOSSES = [
    ("margin_ranking_loss", "MarginRankingLoss", (LOGITS, OTHERS), SIGNS, {"margin": 0.3}),
    ("margin_ranking_loss", "MarginRankingLoss", (LOGITS, OTHERS), SIGNS, {}),
    ("hinge_embedding_loss", "HingeEmbeddingLoss", (numpy.abs(LOGITS),), SIGNS, {}),
    ("hinge_embedding_loss", "HingeEmbeddingLoss", (numpy.abs(LOGITS),), SIGNS,
     {"margin": 2.5}),
    ("soft_margin_loss", "SoftMarginLoss", (LOGITS,), SIGNS, {}),
    ("cosine_embedding_loss", "CosineEmbeddingLoss", (LOGITS, LOGITS[::-1].copy()),
     SIGNS[:, 0], {}),
    ("cosine_embedding_loss", "CosineEmbeddingLoss", (LOGITS, LOGITS[::-1].copy()),
     SIGNS[:, 0], {"margin": 0.2}),
    ("cosine_embedding_loss", "CosineEmbeddingLoss", (LOGITS[0], LOGITS[1].copy()),
     numpy.array(-1.0), {"margin": -0.5}),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("function, module, inputs, target, options", MARGIN_LOSSES)
def test_margin_losses_as_pytorchs(reduction, function, module, inputs, target, options):
    target_of = (lambda library: library.tensor(target, dtype=library.float64))
    check_with_grad(
        lambda *xs: getattr(F, function)(*xs, target_of(tp), **options, reduction=reduction),
        lambda *xs: getattr(TF, function)(*xs, target_of(torch), **options,
                                          reduction=reduction), *inputs)
    check_with_grad(
        lambda *xs: getattr(nn, module)(**options, reduction=reduction)(*xs, target_of(tp)),
        lambda *xs: getattr(torch.nn, module)(**options, reduction=reduction)(
            *xs, target_of(torch)), *inputs)


def test_margin_loss_errors_as_pytorchs():
    a, theirs = tp.tensor(LOGITS), torch.tensor(LOGITS)
    same_error(lambda: F.margin_ranking_loss(a, a, tp.ones(4)),
               lambda: TF.margin_ranking_loss(theirs, theirs, torch.ones(4)))
    same_error(lambda: F.cosine_embedding_loss(a, a, tp.ones(5, 1)),
               lambda: TF.cosine_embedding_loss(theirs, theirs, torch.ones(5, 1)))
    same_error(lambda: F.cosine_embedding_loss(a, a, tp.ones(())),
               lambda: TF.cosine_embedding_loss(theirs, theirs, torch.ones(())))
    same_error(lambda: F.soft_margin_loss(a, a, reduction="average"),
               lambda: TF.soft_margin_loss(theirs, theirs, reduction="average"))
    with pytest.raises(TypeError, match="hinge_embedding_loss: target"):
        F.hinge_embedding_loss(a, [1.0] * 4)


def test_flatten_module_as_pytorchs():
    data = RNG.standard_normal((2, 3, 4))
    for arguments in ((), (0,), (1, 2), (0, -2)):
        ours = nn.Flatten(*arguments)(tp.tensor(data))
        theirs = torch.nn.Flatten(*arguments)(torch.tensor(data))
        assert tuple(ours.shape) == tuple(theirs.shape)
        close(ours, theirs)
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten())
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 2))
    assert tuple(model(tp.ones(5, 3, 4)).shape) == (5, 2)


def test_in_place_relu_and_dropout_modules_as_pytorchs():
    x, theirs = tp.tensor([-1.0, 2.0, -3.0]), torch.tensor([-1.0, 2.0, -3.0])
    assert nn.ReLU(inplace=True)(x) is x and x.tolist() == torch.nn.ReLU(True)(theirs).tolist()
    assert repr(nn.ReLU(inplace=True)) == repr(torch.nn.ReLU(inplace=True))
    assert repr(nn.ReLU()) == repr(torch.nn.ReLU())
    ones = tp.ones(1000)
    dropped = nn.Dropout(0.5, inplace=True)(ones)
    assert dropped is ones and set(ones.tolist()) <= {0.0, 2.0}
    assert repr(nn.Dropout(0.25, inplace=True)) == repr(torch.nn.Dropout(0.25, inplace=True))
    layer = nn.Dropout(0.5, inplace=True).eval()
    kept = tp.ones(3)
    assert layer(kept) is kept and kept.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(TypeError, match="inplace"):
        nn.ReLU(inplace=1)


def test_cross_entropy_errors_as_pytorchs():
    x, theirs = tp.tensor(LOGITS), torch.tensor(LOGITS)
    same_error(lambda: F.cross_entropy(x, tp.tensor([0, 1, 2, 3, 4])),
               lambda: TF.cross_entropy(theirs, torch.tensor([0, 1, 2, 3, 4])))
    same_error(lambda: F.cross_entropy(x, tp.tensor([0, 1, 2, 3, 0]), reduction="average"),
               lambda: TF.cross_entropy(theirs, torch.tensor([0, 1, 2, 3, 0]),
                                        reduction="average"))
    same_error(lambda: nn.CrossEntropyLoss(label_smoothing=1.5),
               lambda: torch.nn.CrossEntropyLoss(label_smoothing=1.5)(theirs,
                                                                      torch.tensor([0] * 5)))
    same_error(lambda: nn.MSELoss(reduction="average"),
               lambda: torch.nn.MSELoss(reduction="average")(theirs, theirs))


def test_dropout_as_pytorchs_rule():
    x = tp.ones(20000)
    dropped = F.dropout(x, 0.25)
    values = sorted(set(dropped.tolist()))
    assert values == [0.0, pytest.approx(1 / 0.75)]
    assert abs(dropped.mean().item() - 1.0) < 0.05
    assert F.dropout(x, 0.25, training=False) is x
    same_error(lambda: F.dropout(x, 1.5), lambda: TF.dropout(torch.ones(3), 1.5))
    y = tp.ones(4)
    assert F.dropout(y, 1.0, inplace=True) is y and y.tolist() == [0.0] * 4


def model():
    tp.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 3))


def test_modules_pickle_with_their_parameters_and_settings():
    module = model().eval()
    loaded = pickle.loads(pickle.dumps(module))
    assert type(loaded) is nn.Sequential and loaded.training is False
    assert [type(child) for child in loaded] == [type(child) for child in module]
    for (name, mine), theirs in zip(loaded.state_dict().items(), module.state_dict().values()):
        assert mine.tolist() == theirs.tolist(), name
    assert isinstance(loaded[0].weight, nn.Parameter) and loaded[0].weight.requires_grad
    x = tp.randn(2, 4)
    assert loaded(x).tolist() == module(x).tolist()
    for loss in (nn.CrossEntropyLoss(ignore_index=3, label_smoothing=0.1),
                 nn.MSELoss(reduction="sum")):
        again = pickle.loads(pickle.dumps(loss))
        assert vars(again) == vars(loss)


def test_deepcopy_of_a_module_copies_its_parameters_and_keeps_sharing():
    module = nn.Module()
    module.net = model()
    module.shared = module.net[0]  # one child under two names stays one child
    copied = copy.deepcopy(module)
    assert copied.net[0] is copied.shared and copied.shared is not module.shared
    assert copied.shared.weight is not module.shared.weight
    assert copied.shared.weight.tolist() == module.shared.weight.tolist()
    with tp.no_grad():
        copied.shared.weight.zero_()
    assert module.shared.weight.abs().sum().item() > 0
    # The copy trains on its own.
    optimizer = optim.Adam(copied.parameters())
    copied.net(tp.randn(2, 4)).sum().backward()
    optimizer.step()
    assert module.shared.weight.grad is None


def test_a_small_classifier_trains_with_cross_entropy_and_adam():
    tp.manual_seed(1)
    rng = numpy.random.default_rng(1)
    x = rng.standard_normal((64, 4))
    y = (x[:, 0] > 0).astype(numpy.int64) + (x[:, 1] > 0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = optim.AdamW(net.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = tp.tensor(x, dtype=tp.float32), tp.tensor(y)
    losses = []
    for _ in range(60):
        optimizer.zero_grad()
        loss = loss_fn(net(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


@pytest.mark.gpu
def test_functional_on_a_cuda_device_as_on_the_cpu():
    cases = [(lambda x: F.log_softmax(x, dim=1), (LOGITS,)),
             (lambda x: F.softmax(x, dim=0), (LOGITS,)),
             (lambda x, y: F.mse_loss(x, y), (LOGITS, LOGITS[::-1].copy())),
             (lambda x: F.cross_entropy(x, tp.tensor([0, 3, 1, -100, 2], device=x.device),
                                        label_smoothing=0.1), (LOGITS,)),
             (lambda x: F.nll_loss(x, tp.tensor([0, 3, -100, 1, 2], device=x.device)),
              (LOGITS,)),
             (lambda x: F.cross_entropy(x, tp.tensor([0, 3, 1, -100, 2], device=x.device),
                                        weights(tp, x.device), label_smoothing=0.1), (LOGITS,)),
             (lambda x: F.nll_loss(x, tp.tensor([0, 3, -100, 1, 2], device=x.device),
                                   weights(tp, x.device)), (LOGITS,)),
             (lambda x, y: F.cross_entropy(x, y, weights(tp, x.device)),
              (LOGITS, numpy.full((5, 4), 0.25))),
             (lambda x, w: F.linear(x, w).relu(), (LOGITS, LOGITS[:3].copy()))]
    for function, arrays in cases:
        results = []
        for device in ("cpu", "cuda"):
            inputs = [tp.tensor(array, dtype=tp.float64, device=device, requires_grad=True)
                      for array in arrays]
            output = function(*inputs)
            output.sum().backward()
            results.append([output.tolist()] + [value.grad.tolist() for value in inputs])
        assert numpy.allclose(numpy.array(results[0][0]), numpy.array(results[1][0]))
        for mine, theirs in zip(results[0][1:], results[1][1:]):
            assert numpy.allclose(numpy.array(mine), numpy.array(theirs))


@pytest.mark.gpu
def test_a_captured_classifier_step_with_cross_entropy_and_adam_replays_as_eager(quiet_device):
    from tensorplay import cuda
    rng = numpy.random.default_rng(2)
    batches = []
    for _ in range(20):
        x = rng.standard_normal((32, 4))
        batches.append((tp.tensor(x, dtype=tp.float32, device="cuda"),
                        tp.tensor((x[:, 0] > 0).astype(numpy.int64), device="cuda")))
    tp.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)).to("cuda")
    eager = copy.deepcopy(net)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    optimizer = optim.Adam(net.parameters(), lr=0.01, capturable=True)
    eager_optimizer = optim.Adam(eager.parameters(), lr=0.01, capturable=True)
    expected_losses = eager_losses(eager, eager_optimizer, loss_fn, batches)
    static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):  # the warm-up step makes Adam's state
        optimizer.zero_grad()
        loss_fn(net(static_x), static_y).backward()
        optimizer.step()
    cuda.current_stream().wait_stream(side)
    optimizer.zero_grad()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        static_loss = loss_fn(net(static_x), static_y)
        static_loss.backward()
        optimizer.step()
    losses = [expected_losses[0]]
    for x, y in batches[1:]:
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        losses.append(static_loss.item())
    assert numpy.allclose(losses, expected_losses, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_softmax_of_slices_far_apart_does_not_underflow(device):
    # Each slice is shifted by its own maximum, as PyTorch's kernels do: a row 1000 below the
    # other still sums to one.
    values = numpy.array([[0.0, 1.0, 2.0], [-1000.0, -999.0, -998.0]])
    x = tp.tensor(values, dtype=tp.float32, device=device)
    expected = torch.tensor(values, dtype=torch.float32)
    for ours, theirs in ((F.softmax(x, dim=1), torch.softmax(expected, dim=1)),
                         (F.log_softmax(x, dim=1), torch.log_softmax(expected, dim=1))):
        numpy.testing.assert_allclose(ours.cpu().numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
