"""No loops, no duplicates: two a0py roots, each with a ROS 2 bridge that imports and
exports every topic, on one ROS 2 domain. Every message crosses one bridge, the one
beside its publisher (docs/ros2.md, "Loops")."""

import os
import uuid

import pytest
from helpers.procs import wait_until
from ros2_node import read_listened
from ros2_samples import codec, sample
from test_ros2_bridge import Node, read_all

import a0py
from a0py import Schema
from a0py.proto import topic as tp
from a0py.ros2 import Ros2Bridge

pytestmark = pytest.mark.slow


@pytest.fixture
def two_roots():
    specs = [f"shm:a0pyt-ros2loop{side}-{os.getpid()}-{uuid.uuid4().hex[:6]}" for side in "ab"]
    bridges = [Ros2Bridge(imports=["**"], exports=["**"], root=s, node_name=f"bridge_{i}",
                          scan_interval=0.05).start() for i, s in enumerate(specs)]
    yield specs, bridges
    for br in bridges:
        br.stop()
    for spec in specs:
        for name in tp.list_topics(spec):
            tp.unlink_topic(tp.Topic(name, root=spec))
    tp.close_arenas()


def test_two_roots_on_one_domain_get_each_message_once(two_roots, tmp_path, monkeypatch):
    (root_a, root_b), (bridge_a, bridge_b) = two_roots
    listener = Node("listen", "std_msgs/msg/String", "/loop/x", 40, tmp_path / "x.bin", "--settle", "1")
    listener2 = Node("listen", "std_msgs/msg/String", "/loop/y", 30, tmp_path / "y.bin", "--settle", "1")
    talker = Node("talk", "std_msgs/msg/String", "/loop/x", 40, "--subscribers", 3)
    try:
        listener.wait("ready")
        listener2.wait("ready")
        talker.wait("done")
        # a ROS 2 talker's messages: into each root once, and never back out to ROS 2
        c = codec("std_msgs/msg/String")
        want = [c.encode(sample(c.type_name, seed=i)) for i in range(40)]
        for root in (root_a, root_b):
            monkeypatch.setenv("A0PY_ROOT", root)
            assert [bytes(p.payload) for p in read_all("loop/x", 40)] == want
        listener.wait("done")
        assert read_listened(tmp_path / "x.bin")["/loop/x"] == want
        # an a0py publisher's messages: to ROS 2 once; not into the other root (a0py roots
        # meet through shared memory or the Zenoh bridge), not back into its own
        mine = [c.encode({"data": f"from a0py {i}"}) for i in range(30)]
        with a0py.Publisher(a0py.Topic("loop/y", root=root_a),
                            schema=Schema.ros2("std_msgs/msg/String")) as pub:
            wait_until(lambda: bridge_a.subscribers("loop/y") >= 2,
                       "the listener and the other bridge to match")
            for data in mine:
                pub.pub(data)
            listener2.wait("done")
        assert read_listened(tmp_path / "y.bin")["/loop/y"] == mine
        monkeypatch.setenv("A0PY_ROOT", root_a)
        assert len(read_all("loop/y", 30)) == 30
        wait_until(lambda: bridge_a.status()["exports"]["loop/y"]["exported"] == 30, "the exports")
        assert bridge_a.status()["exports"]["loop/x"]["exported"] == 0  # imported: never sent again
        assert not tp.Topic("loop/y", root=root_b).exists("pubsub")
        assert bridge_b.from_bridges >= 30
        assert bridge_a.status()["imports"]["loop/x"]["imported"] == 40
        assert bridge_b.status()["imports"]["loop/x"]["imported"] == 40
    finally:
        for node in (listener, listener2, talker):
            node.close()
