"""Record raw, JSON and ROS 2 topics, then read the recording with the MCAP
documentation's decode loop, no topic filter: every channel decodes,
a typed topic's headers channel included.

    pip install "a0py[ros]"          # mcap, mcap-ros2-support (no ROS install)
    python examples/decode_every_channel.py

a0py.recording.DecoderFactory decodes a0py's own channels (raw packets into
a0py.Packet, JSON into Python values); mcap-ros2-support's factory decodes
the ROS 2 topic and its headers channel (CDR a0py_msgs/msg/PacketHeaders).
A protobuf topic would add mcap-protobuf-support's factory the same way.
"""

import collections
import os
import sys
import tempfile

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory as Ros2Decoders

import a0py
from a0py.proto.topic import unlink_topic
from a0py.recording import DecoderFactory, Recorder

N = 5


def main():
    out = tempfile.mkdtemp(prefix="a0py-decode-")
    os.environ.setdefault("A0PY_ROOT", f"shm:a0py-decode-{os.getpid()}")
    raw, js = a0py.Publisher("demo/raw"), a0py.Publisher("demo/json")
    try:
        # The definition given, so no ROS 2 package need be installed for it.
        ros = a0py.Publisher("demo/ros", schema=a0py.Schema.ros2("std_msgs/msg/String", "string data"))
        for i in range(N):
            raw.pub(b"raw %d" % i)
            js.pub_json({"i": i})
            ros.pub({"data": f"hello {i}"}, headers={"frame": str(i)})
        Recorder(["demo/raw", "demo/json", "demo/ros"], out=out, init="oldest").run(1.0)
    finally:
        for topic in ("demo/raw", "demo/json", "demo/ros"):
            unlink_topic(topic)
    counts = collections.Counter()
    for name in sorted(os.listdir(out)):
        if not name.endswith(".mcap"):
            continue
        with open(os.path.join(out, name), "rb") as f:
            reader = make_reader(f, decoder_factories=[DecoderFactory(), Ros2Decoders()])
            for _schema, channel, _message, value in reader.iter_decoded_messages():
                counts[channel.topic] += 1
                if counts[channel.topic] == 1:
                    print(f"{channel.topic:28} {channel.message_encoding:12} {value!r:.70}")
    for topic, n in sorted(counts.items()):
        print(f"{topic}: {n} messages decoded")
    # five channels: the three topics, and the headers channels of the two typed ones
    return 0 if len(counts) == 5 and set(counts.values()) == {N} else 1


if __name__ == "__main__":
    sys.exit(main())
