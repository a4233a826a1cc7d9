"""The ROS 2 tests' settings: real rclpy from the Kilted wheels (the ``ros2`` extra;
the folder is skipped without it), and ROS 2 discovery kept on this machine.

Every process of this session that runs rclpy (the tests' own nodes, the bridge, the
ROS 2 nodes they spawn) inherits, before ``rclpy.init()``:
``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and a private ``ROS_DOMAIN_ID`` (1..101,
from this process's pid), so no discovery traffic leaves the machine and two test
sessions on one machine do not see each other.

Fixtures: ``nodes`` (start ros2_node.py processes, killed after the test) and
``bridge_root`` (a root of the module's own, in ``A0PY_ROOT``, with one bridge
importing ``ros/**`` and exporting ``a0/**`` for every test of the module).
"""

import os

import pytest
from helpers.procs import ended_after

pytest.importorskip("rclpy", reason="the ros2 extra (ROS 2 Kilted's rclpy wheels) is not installed")

DOMAIN_ID = os.getpid() % 101 + 1
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(DOMAIN_ID)


@pytest.fixture
def time_limit_s():
    """Each test here fails past this (a hung DDS discovery, a lost message).
    A guard against hangs, not a timing: the slowest test (two ROS 2 bridges
    joined by a Zenoh bridge) took 60 s at load 20 on the 2-core machine."""
    return 150


@pytest.fixture
def nodes():
    from ros2_procs import Node

    with ended_after(Node) as start:
        yield start


@pytest.fixture(scope="module")
def bridge_root():
    from ros2_procs import fresh_root, remove_root

    from a0py.ros2 import Ros2Bridge

    spec = fresh_root("ros2")
    old = os.environ.get("A0PY_ROOT")
    os.environ["A0PY_ROOT"] = spec
    br = Ros2Bridge(imports=["/ros/**"], exports=["a0/**"], scan_interval=0.05, report_interval=0.1,
                    service_timeout=10)
    br.start()
    yield br
    br.stop()
    remove_root(spec)
    if old is None:
        del os.environ["A0PY_ROOT"]
    else:
        os.environ["A0PY_ROOT"] = old
