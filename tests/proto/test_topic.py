"""Topics: names, roots, sizes, either side creating, the per-process arena cache
(threads and fork), listing and removal. Multi-process cases use real children.
"""

import os
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest
from helpers.procs import CTX, JOIN_S, REPO

import a0py
from a0py import ArenaNotFoundError, ArgumentError
from a0py.proto import arena_cache
from a0py.proto import topic as tp


def run_child(code, timeout=30):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


# ------------------------------------------------------------ names and roots


@pytest.mark.parametrize("name", ["", "/", "a//b", "a/", "../x", ".hidden", "-x", "a b", "a/.b",
                                  "caf\u00e9", "a:b", "x" * 201, 7, None, b"bytes"])
def test_bad_topic_names_are_argument_errors(name):
    with pytest.raises(ArgumentError, match="topic name"):
        tp.Topic(name)


def test_good_topic_names_and_the_ros_style_leading_slash():
    assert tp.Topic("/robot/camera.left").name == "robot/camera.left"
    assert tp.Topic("a-b_c.d/E9").name == "a-b_c.d/E9"
    assert tp.Topic("x" * 200).name == "x" * 200


def test_roots_from_a0py_root(monkeypatch, tmp_path):
    monkeypatch.delenv("A0PY_ROOT", raising=False)
    assert tp.current_root() == tp.Root("shm", "a0py")
    assert tp.Topic("robot/cam").location("pubsub") == "/a0py.robot:cam.pubsub"
    monkeypatch.setenv("A0PY_ROOT", "shm:fleet7")
    assert tp.Topic("cam").location("rpc") == "/fleet7.cam.rpc"
    monkeypatch.setenv("A0PY_ROOT", str(tmp_path))
    assert tp.Topic("robot/cam").location("log") == str(tmp_path / "robot" / "cam.log.a0")
    monkeypatch.chdir(tmp_path)
    assert tp.Root.parse("rel").location == str(tmp_path / "rel")
    with pytest.raises(ArgumentError, match="prefix after 'shm:'"):
        tp.Root.parse("shm:bad/prefix")
    with pytest.raises(ArgumentError, match="protocol"):
        tp.Topic("x").location("Bad-Proto")


def test_every_protocol_has_its_own_arena(root):
    t = tp.Topic("multi")
    arenas = {p: t.arena(p) for p in tp.PROTOCOLS}
    assert len({id(a) for a in arenas.values()}) == len(tp.PROTOCOLS)
    assert {a.name for a in arenas.values()} == {f"/{root.removeprefix('shm:')}.multi.{p}" for p in tp.PROTOCOLS}
    assert tp.list_topics() == {"multi": sorted(tp.PROTOCOLS)}


# ------------------------------------------------------------ sizes


def test_size_order_topic_then_topic_sizes_then_protocol_env_then_env_then_default(root, monkeypatch):
    monkeypatch.delenv("A0PY_ARENA_SIZE")
    assert tp.Topic("s").size_for("pubsub") == tp.DEFAULT_SIZES["pubsub"]
    assert tp.Topic("s").size_for("deadman") == 4096
    monkeypatch.setenv("A0PY_ARENA_SIZE", "1M")
    assert tp.Topic("s").size_for("pubsub") == 1 << 20
    assert tp.Topic("s").size_for("deadman") == 4096  # the deadman needs no frames
    monkeypatch.setenv("A0PY_ARENA_SIZE_PUBSUB", "2MiB")
    assert tp.Topic("s").size_for("pubsub") == 2 << 20
    assert tp.Topic("s").size_for("log") == 1 << 20
    monkeypatch.setenv("A0PY_TOPIC_SIZES", "s=3m, other/t=64k")
    assert tp.Topic("s").size_for("pubsub") == 3 << 20
    assert tp.Topic("other/t").size_for("cfg") == 64 << 10
    assert tp.Topic("s", size="5M").size_for("pubsub") == 5 << 20
    assert tp.Topic("s", size={"log": 70000}).size_for("log") == 70000
    assert tp.Topic("s", size={"log": 70000}).size_for("pubsub") == 3 << 20
    arena = tp.Topic("sized", size=300_000).arena("pubsub")
    assert arena.size == 300_000


@pytest.mark.parametrize("var, value, match", [
    ("A0PY_ARENA_SIZE", "100", "A0PY_ARENA_SIZE must be at least"),
    ("A0PY_ARENA_SIZE", "lots", "A0PY_ARENA_SIZE: 'lots' is not a size"),
    ("A0PY_TOPIC_SIZES", "nosize", "TOPIC=SIZE"),
    ("A0PY_TOPIC_SIZES", "bad name=1M", "topic name"),
])
def test_bad_size_settings_are_argument_errors_naming_the_variable(root, monkeypatch, var, value, match):
    monkeypatch.setenv(var, value)
    with pytest.raises(ArgumentError, match=match):
        tp.Topic("t").arena("pubsub")
    with pytest.raises(ArgumentError, match="at least"):
        tp.Topic("t", size=10)


# ------------------------------------------------------------ either side creates


def _open_and_publish(topic_name, conn):
    pub = a0py.Publisher(topic_name)
    conn.send((pub.arena.size, pub.pub(f"from {os.getpid()}")))


def test_subscriber_first_creates_the_topic_and_a_later_publisher_attaches(root):
    sub = a0py.SubscriberSync("late/pub")
    assert sub.arena.size == 256 << 10
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_open_and_publish, args=("late/pub", child))
    p.start()
    size, seq = parent.recv()
    p.join(JOIN_S)
    assert p.exitcode == 0 and size == 256 << 10
    pkt = sub.read_blocking(timeout=10)
    assert pkt.seq == seq and pkt.payload == f"from {p.pid}".encode()


def test_many_processes_creating_one_topic_at_once_share_one_arena(root):
    conns, procs = [], []
    for _ in range(6):
        parent, child = CTX.Pipe()
        procs.append(CTX.Process(target=_open_and_publish, args=("race", child)))
        conns.append(parent)
    for p in procs:
        p.start()
    seqs = sorted(c.recv()[1] for c in conns)
    for p in procs:
        p.join(JOIN_S)
        assert p.exitcode == 0
    assert seqs == [1, 2, 3, 4, 5, 6]  # one ring: every writer's frame got the next seq
    sub = a0py.SubscriberSync("race", init=a0py.INIT_OLDEST)
    assert len([sub.read() for _ in range(6)]) == 6 and sub.read() is None


def test_attach_only_needs_an_existing_topic(root):
    with pytest.raises(ArenaNotFoundError):
        tp.topic_arena("absent", "pubsub", create=False)
    assert not tp.Topic("absent").exists("pubsub")
    tp.topic_arena("absent", "pubsub")
    assert tp.Topic("absent").exists("pubsub")
    assert tp.topic_arena("absent", "pubsub", create=False) is tp.topic_arena("absent", "pubsub")


def test_file_root_gives_file_arenas(tmp_path, monkeypatch):
    monkeypatch.setenv("A0PY_ROOT", str(tmp_path / "topics"))
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    pub = a0py.Publisher("robot/cam")
    sub = a0py.SubscriberSync("robot/cam", init=a0py.INIT_OLDEST)
    pub.pub(b"on disk")
    assert sub.read().payload == b"on disk"
    path = tmp_path / "topics" / "robot" / "cam.pubsub.a0"
    assert path.is_file() and pub.arena.kind == "file" and pub.arena.name == str(path)
    assert tp.list_topics() == {"robot/cam": ["pubsub"]}
    assert tp.unlink_topic("robot/cam") == ["pubsub"]
    assert not path.exists() and tp.list_topics() == {}
    tp.close_arenas()


# ------------------------------------------------------------ the cache


def test_one_mapping_per_arena_shared_by_threads(root):
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(tp.topic_arena("shared", "pubsub")))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(a) for a in seen}) == 1
    assert tp.topic_arena(tp.Topic("shared"), "pubsub") is seen[0]


def test_thread_transports_are_per_thread(root):
    mine = tp.thread_transport("tt", "pubsub")
    assert tp.thread_transport("tt", "pubsub") is mine
    other = []
    t = threading.Thread(target=lambda: other.append(tp.thread_transport("tt", "pubsub")))
    t.start()
    t.join()
    assert other[0] is not mine and other[0].arena is mine.arena


def test_forget_and_close(root):
    a = tp.topic_arena("f", "pubsub")
    assert tp.forget_arena("f", "pubsub") is a
    b = tp.topic_arena("f", "pubsub")
    assert b is not a and not a.closed
    tp.close_arenas()
    assert b.closed
    assert not tp.topic_arena("f", "pubsub").closed


def _hold_lock_then_fork(conn):
    # A thread holds the cache lock while the process forks: the child must not inherit
    # a lock nobody will ever release.
    held = threading.Event()
    release = threading.Event()

    def holder():
        with arena_cache._lock:
            held.set()
            release.wait()

    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        try:
            arena = tp.topic_arena("forked", "pubsub")
            a0py.Publisher("forked").pub(b"child")
            os._exit(0 if not arena.closed else 3)
        except BaseException:
            os._exit(2)
    release.set()
    t.join()
    _, status = os.waitpid(pid, 0)
    conn.send(os.waitstatus_to_exitcode(status))


def test_a_forked_child_gets_a_fresh_cache_and_lock(root):
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_hold_lock_then_fork, args=(child,))
    p.start()
    assert parent.poll(JOIN_S), "the forked child hung on the inherited cache lock"
    assert parent.recv() == 0
    p.join(JOIN_S)
    sub = a0py.SubscriberSync("forked", init=a0py.INIT_OLDEST)
    assert sub.read().payload == b"child"


def test_unlink_and_list(root):
    tp.Topic("a/b").arena("pubsub")
    tp.Topic("a/b").arena("cfg")
    tp.Topic("c").arena("log")
    assert tp.list_topics() == {"a/b": ["cfg", "pubsub"], "c": ["log"]}
    assert tp.unlink_topic("a/b", ["pubsub", "rpc"]) == ["pubsub"]
    assert tp.Topic("a/b").unlink() == ["cfg"]
    assert tp.list_topics() == {"c": ["log"]}


def test_topics_in_another_process_see_the_same_root():
    prefix = f"a0pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    code = """
        import a0py
        a0py.Publisher("child/topic").pub(b"x")
        print(sorted(a0py.proto.list_topics()))
    """
    env_root = f"shm:{prefix}"
    old = os.environ.get("A0PY_ROOT")
    os.environ["A0PY_ROOT"] = env_root
    try:
        out = run_child(code)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "['child/topic']"
        assert tp.list_topics(env_root) == {"child/topic": ["pubsub"]}
    finally:
        tp.unlink_topic(tp.Topic("child/topic", root=env_root))
        if old is None:
            del os.environ["A0PY_ROOT"]
        else:
            os.environ["A0PY_ROOT"] = old
