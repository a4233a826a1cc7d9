"""POSIX message queues (posix_ipc): send → receive."""

from .harness import Peer, Unsupported, unique

MAX_MESSAGES = 10      # the kernel's default limits for an unprivileged user
MAX_MESSAGE = 8192


class PosixMq(Peer):
    """One POSIX message queue per receiver, through posix_ipc, at the
    kernel's default limits (10 messages of 8 KiB). Lossless."""

    key = "posix-mq"
    label = "POSIX mq (posix_ipc)"
    notes = "one queue per receiver (at most 10 messages of 8 KiB here); `send` → `receive`"
    needs = (("posix_ipc", "posix_ipc not installed ({e})"),)

    def check(self, size, n_rx):
        super().check(size, n_rx)
        if size > MAX_MESSAGE:
            raise Unsupported("POSIX message queues here carry at most 8 KiB a message")

    def setup(self, size, n_rx, buffer, pingpong=False):
        import posix_ipc

        state = super().setup(size, n_rx, buffer, pingpong)
        state["names"] = ["/" + unique(f"a0bench-mq{i}") for i in range(n_rx)]
        for name in state["names"]:
            posix_ipc.MessageQueue(name, posix_ipc.O_CREX, max_messages=MAX_MESSAGES,
                                   max_message_size=MAX_MESSAGE).close()
        return state

    def sender(self, state):
        import posix_ipc

        queues = [posix_ipc.MessageQueue(n) for n in state["names"]]
        sends = [q.send for q in queues]

        def close():
            for q in queues:
                q.close()
        if len(sends) == 1:
            return sends[0], close

        def send(msg):
            for s in sends:
                s(msg)
        return send, close

    def receiver(self, state, index):
        import posix_ipc

        q = posix_ipc.MessageQueue(state["names"][index])
        receive = q.receive

        def recv():
            return receive()[0]
        return recv, q.close

    def teardown(self, state):
        import posix_ipc

        for name in state["names"]:
            try:
                posix_ipc.unlink_message_queue(name)
            except posix_ipc.ExistentialError:
                pass
