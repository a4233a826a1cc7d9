"""Services both ways through the ROS 2 bridge, against real rclpy nodes: a ROS 2 service
called by an a0py RPC client, an a0py RPC server of a ROS 2 service type called by an
rclpy client (std_srvs/SetBool and test_msgs/BasicTypes, requests and responses as
CDR); a server killed mid-call ends the call with an error (a0py) or no response
(ROS 2, which has no error response), never a hang, and its service is withdrawn."""

import subprocess
import sys
import textwrap

import pytest
from helpers.procs import child_env, wait_until
from ros2_node import read_listened
from ros2_samples import rclpy_class, service_sample

import a0py
from a0py import Schema
from a0py.proto import declare_schema, topic_schema
from a0py.proto.ros2_types import message_to_dict
from a0py.proto.rpc import server_pid
from a0py.ros2 import service_codec

pytestmark = pytest.mark.slow

SET_BOOL, BASIC = "std_srvs/srv/SetBool", "test_msgs/srv/BasicTypes"


def same_response(type_name, got, want):
    """Whether CDR responses `got` and `want` of `type_name` hold the same values."""
    codec = service_codec(type_name).response
    return message_to_dict(codec.decode(got)) == message_to_dict(codec.decode(want))


def test_ros2_services_are_called_by_a0py_rpc_clients_in_cdr(bridge_root, nodes):
    server = nodes("serve", f"{SET_BOOL},{BASIC}", "/ros/svc")
    server.wait("ready")
    flag, basic = service_codec(SET_BOOL), service_codec(BASIC)
    with a0py.RpcClient("ros/svc/SetBool", wait_for_server=30) as client:
        reply = client.send_blocking(flag.request.encode({"data": True}), timeout=30)
    got = flag.response.decode(reply.payload)
    assert (got.success, got.message) == (True, "data was True")
    assert topic_schema("ros/svc/SetBool") == Schema.ros2(SET_BOOL)
    with a0py.RpcClient("ros/svc/BasicTypes", wait_for_server=30) as client:
        for seed in range(3):
            request = service_sample(BASIC, "request", seed)
            reply = client.send_blocking(basic.request.encode(request), timeout=30)
            assert same_response(BASIC, reply.payload, basic.response.encode(request))
    counts = bridge_root.status()["services"]["ros/svc/BasicTypes"]
    assert (counts["direction"], counts["ros"], counts["calls"], counts["failed"]) == \
        ("import", "/ros/svc/BasicTypes", 3, 0)


def test_a0py_rpc_servers_of_a_ros2_service_type_are_called_by_rclpy(bridge_root, nodes, tmp_path):
    from rclpy.serialization import deserialize_message

    flag, basic = service_codec(SET_BOOL), service_codec(BASIC)

    def on_flag(req):
        data = flag.request.decode(req.pkt.payload).data
        req.reply(flag.response.encode({"success": not data, "message": f"a0py got {data}"}))

    def on_basic(req):  # the response's fields are the request's
        req.reply(basic.response.encode(message_to_dict(basic.request.decode(req.pkt.payload))))

    servers = []
    for short, type_name, handler in (("SetBool", SET_BOOL, on_flag), ("BasicTypes", BASIC, on_basic)):
        topic = a0py.Topic(f"a0/svc/{short}")
        declare_schema(topic, Schema.ros2(type_name))
        servers.append(a0py.RpcServer(topic, handler))
    try:
        caller = nodes("call", f"{SET_BOOL},{BASIC}", "/a0/svc", 3, tmp_path / "got.bin")
        caller.wait("done")
    finally:
        for server in servers:
            server.close()
    got = read_listened(tmp_path / "got.bin")
    response = rclpy_class(SET_BOOL).Response
    assert [deserialize_message(d, response) for d in got["/a0/svc/SetBool"]] == [
        response(success=not d, message=f"a0py got {d}")
        for d in (service_sample(SET_BOOL, "request", i)["data"] for i in range(3))]
    for i, data in enumerate(got["/a0/svc/BasicTypes"]):
        assert same_response(BASIC, data, basic.response.encode(service_sample(BASIC, "request", i)))
    counts = bridge_root.status()["services"]["a0/svc/BasicTypes"]
    assert (counts["direction"], counts["calls"], counts["failed"]) == ("export", 3, 0)
    # the a0py servers are gone: so are the ROS 2 services
    wait_until(lambda: not bridge_root.status()["services"]["a0/svc/SetBool"]["offered"], "the withdrawal")


def test_a_ros2_server_killed_mid_call_fails_the_a0py_call_and_a_timeout_ends_one(bridge_root, nodes):
    server = nodes("serve", SET_BOOL, "/ros/hang", "--hang", short_lease=True)
    server.wait("ready")
    request = service_codec(SET_BOOL).request.encode({"data": True})
    with a0py.RpcClient("ros/hang", wait_for_server=30) as client:
        first = client.send(request)
        server.wait("called")  # and it never answers
        with pytest.raises(a0py.A0TimeoutError, match=r"no reply within 0\.5 s"):
            client.send_blocking(request, timeout=0.5)
        server.close()  # killed while it handles the first call
        with pytest.raises(a0py.RpcRemoteError, match="ROS 2 server of /ros/hang went away"):
            first.result(timeout=30)
        wait_until(lambda: server_pid("ros/hang") is None, "the import to be withdrawn")
        with pytest.raises(a0py.A0TimeoutError, match="no server alive"):
            a0py.RpcClient("ros/hang", wait_for_server=0.2).send_blocking(request)
    counts = bridge_root.status()["services"]["ros/hang"]
    assert (counts["offered"], counts["calls"], counts["failed"]) == (False, 2, 1)


A0PY_SERVER = """
    import sys, time, a0py
    from a0py.proto import declare_schema
    topic = a0py.Topic("a0/dying")
    declare_schema(topic, a0py.Schema.ros2("std_srvs/srv/SetBool"))
    server = a0py.RpcServer(topic, lambda req: print("called", flush=True))
    print("ready", flush=True)
    time.sleep(60)
"""


def test_an_a0py_server_killed_mid_call_gives_rclpy_no_response_and_withdraws_the_service(
        bridge_root, nodes, tmp_path):
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent(A0PY_SERVER)], env=child_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        caller = nodes("call", SET_BOOL, "/a0/dying", 1, tmp_path / "got.bin", "--response-timeout", 3)
        caller.wait("called")
        assert server.stdout.readline().strip() == "called"
        server.kill()
        wait_until(lambda: bridge_root.status()["services"].get("a0/dying", {}).get("failed") == 1,
                   "the failed call to be counted", timeout=30)
        wait_until(lambda: not bridge_root.status()["services"]["a0/dying"]["offered"], "the withdrawal")
        caller.wait("done")
    finally:
        server.kill()
        server.wait()
        server.stdout.close()
    assert read_listened(tmp_path / "got.bin") == {"/a0/dying": [b""]}
