"""The broker's commands: ``broker``, ``claim``, ``retract``, ``subscribe``, ``facts``.

Facts and patterns are written in the dataspace's text syntax (``temp("kitchen", 21.5)``,
``temp($room, _)``). Every command but ``broker`` talks to the broker named by
``--broker`` (default: ``$A0PY_BROKER``, else ``default``).

    a0py broker [NAME]                                 run a broker (Ctrl-C stops it)
    a0py claim 'temp("kitchen", 21.5)' [--for S]       claim, hold until Ctrl-C (or S seconds)
    a0py retract 'temp("kitchen", _)' [--client ID]    retract matching claims of any client
    a0py subscribe 'temp($room, $t)' 'setpoint($room, $s)'   JSON lines, one per change
    a0py facts [PATTERN] [--owners]                    the facts, in the text syntax

The commands are click commands; ``python -m a0py.broker.cli`` runs them as a group.
"""

import json
import math
import os
import sys
import threading

import click

from a0py.clitypes import SECONDS, Count
from a0py.dataspace import ParseError, Record, format_term, parse

DEFAULT_BROKER = "default"


def _default_broker():
    return os.environ.get("A0PY_BROKER") or DEFAULT_BROKER


broker_option = click.option(
    "--broker", "-b", "broker_name", default=_default_broker, show_default="$A0PY_BROKER or 'default'",
    help="The broker's name.")
timeout_option = click.option("--timeout", type=SECONDS, default=5.0, show_default=True,
                              help="Seconds to wait for the broker.")


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


def _fail(message):
    click.echo(f"a0py: error: {message}", err=True)
    sys.exit(1)


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
@click.argument("name", required=False)
@click.option("--quiet", "-q", is_flag=True, help="Do not log clients coming and going.")
def broker(name, quiet):
    """Run the fact broker NAME (default: $A0PY_BROKER or 'default') until Ctrl-C.

    Clients find it by name; clients that were running re-assert their claims and
    subscriptions when it starts."""
    import logging

    from a0py.broker import Broker

    name = name or _default_broker()
    _sigterm_as_interrupt()
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO,
                        format="%(asctime)s %(message)s", stream=sys.stderr)
    try:
        b = Broker(name)
        click.echo(f"broker {name!r} running (pid {os.getpid()}); Ctrl-C stops it", err=True)
        b.run()
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        _fail(str(exc))


@click.command("claim")
@click.argument("facts", nargs=-1, required=True)
@broker_option
@click.option("--for", "seconds", type=SECONDS, default=None,
              help="Hold the claims this many seconds, then retract and exit.")
@click.option("--as", "client_name", default=None, help="This client's name (default: pid-random).")
@timeout_option
def claim(facts, broker_name, seconds, client_name, timeout):
    """Claim FACTS (text syntax) and hold them until Ctrl-C, or for --for SECONDS.

    The claims are retracted when this command ends (or is killed). If no broker is
    running yet, they are sent when one starts."""
    values = _parse_all(facts, "FACTS")
    _sigterm_as_interrupt()
    done = threading.Event()
    try:
        client = _client(broker_name, client=client_name,
                         on_revoked=lambda gone: _revoked(client, gone, done))
    except _errors() as exc:
        _fail(str(exc))
    try:
        client.claim(*values)
        try:
            client.ping(timeout)
            click.echo(f"claimed {len(values)} fact(s) as client {client.name!r} on broker "
                       f"{broker_name!r}; holding" + (f" for {seconds} s" if seconds else
                                                      " (Ctrl-C retracts)"), err=True)
        except _errors() as exc:
            click.echo(f"warning: {exc}; holding the claims until a broker starts", err=True)
        done.wait(seconds)
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        _fail(str(exc))
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
@timeout_option
def retract(patterns, broker_name, owner, timeout):
    """Retract every claim matching one of PATTERNS (text syntax; `_` and `$x` match
    anything), of every client or only of --client.

    Each fact retracted is printed with its owner; the owners are told and stop holding
    it (a `claim` command exits when it holds nothing more)."""
    parsed = _parse_all(patterns, "PATTERNS")
    try:
        with _client(broker_name) as client:
            revoked = client.revoke(*parsed, owner=owner, timeout=timeout)
    except _errors() as exc:
        _fail(str(exc))
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
@timeout_option
def subscribe(patterns, broker_name, count, as_text, timeout):
    """Subscribe to the join of PATTERNS (text syntax; shared $names join them) and print
    the whole result each time it changes: one JSON line, an array of objects
    variable → value (records and bytes as their text syntax). The first line is the
    current result. Ctrl-C stops; no broker answering within --timeout is an error."""
    parsed = _parse_all(patterns, "PATTERNS")
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
        with _client(broker_name) as client:
            client.subscribe(*parsed, callback=show)
            client.ping(timeout)  # the first result has come when it returns
            while not done.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except _errors() as exc:
        _fail(str(exc))


@click.command("facts")
@click.argument("pattern", required=False)
@broker_option
@click.option("--owners", is_flag=True, help="Also print the clients that claim each fact.")
@click.option("--json", "as_json", is_flag=True, help="One JSON value per line.")
@timeout_option
def facts(pattern, broker_name, owners, as_json, timeout):
    """Print the facts of the broker matching PATTERN (all without one), one per line in
    the text syntax, sorted. Subscriptions appear as subscription(client, id, patterns)."""
    parsed = _parse_all([pattern], "PATTERN")[0] if pattern is not None else None
    try:
        with _client(broker_name) as client:
            found = client.facts(parsed, timeout=timeout, owners=True)
    except _errors() as exc:
        _fail(str(exc))
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
