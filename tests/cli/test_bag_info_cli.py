"""``a0py bag info`` of foreign recordings, as a user runs it: the
``ros2 bag info`` fields for an MCAP file and a rosbag2 bag, ``--json``
with the same facts, and a bag a0py cannot read refused in one line."""

import json

from helpers import foreign
from helpers.cli import a0, assert_fails_cleanly


def test_bag_info_of_a_ros2_bag_prints_ros2_bag_infos_fields(tmp_path):
    w = foreign.write_rosbag2(tmp_path / "bag", n=25, topics=("/imu", "/imu_rear"))
    r = a0("bag", "info", w.path)
    assert r.returncode == 0, r.err
    labels = [line[:19].rstrip() for line in r.out.splitlines() if line[:1] != " "]
    assert labels == ["Files:", "Bag size:", "Storage id:", "Duration:", "Start:", "End:", "Messages:",
                      "Compression:", "Topic information:"]
    assert "Files:             bag.mcap (" in r.out and "Messages:          50\n" in r.out
    assert "Duration:          0.240 s" in r.out
    for t in ("/imu", "/imu_rear"):
        assert f"Topic: {t} | Type: sensor_msgs/msg/Imu | Count: 25 | Serialization Format: cdr" in r.out


def test_bag_info_json_gives_the_same_facts(tmp_path):
    w = foreign.write_ros2_mcap(str(tmp_path / "ros.mcap"), n=60)
    raw = foreign.write_mcap_raw(str(tmp_path / "raw.mcap"), n=7)
    r = a0("bag", "info", str(tmp_path), "--json")
    assert r.returncode == 0, r.err
    facts = json.loads(r.out)
    got = {(c["topic"], c["type"], c["serialization_format"], c["count"], c["decoded"]) for c in facts["channels"]}
    assert got == {("/imu", foreign.IMU_TYPE, "cdr", 60, True), ("/chatter", "std_msgs/msg/String", "cdr", 6, True),
                   ("/raw/blob", None, "application/octet-stream", 7, False)}
    assert facts["messages"] == w.count() + raw.count()
    assert [f["path"] for f in facts["files"]] == [raw.path, w.path]
    assert facts["files"][1]["profile"] == "ros2"


def test_bag_info_of_a_sqlite3_bag_fails_in_one_line_naming_it(tmp_path):
    bag = foreign.write_rosbag2_sqlite(tmp_path / "sq")
    r = a0("bag", "info", bag)
    assert_fails_cleanly(r, 1, bag, "sqlite3", "rosbags-convert")
