"""``a0py broker``, ``claim``, ``retract``, ``subscribe``, ``facts``: the shared
fact broker (the commands live beside it, in :mod:`a0py.broker.cli`)."""

from a0py.broker.cli import broker, claim, facts, retract, subscribe

__all__ = ["broker", "claim", "facts", "retract", "subscribe"]
