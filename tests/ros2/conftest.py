"""The ROS 2 tests' settings: real rclpy from the Kilted wheels (the ``ros2`` extra;
the folder is skipped without it), and ROS 2 discovery kept on this machine.

Every process of this session that runs rclpy (the tests' own nodes, the bridge, the
ROS 2 nodes they spawn) inherits, before ``rclpy.init()``:
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a private ``ROS_DOMAIN_ID`` (1..101,
from this process's pid), so no discovery traffic leaves the machine and two test
sessions on one machine do not see each other.
"""

import os

import pytest

pytest.importorskip("rclpy", reason="the ros2 extra (ROS 2 Kilted's rclpy wheels) is not installed")

DOMAIN_ID = os.getpid() % 101 + 1
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)


@pytest.fixture
def time_limit_s():
    """Each test here fails past this (a hung DDS discovery, a lost message)."""
    return 60
