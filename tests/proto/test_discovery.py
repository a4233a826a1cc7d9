"""Discovery: topics that exist and topics created later by another process are each
announced once, filtered by glob and protocol, on a shared-memory root and a directory
root (nested directories made after the start included), with inotify and with the
polling fallback; globs; close; bad arguments."""

import threading

import pytest
from helpers.procs import CTX, MSG_S, join_ok, recv

import a0py
from a0py import ArgumentError
from a0py.proto.discovery import compile_glob

pytestmark = pytest.mark.slow


class Seen:
    def __init__(self):
        self.names = []
        self.cond = threading.Condition()

    def __call__(self, name):
        with self.cond:
            self.names.append(name)
            self.cond.notify_all()

    def wait_for(self, *names, timeout=MSG_S):
        with self.cond:
            ok = self.cond.wait_for(lambda: all(n in self.names for n in names), timeout)
        assert ok, f"announced {self.names}, waiting for {names}"


def _create_topics(conn, names):
    for name in names:
        assert conn.recv() == "next"
        kind, topic = name
        if kind == "pub":
            a0py.Publisher(topic).pub("x")
        elif kind == "cfg":
            a0py.Cfg(topic).write({})
        else:
            a0py.Logger(topic).info("x")
        conn.send(topic)


def _drive(spawn, created, seen):
    parent, child = CTX.Pipe()
    p = spawn(_create_topics, child, created)
    for _, topic in created:
        parent.send("next")
        assert recv(parent) == topic
    join_ok(p)


@pytest.mark.parametrize("mode", ["inotify", "poll"])
def test_existing_and_new_topics_from_another_process_announced_once(root, spawn, mode):
    a0py.Publisher("robot/camera").pub("x")
    a0py.Cfg("robot/camera").write({})  # a second protocol of the same topic
    a0py.Publisher("other").pub("x")
    seen = Seen()
    d = a0py.Discovery("robot/**", seen, use_inotify=mode == "inotify", poll_interval=0.05)
    assert d.mode == mode
    seen.wait_for("robot/camera")
    _drive(spawn, [("pub", "robot/lidar"), ("cfg", "robot/arm/joint1"), ("log", "elsewhere"),
                   ("log", "robot/lidar")], seen)
    seen.wait_for("robot/lidar", "robot/arm/joint1")
    d.close()
    assert sorted(seen.names) == ["robot/arm/joint1", "robot/camera", "robot/lidar"]
    assert d.topics == set(seen.names)


def test_protocol_filter(root, spawn):
    a0py.Cfg("only/cfg").write({})
    seen = Seen()
    with a0py.Discovery("**", seen, protocols=("pubsub",)):
        _drive(spawn, [("log", "only/log"), ("pub", "a/pub")], seen)
        seen.wait_for("a/pub")
    assert seen.names == ["a/pub"]


@pytest.mark.parametrize("use_inotify", [True, False])
def test_directory_root_with_nested_directories_made_later(tmp_path, monkeypatch, spawn, use_inotify):
    monkeypatch.setenv("A0PY_ROOT", str(tmp_path))
    monkeypatch.setenv("A0PY_ARENA_SIZE", "64k")
    a0py.Publisher("site/a").pub("x")
    seen = Seen()
    d = a0py.Discovery("site/**", seen, use_inotify=use_inotify, poll_interval=0.05)
    seen.wait_for("site/a")
    _drive(spawn, [("pub", "site/deep/er/b"), ("pub", "site/c"), ("pub", "elsewhere/d")], seen)
    seen.wait_for("site/deep/er/b", "site/c")
    d.close()
    assert sorted(seen.names) == ["site/a", "site/c", "site/deep/er/b"]
    a0py.proto.close_arenas()


def test_raising_callback_is_logged_and_discovery_goes_on(root, caplog):
    seen = Seen()

    def callback(name):
        seen(name)
        if name == "bad":
            raise RuntimeError("boom")

    with a0py.Discovery("*", callback):
        a0py.Publisher("bad").pub("x")
        seen.wait_for("bad")
        a0py.Publisher("good").pub("x")
        seen.wait_for("good")
    assert "discovery callback raised for topic 'bad'" in caplog.text


@pytest.mark.parametrize(("glob", "yes", "no"), [
    ("robot/*", ["robot/a", "robot/b.c"], ["robot", "robot/a/b", "robotx/a"]),
    ("robot/**", ["robot/a", "robot/a/b/c"], ["robot", "robots/a"]),
    ("**/camera", ["camera", "a/camera", "a/b/camera"], ["a/camera2", "xcamera"]),
    ("cam?", ["cam1", "camx"], ["cam", "cam12", "cam/"]),
    ("cam[0-2]", ["cam0", "cam2"], ["cam3"]),
    ("cam[!0-2]", ["cam3"], ["cam0"]),
    ("/abs/t", ["abs/t"], ["t"]),
    ("a.b", ["a.b"], ["aXb"]),
])
def test_globs(glob, yes, no):
    rx = compile_glob(glob)
    assert all(rx.match(n) for n in yes), glob
    assert not any(rx.match(n) for n in no), glob


def test_bad_arguments(root):
    with pytest.raises(ArgumentError, match="glob must be a str"):
        a0py.Discovery(None, print)
    with pytest.raises(ArgumentError, match="may not be empty"):
        a0py.Discovery("", print)
    with pytest.raises(ArgumentError, match="callable"):
        a0py.Discovery("*", "print")
    with pytest.raises(ArgumentError, match="poll_interval"):
        a0py.Discovery("*", print, poll_interval=0)
    with pytest.raises(ArgumentError, match="bad protocol name"):
        a0py.Discovery("*", print, protocols=["Pub Sub"])
