"""Protobuf messages (schema encoding ``protobuf``: a serialized
``FileDescriptorSet``) decoded by ``google.protobuf`` into Arrow values.

The Arrow type is built once from the message descriptor; each field gets a
small converter closure, so a message is one walk over its set fields.
``google.protobuf.Timestamp`` (Foxglove's schemas use it) becomes a UTC
timestamp in µs, ``Duration`` bigint ns, enums their value's name (the
number, as text, for a number the schema does not name), the wrapper types
(``DoubleValue``...) their value; ``Struct``, ``Value``, ``ListValue``,
``Any`` and a message that contains itself become a string holding the
message's JSON form (Spark types cannot nest without end)."""

from __future__ import annotations

import pyarrow as pa

from ...proto.protobuf_types import message_descriptor
from ...proto.schema import Schema
from ..errors import RecordingFormatError
from .base import TIMESTAMP, UINT64, Decoder

_JSON_TYPES = {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
               "google.protobuf.Any"}
_WRAPPERS = {f"google.protobuf.{n}Value" for n in
             ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}


def _scalar(field):
    """(arrow type, converter or None for identity) of a non-message field."""
    from google.protobuf.descriptor import FieldDescriptor as F

    t = field.type
    if t == F.TYPE_ENUM:
        names = {v.number: v.name for v in field.enum_type.values}
        return pa.string(), lambda v: names.get(v, str(v))
    table = {
        F.TYPE_DOUBLE: pa.float64(), F.TYPE_FLOAT: pa.float32(), F.TYPE_BOOL: pa.bool_(),
        F.TYPE_INT32: pa.int32(), F.TYPE_SINT32: pa.int32(), F.TYPE_SFIXED32: pa.int32(),
        F.TYPE_INT64: pa.int64(), F.TYPE_SINT64: pa.int64(), F.TYPE_SFIXED64: pa.int64(),
        F.TYPE_UINT32: pa.int64(), F.TYPE_FIXED32: pa.int64(),
        F.TYPE_UINT64: UINT64, F.TYPE_FIXED64: UINT64,
        F.TYPE_STRING: pa.string(), F.TYPE_BYTES: pa.binary(),
    }
    return table[t], None


class _Message:
    """The Arrow type of one message type and its converter to a Python value."""

    def __init__(self, descriptor, path=()):
        from google.protobuf import json_format

        full = descriptor.full_name
        if full == "google.protobuf.Timestamp":
            self.type = TIMESTAMP
            self.convert = lambda m: m.seconds * 1_000_000 + m.nanos // 1000
            return
        if full == "google.protobuf.Duration":
            self.type = pa.int64()
            self.convert = lambda m: m.seconds * 1_000_000_000 + m.nanos
            return
        if full in _WRAPPERS:
            self.type, conv = _scalar(descriptor.fields_by_name["value"])
            self.convert = (lambda m: m.value) if conv is None else (lambda m: conv(m.value))
            return
        if full in _JSON_TYPES or full in path:
            self.type = pa.string()
            self.convert = lambda m: json_format.MessageToJson(m, indent=None)
            return
        path = (*path, full)
        fields, steps = [], []
        for f in descriptor.fields:
            typ, step = self._field(f, path)
            fields.append(pa.field(f.name, typ))
            steps.append((f.name, step))
        self.type = pa.struct(fields)

        def convert(m):
            return {name: step(m) for name, step in steps}
        self.convert = convert

    @staticmethod
    def _field(f, path):
        from google.protobuf.descriptor import FieldDescriptor as F

        name = f.name
        is_message = f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP)
        if is_message and f.message_type.GetOptions().map_entry:
            entry = f.message_type
            ktype, kconv = _scalar(entry.fields_by_name["key"])
            vf = entry.fields_by_name["value"]
            if vf.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
                vmsg = _Message(vf.message_type, path)
                vtype, vconv = vmsg.type, vmsg.convert
            else:
                vtype, vconv = _scalar(vf)
            kconv = kconv or (lambda k: k)
            vconv = vconv or (lambda v: v)
            return pa.map_(ktype, vtype), lambda m: [(kconv(k), vconv(v)) for k, v in getattr(m, name).items()]
        if is_message:
            sub = _Message(f.message_type, path)
            typ, conv = sub.type, sub.convert
        else:
            typ, conv = _scalar(f)
        if f.is_repeated:
            if conv is None:
                return pa.list_(typ), lambda m: list(getattr(m, name))
            return pa.list_(typ), lambda m: [conv(v) for v in getattr(m, name)]
        if is_message or f.has_presence:
            if conv is None:
                return typ, lambda m: getattr(m, name) if m.HasField(name) else None
            return typ, lambda m: conv(getattr(m, name)) if m.HasField(name) else None
        if conv is None:
            return typ, lambda m: getattr(m, name)
        return typ, lambda m: conv(getattr(m, name))


class ProtobufDecoder(Decoder):
    """``protobuf`` messages of one type, parsed by ``google.protobuf``."""

    def __init__(self, topic, schema_name, schema_data):
        try:
            from google.protobuf import message_factory

            # The descriptor pool the subscribers' decoder builds (and caches) too.
            descriptor = message_descriptor(Schema(schema_name, "protobuf", bytes(schema_data)))
            self._cls = message_factory.GetMessageClass(descriptor)
            self._message = _Message(descriptor)
            if not pa.types.is_struct(self._message.type):
                # a Timestamp, wrapper or Struct message itself: one field "value"
                inner = self._message
                self._message = type("_Wrapped", (), {})()
                self._message.type = pa.struct([pa.field("value", inner.type)])
                self._message.convert = lambda m: {"value": inner.convert(m)}
        except Exception as e:
            raise RecordingFormatError(
                f"channel {topic!r}: schema {schema_name!r} (protobuf) does not parse: "
                f"{type(e).__name__}: {e}") from e
        super().__init__(topic, schema_name, self._message.type)

    def _parse(self, data):
        msg = self._cls()
        msg.ParseFromString(bytes(data))
        return self._message.convert(msg)

    def _build(self, objects):
        return pa.array(objects, type=self.arrow_type)
