"""eclipse-zenoh 1.10 pub/sub between peer-mode sessions over unix sockets."""

import fcntl
import os
import time
import uuid

from .harness import JOIN_S, Peer, unique, unlink_quietly

KEY = "a0bench"


def _config(zenoh, endpoints, listen, lowlatency):
    """Peer mode on unix sockets, no scouting, listening on (or connecting
    to) `endpoints`. lowlatency: the lowlatency unicast transport (which
    requires QoS off), as zenoh's configuration docs advise for latency;
    otherwise zenoh's default (batching) transport."""
    listed = "[" + ", ".join(f'"{e}"' for e in endpoints) + "]"
    conf = zenoh.Config()
    settings = [("mode", '"peer"'), ("scouting/multicast/enabled", "false"),
                ("scouting/gossip/enabled", "false"),
                ("listen/endpoints", listed if listen else "[]"),
                ("connect/endpoints", "[]" if listen else listed)]
    if lowlatency:
        settings += [("transport/unicast/lowlatency", "true"), ("transport/unicast/qos/enabled", "false")]
    for key, value in settings:
        conf.insert_json5(key, value)
    return conf


def _sweep(before):
    """zenoh 1.10 leaves its /dev/shm segments behind even on a clean exit
    (a receiver keeps the sender's segments mapped and locked until it
    exits, and nobody unlinks them afterwards). Unlinks those a run created
    that no live process holds: zenoh's own test for a dangling segment is
    that an exclusive flock on it succeeds."""
    for f in os.listdir("/dev/shm"):
        if not f.endswith(".zenoh") or f in before:
            continue
        path = os.path.join("/dev/shm", f)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
        except OSError:
            pass  # held by a live process, not ours to remove
        finally:
            os.close(fd)


class Zenoh(Peer):
    """eclipse-zenoh pub/sub: each receiver is a peer-mode session listening
    on its own unix socket (unixsock-stream), the sender a session
    connected to all of them; scouting off, CongestionControl.BLOCK,
    blocking Subscriber.recv(). Streams use zenoh's default transport
    (batching on); ping-pong the lowlatency transport and an express
    publisher, as zenoh advises for latency.

    zenoh runs its sessions on tokio threads that a fork() does not carry
    over (a forked child of a process that had opened a session hangs in
    zenoh.open()), so every side runs in a spawned interpreter and leaves
    through sys.exit, whose exit handlers unlink zenoh's segments; the
    parent never opens a session."""

    key = "zenoh"
    label = "zenoh 1.10"
    spawn = True
    lossy = True
    shm = False
    notes = ("peer-mode sessions over unix sockets, default transport, "
             "`CongestionControl.BLOCK`; `put(bytes)` → `Subscriber.recv().payload.to_bytes()`")
    needs = (("zenoh", "eclipse-zenoh not installed ({e})"),)  # this process only checks it imports

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state.update(socks=[f"/tmp/{unique(f'a0bench-zenoh{i}')}.sock" for i in range(n_rx)],
                     key=f"{KEY}/{uuid.uuid4().hex[:8]}",
                     shm_before=sorted(f for f in os.listdir("/dev/shm") if f.endswith(".zenoh")))
        return state

    def sender(self, state):
        import zenoh

        session = zenoh.open(_config(zenoh, [f"unixsock-stream/{s}" for s in state["socks"]],
                                     listen=False, lowlatency=state["pingpong"]))
        pub = session.declare_publisher(state["key"], express=state["pingpong"],
                                        congestion_control=zenoh.CongestionControl.BLOCK)
        # A put before the subscriber is known here goes nowhere.
        deadline = time.monotonic() + JOIN_S
        while not pub.matching_status.matching:
            if time.monotonic() > deadline:
                raise TimeoutError("zenoh: no subscriber appeared")
            time.sleep(0.001)

        def close():
            pub.undeclare()
            session.close()
        if not self.shm:
            return pub.put, close
        provider = zenoh.shm.ShmProvider.default_backend(state["buffer"])
        alloc, policy = provider.alloc, zenoh.shm.BlockOn(zenoh.shm.GarbageCollect())
        size, put = state["size"], pub.put

        def send(msg):
            buf = alloc(size, policy=policy)
            buf[:] = msg
            put(buf)
        return send, close

    def receiver(self, state, index):
        import zenoh

        session = zenoh.open(_config(zenoh, [f"unixsock-stream/{state['socks'][index]}"],
                                     listen=True, lowlatency=state["pingpong"]))
        sub = session.declare_subscriber(state["key"])
        get = sub.recv

        def recv():
            return get().payload.to_bytes()

        def close():
            sub.undeclare()
            session.close()
        return recv, close

    def teardown(self, state):
        for s in state["socks"]:
            unlink_quietly(s)
        _sweep(set(state["shm_before"]))


class ZenohShm(Zenoh):
    """As Zenoh, each message written into a buffer from zenoh.shm's
    ShmProvider (unstable API) so only a descriptor crosses the socket."""

    key = "zenoh-shm"
    label = "zenoh 1.10 shm"
    shm = True
    notes = ("as zenoh, each message written into a `zenoh.shm.ShmProvider` buffer (a {buffer} "
             "pool; unstable API). No zero-copy receive from Python: `ZShm` exposes no buffer")
