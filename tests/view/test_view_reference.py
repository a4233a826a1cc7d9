"""`a0py view` against foxglove-sdk's own server (the `foxglove` package, the
reference for every message of the protocol): one client scenario run against
both, each server holding the same state (a typed topic, a configuration, an
RPC server with declared schemas and a raw one, a publisher and a subscriber
process). advertise, parameterValues, advertiseServices, serviceCallResponse
and connectionGraphUpdate are compared field by field; only ids (and times)
may differ."""

import asyncio
import json
import struct
import subprocess
import sys

import pytest
from helpers.view import (
    ADD_REPLY,
    ADD_REQUEST,
    Client,
    GraphState,
    PublisherProcess,
    RpcServerProcess,
    ViewProcess,
    run,
)

import a0py
from a0py.view._params import flatten

foxglove = pytest.importorskip("foxglove", reason="foxglove-sdk (pip install 'a0py[foxglove]') is the reference")
from foxglove.websocket import (  # noqa: E402 - after the skip: the reference is optional
    Capability,
    ConnectionGraph,
    MessageSchema,
    Parameter,
    ParameterType,
    ServerListener,
    Service,
    ServiceSchema,
)

ODOM_SCHEMA = {"type": "object", "properties": {"x": {"type": "number"}, "n": {"type": "integer"}}}
ODOM_TEXT = json.dumps(ODOM_SCHEMA, separators=(",", ":"), sort_keys=True)
CFG = {"speed": 1.5, "n": 3, "on": True, "name": "r2", "gains": [1.0, 2.0], "pid": {"kp": 0.5, "ki": 0},
       "tags": ["a", "b"], "limits": {"a.b": 1, "c": [1, 2]}}
SUBSCRIBER = r'''
import sys
import a0py
sub = a0py.SubscriberSync(sys.argv[1])
print("ok", flush=True)
sys.stdin.read()
'''


def _without_ids(obj):
    """``obj`` (parsed JSON) with every id field gone and every list of dicts sorted."""
    if isinstance(obj, dict):
        return {k: _without_ids(v) for k, v in obj.items() if k not in ("id", "serviceId", "callId")}
    if isinstance(obj, list):
        items = [_without_ids(v) for v in obj]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True)) if all(
            isinstance(v, dict) for v in items) else items
    return obj


def _reference_parameter(name, value):
    if isinstance(value, bytes):
        return Parameter(name, value=value, type=ParameterType.ByteArray)
    return Parameter(name, value=value)


class _Reference(ServerListener):
    """foxglove-sdk's server holding the view's state: the parameters of CFG."""

    def __init__(self):
        self.params = flatten("robot", CFG)

    def on_get_parameters(self, client, param_names, request_id=None):
        names = param_names or list(self.params)
        return [_reference_parameter(n, self.params[n]) for n in names if n in self.params]

    def on_set_parameters(self, client, parameters, request_id=None):
        for p in parameters:
            value = p.get_value()
            if p.type == ParameterType.Float64 or isinstance(value, float):
                value = float(value)
            self.params[p.name] = value
        return [_reference_parameter(p.name, self.params[p.name]) for p in parameters]


def _add(request):
    q = json.loads(request.payload)
    return json.dumps({"sum": q["a"] + q["b"]}, separators=(",", ":")).encode()


def _reference_server():
    schema = foxglove.Schema
    add = Service("robot/add", schema=ServiceSchema(
        "AddRequest",
        request=MessageSchema(encoding="json", schema=schema(name="AddRequest", encoding="jsonschema",
                                                             data=a0py.Schema.json_schema("AddRequest", ADD_REQUEST).data)),
        response=MessageSchema(encoding="json", schema=schema(name="AddReply", encoding="jsonschema",
                                                              data=a0py.Schema.json_schema("AddReply", ADD_REPLY).data))),
        handler=_add)
    echo = Service("robot/echo", schema=ServiceSchema("a0py/rpc"), handler=lambda r: bytes(r.payload)[::-1])
    listener = _Reference()
    server = foxglove.start_server(
        name="reference", port=0, server_listener=listener, services=[add, echo],
        capabilities=[Capability.ClientPublish, Capability.Parameters, Capability.Services,
                      Capability.ConnectionGraph],
        supported_encodings=["json", "protobuf", "a0py/bytes"])
    channel = foxglove.Channel("robot/odom", message_encoding="json", schema=schema(
        name="Odom", encoding="jsonschema", data=ODOM_TEXT.encode()))
    return server, channel


async def _scenario(url, services_ready, graph_ready):
    """The client's side: what each server answers, by message."""
    c = await Client.open(url)
    out = {"capabilities": set(c.server_info["capabilities"])}
    odom = await c.channel("robot/odom")
    out["advertise"] = {k: v for k, v in odom.items() if k != "id"}
    for _ in range(100):  # the view finds the configuration within a scan
        await c.send("getParameters", parameterNames=[], id="all")
        got = await c.reply("parameterValues", id="all")
        if got["parameters"]:
            break
        await asyncio.sleep(0.05)
    out["parameterValues"] = _without_ids(got)
    await c.send("getParameters", parameterNames=["robot.pid.kp", "robot.nope"], id="some")
    out["parameterValues some"] = await c.reply("parameterValues", id="some")
    await c.send("setParameters", id="set", parameters=[{"name": "robot.speed", "value": 2, "type": "float64"},
                                                        {"name": "robot.name", "value": "r3"}])
    out["parameterValues set"] = await c.reply("parameterValues", id="set")
    await c.until(lambda: services_ready(c.services), "the services")
    services = c.services
    out["advertiseServices"] = _without_ids({"op": "advertiseServices", "services": list(services.values())})
    enc = b"json"
    for name, payload, key in (("robot/add", b'{"a": 2, "b": 40}', "add"), ("robot/echo", b"abc", "echo")):
        sid = services[name]["id"]
        await c.ws.send(struct.pack("<BIII", 2, sid, 77, len(enc)) + enc + payload)
        m = await c.expect(lambda m: isinstance(m, bytes) and m[0] == 3, what="a service call response")
        got_sid, call_id, n = struct.unpack_from("<III", m, 1)
        assert (got_sid, call_id) == (sid, 77)
        out[f"serviceCallResponse {key}"] = (m[0], m[13:13 + n], m[13 + n:])
    await c.send("subscribeConnectionGraph")
    graph = GraphState()
    await graph.until(c, graph_ready, "the connection graph")
    out["connectionGraphUpdate"] = (graph.fields, graph.snapshot())
    await c.close()
    return out


async def _watch_graph(url):
    """A client that subscribes to the graph (the view follows writers while one does)."""
    c = await Client.open(url)
    await c.send("subscribeConnectionGraph")
    await c.reply("connectionGraphUpdate")
    return c


def test_the_view_answers_as_foxglove_sdks_server_does(root):
    a0py.Cfg("robot").write(CFG)
    sdk, channel = _reference_server()
    publisher = PublisherProcess()
    sub = None
    try:
        with RpcServerProcess("robot/add", "robot/echo") as servers, \
                ViewProcess("--allow-publish", "robot/**", "--allow-set", "robot", "--allow-call", "robot/*") as v:
            loop = asyncio.new_event_loop()
            watcher = loop.run_until_complete(_watch_graph(v.ws_url))
            # a process that starts publishing the typed topic, and one that subscribes to it
            publisher.call(op="typed_bytes", topic="robot/odom", name="Odom", encoding="jsonschema",
                           schema=ODOM_TEXT, hex=json.dumps({"x": 1.0, "n": 1}).encode().hex())
            publisher.start(op="rate", topic="robot/odom", hz=50, seconds=30)
            sub = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, "robot/odom"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
            assert sub.stdout.readline().strip() == "ok"
            mine = run(_scenario(
                v.ws_url, lambda s: {"robot/add", "robot/echo"} <= set(s),
                lambda g: g.published.get("robot/odom") and g.subscribed.get("robot/odom") and len(g.services) == 2))
            # the reference holds the graph the view saw (ids are whatever a server names its nodes)
            graph = ConnectionGraph()
            published, subscribed, provided = mine["connectionGraphUpdate"][1]
            for t, ids in published.items():
                graph.set_published_topic(t, ids)
            for t, ids in subscribed.items():
                graph.set_subscribed_topic(t, ids)
            for s, ids in provided.items():
                graph.set_advertised_service(s, ids)
            sdk.publish_connection_graph(graph)
            theirs = run(_scenario(f"ws://127.0.0.1:{sdk.port}", lambda s: len(s) == 2,
                                   lambda g: bool(g.published)))
            loop.run_until_complete(watcher.close())
            loop.close()
            assert any(i.endswith(f"[{servers.pid}]") for i in provided["robot/add"])
            assert any(i.endswith(f"[{publisher.proc.pid}]") for i in published["robot/odom"])
            assert any(i.endswith(f"[{sub.pid}]") for i in subscribed["robot/odom"])
    finally:
        publisher.proc.kill()
        publisher.close()
        if sub is not None:
            sub.stdin.close()
            sub.wait(10)
        channel.close()
        sdk.stop()
    assert mine["capabilities"] == theirs["capabilities"] == {
        "clientPublish", "parameters", "parametersSubscribe", "services", "connectionGraph"}
    for key in ("advertise", "parameterValues", "parameterValues some", "parameterValues set",
                "advertiseServices", "serviceCallResponse add", "serviceCallResponse echo"):
        assert mine[key] == theirs[key], key
    assert mine["connectionGraphUpdate"] == theirs["connectionGraphUpdate"]
