"""The ROS 2 bridge against real rclpy nodes (spawned processes of ros2_node.py): both
ways, bytes unchanged, values equal, in order, nothing lost under reliable QoS; a late
reader of a transient-local topic; recordings of imported topics read by rosbags and
mcap-ros2-support; bad input counted or refused, never a crash."""

import json
import os

import numpy as np
import pytest
from helpers.procs import run_python, wait_until
from ros2_node import read_listened
from ros2_procs import read_all
from ros2_samples import TEST_MSGS, codec, sample

import a0py
from a0py import Schema
from a0py.recording.format import HEADERS_TOPIC_PREFIX
from a0py.ros2 import PUBLICATION_SEQ, SOURCE_TIME, Ros2Bridge, Ros2ConfigError, read_status

pytestmark = pytest.mark.slow


def matched(bridge, name):
    """Whether the bridge's export of a0py topic `name` has a matched ROS 2 subscriber."""
    return bridge.subscribers(name) >= 1


def test_talker_strings_arrive_unchanged_in_order_with_ros2_headers(bridge_root, nodes):
    talker = nodes("talk", "std_msgs/msg/String", "/ros/chatter", 200)
    talker.wait("done")
    packets = read_all("ros/chatter", 200)
    c = codec("std_msgs/msg/String")
    assert [bytes(p.payload) for p in packets] == [c.encode(sample(c.type_name, seed=i))
                                                   for i in range(200)]
    assert [int(p.headers[PUBLICATION_SEQ]) for p in packets] == list(range(1, 201))
    assert all(int(p.headers[SOURCE_TIME]) > 0 for p in packets)
    assert packets[0].schema == Schema.ros2("std_msgs/msg/String")
    assert packets[5].decode().data == sample("std_msgs/msg/String", seed=5)["data"]
    counts = bridge_root.status()["imports"]["ros/chatter"]
    assert (counts["imported"], counts["lost"], counts["write_errors"]) == (200, 0, 0)


def test_every_field_type_arrives_with_rclpys_values(bridge_root, nodes):
    from rclpy.serialization import deserialize_message
    from ros2_samples import rclpy_class

    types = ",".join(f"test_msgs/msg/{t}" for t in (*TEST_MSGS, "WStrings"))
    talker = nodes("talk", types, "/ros/types", 3)
    talker.wait("done")
    for name in TEST_MSGS:
        type_name = f"test_msgs/msg/{name}"
        packets = read_all(f"ros/types/{name}", 3)
        c = codec(type_name)
        for i, pkt in enumerate(packets):
            assert bytes(pkt.payload) == c.encode(sample(type_name, seed=i))
            assert deserialize_message(bytes(pkt.payload), rclpy_class(type_name)) == \
                deserialize_message(c.encode(sample(type_name, seed=i)), rclpy_class(type_name))
    # wstring messages cross as bytes (a0py does not decode them)
    wstrings = read_all("ros/types/WStrings", 3)
    assert deserialize_message(bytes(wstrings[2].payload), rclpy_class("test_msgs/msg/WStrings")) == \
        rclpy_class("test_msgs/msg/WStrings")()


def test_camera_images_read_as_arrays_without_copy(bridge_root, nodes):
    seen = []

    def on_image(pkt):  # on the dispatcher thread, while the camera runs
        pixels = pkt.array()
        seen.append((pixels.shape, pixels.dtype, int(pixels[0, 0, 0]), int(pixels[-1, -1, -1]),
                     pixels.flags.owndata, pkt.decode().header.stamp.sec))

    topic = a0py.Topic("ros/camera", size="16M")  # a reader's ring of 17 frames
    with a0py.Subscriber(topic, on_image, init=a0py.INIT_OLDEST):
        camera = nodes("camera", "/ros/camera", 30, "--hz", 30)
        camera.wait("done")
        wait_until(lambda: len(seen) >= 30, f"30 images ({len(seen)} so far, {bridge_root.status()})")
    assert seen == [((480, 640, 3), np.uint8, i, i, False, i) for i in range(30)]
    assert bridge_root.status()["imports"]["ros/camera"]["lost"] == 0


def test_transient_local_message_reaches_a_reader_that_starts_later(bridge_root, nodes):
    talker = nodes("talk", "std_msgs/msg/String", "/ros/latched", 1, "--transient")
    talker.wait("done")
    packets = read_all("ros/latched", 1)  # the bridge subscribed after the publish
    assert packets[0].decode().data == sample("std_msgs/msg/String", seed=0)["data"]


def test_imu_and_every_field_type_exported_unchanged_in_order(bridge_root, nodes, tmp_path):
    types = ["sensor_msgs/msg/Imu"] + [f"test_msgs/msg/{t}" for t in TEST_MSGS]
    # Encoded before the listener starts: under load, encoding while it waited took longer
    # than its wait (the flake this test once was).
    sent = {f"/a0/out/{t.split('/')[-1]}": [codec(t).encode(sample(t, seed=i)) for i in range(50)]
            for t in types}
    listener = nodes("listen", ",".join(types), "/a0/out", 50, tmp_path / "got.bin")
    listener.wait("ready")
    pubs = [a0py.Publisher(f"a0/out/{t.split('/')[-1]}", schema=Schema.ros2(t)) for t in types]
    try:
        # both ends matched: the bridge's publishers know the listener, the listener them
        wait_until(lambda: all(matched(bridge_root, f"a0/out/{t.split('/')[-1]}") for t in types),
                   "the listener to match every export")
        listener.wait("matched")
        for i in range(50):
            for pub, payloads in zip(pubs, sent.values()):
                pub.pub(payloads[i])
        listener.wait("done")
    finally:
        for pub in pubs:
            pub.close()
    assert read_listened(tmp_path / "got.bin") == sent


def test_foxglove_raw_image_is_published_as_sensor_msgs_image(bridge_root, nodes, tmp_path):
    pytest.importorskip("foxglove_schemas_protobuf")
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import Image

    listener = nodes("listen", "sensor_msgs/msg/Image", "/a0/fox", 3, tmp_path / "got.bin")
    listener.wait("ready")
    with a0py.Publisher("a0/fox") as pub:
        pub.pub_image(np.zeros((48, 64, 3), np.uint8), "rgb8")  # declares the schema
        wait_until(lambda: matched(bridge_root, "a0/fox"), "the listener")
        for i in range(3):
            pub.pub_image(np.full((48, 64, 3), i + 1, np.uint8), "rgb8", frame_id="cam",
                          timestamp=(i + 7) * 1_000_000_000)
        listener.wait("done")
    got = [deserialize_message(d, Image) for d in read_listened(tmp_path / "got.bin")["/a0/fox"]]
    assert [(m.height, m.width, m.encoding, m.step, m.header.frame_id) for m in got[-3:]] == \
        [(48, 64, "rgb8", 192, "cam")] * 3
    assert [m.header.stamp.sec for m in got[-3:]] == [7, 8, 9]
    assert [bytes(m.data) for m in got[-3:]] == [bytes([i + 1]) * (48 * 64 * 3) for i in range(3)]


def test_bad_exports_are_refused_in_one_line_or_counted(bridge_root):
    with a0py.Publisher("a0/json") as pub:
        pub.pub_json({"x": 1})
    with a0py.Publisher("a0/bad-name", schema=Schema.ros2("std_msgs/msg/String")) as pub:
        pub.pub(codec("std_msgs/msg/String").encode({"data": "x"}))
    with a0py.Publisher("a0/garbled", schema=Schema.ros2("sensor_msgs/msg/Imu")) as pub:
        wait_until(lambda: "a0/garbled" in bridge_root.status()["exports"], "the export")
        pub.pub(b"\x00\x01\x00\x00\x07")  # malformed CDR
        pub.pub(codec("sensor_msgs/msg/Imu").encode({}))
    wait_until(lambda: bridge_root.status()["exports"]["a0/garbled"]["exported"] == 1, "the good one")
    status = bridge_root.status()
    assert status["exports"]["a0/garbled"]["corrupt"] == 1
    assert "jsonschema" in status["refused"]["export a0/json"]
    assert "not a valid ROS 2 topic name" in status["refused"]["export a0/bad-name"]
    assert "seq 1 dropped: not a CDR sensor_msgs/msg/Imu" in status["refused"]["export a0/garbled"]
    wait_until(lambda: (read_status(bridge_root.root) or {}).get("refused", {}).get("export a0/json"),
               "the status topic")


def test_recording_of_imported_topics_reads_in_rosbags_and_mcap_ros2_support(bridge_root, nodes,
                                                                            tmp_path):
    from mcap.reader import make_reader
    from mcap_ros2.reader import read_ros2_messages
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from a0py.recording import Recorder

    talker = nodes("talk", "sensor_msgs/msg/Imu", "/ros/rec", 20)
    talker.wait("done")
    read_all("ros/rec", 20)
    Recorder(["ros/rec"], out=tmp_path, init="oldest").run(1.0)
    (path,) = [p for p in tmp_path.iterdir() if p.suffix == ".mcap"]
    want = [sample("sensor_msgs/msg/Imu", seed=i) for i in range(20)]
    # No topic filter: the whole recording decodes, the headers channel too
    # (CDR, a0py_msgs/msg/PacketHeaders, beside its ROS 2 payloads).
    with open(path, "rb") as f:
        decoded = list(read_ros2_messages(f))
    by_mcap_ros2 = [m.ros_msg for m in decoded if not m.channel.topic.startswith(HEADERS_TOPIC_PREFIX)]
    heads = [m.ros_msg for m in decoded if m.channel.topic.startswith(HEADERS_TOPIC_PREFIX)]
    assert {m.channel.topic for m in decoded} == {"ros/rec", HEADERS_TOPIC_PREFIX + "ros/rec"}
    assert len(heads) == 20 and [h.transport_seq for h in heads] == list(range(1, 21))
    store = get_typestore(Stores.EMPTY)
    by_rosbags, rosbags_heads = [], []
    with open(path, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages():
            if schema.name not in store.fielddefs:
                store.register(get_types_from_msg(schema.data.decode(), schema.name))
            got = store.deserialize_cdr(message.data, schema.name)
            (rosbags_heads if channel.topic.startswith(HEADERS_TOPIC_PREFIX) else by_rosbags).append(got)
    assert [h.transport_seq for h in rosbags_heads] == [h.transport_seq for h in heads]
    for got in (by_mcap_ros2, by_rosbags):
        assert [m.header.frame_id for m in got] == [w["header"]["frame_id"] for w in want]
        assert [m.linear_acceleration.x for m in got] == [w["linear_acceleration"]["x"] for w in want]
        assert [list(m.orientation_covariance) for m in got] == [w["orientation_covariance"] for w in want]


@pytest.mark.parametrize("kwargs, match", [
    ({"namespace": "robot 1"}, "not a valid ROS 2 namespace"),
    ({"node_name": "a-b"}, "not a valid ROS 2 node name"),
    ({"domain_id": 300}, "domain_id must be an int from 0 to 232"),
    ({"exports": [""]}, "exports: a discovery glob may not be empty"),
    ({"export_qos": {"a/*": "fast"}}, "'fast' is not one of"),
])
def test_bad_configuration_is_refused_naming_it(kwargs, match):
    with pytest.raises(Ros2ConfigError, match=match):
        Ros2Bridge(**kwargs)


def test_status_is_kept_in_the_root_as_plain_json(bridge_root):
    with a0py.Publisher("a0/status/imu", schema=Schema.ros2("sensor_msgs/msg/Imu")):
        wait_until(lambda: (read_status(bridge_root.root) or {}).get("exports", {}).get("a0/status/imu"),
                   "the status topic")
    doc = read_status(bridge_root.root)
    assert doc["exports"]["a0/status/imu"]["ros"] == "/a0/status/imu"
    assert doc["running"] is True and doc["pid"] == os.getpid() and doc["id"] == bridge_root.id
    assert json.dumps(doc)  # plain JSON


def test_exported_topics_keep_the_size_their_publisher_creates_them_with(bridge_root):
    # The bridge opens a topic as soon as discovery sees its file: it must not be the one
    # that sizes it (a 6 MB camera frame did not fit the 4M ring it once made).
    made = run_python("""
        import a0py, time
        from a0py.proto.topic import topic_arena
        pubs = [a0py.Publisher(a0py.Topic(f"a0/sized/s{i}", size="32M"),
                               schema=a0py.Schema.ros2("std_msgs/msg/String")) for i in range(8)]
        time.sleep(0.5)  # the bridge opens them meanwhile
        print([topic_arena(f"a0/sized/s{i}", "pubsub").size for i in range(8)])
    """)
    assert made.stdout.strip() == str([32 << 20] * 8), made.stderr
    wait_until(lambda: all(f"a0/sized/s{i}" in bridge_root.status()["exports"] for i in range(8)),
               "the exports")
