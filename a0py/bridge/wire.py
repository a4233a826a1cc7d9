"""What a bridge puts on the network and what it writes back into topics: key
expressions, the attachment of each sample, and the re-encoding of a bridged packet.

Invariants:

* A local topic ``T``'s pub/sub packets go to the key ``<prefix>/pubsub/T``, its log
  messages to ``<prefix>/log/T``, its configuration's versions to ``<prefix>/cfg/T``
  (:data:`BRIDGED`): the topic's segments are the key's
  chunks (topic names are a subset of Zenoh's chunk syntax:
  letters, digits, ``_ - .``, never ``*``, ``$``, ``?``, ``#`` or ``@``).
* A sample's payload is the packet exactly as it lies in the origin's frame (the
  a0py packet format, standard block included); its attachment (:class:`Attachment`)
  says which bridge exported it, from which host, and its number in that bridge's
  stream for that topic. Nothing received is trusted: a payload that is not a packet,
  an attachment that does not parse, a key that is not a topic are refused by the
  functions here with :class:`WireError`, which the receiver counts.
* A packet written back into a topic keeps the origin's id, payload, headers and
  standard block (times, writer id, writer seq, the origin's transport seq) byte for
  byte, and gains the bridge headers :data:`ORIGIN`, :data:`HOST` and :data:`SEQ`.
  A packet carrying :data:`ORIGIN` came from the network; bridges never export it again
  (the loop-freedom rule, docs/bridge.md).
"""

import struct
import uuid

from .._core import Packet
from ..errors import ArgumentError, PacketCorruptError
from ..proto.packets import STANDARD_HEADERS
from ..proto.topic import CFG, LOG, PRPC, PUBSUB, RPC, check_topic_name
from .errors import WireError

__all__ = ["BRIDGED", "HOST", "ORIGIN", "REQREP", "SEQ", "Attachment", "RpcAttachment", "WireError",
           "bridged_packet", "check_prefix", "key_of", "pubsub_key", "reqrep_key", "server_token_key",
           "topic_of_key", "topic_of_reqrep_key", "was_bridged"]

#: The protocols a bridge carries, each under its own key ``<prefix>/<protocol>/<topic>``.
BRIDGED = (PUBSUB, LOG, CFG)

#: The request/reply protocols a bridge forwards (docs/bridge.md, "RPC and PRPC").
REQREP = (RPC, PRPC)

#: Header naming the bridge (its id, 32 hex digits) that exported a bridged packet.
ORIGIN = "a0py.bridge.origin"
#: Header naming the host of that bridge (its hostname).
HOST = "a0py.bridge.host"
#: Header giving the packet's number in that bridge's stream for its topic (1, 2, 3...).
SEQ = "a0py.bridge.seq"

_STANDARD = frozenset(STANDARD_HEADERS)
_MAGIC = b"A0BR"
_ATTACHMENT = struct.Struct("<4s16sQ")  # magic, origin bridge id, seq; then the host (UTF-8)
_MAX_HOST = 255
_FLAGS = slice(6, 8)        # the packet's flags (docs/pubsub.md, "Packet format")
_STD_BLOCK = slice(48, 96)  # the standard block
_HAS_STD = 1


def check_prefix(prefix):
    """`prefix` if it is a usable key-expression prefix (chunks of a topic name's
    characters, no wildcard), else ArgumentError."""
    if not isinstance(prefix, str):
        raise ArgumentError(f"the bridge prefix must be a str like 'a0py', not {type(prefix).__name__}")
    try:
        return check_topic_name(prefix)
    except ArgumentError:
        raise ArgumentError(f"bad bridge prefix {prefix!r}: use segments of letters, digits, '_', "
                            "'-' and '.' separated by single '/', e.g. 'a0py' or 'site1/a0py'") from None


def key_of(prefix, protocol, topic):
    """The key expression of `topic`'s `protocol` packets."""
    return f"{prefix}/{protocol}/{topic}"


def pubsub_key(prefix, topic):
    """The key expression of `topic`'s pub/sub packets."""
    return key_of(prefix, PUBSUB, topic)


def topic_of_key(prefix, key):
    """``(protocol, topic)`` that a key names; WireError if it names none."""
    head = f"{prefix}/"
    protocol, _, rest = key[len(head):].partition("/")
    if not key.startswith(head) or protocol not in BRIDGED:
        raise WireError(f"key {key!r} is not under {prefix!r} + one of {', '.join(BRIDGED)}")
    try:
        return protocol, check_topic_name(rest)
    except ArgumentError as e:
        raise WireError(f"key {key!r}: {e}") from None


class Attachment:
    """Who exported a sample: ``origin`` (bridge id, bytes of a UUID), ``seq``, ``host``."""

    __slots__ = ("host", "origin", "seq")

    def __init__(self, origin, seq, host):
        self.origin = origin
        self.seq = seq
        self.host = host

    def encode(self):
        return _ATTACHMENT.pack(_MAGIC, self.origin, self.seq) + self.host.encode("utf-8")[:_MAX_HOST]

    @classmethod
    def decode(cls, data):
        """The attachment `data` holds; WireError if it is not one."""
        if data is None:
            raise WireError("sample without attachment")
        if not _ATTACHMENT.size <= len(data) <= _ATTACHMENT.size + _MAX_HOST:
            raise WireError(f"attachment of {len(data)} bytes")
        magic, origin, seq = _ATTACHMENT.unpack_from(data)
        if magic != _MAGIC:
            raise WireError(f"attachment magic {magic!r}")
        try:
            host = bytes(data[_ATTACHMENT.size:]).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("attachment host not UTF-8") from None
        return cls(origin, seq, host)

    @property
    def origin_hex(self):
        return uuid.UUID(bytes=self.origin).hex


def bridged_packet(data, att):
    """The packet to write into the local topic for sample payload `data` (bytes)
    exported as `att`: the origin's packet with the bridge headers added, its id and
    standard block kept. WireError if `data` is not an a0py packet, or already carries
    bridge headers (a bridge exports only packets published on its own machine)."""
    try:
        pkt = Packet.from_bytes(data)
    except PacketCorruptError as e:
        raise WireError(str(e)) from None
    own = [(k, v) for k, v in pkt.headers if k not in _STANDARD]
    if any(k == ORIGIN for k, _ in own):
        raise WireError("packet already bridged once")
    own += [(ORIGIN, att.origin_hex), (HOST, att.host), (SEQ, str(att.seq))]
    out = bytearray(Packet(own, pkt.payload, id=pkt.id).to_bytes())
    if int.from_bytes(data[_FLAGS], "little") & _HAS_STD:
        out[_FLAGS] = (int.from_bytes(out[_FLAGS], "little") | _HAS_STD).to_bytes(2, "little")
        out[_STD_BLOCK] = data[_STD_BLOCK]
    return out


def was_bridged(pkt):
    """Whether packet `pkt` came from the network (carries :data:`ORIGIN`)."""
    return ORIGIN in pkt.headers


# --- request/reply (RPC and PRPC) across the bridge

#: Key chunk of the liveliness tokens announcing a live server:
#: ``<prefix>/rpc-server/<bridge hex>-<generation>/<protocol>/<topic>``.
SERVER_CHUNK = "rpc-server"
#: Key chunk of what a client's bridge sends a server's bridge (requests, cancels):
#: ``<prefix>/rpc-call/<server's bridge hex>/<protocol>/<topic>``.
CALL_CHUNK = "rpc-call"
#: Key chunk of what a server's bridge sends back (accepts, replies, starts, gone):
#: ``<prefix>/rpc-back/<client's bridge hex>/<protocol>/<topic>``.
BACK_CHUNK = "rpc-back"

_RPC_MAGIC = b"A0RR"
_RPC_ATTACHMENT = struct.Struct("<4sB16sQ")  # magic, kind, sender bridge id, generation
#: Kinds of request/reply messages between bridges.
K_REQUEST, K_CANCEL, K_ACCEPT, K_REPLY, K_START, K_GONE = range(1, 7)
_KINDS = frozenset(range(1, 7))


def server_token_key(prefix, bridge_hex, generation, protocol, topic):
    """The liveliness key a bridge declares while `topic`'s `protocol` server on its
    machine is alive (`generation`: 1, 2... per server the bridge has seen there)."""
    return f"{prefix}/{SERVER_CHUNK}/{bridge_hex}-{generation}/{protocol}/{topic}"


def reqrep_key(prefix, chunk, bridge_hex, protocol, topic):
    """The key of request/reply messages (`chunk` :data:`CALL_CHUNK` or
    :data:`BACK_CHUNK`) addressed to the bridge `bridge_hex`."""
    return f"{prefix}/{chunk}/{bridge_hex}/{protocol}/{topic}"


def topic_of_reqrep_key(prefix, chunk, key):
    """``(bridge chunk, protocol, topic)`` of a request/reply or server-token key under
    `chunk`; WireError if `key` is not one."""
    head = f"{prefix}/{chunk}/"
    if not key.startswith(head):
        raise WireError(f"key {key!r} is not under {head!r}")
    who, _, rest = key[len(head):].partition("/")
    protocol, _, name = rest.partition("/")
    if not who or protocol not in REQREP:
        raise WireError(f"key {key!r} names no bridge and request/reply protocol")
    try:
        return who, protocol, check_topic_name(name)
    except ArgumentError as e:
        raise WireError(f"key {key!r}: {e}") from None


class RpcAttachment:
    """What a request/reply message is: ``kind`` (:data:`K_REQUEST`...), ``sender``
    (the sending bridge's id, bytes of a UUID) and ``generation`` (of the server a
    server's bridge speaks for)."""

    __slots__ = ("generation", "kind", "sender")

    def __init__(self, kind, sender, generation=0):
        self.kind = kind
        self.sender = sender
        self.generation = generation

    def encode(self):
        return _RPC_ATTACHMENT.pack(_RPC_MAGIC, self.kind, self.sender, self.generation)

    @classmethod
    def decode(cls, data):
        """The attachment `data` holds; WireError if it is not one."""
        if data is None or len(data) != _RPC_ATTACHMENT.size:
            raise WireError("request/reply sample without a valid attachment")
        magic, kind, sender, generation = _RPC_ATTACHMENT.unpack(data)
        if magic != _RPC_MAGIC or kind not in _KINDS:
            raise WireError(f"request/reply attachment magic {magic!r} kind {kind}")
        return cls(kind, sender, generation)

    @property
    def sender_hex(self):
        return uuid.UUID(bytes=self.sender).hex
