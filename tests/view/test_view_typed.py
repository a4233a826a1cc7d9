"""Typed topics and foreign recordings over the Foxglove WebSocket protocol:
the view runs in its own process, publishers in another, and plain
`websockets` clients speak to it (as the Foxglove app does, and as the page
does with ``?packets=1``).

What is pinned: a typed topic is advertised exactly as `foxglove-sdk`'s own
server advertises a channel of the same schema (protobuf schemas base64 of
the FileDescriptorSet, JSON Schemas and ``ros2msg`` as text), and its
messages reach Foxglove clients unchanged; the page gets protobuf messages
as the JSON of their fields and images at a bounded rate, the newest frame
kept; a recording of typed topics and other tools' files (MCAP writer JSON
and raw, mcap-ros2-support CDR, a rosbag2 directory's file, foxglove-sdk and
mcap-protobuf-support protobuf) have every channel advertised with its
schema, and their messages sent as they are."""

import base64
import glob
import json
import struct
import time

import pytest
from helpers import foreign
from helpers.view import PublisherProcess, ViewProcess
from test_view import Client, run
from test_view_playback import control

import a0py
from a0py.proto.schema import topic_schema
from a0py.view import _protocol as P

ADVERT_FIELDS = ("topic", "encoding", "schemaName", "schemaEncoding", "schema")
STRING_MSG = "string data\n"


@pytest.fixture
def publisher(root):
    p = PublisherProcess()
    yield p
    p.close()


def _typed_topics(publisher):
    """Publishes one message on a topic of each kind; returns the topics."""
    assert publisher.call(op="image", topic="cam", kind="rgb8", w=8, h=4) == "ok"
    assert publisher.call(op="log_message", topic="log_pb", text="hello") == "ok"
    assert publisher.call(op="json", topic="odom", objs=[{"x": 1.5, "tag": "a"}]) == "ok"
    # a CDR std_msgs/String "hi" (encapsulation header, then a length-prefixed string)
    cdr = bytes([0, 1, 0, 0]) + struct.pack("<I", 3) + b"hi\0"
    assert publisher.call(op="typed_bytes", topic="chatter", name="std_msgs/msg/String", encoding="ros2msg",
                          schema=STRING_MSG, hex=cdr.hex()) == "ok"
    return {"cam": "foxglove.RawImage", "log_pb": "foxglove.Log", "odom": "odom",
            "chatter": "std_msgs/msg/String"}


async def _adverts(url, topics, packets=False):
    """{topic: advertised channel} once every one of ``topics`` is advertised."""
    c = await Client.open(url + ("?packets=1" if packets else ""))
    await c.until(lambda: set(topics) <= {ch["topic"] for ch in c.channels.values()}, "the advertisements")
    await c.close()
    return {ch["topic"]: ch for ch in c.channels.values()}


def test_typed_topics_are_advertised_as_foxglove_sdks_server_advertises_them(publisher, view):
    foxglove = pytest.importorskip("foxglove", reason="foxglove-sdk (pip install 'a0py[foxglove]') is the reference")
    topics = _typed_topics(publisher)
    v = view()
    ours = run(_adverts(v.ws_url, topics))
    server = foxglove.start_server(name="reference", port=0)
    channels = []
    try:
        for t in topics:
            s = topic_schema(a0py.Topic(t))
            channels.append(foxglove.Channel(t, message_encoding=s.message_encoding, schema=foxglove.Schema(
                name=s.name, encoding=s.encoding, data=s.data)))
        ref = run(_adverts(f"ws://127.0.0.1:{server.port}", topics))
    finally:
        for ch in channels:
            ch.close()
        server.stop()
    for t, name in topics.items():
        assert {k: ours[t].get(k) for k in ADVERT_FIELDS} == {k: ref[t].get(k) for k in ADVERT_FIELDS}, t
        assert ours[t]["schemaName"] == name
    assert ours["cam"]["encoding"] == "protobuf" and ours["cam"]["schemaEncoding"] == "protobuf"
    assert base64.b64decode(ours["cam"]["schema"]) == topic_schema(a0py.Topic("cam")).data
    assert ours["chatter"]["encoding"] == "cdr" and ours["chatter"]["schema"] == STRING_MSG
    assert ours["odom"]["encoding"] == "json" and json.loads(ours["odom"]["schema"])["type"] == "object"


def test_foxglove_clients_get_the_bytes_and_the_page_gets_fields(publisher, view):
    from foxglove_schemas_protobuf.Log_pb2 import Log

    _typed_topics(publisher)
    v = view()

    async def main():
        fox = await Client.open(v.ws_url)
        page = await Client.open(v.ws_url + "?packets=1")
        for c in (fox, page):
            await c.channel("log_pb")
        fid = (await fox.channel("log_pb"))["id"]
        pch = await page.channel("log_pb")
        assert pch["encoding"] == "a0py/packet" and pch["payloadEncoding"] == "json"
        assert pch["a0pyRendered"] == "protobuf"
        await fox.subscribe([(1, fid)])
        await page.subscribe([(1, pch["id"])])
        _, _, data = await fox.data(1)
        msg = Log.FromString(data)  # the message itself: Foxglove decodes it with the schema
        assert (msg.message, msg.level, msg.line) == ("hello", Log.WARNING, 7)
        _, _, packet = await page.data(1)
        pkt = a0py.Packet.from_bytes(packet)
        assert json.loads(pkt.payload) == {"message": "hello", "name": "test", "level": "WARNING",
                                           "file": "f.py", "line": 7}
        assert int(dict(pkt.headers)["a0_time_wall"]) > 0  # the packet's headers are kept
        cam = await page.channel("cam")
        assert (cam["a0pyImage"], cam["a0pyMaxHz"]) == ("raw", 15)
        assert "a0pyImage" not in await fox.channel("cam")  # other clients see a plain channel
        await fox.close()
        await page.close()

    run(main())


def test_the_page_gets_images_at_a_bounded_rate_and_the_newest_frame(publisher, view):
    from foxglove_schemas_protobuf.RawImage_pb2 import RawImage

    n = 200
    assert publisher.call(op="image", topic="cam", kind="rgb8", w=16, h=8) == "ok"
    v = view()

    async def main():
        fox = await Client.open(v.ws_url)
        page = await Client.open(v.ws_url + "?packets=1&max_hz=0")  # every message, but images bounded
        fid = (await fox.channel("cam"))["id"]
        pid = (await page.channel("cam"))["id"]
        await fox.subscribe([(1, fid)])
        await page.subscribe([(1, pid)])
        await fox.data(1)
        await page.data(1)  # the latest frame, at once
        publisher.start(op="image", topic="cam", kind="rgb8", w=16, h=8, n=n)  # a burst, far above 15 Hz
        fox_ids = [RawImage.FromString((await fox.data(1))[2]).frame_id for _ in range(n)]
        assert fox_ids == [f"f{k}" for k in range(n)]  # Foxglove clients get every frame, in order
        page_ids = []
        while not page_ids or page_ids[-1] != f"f{n - 1}":
            packet = (await page.data(1, timeout=10))[2]
            page_ids.append(RawImage.FromString(a0py.Packet.from_bytes(packet).payload).frame_id)
        assert publisher.answer() == "ok"
        assert len(page_ids) < n // 2, page_ids  # conflated: at most 15 a second
        assert page_ids == sorted(page_ids, key=lambda s: int(s[1:]))  # in order, ending with the newest
        await fox.close()
        await page.close()

    run(main())


def test_a_recording_of_typed_topics_advertises_their_schemas(publisher, tmp_path):
    from foxglove_schemas_protobuf.RawImage_pb2 import RawImage

    from a0py.recording.recorder import Recorder

    # init="oldest": the frames a topic holds when the recorder finds it are recorded too
    rec = Recorder(["cam", "log_pb"], out=str(tmp_path / "rec"), init="oldest").start()
    assert rec.wait_ready(30)
    assert publisher.call(op="image", topic="cam", kind="rgb8", w=8, h=4, n=5) == "ok"
    assert publisher.call(op="log_message", topic="log_pb", text="recorded") == "ok"
    deadline = time.monotonic() + 30
    while sum(st.frames for st in rec.stats().values()) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = rec.stop()
    assert (stats["cam"].frames, stats["log_pb"].frames) == (5, 1)
    cam_schema = topic_schema(a0py.Topic("cam"))
    with ViewProcess(str(tmp_path / "rec")) as v:
        async def main():
            fox = await Client.open(v.ws_url)
            # every channel in the first advertise, at connect
            first = await fox.expect(lambda m: isinstance(m, dict) and m.get("op") == "advertise")
            topics = {c["topic"]: c for c in first["channels"]}
            assert {"cam", "log_pb"} <= set(topics)
            assert not [t for t in topics if t.startswith("/a0py/headers/")]  # the rest of the packets: hidden
            # one channel per topic: the recorder found the topics before their schemas, and
            # neither a frame recorded whole nor an empty a0py/packet channel may result
            assert sorted(c["topic"] for c in first["channels"] if c["topic"] in ("cam", "log_pb")) == \
                ["cam", "log_pb"]
            cam = topics["cam"]
            assert (cam["encoding"], cam["schemaName"], cam["schemaEncoding"]) == \
                ("protobuf", "foxglove.RawImage", "protobuf")
            assert base64.b64decode(cam["schema"]) == cam_schema.data
            info = fox.server_info
            assert "playbackControl" in info["capabilities"]
            lo = info["dataStartTime"]["sec"] * 10**9 + info["dataStartTime"]["nsec"]
            hi = info["dataEndTime"]["sec"] * 10**9 + info["dataEndTime"]["nsec"]
            await fox.subscribe([(1, cam["id"])])
            await fox.ws.send(control(P.PLAY, speed=10.0, rid="go"))
            # (the recorder gives the frames it reads in one batch one log time: a paused start
            # shows the last of them, so how many arrive depends on its pace; at least one)
            _, log, data = await fox.data(1)
            img = RawImage.FromString(data)  # the message as recorded: Foxglove decodes it
            assert (img.width, img.height, img.encoding) == (8, 4, "rgb8")
            await fox.until(lambda: any(st[0] == P.PLAYBACK_ENDED for st in fox.states), "the end")
            logs = [log]
            # one clock: messages, time messages and playback states all on the recording's
            assert fox.times and fox.states
            for t in logs + fox.times + [s[1] for s in fox.states]:
                assert lo <= t <= hi, (t, lo, hi)
            page = await Client.open(v.ws_url + "?packets=1")
            await page.channel("log_pb")
            lid = next(c for c in page.channels.values() if c["topic"] == "log_pb")
            assert lid["a0pyRendered"] == "protobuf"
            await page.subscribe([(1, lid["id"])])
            await page.ws.send(control(P.PLAY, speed=10.0, seek=0, rid="again"))
            assert json.loads((await page.data(1))[2])["message"] == "recorded"
            await fox.close()
            await page.close()

        run(main())


def _foreign_files(tmp_path):
    """(Written, the file to view) of each writer of helpers/foreign.py."""
    out = [foreign.write_mcap_json(str(tmp_path / "json.mcap"), n=50),
           foreign.write_mcap_json(str(tmp_path / "noschema.mcap"), n=20, topic="/ev/plain", with_schema=False),
           foreign.write_mcap_raw(str(tmp_path / "raw.mcap"), n=20),
           foreign.write_ros2_mcap(str(tmp_path / "ros2.mcap"), n=30),
           foreign.write_foxglove_mcap(str(tmp_path / "foxglove.mcap"), n=10),
           foreign.write_protobuf_mcap(str(tmp_path / "pb.mcap"), n=20)]
    bag = foreign.write_rosbag2(str(tmp_path / "bag"), n=20)
    files = [(w, w.path) for w in out]
    files.append((bag, sorted(glob.glob(str(tmp_path / "bag" / "*.mcap")))[0]))
    files.append((bag, str(tmp_path / "bag")))  # the rosbag2 directory itself: its .mcap files
    return files


def test_foreign_recordings_list_every_channel_with_its_schema_and_send_their_messages(tmp_path, root):
    from mcap.reader import make_reader

    for written, path in _foreign_files(tmp_path):
        mcap_file = path if path.endswith(".mcap") else glob.glob(f"{path}/*.mcap")[0]
        with open(mcap_file, "rb") as f:
            summary = make_reader(f).get_summary()
        schemas = {ch.topic: summary.schemas.get(ch.schema_id) for ch in summary.channels.values()}
        with ViewProcess(path) as v:
            async def main(written, path, schemas):
                page = await Client.open(v.ws_url + "?packets=1")
                await page.until(lambda: set(written.messages) <= {c["topic"] for c in page.channels.values()},
                                 f"the channels of {path}")
                topics = {c["topic"]: c for c in page.channels.values()}
                assert set(topics) - {"/a0py/view/stats"} == set(schemas), path
                for sid, (t, msgs) in enumerate(written.messages.items(), 1):
                    ch, schema = topics[t], schemas[t]
                    assert ch["encoding"] == written.message_encodings[t], (path, t)
                    assert ch["schemaName"] == written.schema_names[t], (path, t)
                    if schema is not None and schema.encoding:
                        assert ch["schemaEncoding"] == schema.encoding
                        data = (base64.b64decode(ch["schema"]) if schema.encoding == "protobuf"
                                else ch["schema"].encode())
                        assert data == schema.data, (path, t)
                    # seeked to its first message (paused): that message, at once on subscribing
                    first = msgs[0]
                    await page.ws.send(control(P.PAUSE, seek=first[0], rid=f"s{sid}"))
                    await page.expect(lambda m: isinstance(m, bytes) and m[0] == P.OP_PLAYBACK_STATE,
                                      what="the answer to the seek")
                    await page.subscribe([(sid, ch["id"])])
                    _, log, data = await page.data(sid)
                    assert log == first[0]
                    if written.message_encodings[t] == "protobuf":
                        fields = json.loads(data)  # the page gets the fields, decoded with the schema
                        # (fields holding their default value, 0 or "", are not set in protobuf 3)
                        assert {k: fields.get(k, type(v)()) for k, v in first[4].items() if k != "translation"} == \
                            {k: v for k, v in first[4].items() if k != "translation"}, (path, t)
                        if "translation" in first[4]:
                            assert fields["translation"].get("x", 0.0) == first[4]["translation"]["x"]
                    elif written.message_encodings[t] == "cdr" and ch.get("a0pyRendered"):
                        assert json.loads(data)  # a0py has a CDR decoder: the fields
                    else:
                        assert data == first[3], (path, t)  # JSON, raw, CDR: the message as written
                await page.close()

            run(main(written, path, schemas))


def test_a_protobuf_message_that_does_not_decode_shows_as_its_error_never_raises():
    from foxglove_schemas_protobuf.Log_pb2 import Log
    from hypothesis import given
    from hypothesis import strategies as st

    from a0py.proto.protobuf_types import descriptor_set_of
    from a0py.view._typed import kind_of_schema

    fds = descriptor_set_of(Log.DESCRIPTOR)
    kind = kind_of_schema("t", "foxglove.Log", "protobuf", fds, "protobuf")
    assert json.loads(kind.render(Log(message="x", line=3).SerializeToString())) == {"message": "x", "line": 3}
    out = json.loads(kind.render(b"\x0a\xff\x01"))  # field 1, a length beyond the message's end
    assert "t: a message that does not decode as foxglove.Log" in out["a0py.decodeError"]

    @given(st.binary(max_size=200))
    def any_bytes(data):
        assert isinstance(json.loads(kind.render(data)), dict)

    any_bytes()
    # a schema that does not parse: advertised as it is (base64), shown as bytes
    bad = kind_of_schema("t", "foxglove.Log", "protobuf", b"\xff\x00 not a FileDescriptorSet", "protobuf")
    assert bad.render is None and base64.b64decode(bad.schema) == b"\xff\x00 not a FileDescriptorSet"
    # images are drawn by the page from their own bytes
    from foxglove_schemas_protobuf.RawImage_pb2 import RawImage

    img = kind_of_schema("cam", "foxglove.RawImage", "protobuf", descriptor_set_of(RawImage.DESCRIPTOR), "protobuf")
    assert (img.image, img.render) == ("raw", None)
