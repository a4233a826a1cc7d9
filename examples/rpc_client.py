"""Call the services of rpc_server.py: RPC requests, then a PRPC progress stream.

    python examples/rpc_client.py                       # topic demo/calc
    python examples/rpc_client.py --mode async          # the same through asyncio

The client may start first: its requests wait for a server (up to ``--wait`` seconds
with none alive, then A0TimeoutError naming the topic). Replies are routed by request
id, so any number of clients can share the topic.
"""

import argparse
import asyncio
import os
import sys

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/calc")
    ap.add_argument("--mode", choices=("blocking", "async"), default="blocking")
    ap.add_argument("--wait", type=float, default=10.0, help="seconds to wait for a server to be alive")
    args = ap.parse_args()
    rpc = a0py.RpcClient(args.topic, wait_for_server=args.wait)
    prpc = a0py.PrpcClient(args.topic, wait_for_server=args.wait)
    try:
        if args.mode == "blocking":
            print("add(1, 2, 3) =", rpc.send_json({"op": "add", "args": [1, 2, 3]}, timeout=30)["result"])
            print("mul(4, 5) =", rpc.send_json({"op": "mul", "args": [4, 5]}, timeout=30)["result"])
            try:
                rpc.send_json({"op": "pow", "args": [2, 8]}, timeout=30)
            except a0py.RpcRemoteError as e:
                print("pow failed:", str(e).split(": ", 1)[1])
            for pkt in prpc.stream(b'{"countdown": 3}', timeout=30):
                print("countdown:", pkt.payload.decode())
        else:
            async def run():
                replies = await asyncio.gather(
                    rpc.send_async(b'{"op": "add", "args": [1, 2, 3]}', timeout=30),
                    rpc.send_async(b'{"op": "mul", "args": [4, 5]}', timeout=30))
                print("add(1, 2, 3) =", replies[0].json()["result"])
                print("mul(4, 5) =", replies[1].json()["result"])
                async for pkt in prpc.stream_async(b'{"countdown": 3}', timeout=30):
                    print("countdown:", pkt.payload.decode())

            asyncio.run(run())
    except a0py.A0TimeoutError as e:
        sys.exit(f"rpc_client: {e}")
    finally:
        rpc.close()
        prpc.close()


if __name__ == "__main__":
    main()
