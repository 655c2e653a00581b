"""nn.Embedding and functional.embedding, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests:
- test/nn/test_embedding.py: TestEmbeddingNN.test_embedding_padding_idx (the padding row
  starts at zero and gets no gradient; a negative padding_idx counts from the end; out of
  range is refused), test_embedding_functional (F.embedding equals the module with the same
  weight), test_embedding_dense_grad (the weight's gradient sums the output's gradient of
  every position that looked a row up), test_embedding_max_norm's shapes (an index tensor
  of two dimensions gives (batch, sequence, dim)) and the int32 / int64 index cases of
  TestEmbeddingNNDeviceType.test_embedding_dense_grad;
- test/test_nn.py TestNN.test_embedding_from_pretrained's check that the lookup returns the
  given rows (here through F.embedding with that weight).
Values and gradients are compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_matches_pytorch_with_the_same_weight(device, index_dtype):
    torch = import_or_skip("torch")
    theirs = torch.nn.Embedding(7, 4, padding_idx=2, dtype=torch.float64)
    ours = nn.Embedding(7, 4, padding_idx=2, dtype=tp.float64, device=device)
    with tp.no_grad():
        ours.weight.copy_(tp.tensor(theirs.weight.detach().tolist(), dtype=tp.float64))
    indices = [[0, 2, 6, 6], [2, 1, 0, 5]]
    mine = ours(tp.tensor(indices, dtype=getattr(tp, index_dtype), device=device))
    reference = theirs(torch.tensor(indices, dtype=getattr(torch, index_dtype)))
    assert tuple(mine.shape) == tuple(reference.shape) == (2, 4, 4)
    numpy.testing.assert_array_equal(values(mine), reference.detach().numpy())
    weights = numpy.arange(1.0, 33.0).reshape(2, 4, 4)
    (mine * tp.tensor(weights.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (reference * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_array_equal(values(ours.weight.grad), theirs.weight.grad.numpy())
    assert values(ours.weight.grad)[2].tolist() == [0.0] * 4  # the padding row
    assert repr(ours) == repr(theirs) == "Embedding(7, 4, padding_idx=2)"


@pytest.mark.parametrize("device", DEVICES)
def test_initialisation_and_padding(device):
    table = nn.Embedding(1000, 8, padding_idx=-1, device=device)
    assert table.padding_idx == 999 and table.weight.requires_grad
    weight = values(table.weight)
    assert weight[999].tolist() == [0.0] * 8
    assert abs(weight[:999].mean()) < 0.05 and abs(weight[:999].std() - 1.0) < 0.05  # N(0, 1)
    assert repr(nn.Embedding(3, 2)) == "Embedding(3, 2)"
    assert [name for name, _ in table.named_parameters()] == ["weight"]


@pytest.mark.parametrize("device", DEVICES)
def test_functional_form_and_the_module_agree(device):
    table = nn.Embedding(5, 3, device=device)
    index = tp.tensor([[4, 0], [1, 1]], device=device)
    numpy.testing.assert_array_equal(values(table(index)),
                                     values(F.embedding(index, table.weight)))
    weight = tp.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], device=device,
                       requires_grad=True)
    F.embedding(tp.tensor([0, 0, 1], device=device), weight, padding_idx=0).sum().backward()
    assert values(weight.grad).tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]


def test_refusals():
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(ValueError, match="padding_idx must be within num_embeddings"):
        nn.Embedding(4, 2, padding_idx=-5)
    with pytest.raises(TypeError, match="padding_idx"):
        nn.Embedding(4, 2, padding_idx=1.0)
    table = nn.Embedding(4, 2)
    with pytest.raises(IndexError, match="index out of range in self"):
        table(tp.tensor([4]))
    with pytest.raises(RuntimeError, match="'indices' to have one of the following scalar"):
        table(tp.tensor([1.0]))
    with pytest.raises(RuntimeError, match="'weight' must be 2-D"):
        F.embedding(tp.tensor([0]), tp.zeros(3))
    with pytest.raises(TypeError, match="input"):
        table([1, 2])


@pytest.mark.gpu
def test_a_captured_training_step_updates_the_looked_up_rows(quiet_device):
    model = nn.Sequential(nn.Embedding(6, 3), nn.Flatten(), nn.Linear(6, 1)).cuda()
    optimizer = tp.optim.SGD(model.parameters(), lr=0.1)
    tokens = tp.tensor([[1, 4], [4, 4]], device="cuda")
    target = tp.zeros(2, 1, device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=False)
        F.mse_loss(model(tokens), target).backward()
        optimizer.step()

    step()  # warm-up: gradients and the optimiser's buffers exist before the capture
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        step()
    before = values(model[0].weight)
    graph.replay()
    after = values(model[0].weight)
    changed = numpy.abs(after - before).sum(axis=1) > 0
    assert changed.tolist() == [False, True, False, False, True, False]
