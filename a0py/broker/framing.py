"""The broker's frames byte by byte: building and parsing requests and replies.

The layout (kinds, flags, items) is described at the top of ``wire.py``, which re-exports
everything here; this module is only the bytes. It runs on every request and every
notification, on both sides, so it is written in Cython's pure-Python mode and built
twice, as the engine is: ``a0py/broker/_compiled.pyx`` includes it (the build the broker
and its clients use), and imported as it is, it is the interpreted build that
``tests/broker/test_broker_framing_builds.py`` holds the compiled one to.

Invariants:

* **No length from a frame is trusted.** Every varint and every item length is checked
  against the bytes left before it is followed; a malformed frame is a
  :class:`WireError` naming the offset, in both builds alike.
* **A varint is unsigned LEB128 of at most 9 bytes** (values below ``2**63``), so the
  compiled build holds every one in a C ``long long`` and reads exactly what the
  interpreted one reads. Encoding a number outside ``0 .. 2**63 - 1`` is a
  :class:`WireError` too.
* **A request or reply is cut only between items**: every frame but the last is flagged
  ``FLAG_MORE``; an item that cannot fit one frame is a :class:`BrokerError`. Of a
  notification's frames only the first carries ``FLAG_FULL``.
"""

import cython

from a0py.dataspace import encode

from .errors import BrokerError, WireError

__all__ = [
    "FLAG_FULL", "FLAG_MORE", "FLAG_OWNERS", "MAGIC", "MAX_FRAME", "MAX_VARINT",
    "IT_ADD", "IT_CLAIM", "IT_DEL", "IT_FACT", "IT_INDEX", "IT_OWNER", "IT_PATTERN",
    "IT_RETRACT", "IT_RETRACT_PATTERN", "IT_SIZE", "IT_SUBSCRIBE", "IT_TEXT", "IT_UNSUBSCRIBE",
    "REP_ACK", "REP_ERROR", "REP_FACTS", "REP_NOTIFY", "REP_PONG", "REP_RESYNC",
    "REP_REVOKED", "REP_SUB_ERROR",
    "REQ_BATCH", "REQ_BYE", "REQ_DIED", "REQ_FACTS", "REQ_PING", "REQ_REVOKE", "REQ_STATE",
    "REQ_WAKE",
    "item", "notify_frames", "parse_items", "parse_reply", "parse_request",
    "parse_subscribe", "parse_varint", "reply_frames", "request_frames",
    "request_frames_of", "row_items", "subscribe_payload", "varint",
]

MAGIC = 0xB7           # version 1 of this layout
FLAG_MORE = 0x01       # the request or reply continues in the next frame
FLAG_FULL = 0x02       # the first frame of a whole result (the first notification, a resync)
FLAG_OWNERS = 0x04     # a facts request that wants the owners too

# request kinds
REQ_STATE = 1      # the client's whole state: replaces what the broker holds for it
REQ_BATCH = 2      # claims, retracts, subscribe, unsubscribe: atomic
REQ_PING = 3
REQ_FACTS = 4      # optional IT_PATTERN
REQ_BYE = 5        # the client leaves: retract all it holds
REQ_DIED = 6       # from the broker's own watcher: the client's deadman was released
REQ_REVOKE = 7     # IT_PATTERN..., optional IT_OWNER: retract others' claims (admin)
REQ_WAKE = 8       # from the broker itself: look at the stop flag

# reply kinds
REP_ACK = 1        # id: the client's last request processed
REP_ERROR = 2      # id: the rejected request; IT_INDEX (the bad item) or IT_SIZE, IT_TEXT
REP_PONG = 3       # id: the ping (the "empty notification")
REP_FACTS = 4      # id: the request; IT_FACT..., each optionally followed by IT_OWNER...
REP_NOTIFY = 5     # id: the subscription; IT_ADD / IT_DEL rows; FLAG_FULL
REP_REVOKED = 6    # id: the last request of the client processed before; IT_FACT...
REP_RESYNC = 7     # id: the request refused because the broker does not know the client
REP_SUB_ERROR = 8  # id: the subscription; IT_TEXT (its result cannot reach the client)

# item ops
IT_CLAIM = 1            # encoded value
IT_RETRACT = 2          # encoded value (ground)
IT_RETRACT_PATTERN = 3  # pattern text
IT_SUBSCRIBE = 4        # varint sub_id, then (varint len, pattern text)...
IT_UNSUBSCRIBE = 5      # varint sub_id
IT_PATTERN = 6          # pattern text
IT_OWNER = 7            # client name
IT_INDEX = 8            # varint
IT_TEXT = 9             # UTF-8
IT_FACT = 10            # encoded value
IT_ADD = 11             # encoded tuple of values (a result row)
IT_DEL = 12             # encoded tuple of values
IT_SIZE = 13            # varint: bytes of an answer too large for the client's arena

MAX_FRAME = 256 << 10       # requests and replies are cut into frames of at most this
MAX_VARINT = (1 << 63) - 1  # the largest number a varint carries

# The same numbers as C constants for the compiled code (module globals are dict lookups).
_MAGIC = cython.declare(cython.int, 0xB7)
_FLAG_MORE = cython.declare(cython.int, 0x01)
_FLAG_FULL = cython.declare(cython.int, 0x02)
_VARINT_BYTES = cython.declare(cython.int, 9)


# ---------------------------------------------------------------- building


@cython.cfunc
def _checked(n: object, what: str) -> cython.longlong:
    if type(n) is not int or n < 0 or n > MAX_VARINT:
        raise WireError(f"{what} must be an int from 0 to 2**63 - 1, got {n!r}")
    return n


@cython.cfunc
@cython.inline
def _put_varint(out: bytearray, n: cython.longlong) -> cython.int:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return 0


@cython.cfunc
@cython.inline
def _put_item(out: bytearray, op: cython.int, payload: bytes) -> cython.int:
    out.append(op)
    _put_varint(out, len(payload))
    out += payload
    return 0


@cython.cfunc
def _head(kind: cython.int, flags: cython.int, ident: cython.longlong,
          client: object) -> bytearray:
    """A frame's header: MAGIC kind flags varint(id), then (requests) the client name."""
    out = bytearray()
    out.append(_MAGIC)
    out.append(kind)
    out.append(flags)
    _put_varint(out, ident)
    if client is not None:
        _put_varint(out, len(client))
        out += client
    return out


def varint(n):
    """``n`` (0 to ``2**63 - 1``) as an unsigned LEB128 varint. Raises :class:`WireError`
    for any other number."""
    out = bytearray()
    _put_varint(out, _checked(n, "a varint"))
    return bytes(out)


def item(op, payload):
    """One item's bytes: ``op``, the payload's length, the payload (bytes)."""
    out = bytearray()
    _put_item(out, op, payload)
    return bytes(out)


def subscribe_payload(sub_id, pattern_texts):
    """The payload of an ``IT_SUBSCRIBE`` item: the subscription id, then each pattern's
    text with its length."""
    out = bytearray()
    _put_varint(out, _checked(sub_id, "a subscription id"))
    for text in pattern_texts:
        b = text.encode("utf-8")
        _put_varint(out, len(b))
        out += b
    return bytes(out)


def request_frames(kind, req_id, client, items, flags=0, limit=MAX_FRAME):
    """The frames of one request: ``items`` (item bytes) packed greedily, every frame but
    the last flagged ``FLAG_MORE``. Raises :class:`BrokerError` for an item that cannot
    fit in one frame, :class:`WireError` for a bad ``req_id``."""
    head = _head(kind, flags, _checked(req_id, "a request id"), client.encode("utf-8"))
    return _frames(head, items, limit)


def request_frames_of(kind, req_id, client, op, payloads, limit=MAX_FRAME):
    """The frames of a request whose items all have the op ``op``, one per payload of
    ``payloads`` (a list of bytes): what :func:`request_frames` gives for
    ``[item(op, p) for p in payloads]``, without making the items first."""
    head = _head(kind, 0, _checked(req_id, "a request id"), client.encode("utf-8"))
    budget: cython.Py_ssize_t = limit - len(head)
    size: cython.Py_ssize_t = 0
    n: cython.Py_ssize_t
    for p in payloads:
        n = len(p)
        size += n + 1 + (1 if n < 0x80 else _varint_size(n))
    if size > budget:
        return _frames(head, [item(op, p) for p in payloads], limit)
    for p in payloads:
        _put_item(head, op, p)
    return [bytes(head)]


@cython.cfunc
def _varint_size(n: cython.longlong) -> cython.Py_ssize_t:
    size: cython.Py_ssize_t = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def reply_frames(kind, ident, items, flags=0, limit=MAX_FRAME):
    """The frames of one reply (as :func:`request_frames`)."""
    return _frames(_head(kind, flags, _checked(ident, "a reply id"), None), items, limit)


@cython.cfunc
def _frames(head: bytearray, items: object, limit: cython.Py_ssize_t) -> list:
    """``head`` followed by the items, cut between items into frames of at most
    ``limit`` bytes; ``head[2]`` (the flags) gains FLAG_MORE on all frames but the last."""
    budget: cython.Py_ssize_t = limit - len(head)
    if type(items) is not list:
        items = list(items)
    todo: list = items
    size: cython.Py_ssize_t = 0
    n: cython.Py_ssize_t
    for it in todo:
        size += len(it)
    if size <= budget:                 # the usual case: one frame
        out = bytearray(head)
        for it in todo:
            out += it
        return [bytes(out)]
    groups = []
    group = []
    size = 0
    for it in todo:
        n = len(it)
        if n > budget:
            raise BrokerError(f"an item of {n} bytes does not fit a frame of at most {limit} bytes")
        if size + n > budget:
            groups.append(group)
            group = []
            size = 0
        group.append(it)
        size += n
    groups.append(group)
    frames = []
    last: cython.Py_ssize_t = len(groups) - 1
    flags: cython.int = head[2]
    i: cython.Py_ssize_t
    for i in range(last + 1):
        out = bytearray(head)
        out[2] = flags | _FLAG_MORE if i < last else flags
        for it in groups[i]:
            out += it
        frames.append(bytes(out))
    return frames


def row_items(op, rows):
    """``(items, size)``: one ``op`` item per row of ``rows`` (tuples of values), each the
    row's canonical encoding, and their bytes in all."""
    items = []
    size: cython.Py_ssize_t = 0
    for row in rows:
        it = item(op, encode(row))
        size += len(it)
        items.append(it)
    return items, size


def notify_frames(sub_id, full, items, limit=MAX_FRAME):
    """The frames of a notification of subscription ``sub_id``: ``items`` (``IT_ADD`` /
    ``IT_DEL`` items); with ``full``, the first frame (only) is flagged ``FLAG_FULL``."""
    head = _head(REP_NOTIFY, _FLAG_FULL if full else 0, _checked(sub_id, "a subscription id"),
                 None)
    frames = _frames(head, items, limit)
    if full and len(frames) > 1:
        for i in range(1, len(frames)):
            f = bytearray(frames[i])
            f[2] &= ~_FLAG_FULL
            frames[i] = bytes(f)
    return frames


# ---------------------------------------------------------------- parsing


@cython.final
@cython.cclass
class _Reader:
    """A position in a frame's bytes, moved by what is read; never past ``end``."""

    data = cython.declare(bytes)
    pos = cython.declare(cython.Py_ssize_t)
    end = cython.declare(cython.Py_ssize_t)

    def __init__(self, data: bytes, pos: cython.Py_ssize_t):
        self.data = data
        self.pos = pos
        self.end = len(data)

    @cython.cfunc
    def varint(self) -> cython.longlong:
        data: bytes = self.data
        n: cython.longlong = 0
        shift: cython.int = 0
        b: cython.int
        _i: cython.int
        for _i in range(_VARINT_BYTES):
            if self.pos >= self.end:
                raise WireError(f"truncated varint at offset {self.pos}")
            b = data[self.pos]
            self.pos += 1
            n |= cython.cast(cython.longlong, b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
        raise WireError(f"varint too long at offset {self.pos}")

    @cython.cfunc
    def take(self, n: cython.longlong, what: str) -> bytes:
        """The next ``n`` bytes (checked against what is left)."""
        left: cython.Py_ssize_t = self.end - self.pos
        if n > left:
            raise WireError(f"{what} at offset {self.pos} claims {n} bytes, {left} left")
        start: cython.Py_ssize_t = self.pos
        self.pos = start + n
        return self.data[start:self.pos]

    @cython.cfunc
    def items(self) -> list:
        out = []
        data: bytes = self.data
        op: cython.int
        n: cython.longlong
        while self.pos < self.end:
            if self.pos + 2 > self.end:
                raise WireError(f"truncated item at offset {self.pos}")
            op = data[self.pos]
            n = data[self.pos + 1]
            if n < 0x80:
                self.pos += 2
            else:
                self.pos += 1
                n = self.varint()
            out.append((op, self.take(n, "item")))
        return out


@cython.cfunc
def _as_bytes(data: object) -> bytes:
    return data if type(data) is bytes else bytes(data)


def parse_items(data, pos=0):
    """The ``(op, payload)`` items of a frame from ``pos`` on (payloads are bytes)."""
    return _Reader(_as_bytes(data), pos).items()


def parse_request(data):
    """``(kind, flags, req_id, client, items)`` of a request frame; :class:`WireError` if
    it is malformed."""
    data = _as_bytes(data)
    end: cython.Py_ssize_t = len(data)
    if end < 3 or data[0] != _MAGIC:
        raise WireError(f"not a broker request (first byte {data[0] if end else None!r}, "
                        f"{end} bytes)")
    r: _Reader = _Reader(data, 3)
    req_id = r.varint()
    n: cython.longlong = r.varint()
    if n == 0:
        raise WireError(f"bad client name length 0 at offset {r.pos}")
    name = r.take(n, "the client name")
    try:
        client = name.decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("client name is not UTF-8") from None
    return data[1], data[2], req_id, client, r.items()


def parse_reply(data):
    """``(kind, flags, id, items)`` of a reply frame; :class:`WireError` if malformed."""
    data = _as_bytes(data)
    end: cython.Py_ssize_t = len(data)
    if end < 3 or data[0] != _MAGIC:
        raise WireError(f"not a broker reply ({end} bytes)")
    r: _Reader = _Reader(data, 3)
    ident = r.varint()
    return data[1], data[2], ident, r.items()


def parse_subscribe(payload):
    """``(sub_id, [pattern text, ...])`` of an ``IT_SUBSCRIBE`` payload."""
    r: _Reader = _Reader(_as_bytes(payload), 0)
    n: cython.longlong
    sub_id = r.varint()
    texts = []
    while r.pos < r.end:
        n = r.varint()
        try:
            texts.append(r.take(n, "a pattern of a subscribe item").decode("utf-8"))
        except UnicodeDecodeError:
            raise WireError("a pattern of a subscribe item is not UTF-8") from None
    return sub_id, texts


def parse_varint(payload):
    """The number a payload holding only a varint carries."""
    r: _Reader = _Reader(_as_bytes(payload), 0)
    n = r.varint()
    if r.pos != r.end:
        raise WireError("bytes after a varint")
    return n
