"""Running the installed ``a0py`` script as a user does: commands run to
completion in subprocesses (bounded), commands and Python programs in the
background (killed at the latest when their ``with`` block ends), and the
check that a command failed cleanly. Children import this checkout's a0py.

The shared-memory root of each test and the time bound are fixtures
(``root``, ``bounded``: tests/conftest.py; the CLI layer's settings:
tests/cli/conftest.py)."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from helpers.procs import REPO

SCRIPT = Path(sys.executable).parent / "a0py"
RUN_S = 60          # one command run to completion
GUARD_S = 120       # a background process is killed after this long


def _env():
    # The checkout under test first on the children's path: the ``a0py`` script
    # then runs this tree's code, not whatever a0py the environment has installed.
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env



def on_terminal(*args):
    """Run the ``a0py`` script to completion with its standard output on a
    pseudo-terminal (as a user at a shell sees it); what it wrote there, as
    text. Fails the test if it exits non-zero (with its stderr)."""
    import pty

    controller, terminal = pty.openpty()
    with subprocess.Popen([str(SCRIPT), *args], stdout=terminal, stderr=subprocess.PIPE) as proc:
        os.close(terminal)
        output = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            output += chunk
        assert proc.wait(timeout=RUN_S) == 0, proc.stderr.read()
    os.close(controller)
    return output.decode()

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
        self._guard = threading.Timer(GUARD_S, self.proc.kill)
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

