"""The Zenoh configuration a bridge opens its session with.

Defaults, chosen so that a bridge started with no options exposes nothing: peer mode,
multicast scouting off, no listener unless ``listen`` names one (a listener on a
non-loopback address only when the user writes that address), Zenoh's shared-memory
transport off (a bridge is for other machines; on this one a0py's own arenas are the
shared memory). A JSON5 file given as ``config`` is the base instead of these defaults
(for TLS, authentication, a router, anything Zenoh offers); ``listen``, ``connect``,
``mode`` and ``multicast`` given explicitly override it.
"""

import json
import os

from .errors import BridgeConfigError

__all__ = ["MODES", "zenoh_config"]

MODES = ("peer", "client", "router")
_SCHEMES = ("tcp/", "udp/", "tls/", "quic/", "unixsock-stream/", "ws/", "unixpipe/", "serial/",
            "vsock/")


def _endpoints(what, endpoints):
    if isinstance(endpoints, str):
        endpoints = (endpoints,)
    out = []
    for ep in endpoints:
        if not isinstance(ep, str) or not ep.startswith(_SCHEMES) or len(ep.split("/", 1)[1]) == 0:
            raise BridgeConfigError(f"bad {what} endpoint {ep!r}: write a Zenoh endpoint such as "
                                    "'tcp/127.0.0.1:7447', 'udp/10.0.0.2:7447' or "
                                    "'unixsock-stream//tmp/a0py-bridge.sock'")
        out.append(ep)
    return out


def zenoh_config(zenoh, *, listen=(), connect=(), config=None, mode=None, multicast=None):
    """A ``zenoh.Config``. Raises BridgeConfigError (bad endpoint or mode, a config file
    missing or not parsing, Zenoh refusing a setting)."""
    listen = _endpoints("listen", listen)
    connect = _endpoints("connect", connect)
    if mode is not None and mode not in MODES:
        raise BridgeConfigError(f"bad Zenoh mode {mode!r}: use one of {', '.join(MODES)}")
    if config is not None:
        path = os.fspath(config)
        if not os.path.isfile(path):
            raise BridgeConfigError(f"Zenoh config file {path!r} does not exist")
        try:
            conf = zenoh.Config.from_file(path)
        except Exception as e:  # zenoh raises its own ZError with the parser's message
            raise BridgeConfigError(f"Zenoh config file {path!r} does not parse: {e}") from None
        settings = []
    else:
        conf = zenoh.Config()
        settings = [("mode", "peer"), ("scouting/multicast/enabled", False),
                    ("transport/shared_memory/enabled", False), ("listen/endpoints", [])]
    if mode is not None:
        settings.append(("mode", mode))
    if multicast is not None:
        settings.append(("scouting/multicast/enabled", bool(multicast)))
    if listen:
        settings.append(("listen/endpoints", listen))
    if connect:
        settings.append(("connect/endpoints", connect))
    for key, value in settings:
        try:
            conf.insert_json5(key, json.dumps(value))
        except Exception as e:
            raise BridgeConfigError(f"Zenoh refused {key} = {value!r}: {e}") from None
    return conf
