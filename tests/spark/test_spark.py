"""The ``a0`` PySpark data source, in one shared ``local[2]`` session: batch
rows equal the frames written (several topics and segments, gaps), a file
split into many partitions gives the same rows, pushdown never changes the
rows (and skips chunks), damage is an error naming the file, JSON payloads,
arenas (live topics and file arenas), automatic registration, streaming
(live micro-batches, checkpoint restart, data loss, admission control), and
the same read on a standalone cluster."""

import datetime
import os
import pkgutil
import subprocess
import sys
import textwrap
import time

import pytest
from helpers.mcap_data import EPOCH, T0, cut, flip_byte, write_segment
from helpers.procs import REPO
from helpers.spark_cluster import standalone_cluster

import a0py
from a0py.proto.topic import list_topics, unlink_topic
from a0py.recording.reader import read_layout
from a0py.spark import read_table, register


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    d = tmp_path_factory.mktemp("sparkrecs")
    exp = write_segment(str(d / "a0py_00000.mcap"), {"cam": 600, "imu": 900, "odom": 40},
                        gaps=[("imu", 901, 950)], extra=lambda t, s: [("frame", f"{t}{s}")] if s % 2 else [])
    exp.add(write_segment(str(d / "a0py_00001.mcap"), {"cam": 400, "imu": 100}, compression="lz4",
                          gaps=[("cam", 1001, 1003)], seq_start={"cam": 601, "imu": 951}))
    return str(d), exp


def _us(ts):
    return None if ts is None else (ts.replace(tzinfo=datetime.UTC) - EPOCH) // datetime.timedelta(microseconds=1)


def frames_of(df):
    out = {}
    for r in df.collect():
        if getattr(r, "is_gap", False):
            continue
        out[(r.topic, r.seq)] = (tuple(sorted(r.headers.items())), bytes(r.payload), _us(r.time_wall), r.time_mono)
    return out


def gaps_of(df):
    return {(r.topic, r.gap_first): r.gap_last for r in df.filter("is_gap").collect()}


def expected_frames(exp, keep=lambda topic, seq, wall_us: True):
    return {k: (tuple(sorted(h)), p, w, m) for k, (h, p, w, m) in exp.frames.items() if keep(k[0], k[1], w)}


def test_batch_rows_equal_the_frames_and_gaps_written(spark, recs):
    d, exp = recs
    df = spark.read.format("a0").option("gaps", "true").load(d)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("topic", "string"), ("seq", "bigint"), ("time_mono", "bigint"), ("time_wall", "timestamp"),
        ("headers", "map<string,string>"), ("payload", "binary"), ("is_gap", "boolean"), ("gap_first", "bigint"),
        ("gap_last", "bigint")]
    assert frames_of(df) == expected_frames(exp)
    assert gaps_of(df) == exp.gaps
    plain = spark.read.format("a0").load(d)
    assert plain.columns == ["topic", "seq", "time_mono", "time_wall", "headers", "payload"]
    assert plain.count() == len(exp.frames)


def test_headers_false_gives_the_same_rows_without_the_headers_column(spark, recs):
    d, exp = recs
    df = spark.read.format("a0").option("headers", "false").option("gaps", "true").load(d)
    assert df.columns == ["topic", "seq", "time_mono", "time_wall", "payload", "is_gap", "gap_first", "gap_last"]
    got = {(r.topic, r.seq): (bytes(r.payload), _us(r.time_wall), r.time_mono) for r in df.filter("not is_gap").collect()}
    assert got == {k: (p, w, m) for k, (h, p, w, m) in exp.frames.items()}
    assert gaps_of(df) == exp.gaps
    with pytest.raises(Exception, match=r"option headers='nope': use true or false"):
        spark.read.format("a0").option("headers", "nope").load(d).count()
    # the same in one process
    assert read_table(d, headers=False).column_names == ["topic", "seq", "time_mono", "time_wall", "payload"]


def test_a_file_split_into_many_partitions_gives_the_same_rows(spark, recs):
    d, exp = recs
    df = spark.read.format("a0").option("maxPartitionBytes", "30000").load(d)
    assert df.rdd.getNumPartitions() >= 8
    assert frames_of(df) == expected_frames(exp)
    one = spark.read.format("a0").option("maxPartitionBytes", "30000").load(os.path.join(d, "a0py_00000.mcap"))
    assert one.rdd.getNumPartitions() >= 4
    assert one.count() == 1540


FILTERS = [
    ("topic = 'imu'", lambda t, s, w: t == "imu"),
    ("topic in ('cam', 'odom') and seq > 590 and seq <= 605", lambda t, s, w: t in ("cam", "odom") and 590 < s <= 605),
    ("seq in (1, 7, 950, 951, 999)", lambda t, s, w: s in (1, 7, 950, 951, 999)),
    (f"time_wall >= timestamp_micros({(T0 + 880 * 1_000_000) // 1000}) and topic = 'imu'",
     lambda t, s, w: w >= (T0 + 880 * 1_000_000) // 1000 and t == "imu"),
    (f"time_wall < timestamp_micros({(T0 + 3 * 1_000_000) // 1000})", lambda t, s, w: w < (T0 + 3_000_000) // 1000),
    ("topic = 'imu' or seq = 3", lambda t, s, w: t == "imu" or s == 3),  # not pushed: Spark filters
    ("seq = 5 and topic = 'nothing'", lambda t, s, w: False),
]


@pytest.fixture
def pushdown(spark):
    """Filter pushdown on for the test (Spark's default is off)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.unset("spark.sql.python.filterPushdown.enabled")


@pytest.mark.parametrize("expr,keep", FILTERS, ids=[f[0][:40] for f in FILTERS])
def test_pushdown_returns_the_same_rows_as_no_pushdown(spark, recs, pushdown, expr, keep):
    d, exp = recs
    want = expected_frames(exp, keep)
    # A new DataFrame for each mode: Spark keeps one read plan per DataFrame (docs/spark.md).
    assert frames_of(spark.read.format("a0").option("maxPartitionBytes", "60000").load(d).filter(expr)) == want
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    assert frames_of(spark.read.format("a0").option("maxPartitionBytes", "60000").load(d).filter(expr)) == want


def test_pushdown_skips_the_chunks_of_other_topics(spark, tmp_path, pushdown):
    path = str(tmp_path / "two.mcap")
    write_segment(path, {"a": 200, "b": 200})
    lay = read_layout(path)
    b_id = next(c.id for c in lay.channels.values() if c.topic == "b")
    ref = next(r for r in lay.chunks if r.channel_ids == {b_id})
    flip_byte(path, ref.offset + ref.length - 3)
    assert spark.read.format("a0").load(path).filter("topic = 'a'").count() == 200
    assert spark.read.format("a0").option("topics", "a").load(path).count() == 200  # the option: same skip
    with pytest.raises(Exception, match=r"two\.mcap"):
        spark.read.format("a0").load(path).count()


def test_damaged_files_and_bad_options_are_errors_naming_what_is_wrong(spark, recs, tmp_path):
    d, _ = recs
    bad = cut(os.path.join(d, "a0py_00000.mcap"), str(tmp_path / "bad.mcap"),
              os.path.getsize(os.path.join(d, "a0py_00000.mcap")))
    flip_byte(bad, os.path.getsize(bad) - 60)
    with pytest.raises(Exception, match=r"bad\.mcap.*summary CRC mismatch"):
        spark.read.format("a0").load(bad).count()
    with pytest.raises(Exception, match="no such file or directory"):
        spark.read.format("a0").load(str(tmp_path / "missing")).count()
    with pytest.raises(Exception, match="unknown option 'gapz'"):
        spark.read.format("a0").option("gapz", "true").load(d).count()
    with pytest.raises(Exception, match="option payload=json needs payloadSchema"):
        spark.read.format("a0").option("payload", "json").load(d).count()
    short = cut(os.path.join(d, "a0py_00000.mcap"), str(tmp_path / "short.mcap"),
                os.path.getsize(os.path.join(d, "a0py_00000.mcap")) // 2)
    n = spark.read.format("a0").load(short).count()  # cut short: read up to its last whole chunk
    assert 0 < n < 1540


def test_json_payloads_become_a_struct(spark, tmp_path):
    import json

    path = str(tmp_path / "j.mcap")
    write_segment(path, {"pose": 50}, payload=lambda t, s: json.dumps({"x": s / 2, "tag": f"p{s}"}).encode()
                  if s != 7 else b"broken")
    df = (spark.read.format("a0").option("payload", "json").option("payloadSchema", "x double, tag string")
          .load(path))
    assert df.schema["payload"].dataType.simpleString() == "struct<x:double,tag:string>"
    rows = {r.seq: r.payload for r in df.select("seq", "payload").collect()}
    assert rows[7] is None and rows[8].x == 4.0 and rows[8].tag == "p8" and len(rows) == 50
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL("topic string, seq bigint, time_mono bigint, time_wall timestamp, "
                                "headers map<string,string>, payload struct<x: double>")
    got = spark.read.format("a0").schema(schema).load(path).selectExpr("sum(payload.x)").first()[0]
    assert got == sum(s / 2 for s in range(1, 51) if s != 7)


def test_arenas_read_as_the_frames_they_hold(spark, tmp_path):
    root = f"shm:a0pysp{os.getpid()}"
    try:
        pub = a0py.Publisher(a0py.Topic("cam/left", root=root, size=64 << 10))
        for i in range(2000):
            pub.pub(f"f{i}".encode(), headers={"i": str(i)})
        arena = a0py.Topic("cam/left", root=root).arena("pubsub")
        with a0py.Transport(arena).lock() as t:
            low, high = t.seq_low, t.seq_high
        assert low > 1 and high == 2000
        df = spark.read.format("a0").option("root", root).option("gaps", "true").load("shm://cam/left")
        rows = df.collect()
        frames = sorted(r.seq for r in rows if not r.is_gap)
        assert frames == list(range(low, high + 1))
        assert [(r.gap_first, r.gap_last) for r in rows if r.is_gap] == [(1, low - 1)]
        r = next(r for r in rows if r.seq == high and not r.is_gap)
        assert bytes(r.payload) == b"f1999" and r.headers["i"] == "1999" and r.topic == "cam/left"
        assert r.time_mono > 0 and r.time_wall is not None
        assert df.filter(f"seq >= {high - 9}").count() == 10
        pub.close()
    finally:
        for t in list_topics(root):
            unlink_topic(a0py.Topic(t, root=root))
    d = str(tmp_path / "root")
    pub = a0py.Publisher(a0py.Topic("x", root=d))
    for i in range(30):
        pub.pub(b"v%d" % i)
    pub.close()
    df = spark.read.format("a0").load(os.path.join(d, "x.pubsub.a0"))
    assert sorted((r.topic, r.seq) for r in df.collect()) == [("x", s) for s in range(1, 31)]


def test_the_source_registers_itself_and_by_register(spark, recs):
    found = {m.name for m in pkgutil.iter_modules() if m.name.startswith("pyspark_")}
    assert "pyspark_a0" in found
    from pyspark.sql.datasource import DataSource

    import pyspark_a0

    assert issubclass(pyspark_a0.DefaultSource, DataSource) and pyspark_a0.DefaultSource.name() == "a0"
    assert register(spark) is pyspark_a0.DefaultSource
    assert register(spark) is pyspark_a0.DefaultSource  # again (a0py.spark.session() after a script's own): no error
    assert spark.read.format("a0").load(recs[0]).filter("topic = 'odom'").count() == 40


# -- streaming ---------------------------------------------------------------------


@pytest.fixture
def live_root():
    root = f"shm:a0pyst{os.getpid()}x{time.monotonic_ns() % 10**8}"
    yield root
    for t in list_topics(root):
        unlink_topic(a0py.Topic(t, root=root))


def _wait(cond, timeout=120, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def test_frames_published_while_a_query_runs_arrive_in_later_micro_batches(spark, live_root):
    pub = a0py.Publisher(a0py.Topic("s/a", root=live_root))
    pub.pub(b"before")  # startingOffsets latest: not read
    batches = []
    df = spark.readStream.format("a0").option("root", live_root).option("topics", "s/a").load()
    q = (df.writeStream.foreachBatch(lambda b, i: batches.append((i, sorted(r.seq for r in b.collect()))))
         .trigger(processingTime="500 milliseconds").start())
    try:
        _wait(lambda: q.lastProgress is not None, what="the first micro-batch")
        for i in range(10):
            pub.pub(f"one{i}".encode())
        _wait(lambda: sum(len(s) for _, s in batches) >= 10, what="the first frames")
        first_done = max(i for i, s in batches if s)
        for i in range(15):
            pub.pub(f"two{i}".encode())
        _wait(lambda: sum(len(s) for _, s in batches) >= 25, what="the later frames")
    finally:
        q.stop()
        pub.close()
    seqs = [s for _, ss in batches for s in ss]
    assert sorted(seqs) == list(range(2, 27))  # each frame once; the one before the start not read
    assert all(s >= 12 for i, ss in batches if i > first_done for s in ss)


def test_a_query_restarted_from_its_checkpoint_reads_only_new_frames(spark, live_root, tmp_path):
    pub = a0py.Publisher(a0py.Topic("s/b", root=live_root))
    for i in range(50):
        pub.pub(f"a{i}".encode())
    out, ck = str(tmp_path / "out"), str(tmp_path / "ck")

    def run():
        df = (spark.readStream.format("a0").option("root", live_root).option("topics", "s/b")
              .option("startingOffsets", "earliest").option("maxFramesPerTrigger", "8").load())
        q = (df.select("seq", "payload").writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", ck).trigger(availableNow=True).start())
        q.awaitTermination(180)
        return q

    q = run()
    assert sum(1 for p in q.recentProgress if p["numInputRows"]) >= 7  # 50 frames, at most 8 a batch
    assert max(p["numInputRows"] for p in q.recentProgress) <= 8
    for i in range(20):
        pub.pub(f"b{i}".encode())
    run()
    pub.close()
    seqs = sorted(r.seq for r in spark.read.parquet(out).collect())
    assert seqs == list(range(1, 71))


def test_evicted_frames_are_data_loss(spark, live_root):
    pub = a0py.Publisher(a0py.Topic("s/c", root=live_root, size=64 << 10))
    for i in range(3000):
        pub.pub(f"c{i}".encode())
    arena = a0py.Topic("s/c", root=live_root).arena("pubsub")
    with a0py.Transport(arena).lock() as t:
        low = t.seq_low
    base = (spark.readStream.format("a0").option("root", live_root).option("topics", "s/c")
            .option("startingOffsets", '{"s/c": 0}'))
    q = base.load().writeStream.format("memory").queryName("lossy").trigger(availableNow=True).start()
    with pytest.raises(Exception, match=rf"topic 's/c': frames seq 1\.\.{low - 1} \({low - 1}\) were lost"):
        q.awaitTermination(180)
    q = (base.option("failOnDataLoss", "false").option("gaps", "true").load().writeStream.format("memory")
         .queryName("lossy2").trigger(availableNow=True).start())
    q.awaitTermination(180)
    rows = spark.sql("select seq, is_gap, gap_first, gap_last from lossy2").collect()
    pub.close()
    assert [(r.gap_first, r.gap_last) for r in rows if r.is_gap] == [(1, low - 1)]
    assert sorted(r.seq for r in rows if not r.is_gap) == list(range(low, 3001))


# -- a standalone cluster ------------------------------------------------------------

CLUSTER = textwrap.dedent("""
    import os, sys, time
    from a0py.spark import reader_in_use, session
    path, master = sys.argv[1], sys.argv[2]
    # The JVM reader's jar reaches the executors through spark.jars (session() sets it).
    spark = session(master, app_name="a0py-cluster-test", **{
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false", "spark.cores.max": "2",
        "spark.executor.cores": "1", "spark.executor.memory": "512m",
        "spark.executor.extraJavaOptions": os.environ["SPARK_DAEMON_JAVA_OPTS"],
        "spark.driver.extraJavaOptions": os.environ["SPARK_DAEMON_JAVA_OPTS"],
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable})
    end = time.monotonic() + 120
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() < 3 and time.monotonic() < end:
        time.sleep(0.5)
    df = spark.read.format("a0").option("maxPartitionBytes", "30000").load(path)
    counts = sorted((r.topic, r["count"]) for r in df.groupBy("topic").count().collect())
    py = spark.read.format("a0.python").option("maxPartitionBytes", "30000").load(path)
    py_counts = sorted((r.topic, r["count"]) for r in py.groupBy("topic").count().collect())
    hosts = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).distinct().count()
    print("PARTITIONS", df.rdd.getNumPartitions())
    print("COUNTS", counts)
    print("PYCOUNTS", py_counts)
    print("READERS", reader_in_use(df), reader_in_use(py))
    print("EXECUTORS", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1, hosts)
    spark.stop()
""")


@pytest.mark.slow
def test_the_same_read_runs_on_a_standalone_cluster_through_both_readers(recs, tmp_path):
    d, exp = recs
    with standalone_cluster(tmp_path) as (master_url, env):
        r = subprocess.run([sys.executable, "-c", CLUSTER, d, master_url], env=env, capture_output=True, text=True,
                           timeout=420)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.split(" ", 1)[0] in
               ("PARTITIONS", "COUNTS", "PYCOUNTS", "READERS", "EXECUTORS"))
    want = {}
    for topic, _ in exp.frames:
        want[topic] = want.get(topic, 0) + 1
    assert eval(out["COUNTS"]) == sorted(want.items())  # noqa: S307 - our own script's repr
    assert eval(out["PYCOUNTS"]) == sorted(want.items())  # noqa: S307 - our own script's repr
    assert out["READERS"] == "jvm python"  # the JVM reader's jar shipped by spark.jars, and the Python source
    assert int(out["PARTITIONS"]) >= 8
    executors, pids = (int(x) for x in out["EXECUTORS"].split())
    assert executors == 2 and pids >= 2  # tasks ran in both workers' executors


def test_the_demo_summary_counts_rates_latency_and_draws_the_chart(spark, tmp_path):
    import io

    sys.path.insert(0, os.path.join(REPO, "examples"))
    try:
        from spark_summary import summarize
    finally:
        sys.path.remove(os.path.join(REPO, "examples"))

    path = str(tmp_path / "s.mcap")
    write_segment(path, {"fast": 300, "slow": 30}, gaps=[("slow", 31, 33)])
    text = io.StringIO()
    facts = summarize(path, spark, chart=str(tmp_path / "rates.png"), out=text)
    assert facts["topics"]["fast"]["frames"] == 300 and facts["topics"]["slow"]["frames"] == 30
    assert facts["topics"]["slow"]["gaps"] == 1 and facts["topics"]["slow"]["lost"] == 3
    assert facts["topics"]["fast"]["bytes"] == sum(len(f"fast:{s}") for s in range(1, 301))
    assert sum(n for _, n in facts["rates"]["fast"]) == 300
    lat = facts["topics"]["fast"]["latency_us"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
    with open(facts["chart"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    out = text.getvalue()
    assert "fast" in out and "slow" in out and "rates.png (blue: fast, orange: slow)" in out
