"""``a0py bridge``: topics across machines over Zenoh (:mod:`a0py.bridge`).

Runs until SIGINT or SIGTERM, then prints its final status and exits 0. While it runs,
it prints one JSON line of status (:meth:`a0py.bridge.ZenohBridge.status`) every
``--status-interval`` seconds when the counts changed.
"""

import json
import signal
import threading

import click

from a0py.cli.types import FiniteFloat, RootSpec
from a0py.errors import A0Error

from .errors import CliError

__all__ = ["bridge"]


def _size_item(value):
    glob, sep, size = value.partition("=")
    if not sep or not glob or not size:
        raise CliError(f"--size {value!r}: write GLOB=SIZE, e.g. 'camera/*=64M'")
    return glob, size


@click.command("bridge", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("globs", nargs=-1, required=True, metavar="GLOB...")
@click.option("--listen", "listen", multiple=True, metavar="EP",
              help="Zenoh endpoint to listen on (repeatable), e.g. tcp/127.0.0.1:7447. "
                   "Nothing listens unless given.")
@click.option("--connect", "connect", multiple=True, metavar="EP",
              help="Zenoh endpoint to connect to (repeatable), e.g. tcp/10.0.0.2:7447.")
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="A Zenoh JSON5 config file, used as the base (TLS, auth, router...).")
@click.option("--prefix", default="a0py", show_default=True,
              help="Key-expression prefix: topic T travels as PREFIX/pubsub/T.")
@click.option("--mode", type=click.Choice(["peer", "client", "router"]), default=None,
              help="Zenoh mode (default peer, or the config file's).")
@click.option("--multicast/--no-multicast", default=None,
              help="Zenoh multicast scouting (default off, or the config file's).")
@click.option("--reliable", is_flag=True,
              help="Block when the network is congested (backpressure) instead of dropping.")
@click.option("--size", "sizes", multiple=True, metavar="GLOB=SIZE",
              help="Arena size for imported topics matching GLOB that the bridge creates "
                   "(repeatable, first match wins), e.g. 'camera/*=64M'.")
@click.option("--linger", type=FiniteFloat(0, 0.01), default=0.0, show_default=True, metavar="SECONDS",
              help="After a local packet wakes the bridge, wait this long for other topics' "
                   "packets before sending (fewer wake-ups, that much more latency).")
@click.option("--bundle", is_flag=True,
              help="Send the packets of all the topics read at one wake-up in one Zenoh sample "
                   "(PREFIX/bundle/ID) instead of one per topic: much less CPU with many small "
                   "topics; Zenoh routes each bundle to every bridge, and Zenoh subscribers of "
                   "your own see no per-topic keys for them.")
@click.option("--log-topic", default="a0py/bridge", show_default=True,
              help="Topic whose log gets a WARN line when a topic's losses change.")
@click.option("--status-interval", type=FiniteFloat(0.05, 3600), default=5.0, show_default=True,
              help="Seconds between status lines (printed only when counts changed).")
@click.option("--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
              help="Where the local topics live: shm:PREFIX (default shm:a0py) or a directory.")
def bridge(globs, listen, connect, config, prefix, mode, multicast, reliable, sizes, linger, bundle,
           log_topic, status_interval, root):
    """Bridge the topics matching GLOBs to other machines over Zenoh.

    Local packets of matching topics are published to Zenoh; remote ones are
    written into local topics, with their headers kept and a0py.bridge.origin,
    a0py.bridge.host and a0py.bridge.seq added. Start it as `a0py bridge
    --listen tcp/0.0.0.0:7447 'robot/**'` on one machine and `a0py bridge
    --connect tcp/ROBOT:7447 'robot/**'` on the other (docs/bridge.md).
    """
    from a0py.bridge import ZenohBridge

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        br = ZenohBridge(globs, listen=listen, connect=connect, config=config, prefix=prefix,
                         mode=mode, multicast=multicast, reliable=reliable,
                         sizes=[_size_item(s) for s in sizes], root=root, log_topic=log_topic,
                         linger=linger, bundle=bundle)
        br.start()
    except A0Error as e:
        raise CliError(str(e)) from None
    try:
        click.echo(f"a0py bridge: {br.id} on prefix {br.prefix!r}, topics {' '.join(globs)}"
                   f"{'; listening on ' + ' '.join(listen) if listen else ''}"
                   f"{'; connecting to ' + ' '.join(connect) if connect else ''}")
        last = None
        while not stop.wait(status_interval):
            status = br.status()
            if status != last:  # any protocol's counts, or bad samples
                click.echo(json.dumps(status, sort_keys=True))
                last = status
    finally:
        br.stop()
    click.echo(json.dumps(br.status(), sort_keys=True))
    return 0
