"""AlephZero 0.3.17's Python binding: Publisher → SubscriberSync."""

import os

from .harness import Peer, unique, unlink_quietly


class AlephZero(Peer):
    """AlephZero 0.3.17, as its users write it: Publisher → SubscriberSync
    (INIT_OLDEST, ITER_NEXT).read_blocking on one topic whose file is
    created at the run's buffer size (zero-copy: ReaderSyncZeroCopy on the
    topic's file, reading FlatPacket.payload_view under its lock). Its
    packets carry AlephZero's standard headers. Lossy: the writer
    overwrites the oldest packets."""

    key = "alephzero"
    label = "AlephZero 0.3.17"
    lossy = True
    zero_copy = "ReaderSyncZeroCopy + FlatPacket.payload_view"
    notes = ("one topic of {buffer}; `Publisher.pub(Packet(bytes))` → "
             "`SubscriberSync(INIT_OLDEST, ITER_NEXT).read_blocking().payload` "
             "(zero-copy: `ReaderSyncZeroCopy.read_blocking(fn)` on the topic's file)")
    needs = (("a0", "alephzero not installed ({e}); `pip install alephzero` builds it in ~1 min"),)

    @staticmethod
    def _topic(state):
        import a0

        opts = a0.File.Options()
        opts.create_options.size = state["buffer"]
        opts.create_options.mode = a0.File.Options.DEFAULT.create_options.mode
        opts.create_options.dir_mode = a0.File.Options.DEFAULT.create_options.dir_mode
        return a0.PubSubTopic(state["topic"], opts), opts

    def setup(self, size, n_rx, buffer, pingpong=False):
        import a0

        state = super().setup(size, n_rx, buffer, pingpong)
        state.update(topic=unique("a0bench_stream"), root=os.environ.get("A0_ROOT", "/dev/shm/alephzero"))
        state["path"] = os.path.join(state["root"], f"{state['topic']}.pubsub.a0")
        _, opts = self._topic(state)
        a0.File(state["path"], opts)  # created here, at its size, before either side opens it
        return state

    def sender(self, state):
        import a0

        pub = a0.Publisher(self._topic(state)[0])
        publish, packet = pub.pub, a0.Packet

        def send(msg):
            publish(packet(bytes(msg)))
        return send, lambda: None

    def receiver(self, state, index):
        import a0

        sub = a0.SubscriberSync(self._topic(state)[0], a0.INIT_OLDEST, a0.ITER_NEXT)
        read = sub.read_blocking

        def recv():
            return read().payload
        return recv, lambda: None

    def zero_copy_receiver(self, state, index, peek):
        import a0

        reader = a0.ReaderSyncZeroCopy(a0.File(state["path"]).arena, a0.INIT_OLDEST, a0.ITER_NEXT)
        got = [None]

        def take(_tlk, fpkt):
            got[0] = peek(fpkt.payload_view)
        read = reader.read_blocking

        def recv():
            read(take)
            return got[0]
        return recv, lambda: None

    def teardown(self, state):
        unlink_quietly(state["path"])
        try:
            os.rmdir(state["root"])  # only if empty: other AlephZero users' topics stay
        except OSError:
            pass
