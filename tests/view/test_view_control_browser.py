"""The page drives a0py, in headless Chromium (see test_view_browser.py): the
publish box, the parameters panel, the service call panel and the graph,
each checked with a0py's own commands (`a0py echo`, `a0py cfg`) or processes;
and the page saying what is not allowed, and why, without the flags.

The parameters panel and the graph are the screenshots of docs/view.md:
written there when ``A0PY_UPDATE_SCREENSHOT=1``, else into the test's
temporary folder."""

import contextlib
import json
import os
import subprocess
import sys
import time

from helpers.cli import SCRIPT, _env
from helpers.procs import REPO
from helpers.view import RpcServerProcess, ViewProcess

import a0py

DOCS = os.path.join(REPO, "docs")
PYTHON = os.path.basename(sys.executable)
WAIT_MS = 15_000


TALKER = """
import sys, time
import a0py
pub = a0py.Publisher("robot/odom")
print("ok", flush=True)
k = 0
while True:
    pub.pub_json({"k": k})
    k += 1
    time.sleep(0.05)
"""
LISTENER = """
import sys
import a0py
sub = a0py.SubscriberSync("robot/odom")
print("ok", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def _script(path):
    """``python PATH`` (named so in the graph), started, then killed."""
    proc = subprocess.Popen([sys.executable, path.name], cwd=path.parent, env=_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ok"
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def _shot(tmp_path, name):
    return os.path.join(DOCS, name) if os.environ.get("A0PY_UPDATE_SCREENSHOT") == "1" else str(tmp_path / name)


def _a0py(*args):
    return subprocess.run([str(SCRIPT), *args], env=_env(), capture_output=True, text=True, timeout=60)


def test_the_page_publishes_sets_calls_and_draws_the_graph(root, page, tmp_path):
    a0py.Cfg("robot").write({"speed": 1.5, "mode": "auto", "pid": {"kp": 0.5, "ki": 0.1}, "gains": [1.0, 2.0]})
    with RpcServerProcess("robot/add"), \
            ViewProcess("--allow-publish", "cmd/*", "--allow-set", "robot", "--allow-call", "robot/*") as view:
        # from the oldest packet: the topic is made by the page's advertise, just before its message
        echo = subprocess.Popen([str(SCRIPT), "echo", "cmd/vel", "--init", "oldest", "-n", "1", "--timeout", "60"],
                                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            page.goto(view.url)
            page.locator('#conn[data-state="connected"]').wait_for(timeout=WAIT_MS)
            # publish a JSON message: `a0py echo` prints it
            page.click('#tabs button[data-tab="publish"]')
            page.fill("#pub-topic", "cmd/vel")
            page.fill("#pub-json", '{"v": 1.5, "w": -0.25}')
            page.locator("#pub-send:not([disabled])").wait_for(timeout=WAIT_MS)
            page.click("#pub-send")
            out, err = echo.communicate(timeout=60)
        finally:
            if echo.poll() is None:
                echo.kill()
        assert json.loads(out.strip()) == {"v": 1.5, "w": -0.25}, err
        # edit a configuration value: `a0py cfg` sees it
        page.click('#tabs button[data-tab="params"]')
        box = page.locator('#params tr[data-param="robot.speed"] input.value')
        box.wait_for(timeout=WAIT_MS)
        assert box.input_value() == "1.5"
        box.fill("2.5")
        box.press("Enter")
        deadline = time.monotonic() + 30
        while json.loads(_a0py("cfg", "robot", "get", "/speed").stdout) != 2.5:
            assert time.monotonic() < deadline, "the configuration never changed"
            time.sleep(0.1)
        page.locator('#params tr[data-param="robot.pid.kp"]').wait_for(timeout=WAIT_MS)
        page.wait_for_function("() => document.querySelector('#params tr[data-param=\"robot.speed\"] input.value')"
                               ".value === '2.5'", timeout=WAIT_MS)
        shot = _shot(tmp_path, "view-parameters.png")
        page.locator("#right").screenshot(path=shot)
        assert os.path.getsize(shot) > 5_000
        # call an RPC: its reply
        page.click('#tabs button[data-tab="services"]')
        page.locator('#svc-select option:has-text("robot/add")').wait_for(state="attached", timeout=WAIT_MS)
        assert json.loads(page.locator("#svc-request").input_value()) == {"a": 0, "b": 0}  # from its schema
        page.fill("#svc-request", '{"a": 2, "b": 40}')
        page.click("#svc-call")
        page.locator('#svc-result[data-state="ok"]').wait_for(timeout=WAIT_MS)
        assert json.loads(page.locator("#svc-result").inner_text().split("\n", 1)[1]) == {"sum": 42}
        # the graph gains a node when a publisher process starts, and loses it when it ends
        page.click('#tabs button[data-tab="graph"]')
        page.locator('#graph g.service[data-service="robot/add"]').wait_for(timeout=WAIT_MS)
        talker, listener = tmp_path / "talker.py", tmp_path / "listener.py"
        talker.write_text(TALKER)
        listener.write_text(LISTENER)
        with _script(talker) as pub:
            node = page.locator(f'#graph g.process[data-process="{PYTHON} talker.py [{pub.pid}]"]')
            node.wait_for(timeout=WAIT_MS)
            page.locator('#graph g.topic[data-topic="robot/odom"]').wait_for(timeout=WAIT_MS)
            with _script(listener) as sub:  # a subscriber too, for the picture
                page.locator(f'#graph g.process[data-process="{PYTHON} listener.py [{sub.pid}]"]').wait_for(
                    timeout=WAIT_MS)
                shot = _shot(tmp_path, "view-graph.png")
                page.locator("#right").screenshot(path=shot)
                assert os.path.getsize(shot) > 5_000
        node.wait_for(state="detached", timeout=WAIT_MS)
        page.goto("about:blank")  # before the view stops: the page would try to reconnect


def test_without_the_flags_the_page_says_what_is_not_allowed_and_why(root, page):
    a0py.Cfg("robot").write({"speed": 1.5})
    with RpcServerProcess("robot/echo"), ViewProcess() as view:
        page.goto(view.url)
        page.locator('#conn[data-state="connected"]').wait_for(timeout=WAIT_MS)
        page.click('#tabs button[data-tab="publish"]')
        page.fill("#pub-topic", "cmd/vel")
        page.wait_for_function("() => document.getElementById('pub-why').textContent.includes('--allow-publish')",
                               timeout=WAIT_MS)
        assert page.locator("#pub-send").is_disabled()
        assert "off" in page.locator("#pub-why").inner_text()
        page.click('#tabs button[data-tab="params"]')
        box = page.locator('#params tr[data-param="robot.speed"] input.value')
        box.wait_for(timeout=WAIT_MS)
        assert box.is_disabled() and "--allow-set" in box.get_attribute("title")
        assert "--allow-set" in page.locator('#params tr[data-cfg="robot"]').inner_text()
        page.click('#tabs button[data-tab="services"]')
        page.locator('#svc-select option:has-text("robot/echo")').wait_for(state="attached", timeout=WAIT_MS)
        page.wait_for_function("() => document.getElementById('svc-why').textContent.includes('--allow-call')",
                               timeout=WAIT_MS)
        assert page.locator("#svc-call").is_disabled()
        page.goto("about:blank")
    assert a0py.Cfg("robot").read().json() == {"speed": 1.5}
