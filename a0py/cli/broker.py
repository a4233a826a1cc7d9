"""The broker's commands: ``broker``, ``claim``, ``retract``, ``subscribe``, ``facts``.

Facts and patterns are written in the dataspace's text syntax (``temp("kitchen", 21.5)``,
``temp($room, _)``). Every command but ``broker`` talks to the broker named by
``--broker`` (default: ``$A0PY_BROKER``, else ``default``) under ``--root`` (default
``$A0PY_ROOT``, as for topics); when that broker does not run, each says so at once
(exit 1) and creates nothing, except ``claim --wait``, which holds its claims until it
starts.

    a0py broker [NAME]                                 run a broker (Ctrl-C stops it)
    a0py claim 'temp("kitchen", 21.5)' [--for S]       claim, hold until Ctrl-C (or S seconds)
    a0py retract 'temp("kitchen", _)' [--client ID]    retract matching claims of any client
    a0py subscribe 'temp($room, $t)' 'setpoint($room, $s)'   JSON lines, one per change
    a0py facts [PATTERN] [--owners]                    the facts, in the text syntax

The commands are click commands; ``python -m a0py.cli.broker`` runs them as a group.
"""

import json
import math
import os
import sys
import threading

import click

from a0py.cli._common import TOPIC
from a0py.cli.errors import CliError
from a0py.cli.types import SECONDS, Count, FiniteFloat, RootSpec
from a0py.dataspace import ParseError, Record, format_term, parse

DEFAULT_BROKER = "default"


def _default_broker():
    return os.environ.get("A0PY_BROKER") or DEFAULT_BROKER


broker_option = click.option(
    "--broker", "-b", "broker_name", type=TOPIC, default=_default_broker, show_default="$A0PY_BROKER or 'default'",
    help="The broker's name.")
timeout_option = click.option("--timeout", type=SECONDS, default=5.0, show_default=True,
                              help="Seconds to wait for the broker.")
root_option = click.option(
    "--root", type=RootSpec(), default=None, envvar="A0PY_ROOT", show_envvar=True,
    help="Where the broker's arenas live, as for topics: shm:PREFIX (default shm:a0py) or a "
         "directory.")


def _parse_all(texts, what):
    out = []
    for text in texts:
        try:
            out.append(parse(text))
        except ParseError as exc:
            raise click.BadParameter(f"{text!r}: {exc}", param_hint=what) from None
    return out


def _sigterm_as_interrupt():
    """SIGTERM ends a command the way Ctrl-C does (claims retracted, broker stopped)."""
    import signal

    def handler(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


def _root(root):
    from a0py.broker.wire import root_of

    return root_of(root)


def _running(broker_name, root):
    """The pid of the broker `broker_name` under `root`, or None; creates nothing."""
    from a0py.broker.wire import broker_pid

    try:
        return broker_pid(broker_name, root)
    except _errors() as exc:
        raise CliError(str(exc)) from None


def _not_running(broker_name, root, hint=""):
    return CliError(f"no broker {broker_name!r} is running under {root.spec()}: start it with "
                    f"`a0py broker {broker_name}`{hint}")


def _require_broker(broker_name, root):
    """Raises :class:`CliError` at once, creating nothing, when broker `broker_name`
    does not run under `root` (a client of it would only time out)."""
    if _running(broker_name, root) is None:
        raise _not_running(broker_name, root)


def to_json(value):
    """A value for a JSON line: atoms as JSON atoms, tuples as arrays; records, bytes and
    non-finite floats as their text syntax (a JSON string)."""
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        return value if math.isfinite(value) else format_term(value)
    if t is tuple:
        return [to_json(v) for v in value]
    if t is Record or t is bytes:
        return format_term(value)
    return repr(value)


def _client(name, **kw):
    from a0py.broker import BrokerClient

    return BrokerClient(name, **kw)


def _errors():
    from a0py.errors import A0Error

    return A0Error


@click.command("broker")
@click.argument("name", required=False, type=TOPIC)
@root_option
@click.option("--quiet", "-q", is_flag=True, help="Do not log clients coming and going.")
@click.option("--spin", type=FiniteFloat(0, 1), default=None,
              help="Longest spin (seconds) of the wait for requests before sleeping "
                   "(default 0.00005, the transport's own; 0.002 spans a 1 kHz client's gaps at a core's cost; 0: never spin). See docs/broker.md.")
def broker(name, root, quiet, spin):
    """Run the fact broker NAME (default: $A0PY_BROKER or 'default') until Ctrl-C.

    Clients find it by name under the same root; clients that were running
    re-assert their claims and subscriptions when it starts. Stopped (Ctrl-C,
    SIGTERM), it removes its request arena unless a client is still connected."""
    import logging

    from a0py.broker import Broker

    name = name or _default_broker()
    root = _root(root)
    _sigterm_as_interrupt()
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO,
                        format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        b = Broker(name, root=root) if spin is None else Broker(name, root=root, spin=spin)
        click.echo(f"broker {name!r} running under {root.spec()} (pid {os.getpid()}); "
                   "Ctrl-C stops it", err=True)
        b.run()
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        raise CliError(str(exc)) from None


@click.command("claim")
@click.argument("facts", nargs=-1, required=True)
@broker_option
@click.option("--for", "seconds", type=SECONDS, default=None,
              help="Hold the claims this many seconds, then retract and exit.")
@click.option("--as", "client_name", default=None, help="This client's name (default: pid-random).")
@click.option("--wait", "wait_for_broker", is_flag=True,
              help="If the broker does not run, hold the claims until it starts "
                   "(default: exit 1 at once).")
@root_option
@timeout_option
def claim(facts, broker_name, seconds, client_name, wait_for_broker, root, timeout):
    """Claim FACTS (text syntax) and hold them until Ctrl-C, or for --for SECONDS.

    The claims are retracted when this command ends (or is killed). A broker that
    does not run is an error at once; with --wait the claims are held and sent when
    it starts (and again if it restarts)."""
    values = _parse_all(facts, "FACTS")
    root = _root(root)
    running = _running(broker_name, root) is not None
    if not running and not wait_for_broker:
        raise _not_running(broker_name, root, ", or pass --wait to hold the claims until it does")
    _sigterm_as_interrupt()
    done = threading.Event()
    try:
        client = _client(broker_name, client=client_name, root=root,
                         on_revoked=lambda gone: _revoked(client, gone, done))
    except _errors() as exc:
        raise CliError(str(exc)) from None
    holding = (f"holding for {seconds} s" if seconds else "holding (Ctrl-C retracts)")
    try:
        client.claim(*values)
        if running:
            try:
                client.ping(timeout)
            except _errors() as exc:
                if not wait_for_broker:
                    raise CliError(str(exc)) from None
                running = False
        if running:
            click.echo(f"claimed {len(values)} fact(s) as client {client.name!r} on broker "
                       f"{broker_name!r}; {holding}", err=True)
        else:
            click.echo(f"waiting for broker {broker_name!r} under {root.spec()}: the "
                       f"{len(values)} fact(s) go to it when it starts; {holding}", err=True)
        done.wait(seconds)
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        raise CliError(str(exc)) from None
    finally:
        client.close()


def _revoked(client, gone, done):
    for v in gone:
        click.echo(f"retracted by an administrator: {format_term(v)}", err=True)
    if not client.claims():
        done.set()


@click.command("retract")
@click.argument("patterns", nargs=-1, required=True)
@broker_option
@click.option("--client", "owner", default=None,
              help="Only the claims of this client (as `facts --owners` shows them).")
@root_option
@timeout_option
def retract(patterns, broker_name, owner, root, timeout):
    """Retract every claim matching one of PATTERNS (text syntax; `_` and `$x` match
    anything), of every client or only of --client.

    Each fact retracted is printed with its owner; the owners are told and stop holding
    it (a `claim` command exits when it holds nothing more)."""
    parsed = _parse_all(patterns, "PATTERNS")
    root = _root(root)
    _require_broker(broker_name, root)
    try:
        with _client(broker_name, root=root) as client:
            revoked = client.revoke(*parsed, owner=owner, timeout=timeout)
    except _errors() as exc:
        raise CliError(str(exc)) from None
    for fact, owners in revoked:
        click.echo(f"{format_term(fact)}\t{' '.join(owners)}")
    if not revoked:
        click.echo("nothing matched", err=True)


@click.command("subscribe")
@click.argument("patterns", nargs=-1, required=True)
@broker_option
@click.option("--count", "-n", type=Count(), default=None, help="Exit after N results.")
@click.option("--text", "as_text", is_flag=True,
              help="Print rows in the text syntax (var=value ...) instead of JSON lines.")
@root_option
@timeout_option
def subscribe(patterns, broker_name, count, as_text, root, timeout):
    """Subscribe to the join of PATTERNS (text syntax; shared $names join them) and print
    the whole result each time it changes: one JSON line, an array of objects
    variable → value (records and bytes as their text syntax). The first line is the
    current result. Ctrl-C stops; a broker that does not run is an error at once, one
    that does not answer within --timeout too."""
    parsed = _parse_all(patterns, "PATTERNS")
    root = _root(root)
    _require_broker(broker_name, root)
    _sigterm_as_interrupt()
    printed = [0]
    done = threading.Event()
    lock = threading.Lock()

    def show(result):
        with lock:
            if done.is_set():
                return
            if as_text:
                line = "; ".join(" ".join(f"{k}={format_term(v)}" for k, v in row.items())
                                 for row in result) or "(empty)"
            else:
                line = json.dumps([{k: to_json(v) for k, v in row.items()} for row in result])
            click.echo(line)
            sys.stdout.flush()
            printed[0] += 1
            if count is not None and printed[0] >= count:
                done.set()

    try:
        with _client(broker_name, root=root) as client:
            client.subscribe(*parsed, callback=show)
            client.ping(timeout)  # the first result has come when it returns
            while not done.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        raise CliError(str(exc)) from None


@click.command("facts")
@click.argument("pattern", required=False)
@broker_option
@click.option("--owners", is_flag=True, help="Also print the clients that claim each fact.")
@click.option("--json", "as_json", is_flag=True, help="One JSON value per line.")
@root_option
@timeout_option
def facts(pattern, broker_name, owners, as_json, root, timeout):
    """Print the facts of the broker matching PATTERN (all without one), one per line in
    the text syntax, sorted. Subscriptions appear as subscription(client, id, patterns)."""
    parsed = _parse_all([pattern], "PATTERN")[0] if pattern is not None else None
    root = _root(root)
    _require_broker(broker_name, root)
    try:
        with _client(broker_name, root=root) as client:
            found = client.facts(parsed, timeout=timeout, owners=True)
    except _errors() as exc:
        raise CliError(str(exc)) from None
    for fact, who in found:
        text = json.dumps(to_json(fact)) if as_json else format_term(fact)
        click.echo(f"{text}\t{' '.join(who)}" if owners else text)


COMMANDS = (broker, claim, retract, subscribe, facts)


@click.group()
def main():
    """The fact broker's commands (registered in the `a0py` command too)."""


for _command in COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":
    main()


__all__ = ["COMMANDS", "broker", "claim", "facts", "main", "retract", "subscribe", "to_json"]
