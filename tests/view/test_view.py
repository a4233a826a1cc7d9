"""`a0py view`: the server and the Foxglove WebSocket protocol, driven by a
plain `websockets` client against a view running in its own process, with
topics published by yet another process.

The page's files over HTTP are in test_view_page.py, the page in a browser in
test_view_browser.py."""

import asyncio
import json
import re
import struct
import time

import pytest
from helpers.view import (
    MSG_S,
    PERIOD_NS,
    T0_NS,
    Client,
    PublisherProcess,
    ViewProcess,
    odom,
    run,
    write_recording,
)
from hypothesis import given
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from a0py._core import PACKET_LAYOUT
from a0py.proto import topic as tp
from a0py.view import _protocol as P
from a0py.view._schema import BYTES_ENCODING, JSON_ENCODING, infer_schema, kind_of


@pytest.fixture
def publisher(root):
    p = PublisherProcess()
    yield p
    p.close()


# ------------------------------------------------------------ protocol


def test_server_info_then_advertise_of_a_topic_published_by_another_process(view, publisher):
    publisher.call(op="json", topic="robot/odom", objs=[{"x": 1.5, "n": 3, "ok": True, "tag": "a"}])
    publisher.call(op="bytes", topic="robot/raw", hex="00ff10")
    v = view()

    async def main():
        c = await Client.open(v.ws_url)
        assert c.ws.subprotocol == "foxglove.sdk.v1"
        # live, without flags: what clients may read (publishing is off: not offered)
        assert c.server_info["name"] == "a0py view" and c.server_info["capabilities"] == [
            "parameters", "parametersSubscribe", "services", "connectionGraph"]
        # the page's packet codec takes every size and offset from here (the C header's)
        assert json.loads(c.server_info["metadata"]["a0py.packetLayout"]) == PACKET_LAYOUT
        odom_ch = await c.channel("robot/odom")
        raw_ch = await c.channel("robot/raw")
        assert odom_ch["encoding"] == "json" and odom_ch["schemaEncoding"] == "jsonschema"
        schema = json.loads(odom_ch["schema"])
        assert schema["type"] == "object"
        # The schema its publisher declared (pub_json's inferred one: every number a `number`).
        assert schema["properties"] == {"x": {"type": "number"}, "n": {"type": "number"},
                                        "ok": {"type": "boolean"}, "tag": {"type": "string"}}
        assert odom_ch["schemaName"] == "robot/odom"
        assert raw_ch["encoding"] == "a0py/bytes"
        assert (await c.channel("/a0py/view/stats"))["encoding"] == "json"
        await c.close()

    run(main())


def test_subscribe_delivers_exactly_the_published_payloads(view, publisher):
    publisher.call(op="json", topic="t/json", objs=[{"k": -1}])
    v = view()

    async def main():
        c = await Client.open(v.ws_url)
        ch = await c.channel("t/json")
        await c.subscribe([(5, ch["id"])])
        sid, _, first = await c.data(5)  # the newest message, at once
        assert (sid, json.loads(first)) == (5, {"k": -1})
        objs = [{"k": k, "v": k * 0.5} for k in range(200)]
        publisher.call(op="json", topic="t/json", objs=objs)
        got, logs = [], []
        while len(got) < len(objs):
            _, log, payload = await c.data(5)
            got.append(json.loads(payload))
            logs.append(log)
        assert got == objs
        assert logs == sorted(logs) and abs(logs[-1] / 1e9 - __import__("time").time()) < 60
        # bytes travel as they are
        publisher.call(op="bytes", topic="t/raw", hex="00010203fffe")
        raw = await c.channel("t/raw")
        await c.subscribe([(6, raw["id"])])
        assert (await c.data(6))[2] == bytes.fromhex("00010203fffe")
        await c.close()

    run(main())


def test_packets_mode_sends_whole_packets_with_their_headers(view, publisher):
    publisher.call(op="json", topic="t/p", objs=[{"a": 1}])
    v = view()

    async def main():
        from a0py import Packet

        c = await Client.open(v.ws_url + "?packets=1")
        ch = await c.channel("t/p")
        assert ch["encoding"] == "a0py/packet" and ch["payloadEncoding"] == "json"
        await c.subscribe([(1, ch["id"])])
        pkt = Packet.from_bytes((await c.data(1))[2])
        assert json.loads(pkt.payload) == {"a": 1}
        assert pkt.headers["content-type"] == "application/json"
        assert int(pkt.headers["a0_writer_seq"]) == 1
        await c.close()

    run(main())


def test_server_info_names_packets_for_the_page_as_the_protocols_define_them(view, publisher):
    from a0py.proto.packets import PACKET_ENCODING, STANDARD_HEADERS

    publisher.call(op="json", topic="t/v", objs=[{"a": 1}])
    v = view()

    async def main():
        from a0py import Packet

        c = await Client.open(v.ws_url + "?packets=1")
        meta = c.server_info["metadata"]
        assert meta["a0py.packetEncoding"] == PACKET_ENCODING == "a0py/packet"
        names = meta["a0py.standardHeaders"].split(",")
        assert names == list(STANDARD_HEADERS)
        ch = await c.channel("t/v")
        assert ch["encoding"] == meta["a0py.packetEncoding"]
        await c.subscribe([(1, ch["id"])])
        pkt = Packet.from_bytes((await c.data(1))[2])
        assert [k for k, _v in pkt.headers.items()][:5] == names   # the standard block, in order
        await c.close()

    run(main())


def test_unadvertise_when_the_topic_is_removed(view, publisher):
    publisher.call(op="json", topic="t/gone", objs=[{"a": 1}])
    v = view()

    async def main():
        c = await Client.open(v.ws_url)
        ch = await c.channel("t/gone")
        await c.subscribe([(1, ch["id"])])
        await c.data(1)
        publisher.call(op="unlink", topic="t/gone")
        await c.expect(lambda m: ch["id"] in c.unadvertised, what="the unadvertise")
        # made again: a new channel, never the old id
        publisher.call(op="json", topic="t/gone", objs=[{"a": 2}])
        await c.expect(lambda m: any(x["topic"] == "t/gone" and x["id"] != ch["id"]
                                     for x in c.channels.values()), what="the new advertisement")
        await c.close()

    run(main())


BAD_MESSAGES = [
    ("not json", "must be JSON"),
    ("[1, 2]", "JSON objects"),
    ('{"op": "frobnicate"}', "unknown operation"),
    ('{"op": 7}', "string field 'op'"),
    ('{"op": "subscribe", "subscriptions": "all"}', "must be an array"),
    ('{"op": "subscribe", "subscriptions": [{"id": -1, "channelId": 1}]}', "integer from 0"),
    ('{"op": "subscribe", "subscriptions": [{"id": 1, "channelId": 999999}]}', "unknown channel id 999999"),
    ('{"op": "unsubscribe", "subscriptionIds": [42]}', "unknown subscription ids [42]"),
    ('{"op": "advertise", "channels": []}', "clientPublish"),
    ('{"op": "getParameters", "parameterNames": "all"}', "must be an array"),
    ('{"op": "setParameters", "parameters": [{"name": "x.y", "value": 1}]}', "nothing was set"),
    (b"", "empty binary message"),
    (b"\x01\x00\x00\x00\x00hello", "clientPublish"),
    (b"\x02", "service call request of 1 bytes is too short"),
    (b"\x09abc", "unknown binary opcode 0x09"),
    (b"\x03\x00\x00\x00\x80\x3f\x00" + bytes(8) + b"\x00\x00\x00\x00", "not a recording"),
]


def test_bad_client_messages_get_an_error_status_and_the_connection_stays(view, publisher):
    publisher.call(op="json", topic="t/ok", objs=[{"a": 1}])
    v = view()

    async def main():
        c = await Client.open(v.ws_url)
        ch = await c.channel("t/ok")
        for message, fragment in BAD_MESSAGES:
            await c.ws.send(message)
            status = await c.error()
            assert status["level"] == 2 and fragment in status["message"], (message, status)
        await c.subscribe([(1, ch["id"])])
        assert json.loads((await c.data(1))[2]) == {"a": 1}  # still connected and served
        await c.subscribe([(1, ch["id"])])
        assert "already in use" in (await c.error())["message"]
        await c.subscribe([(2, ch["id"])])
        assert "already subscribed" in (await c.error())["message"]
        publisher.call(op="json", topic="t/ok", objs=[{"a": 2}])
        assert json.loads((await c.data(1))[2]) == {"a": 2}
        await c.close()

    run(main())


def test_a_client_that_never_reads_costs_only_itself(view, publisher):
    """A subscriber that stops reading: the publisher is never held up, the
    view's memory stays bounded, a reading client keeps getting messages, and
    the stalled one, when it reads again, finds its newest messages and is
    told exactly how many of its oldest were dropped."""
    size, n = 64 << 10, 1500  # 96 MiB through the view
    publisher.call(op="flood", topic="t/big", n=1, size=size)
    v = view("--queue", "50")

    async def main():
        stalled = await Client.open(v.ws_url, max_queue=1)
        reader = await Client.open(v.ws_url)
        ch = await stalled.channel("t/big")
        await reader.channel("t/big")
        stats = (await reader.channel("/a0py/view/stats"))["id"]
        await stalled.subscribe([(1, ch["id"])])
        await stalled.data(1)  # the newest, then never read again...
        await reader.subscribe([(1, ch["id"])])
        await reader.data(1)
        rss0 = v.rss()
        publisher.start(op="flood", topic="t/big", n=n, size=size, period=0.002)
        got = 0
        while True:
            _, _, payload = await reader.data(1, timeout=60)
            got += 1
            if int.from_bytes(payload[:8], "little") == n - 1:
                break
        assert json.loads(publisher.answer())["seconds"] > 0  # the publisher went through
        growth = v.rss() - rss0
        assert growth < 64 << 20, f"view grew by {growth >> 20} MiB for a stalled client"
        await reader.subscribe([(2, stats)])
        s = json.loads((await reader.data(2))[2])
        seen = s["topics"]["t/big"]["count"]  # what the view read: 1 + n - missed
        assert seen > n // 2
        # the reader: everything the view read, less what it was told it lost
        assert got + s["dropped"] == seen - 1
        # now the stalled client reads: its newest messages, and the count of drops
        received, dropped, newest = 1, 0, None
        while received + dropped < seen:
            m = await stalled.next(timeout=MSG_S)
            if isinstance(m, bytes) and m[0] == P.OP_MESSAGE_DATA:
                received += 1
                newest = m
            elif isinstance(m, dict) and m.get("id") == "a0py.dropped":
                dropped = int(m["message"].split("(")[1].split(" ")[0])
        assert received + dropped == seen and dropped > s["dropped"] and dropped > seen - 500
        assert int.from_bytes(newest[13:21], "little") == n - 1
        await stalled.close()
        await reader.close()

    run(main())


def test_a_client_that_floods_requests_and_never_reads_is_disconnected_with_a_status(view):
    """300 subscribe requests of 10,000 unknown channel ids each (about 110 MB
    sent), their error statuses never read: the server stops queueing them at
    its byte budget, tells the client why (an error status, then a close with
    code 1008 and a reason), and its memory stays bounded."""
    v = view()
    ids = list(range(1_000_000, 1_010_000))
    request = json.dumps({"op": "subscribe", "subscriptions": [{"id": i, "channelId": i} for i in ids]})

    async def main():
        c = await Client.open(v.ws_url, max_queue=1)  # reads (almost) nothing until told
        rss0 = v.rss()
        sent = 0
        try:
            for _ in range(300):
                await c.ws.send(request)
                sent += 1
        except ConnectionClosed:
            pass  # the server may end the connection before all were sent
        # now read what the server queued before it gave up on this client
        statuses = []
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                m = await c.next(timeout=60)
                if isinstance(m, dict) and m.get("op") == "status":
                    statuses.append(m)
        growth = v.rss("VmHWM") - rss0
        return sent, statuses, closed.value, growth

    sent, statuses, closed, growth = run(main())
    assert closed.rcvd is not None and closed.rcvd.code == 1008, closed
    assert "unsent" in closed.rcvd.reason and "MiB" in closed.rcvd.reason
    last = statuses[-1]
    assert last["level"] == 2 and last["id"] == "a0py.disconnected" and "disconnect" in last["message"]
    errors = statuses[:-1]
    assert errors and all("unknown channel id" in s["message"] for s in errors)
    assert len(errors) < sent  # not every request's reply was queued: the budget held
    # 16 MiB of queued replies, the requests being read, their parsing (unbounded, the
    # peak grew by about 205 MiB; bounded, by about 25)
    assert growth < 80 << 20, f"the view's peak memory grew by {growth >> 20} MiB for one flooding client"


def test_a_view_whose_source_fails_stops_with_its_error():
    """A source that raises ends serve_forever with a ViewError naming the
    cause, instead of a server that goes on serving a page with nothing behind
    it."""
    from a0py.errors import A0Error
    from a0py.view import ViewError
    from a0py.view._hub import Hub
    from a0py.view._server import ViewServer

    class BrokenSource:
        async def run(self):
            raise A0Error("the topics cannot be listed")

    async def main():
        server = ViewServer(Hub("test"), BrokenSource(), port=0)
        await server.start()
        try:
            with pytest.raises(ViewError, match="source stopped: the topics cannot be listed"):
                await asyncio.wait_for(server.serve_forever(), MSG_S)
        finally:
            await server.aclose()

    run(main())


def test_stats_channel_reports_rate_and_missed(view, publisher):
    v = view()
    publisher.start(op="rate", topic="t/rate", hz=200, seconds=3.0)

    async def main():
        c = await Client.open(v.ws_url)
        stats = await c.channel("/a0py/view/stats")
        await c.channel("t/rate")
        await c.subscribe([(1, stats["id"])])
        rates = []
        for _ in range(6):
            topics = json.loads((await c.data(1))[2])["topics"]
            if "t/rate" in topics:
                rates.append(topics["t/rate"]["rate"])
                assert topics["t/rate"]["missed"] == 0
        assert 100 < max(rates) < 300, rates
        await c.close()

    run(main())
    assert publisher.answer() == "ok"


# ------------------------------------------------------------ access rules


def test_origin_and_host_are_checked(view):
    v = view()
    port = v.url.split(":")[2].split("/")[0]

    async def main():
        for headers in ({"Origin": "http://evil.example"}, {"Origin": f"http://localhost.evil.example:{port}"}):
            with pytest.raises(InvalidStatus) as e:
                await connect(v.ws_url, subprotocols=[P.SUBPROTOCOL], additional_headers=headers)
            assert e.value.response.status_code == 403
        # the page itself, and the Foxglove app
        for origin in (f"http://127.0.0.1:{port}", "https://app.foxglove.dev"):
            ws = await connect(v.ws_url, subprotocols=[P.SUBPROTOCOL], additional_headers={"Origin": origin})
            await ws.close()
        # an unknown subprotocol is refused
        with pytest.raises(InvalidStatus) as e:
            await connect(v.ws_url, subprotocols=["chat"])
        assert e.value.response.status_code == 400

    run(main())
    # a page that rebinds its own name to 127.0.0.1 sends its own name as Host
    import http.client

    for upgrade in (False, True):
        conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=MSG_S)
        conn.putrequest("GET", "/", skip_host=True)
        conn.putheader("Host", f"evil.example:{port}")
        if upgrade:
            for k, val in (("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
                           ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
                           ("Sec-WebSocket-Protocol", P.SUBPROTOCOL)):
                conn.putheader(k, val)
        conn.endheaders()
        assert conn.getresponse().status == 403
        conn.close()


def test_binding_beyond_loopback_needs_a_flag_and_then_a_token(view, root):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "a0py.cli.view", "--host", "0.0.0.0", "--port", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "--allow-remote" in r.stderr and "allow_remote=" not in r.stderr
    v = view("--host", "0.0.0.0", "--allow-remote")
    assert "?token=" in v.url
    token = v.url.split("?token=")[1]
    bare = v.ws_url.split("?")[0]

    async def main():
        for url in (bare, bare + "?token=wrong"):
            with pytest.raises(InvalidStatus) as e:
                await connect(url, subprotocols=[P.SUBPROTOCOL])
            assert e.value.response.status_code == 401
        c = await Client.open(f"{bare}?token={token}")
        assert c.server_info["op"] == "serverInfo"
        await c.close()

    run(main())


# ------------------------------------------------------------ recordings


@pytest.fixture
def recording(tmp_path):
    path = tmp_path / "rec.mcap"
    write_recording(str(path), str(tmp_path / "topics"), n=1000)
    return path


def _control(command, speed=1.0, seek=None, rid="r"):
    r = rid.encode()
    return struct.pack("<BBfBQI", P.CLIENT_OP_PLAYBACK_CONTROL, command, speed, seek is not None,
                       seek or 0, len(r)) + r


def test_recording_seek_shows_the_messages_of_that_time(view, recording):
    v = view(str(recording))

    async def main():
        c = await Client.open(v.ws_url)
        info = c.server_info
        assert set(info["capabilities"]) == {"playbackControl", "time"}
        start = info["dataStartTime"]["sec"] * 10**9 + info["dataStartTime"]["nsec"]
        end = info["dataEndTime"]["sec"] * 10**9 + info["dataEndTime"]["nsec"]
        assert (start, end) == (T0_NS, T0_NS + 999 * PERIOD_NS)
        odom_ch = await c.channel("robot/odom")
        pose_ch = await c.channel("/foreign/pose")
        assert odom_ch["encoding"] == "json" and json.loads(odom_ch["schema"])["properties"]["i"] == {
            "type": "integer"}
        assert pose_ch["encoding"] == "json" and pose_ch["schemaEncoding"] == "jsonschema"
        await c.subscribe([(1, odom_ch["id"]), (2, pose_ch["id"])])
        mid = (start + end) // 2  # between messages 499 and 500
        await c.ws.send(_control(P.PAUSE, seek=mid, rid="seek-1"))
        await c.until(lambda: c.states and c.states[-1][3] == 1, "the playback state after the seek")
        assert c.states[-1][1] == mid and c.states[-1][0] == P.PLAYBACK_PAUSED
        got = {}
        while len(got) < 2:
            sid, log, payload = await c.data()
            got[sid] = (log, json.loads(payload))
        assert got[1] == (T0_NS + 499 * PERIOD_NS, odom(499))
        assert got[2] == (T0_NS + 490 * PERIOD_NS, {"k": 490})
        # play fast from there: every later message, in order, then the end
        await c.ws.send(_control(P.PLAY, speed=20.0))
        seen = []
        while len(seen) < 500:
            sid, log, payload = await c.data(1)
            seen.append(json.loads(payload)["i"])
        assert seen == list(range(500, 1000))
        await c.until(lambda: c.states and c.states[-1][0] == P.PLAYBACK_ENDED, "the end")
        assert c.times and c.times == sorted(c.times)
        await c.close()

    run(main())


def test_recording_errors_are_clear(tmp_path, view):
    import subprocess
    import sys

    bad = tmp_path / "bad.mcap"
    bad.write_bytes(b"not an mcap file at all")
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, fragment in ((bad, "MCAP"), (tmp_path / "missing.mcap", "no such file"),
                             (empty, "no .mcap recording")):
        r = subprocess.run([sys.executable, "-m", "a0py.cli.view", str(target), "--port", "0"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and fragment in r.stderr, r.stderr


# ------------------------------------------------------------ pieces


def test_schema_inference():
    assert infer_schema({"a": 1, "b": [1, 2.5], "c": {"d": None}, "e": [{"x": 1}, {"y": "s"}]}) == {
        "type": "object", "properties": {
            "a": {"type": "integer"},
            "b": {"type": "array", "items": {"type": "number"}},
            "c": {"type": "object", "properties": {"d": {"type": "null"}}},
            "e": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "integer"}, "y": {"type": "string"}}}}}}
    assert kind_of("t", b'{"a": 1}').encoding == JSON_ENCODING
    assert kind_of("t", b"[1, 2]").encoding == BYTES_ENCODING  # Foxglove wants objects
    assert kind_of("t", b"\x00\x01").encoding == BYTES_ENCODING
    assert kind_of("t", b' {"a": 1}', [("content-type", "application/json")]).encoding == JSON_ENCODING
    assert kind_of("t", b"{not json", [("content-type", "application/json")]).encoding == BYTES_ENCODING


def test_message_frames_are_little_endian():
    assert P.message_data(0x01020304, 0x1122334455667788, b"xy") == (
        b"\x01\x04\x03\x02\x01\x88\x77\x66\x55\x44\x33\x22\x11xy")
    assert P.time_message(1) == b"\x02\x01" + bytes(7)
    state = P.playback_state(P.PLAYBACK_PLAYING, 5, 2.0, True, "id")
    assert state == b"\x05\x00" + (5).to_bytes(8, "little") + struct.pack("<f", 2.0) + b"\x01" + (
        2).to_bytes(4, "little") + b"id"
    req = P.parse_client_binary(_control(P.PLAY, speed=2.0, seek=123, rid="abc"))
    assert (req.command, req.speed, req.seek_time, req.request_id) == (P.PLAY, 2.0, 123, "abc")


@given(st.binary(max_size=64))
def test_any_binary_from_a_client_is_a_request_or_a_protocol_error(data):
    try:
        P.parse_client_binary(data)
    except P.ProtocolError:
        pass


@given(st.one_of(st.text(max_size=64), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["op", "subscriptions", "subscriptionIds", "id", "channelId"]) | st.text(max_size=4),
        inner, max_size=4), max_leaves=12).map(json.dumps)))
def test_any_text_from_a_client_is_a_request_or_a_protocol_error(text):
    try:
        P.parse_client_text(text)
    except P.ProtocolError:
        pass


def test_max_hz_sends_at_most_that_rate_and_always_the_newest(view, publisher):
    publisher.call(op="json", topic="t/fast", objs=[{"k": -1}])
    v = view()

    async def main():
        c = await Client.open(v.ws_url + "?max_hz=10")
        ch = await c.channel("t/fast")
        await c.subscribe([(1, ch["id"])])
        await c.data(1)
        publisher.start(op="rate", topic="t/fast", hz=500, seconds=1.0)
        got = []
        while not got or got[-1][1]["i"] < 490:
            _, log, payload = await c.data(1, timeout=MSG_S)
            got.append((log, json.loads(payload)))
        assert publisher.answer() == "ok"
        # the last one published always arrives (held, then sent when its interval ends)
        while True:
            try:
                _, log, payload = await c.data(1, timeout=1.0)
            except BaseException:
                break
            got.append((log, json.loads(payload)))
        span = (got[-1][0] - got[0][0]) / 1e9
        assert len(got) <= 10 * span + 3, (len(got), span)
        assert [m["i"] for _, m in got] == sorted(m["i"] for _, m in got)
        await c.close()
        return got[-1][1]["i"]

    last = run(main())
    assert last >= 495  # the final message of the burst (500 Hz x 1 s, give or take the pacing)


def test_foxglove_sdk_option_needs_the_extra_or_serves(root, publisher):
    """--foxglove-sdk: without the `foxglove` extra, a clear error naming it;
    with it, the SDK's server is started beside the view."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("foxglove") is None:
        r = subprocess.run([sys.executable, "-m", "a0py.cli.view", "--foxglove-sdk", "--port", "0"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "pip install 'a0py[foxglove]'" in r.stderr, r.stderr
    else:
        publisher.call(op="json", topic="t/sdk", objs=[{"a": 1}])
        publisher.call(op="image", topic="t/cam", kind="rgb8", w=8, h=4)
        v = ViewProcess("--foxglove-sdk", "--foxglove-port", "0")
        try:
            line = next(line for line in v.lines if "Foxglove SDK server on ws://" in line)
            sdk_url = re.search(r"(ws://\S+)", line).group(1).rstrip(".,")

            async def main():
                c = await Client.open(sdk_url)
                cam = await c.channel("t/cam")  # a typed topic: its declared schema
                assert (cam["schemaName"], cam["encoding"], cam["schemaEncoding"]) == \
                    ("foxglove.RawImage", "protobuf", "protobuf")
                assert (await c.channel("t/sdk"))["encoding"] == "json"
                await c.close()

            run(main())
        finally:
            v.close()


# ------------------------------------------------------------ log and cfg topics

_LOG_CFG_WRITER = r'''
import sys
import a0py
log, cfg = a0py.Logger("robot"), a0py.Cfg("robot")
phase = sys.argv[1]
if phase == "start":
    cfg.write({"speed": 1.5})
    log.info("starting")
elif phase == "lines":
    log.warn("low battery", headers={"logger": "power", "line": "42"})
    log.err("overheat")
else:
    cfg.mergepatch({"speed": 2.5})
    for word in ("patched", "done", "bye"):
        log.dbg(word)
'''


def test_log_and_cfg_topics_are_channels_of_their_own(view, root):
    import subprocess
    import sys

    from a0py import Packet

    def write(phase):
        subprocess.run([sys.executable, "-c", _LOG_CFG_WRITER, phase], check=True, timeout=60)

    v = view()
    write("start")

    async def main():
        fox = await Client.open(v.ws_url)
        log_ch, cfg_ch = await fox.channel("robot:log"), await fox.channel("robot:cfg")
        # for Foxglove: the log as foxglove.Log JSON (its Log panel), the configuration as JSON
        assert (log_ch["encoding"], log_ch["schemaName"], log_ch["schemaEncoding"]) == (
            "json", "foxglove.Log", "jsonschema")
        assert set(json.loads(log_ch["schema"])["properties"]) >= {"timestamp", "level", "message", "name"}
        assert cfg_ch["encoding"] == "json" and json.loads(cfg_ch["schema"])["properties"] == {
            "speed": {"type": "number"}}
        write("lines")  # the view reads the log now: these lines are kept for new subscribers
        page = await Client.open(v.ws_url + "?packets=1&max_hz=100")  # as the page connects
        plog, pcfg = await page.channel("robot:log"), await page.channel("robot:cfg")
        assert (plog["encoding"], plog["a0pyProtocol"], plog["payloadEncoding"]) == ("a0py/packet", "log", "text")
        assert (pcfg["a0pyProtocol"], pcfg["payloadEncoding"]) == ("cfg", "json")
        # once the view has read them (its stats count them), ...
        await page.stats_until(9, lambda t: t.get("robot:log", {}).get("count", 0) >= 3
                               and t.get("robot:cfg", {}).get("count", 0) >= 1, "the view reading the log's lines")
        # a subscriber gets the log's last lines at once, each one (never conflated), and the configuration
        await fox.subscribe([(1, log_ch["id"]), (2, cfg_ch["id"])])
        entries = [json.loads((await fox.data(1))[2]) for _ in range(3)]
        assert [(e["level"], e["message"]) for e in entries] == [(2, "starting"), (3, "low battery"), (4, "overheat")]
        warn = entries[1]
        assert {k: warn[k] for k in ("name", "file", "line")} == {"name": "power", "file": "", "line": 42}
        assert set(warn["timestamp"]) == {"sec", "nsec"} and abs(warn["timestamp"]["sec"] - time.time()) < 60
        assert json.loads((await fox.data(2))[2]) == {"speed": 1.5}
        await page.subscribe([(7, plog["id"])])
        pkts = [Packet.from_bytes((await page.data(7))[2]) for _ in range(3)]
        assert [(p.payload, p.headers["a0_log_level"]) for p in pkts] == [
            (b"starting", "INFO"), (b"low battery", "WARN"), (b"overheat", "ERR")]
        # what comes next, from another process
        write("patch")
        by_sub = {1: [], 2: []}
        while len(by_sub[1]) < 3 or not by_sub[2]:
            sid, _, payload = await fox.data()  # the two arenas' messages may interleave
            by_sub[sid].append(json.loads(payload))
        assert by_sub[2] == [{"speed": 2.5}]
        assert [e["message"] for e in by_sub[1]] == ["patched", "done", "bye"]
        # the page asks for at most 100 messages a second per topic, but log lines all come
        assert [Packet.from_bytes((await page.data(7))[2]).payload for _ in range(3)] == [
            b"patched", b"done", b"bye"]
        await fox.close()
        await page.close()

    run(main())
    # the view created nothing: the topic still has only its log and cfg arenas
    assert tp.list_topics(root) == {"robot": ["cfg", "log"]}


def test_a_started_view_used_as_a_context_manager_runs_one_server_that_listens(tmp_path):
    """``with a0py.view.start(...) as v``: start() has started it, the with block
    must not start a second server (whose address `ws_url` would name before it
    listens: connection refused, now and then)."""
    import socket
    import threading

    import a0py.view

    for _ in range(10):
        with a0py.view.start(["camera"], port=0, root=f"file:{tmp_path}") as v:
            assert [t.name for t in threading.enumerate()].count("a0py-view") == 1
            port = int(v.ws_url.rstrip("/").rsplit(":", 1)[1])
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
            with pytest.raises(RuntimeError, match="started already"):
                v.start()
    deadline = time.monotonic() + 10
    while "a0py-view" in [t.name for t in threading.enumerate()]:
        assert time.monotonic() < deadline, "a view's thread outlived its with block"
        time.sleep(0.05)
