"""What the ROS 2 tests share: :class:`Node`, a ros2_node.py process whose stdout says
where it is; :func:`read_all`, the first packets of an a0py topic; :func:`fresh_root`,
a shared-memory root of a test's own."""

import os
import select
import subprocess
import sys
import time
import uuid

import pytest
from helpers.procs import child_env, wait_until

import a0py
from a0py.proto import topic as tp

NODE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ros2_node.py")
#: A Fast DDS profile whose participants announce a lease of 1 s: a ROS 2 node killed
#: with it is seen gone within about a second (the default lease is 20 s).
SHORT_LEASE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "short_lease.xml")


class Node:
    """A ros2_node.py process; `wait(word)` reads its stdout up to that word."""

    def __init__(self, *args, short_lease=False):
        env = child_env(**({"FASTDDS_DEFAULT_PROFILES_FILE": SHORT_LEASE} if short_lease else {}))
        self.proc = subprocess.Popen([sys.executable, NODE, *map(str, args)], stdout=subprocess.PIPE,
                                     env=env)
        self._buf = b""

    def wait(self, word, timeout=60):
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            line, sep, rest = self._buf.partition(b"\n")
            if sep:
                self._buf = rest
                if line.strip() == word.encode():
                    return
                continue
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                pytest.fail(f"ros2_node.py said no {word!r} within {timeout} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                pytest.fail(f"ros2_node.py exited ({self.proc.wait()}) before saying {word!r}")
            self._buf += chunk

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()


def read_all(topic, count, timeout=30):
    """The first `count` packets of a0py topic `topic` (a name or Topic; waited for)."""
    topic = a0py.Topic.of(topic)
    got = []
    sub = None

    def more():
        nonlocal sub
        if sub is None:
            if not topic.exists("pubsub"):
                return False
            sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST)
        while (pkt := sub.read()) is not None:
            got.append(pkt)
        return len(got) >= count
    try:
        wait_until(more, f"{count} packets on {topic.name!r}", timeout)
    finally:
        if sub is not None:
            sub.close()
    return got


def fresh_root(what):
    """A shared-memory root spec no one else uses."""
    return f"shm:a0pyt-{what}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def remove_root(spec):
    """Removes every topic of root `spec` and this process's mappings of them."""
    for name in tp.list_topics(spec):
        tp.unlink_topic(tp.Topic(name, root=spec))
    tp.close_arenas()
