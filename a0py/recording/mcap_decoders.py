"""``a0py.recording.DecoderFactory``: what lets the ``mcap`` package's
documented loop decode every channel of an a0py recording.

The loop ``make_reader(f, decoder_factories=[...]).iter_decoded_messages()``
raises ``DecoderNotFoundError`` on the first channel no factory decodes. A
typed topic's channels are decoded by the factories of their family
(``mcap_protobuf.decoder.DecoderFactory`` for ``protobuf`` payloads and their
``a0py.PacketHeaders``, ``mcap_ros2.decoder.DecoderFactory`` for ``cdr``
ones and their ``a0py_msgs/msg/PacketHeaders``: :mod:`.headers`); this
factory decodes the rest of what a0py writes:

* ``a0py/packet`` channels (raw topics, and the headers channels of
  ``json`` topics and of recordings made before the headers took their
  payloads' family) into :class:`a0py.Packet` (a headers message: the
  packet with an empty payload);
* ``json`` channels (JSON topics, ``/a0py/gaps``, ``/a0py/json/`` copies)
  into Python values: the ``mcap`` package has no JSON factory of its own.
"""

from __future__ import annotations

import json

from mcap.decoder import DecoderFactory as McapDecoderFactory

from .._core import Packet
from ..proto.packets import PACKET_ENCODING

__all__ = ["DecoderFactory"]


class DecoderFactory(McapDecoderFactory):
    """Decodes ``a0py/packet`` messages into :class:`a0py.Packet` and ``json``
    messages into Python values, for ``mcap.reader.make_reader(f,
    decoder_factories=[a0py.recording.DecoderFactory(), ...])``. A packet
    that does not decode raises :class:`a0py.PacketCorruptError`, JSON that
    does not parse ``ValueError``, when the message is decoded."""

    def decoder_for(self, message_encoding, schema):
        """The decoder of ``message_encoding`` (``a0py/packet`` or ``json``),
        or None for any other (another factory's)."""
        if message_encoding == PACKET_ENCODING:
            return Packet.from_bytes
        if message_encoding == "json":
            return json.loads
        return None
