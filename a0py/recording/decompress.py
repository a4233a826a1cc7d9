"""MCAP, bounded decompression: a chunk's records decompressed to the size
it declares and never further.

Invariant: no buffer is sized by a length the file has not backed with
bytes. A chunk's declared uncompressed size is first bounded by what its
compressed bytes can give with its codec (:data:`MAX_RATIO`) and by
:data:`~a0py.recording.format.MAX_CHUNK_SIZE`; then the codec is driven
in pieces of at most 64 MiB up to that size plus one byte, so a chunk that
lies about its size is a :class:`RecordingFormatError` naming the file and
the byte offset, never a huge allocation.
"""

from __future__ import annotations

from .errors import RecordingFormatError, fail_at
from .format import MAX_CHUNK_SIZE

# The most a codec can expand its input: an lz4 sequence extends a match by
# 255 bytes per input byte; a zstd RLE block is 4 bytes for 128 KiB. A chunk
# that claims more than its records can give is damaged.
MAX_RATIO = {"zstd": 32768, "lz4": 256, "": 1}
_PIECE = 64 << 20  # decompressed at most this much per step


def check_usize(path, offset, what, compression, csize, usize):
    """Checks the uncompressed size ``usize`` a chunk (or its index entry,
    ``what``) declares for ``csize`` bytes of ``compression`` records: at
    most what that codec can give (:data:`MAX_RATIO`) and at most
    :data:`~a0py.recording.format.MAX_CHUNK_SIZE`. Raises
    :class:`RecordingFormatError` naming ``path`` and ``offset`` otherwise."""
    if usize > MAX_CHUNK_SIZE:
        fail_at(path, offset, f"{what}: uncompressed_size {usize} above {MAX_CHUNK_SIZE} (chunks above 2 GiB are "
              "not supported)")
    ratio = MAX_RATIO.get(compression)
    if ratio is not None and usize > csize * ratio:
        fail_at(path, offset, f"{what}: uncompressed_size {usize} from {csize} bytes of {compression or 'uncompressed'} "
              f"records: more than the codec can give (at most {ratio}x)")


def _bounded_zstd(data, size, path, offset):
    import zstandard

    declared = zstandard.frame_content_size(data)
    if declared not in (-1, size):  # -1: the frame does not say
        fail_at(path, offset, f"chunk record: its zstd frame declares {declared} bytes of content, its "
              f"uncompressed_size {size}: the chunk is damaged")
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    pieces = []
    got = 0
    while got <= size:
        piece = reader.read(min(size + 1 - got, _PIECE))
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return pieces


def _bounded_lz4(data, size):
    import lz4.frame

    pieces = []
    got = 0
    data = bytes(data)
    while data and got <= size:
        d = lz4.frame.LZ4FrameDecompressor()
        piece = d.decompress(data, max_length=min(size + 1 - got, _PIECE))
        while True:
            pieces.append(piece)
            got += len(piece)
            if d.eof or got > size or (not piece and d.needs_input):
                break
            piece = d.decompress(b"", max_length=min(size + 1 - got, _PIECE))
        if not d.eof:
            if got <= size:
                raise ValueError("the lz4 frame ends early")
            break
        data = d.unused_data  # a further frame, if any
    return pieces


def decompress(data, compression, size, path, offset):
    """The records of a chunk: ``data`` decompressed to exactly ``size``
    bytes, never more. Raises :class:`RecordingFormatError` naming ``path``
    and ``offset`` for a chunk whose records give more or fewer bytes (or
    whose zstd frame declares another size: found without decompressing past
    ``size`` + 1 bytes), that does not decompress, or whose compression is
    not zstd, lz4 or none (``""``)."""
    check_usize(path, offset, "chunk record", compression, len(data), size)
    try:
        if compression == "":
            out = data
        elif compression == "zstd":
            pieces = _bounded_zstd(data, size, path, offset)
            out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        elif compression == "lz4":
            pieces = _bounded_lz4(data, size)
            out = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        else:
            fail_at(path, offset, f"chunk compression {compression!r} is not supported (zstd, lz4 or none)")
    except RecordingFormatError:
        raise
    except MemoryError:
        raise
    except Exception as e:  # the codecs raise their own classes for damaged input
        fail_at(path, offset, f"{compression} chunk does not decompress ({type(e).__name__}: {e}): the chunk is damaged")
    if len(out) != size:
        what = "more than" if len(out) > size else f"{len(out)} bytes,"
        fail_at(path, offset, f"chunk record: the records decompress to {what} the uncompressed_size of {size} "
              "bytes it declares: the chunk is damaged")
    return out
