"""faster-fifo: Queue.put → Queue.get."""

from .harness import JOIN_S, Peer


class FasterFifo(Peer):
    """One faster_fifo.Queue per receiver (a ring in shared memory guarded
    by pthread mutex and condition variables; messages pickled), of the
    run's buffer split among the receivers. Lossless."""

    key = "faster-fifo"
    label = "faster-fifo"
    notes = "one `Queue(max_size_bytes={buffer} / receivers)` per receiver; `put` → `get`"
    needs = (("faster_fifo", "faster-fifo not installed ({e})"),)

    def setup(self, size, n_rx, buffer, pingpong=False):
        import faster_fifo

        state = super().setup(size, n_rx, buffer, pingpong)
        cap = max(4 * (size + 64), buffer // n_rx)
        state["queues"] = [faster_fifo.Queue(max_size_bytes=cap) for _ in range(n_rx)]
        return state

    def sender(self, state):
        puts = [q.put for q in state["queues"]]

        def send(msg):
            for put in puts:
                put(msg, timeout=JOIN_S)  # pickles now: msg may change after
        return send, lambda: None

    def receiver(self, state, index):
        get = state["queues"][index].get

        def recv():
            return get(timeout=JOIN_S)
        return recv, lambda: None

    def teardown(self, state):
        for q in state["queues"]:
            q.close()
