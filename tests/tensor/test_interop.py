"""Zero-copy interop: DLPack 1.x and __cuda_array_interface__ v3, both ways (runtime/tensor/interop.pyx).

CPU tests run everywhere, with numpy as the other library and ctypes reading the DLPack structs
themselves. GPU tests (marked) share CUDA memory with PyTorch and CuPy.
"""
import ctypes
import gc
import sys
import threading

import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

# --------------------------------------------------------------------------------------------
# dlpack.h (v1.x) through ctypes, to check what consumers actually read.


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor)))]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))),
    ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]

READ_ONLY, IS_COPIED = 1, 2
KDL_CPU, KDL_CUDA = 1, 2
# PyCapsule_SetName keeps the pointer: the names must outlive the capsules.
USED_NAMES = {b"dltensor": ctypes.c_char_p(b"used_dltensor"),
              b"dltensor_versioned": ctypes.c_char_p(b"used_dltensor_versioned")}

OTHER_NAME = b"other"
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.argtypes, _capsule_is_valid.restype = [ctypes.py_object, ctypes.c_char_p], \
    ctypes.c_int
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.argtypes, _capsule_pointer.restype = [ctypes.py_object, ctypes.c_char_p], \
    ctypes.c_void_p
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.argtypes, _capsule_set_name.restype = [ctypes.py_object, ctypes.c_char_p], \
    ctypes.c_int


def capsule_name(capsule):
    for name in (b"dltensor", b"dltensor_versioned", b"used_dltensor",
                 b"used_dltensor_versioned"):
        if _capsule_is_valid(capsule, name):
            return name.decode()
    raise AssertionError(f"not a DLPack capsule: {capsule!r}")


def managed(capsule):
    """The DLManagedTensor[Versioned] inside an unconsumed capsule, which it keeps alive."""
    name = capsule_name(capsule).encode()
    struct = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    manager = struct.from_address(_capsule_pointer(capsule, name))
    manager.capsule = capsule  # the capsule's destructor frees the struct
    return manager


def consume(capsule):
    """Take the manager out of capsule as a consumer does: rename it, keep the pointer."""
    manager = managed(capsule)
    assert _capsule_set_name(capsule, USED_NAMES[capsule_name(capsule).encode()]) == 0
    del manager.capsule  # renamed, the capsule no longer frees the struct
    return manager


def described(manager):
    tensor = manager.dl_tensor
    return {"data": tensor.data or 0, "device": (tensor.device.device_type,
                                                 tensor.device.device_id),
            "dtype": (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes),
            "shape": tuple(tensor.shape[i] for i in range(tensor.ndim)),
            "strides": tuple(tensor.strides[i] for i in range(tensor.ndim)),
            "byte_offset": tensor.byte_offset}


class LegacyProducer:
    """A producer from before DLPack 1.0: __dlpack__ takes no max_version."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, *, stream=None):
        return self.array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class CAIProducer:
    """An object that only speaks __cuda_array_interface__."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32",
                "float64"]


# --------------------------------------------------------------------------------------------
# DLPack with numpy (CPU)


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_from_dlpack_shares_numpy_memory(name):
    array = numpy.arange(6).reshape(2, 3).astype(name)
    tensor = tp.from_dlpack(array)
    assert tensor.data_ptr() == array.ctypes.data
    assert tensor.shape == (2, 3) and tensor.stride() == (3, 1)
    assert tensor.dtype == getattr(tp, name) and tensor.device == tp.device("cpu")
    array[1, 2] = 1
    assert tensor.tolist()[1][2] == array[1, 2]
    tensor.fill_(0)
    assert not array.any()


def test_from_dlpack_keeps_strides_zero_size_and_zero_dim():
    array = numpy.arange(24, dtype=numpy.float32).reshape(4, 6)[1:, ::2]
    tensor = tp.from_dlpack(array)
    assert tensor.data_ptr() == array.ctypes.data
    assert tensor.shape == (3, 3) and tensor.stride() == (6, 2)
    assert tensor.tolist() == array.tolist()
    assert tp.from_dlpack(numpy.empty((0, 3), dtype=numpy.int16)).shape == (0, 3)
    scalar = tp.from_dlpack(numpy.array(2.5))
    assert scalar.shape == () and scalar.dtype == tp.float64 and scalar.item() == 2.5


def test_from_dlpack_reads_legacy_capsules_and_bare_capsules():
    array = numpy.arange(4, dtype=numpy.int32)
    legacy = tp.from_dlpack(LegacyProducer(array))  # max_version is a TypeError: retried
    assert legacy.data_ptr() == array.ctypes.data and legacy.tolist() == [0, 1, 2, 3]
    for capsule in (array.__dlpack__(), array.__dlpack__(max_version=(1, 0))):
        kind = capsule_name(capsule)
        assert tp.from_dlpack(capsule).data_ptr() == array.ctypes.data
        assert capsule_name(capsule) == "used_" + kind
        with pytest.raises(BufferError, match="already consumed"):
            tp.from_dlpack(capsule)


def test_from_dlpack_keeps_the_producer_alive_exactly_as_long_as_needed():
    import weakref
    array = numpy.arange(1000, dtype=numpy.float64)
    alive = weakref.ref(array)
    tensor = tp.from_dlpack(array)
    view = tensor[10:20]
    del array, tensor
    gc.collect()
    assert alive() is not None  # the view still reads the producer's memory
    assert view.tolist() == [float(i) for i in range(10, 20)]
    del view
    gc.collect()
    assert alive() is None  # the deleter ran once the last tensor went


def test_from_dlpack_honours_read_only_producers():
    array = numpy.arange(3.0)
    array.flags.writeable = False
    tensor = tp.from_dlpack(array)
    assert tensor.data_ptr() == array.ctypes.data
    with pytest.raises(ValueError, match="read-only"):
        tensor.fill_(1.0)
    # Re-exporting says so, which only the versioned struct can.
    assert managed(tensor.__dlpack__(max_version=(1, 0))).flags == READ_ONLY
    assert numpy.from_dlpack(tensor).flags.writeable is False
    with pytest.raises(BufferError, match="legacy DLPack capsule cannot mark"):
        tensor.__dlpack__()


def test_bfloat16_cpu_memory_round_trips_through_dlpack():
    source = tp.tensor([1.5, -2.0, 3.25], dtype=tp.bfloat16)
    shared = tp.from_dlpack(source)
    assert shared.dtype is tp.bfloat16 and shared.data_ptr() == source.data_ptr()
    assert shared.tolist() == [1.5, -2.0, 3.25]


def test_from_dlpack_rejects_what_it_cannot_represent():
    with pytest.raises(TypeError, match="DLPack dtype complex64 has no tensorplay equivalent"):
        tp.from_dlpack(numpy.zeros(3, dtype=numpy.complex64))
    with pytest.raises(TypeError, match="DLPack dtype uint16 has no tensorplay equivalent"):
        tp.from_dlpack(numpy.zeros(3, dtype=numpy.uint16))
    with pytest.raises(ValueError, match=r"negative strides \(-1,\)"):
        tp.from_dlpack(numpy.arange(3)[::-1])
    with pytest.raises(TypeError, match=r"__dlpack__ and __dlpack_device__.*got list"):
        tp.from_dlpack([1, 2, 3])
    other = ctypes.pythonapi.PyCapsule_New
    other.argtypes, other.restype = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p], \
        ctypes.py_object
    with pytest.raises(TypeError, match="named 'dltensor' or 'dltensor_versioned', got a "
                                        "capsule named 'other'"):
        tp.from_dlpack(other(1, OTHER_NAME, None))


def test_from_dlpack_rejects_a_failed_import_without_leaking():
    array = numpy.zeros(3, dtype=numpy.complex64)
    before = sys.getrefcount(array)
    with pytest.raises(TypeError):
        tp.from_dlpack(array)
    gc.collect()
    assert sys.getrefcount(array) == before  # the consumed capsule's deleter ran


@pytest.mark.parametrize("name", NUMPY_DTYPES)
def test_numpy_from_dlpack_shares_tensorplay_memory(name):
    tensor = tp.tensor(numpy.arange(6).astype(name))
    array = numpy.from_dlpack(tensor)
    assert array.ctypes.data == tensor.data_ptr() and array.dtype == numpy.dtype(name)
    tensor[1:3] = 0
    assert array.tolist() == tensor.tolist()
    array[5] = 0
    assert tensor.tolist()[5] == 0


def test_numpy_from_dlpack_sees_views_and_legacy_exports():
    tensor = tp.arange(12, dtype=tp.int32)[1:10:3]
    array = numpy.from_dlpack(tensor)
    assert array.ctypes.data == tensor.data_ptr()
    assert array.strides == (12,) and array.tolist() == [1, 4, 7]
    legacy = numpy.from_dlpack(LegacyProducer(tensor))
    assert legacy.ctypes.data == tensor.data_ptr() and legacy.tolist() == [1, 4, 7]


def test_export_describes_the_tensor_in_the_versioned_struct():
    tensor = tp.tensor(numpy.arange(12, dtype=numpy.int32).reshape(3, 4))[:, 1::2]
    capsule = tensor.__dlpack__(max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    manager = managed(capsule)
    assert (manager.version.major, manager.version.minor) == (1, 0)
    assert manager.flags == 0
    assert described(manager) == {"data": tensor.data_ptr(), "device": (KDL_CPU, 0),
                                  "dtype": (0, 32, 1), "shape": (3, 2), "strides": (4, 2),
                                  "byte_offset": 0}
    # A newer consumer gets the newest version we speak, never more than it asked for.
    assert managed(tensor.__dlpack__(max_version=(1, 7))).version.minor == 3
    assert managed(tensor.__dlpack__(max_version=(2, 0))).version.major == 1


def test_export_kinds_follow_max_version():
    tensor = tp.zeros(2, 3)
    assert capsule_name(tensor.__dlpack__()) == "dltensor"
    assert capsule_name(tensor.__dlpack__(max_version=(0, 8))) == "dltensor"
    assert capsule_name(tensor.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    legacy = managed(tensor.__dlpack__())
    assert described(legacy)["shape"] == (2, 3) and described(legacy)["strides"] == (3, 1)
    assert described(managed(tp.zeros((), dtype=tp.bool).__dlpack__()))["dtype"] == (6, 8, 1)
    assert described(managed(tp.zeros(2, dtype=tp.bfloat16).__dlpack__()))["dtype"] == \
        (4, 16, 1)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_unconsumed_capsules_release_the_tensor(max_version):
    tensor = tp.arange(5)
    before = sys.getrefcount(tensor)
    capsule = tensor.__dlpack__(max_version=max_version)
    assert sys.getrefcount(tensor) == before + 1  # the manager's reference
    del capsule
    assert sys.getrefcount(tensor) == before


def test_consumed_exports_release_the_tensor_when_the_consumer_is_done():
    tensor = tp.arange(5)
    before = sys.getrefcount(tensor)
    array = numpy.from_dlpack(tensor)
    assert sys.getrefcount(tensor) == before + 1
    del array
    gc.collect()
    assert sys.getrefcount(tensor) == before


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_deleter_may_run_on_another_thread_without_the_gil(max_version):
    tensor = tp.arange(5)
    before = sys.getrefcount(tensor)
    manager = consume(tensor.__dlpack__(max_version=max_version))
    # ctypes releases the GIL around the call, so the deleter has to take it itself.
    worker = threading.Thread(target=manager.deleter, args=(ctypes.pointer(manager),))
    worker.start()
    worker.join()
    assert sys.getrefcount(tensor) == before


def test_copy_argument():
    tensor = tp.arange(4, dtype=tp.float32)
    copied = tensor.__dlpack__(max_version=(1, 0), copy=True)
    manager = managed(copied)
    assert manager.flags == IS_COPIED and manager.dl_tensor.data != tensor.data_ptr()
    assert tp.from_dlpack(copied).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert numpy.from_dlpack(tensor, copy=True).ctypes.data != tensor.data_ptr()
    assert managed(tensor.__dlpack__(max_version=(1, 0), copy=False)).flags == 0
    with pytest.raises(TypeError, match="copy must be True, False or None, got 'yes'"):
        tensor.__dlpack__(copy="yes")


def test_stream_dl_device_and_max_version_arguments_on_the_cpu():
    tensor = tp.arange(4)
    assert tensor.__dlpack_device__() == (KDL_CPU, 0)
    for stream in (1, 2, -1, 0):
        with pytest.raises(ValueError, match=f"stream must be None when exporting to the CPU.*"
                                             f"got {stream}"):
            tensor.__dlpack__(stream=stream)
    assert capsule_name(tensor.__dlpack__(stream=None, dl_device=(KDL_CPU, 0))) == "dltensor"
    with pytest.raises(BufferError, match=r"dl_device=\(2, 0\).*copy=False forbids"):
        tensor.__dlpack__(dl_device=(KDL_CUDA, 0), copy=False)
    with pytest.raises(BufferError, match=r"dl_device=\(8, 0\) is not supported"):
        tensor.__dlpack__(dl_device=(8, 0))
    with pytest.raises(TypeError, match="dl_device must be None or a .device_type, device_id."):
        tensor.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match=r"max_version must be None or a \(major, minor\)"):
        tensor.__dlpack__(max_version="1.0")


def test_cpu_tensors_have_no_cuda_array_interface():
    tensor = tp.zeros(3)
    assert not hasattr(tensor, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="describes CUDA memory, and this tensor is on"):
        tensor.__cuda_array_interface__


def test_cuda_array_interface_is_validated_before_touching_a_device():
    good = {"shape": (4,), "typestr": "<f4", "data": (0, False), "version": 3}
    cases = [
        ({"version": 1}, ValueError, r"\['version'\] is 1; tensorplay reads versions 2 and 3"),
        ({"mask": object()}, ValueError, r"\['mask'\] must be None"),
        ({"shape": [4]}, TypeError, r"\['shape'\] must be a tuple of non-negative ints"),
        ({"typestr": ">f4"}, TypeError, "is big-endian"),
        ({"typestr": "<c8"}, TypeError, r"'<c8' \(complex64\) has no tensorplay equivalent"),
        ({"typestr": "nonsense"}, TypeError, "is not a numpy type string"),
        ({"data": 0}, TypeError, r"\['data'\] must be a \(pointer, read_only\) tuple"),
        ({"data": (0, True)}, BufferError, "read-only memory"),
        ({"strides": (6,)}, ValueError, r"non-negative multiple of the item size \(4 bytes"),
        ({"stream": 0}, ValueError, r"\['stream'\]=0 is ambiguous"),
        ({"stream": -1}, ValueError, r"\['stream'\] must be 1 .*got -1"),
    ]
    for change, error, message in cases:
        with pytest.raises(error, match=message):
            tp.as_tensor(CAIProducer(dict(good, **change)))
    with pytest.raises(TypeError, match=r"__cuda_array_interface__ must be a dict, got list"):
        tp.as_tensor(CAIProducer([]))


# --------------------------------------------------------------------------------------------
# GPU: PyTorch and CuPy

CYCLES = 200_000_000  # about 0.1 s of GPU time: long enough for an unordered read to see zeros

SPIN_FILL = r"""
extern "C" __global__ void spin_fill(float* out, long long n, float value, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    for (long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = value;
}
"""


def cupy_spin_fill(cupy, array, value, cycles=CYCLES):
    """Fill array with value on CuPy's current stream, after holding that stream for a while."""
    kernel = cupy.RawKernel(SPIN_FILL, "spin_fill")
    kernel((1,), (256,), (array, cupy.int64(array.size), cupy.float32(value),
                          cupy.int64(cycles)))


@pytest.mark.gpu
def test_cuda_dlpack_device_and_cuda_array_interface():
    tensor = tp.arange(12, dtype=tp.float32, device="cuda")
    assert tensor.__dlpack_device__() == (KDL_CUDA, 0)
    interface = tensor.__cuda_array_interface__
    assert interface == {"shape": (12,), "typestr": "<f4", "descr": [("", "<f4")],
                         "data": (tensor.data_ptr(), False), "strides": None,
                         "stream": 1, "version": 3}  # 1: the legacy default stream
    stream = tp.cuda.Stream()
    with tp.cuda.stream(stream):
        assert tensor.__cuda_array_interface__["stream"] == stream.cuda_stream
    assert tensor[1:9:2].__cuda_array_interface__["strides"] == (8,)
    assert tp.empty(0, device="cuda").__cuda_array_interface__["data"] == (0, False)
    with pytest.raises(TypeError, match="cannot describe bfloat16.*through DLPack"):
        tp.zeros(2, dtype=tp.bfloat16, device="cuda").__cuda_array_interface__


@pytest.mark.gpu
def test_cuda_dlpack_stream_argument():
    tensor = tp.zeros(4, device="cuda")
    for stream, error, message in ((0, ValueError, "stream=0 is ambiguous"),
                                   (-2, ValueError, "must be -1 .no synchronization., 1"),
                                   ("1", TypeError, "stream must be an int stream handle"),
                                   (True, TypeError, "stream must be an int stream handle"),
                                   (1.0, TypeError, "stream must be an int stream handle")):
        with pytest.raises(error, match=message):
            tensor.__dlpack__(stream=stream)
    side = tp.cuda.Stream()  # alive until the waits queued on it are done
    for stream in (None, -1, 1, 2, side.cuda_stream):
        assert capsule_name(tensor.__dlpack__(stream=stream)) == "dltensor"
    side.synchronize()


@pytest.mark.gpu
def test_cuda_export_to_the_cpu_and_copies():
    tensor = tp.arange(5, dtype=tp.float32, device="cuda")
    capsule = tensor.__dlpack__(max_version=(1, 0), dl_device=(KDL_CPU, 0))
    assert managed(capsule).flags == IS_COPIED
    assert described(managed(capsule))["device"] == (KDL_CPU, 0)
    assert tp.from_dlpack(capsule).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    with pytest.raises(BufferError, match="copy=False forbids"):
        tensor.__dlpack__(dl_device=(KDL_CPU, 0), copy=False)
    with pytest.raises(ValueError, match="stream must be None when exporting to the CPU"):
        tensor.__dlpack__(stream=1, dl_device=(KDL_CPU, 0))
    copied = tensor.__dlpack__(max_version=(1, 0), copy=True)
    assert managed(copied).flags == IS_COPIED
    assert managed(copied).dl_tensor.data != tensor.data_ptr()
    imported = tp.from_dlpack(copied)
    assert imported.device == tp.device("cuda", 0) and imported.tolist() == tensor.tolist()


@pytest.mark.gpu
def test_cuda_array_interface_import_validates_the_memory():
    tensor = tp.arange(6, dtype=tp.int32, device="cuda")
    interface = tensor.__cuda_array_interface__
    every_other = tp.as_tensor(CAIProducer(dict(interface, shape=(3,), strides=(8,))))
    assert every_other.data_ptr() == tensor.data_ptr() and every_other.stride() == (2,)
    assert every_other.tolist() == [0, 2, 4]
    host = numpy.zeros(4, dtype=numpy.float32)
    with pytest.raises(ValueError, match="is host memory unknown to CUDA, not CUDA device"):
        tp.as_tensor(CAIProducer(dict(interface, data=(host.ctypes.data, False))))
    empty = tp.as_tensor(CAIProducer({"shape": (0,), "typestr": "<f4", "data": (0, False),
                                      "version": 3}))
    assert empty.shape == (0,) and empty.device == tp.device("cuda", 0)


@pytest.mark.gpu
def test_torch_round_trips_through_dlpack():
    torch = import_or_skip("torch")
    ours = tp.arange(1024, dtype=tp.float32, device="cuda")
    theirs = torch.from_dlpack(ours)
    assert theirs.data_ptr() == ours.data_ptr() and theirs.dtype == torch.float32
    theirs[0] = 42.0
    torch.cuda.synchronize()
    assert ours.tolist()[0] == 42.0
    expected = ours.tolist()
    del ours
    gc.collect()
    tp.full((1024,), -1.0, device="cuda")  # would reuse the block had the export freed it
    assert theirs.tolist() == expected

    source = torch.arange(1024.0, device="cuda")
    shared = tp.from_dlpack(source)
    assert shared.data_ptr() == source.data_ptr() and shared.device == tp.device("cuda", 0)
    del source
    gc.collect()
    torch.full((1024,), -1.0, device="cuda")  # would reuse the block had the import freed it
    assert shared.tolist() == [float(i) for i in range(1024)]


@pytest.mark.gpu
def test_torch_dlpack_keeps_strides_and_dtypes():
    torch = import_or_skip("torch")
    source = torch.arange(12.0, device="cuda").reshape(3, 4).t()[:, 1:]
    shared = tp.from_dlpack(source)
    assert shared.data_ptr() == source.data_ptr()
    assert shared.stride() == source.stride() and shared.tolist() == source.tolist()
    ours = tp.arange(20, dtype=tp.int64, device="cuda")[2:18:3]
    theirs = torch.from_dlpack(ours)
    assert theirs.data_ptr() == ours.data_ptr() and theirs.stride() == (3,)
    assert theirs.tolist() == ours.tolist()
    bf16 = torch.ones(4, dtype=torch.bfloat16, device="cuda")
    assert tp.from_dlpack(bf16).dtype == tp.bfloat16
    assert torch.from_dlpack(tp.zeros(3, dtype=tp.bfloat16, device="cuda")).dtype == \
        torch.bfloat16


@pytest.mark.gpu
def test_torch_round_trips_through_cuda_array_interface():
    torch = import_or_skip("torch")
    ours = tp.arange(10, dtype=tp.float32, device="cuda")[1:9:2]
    theirs = torch.as_tensor(ours, device="cuda")
    assert theirs.data_ptr() == ours.data_ptr() and theirs.stride() == (2,)
    assert theirs.tolist() == [1.0, 3.0, 5.0, 7.0]
    del ours
    gc.collect()
    assert theirs.tolist() == [1.0, 3.0, 5.0, 7.0]

    source = torch.arange(10, dtype=torch.int32, device="cuda")[::3]
    shared = tp.as_tensor(source)
    assert shared.data_ptr() == source.data_ptr() and shared.stride() == (3,)
    assert shared.dtype == tp.int32
    del source
    gc.collect()
    torch.full((10,), -1, dtype=torch.int32, device="cuda")
    assert shared.tolist() == [0, 3, 6, 9]


@pytest.mark.gpu
def test_dlpack_export_orders_the_consumer_stream_after_ours():
    torch = import_or_skip("torch")
    count = 1 << 20
    ours = tp.zeros(count, dtype=tp.float32, device="cuda")
    tp.accelerator.synchronize()
    stream = tp.cuda.Stream()
    consumer = torch.cuda.Stream()
    with tp.cuda.stream(stream):
        with torch.cuda.stream(torch.cuda.ExternalStream(stream.cuda_stream)):
            torch.cuda._sleep(CYCLES)
        ours.fill_(3.0)  # queued on our stream behind the sleep
        with torch.cuda.stream(consumer):
            theirs = torch.from_dlpack(ours)  # torch passes stream=consumer's handle
            total = theirs.sum()
    consumer.synchronize()
    assert total.item() == 3.0 * count


@pytest.mark.gpu
def test_dlpack_import_orders_our_stream_after_the_producer():
    torch = import_or_skip("torch")
    count = 1 << 20
    producer = torch.cuda.Stream()
    with torch.cuda.stream(producer):
        source = torch.zeros(count, device="cuda")
        torch.cuda._sleep(CYCLES)
        source.fill_(2.0)
        shared = tp.from_dlpack(source)  # we pass our stream (1); torch makes it wait
    assert shared.sum().item() == 2.0 * count


@pytest.mark.gpu
def test_cupy_round_trips_through_dlpack():
    cupy = import_or_skip("cupy")
    ours = tp.arange(1024, dtype=tp.float32, device="cuda")[::2]
    theirs = cupy.from_dlpack(ours)
    assert theirs.data.ptr == ours.data_ptr() and theirs.strides == (8,)
    expected = ours.tolist()
    del ours
    gc.collect()
    assert theirs.tolist() == expected

    source = cupy.arange(12, dtype=cupy.int16).reshape(3, 4)[:, ::2]
    shared = tp.from_dlpack(source)
    assert shared.data_ptr() == source.data.ptr and shared.stride() == (4, 2)
    expected = source.tolist()
    del source
    gc.collect()
    cupy.full((3, 4), -1, dtype=cupy.int16)
    assert shared.tolist() == expected


@pytest.mark.gpu
def test_cupy_round_trips_through_cuda_array_interface():
    cupy = import_or_skip("cupy")
    ours = tp.arange(12, dtype=tp.int32, device="cuda")
    theirs = cupy.asarray(ours)
    assert theirs.data.ptr == ours.data_ptr() and theirs.tolist() == list(range(12))
    theirs[0] = 7
    cupy.cuda.runtime.deviceSynchronize()
    assert ours.tolist()[0] == 7

    source = cupy.arange(12, dtype=cupy.float64)[3:]
    shared = tp.as_tensor(source)
    assert shared.data_ptr() == source.data.ptr and shared.dtype == tp.float64
    del source
    gc.collect()
    cupy.full((12,), -1.0)
    assert shared.tolist() == [float(i) for i in range(3, 12)]


@pytest.mark.gpu
def test_metadata_reaching_beyond_a_torch_storage_is_refused():
    torch = import_or_skip("torch")

    class Overstated(torch.Tensor):
        """Describes twice its storage, through both protocols."""

        @property
        def __cuda_array_interface__(self):
            interface = dict(torch.Tensor.__cuda_array_interface__.__get__(self))
            interface["shape"] = (interface["shape"][0] * 2,)
            return interface

        def __dlpack__(self, *args, **kwargs):
            return torch.Tensor.__dlpack__(self.larger, *args, **kwargs)

    base = torch.zeros(64, device="cuda")
    liar = base[:8].as_subclass(Overstated)  # a view: its storage is all of base's 64 floats
    liar.larger = torch.zeros(128, device="cuda")  # a DLPack export of another allocation
    assert tp.as_tensor(liar).shape == (16,)  # 16 floats still lie inside the 64 of base
    wide = torch.zeros(8, device="cuda").as_subclass(Overstated)
    with pytest.raises(ValueError, match=r"outside the Overstated's allocation of 32 bytes"):
        tp.as_tensor(wide)
    wide.larger = torch.zeros(128, device="cuda")
    with pytest.raises(ValueError, match=r"outside the Overstated's allocation of 32 bytes"):
        tp.from_dlpack(wide)
    assert tp.from_dlpack(base[4:]).tolist() == [0.0] * 60  # an honest view still imports


@pytest.mark.gpu
def test_metadata_reaching_beyond_a_cupy_allocation_is_refused():
    cupy = import_or_skip("cupy")

    class Overstated(cupy.ndarray):
        @property
        def __cuda_array_interface__(self):
            interface = dict(super().__cuda_array_interface__)
            # CuPy's pool rounds an allocation up to 512 bytes: overstate well beyond that.
            interface["shape"] = (interface["shape"][0] * 1000,)
            return interface

    wide = Overstated((8,), dtype=cupy.float32)
    with pytest.raises(ValueError, match=r"outside the Overstated's allocation of \d+ bytes"):
        tp.as_tensor(wide)
    assert tp.as_tensor(cupy.zeros(8, dtype=cupy.float32)[2:]).shape == (6,)


@pytest.mark.gpu
def test_cuda_array_interface_streams_order_both_ways():
    cupy = import_or_skip("cupy")
    count = 1 << 16
    # Import: CuPy's "stream" is its current stream; our stream waits for the fill there.
    producer = cupy.cuda.Stream(non_blocking=True)
    with producer:
        source = cupy.zeros(count, dtype=cupy.float32)
        cupy_spin_fill(cupy, source, 4.0)
        shared = tp.as_tensor(source)
    assert shared.sum().item() == 4.0 * count
    producer.synchronize()
    # Export: our "stream" is our current stream; CuPy synchronizes on it when it imports.
    ours = tp.zeros(count, dtype=tp.float32, device="cuda")
    tp.accelerator.synchronize()
    stream = tp.cuda.Stream()
    with tp.cuda.stream(stream):
        with cupy.cuda.ExternalStream(stream.cuda_stream):
            cupy_spin_fill(cupy, cupy.empty(1, dtype=cupy.float32), 0.0)
        ours.fill_(5.0)  # queued on our stream behind the spin
        interface = ours.__cuda_array_interface__
        assert interface["stream"] == stream.cuda_stream
        theirs = cupy.asarray(ours)
    with cupy.cuda.Stream(non_blocking=True):
        assert float(theirs.sum()) == 5.0 * count


# --------------------------------------------------------------------------------------------
# Hostile metadata: checked in full before a tensor is made, every message bounded


def test_hostile_dlpack_layouts_are_refused_before_a_tensor_is_made():
    for field, index, value, message in (
            ("shape", 0, 1 << 62, r"holds 4611686018427387904 elements of 8 bytes, more than"),
            ("shape", 0, -3, "negative sizes"),
            ("strides", 0, 1 << 61, "reach .* bytes from the first element, more than"),
            ("strides", 0, -1, "negative strides")):
        capsule = numpy.zeros(4).__dlpack__()
        manager = managed(capsule)
        getattr(manager.dl_tensor, field)[index] = value
        with pytest.raises(ValueError, match=message) as raised:
            tp.from_dlpack(capsule)
        assert len(str(raised.value)) < 600
    capsule = numpy.zeros(4).__dlpack__()
    managed(capsule).dl_tensor.byte_offset = (1 << 64) - 8
    with pytest.raises(ValueError, match="outside the 64-bit address space"):
        tp.from_dlpack(capsule)


class BadDevice:
    def __init__(self, device):
        self.device = device

    def __dlpack__(self, **kwargs):
        raise AssertionError("not reached: the device is checked first")

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("device", [(1,), (1, 0, 0), "cpu", (1, 10 ** 100), (1.0, 0), None,
                                    (True, 0), tuple(range(10 ** 5))])
def test_a_malformed_dlpack_device_is_a_type_error(device):
    with pytest.raises(TypeError, match=r"__dlpack_device__\(\) must return \(device_type, "
                                        "device_id\\), two ints") as raised:
        tp.from_dlpack(BadDevice(device))
    assert len(str(raised.value)) < 600


@pytest.mark.parametrize("change, error, message", [
    ({"shape": (1 << 62, 4)}, ValueError, "more than the 2\\*\\*63 - 1 bytes"),
    ({"data": (1 << 70, False)}, ValueError, "outside the 64-bit address space"),
    ({"data": ((1 << 64) - 8, False)}, ValueError, "outside the 64-bit address space"),
    ({"strides": (1 << 62,), "shape": (10,)}, ValueError, "reach .* bytes"),
    ({"typestr": "<f4" + " " * 10 ** 6}, TypeError, "must be a numpy type string"),
    ({"shape": tuple(range(10 ** 5))}, ValueError, "shape"),
    ({"version": "3" * 10 ** 6}, ValueError, "version"),
])
def test_hostile_cuda_array_interfaces_are_refused_before_any_cuda_call(change, error, message):
    interface = {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3,
                 "strides": None, **change}
    with pytest.raises(error, match=message) as raised:
        tp.as_tensor(CAIProducer(interface))
    assert len(str(raised.value)) < 600


def test_random_cuda_array_interfaces_give_bounded_errors_never_anything_else():
    """Foreign metadata drawn at random (sizes, strides, pointers, type strings, versions):
    as_tensor gives a TypeError, ValueError or BufferError with a short message, or, for
    metadata that holds together, goes on to the device (RuntimeError without one)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    number = st.one_of(st.integers(-2 ** 70, 2 ** 70), st.sampled_from([0, 1, 2 ** 63, 2 ** 64]))
    shapes = st.one_of(st.lists(number, max_size=4).map(tuple), st.just(None), st.text(max_size=3))
    interfaces = st.fixed_dictionaries({
        "shape": shapes,
        "typestr": st.sampled_from(["<f4", "<i8", "|b1", ">f4", "<c8", "x", "<f4" * 100, None]),
        "data": st.one_of(st.tuples(number, st.booleans()), st.just(None), number),
        "strides": st.one_of(st.just(None), shapes),
        "version": st.sampled_from([3, 2, 1, "3", None, 2 ** 70]),
    })

    @settings(max_examples=300, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(interfaces)
    def attempt(interface):
        try:
            tp.as_tensor(CAIProducer(interface))
        except (TypeError, ValueError, BufferError) as error:
            assert len(str(error)) < 600
        except RuntimeError as error:  # the metadata held together: the device is needed
            assert "accelerator" in str(error) or "CUDA" in str(error), error

    attempt()
