"""``a0py bag info``: what recordings hold, in the shape of ``ros2 bag info``,
for any MCAP file or rosbag2 bag (files, size, storage, duration, start, end,
messages, compression, and every channel with its type, serialization
format and count), and for a0py's own segments also each topic's seqs and
gaps.

Complete files are described from their summary (and a0py's segment
metadata) alone: no chunk is read. A file cut short (no summary), or one
whose summary gives no per-channel counts, is read to count its messages;
an a0py segment without its segment metadata is read to count its frames,
seqs and gaps.
"""

from __future__ import annotations

import datetime as _dt
import json
import os

import numpy as np

from ..errors import A0Error
from . import reader
from .errors import RecordingFormatError, RecordingOptionError
from .format import (
    KIND_FOREIGN,
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    PACKET_ENCODING,
    PACKET_SCHEMA,
    SEGMENT_METADATA,
    channel_kind,
    headers_topic,
    is_json_copy,
)
from .frames import recorded_seqs
from .message_fields import MessageFields
from .paths import SHM_PREFIX, expand_paths

# What a channel is, in bag info's words: a0py's kinds (format.channel_kind),
# a0py's JSON copy of a topic, and any other channel.
KIND_JSON_COPY = "json_copy"
A0PY_KINDS = (KIND_PACKET, KIND_TYPED, KIND_HEADERS, KIND_GAP, KIND_JSON_COPY)
RAW_NOTE = "read as raw bytes"
# The (message encoding, schema encoding) pairs a0py decodes into fields
# (a0py.recording.decode; JSON with any schema or none), used when that
# package cannot be asked.
_DECODED = {("protobuf", "protobuf"), ("cdr", "ros2msg"), ("cdr", "ros2idl"), ("ros1", "ros1msg")}


def bag_channel_kind(channel):
    """The kind of ``channel``: one of a0py's (``packet``, ``typed``,
    ``headers``, ``gap``, ``json_copy``) or ``foreign`` for any other
    channel (``format.channel_kind``, with ``format.is_json_copy`` told apart)."""
    if is_json_copy(channel):
        return KIND_JSON_COPY
    return channel_kind(channel)


def _decoder_for():
    """``a0py.recording.decode.decoder_for`` where that package is present
    (it decodes foreign encodings, and its extras may be missing), else None:
    then the table of what it decodes answers."""
    import importlib
    import importlib.util

    name = f"{__package__}.decode"
    try:
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.import_module(name).decoder_for
    except (ImportError, AttributeError):
        return None


def _decoding(channel, schema):
    """(decoded, note) for a foreign channel: whether a0py decodes its
    messages into fields, and otherwise why its bytes are read as they are."""
    name, enc, data = (schema.name, schema.encoding, schema.data) if schema is not None else ("", "", b"")
    decoder_for = _decoder_for()
    if decoder_for is not None:
        try:
            decoder_for(channel.topic, name, enc, data, channel.message_encoding)
            return True, None
        except RecordingFormatError as e:
            return False, f"{RAW_NOTE}: its schema does not parse ({e})"
        except RecordingOptionError as e:  # DecodeUnsupported: an encoding a0py does not decode
            package, extra = getattr(e, "package", None), getattr(e, "extra", None)
            if package:  # DecoderMissing: a0py decodes it, with a library not installed here
                return False, f"{RAW_NOTE}: decoding it needs {package}, pip install 'a0py[{extra}]'"
            return False, RAW_NOTE
        except A0Error:
            pass  # anything else (a decoder's extra not installed): the table below answers
    if channel.message_encoding == "json" or (channel.message_encoding, enc) in _DECODED:
        return True, None
    return False, RAW_NOTE


def _channel_counts(layout):
    """({channel id: messages}, messages, start, end) of a file: from its
    statistics or its chunks' message indexes when they say, else by reading
    its chunks (a file cut short, a writer that wrote neither)."""
    st = layout.statistics
    if st is not None and (st.channel_message_counts or st.message_count == 0):
        return (dict(st.channel_message_counts), st.message_count,
                st.message_start_time if st.message_count else None, st.message_end_time if st.message_count else None)
    if layout.chunks and not layout.regions and all(r.channels for r in layout.chunks):
        counts = {}
        for r in layout.chunks:
            for cid, _, n in r.channels:
                counts[cid] = counts.get(cid, 0) + n
        return (counts, sum(counts.values()), min(r.start_time for r in layout.chunks),
                max(r.end_time for r in layout.chunks))
    counts = {}
    start = end = None
    fd = os.open(layout.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for ref in [*layout.chunks, *layout.regions]:
            records = reader.read_chunk_records(fd, ref, layout.path, validate_crc=False)
            idx = reader.read_message_index(fd, ref, layout.path) if isinstance(ref, reader.ChunkRef) else None
            offs, _ = reader.message_offsets(records, idx, layout.path, ref.offset)
            if not len(offs):
                continue
            fields = MessageFields(records)
            ids, n = np.unique(fields.channel_id(offs), return_counts=True)
            for cid, k in zip(ids.tolist(), n.tolist()):
                counts[cid] = counts.get(cid, 0) + k
            logs = fields.log_time(offs)
            lo, hi = int(logs.min()), int(logs.max())
            start = lo if start is None else min(start, lo)
            end = hi if end is None else max(end, hi)
    finally:
        os.close(fd)
    return counts, sum(counts.values()), start, end


def _note_channels(layout, counts, channels):
    """Adds each channel of ``layout`` to ``channels`` ({(topic, type,
    format): entry}), with its count."""
    for cid, ch in sorted(layout.channels.items()):
        schema = layout.schemas.get(ch.schema_id) if ch.schema_id else None
        type_ = schema.name if schema is not None else None
        key = (ch.topic, type_, ch.message_encoding)
        entry = channels.get(key)
        if entry is None:
            kind = bag_channel_kind(ch)
            decoded, note = _decoding(ch, schema) if kind == KIND_FOREIGN else (None, None)
            entry = channels[key] = {
                "topic": ch.topic, "type": type_, "serialization_format": ch.message_encoding,
                "schema_encoding": schema.encoding if schema is not None else None, "count": 0,
                "kind": kind, "decoded": decoded, "note": note}
        entry["count"] += counts.get(cid, 0)


def _topic_entry():
    return {"frames": 0, "bytes": None, "first_seq": None, "last_seq": None, "gaps": 0, "lost_frames": 0,
            "type": PACKET_SCHEMA, "encoding": PACKET_ENCODING}


def _note_types(layout, topics):
    """A typed topic's schema name and message encoding, from its payload channel."""
    for ch in layout.channels.values():
        if channel_kind(ch) == KIND_TYPED:
            schema = layout.schemas.get(ch.schema_id)
            entry = topics.setdefault(ch.topic, _topic_entry())
            entry["type"] = schema.name if schema is not None else ""
            entry["encoding"] = ch.message_encoding


def _merge_seq(entry, first, last):
    if first is None:
        return
    entry["first_seq"] = first if entry["first_seq"] is None else min(entry["first_seq"], first)
    entry["last_seq"] = last if entry["last_seq"] is None else max(entry["last_seq"], last)


def _from_summary(layout, topics):
    """Counts from a complete a0py segment's statistics and metadata; False
    when they do not say enough (another writer), so the data must be read."""
    seg = layout.metadata_named(SEGMENT_METADATA)
    if not seg or layout.statistics is None:
        return False
    counts = layout.statistics.channel_message_counts
    for cid, ch in layout.channels.items():
        kind = channel_kind(ch)
        if kind not in (KIND_PACKET, KIND_HEADERS):
            continue
        entry = topics.setdefault(headers_topic(ch) if kind == KIND_HEADERS else ch.topic, _topic_entry())
        entry["frames"] += counts.get(cid, 0)
    for key, value in seg.items():
        if not key.startswith("topic."):
            continue
        t = key[len("topic."):]
        try:
            d = json.loads(value)
        except ValueError:
            return False
        entry = topics.setdefault(t, _topic_entry())
        if d.get("bytes") is not None:
            entry["bytes"] = (entry["bytes"] or 0) + int(d["bytes"])
        if d.get("frames"):
            _merge_seq(entry, d.get("first_seq"), d.get("last_seq"))
        entry["gaps"] += int(d.get("gaps", 0))
        entry["lost_frames"] += int(d.get("lost_frames", 0))
    return True


def _from_data(layout, topics):
    """Counts by reading a segment: frames, packet bytes and seqs per topic
    from its packets, gaps from its gap messages."""
    for t, seen in recorded_seqs(layout.path, layout=layout).items():
        entry = topics.setdefault(t, _topic_entry())
        entry["frames"] += seen.frames
        if seen.frames:
            entry["bytes"] = (entry["bytes"] or 0) + seen.bytes
        _merge_seq(entry, seen.first, seen.last)
        entry["gaps"] += seen.gaps
        entry["lost_frames"] += seen.lost


def bag_info(spec):
    """A dict describing the recordings ``spec`` (an MCAP file, a directory,
    a rosbag2 bag, a glob: :func:`a0py.recording.paths.expand_paths`):

    * ``files``: per file its path, size, profile and library (the writer),
      whether it has a summary (``complete``; else where it was cut short),
      chunks, chunk compressions, MCAP messages and log-time range;
    * ``empty_files``: the paths of files holding no record yet (skipped);
    * ``channels``: every channel, one entry per (topic, schema name, message
      encoding) across the files: ``topic``, ``type`` (the schema name, None
      for a channel without a schema), ``serialization_format`` (the message
      encoding), ``schema_encoding``, ``count``, ``kind`` (a0py's ``packet``,
      ``typed``, ``headers``, ``gap``, ``json_copy``, or ``foreign``) and, for
      foreign channels, ``decoded`` (whether a0py decodes its messages into
      fields) and ``note`` (why not: its bytes are read as they are);
    * ``topics``: a0py's topics (frames, bytes, first and last seq, gaps,
      frames lost, ``type`` and ``encoding``: the schema name and message
      encoding of a typed topic, ``a0py.Packet`` and ``a0py/packet`` for
      whole packets);
    * totals: ``size``, ``messages`` (MCAP messages), ``frames`` (a0py
      frames), ``foreign_messages``, ``start``/``end`` (log time, ns),
      ``duration`` (s), ``compression``, ``gaps``, ``lost_frames``.

    Raises :class:`RecordingFormatError` for a damaged file or a bag a0py
    cannot read and :class:`RecordingOptionError` when ``spec`` names nothing."""
    files = []
    empty = []  # files with no record yet (skipped with a warning)
    topics = {}
    channels = {}
    start = end = None
    for path in expand_paths(spec):
        if path.startswith(SHM_PREFIX):
            continue
        layout = reader.read_layout_or_skip(path)
        if layout is None:
            empty.append(path)
            continue
        comp = sorted({c.compression or "none" for c in layout.chunks})
        counts, messages, f_start, f_end = _channel_counts(layout)
        _note_channels(layout, counts, channels)
        kinds = {bag_channel_kind(c) for c in layout.channels.values()}
        if kinds & {KIND_PACKET, KIND_HEADERS, KIND_GAP} and (
                not layout.has_summary or not _from_summary(layout, topics)):
            _from_data(layout, topics)
        _note_types(layout, topics)
        files.append({
            "path": path, "size": layout.size, "profile": layout.profile, "library": layout.library,
            "complete": layout.has_summary, "cut_short_at": layout.truncated_at, "chunks": len(layout.chunks),
            "compression": comp, "messages": messages, "start": f_start, "end": f_end,
            "gap_channel": KIND_GAP in kinds,
        })
        if f_start is not None and messages:
            start = f_start if start is None else min(start, f_start)
            end = f_end if end is None else max(end, f_end)
    chans = sorted(channels.values(), key=lambda c: (c["kind"] == KIND_FOREIGN, c["topic"], c["type"] or "",
                                                      c["serialization_format"]))
    return {
        "files": files,
        "empty_files": empty,
        "channels": chans,
        "topics": dict(sorted(topics.items())),
        "size": sum(f["size"] for f in files),
        "messages": sum(f["messages"] or 0 for f in files),
        "frames": sum(t["frames"] for t in topics.values()),
        "foreign_messages": sum(c["count"] for c in chans if c["kind"] == KIND_FOREIGN),
        "start": start,
        "end": end,
        "duration": (end - start) / 1e9 if start is not None else 0.0,
        "compression": sorted({c for f in files for c in f["compression"]}),
        "gaps": sum(t["gaps"] for t in topics.values()),
        "lost_frames": sum(t["lost_frames"] for t in topics.values()),
    }


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024
    return f"{n} B"


def _when(ns):
    if ns is None:
        return "-"
    t = _dt.datetime.fromtimestamp(ns / 1e9, tz=_dt.UTC)
    return f"{t:%Y-%m-%d %H:%M:%S}.{(ns // 1_000_000) % 1000:03d} UTC ({ns // 1_000_000_000}.{ns % 1_000_000_000:09d})"


def _type_name(name):
    return name if name else "none"


def format_bag_info(info):
    """The text ``a0py bag info`` prints for :func:`bag_info`'s dict: the
    fields of ``ros2 bag info`` in its order, then a0py's gaps; under
    ``Topic information`` one line per a0py topic (with its seqs, size and
    gaps) and one per other channel, each ``Topic | Type | Count |
    Serialization Format``, a channel a0py reads only as bytes saying so."""
    label = 19
    lines = []

    def row(name, value):
        lines.append(f"{name + ':':<{label}}{value}")

    for i, f in enumerate(info["files"]):
        note = f" ({_size(f['size'])})"
        if not f["complete"]:
            at = f["cut_short_at"]
            note += (f", cut short at byte {at}: read up to its last whole chunk" if at is not None
                     else ", no summary: read by a scan")
        if i == 0:
            row("Files", os.path.basename(f["path"]) + note)
        else:
            lines.append(" " * label + os.path.basename(f["path"]) + note)
    if not info["files"]:
        row("Files", "none")
    empty = info.get("empty_files", ())
    if empty:
        row("Skipped", f"{len(empty)} file(s) with no record yet (empty or cut short in the header): "
            + ", ".join(os.path.basename(p) for p in empty))
    row("Bag size", _size(info["size"]))
    row("Storage id", "mcap")
    row("Duration", f"{info['duration']:.3f} s")
    row("Start", _when(info["start"]))
    row("End", _when(info["end"]))
    foreign = info.get("foreign_messages", 0)
    if info["topics"]:
        other = f" + {foreign} other messages" if foreign else ""
        row("Messages", f"{info['frames']} frames{other} ({info['messages']} MCAP messages)")
    else:
        row("Messages", str(info["messages"]))
    chunks = sum(f["chunks"] for f in info["files"])
    row("Compression", f"{', '.join(info.get('compression') or []) or 'none'} ({chunks} chunk{'' if chunks == 1 else 's'})")
    if info["topics"]:
        row("Gaps", f"{info['gaps']} ({info['lost_frames']} frames lost)")
    entries = []
    for t, e in info["topics"].items():
        seqs = f"{e['first_seq']}..{e['last_seq']}" if e["first_seq"] is not None else "-"
        size = _size(e["bytes"]) if e["bytes"] is not None else "-"
        entries.append(f"Topic: {t} | Type: {_type_name(e['type'])} | Count: {e['frames']} | "
                       f"Serialization Format: {e['encoding']} | Seq: {seqs} | Size: {size} | "
                       f"Gaps: {e['gaps']} ({e['lost_frames']} lost)")
    for c in info.get("channels", ()):
        if c["kind"] != KIND_FOREIGN:
            continue
        note = f" ({c['note']})" if c.get("note") else ""
        entries.append(f"Topic: {c['topic']} | Type: {_type_name(c['type'])} | Count: {c['count']} | "
                       f"Serialization Format: {c['serialization_format'] or 'none'}{note}")
    row("Topic information", entries[0] if entries else "none")
    lines += [" " * label + e for e in entries[1:]]
    return "\n".join(lines)
