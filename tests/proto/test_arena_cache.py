"""The process's one arena cache (``a0py.proto.arena_cache``): one mapping per arena,
one Transport per thread, holds, kinds; topics, actor mailboxes and broker clients all
map their arenas through it. (The forked child's fresh cache is pinned in
``test_topic.py``.)"""

import threading
import uuid

import pytest

import a0py
from a0py.broker import Broker, BrokerClient, wire
from a0py.proto import arena_cache


def test_one_mapping_per_key_and_the_opener_runs_once(shm_name):
    calls = []

    def opener(name):
        calls.append(name)
        return a0py.Arena.shm(name, 4096)

    key = ("test", shm_name)
    try:
        first = arena_cache.arena(key, opener, shm_name)
        seen = []
        threads = [threading.Thread(target=lambda: seen.append(arena_cache.arena(key, opener, shm_name)))
                   for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(a is first for a in seen)
        assert calls == [shm_name]
    finally:
        arena_cache.close("test")


def test_each_thread_gets_its_own_transport_on_the_shared_mapping(shm_name):
    key = ("test", shm_name)
    try:
        mine = arena_cache.transport(key, a0py.Arena.shm, shm_name, 4096)
        assert arena_cache.transport(key, a0py.Arena.shm, shm_name, 4096) is mine
        other = []
        t = threading.Thread(target=lambda: other.append(arena_cache.transport(key, a0py.Arena.shm, shm_name)))
        t.start()
        t.join()
        assert other[0] is not mine and other[0].arena is mine.arena
    finally:
        arena_cache.close("test")


def test_a_closed_mapping_is_mapped_again_with_a_fresh_deadman(shm_name):
    key = ("test", shm_name)
    try:
        first = arena_cache.arena(key, a0py.Arena.shm, shm_name, 4096)
        deadman = arena_cache.deadman(key, a0py.Arena.shm, shm_name)
        first.close()
        again = arena_cache.arena(key, a0py.Arena.shm, shm_name)
        assert again is not first and not again.closed
        fresh = arena_cache.deadman(key, a0py.Arena.shm, shm_name)
        assert fresh is not deadman and fresh.arena is again
        assert not fresh.is_taken()
    finally:
        arena_cache.close("test")


def test_a_held_arena_stays_mapped_until_its_last_hold_is_released(shm_name):
    key = ("test", shm_name)
    a = arena_cache.hold(key, a0py.Arena.shm, shm_name, 4096)
    assert arena_cache.hold(key, a0py.Arena.shm, shm_name, 4096) is a
    arena_cache.release(key)
    assert not a.closed and arena_cache.arena(key, a0py.Arena.shm, shm_name) is a
    arena_cache.release(key)
    assert a.closed
    arena_cache.release(key)        # one release too many changes nothing
    b = arena_cache.arena(key, a0py.Arena.shm, shm_name)
    assert b is not a and not b.closed
    arena_cache.close("test")


def test_close_of_a_kind_leaves_the_other_kinds_mapped(shm_name):
    mine, theirs = ("test", shm_name), ("test-other", shm_name)
    a = arena_cache.arena(mine, a0py.Arena.shm, shm_name, 4096)
    b = arena_cache.arena(theirs, a0py.Arena.shm, shm_name, 4096)
    arena_cache.close("test")
    assert a.closed and not b.closed
    assert arena_cache.forget(theirs) is b
    assert arena_cache.forget(theirs) is None
    b.close()


def test_topics_actors_and_broker_clients_map_through_the_one_cache(tmp_path):
    from a0py.actor.arena import ArenaMailbox
    from a0py.proto.topic import Topic, topic_arena

    topic = Topic("cache/t", root=str(tmp_path))
    assert topic_arena(topic, "pubsub") is arena_cache.arena(
        ("topic", topic.root, topic.name, "pubsub"), pytest.fail)
    actor = f"cache-{uuid.uuid4().hex[:8]}"
    box = ArenaMailbox(actor, 8192)
    try:
        assert arena_cache.arena(("actor", actor), pytest.fail) is box._arena
    finally:
        box.release()
    broker = f"cache-{uuid.uuid4().hex[:8]}"
    try:
        with Broker(broker), BrokerClient(broker) as one, BrokerClient(broker) as two:
            shared = arena_cache.arena(wire.request_key(broker), pytest.fail)
            assert one._requests is shared and two._requests is shared
            one.ping()
        assert shared.closed            # unmapped with the last of its users
    finally:
        a0py.Arena.unlink_shm(wire.request_arena_name(broker))
