"""Client publish (the protocol's ``clientPublish``): a client advertises a
channel on a topic, then each message it sends on it is checked against the
channel's schema and published to the a0py topic, which is typed with that
schema (its publisher declares it, :mod:`a0py.proto.schema`).

Only for topics matching ``--allow-publish`` (:mod:`a0py.view._access`);
otherwise every advertise and message gets an error status naming the flag.

The message encodings a client may use are :data:`ENCODINGS`, one
:class:`Encoding` each: how a channel's schema becomes an a0py
:class:`a0py.Schema`, how a message is checked against it, how it is
published. Another encoding is one more entry (:func:`register`); ROS 2's
``cdr`` (schema ``ros2msg``) is one when this a0py has ROS 2 message types
(``a0py.proto.ros2_types``).

Invariants:

* **Nothing that does not match is written.** A message is checked whole
  before its publisher is called: JSON must be an object (and valid against
  the channel's JSON Schema, when it has one), protobuf must parse as the
  schema's message with no field the schema does not know, CDR must decode as
  the ROS 2 type. A refused message gets an error status naming the topic and
  what is wrong; the connection stays.
* A client's publishers are its own: closed when it unadvertises the channel
  or leaves.
"""

import base64
import binascii
import importlib
import importlib.util
import json
import logging

from ..errors import A0Error, ArgumentError
from ..proto.pubsub import Publisher
from ..proto.schema import Schema
from ..proto.topic import Topic, check_topic_name
from . import _capabilities as C
from . import _protocol as P
from ._schema import BYTES_ENCODING

__all__ = ["ENCODINGS", "ClientPublishing", "Encoding", "register"]

_log = logging.getLogger("a0py.view")


class Encoding:
    """A message encoding clients may publish in: ``name`` (the channel's
    ``encoding``), ``schema_encodings`` (the channel's ``schemaEncoding``
    values it takes; "" for none). Subclasses say how a channel's schema
    becomes an a0py Schema (:meth:`schema`), how a message is checked
    (:meth:`checker`) and published (:meth:`publish`)."""

    name = ""
    schema_encodings = ("",)

    def schema(self, channel):
        """The a0py :class:`a0py.Schema` of ``channel`` (a
        :class:`a0py.view._capabilities.ClientChannel`), or None for none.
        Raises ValueError saying what is wrong with its schema."""
        return None

    def checker(self, schema):
        """A function of a payload (a memoryview) that raises ValueError
        when it does not match ``schema`` and else returns what it read of it
        (for :meth:`publish`); None when every payload matches."""
        return None

    def publish(self, publisher, payload, checked):
        """Publishes ``payload`` (``checked``: what the checker returned)."""
        publisher.pub(payload)


class JsonEncoding(Encoding):
    """``json``: objects; with ``jsonschema`` (a JSON Schema of an object) when
    the channel has one, checked with the ``jsonschema`` package."""

    name = "json"
    schema_encodings = ("", "jsonschema")

    def schema(self, channel):
        text = channel.schema.strip()
        if not text or channel.schema_encoding != "jsonschema":
            return None
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ValueError(f"its JSON Schema is not JSON ({e})") from None
        if doc == {}:
            return None
        return Schema(channel.schema_name or channel.topic, "jsonschema", text)

    def checker(self, schema):
        validate = None
        if schema is not None:
            validate = _json_validator(schema)

        def check(payload):
            try:
                value = json.loads(bytes(payload))
            except (ValueError, RecursionError) as e:
                raise ValueError(f"not JSON ({e})") from None
            if not isinstance(value, dict):
                raise ValueError(f"a JSON message must be an object, not {type(value).__name__}")
            if validate is not None:
                validate(value)
            return value

        return check

    def publish(self, publisher, payload, checked):
        publisher.pub_json(checked)


def _json_validator(schema):
    """value -> None, or ValueError naming the first error against ``schema``'s JSON Schema."""
    try:
        import jsonschema
    except ImportError:
        raise ValueError("checking messages against a JSON Schema needs the jsonschema package: "
                         "pip install 'a0py[view]'") from None
    doc = json.loads(schema.data)
    cls = jsonschema.validators.validator_for(doc)
    try:
        cls.check_schema(doc)
    except jsonschema.SchemaError as e:
        raise ValueError(f"its JSON Schema is not valid: {e.message}") from None
    validator = cls(doc)

    def validate(value):
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            raise ValueError(f"does not match its JSON Schema {schema.name!r}"
                             f"{' at ' + where if where else ''}: {error.message}")

    return validate


class ProtobufEncoding(Encoding):
    """``protobuf``: the schema is the base64 of a FileDescriptorSet defining
    the message named ``schemaName``."""

    name = "protobuf"
    schema_encodings = ("protobuf",)

    def schema(self, channel):
        if not channel.schema_name:
            raise ValueError("a protobuf channel needs its message's full name in 'schemaName'")
        try:
            data = base64.b64decode(channel.schema, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("its protobuf schema must be the base64 of a FileDescriptorSet") from None
        return Schema(channel.schema_name, "protobuf", data)

    def checker(self, schema):
        from ..proto.protobuf_types import message_class

        cls = message_class(schema)
        from google.protobuf.message import DecodeError
        from google.protobuf.unknown_fields import UnknownFieldSet

        def check(payload):
            try:
                message = cls.FromString(bytes(payload))
            except (DecodeError, ValueError, RecursionError) as e:
                raise ValueError(f"does not parse as {schema.name} ({e})") from None
            unknown = len(UnknownFieldSet(message))
            if unknown:
                raise ValueError(f"has {unknown} field(s) that {schema.name} does not define")

        return check


class BytesEncoding(Encoding):
    """Raw bytes (the view's own ``a0py/bytes``): no schema, nothing to check."""

    name = BYTES_ENCODING


class Ros2Encoding(Encoding):
    """ROS 2's ``cdr`` with a ``ros2msg`` schema (the type's full definition),
    decoded by a0py's ROS 2 message types to check it."""

    name = "cdr"
    schema_encodings = ("ros2msg",)

    def __init__(self, types):
        self.types = types

    def schema(self, channel):
        if not channel.schema_name or not channel.schema:
            raise ValueError("a cdr channel needs its ROS 2 type in 'schemaName' and its definition "
                             "in 'schema'")
        return Schema(channel.schema_name, "ros2msg", channel.schema)

    def checker(self, schema):
        codec = self.types.codec_for(schema.name, schema.data.decode("utf-8"))

        def check(payload):
            try:
                codec.decode(bytes(payload), f"a message of {schema.name}")
            except Exception as e:  # noqa: BLE001 - any failure of the decoder means it does not match
                raise ValueError(f"does not decode as {schema.name} ({e})") from None

        return check


#: Message encoding -> Encoding, the ones clients may publish in.
ENCODINGS = {}


def register(encoding):
    """Makes ``encoding`` (an :class:`Encoding`) one clients may publish in."""
    ENCODINGS[encoding.name] = encoding


for _enc in (JsonEncoding(), ProtobufEncoding(), BytesEncoding()):
    register(_enc)
# ROS 2 message types, when this a0py has them (the module comes with the ros2 layer's work).
if importlib.util.find_spec("a0py.proto.ros2_types") is not None:
    try:
        register(Ros2Encoding(importlib.import_module("a0py.proto.ros2_types")))
    except Exception as _e:  # noqa: BLE001 - an optional encoding that does not load is left out
        _log.info("view: ROS 2 messages cannot be published from clients: %s", _e)


class _Channel:
    __slots__ = ("check", "encoding", "publisher", "topic", "written")

    def __init__(self, topic, encoding, publisher, check):
        self.topic = topic
        self.encoding = encoding
        self.publisher = publisher
        self.check = check
        self.written = 0


class ClientPublishing:
    """Client publish on ``hub`` for topics under ``root`` that ``access``
    allows; :meth:`install` offers it."""

    def __init__(self, hub, access, root):
        self.hub = hub
        self.access = access
        self.root = root
        self.channels = {}  # client -> {client channel id: _Channel}

    def install(self):
        """Registers the handlers (always: a refused request says which flag
        allows it) and, when publishing is allowed, the capability."""
        self.hub.offer("clientPublish" if self.access.on("publish") else None, {
            C.ClientAdvertise: self.advertise, C.ClientUnadvertise: self.unadvertise,
            C.ClientMessage: self.message}, ENCODINGS if self.access.on("publish") else ())
        self.hub.detach_hooks.append(self.forget)

    def _off(self, what):
        if not self.access.on("publish"):
            raise P.ProtocolError(f"{what}: this view does not offer 'clientPublish': publishing is off "
                                  "(start the view with --allow-publish GLOB to allow it on the topics "
                                  "matching GLOB)")

    def advertise(self, client, req):
        self._off("advertise")
        mine = self.channels.setdefault(client, {})
        errors = []
        for channel in req.channels:
            if channel.id in mine:
                client.put_control(P.status(P.STATUS_WARNING, f"advertise: channel {channel.id} is "
                                            "advertised already by this client; ignoring this advertisement"))
                continue
            try:
                mine[channel.id] = self._open(channel)
            except P.ProtocolError as e:
                errors.append(str(e))
        if errors:
            raise P.ProtocolError("advertise: " + "; ".join(errors))

    def _open(self, channel):
        try:
            name = check_topic_name(channel.topic)
        except ArgumentError as e:
            raise P.ProtocolError(f"channel {channel.id}: {e}") from None
        if not self.access.allows("publish", name):
            raise P.ProtocolError(self.access.refusal("publish", name))
        encoding = ENCODINGS.get(channel.encoding)
        if encoding is None:
            raise P.ProtocolError(f"channel {channel.id} ({name}): this view takes no {channel.encoding!r} "
                                  f"messages (it takes {', '.join(ENCODINGS)})")
        if channel.schema_encoding not in encoding.schema_encodings:
            takes = " or ".join(repr(e) if e else "none" for e in encoding.schema_encodings)
            raise P.ProtocolError(f"channel {channel.id} ({name}): a {encoding.name} channel's "
                                  f"schemaEncoding is {takes}, not {channel.schema_encoding!r}")
        topic = Topic(name, root=self.root)
        try:
            schema = encoding.schema(channel)
            if schema is not None:
                schema.check(topic)
            check = encoding.checker(schema)
            publisher = Publisher(topic, schema=schema)
        except (ValueError, A0Error) as e:
            raise P.ProtocolError(f"channel {channel.id} ({name}): {e}") from None
        return _Channel(name, encoding, publisher, check)

    def unadvertise(self, client, req):
        self._off("unadvertise")
        mine = self.channels.get(client, {})
        unknown = []
        for cid in req.ids:
            ch = mine.pop(cid, None)
            if ch is None:
                unknown.append(cid)
            else:
                ch.publisher.close()
        if unknown:
            client.put_control(P.status(P.STATUS_WARNING, f"unadvertise: channels {unknown} are not "
                                        "advertised by this client; ignored"))

    def message(self, client, req):
        self._off("client message data")
        ch = self.channels.get(client, {}).get(req.channel_id)
        if ch is None:
            raise P.ProtocolError(f"client message data: channel {req.channel_id} is not advertised by this "
                                  "client (advertise it first)")
        try:
            checked = None if ch.check is None else ch.check(req.payload)
        except ValueError as e:
            raise P.ProtocolError(f"a message for {ch.topic} was not published: it {e}") from None
        try:
            ch.encoding.publish(ch.publisher, req.payload, checked)
        except (A0Error, ValueError) as e:
            raise P.ProtocolError(f"a message for {ch.topic} was not published: {e}") from None
        ch.written += 1

    def writer_ids(self):
        """{topic: {writer id, ...}} of the view's own publishers (its clients' channels)."""
        out = {}
        for mine in self.channels.values():
            for ch in mine.values():
                out.setdefault(ch.topic, set()).add(ch.publisher.writer_id)
        return out

    def forget(self, client):
        for ch in self.channels.pop(client, {}).values():
            ch.publisher.close()
