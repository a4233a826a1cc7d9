"""The C core through cffi (API mode): byte layout and fault injection.

csrc/*.c is compiled into a throw-away extension once per session. The
layout tests let the C compiler report every offset (cffi's `...` structs)
and compare it with the numbers documented in a0_arena.h and docs/format.md.
The fault-injection tests write bad values into the raw bytes of a live arena
and require every C function to answer A0_ERR_CORRUPT (or a valid result
that stays inside the arena) -- never a crash, a stray access or a loop.
"""

import faulthandler
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

cffi = pytest.importorskip("cffi")
from helpers.cffi_core import build_core  # noqa: E402 - after the cffi check

# Offsets documented in a0_arena.h / docs/format.md.
HEADER_LAYOUT = {
    "magic": 0,
    "version": 8,
    "header_size": 12,
    "arena_size": 16,
    "flags": 24,
    "lock": 64,
    "notify": 128,
    "recoveries": 132,
    "state_version": 136,
    "notify_local": 144,
    "deadman": 192,
    "deadman_notify": 256,
    "deadman_pid": 260,
    "pages": 320,
}
STATE_LAYOUT = {"seq_low": 0, "seq_high": 8, "off_head": 16, "off_tail": 24, "high_water_mark": 32,
                "relayed_frames": 40}
FRAME_LAYOUT = {"seq": 0, "off_prev": 8, "off_next": 16, "data_size": 24}

@pytest.fixture(scope="session")
def core(tmp_path_factory):
    """(ffi, lib) of csrc/*.c compiled as a cffi extension in a temp dir."""
    return build_core(tmp_path_factory.mktemp("a0cffi"))


@pytest.fixture(autouse=True)
def hang_guard():
    """A walk that loops forever fails the run instead of hanging it."""
    faulthandler.dump_traceback_later(60, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class Arena:
    """An arena in C heap memory, with raw access to its bytes."""

    def __init__(self, core, size):
        self.ffi, self.lib = core
        self.size = size
        ffi, lib = self.ffi, self.lib
        raw = lib.aligned_alloc(64, (size + 63) & ~63)
        assert raw != ffi.NULL
        self.base = ffi.gc(ffi.cast("uint8_t*", raw), lib.free)
        ffi.memmove(self.base, b"\0" * size, size)
        assert lib.a0_arena_init(self.base, size) == lib.A0_OK
        self.hdr = ffi.cast("a0_arena_hdr_t*", self.base)
        self.t = ffi.new("a0_transport_t*")
        assert lib.a0_transport_init(self.t, self.base, size) == lib.A0_OK
        self.lk = ffi.new("a0_locked_t*")

    def buf(self):
        return self.ffi.buffer(self.base, self.size)

    def u64(self, off, value=None):
        b = self.buf()
        if value is None:
            return struct.unpack_from("<Q", b, off)[0]
        struct.pack_into("<Q", b, off, value)

    def u32(self, off, value=None):
        b = self.buf()
        if value is None:
            return struct.unpack_from("<I", b, off)[0]
        struct.pack_into("<I", b, off, value)

    def lock(self):
        return self.lib.a0_transport_lock(self.t, self.lk)

    def unlock(self):
        assert self.lib.a0_transport_unlock(self.lk[0]) == self.lib.A0_OK

    def write(self, *sizes, commit=True):
        lib = self.lib
        assert self.lock() == lib.A0_OK
        data = self.ffi.new("uint8_t**")
        for n in sizes:
            assert lib.a0_transport_alloc(self.lk[0], n, data) == lib.A0_OK
            seq = lib.a0_transport_seq_high(self.lk[0])
            self.ffi.memmove(data[0], bytes([seq & 0xFF]) * n, n)
        if commit:
            assert lib.a0_transport_commit(self.lk[0]) == lib.A0_OK
        self.unlock()

    def committed_off(self):
        return 320 + 64 * (self.u64(136) & 1)  # pages[state_version & 1]

    def state(self):
        return struct.unpack_from("<5Q", self.buf(), self.committed_off())

    def frame_offsets(self):
        """Offsets of the committed frames, head to tail, from the raw bytes."""
        seq_low, seq_high, off, _, _ = self.state()
        offs = []
        for seq in range(seq_low, seq_high + 1):
            assert self.u64(off) == seq
            offs.append(off)
            off = self.u64(off + 16)
        return offs


# ---- layout ---------------------------------------------------------------


def test_header_fields_sit_at_their_documented_offsets(core):
    ffi, lib = core
    for field, off in HEADER_LAYOUT.items():
        assert ffi.offsetof("a0_arena_hdr_t", field) == off, field
    assert ffi.sizeof("a0_arena_hdr_t") == 512 == lib.A0_HEADER_SIZE
    assert ffi.sizeof("a0_mutex_slot_t") == 64
    assert ffi.offsetof("a0_arena_hdr_t", "pages") + 2 * ffi.sizeof("a0_state_t") == 448


def test_state_page_and_frame_header_layout(core):
    ffi, lib = core
    for field, off in STATE_LAYOUT.items():
        assert ffi.offsetof("a0_state_t", field) == off, field
    assert ffi.sizeof("a0_state_t") == 64
    for field, off in FRAME_LAYOUT.items():
        assert ffi.offsetof("a0_frame_hdr_t", field) == off, field
    assert ffi.sizeof("a0_frame_hdr_t") == 32 == lib.A0_FRAME_HDR_SIZE
    assert lib.A0_FRAME_ALIGN == 16 and lib.A0_MIN_ARENA_SIZE == 576


def test_fresh_arena_bytes_match_the_format(core):
    a = Arena(core, 1024)
    raw = bytes(a.buf())
    assert raw[:8] == b"A0PYAREN"
    assert struct.unpack_from("<IIQQ", raw, 8) == (3, 512, 1024, 0)
    # notify, recoveries, state_version, notify_local
    assert struct.unpack_from("<IIQI", raw, 128) == (0, 0, 0, 0)
    # seq_low, seq_high, off_head, off_tail, high_water_mark, relayed_frames
    assert struct.unpack_from("<6Q", raw, 320) == struct.unpack_from("<6Q", raw, 384) == (1, 0, 0, 0, 0, 0)
    assert raw[512:] == b"\0" * (1024 - 512)  # init touches only the header


def test_frames_are_written_where_the_format_says(core):
    a = Arena(core, 2048)
    a.write(5, 40)
    seq_low, seq_high, head, tail, hwm = a.state()
    assert (seq_low, seq_high, head) == (1, 2, 512)
    assert tail == 512 + 48  # align16(32 + 5)
    assert struct.unpack_from("<4Q", a.buf(), 512)[0::3] == (1, 5)
    assert struct.unpack_from("<4Q", a.buf(), tail) == (2, 512, 0, 40)
    assert a.u64(512 + 16) == tail  # off_next
    assert bytes(a.buf()[544:549]) == b"\x01" * 5
    assert hwm == 48 + 80


# ---- a0_arena_check ---------------------------------------------------------


@pytest.mark.parametrize(
    "field,offset,width,value,code",
    [
        ("magic", 0, 8, 0x4E45524159503042, "A0_ERR_BAD_MAGIC"),
        ("magic", 0, 8, 0, "A0_ERR_BAD_MAGIC"),
        ("version", 8, 4, 1, "A0_ERR_BAD_VERSION"),
        ("version", 8, 4, 0, "A0_ERR_BAD_VERSION"),
        ("header_size", 12, 4, 256, "A0_ERR_BAD_HEADER_SIZE"),
        ("arena_size", 16, 8, 4096, "A0_ERR_SIZE_MISMATCH"),
        ("arena_size", 16, 8, 2**64 - 1, "A0_ERR_SIZE_MISMATCH"),
    ],
)
def test_arena_check_names_the_bad_field(core, field, offset, width, value, code):
    ffi, lib = core
    a = Arena(core, 1024)
    (a.u64 if width == 8 else a.u32)(offset, value)
    info = ffi.new("a0_check_info_t*")
    assert lib.a0_arena_check(a.base, a.size, info) == getattr(lib, code)
    assert ffi.string(info.field).decode() == field
    assert info.found == value
    # The transport refuses it too, with the same code.
    t = ffi.new("a0_transport_t*")
    assert lib.a0_transport_init(t, a.base, a.size) == getattr(lib, code)


def test_arena_check_size_mismatch_and_too_small(core):
    ffi, lib = core
    a = Arena(core, 1024)
    info = ffi.new("a0_check_info_t*")
    assert lib.a0_arena_check(a.base, 1000, info) == lib.A0_ERR_SIZE_MISMATCH
    assert ffi.string(info.field) == b"arena_size"
    assert (info.expected, info.found) == (1000, 1024)
    assert lib.a0_arena_check(a.base, 511, info) == lib.A0_ERR_TOO_SMALL
    assert lib.a0_arena_check(a.base, 0, ffi.NULL) == lib.A0_ERR_TOO_SMALL
    # A header that claims a size below the minimum is refused, not used.
    a.u64(16, 520)
    assert lib.a0_arena_check(a.base, 520, info) == lib.A0_ERR_TOO_SMALL
    assert lib.a0_arena_init(a.base, 575) == lib.A0_ERR_TOO_SMALL


@pytest.mark.parametrize(
    "field,value",
    [
        ("seq_low", 0),
        ("seq_low", 10),  # seq_low > seq_high + 1
        ("seq_high", 2**64 - 1),
        ("off_head", 0),
        ("off_head", 8),
        ("off_head", 520),  # misaligned
        ("off_head", 2048),
        ("off_head", 2048 - 16),  # no room for a frame header
        ("off_head", 2**64 - 16),
        ("off_tail", 256),
        ("off_tail", 2**63),
    ],
)
def test_arena_check_and_lock_reject_a_bad_committed_state(core, field, value):
    ffi, lib = core
    a = Arena(core, 2048)
    a.write(10, 20, 30)
    off = a.committed_off() + STATE_LAYOUT[field]
    good = a.u64(off)
    a.u64(off, value)
    info = ffi.new("a0_check_info_t*")
    assert lib.a0_arena_check(a.base, a.size, info) == lib.A0_ERR_CORRUPT
    assert info.field != ffi.NULL
    assert a.lock() == lib.A0_ERR_CORRUPT
    assert not a.t.locked
    # The failed lock released the mutex: once repaired, it locks again.
    a.u64(off, good)
    assert a.lock() == lib.A0_OK
    assert lib.a0_transport_seq_high(a.lk[0]) == 3
    a.unlock()


# ---- frames -------------------------------------------------------------------


def _expect(lib, rc, *codes):
    names = {getattr(lib, c): c for c in dir(lib) if c.startswith("A0_")}
    assert rc in [getattr(lib, c) for c in codes], f"got {names.get(rc, rc)}, expected one of {codes}"


@pytest.fixture
def six(core):
    """An arena with six committed frames of 40 bytes (80-byte spans)."""
    a = Arena(core, 2048)
    a.write(*[40] * 6)
    a.offs = a.frame_offsets()
    assert a.offs == [512 + 80 * i for i in range(6)]
    return a


@pytest.mark.parametrize("bad", [0, 3, 100, 2048, 2048 - 16, 2**64 - 1, "cycle"])
def test_corrupt_off_next_is_detected_by_next_and_jump(core, six, bad):
    _ffi, lib = core
    six.u64(six.offs[1] + 16, six.offs[0] if bad == "cycle" else bad)  # frame 2's off_next
    assert six.lock() == lib.A0_OK
    lk = six.lk[0]
    # jump(3) of 1..6 walks from the head: 1 -> 2 -> (2's off_next)
    _expect(lib, lib.a0_transport_jump(lk, 3), "A0_ERR_CORRUPT")
    _expect(lib, lib.a0_transport_jump(lk, 2), "A0_OK")
    _expect(lib, lib.a0_transport_next(lk), "A0_ERR_CORRUPT")
    assert six.t.cur_seq == 2  # a failed move leaves the cursor where it was
    # The rest of the ring is still reachable from the other end.
    _expect(lib, lib.a0_transport_jump(lk, 4), "A0_OK")
    _expect(lib, lib.a0_transport_prev(lk), "A0_OK")
    six.unlock()


@pytest.mark.parametrize("bad", [0, 8, 2048 - 8, 2**64 - 16, "self"])
def test_corrupt_off_prev_is_detected_by_prev_and_jump(core, six, bad):
    _ffi, lib = core
    six.u64(six.offs[4] + 8, six.offs[4] if bad == "self" else bad)  # frame 5's off_prev
    assert six.lock() == lib.A0_OK
    lk = six.lk[0]
    # jump(4) of 1..6 walks from the tail: 6 -> 5 -> (5's off_prev)
    _expect(lib, lib.a0_transport_jump(lk, 4), "A0_ERR_CORRUPT")
    _expect(lib, lib.a0_transport_jump(lk, 5), "A0_OK")
    _expect(lib, lib.a0_transport_prev(lk), "A0_ERR_CORRUPT")
    six.unlock()


@pytest.mark.parametrize("which", [0, 2, 5])
@pytest.mark.parametrize("bad", [0, 7, 2**64 - 1])
def test_corrupt_frame_seq_is_detected(core, six, which, bad):
    ffi, lib = core
    six.u64(six.offs[which], bad)
    seq = which + 1
    assert six.lock() == lib.A0_OK
    lk = six.lk[0]
    _expect(lib, lib.a0_transport_jump(lk, seq), "A0_ERR_CORRUPT")
    if which == 0:
        _expect(lib, lib.a0_transport_jump_head(lk), "A0_ERR_CORRUPT")
    if which == 5:
        _expect(lib, lib.a0_transport_jump_tail(lk), "A0_ERR_CORRUPT")
        # The tail is where the next frame goes: alloc cannot trust it.
        data = ffi.new("uint8_t**")
        _expect(lib, lib.a0_transport_alloc(lk, 8, data), "A0_ERR_CORRUPT")
        used = ffi.new("uint64_t*")
        _expect(lib, lib.a0_transport_used_space(lk, used), "A0_ERR_CORRUPT")
        evicts = ffi.new("bool*")
        _expect(lib, lib.a0_transport_alloc_evicts(lk, 8, evicts), "A0_ERR_CORRUPT")
    six.unlock()


@pytest.mark.parametrize("which", [0, 3, 5])
@pytest.mark.parametrize("bad", [2048, 2048 - 512 - 32 + 1, 2**63, 2**64 - 1])
def test_corrupt_data_size_is_detected(core, six, which, bad):
    ffi, lib = core
    six.u64(six.offs[which] + 24, bad)
    assert six.lock() == lib.A0_OK
    lk = six.lk[0]
    fr = ffi.new("a0_frame_t*")
    rc = lib.a0_transport_jump(lk, which + 1)
    if rc == lib.A0_OK:
        rc = lib.a0_transport_frame(lk, fr)
    _expect(lib, rc, "A0_ERR_CORRUPT")
    if which == 5:
        data = ffi.new("uint8_t**")
        _expect(lib, lib.a0_transport_alloc(lk, 8, data), "A0_ERR_CORRUPT")
    six.unlock()


def test_evicting_through_a_corrupt_frame_stops_with_corrupt(core, six):
    """alloc walks head -> next while evicting; a bad link mid-way is refused
    and the committed state is left as it was."""
    ffi, lib = core
    six.u64(six.offs[0] + 16, 999)  # frame 1's off_next
    before = six.state()
    assert six.lock() == lib.A0_OK
    data = ffi.new("uint8_t**")
    n = lib.a0_transport_max_frame_data(six.t)  # must evict everything
    _expect(lib, lib.a0_transport_alloc(six.lk[0], n, data), "A0_ERR_CORRUPT")
    six.unlock()
    assert six.state() == before


def test_cursor_offset_is_rechecked_after_relock(core, six):
    """The cursor's (seq, off) lives in process memory; if the frame under it
    is overwritten between locks, next()/frame() must notice, not follow."""
    ffi, lib = core
    assert six.lock() == lib.A0_OK
    assert lib.a0_transport_jump(six.lk[0], 3) == lib.A0_OK
    six.unlock()
    six.u64(six.offs[2], 12345)
    assert six.lock() == lib.A0_OK
    fr = ffi.new("a0_frame_t*")
    _expect(lib, lib.a0_transport_frame(six.lk[0], fr), "A0_ERR_CORRUPT")
    _expect(lib, lib.a0_transport_next(six.lk[0]), "A0_ERR_CORRUPT")
    _expect(lib, lib.a0_transport_prev(six.lk[0]), "A0_ERR_CORRUPT")
    six.unlock()


# ---- fuzz: random bytes over the state page and the frames -------------------

ANY_RESULT = (
    "A0_OK", "A0_ERR_CORRUPT", "A0_ERR_EMPTY", "A0_ERR_NO_FRAME", "A0_ERR_SEQ_NOT_FOUND",
)


def exercise(a):
    """Every read and write path of the transport on a possibly corrupt
    arena. Each call must return a known code; every frame handed out must lie
    inside the workspace. Bounded: at most a few hundred calls."""
    ffi, lib = a.ffi, a.lib
    rc = a.lock()
    _expect(lib, rc, "A0_OK", "A0_ERR_CORRUPT")
    if rc != lib.A0_OK:
        return "refused"
    lk = a.lk[0]
    lo, hi = lib.a0_transport_seq_low(lk), lib.a0_transport_seq_high(lk)
    fr = ffi.new("a0_frame_t*")
    base = int(ffi.cast("uintptr_t", a.base))

    def check_frame():
        rc = lib.a0_transport_frame(lk, fr)
        _expect(lib, rc, *ANY_RESULT)
        if rc == lib.A0_OK:
            start = int(ffi.cast("uintptr_t", fr.data)) - base
            assert start >= 512 + 32 and start + fr.size <= a.size

    used = ffi.new("uint64_t*")
    _expect(lib, lib.a0_transport_used_space(lk, used), "A0_OK", "A0_ERR_CORRUPT")
    for move in (lib.a0_transport_jump_head, lib.a0_transport_jump_tail):
        _expect(lib, move(lk), *ANY_RESULT)
        check_frame()
    for seq in {0, lo, hi, hi + 1, (lo + hi) // 2, lo + 1, hi - 1 if hi else 0}:
        _expect(lib, lib.a0_transport_jump(lk, seq), *ANY_RESULT)
        check_frame()
    if lib.a0_transport_jump_head(lk) == lib.A0_OK:
        for _ in range(130):  # more than the frames an arena of this size holds
            if not lib.a0_transport_has_next(lk):
                break
            if lib.a0_transport_next(lk) != lib.A0_OK:
                break
            check_frame()
        else:
            raise AssertionError("next() never reached the tail")
    if lib.a0_transport_jump_tail(lk) == lib.A0_OK:
        for _ in range(130):
            if not lib.a0_transport_has_prev(lk):
                break
            if lib.a0_transport_prev(lk) != lib.A0_OK:
                break
            check_frame()
        else:
            raise AssertionError("prev() never reached the head")
    data = ffi.new("uint8_t**")
    evicts = ffi.new("bool*")
    for n in (0, 100, lib.a0_transport_max_frame_data(a.t)):
        _expect(lib, lib.a0_transport_alloc_evicts(lk, n, evicts), "A0_OK", "A0_ERR_CORRUPT")
        rc = lib.a0_transport_alloc(lk, n, data)
        _expect(lib, rc, "A0_OK", "A0_ERR_CORRUPT")
        if rc == lib.A0_OK:
            start = int(ffi.cast("uintptr_t", data[0])) - base
            assert start >= 512 + 32 and start + n <= a.size
            ffi.memmove(data[0], b"\xab" * n, n)
    _expect(lib, lib.a0_transport_commit(lk), "A0_OK", "A0_ERR_CORRUPT")
    a.unlock()
    return "locked"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=12),
    patches=st.lists(
        st.tuples(
            st.sampled_from(["state", "frame", "anywhere"]),
            st.integers(0, 2**16),
            st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 2048), st.sampled_from([0, 1, 512, 2**64 - 1])),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_random_corruption_yields_corrupt_or_valid_results(core, sizes, patches):
    a = Arena(core, 1536)
    a.write(*sizes)
    offs = a.frame_offsets()
    for where, pick, value in patches:
        if where == "state":
            off = a.committed_off() + 8 * (pick % 5)
        elif where == "frame":
            off = offs[pick % len(offs)] + 8 * ((pick >> 4) % 4)
        else:
            off = 8 * (pick % (a.size // 8))
            if off < 320 and off != 136:  # leave magic and the mutexes alone; state_version is fair game
                off = 320 + off % 128
        a.u64(off, value)
    for _ in range(2):  # and again after whatever the first round wrote
        exercise(a)
