"""a0py inside a running ROS 2 system (docs/ros2.md).

:class:`Ros2Bridge` runs one rclpy node that imports ROS 2 topics into a0py topics (CDR
bytes unchanged, ``ros2msg`` schemas) and exports a0py topics to ROS 2, loop-free with
other ROS 2 bridges and with the Zenoh bridge, counting what it could not deliver.
Modules: names across the bridge (:mod:`~a0py.ros2.names`), QoS
(:mod:`~a0py.ros2.qos`), what an a0py topic becomes in ROS 2
(:mod:`~a0py.ros2.mapping`), the bridge (:mod:`~a0py.ros2.bridge`), its status and the
command line's formatting (:mod:`~a0py.ros2.status`), errors
(:mod:`~a0py.ros2.errors`). rclpy is imported only when a bridge starts; ROS 2 message
types without rclpy are :meth:`a0py.Schema.ros2`'s (:mod:`a0py.proto.ros2_types`).
"""

from .bridge import MARKER_TOPIC, PUBLICATION_SEQ, PUBLISHER, SOURCE_TIME, Ros2Bridge
from .errors import Ros2ConfigError, Ros2Error, Ros2StartError
from .status import STATUS_TOPIC, read_status

__all__ = ["MARKER_TOPIC", "PUBLICATION_SEQ", "PUBLISHER", "SOURCE_TIME", "STATUS_TOPIC",
           "Ros2Bridge", "Ros2ConfigError", "Ros2Error", "Ros2StartError", "read_status"]
