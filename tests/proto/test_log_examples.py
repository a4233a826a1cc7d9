"""The log examples run as a user would run them: a listener at WARN started first,
then the writer; the listener prints exactly the WARN-and-above lines."""

import os
import subprocess
import sys

import pytest
from helpers.procs import EXAMPLES, example_env

from a0py.proto import topic as tp

pytestmark = pytest.mark.slow


def test_listener_prints_warn_and_above_from_the_writer():
    root, env = example_env()
    listen = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "log_listen.py"), "--count", "4"],
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert listen.stdout.readline().startswith("listening to 'demo/node' at warn")
        w = subprocess.run([sys.executable, os.path.join(EXAMPLES, "log_write.py")],
                           env=env, capture_output=True, text=True, timeout=60)
        assert w.returncode == 0, w.stderr
        out, _ = listen.communicate(timeout=60)
        lines = [line.split(" ", 2)[2] for line in out.splitlines()[0:]]
        assert lines == ["WARN battery at 20%", "ERR  arm joint 3 did not answer", "CRIT emergency stop",
                         "WARN [demo.planner] path passes near an obstacle"]
        assert listen.returncode == 0
    finally:
        if listen.poll() is None:
            listen.kill()
            listen.wait()
        tp.unlink_topic(tp.Topic("demo/node", root=root))
