"""``a0py bag info``: what a recording holds, in the habit of ``ros2 bag info``.

Complete segments are described from their summary and metadata alone (no
chunk is read); a segment cut short (no summary) or written by another tool
is read to count its frames, seqs and gaps.
"""

from __future__ import annotations

import datetime as _dt
import json
import os

from . import reader
from .format import (
    KIND_GAP,
    KIND_HEADERS,
    KIND_PACKET,
    KIND_TYPED,
    PACKET_ENCODING,
    PACKET_SCHEMA,
    SEGMENT_METADATA,
    channel_kind,
    headers_topic,
)
from .frames import recorded_seqs
from .reader import SHM_PREFIX, expand_paths


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
    """A dict describing the recordings ``spec`` (file, directory, glob):
    ``files`` (path, size, complete, cut short at, chunks, compression,
    messages, times), ``empty_files`` (the paths of files holding no record
    yet, skipped with a warning), ``topics`` (frames, first and last seq, gaps, frames
    lost, ``type`` and ``encoding``: the schema name and message encoding of
    a typed topic, ``a0py.Packet`` and ``a0py/packet`` for whole packets), and totals (``size``, ``messages``, ``start``/``end`` in ns,
    ``duration`` in s, ``gaps``, ``lost_frames``).

    Raises :class:`RecordingFormatError` for a damaged file and
    :class:`RecordingOptionError` when ``spec`` names nothing."""
    files = []
    empty = []  # files with no record yet (skipped with a warning)
    topics = {}
    start = end = None
    for path in expand_paths(spec):
        if path.startswith(SHM_PREFIX):
            continue
        layout = reader.read_layout_or_skip(path)
        if layout is None:
            empty.append(path)
            continue
        comp = sorted({c.compression or "none" for c in layout.chunks})
        if layout.statistics is not None:
            messages = layout.statistics.message_count
            f_start, f_end = layout.statistics.message_start_time, layout.statistics.message_end_time
        else:
            messages = sum(c.message_count or 0 for c in layout.chunks) if all(
                c.message_count is not None for c in layout.chunks) else None
            f_start = min((c.start_time for c in layout.chunks), default=None)
            f_end = max((c.end_time for c in layout.chunks), default=None)
        if not layout.has_summary or not _from_summary(layout, topics):
            _from_data(layout, topics)
        _note_types(layout, topics)
        files.append({
            "path": path, "size": layout.size, "complete": layout.has_summary,
            "cut_short_at": layout.truncated_at, "chunks": len(layout.chunks), "compression": comp,
            "messages": messages, "start": f_start, "end": f_end,
            "gap_channel": any(channel_kind(c) == KIND_GAP for c in layout.channels.values()),
        })
        if f_start is not None and (messages or layout.chunks):
            start = f_start if start is None else min(start, f_start)
            end = f_end if end is None else max(end, f_end)
    return {
        "files": files,
        "empty_files": empty,
        "topics": dict(sorted(topics.items())),
        "size": sum(f["size"] for f in files),
        "messages": sum(f["messages"] or 0 for f in files),
        "frames": sum(t["frames"] for t in topics.values()),
        "start": start,
        "end": end,
        "duration": (end - start) / 1e9 if start is not None else 0.0,
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


def format_bag_info(info):
    """The text ``a0py bag info`` prints for :func:`bag_info`'s dict."""
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
    row("Messages", f"{info['frames']} frames ({info['messages']} MCAP messages)")
    comps = sorted({c for f in info["files"] for c in f["compression"]})
    row("Chunks", f"{sum(f['chunks'] for f in info['files'])} ({', '.join(comps) or 'none'})")
    row("Gaps", f"{info['gaps']} ({info['lost_frames']} frames lost)")
    first = True
    for t, e in info["topics"].items():
        seqs = f"{e['first_seq']}..{e['last_seq']}" if e["first_seq"] is not None else "-"
        size = _size(e["bytes"]) if e["bytes"] is not None else "-"
        kind = e["type"] if e["encoding"] == PACKET_ENCODING else f"{e['type']} ({e['encoding']})"
        text = (f"Topic: {t} | Type: {kind} | Count: {e['frames']} | Seq: {seqs} | Size: {size} | "
                f"Gaps: {e['gaps']} ({e['lost_frames']} lost)")
        if first:
            row("Topic information", text)
            first = False
        else:
            lines.append(" " * label + text)
    if first:
        row("Topic information", "none")
    return "\n".join(lines)
