"""examples/camera.py runs end to end (every step but Spark) with real
processes: a publisher process of numpy frames as a typed foxglove.RawImage
topic, a zero-copy subscriber that checks each frame, the view advertising
the topic to a Foxglove client, a recording, and the recording read back by
the `mcap` CLI and `mcap-protobuf-support` with every frame as published."""

import os
import re
import subprocess
import sys

from helpers.procs import REPO


def test_camera_example_publishes_views_records_and_decodes_frames(root, tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "examples", "camera.py"), "all", "--seconds", "2", "--hz", "15",
         "--width", "160", "--height", "120", "--out", str(tmp_path / "rec")],
        check=False, capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    text = out.stdout
    assert "NOT as published" not in text
    assert re.search(r"frame \d+: 160x120 foxglove\.RawImage, .* as published", text), text
    assert re.search(r"read 10 frames in place \(zero-copy\)", text), text
    assert re.search(r"advertises 'camera' as foxglove\.RawImage \(protobuf, schema \d+ B\); a frame arrived: "
                     r"160x120 rgb8", text), text
    recorded = int(re.search(r"recorded (\d+) frames of 'camera'", text).group(1))
    assert recorded >= 10  # 2 s at 15 Hz
    assert re.search(r"\(1\) camera\s+\d+ msgs .*: foxglove\.RawImage \[protobuf\]", text), text
    assert "mcap cat --json: " in text and "the first is 160x120 rgb8 (step 480)" in text
    assert f"mcap-protobuf-support decoded {recorded} frames (RawImage), each as published" in text
