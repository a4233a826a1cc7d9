"""What a bridge counts, per topic: what it carried and what it could not deliver; and
the status document it keeps in its root for ``a0py ls`` and ``a0py info``.

The status topic (:data:`STATUS_TOPIC`, a pub/sub topic of the bridge's root) holds, as
its newest packet, the bridge's :meth:`~a0py.bridge.ZenohBridge.status` as JSON plus
``pid`` and ``time_wall`` (ns): written when the bridge starts, every report interval
when its counts changed, at once when a peer bridge comes or goes (its ``peers``:
:mod:`a0py.bridge.peers`), and when it stops. The bridge never bridges that topic.
:func:`read_status` reads it back; nothing read is trusted (a packet that is not such a
document reads as None).
"""

__all__ = ["COUNT_FIELDS", "LOSS_FIELDS", "PROTOCOL_SECTIONS", "STATUS_TOPIC", "TopicCounts",
           "gone_peers", "read_status", "topic_counts"]

#: The fields of :class:`TopicCounts` that are losses (reported in the log topic).
LOSS_FIELDS = ("missed_local", "lost", "too_large", "corrupt", "write_errors")
#: Every field of :class:`TopicCounts`.
COUNT_FIELDS = ("corrupt", "duplicates", "exported", "imported", "lost", "missed_local",
                "too_large", "write_errors")
#: The topic, in the bridge's root, whose newest packet is the bridge's status.
STATUS_TOPIC = "a0py/bridge/status"
#: The status's section of each protocol's counts.
PROTOCOL_SECTIONS = {"pubsub": "topics", "log": "logs", "cfg": "cfgs", "rpc": "rpcs", "prpc": "prpcs"}


class TopicCounts:
    """Counters of one topic in one bridge.

    * ``exported``: local packets sent to Zenoh; ``missed_local``: local packets evicted
      from the topic's ring before the bridge read them (a publisher faster than the
      bridge).
    * ``imported``: remote packets written into the local topic; ``lost``: remote
      packets that never arrived (gaps in the exporting bridge's numbering: Zenoh
      dropped them under congestion, or the link went down); ``duplicates``: packets
      received twice and written once; ``too_large``: packets larger than the local
      topic's arena takes; ``corrupt``: samples on the topic's key that were not a0py
      packets; ``write_errors``: the local topic could not be opened or written."""

    __slots__ = COUNT_FIELDS

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def losses(self):
        return {name: getattr(self, name) for name in LOSS_FIELDS if getattr(self, name)}


def _valid_counts(counts):
    return isinstance(counts, dict) and all(
        isinstance(counts.get(f), int) and not isinstance(counts.get(f), bool) and counts[f] >= 0
        for f in COUNT_FIELDS)


def read_status(root):
    """The status the bridge of `root` (a :class:`a0py.proto.topic.Root` or spec) last
    wrote, as a dict (see the module doc), or None when there is none or it is not a
    bridge's status. Opens nothing that does not exist; creates nothing."""
    from .status_topic import read_document

    doc = read_document(STATUS_TOPIC, root)
    if doc is None or not isinstance(doc.get("id"), str):
        return None
    for section in PROTOCOL_SECTIONS.values():
        topics = doc.get(section, {})
        if not isinstance(topics, dict) or not all(isinstance(k, str) and _valid_counts(v)
                                                   for k, v in topics.items()):
            return None
    peers = doc.get("peers", [])  # absent in the status of bridges before link state
    if not isinstance(peers, list) or not all(_valid_peer(p) for p in peers):
        return None
    doc["peers"] = peers
    return doc


def _valid_peer(peer):
    return (isinstance(peer, dict) and all(isinstance(peer.get(k), str) for k in ("id", "host", "root"))
            and peer.get("state") in ("up", "gone", "stopped")
            and all(type(peer.get(k)) is int and peer[k] >= 0 for k in ("pid", "since")))


def gone_peers(status):
    """The peers (status entries) a bridge's status says are gone, oldest loss first;
    empty for None."""
    if status is None:
        return []
    return sorted((p for p in status.get("peers", []) if p["state"] == "gone"), key=lambda p: p["since"])


def topic_counts(status, name):
    """``{protocol: counts dict}`` of topic `name` in a status read by
    :func:`read_status` (empty when the bridge has not counted it)."""
    if status is None:
        return {}
    return {protocol: status[section][name] for protocol, section in PROTOCOL_SECTIONS.items()
            if name in status.get(section, {})}
