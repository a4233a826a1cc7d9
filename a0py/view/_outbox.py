"""A client's outbox of data messages: its send budget, and what is dropped
when a client reads more slowly than its subscriptions publish.

The budget is a count and a byte size of messages waiting to be sent. Over
it, the outbox drops the oldest message of the topic (the key) that holds the
most bytes in it, again until it is within its budget: per topic the newest
messages win, and a topic of large messages (a camera) gives up its frames
before a topic of small ones (an IMU) loses any, so a client on a slow link
still gets its small topics at their full rate. The message just put is
never the one dropped (a single message larger than the budget still goes),
and every drop is counted, per key.

Invariants: messages of one key leave in the order they came, and messages
of all keys in the order they came, less the dropped ones; ``len()`` and
``bytes`` count only what will be sent.
"""

import collections

__all__ = ["DataOutbox", "SplitFrame"]

#: Payloads above this size are queued apart from their head (see SplitFrame).
SPLIT_ABOVE = 64 << 10


class SplitFrame:
    """A frame queued as its head and its payload, joined only when sent: a
    large payload (a camera frame) queued for many clients is not copied for
    each, and not at all for the clients whose budget drops it."""

    __slots__ = ("body", "head", "size")

    def __init__(self, head, body):
        self.head = head
        self.body = body
        self.size = len(head) + len(body)

    def __len__(self):
        return self.size

    def join(self):
        return self.head + self.body


class DataOutbox:
    """Frames (bytes) waiting to be sent, each under a key (its channel; None
    for the server's own frames), within ``max_messages`` and ``max_bytes``."""

    __slots__ = ("_by_key", "_key_bytes", "_queue", "bytes", "dropped", "live", "max_bytes", "max_messages")

    def __init__(self, max_messages, max_bytes):
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self._queue = collections.deque()  # [frame, key] entries, oldest first; frame None once dropped
        self._by_key = {}  # key -> deque of its live entries, oldest first
        self._key_bytes = {}  # key -> bytes of its live entries
        self.live = 0
        self.bytes = 0
        self.dropped = collections.Counter()  # key -> frames dropped

    def __len__(self):
        return self.live

    def __bool__(self):
        return self.live > 0

    def put(self, frame, key=None):
        """Queues ``frame``; returns how many frames were dropped to keep the budget."""
        entry = [frame, key]
        self._queue.append(entry)
        mine = self._by_key.get(key)
        if mine is None:
            mine = self._by_key[key] = collections.deque()
        mine.append(entry)
        size = len(frame)
        self._key_bytes[key] = self._key_bytes.get(key, 0) + size
        self.live += 1
        self.bytes += size
        if self.live > self.max_messages or self.bytes > self.max_bytes:
            n = self._trim(entry)
            # Dropped entries stay in the queue until passed: compact it when they are
            # most of it (a client that never reads would otherwise grow it for ever).
            if len(self._queue) > 2 * self.live + 64:
                self._queue = collections.deque(e for e in self._queue if e[0] is not None)
            return n
        return 0

    def _trim(self, newest):
        n = 0
        while self.live > 1 and (self.live > self.max_messages or self.bytes > self.max_bytes):
            victim = None
            most = -1
            for key, size in self._key_bytes.items():
                entries = self._by_key[key]
                if size > most and not (len(entries) == 1 and entries[0] is newest):
                    victim, most = key, size
            if victim is None:
                break
            entry = self._by_key[victim].popleft()
            self._forget(entry)
            self.dropped[victim] += 1
            n += 1
        return n

    def _forget(self, entry):
        frame, key = entry
        entry[0] = None
        size = len(frame)
        self.live -= 1
        self.bytes -= size
        left = self._key_bytes[key] - size
        if self._by_key[key]:
            self._key_bytes[key] = left
        else:
            del self._key_bytes[key]
            del self._by_key[key]

    def pop(self):
        """The oldest frame to send (None when there is none)."""
        queue = self._queue
        while queue:
            entry = queue.popleft()
            frame = entry[0]
            if frame is not None:
                self._by_key[entry[1]].popleft()
                self._forget([frame, entry[1]])
                return frame
        return None

    def clear(self):
        """Drops everything queued (not counted as drops: a seek, a disconnect)."""
        self._queue.clear()
        self._by_key.clear()
        self._key_bytes.clear()
        self.live = 0
        self.bytes = 0
