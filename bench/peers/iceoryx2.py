"""iceoryx2 0.10 publish-subscribe, woken by its event service or polled."""

import os
import shutil
import uuid

from .harness import RUN_TAG, Peer, unique

# iceoryx2 listeners wait in cycles, as iceoryx2's own examples do
# (timed_wait in a loop, receive() after each return). Under load,
# Listener.timed_wait in 0.10 now and then returns no event well before its
# timeout; a receiver must treat that as "look again", never as a timeout
# (treating it as one failed about one ping-pong run in three here).
# Receivers count the returns without an event after which a sample was
# there ("empty_wakes").
CYCLE_MS = 100


def _space():
    """A private iceoryx2 namespace for one run: its own prefix for the
    /dev/shm segments and its own root folder (iceoryx2 keeps node and
    service records and event sockets there; /tmp/iceoryx2 by default). A
    run then never sees, or cleans up, another program's iceoryx2 state,
    and removing the run's state is removing its names. The name is short:
    the event service's unix sockets live under the root folder, and a
    socket's path has at most 107 bytes."""
    name = f"a0b-{RUN_TAG}{uuid.uuid4().hex[:8]}"
    return {"prefix": f"{name}_", "root": f"/tmp/{name}/"}


def _remove(space):
    """Removes everything of `space`: its root folder and its segments
    (also those of a process killed before it could drop its node)."""
    shutil.rmtree(space["root"], ignore_errors=True)
    for f in os.listdir("/dev/shm"):
        if f.startswith(space["prefix"]):
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except FileNotFoundError:
                pass


class Iceoryx2(Peer):
    """iceoryx2 publish-subscribe on Slice[c_uint8] samples loaned in shared
    memory, a subscriber buffer of about the run's buffer / receivers (safe
    overflow: the oldest sample is overwritten, iceoryx2's default), plus an
    event service, its documented event-based pattern: the sender notifies
    after every send, the receiver sleeps in Listener.timed_wait when it
    finds no sample. Each side is a node of its own in the run's private
    namespace, signal handling off."""

    key = "iceoryx2"
    label = "iceoryx2 0.10 (event)"
    lossy = True
    polling = False
    zero_copy = "Sample.payload_ptr, read in place"
    notes = ("publish-subscribe on loaned `Slice[c_uint8]` samples, subscriber buffer ≈ {buffer} "
             "/ receivers; the sender `notify()`s an event service after each `send()`, the "
             "receiver sleeps in `Listener.timed_wait` when `receive()` finds nothing "
             "(copy: `ctypes.string_at`; zero-copy: reads the sample in place)")
    needs = (("iceoryx2", "iceoryx2 not installed ({e})"),)

    def setup(self, size, n_rx, buffer, pingpong=False):
        state = super().setup(size, n_rx, buffer, pingpong)
        state.update(service=unique("a0bench/stream"), samples=max(2, min(4096, buffer // n_rx // size)),
                     space=_space())
        return state

    def _open(self, state):
        """(iceoryx2, side): a node with the run's publish-subscribe service
        and, unless polling, its event service. Only `side` holds them, so
        clearing it drops them (Node has no delete())."""
        import ctypes

        import iceoryx2 as iox2

        iox2.set_log_level(iox2.LogLevel.Error)
        cfg = iox2.config.default()
        cfg.global_cfg.prefix = iox2.FileName.new(state["space"]["prefix"])
        cfg.global_cfg.root_path = iox2.Path.new(state["space"]["root"])
        node = (iox2.NodeBuilder.new().config(cfg).signal_handling_mode(iox2.SignalHandlingMode.Disabled)
                .create(iox2.ServiceType.Ipc))
        name = iox2.ServiceName.new(state["service"])
        ps = (node.service_builder(name).publish_subscribe(iox2.Slice[ctypes.c_uint8])
              .max_subscribers(state["n_rx"]).subscriber_max_buffer_size(state["samples"])
              .open_or_create())
        ev = None if self.polling else node.service_builder(name).event().open_or_create()
        return iox2, {"node": node, "services": (ps, ev), "ports": []}

    @staticmethod
    def _closer(side):
        def close():
            for port in reversed(side["ports"]):
                port.delete()
            side.clear()
        return close

    def sender(self, state):
        import ctypes

        _, side = self._open(state)
        ps, ev = side["services"]
        pub = ps.publisher_builder().initial_max_slice_len(state["size"]).create()
        side["ports"].append(pub)
        notify = None
        if ev is not None:
            notifier = ev.notifier_builder().create()
            side["ports"].append(notifier)
            notify = notifier.notify
        size = state["size"]
        view_t = ctypes.c_char * size
        loan, memmove = pub.loan_slice_uninit, ctypes.memmove
        # memmove takes bytes, not a bytearray: a bytearray (the harness
        # reuses one) goes through a ctypes view of it, made once.
        last = [None, None]

        def source(msg):
            if msg is not last[0]:
                last[0], last[1] = msg, (view_t.from_buffer(msg) if isinstance(msg, bytearray) else msg)
            return last[1]

        if notify is None:
            def send(msg):
                out = loan(size)
                memmove(out.payload_ptr, source(msg), size)
                out.assume_init().send()
        else:
            def send(msg):
                out = loan(size)
                memmove(out.payload_ptr, source(msg), size)
                out.assume_init().send()
                notify()
        return send, self._closer(side)

    def _receiver(self, state, take):
        """recv() waits for a sample, returns take(its payload pointer) and
        releases the sample."""
        iox2, side = self._open(state)
        ps, ev = side["services"]
        sub = ps.subscriber_builder().buffer_size(state["samples"]).create()
        side["ports"].append(sub)
        receive = sub.receive
        close = self._closer(side)
        if ev is None:
            def recv():
                while (sample := receive()) is None:
                    pass
                got = take(sample.payload_ptr)
                sample.delete()
                return got
            return recv, close

        listener = ev.listener_builder().create()
        side["ports"].append(listener)
        wait, timed_wait = iox2.Duration.from_millis(CYCLE_MS), listener.timed_wait
        empty_wakes = [0]

        def recv():
            while (sample := receive()) is None:
                if not timed_wait(wait) and (sample := receive()) is not None:
                    empty_wakes[0] += 1  # no event, yet a sample
                    break
            got = take(sample.payload_ptr)
            sample.delete()
            return got

        def close_counting():
            close()
            return {"empty_wakes": empty_wakes[0]}
        return recv, close_counting

    def receiver(self, state, index):
        import ctypes

        size, string_at = state["size"], ctypes.string_at
        return self._receiver(state, lambda ptr: string_at(ptr, size))

    def zero_copy_receiver(self, state, index, peek):
        import ctypes

        view_t = ctypes.c_char * state["size"]
        return self._receiver(state, lambda ptr: peek(view_t.from_address(ptr)))

    def teardown(self, state):
        _remove(state["space"])


class Iceoryx2Polling(Iceoryx2):
    """As Iceoryx2, without the event service: the receiver spins on
    Subscriber.receive() (and burns a core while it waits)."""

    key = "iceoryx2-poll"
    label = "iceoryx2 0.10 (polling)"
    polling = True
    notes = ("as iceoryx2 (event) but no event service: the receiver spins on `receive()` "
             "(burns a core while it waits)")
