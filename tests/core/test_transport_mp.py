"""The transport across real processes: concurrent writers and readers,
writers and lock holders killed with SIGKILL, cross-process wait/notify, and
the deadman.

Every child is a real process (multiprocessing, fork start method) that opens
the shared-memory arena by name; every kill is a real SIGKILL. Processes
synchronize through pipes and events, never through sleeps. Each test names
the behaviour it pins; the only time bound asserted is a liveness bound (a
dead lock holder must not stall the next locker for a second).
"""

import os
import signal
import struct
import sys
import time
import zlib

import pytest
from helpers.procs import CTX, JOIN_S, MSG_S, join_ok, recv

import a0py
from a0py import A0TimeoutError

pytestmark = pytest.mark.slow

# fork: children start in milliseconds and inherit sys.path, so this works
# both from a source tree (PYTHONPATH=.) and after `pip install -e .`.


# ---------------------------------------------------------------- fixtures


def kill_and_reap(p):
    os.kill(p.pid, signal.SIGKILL)
    p.join(JOIN_S)
    assert p.exitcode == -signal.SIGKILL


def child_main(fn):
    """Runs a child body; reports an exception on stderr and exits non-zero
    (multiprocessing's fork children skip pytest's capture otherwise)."""

    def run(*args):
        try:
            fn(*args)
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)

    run.__name__ = fn.__name__
    return run


def committed_state(arena):
    """The committed state page, read from the header without the lock."""
    hdr = arena.header()
    return hdr["pages"][hdr["committed_page"]]


def all_frames(tr):
    """Every live frame as [(seq, bytes)], oldest first, under one lock."""
    out = []
    with tr.lock() as t:
        if t.empty:
            return out
        t.jump_head()
        while True:
            f = t.frame()
            out.append((f.seq, f.tobytes()))
            if not t.has_next():
                return out
            t.next()


# ------------------------------------------- many writers, many readers

N_WRITERS = 4
FRAMES_PER_WRITER = 20_000
N_READERS = 2
TOTAL = N_WRITERS * FRAMES_PER_WRITER
# writer id, per-writer counter, body length, crc32(body); then the body.
PAYLOAD_HDR = struct.Struct("<IIII")
MAX_BODY = 200
# Room for every frame at its largest (32-byte frame header, 16-byte payload
# header, body, 16-byte alignment), so no frame is ever evicted: a reader
# that is descheduled for a while still finds every frame it has not read.
STRESS_ARENA = 1024 + TOTAL * (32 + PAYLOAD_HDR.size + MAX_BODY + 16)


def make_body(noise, wid, counter):
    length = (counter * 7919 + wid * 104729) % (MAX_BODY + 1)
    start = (counter * 31 + wid * 997) % (len(noise) - MAX_BODY)
    return noise[start:start + length]


@child_main
def stress_writer(name, wid, go):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    noise = os.urandom(4096)
    go.wait(MSG_S)
    counter = 0
    while counter < FRAMES_PER_WRITER:
        body = make_body(noise, wid, counter)
        head = PAYLOAD_HDR.pack(wid, counter, len(body), zlib.crc32(body))
        path = counter % 3
        if path == 0:
            tr.write(head + body)
            counter += 1
        elif path == 1:
            # Filled in two pieces under the lock: a reader that could see
            # the frame before commit would find a torn payload.
            with tr.lock() as t:
                view = t.alloc(len(head) + len(body))
                view[len(head):] = body
                view[:len(head)] = head
                t.commit()
            counter += 1
        else:
            batch = [head + body]
            for c in range(counter + 1, min(counter + 4, FRAMES_PER_WRITER)):
                b = make_body(noise, wid, c)
                batch.append(PAYLOAD_HDR.pack(wid, c, len(b), zlib.crc32(b)) + b)
            tr.write_many(batch)
            counter += len(batch)
    arena.close()


def check_frame(seq, data, state):
    """Validates one frame in the order seen; appends problems to state."""
    errors = state["errors"]
    if seq != state["last_seq"] + 1:
        errors.append(f"seq {seq} after {state['last_seq']}")
    state["last_seq"] = seq
    if len(data) < PAYLOAD_HDR.size:
        errors.append(f"seq {seq}: {len(data)}-byte frame")
        return
    wid, counter, length, crc = PAYLOAD_HDR.unpack_from(data)
    body = data[PAYLOAD_HDR.size:]
    if wid >= N_WRITERS or len(body) != length or zlib.crc32(body) != crc:
        errors.append(f"seq {seq}: torn or corrupt frame (writer {wid}, counter {counter})")
        return
    if counter != state["next"][wid]:
        errors.append(f"seq {seq}: writer {wid} counter {counter}, expected {state['next'][wid]}")
    state["next"][wid] = counter + 1
    state["count"] += 1


@child_main
def stress_reader_locked(name, conn):
    """Reads in place under the lock: wait(), then next()/frame() zero-copy."""
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    state = {"last_seq": 0, "next": [0] * N_WRITERS, "count": 0, "errors": []}
    conn.send("ready")
    deadline = time.monotonic() + JOIN_S
    while state["count"] < TOTAL and len(state["errors"]) < 20:
        with tr.lock() as t:
            try:
                t.wait(timeout=max(0.0, deadline - time.monotonic()))
            except A0TimeoutError:
                break
            while t.has_next():
                t.next()
                f = t.frame()
                check_frame(f.seq, f.data, state)
    conn.send(state)
    arena.close()


@child_main
def stress_reader_copying(name, conn):
    """Reads copies: read_next(timeout=...) to sleep, read_many to drain."""
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    state = {"last_seq": 0, "next": [0] * N_WRITERS, "count": 0, "errors": []}
    conn.send("ready")
    deadline = time.monotonic() + JOIN_S
    while state["count"] < TOTAL and len(state["errors"]) < 20:
        got = tr.read_next(timeout=max(0.0, deadline - time.monotonic()))
        if got is None:
            break
        check_frame(*got, state)
        for seq, data in tr.read_many(max_frames=1000):
            check_frame(seq, data, state)
    conn.send(state)
    arena.close()


def test_concurrent_writers_and_readers_see_every_frame_once_in_order_untorn(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, STRESS_ARENA)
    try:
        go = CTX.Event()
        readers = []
        for fn in (stress_reader_locked, stress_reader_copying):
            parent_end, child_end = CTX.Pipe()
            readers.append((spawn(fn, shm_name, child_end), parent_end))
        for _, conn in readers:
            assert recv(conn) == "ready"
        writers = [spawn(stress_writer, shm_name, wid, go) for wid in range(N_WRITERS)]
        go.set()
        for w in writers:
            join_ok(w)
        for p, conn in readers:
            state = recv(conn, JOIN_S)
            join_ok(p)
            assert state["errors"] == []
            assert state["count"] == TOTAL
            assert state["last_seq"] == TOTAL
            assert state["next"] == [FRAMES_PER_WRITER] * N_WRITERS
        committed = committed_state(arena)
        # The design premise: nothing was evicted, so nothing could be missed.
        assert (committed["seq_low"], committed["seq_high"]) == (1, TOTAL)
    finally:
        arena.close()


@child_main
def evicting_writer(name, wid, frames, max_body, go):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    noise = os.urandom(8192)
    go.wait(MSG_S)
    for counter in range(frames):
        length = (counter * 7919 + wid * 104729) % (max_body + 1)
        body = noise[counter % 4096:counter % 4096 + length]
        with tr.lock() as t:
            view = t.alloc(PAYLOAD_HDR.size + length)
            view[PAYLOAD_HDR.size:] = body
            view[:PAYLOAD_HDR.size] = PAYLOAD_HDR.pack(wid, counter, length, zlib.crc32(body))
            t.commit()
    arena.close()


@child_main
def lagging_reader(name, writers_done, conn):
    """Reads zero-copy under the lock, slowly enough to be overtaken."""
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    last_seq, seen, gaps, errors = 0, 0, 0, []
    last_counter = {}
    conn.send("ready")
    deadline = time.monotonic() + JOIN_S
    while time.monotonic() < deadline and len(errors) < 20:
        with tr.lock() as t:
            if not t.has_next():
                if writers_done.is_set():
                    break
                try:
                    t.wait(timeout=0.05)
                except A0TimeoutError:
                    continue
            t.next()
            f = t.frame()
            data = f.data
            if f.seq <= last_seq:
                errors.append(f"seq {f.seq} after {last_seq}")
            gaps += f.seq != last_seq + 1
            last_seq = f.seq
            wid, counter, length, crc = PAYLOAD_HDR.unpack_from(data)
            body = data[PAYLOAD_HDR.size:]
            if len(body) != length or zlib.crc32(body) != crc:
                errors.append(f"seq {f.seq}: torn or overwritten frame")
            elif counter <= last_counter.get(wid, -1):
                errors.append(f"seq {f.seq}: writer {wid} counter {counter} went back")
            last_counter[wid] = counter
            seen += 1
        time.sleep(0)  # let writers in between frames
    conn.send({"last_seq": last_seq, "seen": seen, "gaps": gaps, "errors": errors})
    arena.close()


def test_reader_overtaken_by_eviction_sees_gaps_but_never_a_torn_frame(shm_name, spawn):
    # 64 KiB ring, frames up to 2 KiB: it wraps every few dozen frames, with
    # mixed sizes, while the reader holds zero-copy views under the lock.
    writers, frames, max_body = 2, 3000, 2000
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        go, done = CTX.Event(), CTX.Event()
        parent_end, child_end = CTX.Pipe()
        reader = spawn(lagging_reader, shm_name, done, child_end)
        assert recv(parent_end) == "ready"
        procs = [spawn(evicting_writer, shm_name, w, frames, max_body, go) for w in range(writers)]
        go.set()
        for p in procs:
            join_ok(p)
        done.set()
        report = recv(parent_end, JOIN_S)
        join_ok(reader)
        assert report["errors"] == []
        assert report["last_seq"] == writers * frames  # it read up to the newest
        assert report["seen"] >= 1
        state = committed_state(arena)
        assert state["seq_high"] == writers * frames
        assert state["seq_low"] > 1  # the ring did wrap and evict
    finally:
        arena.close()


# ---------------------------------------- writer killed before commit


def frame_payload(i, size=100):
    return (b"%08d" % i) * (size // 8)


@child_main
def write_then_alloc_and_hang(name, k, size, conn):
    """Commits k frames, then allocs and fills one more without committing,
    reports what it sees inside the lock, and waits to be killed."""
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    for i in range(1, k + 1):
        tr.write(frame_payload(i, size))
    with tr.lock() as t:
        committed_low = t.seq_low
        view = t.alloc(size)
        view[:] = b"X" * size
        conn.send({"committed_low": committed_low, "seq_low": t.seq_low, "seq_high": t.seq_high})
        time.sleep(3600)


def test_writer_killed_between_alloc_and_commit_leaves_arena_as_last_commit(shm_name, spawn):
    k, size = 10, 96
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        parent_end, child_end = CTX.Pipe()
        child = spawn(write_then_alloc_and_hang, shm_name, k, size, child_end)
        inside = recv(parent_end)
        # The alloc is in the child's working state and evicted nothing.
        assert inside == {"committed_low": 1, "seq_low": 1, "seq_high": k + 1}
        kill_and_reap(child)

        state = committed_state(arena)
        assert (state["seq_low"], state["seq_high"]) == (1, k)
        tr = a0py.Transport(arena)
        with tr.lock() as t:
            assert t.recovered
            assert (t.seq_low, t.seq_high) == (1, k)
        assert all_frames(tr) == [(i, frame_payload(i, size)) for i in range(1, k + 1)]

        # The next writer continues the sequence and readers see it.
        assert tr.write(b"after") == k + 1
        assert all_frames(tr)[-1] == (k + 1, b"after")
        with tr.lock() as t:
            assert not t.recovered
            assert (t.seq_low, t.seq_high) == (1, k + 1)
    finally:
        arena.close()


def test_writer_killed_after_evicting_alloc_leaves_only_intact_frames(shm_name, spawn):
    # 4 KiB of workspace holds 12 frames of 32 + 296 bytes: 30 frames wrap it
    # more than twice, and the 31st (uncommitted) alloc must evict.
    k, size = 30, 296
    arena = a0py.Arena.shm(shm_name, 512 + 4096)
    try:
        parent_end, child_end = CTX.Pipe()
        child = spawn(write_then_alloc_and_hang, shm_name, k, size, child_end)
        inside = recv(parent_end)
        assert inside["seq_low"] > inside["committed_low"], "the alloc had to evict"
        assert inside["seq_high"] == k + 1
        kill_and_reap(child)

        state = committed_state(arena)
        # The frames the alloc evicted were published as evicted before it
        # handed out their bytes; the alloc itself was never published.
        assert state["seq_high"] == k
        assert state["seq_low"] == inside["seq_low"]
        tr = a0py.Transport(arena)
        with tr.lock() as t:
            assert t.recovered
            assert (t.seq_low, t.seq_high) == (inside["seq_low"], k)
        frames = all_frames(tr)
        # Every remaining frame is intact: none was overwritten by the X's.
        assert frames == [(i, frame_payload(i, size)) for i in range(inside["seq_low"], k + 1)]
        assert len(frames) >= 2  # some frames survived the eviction

        assert tr.write(frame_payload(k + 1, size)) == k + 1
        frames = all_frames(tr)
        assert frames[-1] == (k + 1, frame_payload(k + 1, size))
        assert all(data == frame_payload(seq, size) for seq, data in frames)
    finally:
        arena.close()


# ---------------------------------------------- lock holder killed


@child_main
def hold_lock_and_hang(name, conn):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    tr.write(b"committed-1")
    tr.write(b"committed-2")
    with tr.lock() as t:
        t.alloc(5)[:] = b"dirty"
        conn.send("holding")
        time.sleep(3600)


@child_main
def lock_and_report(name, conn):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    conn.send("locking")
    t0 = time.monotonic()
    with tr.lock() as t:
        conn.send({"waited": time.monotonic() - t0, "recovered": t.recovered,
                   "seqs": (t.seq_low, t.seq_high)})


def test_lock_holder_killed_does_not_stall_next_locker(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        parent_end, child_end = CTX.Pipe()
        holder = spawn(hold_lock_and_hang, shm_name, child_end)
        assert recv(parent_end) == "holding"
        tr = a0py.Transport(arena)
        recoveries = arena.header()["recoveries"]

        t0 = time.monotonic()
        os.kill(holder.pid, signal.SIGKILL)
        with tr.lock() as t:
            waited = time.monotonic() - t0
            assert t.recovered
            assert (t.seq_low, t.seq_high) == (1, 2)
        assert waited < 1.0, f"next locker waited {waited:.3f} s for a dead holder"
        holder.join(JOIN_S)
        assert arena.header()["recoveries"] == recoveries + 1
        assert all_frames(tr) == [(1, b"committed-1"), (2, b"committed-2")]
        assert tr.write(b"next") == 3
    finally:
        arena.close()


def test_locker_blocked_behind_killed_holder_recovers(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        hold_parent, hold_child = CTX.Pipe()
        holder = spawn(hold_lock_and_hang, shm_name, hold_child)
        assert recv(hold_parent) == "holding"
        lock_parent, lock_child = CTX.Pipe()
        locker = spawn(lock_and_report, shm_name, lock_child)
        assert recv(lock_parent) == "locking"
        # Whether the locker is already asleep on the lock or not yet, the
        # lock must come to it once the holder is gone, marked recovered.
        kill_and_reap(holder)
        report = recv(lock_parent)
        join_ok(locker)
        assert report["recovered"] is True
        assert report["seqs"] == (1, 2)
        tr = a0py.Transport(arena)
        with tr.lock() as t:
            assert not t.recovered  # recovery happens once, for one locker
        assert all_frames(tr) == [(1, b"committed-1"), (2, b"committed-2")]
    finally:
        arena.close()


# ------------------------------------------------ cross-process wait


def wait_for_sleepers(tr, n=1, timeout=MSG_S):
    """Until a process is asleep on the arena's notify word (its sleepers
    flag is set; with n > 1, callers know the others are asleep already)."""
    deadline = time.monotonic() + timeout
    while tr.waiter_count < min(n, 1):
        if time.monotonic() > deadline:
            pytest.fail(f"{n} waiter(s) never went to sleep (waiter_count {tr.waiter_count})")
        time.sleep(0.001)


def assert_writers_make_no_wake(tr, writes=3):
    """After at most one publish, the sleepers flag is clear and stays clear:
    writers make no wake syscall (nobody is left to wake)."""
    tr.write(b"clears the flag if a departed waiter left it")
    assert tr.waiter_count == 0
    for _ in range(writes):
        tr.write(b"no syscall")
        assert tr.waiter_count == 0


@child_main
def wait_in_child(name, how, conn):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    tr.spin = 0  # sleep on the futex at once: the wake-up is what is tested
    conn.send("waiting")
    if how == "read_next":
        conn.send(tr.read_next(timeout=None))
        return
    with tr.lock() as t:
        if how == "wait":
            t.wait(timeout=MSG_S)
            t.next()
        elif how == "wait_seq_above":
            t.wait_seq_above(2, timeout=MSG_S)
            t.jump_tail()
        elif how == "predicate":
            t.wait(lambda t: t.seq_high >= 3 and not t.empty, timeout=MSG_S)
            t.jump_tail()
        f = t.frame()
        conn.send((f.seq, f.tobytes()))


@pytest.mark.parametrize("how", ["read_next", "wait", "wait_seq_above", "predicate"])
def test_waiter_in_other_process_wakes_on_commit(shm_name, spawn, how):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        tr = a0py.Transport(arena)
        parent_end, child_end = CTX.Pipe()
        child = spawn(wait_in_child, shm_name, how, child_end)
        assert recv(parent_end) == "waiting"
        wait_for_sleepers(tr, 1)  # it is asleep in the kernel, not spinning
        wanted = {"read_next": 1, "wait": 1, "wait_seq_above": 3, "predicate": 3}[how]
        for seq in range(1, wanted + 1):
            if seq > 1:
                # Commits that do not satisfy the predicate must not end the
                # wait: the child stays asleep and answers nothing.
                wait_for_sleepers(tr, 1)
                assert not parent_end.poll(0)
            tr.write(b"frame-%d" % seq)
        assert recv(parent_end) == (wanted, b"frame-%d" % wanted)
        join_ok(child)
        assert tr.waiter_count == 0
    finally:
        arena.close()


@child_main
def timed_wait_in_child(name, how, timeout, conn):
    arena = a0py.Arena.shm(name)
    tr = a0py.Transport(arena)
    t0 = time.monotonic()
    if how == "read_next":
        result = tr.read_next(timeout=timeout)
    else:
        with tr.lock() as t:
            try:
                t.wait(timeout=timeout)
                result = "woke"
            except A0TimeoutError:
                result = "timeout"
            assert t.seq_high == 0  # lock held again after the timeout
    conn.send((result, time.monotonic() - t0))


@pytest.mark.parametrize("how, expected", [("read_next", None), ("wait", "timeout")])
def test_cross_process_wait_times_out_at_deadline(shm_name, spawn, how, expected):
    timeout = 0.25
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        parent_end, child_end = CTX.Pipe()
        child = spawn(timed_wait_in_child, shm_name, how, timeout, child_end)
        result, elapsed = recv(parent_end)
        join_ok(child)
        assert result == expected
        assert elapsed >= timeout
        # The timed-out waiter leaves at most its sleepers flag (it cannot know
        # whether others sleep too): one publish clears it, then no syscalls.
        assert_writers_make_no_wake(a0py.Transport(arena))
    finally:
        arena.close()


def test_waiter_killed_asleep_does_not_disturb_writers_or_readers(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        tr = a0py.Transport(arena)
        parent_end, child_end = CTX.Pipe()
        doomed = spawn(wait_in_child, shm_name, "wait", child_end)
        assert recv(parent_end) == "waiting"
        wait_for_sleepers(tr, 1)
        kill_and_reap(doomed)

        # It slept without the lock: nobody has to recover from it.
        with tr.lock() as t:
            assert not t.recovered
        # It leaves only the sleepers flag: the next commit pays one wake it
        # did not need and clears it; later commits make no syscall. (Its
        # waiter count used to leak, making every later commit pay a wake.)
        assert tr.waiter_count == 1
        assert tr.write(b"one") == 1
        assert tr.waiter_count == 0
        # A live waiter still sleeps and wakes on the commits it waits for.
        parent_end, child_end = CTX.Pipe()
        waiter = spawn(wait_in_child, shm_name, "wait_seq_above", child_end)
        assert recv(parent_end) == "waiting"
        wait_for_sleepers(tr, 1)
        assert tr.write(b"two") == 2  # not yet what it waits for: it sleeps again
        wait_for_sleepers(tr, 1)
        assert not parent_end.poll(0)
        assert tr.write(b"three") == 3
        assert recv(parent_end) == (3, b"three")
        join_ok(waiter)
        assert tr.write_many([b"four", b"five"]) == 5
        assert [d for _, d in all_frames(tr)] == [b"one", b"two", b"three", b"four", b"five"]
        assert_writers_make_no_wake(tr)
    finally:
        arena.close()


# ------------------------------------------- writing without evicting


@child_main
def noevict_writer(name, wid, count, go):
    tr = a0py.Transport(a0py.Arena.shm(name))
    go.wait(JOIN_S)
    for i in range(count):
        size = 40 + (i * 97 + wid * 31) % 700
        body = struct.pack("<II", wid, i) + bytes([(i + wid) % 256]) * size
        tr.write(body + struct.pack("<I", zlib.crc32(body)), evict=False, timeout=JOIN_S)


def test_non_evicting_writers_in_other_processes_lose_nothing_to_a_slow_consumer(shm_name, spawn):
    """Two writer processes push far more than the 8 KiB arena holds; the
    consumer reads in batches and drops what it has read. Every frame
    arrives once, intact, in per-writer order: room came only from drops."""
    count = 400
    arena = a0py.Arena.shm(shm_name, 8192)
    try:
        tr = a0py.Transport(arena)
        go = CTX.Event()
        writers = [spawn(noevict_writer, shm_name, wid, count, go) for wid in range(2)]
        go.set()
        next_i = [0, 0]
        seqs = []
        deadline = time.monotonic() + JOIN_S
        while sum(next_i) < 2 * count:
            assert time.monotonic() < deadline, f"stalled at {next_i}"
            batch = tr.read_many()
            if not batch:
                with tr.lock() as t:
                    t.wait(timeout=0.5)
                continue
            with tr.lock() as t:
                assert t.seq_low <= batch[0][0]  # nothing we had not read was evicted
                t.drop_through(batch[-1][0])
            for seq, data in batch:
                body, crc = data[:-4], struct.unpack("<I", data[-4:])[0]
                assert zlib.crc32(body) == crc
                wid, i = struct.unpack_from("<II", body)
                assert i == next_i[wid]
                next_i[wid] += 1
                seqs.append(seq)
        for w in writers:
            join_ok(w)
        assert seqs == list(range(1, 2 * count + 1))  # no gap: nothing was evicted
    finally:
        arena.close()


# ------------------------------------------------------------ deadman


@child_main
def take_deadman_and_hang(name, conn):
    arena = a0py.Arena.shm(name)
    dm = a0py.Deadman(arena)
    dm.take(timeout=MSG_S)
    conn.send(os.getpid())
    time.sleep(3600)


@child_main
def wait_deadman_taken(name, conn):
    arena = a0py.Arena.shm(name)
    dm = a0py.Deadman(arena)
    conn.send("waiting")
    dm.wait_taken(timeout=MSG_S)
    conn.send((dm.is_taken(), dm.owner_pid))


def test_deadman_owner_pid_while_alive_and_free_once_owner_killed(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        dm = a0py.Deadman(arena)
        assert not dm.is_taken()
        parent_end, child_end = CTX.Pipe()
        owner = spawn(take_deadman_and_hang, shm_name, child_end)
        assert recv(parent_end) == owner.pid
        assert dm.is_taken()
        assert dm.owner_pid == owner.pid
        assert not dm.is_mine
        with pytest.raises(A0TimeoutError):
            dm.wait_released(timeout=0.05)

        t0 = time.monotonic()
        os.kill(owner.pid, signal.SIGKILL)
        dm.wait_released(timeout=MSG_S)
        assert time.monotonic() - t0 < 1.0
        assert not dm.is_taken()
        assert dm.owner_pid is None
        owner.join(JOIN_S)
        assert not dm.is_taken()
        # Free for the next one.
        assert dm.try_take()
        assert dm.owner_pid == os.getpid()
        dm.release()
    finally:
        arena.close()


def test_deadman_wait_taken_wakes_when_other_process_takes(shm_name, spawn):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        wait_parent, wait_child = CTX.Pipe()
        waiter = spawn(wait_deadman_taken, shm_name, wait_child)
        assert recv(wait_parent) == "waiting"
        assert not wait_parent.poll(0.05)  # nobody has taken it: still waiting
        own_parent, own_child = CTX.Pipe()
        owner = spawn(take_deadman_and_hang, shm_name, own_child)
        assert recv(own_parent) == owner.pid
        assert recv(wait_parent) == (True, owner.pid)
        join_ok(waiter)
        kill_and_reap(owner)
        assert not a0py.Deadman(arena).is_taken()
    finally:
        arena.close()


def test_deadman_wait_taken_times_out_when_nobody_takes(shm_name):
    arena = a0py.Arena.shm(shm_name, 64 * 1024)
    try:
        t0 = time.monotonic()
        with pytest.raises(A0TimeoutError):
            a0py.Deadman(arena).wait_taken(timeout=0.1)
        assert time.monotonic() - t0 >= 0.1
    finally:
        arena.close()
