"""rosbag2 bag directories as input (``expand_paths``, used by Spark
planning, ``bag info``, ``play`` and the view): bags written by ``rosbags``,
their MCAP files in the metadata's order, bags below a directory each in
turn, and the bags a0py cannot read (sqlite3 storage, rosbag2's own
compression, a file missing) refused with an error naming the directory and
the conversion that helps. Also what ``rosbags`` makes of a0py's own
recordings (docs/recording.md says it)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import foreign

from a0py.recording import RecordingFormatError, RecordingOptionError, bag_info
from a0py.recording import rosbag2 as rb2
from a0py.recording.paths import expand_paths
from a0py.recording.reader import read_layout

pytest.importorskip("rosbags")  # the ros extra (in the test extra): a missing one skips only these


def test_a_bag_directory_gives_its_mcap_files_in_the_metadata_order_not_name_order(tmp_path):
    w = foreign.write_rosbag2_split(tmp_path / "bag", names=("run_9.mcap", "run_10.mcap"))
    assert sorted(os.path.basename(f) for f in w.files) == ["run_10.mcap", "run_9.mcap"]  # name order differs
    assert expand_paths(str(tmp_path / "bag")) == w.files
    assert expand_paths(str(tmp_path / "bag" / "metadata.yaml")) == w.files
    assert expand_paths([str(tmp_path / "bag"), w.files[1]]) == w.files  # each file once


def test_a_directory_of_bags_gives_each_bags_files_and_loose_files_sorted_by_path(tmp_path):
    fleet = tmp_path / "fleet"
    a = foreign.write_rosbag2_split(fleet / "robot_a", names=("a_2.mcap", "a_1.mcap"), n=5)
    b = foreign.write_rosbag2(fleet / "robot_b", n=5)
    loose = foreign.write_mcap_raw(str(fleet / "extra.mcap"), n=3)
    nested = foreign.write_rosbag2(fleet / "site" / "robot_c", n=5)
    got = expand_paths(str(fleet))
    assert got == [loose.path, *a.files, str(fleet / "robot_b" / "robot_b.mcap"),
                   str(fleet / "site" / "robot_c" / "robot_c.mcap")]
    assert b.count() == nested.count() == 5
    assert expand_paths(str(fleet / "robot_*")) == [*a.files, str(fleet / "robot_b" / "robot_b.mcap")]


def test_bag_info_of_a_bag_counts_what_rosbags_wrote(tmp_path):
    w = foreign.write_rosbag2(tmp_path / "bag", n=40, topics=("/imu", "/imu2"))
    info = bag_info(str(tmp_path / "bag"))
    assert [os.path.basename(f["path"]) for f in info["files"]] == ["bag.mcap"]
    assert {(c["topic"], c["type"], c["serialization_format"], c["count"]) for c in info["channels"]} == {
        (t, foreign.IMU_TYPE, "cdr", w.count(t)) for t in ("/imu", "/imu2")}
    assert info["messages"] == w.count() == 80
    assert info["start"] == foreign.T0 and info["end"] == foreign.T0 + 39 * 10_000_000


def test_a_bag_stored_in_sqlite3_is_refused_naming_the_directory_and_the_conversion(tmp_path):
    bag = foreign.write_rosbag2_sqlite(tmp_path / "sq")
    with pytest.raises(RecordingFormatError) as e:
        expand_paths(bag)
    msg = str(e.value)
    assert bag in msg and "'sqlite3'" in msg and "sq.db3" in msg and "--dst-storage mcap" in msg
    with pytest.raises(RecordingFormatError, match="sqlite3"):
        bag_info(str(tmp_path))  # also when found below a directory


def test_the_conversion_the_sqlite3_error_names_gives_a_bag_a0py_reads(tmp_path):
    bag = foreign.write_rosbag2_sqlite(tmp_path / "sq", n=7)
    out = tmp_path / "converted"
    r = subprocess.run([sys.executable, "-m", "rosbags.convert", "--src", bag, "--dst", str(out),
                        "--dst-storage", "mcap"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    info = bag_info(str(out))
    assert [(c["topic"], c["type"], c["count"]) for c in info["channels"]] == [
        ("/chatter", "std_msgs/msg/String", 7)]


@pytest.mark.parametrize("mode", ["file", "message"])
def test_a_bag_with_rosbag2_compression_is_refused_naming_the_directory(tmp_path, mode):
    bag = foreign.write_rosbag2_compressed(tmp_path / "cz", mode=mode)
    with pytest.raises(RecordingFormatError) as e:
        expand_paths(bag)
    msg = str(e.value)
    assert bag in msg and f"compression_mode {mode!r}" in msg and "zstd" in msg and "rosbags-convert" in msg


def test_a_bag_missing_a_listed_file_is_refused_naming_it(tmp_path):
    w = foreign.write_rosbag2_split(tmp_path / "bag", names=("p_0.mcap", "p_1.mcap"), n=3)
    os.remove(w.files[1])
    with pytest.raises(RecordingFormatError, match=r"lists p_1\.mcap, not in the directory"):
        expand_paths(str(tmp_path / "bag"))


def test_a_listed_path_cannot_leave_the_bag_directory(tmp_path):
    bag = tmp_path / "bag"
    foreign.write_rosbag2(bag, n=3)
    outside = foreign.write_mcap_raw(str(tmp_path / "outside.mcap"), n=2)
    text = (bag / "metadata.yaml").read_text().replace("- bag.mcap", "- ../outside.mcap")
    (bag / "metadata.yaml").write_text(text)
    with pytest.raises(RecordingFormatError, match=r"outside\.mcap, not in the directory"):
        expand_paths(str(bag))
    assert os.path.exists(outside.path)


def test_another_tools_metadata_yaml_leaves_a_directory_ordinary(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "metadata.yaml").write_text("camera: {fps: 30}\n")
    w = foreign.write_mcap_raw(str(d / "x.mcap"), n=2)
    assert expand_paths(str(d)) == [w.path]


def test_metadata_that_does_not_parse_is_an_error_naming_the_file(tmp_path):
    bag = tmp_path / "bag"
    foreign.write_rosbag2(bag, n=3)
    (bag / "metadata.yaml").write_text("rosbag2_bagfile_information:\n  version: [unclosed\n")
    with pytest.raises(RecordingFormatError, match=r"metadata\.yaml"):
        expand_paths(str(bag))
    with pytest.raises(RecordingOptionError):
        expand_paths(str(tmp_path / "nothing_here"))


# A metadata.yaml laid out as rosbag2's C++ writer (yaml-cpp) writes it: a
# list indented under its key, double-quoted empty strings, QoS as a quoted
# multi-line string, a comment. Written here for the test, field by field.
YAML_CPP_STYLE = '''\
rosbag2_bagfile_information:
  version: 5
  storage_identifier: mcap
  duration:
    nanoseconds: 2500000000
  starting_time:
    nanoseconds_since_epoch: 1790000000000000000
  message_count: 12
  topics_with_message_count:
    - topic_metadata:
        name: /tf
        type: tf2_msgs/msg/TFMessage
        serialization_format: cdr
        offered_qos_profiles: "- history: 3\\n  depth: 0\\n  reliability: 1\\n"
      message_count: 12
  compression_format: ""
  compression_mode: ""   # none
  relative_file_paths:
    - drive_0.mcap
    - "drive_1.mcap"
  files:
    - path: drive_0.mcap
      message_count: 12
'''


def _ruamel_fields(text):
    from ruamel.yaml import YAML

    doc = YAML(typ="safe", pure=True).load(text)["rosbag2_bagfile_information"]
    return {k: doc[k] for k in rb2.FIELDS if k in doc}


def test_the_small_yaml_reader_agrees_with_ruamel_on_both_writers_files(tmp_path):
    w = foreign.write_rosbag2_split(tmp_path / "bag", names=("b_1.mcap", "b_0.mcap"), n=2)
    for text in ((Path(w.path) / "metadata.yaml").read_text(), YAML_CPP_STYLE,
                 YAML_CPP_STYLE.replace("    - drive_0.mcap\n    - \"drive_1.mcap\"\n",
                                        "  - drive_0.mcap\n  - 'drive_1.mcap'\n"),
                 YAML_CPP_STYLE.replace("    - drive_0.mcap\n    - \"drive_1.mcap\"\n", "")
                 .replace("relative_file_paths:", "relative_file_paths: [drive_0.mcap, drive_1.mcap]")):
        assert rb2.parse_metadata_text(text) == _ruamel_fields(text)
    assert rb2.parse_metadata_text(YAML_CPP_STYLE)["relative_file_paths"] == ["drive_0.mcap", "drive_1.mcap"]


def test_the_small_yaml_reader_refuses_what_it_does_not_read(tmp_path):
    with pytest.raises(RecordingFormatError, match="line 3"):
        rb2.parse_metadata_text("rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: &s mcap\n")
    with pytest.raises(RecordingFormatError, match="no rosbag2_bagfile_information"):
        rb2.parse_metadata_text("other: 1\n")


def test_the_bag_reads_without_a_yaml_library(tmp_path, monkeypatch):
    w = foreign.write_rosbag2_split(tmp_path / "bag", names=("z.mcap", "a.mcap"), n=2)
    monkeypatch.setattr(rb2, "_load_with_library", lambda text, path: None)
    assert expand_paths(w.path) == w.files


def test_rosbags_does_not_open_a0py_recordings(tmp_path):
    """What docs/recording.md says of ROS 2 tools: rosbags' reader needs the
    MCAP profile ``ros2`` (a0py writes none), and its MCAP reader also
    refuses the schema encoding of a0py's packet channels, which every a0py
    segment has; a ``metadata.yaml`` beside the segments does not change it."""
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag2 import Reader, ReaderError

    import a0py
    from a0py.recording import SegmentWriter

    bag = tmp_path / "rec"
    bag.mkdir()
    seg = bag / "a0py_00000.mcap"
    cdr = b"\x00\x01\x00\x00\x06\x00\x00\x00hello\x00"
    with SegmentWriter(seg) as w:
        w.add_typed_topic("chatter", a0py.Schema("std_msgs/msg/String", "ros2msg", "string data\n"))
        w.write_frames("chatter", [a0py.Packet({}, cdr).to_bytes()] * 3, 1000, seqs=[1, 2, 3])
    assert read_layout(str(seg)).profile == ""
    (bag / "metadata.yaml").write_text(
        "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: mcap\n"
        "  relative_file_paths: [a0py_00000.mcap]\n  duration: {nanoseconds: 0}\n"
        "  starting_time: {nanoseconds_since_epoch: 0}\n  message_count: 3\n"
        "  topics_with_message_count:\n  - message_count: 3\n    topic_metadata: {name: chatter, "
        "type: std_msgs/msg/String, serialization_format: cdr, offered_qos_profiles: []}\n"
        "  compression_format: ''\n  compression_mode: ''\n")
    for path in (bag, seg):
        with pytest.raises(ReaderError, match="Profile is not ros2"), Reader(path):
            pass
    with pytest.raises(AnyReaderError, match="Profile is not ros2"), AnyReader([bag]):
        pass
    # a0py reads the same directory as a bag (its metadata lists the segment).
    assert expand_paths(str(bag)) == [str(seg)]
