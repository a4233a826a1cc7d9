"""bench/soak.py, briefly: every part of a0py running together (pub/sub, a
camera, RPC, a recorder, the view with two clients, two roots bridged) for a
few seconds; each consumer accounts for every packet sent (received, or
counted as lost), the RPC calls are answered, and the report has its lines.
The 30-minute soak itself is a benchmark (docs/performance.md), not a test."""

import os
import subprocess
import sys

import pytest
from helpers.procs import REPO

pytestmark = pytest.mark.slow
sys.path.insert(0, os.path.join(REPO, "bench"))
import soak  # noqa: E402


def test_a_short_soak_accounts_for_every_packet(tmp_path):
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, os.path.join(REPO, "bench", "soak.py"), "--minutes", "0.2",
                           "--json", str(out)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    import json

    result = json.loads(out.read_text())["result"]
    assert result["failed"] == {}
    accounting = result["accounting"]
    assert {row["consumer"] for row in accounting} == {"sub-a", "sub-b"}
    assert len(accounting) == 2 * (soak.TOPICS + 1)
    for row in accounting:
        assert row["sent"] > 0 and row["received"] > 0, row
        assert row["uncounted"] == 0, row  # received + counted lost == sent
    rpc = result["rpc"]["client"]
    assert rpc["calls"] > 0 and rpc["ok"] + rpc["errors"] == rpc["calls"]
    assert all(n > 0 for n in result["view_clients"].values())
    assert {line["process"] for line in result["lines"]} >= {"publisher", "record", "view", "bridge-a"}


def test_slope_is_the_least_squares_slope():
    assert soak.slope([(0, 1.0), (1, 3.0), (2, 5.0)]) == pytest.approx(2.0)
    assert soak.slope([(0, 7.0)]) == 0.0
