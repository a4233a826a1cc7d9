"""Logs across real processes: a Logger in one process, LogListeners at different
levels in another (each gets exactly the messages at or above its level, in order), the
logging.Handler in a child writing records with their source, levels and their names,
and bad arguments."""

import logging

import pytest
from helpers.collect import Collector
from helpers.procs import CTX, MSG_S, join_ok, recv, wait_until

import a0py
from a0py import ArgumentError
from a0py.proto.log import LogLevel, format_line, log_level, parse_level

pytestmark = pytest.mark.slow


class Gather(Collector):
    def texts(self):
        return [(log_level(p).name, p.payload.decode()) for p in self.pkts]


def _log_every_level(topic, conn):
    assert conn.recv() == "go"
    log = a0py.Logger(topic)
    log.dbg("d")
    log.info("i")
    log.warn("w")
    log.err("e")
    log.crit("c")
    log.info("end")
    log.crit("end")
    conn.send("done")


def test_listeners_get_exactly_their_levels_in_order_across_processes(root, spawn):
    listeners = {}
    for level in ("dbg", "warn", "crit"):
        g = Gather(b"end")
        listeners[level] = (g, a0py.LogListener("node", level, g))
    parent, child = CTX.Pipe()
    p = spawn(_log_every_level, "node", child)
    parent.send("go")
    assert recv(parent) == "done"
    join_ok(p)
    for g, _ in listeners.values():
        assert g.done.wait(MSG_S)
    assert [t for t in listeners["dbg"][0].texts() if t[1] != "end"] == [
        ("DBG", "d"), ("INFO", "i"), ("WARN", "w"), ("ERR", "e"), ("CRIT", "c")]
    assert listeners["warn"][0].texts() == [("WARN", "w"), ("ERR", "e"), ("CRIT", "c"), ("CRIT", "end")]
    assert listeners["crit"][0].texts() == [("CRIT", "c"), ("CRIT", "end")]
    for _, listener in listeners.values():
        listener.close()


def test_listener_from_oldest_and_logger_threshold(root):
    quiet = a0py.Logger("app", level="info")
    assert quiet.dbg("dropped") is None
    assert quiet.info("kept") is not None
    a0py.Logger("app").err(b"bytes too")
    g = Gather(b"bytes too")
    with a0py.LogListener("app", LogLevel.DBG, g, init=a0py.INIT_OLDEST):
        assert g.done.wait(MSG_S)
    assert g.texts() == [("INFO", "kept"), ("ERR", "bytes too")]
    line = format_line(g.pkts[0])
    assert line.endswith("INFO kept") and line[:4].isdigit()


def _logging_child(topic, conn):
    logger = logging.getLogger("app.motor")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = a0py.LogHandler(topic)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.debug("spinning up %d", 3)
    logger.log(25, "between info and warning")
    try:
        1 / 0
    except ZeroDivisionError:
        logger.exception("it broke")
    conn.send("done")


def test_logging_handler_writes_records_with_their_source(root, spawn):
    g = Gather(None)
    listener = a0py.LogListener("py", "dbg", g)
    parent, child = CTX.Pipe()
    p = spawn(_logging_child, "py", child)
    assert recv(parent) == "done"
    join_ok(p)
    wait_until(lambda: len(g.pkts) >= 3, "three log records")
    listener.close()
    levels = [log_level(pkt) for pkt in g.pkts]
    assert levels == [LogLevel.DBG, LogLevel.INFO, LogLevel.ERR]
    first = g.pkts[0]
    assert first.payload == b"app.motor: spinning up 3"
    assert first.headers["logger"] == "app.motor"
    assert first.headers["file"].endswith("test_log.py")
    assert first.headers["func"] == "_logging_child"
    assert int(first.headers["line"]) > 0 and first.headers["pid"] == str(p.pid)
    assert b"Traceback" in g.pkts[2].payload and b"ZeroDivisionError" in g.pkts[2].payload
    assert "[app.motor]" in format_line(first)


@pytest.mark.parametrize(("given", "level"), [
    ("crit", LogLevel.CRIT), ("CRITICAL", LogLevel.CRIT), ("error", LogLevel.ERR),
    (" Warning ", LogLevel.WARN), ("info", LogLevel.INFO), ("debug", LogLevel.DBG),
    (logging.WARNING, LogLevel.WARN), (35, LogLevel.WARN), (5, LogLevel.DBG), (LogLevel.ERR, LogLevel.ERR),
])
def test_parse_level(given, level):
    assert parse_level(given) is level


def test_bad_arguments(root):
    for bad in ("loud", None, 2.5, True):
        with pytest.raises(ArgumentError, match="unknown log level"):
            parse_level(bad)
    log = a0py.Logger("bad")
    with pytest.raises(ArgumentError, match="unknown log level"):
        log.log("loud", "x")
    with pytest.raises(ArgumentError, match="a log message must be str, bytes"):
        log.info(123)
    with pytest.raises(ArgumentError, match="set by the level"):
        log.info("x", headers={"a0_log_level": "CRIT"})
    with pytest.raises(ArgumentError, match="callable"):
        a0py.LogListener("bad", "info", "print")
    with pytest.raises(ArgumentError, match="init must be"):
        a0py.LogListener("bad", "info", print, init="newest")
    with pytest.raises(ArgumentError, match="bad topic name"):
        a0py.LogHandler("a b")
