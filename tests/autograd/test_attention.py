"""functional.scaled_dot_product_attention and nn.MultiheadAttention, on the CPU and on CUDA
(marked gpu), compared with PyTorch's values and gradients.

Ported from PyTorch's own tests:
- test/test_transformers.py: the comparisons of scaled_dot_product_attention with the math
  reference of its documentation (bool and float masks broadcast over the batch, is_causal
  with L != S, an explicit scale, grouped-query attention with enable_gqa, batch dimensions
  that broadcast, 2-D inputs), the failure modes of TestSDPAFailureModes
  (test_invalid_inputs_different_datatypes, test_invalid_inputs_1_dimensional_inputs, an
  attn_mask with is_causal, heads that do not divide), and the math kernel's zeros for a
  query that may see no key;
- test/nn/test_multihead_attention.py (formerly in test/test_nn.py): test_multihead_attn_*
  (3d_attn_mask, no_bias, add_bias_kv, add_zero_attn, key_padding_mask, batch_first, kdim and
  vdim, need_weights with average_attn_weights True and False), all against torch's module
  after loading the same state_dict, with dropout 0.
"""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(),
                       dtype=numpy.float64).reshape(tuple(tensor.shape))


def ours(array, device="cpu", requires_grad=False, dtype=None):
    """A tensorplay tensor of a torch tensor's values (float64 unless it is bool)."""
    if dtype is None:
        dtype = tp.bool if str(array.dtype) == "torch.bool" else tp.float64
    made = tp.tensor(array.tolist(), dtype=dtype, device=device).reshape(tuple(array.shape))
    return made.requires_grad_(requires_grad)   # the shape kept where a size is 0


def close(mine, theirs, tolerance=1e-10):
    numpy.testing.assert_allclose(values(mine), theirs.detach().double().numpy(),
                                  rtol=tolerance, atol=tolerance)


SDPA_CASES = {
    "plain": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6)),
    "two_dimensional": dict(q=(3, 4), k=(5, 4), v=(5, 2)),
    "heads": dict(q=(2, 3, 4, 8), k=(2, 3, 6, 8), v=(2, 3, 6, 8)),
    "broadcast_batch": dict(q=(2, 1, 3, 4), k=(3, 5, 4), v=(3, 5, 4)),
    "bool_mask": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6), mask="bool"),
    "float_mask": dict(q=(2, 2, 3, 4), k=(2, 2, 5, 4), v=(2, 2, 5, 4), mask="float"),
    "batched_mask": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6), mask="bool", mask_batch=True),
    "causal_square": dict(q=(2, 4, 4), k=(2, 4, 4), v=(2, 4, 3), causal=True),
    "causal_wide": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6), causal=True),
    "causal_tall": dict(q=(1, 5, 4), k=(1, 3, 4), v=(1, 3, 2), causal=True),
    "scale": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6), scale=0.3),
    "negative_scale": dict(q=(2, 3, 4), k=(2, 5, 4), v=(2, 5, 6), scale=-1.5),
    "gqa": dict(q=(2, 6, 3, 4), k=(2, 2, 5, 4), v=(2, 3, 5, 4), gqa=True),
    "no_keys": dict(q=(2, 3, 4), k=(2, 0, 4), v=(2, 0, 4)),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(SDPA_CASES))
def test_sdpa_matches_pytorch_values_and_gradients(device, case):
    torch = import_or_skip("torch")
    spec = SDPA_CASES[case]
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(spec[n], generator=generator, dtype=torch.float64,
                           requires_grad=True) for n in ("q", "k", "v"))
    mask = None
    if "mask" in spec:
        shape = ((spec["q"][0],) if spec.get("mask_batch") else ()) + (spec["q"][-2],
                                                                        spec["k"][-2])
        if spec["mask"] == "bool":
            mask = torch.rand(shape, generator=generator) > 0.4
            mask[..., 0] = True   # every query sees a key, but rows of one are all False below
            mask[..., 1, :] = False
        else:
            mask = torch.randn(shape, generator=generator, dtype=torch.float64)
    keywords = dict(is_causal=spec.get("causal", False))
    if "scale" in spec:
        keywords["scale"] = spec["scale"]
    if spec.get("gqa"):
        keywords["enable_gqa"] = True
    reference = torch.nn.functional.scaled_dot_product_attention(q, k, v, mask, **keywords)
    mq, mk, mv = (ours(t, device, requires_grad=True) for t in (q, k, v))
    mine = F.scaled_dot_product_attention(mq, mk, mv, None if mask is None else
                                          ours(mask, device), **keywords)
    assert tuple(mine.shape) == tuple(reference.shape)
    close(mine, reference)
    weights = torch.randn(reference.shape, generator=generator, dtype=torch.float64)
    (reference * weights).sum().backward()
    (mine * ours(weights, device)).sum().backward()
    for theirs_input, my_input in ((q, mq), (k, mk), (v, mv)):
        close(my_input.grad, theirs_input.grad)


def test_sdpa_a_query_that_sees_no_key_gives_zeros_and_no_gradient():
    # PyTorch's math kernel (_safe_softmax): zeros, where a plain softmax gives NaN.
    torch = import_or_skip("torch")
    q = torch.randn(1, 2, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False], [False, False, False]])
    for attn_mask in (mask, torch.zeros(2, 3, dtype=torch.float64).masked_fill(~mask,
                                                                                float("-inf"))):
        q.grad = k.grad = None
        reference = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask)
        reference.sum().backward()
        mq, mk = ours(q, requires_grad=True), ours(k, requires_grad=True)
        mine = F.scaled_dot_product_attention(mq, mk, mk, ours(attn_mask))
        mine.sum().backward()
        assert values(mine)[0, 1].tolist() == [0.0] * 4
        close(mine, reference)
        close(mq.grad, q.grad)
        close(mk.grad, k.grad)


def test_sdpa_causal_mask_is_the_lower_triangle_from_the_top_left():
    q = tp.ones(1, 3, 1)
    k = tp.ones(1, 2, 1)
    v = tp.tensor([[[0.0], [1.0]]])
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True).tolist() == \
        [[[0.0], [0.5], [0.5]]]


def test_sdpa_dropout_keeps_the_expected_value_and_zero_does_nothing():
    tp.manual_seed(0)
    q = tp.zeros(1, 4, 2)            # uniform weights: every output is the mean of value
    v = tp.ones(1, 4, 3)
    plain = F.scaled_dot_product_attention(q, q, v, dropout_p=0.0)
    assert values(plain).tolist() == [[[1.0] * 3] * 4]
    dropped = values(F.scaled_dot_product_attention(q, q, v, dropout_p=0.5))
    # each weight 0.25 is kept (as 0.5) or dropped: the outputs are multiples of 0.5
    assert numpy.allclose(dropped * 2, numpy.round(dropped * 2))


def test_sdpa_errors_follow_pytorch():
    q, k, v = tp.zeros(2, 3, 4), tp.zeros(2, 5, 4), tp.zeros(2, 5, 6)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when "
                                           "is_causal=True"):
        F.scaled_dot_product_attention(q, k, v, tp.ones(3, 5, dtype=tp.bool), is_causal=True)
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same "
                                           "dtype"):
        F.scaled_dot_product_attention(q, k, v.to(tp.float64))
    with pytest.raises(RuntimeError, match="at least 2 dimensional"):
        F.scaled_dot_product_attention(tp.zeros(4), tp.zeros(4), tp.zeros(4))
    with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float"):
        F.scaled_dot_product_attention(q, k, v, tp.ones(3, 5, dtype=tp.int64))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match="Number of heads in key and value must divide the "
                                         "number of heads in query"):
        F.scaled_dot_product_attention(tp.zeros(2, 6, 3, 4), tp.zeros(2, 4, 5, 4),
                                       tp.zeros(2, 4, 5, 4), enable_gqa=True)
    with pytest.raises(ValueError, match="must match the size of tensor b"):
        F.scaled_dot_product_attention(tp.zeros(2, 6, 3, 4), tp.zeros(2, 3, 5, 4),
                                       tp.zeros(2, 3, 5, 4))
    with pytest.raises(ValueError, match="doesn't match the broadcast shape"):
        F.scaled_dot_product_attention(q, k, v, tp.ones(2, 2, 3, 5, dtype=tp.bool))
    with pytest.raises(ValueError, match="key's last dimension"):
        F.scaled_dot_product_attention(q, tp.zeros(2, 5, 3), v)
    with pytest.raises(TypeError, match="attn_mask"):
        F.scaled_dot_product_attention(q, k, v, [[True]])
    with pytest.raises(TypeError):
        F.scaled_dot_product_attention(q, k, v, None, 0.0, False, 0.5)   # scale: keyword only


# --------------------------------------------------------------------------------------------
# MultiheadAttention


def pair(torch, embed_dim, num_heads, device="cpu", **options):
    """torch's module in float64 and ours with its state_dict loaded."""
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(embed_dim, num_heads, dtype=torch.float64, **options)
    mine = nn.MultiheadAttention(embed_dim, num_heads, dtype=tp.float64, device=device,
                                 **options)
    if options.get("add_bias_kv"):   # torch's xavier_normal_ of bias_k/v: give them values
        with torch.no_grad():
            theirs.bias_k.normal_()
            theirs.bias_v.normal_()
    if options.get("bias", True):    # biases start at zero in both: make them count
        with torch.no_grad():
            theirs.in_proj_bias.normal_()
            theirs.out_proj.bias.normal_()
    state = {name: ours(value, device) for name, value in theirs.state_dict().items()}
    result = mine.load_state_dict(state)
    assert not result.missing_keys and not result.unexpected_keys
    return theirs, mine


def test_mha_parameters_and_state_dict_keys_are_pytorchs():
    torch = import_or_skip("torch")
    for options in ({}, {"bias": False}, {"kdim": 3, "vdim": 5}, {"add_bias_kv": True}):
        theirs = torch.nn.MultiheadAttention(8, 2, **options)
        mine = nn.MultiheadAttention(8, 2, **options)
        assert list(mine.state_dict()) == list(theirs.state_dict())
        assert [(n, tuple(p.shape)) for n, p in mine.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]


def test_mha_initialisation_is_pytorchs():
    mine = nn.MultiheadAttention(16, 4)
    bound = math.sqrt(6 / (16 + 48))   # xavier_uniform_ of (3E, E)
    weight = values(mine.in_proj_weight)
    assert numpy.abs(weight).max() <= bound and numpy.abs(weight).max() > 0.8 * bound
    assert values(mine.in_proj_bias).tolist() == [0.0] * 48
    assert values(mine.out_proj.bias).tolist() == [0.0] * 16
    separate = nn.MultiheadAttention(16, 4, kdim=8, vdim=4)
    assert mine.in_proj_weight is not None and separate.in_proj_weight is None
    k_bound = math.sqrt(6 / (16 + 8))
    assert numpy.abs(values(separate.k_proj_weight)).max() <= k_bound
    assert isinstance(mine.out_proj, nn.Linear)


MHA_CASES = {
    "self": dict(),
    "batch_first": dict(options={"batch_first": True}),
    "no_bias": dict(options={"bias": False}),
    "kdim_vdim": dict(options={"kdim": 3, "vdim": 5}),
    "add_bias_kv": dict(options={"add_bias_kv": True}),
    "add_zero_attn": dict(options={"add_zero_attn": True}),
    "bias_kv_zero_attn_masks": dict(options={"add_bias_kv": True, "add_zero_attn": True},
                                    attn_mask="float", key_padding_mask="bool"),
    "bool_attn_mask_2d": dict(attn_mask="bool"),
    "float_attn_mask_3d": dict(attn_mask="float3d"),
    "key_padding_mask": dict(key_padding_mask="bool"),
    "float_key_padding_mask": dict(key_padding_mask="float"),
    "per_head_weights": dict(average=False),
    "no_weights": dict(need_weights=False),
    "no_weights_masks": dict(need_weights=False, attn_mask="bool", key_padding_mask="bool"),
    "no_weights_3d_mask": dict(need_weights=False, attn_mask="float3d"),
    "causal_hint": dict(need_weights=False, attn_mask="causal", is_causal=True),
    "causal_hint_with_weights": dict(attn_mask="causal", is_causal=True),
    "unbatched": dict(unbatched=True, attn_mask="bool", key_padding_mask="bool"),
    "unbatched_no_weights": dict(unbatched=True, need_weights=False),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # both warn
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_mha_matches_pytorch_values_and_gradients(device, case):
    torch = import_or_skip("torch")
    spec = MHA_CASES[case]
    options = spec.get("options", {})
    embed, heads, batch, L, S = 8, 2, 3, 4, 5
    theirs, mine = pair(torch, embed, heads, device, **options)
    generator = torch.Generator().manual_seed(1)
    kdim, vdim = options.get("kdim", embed), options.get("vdim", embed)

    def shaped(length, features):
        if spec.get("unbatched"):
            shape = (length, features)
        elif options.get("batch_first"):
            shape = (batch, length, features)
        else:
            shape = (length, batch, features)
        return torch.randn(shape, generator=generator, dtype=torch.float64, requires_grad=True)

    if case == "self" or case == "batch_first":
        query = shaped(L, embed)
        key = value = query
        S = L
    else:
        query, key, value = shaped(L, embed), shaped(S, kdim), shaped(S, vdim)
    attn_mask = None
    kind = spec.get("attn_mask")
    if kind == "bool":
        attn_mask = torch.rand(L, S, generator=generator) > 0.7
        attn_mask[:, 0] = False
    elif kind == "float":
        attn_mask = torch.randn(L, S, generator=generator, dtype=torch.float64)
    elif kind == "float3d":
        attn_mask = torch.randn(batch * heads, L, S, generator=generator, dtype=torch.float64)
    elif kind == "causal":
        attn_mask = torch.ones(L, S, dtype=torch.bool).triu(1)   # True: not attended
    padding = None
    kind = spec.get("key_padding_mask")
    if kind:
        padding = torch.rand((S,) if spec.get("unbatched") else (batch, S),
                             generator=generator) > 0.6
        padding[..., 0] = False
        if kind == "float":
            padding = torch.zeros(padding.shape, dtype=torch.float64).masked_fill(padding, -1e4)
    arguments = dict(key_padding_mask=padding, need_weights=spec.get("need_weights", True),
                     attn_mask=attn_mask, average_attn_weights=spec.get("average", True),
                     is_causal=spec.get("is_causal", False))
    reference, reference_weights = theirs(query, key, value, **arguments)
    mq = ours(query, device, requires_grad=True)
    mk = mq if key is query else ours(key, device, requires_grad=True)
    mv = mk if value is key else ours(value, device, requires_grad=True)
    my_arguments = dict(arguments)
    for name in ("key_padding_mask", "attn_mask"):
        if my_arguments[name] is not None:
            my_arguments[name] = ours(my_arguments[name], device)
    output, weights = mine.forward(mq, mk, mv, **my_arguments)
    assert tuple(output.shape) == tuple(reference.shape)
    close(output, reference)
    if reference_weights is None:
        assert weights is None
    else:
        assert tuple(weights.shape) == tuple(reference_weights.shape)
        close(weights, reference_weights)
    upstream = torch.randn(reference.shape, generator=generator, dtype=torch.float64)
    (reference * upstream).sum().backward()
    (output * ours(upstream, device)).sum().backward()
    for theirs_input, my_input in ((query, mq), (key, mk), (value, mv)):
        close(my_input.grad, theirs_input.grad)
    my_parameters = dict(mine.named_parameters())
    for name, parameter in theirs.named_parameters():
        close(my_parameters[name].grad, parameter.grad)


def test_mha_called_positionally_equals_forward():
    mine = nn.MultiheadAttention(4, 2)
    x = tp.ones(3, 2, 4)
    called, _ = mine(x, x, x, None, False)
    assert values(called).tolist() == values(mine.forward(x, x, x, need_weights=False)[0]).tolist()


def test_mha_dropout_only_while_training():
    mine = nn.MultiheadAttention(4, 1, dropout=0.5)
    x = tp.randn(6, 1, 4)
    mine.eval()
    first, _ = mine(x, x, x)
    second, _ = mine(x, x, x)
    assert values(first).tolist() == values(second).tolist()
    mine.train()
    tp.manual_seed(0)
    _, weights = mine(x, x, x)
    # dropped weights are 0, kept ones doubled: some rows no longer sum to 1
    assert not numpy.allclose(values(weights).sum(-1), 1.0)


def test_mha_errors_follow_pytorch_and_change_nothing():
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(6, 4)
    with pytest.raises(ValueError, match="embed_dim"):
        nn.MultiheadAttention(0, 1)
    with pytest.raises(TypeError, match="kdim"):
        nn.MultiheadAttention(4, 2, kdim="3", vdim=-1)
    with pytest.raises(ValueError, match="vdim"):
        nn.MultiheadAttention(4, 2, vdim=0)
    with pytest.raises(ValueError, match="dropout probability"):
        nn.MultiheadAttention(4, 2, dropout=2.0)
    mine = nn.MultiheadAttention(4, 2)
    x = tp.zeros(3, 2, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mine.forward(x, x, x, is_causal=True)
    with pytest.raises(ValueError, match="For batched \\(3-D\\) `query`, expected `key` and "
                                         "`value` to be 3-D"):
        mine.forward(x, tp.zeros(3, 4), x)
    with pytest.raises(ValueError, match="query should be unbatched 2D or batched 3D tensor"):
        mine.forward(tp.zeros(4), x, x)
    with pytest.raises(ValueError, match="The shape of the 2D attn_mask is"):
        mine.forward(x, x, x, attn_mask=tp.zeros(2, 3))
    with pytest.raises(ValueError, match="The shape of the 3D attn_mask is"):
        mine.forward(x, x, x, attn_mask=tp.zeros(3, 3, 3))
    with pytest.raises(ValueError, match="Expected key_padded_mask.shape\\[1\\] to be 3"):
        mine.forward(x, x, x, key_padding_mask=tp.zeros(2, 4, dtype=tp.bool))
    with pytest.raises(ValueError, match="was expecting embedding dimension of 4"):
        mine.forward(tp.zeros(3, 2, 5), x, x)
    with pytest.raises(TypeError, match="only bool and floating types of attn_mask"):
        mine.forward(x, x, x, attn_mask=tp.zeros(3, 3, dtype=tp.int64))
    with pytest.raises(TypeError, match="key_padding_mask"):
        mine.forward(x, x, x, key_padding_mask=[[True]])


def test_mha_mismatched_mask_types_warn_as_pytorch():
    mine = nn.MultiheadAttention(4, 2)
    x = tp.zeros(3, 2, 4)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and "
                                         "attn_mask is deprecated"):
        mine.forward(x, x, x, key_padding_mask=tp.zeros(2, 3, dtype=tp.bool),
                     attn_mask=tp.zeros(3, 3))


# --------------------------------------------------------------------------------------------
# CUDA graphs


@pytest.mark.gpu
def test_sdpa_and_mha_forward_and_backward_capture_and_replay_with_new_inputs(quiet_device):
    torch = import_or_skip("torch")
    theirs, mine = pair(torch, 8, 2, "cuda", batch_first=True)
    theirs, mine = theirs.float(), mine.float()
    generator = torch.Generator().manual_seed(2)
    first = torch.randn(2, 5, 8, generator=generator)
    second = torch.randn(2, 5, 8, generator=generator)
    x = tp.tensor(first.tolist(), device="cuda", requires_grad=True)
    padding = tp.tensor([[False] * 5, [False, False, False, True, True]], device="cuda")

    def step():
        for parameter in mine.parameters():
            parameter.grad = None
        x.grad = None
        output, _ = mine.forward(x, x, x, key_padding_mask=padding, need_weights=False)
        # causal SDPA of the output with itself: its mask comes from cached index tensors
        heads = output.reshape(2, 5, 2, 4).transpose(1, 2)
        attended = F.scaled_dot_product_attention(heads, heads, heads, is_causal=True)
        attended.sum().backward()
        return attended

    step()                                 # warm-up: kernels loaded, causal indices cached
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        static_output = step()
    with tp.no_grad():
        x.copy_(tp.tensor(second.tolist(), device="cuda"))
    graph.replay()
    tp.accelerator.synchronize()

    reference_x = second.clone().requires_grad_(True)
    torch_padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    output, _ = theirs(reference_x, reference_x, reference_x, key_padding_mask=torch_padding,
                       need_weights=False)
    heads = output.reshape(2, 5, 2, 4).transpose(1, 2)
    attended = torch.nn.functional.scaled_dot_product_attention(heads, heads, heads,
                                                                is_causal=True)
    attended.sum().backward()
    numpy.testing.assert_allclose(values(static_output), attended.detach().double().numpy(),
                                  rtol=1e-4, atol=1e-5)
    numpy.testing.assert_allclose(values(x.grad), reference_x.grad.double().numpy(),
                                  rtol=1e-4, atol=1e-5)
    numpy.testing.assert_allclose(values(mine.in_proj_weight.grad),
                                  theirs.in_proj_weight.grad.double().numpy(),
                                  rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_a_causal_mask_first_needed_inside_a_capture_is_captured(quiet_device):
    rng = numpy.random.default_rng(8)
    q = tp.tensor(rng.standard_normal((1, 2, 977, 4)), dtype=tp.float32,
                  device="cuda")   # a length no other test uses
    k = tp.tensor(rng.standard_normal((1, 2, 983, 4)), dtype=tp.float32, device="cuda")
    F.scaled_dot_product_attention(tp.zeros(1, 1, 2, 4, device="cuda"),
                                   tp.zeros(1, 1, 2, 4, device="cuda"),
                                   tp.zeros(1, 1, 2, 4, device="cuda"))   # kernels loaded
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        output = F.scaled_dot_product_attention(q, k, k, is_causal=True)
    graph.replay()
    eager = F.scaled_dot_product_attention(q, k, k, is_causal=True)
    assert tuple(output.shape) == (1, 2, 977, 4)
    numpy.testing.assert_allclose(values(output), values(eager), rtol=1e-5, atol=1e-6)
