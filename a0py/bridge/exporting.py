"""Local packets to Zenoh: :class:`PubsubExporter` (a local topic's pub/sub packets, in
batches, driven by an :class:`ExportLoop`; in bundle mode several topics' batches in
one sample, :class:`BundleWriter`) and :class:`LogCfgExporter` (a topic's log messages
or configuration versions, one a sample). Log messages and configuration versions are
packets in a ring as pub/sub packets are (a configuration version is a whole JSON
document), and travel the same way under their own keys; the far side writes them into
its topics (:mod:`a0py.bridge.importing`).

Invariants:

* The exporter sends only packets published on this machine: a packet carrying the
  :data:`~a0py.bridge.wire.ORIGIN` header arrived through a bridge and is never sent
  again. So every packet crosses the network once, from the bridge of the machine where
  it was published to each bridge subscribed to its key, whatever the topology, and no
  loop can form.
* Pub/sub packets are read raw from the ring and spliced, never decoded: the exporter
  only looks up the origin header in each packet's index (in the binding call that
  reads the batch).
* Topics present when the bridge starts are exported from their next packet (a
  restarted bridge sends nothing twice); topics that appear later are exported from
  their oldest packet (nothing published between the topic's creation and the bridge
  noticing it is left behind).
* Configurations: the exporter watches the newest version (intermediate versions
  written faster than it reads may be skipped, never reordered); a version that existed
  when the bridge started is not sent (two machines' different configurations are not
  swapped at start), only those written since.
* The export loop reads each woken topic once per wake-up, again before sleeping only if
  the read said more was waiting. It sleeps on the rings' ``notify_local`` words
  (``MultiWait(local=True)``), which every commit moves except those of relayed writers;
  the importer writes as one (:attr:`a0py._core.Transport.relayed`), so what this
  machine's bridge imports wakes every local reader but not its own exporter, and a
  local packet is read as soon as it is committed (plus the linger, if any).
* ``missed_local`` counts local packets the exporter never read, not the imported ones
  it had no reason to read: the exporter reads a ring only when a local packet woke it,
  so imported packets between are often overwritten first. Each time a read reaches the
  newest frame of the state it looked at, the frames since the previous such point are
  split by the state's ``relayed_frames`` count into relayed and local ones; the local
  ones it did not read (at most as many as its reads skipped) are the loss.
* Bundle mode (:class:`BundleWriter`): the batches an export loop reads in one wake-up,
  every topic's, go in one sample on the bridge's bundle key, a packet larger than a
  bundle in a bundle of its own; a topic's packets keep one numbering and one key, so
  they arrive in order.
* No arena lock is held across a Zenoh put (which may block under the block policy):
  the export loop reads without the lock, and user callbacks of a0py never run under
  one.
"""

import logging
import struct
import threading
import time

from .. import _core
from ..errors import A0TimeoutError, BufferTooSmallError, FrameEvictedError, PacketCorruptError
from ..proto.cfg import CfgWatcher
from ..proto.log import LogLevel, LogListener
from ..proto.pubsub import INIT_AWAIT_NEW, INIT_OLDEST
from ..proto.topic import CFG, PUBSUB, Topic, topic_arena
from .wire import (
    BUNDLE_SECTION,
    FRAME_PREFIX,
    ORIGIN,
    Attachment,
    BatchAttachmentWriter,
    BundleAttachmentWriter,
    bundle_key,
    key_of,
)

__all__ = ["MAX_LINGER", "BundleWriter", "ExportLoop", "LogCfgExporter", "PubsubExporter", "init_for"]

_log = logging.getLogger("a0py.bridge")

# A pub/sub batch holds at most this many packets and, past its first packet, this many
# bytes (Zenoh's own network batches are 64 KiB; a larger sample is fragmented).
_BATCH_FRAMES = 256
_BATCH_BYTES = 60 * 1024
# How often an idle export loop looks for exporters added meanwhile (it is also woken).
_EXPORT_IDLE_S = 0.5
#: The longest linger an export loop takes (seconds): past it, latency, not CPU, is what
#: a user would notice.
MAX_LINGER = 0.01


class PubsubExporter:
    """Sends one local topic's pub/sub packets to Zenoh in batches: whatever its ring
    holds past the bridge's cursor when the export loop looks (up to ``_BATCH_FRAMES``
    packets or ``_BATCH_BYTES`` bytes), read raw (no decoding) into one sample. Packets
    that came through a bridge are left out of the batch by the same binding call that
    reads it (:func:`a0py._core.read_packets_into`)."""

    def __init__(self, bridge, name, init):
        self.counts = bridge.counts_of(PUBSUB, name)
        self.name = name
        self._bridge = bridge
        self._seq = 0
        self.arena = topic_arena(Topic(name, root=bridge.root), PUBSUB, create=False)
        self._transport = _core.Transport(self.arena)
        with self._transport.lock() as t:
            # Where the count of local packets starts (see _account): the frames before
            # the first one this exporter reads are not its business.
            self._acc_seq, self._acc_relayed = t.seq_high, t.relayed_frames
            if init == INIT_AWAIT_NEW:
                if not t.empty:
                    t.jump_tail()
            elif not t.empty:
                # From the oldest: of the frames in the ring, as many as can be are taken
                # for relayed ones (a loss among them goes uncounted, none is made up).
                n = t.seq_high - t.seq_low + 1
                self._acc_seq = t.seq_low - 1
                self._acc_relayed = max(0, self._acc_relayed - n)
        self._acc_missed = 0
        self._kept = 0  # local packets read since the accounting point
        self.section_name = name.encode("utf-8")  # in a bundle (bundle mode)
        self._section = struct.Struct(f"{BUNDLE_SECTION.format}{len(self.section_name)}s")
        self._buf = bytearray(_BATCH_BYTES)
        self._big = None
        self._attachment = BatchAttachmentWriter(bridge.id_bytes, bridge.host)
        self._publisher = bridge.session.declare_publisher(
            key_of(bridge.prefix, PUBSUB, name), congestion_control=bridge.congestion_control)
        self.closed = False

    def pump(self):
        """Sends one batch; returns ``(read, more)``: how many packets it read (sent or,
        bridged ones, left out) and whether more may be waiting in the ring (a full
        batch was read, or another packet came meanwhile: the loop calls it again
        before it sleeps); `read` is negative when every packet read was a bridged one.
        On the export loop's thread only."""
        buf = self._buf
        try:
            read, kept, nbytes, more = _core.read_packets_into(
                self._transport, buf, ORIGIN, max_frames=_BATCH_FRAMES)
        except BufferTooSmallError:
            # One packet larger than a batch: a sample of its own.
            frames = self._read_big()
            read, kept, more = (0, 0, False) if frames is None else (1, frames, True)
            buf = self._big
            nbytes = len(buf) if kept else 0
        self._kept += kept
        self._account()
        if kept:
            payload = buf if nbytes == len(buf) else bytes(memoryview(buf)[:nbytes])
            try:
                # Zenoh copies the payload and the attachment into the sample
                self._publisher.put(payload, attachment=self._attachment.encode(self._seq + 1, kept))
            except Exception as e:  # zenoh's ZError: the session is closing
                _log.debug("bridge: export of %r stopped: %s", self.name, e)
                return 0, False
            self._seq += kept
            self.counts.exported += kept
            return read, more
        return -read, more

    def _account(self):
        """Counts as ``missed_local`` the local packets this exporter did not read, once
        its reads reached the newest frame of the state they looked at: of the frames
        since the previous such point, those not written by a relayed writer (the
        state's ``relayed_frames`` tells), less the local ones read, at most the frames
        the reads skipped (a packet published here with the origin header, read and
        not sent, is not a loss)."""
        tr = self._transport
        high, relayed = tr.read_snapshot
        if tr.cursor_seq != high or high <= self._acc_seq:
            return
        missed = tr.missed
        local = (high - self._acc_seq) - (relayed - self._acc_relayed)
        lost = min(local - self._kept, missed - self._acc_missed)
        if lost > 0:
            self.counts.missed_local += lost
        self._acc_seq, self._acc_relayed, self._acc_missed, self._kept = high, relayed, missed, 0


    def read_section(self, bundle, view, off):
        """Bundle mode: reads a batch as :meth:`pump` does into the bundle `bundle` (a
        bytearray; `view` a memoryview of it) after a section header that it writes at
        `off`, without sending it; returns ``(read, kept, end, more)`` as pump's, `end`
        the offset past the section (`off` when nothing was kept). The topic's numbers
        are taken: the caller sends the bundle. BufferTooSmallError (nothing read) when
        the next packet does not fit. On the export loop's thread only."""
        head = self._section
        start = off + head.size
        read, kept, nbytes, more = _core.read_packets_into(self._transport, view[start:], ORIGIN,
                                                           max_frames=_BATCH_FRAMES)
        self._kept += kept
        self._account()
        if not kept:
            return read, 0, off, more
        head.pack_into(bundle, off, self._seq + 1, nbytes, kept, len(self.section_name), self.section_name)
        self._seq += kept
        return read, kept, start + nbytes, more

    def read_big_section(self):
        """Bundle mode: the next packet, one larger than a bundle holds, as the only
        section of a bundle of its own (header, name, frame) in a buffer kept for the
        next one; returns ``(read, kept, payload, more)`` as :meth:`read_section`,
        `payload` that buffer (None when nothing was kept)."""
        head = self._section
        frames = self._read_big(head.size)
        if frames:
            self._kept += frames
        self._account()
        if not frames:  # none, or one that came through a bridge
            return (0, 0, None, False) if frames is None else (1, 0, None, True)
        head.pack_into(self._big, 0, self._seq + 1, len(self._big) - head.size, 1, len(self.section_name),
                       self.section_name)
        self._seq += 1
        return 1, 1, self._big, True

    def _read_big(self, room=0):
        """Reads the next frame, one larger than a batch, into a buffer kept for the next
        one (a camera's frames are all one size: no new buffer, and the buffer itself is
        the sample's payload), after `room` bytes left for a bundle section's header;
        returns 1, or 0 when the frame came through a bridge
        (looked up in place, in the ring: the bridge's own imports of large packets are
        passed over without a copy), None when there is none."""
        try:
            with self._transport.read_view(timeout=0) as frame:
                data = frame.data
                try:
                    bridged = _core.packet_has_header(data, ORIGIN)
                except PacketCorruptError:
                    bridged = False  # sent as it is: the far side counts it as corrupt
                if not bridged:
                    size = room + FRAME_PREFIX.size + frame.size
                    if self._big is None or len(self._big) != size:
                        self._big = bytearray(size)
                    FRAME_PREFIX.pack_into(self._big, room, frame.seq, frame.size)
                    # through a memoryview: one copy (a bytearray's slice assignment
                    # from a memoryview copies it into a new bytearray first)
                    memoryview(self._big)[room + FRAME_PREFIX.size:] = data
                del data
        except FrameEvictedError:
            return 0  # overwritten while it was read: missed, counted by the next read
        except A0TimeoutError:
            return None  # evicted since read_into saw it, and nothing newer
        return 0 if bridged else 1

    def close(self):
        self.closed = True
        try:
            self._publisher.undeclare()
        except Exception:  # the session closed first
            pass


class BundleWriter:
    """Bundle mode: what one wake-up of an export loop reads of every topic, in one
    sample on the bridge's bundle key (:func:`~a0py.bridge.wire.bundle_key`), as
    sections (:data:`~a0py.bridge.wire.BUNDLE_SECTION`) read in place into one buffer
    of ``_BATCH_BYTES``; a bundle is sent when the next topic's batch does not fit and
    at the end of the wake-up (:meth:`flush`). A packet larger than an empty bundle
    holds goes in a bundle of its own, its only section, on the same key: a topic's
    packets then all travel on one key and arrive in order (on a key of their own, the
    topic's per-topic key, they were seen overtaking bundles: the importer's
    subscribers each deliver on a thread of their own). On the export loop's thread
    only."""

    def __init__(self, bridge):
        self._buf = bytearray(_BATCH_BYTES)
        self._view = memoryview(self._buf)
        self._off = 0
        self._sections = []  # (exporter, packets) in the bundle being filled
        self._attachment = BundleAttachmentWriter(bridge.id_bytes, bridge.host)
        self._publisher = bridge.session.declare_publisher(
            bundle_key(bridge.prefix, bridge.id), congestion_control=bridge.congestion_control)

    def pump(self, exporter):
        """Reads `exporter`'s topic into the bundle; returns ``(read, more)`` as
        :meth:`PubsubExporter.pump`."""
        while True:
            try:
                read, kept, end, more = exporter.read_section(self._buf, self._view, self._off)
                break
            except BufferTooSmallError:
                if not self._sections:
                    # larger than a bundle holds: a bundle of its own, on the same key as
                    # the topic's other packets, so that they all arrive in order
                    read, kept, payload, more = exporter.read_big_section()
                    if kept:
                        self._put(payload, [(exporter, kept)])
                    return (read if kept else -read), more
                self.flush()
        if not kept:
            return -read, more
        self._off = end
        self._sections.append((exporter, kept))
        return read, more

    def flush(self):
        """Sends the bundle, if it holds anything."""
        if not self._sections:
            return
        sections, self._sections = self._sections, []
        payload = bytes(self._view[:self._off])
        self._off = 0
        self._put(payload, sections)

    def _put(self, payload, sections):
        try:
            # Zenoh copies the payload and the attachment into the sample
            self._publisher.put(payload, attachment=self._attachment.encode(len(sections)))
        except Exception as e:  # zenoh's ZError: the session is closing
            _log.debug("bridge: a bundle was not sent: %s", e)
            return
        for exporter, kept in sections:
            exporter.counts.exported += kept

    def close(self):
        try:
            self._publisher.undeclare()
        except Exception:  # the session closed first
            pass


class ExportLoop:
    """One thread that waits on the rings of up to ``MultiWait.capacity`` exported
    topics at once and sends what each holds (:meth:`PubsubExporter.pump`), one batch
    per topic per wake-up, again at once for the topics that had more. It sleeps on the
    rings' ``notify_local`` words, so the importer's writes (relayed) do not wake it;
    :attr:`wakeups` counts the waits that something ended before their timeout (a
    local commit, an exporter added or removed, close).

    `linger` (seconds, 0: none): after a wake-up, how long the loop waits for the
    other topics' packets before it reads, so that a publisher writing several topics
    at once costs one wake-up and Zenoh one write instead of one per topic; every
    packet then waits up to that long more (docs/bridge.md, "Latency and CPU").

    `bundle` (a :class:`BundleWriter`, bundle mode): the batches of one wake-up go in
    one sample instead of one per topic."""

    def __init__(self, linger=0.0, bundle=None):
        self._wait = _core.MultiWait(local=True)
        self.capacity = self._wait.capacity
        self.wakeups = 0
        self.linger = linger
        self._bundle = bundle
        self._lock = threading.Lock()
        self._exporters = {}  # id(arena) -> exporter
        self._changed = False
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="a0py-bridge-export", daemon=True)
        self._thread.start()

    def __len__(self):
        return len(self._exporters)

    def add(self, exporter):
        with self._lock:
            self._exporters[id(exporter.arena)] = exporter
            self._changed = True
        self._wait.wake()

    def remove(self, exporter):
        with self._lock:
            if self._exporters.get(id(exporter.arena)) is exporter:
                del self._exporters[id(exporter.arena)]
                self._changed = True
        self._wait.wake()

    def _run(self):
        by_arena = {}
        again = []
        # Between a wake-up and the read, as little Python as can be (each statement
        # costs microseconds on a CPU whose caches other processes filled meanwhile):
        # the lock only when the exporters changed (only this thread clears _changed),
        # C iterators rather than a comprehension's frame.
        bundle = self._bundle
        while not self._stop:
            if self._changed:
                with self._lock:
                    by_arena = dict(self._exporters)
                    self._wait.set_arenas([e.arena for e in by_arena.values()])
                    self._changed = False
            todo = list(map(by_arena.get, map(id, self._wait.changed())))
            if again:
                todo.extend(e for e in again if e not in todo)
                again = []
            sent = False
            for exporter in todo:
                if exporter is None or exporter.closed:
                    continue
                try:
                    read, more = exporter.pump() if bundle is None else bundle.pump(exporter)
                except Exception:
                    if not exporter.closed and not self._stop:
                        _log.exception("bridge: exporting %r", exporter.name)
                    continue
                if read > 0:
                    sent = True
                if more:
                    again.append(exporter)
            if bundle is not None:
                bundle.flush()
            if again or self._stop:
                continue
            if sent and self.linger:
                # Packets are flowing: sleep the linger and read what came meanwhile (one
                # timer wake-up per linger) rather than sleep on the futexes, be woken by
                # the next packet and then sleep the linger (two wake-ups per burst);
                # publishers meanwhile find no sleeper and make no wake call. A linger
                # that finds nothing to send goes back to the futex wait. A packet waits
                # at most the linger either way.
                time.sleep(self.linger)
                continue
            if self._wait.wait(_EXPORT_IDLE_S):
                self.wakeups += 1
                if self.linger:
                    time.sleep(self.linger)

    def close(self, timeout=5.0):
        self._stop = True
        self._wait.wake()
        self._thread.join(timeout)
        if self._bundle is not None and not self._thread.is_alive():
            self._bundle.close()


class LogCfgExporter:
    """Sends one local topic's log messages (`protocol` ``log``) or configuration
    versions (``cfg``) to Zenoh, one a sample (see the module doc). Pub/sub packets go
    in batches instead (:class:`PubsubExporter`)."""

    def __init__(self, bridge, protocol, name, init):
        self.counts = bridge.counts_of(protocol, name)
        self._bridge = bridge
        self._seq = 0
        self._after = 0
        # a configuration watcher skips to the newest version on purpose: not a loss
        self._count_missed = protocol != CFG
        topic = Topic(name, root=bridge.root)
        # Attached as it is, never created: a topic just discovered may still be being
        # made by its creator, with a size the bridge must not second-guess. The readers
        # below find this mapping in the process's arena cache.
        self._arena = topic_arena(topic, protocol, create=False)
        self._publisher = bridge.session.declare_publisher(
            key_of(bridge.prefix, protocol, name), congestion_control=bridge.congestion_control)
        if protocol == CFG:
            if init == INIT_AWAIT_NEW:  # a version present at start is not sent
                with _core.Transport(self._arena).lock() as t:
                    self._after = 0 if t.empty else t.seq_high
            self._subscriber = CfgWatcher(topic, self._on_packet)
        else:
            self._subscriber = LogListener(topic, LogLevel.DBG, self._on_packet, init=init)

    def _on_packet(self, pkt):
        if pkt.seq <= self._after:
            return
        if pkt.missed and self._count_missed:
            self.counts.missed_local += pkt.missed
        if ORIGIN in pkt.headers:
            return
        self._seq += 1
        att = Attachment(self._bridge.id_bytes, self._seq, self._bridge.host)
        try:
            self._publisher.put(pkt.to_bytes(), attachment=att.encode())
        except Exception as e:  # zenoh's ZError: the session is closing
            _log.debug("bridge: export of %r stopped: %s", self._subscriber.topic.name, e)
            return
        self.counts.exported += 1

    def close(self):
        self._subscriber.close()
        try:
            self._publisher.undeclare()
        except Exception:  # the session closed first
            pass


def init_for(existing):
    """Where the exporter of a topic starts: the next packet for a topic that existed
    when the bridge started, the oldest for one that appeared since."""
    return INIT_AWAIT_NEW if existing else INIT_OLDEST

