"""Segments of typed topics (protobuf, ROS 2, JSON) with their headers
channels in the payloads' family, or all ``a0py/packet`` as recordings had
them before: the same frames either way, for the readers to compare."""

import a0py
from a0py.recording import SegmentWriter
from a0py.recording import writer as writer_module
from a0py.recording.headers import headers_channel_for


def typed_segment(path, frames=5):
    """Writes a segment of three typed topics (``s/pb``, ``s/ros``, ``s/js``),
    ``frames`` packets each, user headers included; returns the writer's
    headers formats (its channel id -> format)."""
    from a0py.proto.protobuf_wire import NDARRAY_DESCRIPTOR_SET

    schemas = {"s/pb": a0py.Schema("a0py.NDArray", "protobuf", NDARRAY_DESCRIPTOR_SET),
               "s/ros": a0py.Schema.ros2("std_msgs/msg/String"),
               "s/js": a0py.Schema.json_schema("s.J", {"type": "object", "properties": {"x": {"type": "number"}}})}
    with SegmentWriter(path) as w:
        for i, (topic, schema) in enumerate(schemas.items()):
            w.add_typed_topic(topic, schema)
            packets = [a0py.Packet({"k": f"{topic} {j}", "n": "é"}, b"payload %d" % j).to_bytes()
                       for j in range(frames)]
            w.write_frames(topic, packets, 1000 + i, seqs=[10 * i + j for j in range(frames)])
        return dict(w._headers_format)


def new_and_old_segments(tmp_path, monkeypatch, frames=5):
    """(new, old): the same frames with headers channels in their payloads'
    family, and as ``a0py/packet`` channels (the format before)."""
    new = tmp_path / "new.mcap"
    typed_segment(new, frames)
    with monkeypatch.context() as m:
        m.setattr(writer_module, "headers_channel_for", lambda enc: headers_channel_for("json"))
        old = tmp_path / "old.mcap"
        typed_segment(old, frames)
    return new, old
