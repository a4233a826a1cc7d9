"""``a0py log TOPIC`` driven as a user drives it, with programs logging
through a0py.Logger and Python's logging in other processes."""

import re

from helpers.cli import Running, a0, assert_fails_cleanly, python

import a0py
from a0py.proto import topic as tp

# A program logging one message at each level every 20 ms (argv[1]: topic),
# through a0py.Logger, until killed.
LOGGING_PROGRAM = """
import sys, time, a0py
log = a0py.Logger(sys.argv[1])
i = 0
while True:
    log.dbg(f"debug {i}"); log.info(f"info {i}"); log.warn(f"warn {i}")
    log.err(f"err {i}"); log.crit(f"crit {i}")
    i += 1
    time.sleep(0.02)
"""

LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} (CRIT|ERR |WARN|INFO|DBG ) (.*)")


def test_log_prints_the_messages_of_another_process_at_a_level_or_above(root):
    with python(LOGGING_PROGRAM, "robot"):
        result = a0("log", "robot", "--level", "warn", "-n", "9")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) == 9
    levels = []
    for line in lines:
        match = LINE.fullmatch(line)
        assert match, line
        levels.append(match.group(1).strip())
        assert match.group(2).split()[0] == match.group(1).strip().lower()
    assert set(levels) <= {"WARN", "ERR", "CRIT"}
    assert {"WARN", "ERR", "CRIT"} <= set(levels)  # 9 in a row hold each level at least once


def test_log_init_oldest_shows_what_was_logged_before_and_keeps_lines(root):
    with a0py.Logger("robot") as log:
        log.info("started")
        log.err("failed:\nTraceback line 1\n\tline 2 \x1b[31mred")
    result = a0("log", "robot", "--init", "oldest", "-n", "2")
    assert result.returncode == 0, result.err
    first, *rest = result.out.splitlines()
    assert LINE.fullmatch(first).groups() == ("INFO", "started")
    assert LINE.fullmatch(rest[0]).groups() == ("ERR ", "failed:")
    assert rest[1:] == ["Traceback line 1", "\tline 2 \\x1b[31mred"]  # lines kept, escapes escaped


def test_log_shows_the_python_logger_name(root):
    with python("""
        import logging, a0py
        logger = logging.getLogger("planner")
        logger.addHandler(a0py.LogHandler("robot"))
        logger.warning("replanning")
    """) as program:
        assert program.finish()[0] == 0
    result = a0("log", "robot", "--init", "oldest", "-n", "1")
    assert result.returncode == 0, result.err
    assert LINE.fullmatch(result.out.rstrip("\n")).groups() == ("WARN", "[planner] replanning")


def test_log_waits_for_the_topic_without_creating_it(root):
    with Running.a0py("log", "robot", "-n", "1") as listener:
        line = listener.stderr_line()
        assert "topic 'robot' does not exist yet" in line and "waiting for a program to log" in line
        assert not tp.Topic("robot").exists("log")
        with python(LOGGING_PROGRAM, "robot"):
            status, out, err = listener.finish()
    assert status == 0, err
    assert LINE.fullmatch(out.rstrip("\n"))


def test_log_errors(root):
    assert_fails_cleanly(a0("log", "robot", "--level", "loud"), 2, "unknown log level 'loud'", "WARN")
    assert_fails_cleanly(a0("log", "robot", "-n", "1", "--timeout", "0.2"), 1,
                         "topic 'robot'", "nothing logged within 0.2 s")
    a0py.Logger("robot").info("x")
    assert_fails_cleanly(a0("log", "robot", "-n", "1", "--timeout", "0.3"), 1,
                         "topic 'robot'", "no log message within 0.3 s (got 0 of 1)")
    quiet = a0("log", "robot", "--timeout", "0.3")
    assert (quiet.returncode, quiet.out) == (0, "")
