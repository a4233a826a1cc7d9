"""``a0py bridge``: topics across machines over Zenoh (:mod:`a0py.bridge`).

Runs until SIGINT or SIGTERM, then prints its final status and exits 0. While it runs,
it prints one JSON line of status (:meth:`a0py.bridge.ZenohBridge.status`) every
``--status-interval`` seconds when the counts changed.

Peers coming, going and coming back, and the bridge's warnings, are also printed on
stderr as they happen (``a0py bridge: peer bridge ID on HOST (root R, pid P) up``), so
the user sees when the two sides have met.

What a first run gets wrong is said on stderr rather than left to silence: a bridge
that neither listens nor connects (nor scouts) warns at once that nothing can reach it,
and one that has met no other bridge after :data:`NO_PEER_S` seconds says what it is
trying and what to check (nothing answering at its endpoints, or a Zenoh peer there
that is not a bridge of the same prefix).
"""

import json
import threading

import click

from a0py.cli._output import logged_to_stderr, print_status_until, stop_on_signals
from a0py.cli.types import FiniteFloat, GlobValue, RootSpec
from a0py.errors import A0Error

from .errors import CliError

__all__ = ["NO_PEER_S", "bridge"]

#: After this many seconds without meeting another bridge, ``a0py bridge`` says so.
NO_PEER_S = 10.0


def _unreachable_warning(reach):
    """The warning for a bridge no other can reach, or None."""
    if reach["listen"] or reach["connect"] or reach["multicast"]:
        return None
    return ("a0py bridge: warning: it neither listens (--listen EP) nor connects (--connect EP), and "
            "multicast scouting is off: no other bridge can reach this one. Give one side --listen "
            "tcp/ADDRESS:7447 and the other --connect tcp/ADDRESS:7447 (docs/bridge.md)")


def _no_peer_hint(br):
    """What to check when `br` has met no other bridge after NO_PEER_S seconds, or None
    once it has met one."""
    if br.status()["peers"]:
        return None
    reach = br.reach()
    doing = "; ".join(x for x in (
        f"listening on {' '.join(reach['listen'])}" if reach["listen"] else "",
        f"connecting to {' '.join(reach['connect'])}" if reach["connect"] else "",
        "scouting by multicast" if reach["multicast"] else "") if x)
    if br.zenoh_sessions():
        why = (f"a Zenoh session is connected, but it is not an a0py bridge with prefix {br.prefix!r}: "
               "give both bridges the same --prefix")
    elif reach["connect"]:
        why = ("nothing answered there yet (Zenoh keeps trying): is a bridge running with --listen on "
               "that address and port, is the address right and reachable from this machine, does a "
               "firewall let the port through?")
    else:
        why = ("none has connected yet: on the other machine, run a0py bridge --connect "
               "tcp/THIS-MACHINE:PORT with the same --prefix")
        if any(h in ep for ep in reach["listen"] for h in ("/127.", "/localhost:", "/[::1]:")):
            why += " (a listener on a loopback address takes connections from this machine only)"
    return (f"a0py bridge: no other bridge met in {NO_PEER_S:g} s ({doing or 'no endpoints'}): {why}")


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
@click.option("--size", "sizes", multiple=True, metavar="GLOB=SIZE", type=GlobValue("camera/*=64M"),
              help="Arena size for imported topics matching GLOB that the bridge creates "
                   "(repeatable, first match wins), e.g. 'camera/*=64M'.")
@click.option("--linger", type=FiniteFloat(0, 0.01), default=0.0, show_default=True, metavar="SECONDS",
              help="After a local packet wakes the bridge, wait this long for other topics' "
                   "packets before sending (fewer wake-ups, that much more latency).")
@click.option("--lease", type=FiniteFloat(0.1, 3600), default=None, metavar="SECONDS",
              help="How long a silent link lasts before Zenoh drops it and the peer is reported "
                   "gone (default 10, Zenoh's; or the config file's). Give both bridges the same.")
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
def bridge(globs, listen, connect, config, prefix, mode, multicast, reliable, sizes, linger,
           lease, bundle, log_topic, status_interval, root):
    """Bridge the topics matching GLOBs to other machines over Zenoh.

    Local packets of matching topics are published to Zenoh; remote ones are
    written into local topics, with their headers kept and a0py.bridge.origin,
    a0py.bridge.host and a0py.bridge.seq added. Start it as `a0py bridge
    --listen tcp/0.0.0.0:7447 'robot/**'` on one machine and `a0py bridge
    --connect tcp/ROBOT:7447 'robot/**'` on the other (docs/bridge.md).
    """
    from a0py.bridge import ZenohBridge

    stop = stop_on_signals()
    # From before start(): a peer met while the bridge starts is said too ("peer bridge
    # ... up"); the bridge's own "started" line is not: the command says it on stdout.
    with logged_to_stderr("a0py.bridge",
                          leave_out=lambda record: str(record.msg).startswith("bridge %s started")):
        try:
            br = ZenohBridge(globs, listen=listen, connect=connect, config=config, prefix=prefix,
                             mode=mode, multicast=multicast, reliable=reliable,
                             sizes=list(sizes), root=root, log_topic=log_topic,
                             linger=linger, lease=lease, bundle=bundle)
            br.start()
        except A0Error as e:
            raise CliError(str(e)) from None
        hint = None
        try:
            click.echo(f"a0py bridge: {br.id} on prefix {br.prefix!r}, topics {' '.join(globs)}"
                       f"{'; listening on ' + ' '.join(listen) if listen else ''}"
                       f"{'; connecting to ' + ' '.join(connect) if connect else ''}"
                       f"; link lease {br.lease:g} s")
            warning = _unreachable_warning(br.reach())
            if warning:
                click.echo(warning, err=True)
            else:
                def say_no_peer():
                    text = _no_peer_hint(br)
                    if text and not stop.is_set():
                        click.echo(text, err=True)

                hint = threading.Timer(NO_PEER_S, say_no_peer)
                hint.daemon = True
                hint.start()
            print_status_until(stop, br.status, status_interval)  # any counts, or bad samples
        finally:
            if hint is not None:
                hint.cancel()
            br.stop()
    click.echo(json.dumps(br.status(), sort_keys=True))
    return 0
