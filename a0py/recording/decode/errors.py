"""The exceptions of :mod:`a0py.recording.decode`."""

from ..errors import RecordingOptionError


class DecodeError(ValueError):
    """One message does not decode with its channel's schema: bytes cut
    short or left over, a length past the end, text that is not UTF-8 or
    not JSON, a value of another type than the schema says. The message
    names the schema and what was wrong. :meth:`Decoder.decode` puts this
    text in the row's error instead of raising."""


class DecodeUnsupported(RecordingOptionError):
    """A channel's message encoding (or schema encoding) is one a0py cannot
    decode: raw bytes, flatbuffer, an unknown name. The message names the
    channel and the encoding; reading without decoding still gives its bytes."""


class DecoderMissing(DecodeUnsupported):
    """The library that decodes a channel's encoding (``package``, from
    a0py's extra ``extra``) is not installed here."""

    def __init__(self, message, package, extra):
        super().__init__(message)
        self.package = package
        self.extra = extra


__all__ = ["DecodeError", "DecodeUnsupported", "DecoderMissing"]
