"""The error of the command line: one a user can act on.

Every command turns the :class:`a0py.A0Error` it meets into a :class:`CliError`
(``a0py/cli/_common.py``: ``errors_about``, ``errors_about_topic``), so nothing reaches
the user as a traceback.
"""

import click

__all__ = ["CliError"]


class CliError(click.ClickException):
    """An error the user can act on: ``a0py: error: MESSAGE`` on stderr, exit 1."""

    def show(self, file=None):
        click.echo(f"a0py: error: {self.format_message()}", err=True)
