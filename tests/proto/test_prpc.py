"""PRPC across real processes: a progress stream in order ending with the done
message (blocking iterator, callback, asyncio), leaving the stream early cancels it at
the server, the idle timeout restarts at each message, a server killed mid-stream, and
bad arguments."""

import asyncio
import os
import signal
import threading
import time

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv

import a0py
from a0py import A0TimeoutError, ArgumentError
from a0py.proto.prpc import is_done

pytestmark = pytest.mark.slow


def _server(topic, conn):
    """'count N': N progress messages then 'done'; 'forever': a message every 50 ms
    until cancelled; 'stall': one message then nothing."""

    def on_connect(c):
        cmd = c.pkt.payload.decode()
        if cmd.startswith("count"):
            n = int(cmd.split()[1])
            for i in range(n):
                c.send(f"{i}/{n}")
            c.send("done", done=True)
        elif cmd == "forever":
            def run():
                while c.send("tick") is not None:
                    time.sleep(0.05)
                conn.send(("stopped", c.cancelled))
            threading.Thread(target=run, daemon=True).start()
        elif cmd == "stall":
            c.send("one")
        elif cmd == "die":
            c.send("about to die")
            os.kill(os.getpid(), signal.SIGKILL)

    srv = a0py.PrpcServer(topic, on_connect, on_cancel=lambda rid: conn.send(("cancel", rid)))
    conn.send(("ready", os.getpid()))
    conn.recv()
    srv.close()


@pytest.fixture
def server(root, spawn):
    parent, child = CTX.Pipe()
    p = spawn(_server, "job", child)
    assert recv(parent) == ("ready", p.pid)
    yield p, parent
    if p.is_alive():
        parent.send("stop")
        join_ok(p)


def test_progress_stream_arrives_in_order_and_ends_with_done(server):
    pkts = list(a0py.PrpcClient("job").stream(b"count 20", timeout=MSG_S))
    assert [p.payload.decode() for p in pkts] == [f"{i}/20" for i in range(20)] + ["done"]
    assert [is_done(p) for p in pkts] == [False] * 20 + [True]


def test_connect_calls_back_for_each_message_and_resolves_with_the_last(server):
    seen = []
    future = a0py.PrpcClient("job").connect(b"count 5", lambda pkt, done: seen.append((pkt.payload, done)),
                                            timeout=MSG_S)
    assert future.result(MSG_S).payload == b"done"
    assert seen == [(b"%d/5" % i, False) for i in range(5)] + [(b"done", True)]


def test_stream_async(server):
    async def main():
        return [p.payload async for p in a0py.PrpcClient("job").stream_async(b"count 3", timeout=MSG_S)]

    assert asyncio.run(main()) == [b"0/3", b"1/3", b"2/3", b"done"]


def test_leaving_the_stream_early_cancels_it_at_the_server(server):
    _, conn = server
    client = a0py.PrpcClient("job")
    stream = client.stream(b"forever", timeout=MSG_S)
    ticks = [next(stream).payload for _ in range(3)]
    assert ticks == [b"tick"] * 3
    stream.close()
    msgs = {recv(conn)[0], recv(conn)[0]}
    assert msgs == {"cancel", "stopped"}  # on_cancel ran; the sender saw send() dropped


def test_cancelling_a_connect_future_stops_the_stream(server):
    _, conn = server
    got = threading.Event()
    future = a0py.PrpcClient("job").connect(b"forever", lambda pkt, done: got.set())
    assert got.wait(MSG_S)
    assert future.cancel()
    assert recv(conn)[0] in ("cancel", "stopped")


def test_timeout_is_idle_time_between_messages(server):
    client = a0py.PrpcClient("job")
    # 'forever' sends every 50 ms: a 0.5 s idle timeout never fires over 1 s of messages.
    stream = client.stream(b"forever", timeout=0.5)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 1.0:
        assert next(stream).payload == b"tick"
    stream.close()
    with pytest.raises(A0TimeoutError, match=r"prpc topic 'job': no message for 0.3 s"):
        for _ in client.stream(b"stall", timeout=0.3):
            pass


def test_server_killed_mid_stream_fails_the_stream(server):
    stream = a0py.PrpcClient("job").stream(b"die", timeout=MSG_S)
    assert next(stream).payload == b"about to die"
    with pytest.raises(a0py.RpcServerDiedError, match="prpc topic 'job'"):
        next(stream)


def test_send_after_done_is_an_error(root):
    errors = []

    def on_connect(c):
        c.send("last", done=True)
        try:
            c.send("more")
        except a0py.RpcError as e:
            errors.append(str(e))

    with a0py.PrpcServer("once", on_connect):
        assert [p.payload for p in a0py.PrpcClient("once").stream(b"", timeout=MSG_S)] == [b"last"]
    assert errors and "last message was sent" in errors[0]


def test_bad_arguments(root):
    with pytest.raises(ArgumentError, match="callable"):
        a0py.PrpcServer("bad", None)
    client = a0py.PrpcClient("bad")
    with pytest.raises(ArgumentError, match="callback"):
        client.connect(b"", "nope")
    with pytest.raises(ArgumentError, match="timeout"):
        client.stream(b"", timeout=-2)

    def on_connect(c):
        try:
            c.send("x", done="yes")
        except ArgumentError as e:
            c.send(str(e), done=True)

    with a0py.PrpcServer("bad", on_connect):
        assert b"done must be True or False" in next(iter(client.stream(b"", timeout=MSG_S))).payload
