"""The page's files over HTTP, as `a0py view` serves them to a browser: the
page, its stylesheet, and its ES modules, served as they are; the packet
codec's numbers come from the server, none from the page's own source.

The page at work, in a real browser, is in test_view_browser.py."""

import os
import re
import urllib.error
import urllib.request

import pytest
from helpers.view import ViewProcess

from a0py._core import PACKET_LAYOUT
from a0py.view._server import STATIC_DIR

MSG_S = 10.0


@pytest.fixture
def view(root):
    with ViewProcess() as v:
        yield v


def test_get_root_returns_the_page_and_its_files(view):
    v = view
    with urllib.request.urlopen(v.url, timeout=MSG_S) as r:
        body = r.read().decode()
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/html")
        assert "default-src 'self'" in r.headers["Content-Security-Policy"]
    assert "<title>a0py view</title>" in body and '<script type="module" src="view.js">' in body
    with urllib.request.urlopen(v.url + "view.css", timeout=MSG_S) as r:
        assert "text/css" in r.headers["Content-Type"] and len(r.read()) > 1000
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(v.url + "etc/passwd", timeout=MSG_S)
    assert e.value.code == 404


def test_every_module_the_page_imports_is_served_as_javascript(view):
    """The page is ES modules served as they are: each one view.js imports,
    and each one they import, is served with a JavaScript type (browsers refuse
    a module of another type), and every module of the package is reached."""
    v = view
    served, todo = {}, ["view.js"]
    while todo:
        name = todo.pop()
        if name in served:
            continue
        with urllib.request.urlopen(v.url + name, timeout=MSG_S) as r:
            assert r.headers["Content-Type"] == "text/javascript; charset=utf-8", name
            served[name] = r.read().decode()
        todo += re.findall(r'\bfrom "\./([\w-]+\.js)"', served[name])
    assert set(served) == {n for n in os.listdir(STATIC_DIR) if n.endswith(".js")}
    assert all(len(src.splitlines()) <= 800 for src in served.values())


def _code(js):
    """JavaScript source without its comments and string literals."""
    js = re.sub(r'"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`', '""', js)
    return re.sub(r"//[^\n]*", "", js)


def test_the_page_takes_every_number_of_the_packet_layout_from_the_server():
    """packet.js decodes packets with the layout the server sends (its only
    number is 0); no module holds the packet's magic."""
    with open(os.path.join(STATIC_DIR, "packet.js")) as f:
        code = _code(f.read())
    assert set(re.findall(r"\b\d+(?:\.\d+)?\b", code)) == {"0"}
    magic = PACKET_LAYOUT["magic"]
    for name in os.listdir(STATIC_DIR):
        if name.endswith(".js"):
            with open(os.path.join(STATIC_DIR, name)) as f:
                src = f.read().lower()
            assert str(magic) not in src and f"{magic:x}" not in src, name
