"""os.pipe: os.write → os.read."""

import functools
import os

from .harness import Peer


class OsPipe(Peer):
    """One os.pipe() per receiver; os.write, os.read of exactly one message
    (looping when a read returns part of it). Lossless."""

    key = "os-pipe"
    label = "os.pipe"
    notes = "one `os.pipe()` per receiver; `os.write` → `os.read` (looping until a whole message)"

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state["fds"] = [os.pipe() for _ in range(n_rx)]
        return state

    def sender(self, state):
        fds = [w for _, w in state["fds"]]
        write = os.write
        if len(fds) == 1:
            return functools.partial(write, fds[0]), lambda: None  # blocking: writes all of it

        def send(msg):
            for fd in fds:
                write(fd, msg)  # a blocking pipe: writes all of it
        return send, lambda: None

    def receiver(self, state, index):
        fd, size = state["fds"][index][0], state["size"]
        read = os.read

        def recv():
            data = read(fd, size)
            if len(data) < size:
                parts = [data]
                got = len(data)
                while got < size:
                    part = read(fd, size - got)
                    if not part:
                        raise EOFError("os.pipe: writer closed mid-message")
                    parts.append(part)
                    got += len(part)
                data = b"".join(parts)
            return data
        return recv, lambda: None

    def teardown(self, state):
        for r, w in state["fds"]:
            os.close(r)
            os.close(w)
