"""Replay: a recording published back into live topics (``a0py play``).

Invariants:

* Frames are published in the order of their publish time (``a0_time_wall``,
  the MCAP ``publish_time``), merged across topics and chunks, at the
  original spacing divided by ``rate`` (``rate=0``: as fast as possible).
  The schedule is kept against a monotonic clock, so a slow publish delays
  only the frames due before it catches up; nothing drifts.
* A replayed packet keeps its id, its headers other than the standard ones,
  and its payload byte for byte; the publisher writes fresh standard
  headers (the live topic's own seqs and times) and the replay headers
  ``a0_replay_source`` (the file) and ``a0_replay_<standard header>`` (each
  original standard header's value), so a subscriber can tell a replayed
  packet and recover the original times and seqs.
* A typed topic (recorded as its payload channel and its headers channel,
  docs/recording.md) is replayed into a topic declaring the recorded schema;
  each packet is joined back from its headers message and the payload
  message of the same sequence, so subscribers get the original packet.
* Gaps in the recording publish nothing; they are counted.
* Memory is bounded by the chunks whose time ranges overlap, not by the
  recording: chunks are decoded as the replay reaches them.
"""

from __future__ import annotations

import heapq
import os
import time
from dataclasses import dataclass

import numpy as np

from .. import _core
from ..errors import PacketCorruptError
from ..proto.pubsub import Publisher, size_for_packets
from ..proto.schema import Schema
from ..proto.topic import PUBSUB, Topic, check_topic_name
from . import reader
from .errors import RecordingFormatError, RecordingOptionError
from .format import (
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    MESSAGE_CHANNEL_AT,
    MESSAGE_FIXED,
    MESSAGE_PUBLISH_TIME_AT,
    MESSAGE_SEQUENCE_AT,
    RECORD_HEADER,
    channel_kind,
    chunk_ranges,
    headers_topic,
    join_packet,
)
from .reader import SHM_PREFIX, expand_paths

REPLAY_SOURCE = "a0_replay_source"
REPLAY_PREFIX = "a0_replay_"
# What a replayed packet gains over the recorded one: fresh standard headers and the
# a0_replay_* copies of the recorded ones (a few hundred bytes), with room to spare.
_REPLAY_HEADROOM = 1024


@dataclass
class PlayStats:
    frames: int = 0
    gaps: int = 0
    loops: int = 0
    late_max: float = 0.0  # seconds the worst frame went out after its due time
    empty_files: int = 0  # files with no record yet, skipped with a warning (counted once)


def parse_remap(items):
    """``["old:new", ...]`` (or a dict) -> {old: new}, names checked."""
    if items is None:
        return {}
    if isinstance(items, dict):
        pairs = items.items()
    else:
        pairs = []
        for item in items:
            old, sep, new = str(item).partition(":")
            if not sep or not old or not new:
                raise RecordingOptionError(f"remap {item!r}: use OLD:NEW (e.g. robot/cam:sim/cam)")
            pairs.append((old, new))
    return {check_topic_name(o): check_topic_name(n) for o, n in pairs}


class _ChunkCursor:
    """The frames of one chunk in publish-time order, decoded on open."""

    __slots__ = ("chan", "frames", "gap", "i", "pub", "seqs", "source", "topics")

    def __init__(self, source, records, offs, channels, wanted, payloads=None):
        u16, u32, u64 = reader.u_views(records)
        chan = u16[offs + MESSAGE_CHANNEL_AT]
        pub = u64[offs + MESSAGE_PUBLISH_TIME_AT].astype(np.int64)
        length = u64[offs + 1].astype(np.int64)
        keep = np.isin(chan, list(wanted)) if wanted is not None else np.ones(len(offs), bool)
        offs, chan, pub, length = offs[keep], chan[keep], pub[keep], length[keep]
        order = np.argsort(pub, kind="stable")
        self.pub = pub[order]
        offs, chan, length = offs[order], chan[order], length[order]
        mv = memoryview(records)
        start = offs + MESSAGE_FIXED
        stop = offs + RECORD_HEADER + length
        self.frames = [mv[a:b] for a, b in zip(start.tolist(), stop.tolist())]
        self.topics = [channels[int(c)][0] for c in chan]
        self.gap = [channels[int(c)][1] == KIND_GAP for c in chan]
        self.seqs = u32[offs + MESSAGE_SEQUENCE_AT]
        if payloads is not None and any(channels[int(c)][1] == KIND_TYPED for c in chan):
            # A typed topic's payloads wait for their headers (same topic, same sequence).
            typed = np.array([channels[int(c)][1] == KIND_TYPED for c in chan], bool)
            for j in np.nonzero(typed)[0].tolist():
                payloads[(self.topics[j], int(self.seqs[j]))] = self.frames[j]
            rest = np.nonzero(~typed)[0]
            self.pub = self.pub[rest]
            self.frames = [self.frames[j] for j in rest.tolist()]
            self.topics = [self.topics[j] for j in rest.tolist()]
            self.gap = [self.gap[j] for j in rest.tolist()]
            self.seqs = self.seqs[rest]
            chan = chan[rest]
        self.chan = chan
        self.i = 0
        self.source = source


def _chunk_start_times(layout):
    """chunk offset -> earliest publish time in it (ns), from the segment's
    metadata; else the chunk's earliest log time, a safe lower bound only
    for recorders whose clock never stepped back (ours)."""
    meta = chunk_ranges(layout)
    out = {}
    for ref in layout.chunks:
        items = meta.get(ref.offset)
        out[ref.offset] = min(i[3] for i in items) if items else ref.start_time
    return out


class Player:
    """Publishes the recordings ``spec`` (a file, directory or glob) into live
    topics.

    ``rate``: speed factor (2.0 = twice as fast; 0 = as fast as possible);
    ``loop``: start again at the end, until :meth:`stop`; ``start_offset``:
    skip the first seconds of the recording; ``topics``: only these recorded
    topics; ``remap``: {recorded: live} names (or ``["old:new"]``);
    ``root``: where the live topics are (default ``A0PY_ROOT``).

    Raises :class:`RecordingOptionError` for bad options,
    :class:`RecordingFormatError` for a damaged file."""

    def __init__(self, spec, *, rate=1.0, loop=False, start_offset=0.0, topics=None, remap=None, root=None,
                 on_progress=None, progress_period=1.0, validate_crc=True):
        try:
            self.rate = float(rate)
        except (TypeError, ValueError):
            raise RecordingOptionError(f"rate {rate!r}: use a number (1 = original speed, 0 = no waiting)") from None
        if self.rate < 0 or self.rate != self.rate:
            raise RecordingOptionError(f"rate {rate!r}: use a number >= 0 (1 = original speed, 0 = no waiting)")
        self.loop = bool(loop)
        self.start_offset = float(start_offset)
        if self.start_offset < 0:
            raise RecordingOptionError(f"start_offset {start_offset!r}: use seconds >= 0")
        self.topics = None if topics is None else {check_topic_name(t) for t in topics}
        self.remap = parse_remap(remap)
        self.root = root
        self.files = [p for p in expand_paths(spec) if not p.startswith(SHM_PREFIX)]
        if not self.files:
            raise RecordingOptionError(f"{spec}: no recording to play")
        self.on_progress = on_progress
        self.progress_period = progress_period
        self.validate_crc = validate_crc
        self.stats = PlayStats()
        self._publishers = {}
        self._schemas = {}  # recorded topic -> a0py.Schema of its typed channel
        self._payloads = {}  # (typed topic, sequence) -> payload waiting for its headers message
        self._stop = False

    def stop(self):
        """Ends :meth:`run` after the frame being published (thread-safe)."""
        self._stop = True

    def recorded_topics(self):
        """The topics the recording holds packets of (from each file's channels)."""
        found = set()
        for path in self.files:
            found.update(ch.topic for ch in reader.read_layout(path).channels.values()
                         if channel_kind(ch) in (KIND_PACKET, KIND_TYPED))
        return found

    def _publisher(self, topic, frame_size):
        pub = self._publishers.get(topic)
        if pub is None:
            live = Topic(self.remap.get(topic, topic), root=self.root)
            if not live.exists(PUBSUB):
                # Creating it: large enough for this recorded frame several times over
                # (the default size may hold one camera image, or none).
                want = size_for_packets(frame_size + _REPLAY_HEADROOM)
                if want > live.size_for(PUBSUB):
                    live = Topic(live.name, root=self.root, size={PUBSUB: want})
            pub = self._publishers[topic] = Publisher(live, schema=self._schemas.get(topic))
        return pub

    def _frames(self):
        """(publish time ns, topic, is_gap, frame bytes, source) in publish-time order."""
        for path in self.files:
            layout = reader.read_layout_or_skip(path)
            if layout is None:
                if self.stats.loops == 0:
                    self.stats.empty_files += 1
                continue
            channels = {}
            wanted = set()
            for ch in layout.channels.values():
                kind = channel_kind(ch)
                if kind is None:
                    continue
                topic = headers_topic(ch) if kind == KIND_HEADERS else ch.topic
                channels[ch.id] = (topic, kind)
                if kind == KIND_TYPED and ch.schema_id in layout.schemas:
                    s = layout.schemas[ch.schema_id]
                    self._schemas[topic] = Schema(s.name, s.encoding, s.data, message_encoding=ch.message_encoding)
                if kind == KIND_GAP or self.topics is None or topic in self.topics:
                    wanted.add(ch.id)
            starts = _chunk_start_times(layout)
            refs = [r for r in layout.chunks if r.channel_ids is None or (r.channel_ids & wanted)]
            refs.sort(key=lambda r: starts[r.offset])
            regions = list(layout.regions)
            source = os.path.basename(path)
            heap = []
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                k = 0
                pending = [(-1, r) for r in regions]  # unchunked messages: no time index
                pending += [(starts[r.offset], r) for r in refs]
                pending.sort(key=lambda x: x[0])
                serial = 0
                while k < len(pending) or heap:
                    # Open every chunk that may hold a frame due before the heap's next one.
                    while k < len(pending) and (not heap or pending[k][0] <= heap[0][0]):
                        ref = pending[k][1]
                        k += 1
                        records = reader.read_chunk_records(fd, ref, path, self.validate_crc)
                        idx = reader.read_message_index(fd, ref, path) if isinstance(ref, reader.ChunkRef) else None
                        offs, _ = reader.message_offsets(records, idx, path, ref.offset)
                        cur = _ChunkCursor(source, records, offs, channels, wanted, self._payloads)
                        if len(cur.pub):
                            serial += 1
                            heapq.heappush(heap, (int(cur.pub[0]), serial, cur))
                    if not heap:
                        break
                    t, serial_c, cur = heapq.heappop(heap)
                    i = cur.i
                    frame = cur.frames[i]
                    if channels.get(int(cur.chan[i]), (None, None))[1] == KIND_HEADERS:
                        payload = self._payloads.pop((cur.topics[i], int(cur.seqs[i])), None)
                        if payload is None:
                            continue  # its payload was not recorded (not a whole packet): nothing to replay
                        frame = join_packet(frame, payload)
                    yield t, cur.topics[i], cur.gap[i], frame, cur.source
                    cur.i += 1
                    if cur.i < len(cur.pub):
                        heapq.heappush(heap, (int(cur.pub[cur.i]), serial_c, cur))
            finally:
                os.close(fd)

    def _publish(self, topic, frame, source):
        try:
            pkt = _core.Packet.from_bytes(frame)
        except PacketCorruptError as e:
            raise RecordingFormatError(f"{source}: a recorded frame of topic {topic!r} is not an a0py "
                                       f"packet: {e}") from None
        extra = [(REPLAY_SOURCE, source)]
        headers = pkt.headers
        for key in _core.STANDARD_HEADERS:
            v = headers.get(key)
            if v is not None:
                extra.append((REPLAY_PREFIX + key[3:], v))
        self._publisher(topic, len(frame)).pub(pkt, headers=extra)

    def run(self):
        """Plays until the end (or forever with ``loop``, until :meth:`stop`);
        returns :class:`PlayStats`."""
        last_progress = time.monotonic()
        while True:
            t0 = None
            wall0 = None
            skip_until = None
            for t, topic, is_gap, frame, source in self._frames():
                if self._stop:
                    return self.stats
                if t0 is None:
                    t0 = t
                    skip_until = t0 + int(self.start_offset * 1e9)
                if t < skip_until:
                    continue
                if is_gap:
                    self.stats.gaps += 1
                    continue
                if wall0 is None:
                    wall0 = time.monotonic()
                    base = t
                if self.rate > 0:
                    due = wall0 + (t - base) / 1e9 / self.rate
                    delay = due - time.monotonic()
                    if delay < 0:
                        self.stats.late_max = max(self.stats.late_max, -delay)
                    while delay > 0 and not self._stop:
                        time.sleep(min(delay, 0.1))
                        delay = due - time.monotonic()
                    if self._stop:
                        return self.stats
                self._publish(topic, frame, source)
                self.stats.frames += 1
                if self.on_progress is not None:
                    now = time.monotonic()
                    if now - last_progress >= self.progress_period:
                        last_progress = now
                        self.on_progress(self.stats, (t - base) / 1e9)
            self.stats.loops += 1
            if not self.loop or self._stop or t0 is None:
                return self.stats

    def close(self):
        for pub in self._publishers.values():
            pub.close()
        self._publishers.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

