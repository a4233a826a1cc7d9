"""`make demo` end to end: examples/demo.py runs every stage across processes
and reports what each one did (pub/sub delivered everything, the early RPC was
served, the cfg watcher saw the merge-patches, the recording was summarised by
Spark with a chart, the broker room raised and cleared its alert)."""

import os
import re
import socket
import subprocess
import sys

import pytest
from helpers.procs import REPO

pytestmark = pytest.mark.slow


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_demo_runs_every_stage(tmp_path):
    root = f"shm:a0py-demo-test-{os.getpid()}"
    # This checkout's a0py, whatever the interpreter has installed.
    env = {**os.environ, "A0PY_ROOT": root,
           "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "demo.py"), "--seconds", "1.5",
         "--port", str(_free_port()), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    out = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    sent = re.search(r"callback subscriber: (\d+) of (\d+) received, (\d+) missed", out)
    assert sent and int(sent[1]) + int(sent[3]) == int(sent[2]) and int(sent[2]) > 100
    assert "late 'latest only' reader: seq" in out
    assert "early request answered: {'result': 6}" in out
    assert '[   cfg] final: {"gains": {"kp": 2.5}, "max_speed": 0.5}' in out
    assert re.search(r"live view of the demo's topics: http://127\.0\.0\.1:\d+/", out)
    assert re.search(r"^demo/imu\s+\d+", out, re.M)               # the Spark summary's row
    assert (tmp_path / "demo-rates.png").stat().st_size > 1000
    assert "display: alerts now: kitchen" in out and out.rstrip().endswith("done")
    prefix = root.split(":", 1)[1]
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(prefix)]


def test_the_rate_chart_leaves_out_each_topics_last_partial_second():
    sys.path.insert(0, os.path.join(REPO, "examples"))
    try:
        from spark_summary import whole_seconds
    finally:
        sys.path.remove(os.path.join(REPO, "examples"))
    # 100 frames/s for two whole seconds, then 12 frames before the recording ended
    assert whole_seconds([(0, 100), (1, 100), (2, 12)]) == [(0, 100), (1, 100)]
    assert whole_seconds([(0, 40)]) == [(0, 40)]  # a single second is all there is
    assert whole_seconds([]) == []
