"""Graphed callables, graph topology, raw handles and pictures: first what is checked without a
GPU, then (marked gpu) the forward path of graphed callables (test_graphed_callables.py has the
backward), stage_and_launch, topology, raw handles and pictures on a real GPU.

make_graphed_callables checks its callables and sample arguments in graphed_callables.py
before it touches a device; the tests without a GPU call that module directly, since the public
function first reports a missing accelerator on a machine without a GPU.
"""
import os
import re
import shutil

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay._python import graphed_callables
from tensorplay._runtime.graphs import graph_render
from tensorplay.cuda import graphs

from tests.peers import import_or_skip


def make(callables, sample_args):
    return graphed_callables.make_graphed_callables(callables, sample_args, 3, False, None,
                                                    "global")


def test_sample_args_must_pair_with_the_callables():
    with pytest.raises(ValueError, match=r"one tuple of arguments per callable \(2\), got "
                                         r"\(\(\),\)"):
        make((abs, abs), ((),))
    with pytest.raises(ValueError, match="per callable"):
        make((abs,), [()])


def test_sample_args_must_be_tuples_of_tensors():
    with pytest.raises(TypeError, match=r"sample_args\[1\] must be a tuple of tensors \(the "
                                        r"arguments of callables\[1\]\), got \[\]"):
        make((abs, abs), ((), []))
    with pytest.raises(TypeError, match=r"sample_args\[0\] must be a tensorplay Tensor \(sample_"
                                        r"args hold tensors only\), got 3"):
        make(abs, (3,))
    with pytest.raises(ValueError, match=r"sample_args\[0\] must be a CUDA tensor, got one on "
                                         r"cpu"):
        make(abs, (tp.zeros(2),))


def test_callables_must_be_callable():
    with pytest.raises(TypeError, match=r"callables\[0\] must be a function or a "
                                        r"tensorplay.nn.Module, got 'f'"):
        make(("f",), ((),))


def test_long_arguments_are_shortened_in_errors():
    with pytest.raises(TypeError) as raised:
        make(abs, ("x" * 1000,))
    assert len(str(raised.value)) < 400


def test_public_make_graphed_callables_checks_its_options_first():
    with pytest.raises(TypeError, match="allow_unused_input must be a bool"):
        cuda.graphs.make_graphed_callables(abs, (), allow_unused_input="no")
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        cuda.graphs.make_graphed_callables(abs, (), capture_error_mode="loud")


def test_debugging_methods_need_a_capture():
    for graph in (cuda.CUDAGraph(), accelerator.Graph(keep_graph=True)):
        with pytest.raises(RuntimeError, match=r"get_graph_data\(\) needs the captured graph.*"
                                               r"enable_debug_mode\(\)"):
            graph.get_graph_data()
        with pytest.raises(RuntimeError, match=r"raw_cuda_graph\(\) needs the captured graph"):
            graph.raw_cuda_graph()
        with pytest.raises(RuntimeError, match=r"raw_cuda_graph_exec\(\) needs a captured "
                                               "graph"):
            graph.raw_cuda_graph_exec()


def test_picture_paths_are_recognised_by_their_suffix():
    assert graph_render.picture_format("graph.svg") == "svg"
    assert graph_render.picture_format("/tmp/Graph.PNG") == "png"
    assert graph_render.picture_format("graph.dot") is None
    assert graph_render.picture_format("svg") is None


def test_a_missing_dot_program_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no dot on PATH
    with pytest.raises(RuntimeError, match="needs Graphviz's 'dot' program.*apt-get install "
                                           "graphviz"):
        graph_render.render_dump(b"digraph g {}", str(tmp_path / "graph.svg"), "svg")
    assert not (tmp_path / "graph.svg").exists()


@pytest.mark.skipif(graph_render.shutil.which("dot") is None,
                    reason="Graphviz's dot program is not installed")
def test_dot_text_is_rendered_to_svg_and_png(tmp_path):
    for picture, start in (("svg", b"<?xml"), ("png", b"\x89PNG")):
        target = tmp_path / f"graph.{picture}"
        graph_render.render_dump(b'digraph g { "set_conditional" -> "if" }', str(target),
                                 picture)
        assert target.read_bytes().startswith(start)


@pytest.mark.skipif(graph_render.shutil.which("dot") is None,
                    reason="Graphviz's dot program is not installed")
def test_dot_failures_are_reported_with_its_message(tmp_path):
    with pytest.raises(RuntimeError, match="could not render the graph dump to .*exit status"):
        graph_render.render_dump(b"this is not DOT {", str(tmp_path / "graph.svg"), "svg")


def test_the_scratch_file_is_read_back_whole():
    with graph_render.scratch_path() as scratch:
        with open(scratch, "wb") as printed:  # as the driver prints into it
            printed.write(b"digraph g {}\n" * 1000)
        assert graph_render.read_back(scratch) == b"digraph g {}\n" * 1000


def test_a_dump_that_cannot_be_written_is_an_os_error_naming_the_path(tmp_path):
    targets = [str(tmp_path / "missing" / "graph.dot"), str(tmp_path)]
    if os.path.exists("/dev/full"):
        targets.append("/dev/full")  # every write fails: no space left on device
    for target in targets:
        with pytest.raises(OSError, match="cannot write the graph dump") as raised:
            graph_render.write_dump(b"digraph g {}" * 10000, target)
        assert raised.value.filename == target
    graph_render.write_dump(b"digraph g {}", str(tmp_path / "graph.dot"))
    assert (tmp_path / "graph.dot").read_bytes() == b"digraph g {}"


def test_if_else_and_switch_nodes_need_an_open_capture():
    g = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match=r"begin_capture_to_if_else_node\(\) needs an open "
                                           "capture"):
        g.begin_capture_to_if_else_node(tp.ones(1, dtype=tp.bool))
    with pytest.raises(RuntimeError, match=r"begin_capture_to_switch_node\(\) needs an open "
                                           "capture"):
        g.begin_capture_to_switch_node(tp.zeros(1, dtype=tp.int32), 3)
    with pytest.raises(RuntimeError, match=r"begin_capture_to_next_body\(\) needs an if/else or "
                                           "switch node"):
        g.begin_capture_to_next_body()


def test_switch_nodes_need_a_positive_case_count():
    g = cuda.CUDAGraph()
    for wrong in ("3", True, 2.0):
        with pytest.raises(TypeError, match="num_cases must be an int, got"):
            g.begin_capture_to_switch_node(None, wrong)
    for wrong in (0, -1, 1025, 1 << 32):
        with pytest.raises(ValueError, match=f"num_cases must be from 1 to 1024, got {wrong}"):
            g.begin_capture_to_switch_node(None, wrong)


# --------------------------------------------------------------------------------------------
# On a GPU (marked gpu)
# --------------------------------------------------------------------------------------------

COUNT = 1024


def full(value, count=COUNT):
    return tp.full((count,), value, device="cuda")


def values(tensor):
    accelerator.synchronize()
    return set(tensor.tolist())


# -- make_graphed_callables --------------------------------------------------------------------


@pytest.mark.gpu
def test_graphed_function_warms_up_then_replays_without_calling_python(quiet_device):
    calls = []

    def affine(a):
        calls.append(1)
        return a * 2 + 1

    graphed = graphs.make_graphed_callables(affine, (full(1.0),), num_warmup_iters=2)
    assert len(calls) == 3  # two warm-up runs and the capture
    out = graphed(full(3.0))
    assert values(out) == {7.0}
    again = graphed(full(5.0))
    # A view of the static output, updated by each call.
    assert again.data_ptr() == out.data_ptr() and values(out) == {11.0}
    assert len(calls) == 3
    assert graphed.__name__ == "graphed_affine"


@pytest.mark.gpu
def test_graphed_function_reads_its_sample_tensor_in_place(quiet_device):
    sample = full(1.0)
    graphed = graphs.make_graphed_callables(lambda a: a + 1, (sample,), num_warmup_iters=0)
    sample.fill_(41.0)
    assert values(graphed(sample)) == {42.0}


@pytest.mark.gpu
def test_two_graphed_functions_share_one_pool_and_chain(quiet_device):
    def first(a, b):
        return a + b

    def second(c):
        return (c * 3, c - 1)

    one, two = graphs.make_graphed_callables((first, second),
                                             ((full(0.0), full(0.0)), (full(0.0),)))
    assert one.cuda_graph.pool_id == two.cuda_graph.pool_id
    tripled, lowered = two(one(full(1.0), full(2.0)))
    assert values(tripled) == {9.0} and values(lowered) == {2.0}
    tripled, lowered = two(one(full(10.0), full(20.0)))
    assert values(tripled) == {90.0} and values(lowered) == {29.0}


@pytest.mark.gpu
def test_graphed_callables_use_the_pool_given(quiet_device):
    handle = graphs.graph_pool_handle()
    graphed = graphs.make_graphed_callables(lambda a: a * 2, (full(1.0),), pool=handle)
    assert graphed.cuda_graph.pool_id == handle
    assert values(graphed(full(4.0))) == {8.0}


@pytest.mark.gpu
def test_graphed_callable_checks_its_arguments(quiet_device):
    graphed = graphs.make_graphed_callables(lambda a: a + 1, (full(1.0),))
    with pytest.raises(TypeError, match=r"takes 1 tensor argument\(s\).*got 2"):
        graphed(full(1.0), full(1.0))
    with pytest.raises(ValueError, match=r"must keep its sample's shape \(1024,\)"):
        graphed(full(1.0, 8))
    with pytest.raises(TypeError, match="argument 0 .* must be a tensorplay Tensor, got 3"):
        graphed(3)


@pytest.mark.gpu
def test_make_graphed_callables_refuses_what_it_cannot_graph(quiet_device):
    def returns_a_number(a):
        a += 1
        return 1.5

    with pytest.raises(TypeError, match="must return a tensorplay Tensor or a tuple of them "
                                        r"\(the graph's static outputs\), got 1.5"):
        graphs.make_graphed_callables(returns_a_number, (full(1.0),))
    with pytest.raises(ValueError, match=r"sample_args\[0\] must be a CUDA tensor, got one on "
                                         "cpu"):
        graphs.make_graphed_callables(lambda a: a, (tp.zeros(3),))

    class LooksLikeATensor:
        requires_grad = True

    with pytest.raises(TypeError, match="must be a tensorplay Tensor"):
        graphs.make_graphed_callables(lambda a: a, (LooksLikeATensor(),))


# -- stage_and_launch -----------------------------------------------------------------------------


def _doubling_graph(statics):
    """A graph that doubles each static buffer in place."""
    for static in statics:
        static *= 2  # loads each dtype's kernel before the capture
    accelerator.synchronize()
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        for static in statics:
            static *= 2
    return g


@pytest.mark.gpu
def test_stage_and_launch_copies_every_kind_of_pair_then_replays(quiet_device):
    statics = [full(0.0),                                          # raw copy
               full(0.0),                                          # int32 input: converted
               full(0.0),                                          # strided input
               full(0.0),                                          # input on the CPU
               tp.zeros(3, dtype=tp.uint8, device="cuda"),         # 3 bytes: no 16-byte words
               tp.zeros(0, device="cuda")]                         # nothing to copy
    g = _doubling_graph(statics)
    inputs = [full(1.0),
              tp.full((COUNT,), 2, dtype=tp.int32, device="cuda"),
              tp.arange(0, 2 * COUNT, dtype=tp.float32, device="cuda")[::2],
              tp.full((COUNT,), 4.0),
              tp.arange(1, 4, dtype=tp.uint8, device="cuda"),
              tp.zeros(0, device="cuda")]
    g.stage_and_launch(statics, tuple(inputs))
    accelerator.synchronize()
    assert values(statics[0]) == {2.0}
    assert values(statics[1]) == {4.0}
    assert statics[2].tolist() == [4.0 * i for i in range(COUNT)]
    assert values(statics[3]) == {8.0}
    assert statics[4].tolist() == [2, 4, 6]
    assert statics[5].tolist() == []


@pytest.mark.gpu
def test_stage_and_launch_takes_pytorch_tensors(quiet_device):
    torch = import_or_skip("torch")
    static = torch.zeros(COUNT, device="cuda")
    ours = full(0.0)
    g = _doubling_graph([tp.as_tensor(static), ours])
    g.stage_and_launch([static, ours], [torch.full((COUNT,), 3.0, device="cuda"),
                                        torch.full((COUNT,), 5.0, device="cuda")])
    torch.cuda.synchronize()
    assert set(static.tolist()) == {6.0} and values(ours) == {10.0}


@pytest.mark.gpu
def test_stage_and_launch_stages_more_pairs_than_one_launch_holds(quiet_device):
    statics = [full(0.0, count) for count in range(1, 71)]
    g = _doubling_graph(statics)
    g.stage_and_launch(statics, [full(float(count), count) for count in range(1, 71)])
    accelerator.synchronize()
    assert [values(static) for static in statics] == [{2.0 * count} for count in range(1, 71)]


@pytest.mark.gpu
def test_stage_and_launch_names_a_bad_pair_and_copies_nothing(quiet_device):
    statics = [full(0.0), full(0.0, 4)]
    g = _doubling_graph(statics)
    with pytest.raises(ValueError, match=r"inputs\[1\] has shape \(3,\), but static_inputs\[1\] "
                                         r"has shape \(4,\)"):
        g.stage_and_launch(statics, [full(1.0), full(1.0, 3)])
    with pytest.raises(TypeError, match=r"inputs\[1\] must be a tensor .*got list"):
        g.stage_and_launch(statics, [full(1.0), [1.0] * 4])
    with pytest.raises(ValueError, match=r"static_inputs\[0\] is on cpu, but the graph was "
                                         r"captured on cuda:0"):
        g.stage_and_launch([tp.zeros(COUNT), statics[1]], [full(1.0), full(1.0, 4)])
    assert values(statics[0]) == {0.0}  # nothing was copied, nothing launched


# -- topology, raw handles, pictures -----------------------------------------------------------


def _graph_with_an_if_node(flag, x):
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    x += 1  # loads the kernels before the capture
    x += 10
    with cuda.graph(g):
        x += 1
        g.begin_capture_to_if_node(flag)
        x += 10
        g.end_capture_to_conditional_node()
    return g


@pytest.mark.gpu
def test_graph_data_shows_an_if_node_and_its_body(quiet_device):
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = _graph_with_an_if_node(flag, full(0.0))
    data = g.get_graph_data()
    assert data["handle"] == g.raw_cuda_graph()
    nodes = data["nodes"]
    conditional = [node for node in nodes if node["type"] == "conditional"]
    assert len(conditional) == 1 and conditional[0]["conditional_type"] == "if"
    (body,) = conditional[0]["body_graphs"]
    assert [node["type"] for node in body["nodes"]] == ["kernel"]
    assert "binary" in body["nodes"][0]["kernel_name"]
    # The node follows the kernel that copies the predicate into its handle.
    (setter_id,) = conditional[0]["dependencies"]
    setter = nodes[setter_id]
    assert setter["type"] == "kernel" and setter["kernel_name"] == "set_conditional"
    assert conditional[0]["id"] in setter["dependents"]
    for node in nodes:
        for other in node["dependents"]:
            assert node["id"] in nodes[other]["dependencies"]


@pytest.mark.gpu
def test_graph_data_and_raw_graph_need_the_kept_graph(quiet_device):
    x = full(0.0)
    x += 1
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        x += 1
    assert isinstance(g.raw_cuda_graph_exec(), int) and g.raw_cuda_graph_exec() != 0
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        g.get_graph_data()
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        g.raw_cuda_graph()
    g.reset()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.raw_cuda_graph_exec()


@pytest.mark.gpu
def test_raw_handles_work_with_cuda_bindings(quiet_device):
    from cuda.bindings import runtime as cudart

    x = full(0.0)
    x += 1
    g = accelerator.Graph(keep_graph=True)
    with g:
        x += 1
    raw = cudart.cudaGraph_t(g.raw_cuda_graph())
    error, _, count = cudart.cudaGraphGetNodes(raw)
    assert error == cudart.cudaError_t.cudaSuccess and count == 1
    error, nodes, count = cudart.cudaGraphGetNodes(raw, count)
    assert [int(node) for node in nodes] == [node["handle"]
                                             for node in g.get_graph_data()["nodes"]]
    accelerator.synchronize()
    (error,) = cudart.cudaGraphLaunch(cudart.cudaGraphExec_t(g.raw_cuda_graph_exec()), 0)
    assert error == cudart.cudaError_t.cudaSuccess
    assert values(x) == {2.0}


@pytest.mark.gpu
def test_debug_dump_to_svg_renders_through_graphviz(quiet_device, tmp_path):
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = _graph_with_an_if_node(flag, full(0.0))
    if shutil.which("dot") is None:
        with pytest.raises(RuntimeError, match="apt-get install graphviz"):
            g.debug_dump(tmp_path / "graph.svg")
        return
    g.debug_dump(tmp_path / "graph.svg")
    assert "<svg" in (tmp_path / "graph.svg").read_text()
    assert graphs.export_dot(str(tmp_path / "last.png")) == str(tmp_path / "last.png")
    assert (tmp_path / "last.png").read_bytes().startswith(b"\x89PNG")
    g.debug_dump(tmp_path / "graph.dot")
    assert (tmp_path / "graph.dot").read_text().lstrip().startswith("digraph")


@pytest.mark.gpu
def test_debug_dump_shows_conditional_nodes_and_their_bodies(quiet_device, tmp_path):
    counter = tp.zeros(1, device="cuda")
    keep_going = tp.zeros(1, dtype=tp.bool, device="cuda")
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    x = warmed_for_branches()
    keep_going.copy_(counter < 3)
    counter += 1
    counter.fill_(0)
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    with cuda.graph(g):
        keep_going.copy_(counter < 3)
        g.begin_capture_to_while_node(keep_going)
        counter += 1
        g.begin_capture_to_if_node(flag)
        x += 1
        g.end_capture_to_conditional_node()
        keep_going.copy_(counter < 3)
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(x) == {3.0}
    g.debug_dump(tmp_path / "nested.dot")
    text = (tmp_path / "nested.dot").read_text()
    # One cluster per graph: the outer one, the while body, the if body inside it.
    assert text.count("subgraph cluster_") == 3
    assert re.search(r"Conditional Type\|\s*WHILE", text)
    assert re.search(r"Conditional Type\|\s*IF", text)


# -- if/else and switch nodes -------------------------------------------------------------------


def warmed_for_branches():
    """x, after loading the kernels the captures below use (a capture cannot load them)."""
    x = full(0.0)
    x += 1
    x.fill_(0)
    accelerator.synchronize()
    return x


@pytest.mark.gpu
def test_if_else_node_runs_the_body_the_predicate_picks(quiet_device):
    x = warmed_for_branches()
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_if_else_node(flag)
        x += 1
        g.begin_capture_to_next_body()
        x += 10
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(x) == {1.0}
    flag.fill_(False)
    g.replay()
    assert values(x) == {11.0}


@pytest.mark.gpu
def test_switch_node_runs_the_case_its_index_names(quiet_device):
    x = warmed_for_branches()
    index = tp.zeros(1, dtype=tp.int32, device="cuda")
    index.fill_(1)
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_switch_node(index, 4)  # case 3 stays empty
        x += 1
        g.begin_capture_to_next_body()
        x += 10
        g.begin_capture_to_next_body()
        x += 100
        g.end_capture_to_conditional_node()
    for case, added in ((0, 1.0), (1, 10.0), (2, 100.0), (3, 0.0), (4, 0.0), (-1, 0.0)):
        x.fill_(0)
        index.fill_(case)
        g.replay()
        assert values(x) == {added}, f"case {case}"


@pytest.mark.gpu
def test_an_if_node_nests_inside_a_switch_case(quiet_device):
    x = warmed_for_branches()
    index = tp.zeros(1, dtype=tp.int32, device="cuda")
    flag = tp.zeros(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    with cuda.graph(g):
        g.begin_capture_to_switch_node(index, 2)
        g.begin_capture_to_if_node(flag)
        x += 1
        g.end_capture_to_conditional_node()
        g.begin_capture_to_next_body()
        x += 10
        g.end_capture_to_conditional_node()
    g.replay()
    assert values(x) == {0.0}
    flag.fill_(True)
    g.replay()
    assert values(x) == {1.0}
    index.fill_(1)
    g.replay()
    assert values(x) == {11.0}


@pytest.mark.gpu
def test_multi_body_nodes_report_misuse(quiet_device):
    x = warmed_for_branches()
    flag = tp.ones(1, dtype=tp.bool, device="cuda")
    g = cuda.CUDAGraph()
    g.capture_begin()
    with pytest.raises(ValueError, match="scalar_index must be a single-element int32 tensor"):
        g.begin_capture_to_switch_node(flag, 2)
    g.begin_capture_to_if_node(flag)
    with pytest.raises(RuntimeError, match="needs an if/else or switch node as the innermost"):
        g.begin_capture_to_next_body()
    g.end_capture_to_conditional_node()
    g.begin_capture_to_if_else_node(flag)
    x += 1
    g.begin_capture_to_next_body()
    with pytest.raises(RuntimeError, match="all 2 bodies of the node have been captured"):
        g.begin_capture_to_next_body()
    g.end_capture_to_conditional_node()
    g.capture_end()
    g.replay()
    assert values(x) == {1.0}


@pytest.mark.gpu
def test_graph_data_shows_every_body_of_a_switch_node(quiet_device):
    x = warmed_for_branches()
    index = tp.zeros(1, dtype=tp.int32, device="cuda")
    g = cuda.CUDAGraph()
    g.enable_debug_mode()
    with cuda.graph(g):
        g.begin_capture_to_switch_node(index, 3)
        x += 1
        g.begin_capture_to_next_body()
        x += 10
        x += 10
        g.end_capture_to_conditional_node()
    (switch,) = [node for node in g.get_graph_data()["nodes"] if node["type"] == "conditional"]
    assert switch["conditional_type"] == "switch"
    assert [[node["type"] for node in body["nodes"]] for body in switch["body_graphs"]] == [
        ["kernel"], ["kernel", "kernel"], ["empty"]]
