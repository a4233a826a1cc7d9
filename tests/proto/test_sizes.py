"""One size grammar, read by one parser (a0py.proto.sizes.read_size) wherever a size
is given: ``Topic(size=)``, the size variables, and the command line's ``BYTES``
options. Units K, M, G, T in either case, always binary, ``B``/``iB`` optional."""

import click
import pytest

from a0py import Packet, _core
from a0py.cli.types import ByteSize
from a0py.errors import ArgumentError
from a0py.proto import sizes
from a0py.proto import topic as tp
from a0py.proto.typed import suggested_arena_size

SPELLINGS = [
    ("4096", 4096),
    ("512k", 512 << 10),
    ("512K", 512 << 10),
    ("64M", 64 << 20),
    ("64m", 64 << 20),
    ("64MiB", 64 << 20),
    ("64mb", 64 << 20),
    ("1GiB", 1 << 30),
    (" 2 t ", 2 << 40),
    ("3TB", 3 << 40),
    ("4097B", 4097),
]


@pytest.mark.parametrize("text, size", SPELLINGS)
def test_every_entry_point_reads_a_size_the_same_way(text, size, root):
    assert sizes.read_size(text) == size
    assert ByteSize().convert(text, None, None) == size
    assert tp.Topic("t", size=text).size_for("pubsub") == size
    assert tp.parse_size(text) == size


@pytest.mark.parametrize("text", ["12Q", "1.5M", "-1", "", "M", "1KK", "1 M B", "0x10", "1e6"])
def test_what_is_not_a_size_is_refused_at_every_entry_point_with_the_same_words(text, root):
    with pytest.raises(ArgumentError, match=rf"^A0PY_ARENA_SIZE: '{text}' is not a size: give bytes, "
                                            "or a number with a binary unit K, M, G or T"):
        sizes.read_size(text, "A0PY_ARENA_SIZE")
    with pytest.raises(click.BadParameter, match=rf"^'{text}' is not a size: give bytes"):
        ByteSize().convert(text, None, None)
    with pytest.raises(ArgumentError, match=rf"arena size of topic 't': '{text}' is not a size"):
        tp.Topic("t", size=text)


def test_a_size_beyond_the_cores_range_is_refused_at_every_entry_point(root):
    too_large = f"{1 << 23}T"  # 2**63 bytes
    assert sizes.read_size(f"{(1 << 23) - 1}T") == sizes.MAX_SIZE + 1 - (1 << 40)
    for call in (lambda: sizes.read_size(too_large), lambda: tp.Topic("t", size=too_large),
                 lambda: tp.Topic("t", size=1 << 63)):
        with pytest.raises(ArgumentError, match="too large a size"):
            call()
    with pytest.raises(click.BadParameter, match="too large a size"):
        ByteSize().convert(too_large, None, None)


@pytest.mark.parametrize("value, words", [(True, "not True"), (1.5, "not float"), (None, "not NoneType")])
def test_a_size_of_another_type_is_refused_naming_the_setting(value, words):
    with pytest.raises(ArgumentError, match=f"^size of x must be a number of bytes, {words}"):
        sizes.read_size(value, "size of x")


def test_an_arena_size_below_the_cores_minimum_is_refused():
    with pytest.raises(ArgumentError, match="must be at least 576 bytes, got 100"):
        tp.parse_size("100", "A0PY_ARENA_SIZE")


@pytest.mark.parametrize("size, text", [(32 << 20, "32M"), (1 << 30, "1G"), (3 << 40, "3072G"),
                                        (1536 << 10, "1536K"), (4097, "4097"), (0, "0")])
def test_size_text_writes_what_read_size_reads_back(size, text):
    assert sizes.size_text(size) == text
    assert sizes.read_size(text) == size


def test_power_of_two_size_rounds_up_from_a_floor():
    assert sizes.power_of_two_size(1, 1 << 20) == 1 << 20
    assert sizes.power_of_two_size((1 << 22) + 1, 1 << 20) == 1 << 23
    assert sizes.power_of_two_size(1 << 22, 1 << 20) == 1 << 22


def test_packet_overhead_is_the_packet_layouts_fixed_part():
    assert len(Packet([], b"").to_bytes()) == sizes.PACKET_OVERHEAD == 96


@pytest.mark.parametrize("payload", [0, 1, 100_000, 1_048_000, 4_194_033, 4_194_048, 2_100_000, 30_000_000])
def test_the_suggested_arena_is_the_smallest_power_of_two_holding_four_packets(payload):
    size = suggested_arena_size(payload)
    assert size & (size - 1) == 0 and size >= 4 << 20
    four = _core.arena_size_for(sizes.PACKET_OVERHEAD + payload, 4)
    assert four <= size and (size == 4 << 20 or four > size // 2)
