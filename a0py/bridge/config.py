"""The Zenoh configuration a bridge opens its session with.

Defaults, chosen so that a bridge started with no options exposes nothing: peer mode,
multicast scouting off, no listener unless ``listen`` names one (a listener on a
non-loopback address only when the user writes that address), Zenoh's shared-memory
transport off (a bridge is for other machines; on this one a0py's own arenas are the
shared memory), Zenoh's link lease (:data:`DEFAULT_LEASE`). A JSON5 file given as
``config`` is the base instead of these defaults (for TLS, authentication, a router,
anything Zenoh offers); ``listen``, ``connect``, ``mode``, ``multicast`` and ``lease``
given explicitly override it.

The lease is how long a link may stay silent before Zenoh declares it down (and the
bridges report their peers over it ``gone``): ``transport/link/tx/lease``, in
milliseconds, which Zenoh announces to the other end; Zenoh sends a keep-alive on an
idle link every lease / ``transport/link/tx/keep_alive`` (4 unless a config file says
otherwise), so the keep-alives scale with the lease.
"""

import json
import math
import os

from .errors import BridgeConfigError

__all__ = ["DEFAULT_LEASE", "MAX_LEASE", "MIN_LEASE", "MODES", "check_lease", "zenoh_config"]

#: The bridge's link lease in seconds when neither ``lease`` nor a config file gives one
#: (Zenoh's own default; docs/bridge.md says why the bridge keeps it).
DEFAULT_LEASE = 10.0
#: The shortest lease taken: under it a scheduling hiccup of either machine, or one
#: retransmission, would drop a healthy link.
MIN_LEASE = 0.1
#: The longest lease taken (an hour).
MAX_LEASE = 3600.0

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


def check_lease(lease):
    """`lease` (seconds, a number from :data:`MIN_LEASE` to :data:`MAX_LEASE`) as a
    float; None stays None. Raises BridgeConfigError naming the value."""
    if lease is None:
        return None
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not math.isfinite(lease) \
            or not MIN_LEASE <= lease <= MAX_LEASE:
        raise BridgeConfigError(f"lease must be seconds from {MIN_LEASE:g} to {MAX_LEASE:g} "
                                f"(how long a silent link lasts before its peers are reported "
                                f"gone), not {lease!r}")
    return float(lease)


def zenoh_config(zenoh, *, listen=(), connect=(), config=None, mode=None, multicast=None,
                 lease=None):
    """A ``zenoh.Config``. `lease`: seconds (None: the config file's, else
    :data:`DEFAULT_LEASE`). Raises BridgeConfigError (bad endpoint, mode or lease, a
    config file missing or not parsing, Zenoh refusing a setting)."""
    lease = check_lease(lease)
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
        if lease is None:
            lease = DEFAULT_LEASE
    if mode is not None:
        settings.append(("mode", mode))
    if multicast is not None:
        settings.append(("scouting/multicast/enabled", bool(multicast)))
    if listen:
        settings.append(("listen/endpoints", listen))
    if connect:
        settings.append(("connect/endpoints", connect))
    if lease is not None:
        settings.append(("transport/link/tx/lease", round(lease * 1000)))
    for key, value in settings:
        try:
            conf.insert_json5(key, json.dumps(value))
        except Exception as e:
            raise BridgeConfigError(f"Zenoh refused {key} = {value!r}: {e}") from None
    return conf
