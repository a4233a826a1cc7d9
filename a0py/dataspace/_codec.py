"""The canonical byte encoding of values (docs/dataspace.md, "Byte encoding").

One value, one encoding: equal values (canonically: 1, 1.0 and True are
three values; floats by bit pattern) give equal bytes, different values give
different bytes, and ``decode(encode(v))`` is ``v`` exactly. The decoder
accepts only canonical input, so ``encode(decode(b)) == b`` for every ``b``
it accepts.

Each value is a tag byte and a body:

====  =========  ==============================================================
tag   value      body
====  =========  ==============================================================
0x00  None       (none)
0x01  False      (none)
0x02  True       (none)
0x03  int        varint n >= 1, then n bytes: two's complement, big-endian,
                 the fewest bytes that hold the number
0x04  float      8 bytes: IEEE-754 binary64 bits, big-endian (-0.0 and NaN
                 payloads kept)
0x05  str        varint n, then n bytes of UTF-8
0x06  bytes      varint n, then the n bytes
0x07  record     varint n, n bytes of UTF-8 label (n = 0: a tuple), varint
                 arity, then each field's encoding
====  =========  ==============================================================

A varint is unsigned LEB128 (7 bits a byte, least significant group first,
high bit set on all but the last byte), in the fewest bytes, at most 9.
"""

import struct

from a0py.dataspace._errors import DataspaceTypeError, DecodeError, InvalidValueError
from a0py.dataspace._impl import impl
from a0py.dataspace._patterns import Capture, Discard
from a0py.dataspace._values import MAX_DEPTH, is_record

_MAX_VARINT_BYTES = 9

TAG_NONE = 0x00
TAG_FALSE = 0x01
TAG_TRUE = 0x02
TAG_INT = 0x03
TAG_FLOAT = 0x04
TAG_STR = 0x05
TAG_BYTES = 0x06
TAG_RECORD = 0x07

_DOUBLE_BE = struct.Struct(">d")


def _varint(out, n):
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _utf8(s, what):
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidValueError(
            f"{what} holds a lone surrogate at index {e.start}; it has no UTF-8 encoding"
        ) from None


def _too_deep():
    return InvalidValueError(f"value nested deeper than MAX_DEPTH ({MAX_DEPTH}) levels")


def _encode(out, v, depth):
    # depth: the records and tuples around v.
    t = type(v)
    if v is None:
        out.append(TAG_NONE)
    elif t is bool:
        out.append(TAG_TRUE if v else TAG_FALSE)
    elif t is int:
        n = (v + (v < 0)).bit_length() // 8 + 1
        out.append(TAG_INT)
        _varint(out, n)
        out += v.to_bytes(n, "big", signed=True)
    elif t is float:
        out.append(TAG_FLOAT)
        out += _DOUBLE_BE.pack(v)
    elif t is str:
        b = _utf8(v, "str")
        out.append(TAG_STR)
        _varint(out, len(b))
        out += b
    elif t is bytes:
        out.append(TAG_BYTES)
        _varint(out, len(v))
        out += v
    elif t is tuple or t is list:  # a list is the tuple of its items
        if depth >= MAX_DEPTH:
            raise _too_deep()
        out.append(TAG_RECORD)
        out.append(0)
        _varint(out, len(v))
        for f in v:
            _encode(out, f, depth + 1)
    elif t is Capture or t is Discard:
        raise InvalidValueError(f"{v!r} is a pattern; only values have an encoding")
    elif is_record(v):
        if depth >= MAX_DEPTH:
            raise _too_deep()
        b = _utf8(v.label, "record label")
        out.append(TAG_RECORD)
        _varint(out, len(b))
        out += b
        _varint(out, len(v.fields))
        for f in v.fields:
            _encode(out, f, depth + 1)
    else:
        impl.value_key(v)  # raises the precise InvalidValueError
        raise InvalidValueError(f"{t.__name__} is not a dataspace value")


def encode(value) -> bytes:
    """The canonical encoding of ``value``.

    A list encodes as the tuple of its items. Raises
    :class:`InvalidValueError` when ``value`` is not a value (a pattern, a
    dict, a foreign type), holds a str with a lone surrogate, or
    nests deeper than ``MAX_DEPTH``.
    """
    out = bytearray()
    _encode(out, value, 0)
    return bytes(out)


class _Decoder:
    def __init__(self, data, record):
        self.data = data
        self.pos = 0
        self.record = record

    def fail(self, message, pos=None):
        return DecodeError(f"{message} at offset {self.pos if pos is None else pos}")

    def byte(self, what):
        if self.pos >= len(self.data):
            raise self.fail(f"truncated: expected {what}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self, what):
        start = self.pos
        n = shift = 0
        for i in range(_MAX_VARINT_BYTES):
            b = self.byte(what)
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b == 0 and i > 0:
                    raise self.fail(f"non-minimal varint for {what}", start)
                return n
        raise self.fail(f"varint for {what} longer than {_MAX_VARINT_BYTES} bytes", start)

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise self.fail(
                f"truncated: {what} needs {n} bytes, {len(self.data) - self.pos} left"
            )
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def text(self, n, what):
        start = self.pos
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"invalid UTF-8 in {what} ({e.reason})", start + e.start) from None

    def value(self, depth):
        # depth: the records and tuples around the value.
        start = self.pos
        tag = self.byte("a tag")
        if tag == TAG_NONE:
            return None
        if tag == TAG_FALSE:
            return False
        if tag == TAG_TRUE:
            return True
        if tag == TAG_INT:
            n = self.varint("an int's length")
            if n == 0:
                raise self.fail("int of length 0", start)
            raw = self.take(n, "an int")
            if n > 1 and (
                (raw[0] == 0x00 and raw[1] < 0x80) or (raw[0] == 0xFF and raw[1] >= 0x80)
            ):
                raise self.fail("non-minimal int", start)
            return int.from_bytes(raw, "big", signed=True)
        if tag == TAG_FLOAT:
            return _DOUBLE_BE.unpack(self.take(8, "a float"))[0]
        if tag == TAG_STR:
            return self.text(self.varint("a str's length"), "a str")
        if tag == TAG_BYTES:
            return bytes(self.take(self.varint("a bytes' length"), "bytes"))
        if tag == TAG_RECORD:
            if depth >= MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH} levels", start)
            label = self.text(self.varint("a label's length"), "a record label")
            arity = self.varint("a record's arity")
            if arity > len(self.data) - self.pos:
                raise self.fail(f"truncated: record of arity {arity} cannot fit")
            fields = [self.value(depth + 1) for _ in range(arity)]
            if not label:
                return tuple(fields)
            return self.record(label, *fields)
        raise self.fail(f"unknown tag 0x{tag:02x}", start)


def decode(data, *, record=None):
    """The value whose canonical encoding is ``data`` (bytes, bytearray or
    memoryview). ``record`` is the Record class to build with (the
    package's by default).

    Raises :class:`DecodeError`, naming the offset, for an unknown tag,
    truncated input, a non-minimal int or varint, invalid UTF-8, nesting
    deeper than ``MAX_DEPTH``, or bytes left over after the value;
    :class:`DataspaceTypeError` when ``data`` is not bytes-like.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DataspaceTypeError(f"decode takes bytes, got {type(data).__name__}")
    if record is None:
        record = impl.Record
    d = _Decoder(bytes(data), record)
    v = d.value(0)
    if d.pos != len(d.data):
        raise d.fail(f"{len(d.data) - d.pos} trailing bytes after the value")
    return v
