"""A typed topic's headers channel in the family of its payloads: protobuf
and ROS 2 (CDR) topics recorded by ``python -m a0py record`` while another
process published them, then read whole by the loops each family documents
(the ``mcap`` package's ``iter_decoded_messages`` with its factories,
mcap-ros2-support's ``read_ros2_messages``, the Go ``mcap`` CLI, rosbags),
and by a0py's readers the same way as a recording whose headers channels are
a0py packets (the format recordings had before)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid

import mcap_protobuf.decoder as mcap_protobuf
import pytest
from helpers.typed_segments import new_and_old_segments
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory as Ros2DecoderFactory
from mcap_ros2.reader import read_ros2_messages
from test_record_typed import _env, _go_mcap

import a0py
from a0py.recording import DecoderFactory
from a0py.recording.format import HEADERS_TOPIC_PREFIX, join_packet
from a0py.recording.headers import FORMAT_CDR, FORMAT_PROTOBUF, cut_packet
from a0py.spark import read_table

N = 12
PROTOBUF_TOPICS = ["hf/log"]
ROS2_TOPICS = ["hf/ros"]
OTHER_TOPICS = ["hf/json", "hf/raw"]
pytestmark = pytest.mark.slow

PUBLISH = textwrap.dedent("""
    import sys, a0py
    from foxglove_schemas_protobuf.Log_pb2 import Log
    start, n = int(sys.argv[1]), int(sys.argv[2])
    log, js, raw = (a0py.Publisher(t) for t in ("hf/log", "hf/json", "hf/raw"))
    ros = a0py.Publisher("hf/ros", schema=a0py.Schema.ros2("std_msgs/msg/String"))
    for i in range(start, start + n):
        h = {"i": str(i)}
        log.pub(Log(message=f"hello {i}", name="node"), headers=h)
        js.pub_json({"i": i}, headers=h)
        raw.pub(b"raw%d" % i, headers=h)
        ros.pub({"data": f"ros {i}"}, headers=h)
""")


def _publish(start, n):
    r = subprocess.run([sys.executable, "-c", PUBLISH, str(start), str(n)], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """{name: path} of three recordings of the same frames, made at once by
    three ``a0py record`` processes: ``protobuf`` (the protobuf topic only),
    ``ros2`` (the ROS 2 topic only), ``mixed`` (every topic)."""
    from a0py.proto import topic as tp

    tmp = tmp_path_factory.mktemp("families")
    spec = f"shm:a0pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    saved = {k: os.environ.get(k) for k in ("A0PY_ROOT", "A0PY_ARENA_SIZE")}
    os.environ.update(A0PY_ROOT=spec, A0PY_ARENA_SIZE="16M")
    sets = {"protobuf": PROTOBUF_TOPICS, "ros2": ROS2_TOPICS, "mixed": PROTOBUF_TOPICS + ROS2_TOPICS + OTHER_TOPICS}
    procs = {}
    try:
        _publish(0, 1)  # makes the topics and declares their schemas
        for name, topics in sets.items():
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "a0py", "record", *topics, "--out", str(tmp / name), "--no-progress"],
                env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in procs.values():
            line = p.stderr.readline()  # printed once the topics are open
            assert "recording to" in line, line
        _publish(1, N)
        for p in procs.values():
            p.send_signal(signal.SIGINT)  # each drains what the topics hold, then closes its file
        for p in procs.values():
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        for name in tp.list_topics(spec):
            tp.unlink_topic(tp.Topic(name, root=spec))
        tp.close_arenas()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {name: next((tmp / name).glob("*.mcap")) for name in sets}


def _decoded(path, factories):
    with open(path, "rb") as f:
        return [(channel, message, value) for _, channel, message, value in
                make_reader(f, decoder_factories=factories).iter_decoded_messages()]


def _assert_headers(value, sequence, publish_time):
    """A decoded headers message: its fields are the packet's."""
    assert value.transport_seq == sequence
    assert value.time_wall == publish_time
    assert value.flags == 1 and len(value.id) == 16 and len(value.writer_id) == 16
    assert value.writer_seq == sequence - 1 and value.time_mono > 0


def test_protobuf_only_recording_decodes_whole_with_the_protobuf_factory(recordings):
    got = _decoded(recordings["protobuf"], [mcap_protobuf.DecoderFactory()])
    by_topic = {}
    for channel, message, value in got:
        by_topic.setdefault(channel.topic, []).append((message, value))
    assert sorted(by_topic) == [HEADERS_TOPIC_PREFIX + "hf/log", "hf/log"]
    assert [v.message for _, v in by_topic["hf/log"]] == [f"hello {i}" for i in range(1, N + 1)]
    headers = by_topic[HEADERS_TOPIC_PREFIX + "hf/log"]
    assert len(headers) == N
    for m, v in headers:
        _assert_headers(v, m.sequence, m.publish_time)
        assert type(v).DESCRIPTOR.full_name == "a0py.PacketHeaders" and v.header_count == 1


def test_ros2_only_recording_decodes_whole_with_read_ros2_messages(recordings):
    got = list(read_ros2_messages(str(recordings["ros2"])))
    by_topic = {}
    for m in got:
        by_topic.setdefault(m.channel.topic, []).append(m)
    assert sorted(by_topic) == [HEADERS_TOPIC_PREFIX + "hf/ros", "hf/ros"]
    assert [m.ros_msg.data for m in by_topic["hf/ros"]] == [f"ros {i}" for i in range(1, N + 1)]
    headers = by_topic[HEADERS_TOPIC_PREFIX + "hf/ros"]
    assert len(headers) == N
    for m in headers:
        _assert_headers(m.ros_msg, m.sequence_count, m.publish_time_ns)
        assert m.schema.name == "a0py_msgs/msg/PacketHeaders" and m.channel.message_encoding == "cdr"
    with open(recordings["ros2"], "rb") as f:
        raw = {}
        for _, channel, message in make_reader(f).iter_messages():
            raw.setdefault(channel.topic, []).append(message)
    for h, p in zip(raw[HEADERS_TOPIC_PREFIX + "hf/ros"], raw["hf/ros"], strict=True):
        whole = a0py.Packet.from_bytes(join_packet(cut_packet(FORMAT_CDR, h.data), p.data))
        assert whole.headers["i"] == str(h.sequence - 1) and whole.payload == p.data


def test_mixed_recording_decodes_whole_with_a0py_protobuf_and_ros2_factories(recordings):
    got = _decoded(recordings["mixed"], [DecoderFactory(), mcap_protobuf.DecoderFactory(), Ros2DecoderFactory()])
    by_topic = {}
    for channel, message, value in got:
        by_topic.setdefault(channel.topic, []).append((channel, message, value))
    with open(recordings["mixed"], "rb") as f:
        counts = make_reader(f).get_summary().statistics.channel_message_counts
    assert len(got) == sum(counts.values())
    assert [v.message for _, _, v in by_topic["hf/log"]] == [f"hello {i}" for i in range(1, N + 1)]
    assert [v.data for _, _, v in by_topic["hf/ros"]] == [f"ros {i}" for i in range(1, N + 1)]
    assert [v for _, _, v in by_topic["hf/json"]] == [{"i": i} for i in range(1, N + 1)]
    raws = by_topic["hf/raw"]
    assert [v.payload for _, _, v in raws] == [b"raw%d" % i for i in range(1, N + 1)]
    assert [v.headers["i"] for _, _, v in raws] == [str(i) for i in range(1, N + 1)]
    for topic, encoding in (("hf/log", "protobuf"), ("hf/ros", "cdr"), ("hf/json", "a0py/packet")):
        headers = by_topic[HEADERS_TOPIC_PREFIX + topic]
        assert len(headers) == N and {c.message_encoding for c, _, _ in headers} == {encoding}
        for _, m, v in headers:
            if encoding == "a0py/packet":  # a JSON topic's headers: a0py packets with an empty payload
                assert v.payload == b"" and int(v.headers["a0_transport_seq"]) == m.sequence
            else:
                _assert_headers(v, m.sequence, m.publish_time)


def test_go_mcap_cli_reads_the_recordings_whole(recordings):
    tool = _go_mcap()
    for name in ("mixed", "protobuf", "ros2"):
        path = str(recordings[name])
        doctor = subprocess.run([tool, "doctor", path], capture_output=True, text=True, timeout=120)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        remarks = [ln for ln in (doctor.stdout + doctor.stderr).splitlines()
                   if ln.strip() and "is less than the latest log time" not in ln]
        assert remarks == []
        cat = subprocess.run([tool, "cat", path], capture_output=True, text=True, timeout=120)
        assert cat.returncode == 0, cat.stderr
        with open(path, "rb") as f:
            counts = make_reader(f).get_summary().statistics.channel_message_counts
        assert len(cat.stdout.splitlines()) == sum(counts.values())
    # Its JSON output takes protobuf and jsonschema channels (not ros2msg, nor a0py's packets).
    cat = subprocess.run([tool, "cat", "--json", str(recordings["protobuf"])], capture_output=True, text=True,
                         timeout=120)
    assert cat.returncode == 0, cat.stderr
    rows = [json.loads(line) for line in cat.stdout.splitlines()]
    headers = [r for r in rows if r["topic"] == HEADERS_TOPIC_PREFIX + "hf/log"]
    assert len(rows) == 2 * N and len(headers) == N
    assert [int(r["data"]["transport_seq"]) for r in headers] == [r["sequence"] for r in headers]


# -- a0py's readers: the new headers channels read as the old ones -----------


@pytest.fixture
def new_and_old(tmp_path, monkeypatch):
    new, old = new_and_old_segments(tmp_path, monkeypatch)
    with open(new, "rb") as f:
        assert {c.message_encoding for c in make_reader(f).get_summary().channels.values()} == {
            "protobuf", "cdr", "json", "a0py/packet"}
    with open(old, "rb") as f:
        assert {c.message_encoding for c in make_reader(f).get_summary().channels.values()
                if c.topic.startswith(HEADERS_TOPIC_PREFIX)} == {"a0py/packet"}
    return new, old


def test_python_readers_give_the_same_rows_for_new_and_old_headers_channels(new_and_old):
    new, old = (read_table(str(p)).sort_by([("topic", "ascending"), ("seq", "ascending")]) for p in new_and_old)
    assert new.num_rows == old.num_rows == 15
    assert new.to_pylist() == old.to_pylist()
    assert new.column("headers").to_pylist()[0][-1] == ("n", "é")


def test_bag_info_and_resume_read_new_and_old_headers_channels_alike(new_and_old):
    from a0py.recording import bag_info
    from a0py.recording.frames import recorded_seqs

    new, old = new_and_old
    assert recorded_seqs(new) == recorded_seqs(old)
    info_new, info_old = bag_info([str(new)]), bag_info([str(old)])
    assert info_new["topics"] == info_old["topics"]


def test_a_headers_message_a0py_did_not_write_is_a_format_error(tmp_path):
    with pytest.raises(ValueError, match="header_block"):
        cut_packet(FORMAT_CDR, b"\x00\x01\x00\x00" + bytes(76) + b"\xff\x00\x00\x00")
    with pytest.raises(ValueError, match="not where a0py writes it"):
        cut_packet(FORMAT_PROTOBUF, bytes(100))
