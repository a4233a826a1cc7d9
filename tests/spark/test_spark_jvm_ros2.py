"""``decode=true`` of ROS 2 messages (``cdr`` with ``ros2msg`` schemas) in
the ``a0`` source's JVM reader: every ROS 2 file tests/helpers/foreign.py
makes (``mcap-ros2-support``'s Imu and String, a message with every ROS
field type, ``rosbags``' rosbag2 directories, big-endian CDR) read through
the JVM reader and through the Python source (``a0.python``) give the same
schema and the same rows, column for column; messages cut short or mutated
give the same ``decode_error`` as the Python decoder's, never a failed task;
nested column pruning; and the reads the JVM leaves to the Python source
(other encodings, ``ros2idl``, several types, definitions it is not sure
of) still read there."""

import math
import random
import struct

import pytest
from helpers import foreign

from a0py.spark import reader_in_use, register


@pytest.fixture(scope="module", autouse=True)
def _python_source(spark):
    register(spark)  # the Python source under its own name, a0.python


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ros2jvm")
    out = {
        "ros2": foreign.write_ros2_mcap(str(d / "ros2.mcap"), n=300),
        "all": foreign.write_ros2_all_types(str(d / "all.mcap"), n=60),
        "flat": foreign.write_ros2_all_types(str(d / "flat.mcap"), n=80, flat=True),
        "bag": foreign.write_rosbag2(d / "bag", n=120, topics=("/imu", "/imu2")),
        "split": foreign.write_rosbag2_split(d / "split", n=40),
    }
    out["big"] = _big_endian(str(d / "big.mcap"), out["all"])
    return out


def _big_endian(path, written):
    """The messages of ``written`` (all types, little endian) re-serialized big endian by rosbags."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.EMPTY)
    store.register(get_types_from_msg(foreign.ALL_TYPES_MSGDEF, foreign.ALL_TYPES_TYPE))
    datas = []
    for *_, data, _ in written.messages["/all"]:
        msg = store.deserialize_cdr(data, foreign.ALL_TYPES_TYPE)
        datas.append(bytes(store.serialize_cdr(msg, foreign.ALL_TYPES_TYPE, little_endian=False)))
    assert datas[0][:2] == b"\x00\x00"
    schema = (foreign.ALL_TYPES_TYPE, "ros2msg", foreign.ALL_TYPES_MSGDEF.encode())
    return foreign.write_mcap_channels(path, [("/big", "cdr", schema, datas)], profile="ros2")


def _reads(spark, path, topics=None, **options):
    out = []
    for fmt in ("a0", "a0.python"):
        r = spark.read.format(fmt).option("decode", "true")
        if topics:
            r = r.option("topics", ",".join(topics))
        for k, v in options.items():
            r = r.option(k, v)
        out.append(r.load(path))
    return out


def _same(a, b):
    """Equal values, NaN equal to NaN (a mutated float may be one)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _rows(df):
    cols = [c for c in df.columns if c != "headers"]
    return sorted((r.asDict(recursive=True) for r in df.select(*cols).collect()),
                  key=lambda r: (r["topic"], str(r.get("log_time")), r.get("sequence") or 0, str(r["time_wall"]),
                                 r["seq"] or 0, bool(r.get("is_gap"))))


def assert_same_reads(jvm, py):
    assert reader_in_use(jvm) == "jvm" and reader_in_use(py) == "python"
    assert jvm.schema == py.schema
    got, want = _rows(jvm), _rows(py)
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        assert _same(g, w), (g, w)
    return got


CASES = [("ros2", ("/imu",)), ("ros2", ("/chatter",)), ("all", None), ("flat", None), ("bag", None),
         ("bag", ("/imu2",)), ("split", None), ("big", None)]


@pytest.mark.parametrize(("name", "topics"), CASES, ids=[f"{n}-{t}" for n, t in CASES])
def test_jvm_decodes_every_ros2_file_as_the_python_source_does(spark, files, name, topics):
    jvm, py = _reads(spark, files[name].path, topics)
    got = assert_same_reads(jvm, py)
    assert all(r["decode_error"] is None and r["message"] is not None for r in got)
    # and the values are what the tool wrote
    w = files[name]
    want = sorted(((t, it[4]) for t in (topics or w.messages) for it in w.messages[t]),
                  key=lambda x: x[0])
    assert len(got) == len(want)


def test_decoded_values_are_the_written_ones(spark, files):
    jvm, _ = _reads(spark, files["all"].path)
    msgs = [r["message"] for r in _rows(jvm)]
    for i, m in enumerate(msgs):
        v = foreign.all_types_value(i)
        assert m["u64"] == 2 ** 64 - 1 - i and m["i64"] == -(2 ** 63) + i and m["u32"] == 2 ** 32 - 1 - i
        assert m["i8"] == v["i8"] and m["u8"] == v["u8"] and m["i16"] == v["i16"] and m["u16"] == v["u16"]
        assert m["blob"] == v["blob"] and m["octets"] == v["octets"] and m["names"] == v["names"]
        assert [float(x) for x in m["big"]] == [float(x) for x in v["big"]]
        assert m["dur"] == -i * 1_000_000_000 + 999_999_999 - i
        assert m["when"].timestamp() == pytest.approx(1_790_000_000 + i + 0.123456, abs=1e-6)
        assert m["points"] == [{"x": float(k), "y": -float(k)} for k in range(i % 4)]
        assert m["text"] == v["text"] and m["flag"] == v["flag"] and m["one_char"] == v["one_char"]


def test_pruned_columns_and_filters_read_as_in_python(spark, files):
    jvm, py = _reads(spark, files["all"].path)
    for cols in (["message.points", "message.when"], ["message.u64", "decode_error"], ["decode_error"],
                 ["topic", "message.few.y", "message.names"]):
        a = sorted(map(repr, jvm.select(*cols).collect()))
        b = sorted(map(repr, py.select(*cols).collect()))
        assert a == b, cols
    jvm, py = _reads(spark, files["ros2"].path, ("/imu",))
    a = jvm.where("message.angular_velocity.x > 1.0").select("message.header.stamp", "sequence").collect()
    b = py.where("message.angular_velocity.x > 1.0").select("message.header.stamp", "sequence").collect()
    assert sorted(a) == sorted(b) and len(a) > 0
    assert jvm.agg({"message.linear_acceleration.y": "sum"}).first()[0] == pytest.approx(
        sum(0.001 * i for i in range(300)))


def _mutants(datas, seed, n):
    """``n`` damaged copies of messages of ``datas``: cut short, bytes flipped, a uint32 (length) set
    large or off by a little, bytes added, the encapsulation header changed."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        d = bytearray(rng.choice(datas))
        how = k % 6
        if how == 0:
            d = d[: rng.randrange(len(d))]
        elif how == 1:
            for _ in range(rng.randint(1, 4)):
                d[rng.randrange(len(d))] = rng.randrange(256)
        elif how == 2:
            at = 4 + 4 * rng.randrange((len(d) - 4) // 4)
            d[at:at + 4] = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 28, 0, 1, 2, 3, 5, 9, 64]).to_bytes(4, "little")
        elif how == 3:
            at = rng.randrange(len(d))
            d[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        elif how == 4:
            d[rng.randrange(4)] = rng.choice([0, 1, 2, 3, 0x80, 0xFF])
        else:
            at = 4 + rng.randrange(len(d) - 4)
            d[at] = rng.choice([0xFF, 0xC3, 0xE2, 0xF0, 0xED, 0x80, 0x00])
        out.append(bytes(d))
    return out


@pytest.mark.parametrize("name", ["all", "ros2"])
def test_damaged_messages_give_the_python_decoders_errors(spark, files, tmp_path, name):
    w = files[name]
    topic = "/all" if name == "all" else "/imu"
    datas = [it[3] for it in w.messages[topic]]
    schema_name = w.schema_names[topic]
    text = foreign.ALL_TYPES_MSGDEF if name == "all" else foreign.IMU_MSGDEF
    bad = _mutants(datas, seed=7 if name == "all" else 11, n=1500)
    path = str(tmp_path / "bad.mcap")
    foreign.write_mcap_channels(path, [(topic, "cdr", (schema_name, "ros2msg", text.encode()), bad + datas[:40])],
                                profile="ros2")
    jvm, py = _reads(spark, path)
    got = assert_same_reads(jvm, py)
    errors = [r["decode_error"] for r in got if r["decode_error"] is not None]
    assert len(errors) > 500  # most damage is seen; the rows above are equal error for error
    assert all(e.startswith(schema_name + ": SerdeError: ") for e in errors)


def test_reads_the_jvm_does_not_decode_go_to_the_python_source(spark, files, tmp_path):
    # two message types in one read: the Python source's error naming both (raised at load)
    with pytest.raises(Exception, match=r"(?s)PYTHON_DATA_SOURCE_ERROR.*one message type at a time"):
        spark.read.format("a0").option("decode", "true").load(files["ros2"].path)
    # ros2idl, a Python keyword as a field name (rosbags renames it), an annotation: read by Python
    idl = "\n".join(["=" * 80, "IDL: test_msgs/msg/P", "module test_msgs { module msg {",
                     "struct P { double x; }; }; };"]) + "\n"
    cases = [("test_msgs/msg/P", "ros2idl", idl, b"\x00\x01\x00\x00" + bytes(8)),
             ("test_msgs/msg/K", "ros2msg", "int32 from\n", b"\x00\x01\x00\x00\x05\x00\x00\x00")]
    for k, (name, enc, text, data) in enumerate(cases):
        path = str(tmp_path / f"other{k}.mcap")
        foreign.write_mcap_channels(path, [("/t", "cdr", (name, enc, text.encode()), [data] * 3)], profile="ros2")
        df = spark.read.format("a0").option("decode", "true").load(path)
        assert reader_in_use(df) == "python"
        assert df.select("decode_error").collect()[0][0] is None


def test_definitions_with_constants_defaults_and_comments_decode_in_the_jvm(spark, tmp_path):
    text = "\n".join([
        "# a comment line", "int32 A_CONST = 5  # a constant", "string NAME=\"a=b # not a comment\"",
        "float64 x 1.5   # a default", "int32[] ids [1, 2, 3]", "string<=10 label \"hi\"",
        "Inner[<=3] inners", "uint8 FLAG=1", "", "=" * 80, "MSG: pkg/Inner", "bool ok true", "char c",
    ]) + "\n"
    datas = []
    for i in range(50):
        body = bytearray()
        body += struct.pack("<d", 1.5 * i)
        body += struct.pack("<I", i % 3) + b"".join(struct.pack("<i", k) for k in range(i % 3))
        label = f"l{i}".encode() + b"\x00"
        while len(body) % 4:
            body += b"\x00"
        body += struct.pack("<I", len(label)) + label
        while len(body) % 4:
            body += b"\x00"
        body += struct.pack("<I", i % 4) + b"".join(bytes([1, 65 + k]) for k in range(i % 4))
        datas.append(b"\x00\x01\x00\x00" + bytes(body))
    path = str(tmp_path / "defs.mcap")
    foreign.write_mcap_channels(path, [("/d", "cdr", ("pkg/msg/Outer", "ros2msg", text.encode()), datas)],
                                profile="ros2")
    jvm, py = _reads(spark, path)
    got = assert_same_reads(jvm, py)
    assert [r["message"]["label"] for r in got] == [f"l{i}" for i in range(50)]
    assert got[6]["message"]["inners"] == [{"ok": True, "c": 65}, {"ok": True, "c": 66}]


def test_packet_rows_and_column_options_read_as_in_python(spark, files, tmp_path):
    import shutil

    from helpers.mcap_data import write_segment

    d = tmp_path / "mixed"
    d.mkdir()
    shutil.copy(files["ros2"].path, d / "ros2.mcap")
    write_segment(str(d / "a0py_00000.mcap"), {"cam": 50, "imu": 20})
    for options in ({}, {"mcapColumns": "false"}, {"gaps": "true", "recordTime": "true"}, {"headers": "false"}):
        jvm, py = _reads(spark, str(d), ("/imu", "cam"), **options)
        got = assert_same_reads(jvm, py)
        packets = [r for r in got if r["topic"] == "cam"]
        assert len(packets) == 50 and all(r["message"] is None and r["decode_error"] is None for r in packets)
        assert sum(r["topic"] == "/imu" and r["message"] is not None for r in got) == 300
        if "headers" not in options:  # the headers maps too
            assert sorted(map(repr, jvm.select("topic", "seq", "headers").collect())) == sorted(
                map(repr, py.select("topic", "seq", "headers").collect()))


SEP = "=" * 80
# (definition of pkg/msg/T, does the JVM decode it?) — where it does not, the Python source reads it
# (decoding it, or giving its error); where it does, the two readers must agree.
DEFINITIONS = [
    ("int32 x\n", True),
    ("  int32   x   # a comment\n\tfloat64\ty\n\n# the end\n", True),
    ("int32 FOO=1\nint32 X 5\nstring s hello world\nbool[] flags [true, false]\n", True),
    ("int32[<=5] xs\nstring<=3[2] ss\nuint64[2] big\nint8[] small\nchar[3] cs\n", True),
    ("time t\nduration d\nbuiltin_interfaces/Time[] ts\n", True),
    (f"Header h\nQ[2] qs\n{SEP}\nMSG: std_msgs/Header\nbuiltin_interfaces/Time stamp\nstring frame_id\n"
     f"{SEP}\nMSG: pkg/Q\nfloat32 w\nint16 k\n", True),
    ("int32 x 5 6\n", False),  # a default followed by junk: rosbags refuses it
    ("string s 5 apples\n", False),
    ("int32 x=5\n", False),
    (f"int32 x\n{'=' * 79}\nMSG: pkg/B\nint32 y\n", False),  # a separator of another length
    ("int32 from\n", False),  # rosbags renames it from_
    ("int32 x\nint32 x\n", False),
    ("int32 x\r\n", False),
    (f"pkg/E e\n{SEP}\nMSG: pkg/E\n", False),  # an empty message
    ("pkg/Missing m\n", False),
    ("@verbatim foo\nint32 x\n", False),
    (f"int32 x\n{SEP}\nMSG: builtin_interfaces/Time\nuint32 secs\nuint32 nsecs\n", False),
]


@pytest.mark.parametrize(("k", "text", "jvm"), [(k, t, j) for k, (t, j) in enumerate(DEFINITIONS)],
                         ids=[f"def{k}" for k in range(len(DEFINITIONS))])
def test_definitions_read_by_the_jvm_only_where_the_python_decoder_agrees(spark, tmp_path, k, text, jvm):
    rng = random.Random(k)
    datas = [b"\x00\x01\x00\x00" + bytes(rng.randrange(256) for _ in range(rng.randrange(64))) for _ in range(40)]
    datas += [b"\x00\x01\x00\x00" + bytes(n) for n in (0, 4, 8, 16, 40, 64)]
    datas += [b"\x00\x00\x00\x00" + bytes([0, 0, 0, 2, 65, 0, 0, 0]) * 8]
    path = str(tmp_path / f"def{k}.mcap")
    foreign.write_mcap_channels(path, [("/t", "cdr", ("pkg/msg/T", "ros2msg", text.encode()), datas)], profile="ros2")
    load = spark.read.format("a0").option("decode", "true").load
    if not jvm:
        try:
            df = load(path)
        except Exception as e:  # noqa: BLE001 - the Python source's own error, raised at load
            assert "PYTHON_DATA_SOURCE_ERROR" in str(e)
            return
        assert reader_in_use(df) == "python"
        return
    a, b = _reads(spark, path)
    assert_same_reads(a, b)
