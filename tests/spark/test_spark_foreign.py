"""The Python ``a0`` source (``format("a0.python")``, and its functions
called directly) over MCAP files a0py did not write and over a0py's typed
topics: every message of each foreign file (the official ``mcap`` writer's
JSON with and without a schema, cut before its summary, raw bytes;
``mcap-ros2-support`` CDR; the MCAP file of a ``rosbags`` rosbag2
directory; ``foxglove-sdk`` and ``mcap-protobuf-support`` protobuf) comes
back once with the MCAP columns and its bytes; a recording of typed topics
made by the recorder gives rows joined with their headers channel; a mixed
directory, ``mcapColumns``, pushdown and damage."""

import datetime
import glob
import os
import shutil
import time

import pytest
from helpers import foreign
from helpers.mcap_data import EPOCH, flip_byte, write_segment
from mcap.reader import make_reader

import a0py
from a0py.recording import RecordingFormatError
from a0py.recording.format import HEADERS_TOPIC_PREFIX, join_packet
from a0py.recording.headers import cut_packet, headers_format
from a0py.recording.reader import read_layout
from a0py.spark import read_table, register
from a0py.spark.options import ReadOptions
from a0py.spark.part_reader import read_part
from a0py.spark.planning import FileSlice, Part, plan
from a0py.spark.predicate import Predicate

SOURCE = "a0.python"  # the session's format("a0") is the JVM reader
MCAP_COLUMNS = ["topic", "seq", "time_mono", "time_wall", "headers", "payload", "log_time", "publish_time",
                "sequence", "schema_name", "message_encoding"]
PLAIN_COLUMNS = MCAP_COLUMNS[:6]


@pytest.fixture(scope="module")
def spark(spark):
    """The session's SparkSession with the Python source registered under ``a0.python``."""
    register(spark)
    return spark


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One directory of foreign files (topics distinct across files) and an
    a0py segment: {name: Written}, with the Written of the a0py segment's
    expected frames under ``"a0py"``."""
    d = tmp_path_factory.mktemp("foreign")
    w = {
        "json": foreign.write_mcap_json(str(d / "json.mcap"), n=700, chunk_size=8 * 1024),
        "json0": foreign.write_mcap_json(str(d / "json0.mcap"), n=300, topic="/ev/plain", with_schema=False),
        "cut": foreign.write_mcap_json(str(d / "cut.mcap"), n=400, topic="/ev/cut", summary=False,
                                       compression="lz4"),
        "raw": foreign.write_mcap_raw(str(d / "raw.mcap")),
        "ros2": foreign.write_ros2_mcap(str(d / "ros2.mcap"), n=300),
        "fox": foreign.write_foxglove_mcap(str(d / "fox.mcap"), n=40),
        "pb": foreign.write_protobuf_mcap(str(d / "pb.mcap"), n=60),
    }
    bag = foreign.write_rosbag2(str(tmp_path_factory.mktemp("bag") / "bag"), n=120, topics=("/bag/imu",))
    (bag_file,) = glob.glob(os.path.join(bag.path, "*.mcap"))
    bag.path = shutil.copy(bag_file, str(d / "bag.mcap"))  # its MCAP file, read directly
    w["bag"] = bag
    w["a0py"] = write_segment(str(d / "a0py_00000.mcap"), {"cam": 120, "imu": 300})
    return str(d), w


def _us(ts):
    return None if ts is None else (ts.replace(tzinfo=datetime.UTC) - EPOCH) // datetime.timedelta(microseconds=1)


def expected_foreign(w, keep=lambda log, pub, seq: True):
    """{topic: sorted [(payload, log_us, pub_us, sequence, schema name, encoding)]} of a Written."""
    out = {}
    for topic, msgs in w.messages.items():
        rows = [(data, log // 1000, pub // 1000, seq, w.schema_names[topic] or None, w.message_encodings[topic])
                for log, pub, seq, data, _ in msgs if keep(log, pub, seq)]
        out[topic] = sorted(rows, key=repr)
    return out


def foreign_rows(rows, topics):
    """The same shape from rows (Spark Rows or dicts) of ``topics``; checks
    the columns a foreign row has null and its time_wall."""
    out = {}
    for r in rows:
        r = r if isinstance(r, dict) else r.asDict()
        if r["topic"] not in topics:
            continue
        assert r["seq"] is None and r["time_mono"] is None and r["headers"] is None, r
        assert _us(r["time_wall"]) == _us(r["publish_time"])
        out.setdefault(r["topic"], []).append((bytes(r["payload"]), _us(r["log_time"]), _us(r["publish_time"]),
                                               r["sequence"], r["schema_name"], r["message_encoding"]))
    return {t: sorted(v, key=repr) for t, v in out.items()}


def _fill_unknown(want, got):
    """rosbags' writer does not report the sequences it writes: take them from the rows."""
    for topic, rows in want.items():
        if any(r[3] is None for r in rows):
            assert len(got.get(topic, ())) == len(rows)
            want[topic] = sorted([(r[0], r[1], r[2], g[3], r[4], r[5]) for r, g in
                                  zip(rows, sorted(got[topic], key=repr), strict=True)], key=repr)
    return want


FOREIGN = ["json", "json0", "cut", "raw", "ros2", "fox", "pb", "bag"]


@pytest.mark.parametrize("name", FOREIGN)
def test_every_message_of_a_foreign_file_is_one_row_with_the_mcap_columns(files, name):
    _, w = files
    written = w[name]
    table = read_table(written.path)
    assert table.column_names == MCAP_COLUMNS
    got = foreign_rows(table.to_pylist(), set(written.messages))
    assert table.num_rows == written.count()
    assert got == _fill_unknown(expected_foreign(written), got)
    if name == "cut":
        assert not read_layout(written.path).has_summary  # planned by a scan


def test_spark_reads_a_mixed_directory_with_the_mcap_columns(spark, files):
    d, w = files
    df = spark.read.format(SOURCE).load(d)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("topic", "string"), ("seq", "bigint"), ("time_mono", "bigint"), ("time_wall", "timestamp"),
        ("headers", "map<string,string>"), ("payload", "binary"), ("log_time", "timestamp"),
        ("publish_time", "timestamp"), ("sequence", "bigint"), ("schema_name", "string"),
        ("message_encoding", "string")]
    rows = df.collect()
    assert len(rows) == sum(w[n].count() for n in FOREIGN) + len(w["a0py"].frames)
    for name in FOREIGN:
        got = foreign_rows(rows, set(w[name].messages))
        assert got == _fill_unknown(expected_foreign(w[name]), got), name
    packets = {(r.topic, r.seq): r for r in rows if r.topic in ("cam", "imu")}
    assert set(packets) == set(w["a0py"].frames)
    for key, (headers, payload, wall_us, mono) in w["a0py"].frames.items():
        r = packets[key]
        assert (tuple(sorted(r.headers.items())), bytes(r.payload), _us(r.time_wall), r.time_mono) == (
            tuple(sorted(headers)), payload, wall_us, mono)
        # The record's fields: a0py writes the transport seq as its sequence, the packet's wall time as its
        # publish time.
        assert (r.sequence, _us(r.publish_time), r.schema_name, r.message_encoding) == (
            key[1], wall_us, "a0py.Packet", "a0py/packet")
        assert r.log_time is not None


def test_mcap_columns_option(spark, files):
    d, w = files
    # false: the foreign rows are still there, with today's columns only.
    df = spark.read.format(SOURCE).option("mcapColumns", "false").load(d)
    assert df.columns == PLAIN_COLUMNS
    rows = df.collect()
    assert len(rows) == sum(w[n].count() for n in FOREIGN) + len(w["a0py"].frames)
    json_rows = sorted((bytes(r.payload), _us(r.time_wall)) for r in rows if r.topic == "/ev/json")
    assert json_rows == sorted((data, pub // 1000) for _, pub, _, data, _ in w["json"].messages["/ev/json"])
    # auto with the topics option selecting a0py packet topics only: today's columns.
    only = spark.read.format(SOURCE).option("topics", "cam,imu").load(d)
    assert only.columns == PLAIN_COLUMNS and only.count() == len(w["a0py"].frames)
    # true on a0py packets alone: the columns, with the records' values.
    forced = spark.read.format(SOURCE).option("mcapColumns", "TRUE").option("topics", "cam").load(d)
    assert forced.columns == MCAP_COLUMNS
    assert {(r.schema_name, r.message_encoding, r.sequence == r.seq) for r in forced.collect()} == {
        ("a0py.Packet", "a0py/packet", True)}
    with pytest.raises(Exception, match=r"option mcapColumns='maybe': use auto, true or false"):
        spark.read.format(SOURCE).option("mcapColumns", "maybe").load(d).count()


@pytest.fixture
def pushdown(spark):
    """Filter pushdown on for the test (Spark's default is off)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_pushdown_on_topic_and_time_with_foreign_files(spark, files, pushdown):
    d, w = files
    msgs = w["json"].messages["/ev/json"]
    # The writer's publish times are 500 ns before its log times: the first message's time_wall is a
    # microsecond before the chunk index's first log time, so a chunk skipped by its log times would
    # lose it.
    first_pub_us = msgs[0][1] // 1000
    assert first_pub_us < msgs[0][0] // 1000
    hi_us = msgs[40][1] // 1000
    expr = f"topic = '/ev/json' and time_wall <= timestamp_micros({hi_us})"
    want = expected_foreign(w["json"], lambda log, pub, seq: pub // 1000 <= hi_us)
    for enabled in ("true", "false"):
        spark.conf.set("spark.sql.python.filterPushdown.enabled", enabled)
        df = spark.read.format(SOURCE).option("maxPartitionBytes", "20000").load(d).filter(expr)
        assert foreign_rows(df.collect(), {"/ev/json"}) == want
        edge = spark.read.format(SOURCE).load(d).filter(f"time_wall = timestamp_micros({first_pub_us})")
        # The first message of each file of the JSON writer (same times in each).
        assert sorted((r.topic, r.sequence) for r in edge.collect()) == [("/ev/cut", 0), ("/ev/json", 0),
                                                                         ("/ev/plain", 0)]
    # A seq filter: foreign rows have no seq, so only packet rows pass.
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    seqs = spark.read.format(SOURCE).load(d).filter("seq <= 5").collect()
    assert sorted((r.topic, r.seq) for r in seqs) == [(t, s) for t in ("cam", "imu") for s in range(1, 6)]


def test_planning_skips_foreign_chunks_by_topic_and_seq(files):
    d, w = files
    by_topic = plan(d, Predicate().and_topics(["/ev/json"]), ReadOptions())
    paths = {fs.path for p in by_topic for fs in p.items}
    assert paths == {w["json"].path}
    assert sum(len(fs.refs) for p in by_topic for fs in p.items) == len(read_layout(w["json"].path).chunks) > 3
    by_seq = plan(d, Predicate().and_seq(lo=1), ReadOptions())
    assert {os.path.basename(fs.path) for p in by_seq for fs in p.items} == {"a0py_00000.mcap"}


def test_damaged_foreign_file_is_an_error_naming_the_file(spark, files, tmp_path):
    _, w = files
    bad = shutil.copy(w["json"].path, str(tmp_path / "damaged.mcap"))
    ref = read_layout(bad).chunks[1]
    flip_byte(bad, ref.offset + ref.length - 40)  # inside the chunk's compressed records
    with pytest.raises(RecordingFormatError, match=r"damaged\.mcap.*chunk"):
        read_table(bad)
    with pytest.raises(Exception, match=r"RecordingFormatError.*damaged\.mcap"):
        spark.read.format(SOURCE).load(bad).count()
    # A damaged summary: found when the schema is decided, before any row.
    summary = shutil.copy(w["raw"].path, str(tmp_path / "badsummary.mcap"))
    flip_byte(summary, os.path.getsize(summary) - 60)
    with pytest.raises(Exception, match=r"badsummary\.mcap.*summary CRC mismatch"):
        spark.read.format(SOURCE).load(summary)


# -- typed topics ------------------------------------------------------------

N = 120


@pytest.fixture
def typed_recording(root, tmp_path):
    """A recording made by the recorder of a typed JSON topic (``pub_json``),
    a typed protobuf topic (a Foxglove ``Log``) and an untyped one, small
    chunks so each typed topic has many pairs of chunks."""
    from foxglove_schemas_protobuf.Log_pb2 import Log

    from a0py.recording import Recorder

    js, lg, raw = a0py.Publisher("ty/json"), a0py.Publisher("ty/log"), a0py.Publisher("ty/raw")
    js.pub_json({"i": 0, "name": "n0"})  # declares the topics' schemas before the recorder opens them
    lg.pub(Log(message="m0", name="x"))
    raw.pub(b"r0")
    out = tmp_path / "rec"
    rec = Recorder(["ty/json", "ty/log", "ty/raw"], out=str(out), chunk_bytes=2048).start()
    try:
        assert rec.wait_ready(30)
        for i in range(1, N + 1):
            js.pub_json({"i": i, "name": f"n{i}"}, headers={"i": str(i)})
            lg.pub(Log(message=f"m{i}", name="x"), headers={"i": str(i)})
            raw.pub(b"r%d" % i, headers={"i": str(i)})
            if i % 40 == 0:
                time.sleep(0.05)
    finally:
        rec.stop()  # drains what the topics hold
    for p in (js, lg, raw):
        p.close()
    (path,) = sorted(out.glob("*.mcap"))
    return str(path)


def recorded_packets(path):
    """{(topic, seq): (headers dict, payload, schema name, encoding, sequence)}
    of a recording's typed topics, rejoined from the official reader's
    messages, and of its untyped topics' packets."""
    out = {}
    heads = {}
    pays = []
    with open(path, "rb") as f:
        for schema, ch, m in make_reader(f).iter_messages(log_time_order=False):
            if ch.topic.startswith(HEADERS_TOPIC_PREFIX):
                # in its payloads' family (protobuf, CDR) or an a0py packet: back to the cut packet
                heads[(ch.topic[len(HEADERS_TOPIC_PREFIX):], m.sequence)] = cut_packet(headers_format(ch), m.data)
            elif ch.message_encoding == "a0py/packet":
                pkt = a0py.Packet.from_bytes(m.data)
                out[(ch.topic, int(pkt.headers["a0_transport_seq"]))] = (
                    dict(pkt.headers), pkt.payload, "a0py.Packet", "a0py/packet", m.sequence)
            else:
                pays.append((ch.topic, m.sequence, m.data, schema.name, ch.message_encoding))
    for topic, sequence, data, name, enc in pays:
        pkt = a0py.Packet.from_bytes(join_packet(heads[(topic, sequence)], data))
        out[(topic, int(pkt.headers["a0_transport_seq"]))] = (dict(pkt.headers), data, name, enc, sequence)
    return out


def typed_rows(rows):
    out = {}
    for r in rows:
        r = r if isinstance(r, dict) else r.asDict()
        out[(r["topic"], r["seq"])] = (dict(r["headers"]), bytes(r["payload"]), r["schema_name"],
                                       r["message_encoding"], r["sequence"])
    return out


def test_typed_topics_read_joined_with_their_headers_channel(spark, typed_recording):
    want = recorded_packets(typed_recording)
    assert {t for t, _ in want} == {"ty/json", "ty/log", "ty/raw"}
    assert sum(1 for t, _ in want if t == "ty/json") == N
    assert want[("ty/json", 2)][1] == b'{"i":1,"name":"n1"}'
    assert want[("ty/log", 2)][2:4] == ("foxglove.Log", "protobuf")
    assert want[("ty/json", 2)][0]["i"] == "1"
    table = read_table(typed_recording)
    assert table.column_names == MCAP_COLUMNS  # auto: typed topics are selected
    assert typed_rows(table.to_pylist()) == want  # headers-channel messages are no rows
    df = spark.read.format(SOURCE).option("maxPartitionBytes", "1").load(typed_recording)
    assert df.rdd.getNumPartitions() > 10
    assert typed_rows(df.collect()) == want
    pushed = spark.read.format(SOURCE).load(typed_recording).filter("topic = 'ty/log' and seq between 10 and 19")
    assert typed_rows(pushed.collect()) == {k: v for k, v in want.items() if k[0] == "ty/log" and 10 <= k[1] <= 19}
    old = spark.read.format(SOURCE).option("mcapColumns", "false").load(typed_recording)
    assert old.columns == PLAIN_COLUMNS
    assert {(r.topic, r.seq): (dict(r.headers), bytes(r.payload)) for r in old.collect()} == {
        k: v[:2] for k, v in want.items()}


def test_typed_chunks_stay_with_their_headers_chunk_and_a_payload_without_headers_is_a_row(typed_recording):
    want = recorded_packets(typed_recording)
    options = ReadOptions(partition_bytes=1, mcap_columns=True)
    parts = plan(typed_recording, Predicate(), options)
    glued = 0
    for p in parts:
        for fs in p.items:
            assert fs.refs[-1].offset not in fs.glue  # never the last chunk of a part
            glued += len(fs.glue & {r.offset for r in fs.refs})
    assert glued >= 4
    rows = [r for p in parts for b in read_part(p, Predicate(), options) for r in b.to_pylist()]
    assert typed_rows(rows) == want
    # The headers chunks left out (as a file that lost them would be read): the payloads are still rows,
    # with the record's fields and no seq, times or headers.
    (fs,) = plan(typed_recording, Predicate().and_topics(["ty/json"]), ReadOptions(mcap_columns=True))[0].items
    alone = FileSlice(fs.path, fs.channels, tuple(r for r in fs.refs if r.offset not in fs.glue))
    rows = [r for b in read_part(Part([alone]), Predicate(), options) for r in b.to_pylist()]
    assert len(rows) == N
    assert {(r["seq"], r["time_mono"], r["headers"]) for r in rows} == {(None, None, None)}
    assert sorted(r["payload"] for r in rows) == sorted(v[1] for k, v in want.items() if k[0] == "ty/json")
    assert {r["schema_name"] for r in rows} == {want[("ty/json", 2)][2]}
    # A seq filter drops them (their seq is null).
    assert not [r for b in read_part(Part([alone]), Predicate().and_seq(lo=0), options) for r in b.to_pylist()]


# -- decode=true ---------------------------------------------------------------


def _messages_by_sequence(rows, topic):
    out = {}
    for r in rows:
        r = r if isinstance(r, dict) else r.asDict(recursive=True)
        if r["topic"] == topic:
            assert r["decode_error"] is None, r["decode_error"]
            out[r["sequence"]] = r["message"]
    return out


def test_decode_gives_each_foreign_type_its_message_column(files):
    _, w = files
    t = read_table(w["json"].path, decode=True)
    assert t.column_names == [*MCAP_COLUMNS, "message", "decode_error"]
    got = _messages_by_sequence(t.to_pylist(), "/ev/json")
    assert got == {seq: value for _, _, seq, _, value in w["json"].messages["/ev/json"]}
    plain = _messages_by_sequence(read_table(w["json0"].path, decode=True).to_pylist(), "/ev/plain")
    assert plain == {seq: data.decode() for _, _, seq, data, _ in w["json0"].messages["/ev/plain"]}
    imu = _messages_by_sequence(read_table(w["ros2"].path, decode=True, topics=["/imu"]).to_pylist(), "/imu")
    for _, _, seq, _, value in w["ros2"].messages["/imu"]:
        m = imu[seq]
        stamp = value["header"]["stamp"]
        assert _us(m["header"]["stamp"]) == (stamp["sec"] * 1_000_000_000 + stamp["nanosec"]) // 1000
        assert m["header"]["frame_id"] == value["header"]["frame_id"]
        assert m["linear_acceleration"] == value["linear_acceleration"]
        assert m["angular_velocity_covariance"] == value["angular_velocity_covariance"]
    log = _messages_by_sequence(read_table(w["pb"].path, decode=True).to_pylist(), "/pb/log")
    assert {s: (m["message"], m["line"]) for s, m in log.items()} == {
        seq: (v["message"], v["line"]) for _, _, seq, _, v in w["pb"].messages["/pb/log"]}


def test_decode_in_spark_with_packet_rows_and_one_type(spark, files):
    d, w = files
    df = spark.read.format(SOURCE).option("decode", "true").option("topics", "/imu,cam").load(d)
    fields = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert fields["message"].startswith("struct<header:struct<stamp:timestamp,frame_id:string>")
    assert fields["decode_error"] == "string"
    assert df.columns[-2:] == ["message", "decode_error"]
    rows = df.collect()
    packets = [r for r in rows if r.topic == "cam"]
    assert len(packets) == 120 and {(r.message, r.decode_error) for r in packets} == {(None, None)}
    imu = _messages_by_sequence(rows, "/imu")
    want = {seq: v for _, _, seq, _, v in w["ros2"].messages["/imu"]}
    assert set(imu) == set(want)
    assert all(imu[s]["linear_acceleration"] == want[s]["linear_acceleration"] for s in want)


def test_decode_errors_name_the_types_the_channel_and_the_message(spark, files, tmp_path):
    d, _ = files
    with pytest.raises(Exception, match=r"one message type at a time.*ev\.Event in json: /ev/cut, /ev/json.*"
                                        r"option topics"):
        spark.read.format(SOURCE).option("decode", "true").load(d)
    with pytest.raises(Exception, match=r"'/raw/blob'.*cannot decode.*decode=false"):
        spark.read.format(SOURCE).option("decode", "true").option("topics", "/raw/blob").load(d)
    with pytest.raises(Exception, match=r"selects no channel to decode"):
        spark.read.format(SOURCE).option("decode", "true").option("topics", "cam").load(d)
    # A message that does not decode: a row with its reason, never dropped, never a failed query.
    bad = foreign.write_mcap_json(str(tmp_path / "bad.mcap"), n=50, bad={3, 17})
    rows = spark.read.format(SOURCE).option("decode", "true").load(bad.path).collect()
    assert len(rows) == 50
    failed = {r.sequence: r.decode_error for r in rows if r.message is None}
    assert set(failed) == {3, 17} and all(failed.values())
    assert {r.sequence for r in rows if r.decode_error is None} == set(range(50)) - {3, 17}
    # A schema that does not parse: an error naming channel and schema; decode=false still reads the file.
    broken = foreign.write_mcap_json(str(tmp_path / "broken.mcap"), n=20, schema_data=b"{not a schema")
    with pytest.raises(Exception, match=r"RecordingFormatError.*/ev/json.*ev\.Event"):
        spark.read.format(SOURCE).option("decode", "true").load(broken.path)
    assert spark.read.format(SOURCE).load(broken.path).count() == 20


def test_decode_reads_a_typed_topic(typed_recording):
    t = read_table(typed_recording, decode=True, topics=["ty/json"])
    rows = t.to_pylist()
    assert len(rows) == N
    assert {(r["seq"] - 1, r["message"]["i"], r["message"]["name"]) for r in rows} == {
        (i, i, f"n{i}") for i in range(1, N + 1)}
    assert {r["decode_error"] for r in rows} == {None}
    with pytest.raises(Exception, match=r"one message type at a time"):
        read_table(typed_recording, decode=True)


def test_gather_slices_copies_ranges_and_refuses_one_outside_the_buffer():
    import numpy as np

    from a0py.recording.packets import gather_slices
    from a0py.spark.batches import binary_slices

    buf = bytes(range(100))
    starts, lengths = np.array([5, 10, 10, 90], np.int64), np.array([3, 0, 4, 10], np.int64)
    offsets, data = gather_slices(buf, starts, lengths)
    assert offsets.tolist() == [0, 3, 3, 7, 17] and bytes(data) == buf[5:8] + buf[10:14] + buf[90:100]
    assert binary_slices(buf, starts, lengths).to_pylist() == [buf[5:8], b"", buf[10:14], buf[90:100]]
    for s, n in ((95, 6), (-1, 1), (0, -1), (101, 0)):
        with pytest.raises(ValueError, match="outside the buffer of 100 bytes"):
            gather_slices(buf, np.array([s], np.int64), np.array([n], np.int64))
