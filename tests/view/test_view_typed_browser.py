"""Typed topics in the page, in real headless Chromium (as
test_view_browser.py): images published by another process drawn on the
page's canvas with the right colours, protobuf messages shown field by
field."""

import json

import pytest
from helpers.view import PublisherProcess, ViewProcess, expected_rgb
from test_view_browser import WAIT_MS

W, H = 64, 48
# Points to sample: the middle of each quadrant, and the pixels beside the two centre lines.
SAMPLES = [(W // 4, H // 4), (3 * W // 4, H // 4), (W // 4, 3 * H // 4), (3 * W // 4, 3 * H // 4),
           (W // 2 - 1, H // 2 - 1), (W // 2, H // 2 - 1), (W // 2 - 1, H // 2), (W // 2, H // 2)]


def _pixel(page, x, y):
    return page.evaluate("""([x, y]) => Array.from(
        document.getElementById('image').getContext('2d').getImageData(x, y, 1, 1).data)""", [x, y])


def _select(page, topic):
    page.locator(f'#topics tr[data-topic="{topic}"]').click(timeout=WAIT_MS)
    page.wait_for_function(
        f"() => document.querySelector('#topics tr[data-topic=\"{topic}\"]').classList.contains('selected')",
        timeout=WAIT_MS)


@pytest.mark.parametrize("kind", ["rgb8", "bgr8", "mono8", "rgba8_step", "png"])
def test_an_image_published_by_another_process_is_drawn_with_its_colours(root, page, kind):
    topic = f"camera/{kind}"
    with PublisherProcess() as pub, ViewProcess() as view:
        assert pub.call(op="image", topic=topic, kind=kind, w=W, h=H, n=3) == "ok"
        page.goto(view.url)
        _select(page, topic)
        page.wait_for_function(
            f"() => {{ const c = document.getElementById('image');"
            f" return c && c.isConnected && c.dataset.msgOf === {json.dumps(topic)} && c.dataset.drawn"
            f" && c.width === {W} && c.height === {H}; }}", timeout=WAIT_MS)
        assert page.locator("#image").get_attribute("data-error") in (None, "")
        for x, y in SAMPLES:
            assert _pixel(page, x, y) == [*expected_rgb(kind, x, y, W, H), 255], (kind, x, y)
        # the page says it gets images at a bounded rate
        info = page.locator("#topic-info").inner_text()
        assert "at most 15 frames a second" in info
        assert info.startswith("foxglove.RawImage" if kind != "png" else "foxglove.CompressedImage")
        # the fields beside it: the size, not the pixels
        fields = json.loads(page.locator("#messages .msg pre").first.inner_text())
        if kind == "png":
            assert fields["format"] == "png"
        else:
            assert (fields["width"], fields["height"]) == (W, H)
            assert fields["encoding"] == ("rgba8" if kind == "rgba8_step" else kind)
            assert fields["step"] == {"rgb8": 3 * W, "bgr8": 3 * W, "mono8": W, "rgba8_step": 4 * W + 12}[kind]
        assert fields["data"].startswith("<") and fields["data"].endswith(" bytes>")
        page.goto("about:blank")


def test_protobuf_and_array_messages_are_shown_field_by_field(root, page):
    with PublisherProcess() as pub, ViewProcess() as view:
        assert pub.call(op="log_message", topic="robot/log_pb", text="wheel slipping") == "ok"
        assert pub.call(op="array", topic="robot/grid", n=6, shape=[2, 3]) == "ok"
        page.goto(view.url)
        _select(page, "robot/log_pb")
        pre = page.locator("#messages .msg pre").first
        pre.wait_for(timeout=WAIT_MS)
        shown = json.loads(pre.inner_text())
        assert shown == {"message": "wheel slipping", "name": "test", "level": "WARNING", "file": "f.py", "line": 7}
        assert page.locator("#topic-info").inner_text().startswith("foxglove.Log (protobuf), shown field by field")
        # "hex" still shows the message's own bytes
        page.select_option("#render-mode", "hex")
        page.wait_for_function("() => document.querySelector('#messages .msg pre').dataset.mode === 'hex'",
                               timeout=WAIT_MS)
        page.select_option("#render-mode", "auto")
        _select(page, "robot/grid")
        page.wait_for_function(
            "() => { const p = document.querySelector('#messages .msg pre');"
            " return p && p.textContent.includes('shape'); }", timeout=WAIT_MS)
        shown = json.loads(page.locator("#messages .msg pre").first.inner_text())
        assert shown["shape"] == [2, 3]
        page.goto("about:blank")
