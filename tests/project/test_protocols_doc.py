"""Every Python snippet in docs/protocols.md runs as a program, in a root of its own,
and prints what the page says it prints."""

import os
import re
import subprocess
import sys

import pytest
from helpers.procs import REPO, example_env

from a0py.proto import topic as tp

pytestmark = pytest.mark.slow


@pytest.fixture
def time_limit_s():
    """Each snippet test is bounded (tests/conftest.py's ``bounded``)."""
    return 90

DOC = os.path.join(REPO, "docs", "protocols.md")


def snippets():
    with open(DOC, encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_the_page_has_a_snippet_per_protocol():
    text = "\n".join(snippets())
    for name in ("RpcServer", "PrpcServer", "Logger", "LogHandler", "Cfg(", "Deadman(", "Discovery("):
        assert name in text, name


# What each snippet (found by a name it uses) prints, and what it must not.
EXPECTED = {
    "RpcServer": (["b'hello, world'", "b'hello, future'"], []),
    "PrpcServer": (["b'25%'\nb'50%'\nb'75%'\nb'done'"], []),
    "LogListener": (["ERR  arm joint 3 did not answer", "WARN [planner] path near an obstacle"],
                    ["not shown"]),
    "a0py.Cfg(": (["{'motor': {'max_speed': 2.5}}", "Motor(max_speed=2.5, enabled=True)",
                   "now {'motor': {'max_speed': 2.5, 'enabled': False}}"], ["'name'"]),
    "a0py.Deadman(": (["DeadmanState(is_taken=True, is_mine=True"], []),
    "a0py.Discovery(": (["'demo/camera/left'"], []),
}


@pytest.mark.parametrize("name", list(EXPECTED))
def test_snippet_runs_and_prints_what_the_page_says(name):
    [code] = [c for c in snippets() if name in c and (name != "RpcServer" or "PrpcServer" not in c)]
    root, env = example_env()
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        present, absent = EXPECTED[name]
        for text in present:
            assert text in r.stdout, (text, r.stdout)
        for text in absent:
            assert text not in r.stdout, (text, r.stdout)
    finally:
        for topic in tp.list_topics(root):
            tp.unlink_topic(tp.Topic(topic, root=root))


def test_every_snippet_is_checked():
    assert len(snippets()) == len(EXPECTED)
