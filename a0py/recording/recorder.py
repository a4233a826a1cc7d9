"""The recorder: live topics drained into MCAP segments (``a0py record``).

Invariants:

* **No frame is lost silently.** The recorder reads each topic's pubsub
  arena through a cursor of its own; the transport seqs it reads are
  consecutive unless frames were evicted before it got to them (or the arena
  was cleared), and every such jump is written as a gap (topic, first and
  last missing seq, time) in the same segment.
* **Frames are kept whole**: the packet bytes of each frame become one MCAP
  message, byte for byte; nothing is decoded on the hot path. The publish
  time (the packet's ``a0_time_wall``, from its standard block, or its
  header in a packet without one) is filled in when the chunk is indexed,
  on the segment's background thread. A typed topic's frames are read the
  same way and split there, byte for byte, into a payload message on a
  channel with the topic's schema and the rest of the packet on its headers
  channel (docs/recording.md "File layout").
* **No Python object per frame**: ``Transport.read_into`` copies the frames
  after the cursor, without the lock or the GIL, straight into the open
  chunk's buffer, each after a prefix laid out as an MCAP message record's
  fixed fields (validated a batch at a time, a torn copy dropped); the seqs
  of one read are consecutive, so gaps are found between reads. Closed
  chunks are indexed, compressed and written by the segment's background
  thread (see :mod:`a0py.recording.writer`), so draining never waits for
  compression.
* **Not a spinner, and prompt when traffic is light**: while the topics
  carry fewer than ``_WAKE_RATE`` frames/s in all, the loop sleeps on every
  topic's notify word at once (``MultiWait``) and is woken by each frame, so
  ``log_time`` is the receive time to within a wake-up; above that, a pass
  that found nothing is followed by a 2 ms pause (and after 50 such pauses
  by the same sleep), so a busy publisher makes no wake syscall per frame
  and, on two cores, keeps its core.
* **Segments always readable**: closed chunks reach the OS as soon as the
  background thread has compressed them; a segment is finished (summary,
  footer) at rotation (in the background, while the next one fills), at
  ``stop()``, on Ctrl-C or SIGTERM; a SIGKILLed recorder leaves a segment
  readable up to its last written chunk (about ``chunk_seconds`` of data
  lost). An error of a background thread stops the recording and is raised
  by ``stop()`` / ``run()``.
* **A typed topic is recorded typed from its first frame.** Its pubsub arena
  exists before its schema, and its schema is declared before its first frame
  (:mod:`a0py.proto.pubsub`): the recorder looks for a topic's schema only
  once the topic holds a frame, and makes its channel only then (or when its
  schema is known), so no frame of it is recorded whole and no
  ``a0py/packet`` channel is made for it beside its typed one. (Looking
  earlier, then reading just after the schema and a burst of frames came,
  recorded the burst whole on a channel of its own: the view showed the
  topic twice, and a client of the typed channel got nothing.)
* ``resume`` continues after the last seq recorded for each topic in the
  output directory: frames evicted in between become a gap.
* **A recorder never creates a topic.** The program that publishes a topic
  knows the size its arena needs, and whoever creates an arena fixes its
  size; a recorder that created it would fix the default size first (and a
  mistyped name would leave an arena behind). A named topic that does not
  exist yet is waited for (:meth:`Recorder.waiting_for`), looked for every
  ``_APPEAR_PERIOD``; a topic that appears after the recorder started, named
  or found by ``all``/``regex``, is recorded from its first packet whatever
  ``init`` says (every packet it holds was published after recording began),
  and packets it evicted before the recorder got to it are a gap.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass

from .. import _core
from ..errors import ArenaNotFoundError, ArenaPermissionError
from ..proto.errors import SchemaError
from ..proto.packets import TIME_WALL
from ..proto.schema import topic_schema
from ..proto.topic import (
    PUBSUB,
    Root,
    Topic,
    check_topic_name,
    current_root,
    list_topics,
    make_private_dirs,
    topic_arena,
)
from . import reader
from .errors import RecordingOptionError
from .format import COMPRESSIONS
from .frames import recorded_seqs
from .writer import SegmentWriter

SEGMENT_RE = re.compile(r"^(?P<prefix>.+)_(?P<index>\d{5,})\.mcap$")
_READ_BATCH = 65536
_DRAIN_LIMIT = 1 << 18  # frames one _drain takes before the loop's other duties
_DISCOVERY_PERIOD = 1.0
# How often a named topic that does not exist yet is looked for (a stat call).
_APPEAR_PERIOD = 0.05
_log = logging.getLogger("a0py.recording")
# After a pass that found nothing the loop sleeps this long, this many times,
# before it sleeps on the notify words: a publisher then never pays a wake
# syscall per frame for the recorder, and on two cores the recorder does not
# spin on the publisher's core.
_IDLE_PAUSE = 0.002
_IDLE_PAUSES = 50
# Below this many frames a second (all topics, measured over _RATE_WINDOW)
# the loop sleeps on the notify words after every empty pass instead of
# pausing: a wake per frame costs the publishers nothing that matters at
# that rate, and each frame's log_time is then taken when it arrives, not up
# to a pause later.
_WAKE_RATE = 2000
_RATE_WINDOW = 0.1


@dataclass
class TopicStats:
    """What the recorder has done for one topic."""

    frames: int = 0
    bytes: int = 0
    gaps: int = 0
    lost: int = 0
    last_seq: int = 0
    rate: float = 0.0  # frames/s over the last progress period


class _TopicState:
    __slots__ = ("arena", "json", "last", "more", "name", "schema", "schema_warned", "stats", "transport",
                 "window_frames")

    def __init__(self, name, arena, json_copy):
        self.name = name
        self.arena = arena
        self.transport = _core.Transport(arena)
        self.last = None  # last seq read (or resumed from)
        self.stats = TopicStats()
        self.json = json_copy
        self.window_frames = 0
        self.more = False  # the last drain stopped with frames left
        self.schema = None  # the topic's schema once it has one with a message encoding
        self.schema_warned = False


def _parse_duration(value, what):
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise RecordingOptionError(f"{what} must be a number of seconds, not {value!r}") from None
    if v <= 0:
        raise RecordingOptionError(f"{what} must be positive, not {v}")
    return v


def existing_segments(out_dir, prefix=None):
    """The segments in ``out_dir`` named ``PREFIX_NNNNN.mcap``, by index."""
    found = []
    try:
        names = os.listdir(out_dir)
    except FileNotFoundError:
        return []
    for name in names:
        m = SEGMENT_RE.match(name)
        if m and (prefix is None or m.group("prefix") == prefix):
            found.append((int(m.group("index")), os.path.join(out_dir, name)))
    return [p for _, p in sorted(found)]


def last_recorded_seqs(paths):
    """topic -> the last seq recorded for it (frames and gaps) in ``paths``."""
    topics = {}
    for path in paths:
        layout = reader.read_layout_or_skip(path)  # a segment with no record yet holds no seq
        if layout is not None:
            recorded_seqs(path, topics, layout=layout)
    return {t: s.last_recorded for t, s in topics.items() if s.last_recorded > 0}


class Recorder:
    """Records live topics into MCAP segments in ``out`` (a directory).

    ``topics``: names to record; ``all=True`` records every topic of the root,
    ``regex`` those whose name matches (``re.search``), both picking up new
    topics as they appear. Segments are ``out/PREFIX_NNNNN.mcap``, rotated
    after ``max_bytes`` or ``max_duration`` seconds. ``max_bytes`` bounds a
    segment's size on disk from above: the chunks not compressed yet count
    at their uncompressed size, so a compressed segment can end well below
    it (chunks are up to ``chunk_bytes``: a ``max_bytes`` of several chunks
    ends closer to it). ``max_duration`` never starts a segment of nothing:
    a segment whose span is over is closed when the next frame comes, so
    idle topics leave the open segment open (readable up to its last
    chunk), and an empty segment's span starts again. ``compression`` is
    ``zstd`` (default), ``lz4`` or ``none``; ``json`` (True, or a list of
    topics) also writes a JSON copy of payloads that are JSON objects, for
    Foxglove. ``init="new"`` records frames published from now on,
    ``"oldest"`` also those already in the arenas; ``resume=True`` continues
    after the last seq recorded in ``out``.

    Use ``start()``/``stop()`` (a background thread), ``run(duration)`` (the
    calling thread), or ``with Recorder(...) as rec:``.

    No topic is created: a named topic that does not exist yet is waited
    for (:meth:`waiting_for` names them) and recorded from its first packet
    when a publisher creates it, at the size the publisher asks for; topics
    that ``all``/``regex`` find after the start are recorded from their
    first packet too. ``root``: where the topics live (an
    :class:`a0py.proto.topic.Root` or ``A0PY_ROOT`` syntax; default
    ``A0PY_ROOT``).

    Raises :class:`RecordingOptionError` for bad options (no topic, a
    non-empty ``out`` without ``resume``, an unknown compression, a bad
    ``regex``) and ``ArgumentError`` for a bad topic name or root."""

    def __init__(self, topics=(), *, out, all=False, regex=None, prefix="a0py", max_bytes=None,
                 max_duration=None, compression="zstd", level=None, chunk_bytes=4 << 20,
                 chunk_seconds=1.0, message_index=True, json=False, resume=False, init="new",
                 root=None, on_progress=None, progress_period=1.0):
        if isinstance(topics, str):
            topics = [topics]
        self.topics = [check_topic_name(t) for t in topics]
        self.all = bool(all)
        try:
            self.regex = re.compile(regex) if isinstance(regex, str) else regex
        except re.error as e:
            raise RecordingOptionError(f"regex {regex!r} is not a regular expression: {e}") from None
        if not self.topics and not self.all and self.regex is None:
            raise RecordingOptionError("nothing to record: name topics, or give all=True or a regex")
        if compression not in COMPRESSIONS:
            raise RecordingOptionError(f"compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")
        if init not in ("new", "oldest"):
            raise RecordingOptionError(f"init {init!r}: use 'new' or 'oldest'")
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", prefix or ""):
            raise RecordingOptionError(f"prefix {prefix!r}: use letters, digits, '_', '-' and '.'")
        self.out = os.path.abspath(os.fspath(out))
        self.prefix = prefix
        self.max_bytes = None if max_bytes is None else int(max_bytes)
        if self.max_bytes is not None and self.max_bytes < 4096:
            raise RecordingOptionError(f"max_bytes {max_bytes}: use at least 4096")
        self.max_duration = _parse_duration(max_duration, "max_duration")
        self.compression = compression
        self.level = level
        self.chunk_bytes = int(chunk_bytes)
        self.chunk_seconds = _parse_duration(chunk_seconds, "chunk_seconds")
        self.message_index = message_index
        self.json = json
        self.resume = bool(resume)
        self.init = init
        self.root = current_root() if root is None else root if isinstance(root, Root) else Root.parse(root)
        self.on_progress = on_progress
        self.progress_period = float(progress_period)
        self.segments = []
        self._states = {}
        self._writer = None
        self._closing = []  # segments whose background thread is finishing the file
        self._segment_opened = 0.0
        self._next_index = 0
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = None
        self._error = None
        self._mw = None
        self._resume_from = {}
        self._last_discovery = 0.0
        self._refused = set()  # discovered names whose arena is not ours (ArenaPermissionError)
        self._waiting = []  # named topics whose arena does not exist yet
        self._last_appear = 0.0
        self._last_progress = time.monotonic()
        self._prepare_out()

    # -- setup ------------------------------------------------------------

    def _prepare_out(self):
        make_private_dirs(self.out)  # 0700: recordings are for this user unless shared on purpose
        existing = existing_segments(self.out)
        if existing and not self.resume:
            raise RecordingOptionError(
                f"{self.out} already holds recordings ({os.path.basename(existing[-1])}...): resume them "
                "(resume=True), or record into another output directory")
        mine = existing_segments(self.out, self.prefix)
        if mine:
            self._next_index = int(SEGMENT_RE.match(os.path.basename(mine[-1])).group("index")) + 1
        if self.resume:
            self._resume_from = last_recorded_seqs(existing)

    def _wants(self, topic):
        return topic in self.topics or self.all or (self.regex is not None and self.regex.search(topic))

    def _json_for(self, topic):
        if self.json is True:
            return True
        if not self.json:
            return False
        return topic in set(self.json)

    def _add_topic(self, name, fresh=False):
        """Opens ``name``'s pubsub arena (never creating it: ArenaNotFoundError
        if missing) and places its cursor; ``fresh``: the topic appeared after
        recording began, so it is read from its first packet."""
        arena = topic_arena(Topic(name, root=self.root), PUBSUB, create=False)
        st = _TopicState(name, arena, self._json_for(name))
        with st.transport.lock() as t:
            resumed = self._resume_from.get(name)
            if resumed is not None:
                if not t.empty and t.seq_low <= resumed <= t.seq_high:
                    t.jump(resumed)  # the next frame read is resumed + 1
                    st.last = resumed
                elif t.empty or t.seq_high > resumed:
                    # From the oldest frame; those between resumed and it are a gap.
                    st.last = resumed
                # else: the arena holds only seqs up to below the resumed one, so it is not
                # the arena that was recorded (it was recreated): record it from its oldest.
            elif fresh:
                st.last = 0  # seqs start at 1: any the arena no longer holds is a gap
            elif self.init == "new" and not t.empty:
                t.jump_tail()
                st.last = t.seq_high
            else:
                # From the oldest frame held (none held: from the next one written);
                # any frame missing after that point is a gap.
                st.last = t.seq_low - 1 if not t.empty else t.seq_high
        self._learn_schema(st)
        self._states[name] = st
        self._mw_update()
        return st

    def _mw_update(self):
        if self._mw is None:
            self._mw = _core.MultiWait()
        arenas = [st.arena for st in self._states.values()]
        self._mw.set_arenas(arenas[: self._mw.capacity])

    def waiting_for(self):
        """The named topics that do not exist yet (recorded from their first
        packet once a publisher creates them)."""
        return list(self._waiting)

    def _open_named(self, now, fresh):
        """Opens the named topics that exist now; the others wait."""
        if not self._waiting or (now - self._last_appear < _APPEAR_PERIOD and self._last_appear):
            return
        self._last_appear = now
        for name in list(self._waiting):
            try:
                self._add_topic(name, fresh=fresh)
            except ArenaNotFoundError:
                continue
            self._waiting.remove(name)

    def _discover(self, now, fresh=True):
        if not (self.all or self.regex is not None):
            return
        if now - self._last_discovery < _DISCOVERY_PERIOD and self._last_discovery:
            return
        self._last_discovery = now
        for name, protocols in list_topics(self.root).items():
            if PUBSUB in protocols and name not in self._states and name not in self._refused \
                    and self._wants(name):
                try:
                    self._add_topic(name, fresh=fresh)
                except ArenaNotFoundError:
                    continue  # removed since it was listed
                except ArenaPermissionError as e:
                    # Planted by another user, say: a name that matched is no reason to stop.
                    self._refused.add(name)
                    _log.warning("a0py record: not recording topic %r: %s", name, e)

    # -- segments ------------------------------------------------------------

    def _open_segment(self):
        path = os.path.join(self.out, f"{self.prefix}_{self._next_index:05d}.mcap")
        self._next_index += 1
        meta = {"recorder.topics": json.dumps(self.topics), "recorder.all": str(self.all).lower(),
                "recorder.regex": self.regex.pattern if self.regex is not None else "",
                "segment.index": str(self._next_index - 1)}
        self._writer = SegmentWriter(path, compression=self.compression, level=self.level,
                                     chunk_bytes=self.chunk_bytes, chunk_seconds=self.chunk_seconds,
                                     message_index=self.message_index, metadata=meta)
        for name, st in self._states.items():
            held = self._holds_frames(st)
            if st.schema is None and held:
                self._learn_schema(st)
            if st.schema is not None:
                self._writer.add_typed_topic(name, st.schema)
            elif held:
                self._writer.add_topic(name)
            # else its channel is made by its first read, once its schema (if it gets one)
            # is known: a topic without frames yet may still turn out typed
        self._segment_opened = time.monotonic()
        self._segment_mark = self._recorded()
        self.segments.append(path)

    def _recorded(self):
        """Frames and gaps recorded so far (all topics): what tells an empty segment."""
        return sum(st.stats.frames + st.stats.gaps for st in self._states.values())

    def _close_segment(self, wait=True):
        """Closes the current segment; ``wait=False`` lets its background
        thread finish the file while recording goes on into the next one."""
        try:
            if self._writer is not None:
                w, self._writer = self._writer, None
                self._closing.append(w)
                w.close(wait=False)
        finally:
            self._reap(wait)

    def _reap(self, wait=False):
        """Waits for (or checks on) the segments being finished; raises what
        a background thread failed with (the first error, after waiting for
        them all)."""
        error = None
        while self._closing and (wait or self._closing[0].done):
            w = self._closing.pop(0)
            try:
                w.close()
            except BaseException as e:
                error = error or e
                if not wait:
                    break
        if error is not None:
            raise error

    def _maybe_rotate(self, now, st=None):
        """Starts the next segment if this one is full (``max_bytes``) or its
        ``max_duration`` is over; the latter only when topic ``st`` holds a
        frame the recorder has not read yet, so idle topics start no segment
        of nothing: an empty segment's span starts again, and a segment that
        holds frames stays open until the next frame comes (or the stop)."""
        w = self._writer
        if w is None:
            return
        if self.max_duration is not None and now - self._segment_opened >= self.max_duration:
            if self._recorded() == self._segment_mark:
                self._segment_opened = now
            elif st is not None and self._unread(st):
                self._close_segment(wait=False)
                self._open_segment()
                return
        if self.max_bytes is not None and w.size + w.pending_bytes >= self.max_bytes:
            self._close_segment(wait=False)
            self._open_segment()

    @staticmethod
    def _holds_frames(st):
        """Whether ``st``'s arena holds a frame (read or not)."""
        with st.transport.lock() as t:
            return not t.empty

    @staticmethod
    def _unread(st):
        """Whether ``st``'s arena holds a frame after the last one read (a
        look under the lock: taken once a segment's span is over, not per
        frame)."""
        with st.transport.lock() as t:
            return not t.empty and (st.last is None or t.seq_high > st.last)

    # -- the loop ------------------------------------------------------------

    def _drain(self, st):
        """Copies out what the topic holds past the cursor, straight into the
        segment's open chunk; returns the frames read. Stops after
        ``_DRAIN_LIMIT`` frames so that the loop's other duties (chunks due,
        rotation, the other topics) wait at most that long."""
        got = 0
        if st.schema is None:
            # Looked for only once a frame is there (see the invariants): a look made
            # before the schema, then a read after it and a burst, recorded them whole.
            if not self._unread(st):
                st.more = False
                return 0
            self._learn_schema(st)
        st.more = True  # until a read comes back empty
        while got < _DRAIN_LIMIT:
            self._maybe_rotate(time.monotonic(), st)
            batch = self._batch_size(st)
            now = time.time_ns()
            n, nbytes, first, last, _gf, _gl, copies = self._writer.read_frames(
                st.name, st.transport, now, batch, copy=st.json)
            if not n:
                st.more = False
                return got
            got += n
            # Seqs within one read are consecutive; between reads, any jump is a gap.
            expected = (st.last + 1) if st.last is not None else first
            if first < expected:
                expected = first  # seqs restarted: the topic's arena was made anew
            if first > expected:
                self._gap(st, expected, first - 1, now)
            st.stats.frames += n
            st.stats.bytes += nbytes
            st.stats.last_seq = last
            st.window_frames += n
            if st.json:
                self._write_json(st, range(first, last + 1), copies, now)
            st.last = last
        return got

    def _learn_schema(self, st):
        """Makes ``st`` a typed topic once its schema is declared (cached by
        ``topic_schema``: cheap): its frames then go to a channel of their
        schema (the payloads) and a headers channel (the rest of each
        packet). A schema without a message encoding (raw bytes) keeps whole
        packets; one that does not read, or a schema arena that is not ours,
        is warned about once and ignored (the frames are recorded whole)."""
        try:
            schema = topic_schema(Topic(st.name, root=self.root))
        except (SchemaError, ArenaPermissionError) as e:
            if not st.schema_warned:
                st.schema_warned = True
                _log.warning("a0py record: topic %r: recording whole packets: %s", st.name, e)
            return
        if schema is not None and schema.message_encoding:
            st.schema = schema
            if self._writer is not None:
                self._writer.add_typed_topic(st.name, schema)

    def _batch_size(self, st):
        """Frames to read at once: many, but few enough that a segment
        overshoots ``max_bytes`` by a small part of it."""
        if self.max_bytes is None or not st.stats.frames:
            return _READ_BATCH
        mean = max(1, st.stats.bytes // st.stats.frames)
        room = max(self.max_bytes // 8, self.max_bytes - self._writer.size - self._writer.pending_bytes)
        return int(min(_READ_BATCH, max(16, room // mean)))

    def _write_json(self, st, seqs, data, now):
        keep_seqs, payloads, pubs = [], [], []
        for s, frame in zip(seqs, data):
            try:
                pkt = _core.Packet.from_bytes(frame)
                obj = json.loads(pkt.payload)
            except (ValueError, _core.PacketCorruptError):
                continue
            if isinstance(obj, dict):
                keep_seqs.append(s)
                payloads.append(bytes(pkt.payload))
                try:
                    pubs.append(int(pkt.headers.get(TIME_WALL, now)))
                except ValueError:
                    pubs.append(now)
        if payloads:
            self._writer.write_json(st.name, keep_seqs, payloads, now, pubs)

    def _gap(self, st, first, last, now):
        if last < first:
            return
        self._writer.write_gap(st.name, first, last, now)
        st.stats.gaps += 1
        st.stats.lost += last - first + 1

    def _progress(self, now):
        dt = now - self._last_progress
        if dt < self.progress_period:
            return
        for st in self._states.values():
            st.stats.rate = st.window_frames / dt
            st.window_frames = 0
        self._last_progress = now
        if self.on_progress is not None:
            self.on_progress(self.stats())

    def stats(self):
        """topic -> :class:`TopicStats` (a copy)."""
        return {name: TopicStats(**vars(st.stats)) for name, st in self._states.items()}

    def _loop(self, deadline=None):
        try:
            self._waiting = [name for name in self.topics if name not in self._states]
            self._open_named(time.monotonic(), fresh=False)
            self._discover(time.monotonic(), fresh=False)
            self._mw_update()  # (also with no topic open yet: the loop sleeps on it)
            self._open_segment()
            self._ready.set()
            wait = min(0.1, self.chunk_seconds / 2)
            idle = 0
            window_start, window_frames, light = time.monotonic(), 0, True
            while not self._stop.is_set():
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    break
                self._open_named(now, fresh=True)
                self._discover(now)
                # changed() before draining: whatever is committed after it ends the wait.
                moved = {id(a) for a in self._mw.changed()}
                watched = len(self._states) <= self._mw.capacity
                got = 0
                for st in list(self._states.values()):
                    if not watched or st.more or id(st.arena) in moved:
                        got += self._drain(st)
                self._writer.flush_due(now)
                self._maybe_rotate(now)
                self._reap()
                self._progress(now)
                window_frames += got
                if now - window_start >= _RATE_WINDOW:
                    light = window_frames < _WAKE_RATE * (now - window_start)
                    window_start, window_frames = now, 0
                if got:
                    idle = 0
                    continue
                idle += 1
                left = wait if deadline is None else max(0.0, min(wait, deadline - now))
                if idle < _IDLE_PAUSES and not (light and watched):
                    time.sleep(min(_IDLE_PAUSE, left))
                else:
                    self._mw.wait(left)
            for st in list(self._states.values()):
                while self._drain(st) and st.more:
                    pass
        except BaseException as e:
            self._error = e
            raise
        finally:
            try:
                self._close_segment()
            except BaseException as e:
                if self._error is None:
                    self._error = e
                    raise
                if e is not self._error:  # the first error goes first; this one is not lost
                    self._error.add_note(f"closing the segment then failed too: {e!r}")
            finally:
                self._ready.set()  # nobody waits for a recorder that failed to start

    def run(self, duration=None):
        """Records in the calling thread until :meth:`stop` (from another
        thread or a signal handler) or ``duration`` seconds; returns
        :meth:`stats`. Ctrl-C closes the segment cleanly and propagates."""
        deadline = None if duration is None else time.monotonic() + float(duration)
        self._loop(deadline)
        return self.stats()

    def start(self):
        """Records in a background thread; returns self."""
        if self._thread is not None:
            raise RecordingOptionError("this recorder was already started")
        self._thread = threading.Thread(target=self._quiet_loop, name="a0py-recorder", daemon=True)
        self._thread.start()
        return self

    def _quiet_loop(self):
        try:
            self._loop()
        except BaseException:  # kept in self._error, raised by stop()
            pass

    def wait_ready(self, timeout=None):
        """Waits until the named topics that exist are open and the first
        segment exists (frames published on them from then on are recorded;
        the others, :meth:`waiting_for`, are recorded from their first
        packet once created); True if so. Raises the error that stopped the
        recorder, if any."""
        ok = self._ready.wait(timeout)
        if self._error is not None:
            raise self._error
        return ok

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def request_stop(self):
        """Asks the recording loop to finish (drain, close the segment) and
        returns at once; safe from a signal handler or another thread."""
        self._stop.set()
        if self._mw is not None:
            self._mw.wake()

    def stop(self, timeout=None):
        """Stops recording: drains what the topics hold, closes the segment;
        returns :meth:`stats`. Re-raises an error the background thread hit."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None and not isinstance(self._error, KeyboardInterrupt):
            raise self._error
        return self.stats()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
