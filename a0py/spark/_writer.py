"""MCAP, the writing side: one segment of a recording.

The structure (header, schemas, channels, chunk records, statistics, chunk
and metadata indexes, summary offsets, footer, summary CRC) is written with
the ``mcap`` package's record classes, so Foxglove and the MCAP tools read
the result. The hot path, turning a batch of packets into message records,
is done in bulk here: the package's per-message writer adds only about
0.29 M messages/s, and a recorder must keep up with a publisher.

Layout choices (docs/spark.md "File layout"):

* Each chunk holds the messages of one channel (one topic), so a reader
  skips a topic by skipping whole chunks, and a chunk decodes into columns
  of one topic.
* Schema and channel records are written outside chunks, before the first
  chunk that uses them, so a segment cut short is planned by a scan that
  never decompresses a chunk.
* A chunk is closed when it reaches ``chunk_bytes`` or has been open
  ``chunk_seconds``; each closed chunk is handed to the OS at once, so a
  SIGKILLed recorder loses at most the chunks still open.
* ``log_time`` is the receive time, ``publish_time`` the packet's
  ``a0_time_wall`` (the receive time when it has none), ``sequence`` the
  transport seq modulo 2**32 (the packet's ``a0_transport_seq`` header keeps
  it whole).
* At close, metadata ``a0py.segment`` describes the segment (topics, seq and
  time ranges, host, gaps) and ``a0py.chunks`` gives each chunk's seq and
  publish-time range per channel, which the Spark source uses to skip chunks.

Invariant: the bytes of the file up to the end of the last written chunk
(and its message index) always form a valid MCAP data section.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
import zlib

import numpy as np
from mcap.data_stream import RecordBuilder
from mcap.opcode import Opcode
from mcap.records import (
    Channel,
    Chunk,
    ChunkIndex,
    DataEnd,
    Footer,
    Header,
    Metadata,
    MetadataIndex,
    Schema,
    Statistics,
    SummaryOffset,
)

from . import _bulk
from ._mcap import MAGIC, OP_MESSAGE_INDEX
from ._packets import wall_times
from .errors import RecordingOptionError

PACKET_ENCODING = "a0py/packet"
PACKET_SCHEMA = "a0py.Packet"
PACKET_SCHEMA_ENCODING = "a0py/packet-layout"
PACKET_SCHEMA_DATA = (
    b"a0py packet, version 1, little-endian: magic u32 'A0PK', version u16, flags u16, id [16]u8, "
    b"header_count u32, reserved u32, payload_off u64, payload_size u64; then header_count entries "
    b"(key_off u32, key_len u32, val_off u32, val_len u32, from the packet start); the strings, "
    b"each followed by NUL; zero padding to payload_off (a multiple of 16); the payload. "
    b"See a0py docs/pubsub.md."
)
GAP_TOPIC = "/a0py/gaps"
GAP_SCHEMA = "a0py.Gap"
GAP_SCHEMA_DATA = json.dumps({
    "title": "a0py.Gap",
    "description": "Frames of a topic evicted before the recorder read them.",
    "type": "object",
    "properties": {
        "topic": {"type": "string"},
        "first": {"type": "integer", "description": "first missing transport seq"},
        "last": {"type": "integer", "description": "last missing transport seq"},
    },
    "required": ["topic", "first", "last"],
}).encode()
JSON_TOPIC_PREFIX = "/a0py/json/"
COMPRESSIONS = ("zstd", "lz4", "none")
LIBRARY = "a0py"

_MSG_FIXED = 31  # opcode, length, channel, sequence, log time, publish time
_NO_SEQS = np.zeros(0, np.int64)
_INDEX_ENTRY = np.dtype([("log_time", "<u8"), ("offset", "<u8")])


def _u64_field(records):
    """A writable view of ``records`` (a bytearray) whose element i is the u64 at byte i."""
    return np.ndarray(shape=(len(records) - 7,), dtype="<u8", buffer=records, strides=(1,))


def _compressor(compression, level):
    if compression == "zstd":
        import zstandard

        return "zstd", zstandard.ZstdCompressor(level=level if level is not None else -1).compress
    if compression == "lz4":
        import lz4.frame

        lvl = level if level is not None else 0
        return "lz4", lambda data: lz4.frame.compress(data, compression_level=lvl)
    if compression == "none":
        return "", None
    raise RecordingOptionError(f"compression {compression!r}: use one of {', '.join(COMPRESSIONS)}")


class _OpenChunk:
    """The message records of one channel waiting to become a chunk."""

    __slots__ = ("count", "log_hi", "log_lo", "log_times", "offsets", "opened", "pub_times", "records",
                 "seq_hi", "seq_lo", "unresolved")

    def __init__(self):
        self.records = bytearray()
        self.offsets = []
        self.log_times = []
        self.pub_times = []
        self.unresolved = []  # per run: offsets of records whose packets have no standard block
        self.count = 0
        self.opened = time.monotonic()
        self.log_lo = self.seq_lo = None
        self.log_hi = self.seq_hi = None

    def note(self, seqs, log_time):
        slo, shi = int(seqs.min()), int(seqs.max())
        if self.count == 0:
            self.log_lo, self.log_hi, self.seq_lo, self.seq_hi = log_time, log_time, slo, shi
        else:
            self.log_lo, self.log_hi = min(self.log_lo, log_time), max(self.log_hi, log_time)
            self.seq_lo, self.seq_hi = min(self.seq_lo, slo), max(self.seq_hi, shi)


class SegmentWriter:
    """Writes one MCAP segment of a0py packets.

    ``compression`` is ``zstd`` (level -1 by default: a quarter of level 1's
    CPU for files about 5 % larger), ``lz4`` or ``none``. Channels are added
    with :meth:`add_topic` (a0py packets), :meth:`add_json_topic` (a JSON
    copy of the payloads for Foxglove) and the gap channel on first use.

    Raises :class:`RecordingOptionError` for a bad option and ``OSError`` when
    the file cannot be created."""

    def __init__(self, path, *, compression="zstd", level=None, chunk_bytes=4 << 20,
                 chunk_seconds=1.0, message_index=True, metadata=None):
        self.compression, self._compress = _compressor(compression, level)
        if chunk_bytes < 1024:
            raise RecordingOptionError(f"chunk_bytes {chunk_bytes}: use at least 1024")
        self.path = os.fspath(path)
        self.chunk_bytes = int(chunk_bytes)
        self.chunk_seconds = float(chunk_seconds)
        self.message_index = bool(message_index)
        self._f = open(self.path, "xb")  # noqa: SIM115 - closed by close()
        self._pos = 0
        self._schemas = {}
        self._channels = {}  # id -> mcap Channel
        self._topic_channel = {}  # topic -> packet channel id
        self._json_channel = {}
        self._open = {}  # channel id -> _OpenChunk
        self._chunk_indexes = []
        self._chunk_meta = {}  # chunk offset -> "ch:seq_lo:seq_hi:pub_lo:pub_hi"
        self._metadata_indexes = []
        self._counts = {}  # channel id -> messages
        self._bytes = {}  # channel id -> packet bytes
        self._log_lo = None
        self._log_hi = None
        self._topic_seq = {}  # topic -> [first, last]
        self._topic_time = {}  # topic -> [first log, last log]
        self._gaps = {}  # topic -> [count, frames]
        self._metadata_count = 0
        self.closed = False
        self._extra_metadata = dict(metadata or {})
        self._write(MAGIC)
        rb = RecordBuilder()
        Header(profile="", library=LIBRARY).write(rb)
        self._write(rb.end())
        self._packet_schema = self._add_schema(PACKET_SCHEMA, PACKET_SCHEMA_ENCODING, PACKET_SCHEMA_DATA)
        self._gap_channel = None
        self._f.flush()

    # -- structure -------------------------------------------------------

    def _write(self, data):
        self._f.write(data)
        self._pos += len(data)

    def _add_schema(self, name, encoding, data):
        sid = len(self._schemas) + 1
        s = Schema(id=sid, name=name, encoding=encoding, data=data)
        self._schemas[sid] = s
        rb = RecordBuilder()
        s.write(rb)
        self._write(rb.end())
        return sid

    def _add_channel(self, topic, encoding, schema_id, metadata):
        if len(self._channels) >= 0xFFFF:
            raise RecordingOptionError(f"{self.path}: more than 65535 channels in one segment")
        cid = len(self._channels) + 1
        c = Channel(id=cid, schema_id=schema_id, topic=topic, message_encoding=encoding,
                    metadata=dict(metadata))
        self._channels[cid] = c
        self._counts[cid] = 0
        self._bytes[cid] = 0
        rb = RecordBuilder()
        c.write(rb)
        self._write(rb.end())
        return cid

    def add_topic(self, topic):
        """The channel id of a0py topic ``topic`` (created on first use)."""
        cid = self._topic_channel.get(topic)
        if cid is None:
            cid = self._add_channel(topic, PACKET_ENCODING, self._packet_schema, {"a0py.topic": topic})
            self._topic_channel[topic] = cid
        return cid

    def add_json_topic(self, topic, schema=None):
        """The channel id of the JSON copy of ``topic``'s payloads (topic
        ``/a0py/json/TOPIC``, encoding ``json``, a ``jsonschema`` schema,
        ``{"type": "object"}`` unless given)."""
        cid = self._json_channel.get(topic)
        if cid is None:
            data = json.dumps(schema or {"type": "object"}).encode()
            sid = self._add_schema(f"a0py.json.{topic}", "jsonschema", data)
            cid = self._add_channel(JSON_TOPIC_PREFIX + topic, "json", sid, {"a0py.topic": topic})
            self._json_channel[topic] = cid
        return cid

    # -- messages --------------------------------------------------------

    def write_frames(self, topic, frames, log_time, seqs=None):
        """Appends ``frames`` of ``topic`` received at ``log_time`` (ns): a
        list of ``(seq, bytes)`` as ``Transport.read_many`` gives them, or a
        list of bytes with their transport ``seqs``. Each frame becomes one
        message, byte for byte; its publish time is the packet's
        ``a0_time_wall`` (the receive time for a frame without one). Returns
        (seqs as an int64 array, total frame bytes)."""
        if not frames:
            return np.zeros(0, np.int64), 0
        cid = self.add_topic(topic)
        if not isinstance(frames, list):
            frames = list(frames)
        given = _NO_SEQS if seqs is None else np.ascontiguousarray(seqs, np.int64)
        out_seqs, total = self._append(cid, frames, given, int(log_time), None)
        lo, hi = int(out_seqs.min()), int(out_seqs.max())
        span = self._topic_seq.get(topic)
        if span is None:
            self._topic_seq[topic] = [lo, hi]
        else:
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
        tspan = self._topic_time.get(topic)
        if tspan is None:
            self._topic_time[topic] = [int(log_time), int(log_time)]
        else:
            tspan[0], tspan[1] = min(tspan[0], int(log_time)), max(tspan[1], int(log_time))
        return out_seqs, total

    def write_packets(self, topic, seqs, frames, log_time):
        """:meth:`write_frames` with the seqs first (frames a list of bytes)."""
        return self.write_frames(topic, [bytes(f) for f in frames], log_time, seqs)

    def write_json(self, topic, seqs, payloads, log_time, publish_times):
        """Appends JSON payloads (bytes) to ``topic``'s JSON channel."""
        if not len(payloads):
            return
        cid = self.add_json_topic(topic)
        self._append(cid, list(payloads), np.ascontiguousarray(seqs, np.int64), int(log_time),
                     np.asarray(publish_times, np.int64))

    def write_gap(self, topic, first, last, log_time):
        """Records that frames ``first..last`` of ``topic`` were lost (evicted
        before they were read)."""
        if self._gap_channel is None:
            sid = self._add_schema(GAP_SCHEMA, "jsonschema", GAP_SCHEMA_DATA)
            self._gap_channel = self._add_channel(GAP_TOPIC, "json", sid, {})
        body = json.dumps({"topic": topic, "first": int(first), "last": int(last)}).encode()
        self._append(self._gap_channel, [body], np.array([first], np.int64), int(log_time),
                     np.array([log_time], np.int64))
        g = self._gaps.setdefault(topic, [0, 0])
        g[0] += 1
        g[1] += int(last) - int(first) + 1

    def _append(self, cid, frames, seqs, log_time, publish_times):
        """Appends records to channel ``cid``'s open chunk, closing chunks as
        they reach ``chunk_bytes``; returns (seqs, frame bytes)."""
        all_seqs = []
        total = 0
        done = 0
        while done < len(frames):
            ch = self._open.get(cid)
            if ch is None:
                ch = self._open[cid] = _OpenChunk()
            rest = frames if done == 0 else frames[done:]
            rest_seqs = seqs if (done == 0 or not len(seqs)) else seqs[done:]
            taken, got_seqs, offs, pubs, from_std, nbytes = _bulk.append_records(
                ch.records, rest, rest_seqs, cid, log_time, self.chunk_bytes)
            if publish_times is not None:
                pubs = np.asarray(publish_times[done:done + taken], np.int64)
                _u64_field(ch.records)[offs + 23] = pubs
            elif not from_std.all():
                ch.unresolved.append(offs[from_std == 0])
            ch.offsets.append(offs)
            ch.log_times.append(np.full(taken, log_time, np.int64))
            ch.pub_times.append(pubs)
            ch.note(got_seqs, log_time)
            ch.count += taken
            self._counts[cid] += taken
            self._bytes[cid] += nbytes
            total += nbytes
            all_seqs.append(got_seqs)
            done += taken
            self._log_lo = log_time if self._log_lo is None else min(self._log_lo, log_time)
            self._log_hi = log_time if self._log_hi is None else max(self._log_hi, log_time)
            if len(ch.records) >= self.chunk_bytes:
                self._close_chunk(cid)
        return (all_seqs[0] if len(all_seqs) == 1 else np.concatenate(all_seqs)), total

    def flush_due(self, now=None):
        """Closes the chunks open longer than ``chunk_seconds``; returns how many."""
        now = time.monotonic() if now is None else now
        due = [cid for cid, ch in self._open.items() if now - ch.opened >= self.chunk_seconds]
        for cid in due:
            self._close_chunk(cid)
        return len(due)

    def flush(self):
        """Closes every open chunk and hands the file's bytes to the OS."""
        for cid in list(self._open):
            self._close_chunk(cid)
        self._f.flush()

    def _close_chunk(self, cid):
        ch = self._open.pop(cid)
        records = ch.records
        offsets = np.concatenate(ch.offsets)
        pub = np.concatenate(ch.pub_times)
        if ch.unresolved:
            # Packets without a standard block: their a0_time_wall header, if any.
            at = np.concatenate(ch.unresolved)
            u64 = _u64_field(records)
            lengths = u64[at + 1].astype(np.int64) - (_MSG_FIXED - 9)
            wall, have = wall_times(records, at + _MSG_FIXED, lengths)
            found = at[have]
            u64[found + 23] = wall[have]
            pub[np.searchsorted(offsets, found)] = wall[have]
        crc = zlib.crc32(records)
        data = self._compress(records) if self._compress else records
        offset = self._pos
        rb = RecordBuilder()
        Chunk(compression=self.compression, data=data, message_start_time=ch.log_lo,
              message_end_time=ch.log_hi, uncompressed_crc=crc, uncompressed_size=len(records)).write(rb)
        chunk_rec = rb.end()
        self._write(chunk_rec)
        index_offsets = {}
        index_start = self._pos
        if self.message_index:
            entries = np.empty(ch.count, _INDEX_ENTRY)
            entries["log_time"] = np.concatenate(ch.log_times)
            entries["offset"] = offsets
            body = entries.tobytes()
            index_offsets[cid] = self._pos
            self._write(struct.pack("<BQHI", OP_MESSAGE_INDEX, 6 + len(body), cid, len(body)))
            self._write(body)
        self._chunk_indexes.append(ChunkIndex(
            message_start_time=ch.log_lo, message_end_time=ch.log_hi, chunk_start_offset=offset,
            chunk_length=len(chunk_rec), message_index_offsets=index_offsets,
            message_index_length=self._pos - index_start, compression=self.compression,
            compressed_size=len(data), uncompressed_size=len(records)))
        self._chunk_meta[str(offset)] = f"{cid}:{ch.seq_lo}:{ch.seq_hi}:{int(pub.min())}:{int(pub.max())}"
        self._f.flush()

    @property
    def size(self):
        """Bytes written so far (open chunks not counted)."""
        return self._pos

    @property
    def pending_bytes(self):
        return sum(len(ch.records) for ch in self._open.values())

    # -- closing ---------------------------------------------------------

    def segment_metadata(self):
        topics = sorted(self._topic_channel)
        meta = {
            "format": "a0py recording 1",
            "host": socket.gethostname(),
            "topics": json.dumps(topics),
            "start_time": str(self._log_lo or 0),
            "end_time": str(self._log_hi or 0),
        }
        for t in topics:
            cid = self._topic_channel[t]
            first, last = self._topic_seq.get(t, (0, 0))
            meta[f"topic.{t}"] = json.dumps({
                "frames": self._counts[cid], "bytes": self._bytes[cid], "first_seq": first, "last_seq": last,
                "start_time": self._topic_time.get(t, (0, 0))[0], "end_time": self._topic_time.get(t, (0, 0))[1],
                "gaps": self._gaps.get(t, [0, 0])[0], "lost_frames": self._gaps.get(t, [0, 0])[1]})
        for t, (count, lost) in self._gaps.items():
            if t not in self._topic_channel:
                meta[f"topic.{t}"] = json.dumps({"frames": 0, "bytes": 0, "gaps": count, "lost_frames": lost})
        meta.update(self._extra_metadata)
        return meta

    def _write_metadata(self, name, entries):
        offset = self._pos
        rb = RecordBuilder()
        Metadata(name=name, metadata=entries).write(rb)
        data = rb.end()
        self._write(data)
        self._metadata_indexes.append(MetadataIndex(offset=offset, length=len(data), name=name))
        self._metadata_count += 1

    def close(self):
        """Closes the open chunks, writes the metadata, the summary and the
        footer, and closes the file. Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            for cid in list(self._open):
                self._close_chunk(cid)
            self._write_metadata("a0py.segment", self.segment_metadata())
            self._write_metadata("a0py.chunks", self._chunk_meta)
            rb = RecordBuilder()
            DataEnd(data_section_crc=0).write(rb)
            self._write(rb.end())
            self._write_summary()
        finally:
            self._f.close()

    def _write_summary(self):
        summary_start = self._pos
        sb = RecordBuilder()
        offsets = []

        def group(opcode, records):
            start = sb.count
            for r in records:
                r.write(sb)
            if sb.count > start:
                offsets.append(SummaryOffset(group_opcode=opcode, group_start=summary_start + start,
                                             group_length=sb.count - start))

        group(Opcode.SCHEMA, self._schemas.values())
        group(Opcode.CHANNEL, self._channels.values())
        group(Opcode.STATISTICS, [Statistics(
            message_count=sum(self._counts.values()), schema_count=len(self._schemas),
            channel_count=len(self._channels), attachment_count=0, metadata_count=self._metadata_count,
            chunk_count=len(self._chunk_indexes), message_start_time=self._log_lo or 0,
            message_end_time=self._log_hi or 0,
            channel_message_counts={c: n for c, n in self._counts.items() if n})])
        group(Opcode.CHUNK_INDEX, self._chunk_indexes)
        group(Opcode.METADATA_INDEX, self._metadata_indexes)
        summary_offset_start = summary_start + sb.count
        for o in offsets:
            o.write(sb)
        summary = sb.end()
        crc = zlib.crc32(summary)
        crc = zlib.crc32(struct.pack("<BQQQ", Opcode.FOOTER, 20, summary_start, summary_offset_start), crc)
        self._write(summary)
        rb = RecordBuilder()
        Footer(summary_start=summary_start, summary_offset_start=summary_offset_start, summary_crc=crc).write(rb)
        self._write(rb.end())
        self._write(MAGIC)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
