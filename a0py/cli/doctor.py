"""``a0py doctor``: why a0py does not work on this machine, one line a check.

Each check (:mod:`a0py.cli._checks`) prints ``ok``, ``warn`` or ``fail``, what
it found, and on the next line what to do; ``--json`` prints the same as a
list of objects. The exit status is 1 when any check fails, else 0, so a
provisioning script can run it.
"""

import json

import click

from a0py.cli._checks import FAIL, WARN, run_checks

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
_STYLE = {"ok": "green", "warn": "yellow", "fail": "red"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--zenoh", metavar="ENDPOINT",
              help="Also check that a Zenoh endpoint (tcp/HOST:PORT) accepts connections.")
@click.option("--ros2", is_flag=True, help="Also check that ROS 2 discovery stays on this host.")
def doctor(as_json, zenoh, ros2):
    """Check what a0py needs on this machine: /dev/shm, the root, arenas left
    behind or of another format, extras, Java, chromium (and, when asked, a
    Zenoh endpoint and ROS 2 discovery). Exit status 1 if any check fails."""
    findings = run_checks(zenoh=zenoh, ros2=ros2)
    if as_json:
        click.echo(json.dumps([f.as_dict() for f in findings], indent=2))
    else:
        width = max(len(f.check) for f in findings)
        for f in findings:
            mark = click.style(_MARK[f.status], fg=_STYLE[f.status], bold=f.status != "ok")
            click.echo(f"{mark}  {f.check:<{width}}  {f.detail}")
            if f.todo and f.status in (WARN, FAIL):
                click.echo(f"      {'':<{width}}  -> {f.todo}")
        fails = sum(f.status == FAIL for f in findings)
        warns = sum(f.status == WARN for f in findings)
        click.echo(f"{len(findings)} checks: {fails} failed, {warns} warnings")
    if any(f.status == FAIL for f in findings):
        raise SystemExit(1)
