"""The Foxglove WebSocket protocol, the messages themselves: encoders for what
the server sends, a checked parser for what clients send.

Subprotocol ``foxglove.sdk.v1`` (the Foxglove SDK's name for protocol v1; the
older ``foxglove.websocket.v1`` names the same messages without playback
control). Text frames are JSON objects with an ``op``; binary frames start
with a one-byte opcode, and every integer in them is little-endian.

Server binary opcodes: 1 message data (u32 subscription id, u64 log time in
ns, payload), 2 time (u64 ns), 5 playback state (u8 status, u64 current time,
f32 speed, u8 did-seek, u32 length + request id). Client binary opcodes: 1
message data (client publish), 2 service call, 3 playback control request (u8
command, f32 speed, u8 had-seek, u64 seek time, u32 length + request id).

Besides protocol v1, one request of this server's own, for its page (a
Foxglove client never sends it): ``{"op": "a0py.fetchSeries", "requestId": N,
"channelId": N, "path": "pose.x", "maxPoints": N}`` asks for a numeric field
of a recorded channel over the whole recording; the reply is one text message
``{"op": "a0py.series", "requestId": N, "channelId": N, "path": ...,
"startNs": "...", "t": [ns after startNs...], "v": [...], "messages": N,
"stride": N}`` (or an error status naming the request).

Invariant: nothing a client sends is trusted. :func:`parse_client_text` and
:func:`parse_client_binary` either return a well-formed request or raise
:class:`ProtocolError` with a message fit to send back in a status; they never
raise anything else, whatever the bytes.
"""

import dataclasses
import json
import math
import re
import struct

from . import _capabilities as C
from ._fields import array as _list
from ._fields import dumps as _dumps
from ._fields import short as _short
from ._fields import uint as _uint
from .errors import ProtocolError

__all__ = [
    "LEGACY_SUBPROTOCOL", "SUBPROTOCOL", "SUBPROTOCOLS", "FetchSeries", "PlaybackControl", "ProtocolError",
    "Subscribe", "Unsubscribe", "advertise", "message_data", "parse_client_binary",
    "parse_client_text", "playback_state", "remove_status", "series", "server_info", "status",
    "time_message", "unadvertise",
]

SUBPROTOCOL = "foxglove.sdk.v1"
LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"
#: Accepted subprotocols, preferred first.
SUBPROTOCOLS = (SUBPROTOCOL, LEGACY_SUBPROTOCOL)

OP_MESSAGE_DATA = 0x01
OP_TIME = 0x02
OP_PLAYBACK_STATE = 0x05

CLIENT_OP_MESSAGE_DATA = C.CLIENT_OP_MESSAGE_DATA
CLIENT_OP_SERVICE_CALL = C.CLIENT_OP_SERVICE_CALL
CLIENT_OP_PLAYBACK_CONTROL = 0x03

STATUS_INFO = 0
STATUS_WARNING = 1
STATUS_ERROR = 2

PLAYBACK_PLAYING = 0
PLAYBACK_PAUSED = 1
PLAYBACK_BUFFERING = 2
PLAYBACK_ENDED = 3

PLAY = 0
PAUSE = 1

#: The server sends binary time messages; then message timestamps come from the
#: same clock (a recording's log time).
CAP_TIME = "time"
#: The server answers playback control requests (play, pause, speed, seek) and
#: sends playback states; needs ``dataStartTime``/``dataEndTime`` in serverInfo.
#: The name since foxglove-sdk renamed ``rangedPlayback`` (2026-02); the
#: current Foxglove app offers no playback for the older names.
CAP_PLAYBACK_CONTROL = "playbackControl"

#: Playback speeds outside this range are clamped to it.
MIN_SPEED = 0.01
MAX_SPEED = 100.0

#: The highest rate limit a subscription may ask for (messages a second).
MAX_RATE_HZ = 1e6

#: The most points a series reply may carry (a client asking for more gets this many).
MAX_SERIES_POINTS = 100_000
MAX_SERIES_PATH = 1000

_MESSAGE_HEAD = struct.Struct("<BIQ")
_TIME = struct.Struct("<BQ")
_PLAYBACK_STATE = struct.Struct("<BBQfBI")
_PLAYBACK_CONTROL = struct.Struct("<BfBQI")

_U64_MAX = 0xFFFFFFFFFFFFFFFF
# A client request bigger than this is refused unread (subscribing to every
# channel of a large view fits well within it).
MAX_CLIENT_TEXT = 1 << 20

# Operations of protocol v1 this server never offers, and the capability each one needs.
_UNSUPPORTED = {"fetchAsset": "assets"}


def _timestamp(ns):
    return {"sec": int(ns // 1_000_000_000), "nsec": int(ns % 1_000_000_000)}


def server_info(name, capabilities=(), *, session_id=None, metadata=None, data_range=None,
                supported_encodings=None):
    """The ``serverInfo`` text message. ``data_range``: (start, end) ns of a
    recording (with the ``playbackControl`` capability);
    ``supported_encodings``: the message encodings the server takes from
    clients (client publish, service calls)."""
    msg = {"op": "serverInfo", "name": name, "capabilities": list(capabilities)}
    if supported_encodings:
        msg["supportedEncodings"] = list(supported_encodings)
    if metadata:
        msg["metadata"] = {str(k): str(v) for k, v in metadata.items()}
    if session_id is not None:
        msg["sessionId"] = str(session_id)
    if data_range is not None:
        msg["dataStartTime"] = _timestamp(data_range[0])
        msg["dataEndTime"] = _timestamp(data_range[1])
    return _dumps(msg)


def status(level, message, id=None):
    """The ``status`` text message (level 0 info, 1 warning, 2 error)."""
    msg = {"op": "status", "level": level, "message": message}
    if id is not None:
        msg["id"] = id
    return _dumps(msg)


def remove_status(ids):
    return _dumps({"op": "removeStatus", "statusIds": list(ids)})


def advertise(channels):
    """The ``advertise`` text message for channel dicts (``id``, ``topic``,
    ``encoding``, ``schemaName``, ``schema``, optionally ``schemaEncoding``)."""
    return _dumps({"op": "advertise", "channels": list(channels)})


def unadvertise(channel_ids):
    return _dumps({"op": "unadvertise", "channelIds": list(channel_ids)})


def message_data(subscription_id, log_time_ns, payload):
    """The binary message-data frame: opcode 1, u32 subscription id, u64 log
    time (ns), then the payload bytes."""
    return _MESSAGE_HEAD.pack(OP_MESSAGE_DATA, subscription_id, log_time_ns) + payload


def message_head(subscription_id, log_time_ns):
    """The 13 bytes that start a message-data frame (to send before a payload
    without joining them)."""
    return _MESSAGE_HEAD.pack(OP_MESSAGE_DATA, subscription_id, log_time_ns)


def time_message(ns):
    """The binary time frame: opcode 2, u64 ns."""
    return _TIME.pack(OP_TIME, ns)


def playback_state(state, current_time_ns, speed, did_seek=False, request_id=None):
    """The binary playback-state frame: opcode 5, u8 state, u64 current time,
    f32 speed, u8 did-seek, u32 length + UTF-8 request id."""
    rid = (request_id or "").encode("utf-8")
    return _PLAYBACK_STATE.pack(OP_PLAYBACK_STATE, state, current_time_ns, speed, 1 if did_seek else 0,
                                len(rid)) + rid


def series(request_id, channel_id, path, start_ns, times, values, messages, stride):
    """The ``a0py.series`` reply: ``times`` are ns after ``start_ns`` (ints, so
    JavaScript numbers hold them exactly), ``values`` the numbers at ``path``
    (finite floats); ``messages`` how many messages of the channel the
    recording has, ``stride`` one message in how many was read."""
    return _dumps({"op": "a0py.series", "requestId": request_id, "channelId": channel_id, "path": path,
                   "startNs": str(start_ns), "t": times, "v": values, "messages": messages, "stride": stride})


@dataclasses.dataclass(slots=True)
class Subscribe:
    """A checked ``subscribe``: ``pairs`` is a list of (subscription id,
    channel id); ``rates`` maps subscription ids to the most messages a second
    the client asked for (this server's own ``maxHz`` field of a
    subscription; other servers ignore it)."""

    pairs: list
    rates: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class Unsubscribe:
    """A checked ``unsubscribe``: ``ids`` is a list of subscription ids."""

    ids: list


@dataclasses.dataclass(slots=True)
class FetchSeries:
    """A checked ``a0py.fetchSeries``: ``path`` is a list of keys (str) and
    indexes (int), ``text`` the path as sent."""

    request_id: int
    channel_id: int
    text: str
    path: list
    max_points: int


_PATH_KEY = re.compile(r"[^.\[\]]+")
_PATH_INDEX = re.compile(r"\[(\d{1,9})\]")


def parse_field_path(text):
    """A field path as the page writes it (``pose.theta``, ``v[2]``,
    ``a.b[0].c``) as a list of keys (str) and indexes (int). Raises
    :class:`ProtocolError`."""
    parts = []
    pos = 0
    while pos < len(text):
        if text[pos] == "[":
            m = _PATH_INDEX.match(text, pos)
        else:
            if parts and text[pos] == ".":
                pos += 1
            m = _PATH_KEY.match(text, pos)
        if m is None:
            raise ProtocolError(f"a0py.fetchSeries: bad field path {_short(text)} (write it as pose.theta "
                                "or v[2])")
        parts.append(int(m.group(1)) if m.re is _PATH_INDEX else m.group(0))
        pos = m.end()
    if not parts:
        raise ProtocolError("a0py.fetchSeries: empty field path")
    return parts


@dataclasses.dataclass(slots=True)
class PlaybackControl:
    """A checked playback control request."""

    command: int  # PLAY or PAUSE
    speed: float
    seek_time: int | None  # ns, or None
    request_id: str


def parse_client_text(text):
    """A client's text message as :class:`Subscribe`, :class:`Unsubscribe`,
    :class:`FetchSeries`, or a request of :mod:`a0py.view._capabilities`.
    Raises :class:`ProtocolError` for anything else (not JSON, no ``op``, an
    operation this server does not offer, bad fields)."""
    if len(text) > MAX_CLIENT_TEXT:
        raise ProtocolError(f"text message of {len(text)} characters refused (at most {MAX_CLIENT_TEXT})")
    try:
        msg = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ProtocolError(f"text messages must be JSON objects: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"text messages must be JSON objects with an 'op', got {_short(msg)}")
    op = msg.get("op")
    if op == "subscribe":
        pairs = []
        rates = {}
        for item in _list(msg, "subscriptions", op):
            if not isinstance(item, dict):
                raise ProtocolError(f"subscribe: each subscription must be an object "
                                    f"{{\"id\": N, \"channelId\": N}}, got {_short(item)}")
            pairs.append((_uint(item.get("id"), "subscribe: subscription 'id'"),
                          _uint(item.get("channelId"), "subscribe: 'channelId'")))
            hz = item.get("maxHz")
            if hz is not None:
                if isinstance(hz, bool) or not isinstance(hz, (int, float)) or not 0 < hz <= MAX_RATE_HZ:
                    raise ProtocolError(f"subscribe: 'maxHz' must be a number of messages a second above 0 "
                                        f"and at most {MAX_RATE_HZ:g}, got {_short(hz)}")
                rates[pairs[-1][0]] = float(hz)
        return Subscribe(pairs, rates)
    if op == "unsubscribe":
        return Unsubscribe([_uint(i, "unsubscribe: each of 'subscriptionIds'")
                            for i in _list(msg, "subscriptionIds", op)])
    if op == "a0py.fetchSeries":
        text_path = msg.get("path")
        if not isinstance(text_path, str) or len(text_path) > MAX_SERIES_PATH:
            raise ProtocolError(f"a0py.fetchSeries: 'path' must be a string of at most {MAX_SERIES_PATH} "
                                f"characters, got {_short(text_path)}")
        max_points = msg.get("maxPoints", MAX_SERIES_POINTS)
        return FetchSeries(_uint(msg.get("requestId"), "a0py.fetchSeries: 'requestId'"),
                           _uint(msg.get("channelId"), "a0py.fetchSeries: 'channelId'"), text_path,
                           parse_field_path(text_path),
                           min(max(_uint(max_points, "a0py.fetchSeries: 'maxPoints'"), 1), MAX_SERIES_POINTS))
    if not isinstance(op, str):
        raise ProtocolError(f"text messages need a string field 'op', got {_short(op)}")
    if op in C.TEXT_OPS:
        return C.parse_text(op, msg)
    if op in _UNSUPPORTED:
        raise ProtocolError(f"operation {op!r} is not supported by this server (it does not offer the "
                            f"{_UNSUPPORTED[op]!r} capability)")
    raise ProtocolError(f"unknown operation {_short(op)}")


def parse_client_binary(data):
    """A client's binary message as :class:`PlaybackControl`, or a client
    message or service call of :mod:`a0py.view._capabilities`. Raises
    :class:`ProtocolError` for anything else."""
    if not data:
        raise ProtocolError("empty binary message (a binary message starts with a one-byte opcode)")
    op = data[0]
    if op == CLIENT_OP_PLAYBACK_CONTROL:
        if len(data) < 1 + _PLAYBACK_CONTROL.size:
            raise ProtocolError(f"playback control request of {len(data)} bytes is too short "
                                f"(at least {1 + _PLAYBACK_CONTROL.size})")
        command, speed, had_seek, seek, rid_len = _PLAYBACK_CONTROL.unpack_from(data, 1)
        if command not in (PLAY, PAUSE):
            raise ProtocolError(f"playback control request: command {command} (0 play, 1 pause)")
        if math.isnan(speed):
            raise ProtocolError(f"playback control request: speed is NaN (use a factor from {MIN_SPEED:g} "
                                f"to {MAX_SPEED:g})")
        # Clamped, as the reference server's player does: the playback state
        # that answers tells the client the speed it got.
        speed = min(max(speed, MIN_SPEED), MAX_SPEED)
        rest = len(data) - 1 - _PLAYBACK_CONTROL.size
        if rid_len > rest:
            raise ProtocolError(f"playback control request: request id of {rid_len} bytes, {rest} present")
        raw = data[1 + _PLAYBACK_CONTROL.size:1 + _PLAYBACK_CONTROL.size + rid_len]
        try:
            rid = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("playback control request: request id is not UTF-8") from None
        return PlaybackControl(command, speed, seek if had_seek else None, rid)
    if op in (CLIENT_OP_MESSAGE_DATA, CLIENT_OP_SERVICE_CALL):
        return C.parse_binary(op, data)
    raise ProtocolError(f"unknown binary opcode {op:#04x}")
