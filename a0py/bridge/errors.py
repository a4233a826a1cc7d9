"""The exceptions of the bridge. Every one is a subclass of :class:`a0py.A0Error`."""

from a0py.errors import A0Error, ArgumentError


class BridgeError(A0Error):
    """Base class of the bridge's errors."""


class BridgeConfigError(BridgeError, ArgumentError):
    """The bridge was given something it cannot use: a bad glob, endpoint, prefix, size
    or mode, or a Zenoh configuration file that does not exist or does not parse. The
    message names the argument (or the file) and what was wrong."""


class BridgeStartError(BridgeError):
    """Zenoh refused to open the session (an endpoint already in use, an address that
    does not exist on this machine...). The message gives Zenoh's reason."""


class WireError(BridgeError, ValueError):
    """Something received from the network is not what a bridge sends: a payload that
    is not an a0py packet, an attachment that does not parse, a key that names no
    topic. Counted by the bridge, never raised out of it."""
