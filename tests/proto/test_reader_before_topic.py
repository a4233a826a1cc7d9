"""Readers started before their topic exists start at the topic's first
packet: ``a0py echo``, ``log`` and ``hz`` (which wait for a topic without
creating it) and the library's subscribers, each in a process of its own,
with publishers and loggers in others. Every packet must arrive; nothing is
timed but the bound on each test."""

import os
import re

import pytest
from helpers.cli import Running, a0, python
from helpers.procs import REPO

import a0py

WAIT_S = "20"  # --timeout of the commands: a bound, never reached when the code is right

# Publishes argv[2] packets "0", "1", ... to topic argv[1] as fast as it can,
# right after creating the topic, then exits.
BURST = """
import sys, a0py
with a0py.Publisher(sys.argv[1]) as pub:
    for i in range(int(sys.argv[2])):
        pub.pub(str(i))
"""


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch):
    """Commands and children import this checkout's a0py."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))


def _waiting(proc):
    """Reads the command's first stderr line: it waits for the topic."""
    line = proc.stderr_line()
    assert "does not exist yet" in line, line


def test_echo_started_before_its_topic_prints_its_first_packets(root):
    with Running.a0py("echo", "firstpkt", "-n", "2", "--timeout", WAIT_S) as echo:
        _waiting(echo)
        assert a0("pub", "firstpkt", "one").returncode == 0
        assert a0("pub", "firstpkt", "two").returncode == 0
        status, out, err = echo.finish()
    assert (status, out) == (0, "one\ntwo\n"), err
    assert "missed" not in err


def test_echo_started_before_its_topic_prints_a_whole_burst_in_order(root):
    with Running.a0py("echo", "burst", "-n", "100", "--timeout", WAIT_S) as echo:
        _waiting(echo)
        with python(BURST, "burst", "100") as publisher:
            assert publisher.wait() == 0
        status, out, err = echo.finish()
    assert status == 0, err
    assert out.splitlines() == [str(i) for i in range(100)]
    assert "missed" not in err


def test_echo_of_a_new_topic_prints_or_reports_as_missed_every_packet(root, monkeypatch):
    # A 64 KiB topic and 400-byte packets: the publisher laps the ring many
    # times over, mostly before echo (which looks for the topic every few ms)
    # has opened it. Whatever echo did not print, it must say it missed.
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    with Running.a0py("echo", "tiny", "--timeout", "3") as echo:
        _waiting(echo)
        with python("""
            import sys, a0py
            with a0py.Publisher(sys.argv[1]) as pub:
                for i in range(2000):
                    pub.pub(f"{i:04d}" * 100)
            """, "tiny") as publisher:
            assert publisher.wait() == 0
        status, out, err = echo.finish()
    assert status == 0, err
    printed = [int(line[:4]) for line in out.splitlines()]
    assert printed == sorted(set(printed)) and printed[-1] == 1999
    missed = sum(int(n) for n in re.findall(r"(\d+) packets missed before seq", err))
    assert len(printed) + missed == 2000, err


def test_log_started_before_the_program_prints_its_first_burst(root):
    with Running.a0py("log", "robot", "-n", "5", "--timeout", WAIT_S) as log:
        _waiting(log)
        with python("""
            import sys, a0py
            log = a0py.Logger(sys.argv[1])
            for i in range(5):
                log.warn(f"starting {i}")
            """, "robot") as program:
            assert program.wait() == 0
        status, out, err = log.finish()
    assert status == 0, err
    assert [line.split(" WARN ", 1)[1] for line in out.splitlines()] == [f"starting {i}" for i in range(5)]


def test_hz_counts_a_topic_that_appears_from_its_first_packet(root):
    windows = []
    with Running.a0py("hz", "late") as hz:
        _waiting(hz)
        with python(BURST, "late", "50") as publisher:
            assert publisher.wait() == 0
        # One line a second: "waiting for the topic...", then the window of
        # packets seen, which reaches 50 once the whole burst is in.
        for _ in range(15):
            found = re.search(r"window (\d+)", hz.readline())
            if found:
                windows.append(int(found.group(1)))
                if windows[-1] >= 50:
                    break
        status, _, err = hz.interrupt()
    assert status == 0, err
    assert windows and windows[-1] == 50, (windows, err)


# A subscriber of topic argv[1] made before the topic exists (it creates it),
# which says "ready" and then prints the argv[2] payloads it reads and its
# missed count. argv[3]: "sync" (SubscriberSync) or "callback" (Subscriber).
SUBSCRIBER = """
import sys, threading, a0py
topic, n, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
got = []
if kind == "sync":
    sub = a0py.SubscriberSync(topic)
    print("ready", flush=True)
    for _ in range(n):
        got.append(sub.read_blocking(timeout=20).payload.decode())
else:
    done = threading.Event()
    def take(pkt):
        got.append(pkt.payload.decode())
        if len(got) == n:
            done.set()
    sub = a0py.Subscriber(topic, take)
    print("ready", flush=True)
    assert done.wait(20), got
print(" ".join(got), sub.missed, flush=True)
"""


@pytest.mark.parametrize("kind", ["sync", "callback"])
def test_a_subscriber_made_before_its_topic_gets_every_packet_from_the_first(root, kind):
    with python(SUBSCRIBER, "early", "30", kind) as subscriber:
        assert subscriber.readline() == "ready\n"
        with python(BURST, "early", "30") as publisher:
            assert publisher.wait() == 0
        status, out, err = subscriber.finish()
    assert status == 0, err
    assert out == " ".join(str(i) for i in range(30)) + " 0\n"


def test_a_subscriber_made_on_an_existing_topic_starts_where_init_says(root):
    with python(BURST, "old", "3") as publisher:
        assert publisher.wait() == 0
    with a0py.SubscriberSync("old") as sub:  # INIT_AWAIT_NEW: not the three already there
        assert sub.read() is None
        a0py.Publisher("old").pub("new")
        assert sub.read_blocking(timeout=20).payload == b"new"


def test_init_first_reads_from_seq_1_and_counts_what_was_evicted_as_missed(root, monkeypatch):
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    with python("""
        import sys, a0py
        with a0py.Publisher(sys.argv[1]) as pub:
            for i in range(500):
                pub.pub(b"x" * 1000)
        """, "lapped") as publisher:
        assert publisher.wait() == 0
    with a0py.SubscriberSync("lapped", init=a0py.INIT_OLDEST) as oldest:
        first_kept = oldest.read().seq
        assert oldest.missed == 0  # INIT_OLDEST asks for what is there
    assert first_kept > 1
    with a0py.SubscriberSync("lapped", init=a0py.INIT_FIRST) as sub:
        pkt = sub.read()
        assert (pkt.seq, pkt.missed, sub.missed) == (first_kept, first_kept - 1, first_kept - 1)
        seqs = [pkt.seq] + [p.seq for p in iter(sub.read, None)]
    assert seqs == list(range(first_kept, 501))


def test_init_first_on_a_topic_not_yet_lapped_reads_every_packet(root):
    with python(BURST, "kept", "10") as publisher:
        assert publisher.wait() == 0
    with a0py.SubscriberSync("kept", init=a0py.INIT_FIRST) as sub:
        got = [p.payload.decode() for p in iter(sub.read, None)]
        assert sub.missed == 0
    assert got == [str(i) for i in range(10)]
