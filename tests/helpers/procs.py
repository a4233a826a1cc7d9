"""Fixtures and helpers shared by the protocol tests (rpc, prpc, log, cfg, deadman,
discovery): a shared-memory root of the test's own, forked children killed at teardown,
and a hard time bound on every test (SIGALRM fails a test that would hang).

Import with ``from _proto_common import *`` so pytest sees the fixtures.
"""

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from a0py.proto import topic as tp

__all__ = ["CTX", "EXAMPLES", "JOIN_S", "MSG_S", "REPO", "bounded", "child_env", "example_env",
           "join_ok", "recv", "root", "run_python", "spawn", "wait_until"]

CTX = mp.get_context("fork")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples")
JOIN_S = 20.0
MSG_S = 10.0
TEST_LIMIT_S = 90


class TestTookTooLong(Exception):
    pass


@pytest.fixture(autouse=True)
def bounded():
    """Fails the test (instead of hanging the suite) past TEST_LIMIT_S seconds."""

    def expired(signum, frame):
        raise TestTookTooLong(f"test still running after {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def root(monkeypatch):
    """A shared-memory root of this test's own (children inherit it); every topic in it
    removed afterwards."""
    prefix = f"a0pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("A0PY_ROOT", f"shm:{prefix}")
    monkeypatch.setenv("A0PY_ARENA_SIZE", "256k")
    monkeypatch.delenv("A0PY_TOPIC_SIZES", raising=False)
    yield prefix
    for name in tp.list_topics(f"shm:{prefix}"):
        tp.unlink_topic(tp.Topic(name, root=f"shm:{prefix}"))
    tp.close_arenas()


@pytest.fixture
def spawn():
    """Starts forked children; any still alive at teardown is SIGKILLed."""
    started = []

    def start(target, *args):
        p = CTX.Process(target=target, args=args, daemon=True)
        p.start()
        started.append(p)
        return p

    yield start
    for p in started:
        if p.is_alive():
            os.kill(p.pid, signal.SIGKILL)
        p.join(JOIN_S)


def recv(conn, timeout=MSG_S):
    if not conn.poll(timeout):
        pytest.fail(f"no message from the child within {timeout} s")
    return conn.recv()


def join_ok(p):
    p.join(JOIN_S)
    assert not p.is_alive() and p.exitcode == 0, f"child exit code {p.exitcode}"


def wait_until(pred, what, timeout=MSG_S):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.002)


def child_env(**extra):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(extra)
    return env


def run_python(code, timeout=60, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(**env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def example_env():
    """(root, env) for running an example program in a root of its own."""
    root = f"shm:a0pyt-ex-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return root, child_env(A0PY_ROOT=root, A0PY_ARENA_SIZE="64k")
