"""a0py in a ROS 2 system, end to end (docs/ros2.md):

1. an rclpy camera node (its own process) publishes ``sensor_msgs/Image`` on
   ``/camera/image`` (320x240 rgb8, the frame number in every pixel);
2. the ROS 2 bridge (``a0py.ros2.Ros2Bridge``, in this process) imports it as the a0py
   topic ``camera/image``, CDR bytes unchanged, and exports the a0py topic ``imu``;
3. an a0py subscriber reads each image zero-copy with ``Packet.array()``;
4. this process publishes ``sensor_msgs/Imu`` from plain dicts (``Schema.ros2``, no
   rclpy needed for that), and an rclpy listener (its own process) prints what it gets;
5. ``a0py.recording.Recorder`` records both topics into MCAP, and Spark decodes them
   (``--spark``; needs ``a0py[spark]``).

    python examples/ros2_camera.py [--frames 30] [--out DIR] [--spark]

ROS 2 discovery stays on this host (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``) on a
domain of this run's own unless ``ROS_DOMAIN_ID`` is set. Needs ``pip install
'a0py[ros2]'``.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(os.getpid() % 101 + 1))
os.environ.setdefault("A0PY_ROOT", f"shm:ros2cam{os.getpid()}")

import a0py  # noqa: E402
from a0py.ros2 import Ros2Bridge  # noqa: E402

CAMERA = textwrap.dedent("""
    import sys, time
    import numpy as np, rclpy
    from rclpy.qos import QoSProfile
    from sensor_msgs.msg import Image
    frames = int(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node("camera")
    pub = node.create_publisher(Image, "/camera/image", QoSProfile(depth=frames))
    while pub.get_subscription_count() == 0:
        rclpy.spin_once(node, timeout_sec=0.01)
    for i in range(frames):
        msg = Image(height=240, width=320, encoding="rgb8", step=960)
        msg.header.frame_id = "camera"
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.data = np.full(240 * 320 * 3, i % 256, np.uint8).tobytes()
        pub.publish(msg)
        time.sleep(1 / 30)
    print("camera: published", frames, "images", flush=True)
    time.sleep(5)  # reliable QoS: stay until everything was received
""")

LISTENER = textwrap.dedent("""
    import sys, time, rclpy
    from sensor_msgs.msg import Imu
    count = int(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node("imu_listener")
    got = []
    def on_imu(msg):
        got.append(msg)
        print(f"rclpy listener: imu {msg.header.frame_id} accel z={msg.linear_acceleration.z:.2f}", flush=True)
    node.create_subscription(Imu, "/imu", on_imu, 100)
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.05)
""")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--out", default=None, help="where the recording goes (default: a temp dir)")
    parser.add_argument("--spark", action="store_true", help="also decode the recording with Spark")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="ros2_camera_")
    from a0py.recording import Recorder

    images = []
    bridge = Ros2Bridge(imports=["/camera/**"], exports=["imu"]).start()
    recorder = Recorder(["camera/image", "imu"], out=out)
    rec_thread = threading.Thread(target=recorder.run, args=(args.frames / 30 + 15,), daemon=True)
    try:
        rec_thread.start()
        topic = a0py.Topic("camera/image", size="16M")

        def on_image(pkt):
            pixels = pkt.array()  # a view of the pixels in the ring: no copy
            images.append((pixels.shape, int(pixels[0, 0, 0])))

        with a0py.Subscriber(topic, on_image, init=a0py.INIT_OLDEST), \
                a0py.Publisher("imu", schema=a0py.Schema.ros2("sensor_msgs/msg/Imu")) as imu:
            listener = subprocess.Popen([sys.executable, "-c", LISTENER, "10"], stdout=subprocess.PIPE,
                                        text=True)
            listener.stdout.readline()  # ready
            camera = subprocess.Popen([sys.executable, "-c", CAMERA, str(args.frames)])
            deadline = time.monotonic() + 20
            while bridge.subscribers("imu") == 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # the listener matches the export: it misses nothing
            for i in range(10):
                imu.pub({"header": {"frame_id": f"imu{i}"}, "linear_acceleration": {"z": 9.81},
                         "orientation": {"w": 1.0}})
                time.sleep(0.05)
            lines = listener.communicate(timeout=40)[0].splitlines()
            print(*lines[:3], f"... ({len(lines)} messages)", sep="\n")
            while len(images) < args.frames and time.monotonic() < deadline + 20:
                time.sleep(0.05)
            camera.kill()
            camera.wait()
            status = bridge.status()
        print(f"a0py subscriber: {len(images)} images, shape {images[0][0] if images else None}, "
              f"frame numbers in order: {[n for _, n in images] == list(range(len(images)))}")
    finally:
        recorder.stop()
        rec_thread.join(10)
        bridge.stop()
    print("bridge:", {k: {t: c["imported"] + c["exported"] for t, c in status[k].items()}
                      for k in ("imports", "exports")})
    print("recording in", out, sorted(os.listdir(out)))
    if args.spark:
        spark_summary(out)
    from a0py.proto import list_topics, unlink_topic

    for name in list_topics():
        unlink_topic(name)


def spark_summary(path):
    """The recording read by Spark, each message decoded from its ros2msg schema."""
    from pyspark.sql import functions as F

    import a0py.spark

    spark = a0py.spark.session(master="local[2]", app_name="ros2_camera", **{
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", "spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    # decode=true reads one message type at a time: one read per topic
    def read(topic):
        return spark.read.format("a0").option("decode", "true").option("topics", topic).load(path)

    images = read("camera/image")
    images.select("seq", "message.width", "message.height", "message.encoding", "decode_error").show(3)
    imu = read("imu")
    imu.select("seq", F.col("message.header.frame_id").alias("frame_id"),
               F.col("message.linear_acceleration.z").alias("accel_z"), "decode_error").show(3)
    print(f"spark: {images.count()} images, {imu.count()} imu messages, "
          f"{images.where('decode_error IS NOT NULL').count() + imu.where('decode_error IS NOT NULL').count()} "
          "decode errors")

if __name__ == "__main__":
    main()
