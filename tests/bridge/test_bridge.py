"""The Zenoh bridge with real processes: each "machine" is a root of its own
(``A0PY_ROOT=shm:PREFIX``), each bridge an ``a0py bridge`` process, the bridges joined
over TCP on loopback. Every wait is bounded; a bridge that does not stop on SIGTERM is
killed and the test fails."""

import itertools
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
import zenoh  # the test extra has it: nothing here is skipped
from helpers.procs import REPO, ended_after, wait_until

from a0py import (
    A0TimeoutError,
    Cfg,
    CfgWatcher,
    Packet,
    PrpcClient,
    Publisher,
    RpcClient,
    RpcRemoteError,
    RpcServerDiedError,
    SubscriberSync,
    _core,
)
from a0py.bridge import HOST, ORIGIN, SEQ, BridgeConfigError, BridgeStartError, ZenohBridge
from a0py.bridge.config import zenoh_config
from a0py.bridge.wire import (
    FRAME_PREFIX,
    Attachment,
    BatchAttachment,
    BundleAttachment,
    bundle_payload,
    pubsub_key,
)
from a0py.proto import INIT_OLDEST
from a0py.proto.log import Logger, LogListener, log_level
from a0py.proto.prpc import is_done
from a0py.proto.rpc import server_pid
from a0py.proto.topic import LOG, PUBSUB, Topic, list_topics, unlink_topic

START_S = 20.0   # a bridge process prints its first line within this
LINK_S = 20.0    # two bridges route a topic within this
MSG_S = 15.0     # packets cross within this
POLL_S = 0.05    # how often a test looks again at what it waits for
MARK = "marker"  # the header of the packets settle() sends


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def endpoint(port):
    return f"tcp/127.0.0.1:{port}"


@pytest.fixture
def machines():
    """make(n): n fresh roots (one per "machine"), removed afterwards with their topics."""
    roots = []

    def make(n):
        tag = uuid.uuid4().hex[:8]
        new = [f"shm:brt{tag}{chr(ord('a') + i)}" for i in range(n)]
        roots.extend(new)
        return new

    yield make
    for root in roots:
        for name in list_topics(root):
            unlink_topic(Topic(name, root=root))


class BridgeProc:
    """An ``a0py bridge`` process; ``id`` from its first line, ``stop()`` its final status."""

    def __init__(self, root, globs, *args):
        env = dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO)
        self.root = root
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "a0py", "bridge", "--status-interval", "0.2", *args, *globs],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        line = self._line(START_S)
        assert line.startswith("a0py bridge: "), f"bridge did not start: {line!r} {self._err()}"
        self.id = line.split()[2]

    def _line(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else ""

    def _err(self):
        if self.proc.poll() is None:
            return ""
        return self.proc.stderr.read()

    def kill(self):
        self.proc.kill()
        self.proc.communicate(timeout=10)

    def stop(self):
        """SIGTERM; the final status line (a dict)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, err = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            pytest.fail("the bridge did not stop within 20 s of SIGTERM")
        assert self.proc.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def bridges():
    """start(root, globs, *args): a BridgeProc, killed at teardown if still running."""
    with ended_after(BridgeProc, _kill_if_running) as start:
        yield start


def _kill_if_running(bridge):
    if bridge.proc.poll() is None:
        bridge.kill()


def drain(root, name):
    """Every packet of topic `name` under `root` now, oldest first."""
    with SubscriberSync(Topic(name, root=root), init=INIT_OLDEST) as sub:
        out = []
        while (pkt := sub.read()) is not None:
            out.append(pkt)
        return out


def ring(root, name, protocol=PUBSUB):
    """Every packet of topic `name`'s `protocol` ring under `root` now, oldest first;
    none if the ring does not exist (nothing is created)."""
    if not Topic(name, root=root).exists(protocol):
        return []
    with _core.PacketReader(Topic(name, root=root).arena(protocol), 0, 0) as reader:
        return [p for p in reader.read_batch(100_000) if not isinstance(p, Exception)]


def wait_for(root, name, count, timeout=MSG_S):
    """The packets of `name` under `root` once there are `count` of them; fails at the
    timeout saying how many came."""
    return wait_until(lambda: got if len(got := drain(root, name)) >= count else None,
                      f"{count} packets of {name!r} under {root}", timeout=timeout, every=POLL_S,
                      state=lambda: f"{len(drain(root, name))} packets")


def link(src, dsts, probe):
    """Publishes on topic `probe` under `src` until a packet of it shows under every root
    of `dsts`: the route from src to each is up."""
    with Publisher(Topic(probe, root=src)) as pub:
        def probed():
            pub.pub(b"probe")
            return all(drain(d, probe) for d in dsts)

        wait_until(probed, f"a route from {src} to {dsts}", timeout=LINK_S, every=0.1)


def settle(src, dsts, *names, protocol=PUBSUB):
    """Sends a marker (a packet with the header MARK, or a log message) on each topic of
    `names` under `src`, from this process, and waits until each shows under every root
    of `dsts`; returns the markers' header values.

    How a test sees that nothing more is coming (a packet sent back, a duplicate) without
    waiting a while for it: a bridge reads a ring in order and only when a local packet
    wakes it, and sends a topic's packets in that order on one key. So once the marker
    has crossed, the bridge of `src` has looked at every packet before it in the ring,
    the imported ones too (which it must not send), and whatever it sent of them has
    landed. Tests leave the markers out of what they count (:func:`unmarked`)."""
    tokens = {name: uuid.uuid4().hex for name in names}
    for name, token in tokens.items():
        if protocol == LOG:
            with Logger(Topic(name, root=src)) as log:
                log.info("marker", headers=[(MARK, token)])
        else:
            with Publisher(Topic(name, root=src)) as pub:
                pub.pub(b"marker", headers=[(MARK, token)])
    for dst in dsts:
        for name, token in tokens.items():
            wait_until(lambda d=dst, n=name, t=token: any(
                p.headers.get(MARK) == t for p in ring(d, n, protocol)),
                f"the marker sent on {name!r} ({protocol}) under {src} to show under {dst}",
                timeout=MSG_S, every=POLL_S)
    return list(tokens.values())


def unmarked(packets):
    """`packets` less the markers :func:`settle` sent."""
    return [p for p in packets if MARK not in p.headers]


PUBLISHER = """
import sys
from a0py import Publisher
n, name, tag = int(sys.argv[1]), sys.argv[2], sys.argv[3]
with Publisher(name) as pub:
    for i in range(n):
        pub.pub(f"{tag}-{i}".encode() * (1 + i % 7), headers=[("i", str(i)), ("tag", tag)])
"""


def publish(root, name, n, tag):
    """Publishes n packets on `name` under `root` from a process of its own."""
    subprocess.run([sys.executable, "-c", PUBLISHER, str(n), name, tag], check=True, timeout=60,
                   env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO), cwd=REPO)


def test_every_packet_crosses_in_order_with_its_headers_and_origin(machines, bridges):
    a, b = machines(2)
    ba, bb = bridge_pair(bridges, a, b, ["robot/**"])
    link(a, [b], "robot/probe")
    # robot/data is created after both bridges started: discovered, exported from its first packet.
    publish(a, "robot/data", 300, "A")
    sent = drain(a, "robot/data")
    got = wait_for(b, "robot/data", 300)
    assert len(sent) == 300
    assert [p.id for p in got] == [p.id for p in sent]
    for i, (s, g) in enumerate(zip(sent, got)):
        assert g.payload == s.payload
        theirs = list(g.headers)
        # the publisher's headers, standard ones included, byte for byte, then the bridge's
        assert theirs[:len(s.headers)] == list(s.headers)
        assert g.headers[ORIGIN] == ba.id
        assert g.headers[HOST] == socket.gethostname()
        assert g.headers[SEQ] == str(i + 1)
        assert len(theirs) == len(s.headers) + 3
    # nothing came back to A, nothing on B went out again: B's bridge, woken by a marker
    # on B, passes over the 300 it imported and sends the marker alone
    settle(b, [a], "robot/data")
    assert len(unmarked(drain(a, "robot/data"))) == 300
    assert len(unmarked(drain(b, "robot/data"))) == 300
    # each side's `a0py info` shows what its bridge carried of the topic, while it runs
    info_b = wait_until(
        lambda: out if "exported 1, imported 300" in (out := cli(b, "info", "robot/data")) else None,
        "B's status to count the 300 packets and the marker", timeout=MSG_S, every=0.2,
        state=lambda: cli(b, "info", "robot/data"))
    assert f"bridge     {bb.id} on " in info_b and "(running" in info_b
    assert "pubsub: exported 1, imported 300; undelivered: none" in info_b
    sa, sb = ba.stop(), bb.stop()
    info_a = cli(a, "info", "robot/data")
    assert "pubsub: exported 300, imported 1; undelivered: none" in info_a and "(stopped" in info_a
    assert ls_row(a, "robot/data")[-1] == "0" and ls_row(b, "robot/data")[-1] == "0"
    assert ls_row(a, "robot/probe")[-1] == "0"
    assert sa["topics"]["robot/data"]["exported"] == 300
    assert sb["topics"]["robot/data"]["imported"] == 300
    assert sb["topics"]["robot/data"]["lost"] == 0
    assert sb["topics"]["robot/data"]["exported"] == 1  # the marker: imported packets are never re-exported


def test_a_topic_present_before_the_bridge_starts_is_bridged_from_its_next_packet(machines, bridges):
    a, b = machines(2)
    with Publisher(Topic("robot/old", root=a)) as pub:
        pub.pub(b"before the bridge")
        port = free_port()
        bridges(a, ["robot/**"], "--listen", endpoint(port))
        bridges(b, ["robot/**"], "--connect", endpoint(port))
        link(a, [b], "robot/probe")

        # the bridge's subscriber to robot/old may come a moment after the probe's route
        def after():
            pub.pub(b"after")
            return drain(b, "robot/old")

        wait_until(after, "robot/old to be bridged", timeout=LINK_S, every=0.1)
    assert all(p.payload == b"after" for p in drain(b, "robot/old"))


LOGGER = """
import sys
from a0py import Logger
with Logger(sys.argv[1]) as log:
    for i in range(int(sys.argv[2])):
        (log.warn if i % 2 else log.info)(f"message {i}")
"""


def test_log_messages_cross_with_their_levels_in_order(machines, bridges):
    a, b = machines(2)
    ba, bb = bridge_pair(bridges, a, b, ["robot/**"])
    link(a, [b], "robot/probe")
    got = []
    listener = LogListener(Topic("robot/arm", root=b), "DBG", got.append, init=INIT_OLDEST)
    try:
        subprocess.run([sys.executable, "-c", LOGGER, "robot/arm", "40"], check=True, timeout=60,
                       env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
        wait_until(lambda: len(got) >= 40, "40 log messages to cross", timeout=MSG_S, every=POLL_S,
                   state=lambda: len(got))
        # nothing more comes: B's bridge passed over the 40 it imported (its marker reached
        # A), then A's over all A holds (its marker reached this listener)
        settle(b, [a], "robot/arm", protocol=LOG)
        (last,) = settle(a, [b], "robot/arm", protocol=LOG)
        wait_until(lambda: any(p.headers.get(MARK) == last for p in got), "A's marker to reach the listener",
                   timeout=MSG_S, every=POLL_S)
    finally:
        listener.close()
    got = unmarked(got)
    assert [p.payload for p in got] == [f"message {i}".encode() for i in range(40)]
    assert [log_level(p).name for p in got] == ["INFO", "WARN"] * 20
    assert all(p.headers[ORIGIN] == ba.id for p in got)
    assert bb.stop()["logs"]["robot/arm"]["imported"] == 40 + 1  # and A's marker
    assert ba.stop()["logs"]["robot/arm"]["exported"] == 40 + 1



def cli(root, *args):
    """Runs ``a0py ARGS`` under `root`; its stdout."""
    out = subprocess.run([sys.executable, "-m", "a0py", *args], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO), cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout


def ls_row(root, name):
    """The cells of topic `name`'s row in ``a0py ls`` under `root`."""
    out = cli(root, "ls")
    header = out.splitlines()[0].split()
    assert header[-1] == "UNDELIVERED", out
    rows = [line.split() for line in out.splitlines()[1:]]
    return next(r for r in rows if r[0] == name)


def test_cfg_changes_reach_a_watcher_on_the_other_side_in_order_and_come_back(machines, bridges):
    a, b = machines(2)
    # Each side has its own configuration before the bridges start: neither is sent.
    with Cfg(Topic("robot/cfg", root=a)) as cfg_a, Cfg(Topic("robot/cfg", root=b)) as cfg_b:
        cfg_a.write({"side": "a"})
        cfg_b.write({"side": "b"})
    port = free_port()
    bridges(a, ["robot/**"], "--listen", endpoint(port))
    bb = bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe")
    link(b, [a], "robot/probe_back")
    versions = []
    watcher = CfgWatcher(Topic("robot/cfg", root=b), lambda pkt: versions.append(pkt.json()))
    try:
        wait_until(lambda: versions, "B's configuration to reach the watcher", timeout=MSG_S, every=POLL_S)
        assert versions == [{"side": "b"}]
        # The bridge's exporter on A may subscribe a moment after the probe's route is up:
        # set until the first change shows on B, then a series of patches.
        n = 0

        def set_n():
            nonlocal n
            n += 1
            cli(a, "cfg", "robot/cfg", "set", "/n", str(n))
            return len(versions) >= 2

        wait_until(set_n, "a cfg change to cross", timeout=LINK_S, every=0.2)
        for k in range(1, 6):
            cli(a, "cfg", "robot/cfg", "patch", json.dumps({f"k{k}": k}))
        wait_until(lambda: versions[-1].get("k5") == 5, "the patches to cross", timeout=MSG_S,
                   every=POLL_S, state=lambda: versions[-1])
        last = {"side": "a", "n": n, **{f"k{k}": k for k in range(1, 6)}}
        # a change made on B goes back to A, merged into what B had; the watcher stays
        # open meanwhile: nothing comes between A's last patch and B's own change, on B
        # until B's bridge has sent B's change (after all it had imported)
        with Cfg(Topic("robot/cfg", root=b)) as cfg_b:
            cfg_b.mergepatch({"from": "b"})
        with Cfg(Topic("robot/cfg", root=a)) as cfg_a:
            wait_until(lambda: cfg_a.read().json().get("from") == "b", "the change on B to reach A",
                       timeout=MSG_S, every=POLL_S)
            assert cfg_a.read().json() == {**last, "from": "b"}
        wait_until(lambda: versions[-1].get("from") == "b", "the watcher to see B's change",
                   timeout=MSG_S, every=POLL_S)
    finally:
        watcher.close()
    # in order: each version a superset of the one before (patches only add)
    later = [v for v in versions if v.get("n") == n]
    for older, newer in itertools.pairwise(later):
        assert set(older.items()) <= set(newer.items()), (older, newer)
    assert versions[-2:] == [last, {**last, "from": "b"}]
    assert bb.stop()["cfgs"]["robot/cfg"]["duplicates"] == 0



def test_imported_topics_are_created_at_a_size_that_fits(machines, bridges):
    a, b = machines(2)
    _, bb = bridge_pair(bridges, a, b, ["robot/**"], "--size", "robot/sized/*=32M")
    link(a, [b], "robot/probe")
    big = b"x" * (3 << 20)  # does not fit a default (4 MiB) arena's four frames
    sent = 0
    with Publisher(Topic("robot/big", root=a, size="16M")) as p_big, \
            Publisher(Topic("robot/sized/x", root=a)) as p_sized:
        def published():
            nonlocal sent
            # (polled without opening them: a reader would create them at the default size)
            if Topic("robot/big", root=b).exists("pubsub") and Topic("robot/sized/x", root=b).exists("pubsub"):
                return True
            p_big.pub(big)
            sent += 1
            p_sized.pub(b"small")
            return False

        wait_until(published, "B's bridge to create both topics", timeout=LINK_S, every=0.2)
    assert wait_for(b, "robot/big", 1)[0].payload == big
    assert Topic("robot/sized/x", root=b).arena("pubsub").size == 32 << 20
    assert Topic("robot/big", root=b).arena("pubsub").size >= 4 * len(big)
    # B's exporter passes over the large packets its importer wrote (a marker on B wakes
    # it): none comes back to A
    settle(b, [a], "robot/big")
    back = unmarked(drain(a, "robot/big"))
    assert 0 < len(back) <= sent and not any(ORIGIN in p.headers for p in back)
    status = bb.stop()
    assert status["topics"]["robot/big"]["too_large"] == 0
    assert status["topics"]["robot/big"]["exported"] == 1  # the marker alone


PACED = """
import sys, time
from a0py import Publisher
n, name, tag, pause = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
with Publisher(name) as pub:
    for i in range(n):
        pub.pub(f"{tag}-{i}".encode(), headers=[("i", str(i)), ("tag", tag)])
        time.sleep(pause)
"""


def publish_paced(root, name, n, tag, pause):
    """A process publishing n packets on `name` under `root`, `pause` seconds apart."""
    return subprocess.Popen([sys.executable, "-c", PACED, str(n), name, tag, str(pause)],
                            env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO), cwd=REPO)


def tagged(root, name, tag):
    return [p for p in drain(root, name) if p.headers.get("tag") == tag]


def local_sleeper(root, name):
    """Whether a waiter has armed topic `name`'s ``notify_local`` word under `root` (its
    SLEEPERS bit, csrc/a0_sync.h): it sleeps on it, or is about to, having counted every
    wake-up before. Only a bridge's export loop waits on that word. Where MultiWait polls
    (no futex_waitv) nothing is armed, and nothing is pending once the loop has read
    what woke it: True."""
    if _core.multiwait_mode() == "poll":
        return True
    return bool(_core.Transport(Topic(name, root=root).arena(PUBSUB)).notify_local_count & 1)


def test_imports_do_not_wake_the_bridges_own_export_loop_and_local_packets_still_leave(
        machines, bridges):
    """B's bridge imports a steady stream into a small ring (it wraps several times):
    its export loop sleeps through all of it (it sleeps on the rings' notify_local words,
    which the importer's relayed writes leave alone); then a local publisher on B, on the
    same topic, interleaved with the stream: every local packet reaches A, in order,
    once, and none of the overwritten imported packets is counted as a local loss."""
    a, b = machines(2)
    port = free_port()
    bridges(a, ["robot/**"], "--listen", endpoint(port))
    # B's bridge runs here, so that its export loop's wake-ups can be counted.
    with ZenohBridge(["robot/**"], connect=[endpoint(port)], root=b, log_topic=None,
                     sizes={"robot/stream": "64k"}) as bb:
        link(a, [b], "robot/probe")
        publish(a, "robot/stream", 1, "first")  # B's importer creates the topic
        wait_for(b, "robot/stream", 1)
        # B's exporter of the topic is up once a local packet of B reaches A
        wait_until(lambda: (publish(b, "robot/stream", 1, "hello") or True)
                   and tagged(a, "robot/stream", "hello"), "B's exporter to send robot/stream",
                   timeout=LINK_S, every=POLL_S)
        hellos = len(tagged(b, "robot/stream", "hello"))
        # Every wake-up the hellos caused is counted (their publishers have exited): B's
        # exporter sent them all, and its loop has armed the ring's word again since.
        wait_until(lambda: bb.status()["topics"]["robot/stream"]["exported"] == hellos
                   and local_sleeper(b, "robot/stream"), "B's export loop to send the hellos and sleep",
                   timeout=MSG_S, state=lambda: bb.status()["topics"]["robot/stream"])
        imported = bb.status()["topics"]["robot/stream"]["imported"]
        woken = bb.export_wakeups

        # 1. a steady stream from A, one sample a packet: B's export loop is not woken
        assert publish_paced(a, "robot/stream", 1000, "stream", 0.001).wait(60) == 0
        wait_until(lambda: bb.status()["topics"]["robot/stream"]["imported"] >= imported + 1000,
                   "the stream to reach B", timeout=MSG_S, every=POLL_S)
        assert bb.export_wakeups == woken
        assert len(drain(b, "robot/stream")) < 1000  # the ring wrapped: imports were overwritten

        # 2. a local publisher on B, interleaved with the stream from A
        woken = bb.export_wakeups
        remote = publish_paced(a, "robot/stream", 1000, "stream2", 0.001)
        local = publish_paced(b, "robot/stream", 100, "local", 0.01)
        assert local.wait(60) == 0 and remote.wait(60) == 0
        wait_until(lambda: len(tagged(a, "robot/stream", "local")) >= 100,
                   "B's local packets to reach A", timeout=MSG_S, every=POLL_S,
                   state=lambda: len(tagged(a, "robot/stream", "local")))
        got = tagged(a, "robot/stream", "local")
        assert [p.headers["i"] for p in got] == [str(i) for i in range(100)]
        assert all(ORIGIN in p.headers for p in got)
        # At most two a local packet: its commit's wake, and at most one more when the
        # writer clears the sleepers flag after the loop has looked at the word (the word
        # then differs from what the loop saw: it looks again, finds nothing new). The
        # 2000 imported samples meanwhile wake it not once.
        assert 1 <= bb.export_wakeups - woken <= 200
        # what A sent is all in: A's bridge, woken by a marker, sent what it had before
        # it (the marker, imported, moves the count after it is written)
        settle(a, [b], "robot/stream")
        wait_until(lambda: bb.status()["topics"]["robot/stream"]["imported"] >= imported + 2001,
                   "the second stream and the marker to be counted on B", timeout=MSG_S, every=POLL_S)
        counts = bb.status()["topics"]["robot/stream"]
        assert counts["exported"] == hellos + 100
        assert counts["missed_local"] == 0
        assert counts["imported"] == imported + 2000 + 1 and counts["lost"] == 0
    assert len(tagged(a, "robot/stream", "local")) == 100  # none twice


def test_three_bridges_in_a_triangle_deliver_each_packet_once_and_never_loop(machines, bridges):
    roots = machines(3)
    ports = [free_port() for _ in roots]
    procs = [bridges(roots[0], ["robot/**"], "--listen", endpoint(ports[0])),
             bridges(roots[1], ["robot/**"], "--listen", endpoint(ports[1]),
                     "--connect", endpoint(ports[0])),
             bridges(roots[2], ["robot/**"], "--listen", endpoint(ports[2]),
                     "--connect", endpoint(ports[0]), "--connect", endpoint(ports[1]))]
    triangle_traffic(roots, procs)


def triangle_traffic(roots, procs, n=60):
    """Three machines' bridges, linked: one topic written on every machine and one per
    machine, `n` packets each. Every packet arrives once everywhere, in the order
    published, and nothing more comes (a loop or a duplicate would) before each
    machine's marker on each topic has reached the two others; the bridges stop with no
    duplicate or loss counted. Returns their final statuses."""
    for i, r in enumerate(roots):
        link(r, [o for o in roots if o != r], f"robot/probe{i}")
    for i, r in enumerate(roots):
        publish(r, "robot/shared", n, f"m{i}")     # one topic written on every machine
        publish(r, f"robot/only{i}", n, f"m{i}")   # and one per machine
    for r in roots:
        wait_for(r, "robot/shared", 3 * n)
        for i in range(3):
            wait_for(r, f"robot/only{i}", n)
    topics = ["robot/shared", *(f"robot/only{i}" for i in range(3))]
    for r in roots:  # every bridge has passed over what it imported, and what it sent landed
        settle(r, [o for o in roots if o != r], *topics)
    for r in roots:
        shared = unmarked(drain(r, "robot/shared"))
        assert len(shared) == 3 * n and len({p.id for p in shared}) == 3 * n, r
        for i in range(3):
            # each machine's packets on the shared topic arrived once, in order
            mine = [p.headers["i"] for p in shared if p.headers["tag"] == f"m{i}"]
            assert mine == [str(k) for k in range(n)], (r, i)
            only = unmarked(drain(r, f"robot/only{i}"))
            assert len(only) == n and len({p.id for p in only}) == n, (r, i)
            assert [p.headers["i"] for p in only] == [str(k) for k in range(n)], (r, i)
    statuses = []
    for p in procs:
        status = p.stop()
        assert all(c["duplicates"] == 0 and c["lost"] == 0 for c in status["topics"].values())
        statuses.append(status)
    return statuses


def _session(port):
    return zenoh.open(zenoh_config(zenoh, connect=[endpoint(port)]))


def bridge_pair(bridges, listening, connecting, globs, *more):
    """A bridge of ``globs`` on root ``listening`` that listens on a free port, and one on
    ``connecting`` that connects to it (``more``: its further arguments); both, in that order."""
    port = free_port()
    first = bridges(listening, globs, "--listen", endpoint(port))
    return first, bridges(connecting, globs, "--connect", endpoint(port), *more)


def put_until_routed(root, name, put):
    """Calls ``put(n)`` for n = 1, 2, ... until topic ``name`` under ``root`` holds a
    packet (the route to it is up); returns the last n."""
    sent = 0

    def probe():
        nonlocal sent
        if drain(root, name):
            return True
        sent += 1
        put(sent)
        return False

    wait_until(probe, "a route to B", timeout=LINK_S, every=0.1)
    return sent


def test_bad_samples_on_bridged_keys_are_counted_and_the_bridge_goes_on(machines, bridges):
    (b,) = machines(1)
    port = free_port()
    bb = bridges(b, ["robot/**"], "--listen", endpoint(port))
    good = Packet([("k", "v")], b"real").to_bytes()
    origin = uuid.uuid4().bytes
    with _session(port) as s:
        # Numbered good packets from a made-up bridge until the route is up.
        seq = put_until_routed(b, "robot/good", lambda n: s.put(
            pubsub_key("a0py", "robot/good"), good, attachment=Attachment(origin, n, "h").encode()))
        s.put(pubsub_key("a0py", "robot/good"), good)  # no attachment
        s.put(pubsub_key("a0py", "robot/good"), good, attachment=b"junk")
        s.put("a0py/pubsub/robot/-bad", good, attachment=Attachment(origin, 1, "h").encode())
        s.put(pubsub_key("a0py", "robot/good"), b"not a packet",
              attachment=Attachment(origin, seq + 1, "h").encode())
        already = Packet([(ORIGIN, "x" * 32)], b"twice").to_bytes()
        s.put(pubsub_key("a0py", "robot/good"), already,
              attachment=Attachment(origin, seq + 2, "h").encode())
        s.put(pubsub_key("a0py", "robot/good"), good, attachment=Attachment(origin, seq + 3, "h").encode())
        # batches: one cut short, one whose count lies, one with a bad packet among good ones
        framed = FRAME_PREFIX.pack(1, len(good)) + good
        s.put(pubsub_key("a0py", "robot/good"), framed[:-5],
              attachment=BatchAttachment(origin, seq + 4, 1, "h").encode())
        s.put(pubsub_key("a0py", "robot/good"), framed * 2,
              attachment=BatchAttachment(origin, seq + 5, 3, "h").encode())
        s.put(pubsub_key("a0py", "robot/good"), framed + FRAME_PREFIX.pack(2, 3) + b"bad" + framed,
              attachment=BatchAttachment(origin, seq + 8, 3, "h").encode())
        s.put(pubsub_key("a0py", "robot/good"), framed, attachment=BatchAttachment(origin, 0, 1, "h").encode())
        wait_until(lambda: drain(b, "robot/good")[-1].headers[SEQ] == str(seq + 10),
                   "the good packet after the bad ones", timeout=MSG_S, every=POLL_S)
    status = bb.stop()
    assert status["bad_samples"] == 4
    # the two refused single packets, the cut batch (1), the lying one (3), the bad packet (1)
    assert status["topics"]["robot/good"]["corrupt"] == 2 + 1 + 3 + 1
    got = drain(b, "robot/good")
    assert all(p.payload == b"real" for p in got)
    assert [p.headers[SEQ] for p in got[-3:]] == [str(seq + 3), str(seq + 8), str(seq + 10)]


def test_gaps_and_duplicates_from_the_network_are_counted_and_logged(machines, bridges):
    (b,) = machines(1)
    port = free_port()
    bb = bridges(b, ["robot/**"], "--listen", endpoint(port))
    logs = []
    listener = LogListener(Topic("a0py/bridge", root=b), "WARN", logs.append, init=INIT_OLDEST)
    origin = uuid.uuid4().bytes

    def put(s, seq):
        s.put(pubsub_key("a0py", "robot/lossy"), Packet(str(seq)).to_bytes(),
              attachment=Attachment(origin, seq, "h").encode())

    try:
        with _session(port) as s:
            first = put_until_routed(b, "robot/lossy", lambda n: put(s, n))
            for seq in (first + 1, first + 1, first + 4, first + 2, first + 5):  # dup, gap of 2, late
                put(s, seq)
            wait_until(lambda: drain(b, "robot/lossy")[-1].payload == str(first + 5).encode(),
                       f"packet {first + 5} on B", timeout=MSG_S, every=POLL_S)
            got = drain(b, "robot/lossy")
            wait_until(lambda: logs, "a WARN on the bridge's log topic", timeout=MSG_S, every=POLL_S)
        status = bb.stop()
    finally:
        listener.close()
    counts = status["topics"]["robot/lossy"]
    assert [p.payload for p in got[-3:]] == [str(first + k).encode() for k in (1, 4, 5)]
    assert counts["duplicates"] == 2   # first+1 again, and first+2 after first+4
    assert counts["lost"] == 2         # first+2 and first+3, as seen when first+4 came
    assert "robot/lossy" in logs[-1].payload.decode() and logs[-1].headers["lost"] == "2"
    # and in `a0py ls` / `a0py info` of the bridge's root
    assert ls_row(b, "robot/lossy")[-1] == "2"
    assert ", 2 duplicates dropped; undelivered: lost 2" in cli(b, "info", "robot/lossy")


def test_a_restarted_bridge_resumes_without_duplicates(machines, bridges):
    a, b = machines(2)
    port = free_port()
    bridges(a, ["robot/**"], "--listen", endpoint(port))
    bb = bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe")
    publish(a, "robot/data", 50, "first")
    wait_for(b, "robot/data", 50)
    bb.proc.kill()
    bb.proc.communicate(timeout=10)
    publish(a, "robot/data", 20, "while-down")
    bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe2")
    publish(a, "robot/data", 50, "second")
    wait_for(b, "robot/data", 100)
    settle(a, [b], "robot/data")  # what A's bridge sent before its marker has landed
    got = unmarked(drain(b, "robot/data"))
    assert len({p.id for p in got}) == len(got)
    tags = [p.headers["tag"] for p in got]
    assert tags.count("first") == 50 and tags.count("second") == 50
    assert [p.headers["i"] for p in got if p.headers["tag"] == "second"] == [str(i) for i in range(50)]


def test_an_endpoint_in_use_is_a_clear_error(machines):
    a, b = machines(2)
    ep = endpoint(free_port())
    with ZenohBridge(["robot/**"], listen=[ep], root=a):
        with pytest.raises(BridgeStartError, match="Address already in use"):
            ZenohBridge(["robot/**"], listen=[ep], root=b).start()
        # the failed bridge let go of its root: one can start there
        with ZenohBridge(["robot/**"], root=b):
            pass


def test_a_second_bridge_on_a_root_is_refused_and_every_packet_arrives_once(machines, bridges):
    a, b = machines(2)
    port = free_port()
    ba = bridges(a, ["robot/**"], "--listen", endpoint(port))
    # the docs' two commands typed on one host with one root: the second is refused, saying why
    out = subprocess.run([sys.executable, "-m", "a0py", "bridge", "--connect", endpoint(port), "robot/**"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"another bridge (pid {ba.proc.pid}) already serves root {a}" in out.stderr
    assert "A0PY_ROOT=shm:robot" in out.stderr
    with pytest.raises(BridgeStartError, match="already serves root"):
        ZenohBridge(["robot/**"], connect=[endpoint(port)], root=a).start()
    # a bridge of another root is fine; packets cross once
    bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe")
    publish(a, "robot/once", 5, "A")
    wait_for(b, "robot/once", 5)
    # A's one bridge has sent all it had, and B's, woken, has sent nothing back
    settle(a, [b], "robot/once")
    settle(b, [a], "robot/once")
    assert len(unmarked(drain(b, "robot/once"))) == 5 and len(unmarked(drain(a, "robot/once"))) == 5
    # the holder killed: its root is free at once (a robust lock, no timeout)
    ba.kill()
    with ZenohBridge(["robot/**"], root=a):
        pass


def test_bad_configuration_is_a_clear_error(tmp_path):
    with pytest.raises(BridgeConfigError, match="endpoint"):
        ZenohBridge(["robot/**"], listen=["127.0.0.1:7447"])
    bad = tmp_path / "zenoh.json5"
    bad.write_text("{ mode: ")
    with pytest.raises(BridgeConfigError, match="does not parse"):
        ZenohBridge(["robot/**"], config=str(bad))
    with pytest.raises(BridgeConfigError, match="glob"):
        ZenohBridge([""])
    with pytest.raises(BridgeConfigError, match="prefix"):
        ZenohBridge(["robot/**"], prefix="a/*")
    out = subprocess.run([sys.executable, "-m", "a0py", "bridge", "--config", str(bad), "robot/**"],
                         capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=dict(os.environ, PYTHONPATH=REPO))
    assert out.returncode == 1 and "does not parse" in out.stderr and "Traceback" not in out.stderr
    for lease in (0, 0.05, -1, 3601, float("nan"), float("inf"), True, "1"):
        with pytest.raises(BridgeConfigError, match=r"lease must be seconds from 0\.1 to 3600"):
            ZenohBridge(["robot/**"], lease=lease)
    for lease in ("0", "nan", "ten"):
        out = subprocess.run([sys.executable, "-m", "a0py", "bridge", "--lease", lease, "robot/**"],
                             capture_output=True, text=True, timeout=60, cwd=REPO,
                             env=dict(os.environ, PYTHONPATH=REPO))
        assert out.returncode == 2 and "--lease" in out.stderr and "Traceback" not in out.stderr


# A config file with a Zenoh lease of 1 s.
SHORT_LEASE = """{
  mode: "peer",
  scouting: { multicast: { enabled: false } },
  transport: { link: { tx: { lease: 1000, keep_alive: 4 } }, shared_memory: { enabled: false } },
}"""


def _lease_ms(**kw):
    return json.loads(zenoh_config(zenoh, **kw).get_json("transport/link/tx/lease"))


def test_the_lease_is_zenohs_link_lease_and_a_config_files_is_kept_unless_given(tmp_path):
    from a0py.bridge.config import DEFAULT_LEASE

    assert _lease_ms() == DEFAULT_LEASE * 1000
    assert _lease_ms(lease=2.5) == 2500
    assert _lease_ms(lease=0.1) == 100
    own = tmp_path / "zenoh.json5"
    own.write_text(SHORT_LEASE)  # 1000 ms, keep_alive 4
    assert _lease_ms(config=str(own)) == 1000
    assert _lease_ms(config=str(own), lease=3) == 3000
    conf = zenoh_config(zenoh, config=str(own), lease=3)
    assert json.loads(conf.get_json("transport/link/tx/keep_alive")) == 4  # the file's: kept
    # a file without a lease: Zenoh's default, not the bridge's, is what it asked for
    bare = tmp_path / "bare.json5"
    bare.write_text('{ mode: "peer" }')
    assert _lease_ms(config=str(bare)) == 10000
    # the bridge says which lease it opened with
    assert ZenohBridge(["robot/**"], lease=1.5).lease == 1.5
    assert ZenohBridge(["robot/**"], config=str(own)).lease == 1.0


def test_a_bridge_no_other_can_reach_says_so_at_once(machines):
    (a,) = machines(1)
    proc = subprocess.Popen([sys.executable, "-m", "a0py", "bridge", "robot/**"], cwd=REPO, text=True,
                            env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], START_S)
        said = proc.stderr.readline() if ready else ""
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=20)
    assert "neither listens (--listen EP) nor connects (--connect EP)" in said
    assert "no other bridge can reach this one" in said


def test_a_bridge_that_meets_no_other_says_what_to_check_and_one_that_meets_one_says_so(machines):
    from a0py.cli.bridge import NO_PEER_S

    a, b, c, d, e = machines(5)
    mismatched, nobody, met = free_port(), free_port(), free_port()

    def start(root, *args):
        return subprocess.Popen([sys.executable, "-m", "a0py", "bridge", "--status-interval", "3600", *args,
                                 "robot/**"], cwd=REPO, text=True,
                                env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    procs = {"x": start(a, "--prefix", "x", "--listen", endpoint(mismatched)),
             "y": start(b, "--prefix", "y", "--connect", endpoint(mismatched)),
             "nobody": start(c, "--connect", endpoint(nobody)),
             "listen": start(d, "--listen", endpoint(met)),
             "connect": start(e, "--connect", endpoint(met))}
    hint = f"a0py bridge: no other bridge met in {NO_PEER_S:g} s"
    up = {name: rf"^a0py bridge: peer bridge [0-9a-f]{{32}} on \S+ \(root {there}, pid \d+\) up$"
          for name, there in (("listen", e), ("connect", d))}
    said = dict.fromkeys(procs, b"")

    def heard():
        """Whether each of the three that meet no bridge has said so (after NO_PEER_S),
        and each of the two that meet has said that. Once a peer is up, the timer's
        hint says nothing: the two have no hint to wait for."""
        ready, _, _ = select.select([p.stderr for p in procs.values()], [], [], 0)
        for name, proc in procs.items():
            if proc.stderr in ready:
                said[name] += os.read(proc.stderr.fileno(), 1 << 16)
        text = {name: out.decode() for name, out in said.items()}
        return (all(re.search(re.escape(hint) + ".*\n", text[name]) for name in ("x", "y", "nobody"))
                and all(re.search(up[name], text[name], re.MULTILINE) for name in up))

    wait_until(heard, "each bridge to say whether it met another", timeout=NO_PEER_S + START_S + LINK_S,
               every=0.1, state=lambda: said)
    err = {}
    for name, proc in procs.items():
        proc.send_signal(signal.SIGTERM)
        err[name] = said[name].decode() + proc.communicate(timeout=20)[1]
    assert f"{hint} (connecting to {endpoint(mismatched)}): a Zenoh session is connected, but it is not " \
        "an a0py bridge with prefix 'y': give both bridges the same --prefix" in err["y"]
    assert "with prefix 'x'" in err["x"]
    assert f"{hint} (connecting to {endpoint(nobody)}): nothing answered there yet" in err["nobody"]
    for name in up:
        assert hint not in err[name] and "Traceback" not in err[name]
        assert re.search(up[name], err[name], re.MULTILINE), err[name]


# --- RPC and PRPC across


@pytest.fixture
def rpc_servers():
    """start(root, topic): an RPC + PRPC server process (tests/helpers/bridge_rpc_server.py)
    under `root`, ready; killed at teardown."""
    started = []
    script = os.path.join(REPO, "tests", "helpers", "bridge_rpc_server.py")

    def start(root, topic):
        proc = subprocess.Popen([sys.executable, script, topic], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=REPO,
                                env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO))
        started.append(proc)
        ready, _, _ = select.select([proc.stdout], [], [], START_S)
        assert ready and proc.stdout.readline() == "ready\n", proc.stderr.read() if proc.poll() else ""
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def rpc_ring_ids(root, name):
    """The ids of the requests in topic `name`'s rpc ring under `root`."""
    return {p.id for p in ring(root, name, "rpc") if p.headers.get("a0_rpc_type") == "request"}


def test_rpc_and_prpc_calls_cross_the_bridge_as_locally(machines, bridges, rpc_servers):
    a, b = machines(2)
    bb, ba = bridge_pair(bridges, b, a, ["svc/**"])
    rpc_servers(b, "svc/math")
    topic = Topic("svc/math", root=a)
    client = RpcClient(topic, wait_for_server=LINK_S)
    reply = client.send_blocking(b"echo:one", timeout=MSG_S, headers=[("h", "x")])
    assert bytes(reply.payload) == b"one" and reply.headers["h"] == "x"
    futures = [client.send(f"echo:{i}", timeout=MSG_S) for i in range(20)]
    assert [bytes(f.result(MSG_S).payload) for f in futures] == [str(i).encode() for i in range(20)]
    with pytest.raises(RpcRemoteError, match="asked to fail"):
        client.send_blocking(b"fail", timeout=MSG_S)
    got = list(PrpcClient(topic, wait_for_server=LINK_S).stream(b"5", timeout=MSG_S))
    assert [bytes(p.payload) for p in got] == [b"0", b"1", b"2", b"3", b"4"]
    assert [is_done(p) for p in got] == [False] * 4 + [True]
    # A's clients see A's bridge as the live server; B's server stays B's own
    assert server_pid(topic) == ba.proc.pid
    assert server_pid(Topic("svc/math", root=b)) not in (None, bb.proc.pid)
    sa, sb = ba.stop(), bb.stop()
    assert sa["rpcs"]["svc/math"]["exported"] == 22 and sa["rpcs"]["svc/math"]["imported"] == 22
    assert sb["rpcs"]["svc/math"]["imported"] == 22 and sb["rpcs"]["svc/math"]["exported"] == 22
    assert sa["prpcs"]["svc/math"]["imported"] == 5 and sb["prpcs"]["svc/math"]["exported"] == 5


def test_remote_timeouts_cancels_and_server_death_reach_the_client_as_locally(
        machines, bridges, rpc_servers):
    a, b = machines(2)
    bridge_pair(bridges, b, a, ["svc/**"])
    server = rpc_servers(b, "svc/hold")
    client = RpcClient(Topic("svc/hold", root=a), wait_for_server=LINK_S)
    assert bytes(client.send_blocking(b"echo:up", timeout=MSG_S).payload) == b"up"
    # a client's timeout: A0TimeoutError here, and the cancel reaches the server's on_cancel
    timed_out = client.send(b"hold", timeout=5.0)
    with pytest.raises(A0TimeoutError, match="no reply within"):
        timed_out.result(MSG_S)
    assert [bytes(p.payload).decode() for p in wait_for(b, "svc/hold/cancels", 1)] == [timed_out.request_id]
    # a cancelled future cancels the request there too
    cancelled = client.send(b"hold")
    wait_for(b, "svc/hold/held", 2)
    cancelled.cancel()
    assert bytes(wait_for(b, "svc/hold/cancels", 2)[1].payload).decode() == cancelled.request_id
    # the server dies holding an accepted request: RpcServerDiedError
    accepted = client.send(b"hold")
    assert bytes(wait_for(b, "svc/hold/held", 3)[2].payload).decode() == accepted.request_id
    server.kill()
    with pytest.raises(RpcServerDiedError, match="died while handling"):
        accepted.result(MSG_S)
    # no server any more: the wait for one ends as locally
    with pytest.raises(A0TimeoutError, match=r"no server alive for 1\.0 s"):
        RpcClient(Topic("svc/hold", root=a), wait_for_server=1.0).send_blocking(b"echo:x", timeout=MSG_S)


def test_a_request_waiting_when_the_remote_server_dies_is_served_by_the_next(
        machines, bridges, rpc_servers):
    a, b = machines(2)
    bridge_pair(bridges, b, a, ["svc/**"])
    server = rpc_servers(b, "svc/next")
    client = RpcClient(Topic("svc/next", root=a), wait_for_server=LINK_S)
    blocked = client.send(b"block")  # accepted; its handler never returns
    wait_for(b, "svc/next/held", 1)
    waiting = client.send(b"echo:served")  # queued behind it, not accepted
    wait_until(lambda: waiting.request_id in rpc_ring_ids(b, "svc/next"),
               "the waiting request to reach the server's ring", timeout=MSG_S, every=POLL_S)
    server.kill()
    with pytest.raises(RpcServerDiedError):
        blocked.result(MSG_S)
    assert not waiting.done()
    rpc_servers(b, "svc/next")
    assert bytes(waiting.result(LINK_S).payload) == b"served"


def test_the_server_side_bridge_killed_fails_an_accepted_call(machines, bridges, rpc_servers):
    a, b = machines(2)
    bb, _ = bridge_pair(bridges, b, a, ["svc/**"])
    rpc_servers(b, "svc/far")
    client = RpcClient(Topic("svc/far", root=a), wait_for_server=LINK_S)
    accepted = client.send(b"hold")
    wait_for(b, "svc/far/held", 1)
    # The server writes its accept before it publishes `held`; `held` seen on this
    # side (bridged by the same bridge) means that bridge has been forwarding since:
    # killed before the accept crossed, the call would rightly wait for the next
    # server instead of failing.
    wait_for(a, "svc/far/held", 1, timeout=LINK_S)
    bb.kill()
    with pytest.raises(RpcServerDiedError):
        accepted.result(LINK_S)


def _ip(*args):
    subprocess.run(["ip", *args], check=True, timeout=20, capture_output=True)


@pytest.fixture
def two_namespaces():
    """Two network namespaces joined by a veth pair: (ns_a, addr_a, ns_b, addr_b)."""
    tag = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"a0br{tag}a", f"a0br{tag}b"
    net = 10 + int(tag[:2], 16) % 200
    addr_a, addr_b = f"10.{net}.{int(tag[2:4], 16)}.1", f"10.{net}.{int(tag[2:4], 16)}.2"
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        _ip("link", "add", f"v{tag}a", "netns", ns_a, "type", "veth", "peer", "name", f"v{tag}b",
            "netns", ns_b)
        for ns, dev, addr in ((ns_a, f"v{tag}a", addr_a), (ns_b, f"v{tag}b", addr_b)):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield ns_a, addr_a, ns_b, addr_b
    finally:
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "del", ns], timeout=20, capture_output=True)


def _in_machine(ns, *args):
    """A process in network namespace `ns` with a private, empty /dev/shm."""
    script = os.path.join(REPO, "tests", "helpers", "bridge_machine.py")
    inner = f"mount -t tmpfs tmpfs /dev/shm && exec {sys.executable} {script} " + " ".join(args)
    return subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "-m", "--propagation", "private",
                             "sh", "-c", inner], env=dict(os.environ, PYTHONPATH=REPO),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)


def test_two_network_namespaces_with_private_shared_memory(two_namespaces):
    ns_a, addr_a, ns_b, _ = two_namespaces
    n = 20  # alternately 1 MiB and 64 B
    port = 7447
    pub = _in_machine(ns_a, "pub", str(n), "--listen", f"tcp/{addr_a}:{port}")
    sub = _in_machine(ns_b, "sub", str(n), "--connect", f"tcp/{addr_a}:{port}")
    try:
        sub_out, sub_err = sub.communicate(timeout=60)
        pub_out, pub_err = pub.communicate(timeout=60)
    finally:
        for p in (pub, sub):
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert sub.returncode == 0, (sub_out[-2000:], sub_err[-2000:], pub_err[-2000:])
    assert pub.returncode == 0, pub_err
    pub_id = json.loads(pub_out.splitlines()[0])["bridge"]
    lines = [json.loads(x) for x in sub_out.splitlines()[1:]]
    packets, status = lines[:-1], lines[-1]["status"]
    assert lines[-1]["rpc"] == "pong:ping"  # an RPC server on A answered a client on B
    assert len(packets) == n
    for i, p in enumerate(packets):
        headers = dict(p["headers"])
        assert headers["i"] == str(i) and headers[ORIGIN] == pub_id and headers["a0_writer_seq"] == str(i + 1)
        assert p["size"] == (64 if i % 2 else 1 << 20)
    assert status["topics"]["robot/data"]["imported"] == n
    assert status["topics"]["robot/data"]["lost"] == 0


def test_the_two_machines_example_shows_packets_crossing():
    out = subprocess.run(["sh", os.path.join(REPO, "examples", "two_machines.sh"), "3"],
                         capture_output=True, text=True, timeout=120, cwd=REPO,
                         env=dict(os.environ, PYTHON=sys.executable))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count(f"{ORIGIN}: ") == 3 and out.stdout.count("source: pubsub_pub") == 3


def test_the_two_machines_example_says_which_python_lacks_a0py(tmp_path):
    # a Python that cannot import a0py with zenoh (here: one that fails every command)
    out = subprocess.run(["sh", os.path.join(REPO, "examples", "two_machines.sh"), "3"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env=dict(os.environ, PYTHON="/bin/false"))
    assert out.returncode == 1 and out.stdout == ""
    assert "/bin/false cannot import a0py with the bridge's eclipse-zenoh" in out.stderr
    assert "sudo PYTHON=/path/to/venv/bin/python sh" in out.stderr


# --- link state: which peer bridge is gone, since when, and when it is back


def wait_status(root, pred, what, timeout=LINK_S):
    """The status the bridge of `root` wrote, once `pred(status)` holds; fails at the
    timeout naming `what`."""
    from a0py.bridge.counts import read_status

    return wait_until(lambda: status if (status := read_status(root)) is not None and pred(status) else None,
                      what, timeout=timeout, every=0.1, state=lambda: read_status(root))


def peer_of(status, root):
    """The entry of the peer bridge serving `root` in `status`, or None."""
    return next((p for p in status["peers"] if p["root"] == root), None)


def log_events(root):
    """The bridge's link-state messages in its log topic under `root` now: [(event, peer
    id, level)], oldest first."""
    return [(p.headers["event"], p.headers["peer"], log_level(p).name)
            for p in ring(root, "a0py/bridge", LOG) if "event" in p.headers]


def wait_events(root, names):
    """The link-state messages under `root` (:func:`log_events`) once the last ones are
    the events `names`, in that order."""
    def logged():
        got = log_events(root)
        return got if [e for e, _, _ in got][-len(names):] == names else None

    return wait_until(logged, f"the events {names} in the log under {root}", timeout=MSG_S, every=0.1,
                      state=lambda: log_events(root))


def test_a_killed_peer_bridge_is_reported_gone_with_its_time_and_back_when_restarted(machines, bridges):
    a, b = machines(2)
    port = free_port()
    bridges(a, ["robot/**"], "--listen", endpoint(port))
    bb = bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe")
    up = wait_status(a, lambda s: (p := peer_of(s, b)) and p["state"] == "up", "B seen up")
    assert peer_of(up, b)["id"] == bb.id and peer_of(up, b)["pid"] == bb.proc.pid
    assert peer_of(up, b)["host"] == socket.gethostname()
    before = time.time_ns()
    bb.kill()
    gone = wait_status(a, lambda s: peer_of(s, b)["state"] == "gone", "B reported gone")
    assert peer_of(gone, b)["id"] == bb.id and peer_of(gone, b)["since"] >= before
    # `a0py ls` says which peer is gone and since when; `a0py info` shows it in the bridge's rows
    ls = subprocess.run([sys.executable, "-m", "a0py", "ls"], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
    assert f"peer bridge {bb.id} on {socket.gethostname()} (root {b}) gone since" in ls.stderr
    assert f"peer {bb.id} on {socket.gethostname()} (root {b}): GONE since" in cli(a, "info", "robot/probe")
    # the same bridge's root served again: the peer is back, under its new id
    bb2 = bridges(b, ["robot/**"], "--connect", endpoint(port))
    back = wait_status(a, lambda s: peer_of(s, b)["state"] == "up", "B reported back")
    assert peer_of(back, b)["id"] == bb2.id != bb.id
    link(a, [b], "robot/probe_again")
    ls = subprocess.run([sys.executable, "-m", "a0py", "ls"], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
    assert "gone since" not in ls.stderr
    assert wait_events(a, ["up", "gone", "back"])[-3:] == [
        ("up", bb.id, "INFO"), ("gone", bb.id, "WARN"), ("back", bb2.id, "INFO")]


def test_a_peer_bridge_stopped_cleanly_is_reported_stopped_not_gone(machines, bridges):
    a, b = machines(2)
    port = free_port()
    bridges(a, ["robot/**"], "--listen", endpoint(port))
    bb = bridges(b, ["robot/**"], "--connect", endpoint(port))
    link(a, [b], "robot/probe")
    wait_status(a, lambda s: (p := peer_of(s, b)) and p["state"] == "up", "B seen up")
    before = time.time_ns()
    bb.stop()  # SIGTERM: the bridge says it stops before it withdraws its token
    stopped = wait_status(a, lambda s: peer_of(s, b)["state"] != "up", "B reported stopped")
    assert peer_of(stopped, b)["state"] == "stopped" and peer_of(stopped, b)["since"] >= before
    ls = subprocess.run([sys.executable, "-m", "a0py", "ls"], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
    assert "gone since" not in ls.stderr  # a stopped peer is not a lost link
    assert f"peer {bb.id} on {socket.gethostname()} (root {b}): stopped since" in cli(a, "info", "robot/probe")
    assert wait_events(a, ["up", "stopped"])[-2:] == [("up", bb.id, "INFO"), ("stopped", bb.id, "INFO")]
    # served again: back
    bb2 = bridges(b, ["robot/**"], "--connect", endpoint(port))
    back = wait_status(a, lambda s: peer_of(s, b)["state"] == "up", "B reported back")
    assert peer_of(back, b)["id"] == bb2.id


def test_stop_notice_keys_round_trip_and_made_up_ones_are_refused():
    from a0py.bridge.errors import WireError
    from a0py.bridge.wire import peer_bye_key, peer_of_bye_key

    me = uuid.uuid4().hex
    assert peer_of_bye_key("site/a0py", peer_bye_key("site/a0py", me)) == me
    for bad in ("site/a0py/bridge-bye/xyz", f"site/a0py/bridge-bye/{me}0", f"other/bridge-bye/{me}",
                f"site/a0py/bridge-bye/{me.upper()}"):
        with pytest.raises(WireError):
            peer_of_bye_key("site/a0py", bad)


def _veth_in(ns):
    """The name of the one veth end in network namespace `ns` (``ip -o link``: "N: NAME@PEER: ...")."""
    out = subprocess.run(["ip", "-n", ns, "-o", "link", "show", "type", "veth"], capture_output=True,
                         text=True, check=True, timeout=20).stdout
    (line,) = out.splitlines()
    return line.split(":")[1].strip().split("@")[0]


LEASE_S = 1.0     # the link-down test's lease (the default is 10 s)
DETECT_S = 4.0    # a cut link is reported gone within LEASE_S and this much more


def test_a_link_down_is_reported_within_the_lease_on_both_sides_and_traffic_resumes_when_it_is_up(
        two_namespaces, machines):
    ns_a, addr_a, ns_b, _ = two_namespaces
    a, b = machines(2)  # roots of their own in the shared /dev/shm: the test reads both statuses
    dev_b = _veth_in(ns_b)
    procs = []

    def bridge_in(ns, root, *args):
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "a0py", "bridge", "--status-interval", "0.2",
             "--lease", str(LEASE_S), *args, "robot/**"],
            env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO), cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    try:
        bridge_in(ns_a, a, "--listen", f"tcp/{addr_a}:7447")
        bridge_in(ns_b, b, "--connect", f"tcp/{addr_a}:7447")
        link(a, [b], "robot/probe")
        for here, there in ((a, b), (b, a)):
            wait_status(here, lambda s, t=there: (p := peer_of(s, t)) and p["state"] == "up", "peer up")
        with Publisher(Topic("robot/local", root=a)) as pub:
            pub.pub(b"before")
        _ip("-n", ns_b, "link", "set", dev_b, "down")
        down = time.time_ns()
        # meanwhile each side keeps working locally, and its bridge keeps reading its rings
        with Publisher(Topic("robot/local", root=a)) as pub:
            for i in range(200):
                pub.pub(b"during %d" % i)
                time.sleep(0.005)
        for here, there in ((a, b), (b, a)):
            gone = wait_status(here, lambda s, t=there: peer_of(s, t)["state"] == "gone",
                               f"{here}: the peer on {there} reported gone")
            # when the bridge saw it (its own clock), not when this test looked: the lease,
            # not Zenoh's default 10 s, decided it
            late = (peer_of(gone, there)["since"] - down) / 1e9
            assert 0 <= late <= LEASE_S + DETECT_S, f"{here} reported its peer gone {late:.1f} s after the cut"
        assert [p.payload for p in drain(a, "robot/local")] == \
            [b"before"] + [b"during %d" % i for i in range(200)]
        status_a = wait_status(a, lambda s: s["topics"].get("robot/local", {}).get("exported", 0) >= 1,
                               "robot/local exported")
        assert status_a["topics"]["robot/local"]["missed_local"] == 0
        _ip("-n", ns_b, "link", "set", dev_b, "up")
        for here, there in ((a, b), (b, a)):
            wait_status(here, lambda s, t=there: peer_of(s, t)["state"] == "up",
                        f"{here}: the peer on {there} reported back", timeout=30)
        link(a, [b], "robot/probe_after")
        wait_events(a, ["gone", "back"])
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate(timeout=10)


def test_peer_token_keys_round_trip_and_made_up_ones_are_refused():
    from a0py.bridge.errors import WireError
    from a0py.bridge.wire import peer_of_token_key, peer_token_key

    me = uuid.uuid4().hex
    key = peer_token_key("site/a0py", me, "robot-1.lan", "shm:a0py", 4242)
    assert key.startswith(f"site/a0py/bridge-peer/{me}/")
    assert peer_of_token_key("site/a0py", key) == (me, "robot-1.lan", "shm:a0py", 4242)
    for bad in (f"site/a0py/bridge-peer/{me}", f"site/a0py/bridge-peer/{me}/!!!",
                f"site/a0py/bridge-peer/xyz/{key.rsplit('/', 1)[1]}", f"other/bridge-peer/{me}/e30",
                f"site/a0py/bridge-peer/{me}/" + "WzEsMiwzXQ",  # [1,2,3]: not [host, root, pid]
                f"site/a0py/bridge-peer/{me}/" + "A" * 2000):
        with pytest.raises(WireError):
            peer_of_token_key("site/a0py", bad)


def test_a_made_up_peer_token_is_a_bad_sample_and_lists_no_peer(machines, bridges):
    (b,) = machines(1)
    port = free_port()
    bb = bridges(b, ["robot/**"], "--listen", endpoint(port))
    with _session(port) as s:
        token = s.liveliness().declare_token(f"a0py/bridge-peer/{uuid.uuid4().hex}/bm90IGpzb24")
        try:
            wait_status(b, lambda st: st["bad_samples"] == 1, "the bad token counted")
        finally:
            token.undeclare()
    status = bb.stop()
    # its declaration, and its withdrawal if that came before the stop
    assert status["peers"] == [] and status["bad_samples"] in (1, 2)


# --- bundle mode: one wake-up's batches of every topic in one sample

MANY_TOPICS = """
import sys
from a0py import Publisher, Topic
n, topics, big_at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
pubs = [Publisher(Topic(f"robot/t{k}", size="16M")) for k in range(topics)]
for i in range(n):
    for k, pub in enumerate(pubs):
        # one packet larger than a bundle holds: it goes in a bundle of its own
        payload = b"B" * 100_000 if (k == 0 and i == big_at) else f"{k}-{i}".encode()
        pub.pub(payload, headers=[("i", str(i))])
"""


def test_a_bundling_bridge_carries_20_topics_in_order_nothing_lost_or_duplicated(machines, bridges):
    a, b = machines(2)
    port = free_port()
    # reliable: 2,000 packets in a burst on a loaded machine; under the drop policy Zenoh may
    # drop bundles (each then counted as lost on its topics), which is not what this pins
    ba = bridges(a, ["robot/**"], "--listen", endpoint(port), "--bundle", "--linger", "0.0005", "--reliable")
    bb = bridges(b, ["robot/**"], "--connect", endpoint(port), "--reliable")  # importer in the default mode
    link(a, [b], "robot/probe")
    samples = []  # (key, payload size): what goes over Zenoh, seen by a session of the test's own
    with _session(port) as s, Publisher(Topic("robot/probe", root=a)) as probe:
        s.declare_subscriber("a0py/**", lambda sample: samples.append(
            (str(sample.key_expr), len(sample.payload.to_bytes()))))

        def probed():  # A's bridge sends to the test's subscriber: it knows of it
            probe.pub(b"probe")
            return samples

        wait_until(probed, "A's bridge to send to the test's subscriber", timeout=LINK_S, every=0.1)
        n, topics = 100, 20
        subprocess.run([sys.executable, "-c", MANY_TOPICS, str(n), str(topics), "50"], check=True, timeout=60,
                       env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
        got = {k: wait_for(b, f"robot/t{k}", n) for k in range(topics)}
        settle(a, [b], *(f"robot/t{k}" for k in range(topics)))  # nothing more is on its way
    for k in range(topics):
        packets = unmarked(drain(b, f"robot/t{k}"))
        sent = unmarked(drain(a, f"robot/t{k}"))
        assert [p.id for p in packets] == [p.id for p in sent], k  # all, once, in order
        assert [p.headers[SEQ] for p in packets] == [str(i + 1) for i in range(n)]
        assert all(p.headers[ORIGIN] == ba.id for p in packets)
        assert got[k][0].payload == f"{k}-0".encode()
    assert got[0][50].payload == b"B" * 100_000
    # every packet went in bundles, the big one too (in a bundle of its own, in order with
    # the others: one key)
    assert any(key == f"a0py/bundle/{ba.id}" and size > 100_000 for key, size in samples)
    assert not [key for key, _ in samples if key.startswith("a0py/pubsub/")]
    sa, sb = ba.stop(), bb.stop()
    for k in range(topics):
        assert sa["topics"][f"robot/t{k}"]["exported"] == n + 1  # and the marker
        counts = sb["topics"][f"robot/t{k}"]
        assert (counts["imported"], counts["lost"], counts["duplicates"], counts["corrupt"]) == (n + 1, 0, 0, 0)
    assert sb["bad_samples"] == 0
    assert ls_row(b, "robot/t7")[-1] == "0"


def test_an_importer_takes_only_the_bundled_topics_its_globs_match(machines, bridges):
    a, b = machines(2)
    port = free_port()
    ba = bridges(a, ["robot/**"], "--listen", endpoint(port), "--bundle", "--reliable")
    bb = bridges(b, ["robot/keep/**"], "--connect", endpoint(port), "--bundle", "--reliable")
    link(a, [b], "robot/keep/probe")
    for _ in range(3):
        # each round's two topics are read in one wake-up: they share bundles
        subprocess.run([sys.executable, "-c", """
import sys
from a0py import Publisher
with Publisher("robot/keep/x") as keep, Publisher("robot/drop/y") as drop:
    for i in range(30):
        keep.pub(str(i)); drop.pub(str(i))
"""], check=True, timeout=60, env=dict(os.environ, A0PY_ROOT=a, PYTHONPATH=REPO), cwd=REPO)
    wait_for(b, "robot/keep/x", 90)
    settle(a, [b], "robot/keep/x")  # B has taken in every bundle sent before the marker's
    assert [p.payload for p in unmarked(drain(b, "robot/keep/x"))] == [str(i).encode() for i in range(30)] * 3
    assert "robot/drop/y" not in list_topics(b)  # never created, never written
    sa, sb = ba.stop(), bb.stop()
    assert sa["topics"]["robot/drop/y"]["exported"] == 90
    assert "robot/drop/y" not in sb["topics"]  # skipped: not counted, not a loss
    assert sb["topics"]["robot/keep/x"]["imported"] == 90 + 1 and sb["topics"]["robot/keep/x"]["lost"] == 0
    assert sb["bad_samples"] == 0


def test_a_triangle_mixing_bundle_and_per_topic_bridges_never_loops_or_duplicates(machines, bridges):
    roots = machines(3)
    ports = [free_port() for _ in roots]
    # reliable: a bundle dropped under load at the end of a stream would be a loss nobody
    # counts (no later number shows the gap), not what this pins
    procs = [bridges(roots[0], ["robot/**"], "--listen", endpoint(ports[0]), "--bundle", "--reliable"),
             bridges(roots[1], ["robot/**"], "--listen", endpoint(ports[1]), "--connect", endpoint(ports[0]),
                     "--reliable"),
             bridges(roots[2], ["robot/**"], "--listen", endpoint(ports[2]), "--bundle", "--linger", "0.0005",
                     "--connect", endpoint(ports[0]), "--connect", endpoint(ports[1]), "--reliable")]
    for status in triangle_traffic(roots, procs):
        assert status["bad_samples"] == 0


def test_hostile_bundles_are_counted_and_the_bridge_goes_on(machines, bridges):
    (b,) = machines(1)
    port = free_port()
    bb = bridges(b, ["robot/**"], "--listen", endpoint(port))
    good = Packet([("k", "v")], b"real").to_bytes()
    origin = uuid.uuid4().bytes
    key = f"a0py/bundle/{uuid.UUID(bytes=origin).hex}"

    def att(sections):
        return BundleAttachment(origin, sections, "h").encode()

    with _session(port) as s:
        seq = put_until_routed(b, "robot/good", lambda n: s.put(
            key, bundle_payload([("robot/good", n, [good])]), attachment=att(1)))
        whole = bundle_payload([("robot/good", seq + 1, [good]), ("robot/other", 1, [good])])
        s.put(key, whole)                                    # no attachment
        s.put(key, whole, attachment=b"junk")                # not a bundle's
        s.put(key, whole[:-7], attachment=att(2))            # cut
        s.put(key, whole, attachment=att(3))                 # its count lies
        s.put(key, bundle_payload([("robot/good", seq + 1, [good]), ("robot/-bad", 1, [good])]),
              attachment=att(2))                             # a name that is not a topic's
        s.put(key, b"\xff" * 40, attachment=att(1))          # junk
        # one section's batch holds a packet that is not one: counted on its topic, the rest written
        s.put(key, bundle_payload([("robot/good", seq + 1, [good, b"not a packet", good])]), attachment=att(1))
        s.put(key, bundle_payload([("robot/good", seq + 4, [good])]), attachment=att(1))
        wait_until(lambda: drain(b, "robot/good")[-1].headers[SEQ] == str(seq + 4),
                   "the good bundle after the bad ones", timeout=MSG_S, every=POLL_S)
    status = bb.stop()
    assert status["bad_samples"] == 6
    assert status["topics"]["robot/good"]["corrupt"] == 1 and status["topics"]["robot/good"]["lost"] == 0
    assert "robot/other" not in status["topics"] and "robot/other" not in list_topics(b)
    got = drain(b, "robot/good")
    assert [p.headers[SEQ] for p in got[-3:]] == [str(seq + 1), str(seq + 3), str(seq + 4)]
    assert all(p.payload == b"real" for p in got)
