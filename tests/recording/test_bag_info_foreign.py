"""``bag info`` of recordings a0py did not write (tests/helpers/foreign.py:
the official ``mcap`` writer, ``mcap-ros2-support``, ``foxglove-sdk``,
``mcap-protobuf-support``): every channel with its type, serialization
format and the count the writer wrote, the file's times, a channel a0py
reads only as bytes saying so, and a file cut before its summary counted by
a scan; a0py's own segments and foreign files side by side."""

import json

import pytest
from helpers import foreign
from helpers.mcap_data import write_segment

from a0py.recording import bag_info, format_bag_info


def _facts(info):
    return {(c["topic"], c["type"], c["serialization_format"], c["count"]) for c in info["channels"]}


def _expected(w):
    return {(t, w.schema_names[t] or None, w.message_encodings[t], len(items)) for t, items in w.messages.items()}


def _times(w):
    logs = [m[0] for items in w.messages.values() for m in items]
    return min(logs), max(logs)


WRITERS = {
    "mcap_json": lambda p: foreign.write_mcap_json(p, n=300),
    "mcap_json_no_schema": lambda p: foreign.write_mcap_json(p, n=120, with_schema=False),
    "mcap_raw": lambda p: foreign.write_mcap_raw(p, n=90),
    "mcap_ros2": lambda p: foreign.write_ros2_mcap(p, n=200),
    "foxglove_sdk": lambda p: foreign.write_foxglove_mcap(p, n=40),
    "mcap_protobuf": lambda p: foreign.write_protobuf_mcap(p, n=60),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_bag_info_lists_every_channel_with_type_format_and_the_count_written(tmp_path, writer):
    w = WRITERS[writer](str(tmp_path / f"{writer}.mcap"))
    info = bag_info(w.path)
    assert _facts(info) == _expected(w)
    assert all(c["kind"] == "foreign" for c in info["channels"])
    assert info["messages"] == info["foreign_messages"] == w.count()
    assert (info["start"], info["end"]) == _times(w)
    assert info["topics"] == {} and info["frames"] == 0
    assert info["files"][0]["complete"] and info["compression"] == ["zstd"]
    text = format_bag_info(info)
    for t, items in w.messages.items():
        typ = w.schema_names[t] or "none"
        assert f"Topic: {t} | Type: {typ} | Count: {len(items)} | Serialization Format: {w.message_encodings[t]}" \
            in text
    assert f"Messages:          {w.count()}\n" in text
    assert "Storage id:        mcap" in text and "Compression:       zstd (" in text


def test_a_channel_a0py_reads_only_as_bytes_says_so(tmp_path):
    raw = foreign.write_mcap_raw(str(tmp_path / "raw.mcap"), n=10)
    ros = foreign.write_ros2_mcap(str(tmp_path / "ros.mcap"), n=10)
    info = bag_info([raw.path, ros.path])
    by_topic = {c["topic"]: c for c in info["channels"]}
    assert by_topic["/raw/blob"]["decoded"] is False and "raw bytes" in by_topic["/raw/blob"]["note"]
    assert by_topic["/imu"]["decoded"] is True and by_topic["/imu"]["note"] is None
    assert by_topic["/imu"]["schema_encoding"] == "ros2msg"
    text = format_bag_info(info)
    assert ("Topic: /raw/blob | Type: none | Count: 10 | Serialization Format: application/octet-stream "
            "(read as raw bytes)") in text
    assert "Topic: /imu | Type: sensor_msgs/msg/Imu | Count: 10 | Serialization Format: cdr\n" in text


def test_a_foreign_file_cut_before_its_summary_is_counted_by_a_scan(tmp_path):
    w = foreign.write_mcap_json(str(tmp_path / "cut.mcap"), n=700, chunk_size=4096, summary=False)
    info = bag_info(w.path)
    assert not info["files"][0]["complete"]
    assert _facts(info) == _expected(w)
    assert (info["start"], info["end"]) == _times(w) and info["messages"] == 700
    assert "no summary: read by a scan" in format_bag_info(info)


def test_a0py_segments_and_foreign_files_side_by_side(tmp_path):
    d = tmp_path / "mixed"
    d.mkdir()
    seg = d / "a0py_00000.mcap"
    write_segment(seg, {"imu": 20})
    w = foreign.write_ros2_mcap(str(d / "ros.mcap"), n=30)
    info = bag_info(str(d))
    assert info["topics"]["imu"]["frames"] == 20
    assert (info["topics"]["imu"]["first_seq"], info["topics"]["imu"]["last_seq"]) == (1, 20)
    foreign_facts = {f for f in _facts(info) if f[0] in w.messages}
    assert foreign_facts == _expected(w)
    kinds = {c["topic"]: c["kind"] for c in info["channels"]}
    assert kinds["imu"] == "packet" and kinds["/imu"] == "foreign" and kinds["/chatter"] == "foreign"
    assert info["foreign_messages"] == w.count() and info["frames"] == 20
    text = format_bag_info(info)
    assert "Topic: imu | Type: a0py.Packet | Count: 20 | Serialization Format: a0py/packet | Seq: 1..20" in text
    assert "Topic: /imu | Type: sensor_msgs/msg/Imu | Count: 30 | Serialization Format: cdr" in text
    assert f"Messages:          20 frames + {w.count()} other messages" in text


def test_bag_info_json_is_serialisable_and_says_the_same(tmp_path):
    w = foreign.write_foxglove_mcap(str(tmp_path / "fx.mcap"), n=12)
    info = json.loads(json.dumps(bag_info(w.path)))
    assert {(c["topic"], c["type"], c["serialization_format"], c["count"]) for c in info["channels"]} == _expected(w)


def test_what_the_decoders_say_decides_the_raw_bytes_note(tmp_path, monkeypatch):
    """Where a0py.recording.decode is present, its decoder_for answers: an
    encoding it refuses (DecodeUnsupported, a RecordingOptionError) or a
    schema that does not parse (RecordingFormatError) makes the channel raw."""
    from a0py.recording import RecordingFormatError, RecordingOptionError, baginfo

    def decoder_for(topic, name, enc, data, msg_enc):
        if topic == "/imu":
            raise RecordingOptionError(f"{topic}: cdr is not decoded here")
        if topic == "/chatter":
            raise RecordingFormatError(f"{topic}: schema {name} does not parse")
        return object()

    monkeypatch.setattr(baginfo, "_decoder_for", lambda: decoder_for)
    w = foreign.write_ros2_mcap(str(tmp_path / "ros.mcap"), n=10)
    raw = foreign.write_mcap_raw(str(tmp_path / "raw.mcap"), n=3)
    by_topic = {c["topic"]: c for c in bag_info([w.path, raw.path])["channels"]}
    assert (by_topic["/imu"]["decoded"], by_topic["/imu"]["note"]) == (False, "read as raw bytes")
    assert by_topic["/chatter"]["decoded"] is False and "schema does not parse" in by_topic["/chatter"]["note"]
    assert by_topic["/raw/blob"]["decoded"] is True  # the decoders' word, not the table's
