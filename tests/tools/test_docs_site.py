"""The docs site (docs/build.py): it builds with warnings as errors, a broken cross-reference
fails the build, and headless Chromium renders a module page, an API page and a search, served
under /docs/ as the site is published, with links that resolve. Screenshots land in
build/docs/screenshots. Skipped, with the reason, without the docs extra or without Chromium."""
import functools
import html.parser
import http.server
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
    """Serves the html folder under /docs/, where the site is published; other paths are 404."""

    def translate_path(self, path: str) -> str:
        route = urllib.parse.urlsplit(path).path
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
    page = Links(browser(API_PAGE, "api-page"))
    assert page.h1.strip().rstrip("#") == "tensorplay.cuda.graphs.CUDAGraph"
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
