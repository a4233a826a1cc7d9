"""Channels whose messages have a schema: a live typed topic (its schema
declared by its publisher, :func:`a0py.proto.topic_schema`) or a recording's
channel (a typed topic's payload channel, or any other tool's channel).

Such a channel is advertised with its real schema and message encoding, as
``foxglove-sdk``'s server advertises its channels: ``protobuf`` and
``flatbuffer`` schemas base64-encoded (binary), the text ones (``jsonschema``,
``ros2msg``, ...) as they are; the messages go to Foxglove clients unchanged.

The page gets two things more (see :class:`a0py.view._schema.PayloadKind`):

* ``render``: for a message encoding the page cannot read (protobuf, and CDR
  when a0py has a decoder for it), a function of the payload giving the JSON
  of its fields, which is what the page is sent, so it shows the message field
  by field. Protobuf decodes through ``google.protobuf`` with a class built
  from the schema; bytes fields longer than :data:`BYTES_SHOWN` bytes show as
  their size. A message that does not decode is sent as a JSON object naming
  the error, never dropped.
* ``image``: ``raw`` for ``foxglove.RawImage``, ``compressed`` for
  ``foxglove.CompressedImage``. The page gets those messages as they are
  (protobuf; it reads the few fields of an image itself and draws the pixels),
  at most :data:`IMAGE_MAX_HZ` a second (the hub conflates them: the newest
  frame is kept, the others are dropped).
"""

import base64
import json
import logging
import math

from ._schema import PayloadKind

__all__ = ["BYTES_SHOWN", "IMAGE_MAX_HZ", "IMAGE_SCHEMAS", "kind_of_schema"]

_log = logging.getLogger("a0py.view")

#: Image frames a second sent to a page, per channel (the Foxglove app gets every one).
IMAGE_MAX_HZ = 15
#: Bytes fields up to this size are shown (hex); longer ones as their size.
BYTES_SHOWN = 64
IMAGE_SCHEMAS = {"foxglove.RawImage": "raw", "foxglove.CompressedImage": "compressed"}
_BINARY_SCHEMAS = ("protobuf", "flatbuffer")


def schema_text(schema_encoding, data):
    """The ``schema`` field of an advertise: base64 of a binary schema (as the
    Foxglove WebSocket protocol requires for ``protobuf`` and ``flatbuffer``),
    else the text."""
    data = bytes(data)
    if schema_encoding in _BINARY_SCHEMAS:
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", "replace")


def kind_of_schema(topic, name, schema_encoding, data, message_encoding):
    """The :class:`PayloadKind` of a channel of ``topic`` whose messages are
    ``message_encoding`` with the schema (``name``, ``schema_encoding``,
    ``data``; an empty encoding: no schema)."""
    kind = PayloadKind(message_encoding, name or "", schema_text(schema_encoding, data) if schema_encoding else "",
                       schema_encoding or None)
    if message_encoding == "protobuf" and schema_encoding == "protobuf":
        kind.image = IMAGE_SCHEMAS.get(name)
        if kind.image is None:
            kind.render = _protobuf_renderer(topic, name, data)
    elif message_encoding == "cdr" and schema_encoding:
        kind.render = _decoder_renderer(topic, name, schema_encoding, data, message_encoding)
    return kind


def _dumps(value):
    """Compact JSON of ``value``; numbers JSON cannot hold (NaN, inf) as
    strings, other values (bytes, times) by their ``str``."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False, default=_plain).encode()
    except ValueError:
        return json.dumps(_finite(value), separators=(",", ":"), default=_plain).encode()


def _plain(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        return value.hex() if len(value) <= BYTES_SHOWN else f"<{len(value)} bytes>"
    return str(value)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _error(topic, name, e):
    return _dumps({"a0py.decodeError": f"{topic}: a message that does not decode as {name}: {e}"})


def _protobuf_renderer(topic, name, data):
    """payload -> JSON of its fields, or None when the schema gives no class
    (it does not parse, or protobuf is not installed: the page shows bytes)."""
    from ..errors import A0Error
    from ..proto.protobuf_types import message_class, message_fields
    from ..proto.schema import Schema

    try:
        cls = message_class(Schema(name, "protobuf", bytes(data)), f"channel {topic!r}: ")
    except A0Error as e:
        _log.info("view: channel %r is shown as bytes: %s", topic, e)
        return None
    from google.protobuf.message import DecodeError

    def render(payload):
        # Runs on the server's loop for bytes from shared memory or a file: whatever they
        # hold, the answer is JSON, never an exception that would stop the channel's reader.
        try:
            return _dumps(message_fields(cls.FromString(bytes(payload)), BYTES_SHOWN))
        except (DecodeError, ValueError, RecursionError) as e:
            return _error(topic, name, e)
        except Exception as e:  # noqa: BLE001 - see above
            return _error(topic, name, f"{type(e).__name__}: {e}")

    return render


def _decoder_renderer(topic, name, schema_encoding, data, message_encoding):
    """payload -> JSON, through a0py's recording decoders when this a0py has
    them (``a0py.recording.decode``) and they decode this encoding; else None
    (the page shows the bytes)."""
    try:
        from ..recording import decode
    except ImportError:
        return None
    try:
        decoder = decode.decoder_for(topic, name, schema_encoding, bytes(data), message_encoding)
    except Exception as e:  # noqa: BLE001 - an encoding it cannot decode, a schema that does not parse
        _log.info("view: channel %r is shown as bytes: %s", topic, e)
        return None

    def render(payload):
        try:
            return _dumps(decoder.decode_one(bytes(payload)))
        except Exception as e:  # noqa: BLE001 - as in _protobuf_renderer: never stop the reader
            return _error(topic, name, f"{type(e).__name__}: {e}")

    return render
