"""``spark.readStream.format("a0").load(PATH)``: recordings as a stream.

Files written between triggers by the tools users have (helpers/foreign.py)
and by a0py's recorder (its own process) are each read once, with the
columns and rows of a batch read of the same files; a file still being
written is read only once its writer closes it; a query restarted from its
checkpoint reads no file twice and misses none (the last batch replayed
with the same files); ``Trigger.AvailableNow``, ``maxFilesPerTrigger``,
``decode=true``; a damaged file fails the batch naming it; options of the
stream of live topics are refused, and the other way round.

The streams are opened as users open them, ``format("a0")``: in the suite's
session that name is the JVM reader's, which checks options at ``load()``
and hands streams to the Python source."""

import glob
import os
import subprocess
import sys
import textwrap
import time

import pytest
from helpers.foreign import (
    write_mcap_json,
    write_mcap_raw,
    write_ros2_mcap,
    write_rosbag2,
)
from helpers.procs import REPO

from a0py.spark import register

FILE_STREAM = "a0"  # the name users give, the JVM reader's in this session
KEY = ("topic", "log_time", "payload")


@pytest.fixture(scope="module")
def spark(spark):
    """The session's SparkSession with the Python source registered under ``a0.python``."""
    register(spark)
    return spark


@pytest.fixture
def arena_size():
    """``root``'s arenas hold every frame the recorder test publishes (none evicted on a loaded machine)."""
    return "4M"


def _rows(df):
    return sorted(tuple(r) for r in df.select(*KEY).collect())


def _batch_rows(spark, path, **options):
    reader = spark.read.format("a0")
    for k, v in options.items():
        reader = reader.option(k, v)
    return _rows(reader.load(path))


class Batches:
    """``foreachBatch`` sink: each micro-batch's rows (``KEY``) by batch id."""

    def __init__(self):
        self.got = {}

    def __call__(self, df, batch_id):
        self.got[batch_id] = sorted(tuple(r) for r in df.select(*KEY).collect())

    def all_rows(self):
        return sorted(r for rows in self.got.values() for r in rows)


def _run_available_now(df, ck, sink):
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
    q.awaitTermination(240)
    assert q.exception() is None, q.exception()
    return q


def test_files_that_appear_between_triggers_are_each_read_once_with_the_batch_columns(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_mcap_json(str(d / "a.mcap"), n=120)
    df = spark.readStream.format("a0").load(str(d))
    assert df.isStreaming and "schema_name" in df.columns  # the MCAP columns: from the file present at start
    sink = Batches()
    q = df.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds").start()
    try:
        q.processAllAvailable()
        assert sink.all_rows() == _batch_rows(spark, str(d / "a.mcap"))
        first = set(sink.got)
        write_ros2_mcap(str(d / "b.mcap"), n=80)
        write_mcap_raw(str(d / "c.mcap"), n=30)
        write_rosbag2(d / "bag", n=40)  # a rosbag2 directory: metadata.yaml + its .mcap
        q.processAllAvailable()
    finally:
        q.stop()
    assert sink.all_rows() == _batch_rows(spark, str(d))  # every row of every file, once
    later = sorted(r for i, rows in sink.got.items() if i not in first for r in rows)
    new_files = [str(d / "b.mcap"), str(d / "c.mcap"), str(d / "bag")]
    assert later == _batch_rows(spark, new_files)  # the later batches hold the new files' rows only
    assert {r[0] for r in later} == {"/imu", "/chatter", "/raw/blob"}


def test_the_stream_of_a_file_has_the_batch_reads_columns_and_values(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_ros2_mcap(str(d / "b.mcap"), n=50)
    got = []
    q = (spark.readStream.format("a0").load(str(d)).writeStream
         .foreachBatch(lambda df, i: got.append(df.collect())).trigger(availableNow=True).start())
    q.awaitTermination(240)
    batch = spark.read.format("a0").load(str(d))
    streamed = sorted((r for rows in got for r in rows), key=lambda r: (r.topic, r.log_time))
    assert streamed == sorted(batch.collect(), key=lambda r: (r.topic, r.log_time))
    assert streamed[0].asDict().keys() == batch.collect()[0].asDict().keys()


def test_decode_on_a_stream_gives_the_decoded_messages_of_each_new_file(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_ros2_mcap(str(d / "r0.mcap"), n=30, robot=0, extra_string_topic=False)
    df = spark.readStream.format("a0").option("decode", "true").option("topics", "/imu").load(str(d))
    assert "message" in df.columns and "decode_error" in df.columns
    got = []

    def sink(b, i):
        got.extend(b.select("log_time", "message.angular_velocity.x", "message.header.frame_id",
                            "decode_error").collect())

    q = df.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds").start()
    try:
        q.processAllAvailable()
        written = write_ros2_mcap(str(d / "r1.mcap"), n=30, robot=1, extra_string_topic=False)
        q.processAllAvailable()
    finally:
        q.stop()
    want = (spark.read.format("a0").option("decode", "true").option("topics", "/imu").load(str(d))
            .select("log_time", "message.angular_velocity.x", "message.header.frame_id", "decode_error").collect())
    assert sorted(got) == sorted(want) and len(got) == 60
    assert all(r.decode_error is None for r in got)
    robot1 = {v["header"]["frame_id"] for *_, v in written.messages["/imu"]}
    assert robot1 <= {r.frame_id for r in got}


def test_a_half_written_file_is_read_only_once_its_writer_closes_it(spark, tmp_path):
    from mcap.writer import Writer

    d = tmp_path / "in"
    d.mkdir()
    write_mcap_raw(str(d / "a.mcap"), n=20)
    sink = Batches()
    q = (spark.readStream.format("a0").load(str(d)).writeStream.foreachBatch(sink)
         .trigger(processingTime="200 milliseconds").start())
    try:
        q.processAllAvailable()
        with open(d / "b.mcap", "wb") as f:
            w = Writer(f, chunk_size=1024)
            w.start(profile="", library="half")
            cid = w.register_channel("/half", "application/octet-stream", 0)
            for i in range(400):
                w.add_message(cid, log_time=i, data=b"x%05d" % i * 20, publish_time=i)
            f.flush()  # several whole chunks on disk, no summary, no footer
            assert os.path.getsize(d / "b.mcap") > 10_000
            n_before = len(sink.got)
            q.processAllAvailable()
            # a few more triggers see the half file (one that finds no new data leaves no
            # progress event or batch to wait for: a while of them)
            time.sleep(1.0)
            assert all(r[0] != "/half" for r in sink.all_rows())
            w.finish()
        q.processAllAvailable()
    finally:
        q.stop()
    half = [r for r in sink.all_rows() if r[0] == "/half"]
    assert len(half) == 400 and len(sink.got) > n_before
    assert sink.all_rows() == _batch_rows(spark, str(d))


def test_a_file_left_unfinished_is_read_up_to_its_last_chunk_with_read_unfinished_after(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_mcap_json(str(d / "cut.mcap"), n=300, chunk_size=4096, summary=False)  # no summary, no footer
    write_mcap_raw(str(d / "whole.mcap"), n=10)
    without = Batches()
    _run_available_now(spark.readStream.format("a0").load(str(d)), tmp_path / "ck1", without)
    assert {r[0] for r in without.all_rows()} == {"/raw/blob"}  # the unfinished file: not read
    with_opt = Batches()
    _run_available_now(spark.readStream.format(FILE_STREAM).option("readUnfinishedAfter", "0").load(str(d)),
                       tmp_path / "ck2", with_opt)
    assert with_opt.all_rows() == _batch_rows(spark, str(d))
    assert len([r for r in with_opt.all_rows() if r[0] == "/ev/json"]) == 300


def test_available_now_with_max_files_per_trigger_reads_one_file_a_batch_then_stops(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(3):
        write_mcap_raw(str(d / f"f{i}.mcap"), n=10 + i, topic=f"/t{i}")
    sink = Batches()
    df = spark.readStream.format(FILE_STREAM).option("maxFilesPerTrigger", "1").load(str(d))
    q = _run_available_now(df, tmp_path / "ck", sink)
    assert not q.isActive
    per_batch = [{r[0] for r in rows} for _, rows in sorted(sink.got.items()) if rows]
    assert sorted(per_batch, key=sorted) == [{"/t0"}, {"/t1"}, {"/t2"}]  # one file a batch
    assert sink.all_rows() == _batch_rows(spark, str(d))


def test_a_query_restarted_from_its_checkpoint_reads_no_file_twice_and_misses_none(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    ck = tmp_path / "ck"
    write_mcap_raw(str(d / "f0.mcap"), n=15, topic="/t0")
    write_mcap_raw(str(d / "f1.mcap"), n=16, topic="/t1")

    def stream():
        return spark.readStream.format(FILE_STREAM).option("maxFilesPerTrigger", "1").load(str(d))

    first = Batches()
    _run_available_now(stream(), ck, first)
    assert sorted({r[0] for r in first.all_rows()}) == ["/t0", "/t1"]
    # The last batch's commit lost (the query died after planning it): a restart replays that batch with
    # the same files, then reads the new ones.
    last = max(int(os.path.basename(p)) for p in glob.glob(str(ck / "commits" / "*")) if p[-1].isdigit())
    os.remove(ck / "commits" / str(last))
    if os.path.exists(ck / "commits" / f".{last}.crc"):
        os.remove(ck / "commits" / f".{last}.crc")
    write_mcap_raw(str(d / "f2.mcap"), n=17, topic="/t2")
    write_ros2_mcap(str(d / "f3.mcap"), n=20, extra_string_topic=False)
    second = Batches()
    _run_available_now(stream(), ck, second)
    assert second.got[last] == first.got[last]  # the replayed batch: the same rows
    new = sorted(r for i, rows in second.got.items() if i > last for r in rows)
    assert new == _batch_rows(spark, [str(d / "f2.mcap"), str(d / "f3.mcap")])
    third = Batches()
    _run_available_now(stream(), ck, third)
    assert third.all_rows() == []  # nothing new: nothing read again


RECORD_AND_PUBLISH = textwrap.dedent("""
    import sys, time, a0py
    topic, n = sys.argv[1], int(sys.argv[2])
    pub = a0py.Publisher(topic)
    for i in range(n):
        pub.pub(b"%06d" % i + b"." * 200)
        if i % 200 == 0:
            time.sleep(0.01)
""")


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    return env


def test_segments_of_a0pys_recorder_are_read_as_it_closes_them(spark, root, tmp_path):
    out = tmp_path / "rec"
    rec = subprocess.Popen([sys.executable, "-m", "a0py.cli.recordings", "record", "seg", "--out", str(out),
                            "--max-bytes", "32k", "--compression", "none"],
                           env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = rec.stderr.readline()
        assert "recording to" in line or "waiting" in line, line
        pub = subprocess.run([sys.executable, "-c", RECORD_AND_PUBLISH, "seg", "1500"], env=_env(), timeout=120)
        assert pub.returncode == 0
        deadline = time.monotonic() + 60
        while len(glob.glob(str(out / "*.mcap"))) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        sink = Batches()
        df = spark.readStream.format("a0").option("mcapColumns", "true").load(str(out))
        q = df.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds").start()
        try:
            q.processAllAvailable()
            seen = sink.all_rows()
            # the segment being written is not read; the closed ones are, whole
            assert seen and all(r[0] == "seg" for r in seen)
            rec.send_signal(2)  # Ctrl-C: the recorder finishes its last segment
            assert rec.wait(timeout=60) == 0, rec.stderr.read()
            q.processAllAvailable()
        finally:
            q.stop()
    finally:
        if rec.poll() is None:
            rec.kill()
            rec.wait()
    # while the recorder ran, whole segments were read, never part of one, and not the open one
    by_segment = [set(_batch_rows(spark, p, mcapColumns="true")) for p in sorted(glob.glob(str(out / "*.mcap")))]
    assert all(not (rows & set(seen)) or rows <= set(seen) for rows in by_segment)
    assert not (by_segment[-1] & set(seen))
    every = sink.all_rows()
    assert every == _batch_rows(spark, str(out), mcapColumns="true")
    seqs = sorted(r.seq for r in spark.read.format("a0").load(str(out)).collect())
    assert len(every) == len(seqs) == 1500 and seqs == list(range(1, 1501))


def test_a_damaged_file_fails_the_batch_with_an_error_naming_it(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_mcap_raw(str(d / "good.mcap"), n=10)
    bad = d / "bad.mcap"
    write_mcap_json(str(bad), n=50)
    data = bytearray(bad.read_bytes())
    data[-60] ^= 0xFF  # inside the summary: its CRC no longer matches
    bad.write_bytes(bytes(data))
    q = (spark.readStream.format("a0").option("mcapColumns", "true").load(str(d)).writeStream
         .foreachBatch(lambda b, i: b.count()).trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"bad\.mcap.*(CRC|damaged)"):
        q.awaitTermination(240)
    not_mcap = tmp_path / "other"
    not_mcap.mkdir()
    (not_mcap / "x.mcap").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    q = (spark.readStream.format("a0").load(str(not_mcap)).writeStream.foreachBatch(lambda b, i: b.count())
         .trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"x\.mcap: does not start with the MCAP magic"):
        q.awaitTermination(240)


def test_options_of_the_other_kind_of_stream_are_refused(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_mcap_raw(str(d / "a.mcap"), n=5)
    q = (spark.readStream.format("a0").option("startingOffsets", "earliest").load(str(d)).writeStream
         .foreachBatch(lambda b, i: None).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="option startingOffsets is for streams of live topics"):
        q.awaitTermination(240)
    q = (spark.readStream.format(FILE_STREAM).option("topics", "x").option("maxFilesPerTrigger", "2").load()
         .writeStream.foreachBatch(lambda b, i: None).trigger(availableNow=True).start())
    with pytest.raises(Exception, match="option maxFilesPerTrigger is for streams of recordings"):
        q.awaitTermination(240)


def test_a_stream_of_an_empty_glob_starts_and_reads_files_as_they_come(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    df = spark.readStream.format("a0").option("mcapColumns", "true").load(str(d / "robot*.mcap"))
    sink = Batches()
    q = df.writeStream.foreachBatch(sink).trigger(processingTime="200 milliseconds").start()
    try:
        q.processAllAvailable()
        assert sink.all_rows() == []
        write_mcap_raw(str(d / "robot1.mcap"), n=7)
        write_mcap_raw(str(d / "other.mcap"), n=3)  # not matched by the glob
        q.processAllAvailable()
    finally:
        q.stop()
    assert sink.all_rows() == _batch_rows(spark, str(d / "robot1.mcap"))
    with pytest.raises(Exception, match="holds no recording yet"):
        spark.readStream.format("a0").option("decode", "true").load(str(d / "none*.mcap"))


def test_offsets_of_thousands_of_files_stay_small_and_name_exactly_the_files_read():
    import json
    import random

    from a0py.recording import RecordingOptionError
    from a0py.spark.file_stream import decode_files, encode_files

    rng = random.Random(7)
    files = {f"/data/fleet/robot{r:02d}/a0py_{i:05d}.mcap": rng.randrange(50 << 20, 64 << 20)
             for r in range(10) for i in range(500)}
    offset = encode_files(files)
    assert decode_files(json.loads(json.dumps(offset))) == files
    assert len(json.dumps(offset)) < 16 * len(files)  # about 10 bytes a file
    assert encode_files(dict(reversed(list(files.items())))) == offset  # a function of the set alone
    with pytest.raises(RecordingOptionError, match="not one of the a0 source's streams of recordings"):
        decode_files({"robot/pose": 12})  # a live-topics stream's offset


def test_a_stream_of_shm_names_streams_those_live_topics(spark, tmp_path):
    import a0py
    from a0py.proto.topic import list_topics, unlink_topic

    root = f"shm:a0pysf{os.getpid()}x{time.monotonic_ns() % 10**8}"
    pub = a0py.Publisher(a0py.Topic("sf/a", root=root))
    try:
        for i in range(5):
            pub.pub(b"p%d" % i)
        got = []
        q = (spark.readStream.format("a0").option("root", root).option("startingOffsets", "earliest")
             .load("shm://sf/a").writeStream.foreachBatch(lambda b, i: got.extend(b.collect()))
             .trigger(availableNow=True).start())
        q.awaitTermination(240)
        assert q.exception() is None
        assert sorted((r.seq, r.payload) for r in got) == [(i + 1, b"p%d" % i) for i in range(5)]
    finally:
        pub.close()
        for t in list_topics(root):
            unlink_topic(a0py.Topic(t, root=root))


def test_a_later_file_of_another_message_type_fails_a_decoding_stream_naming_it(spark, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    write_mcap_json(str(d / "a.mcap"), n=10)
    got = []
    q = (spark.readStream.format("a0").option("decode", "true").load(str(d)).writeStream
         .foreachBatch(lambda b, i: got.extend(b.select("message.name").collect()))
         .trigger(processingTime="200 milliseconds").start())
    try:
        q.processAllAvailable()
        assert sorted(r.name for r in got) == sorted(f"ev{i}" for i in range(10))
        write_ros2_mcap(str(d / "b.mcap"), n=5)
        with pytest.raises(Exception, match=r"b\.mcap: decode=true: its channels of .*sensor_msgs/msg/Imu in cdr"):
            q.processAllAvailable()
    finally:
        q.stop()


def test_a_decoding_stream_of_an_empty_directory_takes_its_message_type_from_the_schema_given(spark, tmp_path):
    sample, d = tmp_path / "sample", tmp_path / "in"
    sample.mkdir()
    d.mkdir()
    write_mcap_json(str(sample / "s.mcap"), n=2)
    schema = spark.read.format("a0").option("decode", "true").load(str(sample)).schema
    got = []
    q = (spark.readStream.format("a0").schema(schema).option("decode", "true").load(str(d)).writeStream
         .foreachBatch(lambda b, i: got.extend(b.select("message.i", "message.pos.y", "decode_error").collect()))
         .trigger(processingTime="200 milliseconds").start())
    try:
        q.processAllAvailable()
        write_mcap_json(str(d / "a.mcap"), n=20)
        q.processAllAvailable()
    finally:
        q.stop()
    assert sorted(tuple(r) for r in got) == [(i, -float(i), None) for i in range(20)]
