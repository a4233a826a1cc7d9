"""Robustness of the transport binding: hostile names and sizes, signals,
observers of the deadman, closing under blocked threads, stale views."""

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid

import pytest
from helpers.procs import REPO, asleep_in_futex, wait_until

import a0py
from a0py import A0OSError, A0TimeoutError, ArgumentError, ClosedError


def unique(prefix="rob"):
    return f"a0py-test-{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def child_env():
    return dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_child(code, timeout=20):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def start_child(code, **kw):
    """A Python child running `code`, its stdout a text pipe (read "ready" lines)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=child_env(),
                            stdout=subprocess.PIPE, text=True, **kw)


def stop(*procs):
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


# ------------------------------------------------------------ bad input


def test_nul_byte_in_shm_name_is_an_argument_error_not_a_crash():
    for bad in ("a\x00b", "\x00", "/x\x00"):
        with pytest.raises(ArgumentError, match="NUL"):
            a0py.Arena.shm(bad, 4096)
        with pytest.raises(ArgumentError, match="NUL"):
            a0py.Arena.unlink_shm(bad)


def test_nul_byte_or_non_path_for_file_arena_is_an_argument_error(tmp_path):
    with pytest.raises(ArgumentError, match="NUL"):
        a0py.Arena.file(str(tmp_path / "a\x00b"), 4096)
    with pytest.raises(ArgumentError, match="path"):
        a0py.Arena.file(3, 4096)


def test_bool_mode_is_rejected():
    with pytest.raises(ArgumentError, match="mode"):
        a0py.Arena.shm(unique(), 4096, mode=True)


@pytest.mark.parametrize("bad", [None, 5, "arena"])
def test_transport_and_deadman_need_an_arena(bad):
    with pytest.raises(ArgumentError, match="Arena"):
        a0py.Transport(bad)
    with pytest.raises(ArgumentError, match="Arena"):
        a0py._core.Deadman(bad)
    if not isinstance(bad, str):  # a0py.Deadman (a0py.proto) also takes a topic name
        with pytest.raises(ArgumentError, match="Arena"):
            a0py.Deadman(bad)


def test_write_many_needs_an_iterable_and_write_a_contiguous_buffer():
    tr = a0py.Transport(a0py.Arena.heap(4096))
    with pytest.raises(ArgumentError, match="iterable"):
        tr.write_many(5)
    with pytest.raises(ArgumentError, match="contiguous"):
        tr.write(memoryview(b"abcdef")[::2])
    with tr.lock() as t:
        assert t.empty  # nothing was written by the failed calls


# ------------------------------------------------- storage reservation


def test_arena_larger_than_allowed_storage_fails_cleanly_and_leaves_no_file(tmp_path):
    # RLIMIT_FSIZE stands in for a full tmpfs: creation must fail with a clear
    # A0OSError at once (not SIGBUS on a later write) and remove what it made.
    path = tmp_path / "big.arena"
    r = run_child(f"""
        import resource, signal, a0py
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        try:
            a0py.Arena.file({str(path)!r}, 4 << 20)
        except a0py.A0OSError as e:
            print("A0OSError", e.errno)
        small = a0py.Arena.file({str(path)!r} + ".small", 64 << 10)
        print("small ok", small.size)
    """)
    assert r.returncode == 0, r.stderr
    assert "A0OSError 27" in r.stdout  # EFBIG
    assert "small ok 65536" in r.stdout
    assert not path.exists()


def test_failed_shm_creation_does_not_poison_the_name():
    name = unique("poison")
    with pytest.raises(A0OSError):
        a0py.Arena.shm(name, 1 << 50)  # far beyond memory: reserve/map fails
    assert not os.path.exists("/dev/shm/" + name)
    arena = a0py.Arena.shm(name, 4096)  # the name is usable right after
    try:
        assert arena.size == 4096
    finally:
        arena.close()
        a0py.Arena.unlink_shm(name)


def test_created_arena_storage_is_reserved_not_sparse(tmp_path):
    arena = a0py.Arena.file(tmp_path / "r.arena", 1 << 20)
    try:
        st = os.stat(tmp_path / "r.arena")
        assert st.st_blocks * 512 >= 1 << 20
    finally:
        arena.close()


# ------------------------------------------------------------- signals


@pytest.mark.parametrize("blocking_call", [
    "tr.read_next(timeout=None)",
    "tr.read_next(timeout=30)",
    "tr.lock().__enter__().wait(lambda t: False)",
    "tr.lock().__enter__().wait()",
    "tr.lock().__enter__().wait_seq_above(10**6)",
    "a0py.Deadman(arena).wait_taken()",
    "tr.write(bytes(40000)); tr.write(bytes(40000), evict=False)",
])
def test_ctrl_c_interrupts_blocking_calls(blocking_call):
    name = unique("sig")
    code = f"""
        import sys, a0py
        arena = a0py.Arena.shm({name!r}, 65536)
        tr = a0py.Transport(arena)
        print("ready", flush=True)
        try:
            {blocking_call}
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(3)
    """
    p = start_child(code, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().strip() == "ready"
        wait_until(lambda: asleep_in_futex(p.pid), "the child to block")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=5)
        assert p.returncode == 3, err
        assert "interrupted" in out
    finally:
        stop(p)
        a0py.Arena.unlink_shm(name)


def test_ctrl_c_interrupts_deadman_wait_released_while_another_process_holds_it():
    name = unique("sigdm")
    arena = a0py.Arena.shm(name, 4096)
    holder = start_child(f"""
        import sys, a0py
        a = a0py.Arena.shm({name!r})
        a0py.Deadman(a).take()
        print("held", flush=True)
        sys.stdin.read()
    """, stdin=subprocess.PIPE)
    waiter = None
    try:
        assert holder.stdout.readline().strip() == "held"
        waiter = start_child(f"""
            import sys, a0py
            d = a0py.Deadman(a0py.Arena.shm({name!r}))
            print("ready", flush=True)
            try:
                d.wait_released()
            except KeyboardInterrupt:
                sys.exit(3)
            sys.exit(1)
        """)
        assert waiter.stdout.readline().strip() == "ready"
        wait_until(lambda: asleep_in_futex(waiter.pid), "the waiter to block")
        waiter.send_signal(signal.SIGINT)
        assert waiter.wait(timeout=5) == 3
        assert a0py.Deadman(arena).is_taken()  # the holder was not disturbed
    finally:
        stop(holder, waiter)
        arena.close()
        a0py.Arena.unlink_shm(name)


# -------------------------------------------------------------- deadman


def test_observers_polling_is_taken_never_make_try_take_fail():
    name = unique("obs")
    arena = a0py.Arena.shm(name, 4096)
    observers = [start_child(f"""
        import a0py
        d = a0py.Deadman(a0py.Arena.shm({name!r}))
        print("ready", flush=True)
        while True:
            d.is_taken(); d.owner_pid
    """) for _ in range(2)]
    try:
        for p in observers:
            assert p.stdout.readline().strip() == "ready"
        dm = a0py.Deadman(arena)
        failures = 0
        for _ in range(3000):
            if dm.try_take():
                dm.release()
            else:
                failures += 1
        assert failures == 0
    finally:
        stop(*observers)
        arena.close()
        a0py.Arena.unlink_shm(name)


def test_is_taken_reads_without_locking_and_sees_this_thread_and_others():
    arena = a0py.Arena.heap(4096)
    dm = a0py.Deadman(arena)
    assert not dm.is_taken() and dm.owner_pid is None
    dm.take()
    assert dm.is_taken() and dm.is_mine and dm.owner_pid == os.getpid()
    seen = {}

    def other_thread():
        seen["taken"], seen["mine"] = dm.is_taken(), dm.is_mine
        seen["try"] = dm.try_take()

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen == {"taken": True, "mine": False, "try": False}
    dm.release()
    assert not dm.is_taken()


# ------------------------------------------------------------- closing


def test_close_while_another_thread_waits_defers_the_unmap_until_it_returns():
    arena = a0py.Arena.heap(4096)
    dm = a0py.Deadman(arena)
    result = {}
    started = threading.Event()

    def waiter():
        started.set()
        try:
            dm.wait_taken(timeout=0.5)
        except A0TimeoutError:
            result["timeout"] = True

    t = threading.Thread(target=waiter)
    t.start()
    started.wait()
    # in the wait (a thread of this process waiting for the GIL also sleeps on a futex,
    # so no sign tells it apart: a moment)
    time.sleep(0.1)
    arena.close()
    assert arena.closed
    with pytest.raises(ClosedError):
        dm.is_taken()
    t.join(5)
    assert result == {"timeout": True}


def mapped(name):
    """Whether this process still maps the shm object `name`."""
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith("/dev/shm/" + name) for line in f)


def test_close_while_eight_threads_hammer_the_arena_lets_them_finish_then_refuses():
    """close() in a busy process succeeds at once (it used to raise LockError
    while any thread held the lock, forever in a busy process); calls in
    flight finish, every later call raises ClosedError, and the mapping goes
    when the last thread is out."""
    name = unique("close")
    arena = a0py.Arena.shm(name, 1 << 16)
    try:
        ops, errors, ends = [0] * 8, [], [None] * 8
        give_up = time.monotonic() + 30  # a broken close() fails the test, not hangs it
        go = threading.Barrier(9)

        def hammer(i):
            tr = a0py.Transport(arena)
            go.wait()
            try:
                while time.monotonic() < give_up:
                    if i % 4 == 0:
                        tr.write(b"w" * (i + 1) * 50)
                    elif i % 4 == 1:
                        tr.read_next(timeout=0.001)
                    elif i % 4 == 2:
                        tr.read_many(10)
                    else:
                        with tr.lock() as t:
                            t.alloc(64)[:8] = b"lockheld"
                            time.sleep(0)  # hand the GIL over while holding the arena lock
                            t.commit()
                    ops[i] += 1
            except ClosedError as e:
                ends[i] = e
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        go.wait()
        while min(ops) < 20:  # every thread is busy in the arena
            time.sleep(0.001)
        assert mapped(name)
        arena.close()  # must not raise, and takes effect at once
        assert arena.closed
        with pytest.raises(ClosedError):
            a0py.Transport(arena)
        with pytest.raises(ClosedError):
            arena.header()
        for t in threads:
            t.join(10)
            assert not t.is_alive()
        assert errors == []
        assert all(isinstance(e, ClosedError) for e in ends)
        assert not mapped(name)  # unmapped once the last operation was done
    finally:
        a0py.Arena.unlink_shm(name)


def test_close_releases_the_deadman_held_by_this_thread():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "dm.arena")
        arena = a0py.Arena.file(path, 4096)
        a0py.Deadman(arena).take()
        arena.close()
        again = a0py.Arena.file(path)
        try:
            assert not a0py.Deadman(again).is_taken()
        finally:
            again.close()


# -------------------------------------------------------- stale views


def test_alloc_revokes_views_of_frames_it_evicts_even_uncommitted_ones():
    tr = a0py.Transport(a0py.Arena.heap(4096))
    with tr.lock() as t:
        v1 = t.alloc(2000)
        v2 = t.alloc(2000)  # evicts v1's frame
        assert t.seq_low == 2
        with pytest.raises(ValueError):
            v1[:4] = b"AAAA"  # revoked: cannot scribble over frame 2
        v2[:] = b"B" * 2000
        t.commit()
    assert tr.read_next() == (2, b"B" * 2000)


def test_frame_evicted_by_alloc_under_the_same_lock_is_no_longer_readable():
    tr = a0py.Transport(a0py.Arena.heap(4096))
    tr.write(b"x" * 1500)
    with tr.lock() as t:
        t.jump_head()
        f = t.frame()
        data = f.data
        t.alloc(3000)  # evicts frame 1
        with pytest.raises(ValueError):
            bytes(data)
        with pytest.raises(a0py.NoFrameError, match="evicted"):
            f.data
