"""Slow clients never hold anyone back: each client's send budget, where per
topic the newest messages win and a topic of large messages gives up its
frames before a topic of small ones loses any; the rate limit a client asks
for per subscription; the drops counted per topic. (How much a client that
never reads slows the others is measured by bench/view.py, not asserted.)"""

import asyncio
import json
import time

from helpers.view import Client, PublisherProcess, run

from a0py.view._outbox import DataOutbox


def _drain(box):
    out = []
    while (f := box.pop()) is not None:
        out.append(f)
    return out


def test_the_budget_drops_the_oldest_of_the_topic_holding_most_bytes():
    box = DataOutbox(max_messages=4, max_bytes=1 << 20)
    for f in (b"a1", b"a2", b"a3", b"b1"):
        assert box.put(f, "A" if f[:1] == b"a" else "B") == 0
    assert box.put(b"b2", "B") == 1  # over the count: A holds the most bytes, its oldest goes
    assert box.dropped == {"A": 1}
    assert _drain(box) == [b"a2", b"a3", b"b1", b"b2"]  # the rest in the order they came
    assert (len(box), box.bytes) == (0, 0)


def test_a_large_topic_gives_up_its_frames_before_a_small_one_loses_any():
    box = DataOutbox(max_messages=1000, max_bytes=64 << 10)
    for _ in range(300):
        box.put(b"C" * (16 << 10), "cam")
        for _imu in range(3):
            box.put(b"i" * 20, "imu")
    assert box.dropped["imu"] == 0 and box.dropped["cam"] > 250
    frames = _drain(box)
    kept = 300 - box.dropped["cam"]  # the newest frames, as many as the bytes the IMU leaves allow
    assert frames.count(b"i" * 20) == 900 and frames.count(b"C" * (16 << 10)) == kept >= 1
    assert 900 * 20 + kept * (16 << 10) <= 64 << 10 and box.bytes == 0


def test_a_message_over_the_whole_budget_still_goes_and_dropped_entries_do_not_pile_up():
    box = DataOutbox(max_messages=10, max_bytes=100)
    box.put(b"x" * 500, "big")
    assert len(box) == 1 and box.pop() == b"x" * 500
    for k in range(10_000):  # a client that never reads
        box.put(k.to_bytes(8, "little"), k % 3)
    assert len(box) == 10 and len(box._queue) < 2 * 10 + 64 + 1
    assert sum(box.dropped.values()) == 10_000 - 10


def test_a_client_on_a_slow_link_still_gets_every_imu_message(view, root):
    """A client that reads 3 MB a second subscribes to a 256 KiB camera at 60
    Hz and an IMU at 400 Hz: it gets every IMU message, in order; the camera's
    frames are what it drops, counted per topic; a client that reads at full
    speed loses nothing."""
    size, seconds = 256 << 10, 2.0
    v = view("--queue-bytes", "1M")
    with PublisherProcess() as pub:
        pub.call(op="bytes", topic="t/cam", hex="00" * 8)
        pub.call(op="json", topic="t/imu", objs=[{"i": -1}])

        async def main():
            slow, fast = await Client.open(v.ws_url, max_queue=2), await Client.open(v.ws_url)
            for c in (slow, fast):
                cam, imu, stats = (await c.channel("t/cam")), (await c.channel("t/imu")), \
                    (await c.channel("/a0py/view/stats"))
                await c.subscribe([(1, cam["id"]), (2, imu["id"]), (3, stats["id"])])
            got = {"slow": [], "fast": []}
            last_stats = {}

            async def read(name, c, rate):
                while True:
                    m = await c.ws.recv()
                    if isinstance(m, bytes) and m[0] == 1:
                        sid = int.from_bytes(m[1:5], "little")
                        if sid == 2:
                            got[name].append(json.loads(m[13:])["i"])
                        elif sid == 3:
                            last_stats[name] = json.loads(m[13:])
                    if rate:
                        await asyncio.sleep(len(m) / rate)  # a link of `rate` bytes a second

            readers = [asyncio.create_task(read("slow", slow, 3e6)), asyncio.create_task(read("fast", fast, 0))]
            counts = await asyncio.to_thread(pub.call, op="camera_and_imu", camera="t/cam", imu="t/imu",
                                             size=size, cam_hz=60, imu_hz=400, seconds=seconds)
            ticks = json.loads(counts)["ticks"]
            deadline = time.monotonic() + 30
            while (len(got["slow"]) < ticks + 1 or len(got["fast"]) < ticks + 1) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.5)  # the stats that count the last drops
            for t in readers:
                t.cancel()
            await slow.close()
            await fast.close()
            return ticks, got, last_stats

        ticks, got, stats = run(main())
    assert got["fast"] == list(range(-1, ticks)), "the fast client lost IMU messages"
    assert got["slow"] == list(range(-1, ticks)), f"the slow client lost IMU messages ({len(got['slow'])})"
    assert stats["slow"]["topics"]["t/imu"]["missed"] == 0
    slow_drops = stats["slow"]["droppedByTopic"]
    assert slow_drops.get("t/cam", 0) > 0 and slow_drops.get("t/imu", 0) == 0, slow_drops
    # the one that reads at full speed loses far less (none, but on a loaded machine now and then)
    assert stats["fast"]["droppedByTopic"].get("t/cam", 0) < slow_drops["t/cam"] / 2


def test_a_client_can_ask_for_a_rate_limit_per_topic(view, root):
    with PublisherProcess() as pub:
        pub.call(op="json", topic="t/a", objs=[{"i": -1}])
        pub.call(op="json", topic="t/b", objs=[{"i": -1}])
        v = view()

        async def main():
            c = await Client.open(v.ws_url)
            a, b = await c.channel("t/a"), await c.channel("t/b")
            await c.ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 1, "channelId": a["id"], "maxHz": 5}, {"id": 2, "channelId": b["id"]}]}))
            await c.data(1)
            await c.data(2)
            pub.start(op="rate", topic="t/a", hz=200, seconds=1.0)
            done = asyncio.create_task(asyncio.to_thread(pub.answer))
            got, marked = [], False
            while not got or got[-1][1]["i"] != 10_000:
                if not marked and done.done():  # the burst is over: then a last one
                    assert done.result() == "ok"
                    marked = True
                    done = asyncio.create_task(asyncio.to_thread(pub.call, op="json", topic="t/a",
                                                                 objs=[{"i": 10_000}]))
                _, log, payload = await c.data(1)
                got.append((log, json.loads(payload)))
            await done
            assert len(got) > 3
            span = (got[-1][0] - got[0][0]) / 1e9
            assert len(got) <= 5 * span + 3, (len(got), span)  # at most 5 a second, the newest kept
            # the other topic is not limited
            pub.call(op="json", topic="t/b", objs=[{"i": k} for k in range(100)])
            assert [json.loads((await c.data(2))[2])["i"] for _ in range(100)] == list(range(100))
            await c.ws.send(json.dumps({"op": "subscribe", "subscriptions": [
                {"id": 3, "channelId": b["id"], "maxHz": -1}]}))
            assert "maxHz" in (await c.error())["message"]
            await c.close()

        run(main())
