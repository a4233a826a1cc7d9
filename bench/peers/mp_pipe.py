"""multiprocessing.Pipe: send_bytes → recv_bytes."""

from .harness import FORK, Peer


class MpPipe(Peer):
    """One multiprocessing.Pipe(duplex=False) per receiver (a socketpair);
    send_bytes, recv_bytes. Lossless: the sender blocks when a pipe is full."""

    key = "mp-pipe"
    label = "multiprocessing.Pipe"
    notes = "one `Pipe(duplex=False)` per receiver; `send_bytes` → `recv_bytes`"

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state["pipes"] = [FORK.Pipe(duplex=False) for _ in range(n_rx)]
        return state

    def sender(self, state):
        sends = [w.send_bytes for _, w in state["pipes"]]
        if len(sends) == 1:
            return sends[0], lambda: None

        def send(msg):
            for s in sends:
                s(msg)
        return send, lambda: None

    def receiver(self, state, index):
        return state["pipes"][index][0].recv_bytes, lambda: None

    def teardown(self, state):
        for r, w in state["pipes"]:
            r.close()
            w.close()
