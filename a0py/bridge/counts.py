"""What a bridge counts, per topic: what it carried and what it could not deliver."""

__all__ = ["LOSS_FIELDS", "TopicCounts"]

#: The fields of :class:`TopicCounts` that are losses (reported in the log topic).
LOSS_FIELDS = ("missed_local", "lost", "too_large", "corrupt", "write_errors")


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

    __slots__ = ("corrupt", "duplicates", "exported", "imported", "lost", "missed_local",
                 "too_large", "write_errors")

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)

    def as_dict(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def losses(self):
        return {name: getattr(self, name) for name in LOSS_FIELDS if getattr(self, name)}
