"""The export loop (a0py.bridge.exporting.ExportLoop) in one process: topics added while
it runs are read from then on, a removed one no more, and a topic whose batch was full
is read again before the loop sleeps. The exporters here read their rings as the
bridge's do (``_core.read_packets_into``) and count what they read instead of putting it
to Zenoh; across real bridge processes, tests/bridge/test_bridge.py."""

import threading
import time

from helpers.procs import wait_until

from a0py import Arena, Packet, _core
from a0py.bridge.exporting import ExportLoop
from a0py.bridge.wire import ORIGIN

WAIT_S = 15.0   # what the loop was woken for is read within this
PACKET = Packet([("k", "v")], b"x" * 64).to_bytes()


class CountingExporter:
    """An exporter of one heap arena whose pump reads at most `batch` packets and counts
    them (the loop's side of PubsubExporter)."""

    def __init__(self, name, batch=256):
        self.name = name
        self.arena = Arena.heap(1 << 20)
        self.closed = False
        self.batch = batch
        self.read = 0
        self.pumps = 0
        self._transport = _core.Transport(self.arena)
        self._buf = bytearray(60 * 1024)
        self._lock = threading.Lock()

    def write(self, n):
        writer = _core.Transport(self.arena)
        for _ in range(n):
            writer.write(PACKET)

    def pump(self):
        read, kept, _nbytes, more = _core.read_packets_into(self._transport, self._buf, ORIGIN,
                                                            max_frames=self.batch)
        with self._lock:
            self.read += kept
            self.pumps += 1
        return read, more


def wait_read(exporter, n):
    wait_until(lambda: exporter.read >= n, f"{exporter.name}: {n} packets read", timeout=WAIT_S,
               every=0.01, state=lambda: exporter.read)


def settle(marker):
    """Returns once the loop has taken in every change made before the call (an exporter
    added or removed, a packet written): two packets on `marker`'s ring, the second
    written after the first was read, so read in a later pass of the loop, which took
    the changes in at its start and then looked at every ring it watches (changed()
    reads their words in watch order, so one pass's look may miss a write that a later
    ring's read shows; the next pass's does not)."""
    for _ in range(2):
        n = marker.read + 1
        marker.write(1)
        wait_read(marker, n)


def test_topics_added_while_the_loop_runs_are_read_and_a_removed_one_no_more():
    loop = ExportLoop()
    first, second, third = (CountingExporter(n) for n in ("first", "second", "third"))
    try:
        loop.add(first)
        first.write(10)
        wait_read(first, 10)
        # added while the loop is busy with the first topic's packets
        writer = threading.Thread(target=first.write, args=(2000,))
        writer.start()
        loop.add(second)
        second.write(5)
        loop.add(third)
        third.write(7)
        writer.join()
        wait_read(first, 2010)
        wait_read(second, 5)
        wait_read(third, 7)
        loop.remove(second)
        settle(third)  # the loop has taken the removal in
        second.write(3)
        settle(third)  # and would have read second's packets, were it still watched
        assert second.read == 5
        assert first.read == 2010
    finally:
        loop.close()


def test_a_full_batch_is_read_again_before_the_loop_sleeps():
    # 40 packets, 16 a pump: one wake-up, then pumps until the ring is read out
    loop = ExportLoop()
    exporter = CountingExporter("batched", batch=16)
    try:
        exporter.write(40)
        loop.add(exporter)
        wait_read(exporter, 40)
        assert exporter.pumps >= 3
    finally:
        loop.close()


def test_with_a_linger_a_steady_stream_is_read_by_the_timer_not_by_a_wake_up_per_burst():
    # Packets every millisecond and a 2 ms linger: once packets flow, the loop sleeps
    # the linger and reads what came, instead of sleeping on the futex, being woken by
    # the next packet and then sleeping the linger (two wake-ups per burst, about 150
    # futex wake-ups here). Only a linger that finds nothing sends it back to the futex.
    loop = ExportLoop(linger=0.002)
    topic = CountingExporter("steady")
    n = 300
    try:
        loop.add(topic)
        writer = _core.Transport(topic.arena)
        writer.write(PACKET)
        wait_read(topic, 1)  # the loop watches the ring; the wake-up that read the packet is counted
        woken = loop.wakeups
        for _ in range(n):
            writer.write(PACKET)
            time.sleep(0.001)  # the steady stream under test
        wait_read(topic, 1 + n)
        assert loop.wakeups - woken < n // 10, (loop.wakeups - woken, topic.pumps)
    finally:
        loop.close()
        topic.arena.close()
