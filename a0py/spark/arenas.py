"""Reading the frames an arena holds now (a file arena, or a live topic's
pubsub arena) as the same rows as a recording.

Invariants:

* One copy under one lock: ``Transport.read_many`` copies every frame the
  arena holds (writers wait for the length of the copy only), then the
  packets are decoded in bulk with the lock released.
* ``seq`` is the frame's transport seq (the arena's own); ``time_wall`` and
  ``time_mono`` are the packet's standard headers (null when absent).
* With ``gaps``, the frames evicted before the read (seqs 1 .. oldest - 1)
  are one gap row, seen at the time of the read.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from .. import _core
from ..errors import ArenaNotFoundError
from ..proto.topic import PUBSUB, Topic
from ..recording.errors import RecordingOptionError
from ..recording.format import GAP_SCHEMA
from .batches import HEADERS_TYPE, assemble, decode

# An arena's gap row in the MCAP columns: the gap channel's type, no record.
ARENA_GAP_MCAP = {"schema_name": GAP_SCHEMA, "message_encoding": "json"}


def open_arena(item, root=None):
    """The arena of an :class:`ArenaSlice` (attached, never created)."""
    try:
        if item.shm:
            topic = Topic(item.topic, root=root)
            where = topic.location(PUBSUB)
            if topic.root.kind == "shm":
                return _core.Arena.shm(where)
            return _core.Arena.file(where)
        return _core.Arena.file(item.path)
    except ArenaNotFoundError:
        what = f"topic {item.topic!r} (shm://{item.topic})" if item.shm else f"file arena {item.path}"
        raise RecordingOptionError(f"{what} does not exist: nothing has published to it on this host "
                                   "(check the name and A0PY_ROOT)") from None


def snapshot(arena):
    """(seqs int64 array, frames list of bytes) of every frame ``arena`` holds."""
    frames = _core.Transport(arena).read_many()
    if not frames:
        return np.zeros(0, np.int64), []
    seqs, data = zip(*frames)
    return np.array(seqs, np.int64), list(data)


def frames_batch(topic, seqs, frames, predicate, options, schema, where):
    """The record batch of ``frames`` (a0py packets) of ``topic`` with their
    transport ``seqs``, rows passing ``predicate`` only; None when none."""
    keep = predicate.seq_mask(seqs) if predicate.topic_ok(topic) else np.zeros(len(seqs), bool)
    if not keep.all():
        seqs = seqs[keep]
        frames = [f for f, k in zip(frames, keep.tolist()) if k]
    if not len(seqs):
        return None
    lengths = np.fromiter(map(len, frames), np.int64, len(frames))
    starts = np.zeros(len(frames), np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    buf = b"".join(frames)

    def keep(seq, seq_have, wall, wall_have):
        return predicate.wall_mask(wall // 1000, wall_have) if (
            predicate.wall_lo is not None or predicate.wall_hi is not None) else None

    dec = decode(buf, starts, lengths, lambda i: f"{where}: frame seq {int(seqs[i])}", keep)
    if not len(dec.rows):
        return None
    seqs = seqs[dec.rows]
    topics = pa.array([topic], pa.string()).take(pa.array(np.zeros(len(seqs), np.int32)))
    return assemble(schema, topics, seqs, (dec.mono, dec.mono_have), dec.wall // 1000, dec.wall_have,
                    dec.headers, dec.payload, gaps=None)


def gap_batch(topic, first, last, predicate, schema, wall_us):
    """One gap row (``first..last`` lost), or None when the predicate drops it."""
    if not (predicate.topic_ok(topic) and predicate.seq_mask(np.array([first]))[0]
            and predicate.wall_mask(np.array([wall_us]))[0]):
        return None
    return assemble(schema, pa.array([topic], pa.string()), np.array([first], np.int64),
                    (np.zeros(1, np.int64), np.zeros(1, bool)), np.array([wall_us], np.int64), None,
                    pa.nulls(1, HEADERS_TYPE), pa.nulls(1, schema.field("payload").type),
                    gaps=([first], [last]), mcap=ARENA_GAP_MCAP)


def read_arena(item, predicate, options, schema):
    """Yields the batches of the frames arena ``item`` holds now."""
    arena = open_arena(item, options.root)
    try:
        seqs, frames = snapshot(arena)
    finally:
        arena.close()
    now_us = time.time_ns() // 1000
    where = f"shm://{item.topic}" if item.shm else item.path
    if options.gaps and len(seqs) and seqs[0] > 1:
        g = gap_batch(item.topic, 1, int(seqs[0]) - 1, predicate, schema, now_us)
        if g is not None:
            yield g
    batch = frames_batch(item.topic, seqs, frames, predicate, options, schema, where)
    if batch is not None:
        yield batch

