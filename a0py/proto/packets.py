"""What a0py packets are called outside the binding: the one place for their names.

* :data:`PACKET_ENCODING` (``"a0py/packet"``): the message encoding of a channel whose
  messages are whole a0py packets (headers and payload), in MCAP recordings and in the
  view's Foxglove channels.
* :data:`STANDARD_HEADERS`: the names of the standard headers every packet a
  :class:`a0py.Publisher` writes carries (reserved prefix ``a0_``), in the order of the
  packet's standard block (docs/pubsub.md): monotonic and wall time (ns), the writer's
  id and its count of packets, and the transport seq. The binding (``a0py.Packet``)
  writes them; :data:`TIME_MONO` ... :data:`TRANSPORT_SEQ` name each one.
* :func:`page_vocabulary`: the same, for the view's page, which learns them from the
  server instead of repeating them.
"""

from .._core import STANDARD_HEADERS

__all__ = [
    "HEADER_PREFIX", "PACKET_ENCODING", "STANDARD_HEADERS", "TIME_MONO", "TIME_WALL",
    "TRANSPORT_SEQ", "WRITER_ID", "WRITER_SEQ", "page_vocabulary",
]

#: The message encoding of a channel of whole a0py packets.
PACKET_ENCODING = "a0py/packet"
#: The prefix of the header names a0py reserves.
HEADER_PREFIX = "a0_"

TIME_MONO, TIME_WALL, WRITER_ID, WRITER_SEQ, TRANSPORT_SEQ = STANDARD_HEADERS


def page_vocabulary():
    """``{"packetEncoding": ..., "standardHeaders": [...]}``: what a program that decodes
    packets itself (the view's page) needs to name them, the standard headers in the
    order of the packet's standard block."""
    return {"packetEncoding": PACKET_ENCODING, "standardHeaders": list(STANDARD_HEADERS)}
