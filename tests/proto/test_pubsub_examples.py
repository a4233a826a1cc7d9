"""The pub/sub examples run as a user would run them: a subscriber started first in
one process, the publisher in another, each mode of examples/pubsub_sub.py."""

import pytest
from helpers.procs import example_running, run_example

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["callback", "sync", "aio"])
def test_subscriber_example_gets_what_the_publisher_example_sends(mode):
    with example_running("pubsub_sub.py", "--mode", mode, "--count", "5", topic="demo/counter") as (sub, env):
        assert sub.stdout.readline().startswith("subscribed to 'demo/counter'")
        pub = run_example(env, "pubsub_pub.py", "--rate", "200", "--count", "5")
        assert pub.returncode == 0, pub.stderr
        assert "sent 5 messages" in pub.stdout
        out, _ = sub.communicate(timeout=60)
        got = [line for line in out.splitlines() if line.startswith("got ")]
        assert [line.split()[1] for line in got] == [f"n={i}" for i in range(5)]
        assert all("missed=0" in line and "from=pubsub_pub" in line for line in got)
        assert sub.returncode == 0
