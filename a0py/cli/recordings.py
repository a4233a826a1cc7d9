"""``a0py record``, ``a0py play``, ``a0py bag info``: MCAP recordings of topics
(the commands live beside the recorder, in :mod:`a0py.recording.cli`)."""

from a0py.recording.cli import bag, play, record

__all__ = ["bag", "play", "record"]
