"""Typed values on topics: what a :class:`a0py.Publisher` makes of the values it is
given, and how the packets a subscriber reads decode.

Publishing. :class:`PublisherTyping` is the encoder a Publisher's writer calls for
every value that is not bytes, a str or a Packet:

=================================  ============================================
value                              payload, and the topic's schema
=================================  ============================================
numpy array                        ``a0py.NDArray`` (protobuf; ``foxglove.RawImage``
                                   on an image topic), array bytes copied once
protobuf message                   its bytes; the message type's FileDescriptorSet
Foxglove SDK message               its bytes (``encode()``); its ``get_schema()``
(``foxglove.messages.*``)
other bytes-like objects           as they are (raw bytes need no schema)
=================================  ============================================

``pub_json`` and ``pub_image`` come here too. The first typed value declares the
topic's schema (:func:`a0py.proto.schema.declare_schema`) unless the publisher was
made with one; after that, a value of another type is a SchemaError naming the
topic, raised before anything is written.

Reading. :func:`typing_for` gives the object a subscriber hands its packets
(``Packet.schema``, ``decode()``, ``array()`` delegate to it): it learns the topic's
schema on first use and picks the decoder for it.

Invariants:

* **Errors before writing.** Every check (dtype, contiguity, message type, schema,
  frame size) runs in the encoder, before the writer takes the lock: a refused value
  publishes nothing.
* **Per-value work is a dict lookup, or none.** Encoders are chosen once per value
  type, and schemas checked once per message class; an array layout (dtype, shape,
  strides) encoded once is then written by the publisher's compiled writer with no
  call here (``Publisher._remember_array``), and read back by a compiled viewer
  (``array_hook``, :mod:`a0py.proto._ndarray`) with no parsing.
* numpy, protobuf and the Foxglove packages are imported on first use; without them
  the error names the extra (``a0py[typed]``).
"""

import json
import sys
import threading

from .._core import PacketTyping, arena_size_for
from ..errors import ArgumentError, FrameTooLargeError
from . import arrays, ros2_types
from . import protobuf_types as pbtypes
from . import protobuf_wire as wire
from .errors import DecodeError, ExtraNotInstalledError, SchemaError
from .json_schema import infer_json_schema
from .schema import Schema, declare_schema, topic_schema
from .sizes import PACKET_OVERHEAD, power_of_two_size, size_text
from .topic import Topic

__all__ = [
    "NDARRAY_SCHEMA", "PublisherTyping", "TopicTyping", "compressed_image_schema",
    "raw_image_schema", "suggested_arena_size", "typing_for",
]

#: The schema of array topics.
NDARRAY_SCHEMA = Schema(wire.NDARRAY_NAME, "protobuf", wire.NDARRAY_DESCRIPTOR_SET)

_COMPRESSED_IMAGE_NAME = "foxglove.CompressedImage"


def suggested_arena_size(payload_size):
    """An arena size (a power of two, at least 4 MiB) whose ring holds four packets of
    `payload_size` bytes: room for a zero-copy reader to finish with one frame while
    the publisher writes the next ones."""
    return power_of_two_size(arena_size_for(PACKET_OVERHEAD + payload_size, 4), 4 << 20)


def _foxglove_schema(name, what):
    """The schema of Foxglove's well-known message `name` (``RawImage``) from
    Foxglove's packages: ``foxglove_schemas_protobuf`` (with protobuf), else the
    ``foxglove-sdk``."""
    try:
        module = __import__(f"foxglove_schemas_protobuf.{name}_pb2", fromlist=[name])
        descriptor = getattr(module, name).DESCRIPTOR
        return Schema(descriptor.full_name, "protobuf", pbtypes.descriptor_set_of(descriptor))
    except ImportError:
        pass
    try:
        import foxglove.messages as messages

        found = getattr(messages, name).get_schema()
        return Schema(found.name, found.encoding, bytes(found.data))
    except ImportError:
        raise ExtraNotInstalledError(
            f"{what} need Foxglove's schemas: pip install 'a0py[typed]' (or pip install "
            "foxglove-schemas-protobuf)") from None


_well_known = {}


def raw_image_schema():
    """The ``foxglove.RawImage`` schema (from Foxglove's packages)."""
    if "RawImage" not in _well_known:
        _well_known["RawImage"] = _foxglove_schema("RawImage", "raw images")
    return _well_known["RawImage"]


def compressed_image_schema():
    """The ``foxglove.CompressedImage`` schema (from Foxglove's packages)."""
    if "CompressedImage" not in _well_known:
        _well_known["CompressedImage"] = _foxglove_schema("CompressedImage", "compressed images")
    return _well_known["CompressedImage"]


def _is_ndarray(value):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.ndarray)


def _is_foxglove_message(value):
    cls = type(value)
    return cls.__module__.startswith("foxglove") and hasattr(cls, "get_schema") and hasattr(
        value, "encode")


class Encoded:
    """A payload already split as the writer wants it: ``prefix`` then ``body``
    (how ``pub_image`` hands its fields and pixels to the writer)."""

    __slots__ = ("body", "prefix")

    def __init__(self, prefix, body):
        self.prefix = prefix
        self.body = body


class PublisherTyping:
    """The typed side of one Publisher on `topic`: the topic's schema once known, and
    :meth:`encode`, the encoder its writer calls. `schema`: declared now (checked
    first). `max_payload`: the largest payload a frame of the topic's arena holds (a
    larger value is refused, naming the arena size to use). ``declare=False``: a
    probe that encodes values to measure them, and neither reads nor declares the
    topic's schema."""

    def __init__(self, topic, schema=None, max_payload=None, declare=True):
        self.topic = topic
        self.schema = None
        self.max_payload = max_payload
        self.declare = declare
        self._encoders = {}
        self._accepted = {}   # value class -> True once its schema matched the topic's
        self._prefixes = {}   # (dtype, shape, strides) -> (NDArray prefix, C order), checked
        self._array_type = None  # numpy.ndarray, once this publisher has published an array
        self._json_ready = False
        self._ros2 = None  # the Ros2Codec of the topic's ros2msg schema, once used
        # The writer's layout cache (Publisher._remember_array), once the publisher
        # binds one: an array layout encoded here is then written by the writer itself.
        self.remember = None
        if schema is not None:
            if not isinstance(schema, Schema):
                raise ArgumentError(f"schema must be an a0py.Schema, not {type(schema).__name__}")
            self.schema = declare_schema(topic, schema.check(topic))

    @property
    def name(self):
        return self.topic.name

    def topic_schema(self):
        """The topic's schema: the one this publisher declared or adopted, else whatever
        the topic has now (None if none)."""
        if self.schema is None and self.declare:
            self.schema = topic_schema(self.topic)
        return self.schema

    def adopt(self, candidate, inferred=False):
        """Makes `candidate` this publisher's schema: declared if the topic has none;
        else the topic's must be the same type (SchemaError otherwise)."""
        if not self.declare:
            return candidate
        existing = self.topic_schema()
        if existing is None:
            self.schema = existing = declare_schema(self.topic, candidate, inferred)
        if (existing.name, existing.encoding) != (candidate.name, candidate.encoding) and not (
                inferred and existing.encoding == candidate.encoding):
            raise SchemaError(f"topic {self.name!r} carries {existing.describe()}; this value is a "
                              f"{candidate.describe()}")
        return existing

    def check_size(self, payload_size):
        """FrameTooLargeError, naming the arena size to use, for a payload too large."""
        if self.max_payload is not None and payload_size > self.max_payload:
            size = suggested_arena_size(payload_size)
            raise FrameTooLargeError(
                f"topic {self.name!r}: a {payload_size}-byte payload does not fit its pubsub arena "
                f"(at most {self.max_payload} bytes a frame). Give the topic an arena of "
                f"{size_text(size)} (four frames) when it is first created: "
                f"a0py.Topic({self.name!r}, size={size_text(size)!r}), or "
                f"A0PY_TOPIC_SIZES={self.name}={size_text(size)} in every process; remove the "
                f"existing one first (`a0py rm {self.name}`)")

    # -- the writer's encoder

    def encode(self, value):
        """The payload for `value` (bytes-like, or (prefix, body)); raises for values
        that cannot be published on this topic."""
        if type(value) is self._array_type:
            # An array of a layout published before: checked then, prefix made then.
            known = self._prefixes.get((value.dtype, value.shape, value.strides))
            if known is not None:
                return known[0], (value if known[1] else value.T)
        encoder = self._encoders.get(type(value))
        if encoder is None:
            encoder = self._encoder_for(value)
            self._encoders[type(value)] = encoder
        return encoder(value)

    def _encoder_for(self, value):
        if isinstance(value, Encoded):
            return self._encode_ready
        if _is_ndarray(value):
            return self._encode_array
        if pbtypes.is_message(value):
            return self._encode_protobuf
        if _is_foxglove_message(value):
            return self._encode_foxglove
        if ros2_types.is_ros2_message(value) or (isinstance(value, dict) and self._is_ros2_topic()):
            return self._encode_ros2
        if isinstance(value, (dict, list)):
            raise ArgumentError(f"topic {self.name!r}: pub() takes no {type(value).__name__}; "
                                "publish JSON with pub_json(obj)")
        try:
            memoryview(value).release()
        except TypeError:
            raise ArgumentError(
                f"topic {self.name!r}: pub() takes bytes, a bytes-like object, str, a Packet, a "
                "numpy array, a protobuf message or a Foxglove message, not "
                f"{type(value).__name__}") from None
        return _as_is

    def _encode_ready(self, value):
        self.check_size(len(value.prefix) + value.body.nbytes)
        return value.prefix, value.body

    def _encode_array(self, array):
        arrays.check_array(array, self.name)
        schema = self.schema
        if schema is None or schema.name != wire.NDARRAY_NAME:
            existing = self.topic_schema()
            if existing is not None and existing.name == arrays.RAW_IMAGE_NAME:
                return self._encode_ready(self.image(array))
            self.adopt(NDARRAY_SCHEMA)
        c_order = array.flags.c_contiguous
        prefix = arrays.array_prefix(array)
        self.check_size(len(prefix) + array.nbytes)
        if len(self._prefixes) < 64:  # layouts checked and measured: encode() reuses them
            self._prefixes[(array.dtype, array.shape, array.strides)] = (prefix, c_order)
            self._array_type = type(array)
        if self.remember is not None:  # and the writer, without calling encode()
            self.remember(array, prefix)
        return prefix, (array if c_order else array.T)

    def _encode_protobuf(self, message):
        cls = type(message)
        if cls not in self._accepted:
            name, descriptor_set = pbtypes.schema_parts_of(message)
            self.adopt(Schema(name, "protobuf", descriptor_set))
            self._accepted[cls] = True
        data = message.SerializeToString()
        self.check_size(len(data))
        return data

    def _encode_foxglove(self, message):
        cls = type(message)
        if cls not in self._accepted:
            found = cls.get_schema()
            self.adopt(Schema(found.name, found.encoding, bytes(found.data)))
            self._accepted[cls] = True
        data = message.encode()
        self.check_size(len(data))
        return data

    def _is_ros2_topic(self):
        schema = self.topic_schema()
        return schema is not None and schema.encoding == "ros2msg"

    def _encode_ros2(self, value):
        """CDR of a dict (on a ``ros2msg`` topic), a rosbags or an rclpy message (whose
        type declares the topic's schema, :meth:`Schema.ros2`, if it has none)."""
        codec = self._ros2
        if codec is None:
            schema = self.topic_schema()
            if schema is None and not isinstance(value, dict):
                schema = self.adopt(Schema.ros2(ros2_types.type_name_of(value)))
            if schema is None or schema.encoding != "ros2msg":
                what = "a dict" if isinstance(value, dict) else ros2_types.type_name_of(value)
                raise SchemaError(f"topic {self.name!r} carries "
                                  f"{schema.describe() if schema else 'no schema'}; this value is "
                                  f"{what}, a ROS 2 message")
            codec = self._ros2 = ros2_types.codec_for(schema.name, schema.data.decode("utf-8"))
        data = codec.encode(value, f"topic {self.name!r}")
        self.check_size(len(data))
        return data

    # -- pub_json, pub_image

    def prepare_json(self, obj, data):
        """Checks that `obj` (encoded as `data`) can go to this topic as JSON; the first
        time, declares the schema inferred from it (or adopts the topic's JSON one)."""
        if not isinstance(obj, dict):
            raise ArgumentError(f"topic {self.name!r}: a JSON topic's messages are objects "
                                f"(dicts), not {type(obj).__name__}; wrap it: {{\"value\": ...}}")
        if not self._json_ready:
            existing = self.topic_schema()
            if existing is None:
                inferred = Schema.json_schema(self.name, infer_json_schema(json.loads(data)))
                self.adopt(inferred, inferred=True)
            elif existing.encoding != "jsonschema":
                raise SchemaError(f"topic {self.name!r} carries {existing.describe()}; pub_json() "
                                  "publishes JSON")
            self._json_ready = True
        self.check_size(len(data))

    def image(self, image, encoding=None, frame_id="", timestamp=None, format=None):
        """The payload of ``pub_image``: a ``foxglove.RawImage`` of an array, or a
        ``foxglove.CompressedImage`` of JPEG/PNG bytes (`format`)."""
        if not isinstance(frame_id, str):
            raise ArgumentError(f"frame_id must be a str, not {type(frame_id).__name__}")
        if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                      or timestamp < 0):
            raise ArgumentError(f"timestamp must be nanoseconds since the epoch (an int >= 0), "
                                f"not {timestamp!r}")
        if _is_ndarray(image):
            if format is not None:
                raise ArgumentError("format= is for compressed images (bytes); an array is raw pixels")
            if encoding is None:
                encoding = arrays.image_encoding_for(image, self.name)
            height, width, step = arrays.check_image(image, encoding, self.name)
            self.adopt(raw_image_schema())
            prefix = arrays.image_prefix(height, width, step, encoding, image.nbytes, frame_id,
                                         timestamp)
            return Encoded(prefix, image)
        try:
            view = memoryview(image)
        except TypeError:
            raise ArgumentError(f"topic {self.name!r}: pub_image() takes a numpy array (raw pixels) "
                                f"or the bytes of a JPEG/PNG, not {type(image).__name__}") from None
        if format not in ("jpeg", "png", "webp", "avif"):
            raise ArgumentError(f"topic {self.name!r}: a compressed image needs format='jpeg' or "
                                f"'png' ('webp', 'avif'), not {format!r}")
        if encoding is not None:
            raise ArgumentError("encoding= is for raw pixels (an array); give format= for bytes")
        self.adopt(compressed_image_schema())
        prefix = arrays.compressed_image_prefix(format, view.nbytes, frame_id, timestamp)
        return Encoded(prefix, view.cast("B"))

    def payload_size(self, value):
        """The payload size of `value` as :meth:`encode` would make it (declaring its
        schema as a first publish would)."""
        payload = self.encode(value)
        if isinstance(payload, tuple):
            return len(payload[0]) + memoryview(payload[1]).nbytes
        return memoryview(payload).nbytes


def _as_is(value):
    return value


# -- reading


class _RawCodec:
    def __init__(self, typing):
        self.typing = typing

    def decode(self, pkt):
        return pkt.payload

    def array(self, pkt):
        raise SchemaError(f"topic {self.typing.name!r} has no schema: its packets are bytes "
                          "(pkt.payload), not arrays")


class _OpaqueCodec(_RawCodec):
    def decode(self, pkt):
        schema = self.typing.schema
        raise SchemaError(f"topic {self.typing.name!r} carries {schema.describe()}: a0py decodes "
                          "JSON and protobuf messages and arrays; its payloads are in pkt.payload")

    def array(self, pkt):
        raise SchemaError(f"topic {self.typing.name!r} carries {self.typing.schema.describe()}, "
                          "not arrays")


class _JsonCodec(_OpaqueCodec):
    def decode(self, pkt):
        payload = pkt.payload
        try:
            return json.loads(payload if isinstance(payload, bytes) else bytes(payload))
        except ValueError as e:
            raise DecodeError(f"{self.typing.where(pkt)}: not JSON ({e})") from None


class _ProtobufCodec(_OpaqueCodec):
    def __init__(self, typing, schema):
        super().__init__(typing)
        self._class = None
        self._schema = schema

    def decode(self, pkt):
        if self._class is None:
            self._class = pbtypes.message_class(self._schema, f"topic {self.typing.name!r}: ")
        payload = pkt.payload
        try:
            return self._class.FromString(payload if isinstance(payload, bytes) else bytes(payload))
        except Exception as e:  # google.protobuf.message.DecodeError, by implementation
            raise DecodeError(f"{self.typing.where(pkt)}: not a {self._schema.name} message "
                              f"({e})") from None


class _Ros2Codec(_OpaqueCodec):
    """``ros2msg`` topics: CDR decoded to rosbags messages (:mod:`.ros2_types`);
    ``array()`` of a ``sensor_msgs/msg/Image`` is a zero-copy view of its pixels."""

    def __init__(self, typing, schema):
        super().__init__(typing)
        self._schema = schema
        self._codec = None

    def decode(self, pkt):
        if self._codec is None:
            self._codec = ros2_types.codec_for(self._schema.name, self._schema.data.decode("utf-8"))
        return self._codec.decode(pkt.payload, self.typing.where(pkt))

    def array(self, pkt):
        if self._schema.name != ros2_types.IMAGE:
            return super().array(pkt)
        return ros2_types.image_array(pkt.payload, self.typing.where(pkt))


class _ArrayCodec(_OpaqueCodec):
    """``a0py.NDArray``: a viewer of the last packet's header is kept
    (:func:`a0py.proto.arrays.array_viewer`), so a packet of the same dtype and
    shape costs one comparison of its first bytes and no parsing. Where the
    compiled viewer is built, ``fast`` (:class:`a0py.proto._ndarray.PacketArrays`)
    is the topic's ``array_hook``, which ``Packet.array()`` calls in compiled
    code; this class's ``array`` then sees only a layout's first packet."""

    def __init__(self, typing):
        super().__init__(typing)
        self._viewer = None  # payload -> array, or None for another layout
        self.fast = arrays.packet_arrays()

    def array(self, pkt):
        viewer = self._viewer
        if viewer is not None:
            found = viewer(pkt.payload)
            if found is not None:
                return found
        return self._parse(pkt)

    def _parse(self, pkt):
        payload = pkt.payload
        parsed = arrays.parse_array_prefix(payload, self.typing.where(pkt))
        if parsed[4] == len(payload):  # the data ends the message: its header is all before
            self._viewer = arrays.array_viewer(payload, parsed)
            if self.fast is not None:
                self.fast.viewer = self._viewer.__self__
        return arrays.view_array(payload, parsed)

    def decode(self, pkt):
        return self.array(pkt).copy()


class _RawImageCodec(_ProtobufCodec):
    def array(self, pkt):
        return arrays.image_pixels(pkt.payload, self.typing.where(pkt))


class TopicTyping(PacketTyping):
    """What a topic's packets are, for its readers (``Packet.schema``, ``decode()``,
    ``array()`` delegate here). Learns the schema on first use, and keeps looking
    while the topic has none. ``array_hook`` (from the binding's PacketTyping): the
    compiled viewer of an array topic, once its first packet was parsed."""

    def __init__(self, topic):
        self.topic = topic
        self.name = topic.name
        self._schema = None
        self._codec = None

    @property
    def schema(self):
        if self._schema is None:
            self._schema = topic_schema(self.topic)
        return self._schema

    def where(self, pkt):
        return f"topic {self.name!r} seq {pkt.seq}"

    def codec(self):
        codec = self._codec
        if codec is not None and codec.schema is self._schema:
            return codec
        schema = self.schema
        if schema is None or not schema.encoding:
            codec = _RawCodec(self)
        elif schema.encoding == "jsonschema":
            codec = _JsonCodec(self)
        elif schema.encoding == "protobuf":
            if schema.name == wire.NDARRAY_NAME:
                codec = _ArrayCodec(self)
            elif schema.name == arrays.RAW_IMAGE_NAME:
                codec = _RawImageCodec(self, schema)
            else:
                codec = _ProtobufCodec(self, schema)
        elif schema.encoding == "ros2msg" and schema.message_encoding == "cdr":
            codec = _Ros2Codec(self, schema)
        else:
            codec = _OpaqueCodec(self)
        codec.schema = schema
        if schema is not None:
            self._codec = codec
            fast = getattr(codec, "fast", None)
            if fast is not None:  # compiled: Packet.array() calls it first, in C
                self.array_hook = fast
        return codec

    def decode(self, pkt):
        return (self._codec or self.codec()).decode(pkt)

    def array(self, pkt):
        return (self._codec or self.codec()).array(pkt)


_typings = {}
_typings_lock = threading.Lock()


def typing_for(topic):
    """The :class:`TopicTyping` of `topic` (one per topic per process)."""
    topic = Topic.of(topic)
    key = (topic.root, topic.name)
    typing = _typings.get(key)
    if typing is None:
        with _typings_lock:
            typing = _typings.setdefault(key, TopicTyping(topic))
    return typing
