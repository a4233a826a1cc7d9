"""Type stub of the compiled a0py.spark._bulk (see _bulk.pyx)."""

import numpy as np

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
