"""examples/camera.py runs end to end with real processes: a publisher
process of numpy frames as a typed foxglove.RawImage topic, a zero-copy
subscriber that checks each frame, the view advertising the topic to a
Foxglove client, a recording, the recording read back by the `mcap` CLI and
`mcap-protobuf-support` with every frame as published, and its frames'
width, height and encoding as Spark columns (the suite's one session)."""

import importlib.util
import os
import re
import subprocess
import sys

from helpers.procs import REPO


def test_camera_example_publishes_views_records_and_decodes_frames(root, tmp_path, spark):
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
    # Spark: the example's own step, in the suite's session (getOrCreate).
    spec = importlib.util.spec_from_file_location("camera_example", os.path.join(REPO, "examples", "camera.py"))
    camera = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(camera)
    lines = []
    summary = camera.spark(str(tmp_path / "rec"), out=lines.append)
    assert [(r.width, r.height, r.encoding, r.frames) for r in summary] == [(160, 120, "rgb8", recorded)], lines
