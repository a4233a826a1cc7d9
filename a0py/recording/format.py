"""MCAP as a0py writes and reads it: the fixed sizes and offsets of the
records (each defined here once; the opcodes are the ``mcap`` package's
``Opcode``, its record classes the names of the records), and a0py's
conventions on top of the format: the channel of a topic's packets, the two
channels of a typed topic, the gap channel, the JSON copies, and the per-chunk ranges of ``a0py.chunks``.

The record layout is fixed by the MCAP specification: the file is magic,
records, magic; a record is opcode (u8), body length (u64), body; every
integer is little-endian; a string is a u32 length and UTF-8; a map is a
u32 byte length and its entries. docs/recording.md has the table of what
a0py puts in each record.
"""

from __future__ import annotations

import json

from ..proto.packets import PACKET_ENCODING

MAGIC = b"\x89MCAP0\r\n"
RECORD_HEADER = 9  # opcode u8 + length u64
FOOTER_BODY = 20  # summary_start u64, summary_offset_start u64, summary_crc u32
FOOTER_RECORD = RECORD_HEADER + FOOTER_BODY

# A Message record: header, channel_id u16, sequence u32, log_time u64,
# publish_time u64, then the data. Offsets are from the record's opcode.
MESSAGE_CHANNEL_AT = RECORD_HEADER
MESSAGE_SEQUENCE_AT = MESSAGE_CHANNEL_AT + 2
MESSAGE_LOG_TIME_AT = MESSAGE_SEQUENCE_AT + 4
MESSAGE_PUBLISH_TIME_AT = MESSAGE_LOG_TIME_AT + 8
MESSAGE_FIXED = MESSAGE_PUBLISH_TIME_AT + 8
# A Message Index record: header, channel_id u16, then a u32 byte length
# and entries of (log_time u64, offset u64).
MESSAGE_INDEX_FIXED = RECORD_HEADER + 2 + 4
MESSAGE_INDEX_ENTRY = 16
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

# The a0py packet's fixed header and its payload_size field (csrc/a0_packet.h).
PACKET_FIXED = 48
PACKET_PAYLOAD_SIZE_AT = 40

# A typed topic (one with a schema) is two channels: TOPIC, its payloads with
# their real schema and message encoding, and /a0py/headers/TOPIC, its packets
# cut at the payload (a0py packets with an empty payload: id, times, seqs,
# writer, user headers), paired message for message by sequence.
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
    if channel.message_encoding == PACKET_ENCODING:
        if PAYLOADS_KEY in channel.metadata:
            return KIND_HEADERS
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
    """The packet a typed topic's recorded messages were cut from: the
    headers channel's message ``headers`` (the packet up to its payload, with
    ``payload_size`` 0) and the payload channel's message of the same
    sequence. Raises ValueError if ``headers`` is too short to be a packet."""
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
