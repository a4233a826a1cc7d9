"""``a0py ros2``: a0py in a running ROS 2 system (:mod:`a0py.ros2`).

Runs one rclpy node until SIGINT or SIGTERM, then prints its final status and exits 0.
While it runs it prints one JSON line of status (:meth:`a0py.ros2.Ros2Bridge.status`)
every ``--status-interval`` seconds when it changed; what it imports, and every topic it
refuses (with the reason, in one line), on stderr as it happens.

Also what the other commands show of ROS 2 (none needs rclpy): ``echo`` of a
``ros2msg`` topic (:func:`show_ros2_packet`, :func:`ros2_document`), the ROS2 column of
``ls`` and the rows of ``info`` (:func:`ls_column`, :func:`info_rows`).
"""

import json

import click

from a0py.cli._output import logged_to_stderr, print_status_until, stop_on_signals
from a0py.cli.types import FiniteFloat, GlobValue, RootSpec
from a0py.errors import A0Error

from .errors import CliError

__all__ = ["info_rows", "ls_column", "ros2", "ros2_document", "show_ros2_packet"]


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
              type=GlobValue("map=reliable,transient_local"),
              help="QoS of exported topics matching GLOB (repeatable, first match wins): "
                   "reliable|best_effort, volatile|transient_local, depth=N, comma-separated. "
                   "Default reliable,volatile,depth=100.")
@click.option("--service-timeout", type=FiniteFloat(0.05, 86400), default=30.0, show_default=True,
              help="Seconds a bridged service call may wait for its response.")
@click.option("--status-interval", type=FiniteFloat(0.05, 3600), default=5.0, show_default=True,
              help="Seconds between status lines (printed only when they changed).")
@click.option("--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
              help="Where the a0py topics live: shm:PREFIX (default shm:a0py) or a directory.")
def ros2(imports, exports, domain, namespace, node_name, export_qos, service_timeout, status_interval,
         root):
    """Join a running ROS 2 system: import ROS 2 topics, export a0py topics.

    Imported messages keep their CDR bytes, under a ros2msg schema (the type's
    full definition), so `a0py echo`, `a0py record` and the view read them.
    Exported topics carry ros2msg messages (Schema.ros2) or images
    (pub_image: published as sensor_msgs/Image and CompressedImage). Services
    cross both ways: imported ROS 2 services are a0py RPC topics, a0py RPC
    servers whose topic has a ROS 2 service schema are ROS 2 services. ROS 2
    discovery stays on this host unless ROS_AUTOMATIC_DISCOVERY_RANGE says
    otherwise (docs/ros2.md).
    """
    if not imports and not exports:
        raise CliError("give at least one --import GLOB or --export GLOB ('**' for every topic)")
    from a0py.ros2 import Ros2Bridge

    stop = stop_on_signals()
    with logged_to_stderr("a0py.ros2"):
        try:
            br = Ros2Bridge(imports, exports, domain_id=domain, namespace=namespace,
                            node_name=node_name, root=root, service_timeout=service_timeout,
                            export_qos=list(export_qos))
            br.start()
        except A0Error as e:
            raise CliError(str(e)) from None
        try:
            click.echo(f"a0py ros2: node {br.status()['node']}, imports {' '.join(imports) or '-'}, "
                       f"exports {' '.join(exports) or '-'}")
            print_status_until(stop, br.status, status_interval)
        finally:
            br.stop()
        click.echo(json.dumps(br.status(), sort_keys=True))
    return 0


# -- what echo, ls and info show of ROS 2


def _is_ros2(pkt):
    schema = getattr(pkt, "schema", None)
    return schema is not None and schema.encoding == "ros2msg"


def ros2_document(pkt, label):
    """The message of a packet of a ``ros2msg`` topic as plain values (dicts, lists,
    scalars), or None: not such a packet, or one that does not decode (said on stderr,
    naming `label`)."""
    if not _is_ros2(pkt):
        return None
    from a0py.errors import A0Error
    from a0py.proto.ros2_types import message_to_dict

    try:
        return message_to_dict(pkt.decode())
    except A0Error as e:  # DecodeError (it names the topic), SchemaError, ExtraNotInstalledError
        where = "" if label in str(e) else f"{label}: "
        click.echo(f"a0py: {where}{e}; shown as bytes", err=True)
        return None


def show_ros2_packet(pkt, label, fmt):
    """Prints a packet of a ``ros2msg`` topic as ``ros2 topic echo`` does (YAML-like,
    ``---`` after each message; with ``--json``, one line of JSON; with ``-v``, in the
    packet's block) and returns True; returns False, printing nothing, for any other
    packet, for ``--hex``/``--raw``, and for one that does not decode."""
    if fmt.hex or fmt.raw or not _is_ros2(pkt):
        return False
    document = ros2_document(pkt, label)
    if document is None:
        return False
    from a0py.cli._output import print_packet
    from a0py.ros2.status import format_message

    if pkt.missed:
        click.echo(f"a0py: {label}: {pkt.missed} packets missed before seq {pkt.seq} "
                   "(evicted before they were read)", err=True)
    if fmt.json:
        body = json.dumps(document, ensure_ascii=False, default=str)
    else:
        body = format_message(document)
        if fmt.verbose:  # the block ends with its own ---
            body = "\n" + "\n".join("  " + line for line in body.splitlines()[:-1])
    if fmt.verbose:
        print_packet(pkt, body)
    else:
        click.echo(body)
    return True


def ls_column(root):
    """``(title, cell(name))`` of ``ls``'s ROS2 column when a ROS 2 bridge serves `root`,
    else None: a topic's cell says what the bridge does with it and what it could not
    deliver (:func:`a0py.ros2.status.ls_cell`)."""
    from a0py.ros2.status import ls_cell, running_status

    status = running_status(root)
    return None if status is None else ("ROS2", lambda name: ls_cell(status, name))


def info_rows(root, name):
    """``info``'s rows of what the ROS 2 bridge of `root` does with topic `name`."""
    from a0py.ros2 import status

    return status.info_rows(status.running_status(root), name)
