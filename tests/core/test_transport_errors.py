"""Bad input through the Python API: each is a clear a0py exception that names
the problem, and the interpreter survives (the nastiest cases run in a child
process, so a crash or a hang would show as a failed exit)."""

import math
import mmap
import os
import struct
import subprocess
import sys
import textwrap
import uuid

import pytest
from helpers.procs import REPO

import a0py
from a0py import (
    A0Error,
    A0TimeoutError,
    Arena,
    ArenaCorruptError,
    ArenaFormatError,
    ArenaNotFoundError,
    ArgumentError,
    ClosedError,
    Deadman,
    FrameTooLargeError,
    LockError,
    Transport,
)

SIZE = 4096


def shm_name(tag="err"):
    return f"a0py-test-{tag}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def arena_path(tmp_path):
    """A file arena with three committed frames, closed again."""
    path = str(tmp_path / "arena.a0")
    with Arena.file(path, SIZE) as a:
        tr = Transport(a)
        for i in range(3):
            tr.write(bytes([i]) * 40)
    return path


def patch(path, offset, fmt, value):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(struct.pack(fmt, value))


def read(path, offset, fmt):
    with open(path, "rb") as f:
        f.seek(offset)
        return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def committed_page_off(path):
    return 320 + 64 * (read(path, 136, "<Q") & 1)  # pages[state_version & 1]


def test_every_exception_is_an_a0error():
    for name in a0py.__all__:
        obj = getattr(a0py, name)
        if isinstance(obj, type) and issubclass(obj, Warning):  # warned, not raised
            assert issubclass(obj, UserWarning), name
        elif isinstance(obj, type) and issubclass(obj, BaseException):
            assert issubclass(obj, A0Error), name


# ---- opening a bad file ---------------------------------------------------------


@pytest.mark.parametrize(
    "offset,fmt,value,field",
    [
        (0, "<Q", 0x1122334455667788, "magic"),
        (0, "<Q", 0, "magic"),
        (8, "<I", 1, "version"),  # format 1 (before lock-free reads) is refused
        (8, "<I", 2, "version"),  # format 2 (before notify_local): its writers would not move it
        (8, "<I", 0xFFFFFFFF, "version"),
        (12, "<I", 1024, "header_size"),
        (16, "<Q", SIZE * 2, "arena_size"),
        (16, "<Q", SIZE - 16, "arena_size"),
    ],
)
def test_bad_header_field_is_a_format_error_naming_file_and_field(arena_path, offset, fmt, value, field):
    patch(arena_path, offset, fmt, value)
    with pytest.raises(ArenaFormatError) as info:
        Arena.file(arena_path)
    msg = str(info.value)
    assert arena_path in msg and f"field {field}" in msg
    # The same check runs through Arena.open.
    with pytest.raises(ArenaFormatError):
        Arena.open(path=arena_path)


def test_an_arena_of_an_older_format_is_refused_saying_so(arena_path):
    patch(arena_path, 8, "<I", 2)
    with pytest.raises(ArenaFormatError, match=r"expected 3, found 2.*written by an older a0py"):
        Arena.file(arena_path)


def test_bad_magic_message_shows_the_magic_in_hex(arena_path):
    patch(arena_path, 0, "<Q", 0xDEADBEEF)
    with pytest.raises(ArenaFormatError, match="0x00000000deadbeef"):
        Arena.file(arena_path)


@pytest.mark.parametrize("content", [b"", b"hi\n", b"#!/bin/sh\necho hello\n", b"x" * 300])
def test_small_foreign_file_is_not_an_arena_rather_than_too_small(tmp_path, content):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    path.chmod(0o600)  # a file of the caller's, as private as an arena: only its content is wrong
    if not content:
        with pytest.raises(ArenaFormatError, match="empty"):
            Arena.file(str(path))
        return
    with pytest.raises(ArenaFormatError, match=r"notes\.txt' is not an a0py arena") as info:
        Arena.file(str(path))
    assert "too small" not in str(info.value)
    assert path.read_bytes() == content  # looked at, never written


def test_argument_errors_name_the_arena(tr, tmp_path):
    with pytest.raises(ArgumentError, match="heap arena: frame size must be >= 0"):
        with tr.lock() as t:
            t.alloc(-1)
    with pytest.raises(ArgumentError, match="heap arena: timeout"):
        tr.read_next(timeout=-1)
    with pytest.raises(ArgumentError, match="heap arena: max_frames"):
        tr.read_many("all")
    with pytest.raises(ArgumentError, match="heap arena: spin"):
        tr.spin = -1
    with pytest.raises(ArgumentError, match=r"heap arena.*timeout"):
        Deadman(tr.arena).wait_taken(timeout="soon")
    path = str(tmp_path / "m.a0")
    with pytest.raises(ArgumentError, match=f"file arena '{path}': mode"):
        Arena.file(path, 4096, mode="rw")
    with pytest.raises(ArgumentError, match=f"file arena '{path}': arena size must be at least"):
        Arena.file(path, 100)
    with pytest.raises(ArgumentError, match="shared memory arena 'x': arena size must be an integer"):
        Arena.shm("x", "big")


def test_str_frame_data_suggests_encode(tr):
    for call in (lambda: tr.write("text"), lambda: tr.write_many(["text"])):
        with pytest.raises(ArgumentError, match=r"heap arena: frame data must be bytes-like, not str.*\.encode\(\)"):
            call()


def test_frame_too_large_says_the_limit_and_what_to_do(tr):
    m = tr.max_frame_size
    msgs = []
    for call in (lambda: tr.write(bytes(m + 1)), lambda: tr.write(bytes(m + 1), evict=False),
                 lambda: tr.write_many([bytes(m + 1)])):
        with pytest.raises(FrameTooLargeError) as info:
            call()
        msgs.append(str(info.value))
    with tr.lock() as t:
        for call in (lambda: t.alloc(m + 1), lambda: t.alloc_evicts(m + 1)):
            with pytest.raises(FrameTooLargeError) as info:
                call()
            msgs.append(str(info.value))
    needed = 512 + (32 + m + 1 + 15) // 16 * 16
    for msg in msgs:
        assert f"a frame of {m + 1} bytes does not fit heap arena" in msg
        assert f"at most {m} bytes per frame (its max_frame_size)" in msg
        assert f"Create a larger arena (size >= {needed} bytes" in msg
    # ... and that size is indeed enough.
    big = Transport(Arena.heap(needed))
    assert big.max_frame_size >= m + 1
    big.write(bytes(m + 1))


def test_foreign_file_is_not_an_arena(tmp_path):
    path = tmp_path / "foreign"
    path.write_bytes(b"#!/bin/sh\necho hello\n" * 100)
    path.chmod(0o600)  # private, as arenas are: only the content is wrong
    with pytest.raises(ArenaFormatError, match="magic"):
        Arena.file(str(path))


def test_truncated_file_is_a_size_mismatch(arena_path):
    os.truncate(arena_path, SIZE // 2)
    with pytest.raises(ArenaFormatError) as info:
        Arena.file(arena_path)
    assert "arena_size" in str(info.value)
    assert f"expected {SIZE // 2}, found {SIZE}" in str(info.value)


def test_file_shorter_than_a_header_is_refused(arena_path):
    os.truncate(arena_path, 100)
    with pytest.raises(ArenaFormatError, match="too small"):
        Arena.file(arena_path)


def test_extended_file_is_a_size_mismatch(arena_path):
    os.truncate(arena_path, SIZE + 4096)
    with pytest.raises(ArenaFormatError, match="arena_size"):
        Arena.file(arena_path)


def test_empty_file_without_size_is_a_format_error(tmp_path):
    path = tmp_path / "empty"
    path.write_bytes(b"")
    path.chmod(0o600)  # the caller's own private file (another's, or 0644, is refused first)
    with pytest.raises(ArenaFormatError, match="empty"):
        Arena.file(str(path))
    # With a size it is initialized (an empty file is a creation in progress).
    with Arena.file(str(path), 1024) as a:
        assert a.size == 1024
        assert Transport(a).write(b"x") == 1


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ArenaNotFoundError):
        Arena.file(str(tmp_path / "nope"))
    with pytest.raises(ArenaNotFoundError):
        Arena.open(path=str(tmp_path / "nope"))
    with pytest.raises(ArgumentError, match="directory"):
        Arena.file(str(tmp_path))


def test_committed_offset_outside_the_arena_is_corrupt_at_open(arena_path):
    patch(arena_path, committed_page_off(arena_path) + 16, "<Q", SIZE + 512)  # off_head
    with pytest.raises(ArenaCorruptError, match="off_head"):
        Arena.file(arena_path)


def test_state_version_selecting_a_bad_page_is_corrupt(arena_path):
    # Format 2 has no page index to go out of range: state_version's low bit
    # picks the page. Pointing it at the scratch page, made bad, is refused.
    version = read(arena_path, 136, "<Q")
    scratch = 320 + 64 * ((version + 1) & 1)
    patch(arena_path, scratch + 16, "<Q", 8)  # off_head inside the header
    patch(arena_path, scratch + 8, "<Q", 5)  # seq_high: not empty
    patch(arena_path, 136, "<Q", version + 1)
    with pytest.raises(ArenaCorruptError, match="off_head"):
        Arena.file(arena_path)


def test_frame_link_outside_the_arena_is_corrupt_when_followed_and_readers_go_around_it(arena_path):
    head = read(arena_path, committed_page_off(arena_path) + 16, "<Q")
    patch(arena_path, head + 16, "<Q", 10 * SIZE)  # frame 1's off_next
    with Arena.file(arena_path) as a:  # the header and state are fine
        tr = Transport(a)
        assert tr.read_next() == (1, b"\0" * 40)
        # The link is never followed out of the arena; a lock-free reader
        # finds frame 2 from the newest frame back, and loses nothing.
        assert [seq for seq, _ in tr.read_many()] == [2, 3]
        assert tr.missed == 0
        with tr.lock() as t:
            t.jump_tail()  # the other end is intact
            assert t.frame().seq == 3
            with pytest.raises(ArenaCorruptError):
                t.jump(2)  # walks from the head: 1 -> bad link
        # A writer needs the tail only: it still works.
        assert tr.write(b"new") == 4


def test_frame_data_size_beyond_the_arena_is_corrupt(arena_path):
    tail = read(arena_path, committed_page_off(arena_path) + 24, "<Q")
    patch(arena_path, tail + 24, "<Q", 2**63)
    with Arena.file(arena_path) as a:
        tr = Transport(a)
        with tr.lock() as t:
            t.jump(1)
            assert t.frame().tobytes() == b"\0" * 40
            with pytest.raises(ArenaCorruptError):
                t.jump_tail()
            with pytest.raises(ArenaCorruptError):
                t.alloc(8)
            with pytest.raises(ArenaCorruptError):
                t.used_space
        with pytest.raises(ArenaCorruptError):
            tr.write(b"x")


def test_corruption_while_mapped_is_seen_at_the_next_lock(arena_path):
    with Arena.file(arena_path) as a:
        tr = Transport(a)
        with open(arena_path, "r+b") as f, mmap.mmap(f.fileno(), SIZE) as m:
            off = 320 + 64 * (struct.unpack_from("<Q", m, 136)[0] & 1)
            good = m[off:off + 64]
            struct.pack_into("<Q", m, off + 24, 3)  # off_tail misaligned
            with pytest.raises(ArenaCorruptError):
                tr.write(b"x")
            with pytest.raises(ArenaCorruptError):
                with tr.lock():
                    pass
            m[off:off + 64] = good
        assert tr.write(b"x") == 4  # the failed locks released the mutex
    # and the arena can be closed: nothing thinks the lock is still held


def test_wait_whose_relock_finds_corruption_raises_it_and_releases(arena_path):
    """Regression: the with-block unlocked a second time, raising LockError
    over the real error and leaving the arena impossible to close."""
    a = Arena.file(arena_path)
    tr = Transport(a)
    with open(arena_path, "r+b") as f, mmap.mmap(f.fileno(), SIZE) as m:
        for wait in (lambda t: t.wait(lambda t: False, timeout=0.01),
                     lambda t: t.wait(timeout=0.01),
                     lambda t: t.wait_seq_above(100, timeout=0.01)):
            off = 320 + 64 * (struct.unpack_from("<Q", m, 136)[0] & 1)  # each commit flips it
            good = m[off:off + 64]
            with pytest.raises(ArenaCorruptError):
                with tr.lock() as t:
                    t.jump_tail()
                    struct.pack_into("<Q", m, off + 16, 1)  # off_head
                    wait(t)
            with pytest.raises(LockError):
                t.seq_high  # the block's lock is gone
            m[off:off + 64] = good
            assert tr.write(b"y") > 3
    a.close()
    assert a.closed


# ---- argument errors --------------------------------------------------------------


@pytest.fixture
def heap_size():
    """The heap arena under the ``tr`` fixture (tests/core/conftest.py)."""
    return 1024


@pytest.mark.parametrize("bad", [-1, -(2**70), 2**64, 1.5, "3", None, b"\x01", [1]])
def test_bad_frame_sizes_are_argument_errors(tr, bad):
    with tr.lock() as t:
        with pytest.raises(ArgumentError, match="frame size"):
            t.alloc(bad)
        with pytest.raises(ArgumentError, match="frame size"):
            t.alloc_evicts(bad)
        assert t.seq_high == 0


def test_frame_larger_than_the_arena(tr):
    m = tr.max_frame_size
    with tr.lock() as t:
        with pytest.raises(FrameTooLargeError, match=f"at most {m} bytes"):
            t.alloc(m + 1)
        with pytest.raises(FrameTooLargeError):
            t.alloc(2**40)
        with pytest.raises(FrameTooLargeError):
            t.alloc_evicts(m + 1)
        assert len(t.alloc(m)) == m  # the largest fits
    with pytest.raises(FrameTooLargeError):
        tr.write(b"\0" * (m + 1))
    with pytest.raises(FrameTooLargeError):
        tr.write_many([b"ok", b"\0" * (1 << 20)])
    with tr.lock() as t:
        assert t.empty  # write_many committed nothing


def test_non_bytes_frame_data(tr):
    with pytest.raises(ArgumentError, match="bytes-like"):
        tr.write("text")
    with pytest.raises(ArgumentError, match="bytes-like"):
        tr.write_many([b"a", 3])
    with tr.lock() as t:
        assert t.empty


@pytest.mark.parametrize("bad", [-1, -0.001, math.nan, "soon", [], object()])
def test_bad_timeouts_are_argument_errors(tr, bad):
    with pytest.raises(ArgumentError, match="timeout"):
        tr.read_next(timeout=bad)
    with tr.lock() as t:
        with pytest.raises(ArgumentError, match="timeout"):
            t.wait(timeout=bad)
        with pytest.raises(ArgumentError, match="timeout"):
            t.wait(lambda t: False, timeout=bad)
        with pytest.raises(ArgumentError, match="timeout"):
            t.wait_seq_above(0, timeout=bad)
    with pytest.raises(ArgumentError, match="timeout"):
        Deadman(tr.arena).take(timeout=bad)
    with pytest.raises(ArgumentError, match="timeout"):
        Deadman(tr.arena).wait_taken(timeout=bad)


def test_wait_predicate_must_be_callable(tr):
    with tr.lock() as t:
        with pytest.raises(ArgumentError, match="callable"):
            t.wait(42, timeout=0)


def test_bad_arena_sizes_and_modes(tmp_path):
    for bad in (-1, 0, 575, 1.0, "4096"):
        with pytest.raises(ArgumentError, match="size"):
            Arena.heap(bad)
        with pytest.raises(ArgumentError, match="size"):
            Arena.file(str(tmp_path / "f"), bad)
    with pytest.raises(ArgumentError, match="size"):
        Arena.heap(None)
    for bad in (-1, 0o10000, "0600", 1.5):
        with pytest.raises(ArgumentError, match="mode"):
            Arena.file(str(tmp_path / "g"), 1024, mode=bad)
    assert not (tmp_path / "f").exists() and not (tmp_path / "g").exists()
    with pytest.raises(TypeError):
        Arena()


def test_arena_open_takes_exactly_one_of_path_and_shm(tmp_path):
    with pytest.raises(ArgumentError, match="exactly one"):
        Arena.open()
    with pytest.raises(ArgumentError, match="exactly one"):
        Arena.open(str(tmp_path / "x"), shm="x")
    with pytest.raises(ArenaNotFoundError):
        Arena.open(shm=shm_name("missing"))


@pytest.mark.parametrize("bad", ["", "/", "//", "a/b", "/a/b", "x" * 300, 5, None, b"name"])
def test_bad_shm_names(bad):
    with pytest.raises(ArgumentError, match="name"):
        Arena.shm(bad, 1024)
    with pytest.raises(ArgumentError, match="name"):
        Arena.unlink_shm(bad)


def test_missing_shm_without_size(tmp_path):
    name = shm_name("missing")
    with pytest.raises(ArenaNotFoundError, match=name):
        Arena.shm(name)
    assert not os.path.exists("/dev/shm/" + name)
    assert Arena.unlink_shm(name) is False


def test_heap_arena_has_no_name_to_unlink():
    with Arena.heap(1024) as a:
        with pytest.raises(ArgumentError):
            a.unlink()


# ---- lock misuse ----------------------------------------------------------------


def test_locked_transport_outside_its_with_block(tr):
    with tr.lock() as t:
        t.alloc(1)
        t.commit()
    for op in (lambda: t.alloc(1), t.commit, t.clear, t.jump_head, t.next, t.frame,
               t.has_next, lambda: t.seq_high, lambda: t.used_space, lambda: t.wait(timeout=0)):
        with pytest.raises(LockError, match="not held"):
            op()


def test_frame_data_and_views_die_with_the_lock(tr):
    tr.write(b"hello")
    with tr.lock() as t:
        view = t.alloc(4)
        view[:] = b"abcd"
        t.commit()
        t.jump_head()
        frame = t.frame()
        data = frame.data
        assert bytes(data) == b"hello"
        with pytest.raises(TypeError):
            data[0] = 1  # frames are read-only
    with pytest.raises(LockError, match="frame 1"):
        frame.data
    with pytest.raises(LockError):
        frame.tobytes()
    with pytest.raises(ValueError, match="released"):
        bytes(data)
    with pytest.raises(ValueError, match="released"):
        view[0] = 1
    # A frame from an earlier lock stays dead under a new one.
    with tr.lock() as t:
        with pytest.raises(LockError):
            frame.data
        assert t.frame().tobytes() == b"hello"


def test_nested_lock_and_two_transports_in_one_thread(tr):
    other = Transport(tr.arena)
    with tr.lock():
        with pytest.raises(LockError, match="nested"):
            with tr.lock():
                pass
        with pytest.raises(LockError, match="already held"):
            with other.lock():
                pass
        with pytest.raises(LockError):
            other.write(b"x")
        # Reads take no lock: reading while this thread holds it
        # neither deadlocks nor fails.
        assert other.read_next() is None and other.read_many() == []
    assert other.write(b"x") == 1  # nothing leaked: both work afterwards
    with tr.lock() as t:
        assert t.seq_high == 1


def test_wait_with_uncommitted_frames_is_a_lock_error(tr):
    with tr.lock() as t:
        t.alloc(3)
        t.jump_tail()  # no next frame: the waits would have to sleep
        with pytest.raises(LockError, match="commit"):
            t.wait(timeout=0.01)
        with pytest.raises(LockError, match="commit"):
            t.wait(lambda t: False, timeout=0.01)
        with pytest.raises(LockError, match="commit"):
            t.wait_seq_above(5, timeout=0.01)
        assert t.seq_high == 1  # still held, frame still pending
        t.commit()
        with pytest.raises(A0TimeoutError):
            t.wait(timeout=0.01)


def test_close_while_locked_lets_the_block_finish_then_refuses(tr):
    # close() inside a lock block used to raise LockError; now the block is
    # an operation in flight: it finishes, and only later calls are refused.
    a = tr.arena
    reader = Transport(a)
    with tr.lock() as t:
        a.close()
        assert a.closed
        t.alloc(1)[:] = b"k"
        t.commit()
        t.jump_tail()
        assert t.frame().tobytes() == b"k"
    with pytest.raises(ClosedError):
        tr.lock().__enter__()
    with pytest.raises(ClosedError):
        reader.read_next()


def test_operations_after_close_are_closed_errors(tmp_path):
    a = Arena.file(str(tmp_path / "c"), 1024)
    tr = Transport(a)
    tr.write(b"x")
    dm = Deadman(a)
    a.close()
    a.close()  # idempotent
    for op in (lambda: tr.write(b"y"), tr.read_next, tr.read_many, lambda: tr.write_many([b"z"]),
               lambda: tr.lock().__enter__(), lambda: tr.notify_count, lambda: tr.waiter_count,
               lambda: Transport(a), lambda: Deadman(a), dm.take, dm.try_take, dm.is_taken,
               lambda: dm.owner_pid, a.header):
        with pytest.raises(ClosedError, match="closed"):
            op()


def test_close_with_live_views_defers_the_unmap(tr):
    a = tr.arena
    tr.write(b"abc")
    with tr.lock() as t:
        t.jump_head()
        derived = memoryview(t.frame().data)  # a view the lock cannot revoke
    a.close()
    assert a.closed
    assert bytes(derived) == b"abc"  # still mapped: no use-after-unmap
    with pytest.raises(ClosedError):
        tr.write(b"x")
    derived.release()


def test_deadman_release_by_non_owner(tr):
    dm = Deadman(tr.arena)
    with pytest.raises(LockError):
        dm.release()
    with dm:
        with pytest.raises(LockError):
            dm.take()  # this thread holds it already
        assert dm.try_take() is False
        with pytest.raises(LockError):
            dm.wait_released(timeout=0.01)
    with pytest.raises(LockError):
        dm.release()


# ---- fuzz in a child process: corruption never crashes or hangs --------------------

FUZZ_CHILD = textwrap.dedent(
    r"""
    import mmap, os, struct, sys, tempfile
    from hypothesis import given, settings, strategies as st, HealthCheck
    import a0py
    from a0py import A0Error, Arena, Transport

    SIZE = 2048
    d = tempfile.mkdtemp()
    outcomes = {"refused": 0, "opened": 0}

    def run_ops(a):
        try:
            tr = Transport(a)  # checks the committed state again
        except A0Error:
            return
        for op in range(12):
            try:
                if op == 0:
                    frames = tr.read_many()
                    assert all(len(b) <= SIZE for _, b in frames)
                elif op == 1:
                    tr.read_next(timeout=0)
                elif op == 2:
                    with tr.lock() as t:
                        t.jump_head()
                        for _ in range(200):
                            assert len(t.frame().tobytes()) <= SIZE
                            if not t.has_next():
                                break
                            t.next()
                        else:
                            raise AssertionError("walk did not end")
                elif op == 3:
                    with tr.lock() as t:
                        t.jump_tail()
                        for _ in range(200):
                            t.frame().tobytes()
                            if not t.has_prev():
                                break
                            t.prev()
                        else:
                            raise AssertionError("walk did not end")
                elif op == 4:
                    with tr.lock() as t:
                        for s in (0, t.seq_low, t.seq_high, (t.seq_low + t.seq_high) // 2):
                            try:
                                t.jump(s)
                                t.frame().tobytes()
                            except A0Error:
                                pass
                elif op == 5:
                    with tr.lock() as t:
                        t.used_space, t.high_water_mark, t.empty, t.iter_valid()
                        t.alloc_evicts(100)
                elif op in (6, 7):
                    tr.write(b"w" * (op * 60))
                elif op == 8:
                    with tr.lock() as t:
                        t.alloc(300)[:] = b"q" * 300
                        t.commit()
                elif op == 9:
                    tr.write_many([b"a" * 10, b"b" * 900])
                elif op == 10:
                    with tr.lock() as t:
                        t.wait(lambda t: True, timeout=0)
                else:
                    with tr.lock() as t:
                        t.clear()
            except A0Error:
                pass

    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=10),
           patches=st.lists(st.tuples(st.integers(320, SIZE - 8), st.binary(min_size=1, max_size=16),
                                      st.booleans()), min_size=1, max_size=4),
           mapped=st.booleans())
    def fuzz(sizes, patches, mapped):
        path = os.path.join(d, "arena")
        if os.path.exists(path):
            os.unlink(path)
        with Arena.file(path, SIZE) as a:
            Transport(a).write_many([bytes([i]) * n for i, n in enumerate(sizes)])
        def apply(buf):
            page = struct.unpack_from("<Q", buf, 136)[0] & 1
            for off, data, on_state in patches:
                if on_state:  # aim at the committed state page
                    off = 320 + 64 * page + (off % 40)
                buf[off:off + len(data)] = data[: SIZE - off]
        if mapped:
            # another "process" corrupts the arena while we have it open
            a = Arena.file(path)
            with open(path, "r+b") as f, mmap.mmap(f.fileno(), SIZE) as m:
                apply(m)
            outcomes["opened"] += 1
            run_ops(a)
            a.close()
        else:
            with open(path, "r+b") as f, mmap.mmap(f.fileno(), SIZE) as m:
                apply(m)
            try:
                a = Arena.file(path)
            except A0Error:
                outcomes["refused"] += 1
                return
            outcomes["opened"] += 1
            run_ops(a)
            a.close()

    fuzz()
    print("outcomes", outcomes)
    """
)


def test_random_corruption_never_crashes_or_hangs_the_interpreter(tmp_path):
    script = tmp_path / "fuzz_child.py"
    script.write_text(FUZZ_CHILD)
    examples = 150 if os.environ.get("CI") else 400
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, str(script), str(examples)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "outcomes" in proc.stdout


def test_crash_in_the_child_would_be_seen(tmp_path):
    """The fuzz harness itself: a segfaulting child is a failed exit."""
    proc = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.string_at(0)"],
                          capture_output=True, timeout=60)
    assert proc.returncode != 0


@pytest.mark.parametrize("bad", ["1", b"1", True, object(), float("nan"), -0.5])
def test_wait_rejects_non_numeric_or_negative_timeout(bad):
    tr = a0py.Transport(a0py.Arena.heap(4096))
    with tr.lock() as t:
        with pytest.raises(a0py.ArgumentError, match="timeout"):
            t.wait(timeout=bad)


def test_spin_above_32_bits_is_rejected():
    tr = a0py.Transport(a0py.Arena.heap(4096))
    tr.spin = 0xFFFFFFFF
    assert tr.spin == 0xFFFFFFFF
    with pytest.raises(a0py.ArgumentError, match="spin"):
        tr.spin = 1 << 32
    assert tr.spin == 0xFFFFFFFF
