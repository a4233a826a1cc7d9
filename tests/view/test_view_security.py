"""What a client may change, fuzzed: client publish, setParameters and service
call requests, well-formed or not, from a client of a view started without
the flags (and of one that allows publishing one topic, for messages that do
not match its schema). Each request gets an error status, the connection
stays up, and nothing is written anywhere: no topic is made or written, the
configuration is unchanged, the RPC server is never called."""

import asyncio
import json
import os
import struct
import uuid

import pytest
from helpers.view import Client, RpcServerProcess, ViewProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import a0py
from a0py.proto import topic as tp

CFG = {"speed": 1.5, "pid": {"kp": 0.5}}
SCHEMA = {"type": "object", "properties": {"v": {"type": "number"}}, "required": ["v"],
          "additionalProperties": False}


@pytest.fixture(scope="module")
def world():
    """One root for the module: a configuration, a counting RPC server, a view
    without flags and one that allows publishing to ``cmd/vel`` only; and one
    event loop with a client of each, the second with ``cmd/vel`` advertised."""
    root = f"shm:a0pyt-fz-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = {"A0PY_ROOT": root, "A0PY_ARENA_SIZE": "256k"}
    a0py.Cfg(a0py.Topic("robot", root=root)).write(CFG)
    server = RpcServerProcess("robot/count", env=env)
    bare, publishing = ViewProcess(env=env), ViewProcess("--allow-publish", "cmd/vel", env=env)
    loop = asyncio.new_event_loop()

    async def open_clients():
        off, on = await Client.open(bare.ws_url), await Client.open(publishing.ws_url)
        await off.until(lambda: "robot/count" in off.services, "the service")
        await on.send("advertise", channels=[{"id": 1, "topic": "cmd/vel", "encoding": "json", "schemaName": "Vel",
                                              "schemaEncoding": "jsonschema", "schema": json.dumps(SCHEMA)}])
        await on.send("getParameters", parameterNames=[], id="sync")  # answered after the advertise
        await on.reply("parameterValues", id="sync")
        return off, on

    off, on = loop.run_until_complete(open_clients())
    before = tp.list_topics(root)
    yield {"root": root, "loop": loop, "off": off, "on": on, "service": off.services["robot/count"]["id"]}
    try:
        # nothing was written: no new topic, nothing published, the configuration as it was
        assert tp.list_topics(root) == before
        assert a0py.Cfg(a0py.Topic("robot", root=root)).read().json() == CFG
        for name, protocols in before.items():
            if "pubsub" in protocols:
                with a0py.SubscriberSync(a0py.Topic(name, root=root), init=a0py.INIT_OLDEST) as s:
                    assert s.read() is None, f"{name} was written"
    finally:
        loop.run_until_complete(off.close())
        loop.run_until_complete(on.close())
        loop.close()
        bare.close()
        publishing.close()
        server.close()
        for name in tp.list_topics(root):
            tp.unlink_topic(tp.Topic(name, root=root))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
names = st.sampled_from(["robot.speed", "robot.pid.kp", "robot", "robot.new", "x", "", "robot."]) | st.text(max_size=12)
parameters = st.lists(st.fixed_dictionaries({"name": names}, optional={
    "value": json_values, "type": st.sampled_from(["byte_array", "float64", "float64_array", "int", None])}),
    min_size=1, max_size=4)
set_parameters = st.fixed_dictionaries({"op": st.just("setParameters"), "parameters": parameters},
                                       optional={"id": st.text(max_size=4)})
topics = st.sampled_from(["cmd/vel", "robot/count", "robot/count/calls", "cmd/other", "/cmd/vel", "a b", ""])
channels = st.lists(st.fixed_dictionaries({"id": st.integers(0, 2**32 - 1), "topic": topics}, optional={
    "encoding": st.sampled_from(["json", "protobuf", "a0py/bytes", "cdr", "x"]),
    "schemaName": st.text(max_size=6), "schema": st.text(max_size=20),
    "schemaEncoding": st.sampled_from(["jsonschema", "protobuf", "", "ros2msg"])}), max_size=3)
advertise = st.fixed_dictionaries({"op": st.just("advertise"), "channels": channels})
text_requests = (set_parameters | advertise).map(json.dumps) | st.text(max_size=40)


def _client_message(channel_id, payload):
    return struct.pack("<BI", 1, channel_id) + payload


def _service_call(service_id, call_id, encoding, payload):
    return struct.pack("<BIII", 2, service_id, call_id, len(encoding)) + encoding + payload


binary_requests = st.one_of(
    st.builds(_client_message, st.integers(0, 2**32 - 1), st.binary(max_size=40)),
    st.builds(_service_call, st.integers(0, 3), st.integers(0, 2**32 - 1),
              st.sampled_from([b"json", b"a0py/bytes", b"\xff", b""]), st.binary(max_size=40)),
    st.binary(max_size=20).map(lambda b: b"\x02" + b))


async def _one_error(c, message):
    await c.ws.send(message)
    status = await c.error()
    assert status["level"] == 2, (message, status)
    return status


_FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(message=st.one_of(text_requests, binary_requests))
def test_without_the_flags_every_request_is_refused_and_the_connection_stays(world, message):
    c = world["off"]
    world["loop"].run_until_complete(_one_error(c, message))
    # the same connection still answers
    world["loop"].run_until_complete(c.send("getParameters", parameterNames=["robot.speed"], id="alive"))
    reply = world["loop"].run_until_complete(c.reply("parameterValues", id="alive"))
    assert reply["parameters"] == [{"name": "robot.speed", "type": "float64", "value": 1.5}]


@_FUZZ
@given(payload=st.one_of(st.binary(max_size=60), json_values.map(lambda v: json.dumps(v).encode())))
def test_messages_that_do_not_match_the_channels_schema_are_not_published(world, payload):
    try:
        value = json.loads(payload)
    except ValueError:
        value = None
    if isinstance(value, dict) and set(value) == {"v"} and isinstance(value["v"], (int, float)) \
            and not isinstance(value["v"], bool):
        return  # a message that matches: it would be published (the other tests show that)
    status = world["loop"].run_until_complete(_one_error(world["on"], _client_message(1, payload)))
    assert "cmd/vel was not published" in status["message"]


def test_a_topic_outside_the_allowed_glob_is_refused(world):
    async def main():
        c = world["on"]
        for topic in ("cmd/velocity", "cmd/vel/x", "robot/count/calls"):
            status = await _one_error(c, json.dumps({"op": "advertise", "channels": [
                {"id": 9, "topic": topic, "encoding": "a0py/bytes", "schemaName": ""}]}))
            assert "not allowed" in status["message"] and "cmd/vel" in status["message"]
            await c.ws.send(_client_message(9, b"x"))
            assert "not advertised" in (await c.error())["message"]

    world["loop"].run_until_complete(main())
