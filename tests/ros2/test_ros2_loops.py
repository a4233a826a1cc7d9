"""No loops, no duplicates: two a0py roots, each with a ROS 2 bridge that imports and
exports every topic, on one ROS 2 domain; and the same with a Zenoh bridge between the
two roots. Every message crosses one bridge, the one beside its publisher, and every
service call reaches its server through one bridge (docs/ros2.md, "Loops")."""

import socket

import pytest
from helpers.procs import wait_until
from ros2_node import read_listened
from ros2_procs import Node, fresh_root, read_all, remove_root
from ros2_samples import codec, sample

import a0py
from a0py import Schema
from a0py.proto import declare_schema
from a0py.proto import topic as tp
from a0py.proto.rpc import server_pid
from a0py.ros2 import Ros2Bridge, service_codec

pytestmark = pytest.mark.slow


@pytest.fixture
def two_roots():
    specs = [fresh_root(f"ros2loop{side}") for side in "ab"]
    bridges = [Ros2Bridge(imports=["**"], exports=["**"], root=s, node_name=f"bridge_{i}",
                          scan_interval=0.05).start() for i, s in enumerate(specs)]
    yield specs, bridges
    for br in bridges:
        br.stop()
    for spec in specs:
        remove_root(spec)


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


@pytest.fixture
def zenoh_and_ros2():
    """Roots A and B ("two machines") joined by Zenoh bridges (over TCP on loopback), each
    with a ROS 2 bridge; all four bridge ``zloop/**`` both ways."""
    from a0py.bridge import ZenohBridge

    roots = [fresh_root(f"zloop{side}") for side in "ab"]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        endpoint = f"tcp/127.0.0.1:{sock.getsockname()[1]}"
    started = []
    try:
        for root, link in zip(roots, ({"listen": [endpoint]}, {"connect": [endpoint]})):
            started.append(ZenohBridge(["zloop/**"], root=root, log_topic=None, reliable=True,
                                       **link).start())
        for i, root in enumerate(roots):
            started.append(Ros2Bridge(imports=["zloop/**"], exports=["zloop/**"], root=root,
                                      node_name=f"zloop_{i}", scan_interval=0.05).start())
        yield roots, started[:2], started[2:]
    finally:
        for bridge in reversed(started):
            bridge.stop()
        for root in roots:
            remove_root(root)


def packets(root, name):
    """The payloads of every packet topic `name` of `root` holds now."""
    with a0py.SubscriberSync(a0py.Topic(name, root=root), init=a0py.INIT_OLDEST) as sub:
        return [bytes(p.payload) for p in iter(sub.read, None)]


def test_ros2_bridges_with_a_zenoh_bridge_deliver_each_message_and_call_once(zenoh_and_ros2, tmp_path):
    (root_a, root_b), (zenoh_a, zenoh_b), (ros_a, ros_b) = zenoh_and_ros2
    c = codec("std_msgs/msg/String")
    listener = Node("listen", "std_msgs/msg/String", "/zloop/x,/zloop/y", 30, tmp_path / "got.bin",
                    "--settle", "1")
    talker = caller = None
    try:
        listener.wait("ready")
        # a ROS 2 talker: into each root once, through that root's ROS 2 bridge (not also
        # through Zenoh from the other root), and never back out to ROS 2
        talker = Node("talk", "std_msgs/msg/String", "/zloop/x", 30, "--subscribers", 3)
        from_ros = [c.encode(sample(c.type_name, seed=i)) for i in range(30)]
        for root in (root_a, root_b):
            read_all(tp.Topic("zloop/x", root=root), 30)
        # the Zenoh link is up once a packet of A reaches B
        with a0py.Publisher(a0py.Topic("zloop/probe", root=root_a)) as probe:
            wait_until(lambda: probe.pub(b"probe") and tp.Topic("zloop/probe", root=root_b).exists("pubsub")
                       and packets(root_b, "zloop/probe"), "the Zenoh link")
        # an a0py publisher of A: to B through Zenoh, to ROS 2 through A's ROS 2 bridge
        # only (B's copy came through a bridge: B's ROS 2 bridge does not send it again)
        mine = [c.encode({"data": f"a0py {i}"}) for i in range(30)]
        with a0py.Publisher(a0py.Topic("zloop/y", root=root_a), schema=Schema.ros2(c.type_name)) as pub:
            wait_until(lambda: ros_a.subscribers("zloop/y") >= 1, "the listener to match A's export")
            for data in mine:
                pub.pub(data)
            listener.wait("done")  # 30 on each topic, then a second for a duplicate to show
        assert read_listened(tmp_path / "got.bin") == {"/zloop/x": from_ros, "/zloop/y": mine}
        wait_until(lambda: len(packets(root_b, "zloop/y")) >= 30, "A's packets in B")
        for root in (root_a, root_b):
            assert packets(root, "zloop/x") == from_ros
            assert packets(root, "zloop/y") == mine
        for zenoh in (zenoh_a, zenoh_b):  # imported from ROS 2: not forwarded by Zenoh
            assert zenoh.status()["topics"].get("zloop/x", {}).get("exported", 0) == 0
        assert ros_b.status()["exports"].get("zloop/y", {}).get("exported", 0) == 0

        # a service of A: offered to ROS 2 by A's ROS 2 bridge only (B's Zenoh bridge
        # stands in for it there), so each ROS 2 call runs once
        flag = service_codec("std_srvs/srv/SetBool")
        calls = []

        def on_request(req):
            calls.append(req.id)
            req.reply(flag.response.encode({"success": True}))

        topic = a0py.Topic("zloop/svc", root=root_a)
        for root in (root_a, root_b):  # as B's clients would: the stand-in is then a candidate
            declare_schema(a0py.Topic("zloop/svc", root=root), Schema.ros2(flag.type_name))
        with a0py.RpcServer(topic, on_request):
            wait_until(lambda: server_pid(tp.Topic("zloop/svc", root=root_b)) is not None,
                       "B's Zenoh bridge to stand in for the server")
            wait_until(lambda: "service export zloop/svc" in ros_b.status()["refused"],
                       "B's ROS 2 bridge to leave the stand-in alone")
            caller = Node("call", flag.type_name, "/zloop/svc", 3, tmp_path / "called.bin")
            caller.wait("done")
        assert len(calls) == 3
        assert [flag.response.decode(r).success for r in read_listened(tmp_path / "called.bin")["/zloop/svc"]] \
            == [True] * 3
        assert ros_a.status()["services"]["zloop/svc"]["calls"] == 3
        assert "zloop/svc" not in ros_b.status()["services"]
    finally:
        for node in (listener, talker, caller):
            if node is not None:
                node.close()
