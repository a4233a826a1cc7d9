"""An RPC service and a PRPC (progress) service on one topic (pair it with rpc_client.py).

    python examples/rpc_server.py                      # topic demo/calc, until Ctrl-C
    python examples/rpc_server.py --count 4            # stop after 4 requests

RPC (``T.rpc``): a request ``{"op": "add"|"mul", "args": [numbers]}`` gets
``{"result": N}``; anything else gets an error the client sees as RpcRemoteError.
PRPC (``T.prpc``): a request ``{"countdown": N}`` gets N progress messages, then a last
one marked done.

Start it before or after the client: a request sent before the server starts is served
when it starts (if younger than ``--max-age`` seconds). Kill it (even with kill -9) while
a client waits and start it again: requests it had not started are served by the new
one; the one it was handling fails at its client with RpcServerDiedError.
"""

import argparse
import math
import os
import sys
import threading
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

OPS = {"add": sum, "mul": math.prod}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/calc")
    ap.add_argument("--count", type=int, default=0, help="stop after this many requests (0: never)")
    ap.add_argument("--max-age", type=float, default=10.0,
                    help="serve requests sent up to this many seconds before the start")
    args = ap.parse_args()
    served = threading.Semaphore(0)

    def on_request(req):
        try:
            msg = req.pkt.json()
            op = OPS.get(msg.get("op"))
            if op is None:  # the client gets this as RpcRemoteError
                raise ValueError(f"unknown op {msg.get('op')!r}; use one of {sorted(OPS)}")
            result = op(msg["args"])
            print(f"rpc  {msg['op']}{tuple(msg['args'])} = {result}", flush=True)
            req.reply_json({"result": result})
        finally:
            served.release()

    def on_connect(conn):
        n = int(conn.pkt.json()["countdown"])

        def run():  # off the dispatcher thread: a long job must not hold up others
            for i in range(n, 0, -1):
                if conn.send(f"{i}...") is None:
                    print("prpc countdown cancelled by the client", flush=True)
                    served.release()
                    return
                time.sleep(0.05)
            conn.send("liftoff", done=True)
            print(f"prpc countdown from {n} done", flush=True)
            served.release()

        threading.Thread(target=run, daemon=True).start()

    with a0py.RpcServer(args.topic, on_request, max_age=args.max_age), \
            a0py.PrpcServer(args.topic, on_connect, max_age=args.max_age):
        print(f"serving {args.topic!r} (rpc and prpc), pid {os.getpid()}", flush=True)
        n = 0
        try:
            while args.count == 0 or n < args.count:
                served.acquire()
                n += 1
        except KeyboardInterrupt:
            pass
    print(f"served {n} requests", flush=True)


if __name__ == "__main__":
    main()
