"""The checkout's paths and helpers for tests with child processes: the fork
context, bounded receives and joins, waiting on a condition, and environments
that make children import this checkout's a0py, and the processes a fixture starts
for a test (``ended_after``)."""

import contextlib
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

CTX = mp.get_context("fork")
REPO = str(Path(__file__).resolve().parents[2])  # the checkout under test
EXAMPLES = os.path.join(REPO, "examples")
JOIN_S = 60.0   # a child's exit
MSG_S = 10.0    # one message from a child
WAIT_S = 30.0   # a condition polled by wait_until


def recv(conn, timeout=MSG_S):
    """The next object on ``conn``; fails the test if none comes in ``timeout`` s."""
    if not conn.poll(timeout):
        pytest.fail(f"no message from the child within {timeout} s")
    return conn.recv()


def join_ok(p, timeout=JOIN_S):
    """Joins ``p`` (bounded) and checks that it exited with status 0."""
    p.join(timeout)
    assert not p.is_alive(), f"child {p.pid} still running after {timeout} s"
    assert p.exitcode == 0, f"child {p.pid} exited with {p.exitcode}"


def wait_until(pred, what="condition", timeout=WAIT_S, every=0.002, state=None):
    """Polls ``pred()`` every ``every`` s until it returns something true, and returns
    that. After ``timeout`` s fails the test naming ``what`` and, if given,
    ``state()``: what was seen last (a count, a status), to say how far it got.

    A poll that acts as well as looks (publish a probe, then look for it) puts the
    action in ``pred`` and spaces its polls with ``every``."""
    deadline = time.monotonic() + timeout
    while not (got := pred()):
        if time.monotonic() > deadline:
            seen = "" if state is None else f"; last seen: {state()!r}"
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(every)
    return got


def _close(thing):
    thing.close()


@contextlib.contextmanager
def ended_after(make, end=_close):
    """Yields ``start(*args, **kwargs)``: it calls ``make`` with them and returns what
    that made; when the block ends, each made is given to ``end`` (by default closed),
    in the order made. The body of a fixture that starts processes for its test."""
    made = []

    def start(*args, **kwargs):
        thing = make(*args, **kwargs)
        made.append(thing)
        return thing

    try:
        yield start
    finally:
        for thing in made:
            end(thing)


def maps(pid, topic, protocol="pubsub"):
    """Whether process `pid` has the `protocol` arena of `topic` (an a0py Topic) mapped:
    for a recorder or a reader in another process, the sign that it has opened it."""
    where = topic.location(protocol)
    path = "/dev/shm" + where if topic.root.kind == "shm" else where
    try:
        with open(f"/proc/{pid}/maps") as f:
            return any(line.rstrip("\n").endswith(" " + path) for line in f)
    except FileNotFoundError:  # the process is gone
        return False


def asleep_in_futex(pid):
    """Whether the main thread of process `pid` sleeps in the kernel on a futex: for a
    single-threaded child blocked in an a0py wait (a lock, a notify word), the sign
    that it is in there rather than on its way. Where the kernel does not say where a
    thread sleeps (wchan "0"), the sleeping state has to do."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):  # the process is gone
        return False
    return state == "S" if wchan in ("", "0") else "futex" in wchan


def child_env(**extra):
    """This process's environment with the checkout first on PYTHONPATH, plus ``extra``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    env.update(extra)
    return env


def run_python(code, timeout=60, **env):
    """Python ``code`` (dedented) run to completion in a fresh interpreter."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(**env),
                          capture_output=True, text=True, timeout=timeout, check=False)


def example_env():
    """(root, env) for running an example program in a root of its own."""
    root = f"shm:a0pyt-ex-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return root, child_env(A0PY_ROOT=root, A0PY_ARENA_SIZE="64k")


@contextlib.contextmanager
def example_running(script, *args, topic, **popen):
    """Starts ``examples/<script> args`` in a root of its own (:func:`example_env`),
    its stdout piped as text (``popen``: more of Popen's arguments), and yields
    (process, env). At the end it is killed if still running, and ``topic`` is
    removed from the root."""
    from a0py.proto.topic import Topic, unlink_topic

    root, env = example_env()
    proc = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, script), *args], env=env,
                            stdout=subprocess.PIPE, text=True, **popen)
    try:
        yield proc, env
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        unlink_topic(Topic(topic, root=root))


def run_example(env, script, *args):
    """``examples/<script> args`` run to its end (60 s at most) in ``env``; its output as text."""
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args], env=env,
                          capture_output=True, text=True, timeout=60)
