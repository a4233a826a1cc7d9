"""The cfg examples run as a user would run them: a watcher started first, then two
runs of cfg_set.py (defaults, then a merge patch). The watcher skips to the newest
version when several come at once, so the test lets it see the first before the next."""

import os
import subprocess
import sys

import pytest
from helpers.procs import EXAMPLES, example_env

from a0py.proto import topic as tp

pytestmark = pytest.mark.slow


def test_watcher_sees_the_defaults_then_the_patch():
    root, env = example_env()
    watch = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "cfg_watch.py"), "--count", "2"],
                             env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watch.stdout.readline().startswith("watching 'demo/robot'")
        first = subprocess.run([sys.executable, os.path.join(EXAMPLES, "cfg_set.py")],
                               env=env, capture_output=True, text=True, timeout=60)
        assert first.returncode == 0, first.stderr
        assert "wrote the defaults" in first.stdout
        first_version = watch.stdout.readline()
        assert first_version.startswith("version seq=1") and first_version.endswith("(max_speed=1.0)\n")
        second = subprocess.run([sys.executable, os.path.join(EXAMPLES, "cfg_set.py"), "motor.max_speed=2.5"],
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 0, second.stderr
        assert "wrote the defaults" not in second.stdout
        assert 'now: {"motor": {"enabled": true, "max_speed": 2.5}, "name": "robot"}' in second.stdout
        out, _ = watch.communicate(timeout=60)
        assert out.startswith("version seq=2") and out.rstrip().endswith("(max_speed=2.5)")
        assert watch.returncode == 0
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
        tp.unlink_topic(tp.Topic("demo/robot", root=root))
