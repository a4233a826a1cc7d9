"""Relayed writers and the arena's notify_local word, through the binding and
across real processes: a relayed writer's commits move the notify word (every
ordinary reader sees them) but never notify_local, so a MultiWait(local=True)
sleeper in another process is not woken by them and is woken by an ordinary
commit; a sleeper killed asleep on notify_local costs one wake; the state
counts relayed frames, and a reader's last snapshot tells how many of the
frames it passed were relayed."""

import os
import signal
import time

import pytest
from helpers.procs import CTX, JOIN_S, MSG_S, join_ok, recv

import a0py
from a0py import ArgumentError, _core


def test_relayed_writes_move_notify_only_and_are_counted(tr):
    assert tr.relayed is False
    with pytest.raises(ArgumentError, match="relayed must be True or False"):
        tr.relayed = 1
    notify, local = tr.notify_count, tr.notify_local_count
    tr.relayed = True
    tr.write(b"imported 1")
    tr.write_many([b"imported 2", b"imported 3"])
    assert tr.notify_count != notify and tr.notify_local_count == local
    tr.relayed = False
    tr.write(b"local 4")
    assert tr.notify_local_count != local
    with tr.lock() as t:
        assert (t.seq_high, t.relayed_frames) == (4, 3)
    assert tr.read_snapshot == (0, 0)  # no lock-free read yet
    reader = a0py.Transport(tr.arena)
    assert [seq for seq, _ in reader.read_many()] == [1, 2, 3, 4]
    assert reader.read_snapshot == (4, 3) and reader.cursor_seq == 4
    header = tr.arena.header()
    assert header["notify_local"] == tr.notify_local_count
    assert header["pages"][header["committed_page"]]["relayed_frames"] == 3


def test_a_packet_writer_writes_as_a_relayed_writer_when_told(tr):
    writer = _core.PacketWriter(tr.arena)
    assert writer.relayed is False
    with pytest.raises(ArgumentError, match="relayed must be True or False"):
        writer.relayed = "yes"
    local = tr.notify_local_count
    writer.relayed = True
    writer.pub(b"relayed", [("k", "v")])
    with writer.alloc(3) as payload:
        payload[:] = b"abc"
    assert tr.notify_local_count == local
    writer.relayed = False
    writer.pub(b"local")
    assert tr.notify_local_count != local
    with tr.lock() as t:
        assert (t.seq_high, t.relayed_frames) == (3, 2)


def test_multiwait_local_argument():
    assert _core.MultiWait().local is False
    assert _core.MultiWait(local=True).local is True
    with pytest.raises(ArgumentError, match="local must be True or False"):
        _core.MultiWait(local="yes")


def _local_sleeper(name, conn):
    try:
        arena = a0py.Arena.shm(name)
        mw = _core.MultiWait(local=True)
        mw.set_arenas([arena])
        mw.changed()
        conn.send("waiting")
        woke = mw.wait(MSG_S)
        changed = mw.changed()
        conn.send((woke, len(changed)))
    except BaseException as e:  # reported, not lost in the child's stderr
        conn.send(repr(e))
        os._exit(1)


def wait_for_local_sleeper(arena):
    deadline = time.monotonic() + MSG_S
    while not arena.header()["local_waiters"]:
        assert time.monotonic() < deadline, "the child never slept on notify_local"
        time.sleep(0.001)


def start_local_sleeper(arena, name, spawn):
    """A child process asleep on `arena`'s notify_local word: (our pipe end, child)."""
    parent_end, child_end = CTX.Pipe()
    child = spawn(_local_sleeper, name, child_end)
    assert recv(parent_end) == "waiting"
    wait_for_local_sleeper(arena)
    return parent_end, child


def test_a_local_sleeper_in_another_process_sleeps_through_relayed_commits(shm_name, spawn):
    if _core.multiwait_mode() != "waitv":
        pytest.skip("needs futex_waitv: the polling fallback arms nothing")
    arena = a0py.Arena.shm(shm_name, 4096)
    try:
        writer = a0py.Transport(arena)
        parent_end, child = start_local_sleeper(arena, shm_name, spawn)
        local = writer.notify_local_count
        writer.relayed = True
        for i in range(200):  # many turns of the ring: evictions too
            writer.write(b"imported %d" % i)
        # The word the child sleeps on did not move and still has its flag: nothing
        # can have woken it (a futex_waitv ends only on a wake or a changed word).
        assert writer.notify_local_count == local
        assert arena.header()["local_waiters"] == 1
        assert not parent_end.poll(0)
        writer.relayed = False
        writer.write(b"local")
        assert recv(parent_end) == (True, 1)
        join_ok(child)
        assert arena.header()["local_waiters"] == 0  # woken, then cleared
    finally:
        arena.close()


def test_a_local_sleeper_killed_asleep_costs_one_ordinary_wake(shm_name, spawn):
    if _core.multiwait_mode() != "waitv":
        pytest.skip("needs futex_waitv: the polling fallback arms nothing")
    arena = a0py.Arena.shm(shm_name, 4096)
    try:
        writer = a0py.Transport(arena)
        _parent_end, child = start_local_sleeper(arena, shm_name, spawn)
        os.kill(child.pid, signal.SIGKILL)
        child.join(JOIN_S)
        assert child.exitcode == -signal.SIGKILL
        writer.relayed = True
        writer.write(b"imported")
        assert arena.header()["local_waiters"] == 1  # relayed commits leave it
        writer.relayed = False
        writer.write(b"local")
        assert arena.header()["local_waiters"] == 0
        assert arena.header()["waiters"] == 0
    finally:
        arena.close()
