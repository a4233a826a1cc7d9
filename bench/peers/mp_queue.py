"""multiprocessing.Queue: put → get."""

from .harness import FORK, Peer


class MpQueue(Peer):
    """One multiprocessing.Queue per receiver, bounded to the run's buffer
    (a pipe, a feeder thread that pickles, a lock). Lossless: put blocks
    when the queue is full."""

    key = "mp-queue"
    label = "multiprocessing.Queue"
    notes = "one `Queue(maxsize={buffer} / size)` per receiver; `put(bytes)` → `get()`"

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        cap = max(2, buffer // n_rx // size)
        state["queues"] = [FORK.Queue(cap) for _ in range(n_rx)]
        return state

    def sender(self, state):
        puts = [q.put for q in state["queues"]]

        def send(msg):
            msg = bytes(msg)  # put() pickles later, in its feeder thread
            for put in puts:
                put(msg)

        def close():
            for q in state["queues"]:
                q.close()
                q.join_thread()
        return send, close

    def receiver(self, state, index):
        return state["queues"][index].get, lambda: None

    def teardown(self, state):
        for q in state["queues"]:
            q.close()
