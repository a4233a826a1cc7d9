"""a0py's transport: one shm arena, Transport.write → read_next."""

from .harness import Peer, unique


class A0pyTransport(Peer):
    """One shm arena of the run's buffer, shared by every receiver;
    Transport.write, read_next(timeout=None) (zero-copy: read_view). Lossy:
    the writer overwrites the oldest frames, and a receiver counts what it
    lost in Transport.missed. `spin`: Transport.spin of every receiver, None
    for the build's default (adaptive)."""

    key = "a0py"
    label = "a0py Transport"
    lossy = True
    zero_copy = "read_view"
    notes = ("one shm arena of {buffer} shared by every receiver; `Transport.write` → "
             "`read_next(timeout=None)` (zero-copy: `with read_view(timeout=None) as frame`)")
    needs = (("a0py._core", "a0py not built ({e}); run `make build`"),)

    def __init__(self, spin=None):
        self.spin = spin
        if spin is not None:
            self.label = f"a0py spin={spin}"

    def setup(self, size, n_rx, buffer, pingpong=False):
        import a0py

        state = super().setup(size, n_rx, buffer, pingpong)
        state["name"] = unique("a0bench-stream")
        a0py.Arena.shm(state["name"], buffer).close()
        return state

    def sender(self, state):
        import a0py

        tr = a0py.Transport(a0py.Arena.shm(state["name"]))
        return tr.write, tr.arena.close

    def _open(self, state):
        import a0py

        tr = a0py.Transport(a0py.Arena.shm(state["name"]))
        if self.spin is not None:
            tr.spin = self.spin

        def close():
            missed = tr.missed
            tr.arena.close()
            return {"missed": missed}
        return a0py, tr, close

    def receiver(self, state, index):
        _, tr, close = self._open(state)
        read = tr.read_next

        def recv():
            return read(None)[1]
        return recv, close

    def zero_copy_receiver(self, state, index, peek):
        a0py, tr, close = self._open(state)
        view, evicted = tr.read_view, a0py.FrameEvictedError

        def recv():
            while True:
                try:
                    with view(timeout=None) as frame:
                        return peek(frame.data)
                except evicted:
                    continue  # overwritten while read: not delivered
        return recv, close

    def teardown(self, state):
        import a0py

        a0py.Arena.unlink_shm(state["name"])
