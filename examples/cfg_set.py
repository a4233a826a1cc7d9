"""Change a topic's configuration: defaults if it has none, then merge patches.

    python examples/cfg_set.py                                  # the defaults, if empty
    python examples/cfg_set.py motor.max_speed=2.5 name=r2      # merge-patch two values
    python examples/cfg_set.py motor.max_speed=null             # remove a value

Each ``a.b=VALUE`` becomes the RFC 7386 merge patch ``{"a": {"b": VALUE}}`` (VALUE is
read as JSON when it is JSON, else as a string; ``null`` removes). Patches are applied
under the topic's writers' lock, so many processes can patch at once and no update is
lost. Pair it with cfg_watch.py to see each version arrive.
"""

import argparse
import json
import os
import sys

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

DEFAULTS = {"name": "robot", "motor": {"max_speed": 1.0, "enabled": True}}


def patch_of(assignment):
    path, sep, text = assignment.partition("=")
    if not sep or not path:
        sys.exit(f"cfg_set: expected KEY.PATH=VALUE, got {assignment!r}")
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/robot")
    ap.add_argument("assignments", nargs="*", metavar="KEY.PATH=VALUE")
    args = ap.parse_args()
    cfg = a0py.Cfg(args.topic)
    if cfg.write_if_empty(DEFAULTS):
        print(f"wrote the defaults to {args.topic!r}", flush=True)
    for assignment in args.assignments:
        doc = cfg.mergepatch(patch_of(assignment))
        print(f"{assignment} -> {json.dumps(doc, sort_keys=True)}", flush=True)
    print("now:", json.dumps(cfg.read().json(), sort_keys=True), flush=True)


if __name__ == "__main__":
    main()
