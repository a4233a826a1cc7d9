"""Type stub of the compiled a0py.bridge._ingest (see _ingest.pyx)."""

from collections.abc import Callable

from .._core import Deadman, Transport
from .counts import TopicCounts

INGESTED: int
OWN: int
BAD_SAMPLE: int
WRITE_FAILED: int
REFUSED: int
MAX_ORIGINS: int

class TopicIngest:
    @property
    def counts(self) -> TopicCounts | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def transport(self) -> Transport | None: ...
    def __init__(
        self,
        own: bytes,
        counts_of: Callable[[], TopicCounts],
        opener: Callable[[int], tuple[Transport, Deadman | None]],
    ) -> None: ...
    def ingest(self, payload: bytes | bytearray | memoryview, attachment: bytes | None) -> int: ...
    def last_of(self, origin: bytes) -> int | None: ...


class BundleIngest:
    @property
    def error(self) -> str | None: ...
    @property
    def failures(self) -> list[tuple[str, int, str | None]] | tuple[()]: ...
    def __init__(self, own: bytes, resolve: Callable[[bytes], TopicIngest | None]) -> None: ...
    def ingest(self, payload: bytes | bytearray | memoryview, attachment: bytes | None) -> int: ...
