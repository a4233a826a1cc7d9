"""The log examples run as a user would run them: a listener at WARN started first,
then the writer; the listener prints exactly the WARN-and-above lines."""

import pytest
from helpers.procs import example_running, run_example

pytestmark = pytest.mark.slow


def test_listener_prints_warn_and_above_from_the_writer():
    with example_running("log_listen.py", "--count", "4", topic="demo/node") as (listen, env):
        assert listen.stdout.readline().startswith("listening to 'demo/node' at warn")
        w = run_example(env, "log_write.py")
        assert w.returncode == 0, w.stderr
        out, _ = listen.communicate(timeout=60)
        lines = [line.split(" ", 2)[2] for line in out.splitlines()[0:]]
        assert lines == ["WARN battery at 20%", "ERR  arm joint 3 did not answer", "CRIT emergency stop",
                         "WARN [demo.planner] path passes near an obstacle"]
        assert listen.returncode == 0
