"""The error of the command line: one a user can act on.

Every command turns the :class:`a0py.A0Error` it meets into a :class:`CliError`
(``a0py/cli/_common.py``: ``errors_about``, ``errors_about_topic``), so nothing reaches
the user as a traceback.
"""

import click

__all__ = ["CliError", "run_command"]


class CliError(click.ClickException):
    """An error the user can act on: ``a0py: error: MESSAGE`` on stderr, exit 1."""

    def show(self, file=None):
        click.echo(f"a0py: error: {self.format_message()}", err=True)


def run_command(command, argv, prog_name, *, quiet_interrupt=False):
    """Run the click ``command`` on ``argv`` as a program would and return its
    exit status (the command's own when it returns an int, else 0): a click
    error is printed (status 2, or 1 for a :class:`CliError`), never raised; Ctrl-C
    prints ``a0py: interrupted`` (status 130), or ends it with 0 when
    ``quiet_interrupt`` (a server that runs until stopped)."""
    try:
        status = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort:
        if quiet_interrupt:
            return 0
        click.echo("a0py: interrupted", err=True)
        return 130
    return status if isinstance(status, int) else 0
