"""The exceptions of the live view: :class:`ViewError` and :class:`ProtocolError`,
subclasses of :class:`a0py.A0Error`, and :class:`ViewCliError`, how ``a0py view``
reports them."""

import click

from ..errors import A0Error

__all__ = ["ProtocolError", "ViewCliError", "ViewError"]


class ViewError(A0Error):
    """The view cannot start as asked (an address it may not or cannot bind,
    a recording it cannot read)."""


class ProtocolError(ViewError, ValueError):
    """A client message that is not valid; the text is sent back to it as an
    error status (the server goes on)."""


class ViewCliError(click.ClickException):
    """An error the user of ``a0py view`` can act on: ``a0py: error: MESSAGE``,
    exit status 1."""

    def show(self, file=None):
        click.echo(f"a0py: error: {self.format_message()}", err=True)
