"""The protobuf wire format, by hand, for the two messages a0py writes and reads in
place: ``a0py.NDArray`` (a numpy array) and ``foxglove.RawImage`` (an image); and
the FileDescriptorSets of a0py's own messages (``a0py.NDArray``, and
``a0py.PacketHeaders`` of recordings: :func:`message_descriptor_set`). No
protobuf library is needed for them, and neither side copies the array: the writer
puts a few bytes of fields before the array's bytes, the reader finds where they
start and views them.

The wire format (protobuf's encoding documentation): a message is a run of fields,
each a key ``varint(number << 3 | wire_type)`` and a value — a varint (type 0), 8
bytes (type 1), a varint length then that many bytes (type 2), 4 bytes (type 5).
Fields may come in any order, and a decoder skips fields it does not know.

Invariants:

* **Data is 16-byte aligned.** A packet's payload starts 16-byte aligned in its frame
  (docs/format.md), so a writer that makes the bytes before the array a multiple of
  16 long puts the array on a 16-byte boundary, which every numpy dtype accepts as
  aligned. It does so with a padding field (:data:`PAD_FIELD`, bytes, unknown to both
  schemas: every decoder skips it) of the length that makes it so.
* **Nothing read is trusted.** :func:`fields` bounds-checks every varint and length
  against the buffer and raises ValueError with the offset, never reads outside it.
"""

import struct

from .. import _core

__all__ = [
    "NDARRAY_DESCRIPTOR_SET", "NDARRAY_NAME", "PAD_FIELD", "aligned_prefix", "fields",
    "TYPE_BYTES", "TYPE_FIXED32", "TYPE_FIXED64", "key", "length_delimited", "message_descriptor_set",
    "packed_varints", "read_varint", "unpack_varints", "varint",
]

#: Field number of the padding field (wire type 2) written before an array's bytes:
#: high enough that neither ``a0py.NDArray`` nor ``foxglove.RawImage`` will use it.
PAD_FIELD = 2047

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5  # wire types

_PAD_KEY_SIZE = 2  # varint(2047 << 3 | 2) takes two bytes
# Where a packet's payload starts in its frame is aligned to this (docs/format.md).
_PAYLOAD_ALIGN = _core.PACKET_LAYOUT["align"]


def varint(value):
    """`value` (an int, two's complement for negatives as protobuf's int64) as a varint."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def key(number, wire_type):
    return varint(number << 3 | wire_type)


def length_delimited(number, data):
    """A wire-type-2 field: key, length, bytes."""
    return key(number, LENGTH) + varint(len(data)) + data


def packed_varints(number, values):
    body = b"".join(varint(v) for v in values)
    return length_delimited(number, body) if values else b""


def read_varint(buf, pos, end):
    """(value, position after it) of the varint at `pos`; ValueError if it runs past
    `end` or past 10 bytes."""
    result = shift = 0
    start = pos
    while True:
        if pos >= end:
            raise ValueError(f"a varint at byte {start} runs past the end ({end} bytes)")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError(f"a varint at byte {start} is longer than 10 bytes")


def fields(buf, start=0, end=None):
    """Yields ``(number, wire_type, value, offset)`` for each field of the message in
    ``buf[start:end]`` (bytes or a memoryview of bytes): `value` is the int of a
    varint or fixed field, or the ``(begin, end)`` of a length-delimited one's bytes
    (not copied); `offset` is where the field's key starts. Raises ValueError for
    bytes that are not a message (naming the offset)."""
    if end is None:
        end = len(buf)
    pos = start
    while pos < end:
        at = pos
        tag, pos = read_varint(buf, pos, end)
        number, wire_type = tag >> 3, tag & 7
        if number == 0:
            raise ValueError(f"field number 0 at byte {at}")
        if wire_type == VARINT:
            value, pos = read_varint(buf, pos, end)
        elif wire_type == LENGTH:
            size, pos = read_varint(buf, pos, end)
            if size > end - pos:
                raise ValueError(f"field {number} at byte {at} says {size} bytes, "
                                 f"{end - pos} are left")
            value = (pos, pos + size)
            pos += size
        elif wire_type == FIXED32:
            if end - pos < 4:
                raise ValueError(f"field {number} at byte {at}: 4 bytes needed, {end - pos} left")
            value = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        elif wire_type == FIXED64:
            if end - pos < 8:
                raise ValueError(f"field {number} at byte {at}: 8 bytes needed, {end - pos} left")
            value = struct.unpack_from("<Q", buf, pos)[0]
            pos += 8
        else:
            raise ValueError(f"field {number} at byte {at} has wire type {wire_type}, "
                             "which this reader does not take")
        yield number, wire_type, value, at


def unpack_varints(buf, begin, end):
    """The varints packed in ``buf[begin:end]`` (a packed repeated field)."""
    out = []
    pos = begin
    while pos < end:
        value, pos = read_varint(buf, pos, end)
        out.append(value)
    return out


def aligned_prefix(head, data_field, data_size):
    """`head` (fields before the data), a padding field, then the data field's key
    and length: bytes whose length is a multiple of the payload alignment (16), so
    the data written right after them lands aligned."""
    tail = key(data_field, LENGTH) + varint(data_size)
    base = len(head) + _PAD_KEY_SIZE + 1 + len(tail)  # the padding's length takes one byte
    pad = -base % _PAYLOAD_ALIGN
    return head + key(PAD_FIELD, LENGTH) + bytes((pad,)) + bytes(pad) + tail


# -- a0py.NDArray: the schema of array topics, as a FileDescriptorSet written by hand
#
#   syntax = "proto3";
#   package a0py;
#   message NDArray {
#     string dtype = 1;           // numpy's dtype.str: "<f4", "|u1", "<c16", "|b1"...
#     repeated uint64 shape = 2;
#     repeated int64 strides = 3; // in bytes, C or Fortran order (the array is contiguous)
#     bytes data = 4;             // the array's bytes in memory order
#   }

NDARRAY_NAME = "a0py.NDArray"

# FieldDescriptorProto.Type
_TYPE_INT64, _TYPE_UINT64, TYPE_FIXED64, TYPE_FIXED32, _TYPE_STRING, TYPE_BYTES = 3, 4, 6, 7, 9, 12
_LABEL_OPTIONAL, _LABEL_REPEATED = 1, 3


def _field_descriptor(name, number, label, type_):
    # FieldDescriptorProto: name = 1, number = 3, label = 4, type = 5, json_name = 10
    return (length_delimited(1, name.encode()) + key(3, VARINT) + varint(number)
            + key(4, VARINT) + varint(label) + key(5, VARINT) + varint(type_)
            + length_delimited(10, name.encode()))


def _descriptor_set(file_name, package, message_name, field_descriptors):
    message = length_delimited(1, message_name.encode()) + b"".join(
        length_delimited(2, _field_descriptor(*f)) for f in field_descriptors)
    # FileDescriptorProto: name = 1, package = 2, message_type = 4, syntax = 12
    file = (length_delimited(1, file_name.encode()) + length_delimited(2, package.encode())
            + length_delimited(4, message) + length_delimited(12, b"proto3"))
    return length_delimited(1, file)  # FileDescriptorSet: file = 1


def message_descriptor_set(file_name, package, message_name, field_types):
    """The FileDescriptorSet (proto3) of one file ``file_name`` in ``package``
    holding one message ``message_name`` of optional scalar fields
    ``field_types``: ``[(name, number, TYPE_...)]``."""
    return _descriptor_set(file_name, package, message_name,
                           [(name, number, _LABEL_OPTIONAL, type_) for name, number, type_ in field_types])


#: The FileDescriptorSet of ``a0py.NDArray`` (the data of its protobuf schema).
NDARRAY_DESCRIPTOR_SET = _descriptor_set("a0py/NDArray.proto", "a0py", "NDArray", (
    ("dtype", 1, _LABEL_OPTIONAL, _TYPE_STRING),
    ("shape", 2, _LABEL_REPEATED, _TYPE_UINT64),
    ("strides", 3, _LABEL_REPEATED, _TYPE_INT64),
    ("data", 4, _LABEL_OPTIONAL, TYPE_BYTES)))
