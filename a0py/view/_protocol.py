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

Invariant: nothing a client sends is trusted. :func:`parse_client_text` and
:func:`parse_client_binary` either return a well-formed request or raise
:class:`ProtocolError` with a message fit to send back in a status; they never
raise anything else, whatever the bytes.
"""

import json
import math
import struct

from .errors import ProtocolError

__all__ = [
    "LEGACY_SUBPROTOCOL", "SUBPROTOCOL", "SUBPROTOCOLS", "PlaybackControl", "ProtocolError",
    "Subscribe", "Unsubscribe", "advertise", "message_data", "parse_client_binary",
    "parse_client_text", "playback_state", "remove_status", "server_info", "status", "time_message",
    "unadvertise",
]

SUBPROTOCOL = "foxglove.sdk.v1"
LEGACY_SUBPROTOCOL = "foxglove.websocket.v1"
#: Accepted subprotocols, preferred first.
SUBPROTOCOLS = (SUBPROTOCOL, LEGACY_SUBPROTOCOL)

OP_MESSAGE_DATA = 0x01
OP_TIME = 0x02
OP_PLAYBACK_STATE = 0x05

CLIENT_OP_MESSAGE_DATA = 0x01
CLIENT_OP_SERVICE_CALL = 0x02
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

CAP_TIME = "time"
CAP_RANGED_PLAYBACK = "rangedPlayback"

_MESSAGE_HEAD = struct.Struct("<BIQ")
_TIME = struct.Struct("<BQ")
_PLAYBACK_STATE = struct.Struct("<BBQfBI")
_PLAYBACK_CONTROL = struct.Struct("<BfBQI")

_U32_MAX = 0xFFFFFFFF
_U64_MAX = 0xFFFFFFFFFFFFFFFF
# A client request bigger than this is refused unread (subscribing to every
# channel of a large view fits well within it).
MAX_CLIENT_TEXT = 1 << 20
_MAX_ITEMS = 10_000

# Operations of protocol v1 this server does not offer (the capability is not
# advertised), and the capability each one needs.
_UNSUPPORTED = {
    "advertise": "clientPublish", "unadvertise": "clientPublish",
    "getParameters": "parameters", "setParameters": "parameters",
    "subscribeParameterUpdates": "parametersSubscribe",
    "unsubscribeParameterUpdates": "parametersSubscribe",
    "subscribeConnectionGraph": "connectionGraph", "unsubscribeConnectionGraph": "connectionGraph",
    "fetchAsset": "assets",
}


def _dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _timestamp(ns):
    return {"sec": int(ns // 1_000_000_000), "nsec": int(ns % 1_000_000_000)}


def server_info(name, capabilities=(), *, session_id=None, metadata=None, data_range=None):
    """The ``serverInfo`` text message. ``data_range``: (start, end) ns of a
    recording (with the ``rangedPlayback`` capability)."""
    msg = {"op": "serverInfo", "name": name, "capabilities": list(capabilities)}
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


class Subscribe:
    """A checked ``subscribe``: ``pairs`` is a list of (subscription id, channel id)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs):
        self.pairs = pairs


class Unsubscribe:
    """A checked ``unsubscribe``: ``ids`` is a list of subscription ids."""

    __slots__ = ("ids",)

    def __init__(self, ids):
        self.ids = ids


class PlaybackControl:
    """A checked playback control request."""

    __slots__ = ("command", "request_id", "seek_time", "speed")

    def __init__(self, command, speed, seek_time, request_id):
        self.command = command  # PLAY or PAUSE
        self.speed = speed
        self.seek_time = seek_time  # ns, or None
        self.request_id = request_id


def _uint(value, what, maximum=_U32_MAX):
    # bool is an int in Python but not a number in JSON's sense here
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ProtocolError(f"{what} must be an integer from 0 to {maximum}, got {_short(value)}")
    return value


def _short(value):
    text = json.dumps(value) if not isinstance(value, (bytes, bytearray)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _list(msg, key, op):
    value = msg.get(key)
    if not isinstance(value, list):
        raise ProtocolError(f"{op}: field {key!r} must be an array, got {_short(value)}")
    if len(value) > _MAX_ITEMS:
        raise ProtocolError(f"{op}: {len(value)} items in {key!r}, at most {_MAX_ITEMS} per message")
    return value


def parse_client_text(text):
    """A client's text message as :class:`Subscribe` or :class:`Unsubscribe`.
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
        for item in _list(msg, "subscriptions", op):
            if not isinstance(item, dict):
                raise ProtocolError(f"subscribe: each subscription must be an object "
                                    f"{{\"id\": N, \"channelId\": N}}, got {_short(item)}")
            pairs.append((_uint(item.get("id"), "subscribe: subscription 'id'"),
                          _uint(item.get("channelId"), "subscribe: 'channelId'")))
        return Subscribe(pairs)
    if op == "unsubscribe":
        return Unsubscribe([_uint(i, "unsubscribe: each of 'subscriptionIds'")
                            for i in _list(msg, "subscriptionIds", op)])
    if not isinstance(op, str):
        raise ProtocolError(f"text messages need a string field 'op', got {_short(op)}")
    if op in _UNSUPPORTED:
        raise ProtocolError(f"operation {op!r} is not supported by this server (it does not offer the "
                            f"{_UNSUPPORTED[op]!r} capability)")
    raise ProtocolError(f"unknown operation {_short(op)}")


def parse_client_binary(data):
    """A client's binary message as :class:`PlaybackControl`. Raises
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
        if not math.isfinite(speed) or speed <= 0 or speed > 1000:
            raise ProtocolError(f"playback control request: speed {speed:g} (use a factor above 0, "
                                "at most 1000)")
        rest = len(data) - 1 - _PLAYBACK_CONTROL.size
        if rid_len > rest:
            raise ProtocolError(f"playback control request: request id of {rid_len} bytes, {rest} present")
        raw = data[1 + _PLAYBACK_CONTROL.size:1 + _PLAYBACK_CONTROL.size + rid_len]
        try:
            rid = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("playback control request: request id is not UTF-8") from None
        return PlaybackControl(command, speed, seek if had_seek else None, rid)
    if op == CLIENT_OP_MESSAGE_DATA:
        raise ProtocolError("client message data is not supported by this server (it does not offer "
                            "the 'clientPublish' capability)")
    if op == CLIENT_OP_SERVICE_CALL:
        raise ProtocolError("service calls are not supported by this server (it does not offer the "
                            "'services' capability)")
    raise ProtocolError(f"unknown binary opcode {op:#04x}")
