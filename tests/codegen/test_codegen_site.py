"""The docs site's pages as codegen renders them (codegen/site.py): a page per module and per
function and class, deterministic, and links in docs made only to names the site declares.
The site's Sphinx build and browser checks are in tests/tools/test_docs_site.py."""
import subprocess
import sys

import pytest

from codegen.model import Example, load_api
from codegen.render import Renderer
from codegen.site import SiteRenderer


@pytest.fixture(scope="module")
def site(root):
    return SiteRenderer(Renderer(load_api(root / "api.yaml", root / "runtime"),
                                 root / "templates"), root / "api.yaml", root / "runtime")


def render_into(root, out):
    return subprocess.run([sys.executable, "-m", "codegen", "docs", "--format", "site",
                           "--docs-out", str(out), "--quiet"], cwd=root, capture_output=True,
                          text=True, timeout=120)


def test_site_format_needs_a_folder_to_write_to(root):
    result = subprocess.run([sys.executable, "-m", "codegen", "docs", "--format", "site"],
                            cwd=root, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--docs-out" in result.stderr and "Traceback" not in result.stderr


def test_pages_are_written_per_module_and_per_function_and_class_identically_twice(root,
                                                                                   tmp_path):
    for out in (tmp_path / "one", tmp_path / "two"):
        result = render_into(root, out)
        assert result.returncode == 0, result.stderr
    one = {p.relative_to(tmp_path / "one"): p.read_bytes()
           for p in (tmp_path / "one").rglob("*.md")}
    two = {p.relative_to(tmp_path / "two"): p.read_bytes()
           for p in (tmp_path / "two").rglob("*.md")}
    assert one == two
    names = {p.as_posix() for p in one}
    assert {"api/index.md", "api/types.md", "api/tensorplay.cuda.graphs.md",
            "generated/tensorplay.cuda.graphs.CUDAGraph.md",
            # a re-export has its page under the name the spec's link uses
            "generated/tensorplay.accelerator.Graph.md"} <= names
    page = (tmp_path / "one" / "generated" / "tensorplay.cuda.graphs.CUDAGraph.md").read_text(
        encoding="utf-8")
    assert ":::{py:method} CUDAGraph.replay(" in page


def test_docs_link_declared_names_and_calls_and_leave_the_rest_as_text(site):
    text = site.text("Like tensorplay.cuda.CUDAGraph, see graph() and CUDAGraph.reset(); "
                     "tensorplay.amp.autocast and forward() stay text.", "tensorplay.cuda.graphs")
    assert "{py:obj}`tensorplay.cuda.CUDAGraph <tensorplay.cuda.CUDAGraph>`" in text
    assert "{py:obj}`graph() <tensorplay.cuda.graphs.graph>`" in text
    assert "{py:obj}`CUDAGraph.reset() <tensorplay.cuda.graphs.CUDAGraph.reset>`" in text
    assert "tensorplay.amp.autocast and forward() stay text." in text


def test_a_call_names_the_member_of_the_class_described_first(site):
    text = site.text("call reset() first", "tensorplay.accelerator.graphs",
                     owner="tensorplay.accelerator.Graph")
    # Graph is re-exported there; its members are documented, and linked, on its home page
    # (Note [Class and module pages]).
    assert "{py:obj}`reset() <tensorplay.accelerator.graphs.Graph.reset>`" in text


def test_a_reexported_class_page_documents_no_member_and_links_its_home(site):
    pages = {output.path: output.content for output in site.render()}
    reexport = pages["generated/tensorplay.cuda.CUDAGraph.md"]
    home = pages["generated/tensorplay.cuda.graphs.CUDAGraph.md"]
    assert "{py:method}" not in reexport and "{py:method}" in home
    assert "<tensorplay.cuda.graphs.CUDAGraph.replay>" in reexport
    assert "{doc}`tensorplay.cuda.graphs.CUDAGraph <tensorplay.cuda.graphs.CUDAGraph>`" in reexport
    # The home page lists the members by the schema's groups, in order.
    order = [home.index(f"\n## {title}\n") for title in
             ("Capture", "Replay", "Conditional nodes", "Update and rebinding", "Debugging",
              "Handles")]
    assert order == sorted(order)
    # Source views exist for every file a page links.
    assert "_extra/source/api.yaml.html" in pages
    assert "_extra/source/runtime/graphs/graph.pyx.html" in pages


def test_markup_in_a_plain_text_doc_is_escaped(site):
    assert site.text("for example <MulBackward>\n> not a quote", "tensorplay") == \
        "for example \\<MulBackward>\n\\> not a quote"
    assert site.text("any object with __dlpack__, or *args", "tensorplay") == \
        "any object with \\_\\_dlpack\\_\\_, or \\*args"


def test_an_example_that_needs_cuda_or_nccl_says_so_above_it():
    code = ">>> 1\n1"
    assert SiteRenderer.example(Example(code, "cpu", 1)) == f"```pycon\n{code}\n```"
    assert SiteRenderer.example(Example(code, "cuda", 1)).startswith("Needs a CUDA device ")
    nccl = SiteRenderer.example(Example(code, "nccl", 1))
    assert nccl.startswith("Needs a CUDA device and NVIDIA's nccl4py ") and code in nccl
