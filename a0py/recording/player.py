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
* A channel a0py did not write (any MCAP file, a rosbag2 bag) is replayed
  into the topic :func:`foreign_topic_name` makes of its channel topic (a
  leading ``/`` dropped, each character a topic name cannot hold replaced by
  ``_``); each message's bytes are the payload, and the headers
  ``a0_replay_channel``, ``a0_replay_log_time``, ``a0_replay_publish_time``
  and ``a0_replay_sequence`` give the recorded channel topic, times and
  sequence. The channel's schema is declared as the topic's schema where an
  :class:`a0py.Schema` takes it (JSON Schema, protobuf, ROS 2 ``ros2msg`` /
  ``ros2idl``, ...); otherwise the bytes go out raw and
  :attr:`PlayStats.raw_topics` says why. Foreign messages are timed by their
  log time (the time the recorder received them, as ``ros2 bag play``
  does: many writers leave publish_time 0); a0py's by their publish time.
* Gaps in the recording publish nothing; they are counted.
* Memory is bounded by the chunks whose time ranges overlap, not by the
  recording: chunks are decoded as the replay reaches them.
"""

from __future__ import annotations

import heapq
import os
import re
import time
from dataclasses import dataclass

import numpy as np

from .. import _core
from ..errors import A0Error, PacketCorruptError
from ..proto.pubsub import Publisher, size_for_packets
from ..proto.schema import Schema
from ..proto.topic import MAX_TOPIC_LENGTH, PUBSUB, Topic, check_topic_name
from . import reader
from .baginfo import KIND_JSON_COPY, bag_channel_kind
from .errors import RecordingFormatError, RecordingOptionError
from .format import (
    KIND_FOREIGN,
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    chunk_ranges,
    headers_topic,
    join_packet,
)
from .headers import cut_packet, headers_format
from .message_fields import MessageFields
from .paths import SHM_PREFIX, expand_paths

REPLAY_SOURCE = "a0_replay_source"
REPLAY_PREFIX = "a0_replay_"
# The headers of a message replayed from a foreign channel.
REPLAY_CHANNEL = "a0_replay_channel"
REPLAY_LOG_TIME = "a0_replay_log_time"
REPLAY_PUBLISH_TIME = "a0_replay_publish_time"
REPLAY_SEQUENCE = "a0_replay_sequence"
REPLAY_MESSAGE_ENCODING = "a0_replay_message_encoding"  # only where no schema is declared
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.\-]")
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
    # Topics of foreign channels whose schema could not be declared: {topic: why} (their bytes go out raw).
    raw_topics: dict = None

    def __post_init__(self):
        if self.raw_topics is None:
            self.raw_topics = {}


def foreign_topic_name(channel_topic):
    """The a0py topic a foreign channel ``channel_topic`` is replayed into:
    split at ``/`` (empty segments dropped, so a leading, trailing or doubled
    ``/`` goes), each character other than letters, digits, ``_``, ``-`` and
    ``.`` replaced by ``_``, and ``_`` put before a segment that starts with
    ``.`` or ``-``. ``/imu`` -> ``imu``, ``/robot 1/cam:left`` ->
    ``robot_1/cam_left``. Raises :class:`RecordingOptionError` for a topic
    that leaves no name (``/``, ``""``) or too long a one."""
    segments = []
    for seg in str(channel_topic).split("/"):
        if not seg:
            continue
        seg = _NOT_IN_NAME.sub("_", seg)
        if seg[0] in ".-":
            seg = "_" + seg
        segments.append(seg)
    name = "/".join(segments)
    if not name:
        raise RecordingOptionError(f"channel topic {channel_topic!r}: no a0py topic name can be made of it; "
                                   "leave it out with topics=, or --topics")
    if len(name) > MAX_TOPIC_LENGTH:
        raise RecordingOptionError(f"channel topic {channel_topic!r}: {len(name)} characters, more than an a0py "
                                   f"topic name holds ({MAX_TOPIC_LENGTH})")
    return check_topic_name(name)


def _foreign_schema(layout, channel, topic):
    """(the a0py.Schema to declare for a foreign channel, or None; why not)."""
    schema = layout.schemas.get(channel.schema_id) if channel.schema_id else None
    if schema is None:
        return None, None  # no schema: raw bytes, nothing to say
    try:
        s = Schema(schema.name, schema.encoding, schema.data, message_encoding=channel.message_encoding)
        s.check(Topic(topic))
    except A0Error as e:
        return None, (f"channel {channel.topic!r}: schema {schema.name!r} ({schema.encoding or 'no encoding'}) "
                      f"is not one a0py topics carry ({e}); published as raw bytes")
    return s, None


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
    """The frames of one chunk in time order (publish time; log time for
    foreign channels), decoded on open."""

    __slots__ = ("chan", "frames", "gap", "i", "logs", "pub", "publish", "seqs", "source", "topics")

    def __init__(self, source, records, offs, channels, wanted, payloads=None):
        fields = MessageFields(records)
        chan = fields.channel_id(offs)
        pub = fields.publish_time(offs).astype(np.int64)
        length = fields.body_length(offs)
        keep = np.isin(chan, list(wanted)) if wanted is not None else np.ones(len(offs), bool)
        offs, chan, pub, length = offs[keep], chan[keep], pub[keep], length[keep]
        foreign = [c for c, (_, kind) in channels.items() if kind == KIND_FOREIGN]
        if foreign:  # timed by their log time (publish_time is often 0 in other writers' files)
            pub = np.where(np.isin(chan, foreign), fields.log_time(offs).astype(np.int64), pub)
        order = np.argsort(pub, kind="stable")
        self.pub = pub[order]
        offs, chan, length = offs[order], chan[order], length[order]
        self.logs = fields.log_time(offs)
        self.publish = fields.publish_time(offs)
        mv = memoryview(records)
        start = fields.data_start(offs)
        stop = fields.data_end(offs, length)
        self.frames = [mv[a:b] for a, b in zip(start.tolist(), stop.tolist())]
        self.topics = [channels[int(c)][0] for c in chan]
        self.gap = [channels[int(c)][1] == KIND_GAP for c in chan]
        self.seqs = fields.sequence(offs)
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
            self.logs = self.logs[rest]
            self.publish = self.publish[rest]
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
    """Publishes the recordings ``spec`` (a file, directory, rosbag2 bag or
    glob; any MCAP file) into live topics.

    ``rate``: speed factor (2.0 = twice as fast; 0 = as fast as possible);
    ``loop``: start again at the end, until :meth:`stop`; ``start_offset``:
    skip the first seconds of the recording; ``topics``: only these recorded
    topics (a foreign channel by its :func:`foreign_topic_name`); ``remap``:
    {recorded: live} names (or ``["old:new"]``); ``prefix``: a namespace put
    before every live name that ``remap`` does not give (``sim`` plays
    ``imu`` into ``sim/imu``); ``root``: where the live topics are (default
    ``A0PY_ROOT``).

    Raises :class:`RecordingOptionError` for bad options or two channels
    that would play into one topic with different schemas,
    :class:`RecordingFormatError` for a damaged file or a bag a0py cannot
    read."""

    def __init__(self, spec, *, rate=1.0, loop=False, start_offset=0.0, topics=None, remap=None, root=None,
                 on_progress=None, progress_period=1.0, validate_crc=True, prefix=None):
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
        self.prefix = None if prefix is None else check_topic_name(prefix)
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
        self._foreign = self._plan_foreign()  # channel topic -> recorded (a0py) topic name

    def stop(self):
        """Ends :meth:`run` after the frame being published (thread-safe)."""
        self._stop = True

    def _plan_foreign(self):
        """Names and schemas of the foreign channels of every file: channel
        topic -> recorded topic name; their schemas into ``_schemas``. Two
        channels played into one topic must carry the same schema."""
        names = {}
        by_topic = {}  # recorded topic -> (channel topic, schema name, message encoding)
        for path in self.files:
            layout = reader.read_layout_or_skip(path)
            if layout is None:
                continue
            for ch in layout.channels.values():
                if bag_channel_kind(ch) != KIND_FOREIGN:
                    continue
                if ch.topic in names:
                    topic = names[ch.topic]
                else:
                    try:
                        topic = foreign_topic_name(ch.topic)
                    except RecordingOptionError:
                        if self.topics is None:
                            raise
                        topic = None  # not selected by topics= (it has no name to select it by)
                    names[ch.topic] = topic
                if topic is None or (self.topics is not None and topic not in self.topics):
                    continue
                schema = layout.schemas.get(ch.schema_id) if ch.schema_id else None
                what = (ch.topic, schema.name if schema is not None else "", ch.message_encoding)
                seen = by_topic.setdefault(topic, what)
                if seen != what:
                    raise RecordingOptionError(
                        f"{path}: channels {seen[0]!r} ({seen[1] or 'no schema'}, {seen[2]}) and {what[0]!r} "
                        f"({what[1] or 'no schema'}, {what[2]}) would both play into topic {topic!r}: choose one "
                        "with topics= (--topics)")
                if topic not in self._schemas and topic not in self.stats.raw_topics:
                    declared, why = _foreign_schema(layout, ch, topic)
                    if declared is not None:
                        self._schemas[topic] = declared
                    elif why is not None:
                        self.stats.raw_topics[topic] = why
        return names

    def recorded_topics(self):
        """The topics the recording holds packets of (from each file's
        channels), foreign channels by their :func:`foreign_topic_name`."""
        found = {t for t in self._foreign.values() if t is not None}
        for path in self.files:
            layout = reader.read_layout_or_skip(path)
            if layout is not None:
                found.update(ch.topic for ch in layout.channels.values()
                             if bag_channel_kind(ch) in (KIND_PACKET, KIND_TYPED))
        return found

    def live_name(self, topic):
        """The live topic recorded topic ``topic`` is played into."""
        if topic in self.remap:
            return self.remap[topic]
        return f"{self.prefix}/{topic}" if self.prefix else topic

    def _publisher(self, topic, frame_size):
        pub = self._publishers.get(topic)
        if pub is None:
            live = Topic(self.live_name(topic), root=self.root)
            if not live.exists(PUBSUB):
                # Creating it: large enough for this recorded frame several times over
                # (the default size may hold one camera image, or none).
                want = size_for_packets(frame_size + _REPLAY_HEADROOM)
                if want > live.size_for(PUBSUB):
                    live = Topic(live.name, root=self.root, size={PUBSUB: want})
            pub = self._publishers[topic] = Publisher(live, schema=self._schemas.get(topic))
        return pub

    def _frames(self):
        """(time ns, topic, kind, frame bytes, source, foreign message's
        (log time, publish time, sequence, channel topic) or None) in time order."""
        for path in self.files:
            layout = reader.read_layout_or_skip(path)
            if layout is None:
                if self.stats.loops == 0:
                    self.stats.empty_files += 1
                continue
            channels = {}
            formats = {}  # headers channel id -> the format of its messages
            wanted = set()
            for ch in layout.channels.values():
                kind = bag_channel_kind(ch)
                if kind == KIND_JSON_COPY:
                    continue  # a copy of a topic's packets, played from those
                if kind == KIND_FOREIGN:
                    topic = (self._foreign[ch.topic] if ch.topic in self._foreign  # planned in __init__
                             else foreign_topic_name(ch.topic))
                    if topic is None:
                        continue  # left out by topics=, having no name
                    channels[ch.id] = (topic, kind)
                    if self.topics is None or topic in self.topics:
                        wanted.add(ch.id)
                    continue
                topic = headers_topic(ch) if kind == KIND_HEADERS else ch.topic
                channels[ch.id] = (topic, kind)
                if kind == KIND_HEADERS:
                    try:
                        formats[ch.id] = headers_format(ch)
                    except ValueError as e:
                        raise RecordingFormatError(f"{path}: {e}") from None
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
                    cur.i += 1
                    if cur.i < len(cur.pub):
                        heapq.heappush(heap, (int(cur.pub[cur.i]), serial_c, cur))
                    frame = cur.frames[i]
                    cid = int(cur.chan[i])
                    kind = channels.get(cid, (None, None))[1]
                    meta = None
                    if kind == KIND_HEADERS:
                        payload = self._payloads.pop((cur.topics[i], int(cur.seqs[i])), None)
                        if payload is None:
                            continue  # its payload was not recorded (not a whole packet): nothing to replay
                        try:
                            frame = join_packet(cut_packet(formats[cid], frame), payload)
                        except ValueError as e:
                            raise RecordingFormatError(f"{path}: topic {cur.topics[i]!r}, headers message of "
                                                       f"sequence {int(cur.seqs[i])}: {e}") from None
                    elif kind == KIND_FOREIGN:
                        ch = layout.channels.get(cid)
                        meta = (int(cur.logs[i]), int(cur.publish[i]), int(cur.seqs[i]),
                                ch.topic if ch is not None else "", ch.message_encoding if ch is not None else "")
                    yield t, cur.topics[i], kind, frame, cur.source, meta
            finally:
                os.close(fd)

    def _publish_foreign(self, topic, frame, source, meta):
        log, publish, seq, channel_topic, encoding = meta
        extra = [(REPLAY_SOURCE, source), (REPLAY_CHANNEL, channel_topic), (REPLAY_LOG_TIME, str(log)),
                 (REPLAY_PUBLISH_TIME, str(publish)), (REPLAY_SEQUENCE, str(seq))]
        if topic not in self._schemas and encoding:
            extra.append((REPLAY_MESSAGE_ENCODING, encoding))
        self._publisher(topic, len(frame)).pub(frame, headers=extra)

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
            for t, topic, kind, frame, source, meta in self._frames():
                if self._stop:
                    return self.stats
                if t0 is None:
                    t0 = t
                    skip_until = t0 + int(self.start_offset * 1e9)
                if t < skip_until:
                    continue
                if kind == KIND_GAP:
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
                if meta is not None:
                    self._publish_foreign(topic, frame, source, meta)
                else:
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

