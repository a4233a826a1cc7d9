"""Where the broker's arenas live, as a user meets them: under the topics' root
(``A0PY_ROOT``), listed by ``a0py ls`` as broker arenas, removed by the broker that
stops and by ``a0py rm``; and a client command of a broker that does not run says so at
once and creates nothing. Brokers and commands run as real processes."""

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from helpers.procs import REPO

from a0py.broker import Broker, BrokerClient, broker_pid
from a0py.proto.topic import Root

WAIT = 20.0
# Longer than any test waits for a command: a command that waited for the broker
# instead of failing at once would be killed by communicate(timeout=WAIT) and fail.
NEVER = "1000"

pytestmark = pytest.mark.slow


@pytest.fixture(params=["shm", "dir"])
def root(request, tmp_path):
    if request.param == "shm":
        prefix = f"brt{os.getpid()}x{uuid.uuid4().hex[:6]}"
        yield f"shm:{prefix}"
        for n in os.listdir("/dev/shm"):
            if n.startswith(prefix + "."):
                os.unlink(os.path.join("/dev/shm", n))
    else:
        where = tmp_path / "root"
        where.mkdir()
        yield str(where)


@pytest.fixture
def name():
    return f"b{uuid.uuid4().hex[:8]}"


def left(root):
    """What exists under `root`: shm objects of its prefix, or files and directories."""
    r = Root.parse(root)
    if r.kind == "shm":
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(r.location + "."))
    return sorted(os.path.relpath(os.path.join(d, f), r.location)
                  for d, dirs, files in os.walk(r.location) for f in dirs + files)


def env(root):
    return dict(os.environ, A0PY_ROOT=root,
                PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))


def a0py(root, *args):
    return subprocess.Popen([sys.executable, "-m", "a0py", *args], env=env(root),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run(root, *args):
    p = a0py(root, *args)
    out, err = p.communicate(timeout=WAIT)
    return p.returncode, out, err


def start_broker(root, name):
    proc = a0py(root, "broker", name, "-q")
    deadline = time.monotonic() + WAIT
    while broker_pid(name, root) != proc.pid:
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the broker did not start"
        time.sleep(0.02)
    return proc


def stop(proc, sig=signal.SIGTERM):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.wait(WAIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return proc.returncode


def wait_facts(root, name, want):
    deadline = time.monotonic() + WAIT
    while True:
        rc, out, err = run(root, "facts", "-b", name)
        if rc == 0 and out.split() == want:
            return
        assert time.monotonic() < deadline, (rc, out, err)
        time.sleep(0.05)


def test_broker_arenas_live_under_the_root_and_ls_lists_them_as_broker_arenas(root, name):
    broker = start_broker(root, name)
    claim = None
    try:
        claim = a0py(root, "claim", "x(1)", "--for", NEVER, "--as", "me", "-b", name)
        assert claim.stderr.readline().startswith("claimed 1 fact(s) as client 'me'")
        rc, out, err = run(root, "ls")
        assert rc == 0, err
        rows = [line.split()[:3] for line in out.splitlines()[1:]]
        assert [name, "broker", "8"] in rows
        assert [f"{name}/me", "broker_client", "4"] in rows
        assert len(rows) == 2
        rc, out, err = run(root, "info", name)
        assert rc == 0, err
        assert f"pid {broker.pid} (the broker)" in out
        # A0PY_ROOT is where they are, not the default prefix, old or new names.
        assert not os.path.exists(f"/dev/shm/a0py.{name}.broker")
        assert not os.path.exists(f"/dev/shm/a0py.broker.{name}")
        assert len(left(root)) >= 2
        assert stop(claim) == 0
        assert stop(broker) == 0
    finally:
        for p in (claim, broker):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert left(root) == []      # the client removed its arena, the broker its own


def test_a_broker_run_in_a_thread_removes_its_request_arena_when_it_stops(root, name):
    with Broker(name, root=root):
        assert broker_pid(name, root) == os.getpid()
        assert left(root) != []
    assert left(root) == []
    assert broker_pid(name, root) is None


def test_a_broker_stopped_with_a_client_connected_keeps_its_arena_for_the_next_one(root, name):
    broker = start_broker(root, name)
    client = BrokerClient(name, root=root, client="stays")
    try:
        client.claim("kept(1)")
        client.ping()
        assert stop(broker) == 0
        assert broker_pid(name, root) is None
        assert left(root) != []   # the client still writes there; the next broker finds it
        broker = start_broker(root, name)
        wait_facts(root, name, ["kept(1)"])   # the client re-asserted its claim
    finally:
        client.close()
        stop(broker)
    assert left(root) == []


@pytest.mark.parametrize("command", [
    ["facts"],
    ["retract", "x(_)"],
    ["subscribe", "x($a)"],
    ["claim", "x(1)", "--for", NEVER],
])
def test_a_client_command_of_a_broker_that_does_not_run_fails_at_once_and_creates_nothing(
        root, command):
    rc, out, err = run(root, *command, "--broker", "typo", "--timeout", NEVER)
    assert rc == 1 and out == ""
    assert err.startswith(f"a0py: error: no broker 'typo' is running under {Root.parse(root).spec()}: "
                          "start it with `a0py broker typo`")
    assert len(err.splitlines()) == 1
    assert left(root) == []
    assert not os.path.exists("/dev/shm/a0py.typo.broker")


def test_the_arena_a_killed_broker_left_is_no_running_broker(root, name):
    broker = start_broker(root, name)
    stop(broker, signal.SIGKILL)
    stale = left(root)
    assert stale != []
    rc, _, err = run(root, "facts", "--broker", name, "--timeout", NEVER)
    assert rc == 1 and err.startswith(f"a0py: error: no broker {name!r} is running")
    assert left(root) == stale        # looked at, nothing added


def test_rm_all_removes_what_killed_brokers_and_clients_left_and_exits_0(root, name):
    broker = start_broker(root, name)
    claim = a0py(root, "claim", "x(1)", "--for", NEVER, "--as", "gone", "-b", name)
    try:
        assert claim.stderr.readline().startswith("claimed")
        assert run(root, "pub", "chatter", "hello")[0] == 0
    finally:
        stop(broker, signal.SIGKILL)   # first: a live broker removes a dead client's arena
        stop(claim, signal.SIGKILL)
    assert len(left(root)) >= 3
    rc, out, err = run(root, "rm", "--all", "-v")
    assert rc == 0, err
    assert f"{name} (broker)" in out.splitlines()
    assert left(root) == []
    rc, out, err = run(root, "ls")
    assert rc == 0 and out == ""


def test_claim_wait_holds_the_claims_until_the_broker_starts(root, name):
    claim = a0py(root, "claim", "w(1)", "--wait", "--for", NEVER, "-b", name)
    broker = None
    try:
        line = claim.stderr.readline()
        assert line.startswith(f"waiting for broker {name!r} under {Root.parse(root).spec()}"), line
        broker = start_broker(root, name)
        wait_facts(root, name, ["w(1)"])
        assert stop(claim) == 0
        assert stop(broker) == 0
    finally:
        for p in (claim, broker):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert left(root) == []


def test_a_broker_whose_clients_all_closed_removes_its_request_arena_when_it_stops(
        root, name):
    with Broker(name, root=root):
        clients = [BrokerClient(name, root=root) for _ in range(3)]
        for i, c in enumerate(clients):
            c.claim(f"n({i})")
            c.ping()
        for c in clients:
            c.close()
    assert left(root) == []
