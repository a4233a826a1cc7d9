"""examples/read_into.py runs as a user runs it: a writer process and a
draining reader, every seq either read or reported as a gap."""

import os
import re
import subprocess
import sys

from helpers.procs import REPO


def _run(*args):
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "read_into.py"), *args],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"read (\d+) frames in \d+ read_into calls, (\d+) reported missing; "
                  r"seqs (\d+)\.\.(\d+): (\d+) of (\d+) accounted for", r.stdout)
    assert m, r.stdout
    got, missed, lo, hi, total, want = map(int, m.groups())
    assert got + missed == total == want == hi - lo + 1
    return got, missed, r.stdout


def test_every_frame_is_read_or_reported_missing():
    got, _, _ = _run("--frames", "30000")
    assert got > 0


def test_a_tiny_arena_reports_its_gaps_by_seq():
    _, missed, out = _run("--frames", "50000", "--arena-kib", "16")
    gaps = [tuple(map(int, g)) for g in re.findall(r"gap: seqs (\d+)\.\.(\d+)", out)]
    assert sum(b - a + 1 for a, b in gaps) == missed > 0
