"""Partition planning for the ``a0`` source: the sources a path spec names
(recordings, file arenas, live topics) split into parts (:class:`Part`) of about
``maxPartitionBytes`` of uncompressed chunks, from the files' summaries
alone (a file cut short: a scan of its record headers), chunks that cannot
hold a row passing the predicate left out.

Invariants: each chunk is in exactly one part; a chunk is left out only
when its channels, or the seq and publish-time ranges ``a0py.chunks`` gives
for it (a0py's channels only: a foreign channel's chunks are never skipped
by time, since the chunk index gives log times, not publish times), prove
that no row in it can pass the predicate; a typed topic's headers chunk is
in the part of the payload chunk after it (``FileSlice.glue``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .. import _core
from ..proto.topic import check_topic_name
from ..recording.errors import RecordingFormatError, RecordingOptionError
from ..recording.format import (
    HEADERS_KEY,
    KIND_FOREIGN,
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    channel_kind,
    chunk_ranges,
    headers_topic,
    is_json_copy,
)
from ..recording.headers import FORMAT_PACKET, headers_format
from ..recording.reader import SHM_PREFIX, ChunkRef, expand_paths, read_layout_or_skip
from .batches import Chan
from .options import ReadOptions
from .predicate import Predicate


@dataclass(frozen=True)
class FileSlice:
    """Some chunks of one file, with the channels they need."""

    path: str
    channels: tuple  # (id, *Chan)
    refs: tuple  # ChunkRef | Region
    glue: frozenset = frozenset()  # offsets of chunks kept in the part of the chunk after them
    # decode=true: (channel id, schema name, schema encoding, schema data) of the channels to decode
    schemas: tuple = ()


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


def file_channels(layout):
    """id -> :class:`Chan` of every channel of ``layout`` the source reads
    (all but a0py's JSON copies, which repeat a packet channel's payloads),
    a typed topic's two channels paired."""
    out = {}
    headers_ids = {}
    for ch in layout.channels.values():
        ch_info = channel_info(ch, layout.schemas)
        if ch_info is None:
            continue
        out[ch.id] = ch_info
        if ch_info.kind == KIND_HEADERS:
            headers_ids[ch.topic] = ch.id
    for cid, c in list(out.items()):
        if c.kind == KIND_TYPED:
            hid = headers_ids.get(layout.channels[cid].metadata.get(HEADERS_KEY))
            if hid is not None:
                out[cid] = c._replace(partner=hid)
                out[hid] = out[hid]._replace(partner=cid)
    return out


def channel_info(ch, schemas):
    """The :class:`Chan` of an ``mcap`` channel record (``schemas``: id ->
    schema record), None for a JSON copy."""
    kind = channel_kind(ch)
    if kind == KIND_FOREIGN and is_json_copy(ch):
        return None
    schema = schemas.get(ch.schema_id) if ch.schema_id else None
    topic = headers_topic(ch) if kind == KIND_HEADERS else ch.topic
    fmt = FORMAT_PACKET
    if kind == KIND_HEADERS:
        try:
            fmt = headers_format(ch)
        except ValueError as e:
            raise RecordingFormatError(str(e)) from None
    return Chan(topic, kind, schema.name if schema is not None else None, ch.message_encoding, headers_format=fmt)


def wanted_channels(channels, predicate, options):
    """The ids of ``channels`` whose messages may give rows passing ``predicate``."""
    wanted = set()
    seq_bound = predicate.seq_lo is not None or predicate.seq_hi is not None or predicate.seq_in is not None
    for cid, c in channels.items():
        if c.kind == KIND_GAP:
            if options.gaps and not predicate.empty:
                wanted.add(cid)
        elif c.kind in (KIND_PACKET, KIND_TYPED, KIND_HEADERS):
            if predicate.topic_ok(c.topic):
                wanted.add(cid)
        elif c.kind == KIND_FOREIGN and not seq_bound and predicate.topic_ok(c.topic):
            wanted.add(cid)  # no seq: a seq filter passes none of its rows
    return wanted


def plan_file(path, predicate, options):
    """The chunks of the recording at ``path`` that may hold rows passing
    ``predicate``: (FileSlice or None, weight in uncompressed bytes); None
    also for a file with no record yet (skipped with a warning)."""
    layout = read_layout_or_skip(path)
    if layout is None:
        return None, 0
    chans = file_channels(layout)
    wanted = wanted_channels(chans, predicate, options)
    meta = chunk_ranges(layout)
    kept = []
    for ref in layout.chunks:
        ids = ref.channel_ids
        if ids is not None and not (ids & wanted):
            continue
        info = meta.get(ref.offset)
        # a0py.chunks ranges hold for a0py's channels only: a chunk that may
        # hold any other channel's messages is kept (its rows are filtered).
        covered = info and (ids is None or ids <= {i[0] for i in info})
        if covered and not any(
                ch in wanted and predicate.seq_range_ok(slo, shi)
                and predicate.wall_range_ok(plo // 1000, phi // 1000)
                for ch, slo, shi, plo, phi in info):
            continue
        kept.append(ref)
    kept, glue = _with_headers_chunks(layout, kept, chans, meta)
    refs = list(kept)
    weight = sum(r.uncompressed_size for r in kept)
    for reg in layout.regions:
        refs.append(reg)
        weight += reg.length
    if not refs:
        return None, 0
    channels = tuple((cid, *c) for cid, c in chans.items())
    schemas = ()
    if options.message_type is not None:
        schemas = tuple((cid, *_schema_of(layout, cid)) for cid in sorted(wanted)
                        if chans[cid].kind in (KIND_FOREIGN, KIND_TYPED))
    return FileSlice(layout.path, channels, tuple(refs), frozenset(glue), schemas), weight


def _schema_of(layout, cid):
    """(name, encoding, data) of channel ``cid``'s schema; empty without one."""
    sid = layout.channels[cid].schema_id
    sc = layout.schemas.get(sid) if sid else None
    return (sc.name, sc.encoding, bytes(sc.data)) if sc is not None else ("", "", b"")


def _chunk_ids(ref, meta):
    if ref.channel_ids is not None:
        return ref.channel_ids
    info = meta.get(ref.offset)
    return frozenset(i[0] for i in info) if info else None


def _with_headers_chunks(layout, kept, chans, meta):
    """``kept`` with, before each chunk of a typed topic's payloads, the
    chunk written just before it when that one holds messages of the
    topic's headers channel (a0py's writer puts a chunk of headers alone
    there; another writer may mix headers and payloads in every chunk, a
    payload's headers message at the end of the chunk before), and the
    offsets of those chunks (to be kept in the same part as the chunk after
    them). Chunks of headers alone that no payload chunk follows are left
    out: they give no row."""
    headers_of = {cid: c.partner for cid, c in chans.items() if c.kind == KIND_TYPED and c.partner is not None}
    if not headers_of:
        return kept, ()
    chunks = sorted(layout.chunks, key=lambda r: r.offset)
    order = {r.offset: i for i, r in enumerate(chunks)}
    out = []
    glue = []
    for ref in kept:
        ids = _chunk_ids(ref, meta)
        if ids is not None and ids and all(chans.get(i) is not None and chans[i].kind == KIND_HEADERS
                                           for i in ids):
            continue  # added before its payload chunk below
        if ids is not None:
            want = {headers_of[i] for i in ids if i in headers_of}
            i = order[ref.offset] - 1
            if want and i >= 0:
                prev = chunks[i]
                pids = _chunk_ids(prev, meta)
                # The chunk before may hold some of its headers messages: one of
                # headers alone (a0py's writer), or, from another writer, one that
                # also holds payloads (kept for those already, then the last of out).
                if pids is not None and pids and pids & want:
                    if not out or out[-1] is not prev:
                        out.append(prev)
                    glue.append(prev.offset)
        out.append(ref)
    return out, glue


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
            if run and cur.weight + run_weight + w > options.partition_bytes and not (
                    isinstance(run[-1], ChunkRef) and run[-1].offset in fs.glue):
                cur.items.append(FileSlice(fs.path, fs.channels, tuple(run), fs.glue, fs.schemas))
                cur.weight += run_weight
                parts.append(cur)
                cur, run, run_weight = Part(), [], 0
            run.append(ref)
            run_weight += w
        if run:
            cur.items.append(FileSlice(fs.path, fs.channels, tuple(run), fs.glue, fs.schemas))
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


def _recording_layouts(spec):
    """The layouts of the MCAP files ``spec`` names (live topics, file arenas and
    files that :func:`read_layout_or_skip` skips left out)."""
    for src in expand_paths(spec):
        if src.startswith(SHM_PREFIX) or _is_arena_file(src):
            continue
        layout = read_layout_or_skip(src)
        if layout is not None:
            yield layout


def selects_mcap_channels(spec, predicate=Predicate()):  # noqa: B008 - frozen
    """Does a read of ``spec`` with ``predicate``'s topics select a channel
    that a0py did not write, or a typed topic's payloads? (What
    ``mcapColumns=auto`` decides by; from the files' summaries, or a scan of
    a file without one. Live topics and file arenas hold a0py packets.)"""
    for layout in _recording_layouts(spec):
        for c in file_channels(layout).values():
            if c.kind in (KIND_FOREIGN, KIND_TYPED) and predicate.topic_ok(c.topic):
                return True
    return False


def _selected_types(spec, predicate):
    """The message types of the channels a0py did not write and typed topics
    that a read of ``spec`` with ``predicate``'s topics selects: ((schema
    name, message encoding) -> {topic}, and each distinct schema (name,
    encoding, data, message encoding) -> a topic of it)."""
    types = {}
    schemas = {}
    for layout in _recording_layouts(spec):
        for cid, c in file_channels(layout).items():
            if c.kind not in (KIND_FOREIGN, KIND_TYPED) or not predicate.topic_ok(c.topic):
                continue
            types.setdefault((c.schema_name or "", c.message_encoding), set()).add(c.topic)
            schemas.setdefault((*_schema_of(layout, cid), c.message_encoding), c.topic)
    return types, schemas


def message_types(spec, predicate=Predicate()):  # noqa: B008 - frozen
    """(schema name, message encoding) -> the Arrow type its decoder gives,
    for each message type of the channels a0py did not write and typed
    topics a read of ``spec`` selects (empty when it selects none).

    Raises :class:`RecordingOptionError` for a type whose schemas have
    different shapes in different files, or an encoding a0py cannot decode;
    :class:`RecordingFormatError` for a schema that does not parse."""
    return _arrow_types(_selected_types(spec, predicate)[1])


def _arrow_types(schemas):
    found = {}
    for key, topic in schemas.items():
        found.setdefault((key[0], key[3]), set()).add(decoder(topic, *key).arrow_type)
    for (name, enc), arrow_types in found.items():
        if len(arrow_types) > 1:
            raise RecordingOptionError(f"decode=true: the channels of {name or '(no schema)'} in {enc} have schemas "
                                       f"of different shapes in different files ({len(arrow_types)}): choose files "
                                       "or topics of one with the path or option topics")
    return {key: next(iter(t)) for key, t in found.items()}


def message_type(spec, predicate=Predicate()):  # noqa: B008 - frozen
    """The Arrow type of the ``message`` column of a ``decode=true`` read of
    ``spec``: that of the decoder of the one message type (schema name and
    message encoding) of the channels a0py did not write and typed topics
    the read selects.

    Raises :class:`RecordingOptionError` when they have several types
    (listing each with its topics, to choose one with option ``topics``) or
    none, or a channel's encoding a0py cannot decode
    (``DecodeUnsupported``); :class:`RecordingFormatError` for a schema that
    does not parse (naming channel and schema)."""
    types, schemas = _selected_types(spec, predicate)
    if not types:
        raise RecordingOptionError("decode=true: the read selects no channel to decode (only a0py packets, "
                                   "whose payloads have no schema); leave decode out")
    if len(types) > 1:
        listed = "; ".join(f"{name or '(no schema)'} in {enc}: {', '.join(sorted(topics))}"
                           for (name, enc), topics in sorted(types.items()))
        raise RecordingOptionError(f"decode=true reads one message type at a time; the read selects "
                                   f"{len(types)}: {listed}. Choose the topics of one with option topics")
    return next(iter(_arrow_types(schemas).values()))


_DECODERS = {}


def decoder(topic, schema_name, schema_encoding, schema_data, message_encoding):
    """``a0py.recording.decode.decoder_for``, made once per schema in a process."""
    key = (schema_name, schema_encoding, bytes(schema_data), message_encoding)
    dec = _DECODERS.get(key)
    if dec is None:
        from ..recording.decode import decoder_for

        dec = decoder_for(topic, schema_name, schema_encoding, schema_data, message_encoding)
        if len(_DECODERS) > 256:
            _DECODERS.clear()
        _DECODERS[key] = dec
    return dec
