# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The importer's hot path, compiled: one call per Zenoh sample takes its
attachment and payload as they came off the network and writes the packets
they hold into the local topic's ring, each with the bridge headers added,
spliced straight into its frame. Python keeps only the lookup of the topic's
:class:`TopicIngest` by key (:class:`a0py.bridge.importing.Importer`).

Linked with the core's packet codec (``a0_packet_splice_size`` and
``a0_packet_splice``: a packet sized, then written where it will live), and
writing frames through the binding's ``Transport`` (its lock, ``_alloc`` and
commit), so no packet is copied between the sample and the ring.
The passes over a sample's packets, in C, are in ``_ingest_splice.pxi``.

A bundle (several topics' batches in one sample, bundle mode) is one call
too (:class:`BundleIngest`): its sections are walked and each handed to its
topic's :class:`TopicIngest` as a batch sample would be; Python is called only
the first time a topic name is seen (is it imported here?).

What it reads is the wire format of :mod:`a0py.bridge.wire` (attachments
``A0BB``, ``A0BR`` and ``A0BN``, the 16-byte prefix before each frame of a
batch, the 22-byte header before each section of a bundle); the Python
functions there stay the reference, and the tests compare the two on hostile
bytes.

Invariants (those of :mod:`a0py.bridge.importing`):

* Nothing received is trusted. The attachment's size is checked before any
  field is read, its host must be UTF-8; a batch's payload is walked prefix by
  prefix, each size compared with the bytes left, before any frame is used;
  each packet is checked by the core's decoder (layout, every header's
  bounds) when it is sized, and written only into a frame of exactly the size
  it was given (``a0_packet_splice`` refuses any other). A sample that fails
  is counted (``bad samples`` by the caller, ``corrupt``, ``too_large``),
  never written past a bound, never a crash. A bundle's sections are all
  walked, and their names all checked, before any is used: a bundle that
  fails is a bad sample and writes nothing; a section's batch is then
  checked as a batch sample's is, and counted on its topic.
* Per (exporting bridge, topic), a packet is written only if its number is
  above the last one written: a packet seen again is counted as
  ``duplicates`` (a batch partly seen included), a gap as ``lost``. The last
  numbers of at most :data:`MAX_ORIGINS` bridges are kept, the oldest first
  forgotten.
* A packet carrying ``a0py.bridge.origin`` is refused (``corrupt``): a
  bridge exports only packets published on its machine.
* A sample's packets are written with one lock and one commit, in order; on
  an error nothing of it is committed (``write_errors``). The topic's
  Transport is a relayed writer (:attr:`a0py._core.Transport.relayed`): its
  commits do not move the ring's ``notify_local`` word, so they do not wake
  this bridge's export loop. A configuration's
  versions are written holding its writers' lock (the opener gives it).
* Big copies release the GIL while the arena lock is held (the lock keeps
  the arena mapped); one :class:`TopicIngest` takes one call at a time.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport UINT64_MAX, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy, memset

from .._core cimport Transport
from ..includes.a0_arena cimport a0_check_info_t
from ..includes.a0_err cimport A0_ERR_CORRUPT, A0_ERR_FRAME_TOO_LARGE, A0_OK, a0_err_t, c_bool
from ..includes.a0_packet cimport (
    a0_packet_header_t,
    a0_packet_splice,
    a0_packet_splice_size,
    a0_packet_view,
    a0_packet_view_t,
    a0_u64_to_dec,
)
from ..includes.a0_transport cimport a0_locked_t

from ..errors import A0Error, ArgumentError, LockError
from .errors import WireError
from .wire import HOST, ORIGIN, SEQ

__all__ = ["BAD_SAMPLE", "INGESTED", "MAX_ORIGINS", "OWN", "REFUSED", "BundleIngest", "TopicIngest",
           "WRITE_FAILED"]

#: What :meth:`TopicIngest.ingest` returns: the sample was handled (its packets
#: written, or counted as duplicates).
INGESTED = 0
#: The sample was sent by this bridge's own session: ignored.
OWN = 1
#: The attachment is not a bridge's (nothing counted on the topic; the caller
#: counts a bad sample); ``error`` says why.
BAD_SAMPLE = 2
#: The topic could not be opened or written: counted as ``write_errors``;
#: ``error`` says why.
WRITE_FAILED = 3
#: Some or all packets were refused (not packets, bridged already, too large,
#: a batch that does not parse): counted; ``error`` says why.
REFUSED = 4

#: Exporting bridges whose last number a topic remembers (the oldest is
#: forgotten past this: bridges restarting forever cost bounded memory).
MAX_ORIGINS = 64

cdef enum:
    _N_ORIGINS = 64
    _ID = 16
    _MAX_HOST = 255
    _ATT = 28          # A0BR: magic, origin, number; then the host
    _BATCH_ATT = 32    # A0BB: magic, origin, first number, count; then the host
    _PREFIX = 16       # before each frame of a batch: its seq and size, u64 LE
    _NOGIL_BYTES = 65536
    _BUNDLE_ATT = 24   # A0BN: magic, origin, section count; then the host
    _SECTION = 22      # before each section of a bundle: first number, batch size, count, name size
    _MAX_NAMES = 4096  # topic names a BundleIngest remembers (all forgotten at once past this)

# How long a configuration's version waits for the writers' lock (a local
# writer holds it only while it merges one document).
cdef double _CFG_LOCK_S = 5.0


cdef struct _Origin:
    uint8_t id[16]
    uint64_t last    # the number of the last packet written
    uint64_t stamp   # when it was first seen (the smallest is forgotten first)


cdef bint _is_utf8(const uint8_t* p, Py_ssize_t n) except -1:
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            break
    else:
        return True
    try:
        PyUnicode_DecodeUTF8(<const char*>p, n, "strict")
    except UnicodeDecodeError:
        return False
    return True


include "_ingest_splice.pxi"


cdef class TopicIngest:
    """What the importer knows of one (protocol, topic) it imports: the last
    number written per exporting bridge, the topic's Transport once opened,
    its counters. `own` is this bridge's id (16 bytes): its own samples are
    ignored. `counts_of()` gives the topic's
    :class:`~a0py.bridge.counts.TopicCounts` (asked once, at the first sample
    with a valid attachment); `opener(frame_size)` opens (creating it if need
    be) the local topic for packets of up to `frame_size` bytes and returns
    ``(transport, writers_lock)``, the lock a
    :class:`~a0py._core.Deadman` to hold while writing (configurations) or
    None; A0Error from it is counted as ``write_errors``. The transport is
    made a relayed writer (``transport.relayed = True``) before its first
    write."""

    cdef uint8_t own[16]
    cdef _Origin origins[64]
    cdef uint32_t n_origins
    cdef uint64_t stamps
    cdef object counts_of
    cdef object opener
    cdef Transport transport
    cdef object writers_lock
    cdef bint busy
    cdef readonly object counts
    cdef readonly str error

    def __init__(self, own, counts_of, opener):
        if not isinstance(own, bytes) or len(own) != _ID:
            raise ArgumentError(f"own must be a bridge id of 16 bytes, not {own!r}")
        if not callable(counts_of) or not callable(opener):
            raise ArgumentError("counts_of and opener must be callables")
        memcpy(self.own, PyBytes_AS_STRING(own), _ID)
        self.counts_of = counts_of
        self.opener = opener
        self.n_origins = 0
        self.stamps = 0
        self.counts = None
        self.error = None

    def last_of(self, origin):
        """The number of the last packet written from the bridge `origin` (16
        bytes), or None if it is not remembered."""
        if not isinstance(origin, bytes) or len(origin) != _ID:
            raise ArgumentError(f"origin must be a bridge id of 16 bytes, not {origin!r}")
        cdef int i = self._find(<const uint8_t*>PyBytes_AS_STRING(origin))
        return None if i < 0 else self.origins[i].last

    @property
    def transport(self):
        """The local topic's Transport, None until the first packet opened it."""
        return self.transport

    cdef int _find(self, const uint8_t* origin) noexcept:
        cdef uint32_t i
        for i in range(self.n_origins):
            if memcmp(self.origins[i].id, origin, _ID) == 0:
                return <int>i
        return -1

    cdef int _bad_sample(self, str why) except -1:
        self.error = why
        return BAD_SAMPLE

    def ingest(self, payload, attachment):
        """Writes the packets of one sample (`payload`: bytes-like, as Zenoh
        gave it; `attachment`: bytes or None) into the topic; returns
        :data:`INGESTED`, :data:`OWN`, :data:`BAD_SAMPLE`,
        :data:`WRITE_FAILED` or :data:`REFUSED` (see the module doc); the
        counters are updated. LockError if called again while a call on this
        topic runs (the importer serializes them)."""
        if self.busy:
            raise LockError("TopicIngest.ingest called again while a call on the same topic runs")
        self.busy = True
        try:
            return self._ingest(payload, attachment)
        finally:
            self.busy = False

    cdef int _ingest(self, object payload, object attachment) except -1:
        cdef const uint8_t* att
        cdef Py_ssize_t att_len
        cdef uint64_t seq = 0, count = 1
        cdef uint32_t count32 = 0
        cdef const uint8_t* host
        cdef Py_ssize_t host_len
        cdef bint batch
        cdef Py_buffer buf

        # --- the attachment (wire.decode_attachment's rules)
        if attachment is None:
            return self._bad_sample("sample without attachment")
        if not isinstance(attachment, bytes):
            raise ArgumentError(f"attachment must be bytes or None, not {type(attachment).__name__}")
        att = <const uint8_t*>PyBytes_AS_STRING(attachment)
        att_len = PyBytes_GET_SIZE(attachment)
        batch = att_len >= 4 and memcmp(att, b"A0BB", 4) == 0
        if batch:
            if not _BATCH_ATT <= att_len <= _BATCH_ATT + _MAX_HOST:
                return self._bad_sample(f"batch attachment of {att_len} bytes")
            memcpy(&seq, att + 20, 8)
            memcpy(&count32, att + 28, 4)
            count = count32
            host = att + _BATCH_ATT
            host_len = att_len - _BATCH_ATT
            if not _is_utf8(host, host_len):
                return self._bad_sample("attachment host not UTF-8")
            if count == 0 or seq == 0:
                return self._bad_sample(f"batch attachment of {count} packets from number {seq}")
        else:
            if not _ATT <= att_len <= _ATT + _MAX_HOST:
                return self._bad_sample(f"attachment of {att_len} bytes")
            if memcmp(att, b"A0BR", 4) != 0:
                return self._bad_sample(f"attachment magic {attachment[:4]!r}")
            memcpy(&seq, att + 20, 8)
            host = att + _ATT
            host_len = att_len - _ATT
            if not _is_utf8(host, host_len):
                return self._bad_sample("attachment host not UTF-8")
        if seq > UINT64_MAX - (count - 1):
            return self._bad_sample(f"attachment numbers {seq} to {seq} + {count - 1} run past 2**64 - 1")
        if memcmp(att + 4, self.own, _ID) == 0:
            return OWN
        if self.counts is None:
            self.counts = self.counts_of()

        PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE)
        try:
            return self._ingest_frames(<const uint8_t*>buf.buf, <uint64_t>buf.len, batch, seq, count,
                                       att + 4, host, host_len)
        finally:
            PyBuffer_Release(&buf)

    cdef int _ingest_frames(self, const uint8_t* p, uint64_t total_len, bint batch, uint64_t seq,
                            uint64_t count, const uint8_t* origin, const uint8_t* host,
                            Py_ssize_t host_len) except -1:
        cdef uint64_t off = 0, sz, n = 0, first, last, skip = 0, end_number
        cdef int i
        cdef uint32_t k
        cdef uint64_t j
        counts = self.counts
        # --- the frames of a batch (wire.batch_frames's rules), walked before any is used
        if batch:
            while off < total_len:
                if total_len - off < _PREFIX:
                    return self._refuse_sample(count, f"batch cut inside a frame prefix at byte {off}")
                memcpy(&sz, p + off + 8, 8)
                off += _PREFIX
                if sz > total_len - off:
                    return self._refuse_sample(
                        count, f"batch frame of {sz} bytes at byte {off}, past the end ({total_len})")
                off += sz
                n += 1
            if n != count:
                return self._refuse_sample(count, f"batch of {n} frames, its attachment says {count}")
        else:
            n = 1

        # --- duplicates and gaps, per exporting bridge
        first = seq
        end_number = seq + n - 1  # cannot overflow: checked with the attachment
        i = self._find(origin)
        if i >= 0:
            last = self.origins[i].last
            if end_number <= last:
                counts.duplicates += n
                return INGESTED
            if first <= last:  # partly seen already
                skip = last - first + 1
                counts.duplicates += skip
                first = last + 1
            elif first > last + 1:
                counts.lost += first - last - 1
            self.origins[i].last = end_number
        else:
            if self.n_origins < _N_ORIGINS:
                i = <int>self.n_origins
                self.n_origins += 1
            else:
                i = 0
                for k in range(1, self.n_origins):
                    if self.origins[k].stamp < self.origins[i].stamp:
                        i = <int>k
            memcpy(self.origins[i].id, origin, _ID)
            self.origins[i].last = end_number
            self.stamps += 1
            self.origins[i].stamp = self.stamps
        off = 0
        for j in range(skip):  # the packets seen already
            _next_frame(p, &off, &sz, batch, total_len)
        return self._write(_PacketWalk(p=p, total_len=total_len, batch=batch, count=n - skip, off=off,
                                       number=first), origin, host, host_len)

    cdef int _write_failed(self, uint64_t n, a0_err_t err, str what) except -1:
        self.counts.write_errors += n
        try:
            self.transport._raise_for(err, what)
        except A0Error as e:
            self.error = str(e)
        return WRITE_FAILED

    cdef int _refuse_sample(self, uint64_t count, str why) except -1:
        self.counts.corrupt += count
        self.error = why
        return REFUSED

    cdef int _write(self, _PacketWalk packets, const uint8_t* origin, const uint8_t* host,
                    Py_ssize_t host_len) except -1:
        """Writes the sample's packets left to write, with the bridge headers,
        in three passes: each checked and sized without the lock (the topic is
        opened at its first packets); only if one is too large for the
        topic's arena, those that are counted and left out; the rest spliced
        into their frames under one lock."""
        cdef _BridgeHeaders x
        cdef _Survey found
        cdef uint64_t max_data, n_fit, written = 0
        cdef str why = None
        counts = self.counts
        _set_bridge_headers(&x, origin, host, host_len)
        _survey(packets, &x, &found)
        if found.corrupt:
            counts.corrupt += found.corrupt
            why = ("packet already bridged once" if found.first_refused
                   else _not_a_packet_reason(&found.first_info))
        if found.too_large:
            counts.too_large += found.too_large
            if why is None:
                why = "packet too large for the packet format"
        if found.ok == 0:
            self.error = why
            return REFUSED
        if self.transport is None and self._open_topic(found.biggest, found.ok) != 0:
            return WRITE_FAILED
        max_data = self.transport._max_frame_data()
        n_fit = found.ok
        if found.biggest > max_data:  # some are too large for this arena: counted, left out
            n_fit -= _count_too_large(packets, &x, max_data)
            counts.too_large += found.ok - n_fit
            why = why or f"packet larger than the topic's arena takes ({max_data} bytes)"
            if n_fit == 0:
                self.error = why
                return REFUSED
        if self._splice_locked(packets, &x, max_data, n_fit, &written) != 0:
            return WRITE_FAILED
        counts.imported += written
        if why is not None:
            self.error = why
            return REFUSED
        return INGESTED

    cdef int _open_topic(self, uint64_t biggest, uint64_t n_ok) except -1:
        """Opens the topic, at its first packets (`biggest`: the largest frame
        one of them takes): 0, or WRITE_FAILED (the `n_ok` packets counted,
        the error kept)."""
        try:
            transport, writers_lock = self.opener(biggest)
        except A0Error as e:
            self.counts.write_errors += n_ok
            self.error = str(e)
            return WRITE_FAILED
        if not isinstance(transport, Transport):
            raise ArgumentError(f"the opener must return (Transport, lock or None), not {transport!r}")
        # Every frame written here came from another machine: a relayed writer's
        # commits wake every reader as usual, but not this bridge's export loop,
        # which sleeps on the rings' notify_local words (Transport.relayed).
        transport.relayed = True
        self.transport = transport
        self.writers_lock = writers_lock
        return 0

    cdef int _splice_locked(self, _PacketWalk packets, _BridgeHeaders* x, uint64_t max_data,
                            uint64_t n_fit, uint64_t* written) except -1:
        """The third pass: the `n_fit` packets that fit spliced into their
        frames under one lock and one commit, holding the writers' lock if
        the topic has one. 0, or WRITE_FAILED (counted, the error kept,
        nothing of the sample committed)."""
        cdef a0_locked_t lk
        cdef a0_err_t err
        if self.writers_lock is not None:
            try:
                self.writers_lock.take(_CFG_LOCK_S)
            except A0Error as e:
                self.counts.write_errors += n_fit
                self.error = str(e)
                return WRITE_FAILED
        try:
            try:
                self.transport._acquire(&lk)
            except A0Error as e:
                self.counts.write_errors += n_fit
                self.error = str(e)
                return WRITE_FAILED
            if packets.total_len - packets.off >= _NOGIL_BYTES:
                with nogil:
                    err = _splice_all(self.transport, lk, packets, x, max_data, written)
            else:
                err = _splice_all(self.transport, lk, packets, x, max_data, written)
            if err == A0_OK and written[0] != n_fit:
                err = A0_ERR_CORRUPT  # the payload changed under the call (a bytearray written meanwhile)
            if err != A0_OK:
                self.transport._release(lk, False)  # nothing of this sample is committed
                return self._write_failed(n_fit, err, "writing to")
            err = self.transport._release(lk, True)
            if err != A0_OK:
                return self._write_failed(n_fit, err, "committing to")
        finally:
            if self.writers_lock is not None:
                self.writers_lock.release()
        return 0


cdef struct _SectionBounds:
    uint64_t first   # the number of its first packet
    uint64_t count
    uint64_t name_at
    uint64_t name_len
    uint64_t batch_at
    uint64_t batch_len


cdef class BundleIngest:
    """The importer's side of bundles (several topics' batches in one sample,
    :mod:`a0py.bridge.wire`): one call per bundle checks its attachment and
    its sections, finds each section's :class:`TopicIngest` and hands it the
    section's batch, as :meth:`TopicIngest.ingest` would a batch sample of
    that topic (the same checks, numbers and counts).

    `own` is this bridge's id (16 bytes); `resolve(name)` (`name`: a
    section's topic name, bytes) returns the topic's :class:`TopicIngest`,
    None when this bridge does not import the topic (the section is skipped,
    nothing counted), or raises :class:`~a0py.bridge.errors.WireError` when
    the name is not a topic's. Answers are remembered per name (at most
    4096, then all forgotten)."""

    cdef uint8_t own[16]
    cdef object resolve
    cdef dict topics_by_name  # section name (bytes) -> its TopicIngest, or None
    cdef bint busy
    cdef readonly str error
    cdef readonly object failures

    def __init__(self, own, resolve):
        if not isinstance(own, bytes) or len(own) != _ID:
            raise ArgumentError(f"own must be a bridge id of 16 bytes, not {own!r}")
        if not callable(resolve):
            raise ArgumentError("resolve must be a callable")
        memcpy(self.own, PyBytes_AS_STRING(own), _ID)
        self.resolve = resolve
        self.topics_by_name = {}
        self.error = None
        self.failures = ()

    def ingest(self, payload, attachment):
        """Writes the packets of one bundle (`payload`: bytes-like, as Zenoh
        gave it; `attachment`: bytes or None) into the topics it names that
        this bridge imports; returns :data:`INGESTED` (every section handed
        to its topic; ``failures`` lists ``(topic name, WRITE_FAILED or
        REFUSED, error)`` for those whose topic refused some packets or could
        not be written, counted on the topic), :data:`OWN` (sent by this
        bridge: ignored) or :data:`BAD_SAMPLE` (the attachment is not a
        bundle's, or its sections do not parse or name something that is
        not a topic: nothing written or counted on any topic, ``error`` says
        why; the caller counts a bad sample). LockError if called again
        while a call runs, or while a call on one of its topics runs."""
        if self.busy:
            raise LockError("BundleIngest.ingest called again while a call runs")
        self.busy = True
        self.failures = ()
        try:
            return self._ingest(payload, attachment)
        finally:
            self.busy = False

    cdef int _bad_sample(self, str why) except -1:
        self.error = why
        return BAD_SAMPLE

    cdef int _ingest(self, object payload, object attachment) except -1:
        cdef const uint8_t* att
        cdef Py_ssize_t att_len
        cdef uint32_t count32 = 0
        cdef Py_buffer buf
        if attachment is None:
            return self._bad_sample("bundle without attachment")
        if not isinstance(attachment, bytes):
            raise ArgumentError(f"attachment must be bytes or None, not {type(attachment).__name__}")
        att = <const uint8_t*>PyBytes_AS_STRING(attachment)
        att_len = PyBytes_GET_SIZE(attachment)
        if not _BUNDLE_ATT <= att_len <= _BUNDLE_ATT + _MAX_HOST:
            return self._bad_sample(f"bundle attachment of {att_len} bytes")
        if memcmp(att, b"A0BN", 4) != 0:
            return self._bad_sample(f"bundle attachment magic {attachment[:4]!r}")
        if not _is_utf8(att + _BUNDLE_ATT, att_len - _BUNDLE_ATT):
            return self._bad_sample("attachment host not UTF-8")
        memcpy(&count32, att + 20, 4)
        if count32 == 0:
            return self._bad_sample("bundle attachment of 0 sections")
        if memcmp(att + 4, self.own, _ID) == 0:
            return OWN
        PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE)
        try:
            return self._ingest_sections(<const uint8_t*>buf.buf, <uint64_t>buf.len, count32, att + 4,
                                         att + _BUNDLE_ATT, att_len - _BUNDLE_ATT)
        finally:
            PyBuffer_Release(&buf)

    cdef int _walk_sections(self, const uint8_t* p, uint64_t end, _SectionBounds* out,
                            uint64_t* n) except -1:
        """Walks the sections (wire.bundle_sections's rules), each bound
        checked before the next is read; fills `out` (room for *n, or none
        when NULL) and sets *n. BAD_SAMPLE (error set) or 0."""
        cdef uint64_t off = 0, first, size, k = 0
        cdef uint32_t count
        cdef uint16_t name_len
        while off < end:
            if end - off < _SECTION:
                return self._bad_sample(f"bundle cut inside a section header at byte {off}")
            memcpy(&first, p + off, 8)
            memcpy(&size, p + off + 8, 8)
            memcpy(&count, p + off + 16, 4)
            memcpy(&name_len, p + off + 20, 2)
            off += _SECTION
            if name_len == 0 or name_len > end - off:
                return self._bad_sample(f"bundle section name of {name_len} bytes at byte {off}, past the "
                                        f"end ({end})")
            if out != NULL:
                out[k].name_at = off
                out[k].name_len = name_len
            off += name_len
            if size > end - off:
                return self._bad_sample(f"bundle section batch of {size} bytes at byte {off}, past the "
                                        f"end ({end})")
            if count == 0 or first == 0 or first > UINT64_MAX - (count - 1):
                return self._bad_sample(f"bundle section of {count} packets from number {first}")
            if out != NULL:
                out[k].first = first
                out[k].count = count
                out[k].batch_at = off
                out[k].batch_len = size
            off += size
            k += 1
        n[0] = k
        return 0

    cdef object _topic_of(self, const uint8_t* name, uint64_t name_len):
        """The TopicIngest (or None) of a section's name; raises WireError."""
        key = PyBytes_FromStringAndSize(<const char*>name, <Py_ssize_t>name_len)
        topic = self.topics_by_name.get(key, False)
        if topic is False:
            topic = self.resolve(key)
            if topic is not None and not isinstance(topic, TopicIngest):
                raise ArgumentError(f"resolve must return a TopicIngest or None, not {topic!r}")
            if len(self.topics_by_name) >= _MAX_NAMES:
                self.topics_by_name.clear()
            self.topics_by_name[key] = topic
        return topic

    cdef int _ingest_sections(self, const uint8_t* p, uint64_t end, uint64_t expected,
                              const uint8_t* origin, const uint8_t* host, Py_ssize_t host_len) except -1:
        cdef uint64_t n = 0, k
        cdef _SectionBounds* sections
        cdef TopicIngest topic
        cdef int done
        if self._walk_sections(p, end, NULL, &n) != 0:
            return BAD_SAMPLE
        if n != expected:
            return self._bad_sample(f"bundle of {n} sections, its attachment says {expected}")
        # the bounds found by the walk are kept: the payload is not read again for them
        # after the Python calls below
        sections = <_SectionBounds*>PyMem_Malloc(n * sizeof(_SectionBounds))
        if sections == NULL:
            raise MemoryError()
        try:
            if self._walk_sections(p, end, sections, &n) != 0 or n != expected:
                return self._bad_sample("the bundle changed while it was read")
            topics = []
            for k in range(n):
                try:
                    topics.append(self._topic_of(p + sections[k].name_at, sections[k].name_len))
                except WireError as e:
                    return self._bad_sample(f"bundle section {k}: {e}")
            failures = None
            for k in range(n):
                if topics[k] is None:
                    continue
                topic = <TopicIngest>topics[k]
                if topic.busy:
                    raise LockError("BundleIngest.ingest reached a topic while a call on it runs")
                topic.busy = True
                try:
                    if topic.counts is None:
                        topic.counts = topic.counts_of()
                    done = topic._ingest_frames(p + sections[k].batch_at, sections[k].batch_len, True,
                                                sections[k].first, sections[k].count, origin, host,
                                                host_len)
                finally:
                    topic.busy = False
                if done != INGESTED:
                    if failures is None:
                        failures = []
                    failures.append(((<bytes>PyBytes_FromStringAndSize(
                        <const char*>p + sections[k].name_at, <Py_ssize_t>sections[k].name_len)).decode(
                            "utf-8", "replace"), done, topic.error))
            if failures is not None:
                self.failures = failures
            return INGESTED
        finally:
            PyMem_Free(sections)
