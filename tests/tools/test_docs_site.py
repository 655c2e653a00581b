"""The docs site (docs/build.py): it builds with warnings as errors, a broken cross-reference
fails the build, and headless Chromium renders a module page, an API page and a search, served
under /docs/ as the site is published, with links that resolve; pages fit at 1400 and 420 px
(docs_layout_probe.html measures them), CUDAGraph's page has its grouped member summary, API
pages show their examples and source links, a re-export's page points to its home, and search
lists each member once. Screenshots land in build/docs/screenshots. Skipped, with the reason,
without the docs extra or without Chromium."""
import functools
import html
import html.parser
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from codegen.model import load_api

for _module in ("sphinx", "myst_parser", "pydata_sphinx_theme"):
    pytest.importorskip(_module, reason="the docs extra is not installed: pip install '.[docs]'")

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "docs"
MODULE_PAGE = "api/tensorplay.cuda.graphs.html"
API_PAGE = "generated/tensorplay.cuda.graphs.CUDAGraph.html"
PROBE = Path(__file__).resolve().parent / "docs_layout_probe.html"
# Pages whose titles, tables and links are the widest: long qualified names, the member
# summary, the performance tables.
LAYOUT_PAGES = (API_PAGE, "generated/tensorplay.accelerator.current_device_index.html",
                "generated/tensorplay.cuda.graphs.make_graphed_callables.html", MODULE_PAGE,
                "performance.html", "getting-started.html")
WIDTHS = (1400, 420)
# CUDAGraph's members as its page groups them (api.yaml, GraphBase's groups).
CUDAGRAPH_GROUPS = ["Constructor", "Capture", "Replay", "Sleep", "Conditional nodes",
                    "Update and rebinding", "Debugging", "Handles"]
EXAMPLE_PAGES = ("tensorplay.zeros", "tensorplay.Tensor", "tensorplay.autograd.grad",
                 "tensorplay.nn.Linear", "tensorplay.optim.SGD", "tensorplay.cuda.graphs.CUDAGraph",
                 "tensorplay.cuda.graphs.graph", "tensorplay.accelerator.memory.memory_stats")


@pytest.fixture(scope="module")
def site():
    """The built site's html folder: built once, by the documented command."""
    run = subprocess.run([sys.executable, "docs/build.py", "--out", str(BUILD)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    # The folder is the build's: its marker lets later builds replace src/, html/, doctrees/.
    assert (BUILD / ".docs-build").is_file()
    return BUILD / "html"


def test_every_module_function_and_class_has_its_page(site):
    api = load_api(ROOT / "api.yaml", ROOT / "runtime")
    for module in api.modules:
        assert (site / "api" / f"{module.name}.html").is_file()
        names = [f.name for f in module.functions] + [c.name for c in module.classes]
        for name in names + [r.name for r in module.reexports]:
            # The URL the spec's "Full reference" links expect.
            assert (site / "generated" / f"{module.name}.{name}.html").is_file(), name
    for page in ("index", "getting-started", "design", "performance", "search", "api/types"):
        assert (site / f"{page}.html").is_file(), page


def test_a_broken_cross_reference_fails_the_build(site, tmp_path):
    source = tmp_path / "src"
    shutil.copytree(BUILD / "src", source)
    with open(source / "getting-started.md", "a", encoding="utf-8") as page:
        page.write("\nSee {py:func}`tensorplay.cuda.graphs.no_such_function`.\n")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html",
                          str(source), str(tmp_path / "html")],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode != 0
    assert "tensorplay.cuda.graphs.no_such_function" in run.stderr


# -- in a browser ------------------------------------------------------------------------------


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the html folder under /docs/, where the site is published, and the layout probe
    at /probe.html; other paths are 404."""

    def translate_path(self, path: str) -> str:
        route = urllib.parse.urlsplit(path).path
        if route == "/probe.html":
            return str(PROBE)
        if not route.startswith("/docs/"):
            return str(Path(self.directory) / "no such page")
        return super().translate_path(route.removeprefix("/docs"))

    def log_message(self, format, *args):  # keep pytest's output to the failures
        pass


@pytest.fixture(scope="module")
def server(site):
    """The site's base URL, http://127.0.0.1:PORT/docs/."""
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(SiteHandler, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/docs/"
    httpd.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    """browser(path, name) loads a page of the site in headless Chromium, saves its screenshot
    as build/docs/screenshots/<name>.png and returns the page's DOM after its scripts ran."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("no chromium binary on PATH: .ci/run installs Debian's chromium package "
                    "where apt-get can, and this machine has none")
    profile = tmp_path_factory.mktemp("chromium-profile")
    shots = BUILD / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)

    def load(path: str, name: str) -> str:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        # --virtual-time-budget: let the page's scripts (the search) finish first.
        command = [binary, "--headless", "--no-sandbox", "--disable-gpu",
                   "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
                   "--virtual-time-budget=15000", "--window-size=1280,1000"]
        url = server + path
        shot = subprocess.run(command + [f"--screenshot={shots / (name + '.png')}", url],
                              capture_output=True, text=True, timeout=180)
        assert shot.returncode == 0, shot.stderr
        assert (shots / f"{name}.png").stat().st_size > 10_000, "a blank screenshot"
        dom = subprocess.run(command + ["--dump-dom", url], capture_output=True, text=True,
                             timeout=180)
        assert dom.returncode == 0, dom.stderr
        return dom.stdout

    def probe(path: str, width: int) -> list[str]:
        """What does not fit on a page at width px (docs_layout_probe.html loads it in a frame
        of that width: Chromium's windows are at least 500 px wide); saves a screenshot."""
        url = (server.removesuffix("docs/") + "probe.html?"
               + urllib.parse.urlencode({"page": path, "width": width}))
        name = f"{Path(path).stem}-{width}"
        command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
                   "--virtual-time-budget=15000", "--window-size=1400,1200"]
        shot = subprocess.run(command + [f"--screenshot={shots / (name + '.png')}", url],
                              capture_output=True, text=True, timeout=180)
        assert shot.returncode == 0, shot.stderr
        dom = subprocess.run(command + ["--dump-dom", url], capture_output=True, text=True,
                             timeout=180)
        assert dom.returncode == 0, dom.stderr
        found = re.search(r'<pre id="result">(.*?)</pre>', dom.stdout, re.S)
        assert found and found.group(1).startswith("{"), f"the probe did not finish on {path}"
        result = json.loads(html.unescape(found.group(1)))
        assert result["width"] == width
        return result["problems"]

    load.probe = probe
    return load


class Links(html.parser.HTMLParser):
    """The page's title, the ids of its elements and the targets of its links."""

    def __init__(self, dom: str):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.h1 = ""
        self._in_h1 = False
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        self._in_h1 = self._in_h1 or tag == "h1"

    def handle_endtag(self, tag):
        if tag == "h1":
            self._in_h1 = False

    def handle_data(self, data):
        if self._in_h1:
            self.h1 += data


def assert_links_resolve(page_url: str, links: Links) -> None:
    """Every link to a page of the site loads, and every #fragment names an element there."""
    checked: dict[str, Links] = {}
    for href in links.hrefs:
        url = urllib.parse.urljoin(page_url, href)
        if not url.startswith(page_url.split("/docs/")[0] + "/docs/"):
            continue  # a link off the site (there are none today)
        target, _, fragment = url.partition("#")
        target = target.split("?")[0]
        if target not in checked:
            try:
                with urllib.request.urlopen(target, timeout=30) as response:
                    checked[target] = Links(response.read().decode())
            except urllib.error.HTTPError as error:
                pytest.fail(f"{page_url} links {href}, which gives HTTP {error.code}")
        if fragment:
            assert urllib.parse.unquote(fragment) in checked[target].ids, \
                f"{page_url} links {href}, whose page has no #{fragment}"


def test_module_page_renders_and_links(browser, server):
    page = Links(browser(MODULE_PAGE, "module-page"))
    assert page.h1.strip().rstrip("#") == "tensorplay.cuda.graphs API"
    assert "../generated/tensorplay.cuda.graphs.CUDAGraph.html" in page.hrefs
    assert_links_resolve(server + MODULE_PAGE, page)


def test_api_page_renders_and_links(browser, server):
    dom = browser(API_PAGE, "api-page")
    page = Links(dom)
    assert page.h1.strip().rstrip("#") == "tensorplay.cuda.graphs.CUDAGraph"
    # The title may break after each dot (and underscore) of the name, not inside a word
    # (tensorplay.js).
    assert "tensorplay.<wbr>cuda.<wbr>graphs.<wbr>CUDAGraph" in dom
    assert {"tensorplay.cuda.graphs.CUDAGraph",
            "tensorplay.cuda.graphs.CUDAGraph.replay"} <= page.ids
    # Signatures link the classes they name: capture_begin's stream to the Stream page.
    assert any(h.startswith("tensorplay.cuda.Stream.html") for h in page.hrefs)
    assert_links_resolve(server + API_PAGE, page)


def test_search_for_replay_finds_and_links_the_api_pages(browser, server):
    page = Links(browser("search.html?q=replay", "search-replay"))
    found = {urllib.parse.urlsplit(h).path for h in page.hrefs if h.startswith("generated/")}
    assert "generated/tensorplay.cuda.graphs.CUDAGraph.html" in found, page.hrefs
    assert_links_resolve(server + "search.html", page)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", LAYOUT_PAGES)
def test_pages_fit_with_nothing_clipped(browser, path, width):
    """Titles wrap, wide tables scroll in their own box, the page's table of contents, the
    breadcrumbs and the previous/next links stay inside the window."""
    assert browser.probe(path, width) == []


class Text(html.parser.HTMLParser):
    """A page's h2 headings in order, its table rows (the text of each cell) and the text of
    its pycon example blocks."""

    def __init__(self, dom: str):
        super().__init__()
        self.h2: list[str] = []
        self.rows: list[list[str]] = []
        self.examples: list[str] = []
        self._h2 = self._cell = False
        self._pycon = 0  # the depth of divs inside an open pycon block
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if tag == "h2":
            self._h2 = True
            self.h2.append("")
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self._cell = True
            self.rows[-1].append("")
        elif tag == "div" and (self._pycon or "highlight-pycon" in classes):
            if not self._pycon:
                self.examples.append("")
            self._pycon += 1

    def handle_endtag(self, tag):
        if tag == "h2":
            self._h2 = False
        elif tag in ("td", "th"):
            self._cell = False
        elif tag == "div" and self._pycon:
            self._pycon -= 1

    def handle_data(self, data):
        if self._h2:
            self.h2[-1] += data
        if self._cell:
            self.rows[-1][-1] += data
        if self._pycon:
            self.examples[-1] += data


def test_cudagraph_page_summarises_its_members_by_group_then_lists_them_so(browser):
    dom = browser(API_PAGE, "cudagraph-members")
    page = Text(dom)
    rows = [[" ".join(cell.split()) for cell in row] for row in page.rows]
    titles = [row[0] for row in rows if len(row) == 2 and not row[1]]
    assert titles == CUDAGRAPH_GROUPS, rows
    first = {row[0]: row[1] for row in rows if len(row) == 2 and row[1]}
    # The constructor as users call it, then each member with its one-line description.
    assert first["CUDAGraph()"].startswith("A CUDA graph whose capture")
    assert first["capture_begin()"] == "Begin capture."
    assert first["replay()"].startswith("Run the graph")
    # The members follow, under the groups' titles, in the summary's order.
    headings = [" ".join(h.split()).rstrip("#").strip() for h in page.h2]
    assert headings[headings.index("Members") + 1:] == CUDAGRAPH_GROUPS[1:], headings
    order = [m.start() for m in (re.search(f'id="tensorplay.cuda.graphs.CUDAGraph.{name}"', dom)
                                 for name in ("capture_begin", "replay", "begin_capture_to_if_node",
                                              "recapture_begin", "debug_dump", "pool_id"))]
    assert order == sorted(order)


@pytest.mark.parametrize("name", EXAMPLE_PAGES)
def test_api_pages_show_an_example_and_link_their_sources(browser, server, name):
    path = f"generated/{name}.html"
    dom = browser(path, f"example-{name}")
    examples = Text(dom).examples
    assert examples and examples[0].lstrip().startswith(">>>"), f"no example on {path}"
    links = Links(dom)
    schema = [h for h in links.hrefs if h.startswith("../source/api.yaml.html#L")]
    runtime = [h for h in links.hrefs
               if re.match(r"\.\./source/(runtime|python)/.+\.html#L\d+$", h)]
    assert schema and runtime, f"{path} links no schema entry or runtime symbol"
    assert_links_resolve(server + path, links)


def test_a_reexported_class_page_points_to_the_page_of_its_members(browser, server):
    page = Links(browser("generated/tensorplay.cuda.CUDAGraph.html", "reexport-page"))
    assert "tensorplay.cuda.graphs.CUDAGraph.html" in page.hrefs
    # Its members are documented, and indexed, on the home page only.
    assert "tensorplay.cuda.CUDAGraph.replay" not in page.ids
    assert any(h.startswith("tensorplay.cuda.graphs.CUDAGraph.html#tensorplay.cuda.graphs."
                            "CUDAGraph.replay") for h in page.hrefs)
    assert_links_resolve(server + "generated/tensorplay.cuda.CUDAGraph.html", page)


# A member each graph class has (replay), and one both inherit from GraphBase and that four
# names reached before (two classes, each re-exported once).
@pytest.mark.parametrize("member", ["replay", "begin_capture_to_if_node"])
def test_search_lists_each_member_once(browser, member):
    page = Links(browser(f"search.html?q={member}", f"search-{member}-members"))
    members = [urllib.parse.unquote(h.partition("#")[2]) for h in page.hrefs
               if h.startswith("generated/")
               and re.search(rf"#tensorplay\.[\w.]+\.{member}$", h)]
    # One hit for each of the two graph classes' member, none for their re-exported names.
    assert sorted(members) == [f"tensorplay.accelerator.graphs.Graph.{member}",
                               f"tensorplay.cuda.graphs.CUDAGraph.{member}"], page.hrefs
