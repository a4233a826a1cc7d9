"""The view's memory under a client that floods requests and reads nothing.

    python bench/view_flood.py              # 300 requests of 10,000 unknown channel ids
    python bench/view_flood.py --requests 50

One `a0py view` process (live topics, an empty root of its own); one
WebSocket client that sends subscribe requests for channel ids that do not
exist, each answered by an error status of about 700 KB, and reads nothing
while it sends. Prints the view's resident memory (VmRSS) and its peak
(VmHWM) before and after, how the connection ended, and how many messages the
client got. With the control queue bounded in bytes the client is
disconnected (close code 1008) and the peak stays near the budget (16 MiB)
plus what parsing the requests costs.

A script, not a test: tests/view/test_view.py holds the assertions.
"""

import argparse
import asyncio
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def memory(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) >> 10
    return f"RSS {fields['VmRSS']} MiB, peak {fields['VmHWM']} MiB"


async def flood(view, requests, ids):
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    text = json.dumps({"op": "subscribe", "subscriptions": [
        {"id": i, "channelId": i} for i in range(1_000_000, 1_000_000 + ids)]})
    ws = await connect(view.ws_url, subprotocols=["foxglove.sdk.v1"], max_size=None, max_queue=1)
    print(f"before:  {memory(view.proc.pid)}")
    sent = 0
    try:
        for _ in range(requests):
            await ws.send(text)
            sent += 1
    except ConnectionClosed:
        pass
    await asyncio.sleep(2)
    print(f"after {sent} requests ({sent * len(text) / 1e6:.0f} MB sent): {memory(view.proc.pid)}")
    got = 0
    try:
        while True:
            await asyncio.wait_for(ws.recv(), 10)
            got += 1
    except ConnectionClosed as e:
        print(f"closed by the view: {e.rcvd}; {got} messages received")
    except TimeoutError:
        print(f"still open after {got} messages received (nothing more for 10 s)")
        await ws.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--ids", type=int, default=10_000, help="unknown channel ids per request")
    args = parser.parse_args()
    os.environ["A0PY_ROOT"] = f"shm:a0pyflood-{uuid.uuid4().hex[:8]}"
    from helpers.view import ViewProcess

    with ViewProcess() as view:
        asyncio.run(flood(view, args.requests, args.ids))


if __name__ == "__main__":
    main()
