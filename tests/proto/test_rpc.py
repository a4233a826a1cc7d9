"""RPC across real processes: replies routed to their callers, a request sent before
the server exists, max_age, a server SIGKILLed and restarted (waiting requests served,
the one in progress failed, never run twice), a server gone for good, cancel from
another thread and by future, timeouts, handler errors, close, one server per topic,
the keeper thread, asyncio, the self-wait guard and bad arguments.

Servers run in forked children that report what their handler saw through a pipe;
every wait has an upper bound and no assertion is about speed.
"""

import asyncio
import concurrent.futures
import os
import signal
import threading
import time

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv, run_python, wait_until

import a0py
from a0py import A0TimeoutError, ArgumentError, LockError, _core
from a0py.proto import rpc

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------ a server child


def _server(topic, conn, max_age=10.0):
    """Echoes '<pid>:<payload>'; 'block' blocks forever, 'raise' raises, 'hold' replies
    only when told (or the client cancels)."""
    held = {}

    def on_request(req):
        p = req.pkt.payload
        conn.send(("got", p))
        if p == b"block":
            time.sleep(3600)
        if p == b"raise":
            raise ValueError("no such thing")
        if p == b"hold":
            held["req"] = req
            return
        req.reply(b"%d:" % os.getpid() + p)

    def on_cancel(rid):
        req = held.get("req")
        conn.send(("cancel", rid, req is not None and req.cancelled,
                   None if req is None else req.reply(b"too late")))

    srv = a0py.RpcServer(topic, on_request, on_cancel=on_cancel, max_age=max_age)
    conn.send(("ready", os.getpid()))
    conn.recv()
    srv.close()
    conn.send(("closed",))


class ServerChild:
    """A server child's process and its reports (what its handler saw, in order)."""

    def __init__(self, spawn, topic, **kw):
        self.conn, child = CTX.Pipe()
        self.p = spawn(_server, topic, child, *kw.values())
        self.pid = self.p.pid
        self.early = []
        while True:  # the handler may report requests before the constructor returns
            msg = recv(self.conn)
            if msg == ("ready", self.pid):
                break
            self.early.append(msg)

    def next(self, timeout=MSG_S):
        return self.early.pop(0) if self.early else recv(self.conn, timeout)

    def handled_nothing_else(self, client):
        """Whether a request sent now by `client` is the next one the handler gets: a
        server hands requests to its handler one at a time, oldest first, so nothing
        before it is still to come (a positive sign instead of a while of silence)."""
        assert client.send_blocking(b"after", timeout=MSG_S).payload.endswith(b":after")
        return self.next() == ("got", b"after")


def start_server(spawn, topic, **kw):
    srv = ServerChild(spawn, topic, **kw)
    return srv.p, srv


def stop_server(p, srv):
    srv.conn.send("stop")
    while srv.next() != ("closed",):
        pass  # what the handler reported meanwhile
    join_ok(p)


def kill(p):
    os.kill(p.pid, signal.SIGKILL)
    p.join(MSG_S)


def request_ids(topic):
    """The ids of the requests in `topic`'s rpc arena now."""
    with _core.PacketReader(a0py.Topic(topic).arena("rpc"), 0, 0) as reader:
        return {p.id for p in reader.read_batch(10_000)
                if not isinstance(p, Exception) and p.headers.get("a0_rpc_type") == "request"}


# ------------------------------------------------------------------ routing


def _client_loop(topic, tag, n, conn):
    c = a0py.RpcClient(topic)
    bad = [i for i in range(n) if not c.send_blocking(b"%s-%d" % (tag, i), timeout=MSG_S)
           .payload.endswith(b":%s-%d" % (tag, i))]
    conn.send(bad)


def test_replies_reach_their_own_callers_across_processes(root, spawn):
    srv, sconn = start_server(spawn, "svc")
    pipes = []
    for tag in (b"a", b"b", b"c"):
        parent, child = CTX.Pipe()
        pipes.append((spawn(_client_loop, "svc", tag, 50, child), parent))
    c = a0py.RpcClient("svc")
    for i in range(50):
        assert c.send_blocking(b"main-%d" % i, timeout=MSG_S).payload == b"%d:main-%d" % (srv.pid, i)
    for p, parent in pipes:
        assert recv(parent, 60) == []
        join_ok(p)
    stop_server(srv, sconn)


def test_reply_headers_name_the_request_and_keep_user_headers(root):
    def on_request(req):
        assert req.pkt.headers["who"] == "me"
        req.reply(a0py.Packet({"answer": "42"}, b"ok"))

    with a0py.RpcServer("hdr", on_request):
        req = a0py.Packet({"who": "me"}, b"q")
        reply = a0py.RpcClient("hdr").send_blocking(req, timeout=MSG_S)
    assert reply.headers["answer"] == "42"
    assert reply.headers["a0_rpc_req"] == req.id
    assert reply.headers["a0_rpc_status"] == "ok"


def test_send_json_round_trip(root):
    with a0py.RpcServer("json", lambda req: req.reply_json({"sum": sum(req.pkt.json())})):
        assert a0py.RpcClient("json").send_json([1, 2, 3], timeout=MSG_S) == {"sum": 6}


# ------------------------------------------------------------------ start order


def test_request_sent_before_the_server_exists_is_served_when_it_starts(root, spawn):
    c = a0py.RpcClient("early")
    assert rpc.server_pid("early") is None
    future = c.send(b"first", timeout=30)
    blocking = {}
    t = threading.Thread(target=lambda: blocking.update(r=c.send_blocking(b"second", timeout=30)))
    t.start()
    wait_until(lambda: len(request_ids("early")) == 2, "both requests in the arena")  # no server yet
    assert not future.done()
    srv, sconn = start_server(spawn, "early")
    assert future.result(MSG_S).payload == b"%d:first" % srv.pid
    t.join(MSG_S)
    assert blocking["r"].payload == b"%d:second" % srv.pid
    assert {sconn.next(), sconn.next()} == {("got", b"first"), ("got", b"second")}
    stop_server(srv, sconn)


def test_request_older_than_max_age_is_answered_expired_not_run(root, spawn):
    c = a0py.RpcClient("old")
    future = c.send(b"stale", timeout=30)
    time.sleep(0.6)
    srv, sconn = start_server(spawn, "old", max_age=0.2)
    with pytest.raises(A0TimeoutError, match="max_age"):
        future.result(MSG_S)
    assert c.send_blocking(b"fresh", timeout=MSG_S).payload == b"%d:fresh" % srv.pid
    assert sconn.next() == ("got", b"fresh")  # the stale one never reached the handler
    stop_server(srv, sconn)


def test_request_that_timed_out_before_the_server_started_is_never_run(root, spawn):
    c = a0py.RpcClient("gaveup")
    with pytest.raises(A0TimeoutError, match="gaveup"):
        c.send_blocking(b"gone", timeout=0.2)
    srv, sconn = start_server(spawn, "gaveup")
    assert c.send_blocking(b"next", timeout=MSG_S).payload.endswith(b":next")
    assert sconn.next() == ("got", b"next")
    stop_server(srv, sconn)


# ------------------------------------------------------------------ restart


def test_server_sigkilled_then_restarted_fails_the_request_in_progress_and_serves_the_waiting(root, spawn):
    old, oconn = start_server(spawn, "restart")
    c = a0py.RpcClient("restart")
    results = {}

    def call(name, payload):
        try:
            results[name] = c.send_blocking(payload, timeout=60).payload
        except Exception as e:
            results[name] = e

    t1 = threading.Thread(target=call, args=("inprogress", b"block"))
    t1.start()
    assert oconn.next() == ("got", b"block")  # the handler is running (and never returns)
    waiting = c.send(b"waiting", timeout=60)  # queued behind it: not accepted
    assert waiting.request_id in request_ids("restart")
    kill(old)
    t1.join(MSG_S)
    assert isinstance(results["inprogress"], a0py.RpcServerDiedError), results
    assert "may have been partly done" in str(results["inprogress"])
    assert not waiting.done()
    new, nconn = start_server(spawn, "restart")
    assert waiting.result(MSG_S) .payload == b"%d:waiting" % new.pid
    assert nconn.next() == ("got", b"waiting")  # 'block' was not run again
    assert nconn.handled_nothing_else(c)
    stop_server(new, nconn)


def test_quick_restart_is_seen_through_the_start_packet(root, spawn):
    """A server replaced before the client polls liveness: the client still learns
    from the new server's start packet that its accepted request is orphaned."""
    old, oconn = start_server(spawn, "quick")
    c = a0py.RpcClient("quick")
    future = c.send(b"block", timeout=60)
    assert oconn.next() == ("got", b"block")
    kill(old)
    new, nconn = start_server(spawn, "quick")
    with pytest.raises(a0py.RpcServerDiedError):
        future.result(MSG_S)
    assert nconn.handled_nothing_else(c)  # the new server did not run it
    stop_server(new, nconn)


def test_client_of_a_server_gone_for_good_gets_a_timeout_naming_the_topic(root, spawn):
    srv, _ = start_server(spawn, "gone")
    kill(srv)
    c = a0py.RpcClient("gone", wait_for_server=0.5)
    t0 = time.monotonic()
    with pytest.raises(A0TimeoutError, match=r"rpc topic 'gone': no server alive for 0.5 s"):
        c.send_blocking(b"anyone?")  # no timeout given: still bounded
    assert time.monotonic() - t0 < MSG_S
    with pytest.raises(A0TimeoutError, match="'gone'"):
        c.send(b"anyone?").result(MSG_S)


def test_never_started_server_bounds_the_wait_too(root):
    c = a0py.RpcClient("never", wait_for_server=0.3)
    with pytest.raises(A0TimeoutError, match="never"):
        c.send_blocking(b"x", timeout=None)


# ------------------------------------------------------------------ cancel, timeout


def test_cancel_from_another_thread_ends_the_blocking_call_and_tells_the_server(root, spawn):
    srv, sconn = start_server(spawn, "cancel")
    c = a0py.RpcClient("cancel")
    req = a0py.Packet(b"hold")
    out = {}

    def call():
        try:
            c.send_blocking(req, timeout=60)
        except Exception as e:
            out["e"] = e

    t = threading.Thread(target=call)
    t.start()
    assert sconn.next() == ("got", b"hold")
    c.cancel(req.id)
    t.join(MSG_S)
    assert isinstance(out["e"], a0py.RpcCancelledError)
    assert isinstance(out["e"], concurrent.futures.CancelledError)
    # The server's on_cancel ran, saw the request cancelled, and its late reply was dropped.
    assert sconn.next() == ("cancel", req.id, True, None)
    stop_server(srv, sconn)


def test_cancelling_a_future_cancels_the_request(root, spawn):
    srv, sconn = start_server(spawn, "fcancel")
    c = a0py.RpcClient("fcancel")
    future = c.send(b"hold")
    assert sconn.next() == ("got", b"hold")
    assert future.cancel()
    assert sconn.next()[:3] == ("cancel", future.request_id, True)
    stop_server(srv, sconn)


def test_timeout_cancels_the_request_at_the_server(root, spawn):
    srv, sconn = start_server(spawn, "tmo")
    c = a0py.RpcClient("tmo")
    t0 = time.monotonic()
    with pytest.raises(A0TimeoutError, match=r"no reply within 0.3 s"):
        c.send_blocking(b"hold", timeout=0.3)
    assert time.monotonic() - t0 < MSG_S
    assert sconn.next() == ("got", b"hold")
    assert sconn.next()[0] == "cancel"
    # the same through a future: it fails at its timeout, and the cancel reaches the server
    with pytest.raises(A0TimeoutError):
        c.send(b"hold", timeout=0.3).result(MSG_S)
    assert sconn.next() == ("got", b"hold")
    assert sconn.next()[0] == "cancel"
    stop_server(srv, sconn)


def test_ctrl_c_interrupts_a_blocking_call_and_cancels_it(root, spawn):
    srv, sconn = start_server(spawn, "sigint")
    c = a0py.RpcClient("sigint")
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        c.send_blocking(b"hold", timeout=60)
    assert sconn.next() == ("got", b"hold")
    assert sconn.next()[0] == "cancel"
    stop_server(srv, sconn)


# ------------------------------------------------------------------ server side


def test_handler_that_raises_sends_an_error_and_the_server_goes_on(root, spawn):
    srv, sconn = start_server(spawn, "raise")
    c = a0py.RpcClient("raise")
    with pytest.raises(a0py.RpcRemoteError, match="ValueError: no such thing"):
        c.send_blocking(b"raise", timeout=MSG_S)
    assert c.send_blocking(b"ok", timeout=MSG_S).payload.endswith(b":ok")
    stop_server(srv, sconn)


def test_closing_a_server_answers_its_requests_in_progress(root):
    held = []
    srv = a0py.RpcServer("closing", held.append)
    future = a0py.RpcClient("closing").send(b"x", timeout=MSG_S)
    wait_until(lambda: held, "the request to reach the handler")
    srv.close()
    with pytest.raises(a0py.RpcRemoteError, match="closed before answering"):
        future.result(MSG_S)
    assert held[0].reply(b"late") is None  # dropped, no error


def test_one_live_server_per_topic(root, spawn):
    srv, sconn = start_server(spawn, "solo")
    with pytest.raises(LockError, match=rf"rpc topic 'solo' already has a live server \(pid {srv.pid}\)"):
        a0py.RpcServer("solo", lambda req: None)
    stop_server(srv, sconn)
    with a0py.RpcServer("solo", lambda req: req.reply(b"mine")):
        assert a0py.RpcClient("solo").send_blocking(b"", timeout=MSG_S).payload == b"mine"


def test_reply_twice_is_an_error(root):
    errors = []

    def on_request(req):
        req.reply(b"one")
        try:
            req.reply(b"two")
        except a0py.RpcError as e:
            errors.append(str(e))

    with a0py.RpcServer("twice", on_request):
        assert a0py.RpcClient("twice").send_blocking(b"", timeout=MSG_S).payload == b"one"
    assert errors and "answered already" in errors[0]


def test_server_made_in_a_short_lived_thread_stays_alive(root):
    made = []
    t = threading.Thread(target=lambda: made.append(a0py.RpcServer("kept", lambda r: r.reply(b"hi"))))
    t.start()
    t.join()
    assert rpc.server_pid("kept") == os.getpid()  # its deadman is held by the keeper thread
    assert a0py.RpcClient("kept", wait_for_server=0.5).send_blocking(b"", timeout=MSG_S).payload == b"hi"
    made[0].close()
    assert rpc.server_pid("kept") is None


def test_blocking_call_to_a_server_of_this_process_from_its_dispatcher_is_refused(root):
    with a0py.RpcServer("inner", lambda r: r.reply(b"in")):
        inner = a0py.RpcClient("inner")

        def outer_handler(req):
            req.reply(inner.send_blocking(b"", timeout=MSG_S).payload)

        with a0py.RpcServer("outer", outer_handler):
            with pytest.raises(a0py.RpcRemoteError, match="would wait for itself"):
                a0py.RpcClient("outer").send_blocking(b"", timeout=MSG_S)
        # With an executor the outer handler runs off the dispatcher: nesting works.
        with concurrent.futures.ThreadPoolExecutor(2) as pool, \
                a0py.RpcServer("outer2", outer_handler, executor=pool):
            assert a0py.RpcClient("outer2").send_blocking(b"", timeout=MSG_S).payload == b"in"


def test_send_async_and_callback(root):
    got = []
    done = threading.Event()
    with a0py.RpcServer("aio", lambda r: r.reply(r.pkt.payload.upper())):
        c = a0py.RpcClient("aio")

        async def main():
            replies = await asyncio.gather(*(c.send_async(b"x%d" % i, timeout=MSG_S) for i in range(20)))
            return [r.payload for r in replies]

        assert asyncio.run(main()) == [b"X%d" % i for i in range(20)]
        c.send(b"cb", callback=lambda pkt: (got.append(pkt.payload), done.set()), timeout=MSG_S)
        assert done.wait(MSG_S) and got == [b"CB"]
        c.close()


def test_cancelling_an_asyncio_task_cancels_the_request(root):
    seen = []
    cancelled = threading.Event()
    srv = a0py.RpcServer("aiocancel", seen.append, on_cancel=lambda rid: cancelled.set())
    c = a0py.RpcClient("aiocancel")

    async def main():
        task = asyncio.ensure_future(c.send_async(b"wait"))
        while not seen:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled.wait(MSG_S) and seen[0].cancelled
    srv.close()


# ------------------------------------------------------------------ bad arguments


def test_bad_arguments_are_clear_errors(root):
    with pytest.raises(ArgumentError, match="must be callable"):
        a0py.RpcServer("bad", "not a function")
    with pytest.raises(ArgumentError, match="bad topic name"):
        a0py.RpcServer("bad topic!", lambda r: None)
    with pytest.raises(ArgumentError, match="max_age"):
        a0py.RpcServer("bad", lambda r: None, max_age=-1)
    with pytest.raises(ArgumentError, match="executor"):
        a0py.RpcServer("bad", lambda r: None, executor=object())
    c = a0py.RpcClient("bad", wait_for_server=0.2)
    with pytest.raises(ArgumentError, match="timeout"):
        c.send_blocking(b"", timeout=-1)
    with pytest.raises(ArgumentError, match="timeout"):
        c.send_blocking(b"", timeout="soon")
    with pytest.raises(ArgumentError, match="a message must be bytes"):
        c.send_blocking(12, timeout=1)
    with pytest.raises(ArgumentError, match="reserved for the RPC protocol"):
        c.send_blocking(b"", timeout=1, headers={"a0_rpc_type": "reply"})
    with pytest.raises(ArgumentError, match="request_id"):
        c.cancel(7)
    with pytest.raises(ArgumentError, match="wait_for_server"):
        a0py.RpcClient("bad", wait_for_server=-3)
    with pytest.raises(ArgumentError, match="callback"):
        c.send(b"", callback=3)


# ------------------------------------------------------------------ lifetime


def test_a_dropped_client_stops_routing_once_its_calls_are_over(root):
    import gc

    with a0py.RpcServer("drop", lambda r: r.reply(b"ok")):
        c = a0py.RpcClient("drop")
        assert c.send(b"", timeout=MSG_S).result(MSG_S).payload == b"ok"
        router = c._router
        assert not router.closed
        del c
        gc.collect()
        wait_until(lambda: router.closed, "the orphaned router to close")
        assert not router.watch.active
        # With a call pending, it closes after that call instead.
        held = []
        with a0py.RpcServer("drop2", held.append):
            c2 = a0py.RpcClient("drop2")
            future = c2.send(b"", timeout=MSG_S)
            router2 = c2._router
            del c2
            gc.collect()
            wait_until(lambda: held, "the request to reach the handler")
            assert not router2.closed
            held[0].reply(b"late")
            assert future.result(MSG_S).payload == b"late"
            wait_until(lambda: router2.closed, "the router to close after its last call")


def test_interpreter_exit_with_everything_open_is_clean(root):
    r = run_python("""
        import a0py
        srv = a0py.RpcServer("exit/rpc", lambda req: None)   # never replies
        psrv = a0py.PrpcServer("exit/prpc", lambda conn: conn.send("x"))
        pending = a0py.RpcClient("exit/rpc").send(b"forever")
        stream = a0py.PrpcClient("exit/prpc").connect(b"", lambda pkt, done: None)
        watcher = a0py.CfgWatcher("exit/cfg", print)
        listener = a0py.LogListener("exit/log", "dbg", print)
        disc = a0py.Discovery("**", lambda name: None)
        dm = a0py.Deadman("exit/dm"); dm.take()
        print("ok", flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
    assert r.stderr == ""
    assert rpc.server_pid("exit/rpc") is None  # the deadman went with the process
