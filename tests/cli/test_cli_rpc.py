"""``a0py rpc`` driven as a user drives it, against an a0py.RpcServer in
another process."""

import json
import signal

from helpers.cli import Running, a0, assert_fails_cleanly, python

from a0py.proto import topic as tp

# An RPC server in another process (argv[1]: topic): upper-cases text, adds
# JSON numbers, raises on "boom", never answers "silent"; says "ready".
SERVER = """
import json, sys, a0py

def on_request(req):
    pkt = req.pkt
    payload = bytes(pkt.payload)
    if payload == b"boom":
        raise RuntimeError("boom from the handler")
    if payload == b"silent":
        return
    if pkt.headers.get("content-type") == "application/json":
        numbers = json.loads(payload)
        req.reply_json({"sum": numbers["a"] + numbers["b"], "unit": pkt.headers.get("unit")})
        return
    req.reply(payload.upper())

server = a0py.RpcServer(sys.argv[1], on_request)
print("ready", flush=True)
sys.stdin.read()
"""


def serving(topic):
    server = python(SERVER, topic)
    assert server.readline() == "ready\n"
    return server


def test_rpc_prints_the_reply_of_a_server_in_another_process(root):
    with serving("svc"):
        result = a0("rpc", "svc", "hello there")
    assert result.returncode == 0, result.err
    assert result.out == "HELLO THERE\n"


def test_rpc_json_request_with_headers_and_decoded_reply(root):
    with serving("svc"):
        result = a0("rpc", "svc", '{"a": 2, "b": 40}', "--json", "-H", "unit=mm")
    assert result.returncode == 0, result.err
    assert json.loads(result.out) == {"sum": 42, "unit": "mm"}


def test_rpc_verbose_shows_the_replys_headers(root):
    with serving("svc"):
        result = a0("rpc", "svc", "x", "-v")
    assert result.returncode == 0, result.err
    lines = result.out.splitlines()
    assert "  a0_rpc_status: ok" in lines and "  a0_rpc_type: reply" in lines
    assert lines[-2:] == ["payload: X", "---"]


def test_rpc_from_standard_input(root):
    with serving("svc"):
        result = a0("rpc", "svc", "-", input=b"from stdin")
    assert result.out == "FROM STDIN\n", result.err


def test_rpc_sent_before_the_server_starts_is_served_when_it_starts(root):
    with Running.a0py("rpc", "late", "early request", "--wait-for-server", "60") as call:
        line = call.stderr_line()
        assert "topic 'late' does not exist yet" in line and "waiting for its server" in line
        assert not tp.Topic("late").exists("rpc")  # the command does not create it
        with serving("late"):
            status, out, err = call.finish()
    assert status == 0, err
    assert out == "EARLY REQUEST\n"


def test_rpc_handler_error_exits_1_with_the_servers_explanation(root):
    with serving("svc"):
        result = a0("rpc", "svc", "boom")
    assert_fails_cleanly(result, 1, "topic 'svc'", "boom from the handler")


def test_rpc_with_no_server_names_the_topic_and_says_what_to_do(root):
    assert_fails_cleanly(a0("rpc", "nosvc", "x", "--wait-for-server", "0.3"), 1,
                         "topic 'nosvc'", "no RPC server started within 0.3 s", "a0py ls")
    assert not tp.Topic("nosvc").exists("rpc")
    with serving("gone") as server:
        server.proc.send_signal(signal.SIGKILL)
        server.wait()
    result = a0("rpc", "gone", "x", "--wait-for-server", "0.5")
    assert_fails_cleanly(result, 1, "topic 'gone'", "is its server running?", "a0py info gone")


def test_rpc_timeout_gives_up_naming_the_topic(root):
    with serving("svc"):
        result = a0("rpc", "svc", "silent", "--timeout", "0.5")
    assert_fails_cleanly(result, 1, "topic 'svc'", "0.5")


def test_rpc_bad_arguments_are_usage_errors(root):
    assert_fails_cleanly(a0("rpc", "svc", "{x", "--json"), 2, "'{x' is not JSON")
    assert_fails_cleanly(a0("rpc", "svc", "x", "-H", "a0_rpc_type=reply"), 2, "'a0_rpc_type'")
    assert_fails_cleanly(a0("rpc", "svc", "x", "--json", "--hex"), 2, "choose one of")
    assert tp.list_topics(root) == {}
