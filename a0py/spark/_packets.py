"""Bulk decoding of a0py packets into Arrow columns.

Many packets lying in one buffer (a decompressed MCAP chunk, or frames copied
out of an arena) are decoded together with numpy and Arrow kernels: no Python
code runs per packet or per header on the fast path.

The packet layout is a0py's (csrc/a0_packet.h; docs/pubsub.md): a 48-byte
fixed header (magic "A0PK", version, flags, 16-byte id, header_count,
reserved, payload_off, payload_size), an index of 16-byte entries (key_off,
key_len, val_off, val_len, offsets from the packet's start), the strings
(each followed by a NUL), padding to 16, then the payload.

Invariants:

* Every packet passes the checks of the C decoder (``a0_packet_view`` and
  ``a0_packet_header``) before any of its offsets is followed: magic,
  version, zero flags and reserved field, an aligned ``payload_off`` at or
  after the index, ``payload_off + payload_size`` equal to the packet's size,
  each string inside the strings area and followed by its NUL. A packet that
  fails is a :class:`RecordingFormatError` naming where it lies.
* Strings and payloads are gathered by Arrow's ``take`` from one array laid
  over the whole buffer, whose offsets are the boundaries of every key, value
  and payload in buffer order. That needs those boundaries to be
  nondecreasing, which a0py's encoder guarantees (strings are written in
  index order); packets written otherwise are decoded by the per-packet path,
  with the same result.
* Keys and values are valid UTF-8 (Spark strings), checked in bulk.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ._mcap import u_views
from .errors import RecordingFormatError

PACKET_MAGIC = 0x4B503041  # "A0PK"
PACKET_VERSION = 1
PACKET_HDR = 48
PACKET_ENTRY = 16

H_TIME_MONO = "a0_time_mono"
H_TIME_WALL = "a0_time_wall"
H_WRITER_ID = "a0_writer_id"
H_WRITER_SEQ = "a0_writer_seq"
H_TRANSPORT_SEQ = "a0_transport_seq"
STANDARD_HEADERS = (H_TIME_MONO, H_TIME_WALL, H_WRITER_ID, H_WRITER_SEQ, H_TRANSPORT_SEQ)



class PacketColumns:
    """The decoded columns of n packets: ``keys``/``values`` (string arrays of
    every header, packet after packet), ``counts`` (headers per packet,
    int64), ``payload`` (binary array), ``ids`` (n x 16 bytes)."""

    __slots__ = ("counts", "ids", "keys", "payload", "values")

    def __init__(self, keys, values, counts, payload, ids):
        self.keys = keys
        self.values = values
        self.counts = counts
        self.payload = payload
        self.ids = ids

    def __len__(self):
        return len(self.counts)

    def map_offsets(self):
        offs = np.zeros(len(self.counts) + 1, np.int32)
        np.cumsum(self.counts, out=offs[1:])
        return offs

    def headers(self, map_type=None):
        """The headers as an Arrow ``map<string, string>`` array (of
        ``map_type`` when given, e.g. Spark's field names)."""
        arr = pa.MapArray.from_arrays(pa.array(self.map_offsets()), self.keys, self.values)
        if map_type is not None and arr.type != map_type:
            arr = arr.cast(map_type)
        return arr


def _corrupt(where, i, what):
    raise RecordingFormatError(f"{where(i)}: corrupt a0py packet: {what}")


class PacketIndex:
    """n checked packets lying in ``buf``: where each packet, header entry and
    string is (int64 arrays), every offset verified by :func:`check_packets`."""

    __slots__ = ("buf", "count", "entry_pkt", "first_entry", "kl", "ko", "lengths", "poff", "starts",
                 "vl", "vo")

    def __init__(self, buf, starts, lengths, count, poff, ko, kl, vo, vl, entry_pkt, first_entry):
        self.buf = buf
        self.starts = starts
        self.lengths = lengths
        self.count = count
        self.poff = poff
        self.ko, self.kl, self.vo, self.vl = ko, kl, vo, vl  # absolute key/value offsets, lengths
        self.entry_pkt = entry_pkt
        self.first_entry = first_entry

    def __len__(self):
        return len(self.starts)

    def select(self, rows):
        """The packets ``rows`` (a boolean mask or increasing indices)."""
        rows = np.nonzero(rows)[0] if rows.dtype == bool else rows
        if len(rows) == len(self.starts):
            return self
        count = self.count[rows]
        first = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(count, out=first[1:])
        total = int(first[-1])
        pick = np.repeat(self.first_entry[:-1][rows], count) + (
            np.arange(total, dtype=np.int64) - np.repeat(first[:-1], count))
        return PacketIndex(self.buf, self.starts[rows], self.lengths[rows], count, self.poff[rows],
                           self.ko[pick], self.kl[pick], self.vo[pick], self.vl[pick],
                           np.repeat(np.arange(len(rows), dtype=np.int64), count), first)

    def header_int(self, key):
        """The first ``key`` header of each packet as an integer (see :func:`header_ints`)."""
        return header_ints(self.buf, self.starts, key)

    def columns(self, where):
        """The :class:`PacketColumns` of these packets."""
        buf, n, total = self.buf, len(self.starts), len(self.ko)
        ko, kl, vo, vl = self.ko, self.kl, self.vo, self.vl
        pay_start = self.starts + self.poff
        pay_stop = self.starts + self.lengths
        a = np.frombuffer(buf, np.uint8)
        ids = a[(self.starts + 8)[:, None] + np.arange(16)] if n else np.zeros((0, 16), np.uint8)
        if n == 0:
            empty = pa.array([], pa.string())
            return PacketColumns(empty, empty, self.count, pa.array([], pa.binary()), ids)
        bounds = np.empty(4 * total, np.int64)
        bounds[0::4] = ko
        bounds[1::4] = ko + kl
        bounds[2::4] = vo
        bounds[3::4] = vo + vl
        in_order = total == 0 or bool((bounds[1:] >= bounds[:-1]).all())
        if in_order and len(buf) <= 0x7FFFFFFF:
            data = pa.py_buffer(buf)
            if total:
                strings = pa.Array.from_buffers(pa.string(), 4 * total - 1,
                                                [None, pa.py_buffer(bounds.astype(np.int32)), data])
                keys = strings.take(pa.array(np.arange(0, 4 * total, 4, dtype=np.int64)))
                values = strings.take(pa.array(np.arange(2, 4 * total, 4, dtype=np.int64)))
            else:
                keys = values = pa.array([], pa.string())
            pb = np.empty(2 * n, np.int64)
            pb[0::2] = pay_start
            pb[1::2] = pay_stop
            pays = pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(pb.astype(np.int32)), data])
            payload = pays.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
        else:
            # Strings out of buffer order (a writer other than a0py's): copy them one by one.
            mv = memoryview(buf)
            ks = [bytes(mv[s:s + ln]) for s, ln in zip(ko.tolist(), kl.tolist())]
            vs = [bytes(mv[s:s + ln]) for s, ln in zip(vo.tolist(), vl.tolist())]
            keys = pa.array(ks, pa.binary()).cast(pa.string()) if ks else pa.array([], pa.string())
            values = pa.array(vs, pa.binary()).cast(pa.string()) if vs else pa.array([], pa.string())
            payload = pa.array([mv[s:e] for s, e in zip(pay_start.tolist(), pay_stop.tolist())], pa.binary())
        for arr, what in ((keys, "key"), (values, "value")):
            try:
                arr.validate(full=True)
            except pa.ArrowInvalid:
                j = _first_bad_utf8(arr)
                i = int(self.entry_pkt[j])
                _corrupt(where, i, f"header {j - self.first_entry[i]} {what} is not UTF-8")
        return PacketColumns(keys, values, self.count, payload, ids)


def check_packets(buf, starts, lengths, where):
    """Checks the packets lying at ``buf[starts[i] : starts[i] + lengths[i]]``
    (``starts`` increasing, ranges disjoint) as the C decoder does and returns
    their :class:`PacketIndex`. ``where(i)`` describes packet i for error
    messages ("FILE: chunk at byte X, message 17").

    Raises :class:`RecordingFormatError` for the first packet that fails."""
    n = len(starts)
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    if n == 0:
        z = np.zeros(0, np.int64)
        return PacketIndex(buf, z, z, z, z, z, z, z, z, z, np.zeros(1, np.int64))
    a = np.frombuffer(buf, np.uint8)
    u16, u32, u64 = u_views(buf)
    short = np.nonzero(lengths < PACKET_HDR)[0]
    if len(short):
        i = int(short[0])
        _corrupt(where, i, f"{lengths[i]} bytes, shorter than the {PACKET_HDR}-byte packet header")
    magic = u32[starts]
    version = u16[starts + 4]
    flags = u16[starts + 6]
    count = u32[starts + 24].astype(np.int64)
    reserved = u32[starts + 28]
    poff = u64[starts + 32]
    psize = u64[starts + 40]
    index_end = PACKET_HDR + PACKET_ENTRY * count
    bad = ((magic != PACKET_MAGIC) | (version != PACKET_VERSION) | (flags != 0) | (reserved != 0)
           | (poff % np.uint64(16) != 0) | (poff < index_end.astype(np.uint64))
           | (poff > lengths.astype(np.uint64)))
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        _corrupt(where, i, _why_header(magic[i], version[i], flags[i], reserved[i], poff[i], index_end[i], lengths[i]))
    poff = poff.astype(np.int64)
    # poff <= length was checked, so psize can be compared without overflow.
    bad = psize != (lengths - poff).astype(np.uint64)
    if bad.any():
        i = int(np.nonzero(bad)[0][0])
        _corrupt(where, i, f"field payload_size: expected {lengths[i] - poff[i]}, found {psize[i]}")
    total = int(count.sum())
    entry_pkt = np.repeat(np.arange(n, dtype=np.int64), count)
    first_entry = np.zeros(n + 1, np.int64)
    np.cumsum(count, out=first_entry[1:])
    pkt_start = starts[entry_pkt]
    epos = pkt_start + PACKET_HDR + PACKET_ENTRY * (np.arange(total, dtype=np.int64) - first_entry[:-1][entry_pkt])
    lo = u64[epos]
    hi = u64[epos + 8]
    ko = (lo & np.uint64(0xFFFFFFFF)).astype(np.int64)
    kl = (lo >> np.uint64(32)).astype(np.int64)
    vo = (hi & np.uint64(0xFFFFFFFF)).astype(np.int64)
    vl = (hi >> np.uint64(32)).astype(np.int64)
    e_index_end = index_end[entry_pkt]
    e_poff = poff[entry_pkt]
    bad_key = (ko < e_index_end) | (ko + kl + 1 > e_poff)
    bad = bad_key | (vo < e_index_end) | (vo + vl + 1 > e_poff)
    if bad.any():
        j = int(np.nonzero(bad)[0][0])
        i = int(entry_pkt[j])
        which = "key" if bad_key[j] else "value"
        _corrupt(where, i, f"header {j - first_entry[i]} {which} outside the strings area "
                 f"[{e_index_end[j]}, {e_poff[j]})")
    ko += pkt_start
    vo += pkt_start
    bad = (a[ko + kl] != 0) | (a[vo + vl] != 0)
    if bad.any():
        j = int(np.nonzero(bad)[0][0])
        i = int(entry_pkt[j])
        _corrupt(where, i, f"header {j - first_entry[i]}: string not followed by its NUL")
    return PacketIndex(buf, starts, lengths, count, poff, ko, kl, vo, vl, entry_pkt, first_entry)


def decode_packets(buf, starts, lengths, where):
    """:func:`check_packets` then the columns of every packet."""
    return check_packets(buf, starts, lengths, where).columns(where)


def _first_bad_utf8(arr):
    for j, v in enumerate(arr.cast(pa.binary()).to_pylist()):
        try:
            v.decode("utf-8")
        except UnicodeDecodeError:
            return j
    return 0


def _why_header(magic, version, flags, reserved, poff, index_end, length):
    if magic != PACKET_MAGIC:
        return f"field magic: expected {PACKET_MAGIC:#010x}, found {int(magic):#010x}"
    if version != PACKET_VERSION:
        return f"field version: expected {PACKET_VERSION}, found {version}"
    if flags:
        return f"field flags: expected 0, found {flags}"
    if reserved:
        return f"field reserved: expected 0, found {reserved}"
    if poff % 16:
        return f"field payload_off: {poff} is not a multiple of 16"
    if poff < index_end:
        return f"field payload_off: expected at least {index_end}, found {poff}"
    return f"field payload_off: {poff} past the packet's {length} bytes"


_ZEROS = np.uint64(0x3030303030303030)
_LOW_NIBBLES = np.uint64(0x0F0F0F0F0F0F0F0F)
_HIGH_NIBBLES = np.uint64(0xF0F0F0F0F0F0F0F0)
_SIXES = np.uint64(0x0606060606060606)
_THREES = np.uint64(0x3333333333333333)


def _eight_digits(w):
    """The value of 8 ASCII digits held little-endian in each uint64 of ``w``
    (first digit in the low byte), SWAR in numpy's wrapping arithmetic."""
    w = ((w & _LOW_NIBBLES) * np.uint64(2561)) >> np.uint64(8)
    w = ((w & np.uint64(0x00FF00FF00FF00FF)) * np.uint64(6553601)) >> np.uint64(16)
    return ((w & np.uint64(0x0000FFFF0000FFFF)) * np.uint64(42949672960001)) >> np.uint64(32)


def _all_digits(w):
    return ((w & _HIGH_NIBBLES) | (((w + _SIXES) & _HIGH_NIBBLES) >> np.uint64(4))) == _THREES


def header_ints(buf, starts, key, lengths=None):
    """The first ``key`` header of each packet at ``buf[starts[i]:]`` parsed
    as a non-negative decimal integer below 2**63: (int64 array, bool array of
    which packets had one). ``key`` is at least 8 bytes.

    With ``lengths`` (each packet's size) nothing is trusted: a packet whose
    fixed header, index entry, key or value does not lie inside it simply has
    no value (the recorder keeps every frame whole, packet or not). Without,
    the packets must have passed :func:`check_packets`.

    Works slot by slot over the header index (a0py's writer puts its standard
    headers first, so one or two slots find them all) and parses digits eight
    at a time, so no Python code runs per packet."""
    kb = key.encode()
    if len(kb) < 8:
        raise ValueError("header_ints needs a key of at least 8 bytes")
    starts = np.asarray(starts, np.int64)
    n = len(starts)
    out = np.zeros(n, np.int64)
    have = np.zeros(n, bool)
    if n == 0:
        return out, have
    _, u32, u64 = u_views(buf)
    todo = np.arange(n, dtype=np.int64)
    if lengths is not None:
        lengths = np.asarray(lengths, np.int64)
        ok = lengths >= PACKET_HDR
        todo = todo[ok]
        ok = (u32[starts[todo]] == PACKET_MAGIC) & (u64[starts[todo] + 32] <= lengths[todo].astype(np.uint64))
        todo = todo[ok]
        limit = np.zeros(n, np.int64)
        limit[todo] = u64[starts[todo] + 32].astype(np.int64)  # payload_off: the strings end before it
    count = np.zeros(n, np.int64)
    count[todo] = u32[starts[todo] + 24]
    if lengths is not None:
        count[todo] = np.minimum(count[todo], np.maximum(limit[todo] - PACKET_HDR, 0) // PACKET_ENTRY)
    key_words = [np.frombuffer(kb, "<u8", 1, 8 * j)[0] for j in range(len(kb) // 8)]
    tail_word = np.frombuffer(kb, "<u8", 1, len(kb) - 8)[0]
    slot = 0
    while len(todo):
        todo = todo[count[todo] > slot]
        if not len(todo):
            break
        pkt = starts[todo]
        epos = pkt + PACKET_HDR + PACKET_ENTRY * slot
        lo = u64[epos]
        hi = u64[epos + 8]
        ko = (lo & np.uint64(0xFFFFFFFF)).astype(np.int64)
        kl = (lo >> np.uint64(32)).astype(np.int64)
        vo = (hi & np.uint64(0xFFFFFFFF)).astype(np.int64)
        vl = (hi >> np.uint64(32)).astype(np.int64)
        match = kl == len(kb)
        if lengths is not None:
            lim = limit[todo]
            match &= (ko >= PACKET_HDR) & (ko + kl <= lim) & (vo >= PACKET_HDR) & (vo + vl <= lim)
        found = np.zeros(len(todo), bool)
        if match.any():
            cand = np.nonzero(match)[0]
            kabs = pkt[cand] + ko[cand]
            ok = u64[kabs + len(kb) - 8] == tail_word
            for j, word in enumerate(key_words):
                ok &= u64[kabs + 8 * j] == word
            hit = cand[ok]
            if len(hit):
                rows = todo[hit]
                vals, good = _parse_decimal(u64, pkt[hit] + vo[hit], vl[hit])
                out[rows] = vals
                have[rows] = good
                found[hit] = True
        todo = todo[~found]
        slot += 1
    return out, have


def _parse_decimal(u64, vo, vl):
    """Decimal strings at absolute offsets ``vo`` of lengths ``vl`` (1..19
    digits; the 24 bytes before each string's end lie in the buffer, which
    holds for a value after a packet's 48-byte header)."""
    window = vo + vl - 24
    total = np.zeros(len(vo), np.uint64)
    good = (vl >= 1) & (vl <= 19)
    pad = 24 - vl  # leading bytes of the window that are not the value's
    for k, scale in ((0, 10**16), (1, 10**8), (2, 1)):
        w = u64[window + 8 * k]
        nz = np.clip(pad - 8 * k, 0, 8)
        mask = np.where(nz >= 8, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << (8 * np.minimum(nz, 7)).astype(np.uint64)) - np.uint64(1))
        w = (w & ~mask) | (_ZEROS & mask)
        good &= _all_digits(w)
        total += _eight_digits(w) * np.uint64(scale)
    good &= total < np.uint64(1 << 63)
    return np.where(good, total, 0).astype(np.int64), good
