"""The ``a0py`` command line: look inside arenas.

    a0py info  --shm NAME | --file PATH       header and ring state
    a0py dump  --shm NAME | --file PATH [-n N] [--hex]   frames, oldest first
    a0py write --shm NAME [--size BYTES] DATA...         append frames
    a0py tail  --shm NAME [--timeout S]       print frames as they arrive

Protocol commands (pub/sub, rpc, cfg, record, replay) join as those layers land.
"""

import argparse
import sys

from . import A0Error


def _open(args, create_size=None):
    from . import Arena

    if args.shm:
        return Arena.shm(args.shm, create_size)
    return Arena.file(args.file, create_size)


def _preview(data, as_hex, width=64):
    chunk = data[:width]
    if as_hex:
        text = chunk.hex(" ")
    else:
        text = chunk.decode("utf-8", "backslashreplace")
    return text + (" …" if len(data) > width else "")


def cmd_info(args):
    from . import Transport

    with _open(args) as arena:
        h = arena.header()
        tr = Transport(arena)
        with tr.lock() as t:
            state = (t.seq_low, t.seq_high, t.used_space, t.high_water_mark)
        print(f"arena       {arena.kind} {arena.name}")
        print(f"size        {arena.size} bytes (mode {oct(arena.mode or 0)})")
        print(f"format      version {h['version']}, header {h['header_size']} bytes")
        print(f"frames      seq {state[0]}..{state[1]} ({max(0, state[1] - state[0] + 1)} live)")
        print(f"used        {state[2]} bytes, high water {state[3]} bytes")
        print(f"notify      {h['notify']} (waiters {h['waiters']}, lock recoveries {h['recoveries']})")
        print(f"deadman     {'pid ' + str(h['deadman_pid']) if h['deadman_pid'] else 'free'}")
    return 0


def cmd_dump(args):
    from . import Transport

    with _open(args) as arena:
        tr = Transport(arena)
        frames = tr.read_many(args.n)
        for seq, data in frames:
            print(f"{seq:>10}  {len(data):>8} B  {_preview(data, args.hex)}")
    return 0


def cmd_write(args):
    from . import Transport

    with _open(args, args.size) as arena:
        tr = Transport(arena)
        for item in args.data:
            print(tr.write(item.encode()))
    return 0


def cmd_tail(args):
    from . import Transport

    with _open(args) as arena:
        tr = Transport(arena)
        with tr.lock() as t:
            if not t.empty:
                t.jump_tail()
        try:
            while True:
                got = tr.read_next(timeout=args.timeout)
                if got is None:
                    return 0
                seq, data = got
                print(f"{seq:>10}  {len(data):>8} B  {_preview(data, args.hex)}", flush=True)
        except KeyboardInterrupt:
            return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="a0py", description="Inspect and use a0py arenas.")
    sub = parser.add_subparsers(dest="command", required=True)

    def target(p):
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--shm", help="shared memory arena name")
        g.add_argument("--file", help="file arena path")
        p.add_argument("--hex", action="store_true", help="show data as hex")

    p = sub.add_parser("info", help="header and ring state")
    target(p)
    p.set_defaults(func=cmd_info)
    p = sub.add_parser("dump", help="print frames, oldest first")
    target(p)
    p.add_argument("-n", type=int, default=None, help="at most N frames")
    p.set_defaults(func=cmd_dump)
    p = sub.add_parser("write", help="append frames (creating the arena if --size)")
    target(p)
    p.add_argument("--size", type=int, default=None, help="create with this size if missing")
    p.add_argument("data", nargs="+")
    p.set_defaults(func=cmd_write)
    p = sub.add_parser("tail", help="print new frames as they arrive")
    target(p)
    p.add_argument("--timeout", type=float, default=None, help="stop after S idle seconds")
    p.set_defaults(func=cmd_tail)

    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except A0Error as e:
        print(f"a0py: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
