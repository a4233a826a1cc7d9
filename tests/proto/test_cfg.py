"""Cfg across real processes: read/write/read_blocking, write_if_empty raced by four
processes (exactly one wins), RFC 7386 merge patches (the RFC's own examples), four
processes merge-patching at once losing no update, a writer SIGKILLed while holding the
writers' lock, CfgWatcher, typed views by JSON pointer, and clear errors."""

import dataclasses
import itertools
import os
import signal
import threading

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv

import a0py
from a0py import A0TimeoutError, ArgumentError, EmptyError
from a0py.proto.cfg import CfgError, merge_patch, resolve_pointer

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------ read and write


def test_read_write_and_empty(root):
    cfg = a0py.Cfg("robot")
    with pytest.raises(EmptyError, match="cfg topic 'robot' has no configuration yet"):
        cfg.read()
    with pytest.raises(A0TimeoutError, match=r"no configuration written within 0\.05 s"):
        cfg.read_blocking(timeout=0.05)
    assert cfg.value(default=None) is None
    cfg.write({"speed": 1.5, "name": "r2"})
    assert cfg.read().json() == {"speed": 1.5, "name": "r2"}
    assert cfg.read().headers["content-type"] == "application/json"
    cfg.write('{"speed": 2}')  # str is JSON text
    assert cfg.read().json() == {"speed": 2}
    assert cfg.value("/speed") == 2
    assert cfg.read_blocking(timeout=0).json() == {"speed": 2}


def _write_later(topic, conn):
    conn.recv()
    a0py.Cfg(topic).write({"from": "child"})


def test_read_blocking_waits_for_the_first_write_from_another_process(root, spawn):
    parent, child = CTX.Pipe()
    p = spawn(_write_later, "late", child)
    out = {}
    t = threading.Thread(target=lambda: out.update(pkt=a0py.Cfg("late").read_blocking(timeout=MSG_S)))
    t.start()
    parent.send("go")
    t.join(MSG_S)
    assert out["pkt"].json() == {"from": "child"}
    join_ok(p)


def _race_write_if_empty(topic, n, barrier, conn):
    cfg = a0py.Cfg(topic)
    barrier.wait(MSG_S)
    conn.send(cfg.write_if_empty({"winner": n}))


def test_write_if_empty_raced_by_four_processes_has_one_winner(root, spawn):
    barrier = CTX.Barrier(4)
    pipes = []
    for n in range(4):
        parent, child = CTX.Pipe()
        pipes.append((spawn(_race_write_if_empty, "race", n, barrier, child), parent))
    results = [recv(parent) for _, parent in pipes]
    for p, _ in pipes:
        join_ok(p)
    assert sorted(results) == [False, False, False, True]
    assert a0py.Cfg("race").read().json() == {"winner": results.index(True)}
    assert len(list(_all_versions("race"))) == 1


def _all_versions(topic):
    reader = a0py._core.PacketReader(a0py.Cfg(topic).arena, 0, 0)
    while True:
        pkt = reader.read()
        if pkt is None:
            return
        yield pkt


# ------------------------------------------------------------------ merge patch


RFC7386_EXAMPLES = [  # RFC 7386, Appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC7386_EXAMPLES)
def test_merge_patch_follows_rfc7386(target, patch, result):
    before = repr(target)
    assert merge_patch(target, patch) == result
    assert repr(target) == before  # the target is not changed in place


def test_mergepatch_on_a_topic(root):
    cfg = a0py.Cfg("mp")
    assert cfg.mergepatch({"a": {"b": 1}}) == {"a": {"b": 1}}  # none counts as {}
    assert cfg.mergepatch('{"a": {"c": 2}}') == {"a": {"b": 1, "c": 2}}
    assert cfg.mergepatch({"a": {"b": None}}) == {"a": {"c": 2}}
    assert cfg.read().json() == {"a": {"c": 2}}


def _patcher(topic, n, count, barrier, conn):
    cfg = a0py.Cfg(topic)
    barrier.wait(MSG_S)
    for i in range(count):
        cfg.mergepatch({f"p{n}": {f"k{i}": i}, "last": f"{n}-{i}"})
    conn.send("done")


def test_mergepatch_from_four_processes_at_once_loses_no_update(root, spawn):
    count = 60
    barrier = CTX.Barrier(4)
    pipes = []
    for n in range(4):
        parent, child = CTX.Pipe()
        pipes.append((spawn(_patcher, "shared", n, count, barrier, child), parent))
    for p, parent in pipes:
        assert recv(parent, 60) == "done"
        join_ok(p)
    doc = a0py.Cfg("shared").read().json()
    for n in range(4):
        assert doc[f"p{n}"] == {f"k{i}": i for i in range(count)}, f"process {n} lost updates"
    assert a0py.Cfg("shared").read().seq == 4 * count  # one version per patch
    versions = list(_all_versions("shared"))  # those not evicted yet
    assert [v.seq for v in versions] == list(range(versions[0].seq, 4 * count + 1))
    # Each version extends the one before it: no writer merged into an old version.
    for older, newer in itertools.pairwise(versions):
        a, b = older.json(), newer.json()
        assert all(set(a[k]) <= set(b.get(k, {})) for k in a if k.startswith("p"))


def _hold_writers_lock_then_die(topic, conn):
    cfg = a0py.Cfg(topic)
    a0py.Deadman(cfg.arena).take()  # the writers' lock is the cfg arena's deadman
    conn.send("holding")
    conn.recv()


def test_writer_killed_holding_the_writers_lock_does_not_block_others(root, spawn):
    cfg = a0py.Cfg("crash")
    cfg.write({"v": 0})
    parent, child = CTX.Pipe()
    p = spawn(_hold_writers_lock_then_die, "crash", child)
    assert recv(parent) == "holding"
    done = threading.Event()
    t = threading.Thread(target=lambda: (cfg.mergepatch({"v": 1}), done.set()))
    t.start()
    assert not done.wait(0.3)  # waits for the lock holder
    os.kill(p.pid, signal.SIGKILL)
    assert done.wait(MSG_S)  # its death frees the lock at once
    t.join(MSG_S)
    assert cfg.read().json() == {"v": 1}


# ------------------------------------------------------------------ watcher


def _patch_three(topic, conn):
    cfg = a0py.Cfg(topic)
    for i in range(3):
        assert conn.recv() == "next"
        cfg.mergepatch({"n": i})
    conn.send("done")


def test_watcher_gets_the_current_version_then_each_new_one(root, spawn):
    a0py.Cfg("watched").write({"n": -1})
    seen = []
    changed = threading.Condition()

    def on_cfg(pkt):
        with changed:
            seen.append(pkt.json()["n"])
            changed.notify_all()

    watcher = a0py.CfgWatcher("watched", on_cfg)
    parent, child = CTX.Pipe()
    p = spawn(_patch_three, "watched", child)
    for want in range(-1, 3):
        with changed:
            assert changed.wait_for(lambda w=want: seen and seen[-1] == w, MSG_S), seen
        if want < 2:
            parent.send("next")
    assert recv(parent) == "done"
    join_ok(p)
    watcher.close()
    assert seen == [-1, 0, 1, 2]


# ------------------------------------------------------------------ views


@dataclasses.dataclass
class Motor:
    speed: float
    enabled: bool = True


def test_typed_views_by_json_pointer(root):
    cfg = a0py.Cfg("view")
    cfg.write({"motor": {"speed": 3, "enabled": False}, "tags": ["a", "b"], "a/b": {"~": 1}})
    assert cfg.view("/motor/speed", float).get() == 3.0  # an int is a float
    assert cfg.view("/motor/enabled", bool).get() is False
    assert cfg.view("/tags/1", str).get() == "b"
    assert cfg.view("/a~1b/~0").get() == 1  # RFC 6901 escapes
    assert cfg.view("/motor", Motor).get() == Motor(3, False)
    assert cfg.view("", dict).get()["tags"] == ["a", "b"]
    assert cfg.view("/missing", int, default=7).get() == 7
    with pytest.raises(CfgError, match=r"no value at '/motor/torque' \(no member 'torque'\)"):
        cfg.view("/motor/torque").get()
    with pytest.raises(CfgError, match=r"'/motor/speed' is int 3, not str"):
        cfg.view("/motor/speed", str).get()
    with pytest.raises(CfgError, match="not int"):
        cfg.view("/motor/enabled", int).get()  # a bool is not an int here
    with pytest.raises(CfgError, match="not an index"):
        cfg.view("/tags/5").get()


def test_view_set_writes_a_new_version_atomically(root):
    cfg = a0py.Cfg("vset")
    speed = cfg.view("/motor/speed", float)
    speed.set(2.5)  # creates the path
    assert cfg.read().json() == {"motor": {"speed": 2.5}}
    cfg.view("/tags/-").set("x")
    assert cfg.read().json()["tags"] == {"-": "x"}  # '-' on an object is a member name
    cfg.write({"tags": []})
    cfg.view("/tags/-").set("y")
    assert cfg.read().json() == {"tags": ["y"]}
    cfg.view("/motor", Motor).set(Motor(1.0))
    assert cfg.view("/motor", Motor).get() == Motor(1.0, True)
    with pytest.raises(CfgError, match="not float"):
        speed.set("fast")


# ------------------------------------------------------------------ errors


def test_bad_arguments_and_bad_documents(root):
    cfg = a0py.Cfg("errs")
    with pytest.raises(ArgumentError, match="cannot serialize object"):
        cfg.write(object())
    with pytest.raises(ArgumentError, match="a str is taken as JSON text"):
        cfg.write("not json")
    with pytest.raises(ArgumentError, match="bytes given are not JSON"):
        cfg.write(b"\xff")
    with pytest.raises(ArgumentError, match="JSON pointer"):
        cfg.view("motor")
    with pytest.raises(ArgumentError, match="'~' must be followed by 0 or 1"):
        cfg.view("/a~2")
    with pytest.raises(ArgumentError, match="type must be a class"):
        cfg.view("/a", type="int")
    with pytest.raises(ArgumentError, match="topic name may not be empty"):
        a0py.Cfg("")
    with pytest.raises(ArgumentError, match="callable"):
        a0py.CfgWatcher("errs", None)
    # A document written by something else than Cfg, and not JSON:
    a0py._core.PacketWriter(cfg.arena).pub(b"<xml/>")
    with pytest.raises(CfgError, match=r"cfg topic 'errs': the configuration \(seq \d+\) is not JSON"):
        cfg.mergepatch({"a": 1})
    with pytest.raises(CfgError, match="not JSON"):
        cfg.view("/a").get()
    cfg.write({"fixed": True})  # a whole write replaces it
    assert cfg.mergepatch({"a": 1}) == {"fixed": True, "a": 1}
    with pytest.raises(CfgError, match="no value"):
        resolve_pointer({"a": 1}, "/a/b")
