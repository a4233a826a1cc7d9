"""Schema.ros2 and ROS 2 values on a0py topics, without rclpy nodes: the definition in
rosbag2's layout, CDR that rclpy and mcap-ros2-support read, errors that say what to do."""

import numpy as np
import pytest
from ros2_samples import TEST_MSGS, codec, rclpy_class, sample

import a0py
from a0py import ArgumentError, DecodeError, Schema, SchemaError
from a0py.proto import ros2_types


def test_definition_is_the_type_then_each_dependency_once_in_rosbag2_layout():
    schema = Schema.ros2("sensor_msgs/Imu")
    assert (schema.name, schema.encoding, schema.message_encoding) == (
        "sensor_msgs/msg/Imu", "ros2msg", "cdr")
    text = schema.data.decode()
    sections = text.split("=" * 80 + "\n")
    assert "geometry_msgs/Quaternion orientation" in sections[0]
    heads = [s.splitlines()[0] for s in sections[1:]]
    assert heads == ["MSG: std_msgs/Header", "MSG: builtin_interfaces/Time",
                     "MSG: geometry_msgs/Quaternion", "MSG: geometry_msgs/Vector3"]


def test_definition_decodes_in_mcap_ros2_support():
    from mcap_ros2._dynamic import generate_dynamic

    schema = Schema.ros2("sensor_msgs/msg/Imu")
    data = codec("sensor_msgs/msg/Imu").encode(sample("sensor_msgs/msg/Imu"))
    decoded = generate_dynamic(schema.name, schema.data.decode())[schema.name](data)
    assert decoded.header.frame_id == sample("sensor_msgs/msg/Imu")["header"]["frame_id"]
    assert list(decoded.orientation_covariance) == sample("sensor_msgs/msg/Imu")["orientation_covariance"]


@pytest.mark.parametrize("name", TEST_MSGS)
def test_every_field_type_encodes_as_rclpy_reads_and_decodes_as_rclpy_writes(name):
    from rclpy.serialization import deserialize_message, serialize_message

    type_name = f"test_msgs/msg/{name}"
    c, values = codec(type_name), sample(type_name)
    ours = c.encode(values)
    theirs = deserialize_message(ours, rclpy_class(type_name))
    again = serialize_message(theirs)  # rclpy's own bytes of the same values
    assert ros2_types.message_to_dict(c.decode(again)) == ros2_types.message_to_dict(c.decode(ours))
    assert deserialize_message(c.encode(c.decode(again)), rclpy_class(type_name)) == theirs


def test_dict_rosbags_and_rclpy_messages_encode_the_same_values(root):
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Imu

    rclpy_msg = Imu()
    rclpy_msg.header.frame_id = "imu_link"
    rclpy_msg.header.stamp.sec = 12
    rclpy_msg.linear_acceleration.z = 9.81
    rclpy_msg.orientation_covariance[4] = 0.5
    as_dict = {"header": {"frame_id": "imu_link", "stamp": {"sec": 12}},
               "linear_acceleration": {"z": 9.81},
               "orientation_covariance": [0, 0, 0, 0, 0.5, 0, 0, 0, 0],
               "orientation": {"w": 1.0}}  # rclpy's default; a dict's fields default to zero
    with a0py.Publisher("imu") as pub, a0py.SubscriberSync("imu", init=a0py.INIT_OLDEST) as sub:
        pub.pub(rclpy_msg)
        pub.pub(as_dict)
        first = sub.read()
        pub.pub(first.decode())  # a rosbags message
        packets = [first, sub.read(), sub.read()]
    assert first.schema == Schema.ros2("sensor_msgs/msg/Imu")
    for pkt in packets:
        assert deserialize_message(bytes(pkt.payload), Imu) == rclpy_msg
        assert pkt.decode().header.frame_id == "imu_link"


def test_image_topic_reads_pixels_as_a_view_of_the_payload(root):
    pixels = np.arange(48 * 64 * 3, dtype=np.uint8).reshape(48, 64, 3)
    with a0py.Publisher("cam", schema=Schema.ros2("sensor_msgs/msg/Image")) as pub, \
            a0py.SubscriberSync("cam", init=a0py.INIT_OLDEST) as sub:
        pub.pub({"header": {"frame_id": "cam"}, "height": 48, "width": 64, "encoding": "rgb8",
                 "step": 192, "data": pixels.tobytes()})
        pkt = sub.read()
    array = pkt.array()
    assert array.shape == (48, 64, 3) and (array == pixels).all()
    assert not array.flags.owndata and not array.flags.writeable


def test_missing_package_names_the_pip_package():
    with pytest.raises(SchemaError, match=r"pip install ros-kilted-nav2-msgs"):
        Schema.ros2("nav2_msgs/msg/Costmap")


def test_unknown_type_names_the_package_and_type():
    with pytest.raises(SchemaError, match=r"unknown ROS 2 type sensor_msgs/msg/Imew"):
        Schema.ros2("sensor_msgs/msg/Imew")


@pytest.mark.parametrize("name", ["Imu", "sensor_msgs/srv/Imu", "a b/msg/C", "a/msg/C/d", ""])
def test_bad_type_names_are_argument_errors(name):
    with pytest.raises(ArgumentError, match="ROS 2 type name"):
        Schema.ros2(name)


def test_given_definition_is_used_and_must_hold_every_type():
    schema = Schema.ros2("my_pkg/msg/Pair", "int32 a\nstring b\n")
    assert schema.data == b"int32 a\nstring b\n"
    c = ros2_types.codec_for(schema.name, schema.data.decode())
    assert c.decode(c.encode({"a": 3, "b": "x"})).a == 3
    with pytest.raises(SchemaError, match="lacks my_pkg/msg/Inner"):
        Schema.ros2("my_pkg/msg/Outer", "my_pkg/Inner inner\n")


def test_values_of_the_wrong_kind_are_refused_before_publishing(root):
    from std_msgs.msg import String

    with a0py.Publisher("imu2", schema=Schema.ros2("sensor_msgs/msg/Imu")) as pub:
        with pytest.raises(ArgumentError, match="has no field speed"):
            pub.pub({"speed": 1})
        with pytest.raises(ArgumentError, match="exactly 9"):
            pub.pub({"orientation_covariance": [1, 2]})
        with pytest.raises(SchemaError, match="std_msgs/msg/String"):
            pub.pub(String(data="x"))
    with a0py.SubscriberSync("imu2", init=a0py.INIT_OLDEST) as sub:
        assert sub.read() is None


def test_malformed_cdr_is_a_decode_error_naming_the_topic(root):
    with a0py.Publisher("imu3", schema=Schema.ros2("sensor_msgs/msg/Imu")) as pub, \
            a0py.SubscriberSync("imu3", init=a0py.INIT_OLDEST) as sub:
        pub.pub(b"\x00\x01\x00\x00\x05")
        with pytest.raises(DecodeError, match="topic 'imu3' seq 1: not a CDR sensor_msgs/msg/Imu"):
            sub.read().decode()


def test_wstring_types_are_refused_by_the_codec_not_by_the_schema():
    schema = Schema.ros2("test_msgs/msg/WStrings")
    assert b"wstring wstring_value" in schema.data
    with pytest.raises(SchemaError, match="wstring"):
        ros2_types.codec_for(schema.name, schema.data.decode())
