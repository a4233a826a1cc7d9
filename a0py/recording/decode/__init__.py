"""Decoders that turn the messages of an MCAP channel into Arrow values,
from the channel's schema (docs/spark.md "Decoded columns").

    dec = decoder_for("/imu", "sensor_msgs/msg/Imu", "ros2msg", schema_data, "cdr")
    values, errors = dec.decode([msg1, msg2])   # pa.Array of dec.arrow_type, pa.Array of str
    dec.decode_one(msg1)                        # {"header": {...}, ...} or DecodeError

| message encoding | schema encoding | decoded by |
|---|---|---|
| ``cdr`` | ``ros2msg``, ``ros2idl`` | ``rosbags`` (:mod:`.ros`) |
| ``ros1`` | ``ros1msg`` | ``rosbags`` |
| ``protobuf`` | ``protobuf`` (a FileDescriptorSet) | ``google.protobuf`` (:mod:`.protobuf`) |
| ``json`` | ``jsonschema`` | the schema's struct (:mod:`.jsonschema`) |
| ``json`` | none | the JSON text, checked |

Anything else (raw bytes, ``flatbuffer``, an unknown name) raises
:class:`DecodeUnsupported`. Only ``pyarrow`` is needed to import this
package; each encoding imports its library when a decoder is made for it."""

from __future__ import annotations

from .base import Decoder
from .errors import DecodeError, DecoderMissing, DecodeUnsupported

_ROS = {("cdr", "ros2msg"), ("cdr", "ros2idl"), ("ros1", "ros1msg")}


def decoder_for(channel_topic, schema_name, schema_encoding, schema_data, message_encoding):
    """The :class:`Decoder` of a channel's messages.

    ``schema_name``/``schema_encoding``/``schema_data`` are the channel's
    schema record (``""``/``""``/``b""`` for a channel without a schema;
    ``schema_data`` bytes-like, or text).

    Raises :class:`~a0py.recording.errors.RecordingFormatError` when the
    schema does not parse, and :class:`DecodeUnsupported` when a0py cannot
    decode the encoding; both name the channel and the schema."""
    schema_name = schema_name or ""
    schema_encoding = schema_encoding or ""
    schema_data = schema_data.encode() if isinstance(schema_data, str) else (schema_data or b"")
    what = f"channel {channel_topic!r} (message encoding {message_encoding!r}"
    what += f", schema {schema_name!r} in {schema_encoding!r})" if schema_encoding else ", no schema)"
    if message_encoding == "json":
        if not schema_encoding:
            from .jsonschema import JsonTextDecoder

            return JsonTextDecoder(channel_topic)
        if schema_encoding == "jsonschema":
            from .jsonschema import JsonDecoder

            return JsonDecoder(channel_topic, schema_name, schema_data)
    elif message_encoding == "protobuf" and schema_encoding == "protobuf":
        _needs(what, "google.protobuf", "protobuf", "typed")
        from .protobuf import ProtobufDecoder

        return ProtobufDecoder(channel_topic, schema_name, schema_data)
    elif (message_encoding, schema_encoding) in _ROS:
        _needs(what, "rosbags", "rosbags", "ros")
        from .ros import RosDecoder

        return RosDecoder(channel_topic, schema_name, schema_encoding, schema_data, message_encoding)
    raise DecodeUnsupported(
        f"{what}: a0py cannot decode this encoding (it decodes cdr with ros2msg/ros2idl, ros1 with "
        f"ros1msg, protobuf, json with or without jsonschema); read it with decode=false to get its bytes")


def _needs(what, module, package, extra):
    """Raises :class:`DecodeUnsupported` naming the channel and the package to
    install when ``module`` (the decoder's library) is not importable: the
    schema is not at fault, and the channel still reads as bytes."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package (google) missing
        found = False
    if not found:
        raise DecoderMissing(
            f"{what}: decoding it needs {package}, which is not installed here (pip install 'a0py[{extra}]'); "
            "read it with decode=false to get its bytes", package, extra)


__all__ = ["DecodeError", "DecodeUnsupported", "Decoder", "DecoderMissing", "decoder_for"]
