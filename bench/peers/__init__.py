"""a0py and the libraries it is measured against, across processes.

    python -m bench.peers --help          # the comparison (bench/peers/__main__.py)

One module per peer, one class per way of using it (a subclass where a peer
is measured two ways: iceoryx2 woken by events or polled, zenoh with and
without shared memory, a0py pub/sub pulled or called back). Every class
gives a sender's and a receiver's half (:class:`~bench.peers.harness.Peer`);
the harness drives the same object through every workload: ping-pong
(:func:`run_pingpong`), one-way streams and fan-out (:func:`run_stream`).
A peer's package is imported only when a run needs it; one that is not
installed raises :class:`Missing`.

Run as a module from the repository root, never as a folder or a file:
the modules are named after the libraries they measure, so this folder
must not be on sys.path.
"""

from .a0py_pubsub import A0pyCallback, A0pyPubSub
from .a0py_transport import A0pyTransport
from .alephzero import AlephZero
from .faster_fifo import FasterFifo
from .harness import Missing, Peer, Unsupported, machine, run_pingpong, run_stream, summarize
from .iceoryx2 import Iceoryx2, Iceoryx2Polling
from .mp_pipe import MpPipe
from .mp_queue import MpQueue
from .os_pipe import OsPipe
from .posix_mq import PosixMq
from .pyzmq import Pyzmq
from .shm_ring import ShmRing
from .zenoh import Zenoh, ZenohShm

# Every peer, in the order of the reports: a0py first, then the libraries
# built for this job, the general messaging libraries, the standard
# library, the baseline.
PEERS = {p.key: p for p in (
    A0pyTransport(), A0pyPubSub(), A0pyCallback(), AlephZero(), Iceoryx2(), Iceoryx2Polling(),
    Zenoh(), ZenohShm(), Pyzmq(), MpPipe(), MpQueue(), FasterFifo(), PosixMq(), OsPipe(),
    ShmRing())}

__all__ = ["PEERS", "Missing", "Peer", "Unsupported", "machine", "run_pingpong", "run_stream",
           "summarize"]
