"""The RPC examples run as a user would run them: the client started first (its
requests wait for the server), then the server; both as separate programs."""

import subprocess

import pytest
from helpers.procs import example_env, example_running, run_example

from a0py.proto import topic as tp

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_client_started_before_the_server_gets_its_answers(mode):
    with example_running("rpc_client.py", "--mode", mode, topic="demo/calc",
                         stderr=subprocess.PIPE) as (client, env):
        count = "4" if mode == "blocking" else "3"
        server = run_example(env, "rpc_server.py", "--count", count)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        assert server.returncode == 0, server.stderr
        assert "add(1, 2, 3) = 6" in out and "mul(4, 5) = 20" in out
        countdown = [line.split(": ")[1] for line in out.splitlines() if line.startswith("countdown:")]
        assert countdown == ["3...", "2...", "1...", "liftoff"]
        if mode == "blocking":
            assert "pow failed: the handler raised ValueError: unknown op 'pow'" in out
        assert f"served {count} requests" in server.stdout


def test_client_without_a_server_gives_up_naming_the_topic():
    root, env = example_env()
    try:
        r = run_example(env, "rpc_client.py", "--wait", "0.3")
        assert r.returncode != 0
        assert "rpc topic 'demo/calc': no server alive for 0.3 s" in r.stderr
    finally:
        tp.unlink_topic(tp.Topic("demo/calc", root=root))
