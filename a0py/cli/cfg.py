"""``a0py cfg TOPIC [get|set|patch|watch]``: a topic's configuration, a JSON
document (a0py.Cfg, :mod:`a0py.proto.cfg`).

``get`` and ``watch`` never create the topic's cfg arena (its owner does);
``set`` and ``patch`` do, as a0py.Cfg does. Writes go through a0py.Cfg, so
they hold the topic's writers' lock like every other writer: a ``patch``
from the shell never loses a program's update, nor the other way round.
"""

import json
import queue
import sys

import click

from a0py.cli._common import (
    SECONDS,
    TOPIC,
    CliError,
    Count,
    CountedReads,
    TopicTarget,
    errors_about_topic,
    root_option,
)
from a0py.errors import EmptyError

CFG = "cfg"


def _dump(obj, compact):
    if compact:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return json.dumps(obj, ensure_ascii=False, indent=2)


def _json_argument(text, what):
    """JSON from an argument (or all of standard input for ``-``)."""
    where = "standard input" if text == "-" else repr(text)
    if text == "-":
        text = sys.stdin.buffer.read()
    try:
        return json.loads(text)
    except ValueError as e:
        raise click.BadParameter(f"{where} is not JSON: {e} (strings need quotes: '\"text\"')",
                                 param_hint=what) from None


def _check_pointer(pointer):
    from a0py.errors import ArgumentError
    from a0py.proto.cfg import CfgError, resolve_pointer

    try:
        resolve_pointer({}, pointer)
    except ArgumentError as e:
        raise click.BadParameter(str(e), param_hint="POINTER") from None
    except CfgError:  # well formed; that {} holds nothing there is no matter
        pass
    return pointer


class _Pointer(click.ParamType):
    """An RFC 6901 JSON pointer: ``""`` (the whole document) or ``/a/b/0``."""

    name = "POINTER"

    def convert(self, value, param, ctx):
        return _check_pointer(value)


def _set_hint(target):
    return f"set one with `a0py cfg {target.name} set JSON`"


@click.group(invoke_without_command=True)
@click.argument("topic", type=TOPIC)
@root_option
@click.pass_context
def cfg(ctx, topic, root):
    """Show or change a topic's configuration (a JSON document).

    \b
    a0py cfg TOPIC                        print it (as `get`)
    a0py cfg TOPIC get [POINTER]          print it, or the value at a JSON pointer
    a0py cfg TOPIC set [POINTER] JSON|-   replace it, or set one value
    a0py cfg TOPIC patch JSON|-           apply a JSON merge patch (RFC 7386)
    a0py cfg TOPIC watch [POINTER]        print each new version as it is written
    """
    ctx.obj = TopicTarget(topic, root)
    if ctx.invoked_subcommand is None:
        ctx.invoke(get)


@cfg.command()
@click.argument("pointer", type=_Pointer(), default="")
@click.option("--compact", is_flag=True, help="Print the JSON on one line.")
@click.pass_obj
def get(target, pointer, compact):
    """Print the configuration, or the value at a JSON POINTER in it
    (such as /motor/speed)."""
    from a0py import Cfg

    if not target.topic().exists(CFG):
        raise CliError(f"{target.label} has no configuration ({target.where}): {_set_hint(target)}")
    with errors_about_topic(target, CFG):
        try:
            value = Cfg(target.topic()).value(pointer)
        except EmptyError:
            raise CliError(f"{target.label} has no configuration yet: {_set_hint(target)}") from None
    click.echo(_dump(value, compact))


@cfg.command(name="set")
@click.argument("args", nargs=-1, required=True, metavar="[POINTER] JSON|-")
@click.option("--if-empty", is_flag=True,
              help="Only if the topic has no configuration yet (says so on stderr if it has).")
@click.pass_obj
def set_(target, args, if_empty):
    """Replace the configuration with JSON (- for standard input), or set the
    value at a JSON POINTER in it (missing objects on the way are made)."""
    from a0py import Cfg

    if len(args) > 2:
        raise click.UsageError("give JSON, or a POINTER and JSON (quote JSON that holds spaces)")
    pointer = _check_pointer(args[0]) if len(args) == 2 else ""
    if if_empty and pointer:
        raise click.UsageError("--if-empty writes a whole document: leave out POINTER")
    value = _json_argument(args[-1], "JSON")
    with errors_about_topic(target, CFG):
        doc = Cfg(target.topic())
        if if_empty:
            if not doc.write_if_empty(value):
                click.echo(f"a0py: {target.label} has a configuration already: not written", err=True)
        elif pointer:
            doc.view(pointer).set(value)
        else:
            doc.write(value)


@cfg.command()
@click.argument("patch", metavar="JSON|-")
@click.pass_obj
def patch(target, patch):
    """Apply a JSON merge patch (RFC 7386) to the configuration: members of
    an object patch are merged, null removes one. No configuration counts as {}."""
    from a0py import Cfg

    value = _json_argument(patch, "JSON")
    with errors_about_topic(target, CFG):
        Cfg(target.topic()).mergepatch(value)


@cfg.command()
@click.argument("pointer", type=_Pointer(), default="")
@click.option("-n", "count", type=Count(), default=None, metavar="N",
              help="Stop after N versions (the current one counts).")
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS without a new version (an error if -n wanted more).")
@click.pass_obj
def watch(target, pointer, count, timeout):
    """Print the configuration (or the value at POINTER) now, then each new
    version as it is written, one line each. Ctrl-C ends it."""
    from a0py import CfgWatcher
    from a0py.proto.cfg import CfgError, resolve_pointer

    reads = CountedReads(target, count, timeout)
    versions = queue.Queue()
    watcher = None
    try:
        if not reads.topic_appears(CFG, "a configuration to be written",
                                   f"{target.label}: no configuration written within {timeout} s; "
                                   + _set_hint(target)):
            return
        with errors_about_topic(target, CFG):
            watcher = CfgWatcher(target.topic(), versions.put)
        for pkt in reads.items(lambda wait: versions.get(timeout=wait), queue.Empty, "new configuration"):
            try:
                value = resolve_pointer(pkt.json(), pointer, target.label)
            except ValueError as e:  # not JSON, or CfgError: nothing at the pointer
                message = str(e) if isinstance(e, CfgError) else f"version seq {pkt.seq} is not JSON ({e})"
                click.echo(f"a0py: {message if target.name in message else target.label + ': ' + message}",
                           err=True)
                continue
            click.echo(_dump(value, compact=True))
    except KeyboardInterrupt:
        pass
    finally:
        if watcher is not None:
            watcher.close()
