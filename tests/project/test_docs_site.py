"""The documentation site (mkdocs.yml, `make docs`): it builds in strict mode,
so a broken link or anchor, a page left out of the nav or a public name
without a docstring fails here; every public name of the documented packages
has a page; and its search works with no network (a browser that may reach
nothing but the loopback server of the site)."""

import functools
import http.server
import importlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers.procs import REPO

pytestmark = pytest.mark.slow

BUILD_S = 600
CHROMIUM = os.environ.get("A0PY_CHROMIUM", "/usr/bin/chromium")
sys.path.insert(0, os.path.join(REPO, "docsite"))
import hooks  # noqa: E402  (the site's hooks: the package list and the docstring rule)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=BUILD_S, env=env)
    assert done.returncode == 0, "mkdocs build --strict failed:\n" + done.stderr[-5000:]
    return out


def test_every_public_name_has_a_docstring_of_its_own():
    assert hooks.undocumented() == []


def test_every_public_name_of_the_documented_packages_has_a_page(site):
    for package in hooks.PACKAGES:
        names = importlib.import_module(package).__all__
        folder = site / "api" / package.replace(".", "/")
        pages = {p.name.lower() for p in folder.glob("*.html")}
        for name in names:
            assert f"{name.lower()}.html" in pages or any(
                p.startswith(f"{name.lower()}-") for p in pages), f"{package}.{name}"
    publisher = (site / "api" / "a0py" / "Publisher.html").read_text()
    assert "def pub" in publisher or "pub(" in publisher  # its methods, from the docstrings
    arena = (site / "api" / "a0py" / "Arena.html").read_text()
    assert "shm" in arena  # a compiled class, from the binding's .pyi stub


def test_the_home_page_is_the_readme_and_repository_links_resolve_on_the_site(site):
    home = (site / "index.html").read_text()
    assert "Shared-memory IPC for Python on Linux" in home
    assert 'href="quickstart.html"' in home  # docs/quickstart.md, as the site names it
    for linked in (site / "_repo").rglob("*"):
        assert linked.stat().st_size > 0


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def served(site):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_search_finds_a_public_name_with_no_network(served):
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (make test does)")
    outside = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            page = browser.new_page()

            def only_loopback(route):
                if route.request.url.startswith(served):
                    route.continue_()
                else:
                    outside.append(route.request.url)
                    route.abort()

            page.route("**/*", only_loopback)
            page.goto(f"{served}/index.html")
            page.fill("input.md-search__input", "SubscriberSync")
            hit = page.locator('.md-search-result a[href*="api/a0py/SubscriberSync.html"]').first
            hit.wait_for(timeout=30_000)  # the search index, searched in the page, offline
            assert "SubscriberSync" in hit.inner_text()
        finally:
            browser.close()
    assert outside == [], f"the site asked the network for {outside}"
