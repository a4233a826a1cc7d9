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
from helpers.view import Client, GraphState, run

import a0py
from a0py.proto import topic as tp
from a0py.proto.schema import topic_schema

VEL_SCHEMA = {"type": "object", "properties": {"v": {"type": "number"}, "w": {"type": "number"}},
              "required": ["v"]}


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


# ------------------------------------------------------------ parameters

ROBOT_CFG = {"speed": 1.5, "n": 3, "on": True, "name": "r2", "gains": [1.0, 2.0], "pid": {"kp": 0.5, "ki": 0},
             "empty": {}, "tags": ["a", "b"], "nothing": None, "dotted": {"a.b": 1}}


async def _parameters(c, names=(), until=lambda p: bool(p), rid="g"):
    """getParameters until ``until(params)`` holds (the view finds a cfg within its scan)."""
    for _ in range(100):
        await c.send("getParameters", parameterNames=list(names), id=rid)
        params = (await c.reply("parameterValues", id=rid))["parameters"]
        if until(params):
            return params
        await __import__("asyncio").sleep(0.05)
    pytest.fail(f"the view never gave the parameters {names}")


def _by_name(params):
    return {p["name"]: p for p in params}


def test_configurations_are_parameters_with_their_types(view, root):
    a0py.Cfg("robot").write(ROBOT_CFG)
    v = view("--allow-set", "robot")

    async def main():
        c = await Client.open(v.ws_url)
        assert {"parameters", "parametersSubscribe"} <= set(c.server_info["capabilities"])
        params = _by_name(await _parameters(c))
        assert params == {
            "robot.speed": {"name": "robot.speed", "type": "float64", "value": 1.5},
            "robot.n": {"name": "robot.n", "value": 3},
            "robot.on": {"name": "robot.on", "value": True},
            "robot.name": {"name": "robot.name", "value": "r2"},
            "robot.gains": {"name": "robot.gains", "type": "float64_array", "value": [1.0, 2.0]},
            "robot.pid.kp": {"name": "robot.pid.kp", "type": "float64", "value": 0.5},
            "robot.pid.ki": {"name": "robot.pid.ki", "value": 0},
            "robot.empty": {"name": "robot.empty", "value": {}},
            "robot.tags": {"name": "robot.tags", "value": ["a", "b"]},
            "robot.dotted": {"name": "robot.dotted", "value": {"a.b": 1}},
        }
        assert _by_name(await _parameters(c, ["robot.n", "robot.nope"])) == {"robot.n": params["robot.n"]}
        await c.send("subscribeParameterUpdates", parameterNames=["robot.speed", "robot.pid.kp", "robot.blob"])
        # a float set as 2 stays a float; bytes go as base64; no value removes it
        await c.send("setParameters", id="s1", parameters=[
            {"name": "robot.speed", "value": 2, "type": "float64"},
            {"name": "robot.blob", "value": base64.b64encode(b"\x00\xffab").decode(), "type": "byte_array"},
            {"name": "robot.pid.ki"}, {"name": "robot.new.deep", "value": [1, 2]}])
        reply = _by_name((await c.reply("parameterValues", id="s1"))["parameters"])
        assert reply == {"robot.speed": {"name": "robot.speed", "type": "float64", "value": 2.0},
                         "robot.blob": {"name": "robot.blob", "type": "byte_array", "value": "AP9hYg=="},
                         "robot.new.deep": {"name": "robot.new.deep", "value": [1, 2]}}
        doc = a0py.Cfg("robot").read().json()
        assert doc["speed"] == 2.0 and isinstance(doc["speed"], float) and doc["blob"] == "AP9hYg=="
        assert doc["pid"] == {"kp": 0.5} and doc["new"] == {"deep": [1, 2]}
        # another writer: the subscribed parameters that changed come by themselves
        a0py.Cfg("robot").mergepatch({"pid": {"kp": 0.7}, "n": 4})
        update = await c.expect(lambda m: isinstance(m, dict) and m.get("op") == "parameterValues"
                                and "id" not in m and any(p["name"] == "robot.pid.kp" for p in m["parameters"]))
        assert update["parameters"] == [{"name": "robot.pid.kp", "type": "float64", "value": 0.7}]
        await c.close()

    run(main())


def test_setting_parameters_is_refused_without_the_flag_and_nothing_changes(view, root):
    a0py.Cfg("robot").write({"speed": 1.5})
    a0py.Cfg("arm").write({"speed": 1.0})
    v = view("--allow-set", "arm")

    async def main():
        c = await Client.open(v.ws_url)
        await _parameters(c, until=lambda p: len(p) == 2)
        for params in ([{"name": "robot.speed", "value": 9}],
                       [{"name": "arm.speed", "value": 9}, {"name": "robot.speed", "value": 9}],
                       [{"name": "nothing.here", "value": 1}]):
            await c.send("setParameters", parameters=params, id="x")
            status = await c.error()
            assert status["level"] == 2 and "nothing was set" in status["message"], status
        assert "--allow-set" in status["message"] or "no configuration" in status["message"]
        await c.close()

    run(main())
    assert a0py.Cfg("robot").read().json() == {"speed": 1.5}
    assert a0py.Cfg("arm").read().json() == {"speed": 1.0}


# ------------------------------------------------------------ services


def _call(service_id, call_id, payload, encoding="json"):
    enc = encoding.encode()
    return struct.pack("<BIII", 2, service_id, call_id, len(enc)) + enc + payload


def _response(m):
    service_id, call_id, n = struct.unpack_from("<III", m, 1)
    return service_id, call_id, m[13:13 + n].decode(), m[13 + n:]


async def _services(c, names):
    await c.until(lambda: set(names) <= set(c.services), f"the services {names}")
    return dict(c.services)


def test_rpc_servers_are_services_and_calls_reach_them(view, root):
    from helpers.view import ADD_REPLY, ADD_REQUEST, RpcServerProcess

    with RpcServerProcess("robot/add", "robot/echo", "robot/slow") as servers:
        v = view("--allow-call", "robot/*", "--call-timeout", "2")

        async def main():
            c = await Client.open(v.ws_url)
            assert "services" in c.server_info["capabilities"]
            assert json.loads(c.server_info["metadata"]["a0py.allowCall"]) == ["robot/*"]
            services = await _services(c, ["robot/add", "robot/echo", "robot/slow"])
            add, echo, slow = services["robot/add"], services["robot/echo"], services["robot/slow"]
            assert add["type"] == "AddRequest" and add["request"]["encoding"] == "json"
            assert json.loads(add["request"]["schema"]) == ADD_REQUEST
            assert (add["response"]["schemaName"], json.loads(add["response"]["schema"])) == ("AddReply", ADD_REPLY)
            assert (echo["type"], echo["requestSchema"], echo["responseSchema"]) == ("a0py/rpc", "", "")
            # a call: the reply, in the declared encoding
            await c.ws.send(_call(add["id"], 7, b'{"a": 2, "b": 40}'))
            m = await c.expect(lambda m: isinstance(m, bytes) and m[0] == 3, what="the response")
            sid, cid, enc, payload = _response(m)
            assert (sid, cid, enc, json.loads(payload)) == (add["id"], 7, "json", {"sum": 42})
            # raw: any supported encoding, the reply in the request's
            await c.ws.send(_call(echo["id"], 8, b"\x01\x02\x03", "a0py/bytes"))
            m = await c.expect(lambda m: isinstance(m, bytes) and m[0] == 3, what="the echo")
            assert _response(m) == (echo["id"], 8, "a0py/bytes", b"\x03\x02\x01")
            # a request that does not match the declared schema never reaches the server
            await c.ws.send(_call(add["id"], 9, b'{"a": 2}'))
            failure = await c.reply("serviceCallFailure", callId=9)
            assert "'b' is a required property" in failure["message"]
            # a timeout, an unknown service
            await c.ws.send(_call(slow["id"], 10, b"{}"))
            assert "no reply" in (await c.reply("serviceCallFailure", callId=10, timeout=10))["message"]
            await c.ws.send(_call(999, 11, b"{}"))
            assert "unknown service" in (await c.reply("serviceCallFailure", callId=11))["message"]
            # the server dies: its services are unadvertised; a call on the old id fails
            servers.kill()
            gone = await c.reply("unadvertiseServices")
            assert set(gone["serviceIds"]) == {add["id"], echo["id"], slow["id"]}
            await c.ws.send(_call(add["id"], 12, b'{"a": 1, "b": 1}'))
            assert "unknown service" in (await c.reply("serviceCallFailure", callId=12))["message"]
            await c.close()

        run(main())


def test_calls_are_refused_without_the_flag(view, root):
    from helpers.view import RpcServerProcess

    with RpcServerProcess("robot/echo", "arm/echo"):
        v = view("--allow-call", "arm/*")

        async def main():
            c = await Client.open(v.ws_url)
            services = await _services(c, ["robot/echo", "arm/echo"])
            await c.ws.send(_call(services["robot/echo"]["id"], 1, b"x", "a0py/bytes"))
            failure = await c.reply("serviceCallFailure", callId=1)
            assert "--allow-call" in failure["message"] and "arm/*" in failure["message"]
            assert (await c.error())["level"] == 2
            await c.ws.send(_call(services["arm/echo"]["id"], 2, b"xy", "a0py/bytes"))
            m = await c.expect(lambda m: isinstance(m, bytes) and m[0] == 3, what="the allowed call's reply")
            assert _response(m)[3] == b"yx"
            await c.close()

        run(main())


# ------------------------------------------------------------ connection graph

_SUBSCRIBER = r'''
import sys
import a0py
sub = a0py.SubscriberSync(sys.argv[1])
print("ok", flush=True)
sys.stdin.read()
'''


def _ids_of(ids, pid):
    return any(i.endswith(f"[{pid}]") for i in ids)


def test_the_graph_shows_publishers_subscribers_and_servers_as_they_come_and_go(view, root):
    import subprocess
    import sys

    from helpers.view import PublisherProcess, RpcServerProcess

    v = view()

    async def main():
        c = await Client.open(v.ws_url)
        assert "connectionGraph" in c.server_info["capabilities"]
        await c.send("subscribeConnectionGraph")
        g = GraphState()
        await g.until(c, lambda g: g.updates, "the first graph")
        pub = PublisherProcess()
        try:
            pub.call(op="json", topic="g/odom", objs=[{"x": 1}])
            await g.until(c, lambda g: _ids_of(g.published.get("g/odom", ()), pub.proc.pid),
                          "the publisher process in the graph")
            sub = subprocess.Popen([sys.executable, "-c", _SUBSCRIBER, "g/odom"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            try:
                assert sub.stdout.readline().strip() == "ok"
                await g.until(c, lambda g: _ids_of(g.subscribed.get("g/odom", ()), sub.pid),
                              "the subscriber process in the graph")
                assert not _ids_of(g.subscribed["g/odom"], pub.proc.pid)
                assert not _ids_of(g.published["g/odom"], sub.pid)
                with RpcServerProcess("g/echo") as server:
                    await g.until(c, lambda g: _ids_of(g.services.get("g/echo", ()), server.pid),
                                  "the RPC server in the graph")
                await g.until(c, lambda g: "g/echo" not in g.services, "the RPC server gone")
            finally:
                sub.stdin.close()
                sub.wait(10)
            await g.until(c, lambda g: not g.subscribed.get("g/odom"), "the subscriber gone")
        finally:
            pub.close()
        await g.until(c, lambda g: not g.published.get("g/odom"), "the publisher gone")
        await c.close()

    run(main())


def test_the_flags_are_refused_with_a_recording(tmp_path, root):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "a0py.cli.view", str(tmp_path / "rec.mcap"), "--allow-set", "robot",
                        "--port", "0"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "apply to live topics" in r.stderr, r.stderr
