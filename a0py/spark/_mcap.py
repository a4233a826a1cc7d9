"""MCAP, the reading side: the layout of a file (from its summary, or from a
scan when it has none), its chunks, and the offsets of the message records
inside a decompressed chunk.

The record layout is fixed by the MCAP specification (https://mcap.dev/spec):
the file is magic, records, magic; a record is opcode (u8), body length (u64),
body; every integer is little-endian; a string is a u32 length and UTF-8; a
map is a u32 byte length and its entries.

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

import os
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from .errors import RecordingFormatError

MAGIC = b"\x89MCAP0\r\n"

OP_HEADER = 0x01
OP_FOOTER = 0x02
OP_SCHEMA = 0x03
OP_CHANNEL = 0x04
OP_MESSAGE = 0x05
OP_CHUNK = 0x06
OP_MESSAGE_INDEX = 0x07
OP_CHUNK_INDEX = 0x08
OP_ATTACHMENT = 0x09
OP_ATTACHMENT_INDEX = 0x0A
OP_STATISTICS = 0x0B
OP_METADATA = 0x0C
OP_METADATA_INDEX = 0x0D
OP_SUMMARY_OFFSET = 0x0E
OP_DATA_END = 0x0F

RECORD_HEADER = 9  # opcode u8 + length u64
FOOTER_BODY = 20  # summary_start u64, summary_offset_start u64, summary_crc u32
FOOTER_RECORD = RECORD_HEADER + FOOTER_BODY
# A message record: header, channel_id u16, sequence u32, log_time u64, publish_time u64.
MESSAGE_FIXED = RECORD_HEADER + 2 + 4 + 8 + 8
# A chunk's records are addressed with 32-bit offsets in the Arrow arrays built over them.
MAX_CHUNK_SIZE = (1 << 31) - 1
_SCAN_READ = 1 << 16

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")
_REC = struct.Struct("<BQ")
_CHUNK_FIXED = struct.Struct("<QQQI")  # start, end, uncompressed size, uncompressed crc
_FOOTER = struct.Struct("<BQQQI")


@dataclass(frozen=True)
class Schema:
    id: int
    name: str
    encoding: str
    data: bytes


@dataclass(frozen=True)
class Channel:
    id: int
    schema_id: int
    topic: str
    message_encoding: str
    metadata: tuple[tuple[str, str], ...] = ()


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
    schemas: dict[int, Schema] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    chunks: list[ChunkRef] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    metadata: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    statistics: dict | None = None
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


def _fail(path, offset, what):
    raise RecordingFormatError(f"{path}: at byte {offset}: {what}")


class _Body:
    """Bounds-checked reads from one record's body (bytes), errors naming the file."""

    __slots__ = ("base", "buf", "end", "path", "pos", "what")

    def __init__(self, buf, path, base, what, start=0, end=None):
        self.buf = buf
        self.pos = start
        self.end = len(buf) if end is None else end
        self.path = path
        self.base = base  # file offset of buf[0], for messages
        self.what = what

    def _need(self, n, field_name):
        if n < 0 or self.pos + n > self.end:
            _fail(self.path, self.base + self.pos,
                  f"{self.what}: field {field_name} needs {n} bytes, {self.end - self.pos} left in the record")

    def u16(self, name):
        self._need(2, name)
        v = _U16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def u32(self, name):
        self._need(4, name)
        v = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def u64(self, name):
        self._need(8, name)
        v = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def raw(self, n, name):
        self._need(n, name)
        v = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return v

    def string(self, name):
        n = self.u32(name)
        self._need(n, name)
        try:
            v = str(self.buf[self.pos:self.pos + n], "utf-8")
        except UnicodeDecodeError:
            _fail(self.path, self.base + self.pos, f"{self.what}: field {name} is not UTF-8")
        self.pos += n
        return v

    def string_map(self, name):
        n = self.u32(name)
        self._need(n, name)
        stop = self.pos + n
        sub = _Body(self.buf, self.path, self.base, self.what, self.pos, stop)
        out = []
        while sub.pos < stop:
            k = sub.string(name + " key")
            out.append((k, sub.string(name + " value")))
        self.pos = stop
        return tuple(out)

    def u16_u64_map(self, name):
        n = self.u32(name)
        self._need(n, name)
        if n % 10:
            _fail(self.path, self.base + self.pos, f"{self.what}: field {name} has {n} bytes, not a multiple of 10")
        out = [struct.unpack_from("<HQ", self.buf, self.pos + i) for i in range(0, n, 10)]
        self.pos += n
        return out


def parse_schema(body, path, base):
    b = _Body(body, path, base, "schema record")
    sid = b.u16("id")
    name = b.string("name")
    enc = b.string("encoding")
    n = b.u32("data")
    return Schema(sid, name, enc, b.raw(n, "data"))


def parse_channel(body, path, base):
    b = _Body(body, path, base, "channel record")
    cid = b.u16("id")
    sid = b.u16("schema_id")
    topic = b.string("topic")
    enc = b.string("message_encoding")
    return Channel(cid, sid, topic, enc, b.string_map("metadata"))


def parse_metadata(body, path, base):
    b = _Body(body, path, base, "metadata record")
    name = b.string("name")
    return name, dict(b.string_map("metadata"))


def _parse_chunk_index(body, path, base):
    b = _Body(body, path, base, "chunk index record")
    start, end = b.u64("message_start_time"), b.u64("message_end_time")
    off, length = b.u64("chunk_start_offset"), b.u64("chunk_length")
    idx = b.u16_u64_map("message_index_offsets")
    idx_len = b.u64("message_index_length")
    comp = b.string("compression")
    csize, usize = b.u64("compressed_size"), b.u64("uncompressed_size")
    return start, end, off, length, idx, idx_len, comp, csize, usize


def _parse_statistics(body, path, base):
    b = _Body(body, path, base, "statistics record")
    st = {
        "message_count": b.u64("message_count"),
        "schema_count": b.u16("schema_count"),
        "channel_count": b.u32("channel_count"),
        "attachment_count": b.u32("attachment_count"),
        "metadata_count": b.u32("metadata_count"),
        "chunk_count": b.u32("chunk_count"),
        "message_start_time": b.u64("message_start_time"),
        "message_end_time": b.u64("message_end_time"),
    }
    st["channel_message_counts"] = dict(b.u16_u64_map("channel_message_counts"))
    return st


def _channels_of_index(idx, idx_off, idx_len, path):
    """(channel, record offset, message count) from a chunk index's map of
    message index offsets: each record runs to the next one (or to the end of
    the chunk's index area), so counts need no read."""
    items = sorted((o, c) for c, o in idx)
    stop = idx_off + idx_len
    out = []
    for i, (o, c) in enumerate(items):
        nxt = items[i + 1][0] if i + 1 < len(items) else stop
        n = nxt - o - (RECORD_HEADER + 2 + 4)
        if o < idx_off or nxt > stop or n < 0 or n % 16:
            _fail(path, o, f"message index of channel {c}: offset or length outside the chunk's index area "
                  f"[{idx_off}, {stop})")
        out.append((c, o, n // 16))
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
            raise RecordingFormatError(f"{path}: the file is empty (0 bytes): not an MCAP recording")
        head = _pread(fd, len(MAGIC), 0)
        if head != MAGIC:
            raise RecordingFormatError(
                f"{path}: does not start with the MCAP magic (found {head[:8]!r}): not an MCAP recording")
        lay = Layout(path=path, size=size)
        if not _read_summary(fd, lay):
            _scan(fd, lay)
        return lay
    finally:
        os.close(fd)


def _read_summary(fd, lay):
    """Fills ``lay`` from the footer and summary; False when the file has no
    usable footer (cut short) or no summary or no chunk index group."""
    path, size = lay.path, lay.size
    if size < len(MAGIC) * 2 + FOOTER_RECORD:
        return False
    tail = _pread(fd, FOOTER_RECORD + len(MAGIC), size - FOOTER_RECORD - len(MAGIC))
    if tail[-len(MAGIC):] != MAGIC:
        return False
    op, length, summary_start, _summary_offset_start, crc = _FOOTER.unpack_from(tail, 0)
    footer_off = size - FOOTER_RECORD - len(MAGIC)
    if op != OP_FOOTER or length != FOOTER_BODY:
        _fail(path, footer_off, f"footer record expected before the closing magic (opcode {op:#x}, length {length})")
    if summary_start == 0:
        return False
    if not len(MAGIC) <= summary_start <= footer_off:
        _fail(path, footer_off, f"footer: summary_start {summary_start} outside the file's records "
              f"[{len(MAGIC)}, {footer_off}]")
    summary = _pread(fd, footer_off - summary_start, summary_start)
    if crc:
        got = zlib.crc32(tail[:FOOTER_RECORD - 4], zlib.crc32(summary))
        if got != crc:
            _fail(path, summary_start, f"summary CRC mismatch (footer says {crc:#010x}, the bytes give {got:#010x}): "
                  "the summary is damaged")
    pos = 0
    chunk_index = []
    meta_index = []
    saw_channels = False
    while pos < len(summary):
        if pos + RECORD_HEADER > len(summary):
            _fail(path, summary_start + pos, "summary: partial record header")
        op, n = _REC.unpack_from(summary, pos)
        body_at = pos + RECORD_HEADER
        if n > len(summary) - body_at:
            _fail(path, summary_start + pos, f"summary: record of opcode {op:#x} claims {n} bytes, "
                  f"{len(summary) - body_at} left")
        body = memoryview(summary)[body_at:body_at + n]
        base = summary_start + body_at
        if op == OP_SCHEMA:
            s = parse_schema(body, path, base)
            lay.schemas[s.id] = s
        elif op == OP_CHANNEL:
            c = parse_channel(body, path, base)
            lay.channels[c.id] = c
            saw_channels = True
        elif op == OP_CHUNK_INDEX:
            chunk_index.append(_parse_chunk_index(body, path, base))
        elif op == OP_STATISTICS:
            lay.statistics = _parse_statistics(body, path, base)
        elif op == OP_METADATA_INDEX:
            b = _Body(body, path, base, "metadata index record")
            meta_index.append((b.u64("offset"), b.u64("length"), b.string("name")))
        elif op == OP_ATTACHMENT_INDEX:
            lay.attachments += 1
        pos = body_at + n
    if not chunk_index and not (lay.statistics and lay.statistics["message_count"] == 0):
        return False  # messages outside chunks, or no chunk index group: plan by a scan
    if not saw_channels and chunk_index:
        return False  # channels were not repeated in the summary
    for start, end, off, length, idx, idx_len, comp, csize, usize in chunk_index:
        if not len(MAGIC) <= off or off + length > summary_start or length < RECORD_HEADER:
            _fail(path, off, f"chunk index: chunk [{off}, {off + length}) outside the data section")
        idx_off = off + length
        if idx_len and idx_off + idx_len > summary_start:
            _fail(path, idx_off, "chunk index: message index area runs past the data section")
        chans = _channels_of_index(idx, idx_off, idx_len, path) if idx else ()
        lay.chunks.append(ChunkRef(off, length, start, end, comp, csize, usize, idx_off, idx_len, chans))
    lay.chunks.sort(key=lambda c: c.offset)
    for off, length, _name in meta_index:
        if off < len(MAGIC) or off + length > summary_start or length < RECORD_HEADER:
            _fail(path, off, "metadata index: record outside the data section")
        rec = _pread(fd, length, off)
        if rec[0] != OP_METADATA:
            _fail(path, off, f"metadata index points at opcode {rec[0]:#x}, not a metadata record")
        lay.metadata.append(parse_metadata(memoryview(rec)[RECORD_HEADER:], path, off + RECORD_HEADER))
    head = _read_header(fd, lay)
    lay.profile, lay.library = head
    lay.has_summary = True
    return True


def _read_header(fd, lay):
    rec = _pread(fd, min(lay.size, 4096), len(MAGIC))
    if len(rec) < RECORD_HEADER or rec[0] != OP_HEADER:
        _fail(lay.path, len(MAGIC), "the first record is not a header record")
    n = _U64.unpack_from(rec, 1)[0]
    if n > len(rec) - RECORD_HEADER:
        rec = _pread(fd, RECORD_HEADER + n, len(MAGIC))
        if len(rec) < RECORD_HEADER + n:
            return "", ""
    b = _Body(memoryview(rec)[RECORD_HEADER:RECORD_HEADER + n], lay.path, len(MAGIC) + RECORD_HEADER, "header record")
    return b.string("profile"), b.string("library")


def _scan(fd, lay):
    """Plans ``lay`` by walking the records from the start, reading only
    record headers (and the small records), up to the last whole record."""
    path, size = lay.path, lay.size
    pos = len(MAGIC)
    region_start = None
    region_end = None
    need_channels = set()
    pending = []  # chunks waiting for their message index records
    last_chunk = None
    idx_start = None
    idx_chans = []

    def close_chunk():
        nonlocal last_chunk, idx_start, idx_chans
        if last_chunk is not None:
            off, length, start, end, comp, csize, usize = last_chunk
            if idx_chans:
                chans = tuple(sorted(idx_chans))
                ref = ChunkRef(off, length, start, end, comp, csize, usize, idx_start,
                               idx_chans_end - idx_start, chans)
            else:
                ref = ChunkRef(off, length, start, end, comp, csize, usize)
            lay.chunks.append(ref)
            pending.append(ref)
        last_chunk = None
        idx_start = None
        idx_chans = []

    idx_chans_end = 0
    while pos < size:
        head = _pread(fd, RECORD_HEADER, pos)
        if len(head) < RECORD_HEADER:
            lay.truncated_at = pos
            break
        op, n = _REC.unpack_from(head, 0)
        if n > size - pos - RECORD_HEADER:
            lay.truncated_at = pos  # a record cut short: everything before it stands
            break
        body_at = pos + RECORD_HEADER
        if op != OP_MESSAGE_INDEX:
            close_chunk()
        if op != OP_MESSAGE and region_start is not None:
            lay.regions.append(Region(region_start, region_end - region_start))
            region_start = None
        if op == OP_CHUNK:
            fixed = _pread(fd, min(n, _CHUNK_FIXED.size + 4 + 64 + 8), body_at)
            b = _Body(fixed, path, body_at, "chunk record", end=len(fixed))
            start, end, usize = b.u64("message_start_time"), b.u64("message_end_time"), b.u64("uncompressed_size")
            b.u32("uncompressed_crc")
            comp = b.string("compression")  # a name longer than 64 bytes fails here
            csize = b.u64("records length")
            if b.pos + csize != n:
                _fail(path, body_at, f"chunk record: records length {csize} does not fill the record of {n} bytes")
            last_chunk = (pos, RECORD_HEADER + n, start, end, comp, csize, usize)
            idx_start = body_at + n
            idx_chans_end = idx_start
        elif op == OP_MESSAGE_INDEX and last_chunk is not None:
            body = _pread(fd, min(n, 6), body_at)
            b = _Body(body, path, body_at, "message index record")
            ch = b.u16("channel_id")
            nbytes = b.u32("records")
            if nbytes + 6 != n or nbytes % 16:
                _fail(path, body_at, f"message index record: {nbytes} bytes of entries in a record of {n}")
            idx_chans.append((ch, pos, nbytes // 16))
            idx_chans_end = body_at + n
        elif op == OP_MESSAGE:
            if region_start is None:
                region_start = pos
            region_end = body_at + n
        elif op in (OP_SCHEMA, OP_CHANNEL, OP_METADATA, OP_HEADER):
            body = memoryview(_pread(fd, n, body_at))
            if op == OP_SCHEMA:
                s = parse_schema(body, path, body_at)
                lay.schemas[s.id] = s
            elif op == OP_CHANNEL:
                c = parse_channel(body, path, body_at)
                lay.channels[c.id] = c
            elif op == OP_METADATA:
                lay.metadata.append(parse_metadata(body, path, body_at))
            else:
                b = _Body(body, path, body_at, "header record")
                lay.profile, lay.library = b.string("profile"), b.string("library")
        elif op == OP_ATTACHMENT:
            lay.attachments += 1
        elif op in (OP_DATA_END, OP_FOOTER):
            break
        pos = body_at + n
    close_chunk()
    if region_start is not None:
        lay.regions.append(Region(region_start, region_end - region_start))
    # Channels whose records are inside chunks (as the mcap package's writer
    # puts them) are found by reading those chunks' own records: when a
    # message index names a channel not seen yet, or when chunks without one
    # come with no channel record outside chunks at all.
    for ref in lay.chunks:
        ids = ref.channel_ids
        if ids is not None:
            need_channels |= set(ids) - set(lay.channels)
    blind = not lay.channels and any(r.channel_ids is None for r in lay.chunks)
    if need_channels or blind:
        with open(path, "rb", buffering=0) as f:
            for ref in lay.chunks:
                records = read_chunk_records(f.fileno(), ref, path, validate_crc=False)
                for op, body_at, body in walk_records(records, path, ref.offset)[1]:
                    if op == OP_CHANNEL:
                        c = parse_channel(body, path, body_at)
                        lay.channels.setdefault(c.id, c)
                    elif op == OP_SCHEMA:
                        s = parse_schema(body, path, body_at)
                        lay.schemas.setdefault(s.id, s)
                if not blind and not (need_channels - set(lay.channels)):
                    break


def decompress(data, compression, size, path, offset):
    """The records of a chunk: ``data`` decompressed to exactly ``size`` bytes."""
    if size > MAX_CHUNK_SIZE:
        _fail(path, offset, f"chunk of {size} uncompressed bytes: chunks above 2 GiB are not supported")
    try:
        if compression == "":
            out = data
        elif compression == "zstd":
            import zstandard

            out = zstandard.ZstdDecompressor().decompress(data, max_output_size=size)
        elif compression == "lz4":
            import lz4.frame

            out = lz4.frame.decompress(data)  # takes any buffer
        else:
            _fail(path, offset, f"chunk compression {compression!r} is not supported (zstd, lz4 or none)")
    except RecordingFormatError:
        raise
    except Exception as e:  # the codecs raise their own classes for damaged input
        _fail(path, offset, f"{compression} chunk does not decompress ({type(e).__name__}: {e}): the chunk is damaged")
    if len(out) != size:
        _fail(path, offset, f"chunk decompressed to {len(out)} bytes, its record says {size}")
    return out


def read_chunk_records(fd, ref, path, validate_crc=True):
    """The decompressed records of chunk ``ref`` (bytes), CRC-checked when the
    writer recorded a CRC and ``validate_crc``."""
    if isinstance(ref, Region):
        data = _pread(fd, ref.length, ref.offset)
        if len(data) != ref.length:
            _fail(path, ref.offset, "file shorter than its planned message region (changed since planning?)")
        return data
    rec = _pread(fd, ref.length, ref.offset)
    if len(rec) != ref.length:
        _fail(path, ref.offset, f"chunk record of {ref.length} bytes runs past the end of the file")
    op, n = _REC.unpack_from(rec, 0)
    if op != OP_CHUNK or n != ref.length - RECORD_HEADER:
        _fail(path, ref.offset, f"expected a chunk record of {ref.length - RECORD_HEADER} bytes, "
              f"found opcode {op:#x} of {n} bytes")
    b = _Body(rec, path, ref.offset, "chunk record", RECORD_HEADER)
    b.u64("message_start_time")
    b.u64("message_end_time")
    usize = b.u64("uncompressed_size")
    crc = b.u32("uncompressed_crc")
    comp = b.string("compression")
    clen = b.u64("records length")
    b._need(clen, "records")
    data = memoryview(rec)[b.pos:b.pos + clen]
    records = decompress(data, comp, usize, path, ref.offset)
    if validate_crc and crc:
        got = zlib.crc32(records)
        if got != crc:
            _fail(path, ref.offset, f"chunk CRC mismatch (record says {crc:#010x}, the data gives {got:#010x}): "
                  "the chunk is damaged")
    return records


def walk_records(records, path, base):
    """Walks a chunk's records: (message offsets as int64 array, [(opcode,
    body offset, body) for schema and channel records])."""
    n = len(records)
    pos = 0
    offs = []
    others = []
    unpack = _REC.unpack_from
    append = offs.append
    while pos < n:
        if pos + RECORD_HEADER > n:
            _fail(path, base, f"chunk records: partial record header at {pos} of {n}")
        op, ln = unpack(records, pos)
        end = pos + RECORD_HEADER + ln
        if end > n:
            _fail(path, base, f"chunk records: record of opcode {op:#x} at {pos} claims {ln} bytes, "
                  f"{n - pos - RECORD_HEADER} left")
        if op == OP_MESSAGE:
            append(pos)
        elif op in (OP_SCHEMA, OP_CHANNEL):
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
        _fail(path, ref.index_offset, "message index area runs past the end of the file")
    parts = []
    for ch, off, count in ref.channels:
        rel = off - ref.index_offset
        if rel < 0 or rel + RECORD_HEADER + 6 + 16 * count > len(area):
            _fail(path, off, "message index record outside the chunk's index area")
        op, n = _REC.unpack_from(area, rel)
        cid, nbytes = struct.unpack_from("<HI", area, rel + RECORD_HEADER)
        if op != OP_MESSAGE_INDEX or cid != ch or nbytes != 16 * count or n != 6 + nbytes:
            _fail(path, off, f"expected the message index of channel {ch} with {count} entries, found opcode "
                  f"{op:#x} channel {cid} with {nbytes} bytes")
        entries = np.frombuffer(area, dtype="<u8", count=2 * count, offset=rel + RECORD_HEADER + 6)
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
    if not (a[offs] == OP_MESSAGE).all():
        return walk_records(records, path, base)
    _, _, u64 = u_views(records)
    ends = offs + RECORD_HEADER + u64[offs + 1].astype(np.int64)
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
            op, ln = _REC.unpack_from(records, pos)
            end = pos + RECORD_HEADER + ln
            if end > stop or op == OP_MESSAGE:
                return walk_records(records, path, base)  # the index missed messages
            if op in (OP_SCHEMA, OP_CHANNEL):
                others.append((op, base + pos + RECORD_HEADER, memoryview(records)[pos + RECORD_HEADER:end]))
            pos = end
    return offs, others
