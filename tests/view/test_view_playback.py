"""`a0py view FILE.mcap` as a Foxglove WebSocket server of a recording: the
view runs in its own process, a plain `websockets` client speaks the protocol
(subprotocol ``foxglove.sdk.v1``) to it; where foxglove-sdk (the `foxglove`
extra) is installed, its own server is run beside it as the reference.

What is pinned: the ``playbackControl`` capability (its current name) with the
recording's range; every channel advertised at connect, whatever the playback
time; one clock (the recording's log time) for message data, ``time``
messages, playback states and the stats channel, each ``time`` message after
the messages it covers; playback control requests answered as the reference
server answers them; ``a0py.fetchSeries``; a path that does not exist."""

import asyncio
import json
import os
import struct
import subprocess
import sys
import textwrap
import uuid

import pytest
from helpers.procs import REPO
from helpers.view import (
    LATE_FROM,
    PERIOD_NS,
    T0_NS,
    ViewProcess,
    late_value,
    odom,
    write_recording,
)
from websockets.asyncio.client import connect

from a0py.proto import topic as tp
from a0py.view import _protocol as P

MSG_S = 10.0
END_NS = T0_NS + 999 * PERIOD_NS
MID_NS = (T0_NS + END_NS) // 2  # between messages 499 and 500


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """1000 steps at 100 Hz: robot/odom (a0py packets) every step,
    /foreign/pose every 10th, robot/late from step LATE_FROM on, and
    /foreign/silent never; in 4 KiB chunks (dozens of them)."""
    d = tmp_path_factory.mktemp("rec")
    path = d / "rec.mcap"
    write_recording(str(path), str(d / "topics"), n=1000, late=True)
    return path


@pytest.fixture
def view(recording, monkeypatch):
    monkeypatch.setenv("A0PY_ROOT", f"shm:a0pyvp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    with ViewProcess(str(recording)) as v:
        yield v
    tp.close_arenas()


def control(command, speed=1.0, seek=None, rid="r"):
    """A playback control request: opcode 3, u8 command, f32 speed, u8
    had-seek, u64 seek time, u32 length + request id."""
    r = rid.encode()
    return struct.pack("<BBfBQI", P.CLIENT_OP_PLAYBACK_CONTROL, command, speed, seek is not None,
                       seek or 0, len(r)) + r


def parse_state(frame):
    """A playback state frame as (status, time, speed, did_seek, request id)."""
    status, t, speed, did_seek, n = struct.unpack_from("<BQfBI", frame, 1)
    return status, t, speed, did_seek, bytes(frame[19:19 + n]).decode()


class Peer:
    """A protocol client that keeps everything it gets, in order: ``frames``
    holds ("text", dict) and ("data", sub id, log time, payload), ("time",
    ns) and ("state", tuple) items."""

    def __init__(self, ws):
        self.ws = ws
        self.frames = []
        self.channels = {}

    @classmethod
    async def open(cls, url):
        return cls(await connect(url, subprotocols=[P.SUBPROTOCOL], max_size=None))

    def _keep(self, m):
        if isinstance(m, str):
            m = json.loads(m)
            if m.get("op") == "advertise":
                for ch in m["channels"]:
                    self.channels[ch["topic"]] = ch
            item = ("text", m)
        elif m[0] == P.OP_MESSAGE_DATA:
            sid, log = struct.unpack_from("<IQ", m, 1)
            item = ("data", sid, log, m[13:])
        elif m[0] == P.OP_TIME:
            item = ("time", struct.unpack_from("<Q", m, 1)[0])
        elif m[0] == P.OP_PLAYBACK_STATE:
            item = ("state", parse_state(m))
        else:
            item = ("other", m)
        self.frames.append(item)
        return item

    async def until(self, pred, what, timeout=MSG_S):
        """Reads until a frame satisfies ``pred``; returns it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                pytest.fail(f"timed out waiting for {what}; last frames: {self.frames[-5:]}")
            try:
                item = self._keep(await asyncio.wait_for(self.ws.recv(), left))
            except TimeoutError:
                pytest.fail(f"timed out waiting for {what}; last frames: {self.frames[-5:]}")
            if pred(item):
                return item

    async def quiet(self, seconds=0.3):
        """Reads whatever comes for ``seconds``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            try:
                self._keep(await asyncio.wait_for(self.ws.recv(), left))
            except TimeoutError:
                return

    async def state(self, rid=None, what="a playback state"):
        item = await self.until(lambda f: f[0] == "state" and (rid is None or f[1][4] == rid), what)
        return item[1]

    async def text(self, op):
        return (await self.until(lambda f: f[0] == "text" and f[1].get("op") == op, f"a {op!r} message"))[1]

    async def send_json(self, obj):
        await self.ws.send(json.dumps(obj))

    async def subscribe(self, pairs):
        await self.send_json({"op": "subscribe", "subscriptions": [{"id": s, "channelId": c} for s, c in pairs]})

    def states(self):
        return [f[1] for f in self.frames if f[0] == "state"]

    async def close(self):
        await self.ws.close()


def run(coro):
    return asyncio.run(coro)


def test_recording_announces_playback_control_and_its_range(view):
    async def main():
        c = await Peer.open(view.ws_url)
        info = await c.text("serverInfo")
        # the capability's name since 2026-02; the older names get no playback bar in the current app
        assert set(info["capabilities"]) == {"playbackControl", "time"}
        assert info["dataStartTime"] == {"sec": T0_NS // 10**9, "nsec": T0_NS % 10**9}
        assert info["dataEndTime"] == {"sec": END_NS // 10**9, "nsec": END_NS % 10**9}
        await c.close()

    run(main())


def test_every_channel_is_advertised_at_connect_with_its_schema(view):
    async def main():
        c = await Peer.open(view.ws_url)
        await c.text("serverInfo")
        adv = await c.text("advertise")  # the first advertise, before any playback
        topics = {ch["topic"]: ch for ch in adv["channels"]}
        # robot/late's first message is 600 steps (many chunks) in; /foreign/silent has none
        assert set(topics) == {"/a0py/view/stats", "robot/odom", "/foreign/pose", "robot/late", "/foreign/silent"}
        late = topics["robot/late"]
        assert late["encoding"] == "json" and late["schemaEncoding"] == "jsonschema"
        assert json.loads(late["schema"])["properties"] == {"late": {"type": "integer"},
                                                            "ok": {"type": "boolean"}}
        assert topics["/foreign/silent"]["encoding"] == "json"
        assert len({ch["id"] for ch in adv["channels"]}) == 5
        # then the playback state (paused at the start) and the time, on the recording's clock
        assert await c.state() == (P.PLAYBACK_PAUSED, T0_NS, 1.0, 0, "")
        t = await c.until(lambda f: f[0] == "time", "the time")
        assert t == ("time", T0_NS)
        await c.close()

    run(main())


def test_messages_times_states_and_stats_share_the_recordings_clock(view):
    async def main():
        c = await Peer.open(view.ws_url)
        await c.text("serverInfo")
        await c.text("advertise")
        ids = {t: ch["id"] for t, ch in c.channels.items()}
        await c.subscribe([(1, ids["robot/odom"]), (2, ids["/a0py/view/stats"]), (3, ids["robot/late"])])
        await c.ws.send(control(P.PLAY, speed=10.0, rid="go"))
        await c.state("go")
        await c.until(lambda f: f[0] == "state" and f[1][0] == P.PLAYBACK_ENDED, "the end", timeout=30)
        await c.quiet()
        times = [f[1] for f in c.frames if f[0] == "time"]
        odom_logs = [f[2] for f in c.frames if f[0] == "data" and f[1] == 1]
        stats_logs = [f[2] for f in c.frames if f[0] == "data" and f[1] == 2]
        states = c.states()
        assert len(times) > 5 and times == sorted(times) and times[-1] == END_NS
        assert odom_logs == [T0_NS + k * PERIOD_NS for k in range(1000)]  # the message at the start, then all
        assert stats_logs, "no stats message while playing"
        # every timestamp is in the recording's range: none from the wall clock
        for t in times + odom_logs + stats_logs + [s[1] for s in states]:
            assert T0_NS <= t <= END_NS, t
        # a time message comes after every message it covers (a subscription's first message is the
        # channel's latest, at or before the time already sent)
        last_time = None
        first = set()
        for f in c.frames:
            if f[0] == "time":
                last_time = f[1]
            elif f[0] == "data" and f[1] in (1, 3):
                if f[1] in first and last_time is not None:
                    assert f[2] > last_time, (f[2], last_time)
                first.add(f[1])
        late_seen = [json.loads(f[3]) for f in c.frames if f[0] == "data" and f[1] == 3]
        assert late_seen == [late_value(k) for k in range(LATE_FROM, 1000)]
        await c.close()

    run(main())


def test_playback_control_requests_are_answered_as_the_protocol_says(view):
    async def main():
        a = await Peer.open(view.ws_url)
        b = await Peer.open(view.ws_url)
        for c in (a, b):
            await c.text("advertise")
            await c.state()
        ids = {t: ch["id"] for t, ch in a.channels.items()}
        await a.subscribe([(1, ids["robot/odom"]), (2, ids["robot/late"])])
        # seek (paused): one state with the request id, to every client, then each channel's last message
        await a.ws.send(control(P.PAUSE, seek=MID_NS, rid="seek-1"))
        for c in (a, b):
            assert await c.state("seek-1") == (P.PLAYBACK_PAUSED, MID_NS, 1.0, 1, "seek-1")
        await a.quiet()
        after = a.frames[next(i for i, f in enumerate(a.frames) if f[0] == "state" and f[1][4] == "seek-1"):]
        data = [(f[1], f[2], json.loads(f[3])) for f in after if f[0] == "data"]
        # robot/late has no message before step 600: nothing of it
        assert data == [(1, T0_NS + 499 * PERIOD_NS, odom(499))]
        # a speed out of range is clamped, and the state says so
        await a.ws.send(control(P.PAUSE, speed=1e6, rid="fast"))
        assert await b.state("fast") == (P.PLAYBACK_PAUSED, MID_NS, 100.0, 0, "fast")
        # a seek past the end is clamped to the end
        await a.ws.send(control(P.PAUSE, speed=1.0, seek=END_NS + 10**12, rid="far"))
        assert await a.state("far") == (P.PLAYBACK_PAUSED, END_NS, 1.0, 1, "far")
        # playing from there ends at once; the end is a state of the server's own (no request id)
        await a.ws.send(control(P.PLAY, rid="play-end"))
        assert (await a.state("play-end"))[0] == P.PLAYBACK_PLAYING
        ended = await a.until(lambda f: f[0] == "state" and f[1][0] == P.PLAYBACK_ENDED, "the end")
        assert ended[1] == (P.PLAYBACK_ENDED, END_NS, 1.0, 0, "")
        # ended stays ended for play and pause; a seek leaves it
        await a.ws.send(control(P.PLAY, rid="again"))
        assert await a.state("again") == (P.PLAYBACK_ENDED, END_NS, 1.0, 0, "again")
        await a.ws.send(control(P.PAUSE, rid="pause-end"))
        assert await a.state("pause-end") == (P.PLAYBACK_ENDED, END_NS, 1.0, 0, "pause-end")
        await a.ws.send(control(P.PLAY, speed=2.0, seek=T0_NS, rid="restart"))
        assert await a.state("restart") == (P.PLAYBACK_PLAYING, T0_NS, 2.0, 1, "restart")
        await a.ws.send(control(P.PAUSE, speed=2.0, rid="hold"))
        held = await b.state("hold")
        assert held[0] == P.PLAYBACK_PAUSED and T0_NS <= held[1] <= END_NS and held[3] == 0
        # a request that is not one gets an error status and no state
        n = len(a.states())
        await a.ws.send(control(P.PLAY, speed=float("nan"), rid="nan"))
        status = await a.text("status")
        assert status["level"] == P.STATUS_ERROR and "NaN" in status["message"]
        await a.ws.send(b"\x03\x00")
        assert "too short" in (await a.text("status"))["message"]
        await a.quiet()
        assert all(s[4] not in ("nan",) for s in a.states()[n:])
        # each request was answered exactly once, to each client
        for c in (a, b):
            await c.quiet()
            rids = [s[4] for s in c.states() if s[4]]
            assert rids == ["seek-1", "fast", "far", "play-end", "again", "pause-end", "restart", "hold"]
        await a.close()
        await b.close()

    run(main())


def test_series_of_a_field_over_the_whole_recording(view):
    async def main():
        c = await Peer.open(view.ws_url)
        await c.text("advertise")
        ids = {t: ch["id"] for t, ch in c.channels.items()}
        await c.send_json({"op": "a0py.fetchSeries", "requestId": 7, "channelId": ids["robot/odom"], "path": "x"})
        s = await c.text("a0py.series")
        assert (s["requestId"], s["channelId"], s["path"], s["startNs"]) == (7, ids["robot/odom"], "x", str(T0_NS))
        assert (s["messages"], s["stride"]) == (1000, 1)
        assert s["t"] == [k * PERIOD_NS for k in range(1000)]
        assert s["v"] == pytest.approx([odom(k)["x"] for k in range(1000)])
        # at most maxPoints: one message in ten; nested fields, booleans as 0/1, a channel that starts late
        await c.send_json({"op": "a0py.fetchSeries", "requestId": 8, "channelId": ids["robot/odom"],
                           "path": "pose.theta", "maxPoints": 100})
        s = await c.text("a0py.series")
        assert (s["stride"], len(s["t"])) == (10, 100)
        assert s["t"] == [k * PERIOD_NS for k in range(0, 1000, 10)]
        assert s["v"] == pytest.approx([odom(k)["pose"]["theta"] for k in range(0, 1000, 10)])
        await c.send_json({"op": "a0py.fetchSeries", "requestId": 9, "channelId": ids["robot/late"], "path": "ok"})
        s = await c.text("a0py.series")
        assert s["t"][0] == LATE_FROM * PERIOD_NS and s["v"][:4] == [1, 0, 1, 0]
        await c.send_json({"op": "a0py.fetchSeries", "requestId": 10, "channelId": ids["/foreign/pose"],
                           "path": "k"})
        s = await c.text("a0py.series")
        assert s["v"] == list(range(0, 1000, 10))
        # errors: a field no message has, a bad path, an unknown channel; the connection stays
        for req, fragment in (({"channelId": ids["robot/odom"], "path": "nope"}, "no number at 'nope'"),
                              ({"channelId": ids["robot/odom"], "path": "a..b"}, "bad field path"),
                              ({"channelId": 9999, "path": "x"}, "unknown channel id 9999")):
            await c.send_json({"op": "a0py.fetchSeries", "requestId": 11, **req})
            status = await c.text("status")
            assert status["level"] == P.STATUS_ERROR and fragment in status["message"], status
        await c.close()

    run(main())


def test_a_live_view_refuses_playback_and_series_requests(monkeypatch):
    monkeypatch.setenv("A0PY_ROOT", f"shm:a0pyvp-{os.getpid()}-{uuid.uuid4().hex[:8]}")

    async def main(v):
        c = await Peer.open(v.ws_url)
        info = await c.text("serverInfo")
        assert "playbackControl" not in info["capabilities"] and "dataStartTime" not in info
        await c.ws.send(control(P.PLAY, rid="x"))
        assert "does not offer 'playbackControl'" in (await c.text("status"))["message"]
        await c.send_json({"op": "a0py.fetchSeries", "requestId": 1, "channelId": 1, "path": "x"})
        assert "only for recordings" in (await c.text("status"))["message"]
        await c.close()

    with ViewProcess() as v:
        run(main(v))


@pytest.mark.parametrize("arg", ["recs/", "./recs", "missing.mcap", "~/no/such/dir/"])
def test_a_path_that_does_not_exist_is_an_error_not_a_topic(tmp_path, arg):
    # run from another directory (relative paths are the point), with this checkout's a0py
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "a0py.cli.view", arg, "--port", "0"], capture_output=True,
                       text=True, timeout=60, cwd=tmp_path, env=env)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith("a0py: error: ") and "no such file or directory" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "serving" not in r.stdout


# ------------------------------------------------------------ beside the reference server

_REFERENCE = textwrap.dedent('''
    import sys
    import foxglove
    from foxglove.websocket import (Capability, PlaybackCommand, PlaybackState, PlaybackStatus,
                                    ServerListener)

    lo, hi = int(sys.argv[1]), int(sys.argv[2])

    class Player(ServerListener):
        """Playback as the SDK's own playback example runs it."""

        def __init__(self):
            self.time, self.status, self.speed = lo, PlaybackStatus.Paused, 1.0

        def on_playback_control_request(self, req):
            did_seek = req.seek_time is not None
            if did_seek:
                self.time = max(lo, min(req.seek_time, hi))
                if self.status == PlaybackStatus.Ended:
                    self.status = PlaybackStatus.Paused
            self.speed = min(max(req.playback_speed, 0.01), 100.0)
            if self.status != PlaybackStatus.Ended:
                self.status = (PlaybackStatus.Playing if req.playback_command == PlaybackCommand.Play
                               else PlaybackStatus.Paused)
            return PlaybackState(status=self.status, current_time=self.time, playback_speed=self.speed,
                                 did_seek=did_seek, request_id=req.request_id)

    server = foxglove.start_server(name="reference", port=0, playback_time_range=(lo, hi),
                                   capabilities=[Capability.PlaybackControl, Capability.Time],
                                   server_listener=Player())
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()
''')


def test_the_same_requests_get_the_same_answers_as_from_foxglove_sdks_server(view):
    pytest.importorskip("foxglove", reason="foxglove-sdk (pip install 'a0py[foxglove]') is the reference")
    ref = subprocess.Popen([sys.executable, "-c", _REFERENCE, str(T0_NS), str(END_NS)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        port = int(ref.stdout.readline())
        requests = [(control(P.PAUSE, seek=MID_NS, rid="seek-1"), "seek-1"),
                    (control(P.PLAY, speed=2.0, rid="play-1"), "play-1"),
                    (control(P.PAUSE, speed=0.5, seek=END_NS + 5, rid="far"), "far"),
                    (control(P.PAUSE, speed=0.0, seek=T0_NS, rid="slowest"), "slowest")]

        async def answers(url):
            a, b = await Peer.open(url), await Peer.open(url)
            info = await a.text("serverInfo")
            await b.text("serverInfo")
            got = []
            for req, rid in requests:
                await a.ws.send(req)
                # the answer goes to every client, the asking one and the other
                got.append((await a.state(rid), await b.state(rid)))
            await a.close()
            await b.close()
            return info, got

        ref_info, ref_answers = run(answers(f"ws://127.0.0.1:{port}"))
        our_info, our_answers = run(answers(view.ws_url))
    finally:
        ref.stdin.close()
        ref.wait(10)
    for key in ("capabilities", "dataStartTime", "dataEndTime"):
        assert our_info[key] == ref_info[key], key
    assert our_answers == ref_answers
    assert our_answers[0][0] == (P.PLAYBACK_PAUSED, MID_NS, 1.0, 1, "seek-1")
