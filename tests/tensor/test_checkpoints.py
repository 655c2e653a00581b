"""tensorplay.save / tensorplay.load (safetensors files), and tensors and Parameters through
pickle and copy.deepcopy (docs/design.md, "Checkpoints and pickling";
runtime/tensor/serialization.pyx, Note [Checkpoint format])."""
import copy
import importlib.util
import io
import json
import os
import pickle

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn

from tests.peers import import_or_skip

# save() and load() need the safetensors package (a dependency of the package); a machine
# without it (no network to install it) skips them, naming it, and still runs the pickle tests.
needs_safetensors = pytest.mark.skipif(importlib.util.find_spec("safetensors") is None,
                                       reason="the safetensors package is not installed")

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
          "float64"]


def sample(dtype, device="cpu"):
    """A 2x3 tensor of dtype with distinct values (bfloat16 values that it holds exactly)."""
    values = [[1, 0, 1], [0, 1, 1]] if dtype == "bool" else [[1, 2, 3], [4, 5, 6]]
    if dtype.startswith("float") or dtype == "bfloat16":
        values = [[0.5, -1.25, 3.0], [1024.0, -0.0078125, 7.5]]
    return tp.tensor(values, dtype=getattr(tp, dtype), device=device)


def same(a, b):
    assert a.dtype is b.dtype and a.shape == b.shape and a.device == b.device
    assert a.to(tp.float64).tolist() == b.to(tp.float64).tolist() if a.dtype is tp.bfloat16 \
        else a.tolist() == b.tolist()


def header(path):
    data = open(path, "rb").read()
    length = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + length])


# --------------------------------------------------------------------------------------------
# save and load


@pytest.mark.parametrize("dtype", DTYPES)
@needs_safetensors
def test_every_dtype_round_trips(tmp_path, dtype):
    path = tmp_path / "one.safetensors"
    tp.save({"x": sample(dtype)}, path)
    loaded = tp.load(path)
    assert list(loaded) == ["x"]
    same(loaded["x"], sample(dtype))
    assert not loaded["x"].requires_grad


@needs_safetensors
def test_bfloat16_is_saved_as_safetensors_bf16_bits(tmp_path):
    path = tmp_path / "bf16.safetensors"
    tp.save({"x": tp.tensor([1.0, -2.0], dtype=tp.bfloat16)}, str(path))
    assert header(path)["x"]["dtype"] == "BF16"
    # bfloat16 1.0 is 0x3f80, -2.0 is 0xc000; little-endian after the header
    data = open(path, "rb").read()
    assert data[-4:] == bytes([0x80, 0x3F, 0x00, 0xC0])


@needs_safetensors
def test_nested_dicts_are_saved_flat_with_dotted_keys_and_load_flat(tmp_path):
    w, b, v = tp.ones(2, 3), tp.zeros(2), tp.arange(4)
    path = tmp_path / "nested.safetensors"
    tp.save({"fc": {"weight": w, "bias": b}, "steps": v}, path)
    loaded = tp.load(path)
    assert list(loaded) == ["fc.weight", "fc.bias", "steps"]  # obj's order, not the file's
    same(loaded["fc.weight"], w)
    same(loaded["fc.bias"], b)
    same(loaded["steps"], v)


@needs_safetensors
def test_a_module_state_dict_round_trips_into_load_state_dict(tmp_path):
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    path = tmp_path / "model.safetensors"
    tp.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    other.load_state_dict(tp.load(path))
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert a.tolist() == b.tolist(), name


@needs_safetensors
def test_views_and_transposed_tensors_are_saved_by_value(tmp_path):
    base = tp.arange(6, dtype=tp.float32).reshape(2, 3)
    path = tmp_path / "t.safetensors"
    tp.save({"t": base.t(), "expanded": tp.ones(3).expand(2, 3), "empty": tp.zeros(0, 4)},
            path)
    loaded = tp.load(path)
    assert loaded["t"].tolist() == base.t().tolist() and loaded["t"].is_contiguous()
    assert loaded["expanded"].tolist() == [[1.0] * 3] * 2
    assert loaded["empty"].shape == (0, 4)


@needs_safetensors
def test_file_objects_both_ways():
    buffer = io.BytesIO()
    tp.save({"a": tp.tensor([1, 2]), "b": tp.tensor([0.5])}, buffer)
    buffer.seek(0)
    loaded = tp.load(buffer)
    assert loaded["a"].tolist() == [1, 2] and loaded["b"].tolist() == [0.5]


@needs_safetensors
def test_loaded_tensors_are_writable_and_share_nothing(tmp_path):
    source = tp.tensor([1.0, 2.0])
    path = tmp_path / "w.safetensors"
    tp.save({"a": source}, path)
    loaded = tp.load(path)["a"]
    loaded.add_(1)
    assert source.tolist() == [1.0, 2.0] and loaded.tolist() == [2.0, 3.0]


@needs_safetensors
def test_the_devices_are_recorded_in_the_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    tp.save({"b": tp.ones(1), "a": tp.zeros(1)}, path)
    metadata = header(path)["__metadata__"]
    assert json.loads(metadata["tensorplay.devices"]) == {"b": "cpu", "a": "cpu"}


@needs_safetensors
def test_requires_grad_is_not_saved(tmp_path):
    path = tmp_path / "g.safetensors"
    tp.save({"p": nn.Parameter(tp.ones(2))}, path)
    loaded = tp.load(path)["p"]
    assert type(loaded) is tp.Tensor and not loaded.requires_grad


@needs_safetensors
def test_save_replaces_an_existing_file_whole(tmp_path):
    path = tmp_path / "r.safetensors"
    tp.save({"a": tp.ones(1000)}, path)
    tp.save({"b": tp.ones(1)}, path)
    assert list(tp.load(path)) == ["b"]
    assert os.listdir(tmp_path) == ["r.safetensors"]  # no temporary file left


@pytest.mark.parametrize("obj, error, message", [
    ([tp.ones(1)], TypeError, "obj must be a dict of tensors"),
    (tp.ones(1), TypeError, "obj must be a dict of tensors"),
    ({"a": 1}, TypeError, r"obj\['a'\] must be a tensor or a dict of tensors, got int"),
    ({"a": {"b": [tp.ones(1)]}}, TypeError, r"obj\['a'\]\['b'\] must be a tensor.*got list"),
    ({"a": numpy.ones(2)}, TypeError, r"obj\['a'\] must be a tensor.*got ndarray"),
    ({1: tp.ones(1)}, TypeError, r"keys must be str, got int at obj\[1\]"),
    ({"a": {}}, ValueError, r"obj\['a'\] is an empty dict"),
    ({"a.b": tp.ones(1), "a": {"b": tp.ones(1)}}, ValueError,
     r"obj\['a.b'\] and obj\['a'\]\['b'\] are both saved as 'a.b'"),
])
@needs_safetensors
def test_what_cannot_be_saved_is_refused_naming_the_key_and_writes_nothing(
        tmp_path, obj, error, message):
    path = tmp_path / "refused.safetensors"
    with pytest.raises(error, match=message):
        tp.save(obj, path)
    assert os.listdir(tmp_path) == []


@needs_safetensors
def test_a_module_is_refused_with_a_hint():
    with pytest.raises(TypeError, match=r"save module.state_dict\(\)"):
        tp.save(nn.Linear(2, 2), io.BytesIO())


@needs_safetensors
def test_tensors_sharing_memory_are_refused_naming_both(tmp_path):
    base = tp.arange(6, dtype=tp.float32)
    path = tmp_path / "shared.safetensors"
    for obj in ({"a": base, "b": base[2:4]}, {"a": base, "b": base},
                {"w": base, "n": {"v": base.view(2, 3)}}):
        with pytest.raises(RuntimeError, match=r"share memory"):
            tp.save(obj, path)
    with pytest.raises(RuntimeError, match=r"obj\['a'\] and obj\['b'\] share memory"):
        tp.save({"a": base[0:3], "b": base[2:5]}, path)
    assert os.listdir(tmp_path) == []
    tp.save({"a": base[0:3], "b": base[3:6]}, path)  # disjoint parts of one buffer
    assert tp.load(path)["b"].tolist() == [3.0, 4.0, 5.0]


@needs_safetensors
def test_existing_file_is_kept_when_a_save_is_refused(tmp_path):
    path = tmp_path / "keep.safetensors"
    tp.save({"a": tp.ones(2)}, path)
    with pytest.raises(TypeError):
        tp.save({"a": tp.zeros(2), "b": "text"}, path)
    assert tp.load(path)["a"].tolist() == [1.0, 1.0]
    assert os.listdir(tmp_path) == ["keep.safetensors"]


@needs_safetensors
def test_a_failed_write_leaves_no_temporary_file_and_the_old_file_whole(tmp_path,
                                                                        monkeypatch):
    path = tmp_path / "kept.safetensors"
    tp.save({"a": tp.ones(2)}, path)

    def failing_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        tp.save({"a": tp.zeros(2)}, path)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["kept.safetensors"]
    assert tp.load(path)["a"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("f, error, message", [
    (1, TypeError, "f must be a path"),
    (None, TypeError, "f must be a path"),
    ("", ValueError, "empty path"),
])
@needs_safetensors
def test_bad_f_is_refused(f, error, message):
    with pytest.raises(error, match=message):
        tp.save({"a": tp.ones(1)}, f)
    with pytest.raises(error, match=message):
        tp.load(f)


@needs_safetensors
def test_missing_directory_and_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="f: the directory"):
        tp.save({"a": tp.ones(1)}, tmp_path / "nowhere" / "x.safetensors")
    with pytest.raises(FileNotFoundError):
        tp.load(tmp_path / "absent.safetensors")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        tp.save({"a": tp.ones(1)}, tmp_path)


@needs_safetensors
def test_a_file_that_is_not_safetensors_is_refused(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    with pytest.raises(ValueError, match="f is not a safetensors file"):
        tp.load(path)
    with pytest.raises(TypeError, match="binary mode"):
        tp.load(io.StringIO("text"))


@needs_safetensors
def test_unsupported_safetensors_dtypes_are_refused_naming_the_key(tmp_path):
    from safetensors.numpy import save_file
    path = tmp_path / "u32.safetensors"
    save_file({"counts": numpy.arange(3, dtype=numpy.uint32)}, path)
    with pytest.raises(TypeError, match="'counts' of safetensors dtype U32"):
        tp.load(path)


@pytest.mark.parametrize("map_location, error, message", [
    (1.5, TypeError, "map_location must be a device or a str"),
    ("tpu", ValueError, "map_location: unknown device type in 'tpu'"),
    ({"cuda:0": "tpu"}, ValueError, r"map_location\['cuda:0'\]: unknown device type"),
    (lambda storage, location: storage, TypeError, "a function of"),
    ({1: "cpu"}, TypeError, "map_location's keys"),
    ({"cuda:0": 3.5}, TypeError, r"map_location\['cuda:0'\]"),
])
@needs_safetensors
def test_bad_map_location_is_refused_before_reading(tmp_path, map_location, error, message):
    with pytest.raises(error, match=message):
        tp.load(tmp_path / "absent.safetensors", map_location=map_location)


@needs_safetensors
def test_map_location_cpu_forms_on_cpu_tensors(tmp_path):
    path = tmp_path / "c.safetensors"
    tp.save({"a": tp.ones(2)}, path)
    for location in ("cpu", tp.device("cpu"), {"cuda:0": "cpu"}, {"cpu": "cpu"}):
        assert tp.load(path, map_location=location)["a"].device == tp.device("cpu")


# --------------------------------------------------------------------------------------------
# Interop with PyTorch through safetensors.torch


@pytest.mark.parametrize("dtype", DTYPES)
@needs_safetensors
def test_safetensors_torch_reads_what_save_wrote(tmp_path, dtype):
    torch = import_or_skip("torch")
    from safetensors.torch import load_file
    path = tmp_path / "to_torch.safetensors"
    tp.save({"layer": {"weight": sample(dtype)}}, path)
    loaded = load_file(path)
    assert list(loaded) == ["layer.weight"]
    expected = torch.tensor(sample(dtype).to(tp.float64).tolist(),
                            dtype=getattr(torch, dtype))
    assert loaded["layer.weight"].dtype == expected.dtype
    assert torch.equal(loaded["layer.weight"], expected)


@pytest.mark.parametrize("dtype", DTYPES)
@needs_safetensors
def test_load_reads_what_safetensors_torch_wrote(tmp_path, dtype):
    torch = import_or_skip("torch")
    from safetensors.torch import save_file
    source = torch.tensor(sample(dtype).to(tp.float64).tolist(), dtype=getattr(torch, dtype))
    path = tmp_path / "from_torch.safetensors"
    save_file({"b": source, "a": source.t().contiguous()}, path)
    loaded = tp.load(path)
    assert sorted(loaded) == ["a", "b"]
    same(loaded["b"], sample(dtype))
    same(loaded["a"], sample(dtype).t().contiguous())
    assert loaded["a"].device == tp.device("cpu")


@needs_safetensors
def test_a_pytorch_module_loads_a_tensorplay_state_dict(tmp_path):
    torch = import_or_skip("torch")
    from safetensors.torch import load_file
    tp.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    path = tmp_path / "seq.safetensors"
    tp.save(model.state_dict(), path)
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    twin.load_state_dict(load_file(path))
    x = [[0.5, -1.0, 2.0]]
    assert numpy.allclose(twin(torch.tensor(x)).detach().numpy(),
                          model(tp.tensor(x)).detach().numpy(), atol=1e-6)


# --------------------------------------------------------------------------------------------
# pickle and copy.deepcopy


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensors_pickle_with_dtype_shape_and_values(dtype):
    source = sample(dtype)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        same(pickle.loads(pickle.dumps(source, protocol=protocol)), source)


def test_pickle_keeps_requires_grad_and_drops_history_and_grad():
    leaf = tp.tensor([1.0, 2.0], requires_grad=True)
    leaf.grad = tp.ones(2)
    back = pickle.loads(pickle.dumps(leaf))
    assert back.requires_grad and back.is_leaf and back.grad is None
    computed = leaf * 2
    back = pickle.loads(pickle.dumps(computed))  # as PyTorch: a leaf that requires grad
    assert back.requires_grad and back.is_leaf and back.tolist() == [2.0, 4.0]
    assert not pickle.loads(pickle.dumps(tp.ones(1))).requires_grad


def test_pickle_of_views_keeps_the_values_only():
    base = tp.arange(6, dtype=tp.float32).reshape(2, 3)
    back = pickle.loads(pickle.dumps(base.t()))
    assert back.shape == (3, 2) and back.tolist() == base.t().tolist()
    pair = pickle.loads(pickle.dumps([base, base]))
    assert pair[0] is pair[1]  # pickle's memo: one object stays one


def test_parameters_pickle_as_parameters():
    for requires_grad in (True, False):
        parameter = nn.Parameter(tp.tensor([1.0, 2.0]), requires_grad=requires_grad)
        back = pickle.loads(pickle.dumps(parameter))
        assert type(back) is nn.Parameter and back.requires_grad is requires_grad
        assert back.tolist() == [1.0, 2.0]


def test_modules_pickle_and_deepcopy_with_their_parameters():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        weight = clone[0].weight
        assert type(weight) is nn.Parameter and weight.requires_grad
        assert weight.tolist() == model[0].weight.tolist()
        assert weight.data_ptr() != model[0].weight.data_ptr()
        assert [name for name, _ in clone.named_parameters()] == ["0.weight", "0.bias"]


def test_deepcopy_shares_nothing_and_keeps_requires_grad_and_grad():
    leaf = tp.tensor([1.0, 2.0], requires_grad=True)
    leaf.grad = tp.tensor([0.5, 0.5])
    copied = copy.deepcopy(leaf)
    assert copied is not leaf and copied.requires_grad and copied.is_leaf
    assert copied.data_ptr() != leaf.data_ptr()
    assert copied.grad.tolist() == [0.5, 0.5] and copied.grad.data_ptr() != leaf.grad.data_ptr()
    with tp.no_grad():
        copied.add_(1)
    assert leaf.tolist() == [1.0, 2.0]
    bf = tp.tensor([1.5], dtype=tp.bfloat16)
    same(copy.deepcopy(bf), bf)


def test_deepcopy_keeps_identity_within_one_copy():
    t = tp.ones(2)
    a, b = copy.deepcopy([t, t])
    assert a is b and a is not t


def test_deepcopy_of_a_parameter_is_a_parameter():
    parameter = nn.Parameter(tp.ones(2), requires_grad=False)
    copied = copy.deepcopy(parameter)
    assert type(copied) is nn.Parameter and not copied.requires_grad
    assert copied.data_ptr() != parameter.data_ptr()


def test_deepcopy_of_a_non_leaf_is_refused_as_pytorch_refuses_it():
    computed = tp.tensor([1.0], requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(computed)


def test_deepcopy_and_reduce_ex_check_their_arguments():
    t = tp.ones(1)
    with pytest.raises(TypeError, match="memo must be a dict"):
        t.__deepcopy__([])
    with pytest.raises(TypeError, match="memo must be a dict"):
        nn.Parameter(tp.ones(1)).__deepcopy__(None)
    with pytest.raises(TypeError, match="protocol"):
        t.__reduce_ex__("2")
    with pytest.raises(ValueError, match="protocol"):
        t.__reduce_ex__(-1)


def test_copy_copy_makes_a_new_tensor_of_the_values():
    t = tp.tensor([1, 2])
    shallow = copy.copy(t)
    assert shallow is not t and shallow.tolist() == [1, 2] and shallow.dtype is tp.int64


# --------------------------------------------------------------------------------------------
# CUDA


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@needs_safetensors
def test_cuda_tensors_round_trip_to_their_device(tmp_path, dtype):
    path = tmp_path / "cuda.safetensors"
    tp.save({"g": sample(dtype, "cuda"), "c": sample(dtype)}, path)
    assert json.loads(header(path)["__metadata__"]["tensorplay.devices"]) == {
        "g": "cuda:0", "c": "cpu"}
    loaded = tp.load(path)
    same(loaded["g"], sample(dtype, "cuda"))
    same(loaded["c"], sample(dtype))


@pytest.mark.gpu
@needs_safetensors
def test_map_location_moves_cuda_tensors(tmp_path):
    path = tmp_path / "map.safetensors"
    tp.save({"g": sample("float32", "cuda"), "c": sample("float32")}, path)
    on_cpu = tp.load(path, map_location="cpu")
    assert {t.device.type for t in on_cpu.values()} == {"cpu"}
    for location in ("cuda", "cuda:0", tp.device("cuda", 0), tp.device("cuda")):
        loaded = tp.load(path, map_location=location)
        assert loaded["g"].device == tp.device("cuda", 0)
        assert loaded["c"].device == tp.device("cuda", 0)
    mapped = tp.load(path, map_location={"cuda:0": "cpu"})
    assert mapped["g"].device == tp.device("cpu") and mapped["c"].device == tp.device("cpu")
    mapped = tp.load(path, map_location={"cpu": "cuda:0"})
    assert mapped["c"].device == tp.device("cuda", 0)
    same(mapped["g"], sample("float32", "cuda"))


@pytest.mark.gpu
@needs_safetensors
def test_cuda_checkpoints_interoperate_with_safetensors_torch(tmp_path):
    torch = import_or_skip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    from safetensors.torch import load_file, save_file
    path = tmp_path / "cuda_torch.safetensors"
    tp.save({"w": sample("bfloat16", "cuda")}, path)
    loaded = load_file(path, device="cuda:0")
    assert loaded["w"].dtype == torch.bfloat16 and loaded["w"].is_cuda
    assert loaded["w"].float().cpu().tolist() == sample("float32").tolist()
    save_file({"w": loaded["w"] * 2}, path)
    back = tp.load(path, map_location="cuda")
    assert back["w"].device == tp.device("cuda", 0) and back["w"].dtype is tp.bfloat16
    assert back["w"].to(tp.float32).tolist() == (sample("float32") * 2).tolist()


@pytest.mark.gpu
@needs_safetensors
def test_cuda_tensors_with_memory_in_common_are_refused(tmp_path):
    base = tp.arange(6, dtype=tp.float32, device="cuda")
    with pytest.raises(RuntimeError, match="share memory"):
        tp.save({"a": base, "b": base[1:3]}, tmp_path / "x.safetensors")
    # The same addresses on two devices are not shared memory: a CPU and a CUDA tensor.
    tp.save({"a": base[0:3], "b": base[3:6], "c": tp.ones(3)}, tmp_path / "x.safetensors")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_cuda_tensors_pickle_and_deepcopy_on_their_device(dtype):
    source = sample(dtype, "cuda")
    for back in (pickle.loads(pickle.dumps(source)), copy.deepcopy(source)):
        assert back.device == tp.device("cuda", 0)
        same(back, source)
        assert back.data_ptr() != source.data_ptr()
    parameter = nn.Parameter(sample("float32", "cuda"))
    for back in (pickle.loads(pickle.dumps(parameter)), copy.deepcopy(parameter)):
        assert type(back) is nn.Parameter and back.requires_grad and back.is_cuda


@pytest.mark.gpu
def test_a_cuda_module_deepcopies_on_its_device():
    model = nn.Linear(3, 2).to("cuda")
    twin = copy.deepcopy(model)
    assert twin.weight.is_cuda and twin.weight.data_ptr() != model.weight.data_ptr()
    assert twin.weight.tolist() == model.weight.tolist()


@pytest.mark.gpu
@needs_safetensors
def test_cuda_device_1_round_trips_where_present(tmp_path):
    if tp.accelerator.device_count() < 2:
        pytest.skip("needs two CUDA devices")
    path = tmp_path / "one.safetensors"
    tp.save({"x": sample("float32", "cuda:1")}, path)
    assert tp.load(path)["x"].device == tp.device("cuda", 1)
    assert tp.load(path, map_location="cuda:0")["x"].device == tp.device("cuda", 0)
    assert tp.load(path, map_location={"cuda:1": "cuda:0"})["x"].device == tp.device("cuda", 0)
    assert pickle.loads(pickle.dumps(sample("float32", "cuda:1"))).device == tp.device("cuda", 1)
