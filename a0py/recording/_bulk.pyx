# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""MCAP message records and a0py packets in bulk, compiled and linked with
the C core's packet codec (csrc/a0_packet.c); :mod:`a0py.recording.packets`
and :mod:`a0py.recording.writer` wrap it.

* Message records (the MCAP framing of the recorder's hot path):
  :func:`message_prefix` lays a frame out as a Message record when
  ``Transport.read_into`` copies it; :func:`append_records` frames frames
  already copied out (bytes) the same way; :func:`index_records` walks a
  closed chunk's records once (offsets, log times, publish times) and fills
  in each packet's publish time; :func:`record_frames` copies frames back
  out of records; :func:`split_records` splits a typed topic's packet
  records into payload records and header records (two channels).
* Packets: many packets lying in one buffer (a decompressed chunk, or frames
  copied out of an arena) are checked and indexed in one pass
  (:func:`scan`), then the kept ones are copied into the contiguous buffers
  of Arrow arrays in a second (:func:`gather`): header keys, values and
  payloads with their 32-bit offsets, ready for ``pyarrow.Array.from_buffers``.
* Any other message's data: :func:`gather_slices` copies byte ranges into
  the buffers of an Arrow binary array the same way.

Invariants:

* Packets are checked by the core's own decoder: ``a0_packet_view`` (fixed
  header, sizes) then ``a0_packet_header`` for every index entry (each
  string inside the strings area, followed by its NUL), so nothing is read
  outside ``buf`` and a packet passes here exactly when a0py's readers
  accept it.
* The headers of a row are those a0py's readers show (``Packet.headers``):
  the standard ones first (in ``a0py.STANDARD_HEADERS`` order, rendered by
  the core's ``a0_u64_to_dec`` and ``a0_uuid_format``), then the index's,
  in order. The tests compare every field with ``a0py.Packet.from_bytes``.
* In strict mode the first packet that fails a check stops the scan and is
  reported (index and reason); otherwise it is marked invalid and skipped.
* Integers are read with memcpy (records and packets in a chunk are not
  aligned).
* A record's publish time is written as its log time when the frame is
  framed (:func:`message_prefix`, :func:`append_records`); when its chunk
  is indexed (:func:`index_records`, the writer's background thread), a
  frame that is a whole, valid packet with a standard block gets that
  block's ``a0_time_wall`` instead. Both framings give the same bytes.
* :func:`index_records` and :func:`record_frames` check every record length
  against the buffer before they follow it.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLong
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset, strcmp

from ..includes.a0_arena cimport a0_check_info_t
from ..includes.a0_err cimport A0_OK
from ..includes.a0_packet cimport (
    A0_UUID_STR_LEN,
    a0_packet_header,
    a0_packet_header_t,
    a0_packet_view,
    a0_packet_view_t,
    a0_u64_to_dec,
    a0_uuid_format,
)

import numpy as np

from .._core import FramePrefix, STANDARD_HEADERS
from .format import (
    MESSAGE_CHANNEL_AT,
    MESSAGE_FIXED,
    MESSAGE_LAYOUT,
    MESSAGE_LOG_TIME_AT,
    MESSAGE_PUBLISH_TIME_AT,
    MESSAGE_SEQUENCE_AT,
    PACKET_PAYLOAD_SIZE_AT as _PACKET_PAYLOAD_SIZE_AT,
    RECORD_HEADER,
    RECORD_LENGTH_AT,
)

# The record layout, copied once from .format (its one definition) into C.
cdef uint8_t OP_MESSAGE = MESSAGE_LAYOUT.opcode
cdef int64_t MSG_FIXED = MESSAGE_FIXED
cdef int64_t HDR = RECORD_HEADER
cdef int64_t AT_LENGTH = RECORD_LENGTH_AT
cdef int64_t AT_CHANNEL = MESSAGE_CHANNEL_AT
cdef int64_t AT_SEQUENCE = MESSAGE_SEQUENCE_AT
cdef int64_t AT_LOG = MESSAGE_LOG_TIME_AT
cdef int64_t AT_PUBLISH = MESSAGE_PUBLISH_TIME_AT
cdef int64_t PACKET_PAYLOAD_SIZE_AT = _PACKET_PAYLOAD_SIZE_AT  # the packet's payload_size (the binding's table)
# A message record's fixed part with the frame's size, sequence and times to fill in.
_MESSAGE_HEAD = MESSAGE_LAYOUT.head

# The standard headers' keys (the core's order), concatenated, and their lengths.
cdef bytes _STD_KEYS = "".join(STANDARD_HEADERS).encode()  # kept alive by the module
cdef const char* STD_KEYS = _STD_KEYS
assert len(STANDARD_HEADERS) == 5
cdef int STD_KEY_LEN[5]
for _i, _key in enumerate(STANDARD_HEADERS):
    STD_KEY_LEN[_i] = len(_key)
cdef int STD_KEYS_BYTES = len(_STD_KEYS)
# Keys looked up in a packet without a standard block.
cdef const char* K_MONO = STD_KEYS  # a0_time_mono
cdef const char* K_WALL = K_MONO + STD_KEY_LEN[0]  # a0_time_wall
cdef const char* K_SEQ = K_WALL + STD_KEY_LEN[1] + STD_KEY_LEN[2] + STD_KEY_LEN[3]  # a0_transport_seq
cdef uint64_t TOP_BIT = (<uint64_t>1) << 63

include "_headers.pxi"


cdef inline uint64_t rd64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline bint parse_dec(const char* s, uint32_t n, int64_t* out) noexcept nogil:
    """A decimal of 1..19 digits below 2**63."""
    cdef uint64_t v = 0
    cdef uint32_t i
    if n < 1 or n > 19:
        return False
    for i in range(n):
        if s[i] < 48 or s[i] > 57:
            return False
        v = v * 10 + <uint64_t>(s[i] - 48)
    if v >= TOP_BIT:
        return False
    out[0] = <int64_t>v
    return True


cdef inline int dec_len(uint64_t v) noexcept nogil:
    cdef int n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


cdef int check_packet(const uint8_t* p, int64_t size, a0_packet_view_t* v, const char** why) noexcept nogil:
    """0 if the packet at p (size bytes) passes the core's checks, its
    headers included (*v filled in); else 1 and *why, or 2 and *why naming
    the field that failed."""
    cdef a0_check_info_t info
    cdef a0_packet_header_t h
    cdef uint32_t i
    info.field = NULL
    if a0_packet_view(p, <uint64_t>size, v, &info) != A0_OK:
        if info.field != NULL and strcmp(info.field, b"size") == 0:
            why[0] = b"shorter than the 96 bytes of the fixed header and standard block"
        elif info.field == NULL:
            why[0] = b"not a packet"
        else:
            why[0] = info.field
            return 2
        return 1
    for i in range(v.header_count):
        if a0_packet_header(v, i, &h, &info) != A0_OK:
            why[0] = (b"a header key outside the strings area or without its NUL"
                      if info.field != NULL and strcmp(info.field, b"header key") == 0
                      else b"a header value outside the strings area or without its NUL")
            return 1
    return 0


cdef inline bint std_wall(const uint8_t* p, int64_t size, uint64_t* wall) noexcept nogil:
    """The standard block's a0_time_wall of the frame at p, if it is a whole,
    valid packet with one (its headers are not walked: only the block is read)."""
    cdef a0_packet_view_t v
    if a0_packet_view(p, <uint64_t>size, &v, NULL) != A0_OK or not v.has_std:
        return False
    wall[0] = v.std.time_wall
    return True


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
    cdef uint32_t j
    cdef uint64_t v
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef a0_packet_view_t pv
    cdef a0_packet_header_t h
    cdef const char* why = NULL
    cdef bint got_seq, got_mono, got_wall
    cdef int64_t bad = -1
    cdef int failed = 0
    cdef int64_t total = buf.shape[0]
    cdef int len_seq = STD_KEY_LEN[4], len_wall = STD_KEY_LEN[1], len_mono = STD_KEY_LEN[0]
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
                failed = 1
                if strict:
                    bad = i
                    break
                continue
            failed = check_packet(base + start, size, &pv, &why)
            if failed:
                if strict:
                    bad = i
                    break
                continue
            valid[i] = 1
            if pv.has_std:
                counts[i] = pv.header_count + 5
                v = pv.std.transport_seq
                seqh[i] = v < TOP_BIT
                seq[i] = <int64_t>v if seqh[i] else 0
                v = pv.std.time_wall
                wallh[i] = v < TOP_BIT
                wall[i] = <int64_t>v if wallh[i] else 0
                v = pv.std.time_mono
                monoh[i] = v < TOP_BIT
                mono[i] = <int64_t>v if monoh[i] else 0
                continue
            counts[i] = pv.header_count
            got_seq = got_mono = got_wall = False
            for j in range(pv.header_count):
                a0_packet_header(&pv, j, &h, NULL)  # checked above
                if not got_seq and <int>h.key_len == len_seq and memcmp(h.key, K_SEQ, len_seq) == 0:
                    got_seq = True
                    seqh[i] = parse_dec(h.val, h.val_len, &seq[i])
                elif not got_wall and <int>h.key_len == len_wall and memcmp(h.key, K_WALL, len_wall) == 0:
                    got_wall = True
                    wallh[i] = parse_dec(h.val, h.val_len, &wall[i])
                elif (want_mono and not got_mono and <int>h.key_len == len_mono
                      and memcmp(h.key, K_MONO, len_mono) == 0):
                    got_mono = True
                    monoh[i] = parse_dec(h.val, h.val_len, &mono[i])
                if got_seq and got_wall and (got_mono or not want_mono):
                    break
    error = None if bad < 0 else (bad, ("field " if failed == 2 else "") + why.decode())
    return error, valid_a, count_a, seq_a, seqh_a, mono_a, monoh_a, wall_a, wallh_a


def gather(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """Copies the headers (standard ones first, as strings) and payloads of
    packets already passed by :func:`scan` into Arrow buffers:
    ``(map_offsets, key_offsets, key_data, value_offsets, value_data,
    payload_offsets, payload_data)`` (int32 offset arrays, bytearray data).
    Raises ValueError for a packet that does not pass the checks (one
    :func:`scan` did not pass), OverflowError past 2 GiB of one kind."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef uint32_t j
    cdef int k
    cdef int64_t e_total = 0, kbytes = 0, vbytes = 0, pbytes = 0, total = buf.shape[0]
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef a0_packet_view_t pv
    cdef a0_packet_header_t h
    cdef const char* why = NULL
    cdef char digits[32]  # at least A0_U64_DEC_MAX
    cdef uint64_t values[5]
    for i in range(n):
        if (starts[i] < 0 or lengths[i] < 0 or starts[i] > total or lengths[i] > total - starts[i]
                or check_packet(base + starts[i], lengths[i], &pv, &why)):
            raise ValueError(f"packet {i} does not pass the checks of scan()")
        e_total += pv.header_count
        if pv.has_std:
            e_total += 5
            kbytes += STD_KEYS_BYTES
            vbytes += (dec_len(pv.std.time_mono) + dec_len(pv.std.time_wall) + A0_UUID_STR_LEN
                       + dec_len(pv.std.writer_seq) + dec_len(pv.std.transport_seq))
        for j in range(pv.header_count):
            a0_packet_header(&pv, j, &h, NULL)
            kbytes += h.key_len
            vbytes += h.val_len
        pbytes += <int64_t>pv.payload_size
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
    cdef uint32_t dl
    with nogil:
        mo[0] = 0
        ko[0] = 0
        vo[0] = 0
        po[0] = 0
        for i in range(n):
            a0_packet_view(base + starts[i], <uint64_t>lengths[i], &pv, NULL)  # checked above
            if pv.has_std:
                memcpy(kd + kpos, STD_KEYS, STD_KEYS_BYTES)
                values[0] = pv.std.time_mono
                values[1] = pv.std.time_wall
                values[3] = pv.std.writer_seq
                values[4] = pv.std.transport_seq
                for k in range(5):
                    kpos += STD_KEY_LEN[k]
                    ei += 1
                    ko[ei] = <int32_t>kpos
                    if k == 2:
                        a0_uuid_format(pv.std.writer_id, <char*>(vd + vpos))
                        vpos += A0_UUID_STR_LEN
                    else:
                        dl = a0_u64_to_dec(values[k], digits)
                        memcpy(vd + vpos, digits, dl)
                        vpos += dl
                    vo[ei] = <int32_t>vpos
            for j in range(pv.header_count):
                a0_packet_header(&pv, j, &h, NULL)
                memcpy(kd + kpos, h.key, h.key_len)
                memcpy(vd + vpos, h.val, h.val_len)
                kpos += h.key_len
                vpos += h.val_len
                ei += 1
                ko[ei] = <int32_t>kpos
                vo[ei] = <int32_t>vpos
            mo[i + 1] = <int32_t>ei
            memcpy(pd + ppos, pv.payload, pv.payload_size)
            ppos += <int64_t>pv.payload_size
            po[i + 1] = <int32_t>ppos
    return map_a, koff_a, kdata, voff_a, vdata, poff_a, pdata


# -- MCAP message records ---------------------------------------------------------


def message_prefix(int channel, int64_t log_time):
    """The ``a0py.FramePrefix`` that makes ``Transport.read_into`` lay each
    frame out as an MCAP Message record of ``channel``: opcode, length (the
    frame's size plus the fields after the length), channel id, sequence
    (the transport seq modulo 2**32), ``log_time``, publish time (``log_time``
    until :func:`index_records` reads the packet's), the frame's bytes.
    Raises OverflowError for a channel outside 0..65535 or a negative time."""
    if not 0 <= channel <= 0xFFFF:
        raise OverflowError(f"MCAP channel id {channel} outside 0..65535")
    if log_time < 0:
        raise OverflowError(f"log time {log_time} is negative")
    return FramePrefix(_MESSAGE_HEAD.pack(OP_MESSAGE, 0, channel, 0, log_time, log_time),
                       seq_at=AT_SEQUENCE, seq_bytes=4, size_at=AT_LENGTH, size_add=MSG_FIXED - HDR)


def append_records(bytearray out, list frames, const int64_t[::1] seqs, int channel, int64_t log_time,
                   int64_t limit):
    """Appends MCAP message records of ``frames`` to ``out`` (a chunk's
    records), stopping after the first record that takes ``out`` to
    ``limit`` bytes or more: the same bytes as ``Transport.read_into`` with
    :func:`message_prefix` writes.

    ``frames`` is a list of bytes (with ``seqs``), or of ``(seq, bytes)``
    tuples as ``Transport.read_many`` gives them (``seqs`` empty). Each
    record gets the channel, the seq modulo 2**32, and ``log_time`` as its
    log and publish time.

    Returns ``(taken, seqs, offsets, frame_bytes)``: how many frames were
    appended, their seqs, the record offsets in ``out``, and the sum of the
    frames' sizes. Raises TypeError for an item of the wrong kind."""
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
    cdef int64_t[::1] so = seq_a
    cdef int64_t[::1] oo = off_a
    cdef uint8_t* base = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef uint8_t* r
    cdef uint64_t length, log = <uint64_t>log_time
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
        size = PyBytes_GET_SIZE(data)
        r = base + pos
        r[0] = OP_MESSAGE
        length = <uint64_t>(size + MSG_FIXED - HDR)
        memcpy(r + 1, &length, 8)
        memcpy(r + AT_CHANNEL, &ch, 2)
        seq32 = <uint32_t>(<uint64_t>seq & 0xFFFFFFFF)
        memcpy(r + AT_SEQUENCE, &seq32, 4)
        memcpy(r + AT_LOG, &log, 8)
        memcpy(r + AT_PUBLISH, &log, 8)
        memcpy(r + MSG_FIXED, PyBytes_AS_STRING(data), size)
        so[i] = seq
        oo[i] = pos
        frame_bytes += size
        pos += MSG_FIXED + size
    return taken, seq_a, off_a, frame_bytes


def index_records(uint8_t[::1] buf, Py_ssize_t count, bint packets):
    """Walks the ``count`` MCAP message records that fill ``buf`` (a chunk's
    records as :func:`append_records` or ``Transport.read_into`` with
    :func:`message_prefix` wrote them): returns ``(offsets, log_times,
    publish_times, plain)``, int64 arrays; a publish time of 2**63 or more
    reads as the record's log time.

    With ``packets`` (a chunk of an a0py packet channel), each record whose
    frame is a whole, valid packet with a standard block gets that block's
    ``a0_time_wall`` as its publish time, in ``buf`` and in the result;
    ``plain`` holds the offsets of the other records (their publish time may
    still be found in an ``a0_time_wall`` header). Without it, publish
    times are read as written and ``plain`` is empty. Raises ValueError if
    the records do not walk to exactly the end of ``buf`` in ``count`` steps."""
    cdef Py_ssize_t n = buf.shape[0], i = 0, nplain = 0
    cdef int64_t pos = 0
    cdef uint64_t length, log, pub
    cdef uint8_t* base = &buf[0] if n else NULL
    cdef const char* why = NULL
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    off_a = np.empty(count, np.int64)
    log_a = np.empty(count, np.int64)
    pub_a = np.empty(count, np.int64)
    plain_a = np.empty(count if packets else 0, np.int64)
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
            length = rd64(base + pos + AT_LENGTH)
            if length < <uint64_t>(MSG_FIXED - HDR) or length > <uint64_t>(n - pos - HDR):
                why = b"a record length past the end"
                break
            log = rd64(base + pos + AT_LOG)
            if packets:
                if std_wall(base + pos + MSG_FIXED, <int64_t>(length - <uint64_t>(MSG_FIXED - HDR)), &pub):
                    memcpy(base + pos + AT_PUBLISH, &pub, 8)
                else:
                    pub = rd64(base + pos + AT_PUBLISH)
                    plain[nplain] = pos
                    nplain += 1
            else:
                pub = rd64(base + pos + AT_PUBLISH)
            offs[i] = pos
            logs[i] = <int64_t>log
            pubs[i] = <int64_t>pub if pub < TOP_BIT else <int64_t>log
            pos += HDR + <int64_t>length
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
        length = rd64(&buf[pos] + AT_LENGTH)
        if length < <uint64_t>(MSG_FIXED - HDR) or length > <uint64_t>(end - pos - HDR):
            raise ValueError(f"record {i} at byte {pos} runs past the end")
        out.append(bytes(buf[pos + MSG_FIXED:pos + HDR + <int64_t>length]))
        pos += HDR + <int64_t>length
    if pos != end:
        raise ValueError(f"{count} records end at byte {pos}, not {end}")
    return out


def split_records(const uint8_t[::1] buf, const int64_t[::1] offsets, int payload_channel,
                  int headers_channel, bytearray payload_out=None, bytearray headers_out=None,
                  int headers_format=0):
    """Splits the packet message records of a closed chunk (``buf``, each
    record at ``offsets``, as :func:`index_records` found them and with their
    publish times filled in) into the records of a typed topic's two channels:
    ``payload_channel`` gets each packet's payload as its data, and
    ``headers_channel`` the packet cut at its payload (``payload_size`` 0):
    its id, standard block and headers, an a0py packet with an empty payload
    (``headers_format`` ``headers.FORMAT_PACKET``), or those fields as an
    ``a0py.PacketHeaders`` (``FORMAT_PROTOBUF``) or CDR
    ``a0py_msgs/msg/PacketHeaders`` (``FORMAT_CDR``). Both keep the record's
    sequence, log time and publish time.

    A frame that is not a valid packet goes whole to ``headers_channel`` (in
    a headers message flagged ``NOT_A_PACKET``) and gives no payload record. ``payload_out``, ``headers_out``: bytearrays to
    write the records into (grown if too small; a writer passes the same ones
    for every chunk, so their pages are not faulted in anew each time), new
    ones if None. Returns ``(payload_records, payload_used, payload_offsets,
    payload_index, headers_records, headers_used, headers_offsets)``: the two
    bytearrays with the bytes of records written at their start, the int64
    offsets of their records, and for each payload record the index in
    ``offsets`` of the record it came from (every record gives one headers
    record, in order: their times are the input's)."""
    cdef Py_ssize_t n = offsets.shape[0], i, np_ = 0, nh = 0
    cdef int64_t pos, size, psize = 0, hsize = 0, keep
    cdef uint64_t length
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef a0_packet_view_t v
    cdef const char* why = NULL
    for i in range(n):
        pos = offsets[i]
        if pos < 0 or pos + MSG_FIXED > buf.shape[0]:
            raise ValueError(f"record offset {pos} outside the chunk")
        length = rd64(base + pos + AT_LENGTH)
        size = <int64_t>length - (MSG_FIXED - HDR)
        if size < 0 or pos + MSG_FIXED + size > buf.shape[0]:
            raise ValueError(f"record at {pos} runs past the chunk")
        if a0_packet_view(base + pos + MSG_FIXED, <uint64_t>size, &v, NULL) == A0_OK:
            psize += MSG_FIXED + <int64_t>v.payload_size
            keep = <int64_t>(v.payload - v.base)
            hsize += MSG_FIXED + (keep if headers_format == F_PACKET else headers_msg_size(headers_format,
                                                                                              keep - INDEX_OFF))
        else:
            hsize += MSG_FIXED + (size if headers_format == F_PACKET else headers_msg_size(headers_format, size))
    pay = _room(payload_out, psize)
    hdr = _room(headers_out, hsize)
    poff_a = np.empty(n, np.int64)
    hoff_a = np.empty(n, np.int64)
    pidx_a = np.empty(n, np.int64)
    cdef int64_t[::1] po = poff_a
    cdef int64_t[::1] ho = hoff_a
    cdef int64_t[::1] pi = pidx_a
    cdef uint8_t* pb = <uint8_t*>PyByteArray_AS_STRING(pay)
    cdef uint8_t* hb = <uint8_t*>PyByteArray_AS_STRING(hdr)
    cdef uint16_t pch = <uint16_t>payload_channel, hch = <uint16_t>headers_channel
    cdef int64_t pp = 0, hp = 0
    cdef uint64_t zero = 0
    if headers_format != F_PACKET and headers_format != F_PROTOBUF and headers_format != F_CDR:
        raise ValueError(f"headers format {headers_format} is not one a0py writes")
    with nogil:
        for i in range(n):
            pos = offsets[i]
            size = <int64_t>rd64(base + pos + AT_LENGTH) - (MSG_FIXED - HDR)
            if a0_packet_view(base + pos + MSG_FIXED, <uint64_t>size, &v, NULL) == A0_OK:
                memcpy(pb + pp, base + pos, MSG_FIXED)
                length = <uint64_t>(MSG_FIXED - HDR) + v.payload_size
                memcpy(pb + pp + 1, &length, 8)
                memcpy(pb + pp + AT_CHANNEL, &pch, 2)
                memcpy(pb + pp + MSG_FIXED, v.payload, v.payload_size)
                po[np_] = pp
                pi[np_] = i
                np_ += 1
                pp += MSG_FIXED + <int64_t>v.payload_size
                keep = <int64_t>(v.payload - v.base)
                if headers_format == F_PACKET:
                    memcpy(hb + hp, base + pos, MSG_FIXED + keep)
                    memcpy(hb + hp + MSG_FIXED + PACKET_PAYLOAD_SIZE_AT, &zero, 8)
                else:
                    memcpy(hb + hp, base + pos, MSG_FIXED)
                    keep = write_headers_msg(hb + hp + MSG_FIXED, headers_format, base + pos + MSG_FIXED, keep, True)
            elif headers_format == F_PACKET:
                keep = size
                memcpy(hb + hp, base + pos, MSG_FIXED + keep)
            else:
                memcpy(hb + hp, base + pos, MSG_FIXED)
                keep = write_headers_msg(hb + hp + MSG_FIXED, headers_format, base + pos + MSG_FIXED, size, False)
            length = <uint64_t>(MSG_FIXED - HDR + keep)
            memcpy(hb + hp + 1, &length, 8)
            memcpy(hb + hp + AT_CHANNEL, &hch, 2)
            ho[nh] = hp
            nh += 1
            hp += MSG_FIXED + keep
    return pay, pp, poff_a[:np_], pidx_a[:np_], hdr, hp, hoff_a[:nh]


def gather_slices(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths):
    """Copies ``buf[starts[i] : starts[i] + lengths[i]]`` one after another
    into an Arrow binary array's buffers: ``(offsets, data)`` (an int32
    array of ``len(starts) + 1`` offsets, a bytearray). Raises ValueError
    for a range outside ``buf``, OverflowError past 2 GiB in all."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef int64_t total = buf.shape[0], size = 0
    for i in range(n):
        if starts[i] < 0 or lengths[i] < 0 or starts[i] > total or lengths[i] > total - starts[i]:
            raise ValueError(f"range {i} ({starts[i]}, {lengths[i]} bytes) is outside the buffer of {total} bytes")
        size += lengths[i]
    if size > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of data in one batch")
    off_a = np.empty(n + 1, np.int32)
    cdef int32_t[::1] off = off_a
    out = bytearray(size)
    cdef uint8_t* dst = <uint8_t*>PyByteArray_AS_STRING(out)
    cdef const uint8_t* base = &buf[0] if total else NULL
    cdef int64_t at = 0
    with nogil:
        for i in range(n):
            off[i] = <int32_t>at
            if lengths[i]:
                memcpy(dst + at, base + starts[i], lengths[i])
            at += lengths[i]
        off[n] = <int32_t>at
    return off_a, out


cdef bytearray _room(bytearray out, Py_ssize_t size):
    """`out` if it holds at least `size` bytes (grown to it otherwise), or a new
    bytearray of `size` bytes."""
    if out is None:
        return bytearray(size)
    if PyByteArray_GET_SIZE(out) < size:
        PyByteArray_Resize(out, size)
    return out
