"""``a0py play`` of recordings a0py did not write, with real processes: the
player runs as the ``a0py`` command in a child process, subscribers read
the live topics here. Each foreign channel plays into the topic named after
its channel topic, its messages' bytes intact, the recorded log time,
publish time and sequence in headers, and the channel's schema declared on
the topic where an a0py topic carries it (ROS 2 ``ros2msg``, protobuf, JSON
Schema); a channel without one, or with one a0py topics do not carry, plays
raw bytes and says so."""

import json

import pytest
from helpers import foreign
from helpers.cli import a0, assert_fails_cleanly

import a0py
from a0py.proto import topic_schema
from a0py.recording.player import foreign_topic_name

pytestmark = pytest.mark.slow


def _drain(sub):
    out = []
    while (pkt := sub.read()) is not None:
        out.append(pkt)
    return out


def _subscribe(names):
    return {n: a0py.SubscriberSync(n, init=a0py.INIT_OLDEST) for n in names}


def _check_replayed(pkts, items, channel_topic):
    assert [bytes(p.payload) for p in pkts] == [m[3] for m in items]
    assert [int(p.headers["a0_replay_log_time"]) for p in pkts] == [m[0] for m in items]
    assert [int(p.headers["a0_replay_publish_time"]) for p in pkts] == [m[1] for m in items]
    assert [int(p.headers["a0_replay_sequence"]) for p in pkts] == [m[2] for m in items]
    assert {p.headers["a0_replay_channel"] for p in pkts} == {channel_topic}


def test_play_of_a_ros2_mcap_file_publishes_cdr_bytes_with_their_ros2msg_schema(root, tmp_path):
    w = foreign.write_ros2_mcap(str(tmp_path / "ros.mcap"), n=150)
    subs = _subscribe(["back/imu", "back/chatter"])
    r = a0("play", w.path, "--rate", "0", "--prefix", "back")
    assert r.returncode == 0, r.err
    assert f"published {w.count()} frames" in r.out
    got = {n: _drain(s) for n, s in subs.items()}
    _check_replayed(got["back/imu"], w.messages["/imu"], "/imu")
    _check_replayed(got["back/chatter"], w.messages["/chatter"], "/chatter")
    s = topic_schema(a0py.Topic("back/imu"))
    assert (s.name, s.encoding, s.message_encoding, s.data) == (
        foreign.IMU_TYPE, "ros2msg", "cdr", foreign.IMU_MSGDEF.encode())
    assert topic_schema(a0py.Topic("back/chatter")).name == "std_msgs/msg/String"
    assert "a0_replay_message_encoding" not in got["back/imu"][0].headers
    # Published in log-time order across the two channels.
    both = sorted(got["back/imu"] + got["back/chatter"], key=lambda p: int(p.headers["a0_time_mono"]))
    logs = [int(p.headers["a0_replay_log_time"]) for p in both]
    assert logs == sorted(logs)


def test_play_of_a_rosbag2_bag_follows_its_files_in_metadata_order(root, tmp_path):
    w = foreign.write_rosbag2_split(tmp_path / "bag", names=("run_9.mcap", "run_10.mcap"), n=40)
    subs = _subscribe(["imu"])
    r = a0("play", w.path, "--rate", "0")
    assert r.returncode == 0, r.err
    pkts = _drain(subs["imu"])
    assert [bytes(p.payload) for p in pkts] == [m[3] for m in w.messages["/imu"]]
    assert [p.headers["a0_replay_source"] for p in pkts] == ["run_9.mcap"] * 40 + ["run_10.mcap"] * 40
    assert topic_schema(a0py.Topic("imu")).encoding == "ros2msg"


def test_play_of_protobuf_json_and_raw_channels(root, tmp_path):
    fx = foreign.write_foxglove_mcap(str(tmp_path / "fx.mcap"), n=20)
    js = foreign.write_mcap_json(str(tmp_path / "js.mcap"), n=30)
    raw = foreign.write_mcap_raw(str(tmp_path / "raw.mcap"), n=25)
    subs = _subscribe(["log", "tf", "ev/json", "raw/blob"])
    for path in (fx.path, js.path, raw.path):
        r = a0("play", path, "--rate", "0")
        assert r.returncode == 0, r.err
    got = {n: _drain(s) for n, s in subs.items()}
    _check_replayed(got["log"], fx.messages["/log"], "/log")
    _check_replayed(got["ev/json"], js.messages["/ev/json"], "/ev/json")
    _check_replayed(got["raw/blob"], raw.messages["/raw/blob"], "/raw/blob")
    assert topic_schema(a0py.Topic("log")).encoding == "protobuf"
    assert got["log"][3].decode().message == "line 3"  # the schema is usable: the subscriber decodes it
    assert topic_schema(a0py.Topic("tf")).name == "foxglove.FrameTransform"
    sj = topic_schema(a0py.Topic("ev/json"))
    assert (sj.name, sj.encoding) == ("ev.Event", "jsonschema")
    assert json.loads(bytes(got["ev/json"][7].payload)) == foreign.json_value(7)
    assert topic_schema(a0py.Topic("raw/blob")) is None
    assert {p.headers["a0_replay_message_encoding"] for p in got["raw/blob"]} == {"application/octet-stream"}


def test_a_schema_a0py_topics_do_not_carry_plays_raw_bytes_and_says_so(root, tmp_path):
    bare = ("ev.Bare", "jsonschema", b'{"type": "object"}')  # no properties: a0py's typed topics refuse it
    w = foreign.write_mcap_channels(str(tmp_path / "odd.mcap"), [
        ("/bare", "json", bare, [b'{"a": 1}', b'{"a": 2}']),
        ("/custom", "x-mine", ("my.Type", "x-schema", b"whatever"), [b"\x01\x02", b"\x03"]),
    ])
    subs = _subscribe(["bare", "custom"])
    r = a0("play", w.path, "--rate", "0")
    assert r.returncode == 0, r.err
    assert "a0py: bare: channel '/bare': schema 'ev.Bare' (jsonschema)" in r.err and "raw bytes" in r.err
    assert "a0py: custom: channel '/custom': schema 'my.Type' (x-schema)" in r.err
    got = {n: _drain(s) for n, s in subs.items()}
    _check_replayed(got["bare"], w.messages["/bare"], "/bare")
    _check_replayed(got["custom"], w.messages["/custom"], "/custom")
    assert topic_schema(a0py.Topic("bare")) is None and topic_schema(a0py.Topic("custom")) is None
    assert got["custom"][0].headers["a0_replay_message_encoding"] == "x-mine"


def test_play_topics_and_remap_take_the_mapped_names(root, tmp_path):
    w = foreign.write_ros2_mcap(str(tmp_path / "ros.mcap"), n=20)
    subs = _subscribe(["sim/imu", "chatter"])
    r = a0("play", w.path, "--rate", "0", "--topics", "/imu", "--remap", "imu:sim/imu")
    assert r.returncode == 0, r.err
    assert len(_drain(subs["sim/imu"])) == 20 and _drain(subs["chatter"]) == []
    missing = a0("play", w.path, "--rate", "0", "--topics", "nope")
    assert_fails_cleanly(missing, 1, "no topic 'nope' in the recording")


def test_two_channels_that_would_share_a_topic_with_different_schemas_are_refused(root, tmp_path):
    w = foreign.write_mcap_channels(str(tmp_path / "clash.mcap"), [
        ("/a b", "json", None, [b"{}"]),
        ("/a_b", "cdr", ("std_msgs/msg/String", "ros2msg", b"string data\n"), [b"\x00\x01\x00\x00\x01\x00\x00\x00\x00"]),
    ])
    r = a0("play", w.path, "--rate", "0")
    assert_fails_cleanly(r, 1, "'/a b'", "'/a_b'", "topic 'a_b'", "--topics")


@pytest.mark.parametrize(("channel", "topic"), [
    ("/imu", "imu"), ("imu", "imu"), ("//robot//cam/", "robot/cam"), ("/robot 1/cam:left", "robot_1/cam_left"),
    ("/.hidden/-x", "_.hidden/_-x"), ("/ü", "_")])
def test_foreign_topic_names(channel, topic):
    assert foreign_topic_name(channel) == topic


def test_a_channel_topic_that_leaves_no_name_is_an_error():
    from a0py.recording import RecordingOptionError

    with pytest.raises(RecordingOptionError, match="no a0py topic name"):
        foreign_topic_name("///")


def test_a_channel_without_a_name_is_refused_unless_topics_leave_it_out(root, tmp_path):
    from a0py.recording import Player, RecordingOptionError

    w = foreign.write_mcap_channels(str(tmp_path / "odd.mcap"), [
        ("/", "json", None, [b'{"a": 1}']), ("/ok", "json", None, [b'{"b": 2}', b'{"b": 3}'])])
    with pytest.raises(RecordingOptionError, match="channel topic '/'"):
        Player(w.path, rate=0)
    sub = a0py.SubscriberSync("ok", init=a0py.INIT_OLDEST)
    with Player(w.path, rate=0, topics=["ok"]) as player:
        assert player.run().frames == 2
    assert [bytes(p.payload) for p in _drain(sub)] == [b'{"b": 2}', b'{"b": 3}']
