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

Part of the one source of the dataspace's compiled code, built twice (see
``_compiled.pyx``): compiled, it is one C function per step; interpreted, the
same lines run as Python. A few ``if cython.compiled:`` branches do a step the
C way on the same data (ints that fit 64 bits and floats without ``struct`` or
``int.to_bytes``); both branches give the same bytes and the same values.
"""

import struct

import cython

from a0py.dataspace._errors import DataspaceTypeError, DecodeError, InvalidValueError
from a0py.dataspace._patterns import Capture, Discard
from a0py.dataspace._values import MAX_DEPTH, is_record

if not cython.compiled:
    # Compiled, this file is included into one module with the index's files
    # (_compiled.pyx), where these names are already defined.
    from a0py.dataspace._canonical import Record, _float_bits, _new_record, value_key

_MAX_VARINT_BYTES = cython.declare(cython.int, 9)
_CODEC_MAX_DEPTH = cython.declare(cython.int, MAX_DEPTH)

TAG_NONE = 0x00
TAG_FALSE = 0x01
TAG_TRUE = 0x02
TAG_INT = 0x03
TAG_FLOAT = 0x04
TAG_STR = 0x05
TAG_BYTES = 0x06
TAG_RECORD = 0x07

_DOUBLE_BE = struct.Struct(">d")


# ---------------------------------------------------------------- encoding


@cython.final
@cython.cclass
class _Buffer:
    """The bytes of an encoding as it is written: compiled, a C array grown by
    doubling (a bytearray and its conversion to bytes cost more than the
    encoding of a small value); interpreted, a bytearray."""

    _p = cython.declare(cython.p_uchar)
    _n = cython.declare(cython.Py_ssize_t)
    _cap = cython.declare(cython.Py_ssize_t)
    _out = cython.declare(bytearray)

    def __dealloc__(self):
        if cython.compiled:
            _mem_free(self._p)  # noqa: F821 - declared in _compiled.pxd

    @cython.cfunc
    def grow(self, extra: cython.Py_ssize_t) -> cython.int:
        cap: cython.Py_ssize_t = 2 * self._cap
        if cap < self._n + extra:
            cap = self._n + extra
        p = _mem_realloc(self._p, cap)  # noqa: F821 - declared in _compiled.pxd
        if p == cython.NULL:
            raise MemoryError()
        self._p = cython.cast(cython.p_uchar, p)
        self._cap = cap
        return 0

    @cython.cfunc
    @cython.inline
    def byte(self, b: cython.int) -> cython.int:
        if cython.compiled:
            if self._n == self._cap:
                self.grow(1)
            self._p[self._n] = b
            self._n += 1
        else:
            self._out.append(b)
        return 0

    @cython.cfunc
    def raw(self, b: bytes) -> cython.int:
        if cython.compiled:
            n: cython.Py_ssize_t = len(b)
            if self._n + n > self._cap:
                self.grow(n)
            memcpy(self._p + self._n, cython.cast(cython.p_char, b), n)  # noqa: F821
            self._n += n
        else:
            self._out += b
        return 0

    @cython.cfunc
    @cython.inline
    def varint(self, n: cython.Py_ssize_t) -> cython.int:
        while n >= 0x80:
            self.byte((n & 0x7F) | 0x80)
            n >>= 7
        self.byte(n)
        return 0

    @cython.cfunc
    def value(self) -> bytes:
        if cython.compiled:
            return _bytes_of(cython.cast(cython.p_char, self._p), self._n)  # noqa: F821
        return bytes(self._out)


@cython.cfunc
def _new_buffer() -> _Buffer:
    out: _Buffer = _Buffer.__new__(_Buffer)
    if cython.compiled:
        out._p = cython.cast(cython.p_uchar, _mem_alloc(64))  # noqa: F821 - _compiled.pxd
        if out._p == cython.NULL:
            raise MemoryError()
        out._cap = 64
        out._n = 0
    else:
        out._out = bytearray()
    return out


@cython.cfunc
def _utf8(s: str, what: str) -> bytes:
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidValueError(
            f"{what} holds a lone surrogate at index {e.start}; it has no UTF-8 encoding"
        ) from None


@cython.cfunc
def _codec_too_deep() -> Exception:
    return InvalidValueError(f"value nested deeper than MAX_DEPTH ({MAX_DEPTH}) levels")


@cython.cfunc
def _put_int(out: _Buffer, v: object) -> cython.int:
    out.byte(TAG_INT)
    if cython.compiled:
        overflow: cython.int = 0
        x: cython.longlong = _as_longlong(v, cython.address(overflow))  # noqa: F821 - _compiled.pxd
        if not overflow:
            # The fewest bytes of two's complement: one more than the whole
            # bytes of the magnitude's bits (of ~x for a negative x).
            u: cython.ulonglong = cython.cast(cython.ulonglong, ~x if x < 0 else x)
            n: cython.int = 1
            while u >= 0x80:
                u >>= 8
                n += 1
            out.byte(n)
            while n:
                n -= 1
                out.byte(cython.cast(cython.int, (x >> (8 * n)) & 0xFF))
            return 0
    n_bytes = (v + (v < 0)).bit_length() // 8 + 1
    out.varint(n_bytes)
    out.raw(v.to_bytes(n_bytes, "big", signed=True))
    return 0


@cython.cfunc
def _put_float(out: _Buffer, v: cython.double) -> cython.int:
    out.byte(TAG_FLOAT)
    if cython.compiled:
        bits: cython.longlong = _float_bits(v)
        i: cython.int
        for i in range(56, -8, -8):
            out.byte(cython.cast(cython.int, (bits >> i) & 0xFF))
    else:
        out.raw(_DOUBLE_BE.pack(v))
    return 0


@cython.cfunc
def _encode(out: _Buffer, v: object, depth: cython.int) -> cython.int:
    # depth: the records and tuples around v.
    t = type(v)
    if t is Record:
        if depth >= _CODEC_MAX_DEPTH:
            raise _codec_too_deep()
        r: Record = cython.cast(Record, v)
        return _put_record(out, r.label, r.fields, depth)
    if t is str:
        b: bytes = _utf8(v, "str")
        out.byte(TAG_STR)
        out.varint(len(b))
        out.raw(b)
    elif t is float:
        _put_float(out, v)
    elif t is int:
        _put_int(out, v)
    elif v is None:
        out.byte(TAG_NONE)
    elif t is bool:
        out.byte(TAG_TRUE if v else TAG_FALSE)
    elif t is bytes:
        out.byte(TAG_BYTES)
        out.varint(len(v))
        out.raw(v)
    elif t is tuple or t is list:  # a list is the tuple of its items
        if depth >= _CODEC_MAX_DEPTH:
            raise _codec_too_deep()
        out.byte(TAG_RECORD)
        out.byte(0)
        out.varint(len(v))
        for f in v:
            _encode(out, f, depth + 1)
    elif t is Capture or t is Discard:
        raise InvalidValueError(f"{v!r} is a pattern; only values have an encoding")
    elif is_record(v):  # a Record of the other build
        if depth >= _CODEC_MAX_DEPTH:
            raise _codec_too_deep()
        return _put_record(out, v.label, v.fields, depth)
    else:
        value_key(v)  # raises the precise InvalidValueError
        raise InvalidValueError(f"{t.__name__} is not a dataspace value")
    return 0


@cython.cfunc
def _put_record(out: _Buffer, label: str, fields: tuple, depth: cython.int) -> cython.int:
    b: bytes = _utf8(label, "record label")
    out.byte(TAG_RECORD)
    out.varint(len(b))
    out.raw(b)
    out.varint(len(fields))
    for f in fields:
        _encode(out, f, depth + 1)
    return 0


def encode(value) -> bytes:
    """The canonical encoding of ``value``.

    A list encodes as the tuple of its items. Raises
    :class:`InvalidValueError` when ``value`` is not a value (a pattern, a
    dict, a foreign type), holds a str with a lone surrogate, or
    nests deeper than ``MAX_DEPTH``.
    """
    out = _new_buffer()
    _encode(out, value, 0)
    return out.value()


# ---------------------------------------------------------------- decoding


@cython.final
@cython.cclass
class _Decoder:
    data = cython.declare(bytes)
    pos = cython.declare(cython.Py_ssize_t)
    end = cython.declare(cython.Py_ssize_t)
    record = cython.declare(object)

    @cython.cfunc
    def fail(self, message: str, pos: cython.Py_ssize_t = -1) -> Exception:
        return DecodeError(f"{message} at offset {self.pos if pos < 0 else pos}")

    @cython.cfunc
    @cython.inline
    def byte(self, what: str) -> cython.int:
        if self.pos >= self.end:
            raise self.fail(f"truncated: expected {what}")
        b: cython.int = self.data[self.pos]
        self.pos += 1
        return b

    @cython.cfunc
    def varint(self, what: str) -> cython.Py_ssize_t:
        start: cython.Py_ssize_t = self.pos
        n: cython.Py_ssize_t = 0
        shift: cython.int = 0
        i: cython.int
        b: cython.int
        for i in range(_MAX_VARINT_BYTES):
            b = self.byte(what)
            n |= cython.cast(cython.Py_ssize_t, b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                if b == 0 and i > 0:
                    raise self.fail(f"non-minimal varint for {what}", start)
                return n
        raise self.fail(f"varint for {what} longer than {_MAX_VARINT_BYTES} bytes", start)

    @cython.cfunc
    def need(self, n: cython.Py_ssize_t, what: str) -> cython.int:
        if n > self.end - self.pos:
            raise self.fail(f"truncated: {what} needs {n} bytes, {self.end - self.pos} left")
        return 0

    @cython.cfunc
    def text(self, n: cython.Py_ssize_t, what: str) -> str:
        start: cython.Py_ssize_t = self.pos
        self.need(n, what)
        self.pos += n
        try:
            return self.data[start:start + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"invalid UTF-8 in {what} ({e.reason})", start + e.start) from None

    @cython.cfunc
    def integer(self, start: cython.Py_ssize_t) -> object:
        n: cython.Py_ssize_t = self.varint("an int's length")
        if n == 0:
            raise self.fail("int of length 0", start)
        self.need(n, "an int")
        p: cython.Py_ssize_t = self.pos
        self.pos += n
        b0: cython.int = self.data[p]
        if n > 1:
            b1: cython.int = self.data[p + 1]
            if (b0 == 0x00 and b1 < 0x80) or (b0 == 0xFF and b1 >= 0x80):
                raise self.fail("non-minimal int", start)
        if cython.compiled and n <= 8:
            # Sign-extend the first byte, then shift the rest in.
            x: cython.longlong = b0 - 0x100 if b0 >= 0x80 else b0
            i: cython.Py_ssize_t
            for i in range(p + 1, p + n):
                x = x * 256 + cython.cast(cython.int, self.data[i])
            return x
        return int.from_bytes(self.data[p:p + n], "big", signed=True)

    @cython.cfunc
    def double(self) -> object:
        self.need(8, "a float")
        p: cython.Py_ssize_t = self.pos
        self.pos += 8
        if cython.compiled:
            bits: cython.ulonglong = 0
            i: cython.Py_ssize_t
            for i in range(p, p + 8):
                bits = (bits << 8) | cython.cast(cython.int, self.data[i])
            return _bits_double(bits)  # noqa: F821 - declared in _compiled.pxd
        return _DOUBLE_BE.unpack(self.data[p:p + 8])[0]

    @cython.cfunc
    def value(self, depth: cython.int) -> object:
        # depth: the records and tuples around the value.
        start: cython.Py_ssize_t = self.pos
        tag: cython.int = self.byte("a tag")
        n: cython.Py_ssize_t
        if tag == TAG_STR:
            return self.text(self.varint("a str's length"), "a str")
        if tag == TAG_RECORD:
            if depth >= _CODEC_MAX_DEPTH:
                raise self.fail(f"nesting deeper than {MAX_DEPTH} levels", start)
            label = self.text(self.varint("a label's length"), "a record label")
            arity: cython.Py_ssize_t = self.varint("a record's arity")
            if arity > self.end - self.pos:
                raise self.fail(f"truncated: record of arity {arity} cannot fit")
            fields = tuple([self.value(depth + 1) for _ in range(arity)])
            if not label:
                return fields
            if self.record is Record:
                return _new_record(label, fields)
            return self.record(label, *fields)
        if tag == TAG_INT:
            return self.integer(start)
        if tag == TAG_FLOAT:
            return self.double()
        if tag == TAG_NONE:
            return None
        if tag == TAG_FALSE:
            return False
        if tag == TAG_TRUE:
            return True
        if tag == TAG_BYTES:
            n = self.varint("a bytes' length")
            self.need(n, "bytes")
            self.pos += n
            return self.data[self.pos - n:self.pos]
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
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise DataspaceTypeError(f"decode takes bytes, got {type(data).__name__}")
        data = bytes(data)
    d: _Decoder = _Decoder.__new__(_Decoder)
    d.data = data
    d.pos = 0
    d.end = len(data)
    d.record = Record if record is None else record
    v = d.value(0)
    if d.pos != d.end:
        raise d.fail(f"{d.end - d.pos} trailing bytes after the value")
    return v
