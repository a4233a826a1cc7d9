"""The headers channel of a typed topic, in the family of its payloads.

A typed topic ``T`` is recorded as two channels (:mod:`.format`): ``T`` with
the payloads as published, and ``/a0py/headers/T`` with the rest of each
packet (id, standard block, user headers). Any tool that decodes every
channel (the ``mcap`` package's ``iter_decoded_messages``, mcap-ros2-support's
``read_ros2_messages``, Foxglove) must decode the headers channel too, so it
is written in the encoding family of the payload channel:

* ``protobuf`` payloads: message ``a0py.PacketHeaders`` (encoding
  ``protobuf``, its FileDescriptorSet as the schema);
* ``cdr`` payloads (ROS 2): message ``a0py_msgs/msg/PacketHeaders``
  (encoding ``cdr``, a ``ros2msg`` schema);
* any other (``json``, ``flatbuffer``...): ``a0py/packet``, the packet cut at
  its payload, as recordings before had for every typed topic
  (``a0py.recording.DecoderFactory`` decodes it, and the ``json`` payloads).

Both messages hold the same fields, the packet's own, so a reader rebuilds
the cut packet byte for byte with a few copies (:func:`cut_packet`, and
``_bulk.headers_to_packets`` in bulk; ``_bulk.split_records`` writes them)::

    flags          uint32    the packet's flags (0xFFFFFFFF: not a packet,
                             header_block holds the frame as recorded)
    header_count   uint32    user headers in the index
    id             16 bytes  the packet id (UUID bytes)
    time_mono      uint64    a0_time_mono, ns
    time_wall      uint64    a0_time_wall, ns since the epoch
    writer_id      16 bytes  a0_writer_id (UUID bytes)
    writer_seq     uint64    a0_writer_seq
    transport_seq  uint64    a0_transport_seq
    header_block   bytes     the index and strings of the user headers, as
                             the packet lays them out (docs/pubsub.md)

The packet's magic, version, reserved field, payload offset (96 + the
block's length) and payload size (0 in a cut packet) follow from these.
In protobuf the fields are numbered 1..9 in this order (``fixed32``,
``fixed64``, ``bytes``); a0py writes every field, in order, so they sit at
fixed offsets (:data:`PB_AT`) and only the block's length is a varint. In
CDR (little-endian, after the 4-byte encapsulation header) the fixed fields
are naturally aligned one after the other (:data:`CDR_AT`), then the block as
``uint8[]`` (a uint32 length, the bytes).

Why structured fields and not the packet in one ``bytes`` field: a tool
shows the times, seqs and ids as numbers (a plot of ``time_wall`` works in
Foxglove), while the rebuild stays a copy of fixed-size pieces, exact for
every packet. The user headers stay in the packet's own layout (a0py's
DecoderFactory and every a0py reader give them as strings): spelling them
as key/value messages would mean re-encoding every string on the
recorder's background thread and laying out the index again on every
read, and a rebuilt index is only as exact as the canonical layout.

Invariants:

* **Old recordings read the same.** A headers channel's format comes from
  its message encoding (:func:`headers_format`): ``a0py/packet`` channels are
  read as before.
* **Nothing read is trusted.** :func:`cut_packet` checks every tag, length
  and size and raises ValueError naming what is wrong.
"""

import struct

from .._core import PACKET_LAYOUT
from ..proto import protobuf_wire as wire
from ..proto.packets import PACKET_ENCODING

__all__ = [
    "CDR_AT", "CDR_BLOCK_AT", "CDR_ENCAPSULATION", "FIELDS", "FORMAT_CDR", "FORMAT_PACKET", "FORMAT_PROTOBUF",
    "NOT_A_PACKET", "PB_AT",
    "PB_BLOCK_KEY", "PB_FIXED", "PB_TEMPLATE", "PROTOBUF_SCHEMA_DATA", "PROTOBUF_SCHEMA_NAME", "ROS2_SCHEMA_DATA", "ROS2_SCHEMA_NAME",
    "cut_packet", "headers_channel_for", "headers_format",
]

FORMAT_PACKET, FORMAT_PROTOBUF, FORMAT_CDR = 0, 1, 2
#: The ``flags`` of a headers message whose frame was not an a0py packet (its
#: header_block is the frame): outside the packet's 16-bit flags.
NOT_A_PACKET = 0xFFFFFFFF

#: (field, size, offset in the packet) of the fixed fields; header_block follows them.
FIELDS = (
    ("flags", 4, PACKET_LAYOUT["flags_off"]),  # a uint16 in the packet
    ("header_count", 4, PACKET_LAYOUT["header_count_off"]),
    ("id", 16, PACKET_LAYOUT["id_off"]),
    ("time_mono", 8, PACKET_LAYOUT["time_mono_off"]),
    ("time_wall", 8, PACKET_LAYOUT["time_wall_off"]),
    ("writer_id", 16, PACKET_LAYOUT["writer_id_off"]),
    ("writer_seq", 8, PACKET_LAYOUT["writer_seq_off"]),
    ("transport_seq", 8, PACKET_LAYOUT["transport_seq_off"]),
)
_SIZE = {name: size for name, size, _ in FIELDS}
_INDEX_OFF = PACKET_LAYOUT["index_off"]  # where a packet's header index starts: the block's place


def _pb_layout():
    """{field: offset of its value}, and the key of header_block (its length
    and bytes follow)."""
    at, pos = {}, 0
    for number, (name, size, _) in enumerate(FIELDS, 1):
        wire_type = wire.LENGTH if size == 16 else (wire.FIXED32 if size == 4 else wire.FIXED64)
        head = wire.key(number, wire_type) + (wire.varint(size) if wire_type == wire.LENGTH else b"")
        pos += len(head)
        at[name] = (pos, head)
        pos += size
    return at, pos, wire.key(len(FIELDS) + 1, wire.LENGTH)


_PB, PB_FIXED, PB_BLOCK_KEY = _pb_layout()
#: {field: offset of its value in an a0py.PacketHeaders message a0py wrote}
PB_AT = {name: at for name, (at, _) in _PB.items()}
#: The fixed fields of an a0py.PacketHeaders message, their keys written and values zero (PB_FIXED bytes).
PB_TEMPLATE = b"".join(head + bytes(_SIZE[name]) for name, (_, head) in _PB.items())

CDR_ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR, little-endian, no options


def _cdr_layout():
    at, pos = {}, 0
    for name, size, _ in FIELDS:
        align = size if size in (4, 8) else 1
        pos += -pos % align
        at[name] = len(CDR_ENCAPSULATION) + pos
        pos += size
    pos += -pos % 4
    return at, len(CDR_ENCAPSULATION) + pos  # header_block's uint32 length, then its bytes


#: {field: offset of its value in a CDR a0py_msgs/msg/PacketHeaders}; CDR_BLOCK_AT: the block's length.
CDR_AT, CDR_BLOCK_AT = _cdr_layout()

PROTOBUF_SCHEMA_NAME = "a0py.PacketHeaders"
PROTOBUF_SCHEMA_DATA = wire.message_descriptor_set(
    "a0py/PacketHeaders.proto", "a0py", "PacketHeaders",
    [(name, number, wire.TYPE_BYTES if size == 16 else (wire.TYPE_FIXED32 if size == 4 else wire.TYPE_FIXED64))
     for number, (name, size, _) in enumerate(FIELDS, 1)] + [("header_block", len(FIELDS) + 1, wire.TYPE_BYTES)])
ROS2_SCHEMA_NAME = "a0py_msgs/msg/PacketHeaders"
ROS2_SCHEMA_DATA = (
    "# The a0py packet a payload was cut from, up to its payload (a0py docs/recording.md).\n"
    "# flags 0xFFFFFFFF: the frame was not a packet; header_block holds it as recorded.\n"
    "uint32 flags\n"
    "uint32 header_count\n"
    "uint8[16] id\n"
    "uint64 time_mono\n"
    "uint64 time_wall\n"
    "uint8[16] writer_id\n"
    "uint64 writer_seq\n"
    "uint64 transport_seq\n"
    "# the user headers' index and strings, as the packet lays them out (a0py docs/pubsub.md)\n"
    "uint8[] header_block\n").encode()

_U32 = struct.Struct("<I")


def headers_channel_for(message_encoding):
    """``(format, message_encoding, schema_name, schema_encoding, schema_data)``
    of the headers channel of a typed topic whose payloads have
    ``message_encoding``; schema_name None for a0py's packet schema."""
    if message_encoding == "protobuf":
        return FORMAT_PROTOBUF, "protobuf", PROTOBUF_SCHEMA_NAME, "protobuf", PROTOBUF_SCHEMA_DATA
    if message_encoding == "cdr":
        return FORMAT_CDR, "cdr", ROS2_SCHEMA_NAME, "ros2msg", ROS2_SCHEMA_DATA
    return FORMAT_PACKET, PACKET_ENCODING, None, None, None


def headers_format(channel):
    """The format (``FORMAT_*``) of a headers channel's messages, from its
    message encoding. Raises ValueError for an encoding a0py does not write
    there."""
    enc = channel.message_encoding
    if enc == PACKET_ENCODING:
        return FORMAT_PACKET
    if enc == "protobuf":
        return FORMAT_PROTOBUF
    if enc == "cdr":
        return FORMAT_CDR
    raise ValueError(f"headers channel {channel.topic!r}: message encoding {enc!r} is not one a0py writes "
                     f"there ({PACKET_ENCODING}, protobuf, cdr)")


def _packet_head(fields, block_len):
    """The 96 fixed bytes of the cut packet with these fields."""
    out = bytearray(_INDEX_OFF)
    struct.pack_into("<IHH", out, 0, PACKET_LAYOUT["magic"], PACKET_LAYOUT["version"], fields["flags"])
    struct.pack_into("<Q", out, PACKET_LAYOUT["payload_off_off"], _INDEX_OFF + block_len)
    for name, size, at in FIELDS[1:]:
        out[at:at + size] = fields[name]
    return out


def cut_packet(fmt, data):
    """The packet cut at its payload (an a0py packet with an empty payload,
    what ``format.join_packet`` takes) that headers message ``data`` of
    format ``fmt`` holds; for a frame that was no packet, that frame. Raises
    ValueError for a message that is not one a0py wrote (naming the field)."""
    data = bytes(data)
    if fmt == FORMAT_PACKET:
        return data
    if fmt == FORMAT_PROTOBUF:
        if len(data) < PB_FIXED + len(PB_BLOCK_KEY) + 1:
            raise ValueError(f"a0py.PacketHeaders message of {len(data)} bytes: at least {PB_FIXED + 2} expected")
        fields = {}
        for name, (at, head) in _PB.items():
            if data[at - len(head):at] != head:
                raise ValueError(f"a0py.PacketHeaders: field {name} is not where a0py writes it (byte "
                                 f"{at - len(head)})")
            fields[name] = data[at:at + _SIZE[name]]
        if data[PB_FIXED:PB_FIXED + len(PB_BLOCK_KEY)] != PB_BLOCK_KEY:
            raise ValueError(f"a0py.PacketHeaders: field header_block is not where a0py writes it (byte {PB_FIXED})")
        size, pos = wire.read_varint(data, PB_FIXED + len(PB_BLOCK_KEY), len(data))
        if size != len(data) - pos:
            raise ValueError(f"a0py.PacketHeaders: header_block says {size} bytes, {len(data) - pos} follow")
    elif fmt == FORMAT_CDR:
        if len(data) < CDR_BLOCK_AT + 4 or data[:2] != CDR_ENCAPSULATION[:2]:
            raise ValueError(f"a0py_msgs/msg/PacketHeaders of {len(data)} bytes: not little-endian CDR of at "
                             f"least {CDR_BLOCK_AT + 4} bytes")
        fields = {name: data[CDR_AT[name]:CDR_AT[name] + _SIZE[name]] for name in CDR_AT}
        (size,) = _U32.unpack_from(data, CDR_BLOCK_AT)
        pos = CDR_BLOCK_AT + 4
        if size > len(data) - pos or len(data) - pos - size > 3:  # CDR may pad the end to 4 bytes
            raise ValueError(f"a0py_msgs/msg/PacketHeaders: header_block says {size} bytes, {len(data) - pos} "
                             "follow")
    else:
        raise ValueError(f"headers format {fmt!r} is not one of {FORMAT_PACKET}, {FORMAT_PROTOBUF}, {FORMAT_CDR}")
    block = data[pos:pos + size]
    (flags,) = _U32.unpack(fields["flags"])
    if flags == NOT_A_PACKET:
        return block
    if flags > 0xFFFF:
        raise ValueError(f"headers message: flags {flags:#x} do not fit a packet's 16 bits")
    fields["flags"] = flags
    return bytes(_packet_head(fields, len(block))) + block

