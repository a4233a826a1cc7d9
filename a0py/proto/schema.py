"""Schemas of typed topics: what a topic's messages are, declared once by a publisher
and learnt by every reader — subscribers, ``a0py echo``/``info``, the recorder, the
view, Spark — without guessing.

A :class:`Schema` is MCAP's triple (name, encoding, data) — encodings ``jsonschema``,
``protobuf`` (data: a binary FileDescriptorSet), ``ros2msg``, ``ros2idl``,
``flatbuffer``..., or ``""`` for raw bytes — plus the *message* encoding it implies
(``json`` for ``jsonschema``, ``protobuf``, ``cdr`` for ROS 2...), MCAP's channel
``message_encoding``.

**Where it lives.** Topic ``T``'s schema is the one frame of its ``schema`` arena
(``T.schema`` beside ``T.pubsub``; docs/format.md has the record): not a header of
every packet (a FileDescriptorSet is kilobytes), not the pubsub arena's header (its
format is the core's and knows nothing of topics). Readers learn it with one read of
a small arena: :func:`topic_schema`.

Invariants:

* **Declared once.** :func:`declare_schema` writes the record under the schema arena's
  lock if there is none; otherwise it reads it under the same lock, and a different
  schema is :class:`SchemaConflictError` (an *inferred* JSON schema yields to the JSON
  schema there instead). The record is the arena's one frame, never rewritten:
  removing the topic removes it.
* **Readers never create it** (a reader would fix its size before the publisher that
  knows it): :func:`topic_schema` reads the arena if it exists, lock-free, and caches
  the schema per mapping of that arena.
* **Nothing read is trusted.** A record that is not a packet with the schema headers
  is a :class:`SchemaError` naming the topic and what is wrong.
"""

import json
import threading

from .. import _core
from ..errors import A0Error, ArenaNotFoundError, ArgumentError, FrameTooLargeError
from .errors import SchemaConflictError, SchemaError
from .topic import DEFAULT_SIZES, SCHEMA, Topic, topic_arena

__all__ = [
    "MESSAGE_ENCODINGS", "SCHEMA_ENCODINGS", "Schema", "declare_schema", "read_schema_arena",
    "schema_record", "topic_schema",
]

#: The schema encodings a Schema takes (MCAP's well-known ones; "" for no schema), each
#: with the message encoding it implies (MCAP's channel ``message_encoding``).
MESSAGE_ENCODINGS = {
    "jsonschema": "json",
    "protobuf": "protobuf",
    "ros2msg": "cdr",
    "ros2idl": "cdr",
    "omgidl": "cdr",
    "ros1msg": "ros1",
    "flatbuffer": "flatbuffer",
    "": "",
}
SCHEMA_ENCODINGS = tuple(MESSAGE_ENCODINGS)

# The record's headers (the packet's payload is the schema data).
_NAME, _ENCODING, _MESSAGE_ENCODING, _ORIGIN = (
    "a0_schema_name", "a0_schema_encoding", "a0_message_encoding", "a0_schema_origin")
_DECLARED, _INFERRED = "declared", "inferred"

_TEXT_ENCODINGS = ("jsonschema", "ros2msg", "ros2idl", "omgidl", "ros1msg")
_PAGE = 4096  # the schema arena is sized in whole pages


class Schema:
    """What a topic's messages are: ``Schema(name, encoding, data)`` in MCAP's
    vocabulary. `name` names the message type (``foxglove.RawImage``,
    ``robot.Odometry``); `encoding` is one of :data:`SCHEMA_ENCODINGS`
    (``jsonschema``, ``protobuf``, ``ros2msg``, ``flatbuffer``..., ``""`` for raw
    bytes); `data` is the schema itself: bytes, or a str (stored as UTF-8) — the JSON
    Schema text, a binary FileDescriptorSet, the ``.msg`` text. `message_encoding`
    (keyword) is the encoding of the messages, by default the one the schema encoding
    implies (:data:`MESSAGE_ENCODINGS`).

    Equal schemas compare equal (protobuf descriptor sets up to what does not change
    the wire format: their ``json_name`` fields and source comments). Raises
    ArgumentError for a name, encoding or data of the wrong kind; :meth:`check` tells
    whether the data parses."""

    __slots__ = ("data", "encoding", "message_encoding", "name")

    def __init__(self, name, encoding, data=b"", *, message_encoding=None):
        if not isinstance(name, str):
            raise ArgumentError(f"a schema name must be a str, not {type(name).__name__}")
        if not isinstance(encoding, str) or encoding not in MESSAGE_ENCODINGS:
            raise ArgumentError(f"schema encoding {encoding!r} is not one of "
                                f"{', '.join(repr(e) for e in SCHEMA_ENCODINGS)}")
        if encoding and not name:
            raise ArgumentError(f"a {encoding} schema needs a name (the message type)")
        if isinstance(data, str):
            data = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
        else:
            raise ArgumentError(f"schema data must be bytes or str, not {type(data).__name__}")
        if message_encoding is None:
            message_encoding = MESSAGE_ENCODINGS[encoding]
        elif not isinstance(message_encoding, str):
            raise ArgumentError(f"message_encoding must be a str, not {type(message_encoding).__name__}")
        self.name = name
        self.encoding = encoding
        self.data = data
        self.message_encoding = message_encoding

    @classmethod
    def json_schema(cls, name, schema):
        """A ``jsonschema`` Schema from `schema`, a dict (a JSON Schema of an object)."""
        if not isinstance(schema, dict):
            raise ArgumentError(f"a JSON Schema is a dict, not {type(schema).__name__}")
        return cls(name, "jsonschema", json.dumps(schema, separators=(",", ":"), sort_keys=True))

    @classmethod
    def ros2(cls, type_name, definition=None):
        """A ``ros2msg`` Schema of ROS 2 message type `type_name` (``sensor_msgs/msg/Imu``
        or ``sensor_msgs/Imu``): its full definition (the type, then each type it needs
        after a line of ``=`` and ``MSG: pkg/Name``, rosbag2's layout in MCAP) read from
        the installed ROS 2 package, or `definition` (that text, given whole). A service
        type (``std_srvs/srv/SetBool``: the schema of an RPC topic) has its ``.srv`` text
        (request, ``---``, response) then each type either half needs, in the same
        layout. Needs rosbags, not rclpy (:mod:`a0py.proto.ros2_types`).

        Raises ArgumentError (a bad type name), SchemaError (the package is not
        installed: the message names the pip package; the package has no such type;
        `definition` does not parse or lacks a type it needs), ExtraNotInstalledError
        (rosbags is not installed)."""
        from . import ros2_types

        name, definition = ros2_types.schema_parts(type_name, definition)
        return cls(name, "ros2msg", definition)

    def describe(self):
        """``foxglove.RawImage (protobuf)``: the name and encodings, for messages."""
        if not self.encoding:
            return f"raw bytes{f' ({self.name})' if self.name else ''}"
        return f"{self.name} ({self.encoding})"

    def check(self, topic=None):
        """Raises SchemaError (naming `topic` if given) unless the data parses as the
        encoding says: a ``jsonschema`` is JSON of an object schema (``"type":
        "object"`` with ``properties``, which the MCAP readers and Foxglove need); a
        ``protobuf`` schema is a FileDescriptorSet that defines the message `name`
        (needs the protobuf package: ExtraNotInstalledError otherwise); text schemas
        are UTF-8. Returns the schema."""
        where = f"topic {topic.name!r}: " if topic is not None else ""
        if self.encoding == "jsonschema":
            try:
                doc = json.loads(self.data)
            except ValueError as e:
                raise SchemaError(f"{where}jsonschema {self.name!r} is not JSON ({e})") from None
            if not isinstance(doc, dict) or doc.get("type") != "object" or not isinstance(
                    doc.get("properties"), dict):
                raise SchemaError(f"{where}jsonschema {self.name!r} must describe an object: "
                                  '{"type": "object", "properties": {...}} (MCAP readers and '
                                  "Foxglove read JSON messages by their properties)")
        elif self.encoding == "protobuf":
            from . import protobuf_types

            protobuf_types.message_descriptor(self, where)
        elif self.encoding in _TEXT_ENCODINGS:
            try:
                self.data.decode("utf-8")
            except UnicodeDecodeError as e:
                raise SchemaError(f"{where}{self.encoding} schema {self.name!r} is not UTF-8 "
                                  f"text ({e.reason} at byte {e.start})") from None
        elif self.encoding == "flatbuffer" and not self.data:
            raise SchemaError(f"{where}flatbuffer schema {self.name!r} has no data (a binary "
                              "flatbuffer schema, .bfbs)")
        return self

    def json(self):
        """The JSON Schema of a ``jsonschema`` Schema, as a dict."""
        if self.encoding != "jsonschema":
            raise SchemaError(f"{self.describe()} is not a JSON Schema")
        return json.loads(self.data)

    def _key(self):
        if self.encoding == "protobuf":
            from . import protobuf_types

            data = protobuf_types.canonical_descriptor_set(self.data)
        else:
            data = self.data
        return (self.name, self.encoding, self.message_encoding, data)

    def __eq__(self, other):
        if not isinstance(other, Schema):
            return NotImplemented
        if (self.name, self.encoding, self.message_encoding) != (
                other.name, other.encoding, other.message_encoding):
            return False
        return self.data == other.data or self._key() == other._key()

    def __hash__(self):
        return hash((self.name, self.encoding, self.message_encoding))

    def __repr__(self):
        extra = "" if self.message_encoding == MESSAGE_ENCODINGS[self.encoding] else \
            f", message_encoding={self.message_encoding!r}"
        return f"Schema({self.name!r}, {self.encoding!r}, <{len(self.data)} bytes>{extra})"


# -- the record in T.schema


def schema_record(schema, inferred=False):
    """The bytes of `schema`'s record (an a0py packet: the schema headers, the data as
    payload), as the schema arena holds it."""
    headers = [(_NAME, schema.name), (_ENCODING, schema.encoding),
               (_MESSAGE_ENCODING, schema.message_encoding),
               (_ORIGIN, _INFERRED if inferred else _DECLARED)]
    return _core.Packet(headers, schema.data).to_bytes()


def _parse_record(topic, data):
    """(Schema, inferred) from a record's bytes; SchemaError if it is not one."""
    try:
        pkt = _core.Packet.from_bytes(data)
        headers = pkt.headers
    except A0Error as e:
        raise SchemaError(f"topic {topic.name!r}: its schema arena ({topic.location(SCHEMA)}) "
                          f"does not hold a schema record: {e}") from None
    missing = [h for h in (_NAME, _ENCODING, _MESSAGE_ENCODING) if h not in headers]
    if missing:
        raise SchemaError(f"topic {topic.name!r}: the schema record lacks {', '.join(missing)}")
    try:
        schema = Schema(headers[_NAME], headers[_ENCODING], pkt.payload,
                        message_encoding=headers[_MESSAGE_ENCODING])
    except ArgumentError as e:
        raise SchemaError(f"topic {topic.name!r}: the schema record is not valid: {e}") from None
    return schema, headers.get(_ORIGIN) == _INFERRED


# Per process: (root, topic name) -> (the schema arena mapping it was read from, Schema).
_known = {}
_known_lock = threading.Lock()


def _remember(topic, arena, schema):
    with _known_lock:
        _known[(topic.root, topic.name)] = (arena, schema)


def _schema_arena_size(record_size):
    # An arena of one frame holding the record, rounded up to pages; at least the
    # default, so a larger schema declared by someone else later still compares.
    need = _core.arena_size_for(record_size)
    return max(DEFAULT_SIZES[SCHEMA], (need + _PAGE - 1) // _PAGE * _PAGE)


def declare_schema(topic, schema, inferred=False):
    """Makes `schema` the schema of `topic` (a name or Topic) and returns the topic's
    schema: `schema` itself if the topic had none, else the one it has, if equal.

    `inferred`: the schema was inferred from a message (``pub_json``), not declared
    by the user; a topic that already has a schema of the same encoding keeps it and
    that one is returned, so publishers that inferred from different first messages
    do not conflict.

    Raises SchemaConflictError (the topic has another schema; the message says both
    and how to remove the topic), SchemaError (an unreadable record is there), and
    the errors of opening arenas."""
    topic = Topic.of(topic)
    record = schema_record(schema, inferred)
    sized = Topic(topic.name, root=topic.root, size={SCHEMA: _schema_arena_size(len(record))})
    arena = topic_arena(sized, SCHEMA)
    transport = _core.Transport(arena)
    existing_inferred = False
    with transport.lock() as t:
        if t.empty:
            try:
                buf = t.alloc(len(record))
            except FrameTooLargeError:
                raise SchemaError(
                    f"topic {topic.name!r}: its schema arena ({arena.size} bytes, made by another "
                    f"process) cannot hold this schema ({len(record)} bytes); remove the topic "
                    f"(`a0py rm {topic.name}`) and declare it again") from None
            buf[:] = record
            t.commit()
            existing = schema
        else:
            t.jump_head()
            existing, existing_inferred = _parse_record(topic, t.frame().tobytes())
    if existing != schema and not (inferred and existing.encoding == schema.encoding):
        how = " (inferred by pub_json from its first message)" if existing_inferred else ""
        raise SchemaConflictError(
            f"topic {topic.name!r} already carries {existing.describe()}{how}; this publisher "
            f"declares {schema.describe()}. A topic has one schema for as long as it exists: "
            f"publish to another topic, or remove this one (`a0py rm {topic.name}`, "
            "a0py.proto.unlink_topic) once nothing uses it")
    _remember(topic, arena, existing)
    return existing


def topic_schema(topic):
    """The schema of `topic` (a name or Topic): a :class:`Schema`, or None if it has
    none (yet). Cheap after the first call: the schema is cached per mapping of the
    topic's schema arena, and a topic's schema never changes (a topic removed and
    made again is a new mapping). Never creates anything.

    Raises SchemaError (the schema arena holds no valid record), ArgumentError (bad
    topic name)."""
    topic = Topic.of(topic)
    known = _known.get((topic.root, topic.name))
    try:
        arena = topic_arena(topic, SCHEMA, create=False)
    except ArenaNotFoundError:
        return None
    if known is not None and known[0] is arena:
        return known[1]
    found = read_schema_arena(arena, topic)
    if found is None:
        return None  # created, record not yet written: none so far
    _remember(topic, arena, found[0])
    return found[0]




def read_schema_arena(arena, topic):
    """``(Schema, inferred)`` from `topic`'s schema arena `arena` (an open Arena: how
    tools that open arenas by name and close them read it), or None if it holds no
    record yet; `inferred` tells a schema ``pub_json`` inferred from a message. Nothing
    is cached. Raises SchemaError for a record that is not valid."""
    frame = _core.Transport(arena).read_next()
    if frame is None:
        return None
    return _parse_record(Topic.of(topic), frame[1])
