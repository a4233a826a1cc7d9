"""The binding's layout tables hold the documented format, and the one sizing
arithmetic holds what the ring does.

``a0py._core.PACKET_LAYOUT`` and ``FRAME_LAYOUT`` are read from the C headers at
compile time; every other language takes its numbers from them. Here they are
held to the tables a reader of docs/ sees (the frame table of docs/format.md,
the packet table under "Packet format"), so a table that drifts from the code,
or a field added to one and not the other, fails. ``frame_span`` and
``arena_size_for`` are held to real arenas: the size they give holds the frames
it promises, and one byte less does not.
"""

import re
import sys
from pathlib import Path

import pytest

from a0py import _core
from a0py.errors import A0TimeoutError, ArgumentError, FrameTooLargeError

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _doc_texts():
    """(path, text) of docs/format.md first, then the other pages."""
    paths = [DOCS / "format.md", *sorted(p for p in DOCS.glob("*.md") if p.name != "format.md")]
    return [(p, p.read_text()) for p in paths]


def table_after(heading):
    """The rows (lists of stripped cells, header row and rule left out) of the first
    Markdown table under the first heading whose title starts with `heading`."""
    for path, text in _doc_texts():
        match = re.search(rf"^#+ {re.escape(heading)}[^\n]*\n", text, re.MULTILINE)
        if match is None:
            continue
        rows = []
        for line in text[match.end():].splitlines():
            if line.startswith("|"):
                rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            elif rows:
                break
        assert len(rows) > 2, f"{path.name}: no table under {heading!r}"
        return rows[2:]
    raise AssertionError(f"no page of docs/ has a heading {heading!r}")


def _prose(page):
    return " ".join((DOCS / page).read_text().split())


def documented_frame_layout():
    """FRAME_LAYOUT as docs/format.md states it."""
    layout = {}
    for offset, _size, field, _meaning in table_after("Frames"):
        name = field.strip("`")
        if name == "data":
            layout["frame_header_size"] = int(offset)
        else:
            layout[f"{name}_off"] = int(offset)
    text = _prose("format.md")
    span = re.search(r"A frame spans `align(\d+)\((\d+) \+ data_size\)`", text)
    assert span is not None, "docs/format.md no longer says how many bytes a frame spans"
    assert int(span.group(2)) == layout["frame_header_size"]
    layout["frame_align"] = int(span.group(1))
    layout["arena_header_size"] = int(re.search(r"^## Header \((\d+) bytes\)", (DOCS / "format.md").read_text(),
                                                re.MULTILINE).group(1))
    layout["min_arena_size"] = int(re.search(r"a size of at least (\d+) bytes", text).group(1))
    return layout


# Rows of the packet table that carry no field of PACKET_LAYOUT.
_UNNAMED_PACKET_ROWS = ("reserved", "strings:", "payload ")


def documented_packet_layout():
    """PACKET_LAYOUT as the packet table ("Packet format") states it."""
    layout = {}
    for offset, size, field in table_after("Packet format"):
        if field.startswith(_UNNAMED_PACKET_ROWS):
            continue
        at = int(offset)
        if field.startswith("magic:"):
            layout["magic_off"] = at
            layout["magic"] = int(re.search(r"0x[0-9A-Fa-f]+", field).group(0), 16)
        elif field.startswith("format version:"):
            layout["version_off"] = at
            layout["version"] = int(re.search(r": (\d+)", field).group(1))
        elif field.startswith("flags:"):
            layout["flags_off"] = at
            layout["flag_has_std"] = 1 << int(re.search(r"bit (\d+) = the standard block", field).group(1))
        elif field.startswith("id:"):
            layout["id_off"] = at
            layout["id_size"] = int(size)
        elif field.startswith("`n`:"):
            layout["header_count_off"] = at
        elif field.startswith("`payload_off`:"):
            layout["payload_off_off"] = at
            layout["align"] = int(re.search(r"a multiple of (\d+)", field).group(1))
        elif field.startswith("`payload_size`:"):
            layout["payload_size_off"] = at
        elif field.startswith("index,"):
            layout["index_off"] = at
            layout["entry_size"] = int(size.split()[0])
            names = re.search(r"in order: ((?:`\w+`(?:, )?)+) \(u(\d+) each", field)
            width = int(names.group(2)) // 8
            for i, name in enumerate(re.findall(r"`(\w+)`", names.group(1))):
                layout[f"entry_{name}"] = i * width
        else:
            std = re.fullmatch(r"(standard block: )?`a0_(\w+)`.*", field)
            assert std is not None, f"a row of the packet table this test does not know: {field!r}"
            if std.group(1):
                layout["header_size"] = at
            layout[f"{std.group(2)}_off"] = at
    layout["std_size"] = layout["index_off"] - layout["header_size"]
    return layout


def test_frame_layout_is_the_documented_frame_table():
    assert documented_frame_layout() == _core.FRAME_LAYOUT


def test_packet_layout_is_the_documented_packet_table():
    assert documented_packet_layout() == _core.PACKET_LAYOUT


def test_a_table_that_drifted_from_the_code_is_seen(tmp_path, monkeypatch):
    for page in DOCS.glob("*.md"):
        (tmp_path / page.name).write_text(page.read_text())
    fmt = tmp_path / "format.md"
    fmt.write_text(fmt.read_text().replace("| 24 | 8 | `data_size` |", "| 28 | 8 | `data_size` |"))
    packet_page = next(p for p in tmp_path.glob("*.md") if "| 56 | 8 | `a0_time_wall` |" in p.read_text())
    packet_page.write_text(packet_page.read_text().replace("| 56 | 8 | `a0_time_wall` |", "| 60 | 8 | `a0_time_wall` |"))
    monkeypatch.setattr(sys.modules[__name__], "DOCS", tmp_path)
    assert documented_frame_layout()["data_size_off"] == 28 != _core.FRAME_LAYOUT["data_size_off"]
    assert documented_packet_layout()["time_wall_off"] == 60 != _core.PACKET_LAYOUT["time_wall_off"]


@pytest.mark.parametrize("data_size, frames", [(100, 1), (1, 3), (100, 4), (1000, 2), (4000, 5), (0, 20)])
def test_arena_size_for_holds_exactly_that_many_frames(data_size, frames):
    size = _core.arena_size_for(data_size, frames)
    assert size == _core.HEADER_SIZE + frames * _core.frame_span(data_size)
    with _core.Arena.heap(size) as arena:
        t = _core.Transport(arena)
        for _ in range(frames):
            t.write(b"x" * data_size, evict=False, timeout=0)
        with pytest.raises(A0TimeoutError):  # full: one more would evict
            t.write(b"x" * data_size, evict=False, timeout=0)
    if size - 1 >= _core.MIN_ARENA_SIZE:
        with _core.Arena.heap(size - 1) as arena:
            t = _core.Transport(arena)
            with pytest.raises((A0TimeoutError, FrameTooLargeError)):
                for _ in range(frames):
                    t.write(b"x" * data_size, evict=False, timeout=0)


def test_frame_span_is_the_header_and_data_padded_to_the_alignment():
    align, header = _core.FRAME_LAYOUT["frame_align"], _core.FRAME_LAYOUT["frame_header_size"]
    for n in (0, 1, align - 1, align, align + 1, 1000):
        span = _core.frame_span(n)
        assert span % align == 0 and header + n <= span < header + n + align, n


@pytest.mark.parametrize("call, match", [
    (lambda: _core.frame_span(-1), "data_size must be >= 0"),
    (lambda: _core.frame_span(1.5), "data_size must be an integer"),
    (lambda: _core.arena_size_for(10, 0), "frames must be >= 1"),
    (lambda: _core.arena_size_for("1M"), "data_size must be an integer"),
])
def test_sizing_refuses_what_is_not_a_size(call, match):
    with pytest.raises(ArgumentError, match=match):
        call()


def test_frame_too_large_names_the_arena_size_that_holds_the_frame():
    with _core.Arena.heap(4096) as arena, pytest.raises(FrameTooLargeError) as caught:
        _core.Transport(arena).write(b"x" * 5000)
    needed = _core.arena_size_for(5000)
    assert f"size >= {needed} bytes for this frame" in str(caught.value)
    with _core.Arena.heap(needed) as roomy:
        _core.Transport(roomy).write(b"x" * 5000)
