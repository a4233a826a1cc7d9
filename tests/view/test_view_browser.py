"""`a0py view` in a real browser: Playwright driving Debian's headless
Chromium (``/usr/bin/chromium``, launched by path: ``playwright install``
cannot download here; ``make test`` installs the ``chromium`` package when it
is missing). A missing browser fails these tests, it never skips them.

The live test takes the screenshot shown in docs/view.md: into docs/view.png
when ``A0PY_UPDATE_SCREENSHOT=1``, else into the test's temporary folder (so
a test run leaves the working tree as it was)."""

import json
import os
import re
import time

import pytest
from helpers.procs import REPO
from helpers.view import PERIOD_NS, T0_NS, PublisherProcess, ViewProcess, odom, write_recording

DOCS = os.path.join(REPO, "docs")
WAIT_MS = 15_000


# The number of pixels of the plot canvas within a small distance of a colour
# (#rrggbb), in the columns from x0 to x1 (fractions of its width).
_COUNT_PIXELS = """([color, x0, x1]) => {
    const c = document.getElementById('plot');
    const c0 = Math.floor(c.width * x0), c1 = Math.ceil(c.width * x1);
    const d = c.getContext('2d').getImageData(c0, 0, c1 - c0, c.height).data;
    const r = parseInt(color.slice(1, 3), 16), g = parseInt(color.slice(3, 5), 16), b = parseInt(color.slice(5, 7), 16);
    let n = 0;
    for (let i = 0; i < d.length; i += 4)
        if (d[i + 3] > 200 && Math.abs(d[i] - r) < 40 && Math.abs(d[i + 1] - g) < 40 && Math.abs(d[i + 2] - b) < 40) n++;
    return n;
}"""


def _wait_series_pixels(page, color, more_than, x0=0.0, x1=1.0):
    """Waits until the plot shows more than ``more_than`` pixels of ``color``
    in the columns from ``x0`` to ``x1`` (the page draws on animation frames)."""
    page.wait_for_function(f"(args) => ({_COUNT_PIXELS})(args) > {more_than}", arg=[color, x0, x1],
                           timeout=WAIT_MS)


def test_live_topic_appears_with_its_rate_and_values_and_is_plotted(root, page, tmp_path):
    with PublisherProcess() as pub, PublisherProcess() as other, ViewProcess() as view:
        pub.start(op="rate", topic="robot/odom", hz=50, seconds=60.0)
        other.call(op="bytes", topic="camera/raw", hex="ffd8ffe000104a4649460001" * 8)
        other.start(op="rate", topic="robot/imu", hz=20, seconds=60.0)
        page.goto(view.url)
        for name in ("camera/raw", "robot/imu"):
            page.locator(f'#topics tr[data-topic="{name}"]').wait_for(timeout=WAIT_MS)
        row = page.locator('#topics tr[data-topic="robot/odom"]')
        row.wait_for(timeout=WAIT_MS)
        assert page.locator("#conn").get_attribute("data-state") == "connected"
        # a plausible rate once the server's 2 s window has filled
        page.wait_for_function(
            "() => { const r = document.querySelector('#topics tr[data-topic=\"robot/odom\"]');"
            " return r && Number(r.dataset.rate) > 30 && Number(r.dataset.rate) < 70; }", timeout=WAIT_MS)
        rate = float(row.locator("td.rate").inner_text())
        assert 30 < rate < 70
        row.click()
        # the page applies the selection on its next drawn frame, not inside the click
        page.wait_for_function(
            "() => document.querySelector('#topics tr[data-topic=\"robot/odom\"]').classList.contains('selected')",
            timeout=WAIT_MS)
        assert page.locator("#topic-name").inner_text() == "robot/odom"
        # its latest values: the newest message's JSON, moving on
        first = page.locator("#messages .msg pre").first
        first.wait_for(timeout=WAIT_MS)
        i1 = json.loads(first.inner_text())["i"]
        page.wait_for_function(
            f"() => JSON.parse(document.querySelector('#messages .msg pre').textContent).i > {i1 + 10}",
            timeout=WAIT_MS)
        shown = json.loads(page.locator("#messages .msg pre").first.inner_text())
        assert set(shown) == {"i", "x", "pose"} and shown["x"] == pytest.approx(odom_x(shown["i"]))
        cells = page.locator("#messages .msg").first.locator("table.headers td").all_text_contents()
        headers = dict(zip(cells[::2], cells[1::2]))
        assert headers["content-type"] == "application/json" and int(headers["a0_writer_seq"]) > 0
        assert abs(int(headers["a0_time_wall"]) / 1e9 - time.time()) < 60
        # plot x through the field picker; the canvas draws the series' color
        page.wait_for_function("() => [...document.querySelectorAll('#field option')].some(o => o.value === 'x')",
                               timeout=WAIT_MS)
        page.select_option("#field", "x")
        page.click("#add-field")
        page.wait_for_function("() => Number(document.getElementById('plot').dataset.points) > 50",
                               timeout=WAIT_MS)
        _wait_series_pixels(page, "#2563eb", 300)
        # clicking a number in a message plots it too
        page.hover("#messages")  # the pointer over the messages holds them still
        page.locator('#messages .msg').first.locator('.num[data-path="pose.theta"]').click()
        page.mouse.move(5, 5)
        page.wait_for_function("() => a0pyView.state.series.length === 2", timeout=WAIT_MS)
        _wait_series_pixels(page, "#dc2626", 50)
        shot = (os.path.join(DOCS, "view.png") if os.environ.get("A0PY_UPDATE_SCREENSHOT") == "1"
                else str(tmp_path / "view.png"))
        page.screenshot(path=shot)
        assert os.path.getsize(shot) > 10_000
        # pause freezes the page: ten more messages arrive (the page counts each one it
        # receives of the selected topic), none is shown; resume goes on
        page.click("#pause")
        frozen = page.locator("#messages .msg pre").first.inner_text()
        received = page.evaluate("a0pyView.state.latencyN")
        page.wait_for_function(f"() => a0pyView.state.latencyN >= {received + 10}", timeout=WAIT_MS)
        page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
        assert page.locator("#messages .msg pre").first.inner_text() == frozen
        page.click("#pause")
        page.wait_for_function(
            f"() => document.querySelector('#messages .msg pre').textContent !== {json.dumps(frozen)}",
            timeout=WAIT_MS)
        page.goto("about:blank")  # leave before the view stops (no reconnect errors)


def odom_x(k):
    import math

    return math.sin(k / 10.0)


def test_recording_seek_to_the_middle_shows_that_time(tmp_path, root, page):
    rec = tmp_path / "rec.mcap"
    write_recording(str(rec), str(tmp_path / "topics"), n=1000)
    with ViewProcess(str(rec)) as view:
        page.goto(view.url)
        page.locator("#player").wait_for(state="visible", timeout=WAIT_MS)
        assert page.locator("#source").inner_text() == "recording"
        page.locator('#topics tr[data-topic="robot/odom"]').click(timeout=WAIT_MS)
        first = page.locator("#messages .msg pre").first
        first.wait_for(timeout=WAIT_MS)
        assert json.loads(first.inner_text()) == odom(0)  # paused at the start
        # drag the slider to the middle (the input's value and its change event)
        page.eval_on_selector("#slider", "s => { s.value = '500'; s.dispatchEvent(new Event('change')); }")
        mid = T0_NS + (999 * PERIOD_NS) // 2  # between messages 499 and 500
        expected = (mid - T0_NS) // PERIOD_NS
        page.wait_for_function(
            f"() => {{ const p = document.querySelector('#messages .msg pre');"
            f" return p && JSON.parse(p.textContent).i === {expected}; }}", timeout=WAIT_MS)
        assert json.loads(page.locator("#messages .msg pre").first.inner_text()) == odom(expected)
        assert "4.995 s of 9.990 s" in page.locator("#clock").inner_text()
        # play at 10x: the page moves on through later messages
        page.select_option("#speed", "10")
        page.click("#play")
        page.wait_for_function(
            f"() => JSON.parse(document.querySelector('#messages .msg pre').textContent).i > {expected + 100}",
            timeout=WAIT_MS)
        assert page.locator("#play").inner_text() in ("Pause", "Play")
        page.goto("about:blank")


def test_recording_opens_listing_every_channel_with_one_play_button_and_the_plot_over_it(tmp_path, root, page):
    rec = tmp_path / "rec.mcap"
    write_recording(str(rec), str(tmp_path / "topics"), n=1000, late=True)
    with ViewProcess(str(rec)) as view:
        page.goto(view.url)
        page.locator("#player").wait_for(state="visible", timeout=WAIT_MS)
        # every channel is listed at once, paused at the start: robot/late begins at 6 s,
        # /foreign/silent has no message at all
        for name in ("robot/odom", "/foreign/pose", "robot/late", "/foreign/silent"):
            page.locator(f'#topics tr[data-topic="{name}"]').wait_for(timeout=WAIT_MS)
        assert page.evaluate("a0pyView.state.playback.status") == 1
        # one Play button: the player's (the bar's Pause is the live page's)
        play_buttons = page.locator("button:visible", has_text=re.compile(r"^(Play|Pause|Resume)$"))
        assert play_buttons.count() == 1 and play_buttons.first.get_attribute("id") == "play"
        assert page.locator("#pause").is_hidden()
        # the clock at the start
        page.wait_for_function("() => document.getElementById('clock').textContent.includes(' s of ')",
                               timeout=WAIT_MS)
        assert "(0.000 s of 9.990 s)" in page.locator("#clock").inner_text()
        # a field plotted over the whole recording at once, while still paused at the start
        page.locator('#topics tr[data-topic="robot/odom"]').click()
        page.wait_for_function("() => [...document.querySelectorAll('#field option')].some(o => o.value === 'x')",
                               timeout=WAIT_MS)
        page.select_option("#field", "x")
        page.click("#add-field")
        page.wait_for_function("() => Number(document.getElementById('plot').dataset.points) === 1000",
                               timeout=WAIT_MS)
        assert page.locator("#window").input_value() == "all"
        # drawn across the plot: the series' colour in its left and its right third
        _wait_series_pixels(page, "#2563eb", 100, 0.1, 0.4)
        _wait_series_pixels(page, "#2563eb", 100, 0.7, 1.0)
        assert page.evaluate("a0pyView.state.playback.status") == 1
        # a channel with no message yet: its fields come from its schema, its series from 6 s on
        page.locator('#topics tr[data-topic="robot/late"]').click()
        page.wait_for_function(
            "() => [...document.querySelectorAll('#field option')].some(o => o.value === 'late')", timeout=WAIT_MS)
        page.select_option("#field", "late")
        page.click("#add-field")
        page.wait_for_function("() => Number(document.getElementById('plot').dataset.points) === 1400",
                               timeout=WAIT_MS)
        # play to the end at 10x: the clock ends at the end; the plot keeps the whole series
        page.select_option("#speed", "10")
        page.click("#play")
        page.wait_for_function("() => a0pyView.state.playback.status === 3", timeout=WAIT_MS)
        page.wait_for_function("() => document.getElementById('clock').textContent.includes('(9.990 s of 9.990 s)')",
                               timeout=WAIT_MS)
        assert page.locator("#plot").get_attribute("data-points") == "1400"
        assert page.locator("#play").inner_text() == "Play"
        # once ended, Play starts again from the start
        page.select_option("#speed", "1")
        page.click("#play")
        page.wait_for_function("() => a0pyView.state.playback.status === 0", timeout=WAIT_MS)
        assert page.locator("#play").inner_text() == "Pause"
        assert float(re.search(r"\(([\d.]+) s of", page.locator("#clock").inner_text()).group(1)) < 9.0
        page.goto("about:blank")


def test_the_pages_codec_reads_a_packet_made_by_python_with_the_layout_the_server_sent(root, page):
    """The page builds its packet codec from the layout in the server's
    serverInfo (a0py._core.PACKET_LAYOUT, from the C header): it reads a packet
    a Publisher wrote as a0py.Packet reads it, finds the payload without the
    headers, and refuses a corrupt or a truncated packet."""
    import a0py
    from a0py._core import PACKET_LAYOUT

    topic = a0py.Topic("codec/check")
    with a0py.Publisher(topic) as pub, a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST) as sub:
        pub.pub(b"payload \x00\xff", headers=[("k", "v"), ("k", "w"), ("\u00e9", "\u00fc")])
        pkt = sub.read_blocking(timeout=5)
    data = pkt.to_bytes()
    at = PACKET_LAYOUT["payload_size_off"]
    corrupt = bytearray(data)
    corrupt[at:at + 8] = (len(pkt.payload) + 1).to_bytes(8, "little")
    with ViewProcess() as view:
        page.goto(view.url)
        page.wait_for_function("() => a0pyView.state.codec !== null", timeout=WAIT_MS)
        read = """([bytes, skip]) => {
            const buf = new Uint8Array([...new Array(skip).fill(0), ...bytes]).buffer;
            const codec = a0pyView.state.codec, fast = codec.payload(buf, skip);
            try {
                const p = codec.decode(buf, skip);
                return {id: p.id, headers: p.headers, payload: Array.from(p.payload), fast: fast && Array.from(fast)};
            } catch (e) { return {error: e.message, fast}; }
        }"""
        # at an offset in its buffer, as a packet is in a message
        got = page.evaluate(read, [list(data), 13])
        assert got == {"id": pkt.id, "headers": [list(h) for h in pkt.headers],
                       "payload": list(pkt.payload), "fast": list(pkt.payload)}
        assert [h[0] for h in got["headers"][:5]] == list(a0py.STANDARD_HEADERS)
        assert page.evaluate(read, [list(corrupt), 0]) == {"error": "corrupt a0py packet", "fast": None}
        short = data[:PACKET_LAYOUT["index_off"] - 1]
        assert page.evaluate(read, [list(short), 0]) == {"error": "not an a0py packet", "fast": None}
        page.goto("about:blank")
