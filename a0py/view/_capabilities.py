"""The messages of the protocol's capabilities that drive a0py: client publish,
parameters, services and the connection graph. Checked parsers for what
clients send (each returns a request object or raises
:class:`ProtocolError`, whatever the input), encoders for what the server
sends. The wire forms are those of ``foxglove-sdk``'s server (a test holds the
two to each other).

Client to server (text): ``advertise`` {channels: [{id, topic, encoding,
schemaName, schema?, schemaEncoding?}]}, ``unadvertise`` {channelIds},
``getParameters`` {parameterNames, id?}, ``setParameters`` {parameters:
[{name, value?, type?}], id?}, ``subscribeParameterUpdates`` and
``unsubscribeParameterUpdates`` {parameterNames}, ``subscribeConnectionGraph``
and ``unsubscribeConnectionGraph``. Binary: 0x01 message data (u32 client
channel id, payload), 0x02 service call request (u32 service id, u32 call id,
u32 length + encoding, payload).

Server to client (text): ``parameterValues`` {parameters, id?},
``advertiseServices`` {services}, ``unadvertiseServices`` {serviceIds},
``serviceCallFailure`` {serviceId, callId, message}, ``connectionGraphUpdate``
{publishedTopics, subscribedTopics, advertisedServices, removedTopics,
removedServices}. Binary: 0x03 service call response (u32 service id, u32 call
id, u32 length + encoding, payload).
"""

import base64
import binascii
import dataclasses
import math
import struct

from ._fields import array as _list
from ._fields import dumps as _dumps
from ._fields import short as _short
from ._fields import string
from ._fields import uint as _uint
from .errors import ProtocolError

__all__ = [
    "BYTE_ARRAY", "FLOAT64", "FLOAT64_ARRAY", "ClientAdvertise", "ClientMessage", "ClientUnadvertise",
    "GetParameters", "GraphSubscription", "ParameterSubscription", "ServiceCall", "SetParameters",
    "advertise_services", "connection_graph_update", "parameter_values", "parse_binary", "parse_text",
    "service_call_failure", "service_call_response", "unadvertise_services",
]

CLIENT_OP_MESSAGE_DATA = 0x01
CLIENT_OP_SERVICE_CALL = 0x02
OP_SERVICE_CALL_RESPONSE = 0x03

# The protocol's parameter type hints (a value's JSON alone cannot tell them).
BYTE_ARRAY = "byte_array"
FLOAT64 = "float64"
FLOAT64_ARRAY = "float64_array"
_TYPES = (BYTE_ARRAY, FLOAT64, FLOAT64_ARRAY)

_U32 = struct.Struct("<I")
_CALL_HEAD = struct.Struct("<III")
_RESPONSE_HEAD = struct.Struct("<BIII")
_MAX_NAME = 1024
_MAX_ENCODING = 256
_MAX_DEPTH = 64

#: The text operations parsed here (the others are _protocol's).
TEXT_OPS = frozenset({
    "advertise", "unadvertise", "getParameters", "setParameters", "subscribeParameterUpdates",
    "unsubscribeParameterUpdates", "subscribeConnectionGraph", "unsubscribeConnectionGraph",
})


def _str(value, what, maximum=_MAX_NAME, empty=False):
    return string(value, what, maximum, empty)


def _request_id(msg, op):
    rid = msg.get("id")
    if rid is None:
        return None
    return _str(rid, f"{op}: 'id'", empty=True)


# -- requests


@dataclasses.dataclass(slots=True)
class ClientChannel:
    """One channel a client advertises: ``id`` (the client's), ``topic``,
    ``encoding`` (the messages'), ``schema_name``, ``schema`` (text, "" when
    none), ``schema_encoding`` ("" when none)."""

    id: int
    topic: str
    encoding: str
    schema_name: str
    schema: str
    schema_encoding: str


@dataclasses.dataclass(slots=True)
class ClientAdvertise:
    """A checked ``advertise`` from a client: ``channels``, a list of :class:`ClientChannel`."""

    channels: list


@dataclasses.dataclass(slots=True)
class ClientUnadvertise:
    """A checked ``unadvertise`` from a client: ``ids``, its channel ids."""

    ids: list


@dataclasses.dataclass(slots=True)
class ClientMessage:
    """A client's message data: ``channel_id`` (the client's), ``payload`` (a memoryview)."""

    channel_id: int
    payload: memoryview


@dataclasses.dataclass(slots=True)
class GetParameters:
    """A checked ``getParameters``: ``names`` (empty: every parameter), ``request_id``."""

    names: list
    request_id: object


@dataclasses.dataclass(slots=True)
class SetParameters:
    """A checked ``setParameters``: ``parameters``, a list of (name, value,
    type); value :data:`UNSET` for a parameter sent without one (to remove
    it), bytes for a ``byte_array``."""

    parameters: list
    request_id: object


@dataclasses.dataclass(slots=True)
class ParameterSubscription:
    """A checked ``subscribeParameterUpdates`` (``subscribe`` True) or ``unsubscribeParameterUpdates``."""

    names: list
    subscribe: bool


@dataclasses.dataclass(slots=True)
class GraphSubscription:
    """A checked ``subscribeConnectionGraph`` (``subscribe`` True) or ``unsubscribeConnectionGraph``."""

    subscribe: bool


@dataclasses.dataclass(slots=True)
class ServiceCall:
    """A checked service call request: ``service_id``, ``call_id``,
    ``encoding``, ``payload`` (a memoryview)."""

    service_id: int
    call_id: int
    encoding: str
    payload: memoryview


#: The value of a parameter a client sets without one (it removes the parameter).
UNSET = object()


def _client_channel(item):
    if not isinstance(item, dict):
        raise ProtocolError(f"advertise: each channel must be an object {{\"id\", \"topic\", \"encoding\", "
                            f"\"schemaName\"}}, got {_short(item)}")
    schema = item.get("schema", "")
    schema = "" if schema is None else _str(schema, "advertise: 'schema'", 1 << 20, empty=True)
    schema_encoding = item.get("schemaEncoding", "")
    schema_encoding = "" if schema_encoding is None else _str(
        schema_encoding, "advertise: 'schemaEncoding'", _MAX_ENCODING, empty=True)
    return ClientChannel(_uint(item.get("id"), "advertise: channel 'id'"),
                         _str(item.get("topic"), "advertise: 'topic'"),
                         _str(item.get("encoding"), "advertise: 'encoding'", _MAX_ENCODING),
                         _str(item.get("schemaName", ""), "advertise: 'schemaName'", empty=True),
                         schema, schema_encoding)


def _depth(value, depth=0):
    if depth > _MAX_DEPTH:
        raise ProtocolError(f"setParameters: a value nested more than {_MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for v in value.values():
            _depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _depth(v, depth + 1)


def _parameter(item):
    if not isinstance(item, dict):
        raise ProtocolError(f"setParameters: each parameter must be an object {{\"name\", \"value\"}}, "
                            f"got {_short(item)}")
    name = _str(item.get("name"), "setParameters: parameter 'name'")
    kind = item.get("type")
    if kind is not None and kind not in _TYPES:
        raise ProtocolError(f"setParameters: parameter {name!r}: unknown type {_short(kind)} (one of "
                            f"{', '.join(_TYPES)}, or none)")
    if "value" not in item or item["value"] is None:
        return name, UNSET, kind
    value = item["value"]
    _depth(value)
    if kind == BYTE_ARRAY:
        if not isinstance(value, str):
            raise ProtocolError(f"setParameters: parameter {name!r} of type byte_array: the value must be "
                                f"a base64 string, got {_short(value)}")
        try:
            value = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ProtocolError(f"setParameters: parameter {name!r} of type byte_array: the value is not "
                                "base64") from None
    elif kind == FLOAT64:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProtocolError(f"setParameters: parameter {name!r} of type float64: the value must be a "
                                f"number, got {_short(value)}")
        value = float(value)
    elif kind == FLOAT64_ARRAY:
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                              for v in value):
            raise ProtocolError(f"setParameters: parameter {name!r} of type float64_array: the value must "
                                f"be an array of numbers, got {_short(value)}")
        value = [float(v) for v in value]
    return name, value, kind


def _names(msg, op):
    return [_str(n, f"{op}: each of 'parameterNames'") for n in _list(msg, "parameterNames", op)]


def parse_text(op, msg):
    """The request of text operation ``op`` (one of :data:`TEXT_OPS`) from the
    parsed JSON object ``msg``. Raises :class:`ProtocolError`."""
    if op == "advertise":
        return ClientAdvertise([_client_channel(c) for c in _list(msg, "channels", op)])
    if op == "unadvertise":
        return ClientUnadvertise([_uint(i, "unadvertise: each of 'channelIds'")
                                  for i in _list(msg, "channelIds", op)])
    if op == "getParameters":
        return GetParameters(_names(msg, op), _request_id(msg, op))
    if op == "setParameters":
        return SetParameters([_parameter(p) for p in _list(msg, "parameters", op)], _request_id(msg, op))
    if op in ("subscribeParameterUpdates", "unsubscribeParameterUpdates"):
        return ParameterSubscription(_names(msg, op), op == "subscribeParameterUpdates")
    if op in ("subscribeConnectionGraph", "unsubscribeConnectionGraph"):
        return GraphSubscription(op == "subscribeConnectionGraph")
    raise ProtocolError(f"unknown operation {_short(op)}")


def parse_binary(op, data):
    """The request of binary opcode ``op`` (client message data or service
    call) from the whole message ``data``. Raises :class:`ProtocolError`."""
    view = memoryview(data)
    if op == CLIENT_OP_MESSAGE_DATA:
        if len(view) < 1 + _U32.size:
            raise ProtocolError(f"client message data of {len(view)} bytes is too short (at least "
                                f"{1 + _U32.size}: opcode, u32 channel id)")
        return ClientMessage(_U32.unpack_from(view, 1)[0], view[1 + _U32.size:])
    if op == CLIENT_OP_SERVICE_CALL:
        head = 1 + _CALL_HEAD.size
        if len(view) < head:
            raise ProtocolError(f"service call request of {len(view)} bytes is too short (at least {head}: "
                                "opcode, u32 service id, u32 call id, u32 encoding length)")
        service_id, call_id, length = _CALL_HEAD.unpack_from(view, 1)
        if length > min(_MAX_ENCODING, len(view) - head):
            raise ProtocolError(f"service call request {call_id}: an encoding of {length} bytes "
                                f"({len(view) - head} present, at most {_MAX_ENCODING})")
        try:
            encoding = bytes(view[head:head + length]).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"service call request {call_id}: its encoding is not UTF-8") from None
        return ServiceCall(service_id, call_id, encoding, view[head + length:])
    raise ProtocolError(f"unknown binary opcode {op:#04x}")


# -- what the server sends


def _parameter_json(name, value, kind):
    out = {"name": name}
    if kind is not None:
        out["type"] = kind
    if value is not UNSET:
        if isinstance(value, (bytes, bytearray, memoryview)):
            value = base64.b64encode(bytes(value)).decode("ascii")
        out["value"] = value
    return out


def parameter_values(parameters, request_id=None):
    """The ``parameterValues`` message of (name, value, type) triples (value
    :data:`UNSET`: the parameter is gone; bytes go as base64)."""
    msg = {"op": "parameterValues", "parameters": [_parameter_json(*p) for p in parameters]}
    if request_id is not None:
        msg["id"] = request_id
    return _dumps(msg)


def type_of(value):
    """The type hint the protocol gives ``value`` (None for the types JSON tells)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return BYTE_ARRAY
    if isinstance(value, float):
        return FLOAT64
    if isinstance(value, list) and value and all(isinstance(v, float) for v in value):
        return FLOAT64_ARRAY
    return None


def finite(value):
    """Whether ``value`` (parameter JSON) holds only finite numbers (JSON has no NaN)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


def advertise_services(services):
    """The ``advertiseServices`` message of service dicts (``id``, ``name``,
    ``type``, and ``request``/``response`` or ``requestSchema``/``responseSchema``)."""
    return _dumps({"op": "advertiseServices", "services": list(services)})


def unadvertise_services(ids):
    return _dumps({"op": "unadvertiseServices", "serviceIds": list(ids)})


def service_call_response(service_id, call_id, encoding, payload):
    """The binary service call response: opcode 3, u32 service id, u32 call
    id, u32 length + encoding, then the payload."""
    enc = encoding.encode("utf-8")
    return _RESPONSE_HEAD.pack(OP_SERVICE_CALL_RESPONSE, service_id, call_id, len(enc)) + enc + bytes(payload)


def service_call_failure(service_id, call_id, message):
    return _dumps({"op": "serviceCallFailure", "serviceId": service_id, "callId": call_id, "message": message})


def connection_graph_update(published=None, subscribed=None, services=None, removed_topics=(),
                            removed_services=()):
    """The ``connectionGraphUpdate`` message: ``published``, ``subscribed``
    ({topic: [ids]}) and ``services`` ({service: [ids]}) that changed, and the
    topics and services gone."""
    return _dumps({
        "op": "connectionGraphUpdate",
        "publishedTopics": [{"name": t, "publisherIds": list(ids)} for t, ids in (published or {}).items()],
        "subscribedTopics": [{"name": t, "subscriberIds": list(ids)} for t, ids in (subscribed or {}).items()],
        "advertisedServices": [{"name": s, "providerIds": list(ids)} for s, ids in (services or {}).items()],
        "removedTopics": list(removed_topics),
        "removedServices": list(removed_services),
    })
