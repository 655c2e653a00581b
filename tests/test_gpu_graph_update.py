"""Graph update on a real GPU: recapture into an executable, kernel node parameters, rebinding."""
import gc

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.accelerator import memory
from tensorplay.cuda import graphs

from graph_helpers import values, warmed

pytestmark = pytest.mark.gpu

COUNT = 1 << 12


def captured(body, *, keep=False):
    g = cuda.CUDAGraph()
    if keep:
        g.enable_debug_mode()
    with cuda.graph(g):
        result = body()
    return g, result


def fill_node(g, value=None):
    return next(node for node in g.kernel_nodes() if node.name == "fill"
                and (value is None or node.arguments["value"] == value))


# -- updates from a recapture ------------------------------------------------------------------


def test_recapture_updates_the_executable_in_place_with_a_fresh_captures_results(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(4.0, COUNT)
    g, y = captured(lambda: x * 2 + 1)
    executable = g.raw_cuda_graph_exec()
    pool = g.pool_id
    with graphs.recapture(g):
        z = other * 3 + 1
    assert g.raw_cuda_graph_exec() == executable and g.pool_id == pool
    g.replay()
    assert values(z) == {13.0}
    fresh, expected = captured(lambda: other * 3 + 1)
    fresh.replay()
    assert values(z) == values(expected)
    g.recapture_begin()
    w = x * 5 + 1
    assert g.recapture_end() == "updated"
    g.replay()
    assert values(w) == {6.0}


def test_a_topology_mismatch_names_the_first_differing_node_and_keeps_the_old_executable(
        quiet_device):
    x, other = warmed(0.0, COUNT), warmed(5.0, COUNT)
    g, _ = captured(lambda: (x.__iadd__(1), x.__iadd__(1)))
    executable = g.raw_cuda_graph_exec()
    with pytest.raises(RuntimeError, match=r"node 2 \(kernel '\w+'\) is new.*previous "
                                           r"executable, which replays as before"):
        with graphs.recapture(g):
            x += 1
            x += 1
            x += 1
    with pytest.raises(RuntimeError, match=r"node 1 is a memcpy node in the recapture but a "
                                           r"kernel '\w+' node in the graph \(its type "
                                           r"changed\)"):
        with graphs.recapture(g):
            x += 1
            x.copy_(other)
    assert g.raw_cuda_graph_exec() == executable
    g.replay()
    assert values(x) == {2.0}
    assert memory.memory_stats()["capturing"] == 0


def test_reinstantiate_instantiates_a_recapture_of_another_topology(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.__iadd__(1))
    executable = g.raw_cuda_graph_exec()
    g.recapture_begin()
    x += 1
    x += 2
    assert g.recapture_end(reinstantiate=True) == "reinstantiated"
    assert g.raw_cuda_graph_exec() != executable
    g.replay()
    assert values(x) == {3.0}
    with graphs.recapture(g):  # the new executable takes updates from its own capture
        x += 5
        x += 5
    g.replay()
    assert values(x) == {13.0}


def test_an_exception_in_a_recapture_block_keeps_the_graph_as_it_was(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.__iadd__(1))
    with pytest.raises(ZeroDivisionError):
        with graphs.recapture(g):
            x += 7
            1 / 0
    g.replay()
    assert values(x) == {1.0}
    assert not graphs.is_current_stream_capturing()


def test_recapture_gives_back_blocks_only_the_replaced_capture_held(quiet_device):
    x = warmed(0.0, COUNT)
    held = tp.full((1 << 18,), 1.0, device="cuda")  # 1 MiB from the shared pool
    accelerator.synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        held.fill_(2.0)
        del held  # freed during the capture: held for the graph, which writes it
    active = memory.memory_stats()["active_bytes.all.current"]
    with pytest.raises(RuntimeError, match="is new"):
        with graphs.recapture(g):  # fails: the held block stays with the graph
            x.fill_(1.0)
            x += 1
    assert memory.memory_stats()["active_bytes.all.current"] == active
    g.recapture_begin()
    x.fill_(5.0)
    g.recapture_end()
    assert memory.memory_stats()["active_bytes.all.current"] <= active - (1 << 20)
    g.replay()
    assert values(x) == {5.0}


def test_repeated_recaptures_reuse_the_graphs_pool(quiet_device):
    x = warmed(1.0, COUNT)
    g, out = captured(lambda: x * 2)
    reserved = None
    for step in range(20):
        del out
        with graphs.recapture(g):
            out = x * (step + 3)
        if step == 2:
            reserved = memory.memory_reserved()
    assert memory.memory_reserved() == reserved
    g.replay()
    assert values(out) == {22.0}


# -- kernel node parameters --------------------------------------------------------------------


def test_kernel_nodes_show_dimensions_and_scalar_arguments(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(2.5))
    (node,) = g.kernel_nodes()
    assert node.name == "fill" and node.id == (0,)
    assert node.block == (256, 1, 1) and node.grid[1:] == (1, 1)
    assert node.arguments == {"count": COUNT, "value": 2.5}
    assert [name for name, _ in node.signature] == ["out", "count", "value"]
    assert dict(node.signature)["out"] == "float*"
    assert "fill" in repr(node)


def test_changed_arguments_take_effect_from_the_next_replay_only(quiet_device):
    x, total = warmed(0.0, COUNT), warmed(0.0, COUNT)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x.fill_(1.0)
        total.add_(x)
    g.replay()  # queued before the change: runs with value 1
    g.set_kernel_node_params(fill_node(g), arguments={"value": 5.0})
    assert fill_node(g).arguments["value"] == 5.0
    g.replay()
    assert values(total) == {6.0}
    g.set_kernel_node_params(fill_node(g), arguments={"count": 16, "value": 9.0})
    g.replay()
    result = total.tolist()
    assert result[:16] == [15.0] * 16 and set(result[16:]) == {11.0}


def test_launch_dimensions_can_change(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(3.0))
    g.set_kernel_node_params(fill_node(g), grid=1, block=(32,))
    node = fill_node(g)
    assert node.grid == (1, 1, 1) and node.block == (32, 1, 1)
    g.replay()  # grid-stride loop: one block of 32 threads still fills everything
    assert values(x) == {3.0}


def test_kernel_arguments_inside_a_conditional_body_can_change(quiet_device):
    x = warmed(0.0, COUNT)
    predicate = tp.full((1,), True, device="cuda", dtype=tp.bool)
    g = cuda.CUDAGraph()
    g.capture_begin()
    g.begin_capture_to_if_node(predicate)
    x.fill_(2.0)
    g.end_capture_to_conditional_node()
    g.capture_end()
    node = fill_node(g, 2.0)
    assert len(node.id) == 3  # (conditional node, body 0, position)
    g.set_kernel_node_params(node, arguments={"value": 7.0})
    g.replay()
    assert values(x) == {7.0}


def test_invalid_node_parameters_are_refused_and_change_nothing(quiet_device):
    x = warmed(0.0, COUNT)
    g, _ = captured(lambda: x.fill_(1.0))
    node = fill_node(g)
    with pytest.raises(ValueError, match="has no parameter 'length'; its parameters are out, "
                                         "count, value"):
        g.set_kernel_node_params(node, arguments={"length": 3})
    with pytest.raises(ValueError, match="argument 'out' .* is a pointer"):
        g.set_kernel_node_params(node, arguments={"out": 0})
    with pytest.raises(TypeError, match="argument 'count' is an integer"):
        g.set_kernel_node_params(node, arguments={"count": 2.5})
    with pytest.raises(ValueError, match=r"argument 'count' \(long long\) takes"):
        g.set_kernel_node_params(node, arguments={"count": 1 << 70})
    with pytest.raises(ValueError, match="block .* more than 1024 threads"):
        g.set_kernel_node_params(node, block=(64, 64))
    with pytest.raises(ValueError, match=r"grid\[0\] must be from 1"):
        g.set_kernel_node_params(node, grid=0, arguments={"value": 4.0})
    other, _ = captured(lambda: x.fill_(1.0))
    with pytest.raises(ValueError, match="belongs to another graph"):
        other.set_kernel_node_params(node, arguments={"value": 4.0})
    g.replay()
    assert values(x) == {1.0}
    with graphs.recapture(g):
        x.fill_(1.0)
    with pytest.raises(ValueError, match="call kernel_nodes\\(\\) again"):
        g.set_kernel_node_params(node, arguments={"value": 4.0})


# -- rebinding ---------------------------------------------------------------------------------


def test_rebinding_inputs_and_outputs_needs_no_copy(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(10.0, COUNT)
    g, y = captured(lambda: x * 2)
    out = tp.zeros(COUNT, device="cuda")
    g.rebind({x: other, y: out})
    g.replay()
    assert values(out) == {20.0}
    other.fill_(3.0)
    g.replay()
    assert values(out) == {6.0}
    g.rebind({other: x})  # the graph reads other now: it is the static tensor to name
    g.replay()
    assert values(out) == {2.0}


def test_rebinding_keeps_offsets_and_moves_copies_and_conditional_bodies(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(5.0, COUNT)
    copy = tp.zeros(COUNT, device="cuda")
    tail = tp.zeros(10, device="cuda")
    predicate = tp.full((1,), True, device="cuda", dtype=tp.bool)
    g = cuda.CUDAGraph()
    g.capture_begin()
    copy.copy_(x)                      # a memcpy node
    tail.copy_(x[100:110] * 1)         # a kernel reading at an offset into x
    g.begin_capture_to_if_node(predicate)
    copy.add_(x)                       # inside a conditional body
    g.end_capture_to_conditional_node()
    g.capture_end()
    other[100:110].fill_(7.0)
    g.rebind({x: other})
    g.replay()
    assert values(tail) == {7.0}
    result = copy.tolist()
    assert result[0] == 10.0 and result[105] == 14.0


def test_rebinding_moves_a_memset_node(quiet_device):
    runtime = pytest.importorskip("cuda.bindings.runtime")
    x, other = warmed(1.0, COUNT), warmed(1.0, COUNT)
    g = cuda.CUDAGraph()
    g.capture_begin()
    (status,) = runtime.cudaMemsetAsync(x.data_ptr(), 0, COUNT * 4,
                                        accelerator.current_stream().cuda_stream)
    assert status == runtime.cudaError_t.cudaSuccess
    g.capture_end()
    g.rebind({x: other})
    g.replay()
    assert values(other) == {0.0} and values(x) == {1.0}


def test_replay_with_binds_tensors_for_one_replay_on_several_streams(quiet_device):
    x = warmed(1.0, COUNT)
    g, y = captured(lambda: x * 2)
    inputs = [tp.full((COUNT,), float(i), device="cuda") for i in range(4)]
    outputs = [tp.zeros(COUNT, device="cuda") for _ in range(4)]
    streams = [cuda.Stream(), cuda.Stream()]
    accelerator.synchronize()
    for i in range(4):
        g.replay_with({x: inputs[i], y: outputs[i]}, stream=streams[i % 2])
    accelerator.synchronize()
    assert [values(out) for out in outputs] == [{0.0}, {2.0}, {4.0}, {6.0}]
    g.replay()  # the graph's own tensors again
    assert values(y) == {2.0}
    assert values(outputs[3]) == {6.0}


def test_a_rebinding_that_could_miss_a_reference_is_refused_and_changes_nothing(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(3.0, COUNT)
    y, big = tp.zeros(COUNT, device="cuda"), tp.zeros(COUNT, device="cuda")
    function = _foreign_kernel()
    g = cuda.CUDAGraph()
    g.capture_begin()
    y.copy_(x)
    _launch_foreign(function, x)
    g.capture_end()
    with pytest.raises(ValueError, match=r"node 1 \(kernel 'foreign_add_one'\) cannot be "
                                         r"scanned .* nothing was changed"):
        g.rebind({x: other})
    with pytest.raises(ValueError, match="nothing was changed"):
        g.replay_with({x: other})
    g.replay()
    assert values(y) == {1.0} and values(other) == {3.0}
    partial = cuda.CUDAGraph()
    with cuda.graph(partial):
        big.copy_(x)
    with pytest.raises(ValueError, match="covers the tensor's memory from an address before "
                                         "it"):
        partial.rebind({x[10:20]: other[10:20]})
    with pytest.raises(ValueError, match="no node of the graph refers to the memory"):
        partial.rebind({other: x})
    with pytest.raises(ValueError, match="the new tensor must have the static tensor's shape"):
        partial.rebind({x: other[:10]})
    with pytest.raises(ValueError, match="4 bytes off the static tensor's alignment"):
        partial.rebind({x[:10]: other[1:11]})
    partial.replay()
    assert values(big) == {2.0}


FOREIGN_SOURCE = """
extern "C" __global__ void foreign_add_one(float* data, long long count) {
    for (long long i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (long long)blockDim.x * gridDim.x) data[i] += 1.0f;
}
"""


def _foreign_kernel():
    """A kernel loaded outside tensorplay's cache, as another library's would be."""
    driver = pytest.importorskip("cuda.bindings.driver")
    from tensorplay._runtime import kernels
    runtime = pytest.importorskip("cuda.bindings.runtime")
    _, major = runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMajor, 0)
    _, minor = runtime.cudaDeviceGetAttribute(
        runtime.cudaDeviceAttr.cudaDevAttrComputeCapabilityMinor, 0)
    cubin = kernels.compile_cubin(FOREIGN_SOURCE, f"sm_{major}{minor}")
    status, library = driver.cuLibraryLoadData(cubin, [], [], 0, [], [], 0)
    assert status == driver.CUresult.CUDA_SUCCESS
    status, kernel = driver.cuLibraryGetKernel(library, b"foreign_add_one")
    assert status == driver.CUresult.CUDA_SUCCESS
    status, function = driver.cuKernelGetFunction(kernel)
    assert status == driver.CUresult.CUDA_SUCCESS
    (status,) = driver.cuFuncLoad(function)
    assert status == driver.CUresult.CUDA_SUCCESS
    return function


def _launch_foreign(function, tensor):
    import numpy
    driver = pytest.importorskip("cuda.bindings.driver")
    pointer = numpy.array([tensor.data_ptr()], dtype=numpy.uint64)
    count = numpy.array([tensor.numel()], dtype=numpy.int64)
    arguments = numpy.array([pointer.ctypes.data, count.ctypes.data], dtype=numpy.uint64)
    stream = driver.CUstream(accelerator.current_stream().cuda_stream)
    (status,) = driver.cuLaunchKernel(function, 4, 1, 1, 128, 1, 1, 0, stream,
                                      arguments.ctypes.data, 0)
    assert status == driver.CUresult.CUDA_SUCCESS


def test_reset_after_rebinding_and_updates_leaves_nothing_behind(quiet_device):
    x, other = warmed(1.0, COUNT), warmed(2.0, COUNT)
    pools = memory.memory_stats().get("num_graph_pools", 0)
    g, y = captured(lambda: x + 1)
    g.rebind({x: other})
    g.replay_with({other: x})
    with graphs.recapture(g):
        y = other + 1
    g.replay()
    assert values(y) == {3.0}
    g.reset()
    del g, y
    gc.collect()
    memory.empty_cache()
    assert memory.memory_stats()["num_graph_pools"] == pools
