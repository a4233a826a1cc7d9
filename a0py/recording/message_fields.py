"""The fixed fields of a chunk's Message records, read for many records at
once: every reader of recordings (the player, ``bag info``, the frame
counts, Spark's batches, the view's playback) reads them this way.

A field at many offsets is one numpy fancy index of an unaligned
little-endian view (:func:`a0py.recording.reader.u_views`); the offsets are
those of :data:`a0py.recording.format.MESSAGE_LAYOUT`, named as the MCAP
specification names the fields.
"""

from __future__ import annotations

import numpy as np

from .format import (
    MESSAGE_CHANNEL_AT,
    MESSAGE_FIXED,
    MESSAGE_LOG_TIME_AT,
    MESSAGE_PUBLISH_TIME_AT,
    MESSAGE_SEQUENCE_AT,
    RECORD_HEADER,
    RECORD_LENGTH_AT,
)
from .reader import u_views

__all__ = ["DATA_AFTER_LENGTH", "MessageFields"]

#: Bytes of a Message record's body before its data: a body shorter than this
#: is malformed; its data is the body length less this.
DATA_AFTER_LENGTH = MESSAGE_FIXED - RECORD_HEADER


class MessageFields:
    """The Message records of ``records`` (a decompressed chunk or region);
    each method takes the records' offsets (an int64 array) and returns the
    field of each, as an array in that order."""

    __slots__ = ("records", "u16", "u32", "u64")

    def __init__(self, records):
        self.records = records
        self.u16, self.u32, self.u64 = u_views(records)

    def channel_id(self, offs):
        return self.u16[offs + MESSAGE_CHANNEL_AT]

    def sequence(self, offs):
        return self.u32[offs + MESSAGE_SEQUENCE_AT]

    def log_time(self, offs):
        return self.u64[offs + MESSAGE_LOG_TIME_AT]

    def publish_time(self, offs):
        return self.u64[offs + MESSAGE_PUBLISH_TIME_AT]

    def body_length(self, offs):
        """The record's body length, as int64."""
        return self.u64[offs + RECORD_LENGTH_AT].astype(np.int64)

    @staticmethod
    def data_start(offs):
        """Where each record's data begins."""
        return offs + MESSAGE_FIXED

    @staticmethod
    def data_end(offs, body_length):
        """Where each record's data ends (``body_length``: :meth:`body_length`)."""
        return offs + RECORD_HEADER + body_length

    def data(self, offset, body_length):
        """One record's data, a memoryview of ``records``."""
        return memoryview(self.records)[offset + MESSAGE_FIXED:offset + RECORD_HEADER + body_length]
