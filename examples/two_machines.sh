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
set -eu

COUNT=${1:-10}
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}  # PYTHON=.venv/bin/python for a virtual environment
TAG=a0ex$$
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
machine() {
    ip netns exec "$1" unshare -m --propagation private sh -c '
        mount -t tmpfs tmpfs /dev/shm && cd "$0" || exit 1
        $PY -m a0py bridge $1 "robot/**" >&2 & bridge=$!
        sh -c "$2"; status=$?
        kill $bridge; wait $bridge
        exit $status' "$HERE" "$2" "$3"
}

export PY PYTHONPATH="$HERE${PYTHONPATH:+:$PYTHONPATH}"

# A publishes for as long as B needs to start and print COUNT packets, then stops.
machine "$A" "--listen tcp/10.99.0.1:7447" \
    "$PY examples/pubsub_pub.py --topic robot/odom --rate 20 --count $((COUNT + 100)) >/dev/null" &
publisher=$!
machine "$B" "--connect tcp/10.99.0.1:7447" "$PY -m a0py echo -v -n $COUNT --timeout 30 robot/odom"
wait $publisher
