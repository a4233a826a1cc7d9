"""Type stub of the compiled a0py.recording._bulk (see _bulk.pyx)."""

import numpy as np

from .._core import FramePrefix

def scan(
    buf: bytes | bytearray | memoryview,
    starts: np.ndarray,
    lengths: np.ndarray,
    strict: bool = True,
    want_mono: bool = True,
) -> tuple[
    tuple[int, str] | None,
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
]: ...
def gather(
    buf: bytes | bytearray | memoryview, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bytearray, np.ndarray, bytearray, np.ndarray, bytearray]: ...
def gather_slices(
    buf: bytes | bytearray | memoryview, starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, bytearray]: ...
def message_prefix(channel: int, log_time: int) -> FramePrefix: ...
def append_records(
    out: bytearray,
    frames: list[bytes] | list[tuple[int, bytes]],
    seqs: np.ndarray,
    channel: int,
    log_time: int,
    limit: int,
) -> tuple[int, np.ndarray, np.ndarray, int]: ...
def index_records(
    buf: bytearray | memoryview, count: int, packets: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
def record_frames(
    buf: bytes | bytearray | memoryview, start: int, nbytes: int, count: int
) -> list[bytes]: ...
def split_records(
    buf: bytes | bytearray | memoryview, offsets: np.ndarray, payload_channel: int, headers_channel: int,
    payload_out: bytearray | None = None, headers_out: bytearray | None = None, headers_format: int = 0,
) -> tuple[bytearray, int, np.ndarray, np.ndarray, bytearray, int, np.ndarray]: ...
def headers_records(
    buf: bytes | bytearray | memoryview, offsets: np.ndarray, fmt: int,
) -> tuple[bytearray, np.ndarray, np.ndarray]: ...
