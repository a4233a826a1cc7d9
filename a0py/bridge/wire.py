"""What a bridge puts on the network and what it writes back into topics: key
expressions, the attachment of each sample, and the re-encoding of a bridged packet.

Invariants:

* A local topic ``T``'s pub/sub packets go to the key ``<prefix>/pubsub/T``, its log
  messages to ``<prefix>/log/T``, its configuration's versions to ``<prefix>/cfg/T``
  (:data:`BRIDGED`): the topic's segments are the key's
  chunks (topic names are a subset of Zenoh's chunk syntax:
  letters, digits, ``_ - .``, never ``*``, ``$``, ``?``, ``#`` or ``@``).
* A pub/sub sample's payload is a *batch*: one or more packets read at once from the
  topic's ring, each as it lies in the origin's frame (the a0py packet format, standard
  block included) after a 16-byte prefix (its transport seq and size, u64 little-endian);
  its attachment (:class:`BatchAttachment`, magic ``A0BB``) says which bridge exported
  it, from which host, the number of its first packet in that bridge's stream for that
  topic (the others follow, one each) and how many it holds. A log or configuration
  sample holds one packet, as it lies in the frame, with an :class:`Attachment` (magic
  ``A0BR``: bridge, host, number); so did every pub/sub sample of the bridges before
  batches, and the importer still takes them. Nothing received is trusted: a payload that is not a packet,
  an attachment that does not parse, a key that is not a topic are refused by the
  functions here with :class:`WireError`, which the receiver counts.
* A bridge in bundle mode puts the batches of several topics read in one wake-up as one
  sample on ``<prefix>/bundle/<its id>`` (:func:`bundle_key`): its payload is a list of
  *sections*, each a :data:`BUNDLE_SECTION` header (first packet's number, batch size,
  packet count, name size), the topic's name and a batch as above; its attachment
  (:class:`BundleAttachment`, magic ``A0BN``) names the bridge, its host and the
  section count. A section's packets are numbered in the same stream per (bridge,
  topic) as the topic's batch samples, so the two kinds of sample of one topic
  interleave without a gap or a duplicate.
* A running bridge holds a liveliness token ``<prefix>/bridge-peer/<id>/<label>``
  (:func:`peer_token_key`), the label its host, root and pid as JSON in unpadded
  URL-safe base64; :func:`peer_of_token_key` refuses anything else.
* A packet written back into a topic keeps the origin's id, payload, headers and
  standard block (times, writer id, writer seq, the origin's transport seq) byte for
  byte, and gains the bridge headers :data:`ORIGIN`, :data:`HOST` and :data:`SEQ`.
  A packet carrying :data:`ORIGIN` came from the network; bridges never export it again
  (the loop-freedom rule, docs/bridge.md).
"""

import base64
import binascii
import json
import struct
import uuid

from .._core import packet_append_headers
from ..errors import ArgumentError, PacketCorruptError
from ..proto.topic import CFG, LOG, PRPC, PUBSUB, RPC, check_topic_name
from .errors import WireError

__all__ = ["BRIDGED", "BUNDLE_CHUNK", "BUNDLE_SECTION", "FRAME_PREFIX", "HOST", "ORIGIN", "REQREP", "SEQ",
           "Attachment", "PEER_CHUNK", "PEER_BYE_CHUNK", "BatchAttachment", "BatchAttachmentWriter",
           "BundleAttachment", "BundleAttachmentWriter", "BundleSection", "RpcAttachment", "WireError",
           "batch_frames", "bridge_headers", "bridged_packet", "bundle_key", "bundle_payload", "bundle_sections", "bundle_topic",
           "decode_attachment", "check_prefix", "key_of", "peer_bye_key", "peer_of_bye_key", "peer_of_token_key", "peer_token_key", "pubsub_key", "reqrep_key", "server_token_key",
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

_MAGIC = b"A0BR"
# Packet numbers are u64 on the wire; a batch whose numbers would run past this is refused.
_MAX_NUMBER = (1 << 64) - 1
_ATTACHMENT = struct.Struct("<4s16sQ")  # magic, origin bridge id, seq; then the host (UTF-8)
_MAX_HOST = 255


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


def bridge_headers(att, seq=None):
    """The bridge headers of a packet exported as `att` (its number `seq`, default
    ``att.seq``)."""
    return [(ORIGIN, att.origin_hex), (HOST, att.host), (SEQ, str(att.seq if seq is None else seq))]


def bridged_packet(data, att, seq=None):
    """The packet to write into the local topic for the packet `data` (bytes-like)
    exported as `att` (numbered `seq`, default ``att.seq``): the origin's packet with
    the bridge headers added, its id, headers, standard block and payload kept byte for
    byte (spliced by the binding, nothing decoded). WireError if `data` is not an a0py
    packet, or already carries bridge headers (a bridge exports only packets published
    on its own machine)."""
    try:
        out = packet_append_headers(data, bridge_headers(att, seq), ORIGIN)
    except PacketCorruptError as e:
        raise WireError(str(e)) from None
    if out is None:
        raise WireError("packet already bridged once")
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


# --- bridges watching each other (link state)

#: Key chunk of the liveliness token each running bridge declares:
#: ``<prefix>/bridge-peer/<bridge hex>/<label>``, the label naming its host, root and pid.
PEER_CHUNK = "bridge-peer"
#: Key chunk of the notice a bridge puts as it stops (:func:`peer_bye_key`).
PEER_BYE_CHUNK = "bridge-bye"
_MAX_LABEL = 1024


def peer_token_key(prefix, bridge_hex, host, root, pid):
    """The liveliness key a bridge declares while it runs: its id, and a label (JSON in
    unpadded URL-safe base64, valid in a key chunk) naming its host, root and pid."""
    label = base64.urlsafe_b64encode(json.dumps([host, root, pid]).encode()).rstrip(b"=").decode()
    return f"{prefix}/{PEER_CHUNK}/{bridge_hex}/{label}"


def peer_bye_key(prefix, bridge_hex):
    """The key a bridge puts an empty sample on as it stops, before it withdraws its
    peer token: the other bridges tell a bridge stopped from a link gone down."""
    return f"{prefix}/{PEER_BYE_CHUNK}/{bridge_hex}"


def peer_of_bye_key(prefix, key):
    """The bridge id (32 hex digits) of a stop notice's key; WireError if `key` is not
    one."""
    head = f"{prefix}/{PEER_BYE_CHUNK}/"
    who = key[len(head):]
    if not key.startswith(head) or len(who) != 32 or not all(c in "0123456789abcdef" for c in who):
        raise WireError(f"key {key!r} is not a bridge's stop notice")
    return who


def peer_of_token_key(prefix, key):
    """``(bridge hex, host, root, pid)`` of a peer token's key; WireError if `key` is
    not one."""
    head = f"{prefix}/{PEER_CHUNK}/"
    who, _, label = key[len(head):].partition("/")
    if not key.startswith(head) or len(who) != 32 or not all(c in "0123456789abcdef" for c in who) \
            or not 0 < len(label) <= _MAX_LABEL:
        raise WireError(f"key {key!r} is not a bridge's peer token")
    try:
        host, root, pid = json.loads(base64.urlsafe_b64decode(label + "=" * (-len(label) % 4)))
    except (ValueError, TypeError, binascii.Error):
        raise WireError(f"peer token {key!r}: its label does not decode") from None
    if not (isinstance(host, str) and isinstance(root, str) and type(pid) is int and pid >= 0):
        raise WireError(f"peer token {key!r}: its label is not [host, root, pid]")
    return who, host, root, pid


# --- batches: several pub/sub packets in one sample

_BATCH_MAGIC = b"A0BB"
#: A batch sample's attachment: magic, origin bridge id, the first packet's number, packet
#: count; then the host (UTF-8).
_BATCH_ATTACHMENT = struct.Struct("<4s16sQI")
_BATCH_SEQ_AT = 20
_BATCH_SEQ_COUNT = struct.Struct("<QI")
#: Before each frame in a batch's payload: the origin's transport seq and the frame's size.
FRAME_PREFIX = struct.Struct("<QQ")
class BatchAttachment:
    """Who exported a batch sample: ``origin``, ``seq`` (the number of its first
    packet; the others follow, one each), ``count``, ``host``."""

    __slots__ = ("count", "host", "origin", "seq")

    def __init__(self, origin, seq, count, host):
        self.origin = origin
        self.seq = seq
        self.count = count
        self.host = host

    def encode(self):
        return (_BATCH_ATTACHMENT.pack(_BATCH_MAGIC, self.origin, self.seq, self.count)
                + self.host.encode("utf-8")[:_MAX_HOST])

    @property
    def origin_hex(self):
        return uuid.UUID(bytes=self.origin).hex


class BatchAttachmentWriter:
    """The attachments of one exporter's batch samples: origin and host encoded once,
    the number and count packed into the same kept buffer at each :meth:`encode` (the
    receiver of the buffer must copy it before the next call: Zenoh's put does)."""

    __slots__ = ("_buffer",)

    def __init__(self, origin, host):
        self._buffer = bytearray(BatchAttachment(origin, 1, 1, host).encode())

    def encode(self, seq, count):
        _BATCH_SEQ_COUNT.pack_into(self._buffer, _BATCH_SEQ_AT, seq, count)
        return self._buffer


def decode_attachment(data):
    """An :class:`Attachment` (one packet a sample: log messages, configuration
    versions, and every packet of bridges before batches) or a
    :class:`BatchAttachment` (pub/sub packets); WireError if `data` is neither."""
    if data is not None and data[:4] == _BATCH_MAGIC:
        if not _BATCH_ATTACHMENT.size <= len(data) <= _BATCH_ATTACHMENT.size + _MAX_HOST:
            raise WireError(f"batch attachment of {len(data)} bytes")
        _magic, origin, seq, count = _BATCH_ATTACHMENT.unpack_from(data)
        try:
            host = bytes(data[_BATCH_ATTACHMENT.size:]).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("attachment host not UTF-8") from None
        if count == 0 or seq == 0:
            raise WireError(f"batch attachment of {count} packets from number {seq}")
        if seq + count - 1 > _MAX_NUMBER:
            raise WireError(f"attachment numbers {seq} to {seq} + {count - 1} run past 2**64 - 1")
        return BatchAttachment(origin, seq, count, host)
    return Attachment.decode(data)


def batch_frames(payload, count):
    """The `count` frames (memoryviews) of a batch sample's payload; WireError if it is
    not exactly that many prefixed frames."""
    view = memoryview(payload)
    frames = []
    off, end = 0, len(view)
    prefix = FRAME_PREFIX.size
    while off < end:
        if end - off < prefix:
            raise WireError(f"batch cut inside a frame prefix at byte {off}")
        _seq, size = FRAME_PREFIX.unpack_from(view, off)
        off += prefix
        if size > end - off:
            raise WireError(f"batch frame of {size} bytes at byte {off}, past the end ({end})")
        frames.append(view[off:off + size])
        off += size
    if len(frames) != count:
        raise WireError(f"batch of {len(frames)} frames, its attachment says {count}")
    return frames


# --- bundles: several topics' batches in one sample (bundle mode)

#: Key chunk of a bundling bridge's samples: ``<prefix>/bundle/<bridge hex>``.
BUNDLE_CHUNK = "bundle"
_BUNDLE_MAGIC = b"A0BN"
#: A bundle's attachment: magic, origin bridge id, section count; then the host (UTF-8).
_BUNDLE_ATTACHMENT = struct.Struct("<4s16sI")
_BUNDLE_COUNT_AT = 20
_BUNDLE_COUNT = struct.Struct("<I")
#: Before each section of a bundle: the number of the section's first packet in the
#: exporting bridge's stream for its topic, the size of its batch, its packet count, the
#: size of its topic name; then the name (UTF-8) and the batch (as a batch sample's
#: payload: each frame after its :data:`FRAME_PREFIX`).
BUNDLE_SECTION = struct.Struct("<QQIH")


def bundle_key(prefix, bridge_hex):
    """The key expression of the bundles the bridge `bridge_hex` sends."""
    return f"{prefix}/{BUNDLE_CHUNK}/{bridge_hex}"


class BundleAttachment:
    """Who exported a bundle: ``origin`` (bridge id, bytes of a UUID), ``count`` (its
    sections), ``host``."""

    __slots__ = ("count", "host", "origin")

    def __init__(self, origin, count, host):
        self.origin = origin
        self.count = count
        self.host = host

    def encode(self):
        return _BUNDLE_ATTACHMENT.pack(_BUNDLE_MAGIC, self.origin, self.count) + self.host.encode("utf-8")[:_MAX_HOST]

    @classmethod
    def decode(cls, data):
        """The attachment `data` holds; WireError if it is not a bundle's."""
        if data is None:
            raise WireError("bundle without attachment")
        if not _BUNDLE_ATTACHMENT.size <= len(data) <= _BUNDLE_ATTACHMENT.size + _MAX_HOST:
            raise WireError(f"bundle attachment of {len(data)} bytes")
        magic, origin, count = _BUNDLE_ATTACHMENT.unpack_from(data)
        if magic != _BUNDLE_MAGIC:
            raise WireError(f"bundle attachment magic {magic!r}")
        try:
            host = bytes(data[_BUNDLE_ATTACHMENT.size:]).decode("utf-8")
        except UnicodeDecodeError:
            raise WireError("attachment host not UTF-8") from None
        if count == 0:
            raise WireError("bundle attachment of 0 sections")
        return cls(origin, count, host)

    @property
    def origin_hex(self):
        return uuid.UUID(bytes=self.origin).hex


class BundleAttachmentWriter:
    """The attachments of one export loop's bundles: origin and host encoded once, the
    section count packed into the same kept buffer at each :meth:`encode` (copied by
    Zenoh's put before the next call)."""

    __slots__ = ("_buffer",)

    def __init__(self, origin, host):
        self._buffer = bytearray(BundleAttachment(origin, 1, host).encode())

    def encode(self, count):
        _BUNDLE_COUNT.pack_into(self._buffer, _BUNDLE_COUNT_AT, count)
        return self._buffer


class BundleSection:
    """One topic's part of a bundle: ``topic``, ``first`` (the number of its first
    packet), ``count``, ``batch`` (its frames, each after its prefix, as a batch
    sample's payload: :func:`batch_frames` splits it)."""

    __slots__ = ("batch", "count", "first", "topic")

    def __init__(self, topic, first, count, batch):
        self.topic = topic
        self.first = first
        self.count = count
        self.batch = batch


def bundle_sections(payload, count):
    """The `count` :class:`BundleSection` of a bundle's payload (their batches
    memoryviews of it, not yet split); WireError if it is not exactly that many
    sections, each naming a topic (its canonical name) and numbering its packets from 1
    to at most 2**64 - 1. A section's batch is checked when it is split."""
    view = memoryview(payload)
    sections = []
    off, end = 0, len(view)
    head = BUNDLE_SECTION.size
    while off < end:
        if end - off < head:
            raise WireError(f"bundle cut inside a section header at byte {off}")
        first, size, n, name_len = BUNDLE_SECTION.unpack_from(view, off)
        off += head
        if name_len == 0 or name_len > end - off:
            raise WireError(f"bundle section name of {name_len} bytes at byte {off}, past the end ({end})")
        raw = bytes(view[off:off + name_len])
        off += name_len
        if size > end - off:
            raise WireError(f"bundle section batch of {size} bytes at byte {off}, past the end ({end})")
        if n == 0 or first == 0 or first + n - 1 > _MAX_NUMBER:
            raise WireError(f"bundle section of {n} packets from number {first}")
        sections.append(BundleSection(raw, first, n, view[off:off + size]))
        off += size
    if len(sections) != count:
        raise WireError(f"bundle of {len(sections)} sections, its attachment says {count}")
    for s in sections:
        s.topic = bundle_topic(s.topic)
    return sections


def bundle_topic(raw):
    """The topic a bundle section names (`raw`: its name's bytes); WireError unless it
    is a topic name in canonical form."""
    try:
        name = raw.decode("utf-8")
        if check_topic_name(name) == name:
            return name
    except (UnicodeDecodeError, ArgumentError):
        pass
    raise WireError(f"bundle section named {raw[:80]!r}: not a topic name")


def bundle_payload(sections):
    """A bundle's payload from ``[(topic, first number, [packet bytes, ...]), ...]``
    (what the export loop writes in place; for tests and Zenoh applications of one's
    own)."""
    out = bytearray()
    for topic, first, packets in sections:
        name = topic.encode("utf-8")
        batch = b"".join(FRAME_PREFIX.pack(i + 1, len(p)) + bytes(p) for i, p in enumerate(packets))
        out += BUNDLE_SECTION.pack(first, len(batch), len(packets), len(name)) + name + batch
    return bytes(out)
