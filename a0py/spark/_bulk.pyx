# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled bulk decoding of a0py packets (the fast path of a0py.spark._packets).

Many packets lying in one buffer are checked and indexed in one pass
(:func:`scan`), then the kept ones are copied into the contiguous buffers of
Arrow arrays in a second (:func:`gather`): keys, values and payloads, with
their 32-bit offsets, ready for ``pyarrow.Array.from_buffers``.

Invariants (the same as the C decoder, csrc/a0_packet.c, and as the numpy
path in _packets.py, which the tests compare with this one):

* Nothing is read outside ``buf``: a packet's fixed header is read only when
  its length covers it, an index entry only when it lies before
  ``payload_off`` (itself checked against the length), a string only when it
  lies inside the strings area with its NUL.
* In strict mode the first packet that fails a check stops the scan and is
  reported (index and reason); otherwise it is marked invalid and skipped.
* Integers are read with memcpy (packets in a chunk are not aligned).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

import numpy as np

cdef uint32_t MAGIC = 0x4B503041
cdef uint32_t HDR = 48
cdef uint32_t ENTRY = 16

cdef const char* K_SEQ = b"a0_transport_seq"
cdef const char* K_MONO = b"a0_time_mono"
cdef const char* K_WALL = b"a0_time_wall"


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


cdef int check_one(const uint8_t* p, int64_t size, uint32_t* count_out, uint64_t* poff_out,
                   const char** why) noexcept nogil:
    """0 if the packet at p (size bytes) passes every check, else 1 and *why."""
    cdef uint32_t count, i, ko, kl, vo, vl
    cdef uint64_t poff, psize, index_end
    cdef const uint8_t* e
    if size < HDR:
        why[0] = b"shorter than the 48-byte packet header"
        return 1
    if rd32(p) != MAGIC:
        why[0] = b"field magic"
        return 1
    if rd16(p + 4) != 1:
        why[0] = b"field version"
        return 1
    if rd16(p + 6) != 0:
        why[0] = b"field flags"
        return 1
    if rd32(p + 28) != 0:
        why[0] = b"field reserved"
        return 1
    count = rd32(p + 24)
    poff = rd64(p + 32)
    psize = rd64(p + 40)
    index_end = <uint64_t>HDR + <uint64_t>ENTRY * count
    if poff < index_end or poff % 16 != 0 or poff > <uint64_t>size:
        why[0] = b"field payload_off"
        return 1
    if psize != <uint64_t>size - poff:
        why[0] = b"field payload_size"
        return 1
    for i in range(count):
        e = p + HDR + ENTRY * i
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
    poff_out[0] = poff
    return 0


def scan(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths, bint strict=True,
         bint want_mono=True):
    """Checks and indexes packets ``buf[starts[i] : starts[i] + lengths[i]]``.

    Returns ``(error, valid, count, seq, seq_have, mono, mono_have, wall,
    wall_have)``: ``error`` is None or ``(i, reason)`` (strict mode: the scan
    stopped at packet i); arrays of n entries (uint8 flags, int64 values)
    for the first ``a0_transport_seq``, ``a0_time_mono`` and
    ``a0_time_wall`` headers parsed as integers."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef int64_t start, size
    cdef uint32_t count, j, kl, vl, ko, vo
    cdef uint64_t poff
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef const char* why = NULL
    cdef bint got_seq, got_mono, got_wall
    cdef int64_t bad = -1
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
    cdef int64_t total = buf.shape[0]
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
            if check_one(p, size, &count, &poff, &why):
                if strict:
                    bad = i
                    break
                continue
            valid[i] = 1
            counts[i] = count
            got_seq = got_mono = got_wall = False
            for j in range(count):
                e = p + HDR + ENTRY * j
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


def gather(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] lengths,
           const int64_t[::1] counts):
    """Copies the headers and payloads of packets already passed by
    :func:`scan` into Arrow buffers: ``(map_offsets, key_offsets, key_data,
    value_offsets, value_data, payload_offsets, payload_data)`` (int32 offset
    arrays, bytearray data). Raises OverflowError past 2 GiB of one kind."""
    cdef Py_ssize_t n = starts.shape[0], i
    cdef uint32_t j, count
    cdef int64_t e_total = 0, kbytes = 0, vbytes = 0, pbytes = 0
    cdef const uint8_t* base = &buf[0] if buf.shape[0] else NULL
    cdef const uint8_t* p
    cdef const uint8_t* e
    cdef uint64_t poff
    for i in range(n):
        e_total += counts[i]
        p = base + starts[i]
        for j in range(<uint32_t>counts[i]):
            e = p + HDR + ENTRY * j
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
            count = <uint32_t>counts[i]
            for j in range(count):
                e = p + HDR + ENTRY * j
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
