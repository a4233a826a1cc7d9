"""examples/fleet_bags.py: three robots' ROS 2 bags (two rosbag2 directories
written by rosbags, one MCAP file by mcap-ros2-support) read by the a0 source
with decode=true and grouped by robot and minute in Spark, equal to the same
summary computed in this process from the official mcap reader's messages."""

import datetime
import importlib.util
import os

from helpers.procs import REPO


def _example():
    spec = importlib.util.spec_from_file_location("fleet_bags", os.path.join(REPO, "examples", "fleet_bags.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fleet_bags_grouped_by_robot_and_minute(spark, tmp_path):
    fleet = _example()
    d = str(tmp_path / "fleet")
    os.makedirs(d)
    total = fleet.write_fleet(d, minutes=2.5, hz=2)
    assert total == 3 * 300
    rows = fleet.summarize_with_spark(d, spark=spark)
    expected = fleet.summarize_with_decoders(d)
    got = {(r.robot, r.minute.replace(tzinfo=None)): (r.n, r.mean_az, r.max_yaw_rate) for r in rows}
    want = {(robot, minute.astimezone(datetime.UTC).replace(tzinfo=None)): v for (robot, minute), v in expected.items()}
    assert sum(v[0] for v in got.values()) == total
    assert {k[0] for k in got} == {"robot0", "robot1", "robot2"}
    assert len(got) == 9  # 2.5 minutes from :20 past: three minutes touched per robot
    assert got == want
