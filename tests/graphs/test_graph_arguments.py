"""Graph arguments are checked once, before any device is touched: the same errors with or
without a GPU."""
import pathlib

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay.cuda import graphs

from tests.peers import import_or_skip

MODES = "'global', 'thread_local', 'relaxed'"


@pytest.mark.parametrize("make", [
    lambda mode: accelerator.Graph(capture_error_mode=mode),
    lambda mode: cuda.CUDAGraph().capture_begin(capture_error_mode=mode),
    lambda mode: accelerator.Graph().capture_begin(capture_error_mode=mode),
    lambda mode: cuda.graph(cuda.CUDAGraph(), capture_error_mode=mode),
])
def test_capture_error_mode_must_be_one_of_the_cuda_modes(make):
    with pytest.raises(ValueError, match=f"capture_error_mode must be one of {MODES}, "
                                         "got 'default'"):
        make("default")
    with pytest.raises(TypeError, match=r"capture_error_mode must be a str, got int \(0\)"):
        make(0)


@pytest.mark.parametrize("make", [
    lambda pool: accelerator.Graph(pool=pool),
    lambda pool: cuda.CUDAGraph().capture_begin(pool=pool),
    lambda pool: cuda.graph(cuda.CUDAGraph(), pool=pool),
])
def test_pool_must_be_a_handle_a_graph_or_a_pool_id(make):
    with pytest.raises(TypeError, match="pool must be None, a handle from graph_pool_handle"):
        make("mine")
    with pytest.raises(TypeError, match="pool must be None"):
        make((1.0, 0))
    with pytest.raises(ValueError, match=r"not both zero\), got \(0, 0\)"):
        make((0, 0))
    with pytest.raises(ValueError, match=r"got \(-1, 0\)"):
        make((-1, 0))


def test_pool_values_in_errors_are_shortened():
    with pytest.raises(TypeError) as raised:
        accelerator.Graph(pool="x" * 1000)
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("call", [
    lambda g: g.capture_begin(stream=7),
    lambda g: g.replay(stream="stream"),
    lambda g: cuda.graph(g, stream=object()),
])
def test_stream_must_be_a_tensorplay_stream(call):
    with pytest.raises(TypeError, match="stream must be a tensorplay.cuda.Stream or None"):
        call(cuda.CUDAGraph())


def test_other_arguments_are_checked():
    with pytest.raises(TypeError, match="cuda_graph must be a tensorplay.cuda.CUDAGraph, got "
                                        "Graph"):
        cuda.graph(accelerator.Graph())
    with pytest.raises(TypeError, match=r"keep_graph must be a bool \(True or False\), got str"):
        accelerator.Graph(keep_graph="yes")
    with pytest.raises(TypeError, match="file_path must be a str, got int"):
        graphs.export_dot(3)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        cuda.CUDAGraph().debug_dump(b"graph.dot")
    with pytest.raises(ValueError, match=r"num_warmup_iters must be from 0 to 2\*\*31 - 1"):
        graphs.make_graphed_callables(lambda x: x, ((),), num_warmup_iters=-1)


def test_stage_and_launch_checks_its_sequences():
    g = cuda.CUDAGraph()
    with pytest.raises(TypeError, match="static_inputs must be a list or tuple"):
        g.stage_and_launch(None, [])
    with pytest.raises(TypeError, match="inputs must be a list or tuple"):
        g.stage_and_launch([], 3)
    with pytest.raises(ValueError, match="must pair up, got 1 static buffers and 0 inputs"):
        g.stage_and_launch([tp.zeros(1)], [])
    # An item that is no tensor is the TypeError naming it, before the pairs are counted.
    with pytest.raises(TypeError, match=r"static_inputs\[0\] must be a tensor"):
        g.stage_and_launch([1], [])
    with pytest.raises(TypeError, match=r"inputs\[1\] must be a tensor"):
        g.stage_and_launch([], [tp.zeros(1), "x"])
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.stage_and_launch([], [])


def test_methods_that_need_a_capture_say_so():
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="capture_end\\(\\) called without an open capture"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="instantiate\\(\\) needs a completed capture"):
        g.instantiate()
    with pytest.raises(RuntimeError, match="replay\\(\\) needs a captured graph"):
        g.replay()
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        g.debug_dump(pathlib.Path("graph.dot"))
    assert g.reset() is None and g.reset() is None  # nothing to release: a no-op
    assert g.pool_id is None


def test_pool_id_before_capture_is_the_pool_the_graph_will_share():
    handle = graphs.graph_pool_handle()
    assert handle[0] == 0 and handle[1] > 0 and graphs.graph_pool_handle()[1] > handle[1]
    assert accelerator.Graph(pool=handle).pool() == handle
    assert accelerator.Graph(pool=handle).pool_id == handle
    assert accelerator.Graph().pool() is None and cuda.CUDAGraph().pool_id is None


def test_conditional_nodes_need_an_open_capture():
    g = cuda.CUDAGraph()
    flag = tp.ones(1, dtype=tp.bool)
    with pytest.raises(RuntimeError, match=r"begin_capture_to_if_node\(\) needs an open capture"):
        g.begin_capture_to_if_node(flag)
    with pytest.raises(RuntimeError, match=r"begin_capture_to_while_node\(\) needs an open"):
        accelerator.Graph().begin_capture_to_while_node(flag)
    with pytest.raises(RuntimeError, match="without an open conditional node"):
        g.end_capture_to_conditional_node()
    with pytest.raises(RuntimeError, match="without an open conditional node"):
        g.set_conditional_handle_for_current_node(flag)


@pytest.mark.parametrize("make", [cuda.CUDAGraph, accelerator.Graph])
def test_sleep_checks_keep_before_anything_else(make):
    graph = make()
    with pytest.raises(TypeError, match="keep must be None, 'all' or a list or tuple of "
                                        "tensors, got int"):
        graph.sleep(keep=3)
    with pytest.raises(ValueError, match="keep must be None, 'all' or a list or tuple of "
                                         "tensors, got 'everything'"):
        graph.sleep(keep="everything")
    with pytest.raises(TypeError, match=r"keep\[0\] must be a tensor"):
        graph.sleep(keep=["x"])
    with pytest.raises(ValueError, match=r"keep\[0\] must be a CUDA tensor whose memory comes "
                                         r"from tensorplay's allocator .* on cpu"):
        graph.sleep(keep=(tp.zeros(1),))


@pytest.mark.parametrize("make", [cuda.CUDAGraph, accelerator.Graph])
def test_sleep_and_wake_need_a_captured_graph(make):
    with pytest.raises(RuntimeError, match="sleep\\(\\) needs a captured graph"):
        make().sleep()
    with pytest.raises(RuntimeError, match="sleep\\(\\) needs a captured graph"):
        make().sleep(keep="all")
    with pytest.raises(RuntimeError, match="wake\\(\\) needs a captured graph"):
        make().wake()


CONDITIONAL_CALLS = [
    pytest.param(lambda g, pred: g.begin_capture_to_if_node(pred), "scalar_pred", id="if"),
    pytest.param(lambda g, pred: g.begin_capture_to_if_else_node(pred), "scalar_pred",
                 id="if_else"),
    pytest.param(lambda g, pred: g.begin_capture_to_while_node(pred), "scalar_pred", id="while"),
    pytest.param(lambda g, pred: g.begin_capture_to_switch_node(pred, 2), "scalar_index",
                 id="switch"),
    pytest.param(lambda g, pred: g.set_conditional_handle_for_current_node(pred), "scalar_pred",
                 id="set_handle"),
]


@pytest.mark.parametrize("make", [cuda.CUDAGraph, accelerator.Graph])
@pytest.mark.parametrize("call, argument", CONDITIONAL_CALLS)
@pytest.mark.parametrize("wrong", [None, True, 1, "flag", [True]])
def test_a_predicate_that_is_no_tensor_is_a_type_error_before_the_capture_state(
        make, call, argument, wrong):
    """The schema types the predicates as Tensor: the type is checked first, so without an open
    capture (or conditional node) the error is still the TypeError naming the argument."""
    with pytest.raises(TypeError, match=f"^{argument} must be a tensor .*got "
                                        f"{type(wrong).__name__}$"):
        call(make(), wrong)


@pytest.mark.parametrize("call, argument", CONDITIONAL_CALLS)
def test_another_librarys_tensor_is_a_predicate(call, argument):
    """A PyTorch tensor passes the type check (shared through DLPack), as tensorplay's does:
    what stops these calls is the missing capture."""
    torch = import_or_skip("torch")
    with pytest.raises(RuntimeError, match="open"):
        call(cuda.CUDAGraph(), torch.ones(1, dtype=torch.bool))
