"""examples/decode_every_channel.py runs as a user runs it: raw, JSON and
ROS 2 topics recorded, then the MCAP documentation's decode loop with no
topic filter decodes every message of every channel, headers channels too."""

import os
import re
import subprocess
import sys

from helpers.procs import REPO


def test_the_decode_loop_example_decodes_every_channel_whole():
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               A0PY_ROOT=f"shm:a0pyt-decode-{os.getpid()}")
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "decode_every_channel.py")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    counts = dict(re.findall(r"^(\S+): (\d+) messages decoded$", r.stdout, re.M))
    assert counts == {t: "5" for t in ("demo/raw", "demo/json", "demo/ros",
                                       "/a0py/headers/demo/json", "/a0py/headers/demo/ros")}
    assert re.search(r"^/a0py/headers/demo/ros\s+cdr\s+PacketHeaders\(", r.stdout, re.M)
    assert re.search(r"^demo/ros\s+cdr\s+String\(data=hello 0\)", r.stdout, re.M)
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"a0pyt-decode-{os.getpid()}")]
