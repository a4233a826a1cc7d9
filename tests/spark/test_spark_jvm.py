"""The ``a0`` source's JVM reader (jvm/, the jar on the suite's one
SparkSession): every row and column equal to the Python source's for every
kind of recording (several topics and segments, zstd/lz4/none, with and
without message indexes, gaps, cut short, written by the recorder with
frames evicted), with every option, pushed-down filter and pruned column;
damaged files an error naming the file, the byte and the field, never a
crashed or hung JVM; reads only the Python source knows handed over to it;
and the name ``a0`` resolving to the JVM reader only where the jar is."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from helpers.mcap_data import cut, write_segment
from helpers.procs import REPO, maps, wait_until

import a0py
from a0py.proto.topic import list_topics, unlink_topic
from a0py.recording import reader as _mcap
from a0py.spark import jar_path, reader_in_use, register
from a0py.spark._jvm import read_metrics


def _extra(topic, seq):
    return [("frame", f"{topic}{seq}"), ("é", "ü")] if seq % 3 == 0 else []


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Directories of recordings, by kind."""
    base = tmp_path_factory.mktemp("jvmrecs")
    out = {}
    d = base / "mixed"
    d.mkdir()
    write_segment(str(d / "a0py_00000.mcap"), {"cam": 700, "imu": 900, "odom": 40}, gaps=[("imu", 901, 950)],
                  extra=_extra)
    write_segment(str(d / "a0py_00001.mcap"), {"cam": 300, "imu": 100}, compression="lz4",
                  gaps=[("cam", 1001, 1003)], seq_start={"cam": 701, "imu": 951})
    write_segment(str(d / "a0py_00002.mcap"), {"raw": 120}, compression="none", message_index=False,
                  payload=lambda t, s: bytes(range(256)) * (s % 5))
    out["mixed"] = str(d)
    d = base / "short"
    d.mkdir()
    whole = str(base / "whole.mcap")
    write_segment(whole, {"a": 2000, "b": 500}, gaps=[("a", 2001, 2002)])
    for i, frac in enumerate((0.3, 0.77)):
        cut(whole, str(d / f"cut{i}.mcap"), int(os.path.getsize(whole) * frac))
    out["short"] = str(d)
    return out


@pytest.fixture(scope="module")
def python_source(spark):
    """The Python source under its own name (``a0.python``), beside the JVM one."""
    register(spark)
    return "a0.python"


def rows(df):
    """Every row, every column, as comparable tuples (headers keep their order)."""
    out = []
    for r in df.collect():
        d = r.asDict()
        if d.get("headers") is not None:
            d["headers"] = tuple(d["headers"].items())
        if d.get("payload") is not None:
            d["payload"] = bytes(d["payload"])
        out.append(tuple(sorted(d.items(), key=lambda kv: kv[0])))
    return sorted(out, key=repr)


def both(spark, python_source, path, options=(), query=lambda df: df):
    got = []
    for fmt in ("a0", python_source):
        reader = spark.read.format(fmt)
        for k, v in options:
            reader = reader.option(k, v)
        df = query(reader.load(path))
        got.append((reader_in_use(df), rows(df)))
    return got


OPTIONS = [(), (("gaps", "true"),), (("headers", "false"),), (("recordTime", "true"), ("gaps", "true")),
           (("topics", "a,cam"), ("gaps", "true")), (("maxPartitionBytes", "20000"),),
           (("validateCrc", "false"),)]


@pytest.mark.parametrize("kind", ["mixed", "short"])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o) or "default")
def test_every_row_equals_the_python_sources(spark, python_source, recordings, kind, options):
    (jvm_reader, jvm_rows), (py_reader, py_rows) = both(spark, python_source, recordings[kind], options)
    assert (jvm_reader, py_reader) == ("jvm", "python")
    assert jvm_rows and jvm_rows == py_rows


QUERIES = {
    "topic=": lambda df: df.filter("topic = 'imu'"),
    "topic in": lambda df: df.filter("topic in ('odom', 'raw', 'nope')"),
    "seq range": lambda df: df.filter("seq > 100 and seq <= 640"),
    "seq in": lambda df: df.filter("seq in (1, 7, 950, 1001)"),
    "time": lambda df: df.filter("time_wall >= timestamp'2026-09-21 14:13:20.2' and "
                                 "time_wall < timestamp'2026-09-21 14:13:20.9'"),
    "time and topic": lambda df: df.filter("time_wall > timestamp'2026-09-21 14:13:20.5' and topic = 'cam'"),
    "nothing": lambda df: df.filter("seq > 5 and seq < 3"),
    "pruned": lambda df: df.select("payload", "seq"),
    "pruned headers": lambda df: df.select("headers").filter("seq % 3 = 0"),
    "count by topic": lambda df: df.groupBy("topic").count(),
}


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_pushdown_and_pruning_give_the_python_sources_rows(spark, python_source, recordings, name):
    (_, jvm_rows), (_, py_rows) = both(spark, python_source, recordings["mixed"], (("gaps", "true"),),
                                       QUERIES[name])
    assert jvm_rows == py_rows
    if name != "nothing":
        assert jvm_rows


def test_pushdown_skips_chunks_and_says_so_in_the_plan(spark, recordings):
    df = spark.read.format("a0").load(recordings["mixed"]).filter("topic = 'odom' and seq >= 10")
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "a0 (JVM)" in plan and "(Python)" not in plan
    assert sorted(r.seq for r in df.collect()) == list(range(10, 41))
    # odom's chunks alone are read: the bytes the scan read, as Spark's metrics show them
    whole_read = read_metrics(spark.read.format("a0").load(recordings["mixed"]))
    odom_read = read_metrics(spark.read.format("a0").load(recordings["mixed"]).filter("topic = 'odom'"))
    late_read = read_metrics(spark.read.format("a0").load(recordings["mixed"]).filter(
        "time_wall > timestamp'2026-09-21 14:13:20.9'"))
    assert 0 < odom_read["chunksRead"] < whole_read["chunksRead"] / 4
    assert 0 < odom_read["chunkBytesRead"] < whole_read["chunkBytesRead"] / 4
    assert 0 < late_read["chunkBytesRead"] < whole_read["chunkBytesRead"] / 2
    # and fewer partitions are planned than for the whole read
    whole = spark.read.format("a0").option("maxPartitionBytes", "1").load(recordings["mixed"])
    part = spark.read.format("a0").option("maxPartitionBytes", "1").load(recordings["mixed"]).filter(
        "topic = 'odom'")
    assert part.rdd.getNumPartitions() < whole.rdd.getNumPartitions() / 4


# -- the recorder's own recordings --------------------------------------------------

PUBLISH = textwrap.dedent("""
    import sys, a0py
    topic, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    pub = a0py.Publisher(topic)
    for i in range(start, start + n):
        pub.pub(f"{topic}:{i}".encode() * (1 + i % 7), headers={"i": str(i)})
""")


def test_a_recorders_segment_with_evictions_reads_the_same_through_both(spark, python_source, tmp_path,
                                                                        monkeypatch):
    spec = f"shm:a0pyjvm{os.getpid()}x{time.monotonic_ns() % 10**9}"
    env = dict(os.environ, A0PY_ROOT=spec, A0PY_ARENA_SIZE="64k",
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    out = tmp_path / "rec"
    rec = subprocess.Popen([sys.executable, "-m", "a0py", "record", "ev", "--out", str(out)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = rec.stderr.readline()
        assert "recording to" in line, line
        os.kill(rec.pid, signal.SIGSTOP)
        subprocess.run([sys.executable, "-c", PUBLISH, "ev", "0", "3000"], env=env, check=True, timeout=120)
        os.kill(rec.pid, signal.SIGCONT)
        subprocess.run([sys.executable, "-c", PUBLISH, "ev", "3000", "40"], env=env, check=True, timeout=120)
        # open, it drains all the ring holds when it stops
        wait_until(lambda: maps(rec.pid, a0py.Topic("ev", root=spec)), "the recorder to open ev", every=0.01)
    finally:
        os.kill(rec.pid, signal.SIGCONT)
        rec.send_signal(signal.SIGINT)
        rec.communicate(timeout=60)
        for topic in list_topics(spec):
            unlink_topic(a0py.Topic(topic, root=spec))
    (_, jvm_rows), (_, py_rows) = both(spark, python_source, str(out), (("gaps", "true"),))
    assert jvm_rows == py_rows
    assert any(dict(r)["is_gap"] for r in jvm_rows) and sum(not dict(r)["is_gap"] for r in jvm_rows) >= 40
    segment = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".mcap"))[0]
    short = cut(segment, str(tmp_path / "short.mcap"), os.path.getsize(segment) * 2 // 3)
    (_, jvm_rows), (_, py_rows) = both(spark, python_source, short, (("gaps", "true"),))
    assert jvm_rows == py_rows


# -- standard headers: values at every decimal width, writers taking turns -----------

EDGES = [0, 9, 10, 99, 100, 999_999, 10**9, 10**18 - 1, 10**18, 2**63 - 1, 2**63, 2**64 - 1]


def test_standard_headers_render_alike_for_every_width_and_writer(spark, python_source, tmp_path):
    """Each batch holds the standard keys, a writer's id and a topic's name
    once, and rows point at them: rows of several chunks, two topics taking
    turns in a chunk, writers changing from packet to packet and back, and
    u64 values at every decimal width (2**63 and up included) read the same
    through both readers, and as the packets say."""
    import uuid

    import numpy as np
    from helpers.mcap_data import encode_std_packet

    from a0py.recording import SegmentWriter

    writers = [uuid.uuid5(uuid.NAMESPACE_DNS, w) for w in ("a", "b", "c")]
    turn = [0, 0, 1, 0, 2, 2, 2, 1]
    path = str(tmp_path / "std.mcap")
    w = SegmentWriter(path, chunk_bytes=4096)
    want = {}
    for i in range(400):
        topic = ("x", "y")[i % 3 == 0]
        v = EDGES[i % len(EDGES)]
        mono, wall, wseq, seq = v, EDGES[(i + 3) % len(EDGES)], EDGES[(i + 5) % len(EDGES)], 1 + i
        wid = writers[turn[i % len(turn)]]
        extra = [("k", str(i)), ("ключ", "значение")] if i % 4 == 0 else []
        w.write_packets(topic, np.array([seq]), [encode_std_packet(seq, wall, mono, wseq, wid.bytes, extra, b"p")],
                        10**18 + i)
        want[(topic, seq)] = {"a0_time_mono": str(mono), "a0_time_wall": str(wall), "a0_writer_id": str(wid),
                              "a0_writer_seq": str(wseq), "a0_transport_seq": str(seq), **dict(extra)}
    w.close()
    assert len(_mcap.read_layout(path).chunks) > 4
    (_, jvm_rows), (_, py_rows) = both(spark, python_source, path)
    assert jvm_rows == py_rows
    got = {(d["topic"], d["seq"]): dict(d["headers"]) for d in map(dict, jvm_rows)}  # collect() keeps no order
    assert got == want


# -- damaged files ------------------------------------------------------------------


@pytest.fixture
def plain(tmp_path):
    """An uncompressed segment (bytes easy to damage) and its layout."""
    path = str(tmp_path / "plain.mcap")
    write_segment(path, {"cam": 300, "imu": 300}, compression="none")
    return path, _mcap.read_layout(path)


def _patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _fails(spark, path, pattern, **options):
    reader = spark.read.format("a0")
    for k, v in options.items():
        reader = reader.option(k, v)
    with pytest.raises(Exception, match=pattern):
        reader.load(path).collect()


def test_damaged_files_are_errors_naming_file_byte_and_field(spark, plain, tmp_path):
    path, lay = plain
    ref = lay.chunks[1]
    name = os.path.basename(path)
    # a chunk's record length lying past the file
    bad = cut(path, str(tmp_path / "len.mcap"), os.path.getsize(path))
    _patch(bad, ref.offset + 1, (2**62).to_bytes(8, "little"))
    _fails(spark, bad, rf"len\.mcap: at byte {ref.offset}: expected a chunk record")
    # an uncompressed size of nearly 2 GiB backed by nothing: an error, not an OutOfMemoryError
    bad = cut(path, str(tmp_path / "usize.mcap"), os.path.getsize(path))
    _patch(bad, ref.offset + 9 + 16, (2**31 - 100).to_bytes(8, "little"))
    _fails(spark, bad, rf"usize\.mcap: at byte {ref.offset}: chunk decompressed to \d+ bytes, its record says")
    # a message record whose length runs past its chunk
    records = _mcap.read_chunk_records(os.open(path, os.O_RDONLY), ref, path)
    offs, _ = _mcap.walk_records(records, path, ref.offset)
    head = ref.offset + 9 + 8 + 8 + 8 + 4 + 4 + 8  # the chunk's records start here (compression "")
    bad = cut(path, str(tmp_path / "msg.mcap"), os.path.getsize(path))
    _patch(bad, head + int(offs[3]) + 1, (len(records) * 4).to_bytes(8, "little"))
    _fails(spark, bad, rf"msg\.mcap: at byte {ref.offset}: chunk records: record of opcode 0x5 at {int(offs[3])} "
           "claims", validateCrc="false")
    # a packet's payload offset pointing outside it
    bad = cut(path, str(tmp_path / "pkt.mcap"), os.path.getsize(path))
    _patch(bad, head + int(offs[5]) + 31 + 32, (2**40).to_bytes(8, "little"))
    _fails(spark, bad, r"pkt\.mcap: chunk at byte \d+, message 5: corrupt a0py packet: field payload_off",
           validateCrc="false")
    # the CRC catches the same damage when it is checked
    _fails(spark, bad, rf"pkt\.mcap: at byte {ref.offset}: chunk CRC mismatch")
    # a summary whose CRC does not match
    bad = cut(path, str(tmp_path / "sum.mcap"), os.path.getsize(path))
    with open(bad, "r+b") as f:
        f.seek(-60, 2)
        b = f.read(1)
        f.seek(-60, 2)
        f.write(bytes([b[0] ^ 0x40]))
    _fails(spark, bad, r"sum\.mcap: at byte \d+: summary CRC mismatch")
    # not MCAP at all, and empty
    junk = tmp_path / "junk.mcap"
    junk.write_bytes(b"hello world, not a recording" * 10)
    _fails(spark, str(junk), r"junk\.mcap: does not start with the MCAP magic")
    # a file with no record yet (a recorder killed before its header) is skipped, as by
    # the Python source: no rows, no error
    (tmp_path / "empty.mcap").write_bytes(b"")
    assert spark.read.format("a0").load(str(tmp_path / "empty.mcap")).count() == 0
    assert name and spark.read.format("a0").load(path).count() == 600  # the JVM goes on


def test_bad_compression_is_an_error_naming_the_chunk(spark, tmp_path):
    for comp in ("zstd", "lz4"):
        path = str(tmp_path / f"{comp}.mcap")
        write_segment(path, {"cam": 400}, compression=comp)
        ref = _mcap.read_layout(path).chunks[0]
        with open(path, "rb") as f:
            data = bytearray(f.read())
        start = ref.offset + 9 + 8 + 8 + 8 + 4 + 4 + len(comp) + 8
        for i in range(start + 20, start + 60):
            data[i] ^= 0x5A
        with open(path, "wb") as f:
            f.write(bytes(data))
        _fails(spark, path, rf"{comp}\.mcap: at byte {ref.offset}: ({comp} chunk does not decompress|chunk "
               "decompressed to|chunk CRC mismatch)")


def test_truncations_at_every_point_read_whole_chunks_or_fail_cleanly(spark, python_source, tmp_path):
    whole = str(tmp_path / "whole.mcap")
    write_segment(whole, {"a": 300}, chunk_bytes=4096)
    size = os.path.getsize(whole)
    paths = [cut(whole, str(tmp_path / f"t{n}.mcap"), n) for n in range(9, size, max(1, size // 23))]
    for p in paths:
        outcome = []
        for fmt in ("a0", python_source):
            try:
                outcome.append(rows(spark.read.format(fmt).load(p)))
            except Exception as e:  # noqa: BLE001 - both readers must fail alike
                outcome.append(type(e).__name__ + (": magic" if "MCAP magic" in str(e) else ""))
        assert outcome[0] == outcome[1], p


# -- one name, two readers ----------------------------------------------------------


def test_reads_only_the_python_source_knows_are_handed_to_it(spark, tmp_path):
    import json

    path = str(tmp_path / "j.mcap")
    write_segment(path, {"j": 5}, payload=lambda t, s: json.dumps({"x": s, "y": 2.5}).encode())
    df = spark.read.format("a0").option("payload", "json").option("payloadSchema", "x long, y double").load(path)
    assert reader_in_use(df) == "python"
    assert sorted(r.payload.x for r in df.collect()) == [1, 2, 3, 4, 5]
    assert reader_in_use(spark) == "jvm"


def test_the_jar_is_in_the_package_and_the_session_helper_uses_it(spark):
    jar = jar_path()
    assert os.path.dirname(jar) == os.path.join(REPO, "a0py", "spark", "jars")
    import zipfile

    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        service = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode().split()
    assert "a0py/spark/jvm/A0Source.class" in names and service == ["a0py.spark.jvm.A0Source"]
    import fnmatch
    import tomllib

    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["a0py"]
    inside = os.path.relpath(jar, os.path.join(REPO, "a0py"))
    assert any(fnmatch.fnmatch(inside, pattern) for pattern in data)  # package data: a wheel carries it
    from a0py.spark import session

    assert session() is spark  # the suite's session already has the jar: returned as is


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_random_damage_is_rows_or_an_error_naming_the_file_never_a_dead_jvm(spark, tmp_path, compression):
    import random

    path = str(tmp_path / f"orig-{compression}.mcap")
    write_segment(path, {"a": 150, "b": 150}, compression=compression, gaps=[("a", 151, 160)], chunk_bytes=4096)
    with open(path, "rb") as f:
        original = f.read()
    rng = random.Random(len(original))
    errors = 0
    for i in range(24):
        data = bytearray(original)
        for _ in range(rng.choice((1, 1, 4))):
            at = rng.randrange(len(data))
            data[at] = rng.choice((0x00, 0xFF, data[at] ^ (1 << rng.randrange(8))))
        bad = tmp_path / f"bad{i}.mcap"
        bad.write_bytes(bytes(data))
        try:
            spark.read.format("a0").option("gaps", "true").option("validateCrc", str(i % 2 == 0).lower()).load(
                str(bad)).collect()
        except Exception as e:  # noqa: BLE001 - any failure must name the damaged file
            errors += 1
            assert f"bad{i}.mcap" in str(e), str(e)[-2000:]
            assert "OutOfMemoryError" not in str(e) and "IndexOutOfBounds" not in str(e), str(e)[-2000:]
    assert errors  # some damage was found
    assert spark.read.format("a0").load(path).count() == 300  # the JVM and its executors go on


def test_session_jars_warn_and_leave_the_jar_out_when_it_is_not_built(monkeypatch):
    from a0py.spark import JarMissingWarning, RecordingOptionError, _jvm

    conf = {"spark.jars": "/x/other.jar"}
    jar, jars = _jvm.session_jars(conf)
    assert jar == jar_path() and jars == ["/x/other.jar", jar] and "spark.jars" not in conf

    def missing():
        raise RecordingOptionError("/nowhere/a0py-spark.jar: the a0py JVM reader is not built")

    monkeypatch.setattr(_jvm, "jar_path", missing)
    with pytest.warns(JarMissingWarning, match="not built.*Python reader serves"):
        assert _jvm.session_jars({"spark.jars": "/x/other.jar"}) == (None, ["/x/other.jar"])


# Both checks of an install without the jar run in one Python process (one
# JVM start, the slowest part): first a0py.spark.session() with the jar
# missing, then a plain SparkSession that never heard of a0py's jar.
NO_JAR = textwrap.dedent("""
    import sys, warnings
    from a0py.spark import RecordingOptionError
    import a0py.spark._jvm as jvm

    def missing():
        raise RecordingOptionError("a0py-spark.jar: the a0py JVM reader is not built")

    jvm.jar_path = missing
    import a0py.spark
    from a0py.spark import reader_in_use
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spark = a0py.spark.session("local[1]")
    assert [w.category.__name__ for w in caught] == ["JarMissingWarning"], caught
    df = spark.read.format("a0").load(sys.argv[1])
    print("session", df.count(), reader_in_use(df))
    spark.stop()

    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.ui.enabled", "false").getOrCreate())
    df = spark.read.format("a0").load(sys.argv[2])
    print("plain", reader_in_use(spark), reader_in_use(df), df.count())
    spark.stop()
""")


def test_without_the_jar_session_warns_and_the_name_a0_is_the_python_source(tmp_path, recordings):
    """An install with no jar (pip built it where javac or pyspark was missing):
    session() warns and gives a session whose format("a0") reads the rows, and
    a plain SparkSession's format("a0") is the Python source."""
    exp = write_segment(str(tmp_path / "seg.mcap"), {"a": 30})
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))
    out = subprocess.run([sys.executable, "-c", NO_JAR, str(tmp_path),
                          os.path.join(recordings["mixed"], "a0py_00002.mcap")],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert f"session {len(exp.frames)} python" in lines
    assert "plain python python 120" in lines
