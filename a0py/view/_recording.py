"""The recording source: MCAP files played through the hub, with the
Foxglove protocol's ranged playback (play, pause, speed, seek) and time.

The files are planned from their summaries (or a scan of a file cut short)
by the MCAP reader of :mod:`a0py.recording.reader`: chunk byte ranges, time
ranges and channels, without reading message data. Chunks are read and
decompressed when playback or a seek reaches them, and kept in a small cache
bounded in bytes, so a recording of any size is served in bounded memory.

Channels: an ``a0py/packet`` channel (what ``a0py record`` writes: whole
a0py packets) becomes a topic whose payloads are judged like a live one
(JSON with an inferred schema, or bytes), and whose packets, headers
included, go to clients that asked for packets; any other channel (a
recording made by other tools) is advertised with its own encoding and
schema, and its messages are sent as they are.

Invariants:

* The playback clock is the recording's log time. Playing, it advances at
  ``speed`` times the monotonic clock; every message whose log time it
  passes is published once, in log-time order across channels.
* A seek publishes, for every channel, the last message at or before the
  new time (so a paused view shows that moment), after a playback state
  with ``did_seek`` that tells clients to forget what they had; messages
  still queued for a client from before the seek are discarded first.
* One tick publishes at most :data:`MAX_PER_TICK` messages; when a recording
  is denser than that at the chosen speed, playback slows rather than
  blocking the server.
"""

import asyncio
import collections
import os
import time

from ..recording.format import (
    MESSAGE_CHANNEL_AT,
    MESSAGE_FIXED,
    MESSAGE_LOG_TIME_AT,
    PACKET_ENCODING,
    RECORD_HEADER,
)
from . import _protocol as P
from ._schema import PayloadKind, kind_of
from ._server import ViewError

__all__ = ["RecordingSource"]

TICK = 0.02
TIME_PERIOD = 0.05
MAX_PER_TICK = 20_000
CACHE_BYTES = 64 << 20
SEEK_BACK_CHUNKS = 16
_TEXT_SCHEMAS = {"jsonschema", "ros1msg", "ros2msg", "ros2idl", "omgidl", ""}


def _mcap_reader():
    try:
        from ..recording import reader
        from ..recording.errors import RecordingFormatError
    except ImportError as e:
        raise ViewError(f"viewing recordings needs numpy, mcap, zstandard and lz4 ({e}): "
                        "pip install 'a0py[view]'") from None
    return reader, RecordingFormatError


def _recording_files(spec):
    spec = os.fspath(spec)
    if os.path.isdir(spec):
        files = sorted(os.path.join(d, f) for d, _, fs in os.walk(spec) for f in fs if f.endswith(".mcap"))
        if not files:
            raise ViewError(f"{spec}: no .mcap recording in this directory")
        return files
    if not os.path.exists(spec):
        raise ViewError(f"{spec}: no such file or directory (give an .mcap recording or a directory of them)")
    return [spec]


class _Recorded:
    """A recorded a0py packet: ``to_bytes()`` is the packet as recorded, the
    payload is decoded on first use."""

    __slots__ = ("_payload", "data")

    def __init__(self, data):
        self.data = data
        self._payload = None

    def to_bytes(self):
        return self.data

    @property
    def payload(self):
        if self._payload is None:
            from .._core import Packet

            try:
                self._payload = Packet.from_bytes(self.data).payload
            except Exception:  # a damaged packet shows as its raw bytes
                self._payload = self.data
        return self._payload


class _Raw:
    """A message of a foreign channel: sent as it is."""

    __slots__ = ("payload",)

    def __init__(self, data):
        self.payload = data

    def to_bytes(self):
        return self.payload


class _Decoded:
    """A chunk's messages sorted by log time: numpy arrays ``log``,
    ``chan`` (hub channel index), ``start``, ``stop`` into ``records``."""

    __slots__ = ("chan", "log", "records", "start", "stop")

    def __init__(self, records, log, chan, start, stop):
        self.records = records
        self.log = log
        self.chan = chan
        self.start = start
        self.stop = stop


class RecordingSource:
    """Plays MCAP files through a hub (``hub`` is set before ``run``). Made by
    :meth:`open`."""

    capabilities = (P.CAP_TIME, P.CAP_RANGED_PLAYBACK)

    def __init__(self, files, layouts):
        import numpy as np

        self._np = np
        self._mcap, self._format_error = _mcap_reader()
        self.files = files
        self.layouts = layouts
        self.hub = None
        self._fds = [os.open(f, os.O_RDONLY | os.O_CLOEXEC) for f in files]
        # Chunks of every file: (file index, ChunkRef); arrays of their time ranges.
        self.chunks = [(i, ref) for i, lay in enumerate(layouts) for ref in lay.chunks]
        if not self.chunks:
            raise ViewError(f"{files[0] if len(files) == 1 else os.path.dirname(files[0])}: the recording has no "
                            "message chunks (empty, or written without chunks)")
        self._starts = np.array([r.start_time for _, r in self.chunks], dtype=np.int64)
        self._ends = np.array([r.end_time for _, r in self.chunks], dtype=np.int64)
        self.data_range = (int(self._starts.min()), int(self._ends.max()))
        # (file index, MCAP channel id) -> channel slot; slots hold the topic and kind.
        self._slot_of = {}
        self._slots = []  # [topic, encoding, kind or None, hub channel or None, mcap channel]
        by_key = {}
        for i, lay in enumerate(layouts):
            for cid, ch in sorted(lay.channels.items()):
                schema = lay.schemas.get(ch.schema_id)
                key = (ch.topic, ch.message_encoding, schema.name if schema else "", schema.data if schema else b"")
                slot = by_key.get(key)
                if slot is None:
                    slot = by_key[key] = len(self._slots)
                    self._slots.append([ch.topic, ch.message_encoding, None, None, (ch, schema)])
                self._slot_of[(i, cid)] = slot
        self._cache = collections.OrderedDict()
        self._cache_bytes = 0
        self.time = self.data_range[0]
        self.speed = 1.0
        self.playing = False
        self.status = P.PLAYBACK_PAUSED
        self._anchor = (time.monotonic(), self.time)
        self._wake = asyncio.Event()
        self._last_time_sent = 0.0

    @classmethod
    def open(cls, spec):
        """The source for ``spec`` (an MCAP file or a directory of them).
        Raises :class:`ViewError` (missing, not MCAP, damaged, no chunks)."""
        mcap, format_error = _mcap_reader()
        files = _recording_files(spec)
        layouts = []
        for f in files:
            try:
                layouts.append(mcap.read_layout(f))
            except format_error as e:
                raise ViewError(str(e)) from None
            except OSError as e:
                raise ViewError(f"{f}: cannot read it: {e.strerror or e}") from None
        return cls(files, layouts)

    def close(self):
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    # -- chunks --

    def _decoded(self, k):
        """Chunk k decoded (cached, least recently used evicted first)."""
        hit = self._cache.get(k)
        if hit is not None:
            self._cache.move_to_end(k)
            return hit
        np, mcap = self._np, self._mcap
        fi, ref = self.chunks[k]
        path = self.files[fi]
        try:
            records = mcap.read_chunk_records(self._fds[fi], ref, path)
            index = mcap.read_message_index(self._fds[fi], ref, path)
            offs, _others = mcap.message_offsets(records, index, path, ref.offset)
        except self._format_error as e:
            self.hub.broadcast_control(P.status(P.STATUS_ERROR, f"recording: {e} (chunk skipped)"))
            offs = np.empty(0, np.int64)
            records = b""
        offs = np.asarray(offs, dtype=np.int64)
        if len(offs):
            u16, _u32, u64 = mcap.u_views(records)
            mcap_chan = u16[offs + MESSAGE_CHANNEL_AT]
            log = u64[offs + MESSAGE_LOG_TIME_AT].astype(np.int64)
            length = u64[offs + 1].astype(np.int64)
            slot_map = np.full(int(mcap_chan.max()) + 1, -1, np.int64)
            for (f, cid), slot in self._slot_of.items():
                if f == fi and cid < len(slot_map):
                    slot_map[cid] = slot
            chan = slot_map[mcap_chan]
            order = np.argsort(log, kind="stable")
            keep = order[chan[order] >= 0]
            dec = _Decoded(records, log[keep], chan[keep], (offs + MESSAGE_FIXED)[keep],
                           (offs + RECORD_HEADER + length)[keep])
        else:
            e = np.empty(0, np.int64)
            dec = _Decoded(records, e, e, e, e)
        self._cache[k] = dec
        self._cache_bytes += len(records)
        while self._cache_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= len(old.records)
        return dec

    def _message(self, slot, dec, j):
        data = bytes(memoryview(dec.records)[int(dec.start[j]):int(dec.stop[j])])
        return _Recorded(data) if self._slots[slot][1] == PACKET_ENCODING else _Raw(data)

    # -- channels --

    def _channel(self, slot, msg=None):
        """The hub channel of ``slot``, advertised on first use (an a0py
        packet channel is judged from its first message)."""
        s = self._slots[slot]
        if s[3] is not None:
            return s[3]
        topic, encoding, _kind, _, (_ch, schema) = s
        if encoding == PACKET_ENCODING:
            if msg is None:
                msg = self._first_message(slot)
            if msg is None:
                return None
            try:
                from .._core import Packet

                pkt = Packet.from_bytes(msg.data)
                kind = kind_of(topic, pkt.payload, pkt.headers)
            except Exception:
                kind = kind_of(topic, b"")
            packets = True
        else:
            sname = schema.name if schema else ""
            senc = schema.encoding if schema else ""
            data = schema.data if schema else b""
            if senc in _TEXT_SCHEMAS:
                text = data.decode("utf-8", "replace")
            else:
                import base64

                text = base64.b64encode(data).decode("ascii")
            kind = PayloadKind(encoding, sname, text, senc or None)
            packets = False
        s[2] = kind
        s[3] = self.hub.add_channel(topic, kind, packets=packets)
        return s[3]

    def _first_message(self, slot):
        for k in self._np.argsort(self._starts, kind="stable"):
            dec = self._decoded(int(k))
            hits = self._np.nonzero(dec.chan == slot)[0]
            if len(hits):
                return self._message(slot, dec, int(hits[0]))
        return None

    # -- playback --

    def _window(self, a, b):
        """Messages with a < log time <= b, in log-time order: [(log, slot, dec, j)]."""
        np = self._np
        ks = np.nonzero((self._ends > a) & (self._starts <= b))[0]
        out = []
        for k in ks:
            dec = self._decoded(int(k))
            lo = int(np.searchsorted(dec.log, a, side="right"))
            hi = int(np.searchsorted(dec.log, b, side="right"))
            out.extend((int(dec.log[j]), int(dec.chan[j]), dec, j) for j in range(lo, hi))
        if len(ks) > 1:
            out.sort(key=lambda m: m[0])
        return out

    def _publish(self, items):
        hub = self.hub
        for log, slot, dec, j in items:
            msg = self._message(slot, dec, j)
            ch = self._channel(slot, msg)
            if ch is not None:
                hub.publish(ch, log, msg, size=len(msg.to_bytes()))

    def _latest_at(self, t):
        """For every slot, its last message at or before t (looking back at
        most :data:`SEEK_BACK_CHUNKS` chunks)."""
        np = self._np
        found = {}
        order = np.argsort(-self._starts, kind="stable")
        candidates = [int(k) for k in order if self._starts[k] <= t]
        remaining = set(range(len(self._slots)))
        looked = 0
        for k in candidates:
            ids = self.chunks[k][1].channel_ids
            fi = self.chunks[k][0]
            if ids is not None and not any(self._slot_of.get((fi, c)) in remaining for c in ids):
                continue
            dec = self._decoded(k)
            hi = int(np.searchsorted(dec.log, t, side="right"))
            chan = dec.chan[:hi]
            for slot in list(remaining):
                idx = np.flatnonzero(chan == slot)
                if len(idx):
                    j = int(idx[-1])
                    found[slot] = (int(dec.log[j]), slot, dec, j)
            remaining -= set(found)
            looked += 1
            if not remaining or looked >= SEEK_BACK_CHUNKS * max(1, len(self._slots)):
                break
        return sorted(found.values(), key=lambda m: m[0])

    def state_frame(self, did_seek=False, request_id=None):
        return P.playback_state(self.status, self.time, self.speed, did_seek, request_id)

    def _broadcast_state(self, did_seek=False, request_id=None):
        frame = self.state_frame(did_seek, request_id)
        for client in self.hub.clients:
            if did_seek:
                client.data.clear()
                client.pending.clear()
                client.data_bytes = 0
            client.put_control(frame)
        self._send_time(force=True)

    def _send_time(self, force=False):
        now = time.monotonic()
        if force or now - self._last_time_sent >= TIME_PERIOD:
            self._last_time_sent = now
            frame = P.time_message(self.time)
            for client in self.hub.clients:
                client.put_latest("time", frame)

    def seek(self, t, request_id=None):
        lo, hi = self.data_range
        t = min(max(int(t), lo), hi)
        self.time = t
        self._anchor = (time.monotonic(), t)
        if self.status == P.PLAYBACK_ENDED and t < hi:
            self.status = P.PLAYBACK_PAUSED
        self._broadcast_state(did_seek=True, request_id=request_id)
        self._publish(self._latest_at(t))

    def control(self, req):
        """A playback control request from a client (see the protocol)."""
        self.speed = float(req.speed)
        if req.seek_time is not None:
            self.playing = req.command == P.PLAY
            self.status = P.PLAYBACK_PLAYING if self.playing else P.PLAYBACK_PAUSED
            self.seek(req.seek_time, req.request_id)
        else:
            if req.command == P.PLAY:
                if self.time >= self.data_range[1]:
                    self.seek(self.data_range[0])  # play again from the start
                self.playing = True
                self.status = P.PLAYBACK_PLAYING
            else:
                self.playing = False
                self.status = P.PLAYBACK_PAUSED
            self._anchor = (time.monotonic(), self.time)
            self._broadcast_state(request_id=req.request_id)
        self._wake.set()

    async def run(self):
        self.seek(self.data_range[0])
        try:
            while True:
                if not self.playing:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                mono, t0 = self._anchor
                now = time.monotonic()
                target = min(self.data_range[1], t0 + int((now - mono) * self.speed * 1e9))
                items = self._window(self.time, target)
                if len(items) > MAX_PER_TICK:
                    items = items[:MAX_PER_TICK]
                    target = items[-1][0]
                    self._anchor = (now, target)
                self._publish(items)
                self.time = target
                if target >= self.data_range[1]:
                    self.playing = False
                    self.status = P.PLAYBACK_ENDED
                    self._broadcast_state()
                else:
                    self._send_time()
                await asyncio.sleep(TICK)
        finally:
            self.close()
