"""a0py pub/sub: Publisher → SubscriberSync, and Publisher → Subscriber(callback)."""

import os
import threading

from .harness import SEQ, Missing, Peer, Tally, Unsupported, unique


class A0pyPubSub(Peer):
    """a0py.Publisher → SubscriberSync.read_blocking on one topic of the
    run's buffer, in a shared-memory root of its own (`shm:a0bench-...`), so
    a run never touches the user's topics and removing the run's names is
    removing that prefix."""

    key = "a0py-pubsub"
    label = "a0py Publisher → SubscriberSync"
    lossy = True
    notes = ("one topic of {buffer} (its own `shm:` root); `Publisher.pub` → "
             "`SubscriberSync(init=INIT_OLDEST, iter=ITER_NEXT).read_blocking().payload`")

    def check(self, size, n_rx):
        try:
            import a0py
        except ImportError as e:
            raise Missing(f"a0py not built ({e})") from None
        for name in ("Publisher", "SubscriberSync", "Subscriber", "Topic", "INIT_OLDEST", "ITER_NEXT"):
            try:
                getattr(a0py, name)
            except (AttributeError, ImportError):
                raise Missing(f"a0py.{name} not in this a0py build (pub/sub)") from None

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state.update(prefix=unique("a0bench-ps"), topic="bench")
        return state

    @staticmethod
    def _topic(state):
        import a0py

        return a0py, a0py.Topic(state["topic"], root=f"shm:{state['prefix']}", size=state["buffer"])

    @staticmethod
    def _release(topic):
        """Drops the process's cached mapping of the topic."""
        from a0py.proto import topic as topics

        topics.forget_arena(topic, "pubsub")

    def sender(self, state):
        a0py, topic = self._topic(state)
        pub = a0py.Publisher(topic)

        def close():
            pub.close()
            self._release(topic)
        return pub.pub, close

    def receiver(self, state, index):
        a0py, topic = self._topic(state)
        sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST, iter=a0py.ITER_NEXT)
        read = sub.read_blocking

        def recv():
            return read().payload

        def close():
            missed = sub.missed
            sub.close()
            self._release(topic)
            return {"missed": missed}
        return recv, close

    def teardown(self, state):
        for f in os.listdir("/dev/shm"):
            if f.startswith(state["prefix"] + "."):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except FileNotFoundError:
                    pass


class A0pyCallback(A0pyPubSub):
    """a0py.Publisher → Subscriber(callback): the callback runs on the
    process's dispatcher thread; the receiver's main thread waits for the
    end marker. No pull-style receiver, so no ping-pong."""

    key = "a0py-callback"
    label = "a0py Publisher → Subscriber(callback)"
    pull = False
    notes = ("as a0py pub/sub, received by `Subscriber(topic, callback, init=INIT_OLDEST, "
             "iter=ITER_NEXT)`")

    def receive(self, state, index, zero_copy, opened, ack):
        a0py, topic = self._topic(state)
        unpack_from = SEQ.unpack_from
        stopped = threading.Event()
        tally = Tally(ack)

        def callback(pkt):
            if tally.add(unpack_from(pkt.payload)[0]):
                stopped.set()

        sub = a0py.Subscriber(topic, callback, init=a0py.INIT_OLDEST, iter=a0py.ITER_NEXT)
        try:
            opened()
            while not stopped.wait(1.0):
                pass
        finally:
            missed = sub.missed
            sub.close()
            self._release(topic)
        return {"count": tally.count, "disorder": tally.disorder, "t_stop": tally.t_stop,
                "missed": missed}

    def receiver(self, state, index):
        raise Unsupported(f"{self.label} delivers to a callback: no pull-style receiver")
