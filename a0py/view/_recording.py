"""The recording source: MCAP files played through the hub, with the
Foxglove protocol's playback control (play, pause, speed, seek) and time.

The files are planned from their summaries (or a scan of a file cut short)
by the MCAP reader of :mod:`a0py.recording.reader`: chunk byte ranges, time
ranges and channels, without reading message data. Chunks are read and
decompressed when playback or a seek reaches them, and kept in a small cache
bounded in bytes, so a recording of any size is served in bounded memory.

Channels: an ``a0py/packet`` channel (what ``a0py record`` writes: whole
a0py packets) becomes a topic whose payloads are judged like a live one
(JSON with an inferred schema, or bytes) from its first message, and whose
packets, headers included, go to clients that asked for packets; any other
channel (a typed topic's payloads, a recording made by other tools) is
advertised with its own encoding and schema (:mod:`a0py.view._typed`), and
its messages are sent as they are. A typed topic's headers channel
(``/a0py/headers/T``, the rest of its packets) is not shown.

Invariants:

* Every channel of the recording is advertised before any client connects
  (:meth:`RecordingSource.attach`), whatever the playback time: finding the
  first message of a packet channel reads, through the chunk indexes, at
  most one chunk per channel (without indexes, at most
  :data:`FIRST_SCAN_CHUNKS` chunks; a channel not found by then, or without
  messages, is advertised as bytes).
* One clock: the playback clock is the recording's log time, and it is
  the time of everything sent: message data (each message's log time),
  ``time`` messages, playback states, the stats channel. Playing, it
  advances at ``speed`` times the monotonic clock; every message whose log
  time it passes is published once, in log-time order across channels, and
  a ``time`` message follows the messages it covers in each client's queue.
* Playback control as foxglove-sdk's reference server does it: each
  request is answered by exactly one playback state carrying its request id,
  sent to every client; a seek is clamped to the recording's range and
  answered with ``did_seek``; play and pause do not leave the ended state
  (a seek does: to paused, or playing if the command was play); a state
  change of the server's own (the end reached) has no request id.
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
import dataclasses
import glob
import itertools
import os
import time

from ..recording.format import KIND_HEADERS, PACKET_ENCODING, channel_kind
from . import _protocol as P
from ._schema import kind_of
from ._typed import kind_of_schema
from .errors import ViewError

__all__ = ["RecordingSource"]

FIRST_SCAN_CHUNKS = 64
# Series requests a client may have waiting; they are served one at a time.
MAX_SERIES_PENDING = 4
TICK = 0.02
TIME_PERIOD = 0.05
MAX_PER_TICK = 20_000
CACHE_BYTES = 64 << 20
SEEK_BACK_CHUNKS = 16


def _mcap_reader():
    try:
        from ..recording import reader
        from ..recording.errors import RecordingFormatError
    except ImportError as e:
        raise ViewError(f"viewing recordings needs numpy, mcap, zstandard and lz4 ({e}): "
                        "pip install 'a0py[view]'") from None
    return reader, RecordingFormatError


def _recording_files(spec):
    """The MCAP files ``spec`` names, as every reader of recordings finds them
    (:func:`a0py.recording.reader.expand_paths`: a directory's files by path, a
    rosbag2 bag's in its metadata's order, globs)."""
    spec = os.path.expanduser(os.fspath(spec))
    if not os.path.exists(spec) and not glob.has_magic(spec):
        raise ViewError(f"{spec}: no such file or directory (give an .mcap recording, a rosbag2 bag "
                        "or a directory of them)")
    reader, error = _mcap_reader()
    from ..recording.errors import RecordingOptionError

    try:
        files = [f for f in reader.expand_paths(spec) if not f.startswith(reader.SHM_PREFIX)]
    except (error, RecordingOptionError) as e:
        raise ViewError(str(e)) from None
    if not files:
        raise ViewError(f"{spec}: no .mcap recording here")
    return files


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


@dataclasses.dataclass(slots=True, eq=False)
class _Decoded:
    """A chunk's messages sorted by log time: numpy arrays ``log``,
    ``chan`` (hub channel index), ``start``, ``stop`` into ``records``."""

    records: object
    log: object
    chan: object
    start: object
    stop: object


class RecordingSource:
    """Plays MCAP files through a hub (``hub`` is set before ``run``). Made by
    :meth:`open`."""

    capabilities = (P.CAP_PLAYBACK_CONTROL, P.CAP_TIME)

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
                if channel_kind(ch) == KIND_HEADERS:
                    continue  # the rest of a typed topic's packets: not messages of their own
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
        self.status = P.PLAYBACK_PAUSED
        self._anchor = (time.monotonic(), self.time)
        self._wake = asyncio.Event()
        self._last_time_sent = 0.0
        self._slot_of_channel = {}  # hub channel id -> slot
        self._series_lock = asyncio.Lock()
        self._series_pending = collections.Counter()  # client -> requests waiting

    @classmethod
    def open(cls, spec):
        """The source for ``spec`` (an MCAP file or a directory of them).
        Raises :class:`ViewError` (missing, not MCAP, damaged, no chunks)."""
        mcap, format_error = _mcap_reader()
        files = _recording_files(spec)
        layouts = []
        kept = []
        for f in files:
            try:
                lay = mcap.read_layout_or_skip(f) if len(files) > 1 else mcap.read_layout(f)
                if lay is not None:
                    layouts.append(lay)
                    kept.append(f)
            except format_error as e:
                raise ViewError(str(e)) from None
            except OSError as e:
                raise ViewError(f"{f}: cannot read it: {e.strerror or e}") from None
        if not kept:
            raise ViewError(f"{spec}: every file of the recording is empty (no record yet)")
        return cls(kept, layouts)

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
            from ..recording.message_fields import MessageFields  # needs numpy, as reader does

            fields = MessageFields(records)
            mcap_chan = fields.channel_id(offs)
            log = fields.log_time(offs).astype(np.int64)
            length = fields.body_length(offs)
            slot_map = np.full(int(mcap_chan.max()) + 1, -1, np.int64)
            for (f, cid), slot in self._slot_of.items():
                if f == fi and cid < len(slot_map):
                    slot_map[cid] = slot
            chan = slot_map[mcap_chan]
            order = np.argsort(log, kind="stable")
            keep = order[chan[order] >= 0]
            dec = _Decoded(records, log[keep], chan[keep], fields.data_start(offs)[keep],
                           fields.data_end(offs, length)[keep])
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

    def attach(self, hub):
        """Feeds ``hub`` and advertises every channel of the recording on it
        (before any client connects)."""
        self.hub = hub
        firsts = self._first_messages()
        for slot in sorted(range(len(self._slots)), key=lambda i: self._slots[i][0]):
            s = self._slots[slot]
            topic, encoding, _kind, _, (_ch, schema) = s
            if encoding == PACKET_ENCODING:
                kind = kind_of(topic, b"")
                first = firsts.get(slot)
                if first is not None:
                    try:
                        from .._core import Packet

                        pkt = Packet.from_bytes(first.data)
                        kind = kind_of(topic, pkt.payload, pkt.headers)
                    except Exception:  # a damaged packet: the channel shows as bytes
                        pass
                packets = True
            else:
                kind = kind_of_schema(topic, schema.name if schema else "", schema.encoding if schema else "",
                                      schema.data if schema else b"", encoding)
                packets = False
            s[2] = kind
            s[3] = hub.add_channel(topic, kind, packets=packets)
            self._slot_of_channel[s[3].id] = slot

    def _chunk_has(self, k, slots):
        """Whether chunk k may hold a message of one of ``slots`` (True
        when it has no message index to tell)."""
        fi, ref = self.chunks[k]
        ids = ref.channel_ids
        return ids is None or any(self._slot_of.get((fi, c)) in slots for c in ids)

    def _first_messages(self):
        """{slot: its first message} for the a0py packet channels (see the
        invariants for what is read)."""
        np = self._np
        need = {i for i, s in enumerate(self._slots) if s[1] == PACKET_ENCODING}
        found = {}
        blind = 0
        for k in np.argsort(self._starts, kind="stable"):
            if not need:
                break
            k = int(k)
            if self.chunks[k][1].channel_ids is None:
                blind += 1
                if blind > FIRST_SCAN_CHUNKS:
                    break
            elif not self._chunk_has(k, need):
                continue
            dec = self._decoded(k)
            for slot in list(need):
                hits = np.flatnonzero(dec.chan == slot)
                if len(hits):
                    found[slot] = self._message(slot, dec, int(hits[0]))
                    need.discard(slot)
        return found

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
        slots = self._slots
        for log, slot, dec, j in items:
            msg = self._message(slot, dec, j)
            hub.publish(slots[slot][3], log, msg, size=len(msg.to_bytes()))

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

    def now(self):
        """The playback clock (ns of the recording's log time)."""
        return self.time

    def state_frame(self, did_seek=False, request_id=None):
        return P.playback_state(self.status, self.time, self.speed, did_seek, request_id)

    def greeting(self):
        """What a new client gets after the advertise: the playback state
        and the time."""
        return [self.state_frame(), P.time_message(self.time)]

    def _broadcast_state(self, did_seek=False, request_id=None):
        frame = self.state_frame(did_seek, request_id)
        for client in self.hub.clients:
            if did_seek:
                client.data.clear()
                client.pending.clear()
            client.put_control(frame)

    def _send_time(self, force=False):
        # In the data queue, after the messages it covers (see the invariants).
        now = time.monotonic()
        if force or now - self._last_time_sent >= TIME_PERIOD:
            self._last_time_sent = now
            frame = P.time_message(self.time)
            for client in self.hub.clients:
                client.put_data(frame)

    def control(self, req):
        """A playback control request from a client: answered by one playback
        state with its request id, sent to every client (see the invariants)."""
        lo, hi = self.data_range
        self.speed = float(req.speed)
        did_seek = req.seek_time is not None
        if did_seek:
            self.time = min(max(int(req.seek_time), lo), hi)
            if self.status == P.PLAYBACK_ENDED:
                self.status = P.PLAYBACK_PAUSED
        if self.status != P.PLAYBACK_ENDED:
            self.status = P.PLAYBACK_PLAYING if req.command == P.PLAY else P.PLAYBACK_PAUSED
        self._anchor = (time.monotonic(), self.time)
        self._broadcast_state(did_seek, req.request_id)
        if did_seek:
            # Each channel's last message at or before the new time, so a paused view shows that moment.
            self._publish(self._latest_at(self.time))
        self._send_time(force=True)
        self._wake.set()

    async def run(self):
        # Each channel's message at the very start, kept as its latest: a client
        # that subscribes while paused there gets it at once.
        self._publish(self._latest_at(self.time))
        try:
            while True:
                if self.status != P.PLAYBACK_PLAYING:
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
                    self.status = P.PLAYBACK_ENDED
                    self._broadcast_state()
                    self._send_time(force=True)
                else:
                    self._send_time()
                await asyncio.sleep(TICK)
        finally:
            self.close()

    # -- series (the page's plot over the whole recording) --

    def fetch_series(self, client, ch, req):
        """Starts answering an ``a0py.fetchSeries`` request of ``client`` for
        channel ``ch`` (served one at a time; at most
        :data:`MAX_SERIES_PENDING` waiting per client)."""
        if self._series_pending[client] >= MAX_SERIES_PENDING:
            raise P.ProtocolError(f"a0py.fetchSeries: request {req.request_id} refused: {MAX_SERIES_PENDING} "
                                  "series requests of this client are still being served")
        self._series_pending[client] += 1
        self.hub.loop.create_task(self._serve_series(client, ch, req))

    async def _serve_series(self, client, ch, req):
        try:
            async with self._series_lock:
                if client.closed:
                    return
                try:
                    frame = await self._series(ch, req)
                except P.ProtocolError as e:
                    frame = P.status(P.STATUS_ERROR, str(e))
                client.put_control(frame)
        finally:
            self._series_pending[client] -= 1
            if self._series_pending[client] <= 0:
                del self._series_pending[client]

    def _message_count(self, slot):
        """Messages of ``slot`` in the recording per the chunk indexes (None
        when a chunk has no index)."""
        total = 0
        for fi, ref in self.chunks:
            if not ref.channels:
                return None
            total += sum(n for cid, _off, n in ref.channels if self._slot_of.get((fi, cid)) == slot)
        return total

    async def _series(self, ch, req):
        """The ``a0py.series`` reply for ``req``: the number at ``req.path`` in
        the JSON payloads of ``ch`` over the whole recording, one message in
        ``stride`` read so that at most ``req.max_points`` points come back.
        Raises ProtocolError when no message has a number there."""
        np = self._np
        slot = self._slot_of_channel.get(ch.id)
        if slot is None:
            raise P.ProtocolError(f"a0py.fetchSeries: channel {ch.id} is not one of the recording's")
        count = self._message_count(slot)
        stride = max(1, -(-count // req.max_points)) if count else 1
        start = self.data_range[0]
        times, values = [], []
        seen = 0
        parsed = 0
        for k in np.argsort(self._starts, kind="stable"):
            k = int(k)
            if not self._chunk_has(k, {slot}):
                continue
            dec = self._decoded(k)
            hits = np.flatnonzero(dec.chan == slot)
            # the global message numbers of these hits are seen .. seen + len - 1
            first = (-seen) % stride
            for j in hits[first::stride]:
                parsed += 1
                v = _number_at(self._message(slot, dec, int(j)).payload, req.path)
                if v is not None:
                    times.append(int(dec.log[j]) - start)
                    values.append(v)
            seen += len(hits)
            await asyncio.sleep(0)  # one chunk at a time: playback and other clients go on
        if not times:
            raise P.ProtocolError(f"a0py.fetchSeries: no number at {req.text!r} in the {parsed} messages of "
                                  f"{ch.topic!r} read (request {req.request_id})")
        if any(b < a for a, b in itertools.pairwise(times)):  # chunks overlapping in time
            order = sorted(range(len(times)), key=times.__getitem__)
            times = [times[i] for i in order]
            values = [values[i] for i in order]
        if len(times) > req.max_points:  # the count was unknown (chunks without an index)
            extra = -(-len(times) // req.max_points)
            times, values, stride = times[::extra], values[::extra], stride * extra
        return P.series(req.request_id, ch.id, req.text, start, times, values, seen, stride)


def _number_at(payload, path):
    """The number at ``path`` in a JSON payload (a bool as 1 or 0), or None."""
    import json
    import math

    try:
        value = json.loads(bytes(payload))
    except (ValueError, RecursionError):
        return None
    for key in path:
        if isinstance(key, int):
            if not isinstance(value, list) or key >= len(value):
                return None
        elif not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool):
        return 1 if value else 0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return None
