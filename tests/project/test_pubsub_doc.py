"""docs/pubsub.md names what exists and says what the code does: every ``a0py.``
name it gives resolves (``a0py.proto.topic_arena`` did not), the size warning it
shows is the one a publisher prints, and it does not say that reads take the lock
(readers are lock-free: docs/transport.md)."""

import importlib
import os
import re

import pytest
from helpers.procs import REPO

import a0py
from a0py.proto import pubsub

DOC = os.path.join(REPO, "docs", "pubsub.md")
# Dotted names on the page that are not Python names: logger names.
NOT_PYTHON = {"a0py.pubsub"}


def page():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)  # AttributeError: the page names what does not exist
        return obj
    raise ImportError(dotted)


def test_every_a0py_name_on_the_page_exists():
    names = set(re.findall(r"`(a0py(?:\.[A-Za-z_]\w*)+)", page())) - NOT_PYTHON
    assert "a0py.proto.topic.topic_arena" in names
    for name in sorted(names):
        resolve(name)


def test_the_arena_cache_table_names_each_function_with_its_module():
    section = page().split("**The per-process cache**")[1].split("**Whose arenas.**")[0]
    rows = re.findall(r"^\| `([\w.]+)\(", section, re.M)
    assert len(rows) >= 7
    for name in rows:
        assert name.startswith("a0py.proto.topic."), name
        assert callable(resolve(name)), name


def test_the_page_does_not_say_subscriber_reads_take_the_lock():
    text = " ".join(page().split())
    assert not re.search(r"[Rr]eads take the topic's lock", text)
    assert "Subscribers read without the topic's lock" in text


def test_the_size_warning_on_the_page_is_the_one_a_publisher_gives():
    block = re.search(r"```text\n(topic 'cam'.*?)```", page(), re.S).group(1)
    produced = pubsub._size_warning(a0py.Topic("cam"), 4 << 20, 2_100_000 + 96)
    assert " ".join(block.split()) == produced


@pytest.mark.parametrize("name", ["TopicSizeWarning"])
def test_the_warning_class_is_public(name):
    assert issubclass(getattr(a0py, name), UserWarning)
    assert getattr(a0py.proto, name) is getattr(a0py, name)


def test_the_getting_started_callback_subscriber_runs_until_ctrl_c(tmp_path):
    """Run as a script, the page's callback subscriber stays up, prints what is
    published, and ends cleanly on Ctrl-C (it used to exit at once)."""
    import signal
    import subprocess
    import sys
    import time
    import uuid

    [code] = [c for c in re.findall(r"```python\n(.*?)```", page(), re.S)
              if c.startswith("# a callback subscriber")]
    root = f"shm:a0py-pdoc-{uuid.uuid4().hex[:10]}"
    env = dict(os.environ, A0PY_ROOT=root, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    script = tmp_path / "sub.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        topic = a0py.Topic("robot/odom", root=root)
        deadline = time.monotonic() + 30
        while topic.name not in a0py.proto.list_topics(root):  # the subscriber creates the topic
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the subscriber never opened its topic"
            time.sleep(0.05)
        a0py.Publisher(topic).pub(b"odom 1")
        line = proc.stdout.readline()
        assert line.startswith("1 b'odom 1' missed: 0"), line
        assert proc.poll() is None  # still running
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        from a0py.proto import topic as tp

        tp.close_arenas()
        for name in tp.list_topics(root):
            tp.unlink_topic(tp.Topic(name, root=root))
