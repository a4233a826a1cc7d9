"""Settings of the view tests: ``root`` (tests/conftest.py) makes 4 MiB arenas;
``view(*args)`` starts an ``a0py view ARGS`` process in it (a
helpers.view.ViewProcess, closed after the test). The publisher processes
and the recordings are in helpers/view.py; ``browser`` and ``page`` are the
browser tests' headless Chromium (see test_view_browser.py)."""

import os
import shutil

import pytest
from helpers.procs import ended_after
from helpers.view import ViewProcess

CHROMIUM = os.environ.get("A0PY_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture
def arena_size():
    return "4M"


@pytest.fixture
def view(root):
    with ended_after(ViewProcess) as start:
        yield start


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (make test does), or set A0PY_CHROMIUM")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    p = browser.new_page(viewport={"width": 1280, "height": 820})
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield p
    p.close()
    assert not errors, f"the page reported errors: {errors}"
