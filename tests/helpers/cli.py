"""Helpers shared by the tests of the topic command groups (test_cli_topics,
test_cli_rpc, test_cli_cfg, test_cli_log): each test gets a shared-memory
root of its own (``A0PY_ROOT`` for the commands it runs, removed after),
commands run as the installed ``a0py`` script in subprocesses, and a hard
time bound on every test.

Import with ``from _cli_common import *`` so pytest sees the fixtures.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from a0py.proto import topic as tp

__all__ = ["SCRIPT", "Running", "a0", "assert_fails_cleanly", "bounded", "python", "root",
           "wait_until"]

SCRIPT = Path(sys.executable).parent / "a0py"
RUN_S = 60        # one command run to completion
TEST_LIMIT_S = 120


class TestTookTooLong(Exception):
    pass


@pytest.fixture(autouse=True)
def bounded():
    """Fails the test (instead of hanging the suite) past TEST_LIMIT_S seconds."""

    def expired(signum, frame):
        raise TestTookTooLong(f"test still running after {TEST_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TEST_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def root(monkeypatch):
    """A shared-memory root of the test's own (``shm:PREFIX``), in this
    process's and its children's A0PY_ROOT; its topics removed afterwards."""
    spec = f"shm:a0py-clit-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("A0PY_ROOT", spec)
    yield spec
    tp.close_arenas()
    for name in tp.list_topics(spec):
        tp.unlink_topic(tp.Topic(name, root=spec))


# The checkout under test, first on the children's path: the ``a0py`` script
# then runs this tree's code, not whatever a0py the environment has installed.
REPO = str(Path(__file__).resolve().parent.parent)


def _env():
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def a0(*args, input=None, timeout=RUN_S):
    """Run the ``a0py`` script to completion (bounded); the result has text
    ``out`` and ``err``."""
    if not SCRIPT.exists():
        pytest.fail(f"console script {SCRIPT} is not installed: install a0py (`make test` does)")
    done = subprocess.run([str(SCRIPT), *args], input=input, capture_output=True, timeout=timeout,
                          env=_env())
    done.out = done.stdout.decode(errors="backslashreplace")
    done.err = done.stderr.decode()
    return done


def assert_fails_cleanly(result, status, *needles):
    """Exit ``status``, nothing on stdout, no traceback, and a message on
    stderr that contains each of ``needles``."""
    assert result.returncode == status, (result.returncode, result.out, result.err)
    assert result.out == ""
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, (needle, result.err)


class Running:
    """A process started in the background (an ``a0py`` command, or Python
    code), killed at the latest when the ``with`` block ends; a guard timer
    kills it if a read from it would block past the test's bound."""

    def __init__(self, argv):
        # stdin a pipe of its own, open until the end: a process may wait on it
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=_env())
        self._guard = threading.Timer(TEST_LIMIT_S, self.proc.kill)
        self._guard.start()
        self._err = b""

    @classmethod
    def a0py(cls, *args, **kwargs):
        return cls([str(SCRIPT), *args], **kwargs)

    def readline(self):
        return self.proc.stdout.readline().decode()

    def lines(self, n):
        return [self.readline() for _ in range(n)]

    def stderr_line(self):
        line = self.proc.stderr.readline()
        self._err += line
        return line.decode()

    def wait(self, timeout=RUN_S):
        """Exit status, after the process ends on its own (bounded)."""
        return self.proc.wait(timeout=timeout)

    def finish(self, timeout=RUN_S):
        """(status, rest of stdout, all of stderr) once it ends on its own."""
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.decode(), (self._err + err).decode()

    def interrupt(self, timeout=RUN_S):
        """Ctrl-C, then (status, rest of stdout, all of stderr)."""
        self.proc.send_signal(signal.SIGINT)
        return self.finish(timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._guard.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr, self.proc.stdin):
            if stream is not None:
                stream.close()
        return False


def python(code, *args):
    """Python ``code`` (dedented) running in another process, as a
    :class:`Running`; ``args`` are its sys.argv[1:]."""
    return Running([sys.executable, "-c", textwrap.dedent(code), *args])


def wait_until(predicate, timeout=30.0, what="condition"):
    """Poll ``predicate`` until true (bounded; fails the test with ``what``)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
