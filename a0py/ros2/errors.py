"""The exceptions of the ROS 2 bridge. Every one is a subclass of :class:`a0py.A0Error`."""

from a0py.errors import A0Error, ArgumentError


class Ros2Error(A0Error):
    """Base class of the ROS 2 bridge's errors; also raised when rclpy is not installed
    (the message names the extra: ``pip install 'a0py[ros2]'``)."""


class Ros2ConfigError(Ros2Error, ArgumentError):
    """The bridge was given something it cannot use: a bad glob, a namespace or node name
    that is not a valid ROS 2 name, a domain id out of range, a QoS it does not know. The
    message names the argument and what was wrong."""


class Ros2StartError(Ros2Error):
    """The bridge could not start: rclpy refused to initialize, or another ROS 2 bridge
    serves the same root."""
