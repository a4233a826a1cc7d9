"""`python -m bench.peers` end to end on the peers that are always installed
(a0py, multiprocessing, os.pipe, POSIX mq, the shm ring baseline): every
workload reported for each, lossless peers deliver every message, a missing
package is listed as "not installed", and nothing is left behind
(processes, files in /dev/shm and /tmp)."""

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from helpers.procs import REPO

if REPO not in sys.path:
    sys.path.insert(0, REPO)  # bench/ is not installed: the harness is imported from the checkout
MODULE = ["-m", "bench.peers"]
WORKLOADS = {"pingpong", "64b", "4kib", "1mib", "fanout"}
LOSSLESS = ("mp-pipe", "mp-queue", "os-pipe", "posix-mq", "shm-ring")
TINY = ["--quick", "--repeats", "1", "--seconds", "0.05", "--round-trips", "200"]

pytestmark = pytest.mark.slow


RUN_TAG = f"t{uuid.uuid4().hex[:8]}-"  # in every name this module's bench runs create


def _bench_names():
    """Names this module's bench runs created in /dev/shm and /tmp (other runs on
    the machine, tagged otherwise, are not ours to count)."""
    names = set()
    for d in ("/dev/shm", "/tmp"):
        for f in os.listdir(d):
            if RUN_TAG in f:
                names.add(os.path.join(d, f))
    return names


def _session_processes(sid):
    """Live processes in session `sid` (the bench's children, if any are
    left), as "pid command line"."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(f"{pid} {cmdline}")
    return found


def _left_in_session(sid, grace=5.0):
    """What is still running in session `sid` `grace` seconds after its
    leader exited (a helper such as multiprocessing's resource tracker
    leaves a moment after the process it serves)."""
    deadline = time.monotonic() + grace
    while (left := _session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def _run(args, code=None, timeout=120):
    """Runs `python -m bench.peers` (or `code`, a -c program) from the
    repository root in its own session; returns (returncode, stdout,
    stderr, processes left in the session)."""
    cmd = [sys.executable, *MODULE, *args] if code is None else [sys.executable, "-c", code, *args]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "A0BENCH_RUN": RUN_TAG})
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise
    return proc.returncode, out, err, _left_in_session(proc.pid)


def test_quick_run_reports_every_workload_and_leaves_nothing_behind(tmp_path):
    before = _bench_names()
    out_json, out_md = tmp_path / "peers.json", tmp_path / "peers.md"
    peers = "a0py," + ",".join(LOSSLESS)
    rc, out, err, left = _run([*TINY, "--peers", peers, "--json", str(out_json),
                               "--markdown", str(out_md)])
    assert rc == 0, err[-4000:]
    assert left == [], f"processes left behind: {left}"
    assert _bench_names() - before == set()

    res = json.loads(out_json.read_text())
    assert set(res["workloads"]) == WORKLOADS
    assert len(res["load"]["before"]) == 3 and len(res["load"]["after"]) == 3
    # the a0py family: the transport row, plus the pub/sub rows (run, or
    # listed as not installed while a0py has no pub/sub)
    assert res["peers"][:3] == ["a0py", "a0py-pubsub", "a0py-callback"]
    assert set(res["peers"][3:]) == set(LOSSLESS)
    for wk, w in res["workloads"].items():
        cases = {(c["peer"], c["mode"]): c for c in w["cases"]}
        for peer in res["peers"]:
            c = cases[(peer, "copy")]
            if peer in ("a0py-pubsub", "a0py-callback") and c["status"] == "not installed":
                assert "a0py." in c["reason"]
                continue
            if peer == "posix-mq" and wk == "1mib":
                assert c["status"] == "n/a" and "8 KiB" in c["reason"]
                continue
            if peer == "a0py-callback" and wk == "pingpong":
                assert c["status"] == "n/a"
                continue
            assert c["status"] == "ok", (wk, peer, c["reason"])
            assert len(c["runs"]) == 1
            med = c["median"]
            if wk == "pingpong":
                assert 0 < med["p50_us"] <= med["p99_us"]
                assert c["runs"][0]["round_trips"] == 200
                continue
            run = c["runs"][0]
            assert run["sent"] > 0
            assert len(run["received"]) == w["receivers"] == (4 if wk == "fanout" else 1)
            assert 0 < med["delivered"] <= 1
            assert med["msgs_per_s"] > 0 and med["mb_per_s"] > 0
            if "missed" in run:  # a0py pub/sub (and Transport.missed): nothing lost silently
                for got, missed in zip(run["received"], run["missed"]):
                    assert got + missed >= run["sent"], (wk, peer, run)
            if peer in LOSSLESS:
                # a lossless channel delivers every message, in order
                assert run["received"] == [run["sent"]] * w["receivers"], (wk, peer)
                assert run["out_of_order"] == [0] * w["receivers"]
        if len(w["cases"]) > len(res["peers"]):  # 4 KiB and 1 MiB: zero-copy cases too
            assert cases[("a0py", "zero-copy")]["status"] == "ok"
            assert cases[("shm-ring", "zero-copy")]["status"] == "ok"
            assert cases[("mp-pipe", "zero-copy")]["status"] == "n/a"

    md = out_md.read_text()
    assert md in out  # the same report on stdout
    # --from-json reports a saved run again, measuring nothing
    rc, again, err, _ = _run(["--from-json", str(out_json)], timeout=60)
    assert rc == 0, err[-2000:]
    assert again == out
    assert "| peer | ping-pong 64 B p50 / p99 µs | 64 B msgs/s |" in md
    for label in ("a0py Transport", "multiprocessing.Pipe", "multiprocessing.Queue", "os.pipe",
                  "POSIX mq (posix_ipc)", "shm ring + semaphore"):
        assert f"\n| {label} | " in md


# The peers of the bench extra, by the module each imports.
THIRD_PARTY = {"alephzero": "a0", "iceoryx2": "iceoryx2", "zenoh": "zenoh", "pyzmq": "zmq",
               "faster-fifo": "faster_fifo"}
# What those peers cannot do: zenoh gives Python no view of a received
# message; faster-fifo unpickles every message into a new object.
NO_ZERO_COPY = {"zenoh", "zenoh-shm", "faster-fifo"}


def test_installed_third_party_peers_run_ping_pong_streams_and_fan_out(tmp_path):
    """Every peer of the bench extra that is installed here, through the
    same class for every workload: a ping-pong, one-way 4 KiB copied out
    and read in place, and a fan-out to 4 receivers."""
    families = [k for k, module in THIRD_PARTY.items() if importlib.util.find_spec(module)]
    if not families:
        pytest.skip("no peer of the bench extra is installed")
    before = _bench_names()
    out_json = tmp_path / "peers.json"
    rc, _, err, left = _run([*TINY, "--peers", ",".join(families), "--only", "pingpong,4kib,fanout",
                             "--json", str(out_json)], timeout=300)
    assert rc == 0, err[-4000:]
    assert left == [], f"processes left behind: {left}"
    assert _bench_names() - before == set()
    res = json.loads(out_json.read_text())
    assert {k.split("-")[0] for k in res["peers"]} == {f.split("-")[0] for f in families}
    for wk, w in res["workloads"].items():
        for c in w["cases"]:
            what = (wk, c["peer"], c["mode"])
            if c["mode"] == "zero-copy" and c["peer"] in NO_ZERO_COPY:
                assert c["status"] == "n/a", what
                continue
            assert c["status"] == "ok", (what, c["reason"])
            run = c["runs"][0]
            if wk == "pingpong":
                assert 0 < run["p50_us"] <= run["p99_us"], what
                continue
            assert run["sent"] > 0 and len(run["received"]) == w["receivers"], what
            assert all(0 < got <= run["sent"] for got in run["received"]), (what, run)
            assert run["out_of_order"] == [0] * w["receivers"], what
            if c["peer"] in ("faster-fifo", "pyzmq") and w["receivers"] == 1:
                # lossless by construction: a bounded queue, PUSH → PULL
                assert run["received"] == [run["sent"]], what
            if c["peer"] == "iceoryx2":
                assert len(run["empty_wakes"]) == w["receivers"], what


def _failing_pipe():
    """An os.pipe peer whose receivers raise at their 20th message."""
    from bench.peers.os_pipe import OsPipe

    class FailingPipe(OsPipe):
        key = "failing-pipe"

        def receiver(self, state, index):
            recv, close = super().receiver(state, index)
            seen = [0]

            def failing_recv():
                seen[0] += 1
                if seen[0] == 20:
                    raise ValueError("receiver gave up at message 20")
                return recv()
            return failing_recv, close
    return FailingPipe()


@pytest.mark.parametrize("workload", ["pingpong", "stream"])
def test_a_side_that_fails_is_reported_with_its_traceback_and_nothing_is_left(workload):
    import multiprocessing

    from bench.peers import run_pingpong, run_stream

    peer = _failing_pipe()
    with pytest.raises(RuntimeError, match="receiver gave up at message 20"):
        if workload == "pingpong":
            run_pingpong(peer, 200, 10, 64)
        else:
            run_stream(peer, 64, 2, 0.2, buffer=1 << 20)
    assert multiprocessing.active_children() == []


def test_the_peers_package_refuses_to_run_as_a_folder():
    """Its modules are named after the libraries they measure: run as a
    folder (which puts it on sys.path) it would shadow them."""
    proc = subprocess.run([sys.executable, os.path.join(REPO, "bench", "peers"), "--quick"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "python -m bench.peers" in proc.stderr


# Runs bench.peers with `zmq` made unimportable, as on a machine without pyzmq.
WITHOUT_ZMQ = ("import runpy, sys; sys.modules['zmq'] = None; sys.argv = ['bench.peers', *sys.argv[1:]]; "
               "runpy.run_module('bench.peers', run_name='__main__', alter_sys=True)")


def test_a_peer_that_does_not_import_is_listed_as_not_installed(tmp_path):
    out_json = tmp_path / "peers.json"
    rc, out, _, left = _run([*TINY, "--peers", "pyzmq", "--only", "64b,pingpong",
                             "--json", str(out_json)], code=WITHOUT_ZMQ, timeout=60)
    assert rc == 0 and left == []
    res = json.loads(out_json.read_text())
    for wk in ("64b", "pingpong"):
        (case,) = res["workloads"][wk]["cases"]
        assert case["peer"] == "pyzmq" and case["status"] == "not installed"
        assert "pyzmq not installed" in case["reason"]
    assert "| pyzmq ipc | not installed | not installed |" in out
    assert "Not installed:\n- pyzmq ipc: pyzmq not installed" in out


def test_unknown_peer_or_workload_is_a_clear_error():
    rc, _, err, _ = _run(["--peers", "nosuch"], timeout=60)
    assert rc != 0 and "unknown peer 'nosuch'" in err and "shm-ring" in err
    rc, _, err, _ = _run(["--only", "2kib"], timeout=60)
    assert rc != 0 and "unknown workload '2kib'" in err
