"""Type stub of the compiled a0py.proto._ndarray (see _ndarray.pyx)."""

from typing import Any

import numpy as np

from .._core import ArrayHook, LayoutHook

class ArrayViewer:
    def __init__(self, header: bytes, size: int, dtype: np.dtype[Any], shape: tuple[int, ...],
                 strides: tuple[int, ...]) -> None: ...
    def view(self, payload: bytes | memoryview) -> np.ndarray[Any, Any] | None: ...

class PacketArrays(ArrayHook):
    viewer: ArrayViewer | None
    def __init__(self) -> None: ...

class ArrayLayouts(LayoutHook):
    def __init__(self) -> None: ...
    def remember(self, array: np.ndarray[Any, Any], prefix: bytes) -> bool: ...
    def __len__(self) -> int: ...
