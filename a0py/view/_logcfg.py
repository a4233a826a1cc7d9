"""Log and cfg topics as channels of the view.

A topic's log (``T.log``) and its configuration (``T.cfg``) are channels of
their own, named ``T:log`` and ``T:cfg`` (``:`` is never part of a topic
name, so they cannot collide with a pub/sub topic):

* **log**: each log packet is a channel message. Clients that asked for whole
  packets (the page) get the packet (payload: the text; headers: the level
  ``a0_log_level``, and ``logger``, ``file``, ``line``... when the writer set
  them). Other clients (the Foxglove app) get it as a ``foxglove.Log`` JSON
  message (timestamp, level 1 debug to 5 fatal, message, name, file, line),
  so Foxglove's Log panel shows it.
* **cfg**: each version of the configuration document is a message; its
  channel is judged like a pub/sub topic's (a JSON object gets an inferred
  schema), from the version present when the view found it.
"""

import json

from ..proto.log import LogLevel, log_level
from ._schema import PayloadKind

__all__ = ["LOG_KIND", "LogMessage", "channel_topic"]

#: The suffix of each protocol's channel name (pub/sub topics keep their name).
SUFFIX = {"log": ":log", "cfg": ":cfg"}

# foxglove.Log's fields, as a JSON schema of the ones this view fills.
_LOG_SCHEMA = {
    "title": "foxglove.Log",
    "description": "A log message (the a0py topic's log arena)",
    "type": "object",
    "properties": {
        "timestamp": {"type": "object", "properties": {
            "sec": {"type": "integer", "minimum": 0}, "nsec": {"type": "integer", "minimum": 0}}},
        "level": {"type": "integer", "description": "1 debug, 2 info, 3 warning, 4 error, 5 fatal"},
        "message": {"type": "string"},
        "name": {"type": "string", "description": "the logger, else the topic"},
        "file": {"type": "string"},
        "line": {"type": "integer", "minimum": 0},
    },
}
LOG_KIND = PayloadKind("json", "foxglove.Log", json.dumps(_LOG_SCHEMA, separators=(",", ":")), "jsonschema")

_FOXGLOVE_LEVEL = {LogLevel.DBG: 1, LogLevel.INFO: 2, LogLevel.WARN: 3, LogLevel.ERR: 4, LogLevel.CRIT: 5}


def channel_topic(name, protocol):
    """The channel name of topic ``name``'s ``protocol`` arena."""
    return name + SUFFIX.get(protocol, "")


class LogMessage:
    """A log packet as the hub sends it: ``to_bytes()`` the whole packet,
    ``payload`` the ``foxglove.Log`` JSON (made on first use, so only when a
    client without packets is subscribed)."""

    __slots__ = ("_payload", "log_time", "packet", "topic")

    def __init__(self, packet, topic, log_time):
        self.packet = packet
        self.topic = topic
        self.log_time = log_time
        self._payload = None

    def to_bytes(self):
        return self.packet.to_bytes()

    @property
    def payload(self):
        if self._payload is None:
            pkt = self.packet
            headers = pkt.headers
            try:
                line = max(0, int(headers.get("line") or 0))
            except ValueError:
                line = 0
            self._payload = json.dumps({
                "timestamp": {"sec": self.log_time // 1_000_000_000, "nsec": self.log_time % 1_000_000_000},
                "level": _FOXGLOVE_LEVEL.get(log_level(pkt), 0),
                "message": bytes(pkt.payload).decode("utf-8", "replace"),
                "name": headers.get("logger") or self.topic,
                "file": headers.get("file") or "",
                "line": line,
            }, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return self._payload
