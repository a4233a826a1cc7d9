"""``spark.readStream.format("a0")`` without a path: live topics as a Spark stream.

    (spark.readStream.format("a0")
        .option("topics", "robot/pose,robot/camera")  # or load("shm://robot/pose")
        .option("startingOffsets", "earliest")      # or latest (default), or {"topic": seq}
        .option("maxFramesPerTrigger", 100000)
        .option("failOnDataLoss", "true")
        .load())

Offsets are, per topic, the transport seq of the last frame a micro-batch
covers (``{"robot/pose": 1234}``), so a query restarted from its checkpoint
reads exactly the frames published after the last batch it committed.

Invariants:

* A micro-batch from offset ``s`` to ``e`` holds the topic's frames
  ``s + 1 .. e``, read from its pubsub arena when the batch runs; one
  partition per topic with new frames.
* Frames of that range evicted before the batch read them are data loss:
  with ``failOnDataLoss=true`` (the default) the query fails with
  :class:`DataLossError` naming the topic and the missing seqs; with
  ``false`` a warning is logged, a gap row is emitted when ``gaps=true``,
  and the batch goes on with the frames that remain.
* ``maxFramesPerTrigger`` bounds the frames of one batch (shared among the
  topics); ``Trigger.AvailableNow`` reads up to the seqs present when the
  query starts, over as many batches as the limit needs, then stops.
* The arenas must be on the host where the executors run (local mode, or a
  cluster whose workers share the topics' host).

A stream with a path (``load("recordings/")``) reads recordings instead:
:mod:`a0py.spark.file_stream`.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .. import _core
from ..errors import ArenaNotFoundError
from ..proto.topic import PUBSUB, Topic, check_topic_name
from ..recording.errors import RecordingOptionError
from ..recording.reader import SHM_PREFIX
from .arenas import frames_batch, gap_batch
from .batches import frame_schema
from .errors import DataLossError
from .options import bool_option, int_option, lower_keys, read_options
from .predicate import Predicate

_log = logging.getLogger("a0py.spark")


class TopicRange(InputPartition):
    """Frames ``start + 1 .. end`` of ``topic``."""

    def __init__(self, topic, start, end):
        super().__init__(topic)
        self.topic = topic
        self.start = start
        self.end = end


def _attach(topic, root):
    t = Topic(topic, root=root)
    where = t.location(PUBSUB)
    try:
        return _core.Arena.shm(where) if t.root.kind == "shm" else _core.Arena.file(where)
    except ArenaNotFoundError:
        return None


def _bounds(topic, root):
    """(seq_low, seq_high) of the topic now; (0, 0) when it has no arena or no frame."""
    arena = _attach(topic, root)
    if arena is None:
        return 0, 0
    try:
        with _core.Transport(arena).lock() as t:
            if t.empty:
                return t.seq_high + 1, t.seq_high
            return t.seq_low, t.seq_high
    finally:
        arena.close()


def _shm_paths(low):
    """The ``shm://`` names of the load path(s) (options with lower-case names)."""
    if low.get("paths"):
        try:
            got = json.loads(low["paths"])
        except ValueError:
            got = str(low["paths"]).split(",")
        got = [got] if isinstance(got, str) else got
    else:
        got = [low["path"]] if low.get("path") else []
    return [p for p in got if str(p).startswith(SHM_PREFIX)]


class A0TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options, schema):
        low = lower_keys(options)
        topics = [t.strip() for t in str(low.get("topics", "")).split(",") if t.strip()]
        if not topics:
            # load("shm://a", ...) names the topics where option topics does not
            topics = [p[len(SHM_PREFIX):] for p in _shm_paths(low)]
        if not topics:
            raise RecordingOptionError("spark.readStream.format('a0') needs option topics (names separated by ',') "
                                       "for a stream of live topics, or a path (load(PATH)) for a stream of "
                                       "recordings")
        self.topics = [check_topic_name(t) for t in topics]
        self.options = read_options(options, schema)
        self.schema_arrow = frame_schema(self.options.gaps, self.options.payload_type, self.options.record_time,
                                         self.options.headers, self.options.mcap_columns)
        self.fail_on_loss = bool_option(low, "failondataloss", True)
        self.max_frames = int_option(low, "maxframespertrigger", None)
        self.starting = low.get("startingoffsets", "latest")
        self.target = None  # AvailableNow: seqs to stop at

    def _now(self):
        return {t: _bounds(t, self.options.root)[1] for t in self.topics}

    def initialOffset(self):
        start = str(self.starting).strip()
        if start == "latest":
            return self._now()
        if start == "earliest":
            return {t: max(_bounds(t, self.options.root)[0] - 1, 0) for t in self.topics}
        try:
            given = json.loads(start)
        except ValueError:
            given = None
        if not isinstance(given, dict):
            raise RecordingOptionError(f"option startingOffsets={start!r}: use latest, earliest, or JSON "
                                       '{"topic": seq} (frames after seq are read)')
        out = {}
        for t in self.topics:
            v = given.get(t, -1)
            out[t] = _bounds(t, self.options.root)[1] if v == -1 else (
                max(_bounds(t, self.options.root)[0] - 1, 0) if v == -2 else int(v))
        return out

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.max_frames) if self.max_frames else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self.target = self._now()

    def latestOffset(self, start, limit):
        now = self._now() if self.target is None else dict(self.target)
        start = {t: int(start.get(t, now[t])) for t in self.topics}
        # A topic whose arena was recreated (seqs restarted) is read from its start.
        avail = {t: max(0, now[t] - start[t]) for t in self.topics}
        if isinstance(limit, ReadMaxRows):
            budget = int(limit.max_rows)
            take = {t: 0 for t in self.topics}
            pending = [t for t in self.topics if avail[t]]
            while budget > 0 and pending:
                share = max(1, budget // len(pending))
                for t in list(pending):
                    n = min(share, avail[t] - take[t], budget)
                    take[t] += n
                    budget -= n
                    if take[t] >= avail[t]:
                        pending.remove(t)
                    if budget <= 0:
                        break
            return {t: start[t] + take[t] for t in self.topics}
        return {t: start[t] + avail[t] for t in self.topics}

    def reportLatestOffset(self):
        return self._now()

    def partitions(self, start, end):
        return [TopicRange(t, int(start.get(t, 0)), int(end[t])) for t in self.topics
                if int(end.get(t, 0)) > int(start.get(t, 0))]

    def read(self, partition):
        topic, first, last = partition.topic, partition.start + 1, partition.end
        arena = _attach(topic, self.options.root)
        if arena is None:
            self._lost(topic, first, last, "its arena no longer exists")
            return
        try:
            tr = _core.Transport(arena)
            with tr.lock() as t:
                placed = not t.empty and t.seq_low < first <= t.seq_high + 1
                if placed:
                    t.jump(first - 1)
            frames = tr.read_many(last - first + 1)
        finally:
            arena.close()
        seqs = np.array([s for s, _ in frames], np.int64)
        data = [f for _, f in frames]
        keep = (seqs >= first) & (seqs <= last)
        if not keep.all():
            seqs = seqs[keep]
            data = [f for f, k in zip(data, keep.tolist()) if k]
        got_first = int(seqs[0]) if len(seqs) else last + 1
        if got_first > first:
            self._lost(topic, first, got_first - 1, "they were evicted before this batch read them")
        batch = frames_batch(topic, seqs, data, Predicate(), self.options, self.schema_arrow,
                             f"shm://{topic}")
        if batch is not None:
            yield batch
        if got_first > first and self.options.gaps:
            g = gap_batch(topic, first, got_first - 1, Predicate(), self.schema_arrow, time.time_ns() // 1000)
            if g is not None:
                yield g

    def _lost(self, topic, first, last, why):
        msg = (f"topic {topic!r}: frames seq {first}..{last} ({last - first + 1}) were lost: {why}. "
               "Give the topic a larger arena (A0PY_TOPIC_SIZES), trigger more often, or set "
               "failOnDataLoss=false to go on without them")
        if self.fail_on_loss:
            raise DataLossError(msg)
        _log.warning("%s", msg)

    def commit(self, end):
        pass
