"""`a0py view` driving a0py: client publish, configs as parameters, RPC as
services, the connection graph; each behind its flag. A plain `websockets`
client against a view in its own process; what it changes is read back with
a0py itself (or `a0py echo`, `a0py cfg`).

The same scenarios against foxglove-sdk's own server are in
test_view_reference.py; the page's panels in test_view_control_browser.py."""

import base64
import json
import struct

import pytest
from helpers.view import Client, ViewProcess, run

import a0py
from a0py.proto import topic as tp
from a0py.proto.schema import topic_schema

VEL_SCHEMA = {"type": "object", "properties": {"v": {"type": "number"}, "w": {"type": "number"}},
              "required": ["v"]}


@pytest.fixture
def view(root):
    views = []

    def start(*args):
        v = ViewProcess(*args)
        views.append(v)
        return v

    yield start
    for v in views:
        v.close()


def _message(channel_id, payload):
    return struct.pack("<BI", 1, channel_id) + payload


def _log_schema():
    from foxglove_schemas_protobuf.Log_pb2 import Log

    from a0py.proto.protobuf_types import schema_parts_of

    name, data = schema_parts_of(Log())
    return Log, name, base64.b64encode(data).decode()


# ------------------------------------------------------------ client publish


def test_client_publish_writes_typed_messages_and_refuses_what_does_not_match(view, root):
    """JSON with a JSON Schema, protobuf and raw bytes: each accepted message is
    published to the a0py topic, declared with the advertised schema; a message
    that does not match is refused with an error status and nothing is written."""
    v = view("--allow-publish", "cmd/*")
    Log, log_name, log_schema = _log_schema()

    async def main():
        c = await Client.open(v.ws_url)
        info = c.server_info
        assert "clientPublish" in info["capabilities"]
        assert {"json", "protobuf", "a0py/bytes"} <= set(info["supportedEncodings"])
        assert json.loads(info["metadata"]["a0py.allowPublish"]) == ["cmd/*"]
        await c.send("advertise", channels=[
            {"id": 1, "topic": "cmd/vel", "encoding": "json", "schemaName": "Vel",
             "schemaEncoding": "jsonschema", "schema": json.dumps(VEL_SCHEMA)},
            {"id": 2, "topic": "cmd/log", "encoding": "protobuf", "schemaName": log_name,
             "schemaEncoding": "protobuf", "schema": log_schema},
            {"id": 3, "topic": "cmd/raw", "encoding": "a0py/bytes", "schemaName": ""}])
        subs = {t: a0py.SubscriberSync(t, init=a0py.INIT_OLDEST) for t in ("cmd/vel", "cmd/log", "cmd/raw")}
        bad = [(1, b'{"w": 1}', "'v' is a required property"), (1, b'{"v": "fast"}', "not of type 'number'"),
               (1, b"[1, 2]", "must be an object"), (1, b"{nope", "not JSON"),
               (2, b"\xff\xff\xff", "does not parse as foxglove.Log"),
               (2, b"\xf8\x07\x05", "does not define"), (9, b"{}", "not advertised")]
        for cid, payload, fragment in bad:
            await c.ws.send(_message(cid, payload))
            status = await c.error()
            assert status["level"] == 2 and fragment in status["message"], (payload, status)
        await c.ws.send(_message(1, b'{"v": 1.5, "w": -2}'))
        await c.ws.send(_message(2, Log(message="hi", level=Log.INFO).SerializeToString()))
        await c.ws.send(_message(3, b"\x00\x01\x02"))
        vel = subs["cmd/vel"].read_blocking(timeout=10)
        assert vel.json() == {"v": 1.5, "w": -2}
        assert Log.FromString(subs["cmd/log"].read_blocking(timeout=10).payload).message == "hi"
        assert subs["cmd/raw"].read_blocking(timeout=10).payload == b"\x00\x01\x02"
        # nothing of the refused ones: each topic holds exactly the one accepted message
        for s in subs.values():
            assert s.read() is None
            s.close()
        assert (topic_schema("cmd/vel").name, topic_schema("cmd/vel").json()) == ("Vel", VEL_SCHEMA)
        assert topic_schema("cmd/log").name == "foxglove.Log"
        # unadvertised: no more publishing on it
        await c.send("unadvertise", channelIds=[1])
        await c.ws.send(_message(1, b'{"v": 1}'))
        assert "not advertised" in (await c.error())["message"]
        await c.close()

    run(main())


def test_publishing_is_refused_without_the_flag_or_outside_its_globs(view, root):
    v = view("--allow-publish", "cmd/*")
    off = view()

    async def main():
        c = await Client.open(off.ws_url)
        assert "clientPublish" not in c.server_info["capabilities"]
        await c.send("advertise", channels=[{"id": 1, "topic": "cmd/vel", "encoding": "json", "schemaName": "V"}])
        status = await c.error()
        assert "--allow-publish" in status["message"] and "clientPublish" in status["message"]
        await c.ws.send(_message(1, b"{}"))
        assert "--allow-publish" in (await c.error())["message"]
        await c.close()
        c = await Client.open(v.ws_url)
        for topic in ("robot/arm", "cmd/deep/er", "cmd"):
            await c.send("advertise", channels=[{"id": 5, "topic": topic, "encoding": "json", "schemaName": "V"}])
            status = await c.error()
            assert "not allowed" in status["message"] and "cmd/*" in status["message"], status
        await c.send("advertise", channels=[{"id": 6, "topic": "cmd/x", "encoding": "cbor", "schemaName": "V"}])
        assert "takes no 'cbor'" in (await c.error())["message"]
        await c.close()

    run(main())
    assert tp.list_topics(root) == {}  # nothing was created
