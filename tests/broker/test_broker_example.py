"""examples/room.py runs a multi-process room by itself and finishes."""

import os
import subprocess
import sys

import pytest
from helpers.procs import REPO


@pytest.mark.slow
def test_room_example_raises_and_clears_the_kitchen_alert():
    out = subprocess.run([sys.executable, os.path.join(REPO, "examples", "room.py"), "--seconds", "2"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    lines = out.splitlines()
    alerts = [line for line in lines if "alerts now:" in line]
    assert alerts[0].endswith("alerts now: none")                 # the first result: empty
    assert any("alerts now: kitchen" in line for line in alerts)  # the rule's join fired
    assert not any("hall" in line for line in alerts)             # the hall never exceeds
    assert alerts[-1].endswith("alerts now: none")                # sensors gone: alert gone
    assert any(line.strip().startswith('display: subscription("rule", 1,') for line in lines)
    assert lines[-1] == "done"
