"""The transport's API behaviour, in one process (threads where it waits),
plus arena creation and attachment (shm, file) and the creation race."""

import multiprocessing
import os
import stat
import struct
import threading
import time
import uuid

import pytest

from a0py import (
    A0TimeoutError,
    Arena,
    ArenaExistsError,
    ArgumentError,
    Deadman,
    EmptyError,
    FrameTooLargeError,
    LockError,
    NoFrameError,
    SeqNotFoundError,
    Transport,
)


def shm_name(tag):
    return f"a0py-test-{tag}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def shm():
    """A unique shm name, unlinked at teardown whatever happened."""
    names = []

    def make(tag="basic"):
        names.append(shm_name(tag))
        return names[-1]

    yield make
    for name in names:
        Arena.unlink_shm(name)


def span(n):
    return (32 + n + 15) & ~15


def fill(tr, count, size):
    return [tr.write(bytes([i % 256]) * size) for i in range(count)]


# ---- writing and reading ----------------------------------------------------------


def test_write_then_read_round_trips_in_order(tr):
    payloads = [b"", b"a", b"hello world", bytes(range(256)), b"\xff" * 1000]
    seqs = [tr.write(p) for p in payloads]
    assert seqs == [1, 2, 3, 4, 5]
    reader = Transport(tr.arena)
    assert reader.read_many() == list(zip(seqs, payloads))
    assert reader.read_many() == []
    assert reader.read_next() is None


def test_write_accepts_any_bytes_like(tr):
    import array

    tr.write(bytearray(b"ba"))
    tr.write(memoryview(b"xmvx")[1:3])
    tr.write(array.array("H", [1, 2]))
    assert [d for _, d in tr.read_many()] == [b"ba", b"mv", struct.pack("=HH", 1, 2)]


def test_alloc_is_zero_copy_and_filled_in_place(tr):
    with tr.lock() as t:
        view = t.alloc(8)
        assert len(view) == 8 and not view.readonly
        view[:4] = b"abcd"
        view[4:] = b"efgh"
        t.commit()
        t.jump_tail()
        frame = t.frame()
        assert (frame.seq, frame.size, len(frame)) == (1, 8, 8)
        assert frame.data.readonly
        view[0:1] = b"Z"  # same bytes: the frame sees the change
        assert frame.tobytes() == b"Zbcdefgh"
    assert Transport(tr.arena).read_next() == (1, b"Zbcdefgh")


def test_uncommitted_frames_are_visible_to_the_holder_only_until_unlock(tr):
    other = Transport(tr.arena)
    tr.write(b"one")
    with tr.lock() as t:
        t.alloc(3)[:] = b"two"
        assert t.seq_high == 2
        t.jump_tail()
        assert t.frame().tobytes() == b"two"
    assert tr.cursor_seq == 1  # back from the discarded frame
    assert other.read_many() == [(1, b"one")]
    assert tr.write(b"three") == 2  # the discarded seq is handed out again
    assert tr.read_next() == (2, b"three")  # nothing skipped


def test_several_allocs_one_commit(tr):
    with tr.lock() as t:
        for i in range(3):
            t.alloc(2)[:] = b"%02d" % i
        assert t.seq_high == 3
        t.commit()
    assert Transport(tr.arena).read_many() == [(1, b"00"), (2, b"01"), (3, b"02")]


def test_write_many_returns_the_last_seq(tr):
    assert tr.write_many([]) is None
    assert tr.write_many([b"a", b"b", b"c"]) == 3
    assert tr.write_many(iter([b"d"])) == 4
    assert Transport(tr.arena).read_many(max_frames=2) == [(1, b"a"), (2, b"b")]


def test_read_many_limit_and_cursor(tr):
    fill(tr, 5, 3)
    r = Transport(tr.arena)
    assert [s for s, _ in r.read_many(2)] == [1, 2]
    assert r.cursor_seq == 2
    assert r.read_many(0) == []
    assert [s for s, _ in r.read_many()] == [3, 4, 5]


# ---- cursor ---------------------------------------------------------------------


def test_jump_semantics(tr):
    with tr.lock() as t:
        with pytest.raises(EmptyError):
            t.jump(1)
        with pytest.raises(EmptyError):
            t.jump_head()
        with pytest.raises(EmptyError):
            t.jump_tail()
    fill(tr, 5, 10)
    with tr.lock() as t:
        t.jump(3)
        assert t.frame().seq == 3 and tr.cursor_seq == 3
        t.jump(0)
        assert t.frame().seq == 1  # below the oldest: the head
        t.jump(5)
        assert t.frame().seq == 5
        with pytest.raises(SeqNotFoundError, match="newest frame is seq 5"):
            t.jump(6)
        assert tr.cursor_seq == 5  # a failed jump does not move the cursor
        t.jump_head()
        assert not t.has_prev() and t.has_next()
        t.jump_tail()
        assert t.has_prev() and not t.has_next()
        with pytest.raises(NoFrameError):
            t.next()
        t.prev()
        assert t.frame().seq == 4


def test_fresh_cursor_is_before_the_first_frame(tr):
    fill(tr, 2, 1)
    with tr.lock() as t:
        assert tr.cursor_seq == 0
        assert t.has_next() and not t.has_prev() and not t.iter_valid()
        with pytest.raises(NoFrameError, match="cursor seq 0"):
            t.frame()
        with pytest.raises(NoFrameError):
            t.prev()
        t.next()
        assert t.frame().seq == 1


def test_has_next_stays_true_across_unlock_and_relock(tr):
    fill(tr, 2, 1)
    with tr.lock() as t:
        t.jump_head()
        assert t.has_next()
    fill(tr, 100, 30)  # evicts, the cursor's frame among them
    with tr.lock() as t:
        assert t.has_next()
    with tr.lock() as t:
        assert t.has_next()
        t.next()
        assert t.has_next()


def test_next_from_an_evicted_cursor_goes_to_the_oldest_survivor(tr):
    fill(tr, 3, 100)
    with tr.lock() as t:
        t.jump(2)
    fill(tr, 60, 100)  # 4096-byte arena: only the newest ~26 survive
    with tr.lock() as t:
        low = t.seq_low
        assert low > 2
        assert not t.iter_valid()
        assert not t.has_prev()
        with pytest.raises(NoFrameError):
            t.frame()
        t.next()
        assert t.frame().seq == low and t.iter_valid()
    r = Transport(tr.arena)
    with r.lock() as t:
        t.jump(1)  # evicted seq: jump goes to the head
        assert t.frame().seq == low


def test_iter_valid_turns_false_when_the_cursor_frame_is_evicted(tr):
    tr.write(b"a" * 100)
    with tr.lock() as t:
        t.jump_head()
        assert t.iter_valid()
        # the same lock evicts it: the alloc overlaps the head
        t.alloc(tr.max_frame_size)
        assert not t.iter_valid()
        assert t.has_next()
        t.commit()


def test_clear_empties_and_seqs_keep_counting(tr):
    fill(tr, 3, 8)
    with tr.lock() as t:
        t.jump_tail()
        t.clear()
        assert t.empty and (t.seq_low, t.seq_high) == (4, 3)
        assert t.used_space == 0
        assert not t.has_next() and not t.iter_valid()
    # published at once: another transport sees it empty
    assert Transport(tr.arena).read_many() == []
    assert tr.write(b"x") == 4
    assert tr.read_next() == (4, b"x")


def test_clear_with_pending_frames_consumes_their_seqs(tr):
    with tr.lock() as t:
        t.alloc(1)
        t.alloc(1)
        t.clear()
    assert tr.write(b"y") == 3


# ---- space accounting and eviction ----------------------------------------------


def test_used_space_and_high_water_mark(tr):
    with tr.lock() as t:
        assert t.used_space == 0 and t.high_water_mark == 0
    tr.write(b"x" * 10)
    tr.write(b"y" * 40)
    with tr.lock() as t:
        assert t.used_space == span(10) + span(40) == 48 + 80
        assert t.high_water_mark == 128
        t.alloc(100)
        assert t.used_space == 128 + span(100)
        assert t.high_water_mark == 128  # only commits raise it
        t.commit()
        assert t.high_water_mark == 128 + 144
        t.clear()
        assert t.used_space == 0 and t.high_water_mark == 272  # a high-water mark stays


def test_used_space_counts_the_gap_before_a_wrap():
    a = Arena.heap(512 + 256)
    tr = Transport(a)
    tr.write(b"a" * 60)  # [512, 608)
    tr.write(b"b" * 60)  # [608, 704)
    tr.write(b"c" * 60)  # 704 + 96 > 768: wraps to 512, evicts 1
    with tr.lock() as t:
        assert (t.seq_low, t.seq_high) == (2, 3)
        assert t.used_space == (768 - 608) + (608 - 512)
    a.close()


def test_alloc_evicts_is_true_exactly_when_alloc_evicts():
    a = Arena.heap(1024)
    tr = Transport(a)
    with tr.lock() as t:
        ws = 1024 - 512
        assert not t.alloc_evicts(0)
        t.alloc(ws - 32 - 64)  # leaves 64 bytes
        assert not t.alloc_evicts(32)  # span 64: fits exactly
        assert t.alloc_evicts(33)  # span 80: wraps, evicts frame 1
        assert t.seq_low == 1  # asking changed nothing
        t.alloc(32)
        assert t.seq_low == 1
        assert t.alloc_evicts(0)
        t.alloc(0)
        assert t.seq_low == 2
        assert t.alloc_evicts(tr.max_frame_size)
        t.commit()
    a.close()


def test_eviction_is_published_even_if_the_alloc_is_not_committed():
    a = Arena.heap(1024)
    tr = Transport(a)
    reader = Transport(a)
    tr.write(b"1" * 200)
    tr.write(b"2" * 200)
    with tr.lock() as t:
        t.alloc(200)  # evicts frame 1, then is dropped
    assert reader.read_many() == [(2, b"2" * 200)]
    a.close()


# ---- writing without evicting --------------------------------------------------


def fill_without_evicting(tr, size):
    """Writes frames of `size` bytes until the next one would evict; their seqs."""
    seqs = []
    while True:
        with tr.lock() as t:
            if t.alloc_evicts(size):
                return seqs
        seqs.append(tr.write(bytes([len(seqs) % 256]) * size))


def live_seqs(tr):
    with tr.lock() as t:
        return (t.seq_low, t.seq_high)


def test_write_without_evicting_times_out_when_full_and_evicts_nothing(tr):
    seqs = fill_without_evicting(tr, 300)
    assert len(seqs) > 3
    for timeout in (0, 0.05):
        t0 = time.monotonic()
        with pytest.raises(A0TimeoutError, match=r"heap arena.*without evicting.*drop_through"):
            tr.write(b"x" * 300, evict=False, timeout=timeout)
        assert time.monotonic() - t0 >= timeout
        assert live_seqs(tr) == (1, seqs[-1])  # nothing evicted, nothing written
    # A frame that still fits in the free tail goes in without waiting.
    assert tr.write(b"", evict=False, timeout=0) == seqs[-1] + 1
    assert live_seqs(tr) == (1, seqs[-1] + 1)


def test_write_without_evicting_takes_the_room_a_consumer_drops(tr):
    seqs = fill_without_evicting(tr, 300)
    with tr.lock() as t:
        t.drop_through(1)  # the consumer has read frame 1
        assert t.seq_low == 2
    seq = tr.write(b"y" * 300, evict=False, timeout=0)
    assert live_seqs(tr) == (2, seq)
    with tr.lock() as t:
        t.jump(seq)
        assert t.frame().tobytes() == b"y" * 300
    assert seq == seqs[-1] + 1


def test_write_without_evicting_refuses_what_can_never_fit(tr):
    with pytest.raises(FrameTooLargeError):
        tr.write(b"z" * (tr.max_frame_size + 1), evict=False, timeout=None)
    with pytest.raises(ArgumentError, match="evict=False"):
        tr.write(b"z", timeout=1)  # an evicting write never waits: a timeout is a mistake
    with pytest.raises(ArgumentError, match="timeout"):
        tr.write(b"z", evict=False, timeout=-1)


def test_write_without_evicting_sleeps_until_another_thread_clears(tr):
    fill_without_evicting(tr, 500)
    high = live_seqs(tr)[1]
    writer = Transport(tr.arena)
    got = []
    th = start(lambda: got.append(writer.write(b"w" * 500, evict=False, timeout=10)))
    wait_for_sleeper(tr)
    assert not got and live_seqs(tr) == (1, high)  # asleep: it evicted nothing
    with tr.lock() as t:
        t.clear()
    th.join(10)
    assert not th.is_alive()
    assert got == [high + 1]
    assert live_seqs(tr) == (high + 1, high + 1)


def test_drop_through_bounds_and_pending_frames(tr):
    fill(tr, 5, 10)
    with tr.lock() as t:
        t.drop_through(0)
        assert (t.seq_low, t.seq_high) == (1, 5)
        view = t.alloc(4)
        with pytest.raises(LockError, match="commit"):
            t.drop_through(2)
        t.commit()
        t.drop_through(3)
        assert (t.seq_low, t.seq_high) == (4, 6)
        t.drop_through(10**6)
        assert t.empty and t.seq_low == 7
        with pytest.raises(ValueError):
            view[0] = 1  # the view of a dropped frame is revoked
    with pytest.raises(ArgumentError):
        with tr.lock() as t:
            t.drop_through(-1)


def test_max_frame_size_fills_the_workspace(tr):
    m = tr.max_frame_size
    assert m == 4096 - 512 - 32
    assert tr.write(b"\xee" * m) == 1
    assert tr.write(b"\xdd" * m) == 2  # evicts the first
    assert Transport(tr.arena).read_many() == [(2, b"\xdd" * m)]


# ---- waiting ----------------------------------------------------------------------


def start(target, *args):
    th = threading.Thread(target=target, args=args, daemon=True)
    th.start()
    return th


def wait_for_sleeper(tr, deadline=10):
    """Until some waiter sleeps on the arena (polling a counter is fine: it
    only makes the test exercise the sleeping path, not synchronize it)."""
    end = time.monotonic() + deadline
    while tr.waiter_count == 0 and time.monotonic() < end:
        time.sleep(0.001)


def test_read_next_timeouts(tr):
    r = Transport(tr.arena)
    assert r.read_next(timeout=0) is None
    t0 = time.monotonic()
    assert r.read_next(timeout=0.05) is None
    assert time.monotonic() - t0 >= 0.05
    tr.write(b"now")
    assert r.read_next(timeout=5) == (1, b"now")


@pytest.mark.parametrize("timeout", [None, 10])
def test_read_next_wakes_when_another_thread_writes(tr, timeout):
    got = []
    r = Transport(tr.arena)
    r.spin = 0
    th = start(lambda: got.append(r.read_next(timeout=timeout)))
    wait_for_sleeper(tr)
    tr.write(b"ping")
    th.join(10)
    assert not th.is_alive()
    assert got == [(1, b"ping")]
    assert tr.waiter_count == 0


def test_wait_with_a_python_predicate_from_another_thread(tr):
    result = {}
    done = threading.Event()

    def waiter():
        r = Transport(tr.arena)
        r.spin = 0
        with r.lock() as t:
            result["ok"] = t.wait(lambda t: t.seq_high >= 3, timeout=10)
            result["seq_high"] = t.seq_high  # the lock is held on return
        done.set()

    start(waiter)
    for i in range(3):
        wait_for_sleeper(tr)
        tr.write(b"%d" % i)
    assert done.wait(10)
    assert result == {"ok": True, "seq_high": 3}


def test_wait_fast_path_and_seq_above_from_another_thread(tr):
    results = []

    def waiter():
        r = Transport(tr.arena)
        r.spin = 0
        with r.lock() as t:
            results.append(t.wait(timeout=10))  # C predicate: has_next
            t.next()
            results.append(t.frame().tobytes())
            results.append(t.wait_seq_above(1, timeout=10))
            results.append(t.seq_high)

    th = start(waiter)
    wait_for_sleeper(tr)
    tr.write(b"first")
    wait_for_sleeper(tr)
    tr.write(b"second")
    th.join(10)
    assert results == [True, b"first", True, 2]


def test_wait_timeout_raises_and_keeps_the_lock(tr):
    with tr.lock() as t:
        t0 = time.monotonic()
        with pytest.raises(A0TimeoutError, match=r"0\.05"):
            t.wait(timeout=0.05)
        assert time.monotonic() - t0 >= 0.05
        with pytest.raises(A0TimeoutError):
            t.wait(lambda t: False, timeout=0.02)
        with pytest.raises(A0TimeoutError):
            t.wait_seq_above(0, timeout=0)
        t.alloc(1)  # still held: usable
        t.commit()
        assert t.wait(timeout=0) is True  # has_next now holds


def test_wait_predicate_sees_the_lock_and_its_errors_propagate(tr):
    with tr.lock() as t:
        with pytest.raises(ZeroDivisionError):
            t.wait(lambda t: 1 / 0, timeout=1)
        assert t.seq_high == 0  # still held


def test_commit_bumps_the_notify_word(tr):
    before = tr.notify_count
    tr.write(b"x")
    assert tr.notify_count != before


# ---- deadman ------------------------------------------------------------------------


def test_deadman_in_process(tr):
    dm = Deadman(tr.arena)
    assert not dm.is_taken() and not dm.is_mine and dm.owner_pid is None
    dm.take(timeout=1)
    assert dm.is_taken() and dm.is_mine and dm.owner_pid == os.getpid()
    assert tr.arena.header()["deadman_pid"] == os.getpid()
    dm.wait_taken(timeout=0)
    seen = {}

    def other_thread():
        d = Deadman(tr.arena)
        seen["taken"] = d.is_taken()
        seen["mine"] = d.is_mine
        seen["try"] = d.try_take()
        try:
            d.release()
        except LockError:
            seen["release"] = "LockError"
        try:
            d.take(timeout=0.02)
        except A0TimeoutError:
            seen["take"] = "timeout"

    th = start(other_thread)
    th.join(10)
    assert seen == {"taken": True, "mine": False, "try": False, "release": "LockError", "take": "timeout"}
    assert dm.is_mine  # the failed release by another thread changed nothing
    dm.release()
    assert not dm.is_taken() and dm.owner_pid is None
    dm.wait_released(timeout=0)
    assert dm.try_take() is True
    dm.release()
    with dm:
        assert dm.is_mine
    assert not dm.is_taken()


def test_deadman_wait_taken_wakes_when_another_thread_takes(tr):
    dm = Deadman(tr.arena)
    taken, release = threading.Event(), threading.Event()

    def holder():
        d = Deadman(tr.arena)
        d.take()
        taken.set()
        release.wait(10)
        d.release()

    th = start(holder)
    dm.wait_taken(timeout=10)
    assert taken.wait(10) and dm.is_taken() and not dm.is_mine
    release.set()
    dm.wait_released(timeout=10)
    th.join(10)
    assert not dm.is_taken()


# ---- arenas: shm, file, attach ---------------------------------------------------------


def test_shm_arena_is_0600_by_default(shm):
    name = shm("mode")
    old = os.umask(0)  # not the umask's doing
    try:
        with Arena.shm(name, 1024) as a:
            assert a.kind == "shm" and a.name == "/" + name
            assert a.mode == 0o600
            assert stat.S_IMODE(os.stat("/dev/shm/" + name).st_mode) == 0o600
    finally:
        os.umask(old)


@pytest.mark.parametrize("mode", [0o640, 0o666, 0o400 | 0o200])
def test_explicit_mode_is_honoured_whatever_the_umask(shm, tmp_path, mode):
    old = os.umask(0o077)
    try:
        name = shm()
        with Arena.shm(name, 1024, mode=mode) as a:
            assert a.mode == mode
            assert stat.S_IMODE(os.stat("/dev/shm/" + name).st_mode) == mode
        path = tmp_path / "f.a0"
        with Arena.file(str(path), 1024, mode=mode) as a:
            assert a.mode == mode == stat.S_IMODE(os.stat(path).st_mode)
    finally:
        os.umask(old)


def test_file_arena_is_0600_by_default(tmp_path):
    old = os.umask(0)
    try:
        path = tmp_path / "a.a0"
        with Arena.file(str(path), 1024) as a:
            assert a.kind == "file" and a.name == str(path)
            assert a.mode == 0o600 == stat.S_IMODE(os.stat(path).st_mode)
    finally:
        os.umask(old)


def test_attach_with_size_none_and_open(shm, tmp_path):
    name = shm()
    with Arena.shm(name, 2048) as a:
        Transport(a).write(b"hi")
        with Arena.shm(name) as b:  # attach: must exist
            assert b.size == 2048
            assert Transport(b).read_next() == (1, b"hi")
        with Arena.shm(name, 2048) as c:  # exists with the size asked for: attaches
            assert c.size == 2048
        with pytest.raises(ArenaExistsError, match=r"size of 2048 bytes, not the 8192.*size=None"):
            Arena.shm(name, 8192)  # exists with another size: says so (it used to attach silently)
        with Arena.open(shm=name) as d:
            assert Transport(d).read_many() == [(1, b"hi")]
        with Arena.open(shm="/" + name) as e:
            assert e.name == "/" + name
    path = str(tmp_path / "x.a0")
    with Arena.file(path, 1024) as a:
        Transport(a).write(b"file")
    with pytest.raises(ArenaExistsError, match=r"size of 1024 bytes, not the 4096"):
        Arena.file(path, 4096)
    with Arena.open(path=path) as b:
        assert b.size == 1024
        assert Transport(b).read_many() == [(1, b"file")]
    with Arena.open(path) as b:  # positional path
        assert b.kind == "file"


def test_writes_through_one_mapping_are_seen_through_another(shm):
    name = shm()
    with Arena.shm(name, 4096) as a, Arena.shm(name) as b:
        ta, tb = Transport(a), Transport(b)
        ta.write(b"from a")
        tb.write(b"from b")
        assert Transport(a).read_many() == [(1, b"from a"), (2, b"from b")]


def test_unlink(shm, tmp_path):
    name = shm()
    a = Arena.shm(name, 1024)
    tr = Transport(a)
    assert a.unlink() is True
    assert not os.path.exists("/dev/shm/" + name)
    assert a.unlink() is False
    assert Arena.unlink_shm(name) is False
    assert tr.write(b"still mapped") == 1  # the mapping outlives the name
    assert tr.read_next() == (1, b"still mapped")
    a.close()
    with pytest.raises(FileNotFoundError):  # ArenaNotFoundError is one
        Arena.shm(name)
    path = str(tmp_path / "u.a0")
    f = Arena.file(path, 1024)
    assert f.unlink() is True and not os.path.exists(path)
    assert f.unlink() is False
    f.close()


def test_header_snapshot(shm):
    name = shm()
    with Arena.shm(name, 1024) as a:
        Transport(a).write(b"abc")
        h = a.header()
        assert h["magic"] == struct.unpack("<Q", b"A0PYAREN")[0]
        assert (h["version"], h["header_size"], h["arena_size"]) == (3, 512, 1024)
        assert h["notify_local"] == h["notify"] == 2 and h["local_waiters"] == 0
        assert h["committed_page"] == h["state_version"] & 1 and h["state_version"] == 1
        page = h["pages"][h["committed_page"]]
        assert (page["seq_low"], page["seq_high"], page["off_head"], page["off_tail"]) == (1, 1, 512, 512)
        assert page["high_water_mark"] == span(3)


def test_reopening_keeps_frames_and_seqs(tmp_path):
    path = str(tmp_path / "r.a0")
    with Arena.file(path, 2048) as a:
        Transport(a).write_many([b"a", b"b"])
    with Arena.file(path, 2048) as a:
        tr = Transport(a)
        assert tr.read_many() == [(1, b"a"), (2, b"b")]
        assert tr.write(b"c") == 3


# ---- the creation race -----------------------------------------------------------------


def _race_sizes_child(name, size, barrier, results):
    barrier.wait(30)
    try:
        with Arena.shm(name, size) as a:
            results.put(("attached", size, a.size))
    except ArenaExistsError as e:
        results.put(("exists", size, str(e)))


def test_processes_racing_to_create_with_different_sizes_get_one_arena_or_a_clear_error(shm):
    """Eight processes create one name with four sizes: one size wins, those
    that asked for it attach, every other one gets ArenaExistsError naming
    both sizes (it used to attach silently at the winner's size)."""
    name = shm("racesz")
    ctx = multiprocessing.get_context("fork")
    sizes = [4096, 8192, 16384, 32768] * 2
    barrier, results = ctx.Barrier(len(sizes)), ctx.Queue()
    procs = [ctx.Process(target=_race_sizes_child, args=(name, z, barrier, results)) for z in sizes]
    for p in procs:
        p.start()
    got = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * len(sizes)
    with Arena.shm(name) as a:
        winner = a.size
    assert winner in sizes
    for outcome, asked, detail in got:
        if asked == winner:
            assert (outcome, detail) == ("attached", winner)
        else:
            assert outcome == "exists"
            assert f"size of {winner} bytes, not the {asked} bytes" in detail


def _init_at(name, size):
    Arena.shm(name, size).close()


def test_a_creator_that_loses_the_init_race_leaves_the_winners_arena_alone(shm, monkeypatch):
    """Our exclusive create succeeds, but before we lock the empty object another
    process opens it and initializes it at its own size: we get ArenaExistsError,
    and its arena (in use) stays. The creator used to unlink it on any failure, so
    the racing-sizes test above saw a process attached to an arena that another
    then replaced."""
    from a0py import _core

    name = shm("lostrace")
    real_create = _core._ShmName.create
    ctx = multiprocessing.get_context("fork")

    def create_then_lose(self, mode):
        fd = real_create(self, mode)  # ours, empty, not yet locked
        other = ctx.Process(target=_init_at, args=(name, 8192))
        other.start()
        other.join(30)
        assert other.exitcode == 0
        return fd

    monkeypatch.setattr(_core._ShmName, "create", create_then_lose)
    with pytest.raises(ArenaExistsError, match="size of 8192 bytes, not the 4096"):
        Arena.shm(name, 4096)
    monkeypatch.undo()
    with Arena.shm(name) as a:
        assert a.size == 8192


def _race_child(name, size, barrier, pid_box):
    barrier.wait(30)
    a = Arena.shm(name, size)
    Transport(a).write(struct.pack("<Q", os.getpid()))
    pid_box.put(os.getpid())
    a.close()


@pytest.mark.parametrize("round_", range(3))
def test_processes_racing_to_create_one_shm_arena_end_with_one_initialized_arena(shm, round_):
    n = 6
    name = shm("race")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n)
    pids = ctx.Queue()
    procs = [ctx.Process(target=_race_child, args=(name, 8192, barrier, pids)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * n
    with Arena.shm(name) as a:
        h = a.header()
        assert h["magic"] == struct.unpack("<Q", b"A0PYAREN")[0] and h["arena_size"] == 8192
        frames = Transport(a).read_many()
    # Any second initialization would have wiped the frames written before it.
    assert [s for s, _ in frames] == list(range(1, n + 1))
    writers = {struct.unpack("<Q", d)[0] for _, d in frames}
    assert writers == {pids.get(timeout=10) for _ in range(n)}
    assert stat.S_IMODE(os.stat("/dev/shm/" + name).st_mode) == 0o600
