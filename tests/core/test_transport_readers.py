"""Readers that never block writers: reads without the lock,
read_view and FrameEvictedError, gaps counted in Transport.missed, readers
that are SIGKILLed mid-read or asleep, and a multi-process torture run.

Multi-process tests use real processes (fork) and real SIGKILLs; they
synchronize through pipes and events, and assert outcomes, never timings.
"""

import itertools
import os
import signal
import struct
import time
import zlib

import pytest
from helpers.procs import CTX, JOIN_S, MSG_S, join_ok, recv

import a0py
from a0py import A0TimeoutError, FrameEvictedError, LockError


def child_main(fn):
    """Reports a child's exception on stderr and exits non-zero."""

    def run(*args):
        try:
            fn(*args)
        except BaseException:
            import traceback

            traceback.print_exc()
            os._exit(1)

    run.__name__ = fn.__name__
    return run


def fill_until_evicts(tr, size, seq_to_keep):
    """Writes frames of `size` bytes until frame `seq_to_keep` is evicted."""
    while True:
        with tr.lock() as t:
            if t.seq_low > seq_to_keep:
                return
        tr.write(b"\xee" * size)


# ------------------------------------------------------------ read_view


def test_read_view_gives_seq_and_a_read_only_zero_copy_view(tr):
    tr.write(b"first")
    tr.write(b"second")
    reader = a0py.Transport(tr.arena)
    with reader.read_view() as frame:
        assert (frame.seq, frame.size, len(frame)) == (1, 5, 5)
        assert frame.data.readonly and bytes(frame.data) == b"first"
        with pytest.raises(TypeError):
            frame.data[0] = 0
        assert reader.cursor_seq == 0  # the cursor moves when the block ends
    assert reader.cursor_seq == 1
    with pytest.raises(LockError, match="inside its with-block"):
        frame.data
    with reader.read_view(timeout=0) as frame:
        assert (frame.seq, bytes(frame.data)) == (2, b"second")
    with pytest.raises(A0TimeoutError, match="heap arena"):
        with reader.read_view(timeout=0.01):
            pass
    assert reader.missed == 0


def test_read_view_raises_frame_evicted_when_its_frame_is_overwritten_in_the_block(tr):
    tr.write(b"A" * 300)  # seq 1
    tr.write(b"B" * 300)  # seq 2
    reader = a0py.Transport(tr.arena)
    with pytest.raises(FrameEvictedError, match="frame 1 of heap arena was evicted"):
        with reader.read_view() as frame:
            assert bytes(frame.data) == b"A" * 300
            fill_until_evicts(tr, 300, 1)  # a writer never waits for a reader
            # Zero-copy: the view shows the writer's bytes now, torn.
            assert bytes(frame.data) != b"A" * 300
    # The cursor stayed. The writer evicted frames while the block read, so
    # the next read lands twice that many past the oldest survivor (at most
    # on the newest): where it can finish before the writer gets there.
    assert reader.cursor_seq == 0
    seq, _ = reader.read_next()
    with tr.lock() as t:
        evicted = t.seq_low - 1
        assert evicted > 0 and seq == min(t.seq_low + 2 * evicted, t.seq_high)
    assert reader.missed == 0  # nothing counted before the first successful read
    # After a placed cursor, the same loss is counted.
    fill_until_evicts(tr, 300, seq + 1)
    seq2, _ = reader.read_next()
    assert reader.missed == seq2 - seq - 1 > 0


def test_read_view_does_not_raise_when_writes_leave_its_frame_alone(tr):
    for i in range(3):
        tr.write(bytes([i]) * 100)
    reader = a0py.Transport(tr.arena)
    reader.read_next()  # seq 1; the view is of seq 2
    with reader.read_view() as frame:
        assert frame.seq == 2
        tr.write(b"x" * 100)  # lands after seq 3: nothing evicted
        with tr.lock() as t:
            assert t.seq_low == 1
        assert bytes(frame.data) == bytes([1]) * 100
    assert reader.cursor_seq == 2 and reader.missed == 0


def test_read_view_lets_the_block_exception_through_and_refuses_nesting(tr):
    tr.write(b"one")
    tr.write(b"two")
    reader = a0py.Transport(tr.arena)
    with pytest.raises(ZeroDivisionError):
        with reader.read_view() as frame:
            fill_until_evicts(tr, 200, 1)
            1 / 0  # noqa: B018 - the block's own error wins over FrameEvictedError
    with reader.read_view() as frame:
        with pytest.raises(LockError, match="already open"):
            with reader.read_view():
                pass
        view = frame
    with pytest.raises(LockError, match="entered once"):
        with view:
            pass


def test_read_view_keeps_the_mapping_of_a_closed_arena_until_the_block_ends():
    arena = a0py.Arena.heap(4096)
    tr = a0py.Transport(arena)
    tr.write(b"kept")
    with tr.read_view() as frame:
        arena.close()
        assert bytes(frame.data) == b"kept"  # still mapped: the block is in flight
    with pytest.raises(a0py.ClosedError):
        tr.read_next()


# ------------------------------------------------------------ gaps, locks


def test_copying_reads_count_the_frames_they_missed(tr):
    reader = a0py.Transport(tr.arena)
    tr.write(b"1")
    assert reader.read_next() == (1, b"1")
    fill_until_evicts(tr, 500, 2)
    with tr.lock() as t:
        low, high = t.seq_low, t.seq_high
    got = reader.read_many()
    assert [s for s, _ in got] == list(range(low, high + 1))
    assert reader.missed == low - 2
    tr.write(b"never read")  # seq high + 1 ...
    with tr.lock() as t:
        t.clear()  # ... removed unread
    tr.write(b"after clear")
    assert reader.read_next() == (high + 2, b"after clear")
    assert reader.missed == low - 2 + 1


@child_main
def hold_lock(name, conn):
    tr = a0py.Transport(a0py.Arena.shm(name))
    with tr.lock():
        conn.send("locked")
        conn.recv()  # until told to let go


def test_reads_never_take_the_lock(shm_name, spawn):
    """A process holding the arena lock does not stop any read."""
    arena = a0py.Arena.shm(shm_name, 1 << 16)
    try:
        tr = a0py.Transport(arena)
        tr.write_many([b"a", b"b", b"c"])
        parent_end, child_end = CTX.Pipe()
        holder = spawn(hold_lock, shm_name, child_end)
        assert recv(parent_end) == "locked"
        reader = a0py.Transport(arena)
        assert reader.read_next(timeout=1) == (1, b"a")
        assert reader.read_many() == [(2, b"b"), (3, b"c")]
        assert reader.read_next(timeout=0.05) is None  # waits without the lock too
        with pytest.raises(A0TimeoutError):
            with reader.read_view(timeout=0.05):  # ... as read_view does
                pass
        parent_end.send("go")
        join_ok(holder)
        with tr.lock() as t:
            assert t.recovered is False
    finally:
        arena.close()


# ------------------------------------------------------ killed readers


@child_main
def read_in_child(name, how, conn):
    tr = a0py.Transport(a0py.Arena.shm(name))
    tr.spin = 0
    if how == "view":
        with tr.read_view() as frame:
            conn.send(("reading", frame.seq))
            time.sleep(60)  # killed in here
    elif how == "copy_loop":
        conn.send(("reading", 0))
        while True:
            tr.read_many()
    else:
        conn.send(("reading", 0))
        tr.read_next(timeout=None)  # asleep: killed in here


def wait_flag(tr, value=1, timeout=MSG_S):
    deadline = time.monotonic() + timeout
    while tr.waiter_count != value:
        if time.monotonic() > deadline:
            pytest.fail(f"waiter_count never became {value}")
        time.sleep(0.001)


@pytest.mark.parametrize("how", ["view", "copy_loop", "asleep"])
def test_reader_killed_mid_read_or_asleep_leaves_nothing_that_slows_writers(shm_name, spawn, how):
    arena = a0py.Arena.shm(shm_name, 1 << 20)
    try:
        tr = a0py.Transport(arena)
        if how != "asleep":
            tr.write_many([os.urandom(200_000) for _ in range(4)])
        parent_end, child_end = CTX.Pipe()
        reader = spawn(read_in_child, shm_name, how, child_end)
        assert recv(parent_end)[0] == "reading"
        if how == "asleep":
            wait_flag(tr, 1)
        elif how == "copy_loop":
            time.sleep(0.05)  # inside its loop of reads (a read leaves no sign: a moment)
        os.kill(reader.pid, signal.SIGKILL)
        reader.join(JOIN_S)
        assert reader.exitcode == -signal.SIGKILL
        # The reader never held the lock: nothing to recover.
        with tr.lock() as t:
            assert not t.recovered
        # At most the sleepers flag is left; one publish clears it, after
        # which writers make no wake syscall at all.
        tr.write(b"first write after the kill")
        assert tr.waiter_count == 0
        for _ in range(20):
            tr.write(os.urandom(100_000))  # evicts the frames it was reading
            assert tr.waiter_count == 0
        # Other readers are unaffected.
        assert a0py.Transport(arena).read_many()[-1][1] == tr.read_many()[-1][1]
    finally:
        arena.close()


@child_main
def hold_view_then_report(name, conn):
    tr = a0py.Transport(a0py.Arena.shm(name))
    try:
        with tr.read_view() as frame:
            conn.send(frame.seq)
            conn.recv()  # the writer evicts it meanwhile
        conn.send("intact")
    except FrameEvictedError:
        conn.send("evicted")


def test_a_reader_holding_a_view_never_makes_a_writer_wait(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 1 << 14)
    try:
        tr = a0py.Transport(arena)
        tr.write(b"held")
        parent_end, child_end = CTX.Pipe()
        child = spawn(hold_view_then_report, shm_name, child_end)
        assert recv(parent_end) == 1
        fill_until_evicts(tr, 1000, 1)  # returns: the writer did not wait
        parent_end.send("done")
        assert recv(parent_end) == "evicted"
        join_ok(child)
    finally:
        arena.close()


# -------------------------------------------------------------- torture


def torture_body(wid, i, size):
    head = struct.pack("<III", wid, i, size)
    filler = bytes(((wid * 131 + i * 7 + k) & 0xFF) for k in range(min(size, 64)))
    body = head + (filler * (size // max(len(filler), 1) + 1))[:size]
    return body + struct.pack("<I", zlib.crc32(body))


def torture_check(data):
    """(wid, i) of an intact frame, or None for a torn one."""
    if len(data) < 16:
        return None
    body, crc = data[:-4], struct.unpack("<I", data[-4:])[0]
    if zlib.crc32(body) != crc:
        return None
    wid, i, size = struct.unpack_from("<III", body)
    return (wid, i) if len(body) == 12 + size else None


@child_main
def torture_writer(name, wid, count, go):
    tr = a0py.Transport(a0py.Arena.shm(name))
    big = tr.max_frame_size - 16
    go.wait(JOIN_S)
    for i in range(count):
        r = (i * 2654435761 + wid * 40503) & 0xFFFF
        if r % 50 == 0:
            size = big - (r % 64)  # near the arena size: evicts everything
        elif r % 5 == 0:
            size = 1000 + r % 3000
        else:
            size = r % 200
        tr.write(torture_body(wid, i, size))


@child_main
def torture_reader(name, how, go, done, conn):
    tr = a0py.Transport(a0py.Arena.shm(name))
    torn = evicted = got = 0
    seqs = []
    per_writer = {}
    go.wait(JOIN_S)

    def take(seq, data):
        nonlocal torn, got
        ident = torture_check(data)
        if ident is None:
            torn += 1
            return
        got += 1
        seqs.append(seq)
        wid, i = ident
        if i <= per_writer.get(wid, -1):
            torn += 1  # out of order within a writer: as bad as torn
        per_writer[wid] = i

    while True:
        if how == "read_next":
            frame = tr.read_next(timeout=0.02)
            frames = [frame] if frame else []
        elif how == "read_many":
            frames = tr.read_many(50)
            if not frames:
                try:
                    with tr.lock() as t:  # (the lock only to sleep until the next commit)
                        t.wait(timeout=0.02)
                except A0TimeoutError:
                    pass
        else:
            frames = []
            try:
                with tr.read_view(timeout=0.02) as view:
                    seq, data = view.seq, bytes(view.data)
                frames = [(seq, data)]
            except FrameEvictedError:
                evicted += 1  # the block was told: never counted as read
            except A0TimeoutError:
                pass
        for seq, data in frames:
            take(seq, data)
        if not frames and done.is_set() and tr.read_next(timeout=0) is None:
            break
    conn.send({"torn": torn, "got": got, "evicted": evicted, "missed": tr.missed,
               "increasing": all(a < b for a, b in itertools.pairwise(seqs)),
               "first": seqs[0] if seqs else None, "last": seqs[-1] if seqs else None})


@pytest.mark.slow
def test_torture_mixed_sizes_lock_free_readers_never_see_a_torn_frame(shm_name, spawn):
    """Two writer processes evict with mixed sizes (up to nearly the whole
    arena) while three reader processes read without the lock: copying
    (read_next, read_many) and zero-copy (read_view). Every frame is
    checksummed. No reader returns a torn frame; seqs only grow; every seq
    between a reader's first and last frame was read or counted missed."""
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        go, done = CTX.Event(), CTX.Event()
        writers = [spawn(torture_writer, shm_name, wid, 4000, go) for wid in range(2)]
        readers, pipes = [], []
        for how in ("read_next", "read_many", "read_view"):
            parent_end, child_end = CTX.Pipe()
            readers.append(spawn(torture_reader, shm_name, how, go, done, child_end))
            pipes.append((how, parent_end))
        go.set()
        for w in writers:
            join_ok(w)
        done.set()
        with a0py.Transport(arena).lock() as t:
            newest = t.seq_high
        assert newest == 8000
        for (how, conn), r in zip(pipes, readers):
            res = recv(conn, JOIN_S)
            join_ok(r)
            assert res["torn"] == 0, (how, res)
            assert res["increasing"], (how, res)
            assert res["got"] > 0 and res["last"] == newest, (how, res)
            span = res["last"] - res["first"] + 1
            # read_view's refused blocks are re-read or counted missed later.
            assert res["got"] + res["missed"] == span, (how, res)
    finally:
        arena.close()
