"""An RPC and a PRPC server on one topic, for the bridge's request/reply tests; run with
``A0PY_ROOT`` naming its "machine". Prints ``ready`` once both serve.

RPC requests: ``echo:TEXT`` is answered ``TEXT`` with the request's header ``h`` sent
back as ``h``; ``fail`` raises in the handler; ``hold`` is accepted and never answered (its id is published on ``<TOPIC>/held``);
``block`` too, and its handler never returns (the requests after it wait unaccepted).
The id of every cancelled request is published on ``<TOPIC>/cancels``. PRPC requests:
``N`` is answered by the messages ``0`` .. ``N-1``, the last one done.

``python bridge_rpc_server.py TOPIC``"""

import sys
import threading

from a0py import PrpcServer, Publisher, RpcServer


def main():
    topic = sys.argv[1]
    cancels = Publisher(f"{topic}/cancels")
    held = Publisher(f"{topic}/held")

    def on_request(req):
        text = bytes(req.pkt.payload).decode()
        if text.startswith("echo:"):
            req.reply(text[5:], [("h", req.pkt.headers.get("h", ""))])
        elif text == "fail":
            raise ValueError("asked to fail")
        elif text in ("hold", "block"):
            held.pub(req.id)
            if text == "block":
                threading.Event().wait()

    def on_connect(conn):
        n = int(bytes(conn.pkt.payload))
        for i in range(n):
            conn.send(str(i), done=i == n - 1)

    def on_cancel(rid):
        cancels.pub(rid)

    with RpcServer(topic, on_request, on_cancel), PrpcServer(topic, on_connect, on_cancel):
        print("ready", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
