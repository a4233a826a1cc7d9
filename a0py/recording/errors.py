"""The exceptions of a0py.recording; every one is a subclass of :class:`a0py.A0Error`."""

from ..errors import A0Error


class RecordingError(A0Error):
    """Base class of the errors about recordings: writing, reading, replay,
    and the Spark source that reads them."""


class RecordingFormatError(RecordingError, ValueError):
    """A file is not a readable MCAP recording: not MCAP at all, empty, or
    damaged (a length or offset outside the file, a CRC mismatch, a chunk that
    does not decompress, a corrupt a0py packet). The message names the file,
    the byte offset and the field. A file merely cut short (no summary, as a
    SIGKILLed recorder leaves it) is not an error: it is read up to its last
    whole chunk."""


class EmptyRecordingError(RecordingFormatError):
    """A file holds no record yet: 0 bytes, part of the MCAP magic, or the
    magic and part of the header record, as a recorder killed between
    creating a segment and flushing its header (or a power loss) leaves it.
    Every reader of a set of recordings skips such a file with a warning and
    counts it; read alone it is this error."""


class RecordingOptionError(RecordingError, ValueError):
    """An option of the recorder, the player or the ``a0`` source is unknown or
    out of range (the message names it and the accepted values)."""


def fail_at(path, offset, what):
    """Raises :class:`RecordingFormatError` for file ``path``: ``what`` is
    wrong at byte ``offset``."""
    raise RecordingFormatError(f"{path}: at byte {offset}: {what}")


__all__ = ["EmptyRecordingError", "RecordingError", "RecordingFormatError", "RecordingOptionError", "fail_at"]
