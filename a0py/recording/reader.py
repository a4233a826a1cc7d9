"""MCAP, the reading side: the layout of a file (from its summary, or from a
scan when it has none), its chunks, and the offsets of the message records
inside a decompressed chunk. Any MCAP file is planned; a0py's own segments
are also read with the chunk ranges of their ``a0py.chunks`` metadata.
A chunk's records are decompressed by :mod:`.decompress`; what a path spec
names is :mod:`.paths`' (its two names are also importable from here).

The summary's records (schemas, channels, chunk indexes, statistics,
metadata) are parsed with the ``mcap`` package's record classes, over a
stream that checks every field against the record's length; only what
those classes do not cover is read by hand, through the record layouts of
:mod:`.format` (the footer, record headers, the fixed fields of a chunk and
of a message index, message offsets in bulk).

Invariants:

* Nothing read from a file is trusted. Every length and offset is compared
  with the bytes actually there before it is used, so a damaged or hostile
  file is a :class:`RecordingFormatError` naming the file, the byte offset
  and the field, never an exception from deep inside a library, a huge
  allocation or an endless loop.
* A file with a valid footer and summary is planned from the summary alone:
  no chunk is read to learn its byte range, time range, channels, compression
  or message count.
* A file without one (a recorder SIGKILLed before closing it) is planned by a
  linear scan of the record headers that skips chunk bodies, and is read up to
  its last whole chunk; the partial record at its end is ignored.
* The message offsets a chunk's message indexes give are verified to tile the
  chunk with the records between them; where they do not (an incomplete index,
  or none), the chunk's records are walked one by one instead.
"""

from __future__ import annotations

import logging
import os
import zlib
from dataclasses import dataclass, field

import numpy as np
from mcap.data_stream import ReadDataStream
from mcap.opcode import Opcode
from mcap.records import Channel, ChunkIndex, Header, Metadata, MetadataIndex, Schema, Statistics

from .decompress import check_usize, decompress
from .errors import EmptyRecordingError, RecordingFormatError, fail_at
from .format import (
    CHUNK_INDEX_LAYOUT,
    CHUNK_LAYOUT,
    FOOTER_BODY,
    FOOTER_LAYOUT,
    FOOTER_RECORD,
    MAGIC,
    MESSAGE_FIXED,
    MESSAGE_INDEX_ENTRY,
    MESSAGE_INDEX_FIXED,
    MESSAGE_INDEX_LAYOUT,
    RECORD_HEAD,
    RECORD_HEADER,
    RECORD_LENGTH_AT,
    STATISTICS_LAYOUT,
)

# What a path spec names (paths.py), for the readers that take it from here.
from .paths import SHM_PREFIX, expand_paths  # noqa: F401

_log = logging.getLogger("a0py.recording")

# A chunk record's fields before its records, with a compression name of up to 64 bytes.
_CHUNK_HEAD_MAX = CHUNK_LAYOUT.head.size - RECORD_HEADER + 64 + CHUNK_LAYOUT.length_prefix("records").size
# The largest header record read (two strings, the profile and the library
# name): a longer one is damage, not a file cut short in its header.
_HEADER_MAX = 1 << 20


@dataclass(frozen=True)
class ChunkRef:
    """Where a chunk is and what the index says of it (all offsets absolute)."""

    offset: int  # of the chunk record (its opcode)
    length: int  # of the whole record, header included
    start_time: int  # log_time range, ns
    end_time: int
    compression: str
    compressed_size: int
    uncompressed_size: int
    index_offset: int = 0  # the message index records after the chunk
    index_length: int = 0
    # channel id -> (offset of its message index record, message count); empty
    # when the writer wrote no message index.
    channels: tuple[tuple[int, int, int], ...] = ()

    @property
    def message_count(self):
        """Messages in the chunk per its message indexes, or None without them."""
        if not self.channels:
            return None
        return sum(c[2] for c in self.channels)

    @property
    def channel_ids(self):
        return frozenset(c[0] for c in self.channels) if self.channels else None


@dataclass(frozen=True)
class Region:
    """Message records lying outside any chunk (an unchunked file), read as an
    uncompressed chunk would be."""

    offset: int
    length: int


@dataclass
class Layout:
    """What a file holds, without its message data."""

    path: str
    size: int
    profile: str = ""
    library: str = ""
    schemas: dict[int, Schema] = field(default_factory=dict)  # mcap.records classes
    channels: dict[int, Channel] = field(default_factory=dict)
    chunks: list[ChunkRef] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    metadata: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    statistics: Statistics | None = None
    has_summary: bool = False  # planned from the summary (else from a scan)
    truncated_at: int | None = None  # scan stopped at a partial record here
    attachments: int = 0

    def metadata_named(self, name):
        """The merged entries of every metadata record called ``name``."""
        out = {}
        for n, entries in self.metadata:
            if n == name:
                out.update(entries)
        return out


class _RecordStream(ReadDataStream):
    """The ``mcap`` package's read stream, over one record's body (bytes) and
    checked: a field that would run past the body is a
    :class:`RecordingFormatError` naming the file, the byte offset and the
    record, where the package's own stream would return short bytes. It
    slices the body itself (no file object), so parsing a summary with the
    package's record classes costs about what a hand-written parser does."""

    def __init__(self, body, path, base, what):  # the parent's stream is not used
        self.body = bytes(body)
        self.pos = 0
        self.path = path
        self.base = base  # file offset of body[0]
        self.what = what

    @property
    def count(self):
        return self.pos

    def read(self, length):
        start = self.pos
        end = start + length
        if length < 0 or end > len(self.body):
            fail_at(self.path, self.base + start,
                  f"{self.what}: a field of {length} bytes runs past the end of the record "
                  f"({len(self.body) - start} bytes left)")
        self.pos = end
        return self.body[start:end]

    def read_prefixed_string(self):
        at = self.pos
        try:
            return super().read_prefixed_string()
        except UnicodeDecodeError:
            fail_at(self.path, self.base + at, f"{self.what}: a string field is not UTF-8")


def _parse(record, body, path, base, what, map_field=None):
    """``record.read`` (an ``mcap.records`` class) over ``body``, checked.
    ``map_field``: (record layout, field) of a map of fixed-size entries
    whose byte length must then be a multiple of its entry size (else the
    class would read into the next field)."""
    if map_field is not None:
        layout, name = map_field
        at, prefix, entry = layout.body_offset(name), layout.length_prefix(name), layout.entry_size(name)
        if len(body) >= at + prefix.size:
            n = prefix.unpack_from(body, at)[0]
            if n % entry:
                fail_at(path, base + at, f"{what}: a map of {n} bytes, not a multiple of its {entry}-byte entries")
    return record.read(_RecordStream(body, path, base, what))


def parse_schema(body, path, base):
    """The ``mcap.records.Schema`` of a schema record's body at file offset ``base``."""
    return _parse(Schema, body, path, base, "schema record")


def parse_channel(body, path, base):
    """The ``mcap.records.Channel`` of a channel record's body at file offset ``base``."""
    return _parse(Channel, body, path, base, "channel record")


def parse_metadata(body, path, base):
    """(name, entries) of a metadata record's body."""
    m = _parse(Metadata, body, path, base, "metadata record")
    return m.name, m.metadata


def _channels_of_index(idx, idx_off, idx_len, path):
    """(channel, record offset, message count) from a chunk index's map of
    message index offsets: each record runs to the next one (or to the end of
    the chunk's index area), so counts need no read."""
    items = sorted((o, c) for c, o in idx)
    stop = idx_off + idx_len
    out = []
    for i, (o, c) in enumerate(items):
        nxt = items[i + 1][0] if i + 1 < len(items) else stop
        n = nxt - o - MESSAGE_INDEX_FIXED
        if o < idx_off or nxt > stop or n < 0 or n % MESSAGE_INDEX_ENTRY:
            fail_at(path, o, f"message index of channel {c}: offset or length outside the chunk's index area "
                  f"[{idx_off}, {stop})")
        out.append((c, o, n // MESSAGE_INDEX_ENTRY))
    return tuple(sorted(out))


def _pread(fd, n, offset):
    data = os.pread(fd, n, offset)
    while len(data) < n:
        more = os.pread(fd, n - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


def read_layout(path):
    """The :class:`Layout` of the MCAP file at ``path``: from its summary when
    it has a valid one, else from a scan up to the last whole record.

    Raises :class:`RecordingFormatError` for a file that is empty, not MCAP,
    or damaged (bad lengths, a summary whose CRC does not match), and
    ``FileNotFoundError`` / ``OSError`` as ``open`` does."""
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise EmptyRecordingError(f"{path}: the file is empty (0 bytes): no record yet")
        head = _pread(fd, len(MAGIC) + RECORD_HEADER, 0)
        if head[:len(MAGIC)] != MAGIC:
            if size < len(MAGIC) and MAGIC.startswith(head):
                raise EmptyRecordingError(f"{path}: {size} bytes, part of the MCAP magic: no record yet")
            raise RecordingFormatError(
                f"{path}: does not start with the MCAP magic (found {head[:8]!r}): not an MCAP recording")
        _check_started(head, size, path)
        lay = Layout(path=path, size=size)
        if not _read_summary(fd, lay):
            _scan(fd, lay)
        return lay
    finally:
        os.close(fd)


def read_layout_or_skip(path):
    """:func:`read_layout`, or None with a warning logged for a file that
    holds no record yet (:class:`EmptyRecordingError`: what a recorder killed
    before flushing a segment's header leaves): the readers of a set of
    recordings skip such a file and count it."""
    try:
        return read_layout(path)
    except EmptyRecordingError as e:
        _log.warning("skipping %s", e)
        return None


def _check_started(head, size, path):
    """Raises :class:`EmptyRecordingError` when the file holds the magic and
    at most part of its header record (``head``: its first 17 bytes)."""
    rest = head[len(MAGIC):]
    if not rest:
        raise EmptyRecordingError(f"{path}: the MCAP magic alone ({size} bytes): no record yet")
    if rest[0] != Opcode.HEADER:
        return  # not a0py's layout (the header comes first): _read_header names it
    if len(rest) < RECORD_HEADER:
        raise EmptyRecordingError(f"{path}: cut short in its header record ({size} bytes): no record yet")
    n = RECORD_HEAD.unpack_from(rest, 0)[1]
    if n > _HEADER_MAX:
        fail_at(path, len(MAGIC) + 1, f"header record: body length {n} (a header is a profile and a library "
              f"name, at most {_HEADER_MAX} bytes here)")
    if n > size - len(MAGIC) - RECORD_HEADER:
        raise EmptyRecordingError(f"{path}: at byte {len(MAGIC)}: cut short in its header record (it claims "
                                  f"{n} bytes, the file has {size}): no record yet")


_TIME_MAX = (1 << 63) - 1  # times are int64 nanoseconds everywhere they are used


def _check_times(path, offset, what, start, end):
    """A record's time range: int64 nanoseconds, start <= end."""
    if start > _TIME_MAX or end > _TIME_MAX:
        fail_at(path, offset, f"{what}: time {max(start, end)} ns is past 2^63 - 1 (year 2262): the record is damaged")
    if start > end:
        fail_at(path, offset, f"{what}: start time {start} ns after end time {end} ns: the record is damaged")


def _read_summary(fd, lay):
    """Fills ``lay`` from the footer and summary; False when the file has no
    usable footer (cut short) or no summary or no chunk index group."""
    path, size = lay.path, lay.size
    if size < len(MAGIC) * 2 + FOOTER_RECORD:
        return False
    tail = _pread(fd, FOOTER_RECORD + len(MAGIC), size - FOOTER_RECORD - len(MAGIC))
    if tail[-len(MAGIC):] != MAGIC:
        return False
    op, length, summary_start, _summary_offset_start, crc = FOOTER_LAYOUT.head.unpack_from(tail, 0)
    footer_off = size - FOOTER_RECORD - len(MAGIC)
    if op != Opcode.FOOTER or length != FOOTER_BODY:
        fail_at(path, footer_off, f"footer record expected before the closing magic (opcode {op:#x}, length {length})")
    if summary_start == 0:
        return False
    if not len(MAGIC) <= summary_start <= footer_off:
        fail_at(path, footer_off, f"footer: summary_start {summary_start} outside the file's records "
              f"[{len(MAGIC)}, {footer_off}]")
    summary = _pread(fd, footer_off - summary_start, summary_start)
    if crc:
        got = zlib.crc32(tail[:FOOTER_LAYOUT.offset("summary_crc")], zlib.crc32(summary))
        if got != crc:
            fail_at(path, summary_start, f"summary CRC mismatch (footer says {crc:#010x}, the bytes give {got:#010x}): "
                  "the summary is damaged")
    pos = 0
    chunk_index = []
    meta_index = []
    saw_channels = False
    while pos < len(summary):
        if pos + RECORD_HEADER > len(summary):
            fail_at(path, summary_start + pos, "summary: partial record header")
        op, n = RECORD_HEAD.unpack_from(summary, pos)
        body_at = pos + RECORD_HEADER
        if n > len(summary) - body_at:
            fail_at(path, summary_start + pos, f"summary: record of opcode {op:#x} claims {n} bytes, "
                  f"{len(summary) - body_at} left")
        body = memoryview(summary)[body_at:body_at + n]
        base = summary_start + body_at
        if op in (Opcode.SCHEMA, Opcode.CHANNEL):
            _add_definition(lay, op, body, base)
            saw_channels |= op == Opcode.CHANNEL
        elif op == Opcode.CHUNK_INDEX:
            chunk_index.append(_parse(ChunkIndex, body, path, base, "chunk index record",
                                      (CHUNK_INDEX_LAYOUT, "message_index_offsets")))
        elif op == Opcode.STATISTICS:
            st = _parse(Statistics, body, path, base, "statistics record",
                        (STATISTICS_LAYOUT, "channel_message_counts"))
            if st.message_count:
                _check_times(path, base, "statistics record", st.message_start_time, st.message_end_time)
            lay.statistics = st
        elif op == Opcode.METADATA_INDEX:
            meta_index.append(_parse(MetadataIndex, body, path, base, "metadata index record"))
        elif op == Opcode.ATTACHMENT_INDEX:
            lay.attachments += 1
        pos = body_at + n
    if not chunk_index and not (lay.statistics and lay.statistics.message_count == 0):
        return False  # messages outside chunks, or no chunk index group: plan by a scan
    if not saw_channels and chunk_index:
        return False  # channels were not repeated in the summary
    for ci in chunk_index:
        off, length = ci.chunk_start_offset, ci.chunk_length
        if not len(MAGIC) <= off or off + length > summary_start or length < RECORD_HEADER:
            fail_at(path, off, f"chunk index: chunk [{off}, {off + length}) outside the data section")
        idx_off, idx_len = off + length, ci.message_index_length
        if idx_len and idx_off + idx_len > summary_start:
            fail_at(path, idx_off, "chunk index: message index area runs past the data section")
        _check_times(path, off, "chunk index", ci.message_start_time, ci.message_end_time)
        check_usize(path, off, "chunk index", ci.compression, ci.compressed_size, ci.uncompressed_size)
        idx = ci.message_index_offsets.items()
        chans = _channels_of_index(idx, idx_off, idx_len, path) if idx else ()
        lay.chunks.append(ChunkRef(off, length, ci.message_start_time, ci.message_end_time, ci.compression,
                                   ci.compressed_size, ci.uncompressed_size, idx_off, idx_len, chans))
    lay.chunks.sort(key=lambda c: c.offset)
    for mi in meta_index:
        off, length = mi.offset, mi.length
        if off < len(MAGIC) or off + length > summary_start or length < RECORD_HEADER:
            fail_at(path, off, "metadata index: record outside the data section")
        rec = _pread(fd, length, off)
        if rec[0] != Opcode.METADATA:
            fail_at(path, off, f"metadata index points at opcode {rec[0]:#x}, not a metadata record")
        lay.metadata.append(parse_metadata(memoryview(rec)[RECORD_HEADER:], path, off + RECORD_HEADER))
    head = _read_header(fd, lay)
    lay.profile, lay.library = head
    lay.has_summary = True
    return True


def _read_header(fd, lay):
    rec = _pread(fd, min(lay.size, 4096), len(MAGIC))
    if len(rec) < RECORD_HEADER or rec[0] != Opcode.HEADER:
        fail_at(lay.path, len(MAGIC), "the first record is not a header record")
    n = RECORD_HEAD.unpack_from(rec, 0)[1]
    if n > min(lay.size - len(MAGIC) - RECORD_HEADER, _HEADER_MAX):
        fail_at(lay.path, len(MAGIC) + 1, f"header record: body length {n} runs past the end of the file "
              f"({lay.size} bytes)")
    if n > len(rec) - RECORD_HEADER:
        rec = _pread(fd, RECORD_HEADER + n, len(MAGIC))
        if len(rec) < RECORD_HEADER + n:
            fail_at(lay.path, len(MAGIC), "header record: the file is shorter than when it was measured")
    h = _parse(Header, memoryview(rec)[RECORD_HEADER:RECORD_HEADER + n], lay.path, len(MAGIC) + RECORD_HEADER,
               "header record")
    return h.profile, h.library


def _scan(fd, lay):
    """Plans ``lay`` by walking the records from the start, reading only
    record headers (and the small records), up to the last whole record;
    then finds the channels whose records lie inside chunks."""
    _scan_records(fd, lay)
    _find_channels_in_chunks(lay)


class _ScannedChunk:
    """A chunk record the scan has passed, and the message index records after it."""

    __slots__ = ("channels", "head", "index_end", "index_start", "length", "offset")

    def __init__(self, offset, body_length, head):
        self.offset = offset
        self.length = RECORD_HEADER + body_length
        self.head = head  # start_time, end_time, compression, compressed_size, uncompressed_size
        self.index_start = self.index_end = offset + self.length
        self.channels = []  # (channel id, message index record offset, message count)

    def add_index(self, offset, end, channel, count):
        self.channels.append((channel, offset, count))
        self.index_end = end

    def ref(self):
        if not self.channels:
            return ChunkRef(self.offset, self.length, *self.head)
        return ChunkRef(self.offset, self.length, *self.head, self.index_start, self.index_end - self.index_start,
                        tuple(sorted(self.channels)))


def _scan_records(fd, lay):
    """The scan's walk: chunks (with their message indexes), message regions
    outside chunks and the small records, up to a record cut short."""
    path, size = lay.path, lay.size
    pos = len(MAGIC)
    region = None  # [start, end) of the message records outside chunks being walked
    chunk = None  # the last chunk record, while message index records follow it
    while pos < size:
        head = _pread(fd, RECORD_HEADER, pos)
        if len(head) < RECORD_HEADER:
            lay.truncated_at = pos
            break
        op, n = RECORD_HEAD.unpack_from(head, 0)
        if n > size - pos - RECORD_HEADER:
            lay.truncated_at = pos  # a record cut short: everything before it stands
            break
        body_at = pos + RECORD_HEADER
        if op != Opcode.MESSAGE_INDEX and chunk is not None:
            lay.chunks.append(chunk.ref())
            chunk = None
        if op != Opcode.MESSAGE and region is not None:
            lay.regions.append(Region(region[0], region[1] - region[0]))
            region = None
        if op == Opcode.CHUNK:
            chunk = _ScannedChunk(pos, n, _scan_chunk_head(fd, path, body_at, n))
        elif op == Opcode.MESSAGE_INDEX and chunk is not None:
            chunk.add_index(pos, body_at + n, *_scan_message_index(fd, path, body_at, n))
        elif op == Opcode.MESSAGE:
            region = [pos if region is None else region[0], body_at + n]
        elif op in (Opcode.SCHEMA, Opcode.CHANNEL, Opcode.METADATA, Opcode.HEADER):
            _scan_small_record(fd, lay, op, body_at, n)
        elif op == Opcode.ATTACHMENT:
            lay.attachments += 1
        elif op in (Opcode.DATA_END, Opcode.FOOTER):
            break
        pos = body_at + n
    if chunk is not None:
        lay.chunks.append(chunk.ref())
    if region is not None:
        lay.regions.append(Region(region[0], region[1] - region[0]))


def _scan_chunk_head(fd, path, body_at, n):
    """(start_time, end_time, compression, compressed_size,
    uncompressed_size) of the chunk record whose ``n``-byte body is at
    ``body_at``, its records not read."""
    fixed = _pread(fd, min(n, _CHUNK_HEAD_MAX), body_at)
    b = _RecordStream(fixed, path, body_at, "chunk record")
    start, end, usize = b.read8(), b.read8(), b.read8()
    b.read4()  # uncompressed_crc
    comp = b.read_prefixed_string()  # a name longer than 64 bytes fails here
    csize = b.read8()  # records length
    if b.count + csize != n:
        fail_at(path, body_at, f"chunk record: records length {csize} does not fill the record of {n} bytes")
    _check_times(path, body_at, "chunk record", start, end)
    check_usize(path, body_at, "chunk record", comp, csize, usize)
    return start, end, comp, csize, usize


def _scan_message_index(fd, path, body_at, n):
    """(channel_id, entry count) of the message index record whose ``n``-byte body is at ``body_at``."""
    fixed = MESSAGE_INDEX_FIXED - RECORD_HEADER
    b = _RecordStream(_pread(fd, min(n, fixed), body_at), path, body_at, "message index record")
    ch = b.read2()  # channel_id
    nbytes = b.read4()  # the entries' byte length
    if nbytes + fixed != n or nbytes % MESSAGE_INDEX_ENTRY:
        fail_at(path, body_at, f"message index record: {nbytes} bytes of entries in a record of {n}")
    return ch, nbytes // MESSAGE_INDEX_ENTRY


def _scan_small_record(fd, lay, op, body_at, n):
    """A schema, channel, metadata or header record met by the scan, into ``lay``."""
    body = memoryview(_pread(fd, n, body_at))
    if op in (Opcode.SCHEMA, Opcode.CHANNEL):
        _add_definition(lay, op, body, body_at)
    elif op == Opcode.METADATA:
        lay.metadata.append(parse_metadata(body, lay.path, body_at))
    else:
        h = _parse(Header, body, lay.path, body_at, "header record")
        lay.profile, lay.library = h.profile, h.library


def _add_definition(lay, op, body, base, first_wins=False):
    """A schema or channel record's ``body`` (at file offset ``base``) into
    ``lay``; ``first_wins``: an id already there is kept."""
    if op == Opcode.SCHEMA:
        found, known = parse_schema(body, lay.path, base), lay.schemas
    else:
        found, known = parse_channel(body, lay.path, base), lay.channels
    if not (first_wins and found.id in known):
        known[found.id] = found


def _find_channels_in_chunks(lay):
    """Channels whose records are inside chunks (as the mcap package's writer
    puts them) are found by reading those chunks' own records: when a
    message index names a channel not seen yet, or when chunks without one
    come with no channel record outside chunks at all."""
    path = lay.path
    need_channels = set()
    for ref in lay.chunks:
        ids = ref.channel_ids
        if ids is not None:
            need_channels |= set(ids) - set(lay.channels)
    blind = not lay.channels and any(r.channel_ids is None for r in lay.chunks)
    if not (need_channels or blind):
        return
    with open(path, "rb", buffering=0) as f:
        for ref in lay.chunks:
            records = read_chunk_records(f.fileno(), ref, path, validate_crc=False)
            for op, body_at, body in walk_records(records, path, ref.offset)[1]:
                _add_definition(lay, op, body, body_at, first_wins=True)
            if not blind and not (need_channels - set(lay.channels)):
                break


def read_chunk_records(fd, ref, path, validate_crc=True):
    """The decompressed records of chunk ``ref`` (bytes), CRC-checked when the
    writer recorded a CRC and ``validate_crc``."""
    if isinstance(ref, Region):
        data = _pread(fd, ref.length, ref.offset)
        if len(data) != ref.length:
            fail_at(path, ref.offset, "file shorter than its planned message region (changed since planning?)")
        return data
    rec = _pread(fd, ref.length, ref.offset)
    if len(rec) != ref.length:
        fail_at(path, ref.offset, f"chunk record of {ref.length} bytes runs past the end of the file")
    op, n = RECORD_HEAD.unpack_from(rec, 0)
    if op != Opcode.CHUNK or n != ref.length - RECORD_HEADER:
        fail_at(path, ref.offset, f"expected a chunk record of {ref.length - RECORD_HEADER} bytes, "
              f"found opcode {op:#x} of {n} bytes")
    # The fixed fields only: the stream copies what it is given, and the records are megabytes.
    b = _RecordStream(memoryview(rec)[RECORD_HEADER:RECORD_HEADER + min(n, _CHUNK_HEAD_MAX)], path,
                      ref.offset + RECORD_HEADER, "chunk record")
    _start, _end, usize, crc = b.read8(), b.read8(), b.read8(), b.read4()
    comp = b.read_prefixed_string()
    clen = b.read8()  # records length
    at = RECORD_HEADER + b.count
    if clen > len(rec) - at:
        fail_at(path, ref.offset + at, f"chunk record: records of {clen} bytes, {len(rec) - at} left in the record")
    data = memoryview(rec)[at:at + clen]
    records = decompress(data, comp, usize, path, ref.offset)
    if validate_crc and crc:
        got = zlib.crc32(records)
        if got != crc:
            fail_at(path, ref.offset, f"chunk CRC mismatch (record says {crc:#010x}, the data gives {got:#010x}): "
                  "the chunk is damaged")
    return records


def walk_records(records, path, base):
    """Walks a chunk's records: (message offsets as int64 array, [(opcode,
    body offset, body) for schema and channel records])."""
    n = len(records)
    pos = 0
    offs = []
    others = []
    unpack = RECORD_HEAD.unpack_from
    append = offs.append
    while pos < n:
        if pos + RECORD_HEADER > n:
            fail_at(path, base, f"chunk records: partial record header at {pos} of {n}")
        op, ln = unpack(records, pos)
        end = pos + RECORD_HEADER + ln
        if end > n:
            fail_at(path, base, f"chunk records: record of opcode {op:#x} at {pos} claims {ln} bytes, "
                  f"{n - pos - RECORD_HEADER} left")
        if op == Opcode.MESSAGE:
            append(pos)
        elif op in (Opcode.SCHEMA, Opcode.CHANNEL):
            others.append((op, base + pos + RECORD_HEADER, memoryview(records)[pos + RECORD_HEADER:end]))
        pos = end
    return np.array(offs, dtype=np.int64), others


def u_views(buf):
    """Unaligned little-endian views of ``buf``: element i of ``u64`` is the
    u64 at byte i (the same for u32, u16), so a field at many offsets is one
    fancy index."""
    n = len(buf)
    return tuple(np.ndarray(shape=(max(n - w + 1, 0),), dtype=dt, buffer=buf, strides=(1,))
                 for dt, w in (("<u2", 2), ("<u4", 4), ("<u8", 8)))


def read_message_index(fd, ref, path):
    """The message offsets (int64, sorted) of chunk ``ref`` from its message
    index records, or None when it has none."""
    if not ref.channels:
        return None
    area = _pread(fd, ref.index_length, ref.index_offset)
    if len(area) != ref.index_length:
        fail_at(path, ref.index_offset, "message index area runs past the end of the file")
    parts = []
    for ch, off, count in ref.channels:
        rel = off - ref.index_offset
        if rel < 0 or rel + MESSAGE_INDEX_FIXED + MESSAGE_INDEX_ENTRY * count > len(area):
            fail_at(path, off, "message index record outside the chunk's index area")
        op, n, cid, nbytes = MESSAGE_INDEX_LAYOUT.head.unpack_from(area, rel)
        if (op != Opcode.MESSAGE_INDEX or cid != ch or nbytes != MESSAGE_INDEX_ENTRY * count
                or n != MESSAGE_INDEX_FIXED - RECORD_HEADER + nbytes):
            fail_at(path, off, f"expected the message index of channel {ch} with {count} entries, found opcode "
                  f"{op:#x} channel {cid} with {nbytes} bytes")
        entries = np.frombuffer(area, dtype="<u8", count=2 * count, offset=rel + MESSAGE_INDEX_FIXED)
        parts.append(entries[1::2])
    offs = (np.concatenate(parts) if len(parts) > 1 else parts[0]).astype(np.int64)
    if len(offs) > 1 and not (offs[1:] > offs[:-1]).all():
        offs = np.unique(offs)  # several channels, or an index out of order
    return offs


def message_offsets(records, index_offsets, path, base):
    """The offsets of every message record in a chunk's ``records``: the
    index's offsets when they tile the chunk with the records between them,
    else a walk. Returns (offsets, schema and channel records)."""
    if index_offsets is None or len(index_offsets) == 0:
        return walk_records(records, path, base)
    n = len(records)
    offs = index_offsets
    if offs[0] < 0 or offs[-1] + MESSAGE_FIXED > n:
        return walk_records(records, path, base)
    a = np.frombuffer(records, np.uint8)
    if not (a[offs] == Opcode.MESSAGE).all():
        return walk_records(records, path, base)
    _, _, u64 = u_views(records)
    ends = offs + RECORD_HEADER + u64[offs + RECORD_LENGTH_AT].astype(np.int64)
    if (ends > n).any() or (ends[:-1] > offs[1:]).any() or (ends < offs + MESSAGE_FIXED).any():
        return walk_records(records, path, base)
    # Between consecutive messages (and before the first, after the last)
    # only non-message records may lie: walk those holes.
    starts = np.concatenate(([0], ends))
    stops = np.concatenate((offs, [n]))
    holes = np.nonzero(starts != stops)[0]
    others = []
    for h in holes:
        pos, stop = int(starts[h]), int(stops[h])
        while pos < stop:
            if pos + RECORD_HEADER > stop:
                return walk_records(records, path, base)
            op, ln = RECORD_HEAD.unpack_from(records, pos)
            end = pos + RECORD_HEADER + ln
            if end > stop or op == Opcode.MESSAGE:
                return walk_records(records, path, base)  # the index missed messages
            if op in (Opcode.SCHEMA, Opcode.CHANNEL):
                others.append((op, base + pos + RECORD_HEADER, memoryview(records)[pos + RECORD_HEADER:end]))
            pos = end
    return offs, others


