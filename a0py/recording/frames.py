"""The frames a recording holds, topic by topic, without Arrow: the seqs of
its frames and the gaps it records. What ``a0py bag info`` counts in a
segment it cannot describe from its summary, and where ``a0py record
--resume`` goes on from.

A frame's seq is its packet's ``a0_transport_seq`` (the standard block, or
the header), else the record's 32-bit sequence, as the Spark source gives
it; a gap is the message of the gap channel (topic, first and last missing
seq). Only channels of a0py packets and the gap channel are read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
from mcap.opcode import Opcode

from . import reader
from .errors import RecordingFormatError
from .format import (
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    channel_kind,
    headers_topic,
    parse_gap,
)
from .headers import FORMAT_PACKET, headers_format
from .message_fields import DATA_AFTER_LENGTH, MessageFields
from .packets import cut_packet_records, transport_seqs

# a0py's channels; any other (JSON copies, foreign channels, whatever
# channel_kind calls them) holds no frame of a topic.
_READ_KINDS = (KIND_PACKET, KIND_HEADERS, KIND_TYPED, KIND_GAP)


@dataclass
class TopicSeqs:
    """What a recording holds of one topic: its frames and their bytes, its
    lowest and highest frame seqs (None without a frame), its gaps, the
    frames they lost, and the highest seq a gap covers (None without a gap)."""

    frames: int = 0
    bytes: int = 0
    first: int | None = None
    last: int | None = None
    gaps: int = 0
    lost: int = 0
    gap_last: int | None = None

    @property
    def last_recorded(self):
        """The highest seq recorded, as a frame or as a gap (0 for none)."""
        return max(self.last or 0, self.gap_last or 0)


def recorded_seqs(path, topics=None, validate_crc=False, layout=None):
    """{topic: :class:`TopicSeqs`} of the MCAP file at ``path`` (its chunks
    and unchunked messages), added into ``topics`` when given; ``layout``:
    the file's, when the caller has read it already.

    Raises :class:`RecordingFormatError` for a damaged file or a corrupt packet."""
    topics = {} if topics is None else topics
    layout = reader.read_layout(path) if layout is None else layout
    channels = {}
    for ch in layout.channels.values():
        kind = channel_kind(ch)
        if kind in _READ_KINDS:
            channels[ch.id] = _seq_channel(ch, kind)
    fd = os.open(layout.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for ref in [*layout.chunks, *layout.regions]:
            ids = getattr(ref, "channel_ids", None)
            if ids is not None and not any(i in channels for i in ids):
                continue  # only other channels (JSON copies, foreign ones)
            records = reader.read_chunk_records(fd, ref, layout.path, validate_crc)
            idx = reader.read_message_index(fd, ref, layout.path) if isinstance(ref, reader.ChunkRef) else None
            offs, others = reader.message_offsets(records, idx, layout.path, ref.offset)
            for op, body_at, body in others:
                if op == Opcode.CHANNEL:
                    ch = reader.parse_channel(body, layout.path, body_at)
                    kind = channel_kind(ch)
                    if kind in _READ_KINDS and ch.id not in channels:
                        channels[ch.id] = _seq_channel(ch, kind)
            what = "chunk" if isinstance(ref, reader.ChunkRef) else "message region"
            _add_chunk(topics, records, offs, channels, f"{layout.path}: {what} at byte {ref.offset}")
    finally:
        os.close(fd)
    return topics


def _seq_channel(ch, kind):
    """(topic, kind, headers format) under which a channel's seqs count: a
    typed topic's headers channel counts as its topic's packets (they carry
    the standard block), its payload channel not at all (the same frames
    again)."""
    if kind == KIND_HEADERS:
        try:
            return headers_topic(ch), KIND_PACKET, headers_format(ch)
        except ValueError as e:
            raise RecordingFormatError(str(e)) from None
    if kind == KIND_TYPED:
        return None, None, FORMAT_PACKET
    return ch.topic, kind, FORMAT_PACKET


def _add_chunk(topics, records, offs, channels, where):
    if not len(offs):
        return
    fields = MessageFields(records)
    length = fields.body_length(offs)
    chan = fields.channel_id(offs)
    for cid in np.unique(chan).tolist():
        topic, kind, fmt = channels.get(cid, (None, None, None))
        if kind is None:
            continue
        rows = np.nonzero(chan == cid)[0]
        if kind == KIND_PACKET:
            recs, roffs, rlens = records, offs[rows], length[rows]
            if fmt != FORMAT_PACKET:  # a headers channel in its payloads' family: back to cut packets
                recs, roffs, rlens = cut_packet_records(records, roffs, fmt, where)
            starts = fields.data_start(roffs)
            lengths = rlens - DATA_AFTER_LENGTH
            seqs = transport_seqs(recs, starts, lengths, fields.sequence(offs[rows]),
                                  lambda i, rows=rows: f"{where}, message {int(rows[i])}")
            t = topics.setdefault(topic, TopicSeqs())
            t.frames += len(rows)
            t.bytes += int(lengths.sum())
            lo, hi = int(seqs.min()), int(seqs.max())
            t.first = lo if t.first is None else min(t.first, lo)
            t.last = hi if t.last is None else max(t.last, hi)
        elif kind == KIND_GAP:
            for i in rows.tolist():
                try:
                    gap_topic, first, last = parse_gap(fields.data(int(offs[i]), int(length[i])))
                except ValueError as e:
                    raise RecordingFormatError(f"{where}, gap message {i}: {e}") from None
                t = topics.setdefault(gap_topic, TopicSeqs())
                t.gaps += 1
                t.lost += last - first + 1
                t.gap_last = last if t.gap_last is None else max(t.gap_last, last)
