"""tensorplay.distributed: NCCL collectives on tensorplay's CUDA tensors, ordered on its streams,
through NVIDIA's nccl4py bindings (the optional extra tensorplay[nccl]).

Note [NCCL through nccl4py]
The engine is NCCL; this module only checks arguments, shares NCCL's unique id between the
processes, and passes data pointers and stream handles to nccl4py's low-level bindings
(nccl.bindings.nccl, thin Cython functions over libnccl.so.2). nccl4py is imported by
init_process_group(), is_available() and nccl_version() only, never by `import tensorplay`, so
the package works without the extra. Why the Python bindings and not cynccl from a runtime
module: a collective's host cost is NCCL's own enqueue (microseconds) plus one binding call, and
the case where host cost matters, a collective captured in a graph, costs nothing per replay
beyond the graph launch; a Cython layer would make the build depend on nccl4py's .pxd for no
measurable gain (docs/design.md, "NCCL collectives").

The model is torch.distributed's default process group with the NCCL backend, one process per
GPU: init_process_group() makes one communicator of world_size ranks, bound to one device of
this process, which the collectives use. Each collective is enqueued on the stream given, or on
the current stream of the communicator's device, and returns at once (PyTorch's async_op=False
with the work on the caller's stream), so it is captured like any kernel when that stream is
capturing: NCCL documents its collectives as capturable (docs/design.md cites it).

Unique id. NCCL's ncclCommInitRank needs every rank to pass the same ncclUniqueId, made by one
rank with ncclGetUniqueId and sent to the others by the application (NCCL's user guide,
"Creating a communicator"). Rank 0 makes it and shares its 128 bytes:
- env:// (the default, the variables torchrun sets: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
  MASTER_PORT): rank 0 listens on MASTER_ADDR at the store port and sends the id, after a magic
  header, to every rank that connects; the others connect (retrying until the timeout). The
  store port is TENSORPLAY_NCCL_PORT when set, else MASTER_PORT + 1 under torchrun (whose agent
  already listens on MASTER_PORT: TORCHELASTIC_USE_AGENT_STORE is set), else MASTER_PORT;
- file://PATH: rank 0 writes the id to PATH (through a temporary file renamed over it, so a
  reader never sees half of it) and the others wait for it; PATH must not exist beforehand, as
  for PyTorch's FileStore;
- a world of one rank needs no exchange: the id is made and used in-process.
"""
import math
import os
import reprlib
import socket
import time

import tensorplay
import tensorplay.accelerator
from tensorplay._runtime.base.errors import raise_no_accelerator

# A reduction's op arrives as the index of its name in api.yaml's choices (sum, prod, max, min,
# avg), which is its ncclRedOp_t (ncclSum = 0 ... ncclAvg = 4 in nccl.h): passed on as it is.

# The header rank 0 sends before the id, so that a rank connected to some other server (a wrong
# port) fails with a message instead of using 128 foreign bytes as an id.
_MAGIC = b"tensorplay-nccl-uid-1\n"
_ID_BYTES = 128  # sizeof(ncclUniqueId), NCCL_UNIQUE_ID_BYTES in nccl.h

_MAX_DEVICES = 64  # the devices the runtime supports (runtime/devices/device.pxd, MAX_DEVICES)

_group = None  # the default group (a _Group) between init_process_group and destroy/abort


def _nccl_dtypes():
    """{tensorplay dtype: ncclDataType_t} (nccl.h); bool and int16 have no NCCL type."""
    return {tensorplay.int8: 0, tensorplay.uint8: 1, tensorplay.int32: 2, tensorplay.int64: 4,
            tensorplay.float16: 6, tensorplay.float32: 7, tensorplay.float64: 8,
            tensorplay.bfloat16: 9}


def _load_nccl():
    """nccl4py's bindings with libnccl.so.2 loaded, or RuntimeError saying what is missing."""
    try:
        from nccl.bindings import nccl
    except ImportError as error:
        raise RuntimeError(
            "tensorplay.distributed needs NVIDIA's nccl4py (pip install 'tensorplay[nccl]'): "
            f"importing nccl.bindings failed ({str(error).strip()})") from None
    try:
        nccl.get_version()  # loads libnccl.so.2 (through cuda-pathfinder)
    except Exception as error:  # DynamicLibNotFoundError (a RuntimeError) or an OSError
        raise RuntimeError(
            "tensorplay.distributed needs libnccl.so.2, from the nvidia-nccl-cu13 wheel (pip "
            f"install 'tensorplay[nccl]'): loading it failed ({str(error).strip()})") from None
    return nccl


def is_available():
    try:
        _load_nccl()
    except RuntimeError:
        return False
    return True


def nccl_version():
    nccl = _load_nccl()
    code = nccl.get_version()
    # NCCL_VERSION_CODE: X*10000 + Y*100 + Z since 2.9 (nccl.h), X*1000 + Y*100 + Z before.
    if code >= 10000:
        return code // 10000, code % 10000 // 100, code % 100
    return code // 1000, code % 1000 // 100, code % 100


class _Group:
    """The default group: NCCL's communicator, its rank, size and device."""

    def __init__(self, nccl, comm, rank, world_size, device):
        self.nccl = nccl
        self.comm = comm
        self.rank = rank
        self.world_size = world_size
        self.device = device

    def call(self, name, function, *args):
        """function(*args) with an NCCL error raised as RuntimeError naming the call that failed,
        NCCL's string for the result code and the communicator's last error message."""
        try:
            return function(*args)
        except self.nccl.NCCLError as error:
            raise RuntimeError(f"{name} failed: {error}{_last_error(self.nccl, self.comm)}") \
                from None


def _last_error(nccl, comm):
    try:
        message = nccl.get_last_error(comm)
    except Exception:  # the library cannot say more; the result code has been named
        return ""
    return f" (NCCL: {message.strip()})" if message and message.strip() else ""


def _env_int(name, given):
    if given != -1:
        return given
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"init_process_group: {name.lower()} was not given and the environment "
                         f"variable {name} is not set (a launcher such as torchrun sets it)")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"init_process_group: the environment variable {name} must be an "
                         f"integer, got {reprlib.repr(value)}") from None


def init_process_group(backend, init_method, world_size, rank, device_id, timeout):
    global _group
    # backend, world_size, rank and timeout come checked by the generated wrapper.
    if init_method is not None and not isinstance(init_method, str):
        raise TypeError(f"init_process_group: init_method must be a str or None, got "
                        f"{type(init_method).__name__}")
    if device_id is not None and (isinstance(device_id, bool) or not isinstance(device_id, int)):
        raise TypeError(f"init_process_group: device_id must be an int or None, got "
                        f"{type(device_id).__name__}")
    if device_id is not None and not 0 <= device_id < _MAX_DEVICES:
        raise ValueError(f"init_process_group: device_id must be a device index in [0, "
                         f"{_MAX_DEVICES}), got {device_id}")
    if init_method is not None and not init_method.startswith(("env://", "file://")):
        raise ValueError("init_process_group: init_method must start with 'env://' or 'file://', "
                         f"got {reprlib.repr(init_method)}")
    if init_method is not None and init_method.startswith("file://") and \
            len(init_method) == len("file://"):
        raise ValueError("init_process_group: init_method 'file://' names no file")
    if not 0 < timeout < math.inf:  # NaN fails too; sockets take no infinite timeout
        raise ValueError(f"init_process_group: timeout must be a positive, finite number of "
                         f"seconds, got {timeout!r}")
    if world_size == -1 and rank == -1 and "WORLD_SIZE" not in os.environ and \
            "RANK" not in os.environ:
        world_size, rank = 1, 0  # one process, no launcher: a world of one rank
    world_size = _env_int("WORLD_SIZE", world_size)
    rank = _env_int("RANK", rank)
    if world_size < 1:
        raise ValueError(f"init_process_group: world_size must be at least 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"init_process_group: rank must be in [0, {world_size}), got {rank}")
    if tensorplay.accelerator.device_count() == 0:
        raise_no_accelerator("init_process_group")
    if device_id is None:
        local_rank = os.environ.get("LOCAL_RANK")
        device_id = int(local_rank) if local_rank is not None else \
            tensorplay.accelerator.current_device_index()
    if not 0 <= device_id < tensorplay.accelerator.device_count():
        raise ValueError(f"init_process_group: device_id must be a visible CUDA device, in "
                         f"[0, {tensorplay.accelerator.device_count()}), got {device_id}")
    if _group is not None:
        raise RuntimeError("init_process_group: the default process group is already "
                           "initialized; call destroy_process_group() first")
    nccl = _load_nccl()
    if init_method is None:
        init_method = "env://"
    # NCCL binds the communicator to the device current when it is created (ncclCommInitRank).
    tensorplay.accelerator.set_device_index(device_id)
    if world_size == 1:
        uid = bytes(nccl.get_unique_id())
    elif init_method.startswith("file://"):
        uid = _share_by_file(nccl, init_method[len("file://"):], rank, timeout)
    else:
        uid = _share_by_tcp(nccl, rank, world_size, timeout)
    try:
        # ncclCommInitRankScalable with one id is ncclCommInitRank (NCCL's API reference); it is
        # the call nccl4py's own Communicator.init makes, whose ids are passed as bytes.
        comm = nccl.comm_init_rank_scalable(world_size, rank, 1, bytearray(uid), 0)
    except nccl.NCCLError as error:
        raise RuntimeError(f"ncclCommInitRankScalable failed: {error}") from None
    _group = _Group(nccl, comm, rank, world_size, device_id)


def _share_by_file(nccl, path, rank, timeout):
    if rank == 0:
        if os.path.exists(path):
            raise RuntimeError(f"init_process_group: {path} exists; the file of a file:// "
                               "init_method must not exist beforehand (rank 0 writes it)")
        uid = bytes(nccl.get_unique_id())
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as file:
            file.write(_MAGIC + uid)
        os.replace(temporary, path)  # atomic: a reader sees no file or the whole id
        return uid
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path, "rb") as file:
                data = file.read()
            break
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"init_process_group: rank {rank} waited {timeout} s for rank "
                                   f"0 to write {path}") from None
            time.sleep(0.01)
    return _unpack(data, path)


def _store_address():
    missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
    if missing:
        raise ValueError("init_process_group: env:// needs the environment variables "
                         "MASTER_ADDR and MASTER_PORT (a launcher such as torchrun sets them); "
                         f"{' and '.join(missing)} not set")
    port = os.environ.get("TENSORPLAY_NCCL_PORT")
    if port is None:
        # torchrun's agent serves its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE).
        torchrun = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
        port = int(os.environ["MASTER_PORT"]) + (1 if torchrun else 0)
    return os.environ["MASTER_ADDR"], int(port)


def _share_by_tcp(nccl, rank, world_size, timeout):
    address = _store_address()
    deadline = time.monotonic() + timeout
    if rank == 0:
        uid = bytes(nccl.get_unique_id())
        with socket.create_server(address, reuse_port=False) as server:
            server.settimeout(timeout)
            for _ in range(world_size - 1):
                try:
                    connection, _ = server.accept()
                except socket.timeout:
                    raise RuntimeError(f"init_process_group: rank 0 waited {timeout} s on "
                                       f"{address[0]}:{address[1]} for the other ranks") from None
                with connection:
                    connection.sendall(_MAGIC + uid)
        return uid
    while True:
        try:
            with socket.create_connection(address, timeout=timeout) as connection:
                data = b""
                while len(data) < len(_MAGIC) + _ID_BYTES:
                    chunk = connection.recv(len(_MAGIC) + _ID_BYTES - len(data))
                    if not chunk:
                        break
                    data += chunk
            return _unpack(data, f"{address[0]}:{address[1]}")
        except (ConnectionRefusedError, socket.timeout):
            if time.monotonic() > deadline:
                raise RuntimeError(f"init_process_group: rank {rank} could not reach rank 0 on "
                                   f"{address[0]}:{address[1]} within {timeout} s") from None
            time.sleep(0.05)


def _unpack(data, source):
    if len(data) != len(_MAGIC) + _ID_BYTES or not data.startswith(_MAGIC):
        raise RuntimeError(f"init_process_group: {source} did not hold tensorplay's NCCL unique "
                           "id (another program's file or port?)")
    return data[len(_MAGIC):]


def _the_group(name):
    if _group is None:
        raise RuntimeError(f"{name}: the default process group is not initialized; call "
                           "tensorplay.distributed.init_process_group() first")
    return _group


def is_initialized():
    return _group is not None


def get_rank():
    return _the_group("get_rank").rank


def get_world_size():
    return _the_group("get_world_size").world_size


def destroy_process_group():
    """ncclCommDestroy after ncclCommFinalize, which flushes the communicator's pending work
    (NCCL's user guide, "Destroying a communicator")."""
    global _group
    group = _the_group("destroy_process_group")
    _group = None  # a failure below leaves no half-destroyed group to use
    group.call("ncclCommFinalize", group.nccl.comm_finalize, group.comm)
    group.call("ncclCommDestroy", group.nccl.comm_destroy, group.comm)


def abort_process_group():
    """ncclCommAbort: frees the communicator without waiting for its pending work, which is how
    NCCL documents leaving a hung or failed collective."""
    global _group
    group = _the_group("abort_process_group")
    _group = None
    group.call("ncclCommAbort", group.nccl.comm_abort, group.comm)


# -- collectives -----------------------------------------------------------------------------


def _check_tensors(name, tensors):
    """Checks of the (argument, tensor) pairs that need no group: every type and dtype first (a
    wrong type is a TypeError whichever argument has it), then device types and layouts."""
    for argument, tensor in tensors:
        if not isinstance(tensor, tensorplay.Tensor):
            raise TypeError(f"{name}: {argument} must be a tensorplay.Tensor, got "
                            f"{type(tensor).__name__}")
        if tensor.dtype not in _nccl_dtypes():
            supported = ", ".join(str(dtype) for dtype in _nccl_dtypes())
            raise TypeError(f"{name}: {argument} has dtype {tensor.dtype}, which NCCL has no "
                            f"type for; expected one of {supported}")
    for argument, tensor in tensors:
        if not tensor.is_cuda:
            raise ValueError(f"{name}: {argument} must be a CUDA tensor, got one on "
                             f"{tensor.device}")
        if not tensor.is_contiguous():
            raise ValueError(f"{name}: {argument} must be contiguous (NCCL reads and writes one "
                             "dense buffer); call .contiguous() first")


def _check_same_dtype(name, output, input):
    if output.dtype != input.dtype:
        raise TypeError(f"{name}: output_tensor and input_tensor must have one dtype, got "
                        f"{output.dtype} and {input.dtype}")


def _stream_handle(name, group, stream, tensors):
    """The stream handle to enqueue on, after the checks that need the group: every tensor on
    the communicator's device, and the stream too (the wrapper checked that it is a Stream)."""
    for argument, tensor in tensors:
        if tensor.device.index != group.device:
            raise ValueError(f"{name}: {argument} is on {tensor.device}, but the process group's "
                             f"communicator is on cuda:{group.device}")
    if stream is None:
        return tensorplay.accelerator.current_stream(group.device).cuda_stream
    if stream.device.index != group.device:
        raise ValueError(f"{name}: stream is on {stream.device}, but the process group's "
                         f"communicator is on cuda:{group.device}")
    return stream.cuda_stream


def _overlap(a, b):
    a_start, b_start = a.data_ptr(), b.data_ptr()
    return a_start < b_start + b.nbytes and b_start < a_start + a.nbytes


def all_reduce(tensor, op, stream):
    _check_tensors("all_reduce", (("tensor", tensor),))
    group = _the_group("all_reduce")
    handle = _stream_handle("all_reduce", group, stream, (("tensor", tensor),))
    pointer = tensor.data_ptr()
    group.call("ncclAllReduce", group.nccl.all_reduce, pointer, pointer, tensor.numel(),
               _nccl_dtypes()[tensor.dtype], op, group.comm, handle)


def all_gather_into_tensor(output_tensor, input_tensor, stream):
    name = "all_gather_into_tensor"
    _check_tensors(name, (("output_tensor", output_tensor), ("input_tensor", input_tensor)))
    _check_same_dtype(name, output_tensor, input_tensor)
    group = _the_group(name)
    if output_tensor.numel() != input_tensor.numel() * group.world_size:
        raise ValueError(f"{name}: output_tensor must hold world_size ({group.world_size}) times "
                         f"input_tensor's {input_tensor.numel()} elements, got "
                         f"{output_tensor.numel()}")
    # NCCL's in-place all-gather: the input is the rank's own slice of the output (NCCL's user
    # guide, "In-place operations"); any other overlap would be read while written.
    own_slice = output_tensor.data_ptr() + group.rank * input_tensor.nbytes
    if _overlap(output_tensor, input_tensor) and input_tensor.data_ptr() != own_slice:
        raise ValueError(f"{name}: input_tensor overlaps output_tensor; in place, it must be "
                         f"rank {group.rank}'s slice of output_tensor (NCCL's in-place rule)")
    handle = _stream_handle(name, group, stream, (("output_tensor", output_tensor),
                                                  ("input_tensor", input_tensor)))
    group.call("ncclAllGather", group.nccl.all_gather, input_tensor.data_ptr(),
               output_tensor.data_ptr(), input_tensor.numel(),
               _nccl_dtypes()[input_tensor.dtype], group.comm, handle)


def reduce_scatter_tensor(output, input, op, stream):
    name = "reduce_scatter_tensor"
    _check_tensors(name, (("output", output), ("input", input)))
    if output.dtype != input.dtype:
        raise TypeError(f"{name}: output and input must have one dtype, got {output.dtype} and "
                        f"{input.dtype}")
    group = _the_group(name)
    if input.numel() != output.numel() * group.world_size:
        raise ValueError(f"{name}: input must hold world_size ({group.world_size}) times "
                         f"output's {output.numel()} elements, got {input.numel()}")
    # In place, the output is the rank's own slice of the input (NCCL's in-place rule).
    own_slice = input.data_ptr() + group.rank * output.nbytes
    if _overlap(output, input) and output.data_ptr() != own_slice:
        raise ValueError(f"{name}: output overlaps input; in place, it must be rank "
                         f"{group.rank}'s slice of input (NCCL's in-place rule)")
    handle = _stream_handle(name, group, stream, (("output", output), ("input", input)))
    group.call("ncclReduceScatter", group.nccl.reduce_scatter, input.data_ptr(),
               output.data_ptr(), output.numel(), _nccl_dtypes()[input.dtype], op,
               group.comm, handle)


def broadcast(tensor, src, stream):
    _check_tensors("broadcast", (("tensor", tensor),))
    group = _the_group("broadcast")
    if not 0 <= src < group.world_size:
        raise ValueError(f"broadcast: src must be a rank in [0, {group.world_size}), got {src}")
    handle = _stream_handle("broadcast", group, stream, (("tensor", tensor),))
    pointer = tensor.data_ptr()
    group.call("ncclBroadcast", group.nccl.broadcast, pointer, pointer, tensor.numel(),
               _nccl_dtypes()[tensor.dtype], src, group.comm, handle)
