# cython: language_level=3
"""Tensors as plain values: pickling and deep copies (api.yaml: Tensor.__reduce_ex__,
Tensor.__deepcopy__; nn.pyx does the same for Parameters), and the checkpoints of
tensorplay.save and tensorplay.load, in the safetensors format. See docs/design.md,
"Checkpoints and pickling".

Note [Checkpoint format]
save(obj, f) writes a safetensors file (https://huggingface.co/docs/safetensors): an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
then the bytes. Reading one never runs code (torch.save's pickles can: torch.load's
weights_only exists for that reason), and PyTorch users read it with safetensors.torch. Rules:
- obj is a dict of str keys (a state_dict); a value is a tensor or a dict of the same, whose
  keys join their parent's with "." as PyTorch's state_dict() joins a module path
  ({"layer": {"weight": w}} is saved as "layer.weight"). load() returns that flat dict, which
  load_state_dict() takes; nesting is not rebuilt (a flat key may hold dots of its own).
  Two values reaching one name, an empty dict, a non-str key and anything but a tensor are
  refused naming the key, before anything is written.
- Each tensor's values are written in row-major order (a transposed tensor is saved by value,
  as safetensors.torch asks of its callers), from the device they are on (a CUDA tensor is
  copied to the host first). Tensors whose memory overlaps are refused naming both keys, as
  safetensors.torch refuses shared tensors: the file cannot say that two names share memory,
  so loading would silently make two tensors of what was one.
- bfloat16 is safetensors' BF16: its bits, which the CPU keeps as uint16 (dtypes.pyx).
- The file's metadata (a str -> str map) holds one entry, METADATA_DEVICES: a JSON object of
  every key to its device ("cpu", "cuda:1"), in obj's order. load() puts each tensor back on
  that device, or where map_location says, in that order; a file without it (written by
  safetensors.torch) loads onto the CPU, in the file's order.
- A path is written through a temporary file in the same directory, then renamed over f
  (os.replace, atomic on POSIX), so a refused or failed save leaves no file and never a
  partial one. A file object gets the bytes in one write().
"""
from tensorplay._runtime.base cimport dtypes, errors
from tensorplay._runtime.base.dtypes cimport DtypeCore
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.tensor.arguments cimport np
from tensorplay._runtime.tensor.copies cimport clone, copied_to, cpu
from tensorplay._runtime.tensor.core cimport (CPU, TensorCore, device_text, memory_asleep,
                                              reach_bytes, refuse_asleep, wrap_cpu)

import json
import os
import secrets

# The metadata entry that keeps each tensor's device and the order of the keys.
METADATA_DEVICES = "tensorplay.devices"
# safetensors' dtype names (its header's "dtype") of tensorplay's dtypes.
SAFETENSORS_DTYPES = {"bool": "BOOL", "uint8": "U8", "int8": "I8", "int16": "I16",
                      "int32": "I32", "int64": "I64", "float16": "F16", "bfloat16": "BF16",
                      "float32": "F32", "float64": "F64"}
DTYPES_OF_SAFETENSORS = {code: name for name, code in SAFETENSORS_DTYPES.items()}
# How deep a nested state_dict may be: deeper is a mistake (a dict holding itself).
NESTING_LIMIT = 64


cdef object _safetensors():
    """The safetensors package, imported on the first save or load, not by `import
    tensorplay`."""
    try:
        import safetensors
    except ImportError as error:
        raise ModuleNotFoundError("tensorplay.save and tensorplay.load need the safetensors "
                                  "package (a dependency of tensorplay): pip install "
                                  "safetensors") from error
    return safetensors


# --------------------------------------------------------------------------------------------
# Values on the host and back


cdef object storage_values(TensorCore tensor):
    if tensor.device_index == CPU:
        return np().array(tensor.array, order="C", copy=True)
    # A copy to the host already, detached so that no Node is recorded.
    return np().ascontiguousarray((<TensorCore>cpu(<TensorCore>tensor.c_detach())).array)


cdef object tensor_from_values(object values, DtypeCore dtype, int device):
    """A new tensor of values (a numpy array of dtype's storage that nothing else holds) on
    device, not requiring grad."""
    host = wrap_cpu(values, dtype)
    return host if device == CPU else copied_to(host, device, dtype, False, False, "values")


cdef tuple rebuild_arguments(TensorCore tensor):
    return (storage_values(tensor), tensor.dtype_object.name, device_text(tensor.device_index),
            tensor.grad_required)


def rebuild_tensor(values, dtype, device, requires_grad):
    """A tensor from what reduce_ex() pickled: values (a numpy array of the dtype's storage),
    dtype's name, the device's spelling ("cpu", "cuda:1") and requires_grad. pickle finds it by
    name, so its name and arguments stay as they are for pickles already written."""
    return rebuilt(values, dtype, device, requires_grad)


cdef object rebuilt(object values, object dtype, object device, object requires_grad):
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be the name of a tensorplay dtype, got {errors.shown(dtype)}")
    cdef DtypeCore chosen = dtypes.named_dtype(dtype)  # a ValueError naming an unknown one
    if not isinstance(values, np().ndarray) or values.dtype != np().dtype(chosen.numpy_name):
        raise TypeError(f"values must be a numpy array of {chosen.numpy_name} (the storage of "
                        f"{chosen.name}), got {errors.shown(values)}")
    cdef int index = _device.tensor_device_arg(device, "device")
    result = tensor_from_values(np().array(values, order="C", copy=True), chosen,
                                CPU if index < 0 else index)
    (<TensorCore>result).c_set_requires_grad(bool(requires_grad))
    return result


# --------------------------------------------------------------------------------------------
# pickle and copy


cdef tuple reduce_ex(TensorCore tensor, object protocol):
    # As PyTorch's: the values, dtype, shape, device and requires_grad, not .grad nor the
    # history (a pickled non-leaf comes back a leaf). The protocol changes nothing.
    protocol_arg(protocol)
    return (rebuild_tensor, rebuild_arguments(tensor))


cdef int protocol_arg(object protocol) except -1:
    errors.int_arg(protocol, "protocol", 0, 2147483647)
    return 0


cdef object deepcopy(TensorCore tensor, object memo):
    result = copied_values(tensor, memo)
    (<TensorCore>result).c_set_requires_grad(tensor.grad_required)
    return finish_copy(tensor, result, memo)


cdef object copied_values(TensorCore tensor, object memo):
    """A copy of tensor's values on its device, sharing no memory, off the tape; memo checked."""
    if not isinstance(memo, dict):
        raise TypeError(f"memo must be a dict (copy.deepcopy's), got {type(memo).__name__}")
    if not tensor.c_is_leaf():
        # PyTorch's refusal: the copy could not carry the history it depends on.
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                           "the deepcopy protocol at the moment")
    return clone(<TensorCore>tensor.c_detach())


cdef object finish_copy(TensorCore tensor, object result, dict memo):
    """result, the copy of tensor, entered in memo and given a copy of tensor's .grad (as
    PyTorch's deepcopy copies it)."""
    memo[id(tensor)] = result
    if tensor.grad_value is not None:
        grad = memo.get(id(tensor.grad_value))
        if grad is None:
            grad = deepcopy(<TensorCore>tensor.grad_value, memo)
        (<TensorCore>result).c_set_grad(grad)
    return result


# --------------------------------------------------------------------------------------------
# Checkpoints (Note [Checkpoint format])


cdef str _key_path(list path):
    return "".join(f"[{errors.shown(key)}]" for key in path)


cdef str _key_text(list path):
    return "obj" + _key_path(path)


cdef int _flatten(object mapping, list path, str prefix, dict flat, dict where) except -1:
    """Enter every tensor of mapping (at path in obj) into flat under its dotted name; where
    maps each name to the path it came from, to name both paths of a collision."""
    if len(path) > NESTING_LIMIT:
        raise ValueError(f"obj nests dicts more than {NESTING_LIMIT} deep at {_key_text(path)}")
    if not mapping and path:
        raise ValueError(f"{_key_text(path)} is an empty dict, which a safetensors file cannot "
                         "hold (it holds tensors by name); leave it out")
    for key, value in mapping.items():
        here = path + [key]
        if not isinstance(key, str):
            raise TypeError(f"obj's keys must be str, got {type(key).__name__} at "
                            f"{_key_text(here)}")
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            _flatten(value, here, name, flat, where)
            continue
        if not isinstance(value, TensorCore):
            raise TypeError(f"{_key_text(here)} must be a tensor or a dict of tensors, got "
                            f"{type(value).__name__}: a safetensors file holds tensors only")
        if memory_asleep(<TensorCore>value):  # a sleeping graph's (core.pxd, check_awake)
            refuse_asleep(value, b"tensorplay.save()", b"obj", _key_path(here))
        if name in flat:
            raise ValueError(f"{_key_text(where[name])} and {_key_text(here)} are both saved "
                             f"as {name!r} (nested keys join with '.')")
        flat[name] = value
        where[name] = here
    return 0


cdef int _refuse_shared(dict flat, dict where) except -1:
    """Refuse tensors whose memory overlaps (Note [Checkpoint format]): sorted by start
    address per device, each must end before the next begins."""
    cdef TensorCore tensor
    spans = []
    for name, tensor in flat.items():
        size = reach_bytes(tensor.sizes, tensor.element_strides, tensor.dtype_object.itemsize)
        if size:
            start = tensor.c_data_ptr()
            spans.append((tensor.device_index, start, start + size, name))
    spans.sort()
    for first, second in zip(spans, spans[1:]):
        if first[0] == second[0] and second[1] < first[2]:
            raise RuntimeError(f"{_key_text(where[first[3]])} and {_key_text(where[second[3]])} "
                               f"share memory, which a safetensors file cannot record: loading "
                               f"would make two tensors of one (safetensors.torch refuses them "
                               f"too); save a clone() of one, or only one")
    return 0


cdef str _path_arg(object f, str mode):
    """f as a path (str), or None when it is a binary file object that has what mode needs."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not path:
            raise ValueError("f must be a path or a file object, got an empty path")
        return path
    if callable(getattr(f, mode, None)):
        return None
    raise TypeError(f"f must be a path (str or os.PathLike) or a binary file object with "
                    f"{mode}(), got {type(f).__name__}")


cdef object save(object obj, object f):
    if not isinstance(obj, dict):
        hint = " (for a Module, save module.state_dict())" if hasattr(obj, "state_dict") \
            else ""
        raise TypeError(f"obj must be a dict of tensors (a state_dict), got "
                        f"{type(obj).__name__}{hint}: a safetensors file holds tensors by name")
    path = _path_arg(f, "write")
    cdef dict flat = {}, where = {}
    _flatten(obj, [], "", flat, where)
    _refuse_shared(flat, where)
    if path is not None:
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            raise FileNotFoundError(f"f: the directory {directory!r} of {path!r} does not exist")
        if os.path.isdir(path):
            raise IsADirectoryError(f"f: {path!r} is a directory")
    # Every argument is checked: now the values are copied to the host, then written.
    safetensors = _safetensors()
    cdef TensorCore tensor
    arrays, specs, devices = [], {}, {}
    for name, tensor in flat.items():
        values = storage_values(tensor)
        arrays.append(values)  # alive until written: the specs hold raw addresses
        specs[name] = safetensors.TensorSpec(dtype=tensor.dtype_object.name,
                                             shape=list(tensor.sizes),
                                             data_ptr=values.ctypes.data, data_len=values.nbytes)
        devices[name] = device_text(tensor.device_index)
    metadata = {METADATA_DEVICES: json.dumps(devices)}
    if path is None:
        f.write(safetensors.serialize(specs, metadata=metadata))
        return None
    directory, base = os.path.split(path)
    temporary = os.path.join(directory, f".{base}.{secrets.token_hex(8)}.tmp")
    try:
        safetensors.serialize_file(specs, temporary, metadata=metadata)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return None


cdef object _location(object value, str argument):
    """A device spelling of map_location (a str or a device) as a device index (-1: CPU)."""
    if not isinstance(value, (str, _device.DeviceCore)):
        raise TypeError(f"{argument} must be a device or a str such as 'cpu' or 'cuda:1', got "
                        f"{type(value).__name__}")
    try:
        return _device.tensor_device_arg(value, argument)
    except ValueError as error:  # a spelling's error does not name the argument
        if argument in str(error):
            raise
        raise ValueError(f"{argument}: {error}") from None


cdef object _map_location_arg(object map_location):
    """map_location as torch.load takes it, checked: None (each tensor to the device it was
    saved from), a device or its spelling (every tensor there; "cuda" is the current CUDA
    device), or a dict from a saved device's spelling to another's (tensors of devices it does
    not name stay where they were). A dict is returned as {spelling: index}; a device, as its
    index."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        mapped = {}
        for key, value in map_location.items():
            # A key names a device the file was saved from, which this machine need not have.
            if not isinstance(key, str):
                raise TypeError(f"map_location's keys must be device spellings (str) as saved, "
                                f"such as 'cuda:1', got {type(key).__name__}")
            mapped[key] = _location(value, f"map_location[{key!r}]")
        return mapped
    if callable(map_location):
        raise TypeError("map_location must be None, a device, a str or a dict: a function of "
                        "(storage, location), as torch.load takes, has no storages to act on "
                        "here")
    return _location(map_location, "map_location")


cdef dict _header_metadata(bytes data):
    """The "__metadata__" of a safetensors file's JSON header (the format's own layout), once
    safetensors has read the file: it gives the tensors but not the metadata."""
    length = int.from_bytes(data[:8], "little")
    metadata = json.loads(data[8:8 + length]).get("__metadata__") or {}
    return metadata if isinstance(metadata, dict) else {}


cdef object load(object f, object map_location):
    path = _path_arg(f, "read")
    mapped = _map_location_arg(map_location)
    if path is None:
        data = f.read()
        if not isinstance(data, bytes):
            raise TypeError(f"f must be opened in binary mode: read() gave "
                            f"{type(data).__name__}")
    else:
        with open(path, "rb") as stream:
            data = stream.read()
    safetensors = _safetensors()
    try:
        entries = safetensors.deserialize(data)
    except safetensors.SafetensorError as error:
        raise ValueError(f"f is not a safetensors file: {error}") from None
    try:
        devices = json.loads(_header_metadata(data).get(METADATA_DEVICES, "{}"))
    except ValueError:
        devices = None
    if not isinstance(devices, dict):
        raise ValueError(f"f: its metadata {METADATA_DEVICES!r} is not a JSON object of "
                         "names to devices")
    # Every name is checked, and its device resolved, before any tensor is made.
    cdef dict read = {}
    for name, entry in entries:
        code = entry["dtype"]
        if code not in DTYPES_OF_SAFETENSORS:
            raise TypeError(f"f holds {name!r} of safetensors dtype {code}, which tensorplay "
                            f"has no dtype for (it has {', '.join(SAFETENSORS_DTYPES.values())})")
        saved = devices.get(name, "cpu")
        if not isinstance(saved, str):
            raise ValueError(f"f: its metadata gives {name!r} the device {errors.shown(saved)}")
        if mapped is None:
            index = _location(saved, f"the device of {name!r} saved in f")
        elif isinstance(mapped, dict):
            index = mapped[saved] if saved in mapped else _location(
                saved, f"the device of {name!r} saved in f")
        else:
            index = mapped
        read[name] = (DTYPES_OF_SAFETENSORS[code], tuple(entry["shape"]), entry["data"], index)
    order = [name for name in devices if name in read] + sorted(
        name for name in read if name not in devices)
    cdef DtypeCore dtype
    result = {}
    for name in order:
        dtype_name, shape, raw, index = read[name]
        dtype = dtypes.named_dtype(dtype_name)
        values = np().frombuffer(raw, dtype=dtype.numpy_name).reshape(shape).copy()
        result[name] = tensor_from_values(values, dtype, index)
    return result
