"""One side of the two-namespace bridge test, run inside its own network and mount
namespace (a private /dev/shm): a bridge on the default root, plus a publisher (side
``pub``) or a subscriber (side ``sub``). The sides agree over the bridge itself: ``pub``
publishes on robot/probe until ``sub`` answers on robot/ack, then publishes N packets on
robot/data; ``sub`` prints each one as a JSON line, calls the RPC server that ``pub``
runs on robot/rpc (printing the reply), answers on robot/done and stops once the
``pub`` side has stopped (its bridge says so). Every wait is bounded; the exit status
says whether the side finished.

``python bridge_machine.py pub|sub N --listen EP | --connect EP``"""

import json
import sys
import time

from a0py import INIT_OLDEST, A0TimeoutError, Publisher, RpcClient, RpcServer, SubscriberSync, Topic
from a0py.bridge import ZenohBridge

LIMIT_S = 40.0
# Room for every packet of the test on both sides (20 of them, half 1 MiB): nothing is
# evicted before the bridge or the reader sees it.
DATA = Topic("robot/data", size="64M")


def main():
    side, n, how, ep = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    kw = {"listen": [ep]} if how == "--listen" else {"connect": [ep]}
    deadline = time.monotonic() + LIMIT_S
    # reliable: a burst of 1 MiB packets would overflow Zenoh's queue under the drop policy
    with ZenohBridge(["robot/**"], reliable=True, **kw) as bridge:
        print(json.dumps({"bridge": bridge.id}), flush=True)
        if side == "pub":
            # serves robot/rpc for the whole side
            with RpcServer("robot/rpc", lambda req: req.reply(b"pong:" + bytes(req.pkt.payload))):
                with Publisher("robot/probe") as probe, SubscriberSync("robot/ack", INIT_OLDEST) as ack:
                    while ack.read() is None:
                        probe.pub(b"probe")
                        if time.monotonic() > deadline:
                            return 1
                        time.sleep(0.1)
                with Publisher(DATA) as pub, SubscriberSync("robot/done", INIT_OLDEST) as done:
                    for i in range(n):
                        pub.pub(b"x" * (64 if i % 2 else 1 << 20), headers=[("i", str(i))])
                    while done.read() is None:
                        if time.monotonic() > deadline:
                            return 1
                        time.sleep(0.05)
        else:
            with SubscriberSync("robot/probe", INIT_OLDEST) as probe:
                probe.read_blocking(timeout=LIMIT_S)
            with Publisher("robot/ack") as ack, SubscriberSync(DATA, INIT_OLDEST) as data:
                ack.pub(b"ack")
                for _ in range(n):
                    try:
                        pkt = data.read_blocking(timeout=max(0.01, deadline - time.monotonic()))
                    except A0TimeoutError:
                        return 1
                    print(json.dumps({"id": pkt.id, "headers": list(pkt.headers), "size": len(pkt.payload)}),
                          flush=True)
                reply = RpcClient("robot/rpc", wait_for_server=LIMIT_S).send_blocking(b"ping", timeout=LIMIT_S)
                print(json.dumps({"rpc": bytes(reply.payload).decode(), "status": bridge.status()}),
                      flush=True)
                with Publisher("robot/done") as done:
                    done.pub(b"done")
                # The pub side stops once "done" has reached it, and its bridge says so as
                # it stops: this bridge has carried it.
                while all(p["state"] == "up" for p in bridge.status()["peers"]):
                    if time.monotonic() > deadline:
                        return 1
                    time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
