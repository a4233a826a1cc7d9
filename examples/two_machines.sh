#!/bin/sh
# Two "machines" on one host, bridged over Zenoh (docs/bridge.md).
#
#     sudo sh examples/two_machines.sh [COUNT]
#
# Makes two network namespaces joined by a veth pair (10.99.0.1 and 10.99.0.2), each
# process of a machine in its own mount namespace with a private /dev/shm, so the two
# share nothing but the link. Machine A runs a bridge listening on its address and a
# publisher (examples/pubsub_pub.py, robot/odom at 20 Hz); machine B runs a bridge
# connected to A and `a0py echo -v robot/odom`, which prints COUNT packets (default 10)
# with their headers: the publisher's, and a0py.bridge.origin/host/seq added by the
# bridges. Everything is removed at the end. Needs root, `ip` and `unshare`.
#
# It runs a0py with $PYTHON (default python3): sudo starts a clean environment, so name
# a virtual environment's Python outright, e.g.
#     sudo PYTHON=$VIRTUAL_ENV/bin/python sh examples/two_machines.sh
# This checkout's a0py is used if it is built in place (make build), else the installed
# one (pip install '.[bridge]').
set -eu

COUNT=${1:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
TAG=a0ex$$

if [ "$(id -u)" != 0 ]; then
    echo "examples/two_machines.sh: needs root (it makes network namespaces): sudo sh $0" >&2
    exit 1
fi
CHECK='import sys; sys.path[:0] = sys.argv[1:]; import a0py._core, zenoh'
if "$PY" -c "$CHECK" "$HERE" 2>/dev/null; then
    export PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"   # the checkout, built in place
elif (cd / && "$PY" -c "$CHECK") 2>/dev/null; then
    :                                                       # the installed a0py
else
    echo "examples/two_machines.sh: $PY cannot import a0py with the bridge's eclipse-zenoh:" \
        "install it (pip install '.[bridge]' in the checkout) and name that Python:" \
        "sudo PYTHON=/path/to/venv/bin/python sh $0" >&2
    exit 1
fi
A=${TAG}a
B=${TAG}b

cleanup() {
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT INT TERM

ip netns add "$A"
ip netns add "$B"
ip link add "v${TAG}a" netns "$A" type veth peer name "v${TAG}b" netns "$B"
ip -n "$A" addr add 10.99.0.1/24 dev "v${TAG}a"
ip -n "$B" addr add 10.99.0.2/24 dev "v${TAG}b"
for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
done
ip -n "$A" link set "v${TAG}a" up
ip -n "$B" link set "v${TAG}b" up

# machine NS BRIDGE_ARGS COMMAND: in network namespace NS, with a private and empty
# /dev/shm, a bridge (a0py bridge BRIDGE_ARGS) beside COMMAND, stopped when COMMAND ends.
# (Run from /, not from the checkout: `python -m a0py` imports from the current
# directory first.)
machine() {
    ip netns exec "$1" unshare -m --propagation private sh -c '
        mount -t tmpfs tmpfs /dev/shm && cd / || exit 1
        $PY -m a0py bridge $0 "robot/**" >&2 & bridge=$!
        sh -c "$1"; status=$?
        kill $bridge 2>/dev/null; wait $bridge
        exit $status' "$2" "$3"
}

export PY

# A publishes for as long as B needs to start and print COUNT packets, then stops.
machine "$A" "--listen tcp/10.99.0.1:7447" \
    "$PY $HERE/examples/pubsub_pub.py --topic robot/odom --rate 20 --count $((COUNT + 100)) >/dev/null" &
publisher=$!
machine "$B" "--connect tcp/10.99.0.1:7447" "$PY -m a0py echo -v -n $COUNT --timeout 30 robot/odom"
wait $publisher
