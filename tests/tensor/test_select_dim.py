"""max(dim) / min(dim) with their indices, argmax and argmin (reduction.pyx, select_over; on
CUDA reduce.cu's select_dim) against PyTorch on the CPU: values, indices, shapes, dtypes, NaN
and ties, gradients of the values, the named tuple and the errors. The CUDA variants are marked
gpu; PyTorch is the oracle, so the module is skipped without it."""
import math

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

torch = import_or_skip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DTYPES = ["uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]
NAN = math.nan


def both(values, dtype, device, requires_grad=False):
    theirs = torch.tensor(values, dtype=getattr(torch, dtype), requires_grad=requires_grad)
    ours = tp.tensor(values, dtype=getattr(tp, dtype), device=device,
                     requires_grad=requires_grad)
    return ours, theirs


def as_floats(value):
    if isinstance(value, torch.Tensor):
        return value.detach().double().numpy()
    return numpy.array(value.to(tp.float64).cpu().tolist(), dtype=float).reshape(value.shape)


def assert_same(ours, theirs, what):
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1], what
    assert tuple(ours.shape) == tuple(theirs.shape), f"{what}: {ours.shape} vs {theirs.shape}"
    numpy.testing.assert_array_equal(as_floats(ours), as_floats(theirs), err_msg=what)


VALUES = [[[3, 1, 4, 1], [5, 9, 2, 6], [5, 3, 5, 8]],
          [[9, 7, 9, 3], [2, 3, 8, 4], [6, 2, 6, 4]]]  # ties in every direction


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_and_indices_match_pytorch_over_every_dim(dtype, device):
    x, tx = both(VALUES, dtype, device)
    for dim in (0, 1, 2, -1):
        for keepdim in (False, True):
            for name in ("max", "min"):
                got, expected = getattr(x, name)(dim, keepdim), getattr(tx, name)(dim, keepdim)
                what = f"{dtype} {name}({dim}, keepdim={keepdim})"
                assert_same(got.values, expected.values, what)
                assert_same(got.indices, expected.indices, what)
                assert_same(got[0], expected[0], what)
            for name in ("argmax", "argmin"):
                assert_same(getattr(x, name)(dim, keepdim), getattr(tx, name)(dim, keepdim),
                            f"{dtype} {name}({dim}, keepdim={keepdim})")
    for name in ("argmax", "argmin"):
        for keepdim in (False, True):
            assert_same(getattr(tp, name)(x, keepdim=keepdim),
                        getattr(torch, name)(tx, keepdim=keepdim), f"{name}(keepdim={keepdim})")
    assert_same(tp.max(x, 1).values, torch.max(tx, 1).values, "tp.max")
    assert_same(tp.min(x, dim=2, keepdim=True).indices,
                torch.min(tx, dim=2, keepdim=True).indices, "tp.min")
    assert_same(tp.max(x), torch.max(tx), "tp.max of the whole tensor")


@pytest.mark.parametrize("device", DEVICES)
def test_strided_views_and_zero_dim_tensors(device):
    x, tx = both(VALUES, "float32", device)
    for ours, theirs in ((x.transpose(0, 2), tx.transpose(0, 2)), (x[:, 1:, ::2], tx[:, 1:, ::2]),
                         (x[1, 2], tx[1, 2])):
        for dim in range(-1, max(ours.dim(), 1)):
            got, expected = ours.max(dim), theirs.max(dim)
            assert_same(got.values, expected.values, f"view max({dim})")
            assert_same(got.indices, expected.indices, f"view max({dim})")
            assert_same(ours.argmin(dim, True), theirs.argmin(dim, True), f"view argmin({dim})")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_nan_is_selected_first_as_pytorch(dtype, device):
    x, tx = both([[1.0, NAN, 3.0, NAN], [NAN, 2.0, 1.0, 0.0], [1.0, 2.0, 3.0, 3.0]], dtype,
                 device)
    for name in ("max", "min"):
        for dim in (0, 1):
            got, expected = getattr(x, name)(dim), getattr(tx, name)(dim)
            numpy.testing.assert_array_equal(as_floats(got.values), as_floats(expected.values))
            assert got.indices.tolist() == expected.indices.tolist(), (name, dim)
    assert x.argmax().item() == tx.argmax().item() == 1
    assert x.argmin(1).tolist() == tx.argmin(1).tolist()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gradients_go_to_the_selected_elements(dtype, device):
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        x, tx = both(VALUES, dtype, device, requires_grad=True)
        for name in ("max", "min"):
            x.grad = tx.grad = None
            weights = numpy.arange(1.0, 9.0).reshape(2, 4) if dim == 1 else None
            ours, theirs = getattr(x, name)(dim, keepdim).values, getattr(tx, name)(dim,
                                                                                  keepdim).values
            assert ours.requires_grad and not getattr(x, name)(dim).indices.requires_grad
            if weights is not None:
                w = weights.reshape(ours.shape).tolist()
                ours = ours * tp.tensor(w, dtype=ours.dtype, device=device)
                theirs = theirs * torch.tensor(w, dtype=theirs.dtype)
            ours.sum().backward()
            theirs.sum().backward()
            assert_same(x.grad, tx.grad, f"{name}({dim}, keepdim={keepdim}) gradient")
    scalar = tp.tensor(2.0, device=device, requires_grad=True)
    scalar.max(0).values.backward()
    assert scalar.grad.item() == 1.0


def test_the_result_is_a_named_tuple_as_torch_return_types():
    result = tp.tensor([[1.0, 2.0]]).max(dim=1)
    values, indices = result
    assert type(result).__name__ == "max" and type(result).__module__ == "tensorplay.return_types"
    assert result._fields == ("values", "indices") and values is result.values
    assert indices.dtype is tp.int64 and indices.tolist() == [1]
    assert type(tp.tensor([1.0]).min(0)).__name__ == "min"
    assert repr(result) == "max(values=tensor([2.]), indices=tensor([1]))"


def test_errors_as_pytorch():
    cases = [
        (lambda t: t.zeros(0, 3).max(0), IndexError,
         "max\\(\\): Expected reduction dim 0 to have non-zero size."),
        (lambda t: t.zeros(0, 3).argmax(), IndexError,
         "argmax\\(\\): Expected reduction dim to be specified for input.numel\\(\\) == 0."),
        (lambda t: t.tensor([True, False]).argmax(), RuntimeError,
         "argmax\\(\\): does not support bool input"),
        (lambda t: t.zeros(2).max(2), IndexError, "Dimension out of range"),
        (lambda t: t.zeros(2).max(1.0), TypeError, ""),
        (lambda t: t.zeros(2).max(keepdim=True), TypeError, ""),
    ]
    for call, error, message in cases:
        with pytest.raises(error, match=message or None):
            call(torch)
        with pytest.raises(error, match=message or None):
            call(tp)
    assert tp.zeros(0, 3).max(1).values.shape == (0,)  # an empty slice count is fine
    assert tp.tensor([True, False]).max(0).values.item() is True


@pytest.mark.gpu
def test_cuda_results_stay_on_the_device():
    x = tp.tensor(VALUES, dtype=tp.float32, device="cuda")
    result = x.max(1)
    assert result.values.device == x.device and result.indices.device == x.device
    assert tp.argmax(x).device == x.device
