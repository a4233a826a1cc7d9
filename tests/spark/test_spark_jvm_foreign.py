"""The ``a0`` source's JVM reader on recordings a0py did not write, and on
a0py's typed topics: each message a row with the MCAP columns (``log_time``,
``publish_time``, ``sequence``, ``schema_name``, ``message_encoding``) and
its bytes, equal to what the tool that wrote the file wrote (files made by
tests/helpers/foreign.py with the official ``mcap`` writer,
``mcap-ros2-support``, ``rosbags``, ``foxglove-sdk`` and
``mcap-protobuf-support``); a typed topic's payload rows joined with their
``/a0py/headers/T`` messages by sequence, as the packet they were cut from
would read; the columns decided by option ``mcapColumns`` and the channels a
read selects; pushdown; damaged foreign files an error naming the file, the
byte and the field, never a dead JVM; ``decode=true`` handed to the Python
source; and, once the Python source reads foreign channels too, every row
equal through both readers."""

import importlib.util
import json
import os

import pytest
from helpers import foreign
from helpers.mcap_data import cut, write_segment

import a0py
from a0py.recording import SegmentWriter
from a0py.recording import format as recformat
from a0py.spark import reader_in_use, register
from a0py.spark._jvm import read_metrics

# The Python source's side of the same change (another branch): foreign channels, option decode.
PYTHON_READS_FOREIGN = hasattr(recformat, "KIND_FOREIGN")
PYTHON_DECODES = importlib.util.find_spec("a0py.recording.decode") is not None
MCAP_COLUMNS = ["log_time", "publish_time", "sequence", "schema_name", "message_encoding"]
TODAY = ["topic", "seq", "time_mono", "time_wall", "headers", "payload"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """One file (or rosbag2 directory) of each kind users have, with what was written."""
    d = tmp_path_factory.mktemp("foreign")
    return {
        "json": foreign.write_mcap_json(str(d / "json.mcap"), n=1500, chunk_size=8 * 1024),
        "json-noschema-cut": foreign.write_mcap_json(str(d / "nos.mcap"), n=700, with_schema=False, summary=False,
                                                     chunk_size=8 * 1024, compression="lz4"),
        "json-none": foreign.write_mcap_json(str(d / "plain.mcap"), n=300, compression="none", chunk_size=8 * 1024),
        "raw": foreign.write_mcap_raw(str(d / "raw.mcap")),
        "ros2-cdr": foreign.write_ros2_mcap(str(d / "ros2.mcap"), n=400),
        "rosbag2": foreign.write_rosbag2(d / "bag", n=200, topics=("/imu", "/imu2")),
        "foxglove-sdk": foreign.write_foxglove_mcap(str(d / "fox.mcap"), n=60),
        "mcap-protobuf": foreign.write_protobuf_mcap(str(d / "pb.mcap"), n=150),
    }


def _us(ns):
    return None if ns is None else ns // 1000


def mcap_rows(df):
    """(topic, log_time µs, publish_time µs, sequence, schema_name, message_encoding, payload) of every row."""
    got = df.selectExpr("topic", "unix_micros(log_time)", "unix_micros(publish_time)", "sequence", "schema_name",
                        "message_encoding", "payload").collect()
    return sorted((r[0], r[1], r[2], r[3], r[4], r[5], bytes(r[6])) for r in got)


def expected(w, topics=None):
    out = []
    for topic, items in w.messages.items():
        if topics is not None and topic not in topics:
            continue
        for log, pub, seq, data, _ in items:
            out.append((topic, _us(log), _us(pub), seq, w.schema_names[topic] or None, w.message_encodings[topic],
                        bytes(data)))
    return sorted(out)


def _match(got, want):
    """Rows equal, where a writer did not say a field (None in ``want``) any value is taken."""
    assert len(got) == len(want)
    for g, e in zip(got, want, strict=True):
        assert all(ev is None or gv == ev for gv, ev in zip(g, e, strict=True)), (g, e)


@pytest.mark.parametrize("kind", ["json", "json-noschema-cut", "json-none", "raw", "ros2-cdr", "rosbag2",
                                  "foxglove-sdk", "mcap-protobuf"])
def test_each_message_is_a_row_with_what_its_writer_wrote(spark, written, kind):
    w = written[kind]
    df = spark.read.format("a0").load(w.path)
    assert reader_in_use(df) == "jvm"
    assert df.columns == TODAY + MCAP_COLUMNS
    got = mcap_rows(df)
    want = expected(w)
    assert got and len(got) == w.count()
    _match(got, want)
    # a foreign row has no a0py packet: seq, time_mono and headers NULL, time_wall its publish time
    odd = df.filter("seq is not null or time_mono is not null or headers is not null "
                    "or time_wall != publish_time").count()
    assert odd == 0


def test_a_directory_of_rosbag2_bags_reads_each_bags_files(spark, tmp_path):
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    bags = [foreign.write_rosbag2(fleet / f"robot{r}", n=40 + 10 * r, robot=r) for r in range(3)]
    df = spark.read.format("a0").load(str(fleet))
    assert reader_in_use(df) == "jvm"
    _match(mcap_rows(df), sorted(row for b in bags for row in expected(b)))
    # a bag stored in sqlite3, or compressed file by file: an error naming the bag
    for key, value, why in (("storage_identifier", "sqlite3", "sqlite3 storage"),
                            ("compression_mode", "FILE", "compression mode FILE")):
        meta = (fleet / "robot0" / "metadata.yaml").read_text()
        odd = tmp_path / f"odd-{value}"
        odd.mkdir()
        old = next(line for line in meta.splitlines() if line.strip().startswith(key + ":"))
        (odd / "metadata.yaml").write_text(meta.replace(old, old.split(":")[0] + ": " + value))
        with pytest.raises(Exception, match=rf"odd-{value}: a rosbag2 directory with {why}"):
            spark.read.format("a0").load(str(odd)).collect()


def test_the_writers_values_are_exact_where_every_field_is_known(written):
    # the expectations above are not vacuous: these writers state every field
    for kind in ("json", "raw", "ros2-cdr", "mcap-protobuf", "foxglove-sdk"):
        w = written[kind]
        assert all(None not in it[:4] for items in w.messages.values() for it in items), kind
    assert written["json-noschema-cut"].schema_names["/ev/json"] == ""


def test_several_kinds_in_one_read_with_topic_pushdown(spark, written):
    paths = [written[k].path for k in ("json", "raw", "ros2-cdr")]
    df = spark.read.format("a0").load(paths)
    want = sorted(expected(written["json"]) + expected(written["raw"]) + expected(written["ros2-cdr"]))
    _match(mcap_rows(df), want)
    chatter = df.filter("topic = '/chatter'")
    _match(mcap_rows(chatter), expected(written["ros2-cdr"], {"/chatter"}))
    whole = read_metrics(df)
    only = read_metrics(chatter)
    assert 0 < only["chunksRead"] < whole["chunksRead"]
    # option topics selects channels the same way
    by_option = spark.read.format("a0").option("topics", "/raw/blob").load(paths)
    _match(mcap_rows(by_option), expected(written["raw"]))


def test_time_filters_are_exact_and_log_time_skips_chunks_by_the_chunk_index(spark, written):
    w = written["json"]
    items = w.messages["/ev/json"]  # published 500 ns before logged
    whole = spark.read.format("a0").load(w.path)
    for col, at in (("time_wall", 1), ("log_time", 0)):
        lo_us, hi_us = _us(items[400][at]), _us(items[520][at])
        df = whole.filter(f"{col} >= timestamp_micros({lo_us}) and {col} <= timestamp_micros({hi_us})")
        got = sorted(r.sequence for r in df.select("sequence").collect())
        assert got == [it[2] for it in items if lo_us <= _us(it[at]) <= hi_us], col
        assert 115 <= len(got) <= 121
    # the chunk index gives log times: a log_time filter skips the other chunks; a time_wall
    # filter reads them all (publish times of a foreign chunk are not known before it is read)
    lo_us, hi_us = _us(items[400][0]), _us(items[520][0])
    by_log = whole.filter(f"log_time between timestamp_micros({lo_us}) and timestamp_micros({hi_us})")
    assert read_metrics(by_log)["chunksRead"] < read_metrics(whole)["chunksRead"] / 3
    by_wall = whole.filter(f"time_wall between timestamp_micros({lo_us}) and timestamp_micros({hi_us})")
    # (a fresh DataFrame: a plan's metrics add up over its runs)
    assert read_metrics(by_wall)["chunksRead"] == read_metrics(spark.read.format("a0").load(w.path))["chunksRead"]


def test_a_log_time_filter_on_a0py_rows_gives_the_rows_spark_would(spark, tmp_path):
    path = str(tmp_path / "a0.mcap")
    write_segment(path, {"cam": 3000, "imu": 2000}, chunk_bytes=4096, gaps=[("imu", 2001, 2004)])
    df = spark.read.format("a0").option("mcapColumns", "true").option("gaps", "true").load(path)
    every = df.selectExpr("topic", "seq", "unix_micros(log_time) as log_us").collect()
    times = sorted({r.log_us for r in every})
    assert len(times) > 3
    lo, hi = times[len(times) // 4], times[len(times) // 2]
    q = df.filter(f"log_time >= timestamp_micros({lo}) and log_time < timestamp_micros({hi})")
    want = sorted((r.topic, r.seq) for r in every if lo <= r.log_us < hi)
    assert want and sorted((r.topic, r.seq) for r in q.collect()) == want
    assert read_metrics(q)["chunksRead"] < read_metrics(df)["chunksRead"]


def test_a_seq_filter_passes_no_foreign_row(spark, written, tmp_path):
    a0 = str(tmp_path / "a0.mcap")
    write_segment(a0, {"cam": 50})
    df = spark.read.format("a0").load([a0, written["json"].path])
    assert df.count() == 50 + 1500
    assert sorted(r.seq for r in df.filter("seq >= 10").collect()) == list(range(10, 51))
    assert df.filter("seq is null").count() == 1500


# -- which columns ------------------------------------------------------------------


def test_mcap_columns_follow_the_selected_channels_and_the_option(spark, written, tmp_path):
    a0 = str(tmp_path / "a0.mcap")
    write_segment(a0, {"cam": 30, "imu": 20})
    both = [a0, written["raw"].path]
    # only a0py packet channels: today's columns
    assert spark.read.format("a0").load(a0).columns == TODAY
    assert spark.read.format("a0").option("topics", "cam").load(both).columns == TODAY
    # a foreign channel selected: the MCAP columns, a0py rows with their record's values
    df = spark.read.format("a0").load(both)
    assert df.columns == TODAY + MCAP_COLUMNS
    packets = df.filter("topic = 'cam'").select("seq", "sequence", "schema_name", "message_encoding",
                                                "log_time", "publish_time", "time_wall").collect()
    assert len(packets) == 30
    assert {(r.schema_name, r.message_encoding) for r in packets} == {("a0py.Packet", "a0py/packet")}
    assert all(r.sequence == r.seq and r.publish_time == r.time_wall and r.log_time is not None for r in packets)
    # mcapColumns=true on a0py packets alone, false on foreign channels: their rows stay
    assert spark.read.format("a0").option("mcapColumns", "true").load(a0).columns == TODAY + MCAP_COLUMNS
    plain = spark.read.format("a0").option("mcapColumns", "false").load(both)
    assert plain.columns == TODAY
    assert plain.count() == 50 + 500
    assert sorted(bytes(r.payload) for r in plain.filter("topic = '/raw/blob'").collect()) == sorted(
        bytes(it[3]) for it in written["raw"].messages["/raw/blob"])
    # with the other options' columns, in their places
    opt = spark.read.format("a0").option("gaps", "true").option("recordTime", "true").option("headers", "false")
    assert opt.load(both).columns == ["topic", "seq", "time_mono", "time_wall", "payload", *MCAP_COLUMNS,
                                      "is_gap", "gap_first", "gap_last", "time_record"]
    with pytest.raises(Exception, match="mcapColumns='sometimes': use auto, true or false"):
        spark.read.format("a0").option("mcapColumns", "sometimes").load(a0).collect()


def test_a0pys_json_copies_are_no_rows_and_select_no_mcap_columns(spark, tmp_path):
    path = str(tmp_path / "copies.mcap")
    payloads = [json.dumps({"x": i}).encode() for i in range(20)]
    with SegmentWriter(path) as w:
        w.write_frames("cam", [a0py.Packet({}, p).to_bytes() for p in payloads], foreign.T0, seqs=range(1, 21))
        w.write_json("cam", list(range(1, 21)), payloads, foreign.T0, [foreign.T0] * 20)
    df = spark.read.format("a0").load(path)
    assert df.columns == TODAY
    assert sorted((r.topic, r.seq, bytes(r.payload)) for r in df.collect()) == [
        ("cam", i + 1, p) for i, p in enumerate(payloads)]
    assert spark.read.format("a0").option("mcapColumns", "true").load(path).count() == 20


def test_decode_true_is_handed_to_the_python_source(spark, written):
    load = spark.read.format("a0").option("decode", "true").load
    if PYTHON_DECODES:
        assert reader_in_use(load(written["json"].path)) == "python"
    else:  # a Python source without option decode yet: its own error says it was handed the read
        with pytest.raises(Exception, match=r"(?s)PYTHON_DATA_SOURCE_ERROR.*unknown option 'decode'"):
            load(written["json"].path)
    assert reader_in_use(spark) == "jvm"
    assert reader_in_use(spark.read.format("a0").option("decode", "false").load(written["json"].path)) == "jvm"


# -- a0py's typed topics ------------------------------------------------------------------

POINT = a0py.Schema.json_schema("ty.Point", {"type": "object", "properties": {"x": {"type": "number"}}})


def _packet(i):
    extra = {"frame": f"f{i}", "é": "ü"} if i % 4 == 0 else {"k": str(i)}
    return a0py.Packet(extra, json.dumps({"x": i / 2}).encode())


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    """A segment with typed topic ty/p (chunks of headers and of payloads written in pairs) and,
    as its twin, the same packets as whole packets on topic twin."""
    path = str(tmp_path_factory.mktemp("typed") / "typed.mcap")
    n = 600
    with SegmentWriter(path, chunk_bytes=4096) as w:
        w.add_typed_topic("ty/p", POINT)
        for start in range(0, n, 50):
            frames = [_packet(i).to_bytes() for i in range(start, start + 50)]
            seqs = list(range(start + 1, start + 51))
            w.write_frames("ty/p", frames, foreign.T0 + start * 1000, seqs=seqs)
            w.write_frames("twin", frames, foreign.T0 + start * 1000, seqs=seqs)
    return path, n


def test_typed_rows_are_joined_with_their_headers_message_by_sequence(spark, typed):
    path, n = typed
    for maxbytes in ("33554432", "3000"):  # one partition, and a pair of chunks split between partitions
        df = spark.read.format("a0").option("maxPartitionBytes", maxbytes).load(path)
        assert reader_in_use(df) == "jvm"
        assert df.columns == TODAY + MCAP_COLUMNS
        rows = {(r.topic, r.seq): r for r in df.collect()}
        assert len(rows) == 2 * n
        assert {t for t, _ in rows} == {"ty/p", "twin"}  # no /a0py/headers row
        for i in range(n):
            t, p = rows[("ty/p", i + 1)], rows[("twin", i + 1)]
            assert bytes(t.payload) == json.dumps({"x": i / 2}).encode() == bytes(p.payload)
            assert (t.time_mono, t.time_wall, t.headers) == (p.time_mono, p.time_wall, p.headers)
            assert (t.sequence, t.log_time, t.publish_time) == (p.sequence, p.log_time, p.publish_time)
            assert (t.schema_name, t.message_encoding) == ("ty.Point", "json")
            assert t.headers["frame" if i % 4 == 0 else "k"] == (f"f{i}" if i % 4 == 0 else str(i))
    # pushdown on the a0py topic and on seq
    df = spark.read.format("a0").load(path).filter("topic = 'ty/p' and seq between 100 and 130")
    assert sorted(r.seq for r in df.collect()) == list(range(100, 131))
    assert read_metrics(df)["chunksRead"] < read_metrics(spark.read.format("a0").load(path))["chunksRead"] / 3
    assert spark.read.format("a0").option("topics", "ty/p").load(path).count() == n


PUBLISH = """
import sys, a0py
js, raw = a0py.Publisher("ty/json"), a0py.Publisher("ty/raw")
for i in range(int(sys.argv[1]), int(sys.argv[2])):
    js.pub_json({"i": i, "name": f"n{i}", "pose": {"x": i / 2}}, headers={"i": str(i)})
    raw.pub(b"raw%d" % i, headers={"i": str(i)})
"""


def _run(args, env, **kw):
    import subprocess
    import sys

    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.slow
def test_a_recorders_typed_topic_reads_as_the_packets_published(spark, root, tmp_path):
    """A typed publisher (pub_json) and a raw one in one process, ``a0py record`` in another."""
    import signal
    import subprocess
    import sys

    from helpers.procs import REPO
    from mcap.reader import make_reader

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    assert _run(["-c", PUBLISH, "0", "1"], env).returncode == 0  # the topics and the typed one's schema
    out = tmp_path / "rec"
    rec = subprocess.Popen([sys.executable, "-m", "a0py", "record", "ty/json", "ty/raw", "--out", str(out),
                            "--no-progress"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "recording to" in rec.stderr.readline()
        r = _run(["-c", PUBLISH, "1", "41"], env)
        assert r.returncode == 0, r.stderr
        rec.send_signal(signal.SIGINT)
        _, err = rec.communicate(timeout=60)
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait(timeout=30)
    assert rec.returncode == 0, err
    (path,) = sorted(out.glob("*.mcap"))
    with open(path, "rb") as f:  # the packets as published, rejoined by the format's own rule
        msgs = {(ch.topic, m.sequence): m for _, ch, m in make_reader(f).iter_messages()}
    df = spark.read.format("a0").load(str(path))
    assert reader_in_use(df) == "jvm" and df.columns == TODAY + MCAP_COLUMNS
    rows = df.collect()
    assert sorted(r.topic for r in rows) == ["ty/json"] * 40 + ["ty/raw"] * 40
    for r in rows:
        if r.topic == "ty/raw":
            assert (r.schema_name, r.message_encoding) == ("a0py.Packet", "a0py/packet")
            assert bytes(r.payload) == b"raw%d" % int(r.headers["i"])
            continue
        whole = a0py.Packet.from_bytes(recformat.join_packet(
            msgs[("/a0py/headers/ty/json", r.sequence)].data, msgs[("ty/json", r.sequence)].data))
        i = int(r.headers["i"])
        assert json.loads(bytes(r.payload)) == {"i": i, "name": f"n{i}", "pose": {"x": i / 2}}
        assert bytes(r.payload) == whole.payload
        assert dict(r.headers) == dict(whole.headers)
        assert r.seq == int(whole.headers["a0_transport_seq"]) == r.sequence
        assert r.time_mono == int(whole.headers["a0_time_mono"])
        assert r.message_encoding == "json" and r.schema_name


def _typed_by_hand(path, missing):
    """A typed topic's two channels written by the official writer (same chunks), headers
    messages missing for the sequences in ``missing`` (as a file cut between them leaves it)."""
    from mcap.writer import Writer

    with open(path, "wb") as f:
        w = Writer(f, chunk_size=2048)
        w.start(profile="", library="test")
        psid = w.register_schema("a0py.Packet", "", b"")
        sid = w.register_schema(POINT.name, POINT.encoding, POINT.data)
        hid = w.register_channel("/a0py/headers/ty/q", recformat.PACKET_ENCODING, psid,
                                 {recformat.TOPIC_KEY: "ty/q", recformat.PAYLOADS_KEY: "ty/q"})
        cid = w.register_channel("ty/q", "json", sid,
                                 {recformat.TOPIC_KEY: "ty/q", recformat.HEADERS_KEY: "/a0py/headers/ty/q"})
        for i in range(40):
            whole = _packet(i).to_bytes()
            payload = json.dumps({"x": i / 2}).encode()
            head = bytearray(whole[:len(whole) - len(payload)])
            head[40:48] = (0).to_bytes(8, "little")
            t = foreign.T0 + i * 1000
            if i not in missing:
                w.add_message(hid, log_time=t, publish_time=t, sequence=i, data=bytes(head))
            w.add_message(cid, log_time=t, publish_time=t, sequence=i, data=payload)
        w.finish()


def test_a_typed_message_without_its_headers_message_is_a_row_like_a_foreign_one(spark, tmp_path):
    path = str(tmp_path / "q.mcap")
    _typed_by_hand(path, missing={3, 17})
    assert recformat.join_packet  # the layout the writer uses, rejoined by format.join_packet
    rows = sorted(spark.read.format("a0").load(path).collect(), key=lambda r: r.sequence)
    assert [r.sequence for r in rows] == list(range(40))
    for r in rows:
        assert bytes(r.payload) == json.dumps({"x": r.sequence / 2}).encode()
        assert (r.topic, r.schema_name, r.message_encoding) == ("ty/q", "ty.Point", "json")
        if r.sequence in (3, 17):
            assert (r.seq, r.time_mono, r.headers) == (None, None, None)
        else:
            assert r.seq == r.sequence and r.headers is not None
    assert spark.read.format("a0").load(path).filter("seq >= 0").count() == 38


# -- damaged foreign files ----------------------------------------------------------------


def _fails(spark, path, pattern, **options):
    reader = spark.read.format("a0")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=pattern):
        reader.load(path).collect()


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _chunks(path):
    from mcap.reader import make_reader

    with open(path, "rb") as f:
        return make_reader(f).get_summary().chunk_indexes


def test_a_damaged_foreign_file_is_an_error_naming_file_byte_and_field(spark, written, tmp_path):
    src = written["json-none"].path  # chunks stored uncompressed: their records can be patched in place
    size = os.path.getsize(src)
    ci = _chunks(src)[1]
    records = ci.chunk_start_offset + 9 + 8 + 8 + 8 + 4 + 4 + 0 + 8  # compression ""
    # the first record of the chunk (schema/channel/message) claims more bytes than the chunk holds
    bad = cut(src, str(tmp_path / "msglen.mcap"), size)
    _patch(bad, records + 1, (2**40).to_bytes(8, "little"))
    _fails(spark, bad, rf"msglen\.mcap: at byte {ci.chunk_start_offset}: chunk records: record of opcode 0x\w+ at 0 "
           "claims 1099511627776 bytes", validateCrc="false")
    _fails(spark, bad, rf"msglen\.mcap: at byte {ci.chunk_start_offset}: chunk CRC mismatch")
    # a chunk index pointing past the data section
    bad = cut(src, str(tmp_path / "index.mcap"), size)
    with open(bad, "rb") as f:
        data = f.read()
    at = data.rfind(ci.chunk_start_offset.to_bytes(8, "little"))
    _patch(bad, at, (size * 2).to_bytes(8, "little"))
    _fails(spark, bad, r"index\.mcap: at byte \d+: (chunk index: chunk \[\d+, \d+\) outside the data section|"
           r"summary CRC mismatch)")
    # a channel record's topic length flipped, in a file without a summary (planned by a scan)
    nos = written["json-noschema-cut"].path
    with open(nos, "rb") as f:
        data = f.read()
    topic = data.find(b"/ev/json")
    bad = str(tmp_path / "chan.mcap")
    with open(bad, "wb") as f:
        f.write(data[:topic - 4] + (2**31).to_bytes(4, "little") + data[topic:])
    _fails(spark, bad, r"chan\.mcap: at byte \d+: channel record: field topic needs 2147483648 bytes")
    # the JVM goes on
    assert spark.read.format("a0").load(src).count() == 300


def test_a_truncated_foreign_file_reads_its_whole_chunks_or_fails_naming_it(spark, written, tmp_path):
    w = written["json"]
    src = w.path
    size = os.path.getsize(src)
    want = set(expected(w))
    outcomes = set()
    for i, n in enumerate(range(9, size, max(1, size // 29))):
        p = cut(src, str(tmp_path / f"t{i}.mcap"), n)
        try:
            # mcapColumns: a cut that leaves no channel record selects no foreign channel
            got = mcap_rows(spark.read.format("a0").option("mcapColumns", "true").load(p))
        except Exception as e:  # noqa: BLE001 - any failure must name the file and be no JVM crash
            assert f"t{i}.mcap" in str(e), str(e)[-2000:]
            assert "OutOfMemoryError" not in str(e) and "IndexOutOfBounds" not in str(e), str(e)[-2000:]
            outcomes.add("error")
            continue
        assert set(got) <= want and len(set(got)) == len(got)
        # whole chunks: the rows are the first messages written
        assert sorted(r[3] for r in got) == list(range(len(got)))
        outcomes.add(len(got))
    assert len(outcomes) > 5  # the cuts left different numbers of whole chunks
    assert spark.read.format("a0").load(src).count() == 1500


def test_random_damage_to_a_foreign_file_is_rows_or_an_error_naming_it(spark, written, tmp_path):
    import random

    with open(written["ros2-cdr"].path, "rb") as f:
        original = f.read()
    rng = random.Random(len(original))
    for i in range(16):
        data = bytearray(original)
        for _ in range(rng.choice((1, 3))):
            at = rng.randrange(len(data))
            data[at] = rng.choice((0x00, 0xFF, data[at] ^ (1 << rng.randrange(8))))
        bad = tmp_path / f"bad{i}.mcap"
        bad.write_bytes(bytes(data))
        try:
            spark.read.format("a0").option("validateCrc", str(i % 2 == 0).lower()).load(str(bad)).collect()
        except Exception as e:  # noqa: BLE001 - any failure must name the damaged file
            assert f"bad{i}.mcap" in str(e), str(e)[-2000:]
            assert "OutOfMemoryError" not in str(e) and "IndexOutOfBounds" not in str(e), str(e)[-2000:]
    assert spark.read.format("a0").load(written["ros2-cdr"].path).count() == written["ros2-cdr"].count()


# -- both readers ------------------------------------------------------------------------


def _all_rows(df):
    out = []
    for r in df.collect():
        d = r.asDict()
        if d.get("headers") is not None:
            d["headers"] = tuple(d["headers"].items())
        if d.get("payload") is not None:
            d["payload"] = bytes(d["payload"])
        out.append(tuple(sorted(d.items())))
    return sorted(out, key=repr)


@pytest.mark.skipif(not PYTHON_READS_FOREIGN, reason="the Python a0 source reads foreign channels once "
                    "format.KIND_FOREIGN exists (the Python side of the same change)")
@pytest.mark.parametrize("options", [(), (("mcapColumns", "false"),), (("gaps", "true"), ("recordTime", "true")),
                                     (("headers", "false"), ("maxPartitionBytes", "3000"))],
                         ids=lambda o: ",".join(f"{k}={v}" for k, v in o) or "default")
def test_every_row_and_column_equals_the_python_sources(spark, written, typed, tmp_path, options):
    register(spark)
    by_hand = str(tmp_path / "q.mcap")
    _typed_by_hand(by_hand, missing={5})
    paths = [w.path for w in written.values()] + [typed[0], by_hand]
    for path in paths:
        got = []
        for fmt in ("a0", "a0.python"):
            reader = spark.read.format(fmt)
            for k, v in options:
                reader = reader.option(k, v)
            df = reader.load(path)
            got.append((df.columns, _all_rows(df)))
        assert got[0][0] == got[1][0], path
        assert got[0][1] and got[0][1] == got[1][1], path
