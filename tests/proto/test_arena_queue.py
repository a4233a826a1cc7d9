"""The backpressured queue on an arena (``a0py.proto.queue.ArenaQueue``).

Lost wake-ups are ruled out by stepping a reader and a writer by hand through every
interleaving of the queue's own steps, as ``test_transport_model.py`` drives the
transport: the reader's ``read_batch`` and ``give_back`` (the two halves of ``take``)
and the writer's attempt to ``put`` without waiting. Sleeping is modelled exactly as
the core sleeps: a writer that found no room sleeps on the arena's notify word as it
read it under the lock, so it wakes only once that word moves; a reader that found
nothing sleeps until a frame comes. A schedule that ends with both asleep and frames
still to write is a lost wake-up. The same explorer finds one in the broker's former
policy (give room back only when a writer is seen waiting), so it can see the bug it
rules out.

The rest runs the real sleeps: threads and processes, a SIGKILLed reader.
"""

import multiprocessing as mp
import os
import signal
import threading
import time
import uuid

import pytest

import a0py
from a0py import A0TimeoutError, FrameTooLargeError
from a0py._core import HEADER_SIZE
from a0py.proto import arena_cache
from a0py.proto.queue import ArenaQueue

WAIT = 20.0                    # liveness bound for waits across threads (not a speed assertion)
FRAME = 48                     # 48 + 32 bytes of frame header: spans of 80 bytes
ARENA = HEADER_SIZE + 192      # room for two such frames, never three
CTX = mp.get_context("fork")


def payload(i):
    return i.to_bytes(8, "little") * (FRAME // 8)


def heap_queue(size=ARENA):
    arena = a0py.Arena.heap(size)
    return ArenaQueue(("test-queue", uuid.uuid4().hex), lambda: arena, name="the test queue")


def discard(q):
    """Gives back the reader's deadman (a robust lock still held in freed memory would
    corrupt the thread's list of robust locks), then frees the heap arena at once
    rather than in a garbage collection."""
    q.close_reader()
    arena = arena_cache.forget(q.key)
    if arena is not None:
        arena.close()


@pytest.fixture
def queue():
    """A queue on a heap arena with room for two frames."""
    q = heap_queue()
    yield q
    discard(q)


# ---------------------------------------------------------------- every interleaving


class QueuePolicy:
    """ArenaQueue's own steps: after a batch, give room back if a writer is seen
    waiting or many frames are kept; before sleeping, give back everything read."""

    @staticmethod
    def after_batch(world):
        world.queue.give_back_if_wanted()

    @staticmethod
    def before_sleep(world):
        world.queue.give_back()


class FormerBrokerPolicy:
    """The broker's former loop: give room back after a round only when a writer is
    seen waiting (``tr.waiter_count``) at that moment; nothing before sleeping."""

    @staticmethod
    def after_batch(world):
        if world.writer == "asleep":
            world.queue.give_back()

    @staticmethod
    def before_sleep(world):
        pass


class World:
    """One queue, one reader, one writer, stepped by hand.

    Writer: ``put`` tries once without waiting; on no room it goes to sleep on the
    notify word it saw (``asleep``), and ``wake`` is enabled once the word moved.
    Reader: ``read`` copies what is there; after a batch, ``after_batch``; with nothing
    there, ``before_sleep``, then ``sleep``, which sleeps only if still nothing is there
    (checked under the lock, as the core does) until a frame comes. The steps given
    back are the policy's: the queue's own methods, or the former broker's."""

    def __init__(self, prefill, frames, policy):
        self.queue = heap_queue()
        assert self.queue.open_reader()
        assert self.queue.max_frame_size >= FRAME
        for i in range(prefill):
            assert self.queue.put(payload(i), timeout=0)
        self.expected = [payload(i) for i in range(prefill + frames)]
        self.todo = self.expected[prefill:]
        self.policy = policy
        self.writer, self.word = "ready", None
        self.reader = "idle"
        self.delivered = []
        self.woken_by_give_back = False

    def close(self):
        self.rest = [data for _seq, data in self.queue.read_batch()]
        discard(self.queue)

    def notify_word(self):
        return self.queue.reader.notify_count

    def unread(self):
        with self.queue.reader.lock() as t:
            return t.has_next()

    def enabled(self):
        actions = []
        if self.todo:
            if self.writer == "ready":
                actions.append("W:put")
            elif self.notify_word() != self.word:
                actions.append("W:wake")
        if self.reader == "idle":
            actions.append("R:read")
        elif self.reader == "read":
            actions.append("R:after_batch")
        elif self.reader == "found_nothing":
            actions.append("R:before_sleep")
        elif self.reader == "going_to_sleep":
            actions.append("R:sleep")
        elif self.unread():
            actions.append("R:wake")
        return actions

    def giving_back(self, step):
        asleep = self.writer == "asleep" and self.notify_word() == self.word
        step(self)
        if asleep and self.notify_word() != self.word:
            self.woken_by_give_back = True

    def step(self, action):
        if action == "W:put":
            try:
                assert self.queue.put(self.todo[0], timeout=0)
                self.todo.pop(0)
            except A0TimeoutError:
                # The core reads the word under the lock that found no room; nothing
                # else runs in between here.
                self.writer, self.word = "asleep", self.notify_word()
        elif action == "W:wake":
            self.writer = "ready"
        elif action == "R:read":
            batch = self.queue.read_batch()
            self.delivered += [data for _seq, data in batch]
            self.reader = "read" if batch else "found_nothing"
        elif action == "R:after_batch":
            self.giving_back(self.policy.after_batch)
            self.reader = "idle"
        elif action == "R:before_sleep":
            self.giving_back(self.policy.before_sleep)
            self.reader = "going_to_sleep"
        elif action == "R:sleep":
            self.reader = "idle" if self.unread() else "asleep"
        elif action == "R:wake":
            self.reader = "idle"
        else:
            raise AssertionError(action)


def explore(prefill, frames, policy):
    """Runs every schedule to its end; returns (schedules run, deadlocked schedules,
    whether some schedule had a sleeping writer woken by a give_back). Each schedule
    is replayed on a fresh queue, so every branch starts from the real state."""
    runs, deadlocks, woken = 0, [], False
    stack = [[]]
    while stack:
        schedule = stack.pop()
        world = World(prefill, frames, policy)
        try:
            for action in schedule:
                world.step(action)
            actions = world.enabled()
        except BaseException:
            world.close()
            raise
        if actions:
            world.close()
            stack.extend(schedule + [a] for a in actions)
            continue
        world.close()
        runs += 1
        woken |= world.woken_by_give_back
        if world.todo:
            deadlocks.append(schedule)
            continue
        world.delivered += world.rest
        assert world.delivered == world.expected, f"frames lost, duplicated or reordered by {schedule}"
    return runs, deadlocks, woken


@pytest.mark.parametrize("prefill", [0, 1, 2])
def test_every_interleaving_of_reader_and_writer_ends_with_every_frame_taken(prefill):
    runs, deadlocks, woken = explore(prefill, 3, QueuePolicy)
    assert not deadlocks, f"lost wake-up: writer and reader both asleep after {deadlocks[0]}"
    assert runs > 20
    assert woken, "no schedule had the writer asleep when the reader gave room back"


def test_the_explorer_finds_the_lost_wake_up_of_giving_back_only_to_a_waiting_writer():
    _runs, deadlocks, _woken = explore(2, 3, FormerBrokerPolicy)
    # The reader looks for a waiting writer after its read, before the writer found the
    # queue full and went to sleep: both then wait for each other.
    assert ["R:read", "R:after_batch", "W:put", "R:read", "R:before_sleep", "R:sleep"] in deadlocks


# ---------------------------------------------------------------- real sleeps


def fill(queue, n):
    for i in range(n):
        assert queue.put(payload(i), timeout=0)


def test_a_writer_asleep_in_the_core_is_woken_by_the_give_back_of_a_batch_read_before(queue):
    assert queue.open_reader()
    fill(queue, 2)
    batch = queue.read_batch()           # the reader has copied both, not given back yet
    assert [seq for seq, _ in batch] == [1, 2]
    done = threading.Event()
    result = []

    def writer():
        result.append(queue.put(payload(2), timeout=WAIT))
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + WAIT
    while not queue.reader.waiter_count:   # the writer sleeps in the core, GIL released
        assert time.monotonic() < deadline, "the writer never went to sleep"
        time.sleep(0.001)
    assert not done.is_set()
    queue.give_back()
    assert done.wait(WAIT), "the writer was not woken by give_back"
    t.join()
    assert result == [True]
    assert queue.take(timeout=0) == [(3, payload(2))]


def test_take_gives_room_back_before_the_reader_waits(queue):
    assert queue.open_reader()
    fill(queue, 2)
    with pytest.raises(A0TimeoutError, match="the test queue"):
        queue.put(payload(9), timeout=0)
    assert [data for _seq, data in queue.take(1)] == [payload(0)]
    with pytest.raises(A0TimeoutError):          # kept: nobody was seen waiting
        queue.put(payload(9), timeout=0)
    assert [data for _seq, data in queue.take(1)] == [payload(1)]
    assert queue.take(timeout=0) == []           # nothing more: both given back
    assert queue.put(payload(2), timeout=0)
    assert queue.put(payload(3), timeout=0)
    assert [data for _seq, data in queue.take()] == [payload(2), payload(3)]


def test_take_gives_room_back_at_once_to_a_writer_seen_waiting(queue):
    assert queue.open_reader()
    fill(queue, 2)
    done = threading.Event()
    t = threading.Thread(target=lambda: (queue.put(payload(2), timeout=WAIT), done.set()))
    t.start()
    deadline = time.monotonic() + WAIT
    while not queue.reader.waiter_count:
        assert time.monotonic() < deadline, "the writer never went to sleep"
        time.sleep(0.001)
    assert len(queue.take(1)) == 1               # sees the waiter: gives back now
    assert done.wait(WAIT)
    t.join()
    assert [data for _seq, data in queue.take()] == [payload(1), payload(2)]


def test_a_full_queue_whose_reader_stays_alive_times_out_naming_it(queue):
    assert queue.open_reader()
    fill(queue, 2)
    with pytest.raises(A0TimeoutError, match=r"the test queue: no room for a frame of 48 bytes within 0.2"):
        queue.put(payload(2), timeout=0.2)
    assert [seq for seq, _ in queue.take()] == [1, 2]    # nothing of it was written


def test_a_frame_larger_than_the_arena_is_refused(queue):
    with pytest.raises(FrameTooLargeError):
        queue.put(b"x" * (ARENA * 2), timeout=0)


def test_take_and_give_back_need_the_reader(queue):
    with pytest.raises(a0py.LockError, match="open_reader"):
        queue.take(timeout=0)
    assert queue.open_reader()
    with pytest.raises(a0py.LockError, match="already has a reader"):
        queue.open_reader()
    queue.close_reader()
    assert not queue.reader_alive()


def test_open_reader_with_discard_clears_what_was_there(queue):
    fill(queue, 2)
    assert queue.open_reader(discard=True)
    assert queue.take(timeout=0) == []
    assert queue.put(payload(5), timeout=0)
    assert [data for _seq, data in queue.take()] == [payload(5)]


def test_a_writer_whose_mapping_was_closed_maps_the_arena_again():
    name = f"/a0py-test-queue-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    # Two keys of one arena: the reader's mapping stays open while the writer's closes.
    writing, reading = ("test-queue", name, "w"), ("test-queue", name, "r")
    writer = ArenaQueue(writing, a0py.Arena.shm, name, 64 << 10)
    reader = ArenaQueue(reading, a0py.Arena.shm, name)
    try:
        assert writer.put(b"one", timeout=0)
        assert reader.open_reader()
        closed = writer.arena
        closed.close()                          # as arena_cache.close() does, on any thread
        assert writer.put(b"two", timeout=0)
        assert writer.arena is not closed and not writer.arena.closed
        assert [d for _s, d in reader.take()] == [b"one", b"two"]
    finally:
        reader.close_reader()
        arena_cache.forget(writing)
        arena_cache.forget(reading)
        a0py.Arena.unlink_shm(name)


def _reader_process(name, conn):
    queue = ArenaQueue(("test-queue", name), a0py.Arena.shm, name)
    conn.send(queue.open_reader())
    time.sleep(600)


def test_a_full_queue_whose_reader_was_killed_drops_the_frame_and_says_so():
    name = f"/a0py-test-queue-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    key = ("test-queue", name)
    queue = ArenaQueue(key, a0py.Arena.shm, name, ARENA)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_reader_process, args=(name, child))
    try:
        queue.arena  # noqa: B018 - created here, so the reader attaches to it
        p.start()
        assert parent.poll(WAIT) and parent.recv() is True
        assert queue.reader_alive() and queue.reader_pid == p.pid
        assert not queue.open_reader()                 # one reader only
        fill(queue, 2)
        result = []
        t = threading.Thread(target=lambda: result.append(queue.put(payload(2))))  # no timeout
        t.start()
        os.kill(p.pid, signal.SIGKILL)
        p.join(WAIT)
        t.join(WAIT)
        assert result == [False]                       # dropped: nobody will make room
        assert not queue.reader_alive()
    finally:
        if p.is_alive():
            p.kill()
        arena_cache.forget(key)
        a0py.Arena.unlink_shm(name)
