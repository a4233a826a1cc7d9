"""pyzmq over ipc://: PUSH → PULL, or PUB → SUB for a fan-out."""

from .harness import Peer, unique, unlink_quietly


class Pyzmq(Peer):
    """pyzmq over ipc:// (a unix socket plus zmq's I/O thread in each
    process): PUSH → PULL for one receiver (blocking, lossless), PUB → SUB
    for a fan-out (drops past the high-water mark). Default high-water
    marks. Each process makes its own context, after any fork."""

    key = "pyzmq"
    label = "pyzmq ipc"
    lossy = True
    zero_copy = "recv(copy=False) Frame.buffer"
    notes = ("ipc://, PUSH → PULL for one receiver, PUB → SUB for a fan-out, default "
             "high-water marks; `send(copy=True)` → `recv()` (zero-copy: `recv(copy=False)`)")
    needs = (("zmq", "pyzmq not installed ({e})"),)

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state["path"] = f"/tmp/{unique('a0bench')}.ipc"
        return state

    def drops(self, state):
        return state["n_rx"] > 1  # PUSH blocks (and keeps every message); PUB drops

    def sender(self, state):
        import zmq

        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH if state["n_rx"] == 1 else zmq.PUB)
        s.bind(f"ipc://{state['path']}")

        def close():
            s.close(linger=1000)
            ctx.term()
        return s.send, close  # copy=True, its default: the message is copied at once

    def _socket(self, state):
        import zmq

        ctx = zmq.Context()
        if state["n_rx"] == 1:
            s = ctx.socket(zmq.PULL)
        else:
            s = ctx.socket(zmq.SUB)
            s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(f"ipc://{state['path']}")

        def close():
            s.close(linger=0)
            ctx.term()
        return s, close

    def receiver(self, state, index):
        s, close = self._socket(state)
        return s.recv, close

    def zero_copy_receiver(self, state, index, peek):
        s, close = self._socket(state)
        get = s.recv

        def recv():
            return peek(get(copy=False).buffer)
        return recv, close

    def teardown(self, state):
        unlink_quietly(state["path"])
