"""Partition planning for the ``a0`` source: the sources a path spec names
(recordings, file arenas, live topics) split into parts (:class:`Part`) of about
``maxPartitionBytes`` of uncompressed chunks, from the files' summaries
alone (a file cut short: a scan of its record headers), chunks that cannot
hold a row passing the predicate left out.

Invariants: each chunk is in exactly one part; a chunk is left out only
when its channels, or the seq and publish-time ranges ``a0py.chunks`` gives
for it, prove that no row in it can pass the predicate.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from .. import _core
from ..proto.topic import check_topic_name
from ..recording.format import KIND_GAP, KIND_PACKET, KIND_TYPED, channel_kind, chunk_ranges
from ..recording.reader import SHM_PREFIX, ChunkRef, expand_paths, read_layout_or_skip
from .options import ReadOptions
from .predicate import Predicate

_log = logging.getLogger("a0py.spark")


@dataclass(frozen=True)
class FileSlice:
    """Some chunks of one file, with the channels they need."""

    path: str
    channels: tuple  # (id, topic, kind)
    refs: tuple  # ChunkRef | Region


@dataclass(frozen=True)
class ArenaSlice:
    """The frames an arena holds when it is read: ``shm`` names a live
    topic (``path`` is the topic), else ``path`` is a file arena."""

    path: str
    topic: str
    shm: bool = False


@dataclass
class Part:
    items: list = field(default_factory=list)
    weight: int = 0


def _is_arena_file(path):
    with open(path, "rb") as f:
        head = f.read(8)
    return len(head) >= 8 and int.from_bytes(head, "little") == _core.MAGIC


def plan_file(path, predicate, options):
    """The chunks of the recording at ``path`` that may hold rows passing
    ``predicate``: (FileSlice or None, weight in uncompressed bytes); None
    also for a file with no record yet (skipped with a warning)."""
    layout = read_layout_or_skip(path)
    if layout is None:
        return None, 0
    channels = []
    wanted = set()
    for ch in layout.channels.values():
        kind = channel_kind(ch)
        if (kind == KIND_PACKET and predicate.topic_ok(ch.topic)) or (kind == KIND_GAP and options.gaps and not predicate.empty):
            wanted.add(ch.id)
        if kind is not None:
            channels.append((ch.id, ch.topic, kind))
        if kind == KIND_TYPED and predicate.topic_ok(ch.topic):
            # Not silently: a typed topic's channels (its payloads and /a0py/headers/)
            # are not rows of this source yet (docs/recording.md).
            _log.warning("%s: typed topic %r (%s) is not read by the a0 source yet: read it "
                         "with an MCAP reader and its schema's decoder", path, ch.topic,
                         ch.message_encoding)
    meta = chunk_ranges(layout)
    refs = []
    weight = 0
    for ref in layout.chunks:
        ids = ref.channel_ids
        if ids is not None and not (ids & wanted):
            continue
        info = meta.get(ref.offset)
        if info and not any(
                ch in wanted and predicate.seq_range_ok(slo, shi)
                and predicate.wall_range_ok(plo // 1000, phi // 1000)
                for ch, slo, shi, plo, phi in info):
            continue
        refs.append(ref)
        weight += ref.uncompressed_size
    for reg in layout.regions:
        refs.append(reg)
        weight += reg.length
    if not refs:
        return None, 0
    return FileSlice(layout.path, tuple(channels), tuple(refs)), weight


def plan(spec, predicate=Predicate(), options=ReadOptions()):  # noqa: B008 - frozen
    """The :class:`Part`s to read for ``spec`` (see :func:`expand_paths`):
    each chunk in exactly one part, parts of about ``options.partition_bytes``
    of uncompressed chunks, a large file split over several, small files
    grouped; one part per arena."""
    parts = []
    cur = Part()
    for src in expand_paths(spec):
        if src.startswith(SHM_PREFIX):
            topic = check_topic_name(src[len(SHM_PREFIX):])
            if predicate.topic_ok(topic):
                parts.append(Part([ArenaSlice(topic, topic, shm=True)]))
            continue
        if _is_arena_file(src):
            topic = _arena_file_topic(src)
            if predicate.topic_ok(topic):
                parts.append(Part([ArenaSlice(src, topic)]))
            continue
        fs, _ = plan_file(src, predicate, options)
        if fs is None:
            continue
        run = []
        run_weight = 0
        for ref in fs.refs:
            w = ref.uncompressed_size if isinstance(ref, ChunkRef) else ref.length
            if run and cur.weight + run_weight + w > options.partition_bytes:
                cur.items.append(FileSlice(fs.path, fs.channels, tuple(run)))
                cur.weight += run_weight
                parts.append(cur)
                cur, run, run_weight = Part(), [], 0
            run.append(ref)
            run_weight += w
        if run:
            cur.items.append(FileSlice(fs.path, fs.channels, tuple(run)))
            cur.weight += run_weight
    if cur.items:
        parts.append(cur)
    return parts


def _arena_file_topic(path):
    """The topic a file arena holds: ``DIR/a.pubsub.a0`` (a topic root's
    layout) is ``a``; any other file is named by its file name."""
    name = os.path.basename(path)
    for suffix in (".pubsub.a0", ".pubsub"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name
