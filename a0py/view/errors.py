"""The exceptions of the live view: :class:`ViewError` and :class:`ProtocolError`,
subclasses of :class:`a0py.A0Error`."""

from ..errors import A0Error

__all__ = ["ProtocolError", "ViewError"]


class ViewError(A0Error):
    """The view cannot start as asked (an address it may not or cannot bind,
    a recording it cannot read)."""


class ProtocolError(ViewError, ValueError):
    """A client message that is not valid; the text is sent back to it as an
    error status (the server goes on)."""
