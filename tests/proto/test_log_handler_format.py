"""Logs read as a user reads them: ``LogHandler`` set up through
``logging.basicConfig(handlers=[...])`` sends the message, not basicConfig's
``LEVEL:name:message`` (which ``a0py log`` printed after its own level and
name: ``WARN [planner] WARNING:planner:replanning 1``); and
``examples/log_listen.py --count N`` prints N messages, not N + 1."""

import logging
import os
import subprocess
import sys

import pytest
from helpers.cli import a0, python
from helpers.procs import REPO

import a0py


def test_log_handler_through_basic_config_prints_the_message_once(root):
    with python("""
        import logging, a0py
        logging.basicConfig(handlers=[a0py.LogHandler("robot")], level=logging.INFO)
        logging.getLogger("planner").warning("replanning %d", 1)
        try:
            1 / 0
        except ZeroDivisionError:
            logging.getLogger("planner").exception("gave up")
    """) as program:
        status, _, err = program.finish()
        assert status == 0, err
    result = a0("log", "robot", "--init", "oldest", "-n", "2")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].endswith(" WARN [planner] replanning 1"), lines
    assert lines[1].endswith(" ERR  [planner] gave up"), lines
    assert lines[2] == "Traceback (most recent call last):" and lines[-1] == "ZeroDivisionError: division by zero"
    assert "WARNING:planner" not in result.out and "ERROR:planner" not in result.out


def test_log_handler_keeps_a_formatter_set_on_it(root):
    handler = a0py.LogHandler("robot")
    handler.setFormatter(logging.Formatter("<%(message)s>"))
    logger = logging.getLogger("test_log_handler_format.own")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        logger.error("custom")
    finally:
        logger.removeHandler(handler)
        handler.close()
    result = a0("log", "robot", "--init", "oldest", "-n", "1")
    assert result.out.rstrip("\n").endswith(" ERR  [test_log_handler_format.own] <custom>"), result.out


def test_log_listen_example_count_prints_exactly_that_many(root):
    with a0py.Logger("demo/node") as log:
        log.warn("created")  # the log exists before the listener: it waits for none
    listen = subprocess.Popen([sys.executable, os.path.join(REPO, "examples", "log_listen.py"),
                               "--count", "3", "--level", "dbg"],
                              env=dict(os.environ, PYTHONPATH=REPO), stdout=subprocess.PIPE, text=True)
    try:
        assert listen.stdout.readline().startswith("listening to 'demo/node'")
        with a0py.Logger("demo/node") as log:
            for i in range(20):  # one burst: the listener gets them in one batch
                log.warn(f"message {i}")
        out, _ = listen.communicate(timeout=60)
    finally:
        if listen.poll() is None:
            listen.kill()
            listen.wait()
    assert listen.returncode == 0
    assert [line.split(" ", 3)[3] for line in out.splitlines()] == [f"message {i}" for i in range(3)]


@pytest.mark.parametrize("count", ["-1"])
def test_log_listen_example_refuses_a_negative_count(count):
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "log_listen.py"), "--count", count],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 2 and "--count must be 0" in done.stderr
