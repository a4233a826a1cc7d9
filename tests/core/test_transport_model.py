"""The transport against a pure-Python model of the ring.

The model (``Ring`` below) is written from the specification of the ring in
DESIGN.md / a0_transport.h, not from the C code: frames are placed after the
tail (wrapping to the start of the workspace), the oldest frames are evicted
while *any* live frame overlaps the new one (checked frame by frame, not by a
band), uncommitted frames live only in the lock holder's working state, and
evictions are published at once. A Hypothesis state machine drives a real
``a0py.Transport`` over a small heap arena (so eviction and wrap-around happen
all the time, with mixed sizes, the case AlephZero 0.3.17 got wrong) and after
every step compares everything observable, including the raw bytes of the
committed state page and of every live frame.

Reads take no lock (docs/transport.md: readers never block writers). Besides the copying reads of the binding, a
second reader drives the C read protocol step by step through cffi
(``read_while_writers_evict``): it locates frames, copies them, then lets
writers run -- evicting and overwriting those very frames, or only the frame
whose link it followed -- *between its copy and its check*, and the model
says exactly which outcome is right: accepted with the model's bytes, or
refused as evicted (never a torn frame accepted), with the gap counted.

Both readers follow the landing rule (``Reader`` below): from a cursor whose
frame was evicted, a lock-free read lands twice the writer's pace after the
oldest frame, or on the newest while the reader stays lapped; the C reader's
pace and lapped flag are compared after every read, and the writes between
its copy and its check are what teach it the pace.
"""

import ctypes
import itertools
import struct
import tempfile
from dataclasses import dataclass

import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import a0py

HDR = 512
FRAME_HDR = 32


def align16(n):
    return (n + 15) & ~15


def span(n):
    return align16(FRAME_HDR + n)


def payload(seq, n):
    """Frame content that encodes its seq, so a misplaced frame shows."""
    return (seq.to_bytes(8, "little") * (n // 8 + 1))[:n]


@dataclass(frozen=True)
class MFrame:
    seq: int
    off: int
    n: int

    @property
    def end(self):
        return self.off + span(self.n)


@dataclass
class State:
    frames: list  # live frames, oldest first
    seq_low: int
    seq_high: int
    hwm: int

    def copy(self):
        return State(list(self.frames), self.seq_low, self.seq_high, self.hwm)

    @property
    def empty(self):
        return self.seq_low == self.seq_high + 1


# Frames a lock-free batch read (read_many) copies before it validates them.
READ_BATCH = 64


@dataclass
class Reader:
    """A reader's own state, as specified (docs/transport.md, "A reader slower
    than its writer"): its cursor, the frames it did not read, and what its
    landings go by: `pace`, the frames the writer evicted while its recent
    lock-free reads were in flight, and `lapped`, set by a landing from an
    evicted cursor until a read finds nothing left."""

    cursor: int = 0
    missed: int = 0
    pace: int = 0
    lapped: bool = False

    def landing(self, s):
        """Where a lock-free read lands in committed state `s` from a cursor
        whose frame is gone: the newest if lapped (or if twice the pace
        reaches past it), else twice the pace after the oldest."""
        if self.lapped or 2 * self.pace > s.seq_high - s.seq_low:
            return s.seq_high
        return s.seq_low + 2 * self.pace

    def begin(self, s):
        """read_begin on committed state `s`: (seq, link, gap), or None when
        there is nothing after the cursor (the reader has caught up)."""
        if s.empty or self.cursor >= s.seq_high:
            self.lapped = False
            return None
        if self.cursor < s.seq_low:
            seq = link = self.landing(s)
            if self.cursor and seq > self.cursor + 1:  # frames passed over
                self.lapped = True
        else:
            seq, link = self.cursor + 1, self.cursor
        return seq, link, (seq - self.cursor - 1 if self.cursor else 0)

    def end(self, first, last_seq, snap_low, s):
        """read_end of a batch first..last_seq located when the oldest frame
        was `snap_low`, checked against committed state `s`: accepted (the
        cursor moves, the gap is missed) or refused; the pace learns either way."""
        _, link, gap = first
        moved = max(0, s.seq_low - snap_low)
        self.pace = moved if moved >= self.pace else self.pace - (self.pace - moved + 3) // 4
        if not s.seq_low <= link <= s.seq_high:
            return False
        self.cursor = last_seq
        self.missed += gap
        return True


class Ring:
    """The ring as specified. `work` is what the lock holder sees,
    `committed` what the arena's committed page holds; `reader` is the
    Transport's own cursor (shared by its locked and lock-free reads)."""

    def __init__(self, size):
        self.size = size
        self.committed = State([], 1, 0, 0)
        self.work = self.committed.copy()
        self.pending = 0
        self.reader = Reader()

    @property
    def cursor(self):
        return self.reader.cursor

    @cursor.setter
    def cursor(self, seq):
        self.reader.cursor = seq

    @property
    def missed(self):
        return self.reader.missed

    @property
    def max_frame(self):
        # largest n with align16(32 + n) <= workspace
        return ((self.size - HDR) & ~15) - FRAME_HDR

    def lock(self):
        self.work = self.committed.copy()
        self.pending = 0

    def unlock(self):
        if self.pending and self.cursor > self.committed.seq_high:
            # The cursor stood on a discarded frame: it goes back to the
            # newest committed one, so that frame's successor is not skipped.
            self.cursor = self.committed.seq_high
        self.pending = 0
        self.work = self.committed.copy()

    def placement(self, n):
        w = self.work
        need = span(n)
        if w.empty:
            return HDR
        off = align16(w.frames[-1].end)
        if off + need > self.size:
            off = HDR
        return off

    @staticmethod
    def _overlaps(f, a, b):
        return f.off < b and a < f.end

    def alloc_evicts(self, n):
        if n > self.max_frame:
            raise a0py.FrameTooLargeError
        off = self.placement(n)
        return any(self._overlaps(f, off, off + span(n)) for f in self.work.frames)

    def alloc(self, n):
        if n > self.max_frame:
            raise a0py.FrameTooLargeError
        w = self.work
        off = self.placement(n)
        while w.frames and any(self._overlaps(f, off, off + span(n)) for f in w.frames):
            w.frames.pop(0)
            w.seq_low += 1
        c = self.committed
        if not c.empty and w.seq_low > c.seq_low:
            # Evictions are published at once, even if this alloc is never
            # committed: the committed state must not reference overwritten bytes.
            c.frames = [f for f in c.frames if f.seq >= w.seq_low]
            c.seq_low = min(w.seq_low, c.seq_high + 1)
        seq = w.seq_high + 1
        w.frames.append(MFrame(seq, off, n))
        w.seq_high = seq
        self.pending += 1
        return seq

    def used_space(self, s=None):
        s = self.work if s is None else s
        if s.empty:
            return 0
        head, tail = s.frames[0], s.frames[-1]
        if head.off <= tail.off:
            return tail.end - head.off
        return (self.size - head.off) + (tail.end - HDR)

    def commit(self):
        if not self.pending:
            return
        self.work.hwm = max(self.work.hwm, self.used_space())
        self.committed = self.work.copy()
        self.pending = 0

    def clear(self):
        w = self.work
        w.frames = []
        w.seq_low = w.seq_high + 1
        self.pending = 0
        self.committed = w.copy()

    # cursor
    def has_next(self):
        return not self.work.empty and self.cursor < self.work.seq_high

    def has_prev(self):
        w = self.work
        return not w.empty and w.seq_low < self.cursor <= w.seq_high

    def iter_valid(self):
        return self.work.seq_low <= self.cursor <= self.work.seq_high

    def next(self):
        if not self.has_next():
            raise a0py.NoFrameError
        self.cursor = max(self.cursor + 1, self.work.seq_low)

    def read_next(self):
        """A lock-free read of the Transport (no writer runs between its copy
        and its check): the seq it reads, or None."""
        c = self.committed
        first = self.reader.begin(c)
        if first is None:
            return None
        self.reader.end(first, first[0], c.seq_low, c)
        return first[0]

    def read_many(self, limit):
        """Transport.read_many(limit): batches of up to READ_BATCH frames,
        each validated once; the seqs read."""
        seqs, left = [], -1 if limit is None else limit
        while left != 0:
            c = self.committed
            first = self.reader.begin(c)
            if first is None:
                break
            n = min(c.seq_high - first[0] + 1, READ_BATCH, left if left > 0 else READ_BATCH)
            self.reader.end(first, first[0] + n - 1, c.seq_low, c)
            seqs.extend(range(first[0], first[0] + n))
            if left > 0:
                left -= n
        return seqs

    def prev(self):
        if not self.has_prev():
            raise a0py.NoFrameError
        self.cursor -= 1

    def jump(self, seq):
        w = self.work
        if w.empty:
            raise a0py.EmptyError
        if seq > w.seq_high:
            raise a0py.SeqNotFoundError
        self.cursor = max(seq, w.seq_low)

    def frame(self, seq):
        for f in self.work.frames:
            if f.seq == seq:
                return f
        raise AssertionError(f"model has no frame {seq}")


# How a frame size is chosen: fixed small sizes, sizes near the largest frame,
# a fraction of the largest, or one byte too many.
SIZES = st.one_of(
    st.integers(0, 48).map(lambda k: ("abs", k)),
    st.integers(0, 40).map(lambda k: ("near_max", k)),
    st.floats(0, 1).map(lambda f: ("frac", f)),
    st.integers(1, 64).map(lambda k: ("over", k)),
)


try:
    from helpers.cffi_core import build_core
except ImportError:  # no cffi: the step-by-step reader is left out
    build_core = None

_CORE = []


def c_core():
    """(ffi, lib) of the C core through cffi, built once per process (None
    without cffi)."""
    if not _CORE:
        _CORE.append(build_core(tempfile.mkdtemp(prefix="a0model")) if build_core else None)
    return _CORE[0]


class TransportMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.arena = None
        self.lk = None  # the LockedTransport while the machine holds the lock
        self.core = c_core()

    @initialize(size=st.one_of(st.integers(576, 1200), st.integers(576, 4096)))
    def setup(self, size):
        self.arena = a0py.Arena.heap(size)
        self.tr = a0py.Transport(self.arena)
        self.ring = Ring(size)
        # The address of the mapping, to read raw bytes: a fresh arena puts
        # its first frame at 512, so its data is at base + 544. The alloc is
        # discarded (never committed).
        with self.tr.lock() as t:
            view = t.alloc(16)
            probe = (ctypes.c_char * 16).from_buffer(view)
            self.base = ctypes.addressof(probe) - HDR - FRAME_HDR
            del probe
        assert self.tr.max_frame_size == self.ring.max_frame
        if self.core is not None:
            # A second reader, in C, on the same memory, with its own cursor.
            ffi, lib = self.core
            self.rt = ffi.new("a0_transport_t*")
            assert lib.a0_transport_init(self.rt, ffi.cast("void*", self.base), size) == lib.A0_OK
            self.c_reader = Reader()

    def teardown(self):
        if self.lk is not None:
            self.lk.__exit__(None, None, None)
            self.lk = None
        if self.arena is not None:
            self.arena.close()

    # ---- helpers -------------------------------------------------------

    def size_of(self, spec):
        kind, v = spec
        m = self.ring.max_frame
        if kind == "abs":
            return v
        if kind == "near_max":
            return max(0, m - v)
        if kind == "frac":
            return int(v * m)
        return m + v

    def raw(self, off, n):
        assert off >= 0 and off + n <= self.ring.size
        return ctypes.string_at(self.base + off, n)

    def committed_page(self):
        page = struct.unpack_from("<Q", self.raw(136, 8))[0] & 1  # state_version's low bit
        return struct.unpack_from("<5Q", self.raw(320 + 64 * page, 40))

    def locked(self):
        return self.lk is not None

    def expect(self, exc, fn, *args):
        try:
            result = fn(*args)
        except a0py.A0Error as e:
            assert isinstance(e, exc), (e, exc)
            return None
        raise AssertionError(f"expected {exc.__name__}, got {result!r}")

    def do_alloc(self, t, n):
        if n > self.ring.max_frame:
            with pytest.raises(a0py.FrameTooLargeError):
                t.alloc(n)
            return
        expected_evict = self.ring.alloc_evicts(n)
        assert t.alloc_evicts(n) == expected_evict
        before = t.seq_low
        view = t.alloc(n)
        seq = self.ring.alloc(n)
        assert len(view) == n and not view.readonly
        view[:] = payload(seq, n)
        assert (t.seq_low > before) == expected_evict
        assert t.seq_high == seq

    # ---- rules: the lock ------------------------------------------------

    @precondition(lambda self: not self.locked())
    @rule()
    def lock(self):
        self.lk = self.tr.lock().__enter__()
        self.ring.lock()

    @precondition(lambda self: self.locked())
    @rule()
    def unlock(self):
        self.lk.__exit__(None, None, None)
        self.lk = None
        self.ring.unlock()

    # ---- rules: writing -------------------------------------------------

    @precondition(lambda self: self.locked())
    @rule(spec=SIZES)
    def alloc(self, spec):
        self.do_alloc(self.lk, self.size_of(spec))

    @precondition(lambda self: self.locked())
    @rule(spec=SIZES)
    def alloc_evicts(self, spec):
        n = self.size_of(spec)
        if n > self.ring.max_frame:
            with pytest.raises(a0py.FrameTooLargeError):
                self.lk.alloc_evicts(n)
        else:
            assert self.lk.alloc_evicts(n) == self.ring.alloc_evicts(n)

    @precondition(lambda self: self.locked())
    @rule()
    def commit(self):
        self.lk.commit()
        self.ring.commit()

    @precondition(lambda self: self.locked())
    @rule()
    def clear(self):
        self.lk.clear()
        self.ring.clear()

    @precondition(lambda self: not self.locked())
    @rule(specs=st.lists(SIZES, min_size=1, max_size=4), commit=st.booleans(), peek=st.booleans())
    def with_block(self, specs, commit, peek):
        """Several allocs, then one commit or none (all discarded at unlock);
        with `peek` the cursor is left on the newest (perhaps uncommitted) frame."""
        with self.tr.lock() as t:
            self.ring.lock()
            for spec in specs:
                self.do_alloc(t, self.size_of(spec))
            if peek and not self.ring.work.empty:
                t.jump_tail()
                self.ring.cursor = self.ring.work.seq_high
                assert t.frame().seq == self.ring.cursor
            if commit:
                t.commit()
                self.ring.commit()
        self.ring.unlock()

    @precondition(lambda self: not self.locked())
    @rule(spec=SIZES)
    def write(self, spec):
        n = self.size_of(spec)
        if n > self.ring.max_frame:
            with pytest.raises(a0py.FrameTooLargeError):
                self.tr.write(b"\0" * n)
            return
        self.ring.lock()
        seq = self.ring.alloc(n)
        self.ring.commit()
        self.ring.unlock()
        assert self.tr.write(payload(seq, n)) == seq

    @precondition(lambda self: not self.locked())
    @rule(specs=st.lists(SIZES, max_size=4))
    def write_many(self, specs):
        ns = [self.size_of(s) for s in specs]
        if any(n > self.ring.max_frame for n in ns):
            # Nothing is committed; the evictions of the allocs before the
            # failing one are published all the same.
            self.ring.lock()
            for n in ns:
                if n > self.ring.max_frame:
                    break
                self.ring.alloc(n)
            self.ring.unlock()
            with pytest.raises(a0py.FrameTooLargeError):
                self.tr.write_many([payload(0, n) for n in ns])
            # the frames written before the failure carried seq 0 payloads,
            # but were discarded, so nothing checks them
            return
        self.ring.lock()
        seqs = [self.ring.alloc(n) for n in ns]
        self.ring.commit()
        self.ring.unlock()
        last = self.tr.write_many([payload(s, n) for s, n in zip(seqs, ns)])
        assert last == (seqs[-1] if seqs else None)

    # ---- rules: reading ---------------------------------------------------

    @precondition(lambda self: self.locked())
    @rule()
    def jump_head(self):
        r = self.ring
        if r.work.empty:
            self.expect(a0py.EmptyError, self.lk.jump_head)
        else:
            self.lk.jump_head()
            r.cursor = r.work.seq_low

    @precondition(lambda self: self.locked())
    @rule()
    def jump_tail(self):
        r = self.ring
        if r.work.empty:
            self.expect(a0py.EmptyError, self.lk.jump_tail)
        else:
            self.lk.jump_tail()
            r.cursor = r.work.seq_high

    @precondition(lambda self: self.locked())
    @rule(delta=st.integers(-6, 3), absolute=st.booleans())
    def jump(self, delta, absolute):
        r = self.ring
        # around the live range: evicted, live and future seqs (and 0)
        seq = max(0, (r.work.seq_low if absolute else r.work.seq_high) + delta)
        try:
            r.jump(seq)
        except a0py.A0Error as e:
            self.expect(type(e), self.lk.jump, seq)
            return
        self.lk.jump(seq)

    @precondition(lambda self: self.locked())
    @rule()
    def next(self):
        try:
            self.ring.next()
        except a0py.NoFrameError:
            self.expect(a0py.NoFrameError, self.lk.next)
            return
        self.lk.next()

    @precondition(lambda self: self.locked())
    @rule()
    def prev(self):
        try:
            self.ring.prev()
        except a0py.NoFrameError:
            self.expect(a0py.NoFrameError, self.lk.prev)
            return
        self.lk.prev()

    @precondition(lambda self: self.locked())
    @rule()
    def frame(self):
        r = self.ring
        if not r.iter_valid():
            self.expect(a0py.NoFrameError, self.lk.frame)
            return
        fr = self.lk.frame()
        mf = r.frame(r.cursor)
        assert (fr.seq, fr.size) == (mf.seq, mf.n)
        assert fr.tobytes() == payload(mf.seq, mf.n)

    @precondition(lambda self: self.locked())
    @rule()
    def walk(self):
        """Head to tail through the API: exactly the model's frames."""
        r = self.ring
        if r.work.empty:
            self.expect(a0py.EmptyError, self.lk.jump_head)
            return
        self.lk.jump_head()
        seen = []
        while True:
            fr = self.lk.frame()
            seen.append((fr.seq, fr.tobytes()))
            if not self.lk.has_next():
                break
            self.lk.next()
        r.cursor = r.work.seq_high
        assert seen == [(f.seq, payload(f.seq, f.n)) for f in r.work.frames]

    @precondition(lambda self: not self.locked())
    @rule()
    def read_next(self):
        r = self.ring
        seq = r.read_next()
        expected = None if seq is None else (seq, payload(seq, r.frame(seq).n))
        assert self.tr.read_next(timeout=0) == expected

    @precondition(lambda self: not self.locked())
    @rule(limit=st.one_of(st.none(), st.integers(0, 3)))
    def read_many(self, limit):
        r = self.ring
        expected = [(seq, payload(seq, r.frame(seq).n)) for seq in r.read_many(limit)]
        assert self.tr.read_many(limit) == expected

    @precondition(lambda self: not self.locked() and self.core is not None)
    @rule(specs=st.lists(SIZES, max_size=3), batch=st.integers(1, 3))
    def read_while_writers_evict(self, specs, batch):
        """One lock-free read by the C reader, with writes (which may evict
        what it reads) between its copy and its check."""
        ffi, lib = self.core
        rd, c = self.c_reader, self.ring.committed
        snap_low = c.seq_low
        expected = rd.begin(c)
        first = ffi.new("a0_read_t*")
        rc = lib.a0_transport_read_begin(self.rt, first)
        if expected is None:
            assert rc == lib.A0_ERR_NO_FRAME
            assert not self.rt.lapped
            return
        assert rc == lib.A0_OK
        # From an evicted cursor it lands where the rule says, relying on that
        # frame alone; else it follows the cursor frame's link.
        assert (first.seq, first.link_seq, first.gap) == expected
        if expected[1] == expected[0]:
            event("lock-free read landed " + ("on the newest" if expected[0] == c.seq_high
                                              else "ahead of the oldest" if expected[0] > c.seq_low
                                              else "on the oldest"))
        reads = [first]
        while len(reads) < batch:
            nxt = ffi.new("a0_read_t*")
            rc = lib.a0_transport_read_after(self.rt, reads[-1], nxt)
            if reads[-1].seq >= c.seq_high:
                assert rc == lib.A0_ERR_NO_FRAME
                break
            assert rc == lib.A0_OK and nxt.seq == reads[-1].seq + 1
            reads.append(nxt)
        copies = [bytes(ffi.buffer(r.data, r.size)) for r in reads]
        # The writers run now: between the reader's copy and its check.
        for spec in specs:
            self.write(spec)
        rc = lib.a0_transport_read_end(self.rt, reads[0], reads[-1])
        if rd.end(expected, reads[-1].seq, snap_low, self.ring.committed):
            # Still live: accepted, and the copy is exactly the model's frames.
            assert rc == lib.A0_OK
            for r, data in zip(reads, copies):
                assert data == payload(r.seq, r.size)
            event("lock-free read accepted" + (" after a gap" if expected[2] else ""))
        else:
            # Evicted (possibly overwritten) before the check: refused.
            assert rc == lib.A0_ERR_EVICTED
            event("lock-free read refused: evicted between copy and check")
        assert (self.rt.cur_seq, self.rt.missed) == (rd.cursor, rd.missed)
        assert (self.rt.pace, bool(self.rt.lapped)) == (rd.pace, rd.lapped)

    # ---- invariants ------------------------------------------------------

    def check(self, t):
        r = self.ring
        w = r.work
        assert (t.seq_low, t.seq_high, t.empty) == (w.seq_low, w.seq_high, w.empty)
        assert t.used_space == r.used_space()
        assert t.high_water_mark == w.hwm
        assert self.tr.cursor_seq == r.cursor
        assert self.tr.missed == r.missed
        assert t.has_next() == r.has_next()
        assert t.has_prev() == r.has_prev()
        assert t.iter_valid() == r.iter_valid()

        # No two live frames overlap, and all lie in the workspace.
        frames = sorted(w.frames, key=lambda f: f.off)
        for f in frames:
            assert f.off >= HDR and f.off % 16 == 0 and f.end <= r.size
        for a, b in itertools.pairwise(frames):
            assert a.end <= b.off, f"frames {a} and {b} overlap"
        assert [f.seq for f in w.frames] == list(range(w.seq_low, w.seq_high + 1))

        # The raw frames: header fields, links and content.
        for i, f in enumerate(w.frames):
            seq, off_prev, off_next, size = struct.unpack("<4Q", self.raw(f.off, FRAME_HDR))
            assert (seq, size) == (f.seq, f.n)
            if i > 0:
                assert off_prev == w.frames[i - 1].off
            if i + 1 < len(w.frames):
                assert off_next == w.frames[i + 1].off
            assert self.raw(f.off + FRAME_HDR, f.n) == payload(f.seq, f.n)

        # The committed page: the model's committed state, evictions included.
        c = r.committed
        seq_low, seq_high, off_head, off_tail, hwm = self.committed_page()
        assert (seq_low, seq_high, hwm) == (c.seq_low, c.seq_high, c.hwm)
        if c.empty:
            assert (off_head, off_tail) == (0, 0)
        else:
            assert (off_head, off_tail) == (c.frames[0].off, c.frames[-1].off)
            # Walking the committed page from its own head (not the model's)
            # reaches exactly the committed frames.
            off, walked = off_head, []
            for s in range(seq_low, seq_high + 1):
                fseq, _, off_next, size = struct.unpack("<4Q", self.raw(off, FRAME_HDR))
                assert fseq == s
                walked.append((s, self.raw(off + FRAME_HDR, size)))
                off = off_next
            assert walked == [(f.seq, payload(f.seq, f.n)) for f in c.frames]
        for f in c.frames:  # every committed frame is still live in the working state
            assert f in w.frames

    @invariant()
    def matches_model(self):
        if self.arena is None:
            return
        if self.locked():
            self.check(self.lk)
        else:
            # Locking is side-effect free (it reloads the committed state).
            with self.tr.lock() as t:
                self.check(t)


TransportMachine.TestCase.settings = settings(
    settings.default, stateful_step_count=40, max_examples=settings.default.max_examples
)
test_transport_matches_model = TransportMachine.TestCase


def test_model_places_and_evicts_mixed_sizes_like_the_spec():
    """A hand-checked sequence: the model itself (guards the guard)."""
    r = Ring(576 + 64)  # workspace 128 bytes
    r.lock()
    assert r.alloc(0) == 1  # [512, 544)
    assert r.alloc(40) == 2  # span 80: [544, 624)
    assert r.alloc_evicts(0)  # 624 + 32 > 640 -> wraps to 512, evicts 1
    r.alloc(0)  # seq 3 at 512
    assert [f.seq for f in r.work.frames] == [2, 3]
    assert r.used_space() == (640 - 544) + (544 - 512)
    r.commit()
    assert r.work.hwm == 128
    r.lock()
    r.alloc(60)  # span 96 after 544 -> 640, fits: evicts 2 only
    assert [f.seq for f in r.work.frames] == [3, 4]
    assert r.committed.seq_low == 3  # the eviction is published at once
    r.unlock()
    assert (r.committed.seq_low, r.committed.seq_high) == (3, 3)
