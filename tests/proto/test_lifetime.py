"""The lifetime the protocol objects share (:mod:`a0py.proto.lifetime`): a ``with``
block closes them and lets its exception through; a forked child that closes its copy
of a parent's object (explicitly or by leaving a ``with`` block) closes nothing of the
parent's: the parent's cfg and logger still write, its server still serves and answers
the request it holds with its own reply, and its client still gets that reply; a
callback subscriber whose callback was running at the fork closes at once in the child;
an inherited client that already routed calls routes the child's own. (The broker
client's fork test is in tests/broker/test_broker.py.)

Children are real forked processes; every wait is bounded and nothing is timed."""

import os
import threading

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv, wait_until

import a0py
from a0py import ClosedError
from a0py.broker import BrokerClient
from a0py.proto import rpc
from a0py.proto.lifetime import Closeable

pytestmark = pytest.mark.slow

HELD = {"Cfg": a0py.Cfg, "Logger": a0py.Logger, "RpcServer": a0py.RpcServer,
        "RpcClient": a0py.RpcClient, "PrpcServer": a0py.PrpcServer,
        "PrpcClient": a0py.PrpcClient, "Subscriber": a0py.Subscriber,
        "LogListener": a0py.LogListener, "CfgWatcher": a0py.CfgWatcher,
        "Discovery": a0py.Discovery, "BrokerClient": BrokerClient}


@pytest.mark.parametrize("name", sorted(HELD))
def test_every_protocol_object_that_closes_is_a_closeable(name):
    assert issubclass(HELD[name], Closeable)


def test_a_with_block_closes_and_lets_its_exception_through(root):
    with pytest.raises(KeyError, match="inside"):
        with a0py.Cfg("life/cfg") as cfg, a0py.Logger("life/log") as log, \
                a0py.Subscriber("life/sub", print) as sub, a0py.RpcServer("life/rpc", print) as srv:
            raise KeyError("inside")
    with pytest.raises(ClosedError):
        cfg.write({"a": 1})
    with pytest.raises(ClosedError):
        log.info("x")
    assert sub.closed and srv.closed
    assert rpc.server_pid("life/rpc") is None


class Held:
    """An RPC handler that keeps its requests until the test answers them."""

    def __init__(self):
        self.requests = []
        self.arrived = threading.Event()

    def __call__(self, req):
        self.requests.append(req)
        self.arrived.set()


def _close_copies_and_report(conn, *objects):
    """In the child: closes each inherited copy (the first by leaving a ``with``
    block), then reports whether its copies of a cfg and a logger refuse writes."""
    with objects[0]:
        pass
    for obj in objects[1:]:
        obj.close()
    refused = []
    for obj in objects:
        try:
            if isinstance(obj, a0py.Cfg):
                obj.write({"from": "child"})
            elif isinstance(obj, a0py.Logger):
                obj.info("from child")
            else:
                continue
        except ClosedError:
            refused.append(type(obj).__name__)
    conn.send(sorted(refused))


def test_a_forked_child_closing_its_copies_leaves_the_parents_objects_working(root, spawn):
    held = Held()
    srv = a0py.RpcServer("life/fork/rpc", held)
    client = a0py.RpcClient("life/fork/rpc")
    future = client.send(b"question", timeout=None)
    assert held.arrived.wait(MSG_S)
    cfg = a0py.Cfg("life/fork/cfg")
    cfg.write({"v": 1})
    logger = a0py.Logger("life/fork/log")
    lines = []
    listener = a0py.LogListener("life/fork/log", "dbg", lambda pkt: lines.append(bytes(pkt.payload)))

    parent, child = CTX.Pipe()
    p = spawn(_close_copies_and_report, child, srv, client, cfg, logger, listener)
    assert recv(parent) == ["Cfg", "Logger"]   # the child's copies are closed there
    join_ok(p)

    # The server is still this process's: alive, and the request it holds is answered
    # by its own reply (a copy that closed the server would have failed it).
    assert rpc.server_pid("life/fork/rpc") == os.getpid()
    assert not srv.closed
    held.requests[0].reply(b"answer")
    assert future.result(MSG_S).payload == b"answer"
    again = client.send(b"again", timeout=None)
    wait_until(lambda: len(held.requests) == 2, "the second request to reach the server")
    held.requests[1].reply(b"second")
    assert again.result(MSG_S).payload == b"second"

    cfg.write({"v": 2})
    assert cfg.value("/v") == 2
    logger.info("from parent")
    wait_until(lambda: b"from parent" in lines, "the parent's log line")
    assert b"from child" not in lines
    for obj in (listener, client, srv, cfg, logger):
        obj.close()


def _close_in_a_thread(conn, sub):
    closer = threading.Thread(target=sub.close, daemon=True)
    closer.start()
    closer.join(MSG_S)
    conn.send(not closer.is_alive())


@pytest.mark.parametrize("kind", ["Subscriber", "LogListener"])
def test_a_forked_child_closes_a_subscriber_whose_callback_ran_at_the_fork(root, spawn, kind):
    inside, release = threading.Event(), threading.Event()

    def blocking(pkt):
        inside.set()
        release.wait(MSG_S)

    if kind == "Subscriber":
        sub = a0py.Subscriber("life/busy", blocking)
        a0py.Publisher("life/busy").pub(b"x")
    else:
        sub = a0py.LogListener("life/busy", "dbg", blocking)
        a0py.Logger("life/busy").info("x")
    assert inside.wait(MSG_S)
    parent, child = CTX.Pipe()
    try:
        p = spawn(_close_in_a_thread, child, sub)   # forked while the callback runs
        assert recv(parent, timeout=2 * MSG_S) is True, "close() in the child did not return"
        join_ok(p)
    finally:
        release.set()
    sub.close()
    assert sub.closed


def _call_with_the_inherited_client(conn, client):
    try:
        conn.send(bytes(client.send(b"child", timeout=None).result(MSG_S).payload))
    except Exception as e:  # reported, so the parent's assertion names it
        conn.send(repr(e))
    client.close()


def test_a_forked_child_calls_through_an_inherited_client_that_already_routed_calls(root, spawn):
    srv = a0py.RpcServer("life/echo", lambda req: req.reply(b"echo " + bytes(req.pkt.payload)))
    client = a0py.RpcClient("life/echo")
    assert client.send(b"parent", timeout=None).result(MSG_S).payload == b"echo parent"
    parent, child = CTX.Pipe()
    p = spawn(_call_with_the_inherited_client, child, client)
    assert recv(parent, timeout=2 * MSG_S) == b"echo child"
    join_ok(p)
    assert client.send(b"after", timeout=None).result(MSG_S).payload == b"echo after"
    client.close()
    srv.close()
