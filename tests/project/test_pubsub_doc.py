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
