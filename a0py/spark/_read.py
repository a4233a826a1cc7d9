"""Reading recordings into Arrow record batches, without Spark: planning
(paths, files, chunks, partitions), predicates, and decoding one partition.

The ``a0`` Spark source is a thin layer over this module (its partitions are
:class:`Part`s, read by ``_parts.read_part``), and so is
:func:`a0py.spark.read_table`, which gives the same rows as a
``pyarrow.Table`` in one process.

Invariants:

* A row is a frame: ``topic``, ``seq`` (the packet's ``a0_transport_seq``;
  the record's 32-bit sequence when the packet has none), ``time_mono`` (ns,
  the packet's ``a0_time_mono``, null when absent), ``time_wall`` (the
  record's publish time, to the microsecond), ``headers`` (as a0py's
  readers show them: the standard ones first, then the packet's own, in
  order), ``payload``. Gap rows (only with ``gaps``) have ``is_gap``
  true, ``seq`` = ``gap_first``, ``time_wall`` = when the recorder saw the
  gap, null ``time_mono``, ``headers`` and ``payload``.
* A predicate only ever removes rows that fail it: chunks are skipped only
  when their index or the segment's ``a0py.chunks`` metadata proves that no
  row in them can pass, and the rows read are then filtered exactly, so a
  read with pushdown returns the same rows as one without.
* Only channels of a0py packets (message encoding ``a0py/packet``) give
  frame rows; the JSON copies and foreign channels are skipped.
"""

from __future__ import annotations

import glob
import json
import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..proto.topic import check_topic_name
from . import _mcap
from ._packets import decode
from ._writer import GAP_TOPIC, PACKET_ENCODING
from .errors import RecordingFormatError, RecordingOptionError

FRAME_COLUMNS = ("topic", "seq", "time_mono", "time_wall", "headers", "payload")
GAP_COLUMNS = ("is_gap", "gap_first", "gap_last")
SHM_PREFIX = "shm://"
TIME_TYPE = pa.timestamp("us", tz="UTC")
HEADERS_TYPE = pa.map_(pa.string(), pa.string())
DEFAULT_PARTITION_BYTES = 32 << 20
_INT64_MAX = (1 << 63) - 1

KIND_PACKET = "packet"
KIND_GAP = "gap"


def frame_schema(gaps=False, payload_type=None, record_time=False, headers=True):
    """The Arrow schema of the rows (Spark's, as ``to_arrow_schema`` gives it:
    every field nullable, timestamps in µs UTC, ``map<string, string>``);
    ``headers=False`` leaves out the ``headers`` column."""
    fields = [
        pa.field("topic", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("time_mono", pa.int64()),
        pa.field("time_wall", TIME_TYPE),
    ]
    if headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    fields.append(pa.field("payload", payload_type if payload_type is not None else pa.binary()))
    if gaps:
        fields += [pa.field("is_gap", pa.bool_()), pa.field("gap_first", pa.int64()),
                   pa.field("gap_last", pa.int64())]
    if record_time:
        fields.append(pa.field("time_record", TIME_TYPE))
    return pa.schema(fields)


# -- predicates -----------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """A conjunction the reader applies exactly: topic in ``topics``, seq in
    [``seq_lo``, ``seq_hi``] (and in ``seq_in``), ``time_wall`` in
    [``wall_lo``, ``wall_hi``] (µs since the epoch). ``None`` = no bound.
    ``empty`` = nothing can pass."""

    topics: frozenset | None = None
    seq_lo: int | None = None
    seq_hi: int | None = None
    seq_in: frozenset | None = None
    wall_lo: int | None = None
    wall_hi: int | None = None
    empty: bool = False

    def and_topics(self, topics):
        t = frozenset(topics)
        return _replace(self, topics=t if self.topics is None else self.topics & t)

    def and_seq(self, lo=None, hi=None, values=None):
        p = self
        if lo is not None:
            p = _replace(p, seq_lo=lo if p.seq_lo is None else max(p.seq_lo, lo))
        if hi is not None:
            p = _replace(p, seq_hi=hi if p.seq_hi is None else min(p.seq_hi, hi))
        if values is not None:
            v = frozenset(values)
            p = _replace(p, seq_in=v if p.seq_in is None else p.seq_in & v)
        return p

    def and_wall(self, lo=None, hi=None):
        p = self
        if lo is not None:
            p = _replace(p, wall_lo=lo if p.wall_lo is None else max(p.wall_lo, lo))
        if hi is not None:
            p = _replace(p, wall_hi=hi if p.wall_hi is None else min(p.wall_hi, hi))
        return p

    @property
    def trivial(self):
        return self == Predicate()

    def topic_ok(self, topic):
        return not self.empty and (self.topics is None or topic in self.topics)

    def seq_range_ok(self, lo, hi):
        """Can a row with lo <= seq <= hi pass?"""
        if self.empty or (self.seq_lo is not None and hi < self.seq_lo) or (
                self.seq_hi is not None and lo > self.seq_hi):
            return False
        if self.seq_in is not None:
            return any(lo <= v <= hi for v in self.seq_in)
        return True

    def wall_range_ok(self, lo_us, hi_us):
        return not (self.empty or (self.wall_lo is not None and hi_us < self.wall_lo)
                    or (self.wall_hi is not None and lo_us > self.wall_hi))

    def seq_mask(self, seq):
        m = np.ones(len(seq), bool)
        if self.seq_lo is not None:
            m &= seq >= self.seq_lo
        if self.seq_hi is not None:
            m &= seq <= self.seq_hi
        if self.seq_in is not None:
            m &= np.isin(seq, np.fromiter(self.seq_in, np.int64, len(self.seq_in)))
        return m

    def wall_mask(self, wall_us, valid=None):
        m = np.ones(len(wall_us), bool) if valid is None else valid.copy()
        if self.wall_lo is not None:
            m &= wall_us >= self.wall_lo
        if self.wall_hi is not None:
            m &= wall_us <= self.wall_hi
        if (self.wall_lo is not None or self.wall_hi is not None) and valid is not None:
            m &= valid
        return m


def _replace(p, **kw):
    d = {k: getattr(p, k) for k in Predicate.__dataclass_fields__}
    d.update(kw)
    q = Predicate(**d)
    empty = q.empty or (q.topics is not None and not q.topics) or (
        q.seq_lo is not None and q.seq_hi is not None and q.seq_lo > q.seq_hi) or (
        q.seq_in is not None and not q.seq_in) or (
        q.wall_lo is not None and q.wall_hi is not None and q.wall_lo > q.wall_hi)
    if empty and not q.empty:
        d.update(kw, empty=True)
        q = Predicate(**d)
    return q


# -- options --------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    gaps: bool = False
    validate_crc: bool = True
    payload_type: pa.DataType | None = None  # a struct: parse payloads as JSON into it
    partition_bytes: int = DEFAULT_PARTITION_BYTES
    root: str | None = None  # where shm://TOPIC lives (A0PY_ROOT syntax); None: A0PY_ROOT
    record_time: bool = False  # add time_record: when the recorder read the frame (MCAP log_time)
    headers: bool = True  # the headers column (a map Spark spends a third of a small row's time on)


def _bool_option(options, name, default):
    v = options.get(name)
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise RecordingOptionError(f"option {name}={v!r}: use true or false")


def _int_option(options, name, default, minimum=1):
    v = options.get(name)
    if v is None:
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise RecordingOptionError(f"option {name}={v!r}: use an integer") from None
    if n < minimum:
        raise RecordingOptionError(f"option {name}={n}: use at least {minimum}")
    return n


# -- planning -------------------------------------------------------------------


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


def expand_paths(spec):
    """The sources named by ``spec`` (a path, a directory, a glob, a
    ``shm://TOPIC``, or a list of them), files sorted by name, each once.

    Raises :class:`RecordingOptionError` when a name matches nothing."""
    items = [spec] if isinstance(spec, (str, os.PathLike)) else list(spec)
    out = []
    seen = set()
    for item in items:
        item = os.fspath(item)
        if item.startswith(SHM_PREFIX):
            found = [item]
        elif os.path.isdir(item):
            found = sorted(
                os.path.join(d, f) for d, _, fs in os.walk(item) for f in fs if f.endswith(".mcap"))
        elif os.path.exists(item):
            found = [item]
        elif glob.has_magic(item):
            found = sorted(p for p in glob.glob(item, recursive=True) if os.path.isfile(p))
            if not found:
                raise RecordingOptionError(f"{item}: the pattern matches no file")
        else:
            raise RecordingOptionError(f"{item}: no such file or directory (a recording, a directory of "
                                       f"recordings, a glob, a file arena or shm://TOPIC)")
        for f in found:
            key = f if f.startswith(SHM_PREFIX) else os.path.realpath(f)
            if key not in seen:
                seen.add(key)
                out.append(f)
    return out


def _is_arena_file(path):
    from .. import _core

    with open(path, "rb") as f:
        head = f.read(8)
    return len(head) >= 8 and int.from_bytes(head, "little") == _core.MAGIC


def _chunk_meta(layout):
    """chunk offset -> [(channel, seq_lo, seq_hi, pub_lo, pub_hi)] from the
    segment's ``a0py.chunks`` metadata (empty when absent or unreadable)."""
    out = {}
    for off, value in layout.metadata_named("a0py.chunks").items():
        try:
            out[int(off)] = [tuple(int(x) for x in item.split(":")) for item in value.split(";") if item]
        except ValueError:
            return {}
    return out


def _channel_kind(ch):
    if ch.message_encoding == PACKET_ENCODING:
        return KIND_PACKET
    if ch.topic == GAP_TOPIC and ch.message_encoding == "json":
        return KIND_GAP
    return None


def plan_file(path, predicate, options):
    """The chunks of the recording at ``path`` that may hold rows passing
    ``predicate``: (FileSlice or None, weight in uncompressed bytes)."""
    layout = _mcap.read_layout(path)
    channels = []
    wanted = set()
    for ch in layout.channels.values():
        kind = _channel_kind(ch)
        if (kind == KIND_PACKET and predicate.topic_ok(ch.topic)) or (kind == KIND_GAP and options.gaps and not predicate.empty):
            wanted.add(ch.id)
        if kind is not None:
            channels.append((ch.id, ch.topic, kind))
    meta = _chunk_meta(layout)
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


def plan(spec, predicate=Predicate(), options=ReadOptions()):
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
            w = ref.uncompressed_size if isinstance(ref, _mcap.ChunkRef) else ref.length
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


# -- reading --------------------------------------------------------------------


def _read_file_slice(fs, predicate, options, schema):
    fd = os.open(fs.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        channels = {cid: (topic, kind) for cid, topic, kind in fs.channels}
        for ref in fs.refs:
            records = _mcap.read_chunk_records(fd, ref, fs.path, options.validate_crc)
            idx = _mcap.read_message_index(fd, ref, fs.path) if isinstance(ref, _mcap.ChunkRef) else None
            offs, others = _mcap.message_offsets(records, idx, fs.path, ref.offset)
            for op, body_at, body in others:
                if op == _mcap.OP_CHANNEL:
                    ch = _mcap.parse_channel(body, fs.path, body_at)
                    kind = _channel_kind(ch)
                    if kind is not None and ch.id not in channels:
                        channels[ch.id] = (ch.topic, kind)
            what = "chunk" if isinstance(ref, _mcap.ChunkRef) else "message region"
            yield from records_to_batches(records, offs, channels, predicate, options, schema,
                                          f"{fs.path}: {what} at byte {ref.offset}")
    finally:
        os.close(fd)


def records_to_batches(records, offs, channels, predicate, options, schema, where):
    """The batches of the message records at ``offs`` in ``records`` (a
    decompressed chunk): frame rows, then gap rows."""
    if not len(offs):
        return
    u16, u32, u64 = _mcap.u_views(records)
    length = u64[offs + 1].astype(np.int64)
    short = np.nonzero(length < _mcap.MESSAGE_FIXED - _mcap.RECORD_HEADER)[0]
    if len(short):
        raise RecordingFormatError(f"{where}: message {short[0]}: record of {length[short[0]]} bytes, "
                                   f"shorter than a message's fixed fields")
    chan = u16[offs + 9]
    seq32 = u32[offs + 11].astype(np.int64)
    pub = np.minimum(u64[offs + 23], np.uint64(_INT64_MAX)).astype(np.int64)
    log_us = np.minimum(u64[offs + 15], np.uint64(_INT64_MAX)).astype(np.int64) // 1000 if options.record_time else None
    ids = np.array([chan[0]]) if (chan == chan[0]).all() else np.unique(chan)
    packet_ids = [int(c) for c in ids if channels.get(int(c), (None, None))[1] == KIND_PACKET
                  and predicate.topic_ok(channels[int(c)][0])]
    gap_ids = [int(c) for c in ids if channels.get(int(c), (None, None))[1] == KIND_GAP]
    if packet_ids:
        sel = np.isin(chan, packet_ids) if len(packet_ids) < len(ids) else np.ones(len(offs), bool)
        wall_us = pub // 1000
        sel &= predicate.wall_mask(wall_us)
        rows = np.nonzero(sel)[0]
        if len(rows):
            batch = _frame_batch(records, offs, rows, chan, seq32, wall_us, length, channels, predicate,
                                 options, schema, where, log_us)
            if batch is not None:
                yield batch
    if gap_ids and options.gaps:
        rows = np.nonzero(np.isin(chan, gap_ids))[0]
        batch = _gap_batch(records, offs[rows], length[rows], pub[rows], predicate, schema, where,
                           None if log_us is None else log_us[rows])
        if batch is not None:
            yield batch


def _frame_batch(records, offs, rows, chan, seq32, wall_us, length, channels, predicate, options,
                 schema, where, log_us=None):
    starts = offs[rows] + _mcap.MESSAGE_FIXED
    lengths = length[rows] - (_mcap.MESSAGE_FIXED - _mcap.RECORD_HEADER)
    fallback = seq32[rows]

    def where_row(i):
        return f"{where}, message {int(rows[i])}"

    def keep(seq, seq_have, wall, wall_have):
        seq[~seq_have] = fallback[~seq_have]  # no a0_transport_seq: the record's sequence
        return None if predicate.seq_lo is None and predicate.seq_hi is None and predicate.seq_in is None \
            else predicate.seq_mask(seq)

    dec = decode(records, starts, lengths, where_row, keep)
    if not len(dec.rows):
        return None
    topics = _topic_column(chan[rows][dec.rows], channels)
    return _assemble(schema, options, topics, dec.seq, (dec.mono, dec.mono_have), wall_us[rows][dec.rows], None,
                     dec.headers, dec.payload, gaps=None,
                     record_us=None if log_us is None else log_us[rows][dec.rows])


def _topic_column(chan, channels):
    if len(chan) and (chan == chan[0]).all():  # one channel per chunk, as a0py writes them
        return pa.array([channels[int(chan[0])][0]], pa.string()).take(pa.array(np.zeros(len(chan), np.int32)))
    ids, inverse = np.unique(chan, return_inverse=True)
    names = pa.array([channels[int(c)][0] for c in ids], pa.string())
    return names.take(pa.array(inverse.astype(np.int32)))


def _assemble(schema, options, topics, seq, mono, wall_us, wall_valid, headers, payload, gaps, record_us=None):
    n = len(seq)
    mono_vals, mono_have = mono
    cols = {
        "topic": topics,
        "seq": pa.array(seq, pa.int64()),
        "time_mono": pa.array(mono_vals, pa.int64(), mask=~mono_have),
        "time_wall": pa.array(wall_us, pa.int64(), mask=None if wall_valid is None else ~wall_valid).cast(TIME_TYPE),
        "headers": headers,
        "payload": payload,
    }
    if options.payload_type is not None and gaps is None:
        cols["payload"] = parse_json_payloads(payload, options.payload_type)
    if options.gaps:
        if gaps is None:
            cols["is_gap"] = pa.array(np.zeros(n, bool))
            cols["gap_first"] = pa.nulls(n, pa.int64())
            cols["gap_last"] = pa.nulls(n, pa.int64())
        else:
            cols["is_gap"] = pa.array(np.ones(n, bool))
            cols["gap_first"] = pa.array(gaps[0], pa.int64())
            cols["gap_last"] = pa.array(gaps[1], pa.int64())
    if "time_record" in schema.names:
        cols["time_record"] = (pa.nulls(n, TIME_TYPE) if record_us is None
                               else pa.array(record_us, pa.int64()).cast(TIME_TYPE))
    arrays = []
    for f in schema:
        arr = cols[f.name]
        if arr.type != f.type:
            arr = arr.cast(f.type)
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _gap_batch(records, offs, length, pub, predicate, schema, where, log_us=None):
    topics, firsts, lasts, walls, records_us = [], [], [], [], []
    mv = memoryview(records)
    logs = log_us.tolist() if log_us is not None else [None] * len(offs)
    for i, (o, ln, t, lg) in enumerate(zip(offs.tolist(), length.tolist(), pub.tolist(), logs)):
        body = mv[o + _mcap.MESSAGE_FIXED:o + _mcap.RECORD_HEADER + ln]
        try:
            g = json.loads(bytes(body))
            topic, first, last = str(g["topic"]), int(g["first"]), int(g["last"])
        except (ValueError, KeyError, TypeError) as e:
            raise RecordingFormatError(f"{where}, gap message {i}: not a gap record ({e})") from None
        wall = t // 1000
        if (predicate.topic_ok(topic) and predicate.seq_mask(np.array([first]))[0]
                and predicate.wall_mask(np.array([wall]))[0]):
            topics.append(topic)
            firsts.append(first)
            lasts.append(last)
            walls.append(wall)
            records_us.append(lg)
    if not topics:
        return None
    n = len(topics)
    opts = ReadOptions(gaps=True)
    return _assemble(schema, opts, pa.array(topics, pa.string()), np.array(firsts, np.int64),
                     (np.zeros(n, np.int64), np.zeros(n, bool)), np.array(walls, np.int64), None,
                     pa.nulls(n, HEADERS_TYPE), pa.nulls(n, schema.field("payload").type),
                     gaps=(firsts, lasts), record_us=None if log_us is None else np.array(records_us, np.int64))


def parse_json_payloads(payload, struct_type):
    """Payloads (binary) parsed as JSON objects into ``struct_type``; a payload
    that is not a JSON object, or does not fit the type, gives null."""
    import pyarrow.json as pajson

    n = len(payload)
    if n == 0:
        return pa.array([], struct_type)
    try:
        # A raw CR or LF can only be whitespace in JSON text, so blanking them
        # keeps every payload on its own line.
        flat = pc.replace_substring(pc.replace_substring(payload, b"\n", b" "), b"\r", b" ")
        if pc.any(pc.equal(pc.binary_length(flat), 0)).as_py():
            raise ValueError("empty payload")
        lines = pc.binary_join_element_wise(flat, pa.scalar(b"", pa.binary()), b"\n")
        buf = lines.buffers()[2].to_pybytes()[: pc.sum(pc.binary_length(lines)).as_py()]
        table = pajson.read_json(pa.BufferReader(buf), parse_options=pajson.ParseOptions(
            explicit_schema=pa.schema(list(struct_type)), unexpected_field_behavior="ignore"))
        if table.num_rows != n:
            raise ValueError("row count")
        return pa.StructArray.from_arrays([table.column(f.name).combine_chunks() for f in struct_type],
                                          fields=list(struct_type))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return _parse_json_rows(payload, struct_type)


def _parse_json_rows(payload, struct_type):
    out = []
    for p in payload.to_pylist():
        try:
            v = json.loads(p) if p is not None else None
        except ValueError:
            v = None
        if v is not None and not isinstance(v, dict):
            v = None
        if v is not None:
            try:
                pa.array([v], struct_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
                v = None
        out.append(v)
    return pa.array(out, struct_type)


__all__ = ["FRAME_COLUMNS", "GAP_COLUMNS", "ArenaSlice", "FileSlice", "Part", "Predicate", "ReadOptions",
           "expand_paths", "frame_schema", "plan"]

