"""How the broker and its clients meet in shared memory: arena names and frame layout.

Everything that depends on the transport lives here, so that moving the broker onto
topics and packets changes this module only.

Arenas (POSIX shared memory, mode 0600):

* ``a0py.broker.<broker>``: the **request arena**. Every client writes its requests
  here; the broker is its only reader. Its deadman is the broker's liveness: the running
  broker holds it for its life, so clients see a crashed broker at once.
* ``a0py.broker.<broker>.c.<client>``: one **client arena** per client. The broker
  writes replies and notifications; the client is its only reader. Its deadman is the
  client's liveness: the client's reader thread holds it, so the broker sees a killed
  client at once.

Frames. Each frame is a header and a list of items; every value in an item is the
dataspace's canonical encoding (:func:`a0py.dataspace.encode`), every pattern its text
(:func:`a0py.dataspace.format_term`)::

    request:  MAGIC  kind  flags  varint req_id  varint len  client (UTF-8)  items...
    reply:    MAGIC  kind  flags  varint id                                  items...
    item:     op  varint len  payload

A varint is unsigned LEB128. ``FLAG_MORE`` marks a frame whose request (or reply)
continues in the next frame of the same source: a request larger than a frame is cut
between items, and the broker applies it only once its last frame is in (batches stay
atomic).

Invariants:

* **No request is evicted unread.** A writer allocates only when ``alloc_evicts`` says
  nothing would be evicted; otherwise it sleeps on the arena until the broker makes room
  (the broker clears the arena once it has read every frame in it, under the lock). If
  the broker is dead the write is dropped: the client re-sends its whole state when a
  broker takes the deadman again, so nothing is lost that matters.
* **A client never trusts its arena to keep every frame.** The broker never waits for a
  slow client: its arena is a ring, and an overrun shows as a gap in the frame seqs. The
  client then asks for a resync (its whole state again, every result in full).
* Frames read from shared memory are parsed with bounds checks; a malformed frame is a
  :class:`WireError`, never a crash or a hang.
"""

import re
import time

from a0py.dataspace import decode
from a0py.errors import A0TimeoutError

from .errors import BrokerError, BrokerNameError

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
REP_ERROR = 2      # id: the rejected request; IT_INDEX (the bad item), IT_TEXT
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

ARENA_PREFIX = "a0py.broker."
REQUEST_ARENA_SIZE = 8 << 20
CLIENT_ARENA_SIZE = 4 << 20
MAX_FRAME = 256 << 10       # requests and replies are cut into frames of at most this
_NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,99}\Z")
_WAIT_SLICE = 0.05          # how often a blocked writer re-checks the broker's liveness


class WireError(BrokerError, ValueError):
    """A frame does not follow the layout (names the offset and what was wrong)."""


def check_name(name, what="broker name"):
    """Return ``name`` if it is a valid broker or client name; else raise
    :class:`BrokerNameError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise BrokerNameError(
            f"{what} must be 1 to 100 characters of [A-Za-z0-9_.-], not starting with '.', "
            f"got {name!r}")
    return name


def request_arena_name(broker):
    return ARENA_PREFIX + check_name(broker)


def client_arena_name(broker, client):
    return f"{ARENA_PREFIX}{check_name(broker)}.c.{check_name(client, 'client name')}"


# ---------------------------------------------------------------- encoding


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def item(op, payload):
    """One item's bytes."""
    n = len(payload)
    if n < 0x80:
        return bytes((op, n)) + payload
    return bytes((op,)) + varint(n) + payload


def subscribe_payload(sub_id, pattern_texts):
    parts = [varint(sub_id)]
    for text in pattern_texts:
        b = text.encode("utf-8")
        parts.append(varint(len(b)))
        parts.append(b)
    return b"".join(parts)


def request_frames(kind, req_id, client, items, flags=0, limit=MAX_FRAME):
    """The frames of one request: ``items`` (item bytes) packed greedily, every frame but
    the last flagged ``FLAG_MORE``. Raises :class:`BrokerError` for an item that cannot
    fit in one frame."""
    c = client.encode("utf-8")
    head_rest = varint(req_id) + varint(len(c)) + c
    return _frames(kind, flags, head_rest, items, limit)


def reply_frames(kind, ident, items, flags=0, limit=MAX_FRAME):
    """The frames of one reply (as :func:`request_frames`)."""
    return _frames(kind, flags, varint(ident), items, limit)


def _frames(kind, flags, head_rest, items, limit):
    budget = limit - 3 - len(head_rest)
    if type(items) is not list:
        items = list(items)
    if sum(map(len, items)) <= budget:     # the usual case: one frame
        return [b"".join([bytes((MAGIC, kind, flags)), head_rest, *items])]
    frames = []
    batch = []
    size = 0
    for it in items:
        n = len(it)
        if n > budget:
            raise BrokerError(f"an item of {n} bytes does not fit a frame of at most {limit} bytes")
        if size + n > budget:
            frames.append(batch)
            batch = []
            size = 0
        batch.append(it)
        size += n
    frames.append(batch)
    last = len(frames) - 1
    return [bytes((MAGIC, kind, flags | (FLAG_MORE if i < last else 0))) + head_rest + b"".join(b)
            for i, b in enumerate(frames)]


# ---------------------------------------------------------------- decoding


def _varint_at(data, pos, end):
    n = shift = 0
    for _ in range(10):
        if pos >= end:
            raise WireError(f"truncated varint at offset {pos}")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, pos
        shift += 7
    raise WireError(f"varint too long at offset {pos}")


def parse_items(data, pos):
    """The ``(op, payload)`` items of a frame from ``pos`` on (payloads are bytes)."""
    out = []
    end = len(data)
    append = out.append
    while pos < end:
        if pos + 2 > end:
            raise WireError(f"truncated item at offset {pos}")
        op = data[pos]
        n = data[pos + 1]
        if n < 0x80:
            pos += 2
        else:
            n, pos = _varint_at(data, pos + 1, end)
        if n > end - pos:
            raise WireError(f"item at offset {pos} claims {n} bytes, {end - pos} left")
        append((op, data[pos:pos + n]))
        pos += n
    return out


def decode_value(data):
    """The value whose canonical encoding is ``data``: :func:`a0py.dataspace.decode`
    (compiled; it raises :class:`a0py.dataspace.DecodeError` naming the offset)."""
    return decode(data)


def parse_request(data):
    """``(kind, flags, req_id, client, items)`` of a request frame; :class:`WireError` if
    it is malformed."""
    end = len(data)
    if end < 3 or data[0] != MAGIC:
        raise WireError(f"not a broker request (first byte {data[0] if end else None!r}, "
                        f"{end} bytes)")
    req_id, pos = _varint_at(data, 3, end)
    n, pos = _varint_at(data, pos, end)
    if n > end - pos or n == 0:
        raise WireError(f"bad client name length {n} at offset {pos}")
    try:
        client = data[pos:pos + n].decode("utf-8")
    except UnicodeDecodeError:
        raise WireError("client name is not UTF-8") from None
    return data[1], data[2], req_id, client, parse_items(data, pos + n)


def parse_reply(data):
    """``(kind, flags, id, items)`` of a reply frame; :class:`WireError` if malformed."""
    end = len(data)
    if end < 3 or data[0] != MAGIC:
        raise WireError(f"not a broker reply ({end} bytes)")
    ident, pos = _varint_at(data, 3, end)
    return data[1], data[2], ident, parse_items(data, pos)


def parse_subscribe(payload):
    """``(sub_id, [pattern text, ...])`` of an ``IT_SUBSCRIBE`` payload."""
    end = len(payload)
    sub_id, pos = _varint_at(payload, 0, end)
    texts = []
    while pos < end:
        n, pos = _varint_at(payload, pos, end)
        if n > end - pos:
            raise WireError("truncated pattern in a subscribe item")
        texts.append(payload[pos:pos + n].decode("utf-8"))
        pos += n
    return sub_id, texts


def parse_varint(payload):
    n, pos = _varint_at(payload, 0, len(payload))
    if pos != len(payload):
        raise WireError("bytes after a varint")
    return n


# ---------------------------------------------------------------- writing


def write_frames(transport, frames, alive=None, timeout=None):
    """Append ``frames`` to a request arena without evicting any unread frame.

    While the arena is too full, sleep on it (lock released) until the reader clears
    it. ``alive()`` is asked every few milliseconds while waiting: when it says the
    reader is gone, the rest is dropped and False returned. Returns True once written.
    Raises :class:`a0py.A0TimeoutError` after ``timeout`` seconds of waiting."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for data in frames:
        while True:
            step = _WAIT_SLICE
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    raise A0TimeoutError("the broker's request arena stayed full")
            try:
                # One lock round trip when there is room (the usual case); otherwise the
                # core sleeps on the arena, without the GIL, until there is.
                transport.write(data, evict=False, timeout=step)
                break
            except A0TimeoutError:
                if alive is not None and not alive():
                    return False
    return True
