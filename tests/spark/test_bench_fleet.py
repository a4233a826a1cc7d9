"""bench/spark.py fleet at a tiny size: a directory mixing a rosbag2 bag
(rosbags) and an MCAP file (the official writer), each chunk holding Imu and
CompressedImage messages side by side, read on the suite's session: the Imu
messages decoded (``topics`` choosing the one type) and grouped by robot and
minute, the images counted from their raw CDR bytes by both readers; equal to
what mcap-ros2-support's reader and the official ``mcap`` reader give. Also the
generator's reuse: a fleet of the same sizes is not written again, and nothing
it did not write is removed."""

import os
import sys

import pytest
from helpers.procs import REPO

pytest.importorskip("rosbags")
pytest.importorskip("mcap_ros2")


def _fleet():
    if REPO not in sys.path:
        sys.path.insert(0, REPO)  # bench/ is not installed
    from bench import fleet

    return fleet


def test_fleet_summary_in_spark_equals_the_ros2_readers(spark, tmp_path):
    from a0py.spark import register

    register(spark)  # the Python reader as a0.python beside the session's JVM one
    fleet = _fleet()
    d = str(tmp_path / "fleet")
    manifest, reused = fleet.generate(d, robots=2, mb=1, jobs=1)
    assert not reused
    assert sorted(os.listdir(d)) == ["fleet.json", "robot0", "robot1.mcap"]
    assert os.path.exists(os.path.join(d, "robot0", "metadata.yaml"))  # a rosbag2 bag
    imu = fleet.imu_summary(spark, d).collect()
    images = {fmt: fleet.image_counts(spark, d, fmt).collect() for fmt in ("a0", "a0.python")}
    assert {r["robot"] for r in imu} == {"robot0", "robot1"}
    assert sum(r["n"] for r in imu) == sum(e["imu"] for e in manifest["recordings"])
    for robot in (0, 1):
        want_imu, want_images = fleet.summary_without_spark(d, robot)
        assert len(want_imu) >= 2  # the stamps cross a minute: more than one group per robot
        for fmt, rows in images.items():
            assert fleet.compare(imu, rows, robot, want_imu, want_images) == [], fmt


def test_fleet_is_reused_and_nothing_else_is_removed(tmp_path):
    fleet = _fleet()
    d = str(tmp_path / "fleet")
    first, reused = fleet.generate(d, robots=2, mb=1, jobs=1)
    assert not reused
    again, reused = fleet.generate(d, robots=2, mb=1, jobs=1)
    assert reused and again == first
    with pytest.raises(RuntimeError, match="holds no fleet of 3 x 1 MB"):
        fleet.generate(d, robots=3, mb=1, jobs=1)  # other sizes: refused, nothing written or removed
    assert sorted(os.listdir(d)) == ["fleet.json", "robot0", "robot1.mcap"]
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("the user's")
    fleet.remove(d)
    assert os.listdir(d) == ["notes.txt"]
