"""The cfg examples run as a user would run them: a watcher started first, then two
runs of cfg_set.py (defaults, then a merge patch). The watcher skips to the newest
version when several come at once, so the test lets it see the first before the next."""

import pytest
from helpers.procs import example_running, run_example

pytestmark = pytest.mark.slow


def test_watcher_sees_the_defaults_then_the_patch():
    with example_running("cfg_watch.py", "--count", "2", topic="demo/robot") as (watch, env):
        assert watch.stdout.readline().startswith("watching 'demo/robot'")
        first = run_example(env, "cfg_set.py")
        assert first.returncode == 0, first.stderr
        assert "wrote the defaults" in first.stdout
        first_version = watch.stdout.readline()
        assert first_version.startswith("version seq=1") and first_version.endswith("(max_speed=1.0)\n")
        second = run_example(env, "cfg_set.py", "motor.max_speed=2.5")
        assert second.returncode == 0, second.stderr
        assert "wrote the defaults" not in second.stdout
        assert 'now: {"motor": {"enabled": true, "max_speed": 2.5}, "name": "robot"}' in second.stdout
        out, _ = watch.communicate(timeout=60)
        assert out.startswith("version seq=2") and out.rstrip().endswith("(max_speed=2.5)")
        assert watch.returncode == 0
