# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Bulk decoding of a0py packets into Arrow buffers (compiled; a0py.spark._packets
wraps it).

Many packets lying in one buffer (a decompressed MCAP chunk, or frames copied
out of an arena) are checked and indexed in one pass (:func:`scan`), then the
kept ones are copied into the contiguous buffers of Arrow arrays in a second
(:func:`gather`): header keys, values and payloads with their 32-bit
offsets, ready for ``pyarrow.Array.from_buffers``.

The packet layout is a0py's (csrc/a0_packet.h, docs/pubsub.md "Packet
format"): a 48-byte fixed header, a 48-byte standard block (``a0_time_mono``,
``a0_time_wall``, ``a0_writer_id``, ``a0_writer_seq``, ``a0_transport_seq``
as fixed-width numbers, meaningful when flags has bit 0), an index of 16-byte
entries at 96, the strings, the payload at ``payload_off``.

Invariants:

* The checks are those of the C decoder (``a0_packet_view`` then
  ``a0_packet_header`` for every entry): nothing is read outside ``buf``; a
  packet's fixed header only when its length covers the 96 bytes, an index
  entry only before ``payload_off`` (itself checked against the length), a
  string only inside the strings area, followed by its NUL.
* The headers of a row are those a0py's readers show (``Packet.headers``):
  the standard ones first, rendered as strings (decimals, the UUID in its
  8-4-4-4-12 form), then the index's, in order. The tests compare every
  field with ``a0py.Packet.from_bytes``.
* In strict mode the first packet that fails a check stops the scan and is
  reported (index and reason); otherwise it is marked invalid and skipped.
* Integers are read with memcpy (packets in a chunk are not aligned).
* :func:`append_records` (``SegmentWriter.write_frames``; the recorder
  itself reads with ``Transport.read_into``, which writes the same bytes)
  copies each frame whole into an MCAP message record; of the frame it
  reads only the standard block's wall time, and only after checking the
  frame is long enough to hold it and says it has one.
* :func:`index_records` walks a chunk's records checking every length
  against the buffer before it is followed.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import numpy as np

cdef uint32_t MAGIC = 0x4B503041
cdef uint32_t INDEX_OFF = 96
cdef uint32_t ENTRY = 16
cdef uint16_t HAS_STD = 1

cdef const char* K_SEQ = b"a0_transport_seq"
cdef const char* K_MONO = b"a0_time_mono"
cdef const char* K_WALL = b"a0_time_wall"
# The standard headers' keys, in the order readers show them, and their lengths.
cdef const char* STD_KEYS = b"a0_time_monoa0_time_walla0_writer_ida0_writer_seqa0_transport_seq"
cdef int STD_KEY_LEN[5]
STD_KEY_LEN[:] = [12, 12, 12, 13, 16]
cdef int STD_KEYS_BYTES = 65
cdef const char* HEX = b"0123456789abcdef"


cdef inline uint16_t rd16(const uint8_t* p) noexcept nogil:
    cdef uint16_t v
    memcpy(&v, p, 2)
    return v


cdef inline uint32_t rd32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v


cdef inline uint64_t rd64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline bint parse_dec(const uint8_t* s, uint32_t n, int64_t* out) noexcept nogil:
    """A decimal of 1..19 digits below 2**63."""
    cdef uint64_t v = 0
    cdef uint32_t i
    if n < 1 or n > 19:
        return False
    for i in range(n):
        if s[i] < 48 or s[i] > 57:
            return False
        v = v * 10 + (s[i] - 48)
    if v >= (<uint64_t>1 << 63):
        return False
    out[0] = <int64_t>v
    return True


cdef inline int dec_len(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


cdef inline int put_dec(uint8_t* out, uint64_t v) noexcept nogil:
    cdef int n = dec_len(v), i
    for i in range(n - 1, -1, -1):
        out[i] = <uint8_t>(48 + v % 10)
        v //= 10
    return n


cdef inline void put_uuid(uint8_t* out, const uint8_t* id) noexcept nogil:
    cdef int i, o = 0
    for i in range(16):
        if i == 4 or i == 6 or i == 8 or i == 10:
            out[o] = 45  # '-'
            o += 1
        out[o] = HEX[id[i] >> 4]
        out[o + 1] = HEX[id[i] & 15]
        o += 2


cdef inline int std_values_len(const uint8_t* p) noexcept nogil:
    return (dec_len(rd64(p + 48)) + dec_len(rd64(p + 56)) + 36 + dec_len(rd64(p + 80))
            + dec_len(rd64(p + 88)))


cdef int check_one(const uint8_t* p, int64_t size, uint32_t* count_out, const char** why) noexcept nogil:
    """0 if the packet at p (size bytes) passes every check, else 1 and *why."""
    cdef uint32_t count, i, ko, kl, vo, vl
    cdef uint64_t poff, psize, index_end
    cdef const uint8_t* e
    if size < INDEX_OFF:
        why[0] = b"shorter than the 96 bytes of the fixed header and standard block"
        return 1
    if rd32(p) != MAGIC:
        why[0] = b"field magic"
        return 1
    if rd16(p + 4) != 1:
        why[0] = b"field version"
        return 1
    if rd16(p + 6) & ~HAS_STD:
        why[0] = b"field flags"
        return 1
    if rd32(p + 28) != 0:
        why[0] = b"field reserved"
        return 1
    count = rd32(p + 24)
    poff = rd64(p + 32)
    psize = rd64(p + 40)
    index_end = <uint64_t>INDEX_OFF + <uint64_t>ENTRY * count
    if poff < index_end or poff % 16 != 0 or poff > <uint64_t>size:
        why[0] = b"field payload_off"
        return 1
    if psize != <uint64_t>size - poff:
        why[0] = b"field payload_size"
        return 1
    for i in range(count):
        e = p + INDEX_OFF + ENTRY * i
        ko = rd32(e)
        kl = rd32(e + 4)
        vo = rd32(e + 8)
        vl = rd32(e + 12)
        if ko < index_end or <uint64_t>ko + kl + 1 > poff or p[ko + kl] != 0:
            why[0] = b"a header key outside the strings area or without its NUL"
            return 1
        if vo < index_end or <uint64_t>vo + vl + 1 > poff or p[vo + vl] != 0:
            why[0] = b"a header value outside the strings area or without its NUL"
            return 1
    count_out[0] = count
    return 0


def scan(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths, bint strict=True,
         bint want_mono=True):
    """Checks and indexes packets ``buf[starts[i] : starts[i] + lengths[i]]``.

    Returns ``(error, valid, count, seq, seq_have, mono, mono_have, wall,
    wall_have)``: ``error`` is None or ``(i, reason)`` (strict mode: the scan
    stopped at packet i); then n-element arrays: ``valid`` (uint8),
    ``count`` (headers a row shows: the standard ones included), and the
    transport seq, monotonic and wall times (int64, with uint8 flags): from
    the standard block when the packet has one, else from the first
    ``a0_transport_seq``, ``a0_time_mono``, ``a0_time_wall`` headers parsed
    as decimals."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef int64_t start, size
    cdef uint32_t count, j, kl, vl, ko, vo
    cdef uint64_t v
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef const char* why = NULL
    cdef bint got_seq, got_mono, got_wall
    cdef int64_t bad = -1
    cdef int64_t total = buf.shape[0]
    valid_a = np.zeros(n, np.uint8)
    count_a = np.zeros(n, np.int64)
    seq_a = np.zeros(n, np.int64)
    seqh_a = np.zeros(n, np.uint8)
    mono_a = np.zeros(n, np.int64)
    monoh_a = np.zeros(n, np.uint8)
    wall_a = np.zeros(n, np.int64)
    wallh_a = np.zeros(n, np.uint8)
    cdef uint8_t[::1] valid = valid_a
    cdef int64_t[::1] counts = count_a
    cdef int64_t[::1] seq = seq_a
    cdef uint8_t[::1] seqh = seqh_a
    cdef int64_t[::1] mono = mono_a
    cdef uint8_t[::1] monoh = monoh_a
    cdef int64_t[::1] wall = wall_a
    cdef uint8_t[::1] wallh = wallh_a
    with nogil:
        for i in range(n):
            start = starts[i]
            size = lengths[i]
            if start < 0 or size < 0 or start > total or size > total - start:
                why = b"outside the buffer"
                if strict:
                    bad = i
                    break
                continue
            p = base + start
            if check_one(p, size, &count, &why):
                if strict:
                    bad = i
                    break
                continue
            valid[i] = 1
            if rd16(p + 6) & HAS_STD:
                counts[i] = count + 5
                v = rd64(p + 88)
                seqh[i] = v < (<uint64_t>1 << 63)
                seq[i] = <int64_t>v if seqh[i] else 0
                v = rd64(p + 56)
                wallh[i] = v < (<uint64_t>1 << 63)
                wall[i] = <int64_t>v if wallh[i] else 0
                v = rd64(p + 48)
                monoh[i] = v < (<uint64_t>1 << 63)
                mono[i] = <int64_t>v if monoh[i] else 0
                continue
            counts[i] = count
            got_seq = got_mono = got_wall = False
            for j in range(count):
                e = p + INDEX_OFF + ENTRY * j
                kl = rd32(e + 4)
                if kl == 16 and not got_seq:
                    ko = rd32(e)
                    if memcmp(p + ko, K_SEQ, 16) == 0:
                        got_seq = True
                        vo = rd32(e + 8)
                        vl = rd32(e + 12)
                        seqh[i] = parse_dec(p + vo, vl, &seq[i])
                elif kl == 12:
                    ko = rd32(e)
                    if not got_wall and memcmp(p + ko, K_WALL, 12) == 0:
                        got_wall = True
                        vo = rd32(e + 8)
                        vl = rd32(e + 12)
                        wallh[i] = parse_dec(p + vo, vl, &wall[i])
                    elif want_mono and not got_mono and memcmp(p + ko, K_MONO, 12) == 0:
                        got_mono = True
                        vo = rd32(e + 8)
                        vl = rd32(e + 12)
                        monoh[i] = parse_dec(p + vo, vl, &mono[i])
                if got_seq and got_wall and (got_mono or not want_mono):
                    break
    error = None if bad < 0 else (bad, why.decode())
    return error, valid_a, count_a, seq_a, seqh_a, mono_a, monoh_a, wall_a, wallh_a


def gather(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """Copies the headers (standard ones first, as strings) and payloads of
    packets already passed by :func:`scan` into Arrow buffers:
    ``(map_offsets, key_offsets, key_data, value_offsets, value_data,
    payload_offsets, payload_data)`` (int32 offset arrays, bytearray data).
    Raises OverflowError past 2 GiB of one kind."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef uint32_t j, count
    cdef int k
    cdef int64_t e_total = 0, kbytes = 0, vbytes = 0, pbytes = 0
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef uint64_t poff
    for i in range(n):
        p = base + starts[i]
        count = rd32(p + 24)
        e_total += count
        if rd16(p + 6) & HAS_STD:
            e_total += 5
            kbytes += STD_KEYS_BYTES
            vbytes += std_values_len(p)
        for j in range(count):
            e = p + INDEX_OFF + ENTRY * j
            kbytes += rd32(e + 4)
            vbytes += rd32(e + 12)
        pbytes += lengths[i] - <int64_t>rd64(p + 32)
    if kbytes > 0x7FFFFFFF or vbytes > 0x7FFFFFFF or pbytes > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of headers or payloads in one batch")
    map_a = np.empty(n + 1, np.int32)
    koff_a = np.empty(e_total + 1, np.int32)
    voff_a = np.empty(e_total + 1, np.int32)
    poff_a = np.empty(n + 1, np.int32)
    kdata = bytearray(kbytes)
    vdata = bytearray(vbytes)
    pdata = bytearray(pbytes)
    cdef int32_t[::1] mo = map_a
    cdef int32_t[::1] ko = koff_a
    cdef int32_t[::1] vo = voff_a
    cdef int32_t[::1] po = poff_a
    cdef uint8_t* kd = <uint8_t*>(<char*>kdata) if kbytes else NULL
    cdef uint8_t* vd = <uint8_t*>(<char*>vdata) if vbytes else NULL
    cdef uint8_t* pd = <uint8_t*>(<char*>pdata) if pbytes else NULL
    cdef int64_t ei = 0, kpos = 0, vpos = 0, ppos = 0
    cdef uint32_t kl, vl
    cdef int64_t plen
    with nogil:
        mo[0] = 0
        ko[0] = 0
        vo[0] = 0
        po[0] = 0
        for i in range(n):
            p = base + starts[i]
            if rd16(p + 6) & HAS_STD:
                memcpy(kd + kpos, STD_KEYS, STD_KEYS_BYTES)
                for k in range(5):
                    kpos += STD_KEY_LEN[k]
                    ei += 1
                    ko[ei] = <int32_t>kpos
                    if k == 0:
                        vpos += put_dec(vd + vpos, rd64(p + 48))
                    elif k == 1:
                        vpos += put_dec(vd + vpos, rd64(p + 56))
                    elif k == 2:
                        put_uuid(vd + vpos, p + 64)
                        vpos += 36
                    elif k == 3:
                        vpos += put_dec(vd + vpos, rd64(p + 80))
                    else:
                        vpos += put_dec(vd + vpos, rd64(p + 88))
                    vo[ei] = <int32_t>vpos
            count = rd32(p + 24)
            for j in range(count):
                e = p + INDEX_OFF + ENTRY * j
                kl = rd32(e + 4)
                vl = rd32(e + 12)
                memcpy(kd + kpos, p + rd32(e), kl)
                memcpy(vd + vpos, p + rd32(e + 8), vl)
                kpos += kl
                vpos += vl
                ei += 1
                ko[ei] = <int32_t>kpos
                vo[ei] = <int32_t>vpos
            mo[i + 1] = <int32_t>ei
            poff = rd64(p + 32)
            plen = lengths[i] - <int64_t>poff
            memcpy(pd + ppos, p + poff, plen)
            ppos += plen
            po[i + 1] = <int32_t>ppos
    return map_a, koff_a, kdata, voff_a, vdata, poff_a, pdata


cdef uint8_t OP_MESSAGE = 0x05
cdef int MSG_FIXED = 31  # opcode u8, length u64, channel u16, sequence u32, log u64, publish u64


def append_records(bytearray out, list frames, const int64_t[::1] seqs, int channel, int64_t log_time,
                   int64_t limit):
    """Appends MCAP message records of ``frames`` to ``out`` (a chunk's
    records), stopping after the first record that takes ``out`` to
    ``limit`` bytes or more.

    ``frames`` is a list of bytes (with ``seqs``), or of ``(seq, bytes)``
    tuples as ``Transport.read_many`` gives them (``seqs`` empty). Each
    record gets the channel, the seq modulo 2**32, ``log_time``, and the
    packet's ``a0_time_wall`` from its standard block as publish time (the
    log time where the frame has none: a frame that is not a packet is
    recorded all the same).

    Returns ``(taken, seqs, offsets, publish_times, from_std, frame_bytes)``:
    how many frames were appended, their seqs, record offsets in ``out``,
    publish times, whether each came from a standard block (uint8), and the
    sum of their sizes. Raises TypeError for an item of the wrong kind."""
    cdef Py_ssize_t n = PyList_GET_SIZE(frames), i, taken = 0
    cdef bint tuples = seqs.shape[0] == 0
    cdef int64_t total = 0, start = PyByteArray_GET_SIZE(out), pos, frame_bytes = 0
    cdef object item, data
    cdef Py_ssize_t size
    if not tuples and seqs.shape[0] != n:
        raise ValueError("seqs and frames differ in length")
    # Sizes first (and kinds checked), so out is resized once.
    for i in range(n):
        item = <object>PyList_GET_ITEM(frames, i)
        if tuples:
            if type(item) is not tuple or PyTuple_GET_SIZE(item) != 2:
                raise TypeError(f"frames must be (seq, bytes) pairs, not {type(item).__name__}")
            data = <object>PyTuple_GET_ITEM(item, 1)
        else:
            data = item
        if type(data) is not bytes:
            raise TypeError(f"frames must be bytes, not {type(data).__name__}")
        total += MSG_FIXED + PyBytes_GET_SIZE(data)
        taken = i + 1
        if start + total >= limit:
            break
    PyByteArray_Resize(out, start + total)
    seq_a = np.empty(taken, np.int64)
    off_a = np.empty(taken, np.int64)
    pub_a = np.empty(taken, np.int64)
    std_a = np.zeros(taken, np.uint8)
    cdef int64_t[::1] so = seq_a
    cdef int64_t[::1] oo = off_a
    cdef int64_t[::1] po = pub_a
    cdef uint8_t[::1] sd = std_a
    cdef uint8_t* base = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef uint8_t* r
    cdef const uint8_t* p
    cdef uint64_t length, u, wall
    cdef uint16_t ch = <uint16_t>channel
    cdef uint32_t seq32
    cdef int64_t seq
    pos = start
    for i in range(taken):
        item = <object>PyList_GET_ITEM(frames, i)
        if tuples:
            seq = PyLong_AsLongLong(<object>PyTuple_GET_ITEM(item, 0))
            data = <object>PyTuple_GET_ITEM(item, 1)
        else:
            seq = seqs[i]
            data = item
        p = <const uint8_t*>PyBytes_AS_STRING(data)
        size = PyBytes_GET_SIZE(data)
        wall = <uint64_t>log_time
        if size >= INDEX_OFF and rd32(p) == MAGIC and rd16(p + 4) == 1 and (rd16(p + 6) & HAS_STD):
            wall = rd64(p + 56)
            sd[i] = 1
        r = base + pos
        r[0] = OP_MESSAGE
        length = <uint64_t>(size + MSG_FIXED - 9)
        memcpy(r + 1, &length, 8)
        memcpy(r + 9, &ch, 2)
        seq32 = <uint32_t>(<uint64_t>seq & 0xFFFFFFFF)
        memcpy(r + 11, &seq32, 4)
        u = <uint64_t>log_time
        memcpy(r + 15, &u, 8)
        memcpy(r + 23, &wall, 8)
        memcpy(r + MSG_FIXED, p, size)
        so[i] = seq
        oo[i] = pos
        po[i] = <int64_t>wall if wall < (<uint64_t>1 << 63) else log_time
        frame_bytes += size
        pos += MSG_FIXED + size
    return taken, seq_a, off_a, pub_a, std_a, frame_bytes


def index_records(const uint8_t[::1] buf, Py_ssize_t count, bint want_plain):
    """Walks the ``count`` MCAP message records that fill ``buf`` (a chunk's
    records as :func:`append_records` or ``Transport.read_into`` wrote
    them): returns ``(offsets, log_times, publish_times, plain)``, int64
    arrays; a publish time of 2**63 or more reads as the record's log time;
    ``plain`` (when ``want_plain``) holds the offsets of the records whose
    frame is not a packet with a standard block (their publish time may
    still be found in an ``a0_time_wall`` header). Raises ValueError if the
    records do not walk to exactly the end of ``buf`` in ``count`` steps."""
    cdef Py_ssize_t n = buf.shape[0], i = 0, nplain = 0
    cdef int64_t pos = 0
    cdef uint64_t length, size, log, pub
    cdef const uint8_t* base = &buf[0] if n else NULL
    cdef const uint8_t* p
    cdef const char* why = NULL
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    off_a = np.empty(count, np.int64)
    log_a = np.empty(count, np.int64)
    pub_a = np.empty(count, np.int64)
    plain_a = np.empty(count if want_plain else 0, np.int64)
    cdef int64_t[::1] offs = off_a
    cdef int64_t[::1] logs = log_a
    cdef int64_t[::1] pubs = pub_a
    cdef int64_t[::1] plain = plain_a
    with nogil:
        while pos < n:
            if i == count:
                why = b"more records than counted"
                break
            if n - pos < MSG_FIXED or base[pos] != OP_MESSAGE:
                why = b"not a message record"
                break
            length = rd64(base + pos + 1)
            if length < <uint64_t>(MSG_FIXED - 9) or length > <uint64_t>(n - pos - 9):
                why = b"a record length past the end"
                break
            log = rd64(base + pos + 15)
            pub = rd64(base + pos + 23)
            offs[i] = pos
            logs[i] = <int64_t>log
            pubs[i] = <int64_t>pub if pub < (<uint64_t>1 << 63) else <int64_t>log
            if want_plain:
                size = length - (MSG_FIXED - 9)
                p = base + pos + MSG_FIXED
                if not (size >= INDEX_OFF and rd32(p) == MAGIC and rd16(p + 4) == 1
                        and (rd16(p + 6) & HAS_STD)):
                    plain[nplain] = pos
                    nplain += 1
            pos += 9 + <int64_t>length
            i += 1
    if why == NULL and i != count:
        why = b"fewer records than counted"
    if why != NULL:
        raise ValueError(f"chunk records do not walk at byte {pos} (record {i} of {count}): {why.decode()}")
    return off_a, log_a, pub_a, plain_a[:nplain]


def record_frames(const uint8_t[::1] buf, int64_t start, int64_t nbytes, Py_ssize_t count):
    """The frames of the ``count`` message records at ``buf[start:start +
    nbytes]``, as a list of bytes. Raises ValueError if they do not walk."""
    cdef int64_t pos = start, end = start + nbytes
    cdef uint64_t length
    cdef Py_ssize_t i
    if start < 0 or nbytes < 0 or end > buf.shape[0]:
        raise ValueError(f"records {start}..{end} lie outside a buffer of {buf.shape[0]} bytes")
    out = []
    for i in range(count):
        if end - pos < MSG_FIXED or buf[pos] != OP_MESSAGE:
            raise ValueError(f"record {i} at byte {pos} is not a message record")
        length = rd64(&buf[pos] + 1)
        if length < <uint64_t>(MSG_FIXED - 9) or length > <uint64_t>(end - pos - 9):
            raise ValueError(f"record {i} at byte {pos} runs past the end")
        out.append(bytes(buf[pos + MSG_FIXED:pos + 9 + <int64_t>length]))
        pos += 9 + <int64_t>length
    if pos != end:
        raise ValueError(f"{count} records end at byte {pos}, not {end}")
    return out
