"""``a0py ros2``: a0py in a running ROS 2 system (:mod:`a0py.ros2`).

Runs one rclpy node until SIGINT or SIGTERM, then prints its final status and exits 0.
While it runs it prints one JSON line of status (:meth:`a0py.ros2.Ros2Bridge.status`)
every ``--status-interval`` seconds when it changed; what it imports, and every topic it
refuses (with the reason, in one line), on stderr as it happens.
"""

import json
import logging
import signal
import sys
import threading

import click

from a0py.cli.types import FiniteFloat, RootSpec
from a0py.errors import A0Error

from .errors import CliError

__all__ = ["ros2"]


def _qos_item(value):
    glob, sep, spec = value.partition("=")
    if not sep or not glob or not spec:
        raise CliError(f"--export-qos {value!r}: write GLOB=QOS, e.g. 'map=reliable,transient_local'")
    return glob, spec


@click.command("ros2", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--import", "imports", multiple=True, metavar="GLOB",
              help="ROS 2 topics to bring into a0py (repeatable), written /a/* or a/*.")
@click.option("--export", "exports", multiple=True, metavar="GLOB",
              help="a0py topics to publish to ROS 2 (repeatable).")
@click.option("--domain", "domain", type=click.IntRange(0, 232), default=None, metavar="N",
              help="ROS 2 domain id (default: ROS_DOMAIN_ID, else 0).")
@click.option("--namespace", default="", metavar="NS",
              help="ROS 2 namespace: the a0py topic a/b is /NS/a/b.")
@click.option("--node-name", default="a0py_bridge", show_default=True, metavar="NAME",
              help="The bridge's ROS 2 node name.")
@click.option("--export-qos", "export_qos", multiple=True, metavar="GLOB=QOS",
              help="QoS of exported topics matching GLOB (repeatable, first match wins): "
                   "reliable|best_effort, volatile|transient_local, depth=N, comma-separated. "
                   "Default reliable,volatile,depth=100.")
@click.option("--status-interval", type=FiniteFloat(0.05, 3600), default=5.0, show_default=True,
              help="Seconds between status lines (printed only when they changed).")
@click.option("--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
              help="Where the a0py topics live: shm:PREFIX (default shm:a0py) or a directory.")
def ros2(imports, exports, domain, namespace, node_name, export_qos, status_interval, root):
    """Join a running ROS 2 system: import ROS 2 topics, export a0py topics.

    Imported messages keep their CDR bytes, under a ros2msg schema (the type's
    full definition), so `a0py echo`, `a0py record` and the view read them.
    Exported topics carry ros2msg messages (Schema.ros2) or images
    (pub_image: published as sensor_msgs/Image and CompressedImage). ROS 2
    discovery stays on this host unless ROS_AUTOMATIC_DISCOVERY_RANGE says
    otherwise (docs/ros2.md).
    """
    if not imports and not exports:
        raise CliError("give at least one --import GLOB or --export GLOB ('**' for every topic)")
    from a0py.ros2 import Ros2Bridge

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    said = logging.StreamHandler(sys.stderr)
    said.setFormatter(logging.Formatter("a0py %(message)s"))
    logger = logging.getLogger("a0py.ros2")
    logger.addHandler(said)
    logger.setLevel(logging.INFO)
    try:
        try:
            br = Ros2Bridge(imports, exports, domain_id=domain, namespace=namespace,
                            node_name=node_name, root=root,
                            export_qos=[_qos_item(q) for q in export_qos])
            br.start()
        except A0Error as e:
            raise CliError(str(e)) from None
        try:
            click.echo(f"a0py ros2: node {br.status()['node']}, imports {' '.join(imports) or '-'}, "
                       f"exports {' '.join(exports) or '-'}")
            last = None
            while not stop.wait(status_interval):
                status = br.status()
                if status != last:
                    click.echo(json.dumps(status, sort_keys=True))
                    last = status
        finally:
            br.stop()
        click.echo(json.dumps(br.status(), sort_keys=True))
    finally:
        logger.removeHandler(said)
    return 0
