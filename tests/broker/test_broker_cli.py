"""The broker's commands driven as a user would: subprocesses, checking their output."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.procs import REPO

import a0py
from a0py.broker import wire

WAIT = 20.0

pytestmark = pytest.mark.slow


def env(name):
    return dict(os.environ, A0PY_BROKER=name,
                PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def cli(name, *args, **kw):
    return subprocess.Popen([sys.executable, "-m", "a0py.cli.broker", *args], env=env(name),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def run(name, *args):
    p = cli(name, *args)
    out, err = p.communicate(timeout=WAIT)
    return p.returncode, out, err


def wait_line(proc, prefix=""):
    line = proc.stdout.readline()
    assert line, f"no output; stderr: {proc.stderr.read() if proc.poll() is not None else ''}"
    assert line.startswith(prefix), line
    return line.rstrip("\n")


def stop(*procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_claim_subscribe_facts_retract_as_a_user_would(name):
    broker = cli(name, "broker", "-q")
    a0py.Deadman(a0py.Arena.shm(wire.request_arena_name(name), wire.REQUEST_ARENA_SIZE)).wait_taken(WAIT)
    claim = sub = None
    try:
        sub = cli(name, "subscribe", 'temp($room, $t)', 'setpoint($room, $s)', "-n", "3")
        assert json.loads(wait_line(sub)) == []
        claim = cli(name, "claim", 'temp("kitchen", 21.5)', 'setpoint("kitchen", 20)', "--for", "60")
        assert json.loads(wait_line(sub)) == [{"room": "kitchen", "s": 20, "t": 21.5}]

        rc, out, _ = run(name, "facts", "--owners")
        lines = out.splitlines()
        assert rc == 0
        assert any(line.startswith('temp("kitchen", 21.5)\t') for line in lines)
        assert any(line.startswith('subscription(') and "setpoint($room, $s)" in line for line in lines)
        rc, out, _ = run(name, "facts", "setpoint(_, $)", "--json")
        assert (rc, out) == (0, '"setpoint(\\"kitchen\\", 20)"\n')

        rc, out, _ = run(name, "retract", "setpoint(_, _)")
        assert rc == 0 and out.startswith('setpoint("kitchen", 20)\t')
        assert json.loads(wait_line(sub)) == []
        assert sub.wait(WAIT) == 0                     # -n 3: exits after the third line

        rc, out, _ = run(name, "retract", "temp(_, _)")
        assert rc == 0 and out.startswith('temp("kitchen", 21.5)')
        assert claim.wait(WAIT) == 0                   # holds nothing more: exits
        assert "retracted by an administrator" in claim.stderr.read()
        deadline = time.monotonic() + WAIT
        while run(name, "facts", "temp(_, _)")[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run(name, "facts", "temp(_, _)")[1] == ""
    finally:
        stop(*(p for p in (claim, sub, broker) if p is not None))
    assert broker.returncode == 0


def test_claim_for_seconds_retracts_at_the_end(name):
    broker = cli(name, "broker", "-q")
    a0py.Deadman(a0py.Arena.shm(wire.request_arena_name(name), wire.REQUEST_ARENA_SIZE)).wait_taken(WAIT)
    try:
        sub = cli(name, "subscribe", "--text", "battery($level)", "-n", "3")
        assert wait_line(sub) == "(empty)"
        rc, _, err = run(name, "claim", 'battery("low")', "--for", "0.2")
        assert rc == 0 and "holding for 0.2 s" in err
        assert wait_line(sub) == 'level="low"'
        assert wait_line(sub) == "(empty)"
        assert sub.wait(WAIT) == 0
    finally:
        stop(broker)


def test_bad_text_and_no_broker_are_clear_errors(name):
    rc, _, err = run(name, "facts", "temp(")
    assert rc == 2 and "expected a value or pattern" in err and "^" in err
    rc, _, err = run(name, "facts", "--timeout", "0.3")
    assert rc == 1 and err.startswith(f"a0py: error: no broker {name!r} is running")


def test_broker_spin_out_of_range_is_refused_before_serving(name):
    rc, _, err = run(name, "broker", "--spin", "2")
    assert rc == 2 and "'--spin': 2.0 is not in the range 0<=x<=1" in err
    assert a0py.broker.broker_pid(name) is None
