"""A publisher whose packets fit only a few times in its topic says so, once, with
the size to use: a 2.1 MB image in the default 4 MiB topic leaves room for one, and a
subscriber then loses packets without anything having warned the publisher's author."""

import subprocess
import sys
import textwrap
import warnings

import pytest
from helpers.procs import child_env

import a0py
from a0py.proto import pubsub

IMAGE = 2_100_000  # bytes: one camera frame


def _published(publisher, payloads):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for payload in payloads:
            publisher.pub(payload)
    return [w for w in caught if issubclass(w.category, a0py.TopicSizeWarning)]


def test_image_in_default_topic_warns_once_naming_the_size_that_holds_it(root):
    pub = a0py.Publisher(a0py.Topic("cam", size="4M"))
    caught = _published(pub, [b"x" * 100, b"x" * IMAGE, b"x" * IMAGE, b"x" * IMAGE])
    assert len(caught) == 1
    text = str(caught[0].message)
    assert "topic 'cam'" in text and "holds only 1 packet" in text
    assert "size='32M'" in text and "A0PY_TOPIC_SIZES='cam=32M'" in text and "--size 32M" in text
    assert caught[0].filename == __file__  # points at the pub() call, not at a0py


def test_the_size_the_warning_names_holds_the_packets_without_a_warning(root):
    pub = a0py.Publisher(a0py.Topic("cam", size="32M"))
    assert _published(pub, [b"x" * IMAGE] * 3) == []
    # The ring really holds several: a subscriber 7 packets behind loses none.
    big = a0py.Publisher(a0py.Topic("roomy", size="32M"))
    sub = a0py.SubscriberSync("roomy")
    _published(big, [bytes([i]) * IMAGE for i in range(7)])
    got = [sub.read() for _ in range(7)]
    assert [p.payload[0] for p in got] == list(range(7)) and sub.missed == 0


def test_packets_that_fit_a_few_times_are_quiet_and_fewer_warn(root):
    # 4 MiB ring: four packets of 1 MB fit (no warning), 1.1 MB packets fit three times.
    assert _published(a0py.Publisher(a0py.Topic("four", size="4M")), [b"x" * 1_000_000] * 5) == []
    caught = _published(a0py.Publisher(a0py.Topic("three", size="4M")), [b"x" * 1_100_000])
    assert len(caught) == 1 and "holds only 3 packets" in str(caught[0].message)


def test_zero_copy_alloc_warns_too(root):
    pub = a0py.Publisher(a0py.Topic("cam", size="4M"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pub.alloc(IMAGE) as buf:
            buf[:4] = b"head"
    assert [w.category for w in caught] == [a0py.TopicSizeWarning]
    assert a0py.SubscriberSync("cam", init=a0py.INIT_OLDEST).read().payload[:4] == b"head"


def test_warning_as_error_still_publishes_the_packet(root):
    pub = a0py.Publisher(a0py.Topic("cam", size="4M"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", a0py.TopicSizeWarning)
        with pytest.raises(a0py.TopicSizeWarning):
            pub.pub(b"x" * IMAGE)
    assert len(a0py.SubscriberSync("cam", init=a0py.INIT_OLDEST).read().payload) == IMAGE


def test_a_publisher_script_prints_the_warning_on_stderr(root):
    code = textwrap.dedent("""
        import a0py
        a0py.Publisher("cam").pub(b"x" * 2_100_000)
        print("published")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=child_env(A0PY_ARENA_SIZE="4M"))
    assert done.returncode == 0 and done.stdout == "published\n", done.stderr
    assert done.stderr.count("TopicSizeWarning") == 1 and "size='32M'" in done.stderr


def test_size_warning_text_names_a_power_of_two_holding_eight():
    text = pubsub._size_warning(a0py.Topic("lidar/points"), 64 << 20, 30_000_000)
    assert "holds only 2 packets" in text and "size='256M'" in text and "it then holds 8" in text


def test_packets_that_fit_agrees_with_what_the_ring_holds(root):
    # Fill a 1 MiB topic with packets of one size: the ring keeps exactly that many.
    for payload in (100, 70_000, 300_000, 1_000_000):
        pub = a0py.Publisher(a0py.Topic(f"fill{payload}", size="1M"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", a0py.TopicSizeWarning)
            for _ in range(1 + (1 << 20) // payload):
                pub.pub(b"x" * payload)
        kept = 0
        with a0py.SubscriberSync(pub.topic, init=a0py.INIT_OLDEST) as sub:
            while sub.read() is not None:
                kept += 1
        assert kept == pubsub.packets_that_fit(1 << 20, payload + 96), payload
    assert pubsub.packets_that_fit(64 << 10, 70_000) == 0
    assert pubsub.size_for_packets(2_100_096) == 32 << 20
    assert pubsub.packets_that_fit(pubsub.size_for_packets(2_100_096), 2_100_096) >= 8


@pytest.mark.parametrize("call", [
    lambda: pubsub.packets_that_fit(-1, 10),
    lambda: pubsub.packets_that_fit(1 << 20, 1.5),
    lambda: pubsub.size_for_packets(100, count=0),
    lambda: pubsub.size_for_packets("1M"),
])
def test_sizing_helpers_refuse_what_is_not_a_size(call):
    with pytest.raises(a0py.ArgumentError, match="must be a whole number"):
        call()
