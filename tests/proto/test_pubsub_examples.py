"""The pub/sub examples run as a user would run them: a subscriber started first in
one process, the publisher in another, each mode of examples/pubsub_sub.py."""

import os
import subprocess
import sys
import uuid

import pytest
from helpers.procs import REPO

from a0py.proto import topic as tp

pytestmark = pytest.mark.slow

EXAMPLES = os.path.join(REPO, "examples")


@pytest.mark.parametrize("mode", ["callback", "sync", "aio"])
def test_subscriber_example_gets_what_the_publisher_example_sends(mode):
    root = f"shm:a0pyt-ex-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = dict(os.environ, A0PY_ROOT=root, A0PY_ARENA_SIZE="64k",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    sub = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "pubsub_sub.py"), "--mode", mode,
                            "--count", "5"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert sub.stdout.readline().startswith("subscribed to 'demo/counter'")
        pub = subprocess.run([sys.executable, os.path.join(EXAMPLES, "pubsub_pub.py"), "--rate", "200",
                              "--count", "5"], env=env, capture_output=True, text=True, timeout=60)
        assert pub.returncode == 0, pub.stderr
        assert "sent 5 messages" in pub.stdout
        out, _ = sub.communicate(timeout=60)
        got = [line for line in out.splitlines() if line.startswith("got ")]
        assert [line.split()[1] for line in got] == [f"n={i}" for i in range(5)]
        assert all("missed=0" in line and "from=pubsub_pub" in line for line in got)
        assert sub.returncode == 0
    finally:
        if sub.poll() is None:
            sub.kill()
            sub.wait()
        tp.unlink_topic(tp.Topic("demo/counter", root=root))
