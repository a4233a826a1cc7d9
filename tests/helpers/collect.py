"""A callback for subscribers and listeners in tests: it keeps what it is given."""

import threading


class Collector:
    """A callback that records packets and sets ``done`` at a given payload (``until``)."""

    def __init__(self, until=None):
        self.pkts = []
        self.until = until
        self.done = threading.Event()

    def __call__(self, pkt):
        self.pkts.append(pkt)
        if pkt.payload == self.until:
            self.done.set()

    def payloads(self):
        return [p.payload.decode() for p in self.pkts]
