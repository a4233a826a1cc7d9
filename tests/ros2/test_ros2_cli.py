"""The command line on ROS 2 topics, run as a user runs it: ``a0py echo`` of a
``ros2msg`` topic prints each message as ``ros2 topic echo`` does (its YAML, ``---``
between messages; ``--field`` and ``--json`` too), and ``a0py ls``/``info`` mark the
topics and services a running ROS 2 bridge imports and exports."""

import json
import sys

import pytest
import yaml
from helpers.cli import a0
from helpers.procs import wait_until
from ros2_samples import codec, sample

import a0py
from a0py import Schema
from a0py.proto import declare_schema
from a0py.proto.ros2_types import message_to_dict

pytestmark = pytest.mark.slow

IMU, STRINGS = "sensor_msgs/msg/Imu", "test_msgs/msg/Strings"


def ros2_topic_echo(type_name, values):
    """What ``ros2 topic echo`` prints of a message: rosidl_runtime_py's
    message_to_yaml, PyYAML's block style of its fields in order, then ``---``."""
    message = message_to_dict(codec(type_name).decode(codec(type_name).encode(values)))
    return yaml.dump(message, allow_unicode=True, width=sys.maxsize, default_flow_style=False,
                     sort_keys=False) + "---\n"


@pytest.mark.parametrize("type_name", [IMU, STRINGS])
def test_echo_prints_ros2_messages_as_ros2_topic_echo_does(root, type_name):
    values = [sample(type_name, seed=i) for i in (1, 2)]
    if type_name == STRINGS:  # strings YAML must quote
        values[1].update(string_value="true", bounded_string_value="a: b")
    with a0py.Publisher("robot/msg", schema=Schema.ros2(type_name)) as pub:
        for v in values:
            pub.pub(v)
    done = a0("echo", "robot/msg", "--init", "oldest", "-n", "2")
    assert done.returncode == 0, done.err
    assert done.out == "".join(ros2_topic_echo(type_name, v) for v in values)


def test_echo_field_and_json_read_ros2_messages(root):
    values = [sample(IMU, seed=i) for i in (1, 2)]
    with a0py.Publisher("imu", schema=Schema.ros2(IMU)) as pub:
        for v in values:
            pub.pub(v)
    done = a0("echo", "imu", "--init", "oldest", "-n", "2", "--field", "linear_acceleration.x")
    assert done.out.split() == [str(v["linear_acceleration"]["x"]) for v in values]
    done = a0("echo", "imu", "--init", "oldest", "-n", "1", "--json")
    assert json.loads(done.out)["header"]["frame_id"] == values[0]["header"]["frame_id"]


def test_ls_and_info_mark_what_the_ros2_bridge_imports_and_exports(bridge_root, nodes):
    talker = nodes("talk", "std_msgs/msg/String", "/ros/cli/chatter", 3)
    pub = a0py.Publisher("a0/cli/imu", schema=Schema.ros2(IMU))
    topic = a0py.Topic("a0/cli/flag")
    declare_schema(topic, Schema.ros2("std_srvs/srv/SetBool"))
    server = a0py.RpcServer(topic, lambda req: None)
    try:
        talker.wait("done")
        wait_until(lambda: (bridge_root.status()["imports"].get("ros/cli/chatter", {}).get("imported") == 3
                            and "a0/cli/imu" in bridge_root.status()["exports"]
                            and "a0/cli/flag" in bridge_root.status()["services"]),
                   "the bridge to carry them")
        wait_until(lambda: "a0/cli/flag" in a0py.ros2.read_status(bridge_root.root)["services"],
                   "its status to say so")
        listed = a0("ls")
        assert listed.returncode == 0, listed.err
        rows = {line.split()[0]: line for line in listed.out.splitlines()[1:]}
        assert listed.out.splitlines()[0].split()[-1] == "ROS2"
        assert rows["ros/cli/chatter"].endswith(" import")
        assert rows["a0/cli/imu"].endswith(" export")
        assert rows["a0/cli/flag"].endswith(" service export")
        assert rows["a0py/ros2/status"].endswith(" -")
        info = a0("info", "ros/cli/chatter")
        assert "import /ros/cli/chatter std_msgs/msg/String: imported 3" in info.out, info.out
        assert f"bridge {bridge_root.id}" in info.out
    finally:
        server.close()
        pub.close()
