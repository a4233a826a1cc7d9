"""MCAP as a0py writes and reads it: the layout of every record (one table,
:data:`RECORD_LAYOUTS`, with the specification's record and field names;
the opcodes are the ``mcap`` package's ``Opcode``, its record classes
parse and write the variable-length records), and a0py's conventions on top
of the format: the channel of a topic's packets, the two channels of a typed
topic, the gap channel, the JSON copies, and the per-chunk ranges of
``a0py.chunks``.

The record layout is fixed by the MCAP specification: the file is magic,
records, magic; a record is opcode (uint8), body length (uint64), body;
every integer is little-endian; a String is a uint32 length and UTF-8; a
Map or Array is a uint32 byte length and its entries. The JVM reader's
``McapRecords.java`` is generated from this table (jvm/generate_layouts.py)
and a test holds the two to each other. docs/recording.md has the table of
what a0py puts in each record.
"""

from __future__ import annotations

import json
import struct

from mcap.opcode import Opcode

from .._core import PACKET_LAYOUT
from ..proto.packets import PACKET_ENCODING

MAGIC = b"\x89MCAP0\r\n"
RECORD_HEAD = struct.Struct("<BQ")  # every record starts with its opcode (uint8) and body length (uint64)
RECORD_HEADER = RECORD_HEAD.size
RECORD_LENGTH_AT = struct.calcsize("<B")  # the body length, after the opcode

# The specification's field types: (size of a fixed-size value, or None for a
# length-prefixed one; the struct code of the value or of its length prefix,
# "" for Bytes that run to the end of the record; bytes per entry of a Map or
# Array of fixed-size entries, else None).
FIELD_TYPES = {
    "uint8": (1, "B", None),
    "uint16": (2, "H", None),
    "uint32": (4, "I", None),
    "uint64": (8, "Q", None),
    "Timestamp": (8, "Q", None),
    "String": (None, "I", None),
    "Bytes": (None, "", None),
    "uint32 length-prefixed Bytes": (None, "I", None),
    "uint64 length-prefixed Bytes": (None, "Q", None),
    "Map<string, string>": (None, "I", None),
    "Map<uint16, uint64>": (None, "I", 2 + 8),
    "Array<Tuple<Timestamp, uint64>>": (None, "I", 8 + 8),
}


class RecordLayout:
    """One record of the MCAP specification: its name, opcode and fields
    ``(name, type)`` in order, as the specification writes them.

    A field has an offset (from the record's opcode) when every field before
    it has a fixed size; a length-prefixed field's offset is its prefix's.
    ``head`` is the ``struct.Struct`` of the record's fixed start: opcode,
    body length, the fixed-size fields, then the length prefix of the first
    length-prefixed field (if any).

    Raises ValueError for a field type that is not one of
    :data:`FIELD_TYPES`."""

    __slots__ = ("_entries", "_offsets", "fields", "head", "name", "opcode")

    def __init__(self, name, opcode, fields):
        self.name = name
        self.opcode = int(opcode)
        self.fields = tuple(fields)
        self._offsets = {}
        self._entries = {}
        at = RECORD_HEADER
        codes = RECORD_HEAD.format
        for field, kind in self.fields:
            if kind not in FIELD_TYPES:
                raise ValueError(f"{name} record, field {field!r}: type {kind!r} is not one of the "
                                 f"specification's ({', '.join(FIELD_TYPES)})")
            size, code, entry = FIELD_TYPES[kind]
            if entry is not None:
                self._entries[field] = entry
            if at is None:
                continue
            self._offsets[field] = at
            codes += code
            at = at + size if size is not None else None
        self.head = struct.Struct(codes)

    def offset(self, field):
        """Where ``field`` starts, from the record's opcode. Raises KeyError
        for a field after a length-prefixed one (it has no fixed offset) or
        one the record does not have."""
        try:
            return self._offsets[field]
        except KeyError:
            raise KeyError(f"{self.name} record: no fixed offset for field {field!r}") from None

    def body_offset(self, field):
        """Where ``field`` starts, from the record's body."""
        return self.offset(field) - RECORD_HEADER

    def entry_size(self, field):
        """Bytes per entry of Map or Array ``field``. Raises KeyError for a
        field without fixed-size entries."""
        try:
            return self._entries[field]
        except KeyError:
            raise KeyError(f"{self.name} record: field {field!r} has no fixed-size entries") from None

    def length_prefix(self, field):
        """The ``struct.Struct`` of length-prefixed ``field``'s prefix. Raises
        KeyError for a field of fixed size or without a prefix."""
        for name, kind in self.fields:
            if name == field:
                size, code, _ = FIELD_TYPES[kind]
                if size is None and code:
                    return struct.Struct("<" + code)
                break
        raise KeyError(f"{self.name} record: field {field!r} is not length-prefixed")

    def fixed_offsets(self):
        """``{field: offset}`` of the fields with a fixed offset, in order."""
        return dict(self._offsets)

    def __repr__(self):
        return f"RecordLayout({self.name!r}, {self.opcode:#04x}, {len(self.fields)} fields)"


# The records of the specification ("Records", format version 0), in opcode order.
RECORD_LAYOUTS = {r.name: r for r in (
    RecordLayout("Header", Opcode.HEADER, [("profile", "String"), ("library", "String")]),
    RecordLayout("Footer", Opcode.FOOTER, [
        ("summary_start", "uint64"), ("summary_offset_start", "uint64"), ("summary_crc", "uint32")]),
    RecordLayout("Schema", Opcode.SCHEMA, [
        ("id", "uint16"), ("name", "String"), ("encoding", "String"), ("data", "uint32 length-prefixed Bytes")]),
    RecordLayout("Channel", Opcode.CHANNEL, [
        ("id", "uint16"), ("schema_id", "uint16"), ("topic", "String"), ("message_encoding", "String"),
        ("metadata", "Map<string, string>")]),
    RecordLayout("Message", Opcode.MESSAGE, [
        ("channel_id", "uint16"), ("sequence", "uint32"), ("log_time", "Timestamp"), ("publish_time", "Timestamp"),
        ("data", "Bytes")]),
    RecordLayout("Chunk", Opcode.CHUNK, [
        ("message_start_time", "Timestamp"), ("message_end_time", "Timestamp"), ("uncompressed_size", "uint64"),
        ("uncompressed_crc", "uint32"), ("compression", "String"), ("records", "uint64 length-prefixed Bytes")]),
    RecordLayout("Message Index", Opcode.MESSAGE_INDEX, [
        ("channel_id", "uint16"), ("records", "Array<Tuple<Timestamp, uint64>>")]),
    RecordLayout("Chunk Index", Opcode.CHUNK_INDEX, [
        ("message_start_time", "Timestamp"), ("message_end_time", "Timestamp"), ("chunk_start_offset", "uint64"),
        ("chunk_length", "uint64"), ("message_index_offsets", "Map<uint16, uint64>"),
        ("message_index_length", "uint64"), ("compression", "String"), ("compressed_size", "uint64"),
        ("uncompressed_size", "uint64")]),
    RecordLayout("Attachment", Opcode.ATTACHMENT, [
        ("log_time", "Timestamp"), ("create_time", "Timestamp"), ("name", "String"), ("media_type", "String"),
        ("data", "uint64 length-prefixed Bytes"), ("crc", "uint32")]),
    RecordLayout("Attachment Index", Opcode.ATTACHMENT_INDEX, [
        ("offset", "uint64"), ("length", "uint64"), ("log_time", "Timestamp"), ("create_time", "Timestamp"),
        ("data_size", "uint64"), ("name", "String"), ("media_type", "String")]),
    RecordLayout("Statistics", Opcode.STATISTICS, [
        ("message_count", "uint64"), ("schema_count", "uint16"), ("channel_count", "uint32"),
        ("attachment_count", "uint32"), ("metadata_count", "uint32"), ("chunk_count", "uint32"),
        ("message_start_time", "Timestamp"), ("message_end_time", "Timestamp"),
        ("channel_message_counts", "Map<uint16, uint64>")]),
    RecordLayout("Metadata", Opcode.METADATA, [("name", "String"), ("metadata", "Map<string, string>")]),
    RecordLayout("Metadata Index", Opcode.METADATA_INDEX, [
        ("offset", "uint64"), ("length", "uint64"), ("name", "String")]),
    RecordLayout("Summary Offset", Opcode.SUMMARY_OFFSET, [
        ("group_opcode", "uint8"), ("group_start", "uint64"), ("group_length", "uint64")]),
    RecordLayout("Data End", Opcode.DATA_END, [("data_section_crc", "uint32")]),
)}
FOOTER_LAYOUT = RECORD_LAYOUTS["Footer"]
MESSAGE_LAYOUT = RECORD_LAYOUTS["Message"]
CHUNK_LAYOUT = RECORD_LAYOUTS["Chunk"]
MESSAGE_INDEX_LAYOUT = RECORD_LAYOUTS["Message Index"]
CHUNK_INDEX_LAYOUT = RECORD_LAYOUTS["Chunk Index"]
STATISTICS_LAYOUT = RECORD_LAYOUTS["Statistics"]

# The offsets the hot paths use, named once (from the record's opcode).
FOOTER_RECORD = FOOTER_LAYOUT.head.size  # the whole record: every field has a fixed size
FOOTER_BODY = FOOTER_RECORD - RECORD_HEADER
MESSAGE_CHANNEL_AT = MESSAGE_LAYOUT.offset("channel_id")
MESSAGE_SEQUENCE_AT = MESSAGE_LAYOUT.offset("sequence")
MESSAGE_LOG_TIME_AT = MESSAGE_LAYOUT.offset("log_time")
MESSAGE_PUBLISH_TIME_AT = MESSAGE_LAYOUT.offset("publish_time")
MESSAGE_FIXED = MESSAGE_LAYOUT.offset("data")
# A Message Index record up to its entries, and one entry (log_time, offset).
MESSAGE_INDEX_FIXED = MESSAGE_INDEX_LAYOUT.head.size
MESSAGE_INDEX_ENTRY = MESSAGE_INDEX_LAYOUT.entry_size("records")
# A chunk's records are addressed with 32-bit offsets in the Arrow arrays built over them.
MAX_CHUNK_SIZE = (1 << 31) - 1

# -- a0py's channels ----------------------------------------------------------

LIBRARY = "a0py"
COMPRESSIONS = ("zstd", "lz4", "none")
# A topic's frames: whole a0py packets.
PACKET_SCHEMA = "a0py.Packet"
PACKET_SCHEMA_ENCODING = "a0py/packet-layout"
PACKET_SCHEMA_DATA = (
    b"a0py packet, version 1, little-endian: magic u32 'A0PK', version u16, flags u16, id [16]u8, "
    b"header_count u32, reserved u32, payload_off u64, payload_size u64; then header_count entries "
    b"(key_off u32, key_len u32, val_off u32, val_len u32, from the packet start); the strings, "
    b"each followed by NUL; zero padding to payload_off (a multiple of 16); the payload. "
    b"See a0py docs/pubsub.md."
)
# Frames evicted before the recorder read them: one JSON message per gap.
GAP_TOPIC = "/a0py/gaps"
GAP_SCHEMA = "a0py.Gap"
GAP_SCHEMA_DATA = json.dumps({
    "title": "a0py.Gap",
    "description": "Frames of a topic evicted before the recorder read them.",
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "first": {"type": "integer", "description": "first missing transport seq"},
        "last": {"type": "integer", "description": "last missing transport seq"},
    },
    "required": ["topic", "first", "last"],
}).encode()
# The JSON copy of a topic's payloads (for Foxglove): /a0py/json/TOPIC.
JSON_TOPIC_PREFIX = "/a0py/json/"

# The a0py packet's fixed header and its payload_size field (csrc/a0_packet.h,
# through the binding's table).
PACKET_FIXED = PACKET_LAYOUT["header_size"]
PACKET_PAYLOAD_SIZE_AT = PACKET_LAYOUT["payload_size_off"]

# A typed topic (one with a schema) is two channels: TOPIC, its payloads with
# their real schema and message encoding, and /a0py/headers/TOPIC, the rest of
# its packets (id, times, seqs, writer, user headers), paired message for
# message by sequence. The headers channel is in the family of the payloads
# (a0py.recording.headers: protobuf, CDR, or a0py packets cut at the payload),
# and is told apart by its a0py.payloads metadata whatever its encoding.
HEADERS_TOPIC_PREFIX = "/a0py/headers/"
# Channel metadata: the a0py topic of a channel; on a typed topic's payload
# channel, the topic of its headers channel; on a headers channel, the topic
# of its payload channel.
TOPIC_KEY = "a0py.topic"
HEADERS_KEY = "a0py.headers"
PAYLOADS_KEY = "a0py.payloads"

KIND_PACKET = "packet"
KIND_GAP = "gap"
KIND_HEADERS = "headers"
KIND_TYPED = "typed"
# Any other channel: a file another tool wrote, or a0py's JSON copies (see
# is_json_copy), whatever its encoding, with a schema or none.
KIND_FOREIGN = "foreign"


def channel_kind(channel):
    """``KIND_PACKET`` for a channel of whole a0py packets, ``KIND_GAP`` for
    the gap channel, ``KIND_HEADERS`` for the headers channel of a typed
    topic, ``KIND_TYPED`` for its payload channel, ``KIND_FOREIGN`` for any
    other (a0py's JSON copies among them: :func:`is_json_copy` tells them
    apart)."""
    if PAYLOADS_KEY in channel.metadata:
        return KIND_HEADERS
    if channel.message_encoding == PACKET_ENCODING:
        return KIND_PACKET
    if HEADERS_KEY in channel.metadata:
        return KIND_TYPED
    if channel.topic == GAP_TOPIC and channel.message_encoding == "json":
        return KIND_GAP
    return KIND_FOREIGN


def is_json_copy(channel):
    """Is ``channel`` a0py's JSON copy of a topic's payloads
    (``/a0py/json/TOPIC``, encoding ``json``, metadata ``a0py.topic``)? Its
    messages repeat a packet channel's payloads."""
    return (channel.topic.startswith(JSON_TOPIC_PREFIX) and channel.message_encoding == "json"
            and TOPIC_KEY in channel.metadata)


def headers_topic(channel):
    """The a0py topic of a typed topic's headers channel (its ``a0py.topic``
    metadata)."""
    return channel.metadata.get(TOPIC_KEY) or channel.topic[len(HEADERS_TOPIC_PREFIX):]


def join_packet(headers, payload):
    """The packet a typed topic's recorded messages were cut from: ``headers``,
    the packet up to its payload with ``payload_size`` 0 (the headers
    channel's message as ``headers.cut_packet`` gives it back), and the
    payload channel's message of the same sequence. Raises ValueError if ``headers`` is too short to be a packet."""
    if len(headers) < PACKET_FIXED:
        raise ValueError(f"a packet's headers are at least {PACKET_FIXED} bytes, not {len(headers)}")
    out = bytearray(headers)
    out[PACKET_PAYLOAD_SIZE_AT:PACKET_PAYLOAD_SIZE_AT + 8] = len(payload).to_bytes(8, "little")
    out += payload
    return bytes(out)


def gap_message(topic, first, last):
    """The data of the gap channel's message for frames ``first..last`` of ``topic``."""
    return json.dumps({"topic": topic, "first": int(first), "last": int(last)}).encode()


def parse_gap(data):
    """``(topic, first, last)`` of a gap message. Raises ValueError for data
    that is not one."""
    try:
        g = json.loads(bytes(data))
        return str(g["topic"]), int(g["first"]), int(g["last"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a gap record ({e})") from None


# -- a0py.chunks: what lets a reader skip chunks by seq and publish time ------

CHUNKS_METADATA = "a0py.chunks"
SEGMENT_METADATA = "a0py.segment"


def chunk_range(channel, seq_lo, seq_hi, publish_lo, publish_hi):
    """One channel's entry of a chunk in ``a0py.chunks``."""
    return f"{channel}:{seq_lo}:{seq_hi}:{publish_lo}:{publish_hi}"


def chunk_ranges(layout):
    """chunk offset -> [(channel, seq_lo, seq_hi, publish_lo, publish_hi)]
    from a segment's ``a0py.chunks`` metadata (empty when absent or
    unreadable)."""
    out = {}
    for off, value in layout.metadata_named(CHUNKS_METADATA).items():
        try:
            items = [tuple(int(x) for x in item.split(":")) for item in value.split(";") if item]
            at = int(off)
        except ValueError:
            return {}
        if any(len(i) != 5 for i in items):
            return {}  # not the five fields a0py writes: ignored as a whole
        out[at] = items
    return out
