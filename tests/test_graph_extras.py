"""Graphed callables, graph topology, raw handles and pictures: what is checked without a GPU.

make_graphed_callables checks its callables and sample arguments in graphed_callables.py
before it touches a device; these tests call that module directly, since the public function
first reports a missing accelerator on a machine without a GPU.
"""
import os

import pytest

import tensorplay as tp
from tensorplay import accelerator, cuda
from tensorplay._runtime.graphs import graph_render
from tensorplay._python import graphed_callables


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
        g.begin_capture_to_if_else_node(None)
    with pytest.raises(RuntimeError, match=r"begin_capture_to_switch_node\(\) needs an open "
                                           "capture"):
        g.begin_capture_to_switch_node(None, 3)
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
