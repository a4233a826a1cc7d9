"""``a0py view --foxglove-sdk``: the live topics also logged to the Foxglove
SDK's own WebSocket server (the ``foxglove-sdk`` package, the ``foxglove``
extra), for users whose tools expect that server. The default view needs
none of it.

Each topic becomes an SDK channel when its first packet tells what its
payloads are (a typed topic's declared schema; else JSON with an inferred
schema, or bytes, as in the view); its
packets are logged with their ``a0_time_wall`` as log time, from a callback
subscriber on the process's dispatcher thread.
"""

import logging
import threading

from ._live import _matcher, list_pubsub_topics
from ._schema import kind_of
from ._server import is_loopback
from .errors import ViewError

__all__ = ["FoxgloveBridge"]

_log = logging.getLogger("a0py.view")


def _sdk():
    try:
        import foxglove
    except ImportError:
        raise ViewError("--foxglove-sdk needs the Foxglove SDK: pip install 'a0py[foxglove]' "
                        "(the view itself works without it)") from None
    return foxglove


class FoxgloveBridge:
    """Logs the topics matching ``globs`` under ``root`` to a Foxglove SDK
    server on ``host:port``. Raises :class:`ViewError` when the SDK is not
    installed or the address is not loopback without ``allow_remote``."""

    def __init__(self, host="127.0.0.1", port=8766, root=None, globs=None, allow_remote=False):
        self._fg = _sdk()
        if not is_loopback(host) and not allow_remote:
            raise ViewError(f"binding {host!r} would show your topics to other machines: pass --allow-remote")
        self.host = host
        self.port = port
        self.root = root
        self.match = _matcher(globs)
        self._server = None
        self._subs = {}
        self._channels = {}
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._server = self._fg.start_server(name="a0py view", host=self.host, port=self.port)
        self.port = getattr(self._server, "port", self.port)
        self._thread = threading.Thread(target=self._scan, name="a0py-view-foxglove", daemon=True)
        self._thread.start()

    def _scan(self):
        from ..proto import Subscriber
        from ..proto.pubsub import INIT_MOST_RECENT
        from ..proto.topic import Topic

        while not self._stop.is_set():
            present = {t for t in list_pubsub_topics(self.root) if self.match(t)}
            for name in present - self._subs.keys():
                self._subs[name] = Subscriber(Topic(name, root=self.root), self._callback(name),
                                              init=INIT_MOST_RECENT)
            for name in self._subs.keys() - present:
                self._subs.pop(name).close()
                ch = self._channels.pop(name, None)
                if ch is not None:
                    ch.close()
            self._stop.wait(0.5)

    def _callback(self, name):
        fg = self._fg

        def on_packet(pkt):
            ch = self._channels.get(name)
            if ch is None:
                declared = self._schema_of(name)
                if declared is not None:  # a typed topic: its schema as declared (binary as it is)
                    schema = fg.Schema(name=declared.name, encoding=declared.encoding, data=declared.data)
                    encoding = declared.message_encoding
                else:
                    kind = kind_of(name, pkt.payload, pkt.headers)
                    schema = fg.Schema(name=kind.schema_name, encoding=kind.schema_encoding or "",
                                       data=kind.schema.encode())
                    encoding = kind.encoding
                ch = self._channels[name] = fg.Channel(name, schema=schema, message_encoding=encoding)
            try:
                log_time = int(pkt.headers.get("a0_time_wall", 0)) or None
            except ValueError:
                log_time = None
            ch.log(bytes(pkt.payload), log_time=log_time)

        return on_packet

    def _schema_of(self, name):
        """The schema a typed topic's publisher declared (with a message
        encoding), else None."""
        from ..errors import A0Error
        from ..proto.schema import topic_schema
        from ..proto.topic import Topic

        try:
            schema = topic_schema(Topic(name, root=self.root))
        except A0Error as e:
            _log.info("view: topic %r: its schema does not read (%s)", name, e)
            return None
        return schema if schema is not None and schema.message_encoding else None

    def close(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        for sub in self._subs.values():
            sub.close()
        self._subs.clear()
        if self._server is not None:
            self._server.stop()
