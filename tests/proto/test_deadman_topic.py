"""a0py.Deadman on topics (and still on arenas): take/try_take/release, state and
tokens, wait_taken/wait_released across processes, an owner SIGKILLed seen released at
once, a token naming one take even when the deadman is taken again, bad arguments."""

import os
import signal
import threading
import time

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv

import a0py
from a0py import A0TimeoutError, ArgumentError, LockError

pytestmark = pytest.mark.slow


def _owner(topic, conn):
    dm = a0py.Deadman(topic)
    token = dm.take(timeout=MSG_S)
    conn.send(("taken", token))
    if conn.recv() == "release":
        dm.release()
        conn.send("released")
        conn.recv()


def test_take_release_and_state_in_one_process(root):
    dm = a0py.Deadman("robot")
    assert dm.state() == a0py.DeadmanState(False, False, None, None)
    token = dm.take()
    st = dm.state()
    assert st.is_taken and st.is_mine and st.owner_pid == os.getpid() and st.token == token
    assert dm.is_taken() and dm.is_mine and dm.owner_pid == os.getpid()
    with pytest.raises(LockError):
        dm.wait_released(token, timeout=0.1)  # it would wait for itself
    dm.release()
    assert not dm.state().is_taken
    dm.wait_released(token, timeout=0)  # over: returns at once
    with dm:
        assert dm.state().token != token  # a new take, a new token
    assert dm.try_take()
    assert not a0py.Deadman("robot").try_take()  # held already (by this very thread)
    dm.release()


def test_topic_deadman_lives_in_the_topics_deadman_arena(root):
    dm = a0py.Deadman("robot/arm")
    assert dm.topic.name == "robot/arm"
    assert a0py.proto.Topic("robot/arm").exists("deadman")
    assert a0py.Deadman(a0py.proto.Topic("robot/arm")).arena is dm.arena  # one mapping per process


def test_owner_sigkilled_is_seen_released_at_once(root, spawn):
    parent, child = CTX.Pipe()
    p = spawn(_owner, "node", child)
    kind, token = recv(parent)
    assert kind == "taken"
    dm = a0py.Deadman("node")
    st = dm.state()
    assert st.is_taken and not st.is_mine and st.owner_pid == p.pid and st.token == token
    assert dm.wait_taken(timeout=MSG_S) == token
    with pytest.raises(A0TimeoutError, match="not released"):
        dm.wait_released(token, timeout=0.1)
    os.kill(p.pid, signal.SIGKILL)
    dm.wait_released(token, timeout=MSG_S)  # no heartbeat, no timeout: the lock says so
    p.join(MSG_S)
    assert dm.state() == a0py.DeadmanState(False, False, None, None)
    assert dm.try_take()  # and it can be taken over
    dm.release()


def test_wait_taken_then_wait_released_across_processes(root, spawn):
    dm = a0py.Deadman("handoff")
    with pytest.raises(A0TimeoutError, match="nobody took"):
        dm.wait_taken(timeout=0.05)
    got = {}
    t = threading.Thread(target=lambda: got.update(token=dm.wait_taken(timeout=MSG_S)))
    t.start()
    parent, child = CTX.Pipe()
    p = spawn(_owner, "handoff", child)
    _, token = recv(parent)
    t.join(MSG_S)
    assert got["token"] == token
    parent.send("release")
    assert recv(parent) == "released"
    dm.wait_released(token, timeout=MSG_S)
    parent.send("exit")
    join_ok(p)


def test_a_token_names_one_take_even_if_the_deadman_is_taken_again(root, spawn):
    parent, child = CTX.Pipe()
    p = spawn(_owner, "relay", child)
    _, first = recv(parent)
    dm = a0py.Deadman("relay")
    parent.send("release")
    assert recv(parent) == "released"
    second = dm.take()  # someone else holds it now
    assert second != first
    t0 = time.monotonic()
    dm_other_thread = {}

    def wait_first():
        try:
            a0py.Deadman("relay").wait_released(first, timeout=MSG_S)
            dm_other_thread["ok"] = True
        except Exception as e:
            dm_other_thread["e"] = e

    t = threading.Thread(target=wait_first)
    t.start()
    t.join(MSG_S)
    assert dm_other_thread == {"ok": True}  # the first take is over, though taken again
    assert time.monotonic() - t0 < MSG_S
    dm.release()
    parent.send("exit")
    join_ok(p)


def test_deadman_of_an_arena_keeps_the_core_behaviour(root):
    arena = a0py.Arena.heap(4096)
    dm = a0py.Deadman(arena)
    assert dm.arena is arena and dm.topic is None
    dm.take()
    assert dm.is_mine and dm.state().token is not None
    dm.release()
    dm.wait_released(timeout=0)  # the core's keyword form still works
    with a0py.Deadman(arena):
        t = threading.Thread(target=lambda: out.append(_timed_out(dm, 0.05)))
        out = []
        t.start()
        t.join(MSG_S)
    assert out == [True]  # the core's positional form: wait_released(0.05) is a timeout


def _timed_out(dm, seconds):
    try:
        dm.wait_released(seconds)
    except A0TimeoutError:
        return True
    return False


def test_bad_arguments(root):
    for bad in (None, 5, b"topic"):
        with pytest.raises(ArgumentError, match="topic name"):
            a0py.Deadman(bad)
    with pytest.raises(ArgumentError, match="bad topic name"):
        a0py.Deadman("no spaces")
    dm = a0py.Deadman("args")
    with pytest.raises(ArgumentError, match="timeout"):
        dm.take(timeout=-1)
    with pytest.raises(ArgumentError, match="timeout"):
        dm.wait_taken(timeout="1s")
    with pytest.raises(ArgumentError, match="token"):
        dm.wait_released("tok")
    other = a0py.Deadman("other")
    with other:
        with pytest.raises(ArgumentError, match="another deadman"):
            dm.wait_released(other.state().token)
        with pytest.raises(ArgumentError, match="must be a DeadmanToken when a timeout is given"):
            dm.wait_released(3, timeout=1)
    with pytest.raises(LockError):
        dm.release()  # not held
