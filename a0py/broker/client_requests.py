"""What a broker client sends and waits for: the items of its requests, the calls
waiting for their replies (ping, facts, revoke), and the operations a ``batch()``
block gathers before they go as one request (:class:`a0py.broker.BrokerClient` uses
them all, under its lock).

An operation is a tuple: ``("claim", encoding, value)``, ``("retract", encoding,
value)``, ``("retract_pattern", pattern text, pattern)``, ``("subscribe",
subscription)`` or ``("unsubscribe", subscription id)``.
"""

import threading

from a0py.dataspace import InvalidValueError, Record, encode

from . import wire
from .terms import pattern_text
from .wire import (
    IT_CLAIM,
    IT_RETRACT,
    IT_RETRACT_PATTERN,
    IT_SUBSCRIBE,
    IT_UNSUBSCRIBE,
    item,
    varint,
)

DEFAULT_TIMEOUT = 5.0


class PendingCall:
    """A request that waits for its reply (ping, facts, revoke): what it sent, so that a
    resync can send it again under a new id, and the reply items gathered so far (a
    reply may come in several frames) or the error that ended it."""

    __slots__ = ("done", "error", "flags", "items", "kind", "reply")

    def __init__(self, kind, items=(), flags=0):
        self.kind = kind
        self.flags = flags
        self.items = list(items)
        self.done = threading.Event()
        self.error = None
        self.reply = []


class BatchedOps:
    """The operations one thread's ``batch()`` blocks gathered so far, and how deep
    those blocks nest (the outermost sends them)."""

    __slots__ = ("depth", "ops")

    def __init__(self):
        self.ops = []
        self.depth = 0


class BatchBlock:
    """The context manager :meth:`BrokerClient.batch` returns (a class, not a generator:
    it is entered on every batch)."""

    __slots__ = ("batch", "client")

    def __init__(self, client):
        self.client = client
        self.batch = None

    def __enter__(self):
        local = self.client._local
        b = getattr(local, "batch", None)
        if b is None:
            b = local.batch = BatchedOps()
            with self.client._lock:
                self.client._batching += 1
        b.depth += 1
        self.batch = b
        return self.client

    def __exit__(self, exc_type, exc, tb):
        b = self.batch
        b.depth -= 1
        if b.depth == 0:
            self.client._local.batch = None
            with self.client._lock:
                self.client._batching -= 1
            if exc_type is None and b.ops:
                self.client._send_ops(b.ops)
        return False


def op_items(ops):
    """The request items of the operations ``ops``, in their order."""
    items = []
    append = items.append
    for op in ops:
        kind = op[0]
        if kind == "claim":
            append(item(IT_CLAIM, op[1]))
        elif kind == "retract":
            append(item(IT_RETRACT, op[1]))
        elif kind == "retract_pattern":
            append(item(IT_RETRACT_PATTERN, op[1].encode("utf-8")))
        elif kind == "subscribe":
            append(item(IT_SUBSCRIBE, subscribe_payload(op[1])))
        else:
            append(item(IT_UNSUBSCRIBE, varint(op[1])))
    return items


def record_encoding(v):
    """The encoding of ``v`` if it is a Record that is a value, else None (then
    :func:`a0py.broker.terms.to_value` checks it and says what is wrong)."""
    if type(v) is Record and not v.is_pattern:
        try:
            return encode(v)
        except InvalidValueError:
            return None
    return None


def subscribe_payload(sub):
    """The payload of the item that subscribes :class:`Subscription` ``sub``."""
    return wire.subscribe_payload(sub.id, [pattern_text(p) for p in sub.patterns])


def facts_reply(items, owners):
    """The facts of a facts or revoke reply's ``items``: a list of values, or with
    ``owners`` a list of ``(value, [client names])``."""
    out = []
    for op, payload in items:
        if op == wire.IT_FACT:
            out.append((wire.decode_value(payload), []))
        elif op == wire.IT_OWNER and out:
            out[-1][1].append(payload.decode("utf-8"))
    return out if owners else [f for f, _o in out]
