"""Recordings of topics in MCAP: write, read, replay, describe. Needs no Spark.

* :class:`Recorder` drains live topics into MCAP segments (``a0py record``);
* :class:`Player` publishes a recording back into live topics (``a0py play``);
* :func:`bag_info` describes recordings (``a0py bag info``);
* :class:`SegmentWriter` writes one segment of a0py packets;
* :class:`DecoderFactory` lets the ``mcap`` package's ``iter_decoded_messages``
  decode a0py's own channels (with the protobuf and ROS 2 factories: all).

The public modules the other layers build on: :mod:`.format` (MCAP's
constants, its record layouts and a0py's channels), :mod:`.reader` (the
layout of any MCAP file, from its summary or a scan, and its chunks' records),
:mod:`.decompress` (a chunk decompressed never past its declared size),
:mod:`.paths` (what a path, directory, rosbag2 bag or glob names),
:mod:`.rosbag2` (rosbag2 bag directories), :mod:`.packets` (packets
checked and indexed in bulk), :mod:`.frames` (the seqs and gaps a recording
holds), :mod:`.writer`. The ``a0`` Spark source (:mod:`a0py.spark`) and the
live view read recordings through them.

Names are loaded on first use, so ``import a0py.recording`` costs nothing.
"""

from .errors import EmptyRecordingError, RecordingError, RecordingFormatError, RecordingOptionError

_LAZY = {
    "Recorder": (".recorder", "Recorder"),
    "TopicStats": (".recorder", "TopicStats"),
    "Player": (".player", "Player"),
    "PlayStats": (".player", "PlayStats"),
    "bag_info": (".baginfo", "bag_info"),
    "format_bag_info": (".baginfo", "format_bag_info"),
    "SegmentWriter": (".writer", "SegmentWriter"),
    "DecoderFactory": (".mcap_decoders", "DecoderFactory"),
}

__all__ = ["DecoderFactory", "EmptyRecordingError", "PlayStats", "Player", "Recorder", "RecordingError", "RecordingFormatError",
           "RecordingOptionError",
           "SegmentWriter", "TopicStats", "bag_info", "format_bag_info"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'a0py.recording' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
