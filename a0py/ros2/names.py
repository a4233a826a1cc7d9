"""Names across the bridge: the a0py topic ``a/b`` is the ROS 2 topic ``/a/b``, or
``/<namespace>/a/b`` under a namespace, one to one; a glob may be written either way
(``/a/*`` or ``a/*``).

Invariants:

* :func:`ros_name` and :func:`a0py_name` are inverse on the names both sides accept:
  a ROS 2 name outside the namespace has no a0py name, an a0py name that is not a
  valid ROS 2 name (a segment with ``-`` or ``.``, one that starts with a digit, a
  ``__``) has no ROS 2 name. Neither is guessed at: the bridge refuses such a topic with
  one line naming it and why.
* ROS 2's hidden names (a segment that starts with ``_``) are never imported by a glob:
  only a glob that names such a segment itself takes them, as ``ros2 bag record`` does.
"""

import re

from ..errors import ArgumentError
from ..proto.discovery import compile_glob
from .errors import Ros2ConfigError

__all__ = ["a0py_name", "check_namespace", "check_node_name", "compile_globs", "is_hidden",
           "ros_name", "ros_name_problem"]

_TOKEN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def ros_name_problem(name):
    """Why `name` (absolute, ``/a/b``) is not a valid ROS 2 topic name, or None."""
    if not name.startswith("/") or name == "/":
        return "a ROS 2 name is absolute and not empty"
    for token in name[1:].split("/"):
        if not token:
            return "it has an empty segment"
        if not _TOKEN.match(token):
            return (f"segment {token!r} is not letters, digits and '_' starting with a letter "
                    "or '_'")
        if "__" in token:
            return f"segment {token!r} has a double underscore"
    return None


def check_namespace(namespace):
    """`namespace` as ``/a/b`` (``""``: none); Ros2ConfigError if it is not a valid ROS 2
    namespace."""
    if not isinstance(namespace, str):
        raise Ros2ConfigError(f"namespace must be a str like 'robot1', not {type(namespace).__name__}")
    ns = namespace.strip("/")
    if not ns:
        return ""
    problem = ros_name_problem("/" + ns)
    if problem:
        raise Ros2ConfigError(f"namespace {namespace!r} is not a valid ROS 2 namespace: {problem}")
    return "/" + ns


def check_node_name(name):
    """`name` if it is a valid ROS 2 node name, else Ros2ConfigError."""
    if not isinstance(name, str) or not _NODE.match(name) or "__" in name:
        raise Ros2ConfigError(f"node name {name!r} is not a valid ROS 2 node name: letters, digits "
                              "and '_', starting with a letter or '_', no '__'")
    return name


def ros_name(topic, namespace=""):
    """``(ROS 2 name, None)`` of a0py topic `topic` under `namespace` (``/ns`` or ``""``),
    or ``(None, why)`` when the name is not a valid ROS 2 name."""
    name = f"{namespace}/{topic}"
    problem = ros_name_problem(name)
    return (None, f"{name!r} is not a valid ROS 2 topic name: {problem}") if problem else (name, None)


def a0py_name(name, namespace=""):
    """The a0py topic of ROS 2 topic `name`, or None when it is outside `namespace`."""
    if namespace:
        if not name.startswith(namespace + "/"):
            return None
        name = name[len(namespace):]
    return name[1:] or None


def is_hidden(name):
    """Whether a ROS 2 name has a hidden segment (one starting with ``_``)."""
    return any(t.startswith("_") for t in name.split("/") if t)


def compile_globs(globs, what):
    """Matchers of a0py topic names for `globs` (a str or a list; each written as an
    a0py glob ``a/*`` or a ROS 2 one ``/a/*``); Ros2ConfigError naming `what` for a bad
    one."""
    if isinstance(globs, str):
        globs = (globs,)
    try:
        globs = tuple(globs)
    except TypeError:
        raise Ros2ConfigError(f"{what} must be topic globs (a str or a list of str), not "
                              f"{type(globs).__name__}") from None
    out = []
    for g in globs:
        try:
            out.append((g, compile_glob(g).match, "/_" in "/" + g.lstrip("/")))
        except ArgumentError as e:
            raise Ros2ConfigError(f"{what}: {e}") from None
    return out
