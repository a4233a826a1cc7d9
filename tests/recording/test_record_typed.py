"""Typed topics in recordings, with real processes: protobuf (a Foxglove
schema), ``pub_json``, a numpy image and raw bytes published by one process,
recorded by ``python -m a0py record`` in another, then read by third-party
readers (the official ``mcap`` reader with decoder factories, the Go ``mcap``
CLI), replayed into typed topics, and described by ``bag info``."""

import base64
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap

# The test extra brings these; a missing one fails the tests (make test installs it).
import mcap_protobuf.decoder as mcap_protobuf  # noqa: E402
import pytest
from helpers.procs import REPO, wait_until
from mcap.reader import make_reader

import a0py
from a0py.recording import Player, bag_info, format_bag_info
from a0py.recording.format import HEADERS_TOPIC_PREFIX, join_packet
from a0py.recording.headers import cut_packet, headers_format

TOPICS = ["ty/log", "ty/json", "ty/cam", "ty/raw"]
N = 30
pytestmark = pytest.mark.slow

PUBLISH = textwrap.dedent("""
    import sys, numpy as np, a0py
    from foxglove_schemas_protobuf.Log_pb2 import Log
    start, n = int(sys.argv[1]), int(sys.argv[2])
    log, js, cam, raw = (a0py.Publisher(t) for t in ("ty/log", "ty/json", "ty/cam", "ty/raw"))
    for i in range(start, start + n):
        h = {"i": str(i)}
        log.pub(Log(message=f"hello {i}", level=Log.Level.WARNING, name="node"), headers=h)
        js.pub_json({"i": i, "name": f"n{i}", "pose": {"x": i / 2, "y": -i}, "tags": ["a", "b"]}, headers=h)
        cam.pub_image(np.full((4, 6, 3), i % 256, np.uint8), headers=h)
        raw.pub(b"raw%d" % i, headers=h)
""")


def expected_json(i):
    return {"i": i, "name": f"n{i}", "pose": {"x": i / 2, "y": -i}, "tags": ["a", "b"]}


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def publish(start, n):
    r = subprocess.run([sys.executable, "-c", PUBLISH, str(start), str(n)], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


class _JsonDecoders:
    """A decoder factory for the ``json`` message encoding (the ``mcap``
    package ships none)."""

    def decoder_for(self, message_encoding, schema):
        if message_encoding == "json" and schema is not None and schema.encoding == "jsonschema":
            return json.loads
        return None


@pytest.fixture
def recording(root, tmp_path):
    """A recording of N frames on each topic, made by ``python -m a0py record``
    while another process published them; the topics' schemas were declared
    (by a first publish) before the recorder started."""
    publish(0, 1)  # makes the topics and declares their schemas
    out = tmp_path / "rec"
    rec = subprocess.Popen([sys.executable, "-m", "a0py", "record", *TOPICS, "--out", str(out), "--no-progress"],
                           env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = rec.stderr.readline()  # printed once the topics are open
        assert "recording to" in line, line
        publish(1, N)
        rec.send_signal(signal.SIGINT)  # the recorder drains what the topics hold, then closes the file
        _, err = rec.communicate(timeout=60)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait(timeout=30)
    assert rec.returncode == 0, err
    (path,) = sorted(out.glob("*.mcap"))
    return path


def _messages(path):
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[mcap_protobuf.DecoderFactory(), _JsonDecoders()])
        summary = reader.get_summary()
        decoded = {}
        for schema, channel, message, value in reader.iter_decoded_messages(
                topics=["ty/log", "ty/json", "ty/cam"]):
            decoded.setdefault(channel.topic, []).append((message, value, schema))
    with open(path, "rb") as f:
        raw = {}
        for _, channel, message in make_reader(f).iter_messages():
            raw.setdefault(channel.topic, []).append((channel, message))
    return summary, decoded, raw


def test_typed_topics_recorded_as_channels_the_official_reader_decodes(recording):
    summary, decoded, raw = _messages(recording)
    by_topic = {c.topic: c for c in summary.channels.values()}
    encodings = {t: (by_topic[t].message_encoding, summary.schemas[by_topic[t].schema_id].name,
                     summary.schemas[by_topic[t].schema_id].encoding) for t in TOPICS}
    assert encodings["ty/log"] == ("protobuf", "foxglove.Log", "protobuf")
    assert encodings["ty/cam"] == ("protobuf", "foxglove.RawImage", "protobuf")
    assert encodings["ty/json"][0] == "json" and encodings["ty/json"][2] == "jsonschema"
    assert "properties" in json.loads(summary.schemas[by_topic["ty/json"].schema_id].data)
    assert encodings["ty/raw"][0] == "a0py/packet"  # untyped: whole packets, as before

    logs = decoded["ty/log"]
    assert [v.message for _, v, _ in logs] == [f"hello {i}" for i in range(1, N + 1)]
    assert all(v.name == "node" and v.level == 3 for _, v, _ in logs)  # WARNING
    assert [v for _, v, _ in decoded["ty/json"]] == [expected_json(i) for i in range(1, N + 1)]
    cams = decoded["ty/cam"]
    assert len(cams) == N
    for i, (_, v, _) in enumerate(cams, 1):
        assert (v.width, v.height, v.encoding, v.step) == (6, 4, "rgb8", 18)
        assert v.data == bytes([i % 256]) * 72

    raws = [a0py.Packet.from_bytes(m.data) for _, m in raw["ty/raw"]]
    assert [p.payload for p in raws] == [b"raw%d" % i for i in range(1, N + 1)]


def test_typed_topic_packets_are_recovered_from_headers_channel_by_sequence(recording):
    _, _, raw = _messages(recording)
    for topic in ("ty/log", "ty/json", "ty/cam"):
        payloads = raw[topic]
        headers = raw[HEADERS_TOPIC_PREFIX + topic]
        assert len(payloads) == len(headers) == N
        for (_, pm), (hch, hm) in zip(payloads, headers):
            # in the payloads' family: protobuf headers for protobuf topics, a0py packets for JSON ones
            assert hch.message_encoding == ("a0py/packet" if topic == "ty/json" else "protobuf")
            assert hch.metadata["a0py.topic"] == topic
            assert (pm.sequence, pm.publish_time, pm.log_time) == (hm.sequence, hm.publish_time, hm.log_time)
            cut_bytes = cut_packet(headers_format(hch), hm.data)
            cut = a0py.Packet.from_bytes(cut_bytes)  # an a0py packet, payload cut off
            assert cut.payload == b""
            whole = a0py.Packet.from_bytes(join_packet(cut_bytes, pm.data))
            assert whole.payload == pm.data
            assert whole.id == cut.id
            assert int(whole.headers["a0_transport_seq"]) == pm.sequence
            assert int(whole.headers["a0_time_wall"]) == pm.publish_time
            assert whole.headers["i"] == str(pm.sequence - 1)  # the user header; seq 1 was the first publish
            assert whole.headers["a0_writer_id"]


def _go_mcap():
    spec = importlib.util.find_spec("databeam_mcap_reader")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("databeam-mcap-reader (which bundles the Go mcap CLI) is not installed")
    path = os.path.join(next(iter(spec.submodule_search_locations)), "mcap_cli")
    if not os.access(path, os.X_OK):
        pytest.skip(f"no Go mcap CLI at {path}")
    return path


def test_go_mcap_cli_doctor_is_clean_and_cat_json_decodes_typed_channels(recording):
    tool = _go_mcap()
    doctor = subprocess.run([tool, "doctor", str(recording)], capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    # Chunks hold one channel each, so log times interleave across chunks: the only remark allowed.
    remarks = [ln for ln in (doctor.stdout + doctor.stderr).splitlines()
               if ln.strip() and "is less than the latest log time" not in ln]
    assert remarks == []
    cat = subprocess.run([tool, "cat", "--json", "--topics", "ty/log,ty/json,ty/cam", str(recording)],
                         capture_output=True, text=True, timeout=120)
    assert cat.returncode == 0, cat.stderr
    rows = {}
    for line in cat.stdout.splitlines():
        row = json.loads(line)
        rows.setdefault(row["topic"], []).append(row)
    assert [r["data"]["message"] for r in rows["ty/log"]] == [f"hello {i}" for i in range(1, N + 1)]
    assert [r["data"] for r in rows["ty/json"]] == [expected_json(i) for i in range(1, N + 1)]
    assert [base64.b64decode(r["data"]["data"]) for r in rows["ty/cam"]] == [
        bytes([i % 256]) * 72 for i in range(1, N + 1)]
    assert [r["sequence"] for r in rows["ty/cam"]] == list(range(2, N + 2))


def test_play_replays_typed_channels_into_typed_topics(recording, root):
    live = {t: "back/" + t.split("/")[1] for t in TOPICS}
    subs = {t: a0py.SubscriberSync(live[t], init=a0py.INIT_OLDEST) for t in TOPICS}
    try:
        with Player(str(recording), rate=0, remap=live) as player:
            stats = player.run()
        assert stats.frames == 4 * N
        got = {}
        for t, sub in subs.items():
            pkts = []
            while (pkt := sub.read()) is not None:
                pkts.append(pkt)
            got[t] = pkts
    finally:
        for sub in subs.values():
            sub.close()
    assert a0py.proto.topic_schema(live["ty/log"]).name == "foxglove.Log"
    assert a0py.proto.topic_schema(live["ty/cam"]).name == "foxglove.RawImage"
    assert a0py.proto.topic_schema(live["ty/json"]).encoding == "jsonschema"
    assert a0py.proto.topic_schema(live["ty/raw"]) is None
    assert [p.decode().message for p in got["ty/log"]] == [f"hello {i}" for i in range(1, N + 1)]
    assert [p.decode() for p in got["ty/json"]] == [expected_json(i) for i in range(1, N + 1)]
    for i, p in enumerate(got["ty/cam"], 1):
        img = p.decode()
        assert (img.width, img.height, img.encoding) == (6, 4, "rgb8") and img.data == bytes([i % 256]) * 72
    assert [p.payload for p in got["ty/raw"]] == [b"raw%d" % i for i in range(1, N + 1)]
    for t in TOPICS:
        assert [p.headers["i"] for p in got[t]] == [str(i) for i in range(1, N + 1)]
        assert [p.headers["a0_replay_transport_seq"] for p in got[t]] == [str(i) for i in range(2, N + 2)]


def test_bag_info_names_typed_topics_by_schema_and_encoding(recording):
    info = bag_info(str(recording))
    assert (info["topics"]["ty/log"]["type"], info["topics"]["ty/log"]["encoding"]) == ("foxglove.Log", "protobuf")
    assert info["topics"]["ty/raw"]["type"] == "a0py.Packet"
    for t in TOPICS:
        assert info["topics"][t]["frames"] == N
        assert (info["topics"][t]["first_seq"], info["topics"][t]["last_seq"]) == (2, N + 1)
    assert not any(t.startswith("/a0py/") for t in info["topics"])
    text = format_bag_info(info)
    assert "Topic: ty/cam | Type: foxglove.RawImage | Count: 30 | Serialization Format: protobuf" in text


def test_segment_writer_splits_typed_frames_and_keeps_a_frame_that_is_no_packet_whole(tmp_path):
    from a0py.recording import SegmentWriter

    schema = a0py.Schema.json_schema("ty.Point", {"type": "object", "properties": {"x": {"type": "number"}}})
    good = a0py.Packet({"k": "v"}, b'{"x": 1.5}').to_bytes()
    junk = b"not a packet at all, 32 bytes.."
    path = tmp_path / "seg.mcap"
    with SegmentWriter(path) as w:
        w.add_typed_topic("ty/p", schema)
        w.write_frames("ty/p", [good, junk, good], 1000, seqs=[7, 8, 9])
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[_JsonDecoders()])
        counts = reader.get_summary().statistics.channel_message_counts
        payloads = [(m.sequence, v) for _, _, m, v in reader.iter_decoded_messages(topics=["ty/p"])]
    with open(path, "rb") as f:
        headers = [(m.sequence, m.data) for _, _, m in make_reader(f).iter_messages(topics=["/a0py/headers/ty/p"])]
    assert payloads == [(7, {"x": 1.5}), (9, {"x": 1.5})]
    assert [s for s, _ in headers] == [7, 8, 9]
    assert headers[1][1] == junk  # kept whole where it can be found, never dropped
    assert join_packet(headers[0][1], b'{"x": 1.5}') == good
    assert sorted(counts.values()) == [2, 3]


def test_resume_finds_the_last_seq_of_typed_topics_from_their_headers_channel(recording):
    from a0py.recording.recorder import last_recorded_seqs

    assert last_recorded_seqs([str(recording)]) == {t: N + 1 for t in TOPICS}


def test_split_chunks_reuse_their_buffers_and_keep_each_messages_times(tmp_path, root):
    # Many small chunks, each split into the writer's two reused buffers (of
    # another size each time): every payload message keeps the log and publish
    # time of its headers message, frames that are no packet in between.
    from a0py.recording import SegmentWriter

    schema = a0py.Schema.json_schema("ty.Point", {"type": "object", "properties": {"x": {"type": "number"}}})
    pub = a0py.Publisher("ty/times")
    sub = a0py.SubscriberSync("ty/times", init=a0py.INIT_OLDEST)
    sent = {}
    path = tmp_path / "seg.mcap"
    with SegmentWriter(path, chunk_bytes=1024) as w:
        w.add_typed_topic("ty/times", schema)
        seq = 0
        for k in range(60):
            pub.pub(b'{"x": %d}' % k + b" " * (k % 7 * 40))
            frame = sub.read().to_bytes()
            seq += 1
            frames, seqs = [frame], [seq]
            if k % 9 == 4:
                seq += 1
                frames, seqs = [frame, b"junk frame, no packet: %d" % k], [seq - 1, seq]
            w.write_frames("ty/times", frames, 1_000_000 + k * 1000, seqs=seqs)
            sent[seqs[0]] = (1_000_000 + k * 1000, k)
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[_JsonDecoders()])
        payloads = {m.sequence: (m.log_time, m.publish_time, v["x"])
                    for _, _, m, v in reader.iter_decoded_messages(topics=["ty/times"])}
        chunks = len(list(reader.get_summary().chunk_indexes))
    with open(path, "rb") as f:
        headers = {m.sequence: (m.log_time, m.publish_time)
                   for _, _, m in make_reader(f).iter_messages(topics=["/a0py/headers/ty/times"])}
    assert chunks > 10
    assert set(payloads) == set(sent) and len(headers) == 60 + len(range(4, 60, 9))
    for s, (log_time, publish_time, x) in payloads.items():
        assert (log_time, x) == sent[s]
        assert headers[s] == (log_time, publish_time) and publish_time != log_time  # the packet's a0_time_wall


def test_a_topic_found_before_its_schema_is_recorded_on_its_typed_channel_only(root, tmp_path):
    # A typed topic's pubsub arena exists before its schema (declared by the first typed
    # publish, just before that frame): a recorder that finds the topic in between must
    # not record its frames whole. It did when it looked for the schema before that
    # publish and read just after it: the burst went to an a0py/packet channel of the
    # same topic (and an empty one was made for it in any case), so the view showed two
    # "cam" channels and a Foxglove client of the typed one got nothing.
    import numpy as np

    from a0py.recording.recorder import Recorder

    passes = []  # the recording loop reports after each pass (progress_period=0)
    with a0py.Publisher("ty/late") as pub:  # the arena, no schema yet
        rec = Recorder(["ty/late"], out=str(tmp_path / "rec"), init="oldest", progress_period=0,
                       on_progress=lambda stats: passes.append(stats["ty/late"].frames)).start()
        try:
            assert rec.wait_ready(30)
            # passes of the recorder over the topic (open from the start) while it has no frame
            wait_until(lambda: len(passes) >= 3, "three passes of the recorder")
            assert set(passes) == {0} and pub.schema is None
            for i in range(5):
                pub.pub_image(np.full((4, 6, 3), i, np.uint8), frame_id=f"f{i}")
            wait_until(lambda: rec.stats()["ty/late"].frames >= 5, "5 frames recorded", every=0.05)
        finally:
            stats = rec.stop()
    assert stats["ty/late"].frames == 5
    (path,) = rec.segments
    with open(path, "rb") as f:
        reader = make_reader(f)
        channels = {c.id: (c.topic, c.message_encoding) for c in reader.get_summary().channels.values()}
        got = [(channels[ch.id], msg.data) for _, ch, msg in reader.iter_messages()]
    assert sorted(channels.values()) == [(HEADERS_TOPIC_PREFIX + "ty/late", "protobuf"),  # the payloads' family
                                         ("ty/late", "protobuf")]
    assert [c for c, _ in got].count(("ty/late", "protobuf")) == 5
