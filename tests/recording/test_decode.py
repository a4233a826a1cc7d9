"""a0py.recording.decode against files the tools users have wrote
(tests/helpers/foreign.py): each message's bytes and schema read with the
official ``mcap`` reader, decoded, and compared field by field with the
value the tool was given."""

import datetime
import json
import os
from decimal import Decimal

import pyarrow as pa
import pytest
from helpers.foreign import (
    ALL_TYPES_MSGDEF,
    ALL_TYPES_TYPE,
    FLAT_TYPES_TYPE,
    IMU_MSGDEF,
    IMU_TYPE,
    all_types_value,
    json_value,
    write_foxglove_mcap,
    write_mcap_json,
    write_protobuf_mcap,
    write_ros2_all_types,
    write_ros2_mcap,
    write_rosbag2,
)
from mcap.reader import make_reader

from a0py.recording.decode import DecodeError, Decoder, DecodeUnsupported, decoder_for
from a0py.recording.errors import RecordingFormatError, RecordingOptionError

UTC = datetime.UTC
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def channels(path):
    """topic -> (decoder, [message bytes]) for every channel of an MCAP file."""
    out = {}
    with open(path, "rb") as f:
        for schema, ch, m in make_reader(f).iter_messages(log_time_order=False):
            if ch.topic not in out:
                dec = decoder_for(ch.topic, schema.name if schema else "", schema.encoding if schema else "",
                                  schema.data if schema else b"", ch.message_encoding)
                out[ch.topic] = (dec, [])
            out[ch.topic][1].append(m.data)
    return out


def stamp(sec, nsec):
    return EPOCH + datetime.timedelta(microseconds=sec * 1_000_000 + nsec // 1000)


def imu_expected(v):
    e = json.loads(json.dumps(v))
    st = v["header"]["stamp"]
    e["header"]["stamp"] = stamp(st["sec"], st["nanosec"])
    return e


def decoded(dec, datas):
    values, errors = dec.decode(datas)
    assert len(values) == len(errors) == len(datas)
    assert errors.null_count == len(datas), errors.drop_null().to_pylist()[:3]
    return values.to_pylist()


# -- ROS 2 -----------------------------------------------------------------

def test_imu_written_by_mcap_ros2_support_decodes_to_its_values(tmp_path):
    w = write_ros2_mcap(str(tmp_path / "imu.mcap"), n=300)
    chans = channels(w.path)
    dec, datas = chans["/imu"]
    assert dec.arrow_type.field("header").type.field("stamp").type == pa.timestamp("us", tz="UTC")
    got = decoded(dec, datas)
    want = [imu_expected(it[4]) for it in w.messages["/imu"]]
    assert got == want
    assert dec.decode_one(datas[7]) == want[7]
    dec, datas = chans["/chatter"]
    assert decoded(dec, datas) == [it[4] for it in w.messages["/chatter"]]
    assert dec.arrow_type == pa.struct([("data", pa.string())])


def test_rosbag2_written_by_rosbags_decodes_to_its_values(tmp_path):
    w = write_rosbag2(tmp_path / "bag", n=120, robot=2)
    (mcap_file,) = [f for f in os.listdir(w.path) if f.endswith(".mcap")]
    dec, datas = channels(os.path.join(w.path, mcap_file))["/imu"]
    assert decoded(dec, datas) == [imu_expected(it[4]) for it in w.messages["/imu"]]
    assert [d for d in datas] == [it[3] for it in w.messages["/imu"]]


@pytest.mark.parametrize("flat", [False, True])
def test_every_ros2_field_kind_maps_to_the_documented_arrow_type(tmp_path, flat):
    w = write_ros2_all_types(str(tmp_path / "all.mcap"), n=40, flat=flat)
    dec, datas = channels(w.path)["/all"]
    t = dec.arrow_type
    want_types = {
        "i8": pa.int32(), "u8": pa.int32(), "i16": pa.int32(), "u16": pa.int32(), "i32": pa.int32(),
        "u32": pa.int64(), "i64": pa.int64(), "u64": pa.decimal128(20, 0), "f32": pa.float32(),
        "f64": pa.float64(), "flag": pa.bool_(), "text": pa.string(), "one_byte": pa.int32(),
        "one_char": pa.int32(), "blob": pa.binary(), "octets": pa.binary(), "ints": pa.list_(pa.int32()),
        "names": pa.list_(pa.string()), "vec": pa.list_(pa.float32()), "flags": pa.list_(pa.bool_()),
        "big": pa.list_(pa.decimal128(20, 0)), "dur": pa.int64(), "when": pa.timestamp("us", tz="UTC"),
        "points": pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64())])),
        "few": pa.list_(pa.struct([("x", pa.float64()), ("y", pa.float64())])), "short": pa.string(),
    }
    if flat:
        for name in ("names", "points", "few"):
            del want_types[name]
    assert {f.name: f.type for f in t} == want_types
    got = decoded(dec, datas)
    for i, row in enumerate(got):
        v = dict(all_types_value(i, flat))
        v["u64"] = Decimal(v["u64"])
        v["big"] = [Decimal(x) for x in v["big"]]
        v["dur"] = v["dur"]["sec"] * 1_000_000_000 + v["dur"]["nanosec"]
        v["when"] = stamp(v["when"]["sec"], v["when"]["nanosec"])
        assert row == v, i


def rosbags_path(dec, datas):
    """What the per-message rosbags path gives (Decoder.decode, without the columnar plan)."""
    return Decoder.decode(dec, datas)


@pytest.mark.parametrize("topic", ["/imu", "/chatter", "/all"])
def test_columnar_cdr_path_gives_what_rosbags_gives(tmp_path, topic, monkeypatch):
    from a0py.recording.decode import ros

    monkeypatch.setattr(ros, "MIN_GROUP", 1)  # every layout columnar, however few share it
    if topic == "/all":
        w = write_ros2_all_types(str(tmp_path / "f.mcap"), n=60, flat=True)
    else:
        w = write_ros2_mcap(str(tmp_path / "imu.mcap"), n=200)
    dec, datas = channels(w.path)[topic]
    assert dec._plan is not None  # the type is one the columnar path covers
    # good messages of many layouts, interleaved with bad ones
    batch = []
    for i, d in enumerate(datas):
        batch.append(d)
        if i % 7 == 0:
            batch += [d[: len(d) - 5], d + b"\x00" * 4, b"\x00\x02" + d[2:], d[:4]]
    got, got_errors = dec.decode(batch)
    want, want_errors = rosbags_path(dec, batch)
    assert got.equals(want)
    assert got_errors.to_pylist() == want_errors.to_pylist()
    assert got.null_count == want.null_count > 0


def test_big_endian_cdr_decodes_like_little_endian(tmp_path, monkeypatch):
    from a0py.recording.decode import ros

    monkeypatch.setattr(ros, "MIN_GROUP", 1)
    w = write_ros2_all_types(str(tmp_path / "f.mcap"), n=30, flat=True)
    dec, datas = channels(w.path)["/all"]
    store = dec._store
    big = [bytes(store.serialize_cdr(store.deserialize_cdr(d, FLAT_TYPES_TYPE), FLAT_TYPES_TYPE,
                                     little_endian=False)) for d in datas]
    assert big[0][:2] == b"\x00\x00" and big != datas
    assert dec.decode(big)[0].equals(dec.decode(datas)[0])
    assert dec.decode(big)[0].equals(rosbags_path(dec, big)[0])


def test_a_byte_is_signed_and_a_char_unsigned_in_both_paths(monkeypatch):
    from a0py.recording.decode import ros

    monkeypatch.setattr(ros, "MIN_GROUP", 1)
    dec = decoder_for("/b", "x/msg/B", "ros2msg", b"byte b\nchar c\nuint8 u\nint8 i\n", "cdr")
    data = b"\x00\x01\x00\x00" + bytes([0xC9, 0xC9, 0xC9, 0xC9])
    want = {"b": -55, "c": 201, "u": 201, "i": -55}  # as rosbags reads them
    assert dec.decode([data])[0].to_pylist() == [want]
    assert dec.decode_one(data) == want


def test_a_bare_time_message_is_a_struct_of_its_fields():
    dec = decoder_for("/clock", "builtin_interfaces/msg/Time", "ros2msg", b"int32 sec\nuint32 nanosec\n", "cdr")
    assert dec.arrow_type == pa.struct([("sec", pa.int32()), ("nanosec", pa.int64())])
    assert dec.decode_one(b"\x00\x01\x00\x00" + (5).to_bytes(4, "little") + (7).to_bytes(4, "little")) == \
        {"sec": 5, "nanosec": 7}


def test_ros2idl_schema_decodes_like_its_msg_form():
    from mcap_ros2._dynamic import serialize_dynamic

    idl = "\n".join([
        "=" * 80, "IDL: geometry_msgs/msg/Point",
        "module geometry_msgs { module msg { struct Point { double x; double y; double z; }; }; };",
    ])
    dec = decoder_for("/p", "geometry_msgs/msg/Point", "ros2idl", idl.encode(), "cdr")
    enc = serialize_dynamic("geometry_msgs/msg/Point", "float64 x\nfloat64 y\nfloat64 z\n")["geometry_msgs/msg/Point"]
    data = enc({"x": 1.0, "y": -2.0, "z": 3.5})
    assert dec.decode_one(data) == {"x": 1.0, "y": -2.0, "z": 3.5}


def test_ros1_message_decodes_with_its_ros1msg_schema():
    import numpy as np
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS1_NOETIC)
    T = ts.types
    Header, Time = T["std_msgs/msg/Header"], T["builtin_interfaces/msg/Time"]
    msg = Header(seq=3, stamp=Time(sec=10, nanosec=2000), frame_id="map")
    data = bytes(ts.serialize_ros1(msg, "std_msgs/msg/Header"))
    dec = decoder_for("/h", "std_msgs/Header", "ros1msg", b"uint32 seq\ntime stamp\nstring frame_id\n", "ros1")
    assert dec.decode_one(data) == {"seq": 3, "stamp": stamp(10, 2000), "frame_id": "map"}
    # a whole Imu, with the schema text a ROS 1 recorder stores (rosbags writes it as ROS 1 does)
    text, _ = ts.generate_msgdef("sensor_msgs/msg/Imu", ros_version=1)
    v3 = T["geometry_msgs/msg/Vector3"]
    imu = T["sensor_msgs/msg/Imu"](
        header=msg, orientation=T["geometry_msgs/msg/Quaternion"](0.0, 0.0, 0.0, 1.0),
        orientation_covariance=np.zeros(9), angular_velocity=v3(1.0, 2.0, 3.0),
        angular_velocity_covariance=np.zeros(9), linear_acceleration=v3(0.5, 0.0, 9.8),
        linear_acceleration_covariance=np.arange(9.0))
    data = bytes(ts.serialize_ros1(imu, "sensor_msgs/msg/Imu"))
    dec = decoder_for("/imu", "sensor_msgs/Imu", "ros1msg", text, "ros1")
    got = dec.decode_one(data)
    assert got["header"] == {"seq": 3, "stamp": stamp(10, 2000), "frame_id": "map"}
    assert got["linear_acceleration"] == {"x": 0.5, "y": 0.0, "z": 9.8}
    assert got["linear_acceleration_covariance"] == [float(k) for k in range(9)]
    values, errors = dec.decode([data, data[:-1], data + b"\x00"])
    assert values.is_valid().to_pylist() == [True, False, False]  # ROS 1 has no padding: no byte may be left
    assert errors.is_null().to_pylist() == [True, False, False]


# -- protobuf ----------------------------------------------------------------

def test_foxglove_sdk_protobuf_decodes_to_its_values(tmp_path):
    w = write_foxglove_mcap(str(tmp_path / "fox.mcap"), n=30)
    chans = channels(w.path)
    dec, datas = chans["/log"]
    got = decoded(dec, datas)
    for row, item in zip(got, w.messages["/log"]):
        assert row["message"] == item[4]["message"] and row["line"] == item[4]["line"]
        assert row["level"] == "INFO" and row["name"] == "node"
        assert row["timestamp"] == stamp(item[0] // 10**9, item[0] % 10**9)
    dec, datas = chans["/tf"]
    for row, item in zip(decoded(dec, datas), w.messages["/tf"]):
        assert row["parent_frame_id"] == "world" and row["translation"]["x"] == item[4]["translation"]["x"]
        assert row["rotation"] == {"x": 0.0, "y": 0.0, "z": 0.0, "w": 1.0}


def test_mcap_protobuf_support_decodes_to_its_values(tmp_path):
    w = write_protobuf_mcap(str(tmp_path / "pb.mcap"), n=100)
    dec, datas = channels(w.path)["/pb/log"]
    assert dec.arrow_type.field("line").type == pa.int64()  # uint32
    assert dec.arrow_type.field("level").type == pa.string()  # enum: its name
    for row, item in zip(decoded(dec, datas), w.messages["/pb/log"]):
        assert (row["message"], row["line"], row["level"]) == (item[4]["message"], item[4]["line"], "INFO")
        assert row["timestamp"] == stamp(item[0] // 10**9, item[0] % 10**9)


def _descriptor_set():
    """A FileDescriptorSet made by hand: maps, repeated fields, uint64, bytes,
    an enum, a Duration, a message that contains itself."""
    from google.protobuf import descriptor_pb2, duration_pb2

    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="t.proto", package="t", syntax="proto3",
                                            dependency=["google/protobuf/duration.proto"])
    e = fd.enum_type.add(name="Mode")
    e.value.add(name="OFF", number=0)
    e.value.add(name="ON", number=1)
    m = fd.message_type.add(name="Thing")
    entry = m.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    fields = [("big", F.TYPE_UINT64, None, F.LABEL_OPTIONAL), ("raw", F.TYPE_BYTES, None, F.LABEL_OPTIONAL),
              ("mode", F.TYPE_ENUM, ".t.Mode", F.LABEL_OPTIONAL), ("xs", F.TYPE_DOUBLE, None, F.LABEL_REPEATED),
              ("counts", F.TYPE_MESSAGE, ".t.Thing.CountsEntry", F.LABEL_REPEATED),
              ("wait", F.TYPE_MESSAGE, ".google.protobuf.Duration", F.LABEL_OPTIONAL),
              ("child", F.TYPE_MESSAGE, ".t.Thing", F.LABEL_OPTIONAL), ("s32", F.TYPE_SINT32, None, F.LABEL_OPTIONAL)]
    for k, (name, typ, type_name, label) in enumerate(fields, 1):
        f = m.field.add(name=name, number=k, type=typ, label=label)
        if type_name:
            f.type_name = type_name
    fds = descriptor_pb2.FileDescriptorSet()
    fds.file.append(fd)  # before its dependency: the decoder orders them
    fds.file.append(descriptor_pb2.FileDescriptorProto.FromString(duration_pb2.DESCRIPTOR.serialized_pb))
    return fds.SerializeToString()


def test_protobuf_maps_repeated_enum_uint64_duration_and_recursion():
    from google.protobuf import descriptor_pool, message_factory

    schema = _descriptor_set()
    dec = decoder_for("/t", "t.Thing", "protobuf", schema, "protobuf")
    t = dec.arrow_type
    assert t.field("big").type == pa.decimal128(20, 0)
    assert t.field("raw").type == pa.binary()
    assert t.field("mode").type == pa.string()
    assert t.field("xs").type == pa.list_(pa.float64())
    assert t.field("counts").type == pa.map_(pa.string(), pa.int32())
    assert t.field("wait").type == pa.int64()
    assert t.field("child").type == pa.string()  # contains itself: its JSON text
    # a message built with the same schema by protobuf itself
    from google.protobuf import descriptor_pb2

    pool = descriptor_pool.DescriptorPool()
    for f in reversed(descriptor_pb2.FileDescriptorSet.FromString(schema).file):
        pool.Add(f)
    Thing = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Thing"))
    msg = Thing(big=2**64 - 1, raw=b"\x00\xff", mode=1, xs=[1.5, -2.0], s32=-7)
    msg.counts["a"] = 3
    msg.wait.seconds, msg.wait.nanos = 2, 5
    msg.child.big = 9
    got = dec.decode_one(msg.SerializeToString())
    assert got == {"big": Decimal(2**64 - 1), "raw": b"\x00\xff", "mode": "ON", "xs": [1.5, -2.0],
                   "counts": [("a", 3)], "wait": 2_000_000_005, "child": '{"big": "9"}', "s32": -7}
    unknown_enum = Thing(mode=7).SerializeToString()
    assert dec.decode_one(unknown_enum)["mode"] == "7"
    empty = dec.decode_one(b"")
    assert empty["wait"] is None and empty["child"] is None and empty["big"] == 0 and empty["xs"] == []


# -- JSON --------------------------------------------------------------------

def test_json_with_schema_decodes_nulls_empty_lists_and_nested_objects(tmp_path):
    w = write_mcap_json(str(tmp_path / "j.mcap"), n=300)
    dec, datas = channels(w.path)["/ev/json"]
    assert dec.arrow_type == pa.struct([
        ("i", pa.int64()), ("x", pa.float64()), ("name", pa.string()), ("tags", pa.list_(pa.string())),
        ("pos", pa.struct([("x", pa.float64()), ("y", pa.float64())])), ("note", pa.string())])
    got = decoded(dec, datas)
    assert got == [json_value(i) for i in range(300)]
    assert got[3]["tags"] == [] and got[3]["note"] is None  # the cases that matter


def test_json_without_schema_is_its_text(tmp_path):
    w = write_mcap_json(str(tmp_path / "j0.mcap"), n=50, with_schema=False)
    dec, datas = channels(w.path)["/ev/json"]
    assert dec.arrow_type == pa.string()
    got = decoded(dec, datas)
    assert got == [d.decode() for d in datas]
    assert [json.loads(g) for g in got] == [json_value(i) for i in range(50)]
    values, errors = dec.decode([b'{"a": 1', b"[1, 2]", b"\xff"])
    assert values.to_pylist() == [None, "[1, 2]", None]
    assert "JSONDecodeError" in errors[0].as_py() and errors[1].as_py() is None
    assert "UnicodeDecodeError" in errors[2].as_py()


def test_json_schema_parts_it_cannot_type_are_json_text_and_wrong_values_are_errors():
    schema = {
        "type": "object",
        "$defs": {"P": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {
            "n": {"type": ["integer", "null"]},
            "any": {},
            "free": {"type": "object"},
            "mixed": {"type": ["string", "integer"]},
            "p": {"$ref": "#/$defs/P"},
            "maybe": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
            "tuple": {"type": "array"},
            "kind": {"enum": ["a", "b"]},
        },
    }
    dec = decoder_for("/j", "ev.Loose", "jsonschema", json.dumps(schema).encode(), "json")
    t = dec.arrow_type
    assert [f.type for f in t] == [pa.int64(), pa.string(), pa.string(), pa.string(),
                                   pa.struct([("x", pa.float64())]), pa.bool_(), pa.string(), pa.string()]
    got = dec.decode_one(b'{"n": 2.0, "any": [1, {"b": null}], "free": {"k": 1}, "mixed": 3,'
                         b' "p": {"x": 1}, "maybe": null, "tuple": [1, "a"], "kind": "b", "extra": 1}')
    assert got == {"n": 2, "any": '[1,{"b":null}]', "free": '{"k":1}', "mixed": "3", "p": {"x": 1.0},
                   "maybe": None, "tuple": '[1,"a"]', "kind": "b"}
    with pytest.raises(DecodeError, match=r"\.n: expected an integer"):
        dec.decode_one(b'{"n": 1.5}')
    with pytest.raises(DecodeError, match=r"\.p\.x: expected a number"):
        dec.decode_one(b'{"p": {"x": "1"}}')
    with pytest.raises(DecodeError, match=r"\.n: expected an integer"):
        dec.decode_one(b'{"n": true}')
    with pytest.raises(DecodeError, match="not a JSON object"):
        dec.decode_one(b"[1]")


def test_json_schema_that_is_not_an_object_keeps_the_whole_message_as_text():
    dec = decoder_for("/j", "arr", "jsonschema", b'{"type": "array", "items": {"type": "integer"}}', "json")
    assert dec.arrow_type == pa.struct([("json", pa.string())])
    assert dec.decode_one(b"[1, 2]") == {"json": "[1,2]"}


# -- errors ------------------------------------------------------------------

@pytest.mark.parametrize("name,enc,data,msg_enc", [
    (IMU_TYPE, "ros2msg", b"std_msgs/Header header\nnot a valid line at all ###\n", "cdr"),
    (IMU_TYPE, "ros2msg", IMU_MSGDEF.split("=" * 80)[0].encode(), "cdr"),  # dependencies left out
    ("foxglove.Log", "protobuf", b"\x0a\x05broken", "protobuf"),
    ("no.Such", "protobuf", b"", "protobuf"),
    ("ev.Event", "jsonschema", b"{not json", "json"),
    ("ev.Event", "jsonschema", b"[1]", "json"),
])
def test_a_schema_that_does_not_parse_names_channel_and_schema(name, enc, data, msg_enc):
    with pytest.raises(RecordingFormatError) as e:
        decoder_for("/some/topic", name, enc, data, msg_enc)
    assert "'/some/topic'" in str(e.value) and repr(name) in str(e.value)


@pytest.mark.parametrize("msg_enc,name,enc", [
    ("application/octet-stream", "", ""), ("flatbuffer", "foo.Bar", "flatbuffer"), ("cbor", "", ""),
    ("cdr", "x/msg/Y", "omgidl"), ("protobuf", "", ""),
])
def test_encodings_it_cannot_decode_raise_decode_unsupported(msg_enc, name, enc):
    with pytest.raises(DecodeUnsupported) as e:
        decoder_for("/raw/blob", name, enc, b"", msg_enc)
    assert isinstance(e.value, RecordingOptionError)
    assert "'/raw/blob'" in str(e.value) and repr(msg_enc) in str(e.value) and "decode=false" in str(e.value)


def test_a_message_of_another_type_is_a_decode_error_in_its_row_only(tmp_path):
    w = write_ros2_mcap(str(tmp_path / "imu.mcap"), n=20)
    chans = channels(w.path)
    imu_dec, imu = chans["/imu"]
    str_dec, strings = chans["/chatter"]
    with pytest.raises(DecodeError, match="std_msgs/msg/String"):
        str_dec.decode_one(imu[0])
    with pytest.raises(DecodeError, match=IMU_TYPE):
        imu_dec.decode_one(strings[0])
    batch = [imu[0], strings[0], imu[1], b"", imu[2][:50], imu[3]]
    values, errors = imu_dec.decode(batch)
    assert values.is_valid().to_pylist() == [True, False, True, False, False, True]
    assert [e is None for e in errors.to_pylist()] == [True, False, True, False, False, True]
    assert values[5].as_py() == imu_dec.decode_one(imu[3])
    assert all(isinstance(e, str) and e for e in errors.drop_null().to_pylist())


def test_decode_of_only_bad_messages_and_of_none_gives_typed_arrays():
    dec = decoder_for("/s", "std_msgs/msg/String", "ros2msg", b"string data\n", "cdr")
    values, errors = dec.decode([b"\x00", None])
    assert values.type == dec.arrow_type and values.null_count == 2 and errors.null_count == 0
    values, errors = dec.decode([])
    assert len(values) == 0 and values.type == dec.arrow_type and errors.type == pa.string()


def test_decode_takes_an_arrow_binary_array(tmp_path):
    w = write_ros2_mcap(str(tmp_path / "imu.mcap"), n=40, extra_string_topic=False)
    dec, datas = channels(w.path)["/imu"]
    values, errors = dec.decode(pa.array(datas + [None], pa.binary()))
    assert values.to_pylist()[:40] == dec.decode(datas)[0].to_pylist()
    assert values[40].as_py() is None and errors[40].as_py()


def test_decoders_are_decoder_instances_with_a_readable_repr(tmp_path):
    w = write_ros2_all_types(str(tmp_path / "a.mcap"), n=1)
    dec, _ = channels(w.path)["/all"]
    assert isinstance(dec, Decoder) and ALL_TYPES_TYPE in repr(dec) and "/all" in repr(dec)
    assert ALL_TYPES_MSGDEF  # the schema the writer registered


_WITHOUT = r"""
import importlib.abc, json, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("google", "rosbags"):
            raise ModuleNotFoundError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, Hide())
from mcap.reader import make_reader
from a0py.recording.decode import DecoderMissing, decoder_for
from a0py.recording.baginfo import bag_info
out = {}
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        s, c, m = next(iter(make_reader(f).iter_messages()))
    try:
        decoder_for(c.topic, s.name, s.encoding, s.data, c.message_encoding)
        out[path] = None
    except DecoderMissing as e:
        out[path] = [e.package, e.extra, str(e)]
print(json.dumps(out))
"""


def test_a_decoder_whose_library_is_missing_names_the_package_not_the_schema(tmp_path):
    """Without protobuf or rosbags installed (hidden from a child interpreter),
    a protobuf or ROS 2 channel is DecoderMissing naming the package and the
    extra to install (the schema is not at fault), and JSON still decodes."""
    import subprocess
    import sys

    pb = write_protobuf_mcap(str(tmp_path / "pb.mcap"), n=3).path
    ros = write_ros2_mcap(str(tmp_path / "ros.mcap"), n=3, extra_string_topic=False).path
    js = write_mcap_json(str(tmp_path / "j.mcap"), n=3).path
    got = subprocess.run([sys.executable, "-c", _WITHOUT, pb, ros, js], capture_output=True, text=True,
                         timeout=120, check=True)
    out = json.loads(got.stdout)
    assert out[pb][:2] == ["protobuf", "typed"] and "channel '/pb/log'" in out[pb][2]
    assert out[ros][:2] == ["rosbags", "ros"] and "pip install 'a0py[ros]'" in out[ros][2]
    assert out[js] is None
