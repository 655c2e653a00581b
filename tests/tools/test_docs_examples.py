"""The docs' examples run as written: every example of api.yaml (`example:`, shown on its
function's or class's page) and the getting-started page's ```pycon blocks are doctests. The
CPU ones run everywhere; those that need a CUDA device are gpu tests (skipped, with the reason,
without one), and those that need NCCL skip also without nccl4py. Every public function and class has an example."""
import doctest
import re
from pathlib import Path

import pytest

from codegen.model import USES_CUDA, load_api
from tests.distributed.nccl_helpers import needs_nccl

ROOT = Path(__file__).resolve().parents[2]
API = load_api(ROOT / "api.yaml", ROOT / "runtime")
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
# ELLIPSIS: an example may elide what varies (addresses, timings) with "...".
FLAGS = doctest.ELLIPSIS


def schema_examples():
    for module in API.modules:
        for item in module.functions + module.classes:
            members = getattr(item, "methods", ())
            for owner, example in [(item.name, item.example)] + [
                    (f"{item.name}.{m.name}", m.example) for m in members]:
                if example is not None:
                    yield f"{module.name}.{owner}", example


def marks(needs: str) -> list:
    """A CUDA example is a gpu test; an NCCL one also skips, with the reason, without nccl4py."""
    if needs == "cpu":
        return []
    if needs == "nccl":
        return [pytest.mark.gpu, needs_nccl]
    return [pytest.mark.gpu]


EXAMPLES = [pytest.param(name, example, id=name, marks=marks(example.needs))
            for name, example in schema_examples()]


def run(code: str, name: str, line: int, globs: dict) -> dict:
    """Run code as a doctest; fail with doctest's report, located in its file. Returns the
    globals it leaves, for the next block of the same page."""
    test = doctest.DocTestParser().get_doctest(code, globs, name, name.split(":")[0], line)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(test, out=report.append, clear_globs=False)
    assert result.failed == 0, "".join(report)
    return test.globs


def test_every_public_function_and_class_has_an_example():
    missing = [f"{m.name}.{item.name}" for m in API.modules
               for item in m.functions + m.classes if item.example is None]
    assert not missing, f"no example: in api.yaml for {', '.join(missing)}"


@pytest.mark.parametrize("name, example", EXAMPLES)
def test_schema_example_runs(name, example):
    # The doctest's line numbers count from the example's first line in api.yaml.
    run(example.code, f"api.yaml:{name}", example.line - 1, {})


def page_blocks(path: Path) -> list[tuple[int, str]]:
    """The ```pycon blocks of a page, each with the line it starts on."""
    text = path.read_text(encoding="utf-8")
    return [(text[:match.start()].count("\n") + 1, match.group(1))
            for match in re.finditer(r"^```pycon\n(.*?)^```", text, re.S | re.M)]


def test_getting_started_has_cpu_and_cuda_examples():
    blocks = page_blocks(GETTING_STARTED)
    assert any(not USES_CUDA.search(code) for _, code in blocks), "no CPU example"
    assert any("nn.Linear" in code and "optim.SGD" in code for _, code in blocks), \
        "no training loop with tensorplay.nn and tensorplay.optim"


def test_getting_started_cpu_examples_run():
    """The CPU blocks run in order, each seeing what the ones before it defined."""
    globs: dict = {}
    for line, code in page_blocks(GETTING_STARTED):
        if not USES_CUDA.search(code):
            globs = run(code, f"{GETTING_STARTED.name}:{line}", line, globs)


@pytest.mark.gpu
def test_getting_started_cuda_examples_run():
    globs: dict = {}
    for line, code in page_blocks(GETTING_STARTED):
        globs = run(code, f"{GETTING_STARTED.name}:{line}", line, globs)
