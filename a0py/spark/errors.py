"""The exceptions of a0py.spark: the stream source's data loss. The errors
about the recordings it reads (:class:`RecordingFormatError`,
:class:`RecordingOptionError`) are a0py.recording's."""

from ..recording.errors import RecordingError


class DataLossError(RecordingError):
    """A streaming read found frames evicted before it could read them
    (``failOnDataLoss=true``): the message names the topic and the missing seqs."""


__all__ = ["DataLossError"]
