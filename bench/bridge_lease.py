"""How soon two bridges report a link down, and how often a lossy link that is not down
is dropped anyway, for a few link leases (``a0py bridge --lease``).

    sudo python bench/bridge_lease.py                       # about 10 minutes
    sudo python bench/bridge_lease.py --leases 1,10 --losses 0.2 --seconds 30
    sudo python bench/bridge_lease.py --only fade --leases 3,10 --fades 2,5

Two network namespaces joined by a point-to-point IP link that this process relays
between two TUN devices, one in each namespace (the relay can drop packets: these
machines have neither netem nor iptables); in each namespace an ``a0py bridge`` process
(``--listen`` on one side, ``--connect`` on the other) with a root of its own.

  detect    the relay drops every packet from t0 on (a cable pulled); the time from t0
            to each bridge's report of the other as gone (the ``since`` of the peer's
            entry in its status topic). The link is restored and the peers seen up
            again between repeats.
  fade      the relay drops every packet for F seconds (a Wi-Fi fade, a roaming
            hand-over), then passes them again: whether either bridge reported its peer
            gone (the link dropped), and the time from the end of the fade to the next
            packet across (a packet every 20 ms): at once when the link rode the fade out,
            the connecting side's reconnection when it did not.
  spurious  the relay drops each IP packet, either way, with probability LOSS, for
            --seconds, on a link that carries only Zenoh's keep-alives (idle) or also a
            64 B packet every 1/--rate s across; how many times either bridge reported
            its peer gone (the ``gone`` events on its log topic). Every one is a false
            alarm, and a real outage too: Zenoh closes the link, the RPC stand-ins fail
            the calls in flight, and the link is back only when the connecting side has
            reconnected.

Needs root and ``ip``. Results print as a table; --json writes them too.
"""

import argparse
import fcntl
import json
import os
import random
import select
import struct
import subprocess
import sys
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from a0py import INIT_MOST_RECENT, INIT_OLDEST, Publisher, SubscriberSync, Topic  # noqa: E402
from a0py.bridge.counts import read_status  # noqa: E402
from a0py.proto.log import LogListener  # noqa: E402
from a0py.proto.topic import list_topics, unlink_topic  # noqa: E402

_TUNSETIFF, _IFF_TUN, _IFF_NO_PI = 0x400454CA, 0x0001, 0x1000


def _ip(*args):
    subprocess.run(["ip", *args], check=True, timeout=20, capture_output=True)


def _tun(name):
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH22x", name.encode(), _IFF_TUN | _IFF_NO_PI))
    return fd


class LossyLink:
    """Namespaces ``ns_a`` and ``ns_b`` joined by a TUN pair this process relays,
    dropping each packet with probability ``loss`` (1.0: the link is cut)."""

    def __init__(self):
        tag = uuid.uuid4().hex[:6]
        self.ns_a, self.ns_b = f"a0bl{tag}a", f"a0bl{tag}b"
        self.addr_a, self.addr_b = "10.213.0.1", "10.213.0.2"
        self.loss = 0.0
        self.dropped = self.passed = 0
        self._rng = random.Random(4242)
        _ip("netns", "add", self.ns_a)
        _ip("netns", "add", self.ns_b)
        self._fds = []
        for ns, dev, me, peer in ((self.ns_a, f"a0bl{tag}ta", self.addr_a, self.addr_b),
                                  (self.ns_b, f"a0bl{tag}tb", self.addr_b, self.addr_a)):
            self._fds.append(_tun(dev))
            _ip("link", "set", dev, "netns", ns)
            _ip("-n", ns, "addr", "add", me, "peer", peer, "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        self._closing = threading.Event()
        self._threads = [threading.Thread(target=self._relay, args=(self._fds[src], self._fds[dst]), daemon=True)
                         for src, dst in ((0, 1), (1, 0))]
        for t in self._threads:
            t.start()

    def _relay(self, src, dst):
        # select() with a timeout: the thread sees the link closing before its fds are
        # closed (their numbers would go to the next link's devices).
        while not self._closing.is_set():
            if not select.select([src], [], [], 0.1)[0]:
                continue
            try:
                packet = os.read(src, 65536)
            except OSError:
                return
            if self.loss and (self.loss >= 1.0 or self._rng.random() < self.loss):
                self.dropped += 1
                continue
            self.passed += 1
            try:
                os.write(dst, packet)
            except OSError:
                return

    def close(self):
        self._closing.set()
        for t in self._threads:
            t.join()
        for ns in (self.ns_a, self.ns_b):
            subprocess.run(["ip", "netns", "del", ns], timeout=20, capture_output=True)
        for fd in self._fds:
            os.close(fd)


class Bridges:
    """One ``a0py bridge --lease LEASE`` per namespace, roots of their own."""

    def __init__(self, link, lease):
        tag = uuid.uuid4().hex[:6]
        self.roots = (f"shm:a0bl{tag}a", f"shm:a0bl{tag}b")
        ep = f"tcp/{link.addr_a}:7447"
        self.procs = [self._start(link.ns_a, self.roots[0], lease, "--listen", ep),
                      self._start(link.ns_b, self.roots[1], lease, "--connect", ep)]

    @staticmethod
    def _start(ns, root, lease, *args):
        return subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "a0py", "bridge", "--status-interval", "3600",
             "--lease", str(lease), *args, "robot/**"],
            env=dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO), cwd=REPO,
            stdout=subprocess.DEVNULL, stderr=None if os.environ.get("BENCH_VERBOSE") else subprocess.DEVNULL)

    def peer_state(self, i):
        """(state, since ns) of the peer in bridge i's status, or None."""
        status = read_status(self.roots[i])
        peers = status["peers"] if status else []
        return (peers[0]["state"], peers[0]["since"]) if peers else None

    def wait_up(self, timeout=60):
        deadline = time.monotonic() + timeout
        while not all((s := self.peer_state(i)) and s[0] == "up" for i in (0, 1)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bridges did not see each other up within {timeout} s")
            time.sleep(0.05)

    def gone_events(self, i):
        got = []
        listener = LogListener(Topic("a0py/bridge", root=self.roots[i]), "DBG", got.append, init=INIT_OLDEST)
        time.sleep(0.5)
        listener.close()
        return sum(1 for p in got if p.headers.get("event") == "gone")

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait(10)
        for root in self.roots:
            for name in list_topics(root):
                unlink_topic(Topic(name, root=root))


def detect(lease, repeats):
    """[seconds from the cut to the report, each side, each repeat]."""
    link = LossyLink()
    bridges = Bridges(link, lease)
    out = []
    try:
        for _ in range(repeats):
            link.loss = 0.0
            bridges.wait_up()
            time.sleep(lease / 2 + 0.5 * random.random())  # a cut at any phase of the keep-alives
            t0 = time.time_ns()
            link.loss = 1.0
            seen = [None, None]
            deadline = time.monotonic() + lease * 3 + 10
            while None in seen and time.monotonic() < deadline:
                for i in (0, 1):
                    s = bridges.peer_state(i)
                    if seen[i] is None and s and s[0] == "gone":
                        seen[i] = (s[1] - t0) / 1e9
                time.sleep(0.02)
            out.extend(seen)
    finally:
        bridges.close()
        link.close()
    return out


def fade(lease, seconds):
    """(whether the link dropped, seconds from the end of the fade to the next packet across)."""
    link = LossyLink()
    bridges = Bridges(link, lease)
    try:
        bridges.wait_up()
        sent = []
        stop = threading.Event()
        topic = Topic("robot/beat", root=bridges.roots[0])

        def beat():
            with Publisher(topic) as pub:
                while not stop.is_set():
                    pub.pub(b"%d" % time.monotonic_ns())
                    sent.append(1)
                    time.sleep(0.02)

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        with SubscriberSync(Topic("robot/beat", root=bridges.roots[1]), init=INIT_MOST_RECENT) as sub:
            deadline = time.monotonic() + 30
            while sub.read() is None:  # the route is up
                if time.monotonic() > deadline:
                    raise RuntimeError("no packet across before the fade")
                time.sleep(0.02)
            link.loss = 1.0
            time.sleep(seconds)
            link.loss = 0.0
            restored = time.monotonic_ns()
            resumed = None
            deadline = time.monotonic() + 60
            while resumed is None and time.monotonic() < deadline:
                pkt = sub.read()
                if pkt is None:
                    time.sleep(0.005)
                elif int(bytes(pkt.payload)) >= restored:
                    resumed = (time.monotonic_ns() - restored) / 1e9
        stop.set()
        beater.join()
        dropped = bridges.gone_events(0) + bridges.gone_events(1) > 0
        return dropped, resumed
    finally:
        bridges.close()
        link.close()


def spurious(lease, loss, seconds, rate):
    """(gone events on both sides, packets dropped by the relay, passed)."""
    link = LossyLink()
    bridges = Bridges(link, lease)
    try:
        bridges.wait_up()
        link.loss = loss
        deadline = time.monotonic() + seconds
        with Publisher(Topic("robot/beat", root=bridges.roots[0])) as pub:
            while time.monotonic() < deadline:
                if rate:
                    pub.pub(b"x" * 64)
                    time.sleep(1 / rate)
                else:
                    time.sleep(0.2)
        link.loss = 0.0
        time.sleep(0.5)
        gone = bridges.gone_events(0) + bridges.gone_events(1)
        return gone, link.dropped, link.passed
    finally:
        bridges.close()
        link.close()


def _floats(text):
    return [float(x) for x in text.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--leases", type=_floats, default=[1, 2, 3, 10])
    ap.add_argument("--losses", type=_floats, default=[0.05, 0.1, 0.2, 0.3])
    ap.add_argument("--seconds", type=float, default=30.0, help="per (lease, loss) of the spurious runs")
    ap.add_argument("--rate", type=float, default=0.0, help="packets a second across during them (0: idle)")
    ap.add_argument("--repeats", type=int, default=3, help="cuts per lease in the detect runs")
    ap.add_argument("--fades", type=_floats, default=[0.5, 2, 4, 8], help="fade lengths, seconds")
    ap.add_argument("--only", choices=["detect", "fade", "spurious"])
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/bridge_lease.py needs root (network namespaces and TUN devices)")
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs", flush=True)
    results = {"detect": {}, "fade": {}, "spurious": {}}
    if args.only in (None, "detect"):
        print("detect: seconds from the cut to 'gone', both sides, each repeat", flush=True)
        for lease in args.leases:
            got = detect(lease, args.repeats)
            results["detect"][lease] = got
            shown = " ".join("-" if g is None else f"{g:.2f}" for g in got)
            print(f"  lease {lease:>5g} s: {shown}", flush=True)
    if args.only in (None, "fade"):
        print("fade: the link cut for F s, then back: dropped or not; seconds from its return to the "
              "next packet across", flush=True)
        for lease in args.leases:
            row = []
            for f in args.fades:
                dropped, resumed = fade(lease, f)
                results["fade"][f"{lease}/{f}"] = {"dropped": dropped, "resumed_s": resumed}
                row.append(f"{f:g} s: {'DROPPED' if dropped else 'kept'}, "
                           f"{'-' if resumed is None else f'{resumed:.2f}'}")
            print(f"  lease {lease:>5g} s: " + "; ".join(row), flush=True)
    if args.only in (None, "spurious"):
        print(f"spurious: 'gone' reports (both sides) in {args.seconds:g} s of random loss, "
              f"{'idle' if not args.rate else f'{args.rate:g} packets/s'}", flush=True)
        for lease in args.leases:
            for loss in args.losses:
                gone, dropped, passed = spurious(lease, loss, args.seconds, args.rate)
                results["spurious"][f"{lease}/{loss}"] = {"gone": gone, "dropped": dropped, "passed": passed}
                print(f"  lease {lease:>5g} s, loss {loss:>4.0%}: {gone} gone "
                      f"(relay dropped {dropped} of {dropped + passed} IP packets)", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
