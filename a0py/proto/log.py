"""Logs on topics: :class:`Logger` writes leveled messages to a topic's ``log`` arena
(``T.log``), :class:`LogListener` reads those at or above a level, and
:class:`LogHandler` lets Python's :mod:`logging` write there.

A log message is a packet whose payload is the text (UTF-8) and whose header
``a0_log_level`` is the level's name (``CRIT``, ``ERR``, ``WARN``, ``INFO``, ``DBG``).
Records from :class:`LogHandler` also carry ``logger``, ``file``, ``line``, ``func``,
``thread`` and ``pid``. Levels are numbered as :mod:`logging`'s (CRIT = 50 ... DBG = 10),
so the two compare directly.
"""

import enum
import logging
import os
import threading
import time

from .. import _core
from ..errors import ArgumentError
from ._subscriber import ProtocolSubscriber
from .lifetime import Closeable
from .packets import TIME_WALL
from .pubsub import INIT_AWAIT_NEW
from .topic import LOG, Topic

__all__ = ["LEVEL_HEADER", "LogHandler", "LogLevel", "LogListener", "Logger", "format_line",
           "log_level", "parse_level"]

LEVEL_HEADER = "a0_log_level"


class LogLevel(enum.IntEnum):
    """Log levels, most severe first; the numbers are :mod:`logging`'s."""

    CRIT = 50
    ERR = 40
    WARN = 30
    INFO = 20
    DBG = 10


_ALIASES = {
    "crit": LogLevel.CRIT, "critical": LogLevel.CRIT, "fatal": LogLevel.CRIT,
    "err": LogLevel.ERR, "error": LogLevel.ERR,
    "warn": LogLevel.WARN, "warning": LogLevel.WARN,
    "info": LogLevel.INFO,
    "dbg": LogLevel.DBG, "debug": LogLevel.DBG,
}


def parse_level(level):
    """A :class:`LogLevel` from a LogLevel, a :mod:`logging` number (rounded down to
    the nearest level: 25 is INFO; below 10 is DBG) or a name (``"warn"``,
    ``"WARNING"``, ``"dbg"``, ``"debug"``...). Raises ArgumentError naming the choices."""
    if isinstance(level, LogLevel):
        return level
    if isinstance(level, int) and not isinstance(level, bool):
        for lv in LogLevel:
            if level >= lv:
                return lv
        return LogLevel.DBG
    if isinstance(level, str):
        found = _ALIASES.get(level.strip().lower())
        if found is not None:
            return found
    raise ArgumentError(f"unknown log level {level!r}: use one of {', '.join(lv.name for lv in LogLevel)} "
                        "(or crit/err/warn/info/dbg, critical/error/warning/debug, or a logging number)")


def log_level(pkt):
    """The :class:`LogLevel` of a log packet (INFO if it has no valid level header)."""
    name = pkt.headers.get(LEVEL_HEADER)
    level = LogLevel.__members__.get(name) if name else None
    return LogLevel.INFO if level is None else level


def format_line(pkt):
    """One line for a log packet: wall time, level, text (and the logger, if known)."""
    wall = pkt.headers.get(TIME_WALL)
    if wall is not None and wall.isdigit():
        ns = int(wall)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns // 1_000_000_000))
        stamp += f".{(ns // 1_000_000) % 1000:03d}"
    else:
        stamp = "-"
    text = bytes(pkt.payload).decode("utf-8", "replace")
    name = pkt.headers.get("logger")
    where = f" [{name}]" if name else ""
    return f"{stamp} {log_level(pkt).name:<4}{where} {text}"


class Logger(Closeable):
    """Writes log messages to `topic`: ``crit``, ``err``, ``warn``, ``info``, ``dbg``
    (each ``(msg, headers=None)``; `msg` is a str, bytes or an :class:`a0py.Packet`)
    and ``log(level, msg, headers=None)``. Messages below `level` (default DBG: all)
    are dropped here. Each method returns the packet's seq, or None if dropped.
    Thread-safe. Raises ArgumentError for a bad topic or level."""

    def __init__(self, topic, level=LogLevel.DBG):
        self.topic = Topic.of(topic)
        self.level = parse_level(level)
        self._writer = _core.PacketWriter(self.topic.arena(LOG), f"log topic {self.topic.name!r}")

    def log(self, level, msg, headers=None):
        """Writes `msg` at `level` (anything :func:`parse_level` takes). Raises
        ArgumentError for a bad level, message or headers."""
        level = parse_level(level)
        if level < self.level:
            return None
        hdrs = [(LEVEL_HEADER, level.name)]
        if headers is not None:
            if isinstance(headers, (str, bytes)):
                raise ArgumentError(f"headers must be a mapping or (key, value) pairs, not {type(headers).__name__}")
            extra = list(headers.items() if hasattr(headers, "items") else headers)
            if any(isinstance(kv, (tuple, list)) and kv and kv[0] == LEVEL_HEADER for kv in extra):
                raise ArgumentError(f"header {LEVEL_HEADER!r} is set by the level; pass the level instead")
            hdrs += extra
        if isinstance(msg, _core.Packet):
            own = [(k, v) for k, v in msg.headers.items() if k != LEVEL_HEADER and not k.startswith("a0_")]
            return self._writer.pub(msg.payload, hdrs + own)
        if not isinstance(msg, (str, bytes, bytearray, memoryview)):
            raise ArgumentError(f"a log message must be str, bytes or an a0py.Packet, not {type(msg).__name__}")
        return self._writer.pub(msg, hdrs)

    def crit(self, msg, headers=None):
        """Writes `msg` at CRIT."""
        return self.log(LogLevel.CRIT, msg, headers)

    def err(self, msg, headers=None):
        """Writes `msg` at ERR."""
        return self.log(LogLevel.ERR, msg, headers)

    def warn(self, msg, headers=None):
        """Writes `msg` at WARN."""
        return self.log(LogLevel.WARN, msg, headers)

    def info(self, msg, headers=None):
        """Writes `msg` at INFO."""
        return self.log(LogLevel.INFO, msg, headers)

    def dbg(self, msg, headers=None):
        """Writes `msg` at DBG."""
        return self.log(LogLevel.DBG, msg, headers)

    def close(self):
        """Later writes raise ClosedError. Idempotent."""
        self._writer.close()

    def __repr__(self):
        return f"<a0py.Logger {self.topic.name!r} level={self.level.name}>"


class LogListener(ProtocolSubscriber):
    """Calls ``callback(pkt)`` for `topic`'s log messages at `level` or above (anything
    :func:`parse_level` takes), on the process's dispatcher thread, until :meth:`close`.
    ``log_level(pkt)`` gives a message's level, :func:`format_line` a printable line.
    `init` as for :class:`a0py.SubscriberSync` (default: messages written from now on).
    Raises ArgumentError for a bad topic, level, init or callback."""

    def __init__(self, topic, level, callback, init=INIT_AWAIT_NEW):
        self.level = parse_level(level)
        threshold = self.level

        def accept(pkt):
            return log_level(pkt) >= threshold

        super().__init__(topic, LOG, callback, init, accept=accept, what="log listener")

    def __repr__(self):
        return f"<a0py.LogListener {self.topic.name!r} level={self.level.name}>"


class LogHandler(logging.Handler):
    """A :class:`logging.Handler` that writes records to `topic`'s log: the message as
    payload, the level mapped to :class:`LogLevel` (a record between two levels takes
    the lower), and the headers ``logger``, ``file``, ``line``, ``func``, ``thread``,
    ``pid``. ``logging.getLogger("app").addHandler(a0py.LogHandler("app"))``.

    The payload is the message and its traceback (a formatter of
    ``"%(message)s"``), because the level and the logger travel as headers and every
    reader prints them: ``logging.basicConfig(handlers=[LogHandler(...)])``, which gives
    handlers without a formatter its ``LEVEL:name:message`` one, leaves this one as it
    is. :meth:`setFormatter` still replaces it. A record that cannot be written goes to
    :meth:`logging.Handler.handleError`, as in every handler. Raises ArgumentError for a
    bad topic or level."""

    def __init__(self, topic, level=logging.NOTSET):
        super().__init__(level)
        self.setFormatter(logging.Formatter("%(message)s"))
        self.topic = Topic.of(topic)
        self._writer = _core.PacketWriter(self.topic.arena(LOG), f"log topic {self.topic.name!r}")

    def emit(self, record):
        try:
            text = self.format(record)
            headers = [(LEVEL_HEADER, parse_level(record.levelno).name),
                       ("logger", record.name), ("file", record.pathname or ""),
                       ("line", str(record.lineno)), ("func", record.funcName or ""),
                       ("thread", record.threadName or str(threading.get_ident())),
                       ("pid", str(record.process or os.getpid()))]
            self._writer.pub(text, headers)
        except Exception:
            self.handleError(record)

    def close(self):
        self._writer.close()
        super().close()

    def __repr__(self):
        return f"<a0py.LogHandler {self.topic.name!r} ({logging.getLevelName(self.level)})>"
